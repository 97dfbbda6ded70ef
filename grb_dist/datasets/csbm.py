"""Contextual stochastic block models (CSBM) and the CBA variant, with the Bayes classifier.

Gosch et al. 2023, section 2, generalised to C classes: each node draws a label uniformly from C
classes and features ``x ~ N(mu_y, sigma^2 I)``; an edge joins two nodes of the same class
with probability ``p`` and of different classes with probability ``q``. The class means are
``K * sigma / sqrt(2)`` times orthonormal directions, so any two means are ``K * sigma``
apart (for C = 2 this matches the paper's ``+-mu`` with ``||2 mu|| = K sigma``).

``p`` and ``q`` are set from the expected number of same-class and different-class
neighbours of a node (``deg_same``, ``deg_diff``). Sampling is vectorised: the number of
edges of each kind is drawn from its binomial, then endpoint pairs are drawn uniformly among
admissible pairs and de-duplicated (no dense N x N matrix, no loop over node pairs).

Degree correction (``degree_spread > 0``, off by default): each node gets a propensity
``theta ~ LogNormal(-s^2/2, s)`` (mean 1) and endpoints are drawn proportionally to theta
instead of uniformly, so a node's expected degree is about ``theta * (deg_same + deg_diff)``
with the same edge counts and homophily: heavy-tailed degrees as in the real GRB graphs, whose
Easy/Medium/Hard bands differ several-fold in degree (GRB, Zheng et al. 2021, Table 4), where a
plain CSBM's Poisson degrees barely differ. The Bayes classifier and inductive sampling below are
those of the plain model and refuse a degree-corrected config.

CBA (Gosch et al. 2023, appendix C) replaces p, q by preferential attachment with class affinities;
it is sequential by nature (a loop over nodes, vectorised over candidates) and meant for
graphs of thousands of nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
import numpy as np

from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph, canonical_edges


@dataclass(frozen=True)
class CSBMConfig:
    """Parameters of a C-class CSBM.

    Attributes:
        num_nodes: N.
        num_classes: C (>= 2).
        num_features: d.
        K: distance between class means in units of sigma.
        sigma: feature standard deviation.
        deg_same: expected number of same-class neighbours of a node.
        deg_diff: expected number of different-class neighbours of a node.
        degree_spread: log-normal spread s of the nodes' degree propensities (0: the plain
            CSBM, Poisson degrees; 1: degrees spread over about an order of magnitude).
    """

    num_nodes: int = 2000
    num_classes: int = 4
    num_features: int = 32
    K: float = 1.5
    sigma: float = 1.0
    deg_same: float = 3.0
    deg_diff: float = 1.0
    degree_spread: float = 0.0

    def __post_init__(self) -> None:
        if self.num_nodes < 2 * self.num_classes:
            raise ConfigError(f"CSBM num_nodes={self.num_nodes} is too small for {self.num_classes} classes")
        if self.num_classes < 2:
            raise ConfigError("CSBM num_classes must be at least 2")
        if self.num_features < 1 or self.sigma <= 0 or self.K < 0:
            raise ConfigError("CSBM needs num_features >= 1, sigma > 0 and K >= 0")
        if self.deg_same < 0 or self.deg_diff < 0:
            raise ConfigError("CSBM expected degrees must be non-negative")
        if not 0 <= self.degree_spread <= 3:
            raise ConfigError("CSBM degree_spread must be in [0, 3]")
        if self.p > 1 or self.q > 1:
            raise ConfigError("CSBM expected degrees exceed the number of available neighbours; lower deg_same/deg_diff")

    @property
    def p(self) -> float:
        """Same-class edge probability."""
        return self.deg_same / max(self.num_nodes / self.num_classes - 1, 1)

    @property
    def q(self) -> float:
        """Different-class edge probability."""
        return self.deg_diff / max(self.num_nodes - self.num_nodes / self.num_classes, 1)

    @property
    def homophily(self) -> float:
        """Expected share of same-class edges, ``deg_same / (deg_same + deg_diff)``."""
        total = self.deg_same + self.deg_diff
        return self.deg_same / total if total else float("nan")

    def _plain_only(self, what: str) -> None:
        if self.degree_spread:
            raise ConfigError(f"{what} assumes the plain CSBM; this config is degree-corrected (degree_spread > 0)")


def degree_propensities(num_nodes: int, spread: float, rng: np.random.Generator) -> np.ndarray:
    """Per-node degree propensities ``theta ~ LogNormal(-spread^2 / 2, spread)`` (mean 1)."""
    return rng.lognormal(-spread * spread / 2, spread, size=num_nodes)


def class_means(num_classes: int, num_features: int, K: float, sigma: float, seed: int = 0) -> np.ndarray:
    """C x d class means, pairwise ``K * sigma`` apart.

    With d >= C the means are scaled orthonormal vectors (exactly equidistant); with d < C
    they are scaled random unit vectors (approximately so).
    """
    rng = np.random.default_rng(seed)
    if num_classes == 2:
        mu = np.full(num_features, K * sigma / (2 * math.sqrt(num_features)))
        return np.stack([-mu, mu])
    a = rng.standard_normal((num_features, num_classes))
    if num_features >= num_classes:
        q, _ = np.linalg.qr(a)
        dirs = q[:, :num_classes].T
    else:
        dirs = (a / np.linalg.norm(a, axis=0)).T
    return dirs * (K * sigma / math.sqrt(2))


def _sample_pairs(rng, count: int, sampler) -> np.ndarray:
    """Draw ``count`` distinct unordered pairs with ``sampler(rng, m) -> (lo, hi)``; returns keys."""
    keys = np.empty(0, dtype=np.int64)
    while keys.size < count:
        need = count - keys.size
        lo, hi, n = sampler(rng, int(need * 1.05) + 16)
        keys = np.unique(np.concatenate([keys, lo * n + hi]))
    return rng.permutation(keys)[:count] if keys.size > count else keys


def _class_layout(labels: np.ndarray, p: float, q: float, rng: np.random.Generator):
    """Nodes sorted by class, class sizes and starts, same-class pair counts per class, and
    the binomial numbers of same- and different-class edges (drawn in that order)."""
    n = labels.size
    order = np.argsort(labels, kind="stable")
    counts = np.bincount(labels)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    same_pairs = counts.astype(np.float64) * (counts - 1) / 2
    total_same = float(same_pairs.sum())
    total_diff = n * (n - 1) / 2 - total_same
    n_same = int(rng.binomial(int(total_same), p)) if total_same and p > 0 else 0
    n_diff = int(rng.binomial(int(total_diff), q)) if total_diff and q > 0 else 0
    return order, counts, starts, same_pairs, n_same, n_diff


def sample_csbm_edges(
    labels: np.ndarray, p: float, q: float, rng: np.random.Generator, theta: np.ndarray | None = None
) -> np.ndarray:
    """Undirected CSBM edges among nodes with ``labels``; returns 2 x E (one direction, lo < hi).

    With ``theta`` (degree propensities), the edge counts are drawn as without, and each
    endpoint is drawn with probability proportional to its theta (same class: the class is
    drawn proportionally to its squared theta mass), so node degrees scale with theta.
    """
    if theta is not None:
        return _sample_weighted_edges(labels, p, q, rng, np.asarray(theta, dtype=np.float64))
    n = labels.size
    order, counts, starts, same_pairs, n_same, n_diff = _class_layout(labels, p, q, rng)
    total_same = float(same_pairs.sum())
    cls_prob = same_pairs / total_same if total_same else None

    def same(rng, m):
        c = rng.choice(counts.size, size=m, p=cls_prob)
        a = rng.integers(0, counts[c])
        b = rng.integers(0, counts[c] - 1)
        b = b + (b >= a)  # distinct within the class
        u, v = order[starts[c] + a], order[starts[c] + b]
        return np.minimum(u, v), np.maximum(u, v), n

    def diff(rng, m):
        u = rng.integers(0, n, size=2 * m)
        v = rng.integers(0, n, size=2 * m)
        keep = labels[u] != labels[v]
        u, v = u[keep][:m], v[keep][:m]
        return np.minimum(u, v), np.maximum(u, v), n

    keys = np.concatenate([
        _sample_pairs(rng, n_same, same) if n_same else np.empty(0, np.int64),
        _sample_pairs(rng, n_diff, diff) if n_diff else np.empty(0, np.int64),
    ])
    return np.stack([keys // n, keys % n])


def _sample_weighted_edges(labels: np.ndarray, p: float, q: float, rng: np.random.Generator, theta: np.ndarray) -> np.ndarray:
    n = labels.size
    order, counts, starts, same_pairs, n_same, n_diff = _class_layout(labels, p, q, rng)
    cum_sorted = np.cumsum(theta[order])  # theta mass in class-sorted order
    lo_mass = np.concatenate([[0.0], cum_sorted])[starts]
    mass = np.add.reduceat(theta[order], starts) if n else np.zeros(0)
    cls_prob = np.where(counts > 1, mass**2, 0.0)
    cls_prob = cls_prob / cls_prob.sum() if cls_prob.sum() > 0 else None
    cum_all = np.cumsum(theta)

    def pick_in_class(rng, c):
        r = lo_mass[c] + rng.random(c.size) * mass[c]
        pos = np.searchsorted(cum_sorted, r, side="right")
        return order[np.clip(pos, starts[c], starts[c] + counts[c] - 1)]

    def same(rng, m):
        c = rng.choice(counts.size, size=m, p=cls_prob)
        u, v = pick_in_class(rng, c), pick_in_class(rng, c)
        keep = u != v
        u, v = u[keep], v[keep]
        return np.minimum(u, v), np.maximum(u, v), n

    def diff(rng, m):
        u = np.minimum(np.searchsorted(cum_all, rng.random(2 * m) * cum_all[-1], side="right"), n - 1)
        v = np.minimum(np.searchsorted(cum_all, rng.random(2 * m) * cum_all[-1], side="right"), n - 1)
        keep = labels[u] != labels[v]
        u, v = u[keep][:m], v[keep][:m]
        return np.minimum(u, v), np.maximum(u, v), n

    keys = np.concatenate([
        _sample_pairs(rng, n_same, same) if n_same and cls_prob is not None else np.empty(0, np.int64),
        _sample_pairs(rng, n_diff, diff) if n_diff else np.empty(0, np.int64),
    ])
    return np.stack([keys // n, keys % n])


def sample_csbm(config: CSBMConfig, seed: int = 0, name: str = "csbm") -> tuple[Graph, np.ndarray]:
    """Sample a CSBM graph; returns ``(graph, class_means)``. The graph has no split yet."""

    rng = np.random.default_rng(seed)
    c = config
    means = class_means(c.num_classes, c.num_features, c.K, c.sigma, seed)
    labels = rng.integers(0, c.num_classes, size=c.num_nodes).astype(np.int64)
    features = (rng.standard_normal((c.num_nodes, c.num_features), dtype=np.float32) * c.sigma)
    features += means[labels].astype(np.float32)
    theta = degree_propensities(c.num_nodes, c.degree_spread, rng) if c.degree_spread else None
    und = sample_csbm_edges(labels, c.p, c.q, rng, theta)
    edge_index, _ = canonical_edges(und[0], und[1], c.num_nodes)
    graph = Graph(features=features, edge_index=edge_index, labels=labels, name=name, num_classes=c.num_classes)
    return graph, means


def sample_inductive_nodes(
    graph: Graph, config: CSBMConfig, means: np.ndarray, num_new: int, seed: int = 0
) -> Graph:
    """Append ``num_new`` nodes sampled from the CSBM conditioned on ``graph``.

    Each new node draws a label and features, connects to every earlier node (original or
    new) with probability p (same class) or q (different class). Returns a new graph whose
    last ``num_new`` nodes are the new ones; the split of ``graph`` is kept.
    """

    config._plain_only("sample_inductive_nodes")
    rng = np.random.default_rng(seed)
    n = graph.num_nodes
    y_new = rng.integers(0, config.num_classes, size=num_new).astype(np.int64)
    x_new = rng.standard_normal((num_new, graph.num_features), dtype=np.float32) * config.sigma
    x_new += means[y_new].astype(np.float32)
    # new -> old: for each new node, binomial counts per kind, then uniform endpoints.
    order = np.argsort(graph.labels, kind="stable")
    counts = np.bincount(graph.labels, minlength=config.num_classes)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    k_same = rng.binomial(counts[y_new], config.p)
    k_diff = rng.binomial(n - counts[y_new], config.q)
    src_same = np.repeat(np.arange(num_new), k_same)
    dst_same = order[starts[y_new[src_same]] + rng.integers(0, counts[y_new[src_same]])]
    src_diff = np.repeat(np.arange(num_new), k_diff)
    # different-class endpoint: uniform over nodes of other classes via an offset trick
    off = rng.integers(0, n - counts[y_new[src_diff]])
    cls_start = starts[y_new[src_diff]]
    pos = np.where(off < cls_start, off, off + counts[y_new[src_diff]])
    dst_diff = order[pos]
    src = np.concatenate([src_same, src_diff]) + n
    dst = np.concatenate([dst_same, dst_diff])
    # new <-> new edges: a CSBM among the new nodes themselves.
    und_new = sample_csbm_edges(y_new, config.p, config.q, rng) + n if num_new > 1 else np.empty((2, 0), np.int64)
    src = np.concatenate([graph.edge_index[0], src, und_new[0]])
    dst = np.concatenate([graph.edge_index[1], dst, und_new[1]])
    edge_index, _ = canonical_edges(src, dst, n + num_new)
    return Graph(
        features=np.concatenate([graph.features, x_new]),
        edge_index=edge_index,
        labels=np.concatenate([graph.labels, y_new]),
        split=dict(graph.split),
        name=graph.name,
        num_classes=graph.num_classes,
    )


@dataclass(frozen=True)
class CBAConfig:
    """Contextual Barabasi-Albert model with community structure (Gosch et al. 2023, appendix C).

    Attributes:
        num_nodes, num_classes, num_features, K, sigma: as in :class:`CSBMConfig`.
        m: edges added with each new node.
        affinity_same, affinity_diff: label affinities omega for same / different classes.
    """

    num_nodes: int = 1000
    num_classes: int = 2
    num_features: int = 16
    K: float = 1.5
    sigma: float = 1.0
    m: int = 2
    affinity_same: float = 0.9
    affinity_diff: float = 0.1

    def __post_init__(self) -> None:
        if self.m < 1 or self.num_nodes <= self.m or self.num_classes < 2:
            raise ConfigError("CBA needs m >= 1, num_nodes > m and at least 2 classes")
        if self.affinity_same < 0 or self.affinity_diff < 0 or self.affinity_same + self.affinity_diff == 0:
            raise ConfigError("CBA affinities must be non-negative and not both zero")


def sample_cba(config: CBAConfig, seed: int = 0, name: str = "cba") -> tuple[Graph, np.ndarray]:
    """Sample a CBA graph: node i attaches m times with probability ~ (1 + deg_j) * omega(y_i, y_j)."""

    rng = np.random.default_rng(seed)
    c = config
    means = class_means(c.num_classes, c.num_features, c.K, c.sigma, seed)
    labels = rng.integers(0, c.num_classes, size=c.num_nodes).astype(np.int64)
    features = rng.standard_normal((c.num_nodes, c.num_features), dtype=np.float32) * c.sigma
    features += means[labels].astype(np.float32)
    deg = np.zeros(c.num_nodes, dtype=np.float64)
    src, dst = [], []
    for i in range(1, c.num_nodes):
        omega = np.where(labels[:i] == labels[i], c.affinity_same, c.affinity_diff)
        w = (1.0 + deg[:i]) * omega  # the implicit self-loop contributes the 1
        total = w.sum()
        if total <= 0:
            continue
        picks = np.unique(rng.choice(i, size=c.m, p=w / total))
        src.append(np.full(picks.size, i))
        dst.append(picks)
        deg[picks] += 1
        deg[i] += picks.size
    edge_index, _ = canonical_edges(np.concatenate(src), np.concatenate(dst), c.num_nodes)
    graph = Graph(features=features, edge_index=edge_index, labels=labels, name=name, num_classes=c.num_classes)
    return graph, means


def cba_attachment(graph: Graph, config: CBAConfig) -> np.ndarray:
    """C x N probabilities that one attachment of a new class-c node picks each known node:
    ``(1 + k_j) omega(c, y_j)`` normalised over the known nodes (Gosch et al. 2023, appendix C)."""
    deg = np.bincount(graph.edge_index[0], minlength=graph.num_nodes).astype(np.float64)
    same = graph.labels[None, :] == np.arange(config.num_classes)[:, None]
    w = (1.0 + deg)[None, :] * np.where(same, config.affinity_same, config.affinity_diff)
    total = w.sum(1, keepdims=True)
    if np.any(total <= 0):
        raise ConfigError("CBA: a class has no node it can attach to (affinities zero)")
    return w / total


def sample_cba_new_nodes(
    graph: Graph, config: CBAConfig, means: np.ndarray, num_new: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``num_new`` nodes, each added alone to ``graph`` by the CBA process (labels,
    features, ``m`` attachments with replacement, repeats merged).

    Returns ``(x_new, y_new, nb_node, nb_base)``: features and labels of the new nodes and
    their edges (new index, known node id), sorted by new index."""
    rng = np.random.default_rng(seed)
    y_new = rng.integers(0, config.num_classes, size=num_new).astype(np.int64)
    x_new = rng.standard_normal((num_new, graph.num_features), dtype=np.float32) * config.sigma
    x_new += means[y_new].astype(np.float32)
    cdf = np.cumsum(cba_attachment(graph, config), axis=1)
    draws = rng.random((num_new, config.m))
    picks = np.empty((num_new, config.m), dtype=np.int64)
    for c in range(config.num_classes):  # inverse-CDF sampling, all nodes of a class at once
        rows = y_new == c
        picks[rows] = np.minimum(np.searchsorted(cdf[c], draws[rows] * cdf[c, -1], side="right"), graph.num_nodes - 1)
    pairs = np.unique(np.stack([np.repeat(np.arange(num_new), config.m), picks.ravel()], 1), axis=0)
    return x_new, y_new, pairs[:, 0], pairs[:, 1]


