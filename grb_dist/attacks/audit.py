"""Threat-model audits of perturbations (GRB injection and modification scenarios).

:func:`audit_injection` checks an :class:`~grb_dist.core.graph.Injection`,
:func:`audit_modification` a :class:`~grb_dist.core.graph.Modification`, against the budget;
both raise :class:`~grb_dist.core.errors.AuditError` naming the first violated rule. Nothing is
ever repaired (no clamping, no dropping): a perturbation either passes as it is or is
rejected.

Injection rules (names appear in the error message):
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

Modification rules (:data:`MODIFICATION_RULES`):
    shape            arrays have the documented shapes and dtypes, ``num_original`` matches
    edge_order       node ids in ``[0, N)``, each pair with the smaller id first, pairs sorted
    self_loop        no pair of a node with itself
    duplicate_edge   no pair listed twice, within or across ``removed`` and ``added``
    edge_budget      at most ``n_edge_mod`` flips (removed + added)
    removed_exists   every removed edge is an edge of the clean graph
    added_absent     no added pair is already an edge of the clean graph
    touches_target   every flipped pair has at least one target endpoint
    node_budget      at most ``n_node_mod`` nodes with changed features
    node_target      every node with changed features is a target (sorted, distinct)
    feature_finite   features are finite
    feature_range    features lie in ``[feat_min, feat_max]`` (float32-rounded limits)

Targeted rules (:func:`audit_targeted`, a
:class:`~grb_dist.core.targeted.TargetedModification`: each target's flips alone):
    shape            as above; ``targets`` sorted and distinct
    touches_target   every pair's first end is one of the targets (direct flips)
    edge_order       ids in range; pairs grouped by target, ascending (how a target's are found)
    self_loop, duplicate_edge, removed_exists, added_absent   as above, per target
    edge_budget      each target has at most its own budget of flips
    node_target      only targets' features change, each target's at most once
    feature_finite, feature_range   as above
"""

from __future__ import annotations

import numpy as np

from grb_dist.core.errors import AuditError
from grb_dist.core.graph import Graph, Injection, Modification, undirected_keys
from grb_dist.core.targeted import TargetedModification

RULES = (
    "shape", "node_count", "edge_endpoints", "self_loop", "duplicate_edge",
    "edge_budget", "feature_finite", "feature_range",
)

