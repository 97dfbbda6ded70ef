"""The CSBM study's models with one setting for every K (before) and with per-K settings
from ``grb-dist study-tune`` (after), next to Table 6 (test accuracy) and Table 11 (R_over with
l2-weak at budget deg(v)) of Gosch et al. 2023.

Runs two studies through the product's path (:func:`grb_dist.semantics.run.run_study`): the
shipped job ``over-robustness-csbm`` (one setting per model), and the same with the ``per_K``
section of the tuned job. Prints, per model and K, the accuracy on the new nodes and R_over,
before -> after (paper), and each side's RMS distance to the paper.

    grb-dist study-tune tuned.yaml --models mlp,gcn,sgc,sage,lp --graphs 5
    python bench/study/tuned.py tuned.yaml --out results/tuned --graphs 3 --nodes 200
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

from grb_dist.semantics.run import run_study
from grb_dist.semantics.spec import load_spec
from grb_dist.semantics.tables import metrics_table, read_nodes

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import ROOT  # noqa: E402

JOB = ROOT / "grb_dist" / "jobs" / "studies" / "over-robustness-csbm.yaml"
KS = (0.1, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0)

#: Gosch et al. 2023, Table 6: test accuracy (%) on the new nodes per K.
PAPER_TABLE6 = {
    "mlp": (50.4, 57.2, 64.6, 74.3, 83.0, 85.3, 96.6, 99.0),
    "gcn": (64.6, 71.5, 81.2, 87.3, 90.8, 94.0, 95.3, 96.0),
    "sgc": (61.3, 73.5, 82.9, 87.9, 91.5, 94.3, 95.3, 96.2),
    "appnp": (74.6, 76.7, 82.4, 87.7, 91.8, 96.4, 97.0, 95.5),
    "gat": (70.0, 77.6, 80.8, 85.2, 89.6, 93.7, 95.0, 95.5),
    "gatv2": (72.8, 76.7, 81.5, 86.1, 90.7, 95.3, 98.1, 99.3),
    "sage": (66.2, 70.6, 79.9, 86.0, 89.8, 95.4, 97.9, 99.4),
    "lp": (89.2,) * 8,
    "gcn_lp": (85.6, 86.1, 87.6, 89.8, 91.5, 93.2, 94.3, 94.7),
    "sgc_lp": (88.1, 87.0, 88.0, 90.4, 92.0, 93.7, 94.4, 95.0),
    "mlp_lp": (86.6, 88.8, 89.3, 91.3, 93.1, 93.2, 98.4, 99.3),
}
#: Gosch et al. 2023, Table 11: R_over (%) with l2-weak at budget deg(v).
PAPER_TABLE11 = {
    "mlp": (43.1, 35.6, 30.7, 25.5, 19.3, 9.9, 3.8, 1.3),
    "gcn": (35.3, 30.3, 25.7, 19.8, 14.1, 5.2, 1.6, 0.4),
    "sgc": (37.4, 29.6, 23.9, 20.1, 14.1, 5.2, 2.3, 0.6),
    "appnp": (32.5, 30.1, 24.3, 19.6, 16.8, 7.0, 2.4, 0.9),
    "gat": (33.3, 29.2, 26.6, 21.2, 15.7, 7.3, 2.9, 0.9),
    "gatv2": (33.0, 29.4, 26.6, 21.2, 16.1, 7.5, 2.9, 0.9),
    "sage": (36.7, 32.3, 26.8, 22.2, 16.9, 8.3, 3.3, 1.2),
    "lp": (16.0, 13.7, 11.3, 8.9, 6.7, 3.0, 1.0, 0.3),
    "gcn_lp": (23.5, 20.9, 19.3, 15.2, 10.3, 3.7, 1.2, 0.3),
    "sgc_lp": (19.1, 18.2, 17.3, 14.8, 9.9, 3.8, 1.5, 0.4),
    "mlp_lp": (21.4, 14.8, 15.2, 14.4, 13.1, 6.6, 2.5, 0.9),
}


def study(out: Path, name: str, models: list[str], graphs: int, nodes: int, num_cpus: int, tuned: Path | None):
    shipped = load_spec(JOB, check=False)
    source = load_spec(tuned, check=False).per_K if tuned is not None else {}
    per_k = {k: {m: v for m, v in entry.items() if m in models} for k, entry in source.items()}
    spec = load_spec(JOB, study=name, graphs=graphs, nodes=nodes, attacks=["l2-weak"], budgets=["deg"],
                     models={m: shipped.models[m] for m in models}, per_K={k: v for k, v in per_k.items() if v})
    directory = run_study(spec, out, num_cpus=num_cpus, progress=lambda msg: None)
    rows = read_nodes(directory)
    acc = rows.assign(right=rows["f_clean"] == rows["label"]).groupby(["model", "K"])["right"].mean()
    r_over = metrics_table(rows, ["deg"]).set_index(["model", "K"])["R_over"]
    return acc, r_over


def table(title: str, before, after, paper: dict, models: list[str]) -> None:
    print(f"\n{title}: before -> after (paper), %")
    print(f"{'model':>7} " + " ".join(f"{'K=' + format(k, 'g'):>18}" for k in KS))
    gaps = {"before": [], "after": []}
    for m in models:
        cells = []
        for i, k in enumerate(KS):
            b, a = 100 * before.get((m, k), math.nan), 100 * after.get((m, k), math.nan)
            p = paper.get(m, (math.nan,) * 8)[i]
            cells.append(f"{b:5.1f} -> {a:5.1f} ({p:4.1f})")
            if math.isfinite(p):
                gaps["before"].append(b - p)
                gaps["after"].append(a - p)
        print(f"{m:>7} " + " ".join(cells))
    for when, d in gaps.items():
        d = np.array([x for x in d if math.isfinite(x)])
        if d.size:
            print(f"  {when}: RMS {np.sqrt(np.mean(d ** 2)):.2f} points from the paper over {d.size} cells, "
                  f"mean {d.mean():+.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tuned", type=Path, help="a job written by grb-dist study-tune (its per_K is used)")
    p.add_argument("--out", type=Path, default=Path("results/tuned"))
    p.add_argument("--graphs", type=int, default=3)
    p.add_argument("--nodes", type=int, default=200)
    p.add_argument("--models", default="mlp,gcn,sgc,sage,lp,gcn_lp,sgc_lp,mlp_lp")
    p.add_argument("--num-cpus", type=int, default=2)
    args = p.parse_args()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    start = time.perf_counter()
    acc_b, rov_b = study(args.out, "untuned", models, args.graphs, args.nodes, args.num_cpus, tuned=None)
    acc_a, rov_a = study(args.out, "tuned", models, args.graphs, args.nodes, args.num_cpus, tuned=args.tuned)
    print(f"{args.graphs} graphs x {args.nodes} new nodes per K; models: {', '.join(models)}")
    table("Test accuracy on the new nodes (Table 6)", acc_b, acc_a, PAPER_TABLE6, models)
    table("R_over, l2-weak, budget deg(v) (Table 11)", rov_b, rov_a, PAPER_TABLE11, models)
    print(f"\n{time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
