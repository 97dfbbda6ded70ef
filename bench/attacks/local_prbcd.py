"""Seconds per target of local (targeted) PR-BCD on a large graph, two ways: each step on the
rows the target's output reads (``receptive_field: true``, the default) and each step on the
whole graph (``receptive_field: false``), with the flips of both compared.

Graph: ``--dataset`` (default the aminer twin, 659,574 nodes), loaded as a sweep loads it.
Surrogates: GCNs with hidden layers of 64 (two layers) and 128 x 128 (three layers),
untrained (seed 0): the cost does not depend on the weights, and the attack fights the
surrogate's own predictions. Targets: ``--targets`` test nodes of ``full`` with degree at
least 2 (``select_targets``, seed 0), two flips each (Nettack's two-flip budget), ``--steps``
steps (the attack's default is 100; a step costs the same whatever their number),
``--block`` partners a block, 20 samples. Per surrogate: one ``attack`` call on all targets
each way, timed whole (the whole-graph way builds its weighted surrogate in the call, the
local way its row program: both counted); seconds per target are that time divided by the
targets (set-up and the final sampling included). One torch thread.

    python bench/attacks/local_prbcd.py [--dataset csbm-grb-aminer] [--targets 3] [--steps 10]
        [--surrogates "gcn 2 x 64,gcn 3 x 128"]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

from grb_dist.attacks.registry import build_attack
from grb_dist.defenses import build_defense

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import graph_and_targets, peak_rss_gib  # noqa: E402

SURROGATES = {"gcn 2 x 64": {"hidden_sizes": [64]}, "gcn 3 x 128": {"hidden_sizes": [128, 128]}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="csbm-grb-aminer")
    ap.add_argument("--targets", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--block", type=int, default=10_000)
    ap.add_argument("--surrogates", default=",".join(SURROGATES), help="comma list of: " + ", ".join(SURROGATES))
    args = ap.parse_args()
    graph, targets = graph_and_targets(args.dataset, args.targets)
    print(f"{targets.size} targets, 2 flips each, {args.steps} steps, block {args.block:,}, one torch thread\n")
    print("| surrogate | whole graph, s a target | receptive field, s a target | whole / local | same flips |")
    print("|---|---:|---:|---:|---|")
    for label in args.surrogates.split(","):
        params = SURROGATES[label.strip()]
        torch.manual_seed(0)
        model = build_defense("gcn", graph, params).eval()
        mods, secs = {}, {}
        for way in (True, False):
            attack = build_attack("prbcd", {"n_flips": 2, "seed": 0, "steps": args.steps, "block_size": args.block,
                                            "receptive_field": way}, "targeted")
            t0 = time.perf_counter()
            mods[way] = attack.attack(graph, model, targets)
            secs[way] = (time.perf_counter() - t0) / targets.size
        same = all(np.array_equal(np.sort(a), np.sort(b)) for t in targets.tolist()
                   for a, b in zip(mods[True].partners(t), mods[False].partners(t)))
        print(f"| {label} | {secs[False]:.1f} | {secs[True]:.2f} | {secs[False] / secs[True]:.1f}x | "
              f"{'yes' if same else 'no'} |")
    print(f"\npeak RSS {peak_rss_gib():.2f} GiB")


if __name__ == "__main__":
    main()
