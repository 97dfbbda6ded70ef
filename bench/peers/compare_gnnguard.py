"""Side by side: grb-dist's GNNGuard next to the original GRB's (PyPI grb==0.1.0, ``GCNGuard``).

Both defenses are trained on the same graph and split with the same hyper-parameters and
the same training loop, then scored on the same test nodes of the clean graph and of the
graph after one injection attack (the same injected nodes and edges for both).

Set-up: the throw-away venv of ``bench/peers/compare_grb.py`` (built by it, or here, the
same way: ``--venv``, ``--fresh-venv``, ``--torch``); its one patched line (an attack's
``sp.hstack``) is not on this path. The original's module imports ``dgl`` (for its GATGuard;
no wheel for this torch): ``bench/peers/grb_original_runner.py`` registers an empty stand-in
module under that name in its own process and says so; nothing else of the original is
changed.

Method:

* Data: cora-legacy (``--cora-dir``, the GRB layout), loaded and normalised by
  ``grb_dist.datasets.load_dataset``; features, edges, labels and split go to both tools as
  ``.npz`` (no pickle). Scored: the ``full`` difficulty's test nodes (the attack's targets).
* Attack: grb-dist's FGSM injection, as in ``compare_grb.py`` (60 nodes x 20 edges, 200
  steps of 0.01, feature limits the features' min and max, seed 0) against its GCN
  [64, 64, 64] surrogate (seed 0, the same cached weights as ``compare_grb.py``), made once;
  the graph with it applied (features stacked, edges both ways) goes to both tools as
  ``attacked.npz``. Both defenses are trained on the clean graph (evasion: a transfer
  attack, neither defense is the surrogate).
* Hyper-parameters (both): hidden [64, 64] (three graph layers), dropout 0.1 before every
  layer but the first, pruning threshold 0.1, a self-weight ``1 / (1 + kept degree)``, Adam
  lr 0.001 (the GNNGuard entry of grb-dist's bundled jobs), weight decay 5e-4, at most 400
  epochs, patience 50 on the validation loss, the state of the lowest validation loss kept.
* Training: inductive (GRB's protocol): the subgraph of the training nodes, validation on the
  subgraph of training + validation nodes. grb-dist: ``grb_dist.models.train.train_model``;
  the original: the same loop written in the runner around its ``GCNGuard`` (its own
  ``Trainer`` takes its ``Dataset`` object and validates with dropout on), its adjacency from
  its ``adj_preprocess(..., GCNAdjNorm)`` (GCNGuard reads only the positions of the entries,
  self-loops included, not the values).
* Differences that remain (each tool's own model): the original computes the similarity of
  every node pair densely (scikit-learn's ``cosine_similarity``) outside autograd, so no
  gradient flows through the edge weights; it weights each kept edge by ``exp(a_ij)`` (a
  weight in (1, e], not renormalised) where grb-dist uses ``a_ij``; its pruning is
  cumulative (each layer starts from the previous layer's kept edges); it adds the bias
  before propagation, grb-dist's GCNConv after; it tests ``att[0, 0]`` (node 0 only) to
  decide whether to strip and re-add self-loops; initialisation is each tool's own (Xavier
  normal, biases uniform / Glorot uniform, biases zero). grb-dist's guard judges every edge of
  the graph again at every layer; the original's only those the layer before kept.
* Runs: every training in a fresh child process (the original's in its venv), ``--threads``
  torch threads each, one tool after the other, never at the same time, the order swapped
  every other seed. Timed: the training call alone (``time.perf_counter``), the model built
  and the data loaded beforehand. Peak RSS: the child's ``ru_maxrss`` at its end (its
  imports, data, training and both predictions), and before training. Also reported: the
  seconds per epoch (the two stop after different numbers of epochs), and how many injected
  edges (both directions, 2 x 1,200) each layer's guard keeps on the attacked graph.

Usage::

    python bench/peers/compare_gnnguard.py --seeds 0,1,2 --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/peers/: compare_grb's venv machinery
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import emit, peak_rss_mib, run_child, timed  # noqa: E402
from compare_grb import (  # noqa: E402
    DEFAULT_CORA, DEFAULT_VENV, RUNNER, STEP_SIZE, code_state, data_fingerprint, ensure_grb_venv, thread_env,
    trained_model, venv_python,
)

MARKER = "GNNGUARD-RESULT "  # the runner's RESULT_MARKER
TOOLS = ("original", "grb-dist")


def grb_dist_child(args) -> None:
    """One grb-dist GNNGuard training (``--seed``) and its predictions; one JSON line."""
    import numpy as np
    import torch

    import grb_dist.models.robust.gnnguard as guard
    from grb_dist.core.graph import Graph
    from grb_dist.models.grammar import build_model
    from grb_dist.models.train import TrainConfig, seed_everything, train_model

    torch.set_num_threads(args.threads)
    d = Path(args.child)
    z = np.load(d / "graph.npz", allow_pickle=False)
    split = {k[len("split_"):]: z[k] for k in z.files if k.startswith("split_")}
    g = Graph(z["features"], z["edge_index"], z["labels"], split, name=str(z["name"]),
              num_classes=int(z["num_classes"])).validate()
    seed_everything(args.seed)
    params = {"hidden_sizes": args.hidden, "dropout": args.dropout, "threshold": 0.1, "self_weight": True}
    model = build_model("gnnguard", g.num_features, g.num_classes, params)
    config = TrainConfig(lr=args.lr, weight_decay=args.weight_decay, epochs=args.epochs, patience=args.patience,
                         seed=args.seed)
    rss_before = peak_rss_mib()
    seconds, res = timed(train_model, model, g, config)
    model = res.model.eval()
    a = np.load(d / "attacked.npz", allow_pickle=False)
    preds, kept = {}, []
    plain = guard.guard_edges

    def counting(h, pattern, *rest, **kw):  # the injected edges (both directions) each layer keeps
        keep, ei, w = plain(h, pattern, *rest, **kw)
        pe = pattern.edge_index
        kept.append(int((keep & ((pe[0] >= g.num_nodes) | (pe[1] >= g.num_nodes))).sum()))
        return keep, ei, w

    with torch.no_grad():
        for key, (x, ei) in (("clean", (g.features, g.edge_index)), ("attacked", (a["features"], a["edge_index"]))):
            guard.guard_edges = counting if key == "attacked" else plain
            preds[key] = model(torch.from_numpy(x), torch.from_numpy(ei)).argmax(1).numpy()
    guard.guard_edges = plain
    np.savez(args.out, **preds)
    emit({"seconds": seconds, "epochs_run": res.epochs_run, "best_epoch": res.best_epoch, "injected_edges_kept": kept,
          "peak_rss_mib": peak_rss_mib(), "rss_before_training_mib": rss_before, "torch": torch.__version__,
          "threads": torch.get_num_threads()}, MARKER)


def prepare(args, work: Path) -> dict:
    """Load cora-legacy, make the FGSM injection, write graph.npz and attacked.npz."""
    import numpy as np
    import torch

    from grb_dist.attacks import build_attack
    from grb_dist.datasets import load_dataset
    from grb_dist.evaluation.evaluate import evaluate
    from grb_dist.models.tensors import apply_injection

    g = load_dataset(str(args.cora_dir))
    targets = g.targets("full")
    surrogate = trained_model("gcn", g, 0, 400, data_fingerprint(g), args.model_cache)
    lo, hi = float(g.features.min()), float(g.features.max())
    torch.manual_seed(0)
    attack = build_attack("fgsm", dict(n_inject=60, edges_per_node=20, feat_lim_min=None, feat_lim_max=None,
                                       steps=args.attack_steps, step_size=STEP_SIZE, seed=0))
    attack_s, inj = timed(attack.attack, g, surrogate, targets)
    x, ei = apply_injection(torch.from_numpy(g.features), torch.from_numpy(g.edge_index),
                            torch.from_numpy(inj.features), torch.from_numpy(inj.edges))
    np.savez(work / "graph.npz", features=g.features, edge_index=g.edge_index, labels=g.labels,
             targets=targets.astype(np.int64), num_classes=np.int64(g.num_classes), name=np.str_(g.name),
             **{f"split_{k}": v for k, v in g.split.items()})
    np.savez(work / "attacked.npz", features=x.numpy(), edge_index=ei.numpy())
    acc = {k: evaluate(surrogate, g, i, difficulties=["full"])["full"] for k, i in (("clean", None), ("attacked", inj))}
    print(f"cora-legacy: {g.num_nodes} nodes, {g.num_edges} edges, {g.num_features} features; {targets.size} full "
          f"targets; feature limits [{lo:.3f}, {hi:.3f}]; FGSM 60 x 20, {args.attack_steps} steps in {attack_s:.1f} s: "
          f"the GCN surrogate {acc['clean']:.3f} -> {acc['attacked']:.3f}", flush=True)
    return {"labels": g.labels, "targets": targets, "surrogate": acc, "nodes": g.num_nodes}


def train_once(tool: str, seed: int, args, work: Path) -> dict:
    """One training of ``tool``'s GNNGuard in a fresh child; its reply plus the predictions."""
    import numpy as np

    out = work / f"{tool}-{seed}.npz"
    hp = ["--hidden", *map(str, args.hidden), "--dropout", args.dropout, "--lr", args.lr,
          "--weight-decay", args.weight_decay, "--epochs", args.epochs, "--patience", args.patience,
          "--threads", args.threads, "--out", out]
    if tool == "original":
        rep = run_child([RUNNER, "--data", work, "--gnnguard-seed", seed, *hp], MARKER, python=venv_python(args.venv),
                        check=True, log=work / f"{tool}-{seed}.log", env=thread_env(args.threads, True))
    else:
        rep = run_child([Path(__file__).resolve(), "--child", work, "--seed", seed, *hp], MARKER, check=True,
                        log=work / f"{tool}-{seed}.log", env=thread_env(args.threads, False))
    z = np.load(out, allow_pickle=False)
    return {**rep, "preds": {k: z[k] for k in z.files}}


