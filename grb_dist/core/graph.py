"""The graph types shared by every part of grb_dist, numpy only (no torch).

A :class:`Graph` holds numpy arrays (so that Ray can share it zero-copy through its object
store), checked by the ``validate_*`` functions. An :class:`Injection` is the output of an
injection attack: new nodes with features and edges to existing nodes. A
:class:`Modification` is the output of a modification attack: edges removed and added among
the original nodes and new features for some of them; :func:`modified_graph` applies one to
a :class:`Graph` (the poisoning scenario). Neither perturbation modifies the original graph.

The torch side lives in :mod:`grb_dist.models.tensors`: ``graph_tensors`` (torch views of a
graph), ``apply_injection`` / ``inject_tensors``, ``apply_modification`` and
``perturb_tensors`` (either kind), all without touching their input.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from grb_dist.core.arrays import count_nonfinite
from grb_dist.core.errors import DatasetError
from grb_dist.core.names import SPLIT_NAMES, difficulty_key

#: Most nodes a graph may have: edges are keyed ``u * N + v`` in int64.
MAX_NODES = 3_037_000_499  # math.isqrt(2**63 - 1)


@dataclass(frozen=True, eq=False)
class Graph:
    """An undirected attributed graph with a GRB split.

    Attributes:
        features: float32 array, N x D.
        edge_index: int64 array, 2 x E, both directions of every undirected edge, no
            self-loops, no duplicates.
        labels: int64 array, N, values in [0, num_classes).
        split: named int64 index arrays; keys from ``SPLIT_NAMES`` (may be empty before
            :func:`grb_dist.datasets.split.grb_split` is applied).
        name: dataset name, for reports.
        num_classes: number of classes (defaults to max label + 1).
    """

    features: np.ndarray
    edge_index: np.ndarray
    labels: np.ndarray
    split: Mapping[str, np.ndarray] = field(default_factory=dict)
    name: str = "graph"
    num_classes: int = 0

    def __post_init__(self) -> None:
        if self.num_classes == 0 and self.labels.size:
            object.__setattr__(self, "num_classes", int(self.labels.max()) + 1)

    @property
    def num_nodes(self) -> int:
        return int(self.features.shape[0])

    @property
    def num_features(self) -> int:
        return int(self.features.shape[1])

    @property
    def num_edges(self) -> int:
        """Number of undirected edges."""
        return int(self.edge_index.shape[1]) // 2

    def degrees(self) -> np.ndarray:
        """Node degrees (int64, N)."""
        return np.bincount(self.edge_index[0], minlength=self.num_nodes).astype(np.int64)

    def with_split(self, split: Mapping[str, np.ndarray]) -> "Graph":
        return dataclasses.replace(self, split=dict(split))

    def with_features(self, features: np.ndarray) -> "Graph":
        return dataclasses.replace(self, features=np.ascontiguousarray(features, np.float32))

    def targets(self, difficulty: str) -> np.ndarray:
        """Test node indices of a difficulty (easy, medium, hard, full)."""
        key = difficulty_key(difficulty)
        if key not in self.split:
            raise DatasetError(f"graph {self.name!r} has no {key!r} split; apply grb_split first")
        return self.split[key]

    def validate(self) -> "Graph":
        """Check shapes, dtypes, ranges and the split; raise :class:`DatasetError` on a defect."""
        validate_arrays(self.features, self.edge_index, self.labels, self.name)
        if self.labels.size and int(self.labels.max()) >= self.num_classes:
            raise DatasetError(
                f"{self.name}: labels reach {int(self.labels.max())} but num_classes is "
                f"{self.num_classes}; fix num_classes or the labels"
            )
        validate_classes(self.labels, self.num_classes, self.name)
        validate_split(self.split, self.num_nodes, self.name)
        return self

    def summary(self) -> dict:
        return {
            "name": self.name,
            "nodes": self.num_nodes,
            "edges": self.num_edges,
            "features": self.num_features,
            "classes": self.num_classes,
            **{f"n_{k}": int(v.size) for k, v in self.split.items()},
        }


def validate_arrays(features: np.ndarray, edge_index: np.ndarray, labels: np.ndarray, name: str) -> None:
    """Check the raw arrays of a graph; raise :class:`DatasetError` naming the defect."""
    if features.ndim != 2:
        raise DatasetError(f"{name}: features must be a 2-D N x D array, got shape {features.shape}")
    n = features.shape[0]
    if features.shape[1] == 0:
        raise DatasetError(f"{name}: features have no columns (shape {features.shape}); every node needs at least "
                           "one feature")
    if features.dtype != np.float32:
        raise DatasetError(f"{name}: features must be float32, got {features.dtype}")
    if count_nonfinite(features):
        raise DatasetError(f"{name}: features contain NaN or inf; clean or impute them first")
    if labels.shape != (n,):
        raise DatasetError(f"{name}: labels must have shape ({n},) to match features, got {labels.shape}")
    if labels.size and labels.min() < 0:
        raise DatasetError(f"{name}: labels must be non-negative class ids, found {int(labels.min())}")
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise DatasetError(f"{name}: edge_index must have shape (2, E), got {edge_index.shape}")
    if edge_index.dtype != np.int64:
        raise DatasetError(f"{name}: edge_index must be int64, got {edge_index.dtype}")
    if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= n):
        raise DatasetError(f"{name}: edge_index has node ids outside [0, {n}); fix the edge list")


def validate_classes(labels: np.ndarray, num_classes: int, name: str) -> None:
    """Labels dense in ``[0, C)``: at least two classes, at most one class per node, and every
    class id in use (a stray label of 10**6 would otherwise make a model with a million
    outputs). Checked before anything is allocated per class."""
    n = int(labels.shape[0])
    if n == 0:
        raise DatasetError(f"{name}: the graph has no nodes")
    if not np.issubdtype(labels.dtype, np.integer):
        raise DatasetError(f"{name}: labels must be integer class ids, got {labels.dtype}")
    if num_classes < 2:
        raise DatasetError(f"{name}: labels name {num_classes} class(es); classification needs at least 2")
    if num_classes > n:
        raise DatasetError(
            f"{name}: labels reach {num_classes - 1:,} (so {num_classes:,} classes) but the graph has only {n:,} "
            "nodes; class ids must be dense in [0, C): renumber them 0..C-1"
        )
    counts = np.bincount(labels, minlength=num_classes)
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        shown = ", ".join(str(int(c)) for c in empty[:5]) + (", ..." if empty.size > 5 else "")
        raise DatasetError(
            f"{name}: class ids must be dense in [0, {num_classes}), but {empty.size:,} of them have no node "
            f"({shown}); renumber the labels 0..C-1"
        )


#: Splits that must not share a node (the inductive protocol: no test node is ever trained on).
DISJOINT_SPLITS = ("train", "val", "test_full")
TEST_SPLITS = ("test_easy", "test_medium", "test_hard")


def validate_split(split: Mapping[str, np.ndarray], num_nodes: int, name: str) -> None:
    """Split index arrays: known names, 1-D integer, non-empty, inside ``[0, N)``, no repeated
    node; train, val and the test sets pairwise disjoint (the inductive protocol); the three
    difficulties disjoint and inside ``test_full`` when it is given."""
    members: dict[str, np.ndarray] = {}
    for key, idx in split.items():
        if key not in SPLIT_NAMES:
            raise DatasetError(
                f"{name}: unknown split {key!r}; valid split names: {', '.join(SPLIT_NAMES)}"
            )
        idx = np.asarray(idx)
        if idx.ndim != 1 or idx.size == 0:
            raise DatasetError(f"{name}: split {key!r} is empty; re-split the graph")
        if not np.issubdtype(idx.dtype, np.integer):
            raise DatasetError(f"{name}: split {key!r} must hold integer node ids, got {idx.dtype}")
        if idx.min() < 0 or idx.max() >= num_nodes:
            raise DatasetError(f"{name}: split {key!r} has node indices outside [0, {num_nodes})")
        if np.bincount(idx, minlength=num_nodes).max() > 1:
            raise DatasetError(f"{name}: split {key!r} lists a node twice")
        members[key] = idx
    groups = [k for k in (*DISJOINT_SPLITS, *TEST_SPLITS) if k in members]
    owner = np.full(num_nodes, -1, dtype=np.int8)
    for i, key in enumerate(groups):
        if key in TEST_SPLITS and "test_full" in members:
            continue  # inside test_full, checked below
        idx = members[key]
        taken = owner[idx]
        if (taken >= 0).any():
            other = groups[int(taken[taken >= 0][0])]
            count = int((taken >= 0).sum())
            raise DatasetError(
                f"{name}: splits {other!r} and {key!r} share {count:,} node(s) (e.g. node {int(idx[taken >= 0][0])}); "
                "training, validation and test nodes must be disjoint (inductive protocol): fix the split"
            )
        owner[idx] = i
    if "test_full" in members:
        in_full = np.zeros(num_nodes, dtype=bool)
        in_full[members["test_full"]] = True
        seen = np.zeros(num_nodes, dtype=bool)
        for key in TEST_SPLITS:
            if key not in members:
                continue
            idx = members[key]
            if not in_full[idx].all():
                raise DatasetError(f"{name}: split {key!r} has nodes outside 'test_full'; test_full is the union of the difficulties")
            if seen[idx].any():
                raise DatasetError(f"{name}: split {key!r} shares nodes with another difficulty; they must be disjoint")
            seen[idx] = True


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)`` for 1-D integer arrays by a sort (several times faster than
    ``np.unique`` of numpy 2.4 on millions of keys), same result."""
    s = np.sort(np.asarray(a).ravel())
    if s.size == 0:
        return s
    return s[np.concatenate(([True], s[1:] != s[:-1]))]


