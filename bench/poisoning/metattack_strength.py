"""Metattack on Cora (Pro-GNN setting): time, peak memory and strength against a GCN.

Graph: the largest connected component of the Nettack-release ``cora.npz`` (2,485 nodes,
5,069 edges), Pro-GNN's split (``idx_train`` / ``idx_val`` / ``idx_test``; the test set also
cut into three thirds for the difficulty keys), raw binary features. The attack's budget is
``int(rate * edges)`` flips, as DeepRobust and Pro-GNN count it (253 at 5%).

For each rate the attack runs in a subprocess (``attack`` mode) so that its peak resident
memory (``resource.getrusage``) is its own; its wall time covers ``attack()`` alone (the
surrogate that labels the unlabelled nodes is trained before the clock starts). Then a GCN
(hidden 16, dropout 0.5, lr 0.01, weight decay 5e-4, 200 epochs, best validation loss,
transductive) is trained on the clean graph, on each perturbed graph and on Pro-GNN's
published Metattack perturbation of the same rate, for every seed, and its test accuracy
is reported as mean and standard deviation.

    python bench/poisoning/metattack_strength.py --data DATA --rates 0.05 0.1 0.2 --seeds 0 1 2 3 4
    python bench/poisoning/metattack_strength.py --data DATA --rates 0.05 --threads 1 --set flips_per_step=4
    python bench/poisoning/metattack_strength.py --data DATA --rates 0.05 --attack meta_prbcd

``--mode ablation`` times one greedy step of the meta-gradient computed five ways (one
thread, CPU time), from dense autograd through the training with respect to an N x N
adjacency (DeepRobust's computation) to the shipped one, one change per row.

``DATA`` holds ``npz/cora.npz`` and ``prognn/`` (``splits/``, ``meta/``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import NPZ, PROGNN, emit, peak_rss_mib, run_child, setting, timed  # noqa: E402


def load_cora(data: Path):
    """The Pro-GNN Cora graph (its largest component, as ``compare_metattack.py`` builds it) with
    its split sorted and the test nodes cut into thirds (easy, medium, hard by index)."""
    from grb_dist.core.graph import Graph

    from compare_metattack import build_lcc_graph  # this folder: the script is run from its path

    g = build_lcc_graph(data / NPZ / "cora.npz", data / PROGNN / "splits" / "cora_prognn_splits.json", "cora")
    test = np.sort(g.split["test_full"])
    thirds = np.array_split(test, 3)
    split = {"train": np.sort(g.split["train"]), "val": np.sort(g.split["val"]), "test_full": test,
             "test_easy": thirds[0], "test_medium": thirds[1], "test_hard": thirds[2]}
    return Graph(features=g.features, edge_index=g.edge_index, labels=g.labels, split=split, name="cora-prognn",
                 num_classes=int(g.labels.max()) + 1)


def surrogate_of(graph, seed: int = 0):
    from grb_dist.defenses import train_defense
    from grb_dist.models.train import TrainConfig

    return train_defense("gcn", graph, {"hidden_sizes": [16]}, TrainConfig(epochs=200, seed=seed),
                         transductive=True).model


def run_attack(args) -> None:
    """``attack`` mode: perturb, save the flips, print one JSON line."""
    import torch

    from grb_dist.attacks import build_attack

    if args.threads:
        torch.set_num_threads(args.threads)
    graph = load_cora(args.data)
    surrogate = surrogate_of(graph)
    n_flips = int(args.rate * graph.num_edges)
    params = {"n_edge_mod": n_flips, "seed": args.seed, **dict(map(setting, args.set))}
    attack = build_attack(args.attack, params, "poisoning")
    cpu = time.process_time()
    seconds, mod = timed(attack.attack, graph, surrogate)
    cpu = time.process_time() - cpu
    np.savez(args.out, removed=mod.removed, added=mod.added)
    emit({"rate": args.rate, "attack": args.attack, "params": params, "seconds": seconds,
                      "cpu_seconds": cpu, "flips": int(mod.n_edge_flips), "added": int(mod.added.shape[1]),
                      "removed": int(mod.removed.shape[1]), "threads": torch.get_num_threads(),
                      "peak_rss_mib": peak_rss_mib()})


def run_ablation(args) -> None:
    """``ablation`` mode: CPU time of one greedy step (one thread) of the meta-gradient
    computed five ways, from the plain algorithm (dense autograd through the training with
    respect to an N x N adjacency, as DeepRobust computes it) to the shipped one; each
    row adds one change, and each result is compared with the shipped gradient."""
    import torch

    from grb_dist.attacks.poisoning.metattack import Adjacency, LinearizedGCN, add_degree_terms

    torch.set_num_threads(1)
    g = load_cora(args.data)
    n, train = g.num_nodes, g.split["train"]
    m = LinearizedGCN(g.features, train, g.labels, np.setdiff1d(np.arange(n), train), g.num_classes)
    ei = g.edge_index
    keys = np.unique(ei[0][ei[0] < ei[1]] * n + ei[1][ei[0] < ei[1]])
    adj = Adjacency.unweighted(n, keys)
    w1, w2 = m.init_weights(torch.Generator().manual_seed(0))
    tr, un, y = torch.as_tensor(train), torch.as_tensor(np.setdiff1d(np.arange(n), train)), torch.as_tensor(g.labels)
    lr, mom, iters, ce = 0.1, 0.9, 100, torch.nn.functional.cross_entropy

    def unrolled(w_1, w_2, forward):
        w_1, w_2 = w_1.clone().requires_grad_(), w_2.clone().requires_grad_()
        v1, v2 = torch.zeros_like(w_1), torch.zeros_like(w_2)
        for _ in range(iters):
            g1, g2 = torch.autograd.grad(ce(forward(w_1, w_2), y[tr]), (w_1, w_2), create_graph=True)
            v1, v2 = mom * v1 + g1, mom * v2 + g2
            w_1, w_2 = w_1 - lr * v1, w_2 - lr * v2
        return w_1, w_2

    def naive():
        a = torch.zeros(n, n)
        a[keys // n, keys % n] = 1
        change = torch.zeros(n, n, requires_grad=True)
        mod = a + a.T + change + change.T
        d = (mod.sum(1) + 1).rsqrt()
        ah = d[:, None] * (mod + torch.eye(n)) * d[None, :]
        out = lambda a1, a2: ah @ ((ah @ (m.xs @ a1)) @ a2)  # noqa: E731
        w_1, w_2 = unrolled(w1, w2, lambda a1, a2: out(a1, a2)[tr])
        return torch.autograd.grad(ce(out(w_1, w_2)[un], y[un]), change)[0]

    def dense_chain(grad_f):  # dL/dF (N x D) -> pair gradient through N x N products
        kt = m.xs @ grad_f.T.contiguous()
        t = adj.prop(kt + kt.T)
        return add_degree_terms(adj, (t + t.T).mul_(adj.s[:, None]).mul_(adj.s[None, :]))

    def f_autograd():
        f = m.train_features(adj).requires_grad_()
        w_1, w_2 = unrolled(w1, w2, lambda a1, a2: f @ a1 @ a2)
        _, delta, _, hid = m.evaluate(adj, w_1.detach(), w_2.detach())
        w1bar = m.xs_t @ adj.prop(adj.prop(delta @ w_2.detach().T))
        fbar = torch.autograd.grad((w_1 * w1bar).sum() + (w_2 * (hid.T @ delta)).sum(), f)[0]
        grad_f = delta @ (w_1 @ w_2).detach().T
        grad_f[tr] += fbar
        return dense_chain(grad_f)

    def kernel_adjoint():
        run = m.fit(m.train_features(adj), w1, w2)
        _, delta, _, hid = m.evaluate(adj, run.w1, run.w2)
        fbar = m._adjoint(run, m.xs_t @ adj.prop(adj.prop(delta @ run.w2.T)), hid.T @ delta)
        grad_f = delta @ (run.w1 @ run.w2).T
        grad_f[tr] += fbar
        return dense_chain(grad_f)

    def dense_features():
        shipped = m.train_features
        m.train_features = lambda a: a.prop(a.prop(m.x))[m.train]
        try:
            return m.meta_gradient(adj, w1, w2)[1]
        finally:
            m.train_features = shipped

    ref = m.meta_gradient(adj, w1, w2)[1]
    off = ~torch.eye(n, dtype=torch.bool)
    for name, f, reps in [("dense autograd, N x N adjacency", naive, 1),
                          ("training on F_L = (A^2 X)[train], autograd", f_autograd, 3),
                          ("+ kernel form, hand-written reverse pass", kernel_adjoint, 5),
                          ("+ low-rank pair gradient (shipped, dense F_L)", dense_features, 5),
                          ("+ sparse F_L product (shipped)", lambda: m.meta_gradient(adj, w1, w2)[1], 10)]:
        out = f()
        start = time.process_time()
        for _ in range(reps):
            f()
        cpu = (time.process_time() - start) / reps
        diff = float((out - ref)[off].abs().max() / ref[off].abs().max())
        print(f"{name:46s} {cpu * 1e3:9.1f} ms CPU per greedy step (max relative difference {diff:.1e})", flush=True)


def perturbed(graph, removed: np.ndarray, added: np.ndarray):
    """``graph`` with canonical pairs removed and added."""
    from grb_dist.core.graph import Modification
    from grb_dist.models.tensors import apply_modification, graph_tensors

    mod = Modification.build(removed, added, graph.num_nodes, graph.num_features)
    t = apply_modification(graph_tensors(graph), mod)
    return type(graph)(features=graph.features, edge_index=t.edge_index.numpy(), labels=graph.labels,
                       split=graph.split, name=graph.name, num_classes=graph.num_classes)


def published(graph, data: Path, rate: float):
    """Pro-GNN's Metattack perturbation of ``rate`` as a graph (same node order)."""
    path = data / "prognn" / "meta" / f"cora_meta_adj_{rate:g}.npz"
    if not path.exists():
        return None
    a = sp.load_npz(path).tocoo()
    m = a.row != a.col
    from grb_dist.core.graph import canonical_edges

    ei, _ = canonical_edges(a.row[m].astype(np.int64), a.col[m].astype(np.int64), graph.num_nodes)
    return type(graph)(features=graph.features, edge_index=ei, labels=graph.labels, split=graph.split,
                       name=graph.name, num_classes=graph.num_classes)


