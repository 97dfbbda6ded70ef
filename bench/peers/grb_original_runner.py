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
from common import timed  # noqa: E402


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="directory holding graph.npz and surrogate.npz")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
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
