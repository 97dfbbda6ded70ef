"""Side by side: grb-dist's Metattack next to DeepRobust's, same graph, same budget, interleaved.

The claim checked: grb-dist's Metattack runs at least 5x faster than DeepRobust's on the same
Cora graph and budget, at equal or better strength (a GCN trained on its perturbed graph is
at least as inaccurate), and how much memory each needs.

Data (both tools read the same files): ``<data>/npz/<dataset>.npz`` (the field's ``.npz``
convention) and ``<data>/prognn/splits/<dataset>_prognn_splits.json`` (Pro-GNN's split,
``idx_train`` / ``idx_val`` / ``idx_test``, 10% / 10% / 80%). The graph is the largest
connected component of the symmetrised, unweighted adjacency, in ascending node order (Cora:
2,485 nodes, 5,069 edges); features are the raw attributes, not normalised. The grb-dist side
loads it with ``grb_dist.datasets.load_dataset("prognn-<dataset>", normalize="none")`` when
the catalogue has that name, from the same files (``$GRB_DIST_PROGNN`` set to the split's
``prognn/`` folder for that call), and checks that it equals the component built directly
from the two files (``load_npz_graph`` + scipy's connected components + the split JSON),
which it uses when the catalogue entry is missing or fails to load.

Budget: ``int(rate * edges)`` flips for both (Cora at 5%: 253); grb-dist gets it as
``n_edge_mod``, so both round the same way.

Rounds (``--rounds``, default 3): in round ``r`` (seed ``--seed + r``) one subprocess runs
DeepRobust (``deeprobust_metattack.py`` under ``--peer-python``, the venv of ``peers.sh``) and
one runs grb-dist (this script's ``grb-dist-worker`` mode, under this Python), one after the
other, never at the same time; the order alternates between rounds, so that a slow spell of
the machine hits both tools alike. Each process loads the data, trains its tool's surrogate
(DeepRobust: its example's linear GCN; grb-dist:
``train_defense("gcn", graph, {"hidden_sizes": [16]}, TrainConfig(epochs=200), transductive=True)``),
then runs the attack and writes the perturbed adjacency (scipy ``save_npz``) and a JSON report.

What is measured:

* seconds: wall time (``time.perf_counter``) of building the attack and running it, inside
  the child process; not the interpreter start, imports, data loading or the surrogate's
  training (reported apart as ``surrogate s``). Table: the median over the rounds, each
  round's figure, and the ratio of medians DeepRobust / grb-dist. The reports also give the
  process's CPU time over the same span (``cpu_seconds``, ``time.process_time``), steadier
  than wall time on a shared machine.
* peak RSS: the child's peak resident memory (``getrusage(RUSAGE_SELF).ru_maxrss``) over
  its whole life (imports, data, surrogate, attack): the maximum over the rounds. Each
  child also reports the peak reached before its attack started (in brackets), so that the
  attack's own share can be read off.
* strength: a grb-dist GCN (hidden 16, dropout 0.5, Adam lr 0.01, weight decay 5e-4, 200
  epochs without early stopping, the weights of the lowest validation loss kept), trained
  transductively on the clean graph and on every perturbed graph, seeds 0..4
  (``--gcn-seeds``); test accuracy on ``idx_test``, mean +- std over every (round, seed) of
  a tool. Lower is a stronger attack.

A-Meta-Self (``--approximate``): DeepRobust's ``MetaApprox(..., lambda_=0, train_iters=100,
lr=0.01)`` against grb-dist's ``metattack`` with ``approximate: true`` (Adam at ``approx_lr``
0.01, 100 inner steps, the gradient taken at each step's weights before the update and
summed); graph, split, budget, surrogates and ``ll_constraint`` (off) as for Meta-Self.
``--with-exact`` adds a third child per round, grb-dist's exact Meta-Self on the same round's
seed (tool ``grb-dist-exact``), as a reference for the strength. DeepRobust 0.2.11's
``MetaApprox`` as shipped multiplies ``(Â @ X) @ W`` and back-propagates through two dense
N x N x N products of its normalisation at every inner step: minutes of CPU a flip.
``--peer-speedups`` passes ``--speedups`` to its runner, which computes the same thing
without those products and back-propagates through the normalisation once a flip instead of
at every inner step (``deeprobust_metattack.py``'s docstring says what changes).

Usage::

    bash bench/poisoning/peers.sh                  # once: DeepRobust's venv
    .venv/bin/python bench/poisoning/compare_metattack.py [--rounds 3] [--rate 0.05]
    .venv/bin/python bench/poisoning/compare_metattack.py --only deeprobust --rounds 1
    .venv/bin/python bench/poisoning/compare_metattack.py --approximate --with-exact --rounds 1
    .venv/bin/python bench/poisoning/compare_metattack.py --score A.npz B.npz   # score given graphs

``--out DIR`` keeps the perturbed graphs, reports and the children's logs (default: a
temporary folder, removed at the end). ``--threads N`` sets torch's thread count in both
children (default: torch's own default, the machine's cores).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import NPZ, PROGNN, data_folders, peak_rss_mib, run_child, timed  # noqa: E402

HERE = Path(__file__).resolve().parent
DEEPROBUST_RUNNER = HERE / "deeprobust_metattack.py"
#: The folder peers.sh makes its venv in by default (overridden by ``PEER_VENV`` there and here).
DEFAULT_PEER_VENV = Path(os.environ.get("PEER_VENV")
                         or Path(os.environ.get("TMPDIR") or "/tmp") / "grb-dist-peers" / "deeprobust")
GCN_SEEDS = 5  # strength GCN seeds 0 .. GCN_SEEDS - 1 (--gcn-seeds)
GCN_EPOCHS = 200


# ----------------------------------------------------------------------------------------------
# data


def data_files(data: Path | None, dataset: str) -> tuple[Path, Path]:
    """``(npz, split JSON)`` of ``dataset`` in ``data`` (or the first folder that has both)."""
    rel = (Path(NPZ) / f"{dataset}.npz", Path(PROGNN) / "splits" / f"{dataset}_prognn_splits.json")
    for folder in ([data] if data else data_folders()):
        if all((folder / r).is_file() for r in rel):
            return folder / rel[0], folder / rel[1]
    where = str(data) if data else ", ".join(map(str, data_folders()))
    sys.exit(f"no {rel[0]} and {rel[1]} in {where}; pass --data DIR (a folder holding npz/ and prognn/splits/)")


def read_split(path: Path) -> dict[str, np.ndarray]:
    raw = json.loads(Path(path).read_text())
    return {key: np.asarray(raw[f"idx_{key}"], dtype=np.int64) for key in ("train", "val", "test")}


def build_lcc_graph(npz: Path, split_json: Path, name: str):
    """The component graph with raw features and Pro-GNN's split, from the two files."""
    from grb_dist.core.graph import Graph, canonical_edges
    from grb_dist.datasets import load_npz_graph

    full, _ = load_npz_graph(npz, name=name)
    n = full.num_nodes
    adj = sp.csr_matrix((np.ones(full.edge_index.shape[1]), (full.edge_index[0], full.edge_index[1])), shape=(n, n))
    _, component = connected_components(adj, directed=False)
    keep = np.flatnonzero(component == np.bincount(component).argmax())  # ascending node order
    sub = adj[keep][:, keep].tocoo()
    edge_index, _ = canonical_edges(sub.row, sub.col, keep.size)
    split = read_split(split_json)
    return Graph(features=np.ascontiguousarray(full.features[keep]), edge_index=edge_index,
                 labels=np.ascontiguousarray(full.labels[keep]), name=f"prognn-{name}",
                 split={"train": split["train"], "val": split["val"], "test_full": split["test"]}).validate()


