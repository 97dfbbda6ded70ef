"""Nettack: a targeted attack on one node's classification (Zügner, Akbarnejad & Günnemann,
"Adversarial Attacks on Neural Networks for Graph Data", KDD 2018).

The attacker wants the *target* ``u`` misclassified and flips, one at a time, the edge or
feature that lowers most the margin of ``u``'s class ``y`` under a *surrogate*, the
linearised two-layer GCN of the paper::

    logits = Â² X W,    Â = D̃^-1/2 (A + I) D̃^-1/2,  D̃ = diag(degree + 1)

(``W = W1 W2`` of a GCN trained without its nonlinearity: :func:`train_linear_gcn`; an
optional ``bias`` is added to ``X W`` before propagation, so an SGC with ``k = 2`` and no
hidden layer is such a surrogate too). The margin is ``logits_uy - max_{c != y} logits_uc``;
the attack succeeds when it turns negative. Every step

1. scores every candidate edge flip by the target's margin after the flip, *exactly*:
   a flip ``(m, n)`` changes two degrees and one edge, so only the two terms ``k in {m, n}``
   of ``[Â²]_uv = s_u s_v sum_k Ã_uk Ã_kv / d̃_k`` (``s = d̃^-1/2``) change, and the new
   logits of ``u`` follow from three quantities of the current graph (computed once per
   step, O(E C)): ``R = Ã diag(1/d̃) Ã_u`` (the unnormalised two-hop row of ``u``),
   ``G = Ã diag(s) Z`` and ``B = sum_v R_v s_v Z_v`` (``Z = X W``)::

       logits'_u = s'_u [ B + sum_{v in {m,n}} R_v (s'_v - s_v) Z_v
                        + sum_{k in {m,n}} (Ã'_uk G'_k / d̃'_k - Ã_uk Ĝ_k / d̃_k) ]

   with ``G'_k = sum_v Ã'_kv s'_v Z_v`` and ``Ĝ_k = sum_v Ã_kv s'_v Z_v``, each ``G_k``
   plus at most two rows of ``Z``. This is the paper's Theorem 5.1 (the row of ``Â²`` after
   one flip) folded with ``Z``: O(C) per candidate, all candidates of a step as a few
   vector operations (:func:`flip_logits`), nothing N x N, ``Â²`` never recomputed;
2. drops flips that would leave a node without edges (singletons) and, with
   ``ll_constraint``, flips whose degree sequence fails the likelihood-ratio test
   (:class:`~grb_dist.attacks.targeted.plausibility.DegreeTest`);
3. scores every feature flip ``(i, j)`` of the nodes it may change by the margin after it,
   also exact (the surrogate is linear in ``X``: the flip adds ``+-[Â²]_ui W_j`` to the
   logits; the paper takes the gradient, which is the same change with the best wrong
   class held fixed), where additions pass the co-occurrence test with ``cooc_constraint``
   (:func:`~grb_dist.attacks.targeted.plausibility.cooccurrence_allowed`);
4. applies the better of the best edge and the best feature flip (the lower margin; a tie
   goes to the feature, as in the authors' code).

A direct attack (the default) flips edges ``(u, n)`` and ``u``'s features. An influencer
attack never touches ``u``: it flips edges ``(m, n)`` and features of the influencers
``m``, the ``n_influencers`` neighbours of ``u`` whose edge's removal would lower the margin
most (the paper's choice; the authors' code tops up with non-neighbours where ``u`` has
fewer neighbours, which is not done here). A pair or feature is flipped at most once, so
the budget counts changes of the graph (a flip back would spend two of it on nothing). When
no candidate passes the tests the attack stops early.

Scaling: per step O(E C) for ``R``, ``G`` and ``B`` (sparse products) and O(P C) for the P
candidate pairs (N for a direct attack, about ``n_influencers N`` otherwise), in blocks of
:data:`PAIR_BLOCK`; features O(k D C) for the k changeable nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from grb_dist.attacks.base import Budget
from grb_dist.attacks.targeted.base import TargetContext, TargetedAttack, TargetedConfig, gathered
from grb_dist.attacks.targeted.plausibility import LL_CUTOFF, DegreeTest, cooccurrence_allowed
from grb_dist.core.bounds import check_int, check_positive_number
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph
from grb_dist.core.targeted import TargetedModification

#: Candidate pairs scored at once (each holds a few C-wide float64 rows).
PAIR_BLOCK = 1 << 16


@dataclass(frozen=True)
class NettackConfig:
    """Attributes:
        structure: flip edges.
        features: flip (binary) features.
        direct: flips touch the target (default); else only its influencers.
        n_influencers: influencers of an indirect attack (neighbours of the target).
        ll_constraint: keep the degree distribution plausible (likelihood-ratio test).
        ll_cutoff: the test's threshold (the paper's 0.004).
        cooc_constraint: add a feature only where it co-occurs with the node's features.
    """

    structure: bool = True
    features: bool = False
    direct: bool = True
    n_influencers: int = 5
    ll_constraint: bool = True
    ll_cutoff: float = LL_CUTOFF
    cooc_constraint: bool = True

    def __post_init__(self) -> None:
        if not (self.structure or self.features):
            raise ConfigError("nettack needs structure: true or features: true (it would flip nothing)")
        check_int(self.n_influencers, "nettack n_influencers", 1, 1 << 20)
        check_positive_number(self.ll_cutoff, "nettack ll_cutoff")


@dataclass(frozen=True)
class NettackResult:
    """What one attack did.

    Attributes:
        perturbations: the flips in the order made: ``("edge", m, n)`` (``m`` the target or
            an influencer) or ``("feature", node, feature)``.
        adj: the perturbed adjacency (CSR, symmetric, 0/1).
        features: the perturbed features (the type given: CSR or dense).
        margins: the surrogate's margin of the target before the attack and after each flip.
        influencers: the nodes whose edges and features may change (the target itself when
            direct).
    """

    perturbations: list[tuple[str, int, int]]
    adj: sp.csr_matrix
    features: sp.csr_matrix | np.ndarray
    margins: np.ndarray
    influencers: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def edge_flips(self) -> list[tuple[int, int]]:
        return [(m, n) for kind, m, n in self.perturbations if kind == "edge"]

    @property
    def feature_flips(self) -> list[tuple[int, int]]:
        return [(i, j) for kind, i, j in self.perturbations if kind == "feature"]


# ---------------------------------------------------------------------- the surrogate


def normalized_adjacency(adj: sp.spmatrix) -> sp.csr_matrix:
    """``Â = D̃^-1/2 (A + I) D̃^-1/2`` of a symmetric 0/1 adjacency without self-loops."""
    a = sp.csr_matrix(adj, dtype=np.float64)
    s = 1.0 / np.sqrt(np.asarray(a.sum(axis=1)).ravel() + 1.0)
    return (sp.diags(s) @ (a + sp.identity(a.shape[0], format="csr")) @ sp.diags(s)).tocsr()


def surrogate_logits(adj: sp.spmatrix, features: sp.spmatrix | np.ndarray, weights: np.ndarray,
                     bias: np.ndarray | None = None) -> np.ndarray:
    """``Â² (X W + bias)`` of every node, computed plainly (N x C)."""
    z = np.asarray(features @ np.asarray(weights, dtype=np.float64), dtype=np.float64)
    if bias is not None:
        z = z + np.asarray(bias, dtype=np.float64)
    a = normalized_adjacency(adj)
    return a @ (a @ z)


def margins_of(logits: np.ndarray, label: int) -> np.ndarray:
    """``logits[..., label] - max_{c != label} logits[..., c]`` over the last axis."""
    others = np.delete(logits, label, axis=-1)
    return logits[..., label] - others.max(axis=-1)


class _Step:
    """What the scores of one step need of the current graph (module docstring, step 1)."""

    def __init__(self, adj: sp.csr_matrix, z: np.ndarray, target: int, degree: np.ndarray | None = None,
                 g: np.ndarray | None = None):
        self.adj, self.z, self.u = adj, z, target
        self.degree = np.asarray(adj.sum(axis=1)).ravel() if degree is None else degree
        dt = self.degree + 1.0
        self.s, self.w = 1.0 / np.sqrt(dt), 1.0 / dt
        self.row_u = adj[target].toarray().ravel()
        tilde_u = self.row_u.copy()
        tilde_u[target] += 1.0
        self.r = adj @ (self.w * tilde_u) + self.w * tilde_u  # Ã (w ⊙ Ã_u), symmetric Ã
        if g is None:
            sz = self.s[:, None] * z
            g = adj @ sz + sz  # Ã diag(s) Z
        self.g = g
        self.b = (self.r * self.s) @ z

    def column(self, x: int) -> np.ndarray:
        """The rows ``k`` with ``Ã_kx = 1``: ``x``'s neighbours and ``x`` itself."""
        a = self.adj
        return np.append(a.indices[a.indptr[x]:a.indptr[x + 1]], x)

    def after_edge(self, adj: sp.csr_matrix, m: int, n: int, g: np.ndarray) -> "_Step":
        """The next step after flipping ``(m, n)`` (``adj``: the flipped graph), ``G`` updated
        in place in ``g`` (a copy the caller owns) on the rows ``m`` and ``n`` reach: only
        their degrees and the edge change, so ``G_k`` changes by ``Ã'_kx s'_x Z_x - Ã_kx s_x
        Z_x`` for ``x`` in ``{m, n}`` (O((d_m + d_n) C), not O(E C))."""
        delta = 1.0 - 2.0 * self.adj[m, n]
        degree = self.degree.copy()
        degree[[m, n]] += delta
        new_s = 1.0 / np.sqrt(degree + 1.0)
        for x in (m, n):
            g[self.column(x)] -= self.s[x] * self.z[x]
            g[np.append(adj.indices[adj.indptr[x]:adj.indptr[x + 1]], x)] += new_s[x] * self.z[x]
        return _Step(adj, self.z, self.u, degree, g)

    def after_feature(self, node: int, change: np.ndarray, g: np.ndarray) -> "_Step":
        """The next step after ``Z[node] += change`` (``self.z`` already changed): ``G``
        updated in place in ``g`` on the rows ``node`` reaches."""
        g[self.column(node)] += self.s[node] * change
        return _Step(self.adj, self.z, self.u, self.degree, g)

    def logits(self) -> np.ndarray:
        return self.s[self.u] * self.b

    def entries(self, m: np.ndarray, n: np.ndarray) -> np.ndarray:
        """``A[m[i], n[i]]`` for each pair (looked up in the sparse matrix: no dense rows)."""
        return np.asarray(self.adj[m, n], dtype=np.float64).ravel()