MODIFICATION_RULES = (
    "shape", "edge_order", "self_loop", "duplicate_edge", "edge_budget", "removed_exists",
    "added_absent", "touches_target", "node_budget", "node_target", "feature_finite", "feature_range",
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


def audit_modification(
    graph: Graph,
    modification: Modification,
    *,
    n_edge_mod: int,
    n_node_mod: int,
    feat_min: float,
    feat_max: float,
    targets: np.ndarray | None,
) -> None:
    """Check ``modification`` on ``graph`` against the threat model; raise :class:`AuditError`.

    Args:
        graph: the clean graph (N nodes, D features).
        modification: removed / added pairs (2 x R, 2 x A int64, smaller id first, sorted),
            changed nodes (K int64, sorted) and their features (K x D float32).
        n_edge_mod: maximum number of flipped edges (removed + added).
        n_node_mod: maximum number of nodes whose features change.
        feat_min, feat_max: feature limits of changed features (float32-rounded).
        targets: the attacked nodes; every flip must touch one, and only they may have
            their features changed. ``None``: a global attack (poisoning), which may flip
            any pair and change no features.
    """
    n = graph.num_nodes
    _check_modification_shapes(modification, n, graph.num_features)
    pairs = _check_pairs(modification.removed, modification.added, n, n_edge_mod)
    _check_flips_against_graph(graph, modification.removed, modification.added, pairs, targets)
    _check_modified_nodes(modification.nodes, n, n_node_mod, targets)
    _check_features(modification.features, feat_min, feat_max)


def _check_modification_shapes(modification: Modification, n: int, d: int) -> None:
    """Rule ``shape`` of a modification."""
    rem, add, nodes, feats = modification.removed, modification.added, modification.nodes, modification.features
    for name, a in (("removed", rem), ("added", add)):
        if not isinstance(a, np.ndarray) or a.ndim != 2 or a.shape[0] != 2 or a.dtype != np.int64:
            raise _fail("shape", f"{name} must be a 2 x M int64 array, got {getattr(a, 'dtype', None)} "
                                 f"of shape {getattr(a, 'shape', None)}")
    if not isinstance(nodes, np.ndarray) or nodes.ndim != 1 or nodes.dtype != np.int64:
        raise _fail("shape", "nodes must be a 1-D int64 array")
    if (not isinstance(feats, np.ndarray) or feats.dtype != np.float32 or feats.ndim != 2
            or feats.shape != (nodes.size, d)):
        raise _fail("shape", f"features must be a float32 array of shape ({nodes.size}, {d}), "
                             f"got {getattr(feats, 'dtype', None)} {getattr(feats, 'shape', None)}")
    if int(modification.num_original) != n:
        raise _fail("shape", f"modification was made for {modification.num_original} nodes, graph has {n}")


def _check_pairs(rem: np.ndarray, add: np.ndarray, n: int, n_edge_mod: int) -> np.ndarray:
    """Rules ``edge_order``, ``self_loop``, ``duplicate_edge`` and ``edge_budget``; returns
    every flipped pair (2 x (R + A))."""
    pairs = np.concatenate([rem, add], axis=1)
    if pairs.size and (pairs.min() < 0 or pairs.max() >= n):
        raise _fail("edge_order", f"edge endpoint outside [0, {n})")
    loops = pairs[0] == pairs[1]
    if loops.any():
        raise _fail("self_loop", f"{int(loops.sum())} self-loop(s), e.g. on node {int(pairs[0][loops][0])}")
    for name, a in (("removed", rem), ("added", add)):
        if (a[0] > a[1]).any():
            raise _fail("edge_order", f"{name} pairs must list the smaller node id first")
        keys = a[0] * n + a[1]
        if keys.size > 1 and (np.diff(keys) < 0).any():
            raise _fail("edge_order", f"{name} pairs must be sorted")
    keys = pairs[0] * n + pairs[1]
    uniq, counts = np.unique(keys, return_counts=True)
    if uniq.size != keys.size:
        dup = int(uniq[counts > 1][0])
        raise _fail("duplicate_edge", f"{int(keys.size - uniq.size)} pair(s) listed twice, e.g. ({dup // n}, {dup % n})")
    if keys.size > n_edge_mod:
        raise _fail("edge_budget", f"{keys.size} flipped edges exceed the budget of {n_edge_mod}")
    return pairs


def _check_flips_against_graph(graph: Graph, rem: np.ndarray, add: np.ndarray, pairs: np.ndarray,
                               targets: np.ndarray | None) -> None:
    """Rules ``removed_exists``, ``added_absent`` and ``touches_target`` (not for a
    global attack, ``targets=None``)."""
    n = graph.num_nodes
    clean = undirected_keys(graph)
    missing = ~member(rem[0] * n + rem[1], clean)
    if missing.any():
        i = int(np.flatnonzero(missing)[0])
        raise _fail("removed_exists", f"{int(missing.sum())} removed pair(s) are not edges of the graph, "
                                      f"e.g. ({int(rem[0, i])}, {int(rem[1, i])})")
    present = member(add[0] * n + add[1], clean)
    if present.any():
        i = int(np.flatnonzero(present)[0])
        raise _fail("added_absent", f"{int(present.sum())} added pair(s) are already edges, "
                                    f"e.g. ({int(add[0, i])}, {int(add[1, i])})")
    if targets is None:
        return
    is_target = _target_mask(targets, n)
    off = ~(is_target[pairs[0]] | is_target[pairs[1]])
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise _fail("touches_target", f"{int(off.sum())} flipped pair(s) touch no target, "
                                      f"e.g. ({int(pairs[0, i])}, {int(pairs[1, i])})")


def _check_modified_nodes(nodes: np.ndarray, n: int, n_node_mod: int, targets: np.ndarray | None) -> None:
    """Rules ``node_budget`` and ``node_target``."""
    if nodes.size > n_node_mod:
        raise _fail("node_budget", f"{nodes.size} nodes with changed features exceed the budget of {n_node_mod}")
    if nodes.size:
        if nodes.min() < 0 or nodes.max() >= n or (np.diff(nodes) <= 0).any():
            raise _fail("node_target", f"changed node ids must be sorted, distinct and in [0, {n})")
        is_target = _target_mask(targets if targets is not None else np.zeros(0, np.int64), n)
        if not is_target[nodes].all():
            raise _fail("node_target", f"node {int(nodes[~is_target[nodes]][0])} is not a target; "
                                       "only targets' features may change")


def _target_mask(targets: np.ndarray, n: int) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[np.asarray(targets, dtype=np.int64)] = True
    return mask


def member(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """``np.isin(keys, sorted_keys)`` by binary search (a few keys against millions of edges)."""
    if not sorted_keys.size or not keys.size:
        return np.zeros(keys.shape, dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_keys, keys), sorted_keys.size - 1)
    return sorted_keys[pos] == keys


def _check_influencer_pairs(n: int, clean: np.ndarray, pairs: np.ndarray, owners: np.ndarray) -> None:
    """An influencer attack's pairs: neither end is the pair's target, one end is a neighbour
    of it in the clean graph (Nettack's influencers; ``clean``: its edges' sorted keys)."""
    at = (pairs[0] == owners) | (pairs[1] == owners)
    if at.any():
        raise _fail("touches_target", f"an influencer pair touches its own target {int(owners[at][0])}; "
                                      "only a direct attack flips pairs at the target")

    def adjacent(u: np.ndarray) -> np.ndarray:
        return member(np.minimum(u, owners) * n + np.maximum(u, owners), clean)

    far = ~(adjacent(pairs[0]) | adjacent(pairs[1]))
    if far.any():
        raise _fail("touches_target", f"an influencer pair ({int(pairs[0][far][0])}, {int(pairs[1][far][0])}) has "
                                      f"no end next to its target {int(owners[far][0])}")


def audit_targeted(graph: Graph, mod: TargetedModification, budgets: np.ndarray, *, feat_min: float,
                   feat_max: float, features: bool) -> None:
    """Check each target's flips in ``mod`` as its own modification of ``graph`` (budget
    ``budgets[i]`` for ``mod.targets[i]``; ``features``: the attack may change the targets'
    features); raise :class:`AuditError` naming the first violated rule. A direct
    perturbation's pairs start at their target; an influencer one's never touch it and have
    one end at a neighbour of it in the clean graph. Every target at once: one membership
    test against the clean edges, not one per target."""
    n, targets = graph.num_nodes, mod.targets
    if targets.ndim != 1 or targets.dtype != np.int64 or (np.diff(targets) <= 0).any() or budgets.shape != targets.shape:
        raise _fail("shape", "targets must be sorted distinct int64 ids, one budget each")
    _check_modification_shapes(Modification(mod.removed, mod.added, mod.nodes, mod.features, mod.num_original),
                               n, graph.num_features)
    pairs = np.concatenate([mod.removed, mod.added], axis=1)
    owners = np.concatenate([mod.owners("removed"), mod.owners("added")])
    if owners.shape != (pairs.shape[1],):
        raise _fail("shape", "one target per flipped pair expected")
    if pairs.size and (pairs.min() < 0 or pairs.max() >= n):
        raise _fail("edge_order", f"edge endpoint outside [0, {n})")
    pos = np.minimum(np.searchsorted(targets, owners), max(targets.size - 1, 0))
    off = targets[pos] != owners if targets.size else np.ones(pairs.shape[1], bool)
    if off.any():
        what = "do not start at a target" if mod.direct else "belong to no target"
        raise _fail("touches_target", f"{int(off.sum())} flipped pair(s) {what}, "
                                      f"e.g. ({int(pairs[0][off][0])}, {int(pairs[1][off][0])})")
    clean = undirected_keys(graph)
    if not mod.direct:
        _check_influencer_pairs(n, clean, pairs, owners)
    for name in ("removed", "added"):  # how a target's pairs are found
        if getattr(mod, name).shape[1] > 1 and (np.diff(mod.owners(name)) < 0).any():
            raise _fail("edge_order", f"{name} pairs must be grouped by target, ascending")
    loops = pairs[0] == pairs[1]
    if loops.any():
        raise _fail("self_loop", f"{int(loops.sum())} self-loop(s), e.g. on node {int(pairs[0][loops][0])}")
    lo, hi = np.minimum(pairs[0], pairs[1]), np.maximum(pairs[0], pairs[1])
    if np.unique(np.stack([owners, lo, hi]), axis=1).shape[1] != pairs.shape[1]:
        raise _fail("duplicate_edge", "a target flips the same pair twice")
    used = np.bincount(pos, minlength=targets.size)
    over = used > budgets
    if over.any():
        i = int(np.flatnonzero(over)[0])
        raise _fail("edge_budget", f"target {int(targets[i])} flips {int(used[i])} pairs, over its budget of "
                                   f"{int(budgets[i])}")

    def keys(a: np.ndarray) -> np.ndarray:
        return np.minimum(a[0], a[1]) * n + np.maximum(a[0], a[1])

    if not member(keys(mod.removed), clean).all():
        raise _fail("removed_exists", "a removed pair is not an edge of the graph")
    if member(keys(mod.added), clean).any():
        raise _fail("added_absent", "an added pair is already an edge of the graph")
    if not mod.direct and mod.nodes.size:
        raise _fail("node_target", "an influencer perturbation changes no features")
    nodes = mod.nodes
    if nodes.size and (not features or (np.diff(nodes) <= 0).any() or not np.isin(nodes, targets).all()):
        raise _fail("node_target", "only the targets' own features may change, once each"
                    + ("" if features else " (this attack changes none)"))
    _check_features(mod.features, feat_min, feat_max)
