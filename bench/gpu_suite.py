"""The GPU suite: every GPU figure the docs need, in one command, on the first CUDA machine.

    python bench/gpu_suite.py --out /tmp/gpu            # on a CUDA machine (at most 11 minutes)
    python bench/gpu_suite.py --out /tmp/gpu --tiny     # the CPU fallback: every stage on the built-in csbm graph

On a machine with a CUDA GPU it runs, each stage in its own process with its own time limit:

1. ``env``: torch, CUDA, the GPU and its memory;
2. ``attacks``: FGSM and TDGIA at the grb-aminer twin's shape (660k nodes, 1500 x 100
   injected, GCN 3 x 128; ``bench/attacks/injection.py``): seconds per step, measured over
   ``--steps`` steps (per TDGIA round), and the paper's 5000 steps at that rate next to its V100 figures
   (FGSM 954.5 s, TDGIA 4079.4 s), peak GPU memory;
3. ``prbcd``: PR-BCD on the same twin (``bench/attacks/modification_scale.py``: 5% budget, 5
   steps, the job's GCN, random weights): seconds per step and peak GPU memory;
4. ``meta``: Metattack (Meta-Self and A-Meta-Self) and ``meta_prbcd`` on the grb-cora twin,
   on the CPU and on the GPU in one process (``bench/poisoning/meta_device.py``): seconds per
   flip and per step, peak GPU memory, the flips chosen on each;
5. ``precision``: attack strength in fp32, tf32 and bf16 (``bench/attacks/precision.py``), on
   cora-legacy where the data folders hold it, else on its twin ``csbm-grb-cora``;
6. ``sweep-default``: the default sweep (``grb-dist sweep``), timed; ``sweep-default-2cpu``: the
   same on two of the machine's CPU cores with the GPU hidden, the baseline in the same run;
7. ``sweep-aminer``: a ``csbm-grb-aminer`` injection sweep at GRB's budgets, full
   difficulty, one repeat, FGSM, on GCN and GCN+LN (what fits the stage's limit);
8. ``sweep-poisoning``: a ``csbm-grb-aminer`` poisoning sweep: DICE at 5% of the edges, a GCN
   trained on the whole poisoned graph (and its clean rows' training, and the attacker's
   surrogate): the trainings that dominate a poisoning sweep's cost at that scale;
9. ``main-plan``: ``grb-dist plan`` of the main job below, on this machine (its default
   three-minute budget): the predicted wall time to set beside the measured one, and the
   figures the main job's tasks then reserve (what the plan measured, not estimates);
10. ``main-job``: the complete ``csbm-grb-aminer`` job (``grb-dist sweep --dataset
   csbm-grb-aminer``: 1,472 cells) into ``--main-out`` (default ``results/gpu-main-job``), for
   ``--main-limit`` seconds; stopped at its limit with SIGTERM (its rows written), so a second
   run of the stage resumes it. Its figures: cells done, wall time, and per stage (train,
   attack, score) the tasks, their task-seconds and the span from the run's timeline, the
   workers that ran them, and the most host and GPU memory a task held (the timeline's peaks:
   each task within 40 GB of GPU memory is what the main job needs of a card); the GPU's peak
   memory in use (``nvidia-smi``, every second, all processes together) is printed by every
   stage. On a GPU neither runs by default: ``--only main-plan,main-job --main-limit 360``,
   then ``--only main-job`` resumes.

Stages that start a sweep stop at their limit with SIGTERM, as ``ray job stop`` would, and
are killed 30 s later if still running.

Without a GPU (or with ``--tiny``) the same stages run on the built-in ``csbm`` graph with a
few steps, so the suite cannot rot: ``tests/test_gpu_suite.py`` runs it in CI. The last
lines are a Markdown table ready for the docs; the exit status is non-zero when a stage
failed or ran out of time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
#: Seconds on one V100, grb-aminer full, 5000 steps (GRB, Zheng et al. 2021, Table 11).
GRB_V100 = {"fgsm": 954.5, "tdgia": 4079.4}
PAPER_STEPS = 5000


def stages(args, device: str, tiny: bool) -> list[tuple[str, list[str], int]]:
    """``(name, command, time limit in seconds)`` of every stage. On a GPU the limits of the
    stages before the main job add up to 650 s: where one call may last 10 minutes, run them
    in two (``--only``); the main job (``--only main-job``) has a call of its own."""
    py = sys.executable
    grb = [py, "-m", "grb_dist.cli"]
    steps = args.steps or (3 if tiny else 100)
    dataset = "csbm" if tiny else "csbm-grb-aminer"
    narrow = ["--attacks", "rnd,fgsm", "--defenses", "gcn", "--difficulties", "full", "--repeats", "1",
              "--steps", "3"] if tiny else []
    limit = (lambda s: 600) if tiny else (lambda s: s)
    return [
        ("attacks", [py, str(BENCH / "attacks" / "injection.py"), "--datasets", "csbm" if tiny else "aminer",
                     "--attacks", "fgsm,tdgia", "--steps", str(steps), "--paths", "incremental",
                     "--device", device, "--train-epochs", "3"], limit(120)),
        ("prbcd", [py, str(BENCH / "attacks" / "modification_scale.py"), "--child", dataset, "prbcd",
                   "--steps", str(3 if tiny else 5), "--device", device], limit(60)),
        ("meta", [py, str(BENCH / "poisoning" / "meta_device.py"), "--devices", "cpu" if tiny else f"cpu,{device}"]
         + (["--dataset", "csbm", "--flips", "2", "--steps", "2"] if tiny else ["--flips", "5", "--steps", "5"]),
         limit(60)),
        ("precision", [py, str(BENCH / "attacks" / "precision.py"), "--device", device, "--attacks", "fgsm,tdgia"]
         + (["--dataset", "csbm", "--steps", "3", "--epochs", "5"] if tiny else ["--dataset", precision_data()]),
         limit(40)),
        ("sweep-default", [*grb, "sweep", "--out", str(args.out / "sweep-default")] + narrow, limit(80)),
        ("sweep-default-2cpu", ["env", "CUDA_VISIBLE_DEVICES=", *grb, "sweep", "--num-cpus", "2",
                                "--out", str(args.out / "sweep-default-2cpu")] + narrow, limit(80)),
        ("sweep-aminer", [*grb, "sweep", "--dataset", dataset, "--out", str(args.out / "sweep-aminer"),
                          "--attacks", "fgsm", "--defenses", "gcn,gcn_ln", "--difficulties", "full",
                          "--repeats", "1"] + (["--steps", "3"] if tiny else []), limit(110)),
        ("sweep-poisoning", [*grb, "sweep", "--dataset", dataset, "--scenario", "poisoning",
                             "--out", str(args.out / "sweep-poisoning"), "--attacks", "dice", "--defenses", "gcn",
                             "--difficulties", "full", "--repeats", "1"], limit(100)),
        ("main-plan", [*grb, "plan", "--dataset", dataset, "--out", str(args.main_out)] + (narrow if tiny else []),
         limit(200)),
        ("main-job", [*grb, "sweep", "--dataset", dataset, "--out", str(args.main_out), "--no-dashboard"]
         + (narrow if tiny else []), limit(args.main_limit)),
    ]


def precision_data() -> str:
    """cora-legacy where the data folders hold it (the figures in the docs are on it), else its
    twin: a GPU machine often has no copy of the real graphs."""
    sys.path.insert(0, str(BENCH))
    from common import cora_legacy

    path = cora_legacy()
    return str(path) if path.exists() else "csbm-grb-cora"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="folder for the stages' logs and runs (required)")
    ap.add_argument("--tiny", action="store_true", help="the CPU fallback on the built-in csbm graph")
    ap.add_argument("--steps", type=int, help="FGSM/TDGIA steps measured (default: 100 on a GPU, 3 with --tiny)")
    ap.add_argument("--only", help="comma-separated stages to run (default: all but main-job)")
    ap.add_argument("--main-out", type=Path, default=ROOT / "results" / "gpu-main-job",
                    help="run directory of the main-job stage (a second run resumes it)")
    ap.add_argument("--main-limit", type=int, default=540, help="seconds of the main-job stage (default 540)")
    args = ap.parse_args()
    if args.out is None:
        ap.error("--out is required: a folder for the stages' logs and runs")
    import torch

    cuda = torch.cuda.is_available()
    tiny = args.tiny or not cuda
    device = "cuda" if cuda and not args.tiny else "cpu"
    args.out.mkdir(parents=True, exist_ok=True)
    env = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": device,
           "gpu": torch.cuda.get_device_name(0) if cuda else None,
           "gpu_memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1) if cuda else None,
           "cpus": os.cpu_count(), "mode": "tiny (CPU fallback)" if tiny else "GPU"}
    print("env:", json.dumps(env), flush=True)
    if not cuda and not args.tiny:
        print("no CUDA GPU here: running the CPU fallback (--tiny)", flush=True)
    only = set(args.only.split(",")) if args.only else {name for name, _, _ in stages(args, device, tiny)} - (
        set() if tiny else {"main-plan", "main-job"})
    rows, failed = [("env", "ok", 0.0, f"{env['gpu'] or 'no GPU'}, torch {env['torch']}, {env['mode']}")], False
    for name, cmd, limit in stages(args, device, tiny):
        if name not in only:
            continue
        log = args.out / f"{name}.log"
        print(f"\n## {name}: {' '.join(Path(c).name if i < 2 else c for i, c in enumerate(cmd))}", flush=True)
        with GpuMemory(cuda) as gpu:
            status, text, seconds = run_stage(cmd, limit)
        log.write_text(text)
        failed |= status != "ok"
        print("\n".join(text.strip().splitlines()[-12:]), flush=True)
        figures = summary(name, text, tiny) + (f"; GPU peak {gpu.peak_gib:.1f} GiB in use" if gpu.peak_gib else "")
        if name == "main-job":
            figures += "; " + main_job_figures(args.main_out)
        rows.append((name, status, seconds, figures))
    print("\n| stage | status | seconds | figures |\n|---|---|---:|---|")
    for name, status, seconds, figures in rows:
        print(f"| {name} | {status} | {seconds:.0f} | {figures} |")
    print(f"\nlogs in {args.out}")
    raise SystemExit(1 if failed else 0)


def run_stage(cmd: list[str], limit: int) -> tuple[str, str, float]:
    """Run ``cmd`` for at most ``limit`` seconds, then SIGTERM (a sweep writes its rows and
    stops; a resumable run), then SIGKILL 30 s later; its status, output and seconds."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    try:
        text, _ = proc.communicate(timeout=limit)
        status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            text, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            text, _ = proc.communicate()
        status = f"stopped at {limit} s"
    return status, text or "", time.perf_counter() - start