def load_graph(npz: Path, split_json: Path, dataset: str):
    """``(graph, how)``: the catalogue's ``prognn-<dataset>`` when it exists and equals the
    graph of the files, else the graph built from the files."""
    built = build_lcc_graph(npz, split_json, dataset)
    try:
        from grb_dist.datasets import CATALOG, load_dataset

        name = f"prognn-{dataset.replace('_', '-')}"
        if name not in CATALOG:
            return built, "built from the files (the catalogue has no prognn-* entry yet)"
        # read the very files given to DeepRobust: the split's Pro-GNN folder (npz/ beside it)
        saved = os.environ.get("GRB_DIST_PROGNN")
        os.environ["GRB_DIST_PROGNN"] = str(Path(split_json).resolve().parents[1])
        try:
            graph = load_dataset(name, normalize="none", download=False)
        finally:
            if saved is None:
                os.environ.pop("GRB_DIST_PROGNN")
            else:
                os.environ["GRB_DIST_PROGNN"] = saved
    except Exception as exc:  # noqa: BLE001 - any failure falls back to the files
        return built, f"built from the files (load_dataset failed: {type(exc).__name__}: {exc})"
    same = (graph.num_nodes == built.num_nodes and np.array_equal(graph.edge_index, built.edge_index)
            and np.array_equal(graph.labels, built.labels) and np.allclose(graph.features, built.features)
            and all(np.array_equal(np.sort(graph.split.get(k, [])), np.sort(built.split[k]))
                    for k in ("train", "val", "test_full")))
    if not same:
        sys.exit(f"load_dataset({name!r}) differs from the component graph of {npz} / {split_json}; "
                 "the two tools would not see the same data")
    return graph, f"load_dataset({name!r}, normalize='none') on the same files, checked equal to the component"


