"""grb-dist's defenses next to DeepRobust's (GCN, GCN-SVD, GCN-Jaccard, R-GCN) on the same
graphs: Pro-GNN's Cora (its component and split), clean and poisoned by Pro-GNN's published
Metattack graphs; accuracy, seconds per training and peak memory.

    bash bench/poisoning/peers.sh        # once: DeepRobust's venv
    python bench/poisoning/compare_defenses.py --rates 0,0.05,0.1 --seeds 3 --k 15 --peer-speedups

Each (tool, model) runs in a process of its own, every rate and seed in turn, so that its
peak resident memory (``ru_maxrss``, imports and data included) is that model's; the two
tools of a model run one after the other, the order alternating from model to model.

- grb-dist: ``fidelity.py``'s training (the ``published`` attack's graph, the poisoning
  cell's transductive training with the ``prognn-cora`` job's hyper-parameters: hidden 16,
  R-GCN 32, lr 0.01, weight decay 5e-4, 200 epochs, the weights of the lowest validation
  loss), one torch thread;
- DeepRobust 0.2.11: ``deeprobust_defenses.py`` in the peer venv (its examples' settings,
  the epoch of the best validation loss or accuracy), one torch thread; ``--peer-speedups``
  computes its dense normalisation elementwise (the same values, a minute less a training:
  that runner's docstring).

The figure is the test accuracy on Pro-GNN's ``idx_test``, mean ± std (population) over
``--seeds`` seeds (0 .. N-1; each tool its own random streams, so the two columns are two
samples of the same method, comparable within the seeds' spread), next to Pro-GNN's Table 2
(``prognn_table2.csv``). With several GCN-SVD ranks (``--k 5,10,15,50,100,200``, Pro-GNN's
grid) each tool also gets a row per rate at the rank of its best mean validation accuracy.

Data: ``--data`` (a folder with ``npz/`` and ``prognn/``, as the test-suite's; default: the
first of ``bench/common.py``'s data folders that has Pro-GNN's files).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # bench/: the shared helpers
sys.path.insert(0, str(HERE))
from common import PROGNN, data_folders, emit, find_data, peak_rss_mib, run_child  # noqa: E402

MODELS = ("GCN", "GCN-SVD", "GCN-Jaccard", "RGCN")
DEFAULT_PEER_VENV = Path(os.environ.get("PEER_VENV")
                         or Path(os.environ.get("TMPDIR") or "/tmp") / "grb-dist-peers" / "deeprobust")
RUNNER = HERE / "deeprobust_defenses.py"


def grb_dist_child(args: argparse.Namespace) -> None:
    """The grb-dist side of one model: every rate, rank and seed in this process."""
    import torch

    torch.set_num_threads(args.threads)
    from fidelity import poisoned_graph, train_scored

    ranks = [int(k) for k in args.k.split(",")] if args.model == "GCN-SVD" else [None]
    runs = []
    for rate in (float(r) for r in args.rates.split(",")):
        graph = poisoned_graph(args.dataset, rate)
        for k in ranks:
            extra = json.dumps({"k": k} if k else {"threshold": args.threshold} if args.model == "GCN-Jaccard" else {})
            for seed in range(args.seeds):
                val, test, seconds = train_scored(graph, args.model, seed, extra=extra)
                runs.append({"rate": rate, "k": k, "seed": seed, "val": val, "test": test, "seconds": seconds})
                print(f"{args.model} k={k} rate={rate:g} seed={seed}: test {test:.4f} ({seconds:.1f} s)",
                      file=sys.stderr, flush=True)
    emit({"tool": "grb-dist", "torch": torch.__version__, "threads": args.threads, "model": args.model,
          "dataset": args.dataset, "runs": runs, "peak_rss_mib": peak_rss_mib()})


def run_side(tool: str, model: str, args: argparse.Namespace, data: Path) -> dict | None:
    common = ["--model", model, "--rates", args.rates, "--seeds", str(args.seeds), "--k", args.k,
              "--threshold", str(args.threshold), "--threads", str(args.threads), "--dataset", args.dataset]
    log = args.out / f"{tool}_{model}.log" if args.out else None
    if tool == "grb-dist":
        env = {**os.environ, "GRB_DIST_PROGNN": str(data / PROGNN)}
        return run_child([Path(__file__), "--child", *common], log=log, env=env)
    speed = ["--speedups"] if args.peer_speedups else []
    return run_child([RUNNER, data, *common, *speed], python=args.peer_python, log=log)


def published(dataset: str) -> dict[tuple[float, str], tuple[float, float]]:
    from fidelity import published_table

    table = published_table(HERE / "prognn_table2.csv")
    return {(r, m): v for (d, r, m), v in table.items() if d == dataset}


def summary(runs: list[dict]) -> tuple[str, float]:
    acc = np.array([r["test"] for r in runs]) * 100
    return f"{acc.mean():.1f} ± {acc.std():.1f}", float(np.median([r["seconds"] for r in runs]))


def report(results: dict[tuple[str, str], dict], args: argparse.Namespace) -> None:
    paper = published(args.dataset)
    tools = [t for t in ("grb-dist", "deeprobust") if t in args.tools]
    print(f"{args.dataset}: test accuracy (%) on Pro-GNN's idx_test, mean ± std (population) over {args.seeds} seeds; "
          "median seconds per training; peak RSS of the model's process (MiB). One torch thread each"
          + (", DeepRobust with its runner's --speedups" if args.peer_speedups else "") + ".\n")
    print("| model | rate | " + " | ".join(f"{t} acc" for t in tools) + " | Table 2 | "
          + " | ".join(f"{t} s" for t in tools) + " | " + " | ".join(f"{t} MiB" for t in tools) + " |")
    print("|---|---|" + "---|" * (3 * len(tools) + 1))
    rates = [float(r) for r in args.rates.split(",")]
    ranks = [int(k) for k in args.k.split(",")]
    for model in args.models:
        sides = {t: results.get((t, model)) for t in tools}
        for k in (ranks if model == "GCN-SVD" else [None]):
            for rate in rates:
                accs, secs, mibs = [], [], []
                for t in tools:
                    runs = [r for r in (sides[t] or {}).get("runs", []) if r["rate"] == rate and r["k"] == k]
                    acc, sec = summary(runs) if runs else ("-", float("nan"))
                    accs.append(acc)
                    secs.append(f"{sec:.1f}")
                    mibs.append(f"{sides[t]['peak_rss_mib']:.0f}" if sides[t] else "-")
                ref = paper.get((rate, model))
                name = f"{model} k={k}" if k else model
                print(f"| {name} | {rate:.0%} | " + " | ".join(accs) + f" | {f'{ref[0]:.1f} ± {ref[1]:.1f}' if ref else '-'} | "
                      + " | ".join(secs) + " | " + " | ".join(mibs) + " |")
        if model == "GCN-SVD" and len(ranks) > 1:
            for rate in rates:
                cells = []
                for t in tools:
                    runs = [r for r in (sides[t] or {}).get("runs", []) if r["rate"] == rate]
                    if not runs:
                        cells.append("-")
                        continue
                    best = max(ranks, key=lambda k: (np.mean([r["val"] for r in runs if r["k"] == k]), -k))
                    cells.append(f"{summary([r for r in runs if r['k'] == best])[0]} (k={best})")
                ref = paper.get((rate, model))
                print(f"| GCN-SVD, rank by validation | {rate:.0%} | " + " | ".join(cells)
                      + f" | {f'{ref[0]:.1f} ± {ref[1]:.1f}' if ref else '-'} | " + " | ".join("" for _ in tools)
                      + " | " + " | ".join("" for _ in tools) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None, help="folder with npz/ and prognn/ (default: bench/common.py's)")
    ap.add_argument("--dataset", default="cora")
    ap.add_argument("--rates", default="0,0.05,0.1", help="0 = the clean graph")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--k", default="200", help="GCN-SVD's rank (the prognn-cora job's 200); a comma list trains each")
    ap.add_argument("--threshold", type=float, default=0.01, help="GCN-Jaccard's threshold (both tools' default)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", choices=("grb-dist", "deeprobust"), default=None)
    ap.add_argument("--peer-python", type=Path, default=DEFAULT_PEER_VENV / "bin" / "python",
                    help="python of the DeepRobust venv (bench/poisoning/peers.sh)")
    ap.add_argument("--peer-speedups", action="store_true", help="DeepRobust's dense normalisation elementwise")
    ap.add_argument("--out", type=Path, default=None, help="keep each child's log and the results (JSON) here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        grb_dist_child(args)
        return
    args.models = args.models.split(",")
    if unknown := set(args.models) - set(MODELS):
        sys.exit(f"unknown model(s) {sorted(unknown)}; choose from {', '.join(MODELS)}")
    args.tools = [args.only] if args.only else ["grb-dist", "deeprobust"]
    data = args.data or next((f for f in data_folders() if find_data(PROGNN) and (f / PROGNN).exists()), None)
    if data is None or not (data / PROGNN).exists():
        sys.exit(f"no Pro-GNN files ({PROGNN}/) in {args.data or data_folders()}; pass --data")
    if "deeprobust" in args.tools and not args.peer_python.exists():
        sys.exit(f"no DeepRobust venv at {args.peer_python}: run bench/poisoning/peers.sh or pass --peer-python")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for i, model in enumerate(args.models):
        for tool in (args.tools if i % 2 == 0 else args.tools[::-1]):
            print(f"running {tool} {model} ...", file=sys.stderr, flush=True)
            results[(tool, model)] = run_side(tool, model, args, data)
    if args.out:
        (args.out / "results.json").write_text(json.dumps({f"{t}/{m}": r for (t, m), r in results.items()}, indent=1))
    report(results, args)


if __name__ == "__main__":
    main()
