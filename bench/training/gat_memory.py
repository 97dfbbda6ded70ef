"""GAT-family trainings on a large graph: peak memory and seconds per epoch with grb-dist's
memory-lean attention (``grb_dist.models.attention``) and with torch_geometric's ``GATConv``
message passing (per-edge features kept for the backward pass).

    python bench/training/gat_memory.py                                 # gat, gat_at, gatguard on the aminer twin
    python bench/training/gat_memory.py --models gat --paths lean --epochs 1
    python bench/training/gat_memory.py --dataset csbm-grb-flickr --limit-gib 12

Each (model, attention) pair trains in its own fresh process with the dataset's shipped
job's parameters (``--epochs`` epochs, early stopping off, an adversarially trained model's
attack on from the first epoch, as ``bench/training/epochs.py`` runs them) on ``--threads``
torch threads; ``pyg`` runs the same training inside
``grb_dist.models.attention.pyg_attention()``. Printed per run: the wall seconds of every
epoch (the first one also builds the graph's sparse structures), the process's peak resident
set size (``ru_maxrss``: the dataset and the job included) and the resident set once the
dataset was loaded, before training. A sampler (every 0.1 s) stops a run whose resident set
passes ``--limit-gib`` and reports what it had reached and the epochs it had finished.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import threading
import time
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import emit, peak_rss_gib, run_child  # noqa: E402

PATHS = ("pyg", "lean")


def resident_gib() -> float:
    """This process's resident set size now, GiB (``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**30


def watch(limit_gib: float, on_limit) -> None:
    """Call ``on_limit(resident GiB)`` from a daemon thread once the resident set passes
    ``limit_gib``."""

    def loop() -> None:
        while True:
            now = resident_gib()
            if now > limit_gib:
                on_limit(now)
                return
            time.sleep(0.1)

    threading.Thread(target=loop, daemon=True).start()


def job_task(dataset: str, model: str, epochs: int):
    """The job's graph and its training task for ``model``, ``epochs`` epochs, no early stop."""
    from grb_dist.sweep.job import default_job_path, load_job
    from grb_dist.sweep.session import prepare

    prepared = prepare(load_job(default_job_path(dataset)), out=str(Path("results") / "gat-memory-unused"))
    task = next((t for t in prepared.cells.models if t.name == model), None)
    if task is None:
        raise SystemExit(f"{model} is not a model of {dataset}'s job")
    at = {**task.at, "warmup_epochs": 0} if task.at is not None else None
    return prepared.graph, dataclasses.replace(
        task, train={**task.train, "epochs": epochs, "patience": epochs + 1}, at=at)


def child(dataset: str, model: str, path: str, epochs: int, threads: int, limit_gib: float) -> None:
    import torch

    from grb_dist.core import allocator
    from grb_dist.models.attention import pyg_attention
    from grb_dist.models.train import report_epochs
    from grb_dist.sweep.worker import train_task

    torch.set_num_threads(threads)
    graph, task = job_task(dataset, model, epochs)
    marks = [time.perf_counter()]
    result = {"model": model, "path": path, "loaded_gib": resident_gib(), "policy": allocator.training_policy()}

    def stop(now: float) -> None:
        seconds = [b - a for a, b in zip(marks, marks[1:])]
        emit({**result, "epochs": seconds, "peak_gib": max(now, peak_rss_gib()), "stopped": True})
        os._exit(0)

    watch(limit_gib, stop)
    with report_epochs(lambda _: marks.append(time.perf_counter())), \
            pyg_attention() if path == "pyg" else nullcontext():
        train_task(graph, task, device="cpu")
    emit({**result, "epochs": [b - a for a, b in zip(marks, marks[1:])], "peak_gib": peak_rss_gib(),
          "stopped": False})


def row(r: dict, epochs: int, limit: float) -> str:
    times = [f"{s:.1f} s" for s in r["epochs"]] + ["-"] * (epochs - len(r["epochs"]))
    peak = f"{r['peak_gib']:.2f} GiB" + (f" (stopped above {limit:g} GiB)" if r["stopped"] else "")
    return f"| {r['model']} | {r['path']} ({r['policy']}) | {' | '.join(times)} | {peak} | {r['loaded_gib']:.2f} GiB |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="csbm-grb-aminer")
    ap.add_argument("--models", default="gat,gat_at,gatguard", help="comma list of the job's models")
    ap.add_argument("--paths", default=",".join(PATHS), help=f"comma list of {PATHS}")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--limit-gib", type=float, default=21.0, help="stop a run whose resident set passes this")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per run")
    ap.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        dataset, model, path, epochs, threads, limit = args.child
        child(dataset, model, path, int(epochs), int(threads), float(limit))
        return
    print(f"`{args.dataset}`, {args.epochs} epochs per run, {args.threads} torch thread(s), each run a fresh "
          "process; peak: ru_maxrss (dataset included), loaded: resident set before training; the training "
          "heap's allocator policy (grb_dist.core.allocator) in brackets\n")
    print("| model | attention | " + " | ".join(f"epoch {i}" for i in range(1, args.epochs + 1)) + " | peak | loaded |")
    print("|---|---|" + "---:|" * (args.epochs + 2))
    for model in args.models.split(","):
        for path in args.paths.split(","):
            try:
                r = run_child([__file__, "--child", args.dataset, model, path, args.epochs, args.threads,
                               args.limit_gib], timeout=args.timeout)
            except subprocess.TimeoutExpired:
                print(f"| {model} | {path} | timed out after {args.timeout:g} s |", flush=True)
                continue
            print(row(r, args.epochs, args.limit_gib) if r else f"| {model} | {path} | failed |", flush=True)


if __name__ == "__main__":
    main()
