"""Sparse spectral machinery of NEA and STACK: a rank-k eigendecomposition of the
generalized problem ``(A + I) u = lambda (D + I) u`` and first-order eigenvalue updates of
candidate flips, vectorised over candidates.

Eigenpairs: the generalized problem is equivalent to the symmetric one
``S v = lambda v`` with ``S = D~^-1/2 (A + I) D~^-1/2`` (``D~ = D + I``) and
``u = D~^-1/2 v``, whose eigenvectors are ``D~``-orthonormal (``u^T D~ u = 1``, the
normalisation of ``scipy.linalg.eigh(A + I, D + I)``). :func:`eigenpairs` computes the
``k`` largest-magnitude pairs with ARPACK (``scipy.sparse.linalg.eigsh``) from a seeded start
vector. Every connected component ``c`` has the trivial eigenpair ``lambda = 1``,
``v = D~^1/2 1_c / ||.||``; a flip inside a component leaves it unchanged to first order
(``2 u_i u_j - (u_i^2 + u_j^2) = 0`` for a constant ``u`` on the component), and on graphs
with many small components (the aminer twin has 4,323, mostly isolated nodes) they would fill
all ``k`` slots. With ``skip_trivial`` (the default) they are projected out of the operator
(known in closed form from the component labels) and the ``k`` largest-magnitude
*non-trivial* pairs are returned.

First-order update (Bojchevski & Günnemann 2019, Theorem 1): flipping ``(i, j)`` with
``w = 1 - 2 A_ij`` changes ``lambda_p`` to
``lambda_p + w (2 u_pi u_pj - lambda_p (u_pi^2 + u_pj^2))``; :func:`perturbed_eigenvalues`
evaluates this for a chunk of candidates at once (C x k).

Cost: ``eigsh`` needs a few hundred sparse products with an N-vector (O(E) each), and each
of them an orthogonalisation against its basis of about ``2 k`` N-vectors. That
orthogonalisation is bound by memory traffic and dominates on a large graph, so at the
default ``tol`` ARPACK runs in float32 and one float64 Rayleigh-Ritz step (a product with
N x k, two k x k Gram matrices) makes the pairs float64-orthonormal. The iteration count is
set by the spectrum: on the aminer twin the top eigenvalues are localised on short pendant
paths and cluster within 1e-4 of each other, and ARPACK needs about 630 products. The
scores are O(C k). Nothing is N x N.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, ClassVar, Iterator

import numpy as np
import scipy.sparse as sp
import torch
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import LinearOperator, eigsh

from grb_dist.attacks.shared.flips import ModContext, ModificationAttack, ModificationConfig
from grb_dist.attacks.modification.selection import check_bool, check_choice, rank_order, select_ranked
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Modification

CHUNK = 1 << 17


def adjacency(edge_index: np.ndarray, n: int) -> sp.csr_matrix:
    """The symmetric 0/1 adjacency (float64 CSR) of an edge list with both directions."""
    return sp.csr_matrix((np.ones(edge_index.shape[1]), (edge_index[0], edge_index[1])), shape=(n, n))


def normalized_operator(edge_index: np.ndarray, n: int) -> tuple[sp.csr_matrix, np.ndarray]:
    """``S = D~^-1/2 (A + I) D~^-1/2`` (CSR) and ``D~^-1/2`` (N)."""
    a = adjacency(edge_index, n)
    d_inv_sqrt = 1.0 / np.sqrt(np.asarray(a.sum(1)).ravel() + 1.0)
    s = a + sp.identity(n, format="csr")
    s = sp.diags(d_inv_sqrt) @ s @ sp.diags(d_inv_sqrt)
    return s.tocsr(), d_inv_sqrt


def trivial_basis(edge_index: np.ndarray, n: int, d_inv_sqrt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Component labels (N) and the per-node entries of the unit trivial eigenvector of the
    node's component, ``sqrt(d~_i) / sqrt(vol~(c))`` (N)."""
    _, labels = connected_components(adjacency(edge_index, n), directed=False)
    d_sqrt = 1.0 / d_inv_sqrt
    vol = np.bincount(labels, weights=d_sqrt ** 2)
    return labels, d_sqrt / np.sqrt(vol[labels])


