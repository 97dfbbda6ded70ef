"""Fidelity on published perturbations: grb-dist's poisoning accuracies on Pro-GNN's published
Metattack graphs, next to Pro-GNN's Table 2 (Jin et al., KDD 2020).

For every dataset, rate (0 = the clean graph) and defense: the published perturbation is read
by the ``published`` attack (the same code a sweep runs), applied to the base graph, and the
defense is trained on the poisoned graph transductively (what a poisoning cell does:
:func:`grb_dist.sweep.worker.poison_task`) with the hyper-parameters of the ``prognn-cora`` job
(Pro-GNN's: raw features, 2 layers, lr 0.01, weight decay 5e-4, 200 epochs; ``prognn`` on its
own schedule, the authors': lr 5e-4, 1000 epochs, and their coefficients of each dataset);
the figure is the accuracy on Pro-GNN's test nodes, mean ± std over ``--seeds`` training
seeds (Pro-GNN: 10). ``Pro-GNN`` is grb-dist's ``prognn`` (the paper's method), ``Pro-GNN-lite``
its cheaper variant ``prognn_lite`` (no nuclear norm, the job's 200 epochs at lr 0.01), which
Table 2 has no column for.
Pro-GNN's own numbers are read from ``prognn_table2.csv`` beside this script (its ``source``
column says where each came from); a cell it lacks prints as ``-``.

    python bench/poisoning/fidelity.py --datasets cora,citeseer,polblogs --seeds 5

The files: ``$GRB_DIST_PROGNN`` (a folder in Pro-GNN's layout), else the download cache.
Runs ``--workers`` processes (one torch thread each).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import timed  # noqa: E402

#: The models of Table 2 and their grb-dist names and parameters (the prognn-cora job's).
MODELS = {
    "GCN": ("gcn", {"hidden_sizes": [16]}),
    "GCN-SVD": ("gcnsvd", {"hidden_sizes": [16], "k": 200}),
    "GCN-Jaccard": ("jaccard", {"hidden_sizes": [16], "threshold": 0.01}),
    "RGCN": ("rgcn", {"hidden_sizes": [32]}),
    "GAT": ("gat", {"hidden_sizes": [8], "heads": 8, "dropout": 0.5}),
    "Pro-GNN": ("prognn", {"hidden_sizes": [16]}),
    "Pro-GNN-lite": ("prognn_lite", {"hidden_sizes": [16]}),
}
TRAIN = {"lr": 0.01, "weight_decay": 5e-4, "epochs": 200, "patience": 200}
RATES = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25)


def poisoned_graph(dataset: str, rate: float):
    """Pro-GNN's ``dataset`` (raw features) poisoned with the published Metattack set of
    ``rate`` (0: the clean graph), as a poisoning cell builds it."""
    import torch

    from grb_dist.attacks import build_attack
    from grb_dist.attacks.poisoning.base import poisoning_targets
    from grb_dist.core.graph import modified_graph
    from grb_dist.datasets import load_dataset

    graph = load_dataset(f"prognn-{dataset.replace('_', '-')}", normalize="none")
    if rate:
        attack = build_attack("published", {"kind": "meta", "rate": rate, "seed": 0}, "poisoning")
        graph = modified_graph(graph, attack.attack(graph, torch.nn.Module(), poisoning_targets(graph)))
    return graph


def train_scored(graph, model: str, seed: int, epochs: int | None = None, extra: str = "{}",
                 lr: float | None = None) -> tuple[float, float, float]:
    """Train ``model`` (a :data:`MODELS` name) on ``graph`` transductively as a poisoning cell
    does; ``(validation accuracy, test accuracy, seconds)``. ``epochs`` (no early stopping)
    and ``lr``: ``None`` gives the model's own (:data:`TRAIN` under the model's training
    settings, as a sweep of the job does)."""
    import torch

    from grb_dist.defenses import resolve_params, train_defense
    from grb_dist.evaluation.evaluate import difficulty_accuracy, predict_tensors
    from grb_dist.models.tensors import graph_tensors
    from grb_dist.models.train import TrainConfig

    name, params = MODELS[model]
    params, own = resolve_params(name, {name: {**params, **json.loads(extra)}})
    flags = {"lr": lr} if lr is not None else {}
    if epochs is not None:
        flags.update(epochs=epochs, patience=epochs)
    config = TrainConfig(**{**TRAIN, **own, **flags}, seed=seed)

    def train_and_score() -> tuple[float, float]:
        trained = train_defense(name, graph, params, config, transductive=True).model
        pred = predict_tensors(trained, graph_tensors(graph, "cpu"))
        val = torch.as_tensor(graph.split["val"])
        val_acc = float((pred.cpu()[val] == torch.as_tensor(graph.labels)[val]).float().mean())
        return val_acc, difficulty_accuracy(pred, graph, ["full"])["full"]

    seconds, (val_acc, test_acc) = timed(train_and_score)
    return val_acc, test_acc, seconds


def run_one(dataset: str, rate: float, model: str, seed: int, epochs: int | None = None,
            extra: str = "{}", lr: float | None = None) -> tuple[str, float, str, int, float, float, float]:
    """Train ``model`` on ``dataset`` poisoned with the published ``rate`` set (one torch
    thread); ``(dataset, rate, model, seed, test accuracy, seconds, validation accuracy)``."""
    import torch

    torch.set_num_threads(1)
    val_acc, test_acc, seconds = train_scored(poisoned_graph(dataset, rate), model, seed, epochs, extra, lr)
    return dataset, rate, model, seed, test_acc, seconds, val_acc


def published_table(path: Path) -> dict[tuple[str, float, str], tuple[float, float]]:
    with path.open() as f:
        return {(r["dataset"], float(r["rate"]), r["model"]): (float(r["mean"]), float(r["std"])) for r in csv.DictReader(f)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="cora,citeseer,polblogs")
    ap.add_argument("--rates", default=",".join(str(r) for r in RATES))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--out", type=Path, help="also write every run as CSV here")
    ap.add_argument("--epochs", type=int, default=None,
                    help="training epochs of every model, no early stopping (default: the job's 200, Pro-GNN's own 1000)")
    ap.add_argument("--lr", type=float, default=None,
                    help="the trainer's learning rate of every model (default: the job's 0.01, Pro-GNN's own 5e-4)")
    ap.add_argument("--params", default="{}", help='JSON merged into every model\'s parameters, e.g. \'{"nuclear": true}\'')
    ap.add_argument("--ranks", default=None,
                    help="GCN-SVD: train every rank of this comma list (Pro-GNN tunes it over 5,10,15,50,100,200) and "
                         "show, per dataset and rate, the rank of the best mean validation accuracy")
    args = ap.parse_args()
    datasets, models = args.datasets.split(","), args.models.split(",")
    rates = [float(r) for r in args.rates.split(",")]
    ranks = [int(k) for k in args.ranks.split(",")] if args.ranks else [None]

    def extra(model: str, k: int | None) -> str:
        return json.dumps({**json.loads(args.params), "k": k}) if k is not None else args.params

    jobs = [(d, r, m, s, args.epochs, extra(m, k), args.lr, k) for d in datasets for r in rates for m in models
            for k in (ranks if m == "GCN-SVD" else [None]) for s in range(args.seeds)]
    with ProcessPoolExecutor(args.workers) as pool:
        wall, results = timed(lambda: list(pool.map(run_one, *zip(*[j[:7] for j in jobs]))))
    runs = [(*res, job[7]) for res, job in zip(results, jobs)]  # + the rank (None: the model's own)
    if args.out:
        with args.out.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["dataset", "rate", "model", "seed", "accuracy", "train_seconds", "val_accuracy", "k"])
            w.writerows(runs)
    paper = published_table(Path(__file__).with_name("prognn_table2.csv"))
    print(f"accuracy (%) on Pro-GNN's test nodes, poisoned by its published Metattack graphs; grb-dist mean ± std "
          f"(population) over {args.seeds} seeds / Pro-GNN's Table 2 ({len(jobs)} trainings, {wall:.0f} s wall, "
          f"{args.workers} workers)\n")

    def cell_runs(d: str, r: float, m: str) -> tuple[list, str]:
        cell = [run for run in runs if run[:3] == (d, r, m)]
        if m != "GCN-SVD" or ranks == [None]:
            return cell, ""
        by_k = {k: [run for run in cell if run[7] == k] for k in ranks}
        best = max(ranks, key=lambda k: (np.mean([run[6] for run in by_k[k]]), -k))  # ties: the lower rank
        return by_k[best], f" (k={best})"

    for d in datasets:
        print(f"### {d}\n")
        print("| rate | " + " | ".join(models) + " |")
        print("|---|" + "---|" * len(models))
        for r in rates:
            cells = []
            for m in models:
                cell, note = cell_runs(d, r, m)
                acc = np.array([run[4] for run in cell]) * 100
                ours = f"{acc.mean():.1f} ± {acc.std():.1f}{note}"
                ref = paper.get((d, r, m))
                cells.append(f"{ours} / {ref[0]:.1f} ± {ref[1]:.1f}" if ref else f"{ours} / -")
            print(f"| {r:.0%} | " + " | ".join(cells) + " |")
        print()
        if "GCN-SVD" in models and ranks != [None]:
            print("GCN-SVD by rank, test / validation accuracy (%), mean over seeds:\n")
            print("| rate | " + " | ".join(f"k={k}" for k in ranks) + " |")
            print("|---|" + "---|" * len(ranks))
            for r in rates:
                row = []
                for k in ranks:
                    cell = [run for run in runs if run[:3] == (d, r, "GCN-SVD") and run[7] == k]
                    row.append(f"{100 * np.mean([c[4] for c in cell]):.1f} / {100 * np.mean([c[6] for c in cell]):.1f}")
                print(f"| {r:.0%} | " + " | ".join(row) + " |")
            print()
    secs = {m: np.median([run[5] for run in runs if run[2] == m]) for m in models}
    print("median training seconds: " + ", ".join(f"{m} {s:.1f}" for m, s in secs.items()))


if __name__ == "__main__":
    main()
