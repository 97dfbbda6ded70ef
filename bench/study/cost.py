"""Wall time and peak memory of the CSBM over-robustness study with 1 and 2 Ray CPUs.

The study is the shipped ``over-robustness-csbm`` job with the settings of the issue: all 8
K, every model of the job (GCN, SGC, GAT, GATv2, APPNP, GraphSAGE, MLP, LP and the
Model+LP variants: 12 models), l2-weak and Nettack, 200 new nodes per graph, the job's
budgets (up to ``inf``, capped at 64 edges). ``--graphs`` sets how many of the 10 graphs per
K are run; units are independent (one per K, graph, model, attack), so the time of the full
study is the measured time times ``10 / graphs`` (printed as an extrapolation, labelled so).

Each run starts its own local Ray with ``num_cpus`` CPUs in a fresh output directory (the
start-up is included). Peak memory is the largest sum of the resident set sizes of this
process and all its descendants (the Ray processes and workers), sampled every 0.25 s.

Usage: ``python bench/study/cost.py --graphs 1 --cpus 1,2``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
from pathlib import Path

import psutil

from grb_dist.semantics.run import run_study
from grb_dist.semantics.spec import load_spec, units

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import ROOT, timed  # noqa: E402

JOB = ROOT / "grb_dist" / "jobs" / "studies" / "over-robustness-csbm.yaml"


class PeakRSS:
    """Largest summed RSS of this process and its descendants while in the ``with`` block."""

    def __init__(self, every: float = 0.25):
        self.every, self.peak, self._stop = every, 0, threading.Event()

    def _sample(self) -> None:
        me = psutil.Process(os.getpid())
        while not self._stop.is_set():
            total = 0
            for proc in [me, *me.children(recursive=True)]:
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self._stop.wait(self.every)

    def __enter__(self) -> "PeakRSS":
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", default=None, help="K values (default: the job's 8)")
    p.add_argument("--graphs", type=int, default=1, help="graphs per K actually run (the study has 10)")
    p.add_argument("--nodes", type=int, default=200)
    p.add_argument("--models", default=None, help="default: every model of the job")
    p.add_argument("--attacks", default="l2-weak,nettack")
    p.add_argument("--cpus", default="1,2")
    args = p.parse_args()
    base = load_spec(JOB, check=False)
    overrides = {"graphs": args.graphs, "nodes": args.nodes, "attacks": args.attacks.split(",")}
    if args.k:
        overrides["K"] = [float(k) for k in args.k.split(",")]
    if args.models:
        overrides["models"] = {m: base.models.get(m, {}) for m in args.models.split(",")}
    spec = load_spec(JOB, **overrides)
    n_units = len(units(spec))
    scale = 10 / args.graphs
    print(f"{n_units} units: K={','.join(f'{k:g}' for k in spec.K)}, {spec.graphs} graph(s) per K, {spec.nodes} nodes, "
          f"{len(spec.models)} models ({', '.join(spec.models)}), attacks {', '.join(spec.attacks)}, "
          f"budgets {', '.join(spec.budgets)} (max {spec.max_steps} edges), {spec.train.get('epochs')} epochs max; "
          f"{os.cpu_count()} cores here", flush=True)
    for cpus in (int(c) for c in args.cpus.split(",")):
        with tempfile.TemporaryDirectory() as out, PeakRSS() as mem:
            wall, _ = timed(run_study, spec, out, num_cpus=cpus)
        line = f"{cpus} Ray CPU(s): {wall:.0f} s wall, peak RSS {mem.peak / 2**30:.2f} GiB"
        if scale != 1:
            line += f"; full study (10 graphs per K) extrapolated: {wall * scale / 60:.0f} min"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