class _Deflation:
    """The projection ``P = I - Q Q^T`` orthogonal to the trivial eigenvectors, ``Q``
    (N x components) their sparse matrix, one entry per node (two sparse products: about 3x
    faster than a weighted ``bincount`` and a gather, the same values)."""

    def __init__(self, q: sp.csr_matrix) -> None:
        self.q, self.q_t = q, q.T.tocsr()

    @classmethod
    def of_components(cls, labels: np.ndarray, basis: np.ndarray) -> _Deflation:
        n = labels.size
        return cls(sp.csr_matrix((basis, (np.arange(n), labels)), shape=(n, int(labels.max()) + 1)))

    def astype(self, dtype: type) -> _Deflation:
        """The same projection in ``dtype`` (itself when it already is)."""
        return self if self.q.dtype == dtype else _Deflation(self.q.astype(dtype))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return x - self.q @ (self.q_t @ x)


def _operator(s: sp.csr_matrix, deflation: _Deflation | None, dtype: type) -> LinearOperator:
    """``S P`` in ``dtype`` (``S`` when nothing is deflated). ``Q`` spans an invariant
    subspace of the symmetric ``S``, so ``S`` and ``P`` commute and ``S P = P S P``: one
    projection a product, not two."""
    s = s.astype(dtype, copy=False)

    def matvec(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=dtype).ravel()
        return s @ (x if deflation is None else deflation(x))

    return LinearOperator(s.shape, matvec=matvec, rmatvec=matvec, dtype=dtype)


def _rayleigh_ritz(s: sp.csr_matrix, deflation: _Deflation | None, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Ritz pairs of ``S P`` on the span of ``v``'s columns, in float64 (``V = P v``):
    ``V^T V``'s eigenvectors, scaled, make an orthonormal basis of the span (directions it
    does not have, e.g. a column inside the deflated span, dropped), and ``V^T S V`` in that
    basis gives the pairs, their vectors orthonormal in float64."""
    v = v.astype(np.float64)
    if deflation is not None:
        v = deflation(v)
    w = s @ v
    h, m = v.T @ w, v.T @ v
    g, z = np.linalg.eigh((m + m.T) / 2)
    keep = g > 1e-8 * max(float(g.max()), 0.0)
    basis = z[:, keep] / np.sqrt(g[keep])
    h = basis.T @ h @ basis
    vals, y = np.linalg.eigh((h + h.T) / 2)
    return vals, v @ (basis @ y)


#: Smallest ``tol`` at which the Lanczos iteration runs in float32 (single precision reaches
#: a relative residual of about 1e-6 at best): half the memory traffic of its
#: orthogonalisation, which dominates on a large graph, and a float64 Rayleigh-Ritz step on
#: the subspace it found gives the pairs.
SINGLE_PRECISION_TOL = 1e-5


def eigenpairs(edge_index: np.ndarray, n: int, k: int, gen: torch.Generator, *, tol: float = SINGLE_PRECISION_TOL,
               skip_trivial: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest-magnitude eigenpairs of ``(A + I) u = lambda (D + I) u``.

    Args:
        edge_index: 2 x E, both directions of every undirected edge.
        n: number of nodes.
        k: number of pairs (clipped to ``n - 1`` minus the trivial ones, at least 1).
        gen: seeded generator of ARPACK's start vector.
        tol: ARPACK's relative accuracy of the eigenvalues (0: float64's). From
            :data:`SINGLE_PRECISION_TOL` up, ARPACK runs in float32 and a float64
            Rayleigh-Ritz step on its subspace gives the pairs; below, in float64.
        skip_trivial: leave out the trivial ``lambda = 1`` pair of every component.

    Returns:
        ``vals`` (k, sorted by decreasing magnitude) and ``U`` (N x k, float64) with
        ``U^T (D + I) U = I``.
    """
    s, d_inv_sqrt = normalized_operator(edge_index, n)
    deflation, rank = None, n
    if skip_trivial:
        labels, basis = trivial_basis(edge_index, n, d_inv_sqrt)
        deflation, rank = _Deflation.of_components(labels, basis), n - int(labels.max()) - 1
    k = max(1, min(k, rank, n - 1))
    v0 = torch.rand(n, generator=gen, dtype=torch.float64).numpy() + 0.5
    if k + 1 >= rank and n <= DENSE_MAX_NODES:
        vals, vecs = _dense_eigenpairs(_operator(s, deflation, np.float64), n, k, deflation is not None)
    else:  # never dense on a large graph: ARPACK, its zero pairs (the deflated span) dropped
        single = tol >= SINGLE_PRECISION_TOL
        dtype = np.float32 if single else np.float64
        if deflation is not None:
            v0 = deflation(v0)
        op = _operator(s, None if deflation is None else deflation.astype(dtype), dtype)
        vals, vecs = eigsh(op, k=min(k, n - 2), which="LM", v0=v0.astype(dtype), tol=tol)
        if single:
            vals, vecs = _rayleigh_ritz(s, deflation, vecs)
        kept = np.abs(vals) > 1e-9
        vals, vecs = vals[kept], vecs[:, kept]
    order = np.argsort(-np.abs(vals), kind="stable")
    vals, vecs = vals[order], vecs[:, order]
    return vals, vecs * d_inv_sqrt[:, None]


