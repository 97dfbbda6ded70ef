"""Strength of the modification attacks on cora-legacy, and grb-dist's PR-BCD side by side
with torch_geometric's own ``PRBCDAttack``.

Protocol (GRB modification, black-box): the official cora split (full difficulty), a GCN
surrogate trained with seed 1 and a separately seeded GCN target (seed 0), both with the
grb-cora job's hyper-parameters; every attack flips at most 5% of the graph's edges (PGD
also changes the features of 5% of the targets); the target's accuracy on the targets after
the attack is reported with the drop from its clean accuracy.

The comparison runs both PR-BCD implementations on the same surrogate weights (loaded into a
torch_geometric GCN for ``PRBCDAttack``, which needs ``edge_weight``; its clean logits are
checked equal to grb-dist's), the same budget, block size, steps and learning-rate factor,
interleaved, one repeat per seed. torch_geometric's attack is global: its flips need not
touch a target, which GRB's threat model requires, so their number is reported as well.

    python bench/attacks/modification.py                 # both parts
    python bench/attacks/modification.py --part strength
    python bench/attacks/modification.py --part prbcd --seeds 0,1,2 --pyg-losses margin
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from grb_dist.models.tensors import graph_tensors

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import cora_legacy, require, timed  # noqa: E402


def setup():
    from grb_dist.datasets import load_dataset
    from grb_dist.defenses import resolve_params, train_defense
    from grb_dist.models.train import TrainConfig
    from grb_dist.sweep.job import default_job_path, load_job
    from grb_dist.core.config import to_dict

    spec = load_job(default_job_path("grb-cora"))
    graph = load_dataset(str(require(cora_legacy(), "cora-legacy")), normalize=spec.normalize, seed=spec.seed)
    params, overrides = resolve_params("gcn", spec.models)
    train = {**to_dict(spec.train), **overrides}
    surrogate = train_defense("gcn", graph, params, TrainConfig(**{**train, "seed": spec.seed + 1})).model.eval()
    target = train_defense("gcn", graph, params, TrainConfig(**{**train, "seed": spec.seed})).model.eval()
    return spec, graph, surrogate, target


def accuracy(graph, target, perturbed, targets) -> float:
    from grb_dist.evaluation.evaluate import predict_tensors

    pred = predict_tensors(target, perturbed)
    return float((pred[targets] == perturbed.y[targets]).float().mean())


def strength(spec, graph, surrogate, target, seeds: list[int]) -> None:
    from grb_dist.attacks import build_attack
    from grb_dist.models.tensors import apply_modification

    t = graph.targets("full")
    clean = graph_tensors(graph)
    base = accuracy(graph, target, clean, t)
    print(f"\n## strength on {graph.name} (full: {t.size} targets, {graph.num_edges} edges, 5% budget), "
          f"clean target accuracy {base:.4f}")
    print("| attack | flips (removed / added) | features changed | accuracy after | drop (pts) | seconds |")
    print("|---|---|---:|---:|---:|---:|")
    for name in spec.scenario_attacks("modification"):
        accs, secs = [], []
        for seed in seeds:
            attack = build_attack(name, spec.attack_params(name, "full", seed, "modification"), "modification")
            seconds, mod = timed(attack.attack, graph, surrogate, t)
            secs.append(seconds)
            accs.append(accuracy(graph, target, apply_modification(clean, mod), t))
        a = float(np.mean(accs))
        print(f"| {name} | {mod.n_edge_flips} ({mod.removed.shape[1]} / {mod.added.shape[1]}) | "
              f"{mod.n_nodes_modified} | {a:.4f} | {100 * (base - a):.1f} | {np.median(secs):.1f} |", flush=True)


def pyg_gcn(surrogate):
    """A torch_geometric GCN (normalising GCNConv layers) holding the surrogate's weights."""
    from torch_geometric.nn import GCNConv

    class PyGGCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList(
                GCNConv(layer.lin.in_channels, layer.lin.out_channels) for layer in surrogate.layers)
            for conv, layer in zip(self.convs, surrogate.layers):
                conv.lin.weight.data.copy_(layer.lin.weight.data)
                conv.bias.data.copy_(layer.bias.data)

        def forward(self, x, edge_index, edge_weight=None):
            for i, conv in enumerate(self.convs):
                x = conv(x, edge_index, edge_weight)
                if i < len(self.convs) - 1:
                    x = torch.relu(x)
            return x

    return PyGGCN().eval()


