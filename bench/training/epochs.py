"""A training's epochs one by one on a large graph: wall time, the kernel's share (page
faults) and the faults themselves, under the training heap's allocator policy.

    python bench/training/epochs.py                                    # GAT, GAT+AT on the flickr twin
    python bench/training/epochs.py --models gcn,gat --epochs 6
    GRB_DIST_ALLOCATOR=system python bench/training/epochs.py --models gat

Each model trains in its own process (its peak is its own), with the dataset's shipped job's
parameters, early stopping off and, for an adversarially trained model, its attack on from
the first epoch (as ``sweep --plan`` times it), on ``--threads`` torch threads. A heap that
keeps a training's freed memory (``cache``, the default policy) faults in every new page over
the first epochs and none after: an epoch less its kernel time is what a long training's
epochs cost, which is how ``sweep --plan`` reads an epoch (``grb_dist/sweep/cost/calibrate.py``).
Prints one Markdown row per epoch and the process's peak resident set size.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import emit, peak_rss_gib, run_child  # noqa: E402


def child(dataset: str, model: str, epochs: int, threads: int) -> None:
    import torch

    from grb_dist.core import allocator
    from grb_dist.models.train import report_epochs
    from grb_dist.sweep.job import default_job_path, load_job
    from grb_dist.sweep.session import prepare
    from grb_dist.sweep.worker import train_task

    torch.set_num_threads(threads)
    prepared = prepare(load_job(default_job_path(dataset)), out=str(Path("results") / "epochs-unused"))
    task = next((t for t in prepared.cells.models if t.name == model), None)
    if task is None:
        raise SystemExit(f"{model} is not a model of {dataset}'s job")
    at = {**task.at, "warmup_epochs": 0} if task.at is not None else None
    task = dataclasses.replace(task, train={**task.train, "epochs": epochs, "patience": epochs + 1}, at=at)

    def mark() -> tuple[float, float, int]:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return time.perf_counter(), r.ru_stime, r.ru_minflt

    marks = [mark()]
    with report_epochs(lambda _: marks.append(mark())):
        train_task(prepared.graph, task, device="cpu")
    rows = [{"wall": b[0] - a[0], "kernel": b[1] - a[1], "faults": b[2] - a[2]} for a, b in zip(marks, marks[1:])]
    emit({"model": model, "policy": allocator.training_policy(), "epochs": rows, "peak_gib": peak_rss_gib()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="csbm-grb-flickr")
    ap.add_argument("--models", default="gat,gat_at", help="comma list of the job's models")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--child", nargs=4, metavar=("DATASET", "MODEL", "EPOCHS", "THREADS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        dataset, model, epochs, threads = args.child
        child(dataset, model, int(epochs), int(threads))
        return
    print(f"`{args.dataset}`, {args.threads} thread(s); kernel: system time, mostly the page faults "
          "of a growing heap\n")
    print("| model | policy | epoch | wall | kernel | wall less kernel | minor faults |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for model in args.models.split(","):
        r = run_child([__file__, "--child", args.dataset, model, str(args.epochs), str(args.threads)])
        for i, e in enumerate(r["epochs"], 1):
            print(f"| {model} | {r['policy']} | {i} | {e['wall']:.2f} s | {e['kernel']:.2f} s | "
                  f"{e['wall'] - e['kernel']:.2f} s | {e['faults']:,} |")
        print(f"| {model} | peak | | {r['peak_gib']:.2f} GiB | | | |")


if __name__ == "__main__":
    main()
