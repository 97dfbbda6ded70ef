"""Random injection edges at GRB's largest shape: ``k`` distinct targets for each injected node.

``grb_dist.attacks.injection.common.random_target_choice`` draws ``k`` uniform positions per
row and draws the repeats within a row again; the method it replaced took the top-k of
``n_targets`` random keys per row (kept below as the baseline), i.e. n_rows x n_targets keys
(grb-aminer: 1500 x 197k = 296M) where n_rows x k (150k) suffice.

    python bench/bench_target_choice.py                       # grb-aminer: 1500 x 100 of 197,087
    python bench/bench_target_choice.py --rows 500 --k 100 --targets 10000
    python bench/bench_target_choice.py --strength            # same attack strength on cora-legacy

``--strength``: RND and FGSM (grb-cora budgets: 60 x 20, 200 FGSM steps) from a GCN
surrogate (seed 1) on a GCN target (seed 0), cora-legacy, full difficulty, attack seeds
0..9, once with each method choosing the random edges: the target's accuracy after the
attack, mean and standard deviation over the seeds.

Interleaved runs (baseline, new, baseline, ...), 2 torch threads, wall time by
time.perf_counter; medians and the ratio. Peak memory of each method: its largest tensor
(the baseline allocates its keys in blocks of at most 4M, the new method n_rows x k).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from grb_dist.attacks.injection import common
from grb_dist.attacks.injection.common import _KEY_BLOCK, random_target_choice

CORA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "grb-format" / "cora-legacy"


def top_k_of_keys(n_rows: int, k: int, n_targets: int, gen: torch.Generator) -> torch.Tensor:
    """The replaced method: the top-k of random keys per row, in blocks of rows."""
    rows_per_block = max(1, _KEY_BLOCK // n_targets)
    out = []
    for start in range(0, n_rows, rows_per_block):
        m = min(rows_per_block, n_rows - start)
        out.append(torch.rand(m, n_targets, generator=gen).topk(k, dim=1).indices)
    return torch.cat(out, 0)


def strength(seeds: int) -> None:
    from grb_dist.attacks.registry import build_attack
    from grb_dist.core.config import to_dict
    from grb_dist.datasets import load_dataset
    from grb_dist.defenses import resolve_params, train_defense
    from grb_dist.evaluation.evaluate import evaluate
    from grb_dist.models.train import TrainConfig
    from grb_dist.sweep.job import default_job_path, load_job

    job = load_job(default_job_path("grb-cora"))
    graph = load_dataset(str(CORA), normalize=job.normalize, seed=job.seed)
    params, overrides = resolve_params("gcn", job.models)
    train = {**to_dict(job.train), **overrides}
    surrogate, target = (train_defense("gcn", graph, params, TrainConfig(**{**train, "seed": s})).model.eval()
                         for s in (1, 0))
    targets = graph.targets("full")
    print(f"cora-legacy, full ({targets.size} targets), GCN surrogate -> GCN target, "
          f"clean {evaluate(target, graph, None, ['full'])['full']:.4f}, seeds 0..{seeds - 1}\n")
    print("| attack | method | accuracy after (mean) | sd |")
    print("|---|---|---:|---:|")
    original = common.random_target_choice
    for attack in ("rnd", "fgsm"):
        for name, method in (("top-k of keys (before)", top_k_of_keys), ("draw and redraw repeats (now)", original)):
            common.random_target_choice = method
            try:
                accs = [evaluate(target, graph, build_attack(attack, job.attack_params(attack, "full", seed),
                                                             "injection").attack(graph, surrogate, targets),
                                 ["full"])["full"] for seed in range(seeds)]
            finally:
                common.random_target_choice = original
            print(f"| {attack} | {name} | {statistics.mean(accs):.4f} | {statistics.stdev(accs):.4f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1500, help="injected nodes (grb-aminer: 1500)")
    ap.add_argument("--k", type=int, default=100, help="edges per injected node (grb-aminer: 100)")
    ap.add_argument("--targets", type=int, default=197_087, help="targets (grb-aminer full: 197,087)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--strength", action="store_true", help="attack strength on cora-legacy with each method")
    ap.add_argument("--seeds", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(2)
    if args.strength:
        strength(args.seeds)
        return
    methods = {"top-k of keys (before)": top_k_of_keys, "draw and redraw repeats (now)": random_target_choice}
    times: dict[str, list[float]] = {name: [] for name in methods}
    for run in range(args.runs):
        for name, method in methods.items():
            gen = torch.Generator().manual_seed(run)
            start = time.perf_counter()
            pos = method(args.rows, args.k, args.targets, gen)
            times[name].append(time.perf_counter() - start)
            assert pos.shape == (args.rows, args.k)
            assert (pos.sort(dim=1).values.diff(dim=1) != 0).all(), name
    keys = args.rows * args.targets
    print(f"{args.rows} rows x {args.k} distinct of {args.targets:,} targets, {args.runs} interleaved runs, 2 threads\n")
    print("| method | median s | min s | max s | random numbers drawn | largest tensor |")
    print("|---|---:|---:|---:|---:|---:|")
    base = statistics.median(times["top-k of keys (before)"])
    for name, ts in times.items():
        drawn = f"{keys:,}" if "before" in name else f"~{args.rows * args.k:,}"
        block = min(keys, max(1, _KEY_BLOCK // args.targets) * args.targets) * 4 if "before" in name \
            else args.rows * args.k * 8
        print(f"| {name} | {statistics.median(ts):.3f} | {min(ts):.3f} | {max(ts):.3f} | {drawn} | "
              f"{block / 2**20:.1f} MiB |")
    print(f"\nspeed-up (median before / median now): {base / statistics.median(times['draw and redraw repeats (now)']):.0f}x")


if __name__ == "__main__":
    main()