#: Largest graph whose eigenpairs may be computed densely (only when ARPACK cannot give k of
#: them: tiny graphs, or graphs that are almost all isolated nodes).
DENSE_MAX_NODES = 2048


def _dense_eigenpairs(op: LinearOperator, n: int, k: int, deflated: bool) -> tuple[np.ndarray, np.ndarray]:
    """Exact pairs of a small operator (ARPACK needs ``k < n - 1``); with a deflated operator
    its zero eigenvalues (the projected-out trivial span) are dropped."""
    dense = op @ np.eye(n)
    vals, vecs = np.linalg.eigh((dense + dense.T) / 2)
    if deflated:
        kept = np.abs(vals) > 1e-9
        vals, vecs = vals[kept], vecs[:, kept]
    top = np.argsort(-np.abs(vals), kind="stable")[:k]
    return vals[top], vecs[:, top]


def perturbed_eigenvalues(vals: np.ndarray, u: np.ndarray, pairs: np.ndarray, w: np.ndarray) -> np.ndarray:
    """First-order eigenvalues after flipping each pair (C x k).

    Args:
        vals: k eigenvalues; u: N x k generalized eigenvectors.
        pairs: 2 x C node pairs; w: C signs ``1 - 2 A_ij`` (+1 addition, -1 removal).
    """
    ui, uj = u[pairs[0]], u[pairs[1]]
    return vals[None, :] + w[:, None] * (2 * ui * uj - vals[None, :] * (ui * ui + uj * uj))


def score_candidates(vals: np.ndarray, u: np.ndarray, pairs: np.ndarray, w: np.ndarray,
                     score: Callable[[np.ndarray], np.ndarray], chunk: int = CHUNK) -> np.ndarray:
    """``score(perturbed eigenvalues)`` (C x k -> C) for every candidate, by chunks of rows."""
    out = np.empty(pairs.shape[1], dtype=np.float64)
    for lo, hi in _chunks(pairs.shape[1], chunk):
        out[lo:hi] = score(perturbed_eigenvalues(vals, u, pairs[:, lo:hi], w[lo:hi]))
    return out


def _chunks(total: int, size: int) -> Iterator[tuple[int, int]]:
    for lo in range(0, total, size):
        yield lo, min(total, lo + size)


def sum_of_powers(vals: np.ndarray, window: int) -> np.ndarray:
    """``sum_{r=1..window} vals^r`` elementwise."""
    acc = np.zeros_like(vals)
    power = np.ones_like(vals)
    for _ in range(window):
        power = power * vals
        acc += power
    return acc




# ---------------------------------------------------------------------- shared attack part

CANDIDATES = ("edges", "edges_and_pairs")


