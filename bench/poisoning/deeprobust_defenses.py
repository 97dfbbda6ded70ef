"""DeepRobust's defenses (GCN, GCN-SVD, GCN-Jaccard, R-GCN) trained on Pro-GNN's Cora (or
another Pro-GNN graph), clean and poisoned by Pro-GNN's published Metattack graphs.

Runs inside the peer virtual environment made by ``bench/poisoning/peers.sh`` (DeepRobust
from PyPI); it never imports grb_dist. ``compare_defenses.py`` starts it, one process per
model, so that the peak memory is the model's; it also runs on its own::

    PEER=${TMPDIR:-/tmp}/grb-dist-peers/deeprobust/bin/python
    $PEER bench/poisoning/deeprobust_defenses.py DATA --model GCN-SVD --k 15 --rates 0,0.05 --seeds 3

Graph: ``DATA/npz/<dataset>.npz``, its largest connected component as DeepRobust's
``Dataset`` and Pro-GNN build it (``deeprobust_metattack.load_lcc``), raw features as a scipy
CSR matrix, Pro-GNN's split (``DATA/prognn/splits``); at a rate above 0 the adjacency is
Pro-GNN's published ``DATA/prognn/meta/<dataset>_meta_adj_<rate>.npz`` (what DeepRobust's
``PrePtbDataset`` loads). Every model as DeepRobust's examples train it
(``examples/graph/test_gcn.py``, ``test_gcn_svd.py``, ``test_gcn_jaccard.py``,
``test_rgcn.py``): ``fit(features, adj, labels, idx_train, idx_val)``, 200 iterations, the
output of the epoch of the best validation loss *or* accuracy (DeepRobust's rule), then
``test``:

- ``GCN``: ``GCN(nhid=16, dropout=0.5, lr=0.01, weight_decay=5e-4)``;
- ``GCN-SVD``: ``GCNSVD(nhid=16)`` (the same defaults), ``fit(..., k=K)``;
- ``GCN-Jaccard``: ``GCNJaccard(nhid=16, binary_feature=True)``, ``fit(..., threshold=T)``;
- ``RGCN``: ``RGCN(nnodes, nhid=32)`` with its defaults (``gamma=1``, ``beta1=beta2=5e-4``,
  ``lr=0.01``, ``dropout=0.6``). Its ``test`` scores the output kept at the chosen epoch, a
  sampled one (its forward adds Gaussian noise in eval mode too).

``--speedups`` (off by default): DeepRobust 0.2.11 normalises a *dense* adjacency (GCN-SVD's
reconstruction, R-GCN's graph) as ``diag(r) @ (A + I) @ diag(r)``, two dense N x N x N
products: about a minute a training on Cora on one thread, most of GCN-SVD's time and of
R-GCN's (which does it twice). With ``--speedups`` the same products are computed
elementwise, ``r[:, None] * (A + I) * r[None, :]`` (``deeprobust_metattack.py``'s
``elementwise_normalization``, and the same for ``RGCN._normalize_adj``): a product with a
diagonal matrix has one non-zero term per entry, so the values are the same. No installed
file is changed; the report records the choice.

Seeds: ``random``, ``numpy`` and ``torch`` seeded with the run's seed before the model is
built. Measured per training: the wall time of ``fit`` and ``test`` (``time.perf_counter``),
the validation and test accuracy; per process: the peak resident memory
(``resource.getrusage``, imports and data included). One JSON object, the last line of
stdout; DeepRobust's own prints go to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers (standard library only)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, peak_rss_mib, timed  # noqa: E402
from deeprobust_metattack import elementwise_normalization, import_deeprobust, load_lcc  # noqa: E402

MODELS = ("GCN", "GCN-SVD", "GCN-Jaccard", "RGCN")


def rate_label(rate: float) -> str:
    return f"{rate:g}"


def load(data: Path, dataset: str):
    adj, features, labels = load_lcc(data / "npz" / f"{dataset}.npz")
    split = json.loads((data / "prognn" / "splits" / f"{dataset}_prognn_splits.json").read_text())
    idx = tuple(np.asarray(split[k], dtype=np.int64) for k in ("idx_train", "idx_val", "idx_test"))
    return adj, features, labels, idx


def perturbed(data: Path, dataset: str, rate: float, clean: sp.csr_matrix) -> sp.csr_matrix:
    if not rate:
        return clean
    adj = sp.load_npz(data / "prognn" / "meta" / f"{dataset}_meta_adj_{rate_label(rate)}.npz").tocsr()
    if adj.shape != clean.shape:
        sys.exit(f"the published {rate:g} graph is {adj.shape}, the component {clean.shape}")
    return adj.astype(np.float32)


def elementwise_rgcn_normalization() -> None:
    """``RGCN._normalize_adj`` without its two dense N x N x N products (``--speedups``)."""
    import torch
    from deeprobust.graph.defense import RGCN

    def _normalize_adj(self, adj, power=-1 / 2):
        A = adj + torch.eye(len(adj)).to(self.device)
        D_power = (A.sum(1)).pow(power)
        D_power[torch.isinf(D_power)] = 0.0
        return D_power[:, None] * A * D_power[None, :]  # = diag(d) @ A @ diag(d), as DeepRobust's

    RGCN._normalize_adj = _normalize_adj


def train_one(model: str, adj, features, labels, idx, seed: int, k: int, threshold: float) -> dict:
    import torch
    from deeprobust.graph.defense import GCN, GCNSVD, RGCN, GCNJaccard

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    idx_train, idx_val, idx_test = idx
    nclass = int(labels.max()) + 1

    def fit_and_test():
        if model == "GCN":
            m = GCN(nfeat=features.shape[1], nhid=16, nclass=nclass, device="cpu")
            m.fit(features, adj, labels, idx_train, idx_val)
        elif model == "GCN-SVD":
            m = GCNSVD(nfeat=features.shape[1], nhid=16, nclass=nclass, device="cpu")
            m.fit(features, adj, labels, idx_train, idx_val, k=k, verbose=False)
        elif model == "GCN-Jaccard":
            m = GCNJaccard(nfeat=features.shape[1], nhid=16, nclass=nclass, binary_feature=True, device="cpu")
            m.fit(features, adj, labels, idx_train, idx_val, threshold=threshold, verbose=False)
        else:
            m = RGCN(nnodes=adj.shape[0], nfeat=features.shape[1], nhid=32, nclass=nclass, device="cpu")
            m.fit(features, adj, labels, idx_train, idx_val, train_iters=200, verbose=False)
        m.eval()
        out = m.output if model == "RGCN" else m.predict()
        pred = out.argmax(1).cpu().numpy()
        return float((pred[idx_val] == labels[idx_val]).mean()), float((pred[idx_test] == labels[idx_test]).mean())

    with contextlib.redirect_stdout(sys.stderr):
        seconds, (val, test) = timed(fit_and_test)
    return {"seed": seed, "val": val, "test": test, "seconds": seconds}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, help="a folder with npz/ and prognn/ (the test-suite's layout)")
    ap.add_argument("--dataset", default="cora")
    ap.add_argument("--model", choices=MODELS, required=True)
    ap.add_argument("--rates", default="0,0.05,0.1", help="0 = the clean component")
    ap.add_argument("--seeds", type=int, default=3, help="seeds 0 .. N-1")
    ap.add_argument("--k", default="200", help="GCN-SVD's rank; a comma list trains each")
    ap.add_argument("--threshold", type=float, default=0.01, help="GCN-Jaccard's threshold")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--speedups", action="store_true",
                    help="normalise dense adjacencies elementwise (same values; docstring)")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    _, _, _, dr_version = import_deeprobust()
    if args.speedups:
        elementwise_normalization()
        elementwise_rgcn_normalization()
    clean, features, labels, idx = load(args.data, args.dataset)
    ranks = [int(k) for k in args.k.split(",")] if args.model == "GCN-SVD" else [None]
    runs = []
    for rate in (float(r) for r in args.rates.split(",")):
        adj = perturbed(args.data, args.dataset, rate, clean)
        for k in ranks:
            for seed in range(args.seeds):
                run = train_one(args.model, adj, features, labels, idx, seed, k or 0, args.threshold)
                runs.append({"rate": rate, "k": k, **run})
                print(f"{args.model} k={k} rate={rate:g} seed={seed}: test {run['test']:.4f} "
                      f"({run['seconds']:.1f} s)", file=sys.stderr, flush=True)
    report = {"tool": "deeprobust", "version": dr_version, "torch": torch.__version__, "threads": args.threads,
              "speedups": args.speedups, "model": args.model, "dataset": args.dataset, "runs": runs, "peak_rss_mib": peak_rss_mib()}
    emit(report)
    return report


if __name__ == "__main__":
    main()