def graph_with_adjacency(graph, path: Path):
    """``graph`` with the edges of the (symmetric, 0/1) adjacency saved at ``path``."""
    import dataclasses

    from grb_dist.core.graph import canonical_edges

    adj = sp.load_npz(path).tocoo()
    if adj.shape != (graph.num_nodes, graph.num_nodes):
        sys.exit(f"{path}: a {adj.shape} adjacency for a graph of {graph.num_nodes} nodes")
    keep = adj.data != 0
    edge_index, _ = canonical_edges(adj.row[keep], adj.col[keep], graph.num_nodes)
    return dataclasses.replace(graph, edge_index=edge_index).validate()


def flips(graph, path: Path) -> dict[str, int]:
    """Edges added and removed by the adjacency at ``path`` relative to ``graph``."""
    n = graph.num_nodes
    ei = graph_with_adjacency(graph, path).edge_index
    key = lambda e: set((e[0][e[0] < e[1]] * n + e[1][e[0] < e[1]]).tolist())  # noqa: E731
    clean, pert = key(graph.edge_index), key(ei)
    return {"added": len(pert - clean), "removed": len(clean - pert)}


# ----------------------------------------------------------------------------------------------
# the grb-dist child


def grb_worker(argv: list[str]) -> None:
    """Child process: grb-dist's Metattack on the component graph; writes the perturbed
    adjacency and a JSON report (the last line of stdout too)."""
    ap = argparse.ArgumentParser(prog="compare_metattack.py grb-dist-worker")
    ap.add_argument("npz", type=Path)
    ap.add_argument("split", type=Path)
    ap.add_argument("rate", type=float)
    ap.add_argument("seed", type=int)
    ap.add_argument("output", type=Path)
    ap.add_argument("--dataset", default="cora")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--surrogate-params", default='{"hidden_sizes": [16]}')
    ap.add_argument("--approximate", action="store_true", help="A-Meta-Self (approximate: true)")
    args = ap.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    import grb_dist
    from grb_dist.attacks import build_attack
    from grb_dist.defenses import train_defense
    from grb_dist.models.train import TrainConfig

    graph, how = load_graph(args.npz, args.split, args.dataset)
    budget = int(args.rate * graph.num_edges)
    surrogate_seconds, trained = timed(train_defense, "gcn", graph, json.loads(args.surrogate_params),
                                       TrainConfig(epochs=200, seed=args.seed), transductive=True)
    surrogate = trained.model
    rss_before = peak_rss_mib()

    def build_and_attack():
        params = {"n_edge_mod": budget, "seed": args.seed, "approximate": bool(args.approximate)}
        attack = build_attack("metattack", params, "poisoning")
        return attack, attack.attack(graph, surrogate)

    cpu0 = time.process_time()
    seconds, (attack, mod) = timed(build_and_attack)
    cpu_seconds = time.process_time() - cpu0

    n = graph.num_nodes
    ei = graph.edge_index
    keys = ei[0][ei[0] < ei[1]] * n + ei[1][ei[0] < ei[1]]
    removed = mod.removed[0] * n + mod.removed[1]
    added = mod.added[0] * n + mod.added[1]
    keys = np.union1d(np.setdiff1d(keys, removed), added)
    u, v = keys // n, keys % n
    adj = sp.csr_matrix((np.ones(2 * keys.size, dtype=np.float32), (np.r_[u, v], np.r_[v, u])), shape=(n, n))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    sp.save_npz(args.output, adj)
    report = {
        "tool": "grb-dist",
        "attack": "metattack approximate: true (A-Meta-Self)" if args.approximate else "metattack (Meta-Self)",
        "grb_dist_version": getattr(grb_dist, "__version__", "?"),
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
        "graph": how,
        "nodes": n,
        "edges": graph.num_edges,
        "rate": args.rate,
        "seed": args.seed,
        "n_perturbations": budget,
        "flips": int(mod.n_edge_flips),
        "added": int(mod.added.shape[1]),
        "removed": int(mod.removed.shape[1]),
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "surrogate_seconds": surrogate_seconds,
        "peak_rss_before_attack_mib": rss_before,
        "peak_rss_mib": peak_rss_mib(),
        "attack_config": {k: getattr(attack.config, k) for k in getattr(attack.config, "__dataclass_fields__", {})},
        "adjacency": str(args.output),
    }
    args.output.with_suffix(".json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(json.dumps(report, default=str))


# ----------------------------------------------------------------------------------------------
# running the children


def child_report(cmd: list[str], log: Path, timeout: float | None) -> dict:
    """Run one child; its stdout's last line is its JSON report, stderr goes to ``log``."""
    try:
        seconds, report = timed(run_child, cmd[1:], python=cmd[0], log=log, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s (log: {log})"}
    if report is None:
        return {"error": f"no report (log: {log})\n{log.read_text()[-2000:]}"}
    report["process_seconds"] = seconds
    return report


def deeprobust_cmd(args, npz: Path, split: Path, seed: int, out: Path) -> list[str]:
    cmd = [str(args.peer_python), str(DEEPROBUST_RUNNER), str(npz), str(split), str(args.rate), str(seed), str(out)]
    cmd += ["--approximate"] if args.approximate else []
    cmd += ["--speedups"] if args.peer_speedups else []
    return cmd + (["--threads", str(args.threads)] if args.threads else [])


def grb_cmd(args, npz: Path, split: Path, seed: int, out: Path, *, approximate: bool | None = None) -> list[str]:
    """The grb-dist child; ``approximate`` defaults to ``--approximate``."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "grb-dist-worker", str(npz), str(split), str(args.rate),
           str(seed), str(out), "--dataset", args.dataset, "--surrogate-params", args.surrogate_params]
    cmd += ["--approximate"] if (args.approximate if approximate is None else approximate) else []
    return cmd + (["--threads", str(args.threads)] if args.threads else [])


def grb_exact_cmd(args, npz: Path, split: Path, seed: int, out: Path) -> list[str]:
    return grb_cmd(args, npz, split, seed, out, approximate=False)


#: The command of each tool's child.
COMMANDS = {"deeprobust": deeprobust_cmd, "grb-dist": grb_cmd, "grb-dist-exact": grb_exact_cmd}


# ----------------------------------------------------------------------------------------------
# strength


def gcn_accuracies(graph, seeds: int = GCN_SEEDS) -> list[float]:
    """Test accuracy of the strength GCN trained on ``graph``, one per seed ``0 .. seeds - 1``."""
    import torch

    from grb_dist.defenses import train_defense
    from grb_dist.models.tensors import graph_tensors
    from grb_dist.models.train import TrainConfig

    t = graph_tensors(graph)
    test = torch.as_tensor(graph.split["test_full"])
    accs = []
    for seed in range(seeds):
        cfg = TrainConfig(lr=0.01, weight_decay=5e-4, epochs=GCN_EPOCHS, patience=GCN_EPOCHS, seed=seed)
        model = train_defense("gcn", graph, {"hidden_sizes": [16], "dropout": 0.5}, cfg, transductive=True).model
        with torch.no_grad():
            pred = model(t.x, t.edge_index).argmax(1)
        accs.append(float((pred[test] == t.y[test]).float().mean()))
    return accs


def mean_std(values: list[float]) -> str:
    if not values:
        return "-"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.4f} +- {sd:.4f}"


# ----------------------------------------------------------------------------------------------
# the table


def print_table(graph, how: str, args, runs: dict[str, list[dict]], clean: list[float], acc: dict[str, list[float]]) -> None:
    print()
    what = ("A-Meta-Self: DeepRobust MetaApprox / grb-dist metattack approximate: true" if args.approximate
            else "Metattack (Meta-Self)")
    print(f"{what} poisoning, {args.dataset} LCC: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, "
          f"rate {args.rate}, budget {int(args.rate * graph.num_edges)} flips, {args.rounds} round(s), interleaved")
    print(f"grb-dist graph: {how}")
    print(f"strength: GCN (16 hidden, dropout 0.5, 200 epochs) test accuracy, seeds 0..{args.gcn_seeds - 1}; "
          f"clean graph {mean_std(clean)}")
    head = f"{'method':<14} {'median s':>9}  {'each s':<26} {'CPU s':>8} {'surrogate s':>11} {'peak RSS MiB':>12} " \
           f"{'flips (+/-)':>12}  {'GCN acc clean':<17} {'GCN acc poisoned':<17}"
    print(head)
    print("-" * len(head))
    medians = {}
    for tool in COMMANDS:
        ok = [r for r in runs.get(tool, []) if "error" not in r]
        if not runs.get(tool):
            continue
        if not ok:
            print(f"{tool:<14} failed: {runs[tool][0]['error'].splitlines()[0]}")
            continue
        secs = [r["seconds"] for r in ok]
        medians[tool] = statistics.median(secs)
        each = ", ".join(f"{s:.1f}" for s in secs)
        sur = statistics.median(r["surrogate_seconds"] for r in ok)
        cpu = [r["cpu_seconds"] for r in ok if "cpu_seconds" in r]
        cpu_s = f"{statistics.median(cpu):.1f}" if cpu else "-"
        rss = max(r["peak_rss_mib"] for r in ok)
        before = [r["peak_rss_before_attack_mib"] for r in ok if "peak_rss_before_attack_mib" in r]
        rss_s = f"{rss:.0f}" + (f" ({max(before):.0f})" if before else "")
        fl = f"{ok[0]['flips']} ({ok[0]['added']}/{ok[0]['removed']})"
        print(f"{tool:<14} {medians[tool]:>9.1f}  {each:<26} {cpu_s:>8} {sur:>11.1f} {rss_s:>12} {fl:>12}  "
              f"{mean_std(clean):<17} {mean_std(acc.get(tool, [])):<17}")
    if "deeprobust" in medians and "grb-dist" in medians:
        print(f"ratio of medians DeepRobust / grb-dist: {medians['deeprobust'] / medians['grb-dist']:.2f}x")
    print("(peak RSS: the maximum over the rounds of the child's whole life; in brackets, its peak before the "
          "attack started; CPU s: median CPU time of the attack; surrogate s: median training time of the tool's surrogate, not in 'seconds'; "
          "flips: first round)")


# ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["grb-dist-worker"]:
        return grb_worker(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0, help="round r uses seed + r")
    ap.add_argument("--dataset", default="cora")
    ap.add_argument("--data", type=Path, default=None, help="a folder holding npz/ and prognn/splits/")
    ap.add_argument("--peer-python", type=Path, default=DEFAULT_PEER_VENV / "bin" / "python",
                    help="python of the DeepRobust venv (bench/poisoning/peers.sh)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads of both children")
    ap.add_argument("--only", choices=("both", "deeprobust", "grb-dist"), default="both")
    ap.add_argument("--approximate", action="store_true",
                    help="A-Meta-Self: DeepRobust's MetaApprox against metattack with approximate: true")
    ap.add_argument("--with-exact", action="store_true",
                    help="with --approximate: also grb-dist's exact Meta-Self each round (tool grb-dist-exact)")
    ap.add_argument("--peer-speedups", action="store_true",
                    help="with --approximate: deeprobust_metattack.py --speedups (MetaApprox multiplies X @ W "
                         "first, normalises elementwise, sums gradients at the normalised adjacency: "
                         "the same formulas, a twentieth of the CPU time)")
    ap.add_argument("--timeout", type=float, default=4 * 3600, help="seconds allowed to one child")
    ap.add_argument("--out", type=Path, default=None, help="keep outputs here (default: a temporary folder)")
    ap.add_argument("--surrogate-params", default='{"hidden_sizes": [16]}', help="grb-dist surrogate GCN params")
    ap.add_argument("--gcn-seeds", type=int, default=GCN_SEEDS, help="seeds of the strength GCN per graph")
    ap.add_argument("--score", type=Path, nargs="+", default=None,
                    help="only score these perturbed adjacencies (scipy .npz, component ids) with the strength GCN")
    args = ap.parse_args(argv)

    npz, split = data_files(args.data, args.dataset)
    graph, how = load_graph(npz, split, args.dataset)
    if args.score:
        print(f"{args.dataset} LCC: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges; {how}")
        print(f"{'clean':<50} GCN acc {mean_std(gcn_accuracies(graph, args.gcn_seeds))}")
        for path in args.score:
            f = flips(graph, path)
            print(f"{str(path):<50} GCN acc {mean_std(gcn_accuracies(graph_with_adjacency(graph, path), args.gcn_seeds))}"
                  f"  flips +{f['added']} -{f['removed']}")
        return
    tools = ("deeprobust", "grb-dist") if args.only == "both" else (args.only,)
    if args.peer_speedups and not args.approximate:
        sys.exit("--peer-speedups is for --approximate runs (DeepRobust's Metattack runs as it ships)")
    if args.with_exact:
        if not args.approximate:
            sys.exit("--with-exact is for --approximate runs (without it grb-dist runs exact Meta-Self already)")
        tools += ("grb-dist-exact",)
    if "deeprobust" in tools and not Path(args.peer_python).exists():
        sys.exit(f"no DeepRobust venv at {args.peer_python}: run bench/poisoning/peers.sh or pass --peer-python")

    out = args.out or Path(tempfile.mkdtemp(prefix="compare-metattack-"))
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[dict]] = {t: [] for t in tools}
    try:
        for r in range(args.rounds):
            seed = args.seed + r
            order = tools if r % 2 == 0 else tools[::-1]
            for tool in order:
                kind = "_approx" if args.approximate and tool != "grb-dist-exact" else ""
                stem = f"{tool}{kind}_{args.dataset}_rate{args.rate}_seed{seed}"  # the rate's dot is no suffix
                make = COMMANDS[tool]
                print(f"round {r + 1}/{args.rounds}, seed {seed}: {tool} ...", flush=True)
                report = child_report(make(args, npz, split, seed, out / f"{stem}.npz"), out / f"{stem}.log", args.timeout)
                runs[tool].append(report)
                if "error" in report:
                    print(f"  {tool} failed: {report['error']}", flush=True)
                else:
                    print(f"  {report['seconds']:.1f} s attack, {report['peak_rss_mib']:.0f} MiB peak, "
                          f"{report['flips']} flips", flush=True)
        print("strength: training the GCN on the clean graph and every perturbed graph ...", flush=True)
        clean = gcn_accuracies(graph, args.gcn_seeds)
        acc: dict[str, list[float]] = {}
        for tool, reports in runs.items():
            for rep in reports:
                if "error" not in rep:
                    acc.setdefault(tool, []).extend(
                        gcn_accuracies(graph_with_adjacency(graph, Path(rep["adjacency"])), args.gcn_seeds))
        (out / "summary.json").write_text(json.dumps({"runs": runs, "clean": clean, "accuracy": acc}, indent=1) + "\n")
        print_table(graph, how, args, runs, clean, acc)
    finally:
        if args.out is None:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
