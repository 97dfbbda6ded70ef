"""Training cost of the scalable robust models at the grb-aminer shape, on CPU.

Method: each case runs in its own subprocess (so that ``ru_maxrss`` is that case's peak):
load ``csbm-grb-aminer`` (659,574 nodes, 2.88M edges, 100 features, 18 classes; a CSBM twin
of grb-aminer with the GRB split), build the defense with the hyper-parameters of
``grb_dist/jobs/grb-aminer.yaml``, and run the inductive trainer for ``--epochs`` epochs (each epoch:
one training step on the subgraph induced by the training nodes and one validation pass on
the train+val subgraph). Reported: seconds per epoch (total / epochs, after loading), the
peak resident memory of the subprocess (``resource.getrusage(RUSAGE_SELF).ru_maxrss``,
dataset loading included) and of the loading alone. Fails when a case exceeds 12 GB.

    python bench/bench_defenses.py [--epochs 2] [--threads 1] [--cases gnnguard,gcnsvd,rgcn]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

LIMIT_GB = 12.0
ROOT = Path(__file__).resolve().parents[1]


def run_case(name: str, epochs: int, threads: int) -> dict:
    import torch
    import yaml

    from grb_dist.datasets import load_dataset
    from grb_dist.defenses import resolve_params, train_defense
    from grb_dist.models.train import TrainConfig

    torch.set_num_threads(threads)
    job = yaml.safe_load((ROOT / "grb_dist" / "jobs" / "grb-aminer.yaml").read_text())
    t = time.perf_counter()
    graph = load_dataset("csbm-grb-aminer")
    load_s = time.perf_counter() - t
    load_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    params, overrides = resolve_params(name, job["models"])
    cfg = TrainConfig(**{**job["train"], **overrides, "epochs": epochs, "patience": epochs + 1, "seed": 0})
    t = time.perf_counter()
    result = train_defense(name, graph, params, cfg)
    secs = time.perf_counter() - t
    return {
        "case": name,
        "params": params,
        "epochs": result.epochs_run,
        "s_per_epoch": secs / result.epochs_run,
        "load_s": load_s,
        "peak_gb_after_load": load_rss,
        "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2,
        "nodes": graph.num_nodes,
        "edges": graph.num_edges,
        "train_nodes": int(graph.split["train"].size),
        "threads": threads,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cases", default="gnnguard,gcnsvd,rgcn")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.epochs, args.threads)))
        return 0
    print(f"$ {' '.join([Path(sys.executable).name, *sys.argv])}")
    print("| case | hidden | s / epoch | peak RSS GB (load only) | peak RSS GB (case) |")
    print("|---|---|---|---|---|")
    ok = True
    for name in args.cases.split(","):
        cmd = [sys.executable, __file__, "--case", name, "--epochs", str(args.epochs), "--threads", str(args.threads)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"| {name} | failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode} | | | |")
            ok = False
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        ok &= r["peak_gb"] <= LIMIT_GB
        print(f"| {name} | {r['params'].get('hidden_sizes')} | {r['s_per_epoch']:.1f} | "
              f"{r['peak_gb_after_load']:.2f} | {r['peak_gb']:.2f} |", flush=True)
    print(f"# csbm-grb-aminer shape, {args.epochs} epochs each, {args.threads} torch thread(s), CPU; limit {LIMIT_GB} GB")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
