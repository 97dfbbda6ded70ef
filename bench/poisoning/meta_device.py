"""Metattack and meta-gradient PR-BCD on a device: seconds per greedy flip (Metattack) and
per search step (``meta_prbcd``), and the peak GPU memory, on the CPU and on the GPU in one
run, same graph, surrogate, seed and budget.

The graph is the grb-cora twin (``csbm-grb-cora``, 2,680 nodes, GRB's cora split: the size
Metattack's dense N x N state is made for); the surrogate a GCN trained transductively on
it. Metattack (Meta-Self, 100 inner steps) takes ``--flips`` greedy flips and A-Meta-Self
as many; ``meta_prbcd`` takes ``--steps`` steps of its default block. Each attack runs once
per device after one untimed flip or step (CUDA's start and its kernels' first launch are
not what a sweep pays per cell). Each row also carries the flips the attack chose, so the
CPU and GPU rows can be compared (float32 on both; ties may break differently).

    python bench/poisoning/meta_device.py                    # cpu, and cuda when there is one
    python bench/poisoning/meta_device.py --devices cpu --flips 3 --steps 2
"""

from __future__ import annotations

import argparse
import json
import time

import torch


def run(name: str, params: dict, graph, surrogate, device: str) -> dict:
    from grb_dist.attacks import build_attack

    attack = build_attack(name, params, "poisoning")
    model = surrogate.to(device)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    mod = attack.attack(graph, model, device=device)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None
    flips = sorted(map(tuple, mod.added.T.tolist())) + sorted(map(tuple, mod.removed.T.tolist()))
    return {"attack": name, "device": device, "seconds": round(seconds, 3), "flips": mod.n_edge_flips,
            "peak_gpu_gib": None if peak is None else round(peak, 3), "chosen": flips[:8]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="csbm-grb-cora")
    ap.add_argument("--devices", default=None, help="comma-separated (default: cpu, and cuda when available)")
    ap.add_argument("--flips", type=int, default=10, help="Metattack's greedy flips (one meta-gradient each)")
    ap.add_argument("--steps", type=int, default=10, help="meta_prbcd's search steps")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from grb_dist.datasets import load_dataset
    from grb_dist.defenses import train_defense
    from grb_dist.models.train import TrainConfig

    devices = args.devices.split(",") if args.devices else ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    graph = load_dataset(args.dataset)
    surrogate = train_defense("gcn", graph, {"hidden_sizes": [16]}, TrainConfig(epochs=100, seed=0),
                              transductive=True).model
    attacks = {"metattack": {"n_edge_mod": args.flips},
               "metattack (A-Meta-Self)": {"n_edge_mod": args.flips, "approximate": True},
               "meta_prbcd": {"n_edge_mod": max(1, graph.num_edges // 20), "steps": args.steps}}
    for label, params in attacks.items():
        name = label.split(" ")[0]
        for device in devices:
            warm = {**params, "n_edge_mod": 1} if name == "metattack" else {**params, "steps": 1}
            run(name, warm, graph, surrogate, device)
            row = run(name, params, graph, surrogate, device)
            unit = args.flips if name == "metattack" else args.steps
            print(json.dumps({**row, "attack": label, "s_per_unit": round(row["seconds"] / unit, 4),
                              "unit": "flip" if name == "metattack" else "step", "nodes": graph.num_nodes}),
                  flush=True)


if __name__ == "__main__":
    main()
