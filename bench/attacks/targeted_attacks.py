"""Seconds per target and strength of the targeted attacks (FGA, PR-BCD, Nettack, DICE, RND)
on one CSBM graph with a GCN surrogate; FGA also on the whole graph (``receptive_field:
false``), the same flips, for what its receptive-field evaluation saves.

Graph: a CSBM of ``--nodes`` nodes (4 classes, 32 features normalised by arctan, 3 expected
neighbours of the same class and 1 of another), GRB split. Surrogate: a GCN (hidden 16)
trained by grb-dist's trainer (Adam lr 0.01, at most 200 epochs, patience 50, seed 0).
Targets: ``--targets`` test nodes of the ``full`` difficulty with degree at least 1, drawn
with seed 0 (``select_targets``); each target's budget is its degree plus 2 (Nettack's
experiments). Every attack attacks the whole batch in one ``attack`` call, after one untimed
call on the first target (warm-up); seconds per target = the call's wall time / targets.
Nettack trains its own linearised surrogate inside the call (counted). Margin: the GCN's
logit of the target's clean prediction minus its best other logit, on the graph with that
target's flips alone; the table has the mean over targets and the share with a negative
margin (success).

    python bench/attacks/targeted_attacks.py [--nodes 3000] [--targets 20] [--steps 50]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

from grb_dist.attacks.registry import build_attack
from grb_dist.core.targeted import TargetSelection, select_targets
from grb_dist.datasets.csbm import CSBMConfig, sample_csbm
from grb_dist.datasets.normalize import normalize_features
from grb_dist.datasets.split import grb_split
from grb_dist.models.tensors import apply_modification, graph_tensors
from grb_dist.models.train import TrainConfig, train

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import timed  # noqa: E402

BUDGET = dict(n_flips=2, degree_multiple=1.0, seed=0)


def margins(graph, model, mod, targets: np.ndarray) -> np.ndarray:
    """The surrogate's margin at each target with that target's flips alone (none: clean)."""
    clean = graph_tensors(graph)
    out = []
    with torch.no_grad():
        labels = model(clean.x, clean.edge_index).argmax(1)
        for t in targets.tolist():
            pert = apply_modification(clean, mod.of(t)) if mod is not None else clean
            z = model(pert.x, pert.edge_index)[t]
            y = int(labels[t])
            out.append(float(z[y] - torch.cat([z[:y], z[y + 1:]]).max()))
    return np.asarray(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=3000)
    ap.add_argument("--targets", type=int, default=20)
    ap.add_argument("--steps", type=int, default=50, help="PR-BCD's steps")
    ap.add_argument("--attacks", default="fga,fga-whole-graph,prbcd,nettack,dice,rnd",
                    help="fga-whole-graph: FGA with receptive_field: false")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = CSBMConfig(num_nodes=args.nodes, num_classes=4, num_features=32, K=1.5, deg_same=3.0, deg_diff=1.0)
    graph, _ = sample_csbm(cfg, seed=0, name="csbm")
    graph = graph.with_features(normalize_features(graph.features, "arctan"))
    graph = graph.with_split(grb_split(graph.degrees(), seed=0))
    model = train("gcn", graph, {"hidden_sizes": [16]}, TrainConfig(epochs=200, patience=50, seed=0)).model
    targets = select_targets(graph, "full", TargetSelection(n=args.targets, min_degree=1, seed=0))
    clean = margins(graph, model, None, targets)
    print(f"CSBM: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges; {targets.size} targets, budgets "
          f"{int(2 + graph.degrees()[targets].min())}..{int(2 + graph.degrees()[targets].max())} flips; "
          f"torch threads {args.threads}\n")
    print("| attack | s / target | flips | mean margin | success |")
    print("|---|---:|---:|---:|---:|")
    print(f"| clean | - | 0 | {clean.mean():.3f} | {(clean < 0).mean():.2f} |")
    for name in args.attacks.split(","):
        extra = {"prbcd": {"steps": args.steps}, "fga-whole-graph": {"receptive_field": False}}.get(name, {})
        attack = build_attack(name.split("-")[0], {**BUDGET, **extra}, "targeted")
        attack.attack(graph, model, targets[:1])  # warm-up
        seconds, mod = timed(attack.attack, graph, model, targets)
        m = margins(graph, model, mod, targets)
        label = f"{name} (steps {args.steps})" if name == "prbcd" else name
        print(f"| {label} | {seconds / targets.size:.3f} | {mod.n_edge_flips} | {m.mean():.3f} | {(m < 0).mean():.2f} |")


if __name__ == "__main__":
    main()