def gcn_accuracy(graph, seeds: list[int]) -> tuple[float, float, list[float]]:
    import torch

    from grb_dist.defenses import train_defense
    from grb_dist.models.train import TrainConfig

    accs = []
    test = torch.as_tensor(graph.split["test_full"])
    for seed in seeds:
        model = train_defense("gcn", graph, {"hidden_sizes": [16], "dropout": 0.5},
                              TrainConfig(lr=0.01, weight_decay=5e-4, epochs=200, patience=200, seed=seed),
                              transductive=True).model
        with torch.no_grad():
            pred = model(torch.as_tensor(graph.features), torch.as_tensor(graph.edge_index)).argmax(1)
        accs.append(float((pred[test] == torch.as_tensor(graph.labels)[test]).float().mean()))
    return float(np.mean(accs)), float(np.std(accs)), accs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--rates", type=float, nargs="+", default=[0.05])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--attack", default="metattack")
    ap.add_argument("--set", nargs="*", default=[], help="attack parameters KEY=VALUE (VALUE: JSON, else a string)")
    ap.add_argument("--seed", type=int, default=0, help="the attack's seed")
    ap.add_argument("--workdir", type=Path, default=Path("metattack_strength"))
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--mode", choices=("all", "attack", "ablation"), default="all")
    ap.add_argument("--rate", type=float, default=0.05)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.mode == "attack":
        run_attack(args)
        return
    if args.mode == "ablation":
        run_ablation(args)
        return
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    graph = load_cora(args.data)
    print(f"cora LCC: {graph.num_nodes} nodes, {graph.num_edges} edges, train {graph.split['train'].size}")
    mean, std, _ = gcn_accuracy(graph, args.seeds)
    print(f"clean: GCN test accuracy {100 * mean:.2f} +- {100 * std:.2f}")
    rows = [{"rate": 0.0, "clean": [mean, std]}]
    for rate in args.rates:
        out = args.workdir / f"{args.attack}_{rate:g}.npz"
        cmd = [__file__, "--mode", "attack", "--data", str(args.data), "--rate", str(rate),
               "--attack", args.attack, "--seed", str(args.seed), "--out", str(out), "--threads", str(args.threads),
               "--set", *args.set]
        report = run_child(cmd, check=True)
        z = np.load(out)
        ours = gcn_accuracy(perturbed(graph, z["removed"], z["added"]), args.seeds)
        pub = published(graph, args.data, rate)
        ref = gcn_accuracy(pub, args.seeds) if pub is not None else None
        print(f"rate {rate:g}: {report['flips']} flips (+{report['added']} / -{report['removed']}) in "
              f"{report['seconds']:.1f}s (CPU {report['cpu_seconds']:.1f}s, {report['threads']} threads), peak RSS {report['peak_rss_mib']:.0f} MiB; GCN test accuracy "
              f"{100 * ours[0]:.2f} +- {100 * ours[1]:.2f}"
              + (f"; published perturbation {100 * ref[0]:.2f} +- {100 * ref[1]:.2f}" if ref else ""))
        rows.append({"rate": rate, "attack": report, "ours": ours[:2], "published": ref[:2] if ref else None})
    (args.workdir / "results.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
