"""How well ``grb-dist sweep --plan`` predicts a sweep: predicted vs measured wall time.

For each case, runs the real commands one after the other on an otherwise idle machine:
``grb-dist sweep ... --plan`` (its calibration cached by an earlier call, so the figures it
prints are the plan's own), then the same sweep into a fresh run directory, timed from the
outside. The measured phases come from the run's timeline: setup (command start to the first
task's start), the schedule (first task's start to the last result) and the end (to the
command's exit). Prints one Markdown row per case with the error of the total
(``predicted / measured - 1``), and the memory each task held at its peak against what it
reserved (the plan's figure: the sweep reserves what the plan measured), from the run's
timeline: the range of held / reserved per stage.

    python bench/sweep/plan_accuracy.py --out /tmp/plan                  # every case
    python bench/sweep/plan_accuracy.py --out /tmp/plan --cases default

Cases: ``default`` (the embedded default job), ``cora-injection``, ``cora-modification`` and
``cora-poisoning`` (cora-legacy in the GRB layout, found in the data folders of
``bench/common.py``, with the grb-cora job: its 23 defenses and GRB budgets, full difficulty,
one repeat; poisoning: RND, DICE, PR-BCD, Metattack and meta-PR-BCD at 5% of the edges,
five defenses (gcn, gcn_ln, sgc, rgcn, gnnguard) each trained on each perturbed graph: the
job's 23 are 139 trainings, 1 h 45 min here by its plan), ``flickr`` (the calibrated
csbm-grb-flickr twin, 89k nodes: its shipped job, 20 steps, full difficulty, one repeat,
six defenses, 40 epochs), ``aminer`` (the csbm-grb-aminer twin, 660k nodes, the main job's
graph: its shipped job cut to four defenses trained 12 epochs each without early stopping,
RND and FGSM at 10 steps, full difficulty, one repeat; the trainings run side by side, as in
the main job).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import ROOT, cora_legacy  # noqa: E402

CORA = cora_legacy()
CORA_JOB = ["--dataset", str(CORA), "--job", str(ROOT / "grb_dist" / "jobs" / "grb-cora.yaml"),
            "--difficulties", "full", "--repeats", "1"]
CASES = {
    "default": [],
    "cora-injection": [*CORA_JOB, "--scenario", "injection"],
    "cora-modification": [*CORA_JOB, "--scenario", "modification"],
    "cora-poisoning": [*CORA_JOB, "--scenario", "poisoning", "--defenses", "gcn,gcn_ln,sgc,rgcn,gnnguard"],
    "flickr": ["--steps", "20", "--difficulties", "full", "--repeats", "1"],  # and the job below
    "aminer": ["--steps", "10", "--attacks", "rnd,fgsm", "--difficulties", "full", "--repeats", "1"],
}
#: The twins' cases change their shipped jobs so that a run takes minutes here: flickr six
#: defenses, 40 epochs (patience 10) instead of 400; aminer four defenses, 12 epochs, all run (patience as long).
TWINS = {
    "flickr": ("csbm-grb-flickr", {"train": {"epochs": 40, "patience": 10},
                                   "defenses": ["gcn", "gcn_ln", "sage", "sgc", "rgcn", "gnnguard"]}),
    "aminer": ("csbm-grb-aminer", {"train": {"epochs": 12, "patience": 12}, "defenses": ["gcn", "gcn_ln", "sgc", "sage"]}),
}
UNITS = {"s": 1, "min": 60, "h": 3600, "d": 86400}


def seconds(text: str) -> float:
    """A duration as ``--plan`` prints it (``12.3 s``, ``4 min 05 s``, ``2 h 10 min``)."""
    return sum(float(n) * UNITS[u] for n, u in re.findall(r"([\d.]+) (s|min|h|d)\b", text))


def predicted(output: str) -> dict[str, float]:
    total = re.search(r"predicted wall time: (.*?)(?: \(at most|$)", output, re.M)
    phases = re.search(r"setup (.*?) \+ schedule (.*?) \+ end (.*?) \|", output)
    if not (total and phases):
        raise SystemExit(f"no prediction in:\n{output}")
    return {"total": seconds(total.group(1)), "setup": seconds(phases.group(1)),
            "schedule": seconds(phases.group(2)), "end": seconds(phases.group(3))}


def timeline(run: Path) -> pd.DataFrame:
    return pd.concat(pd.read_parquet(f) for f in sorted((run / "timeline").glob("*.parquet")))


def measured(run: Path, start: float, end: float) -> dict[str, float]:
    t = timeline(run)
    first, last = t.started.min().timestamp(), t.finished.max().timestamp()
    return {"total": end - start, "setup": first - start, "schedule": last - first, "end": end - last}


def held(run: Path) -> str:
    """Per stage, the range of each task's peak memory over what it reserved (the plan's
    figure), and the largest peak."""
    t = timeline(run).dropna(subset=["peak_memory", "reserved_memory"])
    parts = []
    for stage, rows in t.groupby("stage"):
        ratio = rows.peak_memory / rows.reserved_memory
        parts.append(f"{stage} {ratio.min():.2f}-{ratio.max():.2f} (largest {rows.peak_memory.max() / 2**30:.2f} GiB)")
    return ", ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="scratch directory for the run directories")
    ap.add_argument("--cases", default=",".join(CASES), help="comma list of: " + ", ".join(CASES))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    exe = str(Path(sys.executable).parent / "grb-dist")
    rows = []
    for case in args.cases.split(","):
        if case.startswith("cora") and not CORA.is_dir():
            print(f"{case}: skipped, {CORA} not found")
            continue
        run = args.out / case
        shutil.rmtree(run, ignore_errors=True)
        cmd = [exe, "sweep", *CASES[case], "--no-dashboard", "--out", str(run)]
        if case in TWINS:
            name, change = TWINS[case]
            job = yaml.safe_load((ROOT / "grb_dist" / "jobs" / f"{name}.yaml").read_text())
            job["train"].update(change["train"])
            job["defenses"] = change["defenses"]
            (args.out / f"{case}.yaml").write_text(yaml.safe_dump(job))
            cmd += ["--job", str(args.out / f"{case}.yaml")]
        # every figure measured (no default 3-minute budget): the accuracy of a whole calibration
        full = ["--plan", "--plan-budget", "10000000"]
        plan = ""
        for _ in range(2):  # the first calibrates and caches; the second prints the plan's own figures
            done = subprocess.run([*cmd, *full], capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"{case}: the plan failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
            plan = done.stdout
        print(f"$ grb-dist {' '.join(cmd[1:])} --plan\n{plan}", flush=True)
        pred = predicted(plan)
        start = time.time()
        done = subprocess.run(cmd, capture_output=True, text=True)
        end = time.time()
        if done.returncode:
            raise SystemExit(f"{case}: the sweep failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
        meas = measured(run, start, end)
        rows.append((case, pred, meas, held(run)))
        print(f"{case}: predicted {pred['total']:.0f} s, measured {meas['total']:.0f} s", flush=True)
    print("\n| case | predicted (setup + schedule + end) | measured (setup + schedule + end) | error "
          "| memory held / reserved, per task |")
    print("|---|---|---|---|---|")
    for case, p, m, memory in rows:
        fmt = lambda d: f"{d['total']:.0f} s ({d['setup']:.0f} + {d['schedule']:.0f} + {d['end']:.0f})"  # noqa: E731
        print(f"| {case} | {fmt(p)} | {fmt(m)} | {p['total'] / m['total'] - 1:+.0%} | {memory} |")


if __name__ == "__main__":
    main()
