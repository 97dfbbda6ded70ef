"""Wall time of a semantics study with 1 and 2 Ray CPUs (local Ray, fresh output each).

The study is the shipped CSBM job reduced by the flags (the full one: all 8 K, 10 graphs,
11 models, l2-weak and Nettack, 200 nodes per graph, is hours on two cores). Each run
starts its own local Ray (the start-up is included in the time).

Usage: ``python bench/semantics_bench.py --k 0.5,1.5 --graphs 1 --nodes 50 \
    --models gcn,gcn_lp,lp,mlp --attacks l2-weak,nettack``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from grb_dist.semantics.study import load_spec, run_study, units

JOB = Path(__file__).resolve().parents[1] / "grb_dist" / "jobs" / "studies" / "over-robustness-csbm.yaml"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", default="0.5,1.5")
    p.add_argument("--graphs", type=int, default=1)
    p.add_argument("--nodes", type=int, default=50)
    p.add_argument("--models", default="gcn,gcn_lp,lp,mlp")
    p.add_argument("--attacks", default="l2-weak,nettack")
    p.add_argument("--budgets", default="1,2,3,4,deg,deg+2")
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--cpus", default="1,2")
    args = p.parse_args()
    base = load_spec(JOB, check=False)
    models = {m: base.models.get(m, {}) for m in args.models.split(",")}
    spec = load_spec(JOB, K=[float(k) for k in args.k.split(",")], graphs=args.graphs, nodes=args.nodes,
                     models=models, attacks=args.attacks.split(","), budgets=args.budgets.split(","),
                     train={**dict(base.train), "epochs": args.epochs, "patience": 50})
    print(f"{len(units(spec))} units: K={args.k}, {args.graphs} graph(s), {args.nodes} nodes, "
          f"models {args.models}, attacks {args.attacks}, budgets {args.budgets}, {args.epochs} epochs")
    for cpus in (int(c) for c in args.cpus.split(",")):
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            run_study(spec, out, num_cpus=cpus)
            print(f"{cpus} Ray CPU(s): {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
