"""Threat-model audit of injection perturbations (GRB injection scenario).

:func:`audit_injection` checks an :class:`~grb_dist.graph.Injection` against the budget and
raises :class:`~grb_dist.errors.AuditError` naming the first violated rule. It never
repairs anything: a perturbation either passes as it is or is rejected.

Rules (names appear in the error message):
    shape            arrays have the documented shapes and dtypes, ``num_original`` matches
    node_count       at most ``n_inject`` injected nodes
    edge_endpoints   every edge has an injected node in row 0; the other end is an allowed
                     node (a target when ``targets`` is given, or another injected node);
                     never an edge between two original nodes; ids in range
    self_loop        no edge from a node to itself
    duplicate_edge   no undirected edge listed twice (in either direction)
    edge_budget      every injected node has at most ``edges_per_node`` edges (links
                     between two injected nodes count for both)
    feature_finite   features are finite
    feature_range    features lie in ``[feat_min, feat_max]`` (float32-rounded limits)
"""

from __future__ import annotations

import numpy as np

from grb_dist.errors import AuditError
from grb_dist.graph import Graph, Injection

RULES = (
    "shape", "node_count", "edge_endpoints", "self_loop", "duplicate_edge",
    "edge_budget", "feature_finite", "feature_range",
)


def _fail(rule: str, message: str) -> AuditError:
    return AuditError(f"audit rule {rule!r} violated: {message}")


def audit_injection(
    graph: Graph,
    injection: Injection,
    *,
    n_inject: int,
    edges_per_node: int,
    feat_min: float,
    feat_max: float,
    targets: np.ndarray | None = None,
) -> None:
    """Check ``injection`` on ``graph`` against the threat model; raise :class:`AuditError`.

    Args:
        graph: the clean graph (N nodes, D features).
        injection: features (n x D float32), edges (2 x M int64, row 0 injected ids in
            ``[N, N + n)``), ``num_original`` (must equal N).
        n_inject: maximum number of injected nodes.
        edges_per_node: maximum number of edges per injected node.
        feat_min, feat_max: feature limits (compared after rounding to float32, the
            precision features are stored in).
        targets: allowed original endpoints (int array); ``None`` allows any original node.
    """
    n = graph.num_nodes
    _check_shapes(injection, n, graph.num_features)
    k = int(injection.features.shape[0])
    if k > n_inject:
        raise _fail("node_count", f"{k} injected nodes exceed the budget of {n_inject}")
    _check_edges(injection.edges, n, k, edges_per_node, targets)
    _check_features(injection.features, feat_min, feat_max)


def _check_shapes(injection: Injection, n: int, d: int) -> None:
    """Rule ``shape``: array types and shapes, and the graph the injection was made for."""
    feats, edges = injection.features, injection.edges
    if not isinstance(feats, np.ndarray) or feats.ndim != 2 or feats.shape[1] != d:
        raise _fail("shape", f"features must be an n_inject x {d} array, got shape {getattr(feats, 'shape', None)}")
    if feats.dtype != np.float32:
        raise _fail("shape", f"features must be float32, got {feats.dtype}")
    if not isinstance(edges, np.ndarray) or edges.ndim != 2 or edges.shape[0] != 2:
        raise _fail("shape", f"edges must be a 2 x M array, got shape {getattr(edges, 'shape', None)}")
    if edges.dtype != np.int64:
        raise _fail("shape", f"edges must be int64, got {edges.dtype}")
    if int(injection.num_original) != n:
        raise _fail("shape", f"injection was made for {injection.num_original} original nodes, graph has {n}")


def _check_edges(edges: np.ndarray, n: int, k: int, edges_per_node: int, targets: np.ndarray | None) -> None:
    """Rules ``edge_endpoints``, ``self_loop``, ``duplicate_edge`` and ``edge_budget``."""
    src, dst = edges[0], edges[1]
    if src.size:
        if src.min() < n or src.max() >= n + k:
            bad = int(src[(src < n) | (src >= n + k)][0])
            kind = "an original node" if 0 <= bad < n else "an id out of range"
            raise _fail(
                "edge_endpoints",
                f"row 0 must hold injected ids in [{n}, {n + k}); found {bad} ({kind}): "
                "edges between original nodes are not allowed",
            )
        if dst.min() < 0 or dst.max() >= n + k:
            raise _fail("edge_endpoints", f"edge endpoint outside [0, {n + k})")
        if targets is not None:
            orig = dst[dst < n]
            allowed = np.isin(orig, np.asarray(targets, dtype=np.int64))
            if not allowed.all():
                raise _fail(
                    "edge_endpoints",
                    f"{int((~allowed).sum())} edge(s) reach original nodes outside the targets "
                    f"(e.g. node {int(orig[~allowed][0])})",
                )
    loops = src == dst
    if loops.any():
        raise _fail("self_loop", f"{int(loops.sum())} self-loop(s), e.g. on node {int(src[loops][0])}")
    if not src.size:
        return
    # undirected: (u, v) and (v, u) are the same edge
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    keys = lo * (n + k) + hi
    uniq, counts = np.unique(keys, return_counts=True)
    if uniq.size != keys.size:
        dup = int(uniq[counts > 1][0])
        raise _fail(
            "duplicate_edge",
            f"{int(keys.size - uniq.size)} duplicate edge(s), e.g. ({dup // (n + k)}, {dup % (n + k)})",
        )
    # injected-injected links count for both ends
    ends = np.concatenate([src, dst[dst >= n]]) - n
    per_node = np.bincount(ends, minlength=k)
    if per_node.max() > edges_per_node:
        worst = int(per_node.argmax())
        raise _fail(
            "edge_budget",
            f"injected node {n + worst} has {int(per_node[worst])} edges, budget is {edges_per_node}",
        )


def _check_features(feats: np.ndarray, feat_min: float, feat_max: float) -> None:
    """Rules ``feature_finite`` and ``feature_range`` (limits rounded to float32)."""
    finite = np.isfinite(feats)
    if not finite.all():
        raise _fail("feature_finite", f"{int((~finite).sum())} non-finite feature value(s)")
    if feats.size:
        lo32, hi32 = np.float32(feat_min), np.float32(feat_max)
        fmin, fmax = float(feats.min()), float(feats.max())
        if fmin < lo32 or fmax > hi32:
            raise _fail(
                "feature_range",
                f"features span [{fmin:.6g}, {fmax:.6g}], outside the limits [{feat_min:.6g}, {feat_max:.6g}]",
            )