def flip_logits(step: _Step, m: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The target's logits (P x C) after flipping each pair ``(m[i], n[i])`` alone
    (``m != n``), by the closed form of the module docstring."""
    u, s, w, z, g, r = step.u, step.s, step.w, step.z, step.g, step.r
    a_mn = step.entries(m, n)
    delta = 1.0 - 2.0 * a_mn
    dm, dn = 1.0 / w[m] + delta, 1.0 / w[n] + delta
    sm, sn = 1.0 / np.sqrt(dm), 1.0 / np.sqrt(dn)
    ds_m, ds_n = sm - s[m], sn - s[n]
    su = np.where(m == u, sm, np.where(n == u, sn, s[u]))
    at_um = step.row_u[m] + (m == u)
    at_un = step.row_u[n] + (n == u)
    at_um_new = at_um + delta * (n == u)
    at_un_new = at_un + delta * (m == u)
    zm, zn = z[m], z[n]
    a_after = 1.0 - a_mn  # Ã'_mn
    gm_new = g[m] + ds_m[:, None] * zm + (a_after * sn - a_mn * s[n])[:, None] * zn
    gm_hat = g[m] + ds_m[:, None] * zm + (a_mn * ds_n)[:, None] * zn
    gn_new = g[n] + (a_after * sm - a_mn * s[m])[:, None] * zm + ds_n[:, None] * zn
    gn_hat = g[n] + (a_mn * ds_m)[:, None] * zm + ds_n[:, None] * zn
    inner = (step.b[None, :] + (r[m] * ds_m)[:, None] * zm + (r[n] * ds_n)[:, None] * zn
             + (at_um_new / dm)[:, None] * gm_new - (at_um * w[m])[:, None] * gm_hat
             + (at_un_new / dn)[:, None] * gn_new - (at_un * w[n])[:, None] * gn_hat)
    return su[:, None] * inner


def flip_margins(step: _Step, m: np.ndarray, n: np.ndarray, label: int) -> np.ndarray:
    """The target's margin after flipping each pair alone, in blocks of :data:`PAIR_BLOCK`."""
    out = np.empty(m.shape[0])
    for lo in range(0, m.shape[0], PAIR_BLOCK):
        hi = min(m.shape[0], lo + PAIR_BLOCK)
        out[lo:hi] = margins_of(flip_logits(step, m[lo:hi], n[lo:hi]), label)
    return out


def feature_flip_margins(step: _Step, weights: np.ndarray, nodes: np.ndarray, x_rows: np.ndarray,
                         label: int) -> np.ndarray:
    """The target's margin (k x D) after flipping feature ``j`` of ``nodes[i]`` alone
    (``x_rows``: their current binary features, k x D): the logits move by
    ``+-[Â²]_{u, node} W_j``."""
    reach = step.s[step.u] * step.r[nodes] * step.s[nodes]  # [Â²]_{u, node}
    sign = 1.0 - 2.0 * x_rows
    moved = step.logits()[None, None, :] + (reach[:, None] * sign)[:, :, None] * weights[None, :, :]
    return margins_of(moved, label)


# ---------------------------------------------------------------------- the attack


def _check(adj: sp.spmatrix, features, weights: np.ndarray, target: int, label: int, budget: int) -> sp.csr_matrix:
    if not sp.issparse(adj) or adj.shape[0] != adj.shape[1]:
        raise ConfigError("nettack needs the adjacency as a square scipy sparse matrix")
    a = sp.csr_matrix(adj, dtype=np.float64)
    a.eliminate_zeros()
    n = a.shape[0]
    if a.diagonal().any() or (a.data != 1).any() or (a != a.T).nnz:
        raise ConfigError("nettack needs a symmetric 0/1 adjacency without self-loops")
    if features.shape[0] != n:
        raise ConfigError(f"nettack: {features.shape[0]} feature rows for {n} nodes")
    if weights.ndim != 2 or weights.shape[0] != features.shape[1]:
        raise ConfigError(f"nettack: weights of shape {weights.shape} for {features.shape[1]} features (need D x C)")
    check_int(int(target), "nettack target", 0, n - 1)
    check_int(int(label), "nettack label", 0, weights.shape[1] - 1)
    check_int(budget, "nettack budget", 0, 1 << 30)
    return a


def _flip_edge(adj: sp.csr_matrix, m: int, n: int) -> sp.csr_matrix:
    sign = 1.0 - 2.0 * adj[m, n]
    delta = sp.csr_matrix(([sign, sign], ([m, n], [n, m])), shape=adj.shape)
    out = (adj + delta).tocsr()
    out.eliminate_zeros()
    return out


def _pairs(adj: sp.csr_matrix, target: int, sources: np.ndarray, direct: bool) -> tuple[np.ndarray, np.ndarray]:
    """Candidate pairs: ``(u, n)`` for every ``n != u`` when direct; else ``(m, n)`` for each
    influencer ``m`` and every ``n`` not ``u`` or ``m``."""
    nodes = np.arange(adj.shape[0])
    m = np.repeat(sources, nodes.size)
    n = np.tile(nodes, sources.size)
    keep = (n != m) & (direct | (n != target))
    return m[keep], n[keep]


def select_influencers(adj: sp.csr_matrix, z: np.ndarray, target: int, label: int, k: int) -> np.ndarray:
    """The (at most) ``k`` neighbours of ``target`` whose edge's removal lowers its margin
    most (the paper's influencers), best first."""
    nbrs = adj[target].indices.astype(np.int64)
    if nbrs.size == 0:
        return nbrs
    scores = flip_margins(_Step(adj, z, target), np.full(nbrs.size, target), nbrs, label)
    return nbrs[np.argsort(scores, kind="stable")[:k]]


def nettack(adj: sp.spmatrix, features: sp.spmatrix | np.ndarray, weights: np.ndarray, target: int, label: int,
            budget: int, config: NettackConfig | None = None, *, bias: np.ndarray | None = None) -> NettackResult:
    """Nettack on ``target`` (module docstring).

    Args:
        adj: symmetric 0/1 adjacency without self-loops (scipy sparse).
        features: binary N x D features (scipy sparse or dense).
        weights: the surrogate's D x C weights (``W1 @ W2`` of a linear GCN).
        target: the attacked node.
        label: the class whose margin is fought (the true label, or the surrogate's guess).
        budget: flips (edges and features together).
        config: the options (:class:`NettackConfig`; default: direct, structure only).
        bias: a C-vector added to ``X W`` before propagation (none in the paper's surrogate).
    """
    prepared = NettackGraph(adj, features, weights, config, bias=bias)
    done, a, margins, sources = prepared.flips(target, label, budget)
    return NettackResult(perturbations=done, adj=a, features=_flipped_features(features, done),
                         margins=margins, influencers=sources)


class NettackGraph:
    """A graph and surrogate prepared once for Nettack on many targets, each attacked alone
    on the clean graph (the adjacency checked, ``Z = X W`` and the degree test's clean
    statistics computed once): a batch of targets costs its attacks, not one set-up each."""

    def __init__(self, adj: sp.spmatrix, features: sp.spmatrix | np.ndarray, weights: np.ndarray,
                 config: NettackConfig | None = None, *, bias: np.ndarray | None = None):
        self.cfg = config or NettackConfig()
        self.weights = np.asarray(weights, dtype=np.float64)
        self.a = _check(adj, features, self.weights, 0, 0, 0)
        self.features = features
        self.z = np.asarray(features @ self.weights, dtype=np.float64)
        if bias is not None:
            self.z = self.z + np.asarray(bias, dtype=np.float64)
        self.degree_test = (DegreeTest(np.asarray(self.a.sum(axis=1)).ravel(), self.cfg.ll_cutoff)
                            if self.cfg.ll_constraint else None)
        clean = _Step(self.a, self.z, 0)
        self.degree, self.g = clean.degree, clean.g  # every target's first step, computed once

    def flips(self, target: int, label: int, budget: int
              ) -> tuple[list[tuple[str, int, int]], sp.csr_matrix, np.ndarray, np.ndarray]:
        """``target``'s attack: the flips in order, the perturbed adjacency, the margins
        before and after each flip, and the nodes whose edges and features could change."""
        cfg, a, features, weights = self.cfg, self.a, self.features, self.weights
        check_int(int(target), "nettack target", 0, a.shape[0] - 1)
        check_int(int(label), "nettack label", 0, weights.shape[1] - 1)
        check_int(budget, "nettack budget", 0, 1 << 30)
        target, label = int(target), int(label)
        z = self.z.copy() if cfg.features else self.z  # feature flips change rows of Z
        sources = (np.array([target]) if cfg.direct
                   else select_influencers(a, z, target, label, cfg.n_influencers))
        if not cfg.direct and sources.size == 0:
            raise ConfigError(f"nettack: target {target} has no neighbours to act as influencers; use direct: true")
        degree_test = self.degree_test
        m_all, n_all = _pairs(a, target, sources, cfg.direct)
        x_rows = (features[sources].toarray() if sp.issparse(features) else np.array(features[sources]))
        x_rows = (x_rows != 0).astype(np.float64)
        may_add = (cooccurrence_allowed(features, sources) if cfg.features and cfg.cooc_constraint
                   else np.ones_like(x_rows, dtype=bool))
        edge_done = np.zeros(m_all.size, dtype=bool)
        feat_done = np.zeros(x_rows.shape, dtype=bool)

        step = _Step(a, z, target, self.degree, self.g)
        g = None  # this target's own G, copied from the clean one at its first flip
        margins = [float(margins_of(step.logits(), label))]
        done: list[tuple[str, int, int]] = []
        for _ in range(budget):
            best_edge, edge_score = -1, np.inf
            if cfg.structure:
                ok = ~edge_done
                delta = 1.0 - 2.0 * step.entries(m_all, n_all)
                after = step.degree[m_all] + delta, step.degree[n_all] + delta
                ok &= (after[0] > 0) & (after[1] > 0)  # no singletons
                if degree_test is not None:
                    ok &= degree_test.allows(step.degree, m_all, n_all, delta)
                idx = np.flatnonzero(ok)
                if idx.size:
                    scores = flip_margins(step, m_all[idx], n_all[idx], label)
                    best = int(np.argmin(scores))
                    best_edge, edge_score = int(idx[best]), float(scores[best])
            best_feat, feat_score = (-1, -1), np.inf
            if cfg.features:
                scores = feature_flip_margins(step, weights, sources, x_rows, label)
                allowed = ~feat_done & ((x_rows == 1) | may_add)
                if allowed.any():
                    scores = np.where(allowed, scores, np.inf)
                    flat = int(np.argmin(scores))
                    best_feat, feat_score = np.unravel_index(flat, scores.shape), float(scores.flat[flat])
            if best_edge < 0 and best_feat[0] < 0:
                break
            if best_edge >= 0 and edge_score < feat_score:
                mm, nn = int(m_all[best_edge]), int(n_all[best_edge])
                a = _flip_edge(a, mm, nn)
                g = step.g.copy() if g is None else g
                step = step.after_edge(a, mm, nn, g)
                edge_done |= ((m_all == mm) & (n_all == nn)) | ((m_all == nn) & (n_all == mm))  # both ends
                done.append(("edge", mm, nn))
            else:
                i, j = int(best_feat[0]), int(best_feat[1])
                node = int(sources[i])
                sign = 1.0 - 2.0 * x_rows[i, j]
                z[node] += sign * weights[j]
                x_rows[i, j] = 1.0 - x_rows[i, j]
                feat_done[i, j] = True
                done.append(("feature", node, j))
                g = step.g.copy() if g is None else g
                step = step.after_feature(node, sign * weights[j], g)
            margins.append(float(margins_of(step.logits(), label)))
        return done, a, np.asarray(margins), sources


def _flipped_features(features, done: list[tuple[str, int, int]]):
    flips = [(i, j) for kind, i, j in done if kind == "feature"]
    if not flips:
        return features.copy()
    rows, cols = np.asarray(flips).T
    if sp.issparse(features):
        x = sp.csr_matrix(features, copy=True)
        toggle = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=x.shape)
        x = (x + toggle).tocsr()
        x.data = np.where(x.data == 2, 0, x.data).astype(features.dtype)  # 1 + 1: a removed feature
        x.eliminate_zeros()
        return x
    x = np.array(features, copy=True)
    x[rows, cols] = 1 - x[rows, cols]
    return x


