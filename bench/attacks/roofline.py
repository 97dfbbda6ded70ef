"""Each large-graph stage's time against this machine's own limits on the graph's own shape.

    python bench/attacks/roofline.py                                # csbm-grb-aminer (about 12 minutes on 2 cores)
    python bench/attacks/roofline.py --dataset csbm-grb-flickr --stages fgsm,prbcd
    python bench/attacks/roofline.py --dataset csbm --threads 2     # a quick check
    python bench/attacks/roofline.py --stages gnnguard,gcnsvd_sparse,rgcn --threads 1   # the robust models' epochs

First the machine: a GEMM at the graph's shape (N x 128 by 128 x 128, GFLOP/s) and one
propagation, the GCN-normalised adjacency with self-loops as a torch CSR matrix times an
N x 128 dense matrix (``P``, seconds; GB/s counting each non-zero's value, column index
and gathered row once). Then each stage, in its own process (peak memory = that process's
``ru_maxrss``, with the graph and torch), next to a bound made of those measured pieces:

| stage | what is timed | bound |
|---|---|---|
| fgsm | one FGSM step, GRB's grb-aminer budget (1500 x 100), GCN 3 x 128 (random weights) | 4 P |
| prbcd | one PR-BCD step, 5% budget, the job's GCN (difference of 2 steps and 1) | forward + backward over A + block: 6 P x (nnz + 2 B) / nnz + 9 G |
| nea, stack | the whole attack, 5% budget | 10 P |
| gcn, gnnguard, rgcn | one epoch of a training (with its validation pass; the difference of 3 epochs and 1), the job's architectures | gcn: 6 P + 9 G; the robust ones: 3 x the measured GCN epoch |

Any other defense of the registry is a training stage too (``--stages gcnsvd_sparse``: its epoch
and peak, without a bound; the dense ``gcnsvd`` refuses the large twins).

Training runs under grb-dist's allocator policy for training (``GRB_DIST_ALLOCATOR``,
printed in the header; ``cache`` by default: freed blocks are reused from epoch to epoch),
attacks under glibc's, as in a sweep; every process gives the heap back after loading the
graph, as a task starts. The load's own peak is printed too: a stage's peak cannot be
read below it.

The multiple is time / bound: 1 is the machine's limit for that much work, the issue's
targets are PR-BCD within 3x of an FGSM step, NEA/STACK within 10 propagations, robust
epochs within 3x of a GCN epoch and under 4 GB. Attack and model weights are random where
the cost does not depend on them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import emit, median_seconds, peak_rss_gib, run_child, timed  # noqa: E402

from grb_dist.core import allocator

STAGES = ("fgsm", "prbcd", "nea", "stack", "gcn", "gnnguard", "rgcn")
HIDDEN = 128


def machine(dataset: str) -> dict:
    from grb_dist.datasets import load_dataset

    g = load_dataset(dataset)
    load_peak = peak_rss_gib()
    allocator.release()
    n = g.num_nodes
    ei = torch.as_tensor(g.edge_index)
    loops = torch.arange(n)
    row, col = torch.cat([ei[0], loops]), torch.cat([ei[1], loops])
    deg = torch.bincount(row, minlength=n).float()
    val = deg[row].rsqrt() * deg[col].rsqrt()
    order = torch.argsort(row * n + col)
    row, col, val = row[order], col[order], val[order]
    crow = torch.zeros(n + 1, dtype=torch.long)
    crow[1:] = torch.cumsum(torch.bincount(row, minlength=n), 0)
    adj = torch.sparse_csr_tensor(crow, col, val, (n, n))
    h = torch.randn(n, HIDDEN)
    w = torch.randn(HIDDEN, HIDDEN)
    p = median_seconds(lambda: torch.sparse.mm(adj, h))
    gemm = median_seconds(lambda: h @ w)
    nnz = int(val.numel())
    return {"dataset": dataset, "load_peak_gib": load_peak, "policy": allocator.training_policy(),
            "nodes": n, "edges": g.num_edges, "nnz": nnz, "P": p, "G": gemm,
            "gflops": 2 * n * HIDDEN * HIDDEN / gemm / 1e9,
            "spmm_gbs": (nnz * (4 + 8) + nnz * HIDDEN * 4 + n * HIDDEN * 4) / p / 1e9}


def stage(name: str, dataset: str) -> dict:
    if name in ("prbcd", "nea", "stack"):  # modification_scale.py's case (PR-BCD: 2 steps and 1)
        from modification_scale import child  # this folder: the script that times these attacks at scale

        r = child(dataset, name, 2, torch.get_num_threads())
        return {"stage": name, "seconds": r["seconds_2"] - r["seconds_1"] if name == "prbcd" else r["seconds_total"],
                "budget": r["budget"], "peak_gib": r["peak_gib"], **({"block": r["block"]} if name == "prbcd" else {})}
    from grb_dist.attacks import build_attack
    from grb_dist.datasets import load_dataset
    from grb_dist.defenses import resolve_params
    from grb_dist.models.grammar import build_model
    from grb_dist.sweep.job import default_job_path, load_job

    spec = load_job(default_job_path(dataset))
    g = load_dataset(dataset, normalize=spec.normalize, seed=spec.seed)
    allocator.release()
    targets = g.targets("full")
    torch.manual_seed(0)
    out: dict = {"stage": name}
    if name == "fgsm":
        model = build_model("gcn", g.num_features, g.num_classes, {"hidden_sizes": [HIDDEN] * 3}).eval()
        params = {**spec.attack_params("fgsm", "full", 0), "feat_lim_min": None, "feat_lim_max": None}
        seconds = {steps: timed(build_attack("fgsm", {**params, "steps": steps}).attack, g, model, targets)[0]
                   for steps in (0, 2)}
        out.update(seconds=(seconds[2] - seconds[0]) / 2, setup_s=seconds[0],
                   budget=f"{params['n_inject']} x {params['edges_per_node']}")
    else:
        from grb_dist.defenses import train_defense
        from grb_dist.models.train import TrainConfig

        params, _ = resolve_params(name, spec.models)
        # an epoch of a long training: the difference of 3 epochs and 1
        seconds = {epochs: timed(train_defense, name, g, params, TrainConfig(epochs=epochs, patience=epochs, seed=0))[0]
                   for epochs in (1, 3)}
        out.update(seconds=(seconds[3] - seconds[1]) / 2, first_s=seconds[1], params=params)
    out["peak_gib"] = peak_rss_gib()
    return out


def bound(name: str, m: dict, results: dict) -> tuple[float | None, str]:
    p, g = m["P"], m["G"]
    if name == "fgsm":
        return 4 * p, "4 P"
    if name == "prbcd" and "block" in results.get("prbcd", {}):
        scale = (m["nnz"] + 2 * results["prbcd"]["block"]) / m["nnz"]
        return 6 * p * scale + 9 * g, f"6 P x {scale:.2f} + 9 G"
    if name in ("nea", "stack"):
        return 10 * p, "10 P"
    if name == "gcn":
        return 6 * p + 9 * g, "6 P + 9 G"
    if name in ("gnnguard", "rgcn") and "seconds" in results.get("gcn", {}):
        return 3 * results["gcn"]["seconds"], "3 x GCN epoch"
    return None, ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="csbm-grb-aminer")
    ap.add_argument("--stages", default=",".join(STAGES))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.child:
        kind, name = args.child
        emit(machine(args.dataset) if kind == "machine" else stage(name, args.dataset))
        return
    print("command:", " ".join(["python", *sys.argv]), flush=True)

    def measure(kind: str, name: str = "-") -> dict:
        return run_child([__file__, "--dataset", args.dataset, "--threads", str(args.threads), "--child", kind, name]) or {}

    m = measure("machine")
    if not m:
        raise SystemExit(1)
    print(f"\n{m['dataset']}: {m['nodes']:,} nodes, {m['edges']:,} edges, {m['nnz']:,} non-zeros with self-loops; "
          f"{args.threads} threads; allocator policy {m['policy']}; loading the graph peaks at {m['load_peak_gib']:.2f} GiB")
    print(f"GEMM {m['nodes']:,} x {HIDDEN} x {HIDDEN}: G = {m['G']:.3f} s ({m['gflops']:.1f} GFLOP/s); "
          f"propagation (CSR x {HIDDEN} columns): P = {m['P']:.3f} s ({m['spmm_gbs']:.1f} GB/s)\n", flush=True)
    results: dict[str, dict] = {}
    for name in args.stages.split(","):
        results[name] = measure("stage", name)
        print(json.dumps(results[name]), flush=True)
    print("\n| stage | seconds | bound | bound s | multiple | peak GiB |\n|---|---:|---|---:|---:|---:|")
    for name, r in results.items():
        if "seconds" not in r:
            print(f"| {name} | failed | | | | |")
            continue
        b, what = bound(name, m, results)
        multiple = f"{r['seconds'] / b:.1f}x" if b else ""
        print(f"| {name} | {r['seconds']:.3f} | {what} | {b:.3f} | {multiple} | {r['peak_gib']:.2f} |" if b else
              f"| {name} | {r['seconds']:.3f} | | | | {r['peak_gib']:.2f} |")


if __name__ == "__main__":
    main()
