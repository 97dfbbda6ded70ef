"""What ``grb-dist sweep --plan`` costs on a large graph, and what its sampled calibration
gives against the full one.

Two questions, each answered by running the real command in a subprocess with an empty
calibration cache (its own temporary ``XDG_CACHE_HOME``), timed from the outside:

* ``--time DATASET`` (default ``csbm-grb-aminer``, the aminer-shaped twin's shipped job):
  how long the plan takes before it prints its estimate, with the default calibration
  (``auto``: samples of a graph above 60,000 nodes);
* ``--compare DATASET`` (default ``csbm-grb-flickr``, 89k nodes, its shipped job): the same
  plan calibrated on samples (``--calibration sampled``) and on the whole graph
  (``--calibration full``), per stage (task time) and in total, with the ratio
  sampled / full.

    python bench/sweep/plan_calibration.py                      # both
    python bench/sweep/plan_calibration.py --skip-compare       # only the timing
    python bench/sweep/plan_calibration.py --compare csbm-grb-cora --skip-time

Options after ``--`` go to every ``grb-dist sweep`` call (``-- --scenario all``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import timed  # noqa: E402
from plan_accuracy import predicted, seconds  # noqa: E402  (this folder: the script is run from its path)

STAGES = ("train", "attack", "score")


def plan(dataset: str, extra: list[str]) -> tuple[float, str]:
    """Wall seconds and standard output of ``grb-dist sweep --dataset DATASET --plan``
    with an empty calibration cache."""
    with tempfile.TemporaryDirectory(prefix="grb-dist-plan-") as cache:
        env = {**os.environ, "XDG_CACHE_HOME": cache}
        cmd = [sys.executable, "-c", "from grb_dist.cli import main; main()", "sweep", "--dataset", dataset, "--plan", *extra]
        wall, out = timed(subprocess.run, cmd, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return wall, out.stdout


def stages(output: str) -> dict[str, float]:
    """Task seconds per stage and the predicted total, from the plan's table."""
    found = {}
    for stage in STAGES:
        row = re.search(rf"^\| {stage} \| [^|]* \| ([^|(]*)", output, re.M)
        found[stage] = seconds(row.group(1)) if row else 0.0
    found["total"] = predicted(output)["total"]
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--time", default="csbm-grb-aminer", help="dataset whose plan is timed")
    ap.add_argument("--compare", default="csbm-grb-flickr", help="dataset calibrated both ways")
    ap.add_argument("--skip-time", action="store_true")
    ap.add_argument("--skip-compare", action="store_true")
    args, extra = ap.parse_known_args()
    extra = [a for a in extra if a != "--"]
    if not args.skip_time:
        wall, out = plan(args.time, extra)
        line = next((ln for ln in out.splitlines() if ln.startswith("cluster:")), "")
        print(f"`grb-dist sweep --dataset {args.time} --plan`, empty cache: estimate printed after {wall:.1f} s "
              f"(wall, the command's whole run)\n\n    {line}\n    predicted wall time: {predicted(out)['total']:.0f} s\n")
    if not args.skip_compare:
        runs = {}
        for how in ("sampled", "full"):
            # every figure measured: the comparison is of the calibrations, not of a budget
            wall, out = plan(args.compare, [*extra, "--calibration", how, "--plan-budget", "10000000"])
            runs[how] = (wall, stages(out))
        print(f"{args.compare}: task seconds per stage, calibrated on samples and on the whole graph\n")
        print("| | sampled | full | sampled / full |")
        print("|---|---|---|---|")
        for key in (*STAGES, "total"):
            a, b = runs["sampled"][1][key], runs["full"][1][key]
            print(f"| {key} | {a:,.0f} s | {b:,.0f} s | {a / b:.2f} |" if b else f"| {key} | {a:,.0f} s | - | - |")
        print(f"| the plan's own wall time | {runs['sampled'][0]:.0f} s | {runs['full'][0]:.0f} s | "
              f"{runs['sampled'][0] / runs['full'][0]:.2f} |")


if __name__ == "__main__":
    main()