def mean_std(values: list[float]) -> str:
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values) if len(values) > 1 else 0.0:.3f}"


def report(runs: dict, prep: dict, args, record: dict, loads: tuple, state: str) -> dict:
    t, y = prep["targets"], prep["labels"]
    acc = {tool: {k: [float((r["preds"][k][t] == y[t]).mean()) for r in runs[tool]] for k in ("clean", "attacked")}
           for tool in TOOLS}
    v = record["versions"]
    print("\n## GNNGuard: grb-dist vs the original GRB (grb==0.1.0)\n")
    print("command: " + " ".join(["python", *[shlex.quote(a) for a in sys.argv]]))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; torch threads {args.threads}; load average "
          f"{loads[0]:.2f} before, {loads[1]:.2f} after; original: grb {v['grb']}, torch {v['torch']}, scipy "
          f"{v['scipy']}, scikit-learn {v['scikit-learn']}; grb-dist code {state}")
    print(f"seeds {args.seeds}; the GCN surrogate on the {prep['targets'].size} full targets: clean "
          f"{prep['surrogate']['clean']:.3f}, after FGSM {prep['surrogate']['attacked']:.3f}\n")
    print("| tool | clean accuracy | after FGSM | seconds per training (median; each) | epochs run | "
          "seconds per epoch (median) | injected edges kept per layer | peak RSS MiB (before training) |")
    print("|---|---|---|---|---|---|---|---|")
    for tool in TOOLS:
        secs = [r["seconds"] for r in runs[tool]]
        kept = sorted({" / ".join(map(str, r["injected_edges_kept"])) for r in runs[tool]})
        print(f"| {tool} | {mean_std(acc[tool]['clean'])} | {mean_std(acc[tool]['attacked'])} | "
              f"{statistics.median(secs):.1f} ({', '.join(f'{s:.1f}' for s in secs)}) | "
              f"{', '.join(str(r['epochs_run']) for r in runs[tool])} | "
              f"{statistics.median(r['seconds'] / r['epochs_run'] for r in runs[tool]):.3f} | {'; '.join(kept)} | "
              f"{max(r['peak_rss_mib'] for r in runs[tool]):.0f} "
              f"({max(r['rss_before_training_mib'] for r in runs[tool]):.0f}) |")
    for tool in TOOLS:
        print(f"  {tool:<9} clean {' '.join(f'{a:.3f}' for a in acc[tool]['clean'])}; attacked "
              f"{' '.join(f'{a:.3f}' for a in acc[tool]['attacked'])}")
    ratio = statistics.median(r["seconds"] for r in runs["original"]) / statistics.median(
        r["seconds"] for r in runs["grb-dist"])
    print(f"seconds ratio original / grb-dist (medians): {ratio:.1f}x")
    return acc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,1,2", help="training seeds, comma list (default 0,1,2)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of every child (default 1)")
    ap.add_argument("--cora-dir", type=Path, default=DEFAULT_CORA, help="cora-legacy in the GRB layout")
    ap.add_argument("--attack-steps", type=int, default=200)
    ap.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--epochs", type=int, default=400)
    ap.add_argument("--patience", type=int, default=50)
    ap.add_argument("--model-cache", type=Path, default=DEFAULT_VENV.parent / "compare-grb-models",
                    help="the surrogate's cached weights, shared with compare_grb.py (default %(default)s)")
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="compare_grb.py's venv (default %(default)s)")
    ap.add_argument("--fresh-venv", action="store_true")
    ap.add_argument("--python", default=sys.executable, help="interpreter the venv is created from")
    ap.add_argument("--torch", default="torch==2.13.0", help="torch requirement for the venv")
    ap.add_argument("--work-dir", type=Path, default=None, help="exchange files and logs (default: a temp dir)")
    ap.add_argument("--json", type=Path, default=None, help="also write the measurements to this JSON file")
    ap.add_argument("--child", help=argparse.SUPPRESS)  # internal: one grb-dist training on this dir
    ap.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        grb_dist_child(args)
        return
    import torch

    torch.set_num_threads(args.threads)
    args.seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    args.venv = args.venv.expanduser().resolve()
    args.model_cache = args.model_cache.expanduser().resolve()
    record = ensure_grb_venv(args.venv, args.python, args.torch, args.fresh_venv)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="compare-gnnguard-"))
    work.mkdir(parents=True, exist_ok=True)
    load_before, state, t0 = os.getloadavg()[0], code_state(), time.perf_counter()
    prep = prepare(args, work)
    runs = {tool: [] for tool in TOOLS}
    for i, seed in enumerate(args.seeds):
        for tool in TOOLS if i % 2 == 0 else TOOLS[::-1]:
            runs[tool].append(train_once(tool, seed, args, work))
            print(f"seed {seed} {tool}: {runs[tool][-1]['seconds']:.1f} s, {runs[tool][-1]['epochs_run']} epochs, "
                  f"peak RSS {runs[tool][-1]['peak_rss_mib']:.0f} MiB", flush=True)
    acc = report(runs, prep, args, record, (load_before, os.getloadavg()[0]), state)
    print(f"total wall time {time.perf_counter() - t0:.0f} s; work dir {work}")
    if args.json:
        args.json.write_text(json.dumps({"argv": sys.argv, "accuracy": acc, "surrogate": prep["surrogate"], "runs": {
            tool: [{k: v for k, v in r.items() if k != "preds"} for r in rs] for tool, rs in runs.items()}}, indent=1))


if __name__ == "__main__":
    main()
