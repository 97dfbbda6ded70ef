"""Acceptance check of the defense zoo: clean and FGSM-attacked accuracy on cora-legacy.

Method: the attacker trains its own GCN surrogate (seed 0, hidden [64, 64, 64], job train
settings) and runs FGSM injection (60 nodes x 20 edges, feature limits = the normalised
features' min / max, ``--steps`` sign steps of 0.01) against the full-difficulty test nodes.
Every defense is trained with ``--seed`` (default 1, so that the GCN target is not the
surrogate itself: black-box transfer) with the hyper-parameters of ``grb_dist/jobs/grb-cora.yaml``
(models, train, adversarial_training) and scored on the clean and on the injected graph.

    python bench/acceptance_defenses.py [--steps 1000] [--seed 1] [--defenses gcn,gcn_at,...]

Prints a markdown table; the check passes when GCN+AT and GCN+LN are both more accurate
under attack than plain GCN (exit status 1 otherwise).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import yaml

from grb_dist.attacks import build_attack
from grb_dist.datasets import load_dataset
from grb_dist.defenses import resolve_params, train_defense
from grb_dist.evaluation.evaluate import evaluate
from grb_dist.models.train import TrainConfig, train

ROOT = Path(__file__).resolve().parents[1]
CORA = ROOT.parent / "shared" / "datasets" / "grb-format" / "cora-legacy"
DEFAULT = "gcn,gcn_ln,gcn_at,gcn_ln_at,gat,gat_ln,sage_ln,rgcn,rgcn_at,gnnguard,gatguard,gcnsvd,lp,gcn_lp,gcn_ln_lp"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--defenses", default=DEFAULT)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    job = yaml.safe_load((ROOT / "grb_dist" / "jobs" / "grb-cora.yaml").read_text())
    graph = load_dataset(str(CORA))
    lo, hi = float(graph.features.min()), float(graph.features.max())
    base_train = job["train"]

    t0 = time.perf_counter()
    surrogate = train("gcn", graph, {"hidden_sizes": [64, 64, 64]}, TrainConfig(**base_train, seed=0)).model
    attack = build_attack("fgsm", {
        "n_inject": 60, "edges_per_node": 20, "feat_lim_min": lo, "feat_lim_max": hi,
        "steps": args.steps, "step_size": 0.01, "seed": 0,
    })
    injection = attack.attack(graph, surrogate, graph.targets("full"))
    print(f"# cora-legacy: {graph.num_nodes} nodes, features in [{lo:.3f}, {hi:.3f}]; "
          f"FGSM 60x20, {args.steps} steps on a GCN surrogate (seed 0): {time.perf_counter() - t0:.1f}s",
          flush=True)
    print(f"# surrogate: clean {evaluate(surrogate, graph, difficulties=['full'])['full']:.4f}, "
          f"attacked {evaluate(surrogate, graph, injection, difficulties=['full'])['full']:.4f} (white-box)")
    print("\n| defense | clean acc (full) | FGSM acc (full) | epochs | train s |")
    print("|---|---|---|---|---|")
    rows = {}
    for name in args.defenses.split(","):
        params, overrides = resolve_params(name, job["models"])
        cfg = TrainConfig(**{**base_train, **overrides, "seed": args.seed})
        t = time.perf_counter()
        result = train_defense(name, graph, params, cfg, at_config=job["adversarial_training"])
        secs = time.perf_counter() - t
        clean = evaluate(result.model, graph, difficulties=["full"])["full"]
        attacked = evaluate(result.model, graph, injection, difficulties=["full"])["full"]
        rows[name] = (clean, attacked)
        print(f"| {name} | {clean:.4f} | {attacked:.4f} | {result.epochs_run} | {secs:.1f} |", flush=True)
    ok = True
    if {"gcn", "gcn_at", "gcn_ln"} <= set(rows):
        for name in ("gcn_at", "gcn_ln"):
            better = rows[name][1] > rows["gcn"][1]
            ok &= better
            print(f"# {name} under attack {'>' if better else '<='} gcn: {rows[name][1]:.4f} vs {rows['gcn'][1]:.4f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
