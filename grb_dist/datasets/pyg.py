"""A PyTorch Geometric graph as a :class:`~grb_dist.core.graph.Graph`.

:func:`from_pyg` reads a ``torch_geometric.data.Data`` (or a one-graph ``InMemoryDataset``)
by duck typing: it calls ``.detach().cpu().numpy()`` on the tensors it finds and never
imports torch itself, so this module stays on the numpy floor. The way back, a ``Data`` of a
graph and of a perturbed graph, is :func:`grb_dist.models.pyg.to_pyg`.

What is read, and what is refused (one :class:`~grb_dist.core.errors.DatasetError` line):

- ``x`` (N x D, real and finite; required: GRB's attacks perturb features), ``edge_index``
  (2 x E; made undirected, self-loops and duplicates dropped, as for every loaded graph),
  ``y`` (N integer class ids, dense in ``[0, C)``).
- ``edge_weight`` must be absent or all ones and ``edge_attr`` absent: GRB scores unweighted
  graphs, and a weight dropped without notice would change what the model sees.
- The split: GRB masks written by :func:`~grb_dist.models.pyg.to_pyg` (``train_mask``,
  ``val_mask``, ``test_easy_mask``, ``test_medium_mask``, ``test_hard_mask``) are read as
  they are. Plain PyG masks (``train_mask``, ``val_mask``, ``test_mask``) keep their train
  and validation nodes, and the test nodes are cut by degree into three equal bands, easy
  (lowest degrees), medium and hard, as GRB cuts its test candidates. Without masks the GRB
  split is drawn (:func:`~grb_dist.datasets.split.grb_split`, ``seed``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grb_dist.core.errors import DatasetError
from grb_dist.core.graph import Graph, canonical_edges
from grb_dist.datasets.split import grb_split

#: GRB split names and the ``Data`` mask attributes that hold them.
MASKS = {
    "train": "train_mask",
    "val": "val_mask",
    "test_easy": "test_easy_mask",
    "test_medium": "test_medium_mask",
    "test_hard": "test_hard_mask",
    "test_full": "test_mask",
}


def from_pyg(data: Any, *, name: str = "pyg", seed: int = 0) -> Graph:
    """The :class:`Graph` of a PyG ``Data`` (or a dataset holding exactly one graph).

    Features are kept as given (no normalisation): a model trained on ``data`` sees the
    same numbers here. ``seed`` draws the GRB split when ``data`` has no masks.
    """
    data = _one_graph(data)
    x = _array(data, "x", required=True)
    if x.ndim != 2:
        raise DatasetError(f"{name}: data.x must be N x D node features, got shape {x.shape}")
    if not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise DatasetError(f"{name}: data.x must hold real numbers, got dtype {x.dtype}")
    n = x.shape[0]
    ei = _array(data, "edge_index", required=True)
    if ei.ndim != 2 or ei.shape[0] != 2 or not np.issubdtype(ei.dtype, np.integer):
        raise DatasetError(f"{name}: data.edge_index must be a 2 x E integer tensor, got {ei.dtype} {ei.shape}")
    _unweighted(data, ei.shape[1], name)
    y = _array(data, "y", required=True).reshape(-1)
    if y.shape[0] != n:
        raise DatasetError(f"{name}: data.y must hold one class id per node ({n}); multi-label targets are not "
                           "supported")
    if not np.issubdtype(y.dtype, np.integer):
        raise DatasetError(f"{name}: data.y must hold integer class ids, got dtype {y.dtype}")
    edge_index, _ = canonical_edges(ei[0], ei[1], n)
    graph = Graph(np.ascontiguousarray(x, np.float32), edge_index, y.astype(np.int64), name=name)
    return graph.with_split(_split(data, graph, seed, name)).validate()


def _one_graph(data: Any) -> Any:
    if hasattr(data, "edge_index"):
        return data
    if hasattr(data, "__len__") and hasattr(data, "__getitem__"):
        if len(data) != 1:
            raise DatasetError(f"a PyG dataset of {len(data)} graphs: GRB scores node classification on one "
                               "graph; pass dataset[i]")
        return data[0]
    raise DatasetError(f"expected a torch_geometric Data or InMemoryDataset, got {type(data).__name__}")


def _array(data: Any, key: str, *, required: bool = False) -> np.ndarray | None:
    value = getattr(data, key, None)
    if value is None:
        if required:
            raise DatasetError(f"the PyG graph has no data.{key}; GRB needs node features (x), edges "
                               "(edge_index) and labels (y)")
        return None
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def _unweighted(data: Any, num_edges: int, name: str) -> None:
    if _array(data, "edge_attr") is not None:
        raise DatasetError(f"{name}: data.edge_attr is set; GRB scores unweighted graphs without edge features: "
                           "drop it (data.edge_attr = None) to score the graph's structure alone")
    w = _array(data, "edge_weight")
    if w is not None and (w.size != num_edges or not np.all(w == 1)):
        raise DatasetError(f"{name}: data.edge_weight holds weights other than 1; GRB scores unweighted graphs: "
                           "drop the edges of weight 0 and set data.edge_weight = None")


def _split(data: Any, graph: Graph, seed: int, name: str) -> dict[str, np.ndarray]:
    masks = {k: _array(data, attr) for k, attr in MASKS.items()}
    if all(m is None for m in masks.values()):
        return grb_split(graph.degrees(), seed)
    index = {}
    for key, mask in masks.items():
        if mask is None:
            continue
        mask = mask.reshape(-1)
        if mask.dtype != np.bool_ or mask.shape[0] != graph.num_nodes:
            raise DatasetError(f"{name}: data.{MASKS[key]} must be a boolean mask of {graph.num_nodes} nodes, got "
                               f"{mask.dtype} {mask.shape}")
        index[key] = np.flatnonzero(mask).astype(np.int64)
    missing = [MASKS[k] for k in ("train", "val", "test_full") if k not in index]
    if missing:
        raise DatasetError(f"{name}: the graph has some split masks but not {', '.join(missing)}; give "
                           "train_mask, val_mask and test_mask, or none (the GRB split is drawn)")
    bands = ("test_easy", "test_medium", "test_hard")
    if not all(k in index for k in bands):
        index.update(_degree_bands(index["test_full"], graph.degrees(), seed))
    return index


def _degree_bands(test: np.ndarray, degrees: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """The test nodes cut into three equal degree bands (ties broken by a seeded permutation,
    as :func:`grb_split` breaks them)."""
    perm = np.random.default_rng(seed).permutation(test)
    order = perm[np.argsort(degrees[perm], kind="stable")]
    easy, medium, hard = np.array_split(order, 3)
    return {"test_easy": np.sort(easy), "test_medium": np.sort(medium), "test_hard": np.sort(hard)}
