"""Side by side: grb-dist's Nettack next to DeepRobust's, same graph, surrogate, targets and budgets.

The claim checked (issue 53): grb-dist's Nettack is at least 10x faster per target than
DeepRobust's at equal or better success.

Data: ``<data>/npz/<dataset>.npz`` and ``<data>/prognn/splits/<dataset>_prognn_splits.json``
(Pro-GNN's split). Both tools load the graph with the same function (``load_lcc`` of
``bench/poisoning/deeprobust_metattack.py``: the largest connected component of the
symmetrised, unweighted adjacency, ascending node order; Cora: 2,485 nodes, 5,069 edges;
raw binary features). Targets: the first ``--targets`` (20) of Pro-GNN's attacked test nodes
(``<data>/prognn/nettack/<dataset>_nettacked_nodes.json``, ``attacked_test_nodes``) when the
file is there, else test nodes the surrogate classifies correctly; each fought for its true
label. Budget: the target's degree (``--budget degree``, the default) or a fixed count.

Surrogate: trained once, in this process, by ``grb_dist.attacks.targeted.nettack.train_linear_gcn``
(the paper's ``Â (Â X W1) W2``, hidden 16, Adam lr 0.01, weight decay 5e-4, 200 epochs, the
weights of the lowest validation loss); ``W1`` and ``W2`` go to both tools (DeepRobust's
``GCN(with_relu=False, with_bias=False)`` gets them as its two weight matrices; grb-dist
takes ``W1 @ W2``). Both run structure-only direct attacks with the degree test at 0.004.
DeepRobust computes in float32, grb-dist in float64: near-ties can go either way.

Rounds (``--rounds``, default 2): in each round one subprocess per tool attacks every
target in turn, one tool after the other, never at the same time, the order alternating
between rounds. What is measured:

* seconds per target: wall time (``time.perf_counter``) of one target's attack inside the
  child (DeepRobust: constructing ``Nettack`` and ``attack``; grb-dist: ``nettack``), not
  the imports, data loading or surrogate, nor one untimed warm-up attack per child (the first
  target, one flip; DeepRobust's numba compiles its scoring loop there). Table: the median
  over targets of each target's median over rounds, the largest, and the total over targets.
* peak RSS: the child's peak resident memory (``ru_maxrss``) over its whole life, the
  maximum over rounds.
* success, from the first round's flips, checked in this process the same way for both:
  *surrogate*: the linear surrogate misclassifies the target on the perturbed graph;
  *evasion*: a GCN (hidden 16, dropout 0.5, 200 epochs, grb-dist's trainer) trained on the
  clean graph misclassifies it on the perturbed one; *poisoning*: a GCN of the same kind
  retrained on each perturbed graph misclassifies it (seeds ``0 .. --gcn-seeds - 1``, the
  mean). Also: the mean margin of the surrogate after the attack, flips made.

FGA (``--attack fga``): the same graph, targets, labels fought, budgets and surrogate; grb-dist's
targeted ``fga`` (``grb_dist.attacks.targeted.fga``, budget ``n_flips`` = the target's) on
the surrogate as an SGC (k = 2, no hidden layer, weight ``(W1 W2)^T``, bias 0: the same
``Â² X W1 W2``), one ``attack`` call per target with the fought labels given; DeepRobust's
``FGA`` on its linear GCN carrying ``W1``, ``W2`` (``deeprobust_nettack.py --attack fga``).
What differs: DeepRobust's differentiates a dense N x N adjacency and always makes ``budget``
flips (the largest gain even when negative, a pair possibly flipped back), grb-dist's flips a
pair at most once and stops when no flip has a positive gain. Flips are compared as sets.
``--peer-speedups``: DeepRobust's dense normalisation computed elementwise (the same values;
``deeprobust_nettack.py --speedups``); as it ships, its FGA spends most of its time in two
N x N x N products per flip.

Usage::

    bash bench/poisoning/peers.sh        # once: DeepRobust's venv
    .venv/bin/python bench/attacks/compare_nettack.py [--targets 20] [--rounds 2] [--budget degree]
    .venv/bin/python bench/attacks/compare_nettack.py --attack fga
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # bench/: the shared helpers
sys.path.insert(0, str(HERE.parent / "poisoning"))  # the Pro-GNN data helpers of the Metattack bench
from common import PROGNN, peak_rss_mib, run_child  # noqa: E402
from compare_metattack import DEFAULT_PEER_VENV, data_files, read_split  # noqa: E402
from deeprobust_metattack import load_lcc  # noqa: E402

DEEPROBUST_RUNNER = HERE / "deeprobust_nettack.py"


def sgc_surrogate(adj: sp.csr_matrix, features: sp.csr_matrix, w1: np.ndarray, w2: np.ndarray):
    """The linear surrogate ``Â² X W1 W2`` as a grb-dist model (an SGC, k = 2, no hidden layer,
    bias 0) and the graph it runs on (the split is not read by FGA)."""
    import torch

    from grb_dist.models.grammar import build_model

    n = adj.shape[0]
    g = as_graph(adj, features, np.zeros(n, np.int64), {"train": np.arange(1), "val": np.arange(1, 2),
                                                          "test": np.arange(2, n)})
    model = build_model("sgc", g.num_features, w2.shape[1], {"hidden_sizes": [], "k": 2})
    lin = model.layers[0]["lin"]
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy((w1 @ w2).T.astype(np.float32)))
        lin.bias.zero_()
    return g, model.eval()


def grb_worker(argv: list[str]) -> None:
    """Child process: grb-dist's Nettack (or FGA) on every target; writes the JSON report."""
    ap = argparse.ArgumentParser(prog="compare_nettack.py grb-dist-worker")
    ap.add_argument("npz", type=Path)
    ap.add_argument("surrogate", type=Path)
    ap.add_argument("targets", type=Path)
    ap.add_argument("output", type=Path)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--attack", choices=["nettack", "fga"], default="nettack")
    args = ap.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from grb_dist.attacks.registry import build_attack
    from grb_dist.attacks.targeted.nettack import nettack

    adj, features, _ = load_lcc(args.npz)
    with np.load(args.surrogate, allow_pickle=False) as z:
        w = z["W1"].astype(np.float64) @ z["W2"].astype(np.float64)
        w1, w2 = z["W1"], z["W2"]
    job = json.loads(args.targets.read_text())
    if args.attack == "fga":
        graph, model = sgc_surrogate(adj, features, w1, w2)
        fought = model(*(torch.from_numpy(a) for a in (graph.features, graph.edge_index))).argmax(1).numpy()

        def run(target: int, label: int, budget: int) -> list[list[int]]:
            fought[target] = label
            attack = build_attack("fga", {"n_flips": budget, "degree_multiple": 0.0}, "targeted")
            mod = attack.attack(graph, model, np.array([target]), labels=fought)
            partners = sorted([*mod.added[1].tolist(), *mod.removed[1].tolist()])
            return [[target, int(v)] for v in partners]
    else:
        def run(target: int, label: int, budget: int) -> list[list[int]]:
            return [[int(m), int(n)] for m, n in nettack(adj, features, w, target, label, budget).edge_flips]
    run(int(job["targets"][0]), int(job["labels"][0]), 1)  # untimed warm-up, as the peer's
    rows = []
    for target, label, budget in zip(job["targets"], job["labels"], job["budgets"]):
        t0 = time.perf_counter()
        flips = run(int(target), int(label), int(budget))
        seconds = time.perf_counter() - t0
        rows.append({"target": int(target), "budget": int(budget), "seconds": seconds, "flips": flips})
        print(f"grb-dist target {target}: {seconds:.3f} s, {len(flips)} flips", file=sys.stderr, flush=True)
    report = {"tool": "grb-dist", "torch_threads": torch.get_num_threads(), "rows": rows, "peak_rss_mib": peak_rss_mib()}
    args.output.write_text(json.dumps(report) + "\n")
    print(json.dumps({"output": str(args.output)}))