def compare_prbcd(spec, graph, surrogate, target, seeds: list[int], pyg_losses: list[str]) -> None:
    import warnings

    from grb_dist.attacks import build_attack
    from grb_dist.models.tensors import TorchGraph, apply_modification

    warnings.filterwarnings("ignore", message=".*contrib.*")
    from torch_geometric.contrib.nn import PRBCDAttack

    t = graph.targets("full")
    clean = graph_tensors(graph)
    base = accuracy(graph, target, clean, t)
    params = spec.attack_params("prbcd", "full", 0, "modification")
    ours_cfg = build_attack("prbcd", params, "modification")
    budget = ours_cfg.budget(graph, t.size).n_edge_mod
    steps = ours_cfg.config.steps
    from grb_dist.attacks.shared.relaxed import default_block_size
    from grb_dist.attacks.shared.flips import candidate_pairs

    block = default_block_size(budget, candidate_pairs(graph.num_nodes, t.size))
    model = pyg_gcn(surrogate)
    with torch.no_grad():
        gap = float((model(clean.x, clean.edge_index) - surrogate(clean.x, clean.edge_index)).abs().max())
        labels = surrogate(clean.x, clean.edge_index).argmax(1)
    assert gap < 1e-4, f"the torch_geometric copy of the surrogate differs by {gap}"
    print(f"\n## PR-BCD, grb-dist vs torch_geometric PRBCDAttack ({graph.name}, full, budget {budget} flips, "
          f"block {block:,}, {steps} steps, lr factor {ours_cfg.config.lr:g}; clean accuracy {base:.4f}; "
          f"surrogate copy max |logit gap| {gap:.1e})")
    print("| seed | implementation | loss | accuracy after | drop (pts) | flips | flips touching no target | seconds |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    is_target = np.zeros(graph.num_nodes, dtype=bool)
    is_target[t] = True
    rows = {"grb-dist": [], **{f"torch_geometric {loss}": [] for loss in pyg_losses}}
    for seed in seeds:
        attack = build_attack("prbcd", {**params, "seed": seed, "block_size": block}, "modification")
        s, mod = timed(attack.attack, graph, surrogate, t)
        a = accuracy(graph, target, apply_modification(clean, mod), t)
        rows["grb-dist"].append((a, s))
        print(f"| {seed} | grb-dist | {attack.config.loss} | {a:.4f} | {100 * (base - a):.1f} | {mod.n_edge_flips} | 0 | {s:.1f} |",
              flush=True)
        for loss in pyg_losses:
            torch.manual_seed(seed)
            pyg = PRBCDAttack(model, block_size=block, epochs=steps, epochs_resampling=int(0.8 * steps),
                              lr=ours_cfg.config.lr, loss=loss, log=False)
            s, (ei, flipped) = timed(pyg.attack, clean.x, clean.edge_index, labels, budget, torch.as_tensor(t))
            a = accuracy(graph, target, TorchGraph(clean.x, ei, clean.y), t)
            f = flipped.numpy()
            off = int((~(is_target[f[0]] | is_target[f[1]])).sum())
            rows[f"torch_geometric {loss}"].append((a, s))
            print(f"| {seed} | torch_geometric | {loss} | {a:.4f} | {100 * (base - a):.1f} | {f.shape[1]} | {off} | "
                  f"{s:.1f} |", flush=True)
    print()
    ours_s = np.median([r[1] for r in rows["grb-dist"]])
    for name, r in rows.items():
        a, s = np.mean([x[0] for x in r]), np.median([x[1] for x in r])
        print(f"{name}: mean drop {100 * (base - a):.1f} pts, median {s:.1f} s ({s / ours_s:.1f}x grb-dist's time)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("all", "strength", "prbcd"), default="all")
    ap.add_argument("--seeds", default="0,1,2", help="attack seeds (repeats)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pyg-losses", default="prob_margin,margin",
                    help="losses of torch_geometric's PRBCDAttack (its default is prob_margin)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"$ python bench/attacks/modification.py {' '.join(sys.argv[1:])}  (torch {torch.__version__}, "
          f"{args.threads} thread(s))")
    spec, graph, surrogate, target = setup()
    if args.part in ("all", "strength"):
        strength(spec, graph, surrogate, target, seeds)
    if args.part in ("all", "prbcd"):
        compare_prbcd(spec, graph, surrogate, target, seeds, args.pyg_losses.split(","))


if __name__ == "__main__":
    main()
