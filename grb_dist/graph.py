"""The graph types shared by every part of grb_dist.

A :class:`Graph` holds numpy arrays (so that Ray can share it zero-copy through its object
store); :meth:`Graph.tensors` gives torch views for models. An :class:`Injection` is the
output of an injection attack: new nodes with features and edges to existing nodes; the
original graph is never modified, :func:`apply_injection` returns the perturbed tensors.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple

import numpy as np
import torch

from grb_dist.errors import DatasetError

SPLIT_NAMES = ("train", "val", "test_easy", "test_medium", "test_hard", "test_full")
DIFFICULTIES = ("easy", "medium", "hard", "full")


def difficulty_key(difficulty: str) -> str:
    """Split key of a difficulty name (``easy`` -> ``test_easy``)."""
    d = difficulty.lower()
    if d.startswith("test_"):
        d = d[5:]
    if d not in DIFFICULTIES:
        raise DatasetError(
            f"unknown difficulty {difficulty!r}; choose one of: {', '.join(DIFFICULTIES)}"
        )
    return f"test_{d}"


class TorchGraph(NamedTuple):
    """Torch view of a graph: ``x`` (N x D float32), ``edge_index`` (2 x E int64), ``y`` (N)."""

    x: torch.Tensor
    edge_index: torch.Tensor
    y: torch.Tensor


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

    def tensors(self, device: str | torch.device = "cpu") -> TorchGraph:
        """Torch tensors of features, edges and labels on ``device`` (no copy on CPU)."""
        return TorchGraph(
            _as_tensor(self.features, device),
            _as_tensor(self.edge_index, device),
            _as_tensor(self.labels, device),
        )

    def validate(self) -> "Graph":
        """Check shapes, dtypes, ranges and the split; raise :class:`DatasetError` on a defect."""
        validate_arrays(self.features, self.edge_index, self.labels, self.name)
        if self.labels.size and int(self.labels.max()) >= self.num_classes:
            raise DatasetError(
                f"{self.name}: labels reach {int(self.labels.max())} but num_classes is "
                f"{self.num_classes}; fix num_classes or the labels"
            )
        for key, idx in self.split.items():
            if key not in SPLIT_NAMES:
                raise DatasetError(
                    f"{self.name}: unknown split {key!r}; valid split names: {', '.join(SPLIT_NAMES)}"
                )
            if idx.ndim != 1 or idx.size == 0:
                raise DatasetError(f"{self.name}: split {key!r} is empty; re-split the graph")
            if idx.min() < 0 or idx.max() >= self.num_nodes:
                raise DatasetError(
                    f"{self.name}: split {key!r} has node indices outside [0, {self.num_nodes})"
                )
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


def _as_tensor(a: np.ndarray, device: str | torch.device) -> torch.Tensor:
    if not a.flags.writeable:  # arrays from Ray's object store are read-only views
        t = torch.from_numpy(a.copy()) if str(device) == "cpu" else torch.as_tensor(np.asarray(a))
    else:
        t = torch.from_numpy(a)
    return t.to(device)


def validate_arrays(features: np.ndarray, edge_index: np.ndarray, labels: np.ndarray, name: str) -> None:
    """Check the raw arrays of a graph; raise :class:`DatasetError` naming the defect."""
    if features.ndim != 2:
        raise DatasetError(f"{name}: features must be a 2-D N x D array, got shape {features.shape}")
    n = features.shape[0]
    if features.dtype != np.float32:
        raise DatasetError(f"{name}: features must be float32, got {features.dtype}")
    if not np.isfinite(features).all():
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


def canonical_edges(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> tuple[np.ndarray, dict]:
    """Symmetrise an edge list, drop self-loops and duplicates.

    Returns ``(edge_index, counts)`` where ``edge_index`` is 2 x E int64 holding both
    directions sorted by (src, dst), and ``counts`` reports what was removed.
    """
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
    keys = np.unique(lo * num_nodes + hi)
    lo, hi = keys // num_nodes, keys % num_nodes
    both = np.concatenate([np.stack([lo, hi]), np.stack([hi, lo])], axis=1)
    order = np.lexsort((both[1], both[0]))
    edge_index = np.ascontiguousarray(both[:, order])
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
    """

    features: np.ndarray
    edges: np.ndarray
    num_original: int

    @property
    def n_inject(self) -> int:
        return int(self.features.shape[0])


def apply_injection(
    graph_x: torch.Tensor,
    graph_edge_index: torch.Tensor,
    inj_features: torch.Tensor,
    inj_edges: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Perturbed ``(x, edge_index)``: features stacked, injected edges appended both ways.

    Works on tensors so that attacks can differentiate through ``inj_features``.
    """
    x = torch.cat([graph_x, inj_features], dim=0)
    if inj_edges.numel() == 0:
        return x, graph_edge_index
    both = torch.cat([inj_edges, inj_edges.flip(0)], dim=1)
    return x, torch.cat([graph_edge_index, both], dim=1)


def perturbed_tensors(graph: Graph, injection: Injection | None, device: str | torch.device = "cpu") -> TorchGraph:
    """Torch tensors of ``graph`` with ``injection`` applied (labels of injected nodes are -1)."""
    return inject_tensors(graph.tensors(device), injection)


def inject_tensors(clean: TorchGraph, injection: Injection | None) -> TorchGraph:
    """``clean`` (the tensors of a graph) with ``injection`` applied, on ``clean``'s device;
    ``clean`` itself when there is nothing to inject."""
    if injection is None or injection.n_inject == 0:
        return clean
    device = clean.x.device
    x, ei = apply_injection(
        clean.x, clean.edge_index, _as_tensor(injection.features, device), _as_tensor(injection.edges, device)
    )
    y = torch.cat([clean.y, torch.full((injection.n_inject,), -1, dtype=clean.y.dtype, device=device)])
    return TorchGraph(x, ei, y)