def perturbed(adj: sp.csr_matrix, flips: list[list[int]]) -> sp.csr_matrix:
    a = adj.tolil(copy=True)
    for u, v in flips:
        a[u, v] = a[v, u] = 1 - a[u, v]
    return a.tocsr()


def as_graph(adj: sp.csr_matrix, features: sp.csr_matrix, labels: np.ndarray, split: dict):
    from grb_dist.core.graph import Graph, canonical_edges

    coo = sp.triu(adj, 1).tocoo()
    edge_index, _ = canonical_edges(coo.row, coo.col, adj.shape[0])
    return Graph(features=np.asarray(features.todense(), dtype=np.float32), edge_index=edge_index, labels=labels,
                 name="cora-lcc", split={"train": split["train"], "val": split["val"], "test_full": split["test"]})


def gcn(graph, seed: int):
    from grb_dist.defenses import train_defense
    from grb_dist.models.train import TrainConfig

    cfg = TrainConfig(lr=0.01, weight_decay=5e-4, epochs=200, patience=200, seed=seed)
    return train_defense("gcn", graph, {"hidden_sizes": [16], "dropout": 0.5}, cfg, transductive=True).model


def predict(model, graph) -> np.ndarray:
    import torch

    from grb_dist.models.tensors import graph_tensors

    t = graph_tensors(graph)
    with torch.no_grad():
        return model(t.x, t.edge_index).argmax(1).numpy()


