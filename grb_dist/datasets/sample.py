"""A smaller graph with the large one's shape: what a cost calibration measures on when the
graph is too large to time every kind of task on in full.

:func:`sample_graph` keeps a share ``p`` of the nodes and gives each kept node its degree:
an edge between two kept nodes stays, and an edge from a kept node to one that was dropped
is kept with probability 1/2 and re-attached to a kept node drawn at random (the other half
of those edges stand for the ones that other dropped nodes would have brought in). A node's
expected degree, the mean degree and the share of high-degree nodes are the large graph's,
and the sample has ``p`` of its nodes and about ``p`` of its edges, so the per-epoch work of
a sparse model (a product over the edges, a transform of the nodes' features) is about ``p``
of the large graph's. An induced subgraph would not do: it keeps ``p^2`` of the edges, and
the degrees shrink with it.

The split is sampled group by group (the nodes of each combination of split arrays: train,
val, each difficulty), each group keeping its share and at least a few nodes, so that every
split array of the large graph is non-empty in the sample and attacks find targets of each
difficulty. Features and labels are the kept nodes' own; ``num_classes`` is the large
graph's (a model built on the sample has the large one's output width).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from grb_dist.core.errors import DatasetError

if TYPE_CHECKING:
    from grb_dist.core.graph import Graph

#: Fewest nodes a group of the split keeps in a sample (all of them when it has fewer).
MIN_GROUP = 8


def sample_graph(graph: "Graph", nodes: int, seed: int = 0) -> "Graph":
    """About ``nodes`` nodes of ``graph`` with their degrees (module docstring); ``graph``
    itself when ``nodes`` is not smaller than it."""
    from grb_dist.core.graph import Graph

    n = graph.num_nodes
    if nodes < 1:
        raise DatasetError(f"a sample needs at least one node, got {nodes}")
    if nodes >= n:
        return graph
    rng = np.random.default_rng(seed)
    keep = _stratified(graph, nodes / n, rng)
    k = int(keep.size)
    where = np.full(n, -1, dtype=np.int64)
    where[keep] = np.arange(k)
    src, dst = graph.edge_index
    mine = where[src] >= 0
    a, b = where[src[mine]], where[dst[mine]]
    outside = b < 0
    moved = outside & (rng.random(b.size) < 0.5)
    b[moved] = rng.integers(0, k, size=int(moved.sum()))
    a, b = a[~outside | moved], b[~outside | moved]
    loop = a == b
    a, b = a[~loop], b[~loop]
    keys = np.unique(np.concatenate([a * k + b, b * k + a]))
    edge_index = np.ascontiguousarray(np.stack([keys // k, keys % k]))
    split = {name: np.sort(where[idx][where[idx] >= 0]) for name, idx in graph.split.items()}
    return Graph(features=np.ascontiguousarray(graph.features[keep]), edge_index=edge_index,
                 labels=np.ascontiguousarray(graph.labels[keep]), split=split,
                 name=f"{graph.name} (sample of {k:,} nodes)", num_classes=graph.num_classes)


def _stratified(graph: "Graph", share: float, rng: np.random.Generator) -> np.ndarray:
    """Sorted node ids: ``share`` of each group of nodes that the same split arrays hold (at
    least :data:`MIN_GROUP` of each group, or all of a smaller one)."""
    n = graph.num_nodes
    group = np.zeros(n, dtype=np.int64)
    for bit, name in enumerate(sorted(graph.split)):
        group[np.asarray(graph.split[name], dtype=np.int64)] |= 1 << bit
    order = np.argsort(group, kind="stable")
    bounds = np.flatnonzero(np.diff(group[order])) + 1
    chosen = []
    for members in np.split(order, bounds):
        take = min(members.size, max(MIN_GROUP, int(round(share * members.size))))
        chosen.append(rng.choice(members, size=take, replace=False))
    return np.sort(np.concatenate(chosen))


__all__ = ["MIN_GROUP", "sample_graph"]
