"""Transfer vs adaptive: what each defense keeps when the attacker differentiates through it.

Runs the real command twice on one run directory, timed: ``grb-dist sweep`` (GRB's
transfer protocol, a GCN surrogate) and the same command with ``--adaptive`` (which grows
the run by the adaptive cells only: every defense attacked by itself with the scenario's
gradient attacks). Then, per scenario, prints for every (defense, attack) the transfer
accuracy (worst over surrogates, mean over repeats), the adaptive accuracy and their
difference, and flags every adaptive attack weaker than its transfer counterpart by more
than ``--tolerance`` (an adaptive attack should never be weaker: the defense itself is the
best surrogate the attacker can have).

    python bench/attacks/adaptive.py --out /tmp/adaptive                     # cora-legacy, injection and modification
    python bench/attacks/adaptive.py --out /tmp/adaptive --scenario injection
    python bench/attacks/adaptive.py --out /tmp/adaptive --report-only      # tables of a finished run
    python bench/attacks/adaptive.py --out /tmp/adaptive --only transfer    # one of the two sweeps
    python bench/attacks/adaptive.py --out /tmp/csbm --dataset csbm --job -  # the default job as it ships
    python bench/attacks/adaptive.py --out /tmp/adaptive --scenario modification --defenses gcn,sgc,appnp_ln
    python bench/attacks/adaptive.py --out /tmp/adaptive --scenario injection --attacks pgd

Defaults: cora-legacy (GRB layout, found in the data folders of ``bench/common.py``), the grb-cora job (its 23
defenses, GRB budgets), the full difficulty, one repeat, 200 steps, the gradient attacks of
each scenario (injection: fgsm, pgd, speit, tdgia; modification: fga, pgd, prbcd, grbcd).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import ROOT, cora_legacy, timed  # noqa: E402

CORA = cora_legacy()
GRADIENT = {"injection": "fgsm,pgd,speit,tdgia", "modification": "fga,pgd,prbcd,grbcd"}


def sweep(args, scenario: str, adaptive: bool) -> float:
    """One timed ``grb-dist sweep``; its seconds."""
    cmd = [str(Path(sys.executable).parent / "grb-dist"), "sweep", "--dataset", args.dataset, "--out", str(args.out),
           "--scenario", scenario, "--num-cpus", str(args.num_cpus)]
    if args.job != "-":
        cmd += ["--job", args.job, "--attacks", args.attacks or GRADIENT[scenario], "--difficulties", args.difficulty,
                "--repeats", str(args.repeats), "--steps", str(args.steps)]
    if args.defenses:
        cmd += ["--defenses", args.defenses]
    if adaptive:
        cmd.append("--adaptive")
    seconds, done = timed(subprocess.run, cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(f"$ grb-dist {' '.join(cmd[1:])}\n  exit {done.returncode} in {seconds:.0f} s; " + done.stdout.strip().splitlines()[-1])
    if done.returncode:
        print(done.stdout[-4000:])
        raise SystemExit(done.returncode)
    return seconds


def markdown(df: pd.DataFrame) -> str:
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row] for row in df.itertuples(index=False)]
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in cells])


def report(args, times: dict[str, float]) -> None:
    from grb_dist.leaderboard import adaptive_vs_transfer
    from grb_dist.store import RunStore

    scores = RunStore.existing(args.out).read_scores()
    clean = scores[scores["attack"] == "none"].groupby(["scenario", "difficulty", "defense"])["accuracy"].mean()
    for scenario in sorted(set(scores["scenario"])):
        table = adaptive_vs_transfer(scores, scenario, args.difficulty).dropna(subset=["transfer_accuracy",
                                                                                        "adaptive_accuracy"])
        if table.empty:
            continue
        print(f"\n## {scenario}, {args.difficulty}: accuracy under each attack, transfer / adaptive\n")
        rows = []
        for defense, mine in table.groupby("defense"):
            t, a = mine.set_index("attack")["transfer_accuracy"], mine.set_index("attack")["adaptive_accuracy"]
            row = {"defense": defense, "clean": clean.get((scenario, args.difficulty, defense), float("nan")),
                   "transfer (worst)": t.min(), "adaptive (worst)": a.min(), "gap": t.min() - a.min()}
            row.update({k: f"{t[k]:.3f} / {a[k]:.3f}" for k in t.index})
            rows.append(row)
        print(markdown(pd.DataFrame(rows).sort_values("adaptive (worst)", ascending=False)))
        weaker = table[table["gap"] < -args.tolerance]
        print(f"\nadaptive weaker than transfer by more than {args.tolerance}: "
              + ("none" if weaker.empty else "\n" + weaker.to_string(index=False)))
    for key, seconds in times.items():
        print(f"{key}: {seconds:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dataset", default=str(CORA))
    ap.add_argument("--job", default=str(ROOT / "grb_dist" / "jobs" / "grb-cora.yaml"),
                    help="job file; '-' runs the dataset's shipped job as it is (no narrowing flags)")
    ap.add_argument("--scenario", choices=["injection", "modification", "all"], default="all")
    ap.add_argument("--difficulty", default="full")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--num-cpus", type=int, default=2)
    ap.add_argument("--tolerance", type=float, default=0.01)
    ap.add_argument("--defenses", help="comma-separated subset of the job's defenses (default: all)")
    ap.add_argument("--attacks", help="comma-separated subset of the scenario's gradient attacks (default: all)")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--only", choices=["transfer", "adaptive"], help="run one of the two sweeps")
    args = ap.parse_args()
    times = {}
    if not args.report_only:
        for scenario in (["injection", "modification"] if args.scenario == "all" else [args.scenario]):
            if args.only != "adaptive":
                times[f"{scenario}: transfer sweep"] = sweep(args, scenario, adaptive=False)
            if args.only != "transfer":
                times[f"{scenario}: --adaptive (growth)"] = sweep(args, scenario, adaptive=True)
    report(args, times)


if __name__ == "__main__":
    main()