@dataclass(frozen=True)
class SpectralConfig(ModificationConfig):
    """Options shared by NEA and STACK.

    Attributes:
        k: number of eigenpairs (largest magnitude, trivial ones left out), >= 1.
        candidates: ``edges`` (GRB: removals of the clean edges touching a target) or
            ``edges_and_pairs`` (plus sampled absent pairs touching a target, additions).
        n_candidate_pairs: how many absent pairs to sample; ``None`` = 10 x the budget.
        allow_isolate: allow removals that leave a node without edges.
        tol: ARPACK's relative accuracy of the eigenvalues (0: float64's). From 1e-5 (the
            default) up ARPACK runs in float32, and a float64 Rayleigh-Ritz step on the
            subspace it found gives the pairs; below, it runs in float64.
    """

    k: int = 32
    candidates: str = "edges"
    n_candidate_pairs: int | None = None
    allow_isolate: bool = False
    tol: float = SINGLE_PRECISION_TOL

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ConfigError(f"k must be a positive integer (eigenpairs), got {self.k!r}")
        check_choice("candidates", self.candidates, CANDIDATES)
        p = self.n_candidate_pairs
        if p is not None and (isinstance(p, bool) or not isinstance(p, int) or p < 1):
            raise ConfigError(f"n_candidate_pairs must be a positive integer or null, got {p!r}")
        check_bool("allow_isolate", self.allow_isolate)
        if not (isinstance(self.tol, (int, float)) and math.isfinite(self.tol) and 0 <= self.tol < 1):
            raise ConfigError(f"tol must be in [0, 1), got {self.tol!r}")


class SpectralAttack(ModificationAttack):
    """Rank candidate flips by a score of their first-order perturbed eigenvalues and keep
    the best ``n_edge_mod`` (removals subject to the isolation rule). Subclasses implement
    :meth:`score`."""

    Config: ClassVar[type[ModificationConfig]] = SpectralConfig
    uses_surrogate = False

    def score(self, vals: np.ndarray, new_vals: np.ndarray) -> np.ndarray:
        """Score of each candidate (C) from the clean (k) and perturbed (C x k) eigenvalues;
        higher flips first."""
        raise NotImplementedError

    def candidates(self, ctx: ModContext, gen: torch.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Candidate canonical pairs (2 x C) and whether each is a clean edge."""
        cfg = self.config
        edges = ctx.target_edges
        if cfg.candidates == "edges":
            return edges, np.ones(edges.shape[1], dtype=bool)
        n_pairs = cfg.n_candidate_pairs or 10 * ctx.budget.n_edge_mod
        pairs = ctx.sample_pairs(n_pairs, gen, exclude=ctx.edge_keys)
        is_edge = np.concatenate([np.ones(edges.shape[1], bool), np.zeros(pairs.shape[1], bool)])
        return np.concatenate([edges, pairs], axis=1), is_edge

    def scores(self, ctx: ModContext, gen: torch.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Candidates (2 x C), their edge flags and their scores (C)."""
        cfg = self.config
        vals, u = eigenpairs(ctx.graph.edge_index, ctx.n, cfg.k, gen, tol=cfg.tol)
        pairs, is_edge = self.candidates(ctx, gen)
        w = np.where(is_edge, -1.0, 1.0)
        return pairs, is_edge, score_candidates(vals, u, pairs, w, lambda new: self.score(vals, new))

    def generate(self, ctx: ModContext, gen: torch.Generator) -> Modification:
        pairs, is_edge, score = self.scores(ctx, gen)
        order = rank_order(score, pairs[0] * ctx.n + pairs[1])
        pairs, is_edge = pairs[:, order], is_edge[order]
        keep = select_ranked(pairs, is_edge, ctx.graph.degrees(), ctx.budget.n_edge_mod, self.config.allow_isolate)
        return ctx.result(pairs[:, keep])


__all__ = ["CANDIDATES", "SpectralAttack", "SpectralConfig", "adjacency", "eigenpairs", "normalized_operator",
           "perturbed_eigenvalues", "score_candidates", "sum_of_powers", "trivial_basis"]
