"""DeepRobust's Nettack on given targets of the largest connected component of an ``.npz`` graph,
with given surrogate weights.

Runs inside the peer virtual environment made by ``bench/poisoning/peers.sh`` (DeepRobust from
PyPI); it never imports grb_dist. DeepRobust's ``targeted_attack`` package imports SGA,
which needs ``torch_scatter`` and ``torch_geometric`` (not in that venv); the runner imports
the Nettack module's installed file without the package's ``__init__``
(:func:`import_nettack`). ``compare_nettack.py`` starts it as a subprocess::

    $PEER bench/attacks/deeprobust_nettack.py DATA/npz/cora.npz SURROGATE.npz TARGETS.json OUT.json

Graph: ``load_lcc`` of ``bench/poisoning/deeprobust_metattack.py`` (symmetrised, unweighted,
no self-loops, largest component in ascending node order; CSR float32 adjacency and
features), the same function the grb-dist side calls. Surrogate: DeepRobust's
``GCN(nhid=h, with_relu=False, with_bias=False)`` whose two weight matrices are set to the
``W1`` and ``W2`` of ``SURROGATE.npz`` (Nettack reads ``gc1.weight @ gc2.weight``), so both
tools attack the same linear surrogate. ``TARGETS.json`` holds ``targets``, ``labels`` (the
class each target's margin is fought for) and ``budgets``.

Per target: a new ``Nettack(surrogate, attack_structure=True, attack_features=False)`` and
``attack(features, adj, labels, target, budget, direct=True, verbose=False)`` (ll_cutoff
0.004, its default). ``seconds``: wall time (``time.perf_counter``) of constructing and
running it, after one untimed warm-up attack (the first target, one flip) in which numba
compiles the scoring loop. ``peak_rss_mib``: the process's peak
resident memory over its whole life.

``--attack fga``: DeepRobust's ``FGA`` instead (imported the same way), per target a new
``FGA(surrogate, nnodes=N, attack_structure=True, attack_features=False)`` and
``attack(features, adj, fought, [target], target, budget)``: its loss is the cross-entropy of
the target's output against ``pseudo_labels``, the surrogate's predictions overwritten with
``labels`` at ``idx_train``; passing the target as ``idx_train`` makes it fight the class
of ``labels`` given for it (``TARGETS.json``), as grb-dist's side does (``idx_train`` is not
read otherwise). FGA reads the surrogate's predictions from its stored inputs (set by one
``predict(features, adj)`` on the clean graph before the warm-up). Flips: the pairs of the
target's row that differ from the clean graph at the end (a pair FGA flips twice is not
one), in index order. ``--speedups``: DeepRobust's dense ``normalize_adj_tensor``, which FGA
calls on the N x N adjacency at every flip and back-propagates through (two N x N x N
products each way, most of its time), computed elementwise as ``deeprobust_metattack.py
--speedups`` does (the same values; the gradient equal up to float summation order); no
installed file is changed.
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import importlib
import json
import sys
import time
import types
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # bench/: the shared helpers (standard library only)
sys.path.insert(0, str(HERE.parent / "poisoning"))  # the component loader shared with the Metattack bench
from common import peak_rss_mib  # noqa: E402
from deeprobust_metattack import elementwise_normalization, load_lcc  # noqa: E402


def import_nettack(module: str = "nettack", cls: str = "Nettack"):
    """DeepRobust's ``Nettack`` class (or ``cls`` of ``module``), without running its ``targeted_attack`` package's
    ``__init__``: that imports every targeted attack, SGA among them, which needs
    ``torch_scatter`` and ``torch_geometric`` (not in the venv). The package is registered
    bare (its real folder as its path), then its ``base_attack`` and ``nettack`` modules are
    imported from their installed files, unchanged."""
    import deeprobust.graph

    name = "deeprobust.graph.targeted_attack"
    folder = Path(deeprobust.graph.__file__).parent / "targeted_attack"
    package = types.ModuleType(name)
    package.__path__ = [str(folder)]
    sys.modules[name] = package
    base = importlib.import_module(f"{name}.base_attack")
    package.BaseAttack = base.BaseAttack
    return getattr(importlib.import_module(f"{name}.{module}"), cls)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("npz", type=Path)
    ap.add_argument("surrogate", type=Path, help=".npz with W1 (D x h) and W2 (h x C)")
    ap.add_argument("targets", type=Path, help="JSON: targets, labels, budgets")
    ap.add_argument("output", type=Path, help="the JSON report")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--attack", choices=["nettack", "fga"], default="nettack")
    ap.add_argument("--speedups", action="store_true",
                    help="FGA: the dense normalisation elementwise (deeprobust_metattack.py's; the same values)")
    args = ap.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    builtins.warnings = warnings  # DeepRobust's PyG fallback uses warnings without importing it
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("ignore")
        from deeprobust.graph.defense import GCN
        Nettack = import_nettack() if args.attack == "nettack" else import_nettack("fga", "FGA")
    from importlib.metadata import version

    adj, features, labels = load_lcc(args.npz)
    with np.load(args.surrogate, allow_pickle=False) as z:
        w1, w2 = z["W1"], z["W2"]
    job = json.loads(args.targets.read_text())
    surrogate = GCN(nfeat=features.shape[1], nclass=w2.shape[1], nhid=w1.shape[1], dropout=0, with_relu=False,
                    with_bias=False, device="cpu")
    surrogate.gc1.weight.data = torch.as_tensor(w1, dtype=torch.float32)
    surrogate.gc2.weight.data = torch.as_tensor(w2, dtype=torch.float32)
    fought = labels.copy()
    fought[job["targets"]] = job["labels"]
    if args.speedups:
        elementwise_normalization()
    if args.attack == "fga":
        surrogate.eval()
        surrogate.predict(features, adj)  # FGA's predict() reads the inputs stored here

    def run(target: int, budget: int):
        attack = Nettack(surrogate, nnodes=adj.shape[0], attack_structure=True, attack_features=False, device="cpu")
        with contextlib.redirect_stdout(sys.stderr):
            if args.attack == "fga":
                attack.attack(features, adj, fought, np.array([target]), target, budget)
            else:
                attack.attack(features, adj, fought, target, budget, direct=True, verbose=False)
        return attack

    run(int(job["targets"][0]), 1)  # untimed: numba compiles Nettack's scoring loop here
    rows = []
    for target, budget in zip(job["targets"], job["budgets"]):
        t0 = time.perf_counter()
        attack = run(int(target), int(budget))
        seconds = time.perf_counter() - t0
        if args.attack == "fga":
            changed = (attack.modified_adj[int(target)] != adj[int(target)]).nonzero()[1]
            flips = [[int(target), int(v)] for v in sorted(changed.tolist())]
        else:
            flips = [[int(u), int(v)] for u, v in (e for e in attack.structure_perturbations if len(e))]
        rows.append({"target": int(target), "budget": int(budget), "seconds": seconds, "flips": flips})
        print(f"deeprobust target {target}: {seconds:.2f} s, {len(flips)} flips", file=sys.stderr, flush=True)
    report = {"tool": "deeprobust", "attack": args.attack, "speedups": args.speedups, "version": version("deeprobust"), "torch_threads": torch.get_num_threads(),
              "rows": rows, "peak_rss_mib": peak_rss_mib()}
    args.output.write_text(json.dumps(report) + "\n")
    print(json.dumps({"output": str(args.output)}))
    return report


if __name__ == "__main__":
    main()
