"""Dataset identity by content: a fingerprint of the loaded graph.

A run directory and every cell id name the dataset by what was loaded, not by its name or
path: two different graphs saved under the same path are two datasets, and the same graph
loaded from two paths is one. The fingerprint is the sha256 of the sha256 of each part:

* ``features`` -- the normalised float32 matrix (shape and bytes, row-major),
* ``edges`` -- the int64 edge_index (both directions, canonical order),
* ``labels`` -- the int64 labels and ``num_classes``,
* ``split`` -- every split's int64 index array, by split name,
* ``normalize`` -- the name of the feature normalisation.

The parts are kept in the run manifest, so a refused run can say which part differs.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from grb_dist.core.graph import Graph

PARTS = ("features", "edges", "labels", "split", "normalize")


def _array_hash(h: "hashlib._Hash", a: np.ndarray, dtype: Any) -> None:
    a = np.ascontiguousarray(a, dtype=dtype)
    h.update(f"{a.dtype.str}{a.shape}".encode())
    if a.size:  # memoryview: no copy of large arrays (it cannot cast an empty one)
        h.update(memoryview(a).cast("B"))


def fingerprint_parts(graph: Graph, normalize: str) -> dict[str, str]:
    """The sha256 (hex) of each part of ``graph`` (see the module docstring)."""
    parts: dict[str, str] = {}
    h = hashlib.sha256()
    _array_hash(h, graph.features, np.float32)
    parts["features"] = h.hexdigest()
    h = hashlib.sha256()
    _array_hash(h, graph.edge_index, np.int64)
    parts["edges"] = h.hexdigest()
    h = hashlib.sha256()
    _array_hash(h, graph.labels, np.int64)
    h.update(f"classes={int(graph.num_classes)}".encode())
    parts["labels"] = h.hexdigest()
    h = hashlib.sha256()
    for key in sorted(graph.split):
        h.update(key.encode())
        _array_hash(h, graph.split[key], np.int64)
    parts["split"] = h.hexdigest()
    parts["normalize"] = hashlib.sha256(str(normalize).encode()).hexdigest()
    return parts


def combine(parts: dict[str, str]) -> str:
    """The fingerprint (64 hex digits) of the parts."""
    return hashlib.sha256(json.dumps({k: parts[k] for k in PARTS}, sort_keys=True).encode()).hexdigest()


def graph_fingerprint(graph: Graph, normalize: str) -> str:
    """sha256 (64 hex digits) of the loaded graph's content, split and normalisation."""
    return combine(fingerprint_parts(graph, normalize))


__all__ = ["PARTS", "combine", "fingerprint_parts", "graph_fingerprint"]
