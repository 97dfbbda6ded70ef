"""Which loss an adaptive modification attack should fight a defense with.

An adaptive cell attacks a defense with itself as the surrogate. The transfer default of the
gradient modification attacks, the margin of log-probabilities, is unbounded per node, and a
defense's logits may be large or sharp (layer norm, attention, label propagation), which
steers the gradient towards nodes the defense is already sure of. This script runs each
named attack on each named defense, adaptively, with each loss, on the same trained weights,
labels and seed, and prints the defense's accuracy on the targets after the attack.

Protocol: cora-legacy (GRB layout, found beside the checkout), the official split, full
difficulty; every defense trained as the grb-cora job trains it (seed 0); the labels the
attack fights are a GCN's predictions (the attacker's own model, as in a sweep); GRB's
modification budget of the grb-cora job (5% of the edges: 264 flips) and its steps (200).

    python bench/adaptive_losses.py                                  # prbcd, fga on gcn, sgc, appnp_ln
    python bench/adaptive_losses.py --attacks prbcd --defenses gcn_lp --losses margin,prob_margin
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
CORA = ROOT.parent / "shared" / "datasets" / "grb-format" / "cora-legacy"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default=str(CORA))
    ap.add_argument("--attacks", default="prbcd,fga")
    ap.add_argument("--defenses", default="gcn,sgc,appnp_ln")
    ap.add_argument("--losses", default="margin,prob_margin")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from grb_dist.attacks.registry import build_attack
    from grb_dist.datasets import load_dataset
    from grb_dist.defenses import resolve_params, train_defense
    from grb_dist.models.tensors import apply_modification, graph_tensors
    from grb_dist.models.train import TrainConfig
    from grb_dist.sweep import worker
    from grb_dist.core.config import to_dict
    from grb_dist.sweep.job import default_job_path, load_job

    torch.set_num_threads(1)
    job = load_job(default_job_path("grb-cora"))
    graph = load_dataset(args.dataset, normalize=job.normalize, seed=job.seed)
    targets = graph.targets("full")
    clean = graph_tensors(graph)

    def trained(name: str) -> torch.nn.Module:
        params, overrides = resolve_params(name, job.models)
        config = TrainConfig(**{**to_dict(job.train), **overrides, "seed": job.seed})
        return train_defense(name, graph, params, config, at_config=job.adversarial_training).model.eval()

    def accuracy(model: torch.nn.Module, mod) -> float:
        t = apply_modification(clean, mod)
        with torch.no_grad():
            pred = model(t.x, t.edge_index).argmax(1).numpy()
        return float((pred[targets] == graph.labels[targets]).mean())

    labels = worker.attacker_labels(graph, trained("gcn"))
    losses = args.losses.split(",")
    print(f"{graph.name}: {targets.size} targets, labels: a GCN's predictions, seed {args.seed}\n")
    print("| defense | clean | attack | " + " | ".join(f"{loss} | s" for loss in losses) + " |")
    print("|---|---:|---|" + "---:|---:|" * len(losses))
    for name in args.defenses.split(","):
        model = trained(name)
        base = accuracy(model, None)
        for attack in args.attacks.split(","):
            cells = []
            for loss in losses:
                params = {**job.attack_params(attack, "full", args.seed, "modification"), "loss": loss}
                built = build_attack(attack, params, "modification")
                start = time.perf_counter()
                mod = built.attack(graph, model, targets, labels=labels)
                cells.append(f"{accuracy(model, mod):.3f} | {time.perf_counter() - start:.0f}")
            print(f"| {name} | {base:.3f} | {attack} | " + " | ".join(cells) + " |", flush=True)
    print("\naccuracy of the defense on the targets after its own (adaptive) attack; s: seconds of the attack")


if __name__ == "__main__":
    main()
