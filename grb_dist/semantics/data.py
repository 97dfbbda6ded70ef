"""The graphs of a study (Gosch et al. 2023) and its new nodes: :func:`prepare`.

On a CSBM or CBA (:mod:`grb_dist.datasets.csbm`) the known graph is sampled per (K, graph
seed), split into train / validation, and new (test) nodes are sampled conditioned on it
alone, with the Bayes classifier's terms as the reference g; a real graph (``npz``) is
split inductively and has no reference.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from grb_dist.semantics.spec import cba_config, csbm_config

if TYPE_CHECKING:
    from grb_dist.semantics.cache import UnitCache
    from grb_dist.semantics.spec import StudySpec


@dataclass
class Prepared:
    """A known graph (with its train/val split), the new nodes and the reference.

    ``nb_node`` / ``nb_base``: the clean edges of the new nodes (new index, base id).
    ``g_scores``: T x C clean log-posteriors of the Bayes classifier (``None``: no reference);
    ``g_step``: N x C change of class c's log-posterior when an edge to known node j is
    added (on a CSBM it depends on j's class only, on a CBA on its degree too);
    ``g_features``: T features-only Bayes decisions.
    """

    graph: Any
    x_new: np.ndarray
    y_new: np.ndarray
    nb_node: np.ndarray
    nb_base: np.ndarray
    g_scores: np.ndarray | None = None
    g_step: np.ndarray | None = None
    g_features: np.ndarray | None = None

    @property
    def degree(self) -> np.ndarray:
        return np.bincount(self.nb_node, minlength=self.y_new.size)


def _train_val_split(n: int, fraction: float, rng: np.random.Generator) -> dict[str, np.ndarray]:
    perm = rng.permutation(n)
    cut = max(1, min(n - 1, int(round(fraction * n))))
    return {"train": np.sort(perm[:cut]), "val": np.sort(perm[cut:])}


def bayes_terms(config, means: np.ndarray, x_new: np.ndarray, nb_counts: np.ndarray,
                class_sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bayes log-posteriors of new nodes with ``nb_counts`` (T x C) neighbours per class
    among known nodes of ``class_sizes``; returns (T x C scores, C x C step, T x C feature
    term). Equals :func:`grb_dist.datasets.csbm.bayes_log_posterior` on the known graph
    plus the node."""
    C = config.num_classes
    x = np.asarray(x_new, dtype=np.float64)
    feat = -((x[:, None, :] - means[None].astype(np.float64)) ** 2).sum(-1) / (2 * config.sigma**2)
    lp, l1p = math.log(max(config.p, 1e-300)), math.log(max(1 - config.p, 1e-300))
    lq, l1q = math.log(max(config.q, 1e-300)), math.log(max(1 - config.q, 1e-300))
    same = np.eye(C)
    edge = same * lp + (1 - same) * lq  # [c, c']: class-c hypothesis, a class-c' neighbour
    non = same * l1p + (1 - same) * l1q
    non_nb = class_sizes[None, :] - nb_counts
    scores = feat + nb_counts @ edge.T + non_nb @ non.T
    return scores, (edge - non), feat


def prepare_csbm(spec: StudySpec, K: float, graph_seed: int) -> Prepared:
    """Sample the known CSBM graph, its split and ``spec.nodes`` new nodes (each sampled
    conditioned on the known graph only: edges among new nodes are dropped)."""
    from grb_dist.datasets.csbm import sample_csbm, sample_inductive_nodes

    config = csbm_config(spec, K)
    graph, means = sample_csbm(config, seed=graph_seed, name=f"csbm-K{K:g}")
    rng = np.random.default_rng([graph_seed, 1])
    graph = graph.with_split(_train_val_split(graph.num_nodes, spec.train_fraction, rng))
    n = graph.num_nodes
    full = sample_inductive_nodes(graph, config, means, spec.nodes, seed=graph_seed + 7919)
    ei = full.edge_index
    keep = (ei[0] >= n) & (ei[1] < n)
    nb_node, nb_base = ei[0][keep] - n, ei[1][keep]
    x_new, y_new = full.features[n:], full.labels[n:]
    prepared = Prepared(graph, x_new, y_new, nb_node, nb_base)
    if spec.reference == "bayes":
        counts = np.zeros((y_new.size, config.num_classes))
        np.add.at(counts, (nb_node, graph.labels[nb_base]), 1.0)
        sizes = np.bincount(graph.labels, minlength=config.num_classes).astype(np.float64)
        scores, step, feat = bayes_terms(config, means, x_new, counts, sizes)
        prepared.g_scores, prepared.g_step, prepared.g_features = scores, step[:, graph.labels].T, feat.argmax(1)
    return prepared


def prepare_cba(spec: StudySpec, K: float, graph_seed: int) -> Prepared:
    """Sample the known CBA graph, its split and ``spec.nodes`` new nodes, each attached
    to the known graph alone (appendix C), and the CBA Bayes classifier's terms."""
    from grb_dist.datasets.csbm import cba_bayes_terms, sample_cba, sample_cba_new_nodes

    config = cba_config(spec, K)
    graph, means = sample_cba(config, seed=graph_seed, name=f"cba-K{K:g}")
    rng = np.random.default_rng([graph_seed, 1])
    graph = graph.with_split(_train_val_split(graph.num_nodes, spec.train_fraction, rng))
    x_new, y_new, nb_node, nb_base = sample_cba_new_nodes(graph, config, means, spec.nodes, seed=graph_seed + 7919)
    prepared = Prepared(graph, x_new, y_new, nb_node, nb_base)
    if spec.reference == "bayes":
        scores, step, feat = cba_bayes_terms(graph, config, means, x_new, nb_node, nb_base)
        prepared.g_scores, prepared.g_step, prepared.g_features = scores, step, feat.argmax(1)
    return prepared


def prepare_npz(spec: StudySpec, graph_seed: int) -> Prepared:
    """Split a real graph inductively: ``test_fraction`` of the nodes are held out (their
    edges to known nodes kept, edges among them dropped), ``spec.nodes`` of them attacked;
    the known nodes are split ``train_fraction`` / rest into train / validation."""
    from grb_dist.datasets.npz import load_npz_graph
    from grb_dist.core.graph import Graph

    full, _ = load_npz_graph(Path(str(spec.graph["path"])))
    if spec.graph.get("features", "raw") == "row":  # rows scaled to sum 1 (bag-of-words)
        sums = np.abs(full.features).sum(1, keepdims=True)
        full = full.with_features((full.features / np.maximum(sums, 1e-12)).astype(np.float32))
    n = full.num_nodes
    rng = np.random.default_rng([graph_seed, 2])
    perm = rng.permutation(n)
    n_test = max(1, int(round(spec.test_fraction * n)))
    test = np.sort(perm[:n_test])
    known = np.sort(perm[n_test:])
    pos = np.full(n, -1, dtype=np.int64)
    pos[known] = np.arange(known.size)
    ei = full.edge_index
    inner = (pos[ei[0]] >= 0) & (pos[ei[1]] >= 0)
    base_ei = np.stack([pos[ei[0][inner]], pos[ei[1][inner]]])
    graph = Graph(features=full.features[known], edge_index=base_ei, labels=full.labels[known],
                  name=full.name, num_classes=full.num_classes)
    graph = graph.with_split(_train_val_split(known.size, spec.train_fraction, rng))
    attacked = np.sort(rng.choice(test, size=min(spec.nodes, test.size), replace=False))
    tpos = np.full(n, -1, dtype=np.int64)
    tpos[attacked] = np.arange(attacked.size)
    sel = (tpos[ei[0]] >= 0) & (pos[ei[1]] >= 0)
    return Prepared(graph, full.features[attacked], full.labels[attacked], tpos[ei[0][sel]], pos[ei[1][sel]])


def prepare(spec: StudySpec, K: float, graph_seed: int, cache: UnitCache | None = None) -> Prepared:
    """:func:`prepare_csbm`, :func:`prepare_cba` or :func:`prepare_npz`; with a ``cache``,
    made once per (shared settings, K, graph seed) (units of the same graph share it)."""
    make = {"csbm": prepare_csbm, "cba": prepare_cba}.get(spec.kind)

    def sample() -> Prepared:
        return make(spec, K, graph_seed) if make else prepare_npz(spec, graph_seed)

    if cache is None:
        return sample()
    key = json.dumps({"shared": spec.shared(), "K": K, "seed": graph_seed}, sort_keys=True, default=str)
    return cache.get("prepared", key, sample)


__all__ = ["Prepared", "bayes_terms", "prepare", "prepare_cba", "prepare_csbm", "prepare_npz"]
