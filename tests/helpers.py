"""Shared helpers of the test-suite: tiny graphs and paths to the real datasets."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grb_dist.datasets.csbm import CSBMConfig, sample_csbm
from grb_dist.datasets.split import grb_split
from grb_dist.core.graph import Graph, canonical_edges

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"
CORA_LEGACY = SHARED / "grb-format" / "cora-legacy"
NPZ = SHARED / "npz"


def tiny_csbm(n: int = 300, classes: int = 3, features: int = 16, seed: int = 0, K: float = 3.0) -> Graph:
    """A small, well separated CSBM graph with a GRB split."""
    cfg = CSBMConfig(num_nodes=n, num_classes=classes, num_features=features, K=K, deg_same=4.0, deg_diff=0.5)
    g, _ = sample_csbm(cfg, seed=seed, name="tiny")
    return g.with_split(grb_split(g.degrees(), seed=seed))


def path_graph(n: int = 30) -> Graph:
    """A path 0-1-...-(n-1) with 2 classes and one-hot-ish features, split by the GRB scheme."""
    src = np.arange(n - 1)
    ei, _ = canonical_edges(src, src + 1, n)
    x = np.zeros((n, 4), dtype=np.float32)
    y = (np.arange(n) >= n // 2).astype(np.int64)
    x[np.arange(n), y] = 1.0
    g = Graph(features=x, edge_index=ei, labels=y, name="path")
    return g.with_split(grb_split(g.degrees(), seed=0))


def small(**changes) -> dict:
    """A small sweep job (as a dict) with ``changes`` applied at the top level."""
    base = {
        "dataset": "csbm", "seed": 0, "repeats": 2, "difficulties": ["easy", "full"],
        "train": {"epochs": 20}, "models": {"gcn": {"hidden_sizes": [8]}},
        "defenses": ["gcn", "mlp"], "surrogates": ["gcn"],
        "attack": {"n_inject": 5, "edges_per_node": 3, "steps": 2},
        "budgets": {"full": {"n_inject": 8}}, "attacks": {"fgsm": {}},
    }
    base.update(changes)
    return base