def successes(report: dict, adj, features, labels, split, w, fought: dict[int, int], clean_models, seeds: int) -> dict:
    """The success rates of one tool's first-round flips (module docstring)."""
    from grb_dist.attacks.targeted.nettack import margins_of, surrogate_logits

    sur, eva, poi, margins, n_flips = [], [], [], [], []
    for row in report["rows"]:
        t, label = row["target"], fought[row["target"]]
        a = perturbed(adj, row["flips"])
        margin = float(margins_of(surrogate_logits(a, features, w)[t], label))
        margins.append(margin)
        sur.append(margin < 0)
        n_flips.append(len(row["flips"]))
        g = as_graph(a, features, labels, split)
        eva.append(np.mean([predict(m, g)[t] != label for m in clean_models]))
        poi.append(np.mean([predict(gcn(g, s), g)[t] != label for s in range(seeds)]) if seeds else float("nan"))
    return {"surrogate": float(np.mean(sur)), "evasion": float(np.mean(eva)), "poisoning": float(np.mean(poi)),
            "margin": float(np.mean(margins)), "flips": int(sum(n_flips))}


def run_rounds(args, tools: list[str], npz: Path, job: Path, out: Path) -> dict[str, list[dict]]:
    """Every round's child of each tool, one at a time, the order swapped every other round."""
    reports: dict[str, list[dict]] = {t: [] for t in tools}
    for r in range(args.rounds):
        for tool in (tools if r % 2 == 0 else tools[::-1]):
            dest = out / f"{tool}-{r}.json"
            head = ([str(args.peer_python), str(DEEPROBUST_RUNNER)] if tool == "deeprobust"
                    else [sys.executable, str(Path(__file__).resolve()), "grb-dist-worker"])
            cmd = head + [str(npz), str(out / "surrogate.npz"), str(job), str(dest)]
            cmd += ["--threads", str(args.threads), "--attack", args.attack]
            cmd += ["--speedups"] if args.peer_speedups and tool == "deeprobust" else []
            try:
                done = run_child(cmd[1:], python=cmd[0], log=out / f"{tool}-{r}.log", timeout=args.timeout)
            except subprocess.TimeoutExpired:
                done = None
            if done is None or not dest.is_file():
                print(f"{tool} round {r} failed; see {out / f'{tool}-{r}.log'}", file=sys.stderr)
                continue
            reports[tool].append(json.loads(dest.read_text()))
    return reports


