"""Attack strength and time with the surrogate in fp32 vs bf16 (and tf32 on a GPU).

On cora-legacy (GRB layout, from the data folders of ``bench/common.py``), a GCN surrogate (seed 0) and a GCN
target (seed 1), 3 x 64, trained inductively; full difficulty, 60 injected x 20 edges.
Each attack runs once per precision (same seed, so the same edges for FGSM/PGD/SPEIT); the
table gives the target's accuracy after each injection, the accuracy drop against clean,
and the attack's wall time. bf16 runs under autocast (dense products in bfloat16, sparse
propagations, features, gradients and optimiser states in float32); on CPU this measures
the effect on strength, not a speed-up (CPUs without bf16 matrix units are slower in it).

Usage::

    python bench/attacks/precision.py                 # CPU: fp32 vs bf16
    python bench/attacks/precision.py --device cuda   # GPU: fp32 vs tf32 vs bf16
    python bench/attacks/precision.py --dataset csbm --attacks fgsm --steps 5 --epochs 5   # a quick check
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from grb_dist.attacks import build_attack
from grb_dist.datasets import load_dataset
from grb_dist.evaluation.evaluate import evaluate
from grb_dist.models.train import TrainConfig, train

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import cora_legacy, timed_on  # noqa: E402

CORA_LEGACY = cora_legacy()
SETTINGS = {
    "fgsm": dict(steps=200, step_size=0.01),
    "pgd": dict(steps=200, step_size=0.01),
    "speit": dict(steps=200, step_size=0.01),
    "tdgia": dict(steps=40, step_size=0.01),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--attacks", default=",".join(SETTINGS))
    ap.add_argument("--dataset", default=str(CORA_LEGACY), help="dataset name or path (default: cora-legacy)")
    ap.add_argument("--steps", type=int, help="attack steps (default: each attack's above)")
    ap.add_argument("--epochs", type=int, help="training epochs of surrogate and target (default: TrainConfig's)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    precisions = ["fp32", "tf32", "bf16"] if args.device.startswith("cuda") else ["fp32", "bf16"]
    g = load_dataset(args.dataset)
    params = {"hidden_sizes": [64, 64]}
    epochs = {} if args.epochs is None else {"epochs": args.epochs}
    surrogate = train("gcn", g, params, TrainConfig(seed=0, **epochs), device=args.device).model
    target = train("gcn", g, params, TrainConfig(seed=1, **epochs), device=args.device).model
    clean = evaluate(target, g, device=args.device)["full"]
    print(f"{g.name}, full difficulty, 60 x 20, GCN surrogate -> GCN target; clean accuracy {clean:.4f}")
    print(f"\n| attack | precision | accuracy after | drop | drop vs fp32 | seconds |\n|---|---|---:|---:|---:|---:|")
    for name in args.attacks.split(","):
        ref = None
        for prec in precisions:
            settings = {**SETTINGS[name], **({} if args.steps is None else {"steps": args.steps})}
            attack = build_attack(name, dict(n_inject=60, edges_per_node=20, seed=0, precision=prec, **settings))
            secs, inj = timed_on(args.device, attack.attack, g, surrogate, g.targets("full"), device=args.device)
            acc = evaluate(target, g, inj, device=args.device)["full"]
            drop = clean - acc
            ref = drop if ref is None else ref
            print(f"| {name} | {prec} | {acc:.4f} | {drop:.4f} | {drop - ref:+.4f} | {secs:.2f} |", flush=True)
    print(f"\ndevice={args.device}; threads={args.threads}; one run per cell (same seed).")


if __name__ == "__main__":
    main()