class GpuMemory:
    """The GPU's peak memory in use while a stage runs, read by ``nvidia-smi`` every second
    (all processes: the stage's workers and actors together); nothing without a GPU."""

    def __init__(self, cuda: bool) -> None:
        self.proc, self.peak_gib = None, 0.0
        self.cuda = cuda and shutil.which("nvidia-smi") is not None

    def __enter__(self) -> "GpuMemory":
        if self.cuda:
            self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                                          "-lms", "1000"], stdout=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            self.proc.terminate()
            out, _ = self.proc.communicate()
            used = [int(v) for v in out.split() if v.isdigit()]
            self.peak_gib = max(used, default=0) / 1024


def main_job_figures(run_dir: Path) -> str:
    """Cells done and, per stage, the tasks, their task-seconds, the span in the run's
    timeline (every invocation: a resumed run adds up) and the workers, from the run."""
    import pandas as pd

    try:
        scores = pd.read_parquet(run_dir / "scores")
        timeline = pd.concat([pd.read_parquet(f) for f in sorted((run_dir / "timeline").glob("*.parquet"))])
    except (OSError, ValueError) as exc:
        return f"no run to read ({exc})"
    parts = [f"{len(scores)} cells stored, {timeline['invocation'].nunique()} invocation(s)"]
    for stage, rows in timeline.groupby("stage"):
        secs = (rows["finished"] - rows["started"]).dt.total_seconds()
        span = (rows["finished"].max() - rows["started"].min()).total_seconds()
        workers = rows["worker"].dropna().nunique() if "worker" in rows else 0
        peaks = [f"{rows[c].max() / 2**30:.2f} GiB {kind}" for c, kind in (("peak_memory", "host"),
                                                                           ("peak_gpu_memory", "GPU"))
                 if c in rows and rows[c].notna().any()]
        parts.append(f"{stage}: {len(rows)} tasks, {secs.sum():.0f} task-s, span {span:.0f} s, {workers} workers"
                     + (f", a task held at most {' and '.join(peaks)}" if peaks else ""))
    return "; ".join(parts)