def canonical_edges(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> tuple[np.ndarray, dict]:
    """Symmetrise an edge list, drop self-loops and duplicates.

    Returns ``(edge_index, counts)`` where ``edge_index`` is 2 x E int64 holding both
    directions sorted by (src, dst), and ``counts`` reports what was removed.
    """
    if num_nodes > MAX_NODES:
        raise DatasetError(f"a graph of {num_nodes:,} nodes, more than the {MAX_NODES:,} whose edges fit 64-bit keys "
                           "(u * N + v)")
    src = np.asarray(src, dtype=np.int64).ravel()
    dst = np.asarray(dst, dtype=np.int64).ravel()
    if src.shape != dst.shape:
        raise DatasetError("edge list: source and target arrays differ in length")
    if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= num_nodes):
        raise DatasetError(f"edge list has node ids outside [0, {num_nodes}); fix the edge list")
    n_in = int(src.size)
    loops = src == dst
    src, dst = src[~loops], dst[~loops]
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    keys = sorted_unique(lo * num_nodes + hi)
    lo, hi = keys // num_nodes, keys % num_nodes
    # both directions, sorted by (src, dst): one sort of src * N + dst keys (a lexsort of
    # the two rows is about 10x slower at millions of edges)
    both = np.sort(np.concatenate([keys, hi * num_nodes + lo]))
    edge_index = np.ascontiguousarray(np.stack([both // num_nodes, both % num_nodes]))
    counts = {
        "input_entries": n_in,
        "self_loops_removed": int(loops.sum()),
        "undirected_edges": int(keys.size),
    }
    return edge_index, counts


@dataclass(frozen=True, eq=False)
class Injection:
    """An injection perturbation: ``n_inject`` new nodes appended after the N original nodes.

    Attributes:
        features: float32 array, n_inject x D, the injected nodes' features.
        edges: int64 array, 2 x M, one direction per undirected edge: row 0 holds an
            injected node's global id (in [N, N + n_inject)), row 1 the other endpoint
            (an original node, or another injected node for attacks that allow it).
        num_original: N, the node count of the graph the injection applies to.
        feat_min, feat_max: the feature limits the attack was held to (``None`` when not
            known, e.g. built by hand).
    """

    features: np.ndarray
    edges: np.ndarray
    num_original: int
    feat_min: float | None = None
    feat_max: float | None = None

    @property
    def n_inject(self) -> int:
        return int(self.features.shape[0])


@dataclass(frozen=True, eq=False)
class Modification:
    """A modification perturbation of a graph with N nodes: flipped edges and changed features.

    Attributes:
        removed: int64 array, 2 x R, edges of the clean graph that are removed; one
            direction per undirected edge with ``removed[0] < removed[1]``, sorted.
        added: int64 array, 2 x A, node pairs that are connected; same conventions.
        nodes: int64 array, K, sorted distinct ids of the nodes whose features change.
        features: float32 array, K x D, their new features (row ``i`` for ``nodes[i]``).
        num_original: N, the node count of the graph the modification applies to.
        feat_min, feat_max: the feature limits the attack was held to (``None`` when not
            known).
    """

    removed: np.ndarray
    added: np.ndarray
    nodes: np.ndarray
    features: np.ndarray
    num_original: int
    feat_min: float | None = None
    feat_max: float | None = None

    @property
    def n_edge_flips(self) -> int:
        return int(self.removed.shape[1] + self.added.shape[1])

    @property
    def n_nodes_modified(self) -> int:
        return int(self.nodes.shape[0])

    def inverse(self, graph: Graph) -> "Modification":
        """The modification that turns the perturbed graph back into ``graph``."""
        return Modification(self.added, self.removed, self.nodes,
                            np.ascontiguousarray(graph.features[self.nodes]), self.num_original)

    @staticmethod
    def build(removed: np.ndarray, added: np.ndarray, num_original: int, num_features: int,
              nodes: np.ndarray | None = None, features: np.ndarray | None = None) -> "Modification":
        """A modification in canonical form from edge pairs in any orientation and order
        (2 x R and 2 x A integer arrays); ``nodes`` / ``features`` default to none."""
        if nodes is None:
            nodes = np.zeros(0, dtype=np.int64)
            features = np.zeros((0, num_features), dtype=np.float32)
        nodes = np.asarray(nodes, dtype=np.int64)
        order = np.argsort(nodes, kind="stable")
        return Modification(canonical_pairs(removed, num_original), canonical_pairs(added, num_original),
                            np.ascontiguousarray(nodes[order]),
                            np.ascontiguousarray(np.asarray(features, dtype=np.float32)[order]), int(num_original))


def modified_graph(graph: Graph, modification: "Modification | None") -> Graph:
    """``graph`` with ``modification`` applied, as a new :class:`Graph` (same split, labels
    and name): what a defender trains on in the poisoning scenario. ``None`` gives ``graph``."""
    if modification is None or (modification.n_edge_flips == 0 and modification.n_nodes_modified == 0):
        return graph
    n = graph.num_nodes
    if modification.num_original != n:
        raise DatasetError(f"a modification made for {modification.num_original:,} nodes cannot apply to "
                           f"{graph.name!r} ({n:,} nodes)")
    keys = undirected_keys(graph)
    removed = modification.removed[0] * n + modification.removed[1]
    added = modification.added[0] * n + modification.added[1]
    keys = np.concatenate([keys[~np.isin(keys, removed)], added])
    edge_index, _ = canonical_edges(keys // n, keys % n, n)
    features = graph.features
    if modification.n_nodes_modified:
        features = features.copy()
        features[modification.nodes] = modification.features
    return dataclasses.replace(graph, features=features, edge_index=edge_index)


def undirected_keys(graph: Graph) -> np.ndarray:
    """Sorted keys ``u * N + v`` (u < v) of the graph's undirected edges (loaded graphs keep
    their edges sorted, so this is usually a filter without a sort)."""
    ei, n = graph.edge_index, graph.num_nodes
    up = ei[0] < ei[1]
    keys = ei[0][up] * n + ei[1][up]
    return keys if keys.size < 2 or bool((keys[1:] > keys[:-1]).all()) else np.sort(keys)


def canonical_pairs(pairs: np.ndarray, num_nodes: int) -> np.ndarray:
    """Node pairs (2 x M) with the smaller id first, sorted; duplicates are kept (the audit
    reports them)."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(2, -1)
    lo, hi = np.minimum(pairs[0], pairs[1]), np.maximum(pairs[0], pairs[1])
    order = np.argsort(lo * num_nodes + hi, kind="stable")
    return np.ascontiguousarray(np.stack([lo[order], hi[order]]))
