"""grb-dist's DICE, RND, PGD and GR-BCD next to their reference implementations on the same
graph, budget and surrogate: DeepRobust 0.2.11's ``DICE``, ``Random`` and ``PGDAttack``
(topology), torch_geometric's ``GRBCDAttack``; accuracy after the attack, seconds, peak memory.

    bash bench/poisoning/peers.sh                 # once: DeepRobust's venv
    python bench/attacks/compare_peers_modification.py --rounds 3 --threads 1 --peer-speedups
    python bench/attacks/compare_peers_modification.py --attacks grbcd --rounds 1   # one attack

Graph: Pro-GNN's Cora as the poisoning scripts load it (``bench/poisoning/compare_metattack.py``'s
``load_graph``: the largest connected component of ``npz/cora.npz``, 2,485 nodes, 5,069
edges, raw binary features, Pro-GNN's split 247 / 249 / 1,988; DeepRobust's runner builds
the same component with ``deeprobust_metattack.load_lcc``). Data: ``--data`` (a folder with
``npz/`` and ``prognn/splits/``) or the first of ``bench/common.py``'s data folders that has them.

Budget: ``int(rate * edges)`` flips on every side (5%: 253), given to grb-dist as ``n_edge_mod``.

Surrogate: one grb-dist GCN (hidden 16, dropout 0.5, 200 epochs, the weights of the lowest
validation loss, trained transductively with ``--surrogate-seed``) trained once in the parent;
its weights go to every child as an ``.npz`` (no pickle). grb-dist loads them into its GCN,
torch_geometric's side into a ``GCNConv`` copy (``bench/attacks/modification.py``'s
``pyg_gcn``), DeepRobust's into its ``GCN(nhid=16)`` (``gc1.weight`` = our first layer's
weight transposed): each child checks that its copy's log-probabilities equal the parent's
(the largest gap is in the report). "Clean predictions" below are this surrogate's.

What each pair runs (the reference as its example or documentation runs it; grb-dist set to
match where it can):

- ``dice``: DeepRobust ``DICE().attack(adj, labels, n)`` (true labels of every node, as its
  ``examples/graph/test_dice.py``; each flip a removal or an insertion with probability 1/2;
  removals among all same-label edges, insertions among all different-label pairs).
  grb-dist ``dice`` built for the poisoning scenario, fighting its unlabelled nodes (val +
  test: flips touch one of them), given the same true labels (``labels=``), half the
  budget removals (``add_ratio`` 0.5, rounded, not drawn). ``grb-dist:predicted`` is grb-dist's
  default instead: the surrogate's predictions as labels (GRB never shows the test labels).
- ``rnd``: DeepRobust ``Random().attack(adj, n, type=--random-type)`` (default ``flip``:
  ``n`` uniform node pairs, each flipped; its own default ``add`` only adds). grb-dist ``rnd``
  (``n`` uniform pairs touching an unlabelled node, each flipped), poisoning scenario.
- ``pgd``: DeepRobust ``PGDAttack(loss_type="CE")`` as its ``examples/graph/test_pgd.py``
  calls it: ``attack(features, adj, labels, idx_train + idx_test, n, epochs=--pgd-steps)``
  with the labels true on the training nodes and the surrogate's clean predictions elsewhere
  (the example means this; its concatenation lines them up only for Planetoid's split, so
  the labels are built by index here), features and adjacency dense; steps of
  ``200 / sqrt(t + 1)`` on the raw gradient, projection onto the budget, 20 Bernoulli
  samples, the most damaging kept; every node pair a candidate. grb-dist ``pgd`` with the
  same nodes and labels (``targets`` = train + test, ``labels=``), ``loss: ce``, ``steps`` the
  same, ``lr = 200 * N / n`` (its step is ``lr * n / N / sqrt(t + 1)``: the same 200),
  ``n_samples: 20`` (it also keeps the top-``n`` mask as a candidate), and as candidates
  every clean edge touching a target plus ``n_candidate_pairs`` = every absent pair touching
  one (drawn: 8 rounds of uniform draws reach most, not all, of them; the report gives how
  many). Its feature part is switched off as far as the config allows (``n_node_mod: 1``,
  ``feat_step_size: 1e-30``) and only its flips are applied. ``grb-dist:default-candidates``
  is the same with grb-dist's default candidate set (the target edges plus 20 x the budget,
  at least 10,000, random absent pairs).
- ``grbcd``: torch_geometric ``GRBCDAttack(model, block_size, epochs, loss)`` (global: any
  pair) on ``idx_attack`` = the test nodes against the surrogate's clean predictions, one
  run per ``--pyg-losses`` loss (``margin``: the same loss as grb-dist's; ``masked``, its
  default: cross-entropy on the still-correct nodes, which grb-dist does not have). grb-dist
  ``grbcd``, targets = the test nodes (flips touch one), same labels, ``loss: margin``,
  ``steps`` = ``epochs`` = ``--grbcd-steps``, ``block_size`` = ``--block-size``.

Rounds (``--rounds``, seed ``--seed + r``): every (attack, tool) runs in a child process of its
own, the tools of an attack one after the other, the order reversed every other round (a
slow spell of the machine falls on all sides). DeepRobust's child runs under
``--peer-python`` (the venv of ``bench/poisoning/peers.sh``) and never imports grb_dist;
``--peer-speedups`` computes its dense normalisation ``diag(r) (A + I) diag(r)``
elementwise instead of with two N x N x N products (the same values:
``deeprobust_metattack.py``'s ``elementwise_normalization``); only PGD uses it.

What is measured:

* seconds: wall time (``time.perf_counter``) of building the attack and running it inside the
  child (not the interpreter start, imports, data or weights); the median over the rounds and
  the ratio of medians reference / grb-dist. ``cpu_seconds`` (``time.process_time``) over the
  same span is in the reports.
* peak RSS: the child's ``getrusage(RUSAGE_SELF).ru_maxrss`` over its whole life; the
  maximum over the rounds.
* strength, both on the perturbed graph the child returns (flips only), test nodes
  (``idx_test``): **evasion**, the surrogate's own accuracy (the attacked model, not
  retrained: how ``test_pgd.py`` and torch_geometric's ``rbcd_attack.py`` example score
  PGD and GR-BCD), mean ± std over the rounds; **poisoning**, a GCN trained on the perturbed
  graph (``compare_metattack.py``'s strength GCN: hidden 16, dropout 0.5, 200 epochs, the
  weights of the lowest validation loss; seeds 0 .. ``--gcn-seeds`` - 1; how DeepRobust's
  DICE and Random examples score), mean ± std over every (round, seed). Lower is stronger.

Output: a progress line per child, then per attack a Markdown table (tool, seconds, peak
RSS, flips, evasion and poisoning accuracy) and the lines the fidelity matrix copies.
``--out DIR`` keeps the perturbed graphs, reports and children's logs (default: a temporary
folder, removed at the end).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # bench/: the shared helpers (standard library only)
sys.path.insert(0, str(HERE.parent / "poisoning"))  # the DeepRobust runner's helpers
sys.path.insert(0, str(HERE))
from common import peak_rss_mib, run_child, timed  # noqa: E402
from compare_metattack import DEFAULT_PEER_VENV  # noqa: E402  (peers.sh's folder, $PEER_VENV overrides)

#: The tools run per attack, the reference first (``grb-dist:VARIANT`` and ``torch_geometric:LOSS``
#: name variants).
ATTACKS = ("dice", "rnd", "pgd", "grbcd")
REFERENCE = {"dice": "DeepRobust DICE", "rnd": "DeepRobust Random", "pgd": "DeepRobust PGDAttack (topology)",
             "grbcd": "torch_geometric GRBCDAttack"}
SURROGATE = {"hidden_sizes": [16], "dropout": 0.5}


def tools_of(attack: str, args) -> list[str]:
    if attack == "dice":
        return ["deeprobust", "grb-dist", "grb-dist:predicted"]
    if attack == "rnd":
        return ["deeprobust", "grb-dist"]
    if attack == "pgd":
        return ["deeprobust", "grb-dist", "grb-dist:default-candidates"]
    return [f"torch_geometric:{loss}" for loss in args.pyg_losses.split(",")] + ["grb-dist"]


# ------------------------------------------------------------------------------------ shared


def save_adjacency(path: Path, adj: sp.spmatrix) -> dict:
    """Save a symmetric 0/1 adjacency (CSR, float32); returns its edge count."""
    adj = sp.csr_matrix(adj, dtype=np.float32)
    adj.setdiag(0)
    adj.eliminate_zeros()
    adj.data[:] = 1.0
    path.parent.mkdir(parents=True, exist_ok=True)
    sp.save_npz(path, adj)
    return {"edges_after": int(adj.nnz // 2), "symmetric": bool(abs(adj - adj.T).nnz == 0)}


def flip_counts(clean: sp.spmatrix, perturbed: sp.spmatrix, mask: np.ndarray | None = None) -> dict:
    """Added / removed edges of ``perturbed`` against ``clean``; with ``mask`` (nodes), also
    the flips touching none of them."""
    diff = sp.triu(sp.csr_matrix(perturbed, dtype=np.float32) - sp.csr_matrix(clean, dtype=np.float32), k=1).tocoo()
    keep = diff.data != 0
    out = {"flips": int(keep.sum()), "added": int((diff.data > 0).sum()), "removed": int((diff.data < 0).sum())}
    if mask is not None:
        r, c = diff.row[keep], diff.col[keep]
        out["flips_touching_none"] = int((~(mask[r] | mask[c])).sum())
    return out


def finish(report: dict, output: Path, clean: sp.spmatrix, perturbed: sp.spmatrix, mask: np.ndarray | None) -> None:
    report.update(save_adjacency(output, perturbed))
    report.update(flip_counts(clean, perturbed, mask))
    report["peak_rss_mib"] = peak_rss_mib()
    report["adjacency"] = str(output)
    output.with_suffix(".json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(json.dumps(report, default=str), flush=True)


def seed_all(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# ---------------------------------------------------------------------- the DeepRobust child


def _child_arguments(ap: argparse.ArgumentParser) -> None:
    """The arguments both children take: the graph, split and surrogate files, the rate, the
    seed, the output file and the thread count."""
    ap.add_argument("npz", type=Path)
    ap.add_argument("split", type=Path)
    ap.add_argument("surrogate", type=Path)
    ap.add_argument("rate", type=float)
    ap.add_argument("seed", type=int)
    ap.add_argument("output", type=Path)
    ap.add_argument("--threads", type=int, default=1)


def deeprobust_worker(argv: list[str]) -> None:
    """Child in DeepRobust's venv (never imports grb_dist): one attack, one seed."""
    ap = argparse.ArgumentParser(prog="compare_peers_modification.py deeprobust-worker")
    ap.add_argument("attack", choices=("dice", "rnd", "pgd"))
    _child_arguments(ap)
    ap.add_argument("--speedups", action="store_true")
    ap.add_argument("--random-type", default="flip")
    ap.add_argument("--pgd-steps", type=int, default=100)
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    from deeprobust_metattack import elementwise_normalization, import_deeprobust, load_lcc

    GCN, _, _, version = import_deeprobust()
    from deeprobust.graph.global_attack import DICE, PGDAttack, Random

    if args.speedups:
        elementwise_normalization()
    adj, features, labels = load_lcc(args.npz)
    split = json.loads(args.split.read_text())
    idx_train, idx_test = (np.asarray(split[k], dtype=np.int64) for k in ("idx_train", "idx_test"))
    n = adj.shape[0]
    budget = int(args.rate * int(adj.sum() // 2))
    report = {"tool": "deeprobust", "deeprobust_version": version, "torch_version": torch.__version__,
              "threads": torch.get_num_threads(), "attack": args.attack, "seed": args.seed, "nodes": n,
              "n_perturbations": budget, "speedups": args.speedups}
    seed_all(args.seed)

    if args.attack == "pgd":
        with np.load(args.surrogate, allow_pickle=False) as z:
            weights = {k: z[k] for k in z.files}
        model = GCN(nfeat=features.shape[1], nhid=16, nclass=int(labels.max()) + 1, dropout=0.5, device="cpu")
        with torch.no_grad():
            for ours, theirs in (("layers.0", model.gc1), ("layers.1", model.gc2)):
                theirs.weight.copy_(torch.as_tensor(weights[f"{ours}.lin.weight"]).T)
                theirs.bias.copy_(torch.as_tensor(weights[f"{ours}.bias"]))
        model.eval()
        from deeprobust.graph import utils

        dense_adj = torch.as_tensor(adj.toarray(), dtype=torch.float32)
        dense_x = torch.as_tensor(features.toarray(), dtype=torch.float32)
        with torch.no_grad():
            logp = model(dense_x, utils.normalize_adj_tensor(dense_adj))
        report["surrogate_max_gap"] = float((logp - torch.as_tensor(weights["log_probs"])).abs().max())
        pred = logp.argmax(1).numpy()
        fake = pred.copy()
        fake[idx_train] = labels[idx_train]
        idx_fake = np.concatenate([idx_train, idx_test])
        report["settings"] = (f"PGDAttack(loss_type='CE'), attack(dense X, dense A, labels true on train / predicted "
                              f"elsewhere, idx_train + idx_test, {budget}, epochs={args.pgd_steps})")

        def run():
            attack = PGDAttack(model=model, nnodes=n, loss_type="CE", device="cpu").to("cpu")
            attack.attack(dense_x.numpy(), dense_adj.numpy(), fake, idx_fake, budget, epochs=args.pgd_steps)
            return sp.csr_matrix(attack.modified_adj.detach().numpy())
    elif args.attack == "dice":
        report["settings"] = f"DICE().attack(adj, true labels, {budget})"

        def run():
            attack = DICE()
            attack.attack(adj, labels, budget)
            return attack.modified_adj.tocsr()
    else:
        report["settings"] = f"Random().attack(adj, {budget}, type={args.random_type!r})"

        def run():
            attack = Random()
            attack.attack(adj, budget, type=args.random_type)
            return attack.modified_adj.tocsr()

    cpu0 = time.process_time()
    with contextlib.redirect_stdout(sys.stderr):  # DeepRobust prints, tqdm bars
        seconds, perturbed = timed(run)
    report["seconds"], report["cpu_seconds"] = seconds, time.process_time() - cpu0
    finish(report, args.output, adj, perturbed, None)


# -------------------------------------------------------------- the grb-dist and PyG children


def load_surrogate(graph, path: Path):
    """grb-dist's GCN with the weights saved at ``path``, and its largest log-probability gap."""
    import torch

    from grb_dist.defenses import build_defense
    from grb_dist.models.tensors import graph_tensors

    with np.load(path, allow_pickle=False) as z:
        weights = {k: z[k] for k in z.files}
    model = build_defense("gcn", graph, SURROGATE)
    model.load_state_dict({k: torch.as_tensor(v) for k, v in weights.items() if k != "log_probs"})
    model.eval()
    t = graph_tensors(graph)
    with torch.no_grad():
        logp = torch.log_softmax(model(t.x, t.edge_index), 1)
    return model, float((logp - torch.as_tensor(weights["log_probs"])).abs().max())


def adjacency(graph) -> sp.csr_matrix:
    n, ei = graph.num_nodes, graph.edge_index
    return sp.csr_matrix((np.ones(ei.shape[1], dtype=np.float32), (ei[0], ei[1])), shape=(n, n))


def grb_worker(argv: list[str]) -> None:
    """Child in the project's environment: grb-dist's attack (``grb-dist[:variant]``) or
    torch_geometric's ``GRBCDAttack`` (``torch_geometric:LOSS``), one seed."""
    ap = argparse.ArgumentParser(prog="compare_peers_modification.py grb-dist-worker")
    ap.add_argument("attack", choices=ATTACKS)
    ap.add_argument("tool")
    _child_arguments(ap)
    ap.add_argument("--pgd-steps", type=int, default=100)
    ap.add_argument("--grbcd-steps", type=int, default=125)
    ap.add_argument("--block-size", type=int, default=100_000)
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    import grb_dist
    from compare_metattack import load_graph
    from grb_dist.attacks import build_attack
    from grb_dist.attacks.poisoning.base import poisoning_targets
    from grb_dist.attacks.shared.flips import candidate_pairs
    from grb_dist.models.tensors import graph_tensors

    graph, how = load_graph(args.npz, args.split, "cora")
    surrogate, gap = load_surrogate(graph, args.surrogate)
    n = graph.num_nodes
    budget = int(args.rate * graph.num_edges)
    t = graph_tensors(graph)
    with torch.no_grad():
        pred = surrogate(t.x, t.edge_index).argmax(1).numpy()
    train, test = graph.split["train"], graph.split["test_full"]
    report = {"tool": args.tool, "attack": args.attack, "seed": args.seed, "graph": how, "nodes": n,
              "n_perturbations": budget, "surrogate_max_gap": gap, "torch_version": torch.__version__,
              "threads": torch.get_num_threads(), "grb_dist_version": getattr(grb_dist, "__version__", "?")}
    seed_all(args.seed)
    base = {"n_edge_mod": budget, "seed": args.seed}
    labels = None
    if args.attack in ("dice", "rnd"):
        scenario, targets = "poisoning", poisoning_targets(graph)
        params = base
        if args.attack == "dice" and args.tool == "grb-dist":
            labels = graph.labels
    elif args.attack == "pgd":
        scenario, targets = "modification", np.union1d(train, test)
        labels = pred.copy()
        labels[train] = graph.labels[train]
        is_t = np.zeros(n, dtype=bool)
        is_t[targets] = True
        ei = graph.edge_index
        target_edges = int(((ei[0] < ei[1]) & (is_t[ei[0]] | is_t[ei[1]])).sum())
        absent = candidate_pairs(n, targets.size) - target_edges
        params = {**base, "loss": "ce", "steps": args.pgd_steps, "lr": 200.0 * n / budget, "n_samples": 20,
                  "n_node_mod": 1, "feat_step_size": 1e-30}
        if args.tool == "grb-dist":
            params["n_candidate_pairs"] = absent
        report["absent_pairs_touching_a_target"] = absent
    else:
        scenario, targets = "modification", test
        labels = pred
        params = {**base, "loss": "margin", "steps": args.grbcd_steps, "block_size": args.block_size}
    mask = np.zeros(n, dtype=bool)
    mask[targets] = True
    clean = adjacency(graph)

    if args.tool.startswith("torch_geometric:"):
        import warnings

        warnings.filterwarnings("ignore", message=".*contrib.*")
        from modification import pyg_gcn
        from torch_geometric.contrib.nn import GRBCDAttack

        loss = args.tool.split(":", 1)[1]
        model = pyg_gcn(surrogate)
        with torch.no_grad():
            copy = torch.log_softmax(model(t.x, t.edge_index), 1)
            ours = torch.log_softmax(surrogate(t.x, t.edge_index), 1)
        report["pyg_copy_max_gap"] = float((copy - ours).abs().max())
        report["settings"] = (f"GRBCDAttack(block_size={args.block_size}, epochs={args.grbcd_steps}, loss={loss!r}), "
                              f"idx_attack = test, labels = the surrogate's predictions")

        def run():
            attack = GRBCDAttack(model, block_size=args.block_size, epochs=args.grbcd_steps, loss=loss, log=False)
            ei, _ = attack.attack(t.x, t.edge_index, torch.as_tensor(labels), budget, torch.as_tensor(test))
            ei = ei.numpy()
            return sp.csr_matrix((np.ones(ei.shape[1], dtype=np.float32), (ei[0], ei[1])), shape=(n, n))
    else:
        report["settings"] = {"scenario": scenario, "targets": int(targets.size), "labels":
                              "the surrogate's predictions" if labels is None else "given", **params}

        def run():
            attack = build_attack(args.attack, params, scenario)
            mod = attack.attack(graph, surrogate, targets, labels=labels)
            keys = lambda e: e[0] * n + e[1]  # noqa: E731
            ei = graph.edge_index
            kept = np.setdiff1d(keys(ei[:, ei[0] < ei[1]]), keys(mod.removed))
            new = np.union1d(kept, keys(mod.added))
            u, v = new // n, new % n
            return sp.csr_matrix((np.ones(2 * new.size, dtype=np.float32), (np.r_[u, v], np.r_[v, u])), shape=(n, n))

        if args.attack == "pgd":
            # how many candidates the draw reached (the same generator stream as the attack's)
            from grb_dist.attacks.shared.flips import draw_pairs

            k = params.get("n_candidate_pairs") or max(20 * budget, 10_000)
            gen = torch.Generator().manual_seed(args.seed)
            edge_keys = np.sort(np.r_[graph.edge_index[0] * n + graph.edge_index[1]])
            report["candidate_absent_pairs"] = int(draw_pairs(n, k, gen, edge_keys, among=targets).shape[1])

    cpu0 = time.process_time()
    seconds, perturbed = timed(run)
    report["seconds"], report["cpu_seconds"] = seconds, time.process_time() - cpu0
    finish(report, args.output, clean, perturbed, mask)


# ------------------------------------------------------------------------------- the parent


def train_surrogate(graph, seed: int, path: Path) -> float:
    """Train the shared surrogate and save its weights and log-probabilities (``.npz``)."""
    import torch

    from grb_dist.defenses import train_defense
    from grb_dist.models.tensors import graph_tensors
    from grb_dist.models.train import TrainConfig

    seconds, trained = timed(train_defense, "gcn", graph, SURROGATE, TrainConfig(epochs=200, seed=seed),
                             transductive=True)
    model = trained.model.eval()
    t = graph_tensors(graph)
    with torch.no_grad():
        logp = torch.log_softmax(model(t.x, t.edge_index), 1)
    arrays = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    np.savez(path, log_probs=logp.numpy(), **arrays)
    return seconds


def evasion_accuracy(graph, surrogate_path: Path, adj_path: Path) -> float:
    import torch

    from compare_metattack import graph_with_adjacency
    from grb_dist.models.tensors import graph_tensors

    model, _ = load_surrogate(graph, surrogate_path)
    g = graph_with_adjacency(graph, adj_path) if adj_path else graph
    t = graph_tensors(g)
    test = torch.as_tensor(graph.split["test_full"])
    with torch.no_grad():
        pred = model(t.x, t.edge_index).argmax(1)
    return float((pred[test] == t.y[test]).float().mean())


def command(attack: str, tool: str, args, npz: Path, split: Path, surrogate: Path, seed: int, out: Path) -> list[str]:
    common = [str(npz), str(split), str(surrogate), str(args.rate), str(seed), str(out), "--threads", str(args.threads),
              "--pgd-steps", str(args.pgd_steps)]
    if tool == "deeprobust":
        cmd = [str(args.peer_python), str(Path(__file__).resolve()), "deeprobust-worker", attack, *common,
               "--random-type", args.random_type]
        return cmd + (["--speedups"] if args.peer_speedups else [])
    return [sys.executable, str(Path(__file__).resolve()), "grb-dist-worker", attack, tool, *common,
            "--grbcd-steps", str(args.grbcd_steps), "--block-size", str(args.block_size)]


def child_report(cmd: list[str], log: Path, timeout: float) -> dict:
    try:
        report = run_child(cmd[1:], python=cmd[0], log=log, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s (log: {log})"}
    return report if report is not None else {"error": f"no report (log: {log})\n{log.read_text()[-1500:]}"}


def mean_std(values: list[float]) -> str:
    if not values:
        return "-"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.mean(values):.2f} ± {100 * sd:.2f}"


def print_tables(args, graph, runs: dict, clean_evasion: float, clean_poison: list[float]) -> None:
    budget = int(args.rate * graph.num_edges)
    print(f"\nPro-GNN cora LCC: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges; budget {budget} flips "
          f"({args.rate:g}); {args.rounds} round(s), interleaved; torch threads {args.threads}; "
          f"load average at the end {os.getloadavg()[0]:.2f}")
    print(f"clean: evasion (the surrogate) {100 * clean_evasion:.2f}; poisoning GCN {mean_std(clean_poison)} "
          f"(seeds 0..{args.gcn_seeds - 1})")
    for attack in args.attacks:
        print(f"\n### {attack} vs {REFERENCE[attack]}\n")
        print("| tool | median s (each) | CPU s | peak RSS MiB | flips (+/-) | touching no target | "
              "evasion acc % | poisoning acc % |")
        print("|---|---|---:|---:|---|---:|---|---|")
        medians = {}
        for tool in tools_of(attack, args):
            reps = runs.get((attack, tool), [])
            ok = [r for r in reps if "error" not in r]
            if not ok:
                if reps:
                    print(f"| {tool} | failed: {reps[0]['error'].splitlines()[0]} | | | | | | |")
                continue
            secs = [r["seconds"] for r in ok]
            medians[tool] = statistics.median(secs)
            cpu = statistics.median(r["cpu_seconds"] for r in ok)
            rss = max(r["peak_rss_mib"] for r in ok)
            fl = f"{ok[0]['flips']} (+{ok[0]['added']}/-{ok[0]['removed']})"
            off = ok[0].get("flips_touching_none", "-")
            ev = [r["evasion"] for r in ok]
            po = [a for r in ok for a in r["poisoning"]]
            print(f"| {tool} | {medians[tool]:.2f} ({', '.join(f'{s:.2f}' for s in secs)}) | {cpu:.2f} | {rss:.0f} | "
                  f"{fl} | {off} | {mean_std(ev)} | {mean_std(po)} |")
        ref = [t for t in medians if not t.startswith("grb-dist")]
        if "grb-dist" in medians:
            for r in ref:
                print(f"seconds {r} / grb-dist: {medians[r] / medians['grb-dist']:.2f}x")
        for tool in tools_of(attack, args):
            for rep in runs.get((attack, tool), [])[:1]:
                extra = {k: rep[k] for k in ("surrogate_max_gap", "pyg_copy_max_gap", "candidate_absent_pairs",
                                             "absent_pairs_touching_a_target", "settings") if k in rep}
                print(f"{tool}: {json.dumps(extra, default=str)}")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["deeprobust-worker"]:
        return deeprobust_worker(argv[1:])
    if argv[:1] == ["grb-dist-worker"]:
        return grb_worker(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attacks", default=",".join(ATTACKS), help="comma list of dice, rnd, pgd, grbcd")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0, help="round r uses seed + r")
    ap.add_argument("--rate", type=float, default=0.05)
    ap.add_argument("--data", type=Path, default=None, help="a folder holding npz/ and prognn/splits/")
    ap.add_argument("--peer-python", type=Path, default=DEFAULT_PEER_VENV / "bin" / "python",
                    help="python of the DeepRobust venv (bench/poisoning/peers.sh)")
    ap.add_argument("--peer-speedups", action="store_true",
                    help="DeepRobust's dense normalisation elementwise (same values; PGD)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of every child")
    ap.add_argument("--surrogate-seed", type=int, default=0)
    ap.add_argument("--pgd-steps", type=int, default=100, help="PGD steps (test_pgd.py's --epochs default)")
    ap.add_argument("--grbcd-steps", type=int, default=125, help="GR-BCD epochs (GRBCDAttack's default)")
    ap.add_argument("--block-size", type=int, default=100_000, help="GR-BCD block (grb-dist's default on cora)")
    ap.add_argument("--pyg-losses", default="margin,masked", help="losses of torch_geometric's GRBCDAttack")
    ap.add_argument("--random-type", default="flip", choices=("flip", "add", "remove"),
                    help="DeepRobust Random's type (its default: add)")
    ap.add_argument("--gcn-seeds", type=int, default=3, help="seeds of the poisoning GCN per graph")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds allowed to one child")
    ap.add_argument("--out", type=Path, default=None, help="keep outputs here (default: a temporary folder)")
    args = ap.parse_args(argv)
    args.attacks = [a for a in args.attacks.split(",") if a]
    bad = [a for a in args.attacks if a not in ATTACKS]
    if bad:
        sys.exit(f"unknown attack(s) {bad}; choose among {', '.join(ATTACKS)}")
    needs_peer = any(a != "grbcd" for a in args.attacks)
    if needs_peer and not Path(args.peer_python).exists():
        sys.exit(f"no DeepRobust venv at {args.peer_python}: run bench/poisoning/peers.sh or pass --peer-python")

    import torch

    torch.set_num_threads(args.threads)
    from compare_metattack import data_files, gcn_accuracies, graph_with_adjacency, load_graph

    npz, split = data_files(args.data, "cora")
    graph, how = load_graph(npz, split, "cora")
    print(f"$ python bench/attacks/compare_peers_modification.py {' '.join(argv)}  (torch {torch.__version__}; "
          f"load average {os.getloadavg()[0]:.2f}; graph: {how})", flush=True)
    out = args.out or Path(tempfile.mkdtemp(prefix="compare-peers-modification-"))
    out.mkdir(parents=True, exist_ok=True)
    surrogate = out / "surrogate.npz"
    print(f"surrogate trained in {train_surrogate(graph, args.surrogate_seed, surrogate):.1f} s", flush=True)
    runs: dict[tuple[str, str], list[dict]] = {}
    try:
        for r in range(args.rounds):
            seed = args.seed + r
            for attack in args.attacks:
                tools = tools_of(attack, args)
                for tool in (tools if r % 2 == 0 else tools[::-1]):
                    stem = f"{attack}_{tool.replace(':', '-')}_seed{seed}"
                    report = child_report(command(attack, tool, args, npz, split, surrogate, seed, out / f"{stem}.npz"),
                                          out / f"{stem}.log", args.timeout)
                    runs.setdefault((attack, tool), []).append(report)
                    msg = (f"failed: {report['error'].splitlines()[0]}" if "error" in report else
                           f"{report['seconds']:.2f} s, {report['peak_rss_mib']:.0f} MiB, {report['flips']} flips")
                    print(f"round {r + 1}/{args.rounds} seed {seed} {attack} {tool}: {msg}", flush=True)
        print("strength: the surrogate on every perturbed graph (evasion), a GCN trained on it (poisoning) ...",
              flush=True)
        clean_evasion = evasion_accuracy(graph, surrogate, None)
        clean_poison = gcn_accuracies(graph, args.gcn_seeds)
        for reports in runs.values():
            for rep in reports:
                if "error" not in rep:
                    path = Path(rep["adjacency"])
                    rep["evasion"] = evasion_accuracy(graph, surrogate, path)
                    rep["poisoning"] = gcn_accuracies(graph_with_adjacency(graph, path), args.gcn_seeds)
        (out / "summary.json").write_text(json.dumps(
            {"runs": {f"{a} {t}": v for (a, t), v in runs.items()}, "clean_evasion": clean_evasion,
             "clean_poisoning": clean_poison}, indent=1, default=str) + "\n")
        print_tables(args, graph, runs, clean_evasion, clean_poison)
    finally:
        if args.out is None:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
