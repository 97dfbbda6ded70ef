"""Runner for the original GRB code (PyPI ``grb==0.1.0``), driven by ``bench/peers/compare_grb.py``.

It runs with the Python of the throw-away GRB virtual environment, imports only the
original package, torch, numpy, scipy and the standard-library helpers of ``bench/common.py``
(never grb_dist), and only calls the original's code. Protocol: one JSON request per line on
stdin, one JSON reply per line on the protocol channel (the process's original stdout;
everything the original prints goes to stderr). Requests:

    {"cmd": "attack", "attack": "fgsm", "steps": 200, "step_size": 0.01, "n_inject": 60,
     "edges_per_node": 20, "sequential_step": 0.2, "seed": 0, "out": "inj.npz"}
    {"cmd": "quit"}

Inputs (written by compare_grb.py, no pickle):
    graph.npz      features (N x D float32), edge_index (2 x E int64, both directions),
                   targets (T int64)
    surrogate.npz  weight_<i> (out x in), bias_<i> (out) of each GCN layer, n_layers

The surrogate is grb-dist's trained GCN. Its function is ``relu(A (H W^T) + b)`` per layer
(torch_geometric's GCNConv adds the bias after propagation), while the original's GCNConv
adds it before (``A (H W^T + b)``). So each layer here is the original's own
``grb.model.torch.gcn.GCNConv`` (Linear, then ``torch.spmm`` with the normalised
adjacency) carrying the trained weight with a zero Linear bias, followed by the bias and
the ReLU: the same function as grb-dist's surrogate, at the cost of the original layer.

Each attack reply gives ``seconds``: wall time of the original's ``attack(model, adj,
features, target_mask, adj_norm_func)`` call alone (adjacency normalisation, clean
predictions, edge injection, feature optimisation), with the adjacency as scipy CSR and the
features as a torch tensor already in memory. The injection is saved as ``features``
(n_inject x D float32) and ``edges`` (2 x M int64, row 0 the injected node, one direction
per undirected edge, duplicates kept as the original produced them).

GNNGuard (``--gnnguard-seed S``, driven by ``bench/peers/compare_gnnguard.py``; no request
loop): one training of the original's ``grb.defense.gnnguard.GCNGuard`` (seed ``S``) on the
graph of ``graph.npz`` (which then also holds ``labels`` and ``split_train`` /
``split_val``), inductively, by :func:`train_gnnguard` below (the loop of grb-dist's trainer,
see there), then its predictions on the clean graph and on ``attacked.npz`` (``features``,
``edge_index`` of the graph with an injection applied); one JSON line on stdout with the
training's seconds, the epochs, the peak RSS and, per layer, how many injected edges (both
directions) the guard keeps on the attacked graph (after ``GNNGUARD-RESULT ``), the
predictions in ``--out``. The module imports
``dgl`` at its top for its GATGuard, which is not installed (no wheel for this torch): an
empty stand-in module is registered under that name before the import, in this process only
(GCNGuard never touches it), and said so on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F

from grb.attack.fgsm import FGSM
from grb.attack.pgd import PGD
from grb.attack.speit import SPEIT
from grb.attack.tdgia import TDGIA
from grb.model.torch.gcn import GCNConv
from grb.utils.normalize import GCNAdjNorm
from grb.utils.utils import adj_preprocess

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers (standard library only)
from common import emit, peak_rss_mib, timed  # noqa: E402


class SurrogateGCN(torch.nn.Module):
    """The original's GCNConv layers with grb-dist's trained weights (bias after propagation)."""

    def __init__(self, weights: list[np.ndarray], biases: list[np.ndarray]):
        super().__init__()
        self.layers = torch.nn.ModuleList()
        self.biases = torch.nn.ParameterList()
        for w, b in zip(weights, biases):
            layer = GCNConv(w.shape[1], w.shape[0], activation=None)
            with torch.no_grad():
                layer.linear.weight.copy_(torch.from_numpy(w))
                layer.linear.bias.zero_()
            self.layers.append(layer)
            self.biases.append(torch.nn.Parameter(torch.from_numpy(b).clone()))

    @property
    def model_type(self) -> str:  # what the original's attacks ask a model for
        return "torch"

    def forward(self, x, adj, dropout=0.0):
        last = len(self.layers) - 1
        for i, (layer, b) in enumerate(zip(self.layers, self.biases)):
            x = layer(x, adj) + b
            if i < last:
                x = torch.relu(x)
        return x


def load(data_dir: str):
    g = np.load(os.path.join(data_dir, "graph.npz"), allow_pickle=False)
    feats = g["features"]
    n = feats.shape[0]
    ei = g["edge_index"]
    adj = sp.csr_matrix((np.ones(ei.shape[1], dtype=np.float32), (ei[0], ei[1])), shape=(n, n))
    mask = torch.zeros(n, dtype=torch.bool)
    mask[torch.from_numpy(g["targets"])] = True
    s = np.load(os.path.join(data_dir, "surrogate.npz"), allow_pickle=False)
    k = int(s["n_layers"])
    model = SurrogateGCN([s[f"weight_{i}"] for i in range(k)], [s[f"bias_{i}"] for i in range(k)])
    model.eval()
    return adj, torch.from_numpy(feats), mask, model


def build(req: dict, feat_min: float, feat_max: float):
    common = dict(n_epoch=req["steps"], n_inject_max=req["n_inject"], n_edge_max=req["edges_per_node"],
                  feat_lim_min=feat_min, feat_lim_max=feat_max, device="cpu", verbose=False)
    name = req["attack"]
    # 0.1.0's default loss is F.nll_loss applied to logits (a weaker objective than the
    # cross-entropy grb-dist optimises): pass cross-entropy explicitly.
    if name == "fgsm":
        return FGSM(epsilon=req["step_size"], loss=F.cross_entropy, **common)
    if name == "pgd":
        return PGD(epsilon=req["step_size"], loss=F.cross_entropy, **common)
    if name == "speit":
        return SPEIT(lr=req["step_size"], loss=F.cross_entropy, inject_mode="random", **common)
    if name == "tdgia":
        # inject_mode defaults to "random" (random edges); "tdgia" is its topological selection.
        return TDGIA(lr=req["step_size"], inject_mode="tdgia", sequential_step=req["sequential_step"],
                     opt="sin", **common)
    raise ValueError(f"unknown attack {name!r}")


def injection_arrays(adj_attack, feats_attack, n: int) -> tuple[np.ndarray, np.ndarray]:
    coo = sp.coo_matrix(adj_attack)
    row, col = coo.row.astype(np.int64), coo.col.astype(np.int64)
    keep = (row >= n) & ((col < n) | (row < col)) & (coo.data != 0)
    edges = np.stack([row[keep], col[keep]])
    feats = feats_attack.detach().cpu().numpy().astype(np.float32)
    return np.ascontiguousarray(feats), np.ascontiguousarray(edges)


RESULT_MARKER = "GNNGUARD-RESULT "


def import_gcnguard():
    """``grb.defense.gnnguard.GCNGuard``, with an empty stand-in for the ``dgl`` it imports at
    the top of its module (for GATGuard only; not installed here)."""
    import types

    if "dgl" not in sys.modules:
        try:
            import dgl  # noqa: F401
        except ImportError:
            dgl = types.ModuleType("dgl")
            dgl.nn = types.ModuleType("dgl.nn")
            dgl.nn.pytorch = types.ModuleType("dgl.nn.pytorch")
            dgl.nn.pytorch.GATConv = None
            sys.modules.update({"dgl": dgl, "dgl.nn": dgl.nn, "dgl.nn.pytorch": dgl.nn.pytorch})
            print("grb_original_runner: dgl is not installed; an empty stand-in module is registered under that "
                  "name (only GATGuard uses it) so that grb.defense.gnnguard imports", file=sys.stderr)
    from grb.defense.gnnguard import GCNGuard

    return GCNGuard


def train_gnnguard(model, x_tr, adj_tr, y_tr, x_val, adj_val, val_idx, y_val, lr, weight_decay, epochs, patience,
                   dropout):
    """The loop of grb-dist's trainer (``grb_dist.models.train.train_model``) on the original's
    model: Adam, cross-entropy on the training subgraph's nodes with dropout, then the
    validation loss on the training + validation subgraph without dropout; the state of the
    lowest validation loss is kept, stopping after ``patience`` epochs without a lower one.
    (The original's own ``Trainer`` takes its ``Dataset`` object and runs the validation
    forward with dropout on.) Returns (epochs run, best epoch)."""
    import copy

    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    best, best_state, epoch = (float("inf"), -1), None, 0
    for epoch in range(epochs):
        model.train()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x_tr, adj_tr, dropout=dropout), y_tr)
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            val_loss = float(F.cross_entropy(model(x_val, adj_val, dropout=0.0)[val_idx], y_val))
        if val_loss < best[0]:
            best, best_state = (val_loss, epoch), copy.deepcopy(model.state_dict())
        elif epoch - best[1] >= patience:
            break
    model.load_state_dict(best_state)
    model.eval()
    return epoch + 1, best[1]


def gnnguard_main(args) -> None:
    """One GCNGuard training (``--gnnguard-seed``) and its predictions; one JSON line."""
    torch.set_num_threads(args.threads)
    gcnguard = import_gcnguard()
    g = np.load(os.path.join(args.data, "graph.npz"), allow_pickle=False)
    feats, ei, labels = torch.from_numpy(g["features"]), g["edge_index"], torch.from_numpy(g["labels"]).long()
    n = feats.shape[0]
    adj = sp.csr_matrix((np.ones(ei.shape[1], dtype=np.float32), (ei[0], ei[1])), shape=(n, n))
    train_mask, tv_mask = torch.zeros(n, dtype=torch.bool), torch.zeros(n, dtype=torch.bool)
    train_mask[torch.from_numpy(g["split_train"])] = True
    tv_mask[torch.from_numpy(np.concatenate([g["split_train"], g["split_val"]]))] = True
    val_idx = torch.where(~train_mask[tv_mask])[0]  # the validation nodes inside the train + val subgraph
    # numpy masks: current SciPy cannot index with a torch bool tensor (what the original's Trainer passes)
    adj_tr = adj_preprocess(adj=adj, adj_norm_func=GCNAdjNorm, mask=train_mask.numpy(), model_type="torch")
    adj_val = adj_preprocess(adj=adj, adj_norm_func=GCNAdjNorm, mask=tv_mask.numpy(), model_type="torch")
    random.seed(args.gnnguard_seed)
    np.random.seed(args.gnnguard_seed)
    torch.manual_seed(args.gnnguard_seed)
    model = gcnguard(feats.shape[1], int(labels.max()) + 1, args.hidden, activation=F.relu, dropout=True,
                     drop=False, attention=True)
    rss_before = peak_rss_mib()
    seconds, (epochs_run, best_epoch) = timed(
        train_gnnguard, model, feats[train_mask], adj_tr, labels[train_mask], feats[tv_mask], adj_val, val_idx,
        labels[tv_mask][val_idx], args.lr, args.weight_decay, args.epochs, args.patience, args.dropout)
    preds, kept = {}, []
    plain_att_coef = model.att_coef

    def counting_att_coef(x, a):  # the injected edges (not self-loops) each layer keeps
        out = plain_att_coef(x, a)
        i = out._indices()
        kept.append(int(((i[0] != i[1]) & ((i[0] >= n) | (i[1] >= n))).sum()))
        return out

    with torch.no_grad():
        for key, path in (("clean", None), ("attacked", os.path.join(args.data, "attacked.npz"))):
            model.att_coef = counting_att_coef if key == "attacked" else plain_att_coef
            if path is None:
                x, a = feats, adj
            else:
                z = np.load(path, allow_pickle=False)
                x, e = torch.from_numpy(z["features"]), z["edge_index"]
                a = sp.csr_matrix((np.ones(e.shape[1], dtype=np.float32), (e[0], e[1])), shape=(x.shape[0],) * 2)
            a_t = adj_preprocess(adj=a, adj_norm_func=GCNAdjNorm, model_type="torch")
            preds[key] = model(x, a_t, dropout=0.0).argmax(1).numpy()
    np.savez(args.out, **preds)
    emit({"seconds": seconds, "epochs_run": epochs_run, "best_epoch": best_epoch, "peak_rss_mib": peak_rss_mib(),
          "injected_edges_kept": kept,
          "rss_before_training_mib": rss_before, "torch": torch.__version__, "threads": torch.get_num_threads()},
         RESULT_MARKER)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="directory holding graph.npz and surrogate.npz")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--gnnguard-seed", type=int, default=None, help="train the original's GCNGuard once and stop")
    ap.add_argument("--out", help="GNNGuard: where its predictions go (.npz)")
    ap.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--epochs", type=int, default=400)
    ap.add_argument("--patience", type=int, default=50)
    args = ap.parse_args()
    if args.gnnguard_seed is not None:
        gnnguard_main(args)
        return
    proto = os.fdopen(os.dup(1), "w")
    sys.stdout = sys.stderr  # the original prints progress; keep the protocol channel clean
    torch.set_num_threads(args.threads)
    adj, features, mask, model = load(args.data)
    n = features.shape[0]
    feat_min, feat_max = float(features.min()), float(features.max())
    with torch.no_grad():
        logits = model(features, adj_preprocess(adj=adj, adj_norm_func=GCNAdjNorm, model_type="torch"))
    np.savez(os.path.join(args.data, "original_clean_logits.npz"), logits=logits.numpy())
    import grb
    import scipy
    proto.write(json.dumps({"ready": True, "grb": grb.__version__, "torch": torch.__version__,
                            "numpy": np.__version__, "scipy": scipy.__version__,
                            "threads": torch.get_num_threads()}) + "\n")
    proto.flush()
    for line in sys.stdin:
        req = json.loads(line)
        if req["cmd"] == "quit":
            break
        random.seed(req["seed"])
        np.random.seed(req["seed"])
        torch.manual_seed(req["seed"])
        attack = build(req, feat_min, feat_max)
        seconds, (adj_attack, feats_attack) = timed(attack.attack, model, adj, features, mask, GCNAdjNorm)
        inj_feats, inj_edges = injection_arrays(adj_attack, feats_attack, n)
        np.savez(req["out"], features=inj_feats, edges=inj_edges)
        proto.write(json.dumps({"seconds": seconds}) + "\n")
        proto.flush()


if __name__ == "__main__":
    main()
