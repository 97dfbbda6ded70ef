"""Scale of the modification attacks: PR-BCD and FLIP on the calibrated GRB twins
(``csbm-grb-flickr``: 89k nodes, 450k edges; ``csbm-grb-aminer``: 660k nodes, 2.9M edges),
full-difficulty targets, a 5% edge budget, the job's GCN surrogate.

Each (dataset, attack) runs in a fresh process so that its peak resident memory
(``ru_maxrss``) is its own. PR-BCD's seconds per step are the difference of two runs
(``--steps`` steps and one step, same final sampling) divided by ``steps - 1``, so the
set-up (block sampling, the surrogate's constant first layer) and the final sampling are
not counted in it; both totals are printed. The surrogate's weights are random (the cost
of a step does not depend on them).

    python bench/attacks/modification_scale.py
    python bench/attacks/modification_scale.py --datasets csbm-grb-flickr --steps 4 --threads 2
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import emit, peak_rss_gib, run_child, timed, timed_on  # noqa: E402


def child(dataset: str, attack: str, steps: int, threads: int, device: str = "cpu") -> dict:
    from grb_dist.attacks import build_attack
    from grb_dist.core import allocator
    from grb_dist.datasets import load_dataset
    from grb_dist.defenses import resolve_params
    from grb_dist.models.grammar import build_model
    from grb_dist.sweep.job import default_job_path, load_job

    torch.set_num_threads(threads)
    spec = load_job(default_job_path(dataset))
    load_s, graph = timed(load_dataset, dataset, normalize=spec.normalize, seed=spec.seed)
    allocator.release()  # as a sweep task starts (grb_dist.core.allocator)
    params, _ = resolve_params("gcn", spec.models)
    torch.manual_seed(0)
    surrogate = build_model("gcn", graph.num_features, graph.num_classes, params).to(device).eval()
    targets = graph.targets("full")
    out = {"dataset": dataset, "attack": attack, "nodes": graph.num_nodes, "edges": graph.num_edges,
           "targets": int(targets.size), "load_s": load_s}
    base = {**spec.attack_params(attack, "full", 0, "modification"), "ratio_edge_mod": 0.05}
    runs = [steps, 1] if attack in ("prbcd", "grbcd", "fga", "pgd") else [None]
    for k in runs:
        params = dict(base) if k is None else {**base, "steps": k, "n_samples": 2} if attack == "prbcd" else {**base, "steps": k}
        a = build_attack(attack, params, "modification")
        out[f"seconds_{k or 'total'}"], mod = timed_on(device, a.attack, graph, surrogate, targets, device=device)
        out["flips"] = mod.n_edge_flips
        out["budget"] = a.budget(graph, targets.size).n_edge_mod
        if attack == "prbcd":
            from grb_dist.attacks.shared.flips import candidate_pairs
            from grb_dist.attacks.shared.relaxed import default_block_size

            out["block"] = default_block_size(out["budget"], candidate_pairs(graph.num_nodes, targets.size))
    out["peak_gib"] = peak_rss_gib()
    out["peak_gpu_gib"] = torch.cuda.max_memory_allocated() / 2**30 if device != "cpu" else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="csbm-grb-flickr,csbm-grb-aminer")
    ap.add_argument("--attacks", default="prbcd,flip")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        emit(child(args.child[0], args.child[1], args.steps, args.threads, args.device))
        return
    print(f"$ python bench/attacks/modification_scale.py {' '.join(sys.argv[1:])}  (torch {torch.__version__}, "
          f"{args.threads} thread(s))")
    print("| dataset | nodes | edges | targets | attack | budget (flips) | block | s/step | total s (steps) | peak GiB |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for dataset in args.datasets.split(","):
        for attack in args.attacks.split(","):
            cmd = [__file__, "--child", dataset, attack, "--steps", str(args.steps),
                   "--threads", str(args.threads), "--device", args.device]
            r = run_child(cmd)
            if r is None:
                print(f"| {dataset} | | | | {attack} | failed |")
                continue
            if attack == "prbcd":
                per_step = (r[f"seconds_{args.steps}"] - r["seconds_1"]) / (args.steps - 1)
                total = f"{r[f'seconds_{args.steps}']:.1f} ({args.steps})"
            else:
                per_step, total = float("nan"), f"{r['seconds_total']:.1f}"
            print(f"| {dataset} | {r['nodes']:,} | {r['edges']:,} | {r['targets']:,} | {attack} | {r['budget']:,} | "
                  f"{r.get('block', 0):,} | {per_step:.2f} | {total} | {r['peak_gib']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
