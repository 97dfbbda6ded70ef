"""Scaling of the semantics study's attack and evaluation on a large CSBM.

Samples a 2-class CSBM with the paper's expected degrees (3.14 same-class, 0.75
different-class neighbours per node, as n = 1000, p = 0.63 %, q = 0.15 %) at ``--nodes``
known nodes, adds ``--new`` nodes inductively, and times

1. the l2-weak order (chunked distances of new nodes against every known node, never N x N)
   for ``--steps`` edges per node, and its peak traced memory;
2. the Bayes decision along the orders (closed form);
3. f's flip counts for a GCN trained a few epochs (one forward per added edge, on the new
   node's 3-hop ball: :class:`grb_dist.semantics.flips.BallView`) on ``--eval`` of the new
   nodes at budget deg(v) + 2; ``--whole`` evaluates on the whole graph instead (the
   previous way), for comparison.

Usage: ``python bench/study/scale.py --nodes 100000 --new 1000 --steps 16 --eval 20``
"""

from __future__ import annotations

import argparse
import sys
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import peak_rss_gib, timed  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=100_000)
    p.add_argument("--new", type=int, default=1000)
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--eval", type=int, default=20)
    p.add_argument("--K", type=float, default=1.5)
    p.add_argument("--whole", action="store_true", help="evaluate f on the whole graph (no ball)")
    args = p.parse_args()

    import torch

    from grb_dist.semantics.attacks import attack_order
    from grb_dist.semantics.data import Prepared, prepare
    from grb_dist.semantics.flips import f_flips, g_flips
    from grb_dist.semantics.kernel import train_study_model
    from grb_dist.semantics.spec import load_spec

    torch.set_num_threads(1)
    n = args.nodes
    spec = load_spec(None, graph={"kind": "csbm", "num_nodes": n, "num_classes": 2, "num_features": 21,
                                  "p": 3.1437 / (n / 2 - 1), "q": 0.75 / (n / 2)},
                     K=[args.K], graphs=1, nodes=args.new, budgets=["deg+2"], max_steps=args.steps,
                     models={"gcn": {"hidden_sizes": [64]}}, train={"epochs": 20, "patience": 20})
    t, prepared = timed(prepare, spec, args.K, 0)
    g = prepared.graph
    print(f"CSBM {g.num_nodes:,} nodes, {g.edge_index.shape[1] // 2:,} edges, {args.new} new nodes: "
          f"sampled in {t:.1f} s")
    tracemalloc.start()
    dt, order = timed(attack_order, "l2-weak", g.features, g.labels, prepared.x_new, prepared.y_new,
                      prepared.nb_node, prepared.nb_base, args.steps)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"l2-weak order, {args.new} nodes x {args.steps} edges: {dt:.2f} s, peak traced memory {peak / 2**20:.0f} MiB "
          f"(an N x N float64 matrix would be {n * n * 8 / 2**30:.0f} GiB)")
    t, (g0, gf) = timed(g_flips, prepared, order)
    print(f"Bayes decisions along the orders: {t:.3f} s")
    t, (model, acc) = timed(train_study_model, spec, prepared, "gcn", 0)
    print(f"GCN trained (20 epochs) in {t:.1f} s, val accuracy {acc:.3f}")
    sub = Prepared(g, prepared.x_new[: args.eval], prepared.y_new[: args.eval],
                   prepared.nb_node[prepared.nb_node < args.eval], prepared.nb_base[prepared.nb_node < args.eval])
    steps = np.minimum(sub.degree + 2, args.steps)
    dt, (f0, ff, _) = timed(f_flips, model, sub, order[: args.eval], steps, ball=not args.whole)
    forwards = int(args.eval + np.where(np.isfinite(ff), ff, steps).sum())
    where = "whole graph" if args.whole else "3-hop ball"
    print(f"f flip counts, {args.eval} nodes at budget deg+2 ({where}): {dt:.2f} s ({forwards} forwards, "
          f"{1000 * dt / forwards:.1f} ms each), {int(np.isfinite(ff).sum())} flips")
    print(f"peak RSS {peak_rss_gib():.2f} GiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