def print_table(args, tools: list[str], reports: dict, n_targets: int, adj, features, labels, checks) -> None:
    """Seconds, memory and success of each tool; the ratio and the share of identical flips."""
    w, split, fought, clean_models = checks  # the surrogate, split, labels fought, clean GCNs
    head = (f"{'tool':<11} {'median s/target':>15} {'max s':>7} {'total s':>8} {'peak RSS MiB':>12} {'flips':>6} "
            f"{'surrogate':>9} {'evasion':>8} {'poisoning':>9} {'mean margin':>11}")
    print(head)
    print("-" * len(head))
    medians = {}
    for tool in tools:
        if not reports[tool]:
            print(f"{tool:<11} failed")
            continue
        per_target = [statistics.median(rep["rows"][i]["seconds"] for rep in reports[tool])
                      for i in range(n_targets)]
        medians[tool] = statistics.median(per_target)
        ok = successes(reports[tool][0], adj, features, labels, split, w, fought, clean_models, args.gcn_seeds)
        rss = max(rep["peak_rss_mib"] for rep in reports[tool])
        print(f"{tool:<11} {medians[tool]:>15.3f} {max(per_target):>7.2f} {sum(per_target):>8.1f} {rss:>12.0f} "
              f"{ok['flips']:>6} {ok['surrogate']:>9.2f} {ok['evasion']:>8.2f} {ok['poisoning']:>9.2f} "
              f"{ok['margin']:>11.3f}")
    if len(medians) == 2:
        print(f"ratio of medians DeepRobust / grb-dist: {medians['deeprobust'] / medians['grb-dist']:.1f}x")
    if len(tools) == 2 and all(reports[t] for t in tools):
        same = sum(a["flips"] == b["flips"] for a, b in zip(reports["deeprobust"][0]["rows"],
                                                            reports["grb-dist"][0]["rows"]))
        order = "in the same order" if args.attack == "nettack" else "(as sets: DeepRobust's FGA keeps no order)"
        print(f"targets with the very same flips {order}: {same} of {n_targets}")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["grb-dist-worker"]:
        return grb_worker(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="cora")
    ap.add_argument("--data", type=Path, default=None, help="a folder holding npz/ and prognn/")
    ap.add_argument("--targets", type=int, default=20)
    ap.add_argument("--budget", default="degree", help="'degree' (the target's) or a number of flips")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--gcn-seeds", type=int, default=1, help="GCNs per success check (0: no poisoning check)")
    ap.add_argument("--seed", type=int, default=0, help="the surrogate's seed")
    ap.add_argument("--peer-python", type=Path, default=DEFAULT_PEER_VENV / "bin" / "python")
    ap.add_argument("--only", choices=["deeprobust", "grb-dist"], default=None)
    ap.add_argument("--attack", choices=["nettack", "fga"], default="nettack", help="the attack on both sides")
    ap.add_argument("--peer-speedups", action="store_true",
                    help="FGA: deeprobust_nettack.py --speedups (its dense normalisation elementwise, the same values)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads in this process and both children (default 1: on a shared machine more "
                         "threads made torch's training 10-20x slower here; both tools' attacks are numpy/scipy)")
    ap.add_argument("--out", type=Path, default=None, help="keep the reports here")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per child")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    from grb_dist.attacks.targeted.nettack import surrogate_logits, train_linear_gcn

    npz, split_json = data_files(args.data, args.dataset)
    adj, features, labels = load_lcc(npz)
    split = read_split(split_json)
    w1, w2 = train_linear_gcn(adj, features, labels, split["train"], split["val"], seed=args.seed)
    w = w1 @ w2
    pred = surrogate_logits(adj, features, w).argmax(1)
    attacked = split_json.parents[1] / "nettack" / f"{args.dataset}_nettacked_nodes.json"
    if attacked.is_file():
        targets = json.loads(attacked.read_text())["attacked_test_nodes"][: args.targets]
        chosen = f"the first {len(targets)} of Pro-GNN's attacked test nodes ({PROGNN}/nettack/)"
    else:
        correct = split["test"][pred[split["test"]] == labels[split["test"]]]
        targets = correct[: args.targets].tolist()
        chosen = f"{len(targets)} test nodes the surrogate classifies correctly"
    degree = np.asarray(adj.sum(axis=1)).ravel().astype(int)
    budgets = [int(degree[t]) if args.budget == "degree" else int(args.budget) for t in targets]
    fought = {int(t): int(labels[t]) for t in targets}

    out = args.out or Path(tempfile.mkdtemp(prefix="compare-nettack-"))
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "surrogate.npz", W1=w1, W2=w2)
    job = out / "targets.json"
    job.write_text(json.dumps({"targets": [int(t) for t in targets], "labels": [fought[int(t)] for t in targets],
                               "budgets": budgets}))
    tools = [args.only] if args.only else ["deeprobust", "grb-dist"]
    reports = run_rounds(args, tools, npz, job, out)

    g = as_graph(adj, features, labels, split)
    clean_models = [gcn(g, s) for s in range(max(1, args.gcn_seeds))]
    clean_wrong = np.mean([np.mean([predict(m, g)[t] != fought[t] for t in fought]) for m in clean_models])
    print()
    what = "Nettack (direct, structure, degree test 0.004)" if args.attack == "nettack" else "FGA (direct, structure)"
    what += ", DeepRobust with its runner's --speedups" if args.peer_speedups else ""
    print(f"{what} on {args.dataset} LCC: {adj.shape[0]:,} nodes, "
          f"{int(adj.sum()) // 2:,} edges; targets: {chosen}; budget: "
          f"{'each target degree' if args.budget == 'degree' else args.budget} (total {sum(budgets)}); "
          f"{args.rounds} round(s), interleaved; load: {os.getloadavg()[0]:.2f}")
    print(f"surrogate misclassifies {np.mean([pred[t] != fought[t] for t in fought]):.2f} of the targets clean; "
          f"a clean GCN {clean_wrong:.2f}")
    checks = (w, split, fought, clean_models)
    print_table(args, tools, reports, len(targets), adj, features, labels, checks)
    print(f"(reports in {out})")


if __name__ == "__main__":
    main()
