"""DeepRobust's Metattack (Meta-Self, or with ``--approximate`` its ``MetaApprox``, A-Meta-Self)
on the largest connected component of an ``.npz`` graph.

Runs inside the peer virtual environment made by ``bench/poisoning/peers.sh`` (DeepRobust
from PyPI); it never imports grb_dist. ``compare_metattack.py`` starts it as a subprocess;
it also runs on its own::

    PEER=${TMPDIR:-/tmp}/grb-dist-peers/deeprobust/bin/python
    $PEER bench/poisoning/deeprobust_metattack.py DATA/npz/cora.npz \\
        DATA/prognn/splits/cora_prognn_splits.json 0.05 0 out/deeprobust_cora_0.05.npz
    $PEER bench/poisoning/deeprobust_metattack.py ... --approximate   # MetaApprox instead

Graph: the adjacency of the ``.npz`` (keys ``adj_data`` / ``adj_indices`` / ``adj_indptr`` /
``adj_shape``, ``attr_*``, ``labels``; read with ``allow_pickle=False``) is symmetrised,
made unweighted and stripped of self-loops, and its largest connected component is kept
in ascending node order (Cora: 2,485 nodes, 5,069 edges), as DeepRobust's own ``Dataset``
and Pro-GNN do. Features are the raw attributes (a scipy CSR matrix, as in DeepRobust's
example: Metattack then multiplies features by weights first, ``adj @ (X @ W)``; dense
features would make it compute ``(adj @ X) @ W``, many times slower). The split JSON holds
``idx_train`` / ``idx_val`` / ``idx_test`` in component ids; the attack's unlabelled nodes
are ``val + test``.

Settings: those of DeepRobust's ``examples/graph/test_mettack.py`` and Pro-GNN's
``generate_attack.py`` (which made the published perturbed graphs): surrogate
``GCN(nhid=16, dropout=0.5, with_relu=False, with_bias=True, weight_decay=5e-4)`` fitted
on the training nodes for 200 iterations without validation; ``Metattack(lambda_=0)``
(Meta-Self) with its constructor defaults ``train_iters=100, lr=0.1, momentum=0.9``
(neither script passes them); ``attack(..., ll_constraint=False)`` (the degree-distribution
likelihood constraint is off in both scripts). Budget: ``int(rate * edges)`` flips.

``--approximate``: DeepRobust's ``MetaApprox`` (the authors' ``GNNMetaApprox``, A-Meta-Self)
instead of ``Metattack``, everything else as above (same surrogate, budget, unlabelled nodes,
``ll_constraint=False``): ``MetaApprox(..., lambda_=0, train_iters=100, lr=0.01)`` (its
constructor defaults, passed explicitly; ``with_bias=False`` as in ``Metattack``). Before
every greedy flip it re-initialises its weights and Adam; each of the 100 inner Adam steps
(lr 0.01, training-node loss) adds the gradient of the self-training loss with respect to
the adjacency, taken at that step's weights before the update, to the flip's score.

``--speedups`` (off by default; compare_metattack.py's ``--peer-speedups``): three run-time
changes to what DeepRobust 0.2.11's ``MetaApprox`` computes *with*, not *what* it computes.
Without them a greedy flip on Cora takes about 11 minutes of CPU (one thread; some 6.5 s an
inner step), the 253 flips of 5% some 46 hours; with the first two about 56 s, with all three
about 28 s (some 2 hours of CPU at 5%):

* ``MetaApprox.attack`` tests ``sp.issparse(features)`` *after* converting the features to a
  torch tensor (``Metattack.attack`` tests before), so the test is always false and every
  inner step multiplies ``(Â @ X) @ W`` (an N x N by N x D product, and its transpose in the
  backward pass) instead of ``Â @ (X @ W)``. With ``--speedups`` the runner's subclass sets
  the flag from the features it is given (sparse here), as ``Metattack`` does;
* ``utils.normalize_adj_tensor`` builds ``diag(r) @ (A + I) @ diag(r)`` with two dense
  N x N x N products, which ``MetaApprox`` back-propagates through at every inner step
  (twice: the training loss and the attacker's). With ``--speedups`` the same formula is
  computed as ``r[:, None] * (A + I) * r[None, :]`` (the same products in the same order:
  the same values; the gradient equal up to float summation order);
* each inner step back-propagates the attacker's loss through the normalisation and the
  symmetrisation of ``adj_changes`` (N x N elementwise work, the larger half of a step once the
  products above are gone). The normalised adjacency is fixed during the inner training, so
  the sum of the steps' gradients is the normalisation's Jacobian applied once to the sum of
  the gradients with respect to ``Â``; with ``--speedups`` the steps sum the latter and the
  Jacobian is applied once a flip (``normalised_gradient_meta_approx``). DeepRobust's
  ``inner_train`` itself runs unchanged.

The first changes the association of a product, the second and third the summation order of
the gradient: figures differ at float rounding, which can tip near-ties between pairs. Checked
on Cora, two flips of 100 inner steps each: the summed gradient with all three changes differs
from the one with the first two by at most 2.4e-7 (its largest entry 0.60), and the perturbed
graphs are equal. The report records the choice (``speedups``). No installed file is changed.

Measured: ``seconds`` is the wall time (``time.perf_counter``) of building ``Metattack`` and
calling ``attack`` (data loading and the surrogate's training are reported apart, in
``surrogate_seconds``), ``cpu_seconds`` this process's CPU time over the same span
(``time.process_time``); ``peak_rss_mib`` is this process's peak resident memory
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``, whole run: imports, data, surrogate,
attack), ``peak_rss_before_attack_mib`` the peak before the attack started. Output: the
perturbed adjacency (scipy ``save_npz``, CSR, component ids) at the output path, and one
JSON object (also printed as the last line of stdout) at the same path with suffix
``.json``. DeepRobust's own per-flip prints and progress bar go to stderr.

Runtime shim (documented, no DeepRobust file is changed): DeepRobust 0.2.11's
``deeprobust/graph/global_attack/__init__.py`` and ``graph/defense_pyg/__init__.py`` call
``warnings.warn`` in their "PyTorch Geometric is missing" fallback without importing
``warnings``; without PyG (not needed by Metattack or GCN) the import then dies with a
``NameError``. Making ``warnings`` a builtin before the import lets DeepRobust's fallback
run as intended (it prints the ImportError and warns).
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import json
import random
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers (standard library only)
from common import peak_rss_mib, timed  # noqa: E402


def load_lcc(npz_path: Path) -> tuple[sp.csr_matrix, sp.csr_matrix, np.ndarray]:
    """Adjacency (symmetric, 0/1, no self-loops), CSR features and labels of the largest
    connected component, in ascending node order."""
    with np.load(npz_path, allow_pickle=False) as z:
        adj = sp.csr_matrix((z["adj_data"], z["adj_indices"], z["adj_indptr"]), shape=tuple(z["adj_shape"]))
        attr = sp.csr_matrix((z["attr_data"], z["attr_indices"], z["attr_indptr"]), shape=tuple(z["attr_shape"]))
        labels = np.asarray(z["labels"], dtype=np.int64)
    adj = (adj + adj.T).tocsr()
    adj.data[:] = 1.0
    adj.setdiag(0)
    adj.eliminate_zeros()
    adj = adj.astype(np.float32)
    _, component = connected_components(adj, directed=False)
    keep = np.flatnonzero(component == np.bincount(component).argmax())  # ascending
    return adj[keep][:, keep].tocsr(), attr[keep].astype(np.float32).tocsr(), labels[keep]


def import_deeprobust():
    """``(GCN, Metattack, MetaApprox, version)``, with the one-line shim of the module docstring."""
    builtins.warnings = warnings  # DeepRobust's PyG fallback uses warnings without importing it
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("ignore")
        import deeprobust
        from deeprobust.graph.defense import GCN
        from deeprobust.graph.global_attack import MetaApprox, Metattack
    from importlib.metadata import version

    return GCN, Metattack, MetaApprox, version("deeprobust")


def sparse_feature_meta_approx(MetaApprox):
    """``MetaApprox`` whose inner training multiplies ``Â @ (X @ W)`` for sparse features
    (``--speedups``, module docstring): the flag ``sparse_features`` set from the features
    the training is given, as ``Metattack`` sets it, instead of from the converted tensor."""

    class SparseFeatureMetaApprox(MetaApprox):
        def inner_train(self, features, *args, **kwargs):
            self.sparse_features = bool(getattr(features, "is_sparse", False))
            return super().inner_train(features, *args, **kwargs)

    return SparseFeatureMetaApprox


def normalised_gradient_meta_approx(MetaApprox):
    """``MetaApprox`` whose inner training sums the attacker's gradients with respect to the
    *normalised* adjacency and carries the sum back through the normalisation and the
    symmetrisation once per flip (``--speedups``, module docstring).

    DeepRobust's ``inner_train`` runs unchanged on a stand-in: for its duration the
    normalisation returns a leaf copy of ``Â`` and ``adj_changes`` is that leaf, so each of the
    100 steps adds ``dL_j/dÂ`` to ``adj_grad_sum``; afterwards the real ``adj_changes`` is put
    back and ``adj_grad_sum`` becomes ``J^T sum_j dL_j/dÂ``, ``J`` the Jacobian of ``Â`` in
    ``adj_changes``. ``Â`` does not change within the inner training, so ``J`` is the same at
    every step and this equals DeepRobust's ``sum_j J^T dL_j/dÂ`` up to float summation order."""
    import torch
    from deeprobust.graph import utils

    class NormalisedGradientMetaApprox(MetaApprox):
        def inner_train(self, features, modified_adj, *args, **kwargs):
            adj_norm = utils.normalize_adj_tensor(modified_adj)  # differentiable in adj_changes
            stand_in = torch.nn.Parameter(adj_norm.detach().clone())
            changes, normalise = self.adj_changes, utils.normalize_adj_tensor
            utils.normalize_adj_tensor = lambda adj, sparse=False: stand_in
            self.adj_changes = stand_in
            try:
                super().inner_train(features, modified_adj, *args, **kwargs)
            finally:
                self.adj_changes, utils.normalize_adj_tensor = changes, normalise
            self.adj_grad_sum = torch.autograd.grad(adj_norm, changes, grad_outputs=self.adj_grad_sum)[0]

    return NormalisedGradientMetaApprox