# ---------------------------------------------------------------------- a surrogate


def train_linear_gcn(adj: sp.spmatrix, features: sp.spmatrix | np.ndarray, labels: np.ndarray, train: np.ndarray,
                     val: np.ndarray | None = None, *, hidden: int = 16, epochs: int = 200, lr: float = 0.01,
                     weight_decay: float = 5e-4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(W1, W2)`` of the paper's surrogate ``Â (Â X W1) W2`` (no nonlinearity, no bias,
    no dropout), trained by Adam on the cross-entropy of the ``train`` nodes; with ``val``
    the weights of the epoch with the lowest validation loss are kept. Nettack takes
    ``W1 @ W2``. Only the rows ``Â² X`` of the labelled nodes are formed (sparse products),
    so the training costs O(E D) once and O(n_L D h) an epoch."""
    import torch

    check_int(hidden, "hidden", 1, 1 << 16)
    check_int(epochs, "epochs", 1, 1 << 20)
    a = normalized_adjacency(adj)
    # dense features stay dense (N x D, as the graph holds them); a sparse matrix of them
    # would store every entry with its index, and a @ x of it be as large
    x = sp.csr_matrix(features, dtype=np.float64) if sp.issparse(features) else np.asarray(features, np.float64)
    idx = np.asarray(train, dtype=np.int64) if val is None else np.concatenate([train, val]).astype(np.int64)
    ax = a[idx] @ (a @ x)
    f = torch.as_tensor(ax.toarray() if sp.issparse(ax) else ax, dtype=torch.float32)
    y = torch.as_tensor(np.asarray(labels)[idx], dtype=torch.long)
    n_train, classes = len(train), int(np.max(labels)) + 1
    gen = torch.Generator().manual_seed(seed)

    def glorot(rows: int, cols: int) -> torch.Tensor:
        bound = (6.0 / (rows + cols)) ** 0.5
        return ((torch.rand(rows, cols, generator=gen) * 2 - 1) * bound).requires_grad_(True)

    w1, w2 = glorot(x.shape[1], hidden), glorot(hidden, classes)
    opt = torch.optim.Adam([w1, w2], lr=lr, weight_decay=weight_decay)
    best, kept = np.inf, (w1.detach().clone(), w2.detach().clone())
    for _ in range(epochs):
        opt.zero_grad()
        logits = f @ w1 @ w2
        loss = torch.nn.functional.cross_entropy(logits[:n_train], y[:n_train])
        loss.backward()
        opt.step()
        if val is not None:
            with torch.no_grad():
                v = float(torch.nn.functional.cross_entropy((f @ w1 @ w2)[n_train:], y[n_train:]))
            if v < best:
                best, kept = v, (w1.detach().clone(), w2.detach().clone())
    if val is None:
        kept = (w1.detach(), w2.detach())
    return kept[0].numpy().astype(np.float64), kept[1].numpy().astype(np.float64)


# ---------------------------------------------------------------------- the sweep's attack


@dataclass(frozen=True)
class NettackAttackConfig(TargetedConfig):
    """Nettack in the ``targeted`` scenario (direct; :class:`NettackConfig`'s options and the
    linear surrogate's training).

    Attributes:
        structure, features, ll_constraint, ll_cutoff, cooc_constraint: as
            :class:`NettackConfig` (feature flips need binary features).
        hidden, epochs: the linearised GCN's hidden width and Adam epochs
            (:func:`train_linear_gcn`, lr 0.01, weight decay 5e-4: the authors' settings).
        direct: flips at the target (default); ``false``: an influencer attack, flips
            between the target's ``n_influencers`` chosen neighbours and other nodes, never at
            the target (structure only).
    """

    structure: bool = True
    features: bool = False
    ll_constraint: bool = True
    ll_cutoff: float = LL_CUTOFF
    cooc_constraint: bool = True
    hidden: int = 16
    epochs: int = 200
    direct: bool = True
    n_influencers: int = 5

    def __post_init__(self) -> None:
        super().__post_init__()
        self.nettack_config()  # its checks, before any work
        check_int(self.hidden, "hidden", 1, 1 << 16)
        check_int(self.epochs, "epochs", 1, 1 << 20)
        if not self.direct and self.features:
            raise ConfigError("nettack: an influencer attack (direct: false) flips edges only; set features: false")

    def nettack_config(self) -> NettackConfig:
        return NettackConfig(self.structure, self.features, self.direct, self.n_influencers, self.ll_constraint,
                             self.ll_cutoff, self.cooc_constraint)


class Nettack(TargetedAttack):
    """Nettack (module docstring), each target attacked alone on the clean graph.

    The attacker's surrogate is the paper's: a linearised two-layer GCN, trained here once
    per batch on the training nodes (validation nodes for the epoch kept), with the attack's
    seed (:func:`train_linear_gcn`). The job's surrogate only names the class each target is
    fought for (its clean prediction: the attacker has no test labels). The graph, ``X W`` and
    the degree test are prepared once per batch (:class:`NettackGraph`)."""

    Config = NettackAttackConfig
    name = "nettack"

    @property
    def changes_features(self) -> bool:  # type: ignore[override]
        return bool(self.config.features)

    def check_inputs(self, graph: Graph, targets: np.ndarray) -> tuple[np.ndarray, Budget]:
        """As every targeted attack's; an influencer attack's targets also need a neighbour."""
        targets, budget = super().check_inputs(graph, targets)
        if not self.config.direct:
            lonely = targets[graph.degrees()[targets] == 0]
            if lonely.size:
                raise ConfigError(f"nettack direct: false: target {int(lonely[0])} has no neighbour to act as an "
                                  "influencer; raise targets.min_degree to 1 or use direct: true")
        return targets, budget

    def generate(self, ctx: TargetContext, targets: np.ndarray, budgets: np.ndarray,
                 rng: np.random.Generator) -> TargetedModification:
        cfg, graph = self.config, ctx.graph
        x = graph.features
        if cfg.features and not np.isin(x, (0.0, 1.0)).all():
            raise ConfigError(f"nettack features: true flips binary features; {graph.name!r} has others "
                              "(use features: false)")
        val = graph.split.get("val")
        w1, w2 = train_linear_gcn(ctx.adj, x, graph.labels, graph.split["train"],
                                  val if val is not None and val.size else None,
                                  hidden=cfg.hidden, epochs=cfg.epochs, seed=cfg.seed)
        prepared = NettackGraph(ctx.adj, x, w1 @ w2, cfg.nettack_config())
        labels = ctx.labels
        owners, sources, partners, rows, feats = [], [], [], [], []
        for t, b in zip(targets.tolist(), budgets.tolist()):
            done, _, _, _ = prepared.flips(t, int(labels[t]), int(b))
            edges = [(m, n) for kind, m, n in done if kind == "edge"]
            owners.append(np.full(len(edges), t, np.int64))
            sources.append(np.asarray([m for m, _ in edges], np.int64))
            partners.append(np.asarray([n for _, n in edges], np.int64))
            flipped = [j for kind, _, j in done if kind == "feature"]
            if flipped:
                row = np.array(x[t], dtype=np.float32)
                row[flipped] = 1 - row[flipped]
                rows.append(t)
                feats.append(row)
        return gathered(ctx, targets, np.concatenate(owners), np.concatenate(partners), rows, feats,
                        None if cfg.direct else np.concatenate(sources))
