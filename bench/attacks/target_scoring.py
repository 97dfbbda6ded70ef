"""Seconds to score one attacked target on a large graph, three ways: the whole perturbed
graph, the target's ball of ``hops + 1`` (the model run on that induced subgraph), and the
rows the model's program reads (``grb_dist.evaluation.rows``), for deep models.

Graph: ``--dataset`` (default the aminer twin, 659,574 nodes), loaded as a sweep loads it.
Models: GCN 3 x 128 and SGC (k 4), untrained (seed 0): the cost does not depend on the
weights, and each target's logits from both paths are compared (the largest absolute
difference is printed). Targets: ``--targets`` test nodes of ``full`` with degree at least
2 (``select_targets``, seed 0); each gets two direct flips (one edge removed, one pair to a
random node added), as Nettack's two-flip budget does. Per model and target, interleaved:
one whole-graph forward on the target's perturbed graph, the ball evaluation (where the ball
holds at most half the graph), and the rows evaluation (the graph-free prefix, computed once
per model, is timed apart). One torch thread; medians.

    python bench/attacks/target_scoring.py [--dataset csbm-grb-aminer] [--targets 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from grb_dist.core.targeted import TargetedModification
from grb_dist.defenses import build_defense
from grb_dist.evaluation.rows import RowProgram
from grb_dist.evaluation.targeted import TargetEvaluator
from grb_dist.models.tensors import apply_modification, graph_tensors

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import graph_and_targets, peak_rss_gib  # noqa: E402

MODELS = {"gcn 3 x 128": ("gcn", {"hidden_sizes": [128, 128]}), "sgc k 4": ("sgc", {"hidden_sizes": [], "k": 4})}


def two_flips(graph, targets: np.ndarray, seed: int = 0) -> TargetedModification:
    ei, rng = graph.edge_index, np.random.default_rng(seed)
    order = np.argsort(ei[0], kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(ei[0], minlength=graph.num_nodes))])
    removed, added = [], []
    for t in targets.tolist():
        nbrs = ei[1][order][indptr[t]:indptr[t + 1]]
        removed.append((t, int(nbrs[0])))
        far = int(rng.integers(graph.num_nodes))
        while far == t or far in nbrs:
            far = int(rng.integers(graph.num_nodes))
        added.append((t, far))
    return TargetedModification.build(targets, np.array(removed).T, np.array(added).T, graph.num_nodes,
                                      graph.num_features)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="csbm-grb-aminer")
    ap.add_argument("--targets", type=int, default=10)
    args = ap.parse_args()
    graph, targets = graph_and_targets(args.dataset, args.targets)
    mod = two_flips(graph, targets)
    clean = graph_tensors(graph)
    ev = TargetEvaluator(graph, clean)
    print("| model | ball of hops + 1, nodes (median) | whole graph, s a target | ball, s a target | rows, s a target "
          "| whole / rows | prefix once, s | largest logit difference |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for label, (name, params) in MODELS.items():
        torch.manual_seed(0)
        model = build_defense(name, graph, params).eval()
        hops = 3 if name == "gcn" else 4
        t0 = time.perf_counter()
        program = RowProgram(model, clean.x)
        prefix = time.perf_counter() - t0
        whole, ball, rows, sizes, diff = [], [], [], [], 0.0
        with torch.no_grad():
            for t in targets.tolist():
                t0 = time.perf_counter()
                pg = apply_modification(clean, mod.of(t))
                want = model(pg.x, pg.edge_index)[t]
                whole.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                nodes = ev.ball(t, mod.pairs_of(t)[1], hops)
                if nodes is not None:
                    ev._ball_logits(model, mod, t, nodes)
                    ball.append(time.perf_counter() - t0)
                sizes.append(graph.num_nodes if nodes is None else nodes.size)
                t0 = time.perf_counter()
                got = program.logits(t, *ev.perturbed(mod, t))
                rows.append(time.perf_counter() - t0)
                diff = max(diff, float((got - want).abs().max()))
        w, r = statistics.median(whole), statistics.median(rows)
        b = f"{statistics.median(ball):.3f} ({len(ball)} targets)" if ball else "none under half"
        print(f"| {label} | {statistics.median(sizes):,.0f} | {w:.3f} | {b} | {r:.4f} | {w / r:.0f}x | {prefix:.2f} | "
              f"{diff:.1e} |")
    print(f"peak RSS {peak_rss_gib():.2f} GiB; one torch thread; medians over {targets.size} targets")


if __name__ == "__main__":
    main()