def elementwise_normalization() -> None:
    """Make ``deeprobust.graph.utils.normalize_adj_tensor`` compute its dense case
    elementwise (``--speedups``, module docstring); the sparse case is kept."""
    import torch
    from deeprobust.graph import utils

    original = utils.normalize_adj_tensor

    def normalize_adj_tensor(adj, sparse=False):
        if sparse:
            return original(adj, sparse=True)
        mx = adj + torch.eye(adj.shape[0]).to(adj.device)
        r_inv = mx.sum(1).pow(-1 / 2).flatten()
        r_inv[torch.isinf(r_inv)] = 0.0
        return r_inv[:, None] * mx * r_inv[None, :]  # = diag(r) @ mx @ diag(r), as DeepRobust's

    utils.normalize_adj_tensor = normalize_adj_tensor


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("npz", type=Path, help="base graph (.npz, Nettack layout)")
    ap.add_argument("split", type=Path, help="split JSON (idx_train, idx_val, idx_test) in component ids")
    ap.add_argument("rate", type=float, help="budget as a share of the component's edges (0.05)")
    ap.add_argument("seed", type=int)
    ap.add_argument("output", type=Path, help="perturbed adjacency (.npz); the report goes beside it (.json)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's default)")
    ap.add_argument("--approximate", action="store_true",
                    help="MetaApprox (A-Meta-Self: train_iters=100, Adam lr=0.01) instead of Metattack")
    ap.add_argument("--speedups", action="store_true",
                    help="MetaApprox: X @ W first for sparse features, the normalisation elementwise (docstring)")
    args = ap.parse_args(argv)
    if args.speedups and not args.approximate:
        ap.error("--speedups is for --approximate (MetaApprox); Metattack runs as it ships")

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    GCN, Metattack, MetaApprox, dr_version = import_deeprobust()
    if args.speedups:
        elementwise_normalization()
        MetaApprox = normalised_gradient_meta_approx(sparse_feature_meta_approx(MetaApprox))

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    adj, features, labels = load_lcc(args.npz)
    split = json.loads(args.split.read_text())
    idx_train, idx_val, idx_test = (np.asarray(split[k], dtype=np.int64) for k in ("idx_train", "idx_val", "idx_test"))
    idx_unlabeled = np.union1d(idx_val, idx_test)
    n_edges = int(adj.sum() // 2)
    n_perturbations = int(args.rate * n_edges)

    surrogate = GCN(nfeat=features.shape[1], nclass=int(labels.max()) + 1, nhid=16, dropout=0.5, with_relu=False,
                    with_bias=True, weight_decay=5e-4, device="cpu").to("cpu")
    surrogate_seconds, _ = timed(surrogate.fit, features, adj, labels, idx_train)
    rss_before = peak_rss_mib()

    def build_and_attack():
        if args.approximate:
            attack = MetaApprox(model=surrogate, nnodes=adj.shape[0], feature_shape=features.shape,
                                attack_structure=True, attack_features=False, device="cpu", lambda_=0,
                                train_iters=100, lr=0.01).to("cpu")
        else:
            attack = Metattack(model=surrogate, nnodes=adj.shape[0], feature_shape=features.shape,
                               attack_structure=True, attack_features=False, device="cpu", lambda_=0).to("cpu")
        attack.attack(features, adj, labels, idx_train, idx_unlabeled, n_perturbations, ll_constraint=False)
        return attack

    cpu0 = time.process_time()
    with contextlib.redirect_stdout(sys.stderr):  # DeepRobust prints a few lines per flip
        seconds, attack = timed(build_and_attack)
    cpu_seconds = time.process_time() - cpu0

    modified = sp.csr_matrix(attack.modified_adj.cpu().numpy())
    modified.eliminate_zeros()
    diff = sp.triu(abs(modified - adj), k=1)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    sp.save_npz(args.output, modified)
    report = {
        "tool": "deeprobust",
        "attack": "MetaApprox" if args.approximate else "Metattack",
        "speedups": bool(args.speedups),
        "deeprobust_version": dr_version,
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "threads": torch.get_num_threads(),
        "nodes": int(adj.shape[0]),
        "edges": n_edges,
        "rate": args.rate,
        "seed": args.seed,
        "n_perturbations": n_perturbations,
        "flips": int(diff.nnz),
        "added": int((diff > 0).sum()),
        "removed": int(diff.nnz - (diff > 0).sum()),
        "symmetric": bool(abs(modified - modified.T).nnz == 0),
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "surrogate_seconds": surrogate_seconds,
        "peak_rss_before_attack_mib": rss_before,
        "peak_rss_mib": peak_rss_mib(),
        "settings": {"surrogate": "GCN nhid=16 dropout=0.5 with_relu=False with_bias=True wd=5e-4, 200 iters",
                     "attack": ("MetaApprox lambda_=0 train_iters=100 lr=0.01 (Adam) ll_constraint=False"
                                if args.approximate else
                                "Metattack lambda_=0 train_iters=100 lr=0.1 momentum=0.9 ll_constraint=False"),
                     "features": "scipy CSR (raw)"},
        "adjacency": str(args.output),
    }
    args.output.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
