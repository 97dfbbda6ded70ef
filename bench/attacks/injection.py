"""Benchmark of injection attacks: seconds per attack step and peak memory.

Each (dataset, attack) case runs in its own subprocess, which loads the graph, trains a GCN
surrogate (only ``--train-epochs`` epochs: speed, not accuracy, is measured), then runs the
attack twice: with 0 steps (setup: receptive field, clean predictions, edge selection,
audit) and with ``--steps`` steps. Seconds per step = (t_steps - t_0) / total steps (TDGIA
runs ``--steps`` per sequential round, so its total is rounds x steps). Peak memory is the
subprocess's ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` (peak resident set size of the
whole case: dataset, training and attack).

Usage::

    python bench/attacks/injection.py                       # cora-legacy and csbm-grb-aminer, FGSM and TDGIA
    python bench/attacks/injection.py --datasets cora --steps 20
    python bench/attacks/injection.py --datasets aminer --steps 5 --threads 2

GRB reference (Zheng et al. 2021, Table 11, one V100, grb-aminer full, 1500 x 100, 5000 steps):
FGSM 954.5 s (0.19 s/step), TDGIA 4079.4 s.

Each case runs twice, with the incremental surrogate evaluation and with the ordinary
forward on the whole perturbed graph (``--paths``), and the table gives the step speed-up.
The figures, and how they were measured, are in docs/performance.md (Injection attacks).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import cora_legacy, emit, peak_rss_gib, run_child, timed, timed_on  # noqa: E402

CORA_LEGACY = cora_legacy()

CASES = {
    # name: (dataset, hidden sizes, n_inject, edges_per_node)
    "cora": (str(CORA_LEGACY), [64, 64, 64], 60, 20),
    "aminer": ("csbm-grb-aminer", [128, 128, 128], 1500, 100),
    "csbm": ("csbm", [64, 64, 64], 60, 20),  # the built-in default graph: a quick check
}


def injection_case(dataset: str, hidden: list[int], n_inject: int, edges: int, attack: str, steps: int,
                   train_epochs: int, threads: int, device: str, incremental: bool = True) -> dict:
    import torch

    from grb_dist.attacks import build_attack
    from grb_dist.attacks.injection.tdgia import round_sizes
    from grb_dist.datasets import load_dataset
    from grb_dist.models.train import TrainConfig, train

    torch.set_num_threads(threads)
    t_load, g = timed(load_dataset, dataset)
    t_train, result = timed(train, "gcn", g, {"hidden_sizes": hidden}, TrainConfig(seed=0, epochs=train_epochs),
                            device=device)
    model = result.model
    targets = g.targets("full")
    params = dict(n_inject=n_inject, edges_per_node=edges, feat_lim_min=None, feat_lim_max=None, step_size=0.01, seed=0)
    if attack == "tdgia":
        params["sequential_step"] = 0.2
    timings = {s: timed_on(device, build_attack(attack, {**params, "steps": s}).attack, g, model, targets, device=device,
                           incremental=incremental)[0] for s in (0, steps)}
    total_steps = steps * (len(round_sizes(n_inject, 0.2)) if attack == "tdgia" else 1)
    return {
        "dataset": dataset, "nodes": g.num_nodes, "edges": g.num_edges, "features": g.num_features,
        "targets": int(targets.size), "attack": attack, "n_inject": n_inject, "edges_per_node": edges,
        "steps": total_steps, "load_s": round(t_load, 1), "train_s": round(t_train, 1),
        "train_epochs": train_epochs, "setup_s": round(timings[0], 2), "attack_s": round(timings[steps], 2),
        "s_per_step": round((timings[steps] - timings[0]) / max(total_steps, 1), 4),
        "peak_rss_gib": round(peak_rss_gib(), 2),
        "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if device != "cpu" else None,
        "threads": threads, "device": device, "path": "incremental" if incremental else "full",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="cora,aminer", help="comma list of: " + ", ".join(CASES))
    ap.add_argument("--attacks", default="fgsm,tdgia")
    ap.add_argument("--steps", type=int, default=None, help="steps (per round for TDGIA); default 20 cora, 5 aminer")
    ap.add_argument("--train-epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--paths", default="incremental,full",
                    help="surrogate evaluation: incremental (only the rows the injection reaches), full "
                         "(the ordinary forward on the whole perturbed graph every step), or both (A/B)")
    ap.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case in this process
    args = ap.parse_args()
    if args.case:
        spec = json.loads(args.case)
        emit(injection_case(**spec))
        return
    logging.basicConfig(level=logging.WARNING)
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    rows = []
    for ds in args.datasets.split(","):
        dataset, hidden, n_inject, edges = CASES[ds]
        steps = args.steps if args.steps is not None else (20 if ds == "cora" else 5)
        for attack in args.attacks.split(","):
            for path in args.paths.split(","):
                spec = dict(dataset=dataset, hidden=hidden, n_inject=n_inject, edges=edges, attack=attack, steps=steps,
                            train_epochs=args.train_epochs, threads=args.threads, device=args.device,
                            incremental=path == "incremental")
                row = run_child([__file__, "--case", json.dumps(spec)])
                if row is None:
                    print(f"{ds}/{attack}/{path} failed")
                    continue
                rows.append(row)
                print(json.dumps(row), flush=True)
    print(f"\n{'dataset':<16}{'attack':<7}{'path':<12}{'inject':>12}{'steps':>6}{'setup s':>9}{'s/step':>9}"
          f"{'peak RSS GiB':>14}{'step speed-up':>15}")
    full = {(r["dataset"], r["attack"]): r["s_per_step"] for r in rows if r["path"] == "full"}
    for r in rows:
        name = Path(r["dataset"]).name
        ref = full.get((r["dataset"], r["attack"]))
        ratio = f"{ref / r['s_per_step']:.1f}x" if r["path"] == "incremental" and ref and r["s_per_step"] > 0 else ""
        print(f"{name:<16}{r['attack']:<7}{r['path']:<12}{r['n_inject']:>6}x{r['edges_per_node']:<5}{r['steps']:>6}"
              f"{r['setup_s']:>9}{r['s_per_step']:>9}{r['peak_rss_gib']:>14}{ratio:>15}")
    print(f"\nsurrogate trained {args.train_epochs} epoch(s) only; threads={args.threads}; device={args.device}; "
          "peak RSS = ru_maxrss of each case's subprocess (dataset + training + attack).")
    print("GRB (V100, grb-aminer full, 5000 steps): FGSM 954.5 s = 0.19 s/step; TDGIA 4079.4 s.")


if __name__ == "__main__":
    main()