def cba_bayes_terms(
    graph: Graph, config: CBAConfig, means: np.ndarray, x_new: np.ndarray, nb_node: np.ndarray, nb_base: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Bayes classifier of new CBA nodes (Gosch et al. 2023, Theorem 1 with the CBA likelihood
    of appendix F.4): each known node j is a neighbour of a new class-c node with probability
    ``pi_j(c) = 1 - (1 - p_j(c))^m``, ``p_j(c)`` from :func:`cba_attachment`, and the
    log-likelihood adds ``log pi_j(c)`` for a neighbour and ``log(1 - pi_j(c))`` otherwise.

    Returns ``(scores, step, feat)``: T x C log-posteriors (up to a constant), the N x C
    change of each class's log-posterior when an edge to known node j is added, and the
    T x C feature terms."""
    x = np.asarray(x_new, dtype=np.float64)
    feat = -((x[:, None, :] - means[None].astype(np.float64)) ** 2).sum(-1) / (2 * config.sigma**2)
    p = cba_attachment(graph, config)  # C x N
    log_miss = config.m * np.log1p(-np.minimum(p, 1.0 - 1e-12))  # log(1 - pi) = m log(1 - p)
    log_hit = np.log(np.maximum(-np.expm1(log_miss), 1e-300))  # log pi
    step = (log_hit - log_miss).T  # N x C
    scores = feat + log_miss.sum(1)[None, :]
    np.add.at(scores, nb_node, step[nb_base])
    return scores, step, feat


def bayes_log_posterior(
    graph: Graph, config: CSBMConfig, means: np.ndarray, nodes: np.ndarray, edge_index: np.ndarray | None = None
) -> np.ndarray:
    """Log-posterior ``log P[y_v = c | X, A, y_{-v}]`` (up to a constant) for ``nodes``.

    The Bayes optimal classifier of Gosch et al. 2023 (Theorem 1) for a CSBM, with the labels of all
    other nodes known: feature log-likelihood plus, for each class c, the log-likelihood of
    v's edges and non-edges to nodes of each class. Computed on edges only (O(E + n C)).

    Args:
        graph: the graph (labels of nodes other than v are used).
        config: the CSBM parameters that generated it (p, q, sigma).
        means: C x d class means.
        nodes: int array of query nodes.
        edge_index: optional perturbed edge_index to classify against (defaults to the graph's).
    Returns:
        float64 array (len(nodes), C).
    """
    config._plain_only("bayes_log_posterior")
    ei = graph.edge_index if edge_index is None else edge_index
    y = graph.labels
    C = config.num_classes
    nodes = np.asarray(nodes, dtype=np.int64)
    x = graph.features[nodes].astype(np.float64)
    feat = -((x[:, None, :] - means[None].astype(np.float64)) ** 2).sum(-1) / (2 * config.sigma**2)
    # neighbour class counts of each query node
    pos = np.full(graph.num_nodes, -1, dtype=np.int64)
    pos[nodes] = np.arange(nodes.size)
    sel = pos[ei[0]] >= 0
    nb_counts = np.zeros((nodes.size, C))
    np.add.at(nb_counts, (pos[ei[0][sel]], y[ei[1][sel]]), 1.0)
    class_sizes = np.bincount(y, minlength=C).astype(np.float64)
    others = class_sizes[None, :] - np.eye(C)[y[nodes]]  # exclude v itself
    non_nb = others - nb_counts
    p, q = config.p, config.q
    lp, l1p = math.log(max(p, 1e-300)), math.log(max(1 - p, 1e-300))
    lq, l1q = math.log(max(q, 1e-300)), math.log(max(1 - q, 1e-300))
    # for candidate class c: neighbours of class c are same-class (p), others different (q)
    same = np.eye(C)[None, :, :]  # [1, c, k]: 1 where k == c
    struct = (
        nb_counts[:, None, :] * (same * lp + (1 - same) * lq)
        + non_nb[:, None, :] * (same * l1p + (1 - same) * l1q)
    ).sum(-1)
    return feat + struct


def bayes_predict(graph: Graph, config: CSBMConfig, means: np.ndarray, nodes: np.ndarray, edge_index=None) -> np.ndarray:
    """Bayes optimal class of each node in ``nodes`` (see :func:`bayes_log_posterior`)."""
    return bayes_log_posterior(graph, config, means, nodes, edge_index).argmax(1)
