"""Sweep benchmark: throughput with 1 and 2 Ray CPUs, and peak memory on a large graph.

Run from the repository root::

    python bench/sweep/sweep.py            # all cases
    python bench/sweep/sweep.py --quick    # default job narrowed (fast check)

Method:

* throughput: the default job (``grb_dist/jobs/csbm.yaml``, as ``grb-dist sweep`` runs it) in a fresh
  run directory on a fresh local Ray with ``num_cpus`` = 1 and then 2 (each case in its own
  process). Cells per second = score cells written / wall time of ``run_sweep`` (training,
  attacks and scoring; Ray start-up and dataset generation excluded).
* memory: ``csbm-grb-aminer`` (659,574 nodes, 2.9M edges, 100 features) with one attack,
  few steps, two defenses, one difficulty, short training. Driver peak = ``ru_maxrss`` of
  the driver process (dataset generation included); object store peak = the largest
  "Plasma memory usage" reported by Ray's memory summary, sampled every 0.5 s.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import emit, peak_rss_mib, run_child, timed  # noqa: E402


def _job(name: str, quick: bool, memory: bool):
    from grb_dist.sweep.job import default_job_path, load_job, parse_job
    from grb_dist.sweep.overrides import apply_overrides

    spec = load_job(default_job_path(name))
    if memory:
        data = spec.to_dict()
        data["train"] = {**data["train"], "epochs": 10, "patience": 5}
        data["repeats"] = 1
        spec = apply_overrides(parse_job(data), attacks="fgsm", defenses="gcn,mlp", difficulties="hard", steps=5)
    elif quick:
        spec = apply_overrides(spec, attacks="rnd,fgsm", defenses="gcn,mlp,sgc", difficulties="easy,full", repeats=1)
    return spec


def _plasma_sampler(stop: threading.Event, peak: list[float]) -> None:
    from ray._private.internal_api import memory_summary

    pattern = re.compile(r"Plasma memory usage (\d+(?:\.\d+)?) MiB")
    while not stop.is_set():
        try:
            m = pattern.search(memory_summary(stats_only=True))
            if m:
                peak[0] = max(peak[0], float(m.group(1)))
        except Exception:  # noqa: BLE001 - sampling is best effort
            pass
        stop.wait(0.5)


def sweep_case(case: str, num_cpus: int, quick: bool) -> dict:
    import ray

    from grb_dist.cluster.ray_edge import connect, disconnect
    from grb_dist.sweep.runner import run_sweep
    from grb_dist.cluster.settings import Connection, RaySettings
    from grb_dist.sweep.session import lock_run, open_store, prepare

    memory = case == "memory"
    spec = _job("csbm-grb-aminer" if memory else "csbm", quick, memory)
    with tempfile.TemporaryDirectory() as tmp:
        load_s, prepared = timed(prepare, spec, out=Path(tmp) / "run")
        settings = RaySettings(Connection(num_cpus=num_cpus, include_dashboard=False))
        ctx = connect(settings)
        stop, peak = threading.Event(), [0.0]
        sampler = threading.Thread(target=_plasma_sampler, args=(stop, peak), daemon=True)
        sampler.start()
        lock, prepared = lock_run(prepared)
        try:
            store = open_store(prepared, lock)
            seconds, summary = timed(run_sweep, prepared.cells, prepared.graph, store, settings)
        finally:
            lock.release()
            stop.set()
            sampler.join()
            disconnect(ctx)
        del ray
    return {
        "case": case, "dataset": spec.dataset, "num_cpus": num_cpus, "cells": summary.computed,
        "failures": summary.failures, "seconds": round(seconds, 2), "cells_per_s": round(summary.computed / seconds, 3),
        "load_seconds": round(load_s, 2), "nodes": prepared.graph.num_nodes,
        "driver_peak_mib": round(peak_rss_mib(), 1),
        "object_store_peak_mib": peak[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", choices=["throughput", "memory"], help="run one case in this process")
    ap.add_argument("--num-cpus", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="narrow the default job (rnd, fgsm; 3 defenses; 2 difficulties)")
    ap.add_argument("--skip-memory", action="store_true")
    args = ap.parse_args()
    if args.case:
        emit(sweep_case(args.case, args.num_cpus, args.quick), marker="RESULT ")
        return
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    print(__doc__.split("Method:")[1].strip(), "\n")
    cases = [("throughput", 1), ("throughput", 2)] + ([] if args.skip_memory else [("memory", 2)])
    results = []
    for case, cpus in cases:
        cmd = [__file__, "--case", case, "--num-cpus", str(cpus)] + (["--quick"] if args.quick else [])
        r = run_child(cmd, marker="RESULT ")
        if r is None:
            print(f"{case} num_cpus={cpus} failed")
            continue
        results.append(r)
        if case == "throughput":
            print(f"throughput  {r['dataset']:<16} num_cpus={cpus}: {r['cells']} cells in {r['seconds']:.1f}s "
                  f"= {r['cells_per_s']:.2f} cells/s ({r['failures']} failed)", flush=True)
        else:
            print(f"memory      {r['dataset']} ({r['nodes']:,} nodes): driver peak RSS {r['driver_peak_mib']:.0f} MiB, "
                  f"object store peak {r['object_store_peak_mib']:.0f} MiB; {r['cells']} cells in {r['seconds']:.1f}s "
                  f"(+{r['load_seconds']:.0f}s generating the graph)", flush=True)
    tp = [r for r in results if r["case"] == "throughput"]
    if len(tp) == 2 and tp[0]["cells_per_s"] > 0:
        print(f"speed-up 2 vs 1 CPUs: {tp[1]['cells_per_s'] / tp[0]['cells_per_s']:.2f}x")


if __name__ == "__main__":
    main()
