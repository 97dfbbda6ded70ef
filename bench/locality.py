"""Does a locality-improving node order speed the propagation, the sparse product every
large-graph stage is bound by?

    python bench/locality.py                                   # the aminer and flickr twins, cora-legacy
    python bench/locality.py --datasets csbm-grb-flickr --runs 9

For each graph, one propagation (the GCN-normalised adjacency with self-loops as a torch
CSR matrix times an N x 128 dense matrix, 2 threads) in three node orders: as loaded, a
random permutation (no locality at all) and reverse Cuthill-McKee (scipy's
``reverse_cuthill_mckee`` on the symmetric pattern), which numbers neighbours close to one
another so that the gathered rows of the dense matrix sit near each other in memory.
Orders are interleaved run by run; medians; the bandwidth (largest |i - j| over the
non-zeros, and its mean) says how local each order is. The order itself costs one RCM, also
timed.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
import torch

CORA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "grb-format" / "cora-legacy"
HIDDEN = 128


def csr(edge_index: np.ndarray, n: int, order: np.ndarray) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
    """The normalised adjacency with self-loops with node ``v`` renumbered ``rank[v]``."""
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    row = np.concatenate([rank[edge_index[0]], np.arange(n)])
    col = np.concatenate([rank[edge_index[1]], np.arange(n)])
    deg = np.bincount(row, minlength=n).astype(np.float32)
    val = (deg[row] * deg[col]) ** -0.5
    perm = np.lexsort((col, row))
    row, col, val = row[perm], col[perm], val[perm]
    crow = np.zeros(n + 1, dtype=np.int64)
    crow[1:] = np.cumsum(np.bincount(row, minlength=n))
    adj = torch.sparse_csr_tensor(torch.from_numpy(crow), torch.from_numpy(col), torch.from_numpy(val), (n, n))
    return adj, row, col


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default=f"csbm-grb-aminer,csbm-grb-flickr,{CORA}")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import scipy.sparse as sp
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    from grb_dist.datasets import load_dataset

    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
    print(f"one propagation, CSR x {HIDDEN} columns, {args.threads} threads, {args.runs} interleaved runs, medians\n")
    print("| graph | nodes | non-zeros | order | bandwidth max / mean | propagation s | vs as loaded |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for name in args.datasets.split(","):
        g = load_dataset(name)
        n, ei = g.num_nodes, np.asarray(g.edge_index)
        start = time.perf_counter()
        pattern = sp.csr_matrix((np.ones(ei.shape[1], dtype=np.int8), (ei[0], ei[1])), shape=(n, n))
        rcm = np.asarray(reverse_cuthill_mckee(pattern, symmetric_mode=True), dtype=np.int64)
        rcm_s = time.perf_counter() - start
        orders = {"as loaded": np.arange(n), "random": np.random.default_rng(0).permutation(n), "RCM": rcm}
        mats, widths = {}, {}
        for key, order in orders.items():
            adj, row, col = csr(ei, n, order)
            mats[key] = adj
            widths[key] = (int(np.abs(row - col).max()), float(np.abs(row - col).mean()))
        h = torch.randn(n, HIDDEN)
        times: dict[str, list[float]] = {key: [] for key in orders}
        for key in orders:
            torch.sparse.mm(mats[key], h)  # warm-up
        for _ in range(args.runs):
            for key, adj in mats.items():
                t = time.perf_counter()
                torch.sparse.mm(adj, h)
                times[key].append(time.perf_counter() - t)
        base = statistics.median(times["as loaded"])
        label = Path(str(name)).name
        for key in orders:
            med = statistics.median(times[key])
            print(f"| {label} | {n:,} | {mats[key].values().numel():,} | {key} | "
                  f"{widths[key][0]:,} / {widths[key][1]:,.0f} | {med:.4f} | {base / med:.2f}x |", flush=True)
        print(f"| {label} | | | RCM itself | | {rcm_s:.2f} (once) | |", flush=True)


if __name__ == "__main__":
    main()