def summary(name: str, text: str, tiny: bool) -> str:
    """The stage's key figures, from its output."""
    rows = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    if name == "attacks" and rows:
        parts = []
        for r in rows:
            paper = "" if tiny else (f", {PAPER_STEPS} steps at that rate {r['s_per_step'] * PAPER_STEPS:.0f} s "
                                     f"(GRB on a V100: {GRB_V100[r['attack']]:.0f} s)")
            gpu = f", {r['peak_gpu_gib']} GiB GPU" if r.get("peak_gpu_gib") is not None else ""
            parts.append(f"{r['attack']} {r['s_per_step']:.4f} s/step{paper}{gpu}")
        return "; ".join(parts)
    if name == "prbcd" and rows:
        r = rows[-1]
        steps = max(int(k.split("_")[1]) for k in r if k.startswith("seconds_"))
        per_step = (r[f"seconds_{steps}"] - r["seconds_1"]) / (steps - 1)
        gpu = f", {r['peak_gpu_gib']:.2f} GiB GPU" if r.get("peak_gpu_gib") is not None else ""
        return f"{per_step:.3f} s/step on {r['nodes']:,} nodes, {r['flips']} flips{gpu}"
    if name == "meta" and rows:
        return "; ".join(f"{r['attack']} {r['device']} {r['s_per_unit']:.3f} s/{r['unit']}"
                         + (f" ({r['peak_gpu_gib']:.2f} GiB GPU)" if r.get("peak_gpu_gib") is not None else "")
                         for r in rows)
    if name == "precision":
        lines = [line for line in text.splitlines() if line.startswith("| ") and "precision" not in line]
        return "; ".join(" ".join(c.strip() for c in line.strip("|").split("|")[:3]) for line in lines)
    if name == "main-plan":
        lines = [line.strip() for line in text.splitlines() if "predicted wall time" in line or "calibration" in line]
        return "; ".join(lines)
    if name.startswith("sweep") or name == "main-job":
        lines = [line for line in text.splitlines() if "cells (" in line]
        return lines[-1].strip() if lines else ""
    return ""


if __name__ == "__main__":
    main()
