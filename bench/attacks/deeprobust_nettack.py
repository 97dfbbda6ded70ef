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
from deeprobust_metattack import load_lcc  # noqa: E402


def import_nettack():
    """DeepRobust's ``Nettack`` class, without running its ``targeted_attack`` package's
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
    return importlib.import_module(f"{name}.nettack").Nettack


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("npz", type=Path)
    ap.add_argument("surrogate", type=Path, help=".npz with W1 (D x h) and W2 (h x C)")
    ap.add_argument("targets", type=Path, help="JSON: targets, labels, budgets")
    ap.add_argument("output", type=Path, help="the JSON report")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    builtins.warnings = warnings  # DeepRobust's PyG fallback uses warnings without importing it
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("ignore")
        from deeprobust.graph.defense import GCN
        Nettack = import_nettack()
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
    warm = Nettack(surrogate, nnodes=adj.shape[0], attack_structure=True, attack_features=False, device="cpu")
    with contextlib.redirect_stdout(sys.stderr):  # untimed: numba compiles the scoring loop here
        warm.attack(features, adj, fought, int(job["targets"][0]), 1, direct=True, verbose=False)
    rows = []
    for target, budget in zip(job["targets"], job["budgets"]):
        t0 = time.perf_counter()
        attack = Nettack(surrogate, nnodes=adj.shape[0], attack_structure=True, attack_features=False, device="cpu")
        with contextlib.redirect_stdout(sys.stderr):
            attack.attack(features, adj, fought, int(target), int(budget), direct=True, verbose=False)
        seconds = time.perf_counter() - t0
        flips = [[int(u), int(v)] for u, v in (e for e in attack.structure_perturbations if len(e))]
        rows.append({"target": int(target), "budget": int(budget), "seconds": seconds, "flips": flips})
        print(f"deeprobust target {target}: {seconds:.2f} s, {len(flips)} flips", file=sys.stderr, flush=True)
    report = {"tool": "deeprobust", "version": version("deeprobust"), "torch_threads": torch.get_num_threads(),
              "rows": rows, "peak_rss_mib": peak_rss_mib()}
    args.output.write_text(json.dumps(report) + "\n")
    print(json.dumps({"output": str(args.output)}))
    return report


if __name__ == "__main__":
    main()
