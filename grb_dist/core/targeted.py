"""Targeted (local) perturbations: one set of flips per target node, and how targets are chosen.

A targeted attack (Nettack, Zügner et al. 2018) attacks one node at a time: each target
gets its own perturbation, within its own budget, and is scored alone, on the graph with
that perturbation and no other. :class:`TargetedModification` holds the perturbations of
many targets at once (a sweep task attacks a batch of targets); :meth:`~TargetedModification.of`
gives one target's as an ordinary :class:`~grb_dist.core.graph.Modification`.

Its flips are *direct*: every flipped pair has its target as one end, and only the target's
features change. The pairs are stored oriented, target first (``removed[0]`` and
``added[0]`` are the targets, ``nodes`` the targets whose features change), which is how a
pair is told to its target when two targets are neighbours and both flip their edge.

:class:`TargetSelection` is how a job's targeted section chooses its targets per difficulty
(:func:`select_targets`): drawn from the difficulty's test nodes above a degree, or listed.
Plain NumPy: the torch-free floors (the plan, the store) read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping

import numpy as np

from grb_dist.core.bounds import check_int
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph, Modification

#: How targets are chosen: ``random`` (drawn from the difficulty's test nodes) or ``nodes``
#: (listed ids; each difficulty attacks those of its test nodes).
SELECTIONS = ("random", "nodes")
#: The most targets a difficulty may have (their perturbations travel in one task's result).
MAX_TARGETS = 1 << 20


@dataclass(frozen=True)
class TargetSelection:
    """The targets of a targeted scenario, per difficulty (a job's ``targeted.targets``).

    Attributes:
        select: ``random``: ``n`` test nodes of the difficulty with degree at least
            ``min_degree``, drawn with the job's seed (all of them when fewer qualify);
            ``nodes``: the listed ``nodes`` that are test nodes of the difficulty.
        n: targets per difficulty (``random``).
        min_degree: the least degree of a drawn target (Nettack's experiments: nodes of
            degree above a threshold; 1 keeps isolated nodes out).
        nodes: the listed targets (``nodes``).
        seed: the seed of the draw (the job's seed: every attack, surrogate and repeat
            fights the same targets, and the clean rows are scored on them too).
    """

    select: Literal["random", "nodes"] = "random"
    n: int = 40
    min_degree: int = 1
    nodes: tuple[int, ...] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        if self.select not in SELECTIONS:
            raise ConfigError(f"targets.select must be one of {', '.join(SELECTIONS)}, got {self.select!r}")
        check_int(self.n, "targets.n", 1, MAX_TARGETS)
        check_int(self.min_degree, "targets.min_degree", 0, 1 << 31)
        nodes = tuple(self.nodes or ())
        for v in nodes:
            check_int(v, "targets.nodes entries", 0, 1 << 62)
        if len(set(nodes)) != len(nodes):
            raise ConfigError("targets.nodes lists a node twice")
        if self.select == "nodes" and not nodes:
            raise ConfigError("targets.select is 'nodes' but targets.nodes is empty; list node ids")
        if self.select != "nodes" and nodes:
            raise ConfigError("targets.nodes is given but targets.select is not 'nodes'; set select: nodes")
        if len(nodes) > MAX_TARGETS:
            raise ConfigError(f"targets.nodes lists {len(nodes):,} nodes; at most {MAX_TARGETS:,}")
        object.__setattr__(self, "nodes", tuple(sorted(int(v) for v in nodes)))

    def to_dict(self) -> dict[str, Any]:
        """The selection as its cells' ids hash it."""
        out: dict[str, Any] = {"select": self.select, "seed": int(self.seed)}
        if self.select == "nodes":
            out["nodes"] = list(self.nodes)
        else:
            out.update(n=int(self.n), min_degree=int(self.min_degree))
        return out


def target_selection(section: Mapping[str, Any] | None, seed: int) -> TargetSelection:
    """The :class:`TargetSelection` of a job's ``targets`` section with the job's ``seed``."""
    section = dict(section or {})
    unknown = [k for k in section if k not in ("select", "n", "min_degree", "nodes")]
    if unknown:
        raise ConfigError(f"targets: unknown key {unknown[0]!r}; valid keys: select, n, min_degree, nodes")
    nodes = section.pop("nodes", ())
    if not isinstance(nodes, (list, tuple)):
        raise ConfigError(f"targets.nodes must be a list of node ids, got {type(nodes).__name__}")
    return TargetSelection(**section, nodes=tuple(nodes), seed=int(seed))


def select_targets(graph: Graph, difficulty: str, selection: TargetSelection) -> np.ndarray:
    """The sorted targets of ``difficulty`` on ``graph`` (module docstring); every caller
    (the attack, the clean rows' scorer, the plan) gets the same nodes."""
    test = np.asarray(graph.targets(difficulty), dtype=np.int64)
    if selection.select == "nodes":
        listed = np.asarray(selection.nodes, dtype=np.int64)
        return np.sort(listed[np.isin(listed, test)])
    eligible = np.sort(test[graph.degrees()[test] >= selection.min_degree])
    if eligible.size <= selection.n:
        return eligible
    # one stream per difficulty, so that adding a difficulty to a job changes no other's targets
    stream = sum(ord(c) for c in difficulty)
    gen = np.random.default_rng([int(selection.seed) & (2**63 - 1), stream])
    return np.sort(gen.choice(eligible, size=selection.n, replace=False))


def check_listed(graph: Graph, difficulties: tuple[str, ...], selection: TargetSelection) -> None:
    """A ``nodes`` selection whose node is a test node of none of ``difficulties`` raises
    (it would silently not be attacked), naming one."""
    if selection.select != "nodes":
        return
    nodes = np.asarray(selection.nodes, dtype=np.int64)
    if nodes.max(initial=-1) >= graph.num_nodes:
        raise ConfigError(f"targets.nodes: node {int(nodes.max())} is not a node of {graph.name!r} "
                          f"({graph.num_nodes:,} nodes)")
    test = np.unique(np.concatenate([graph.targets(d) for d in difficulties]))
    off = nodes[~np.isin(nodes, test)]
    if off.size:
        raise ConfigError(f"targets.nodes: node {int(off[0])} is a test node of none of the job's difficulties "
                          f"({', '.join(difficulties)}); list test nodes, or add the difficulty holding it")


@dataclass(frozen=True)
class TargetedModification:
    """Per-target direct perturbations of a graph with N nodes (module docstring).

    Attributes:
        targets: int64 T, the sorted distinct targets (a target without flips keeps its row:
            it is scored on the clean graph).
        removed, added: int64 2 x R / 2 x A, the flipped pairs, target first; grouped by
            target, ascending.
        nodes: int64 K, the targets whose features change (sorted), ``features`` their rows.
        num_original: N.
        feat_min, feat_max: the feature limits the attack was held to.
    """

    targets: np.ndarray
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

    def flips_per_target(self) -> np.ndarray:
        """Edge flips of each target (int64 T)."""
        pos = np.searchsorted(self.targets, np.concatenate([self.removed[0], self.added[0]]))
        return np.bincount(pos, minlength=self.targets.size).astype(np.int64)

    def _rows(self, name: str, target: int) -> slice:
        """The rows of ``target`` in ``removed``, ``added`` or ``nodes`` (grouped by target)."""
        owners = self.nodes if name == "nodes" else getattr(self, name)[0]
        return slice(int(np.searchsorted(owners, target, "left")), int(np.searchsorted(owners, target, "right")))

    def partners(self, target: int) -> tuple[np.ndarray, np.ndarray]:
        """The other ends of ``target``'s removed and added pairs."""
        return self.removed[1, self._rows("removed", target)], self.added[1, self._rows("added", target)]

    def feature_row(self, target: int) -> np.ndarray | None:
        """``target``'s new features, or ``None`` when they do not change."""
        rows = self._rows("nodes", target)
        return self.features[rows][0] if rows.stop > rows.start else None

    def of(self, target: int) -> Modification:
        """``target``'s perturbation alone, as a :class:`Modification` (canonical pairs)."""
        gone, new = self.partners(target)
        t = np.full(gone.size, target, np.int64), np.full(new.size, target, np.int64)
        row = self.feature_row(target)
        nodes = np.array([target], np.int64) if row is not None else None
        feats = row[None, :] if row is not None else None
        return Modification.build(np.stack([t[0], gone]), np.stack([t[1], new]), self.num_original,
                                  self.features.shape[1], nodes, feats)

    @staticmethod
    def build(targets: np.ndarray, removed: np.ndarray, added: np.ndarray, num_original: int, num_features: int,
              nodes: np.ndarray | None = None, features: np.ndarray | None = None,
              feat_min: float | None = None, feat_max: float | None = None) -> "TargetedModification":
        """Grouped by target (stable within a target); ``nodes`` / ``features`` default to none."""
        def grouped(pairs: np.ndarray) -> np.ndarray:
            pairs = np.asarray(pairs, dtype=np.int64).reshape(2, -1)
            return np.ascontiguousarray(pairs[:, np.argsort(pairs[0], kind="stable")])

        nodes = np.zeros(0, np.int64) if nodes is None else np.asarray(nodes, np.int64)
        feats = (np.zeros((0, num_features), np.float32) if features is None
                 else np.asarray(features, np.float32).reshape(nodes.size, num_features))
        order = np.argsort(nodes, kind="stable")
        return TargetedModification(np.unique(np.asarray(targets, np.int64)), grouped(removed), grouped(added),
                                    np.ascontiguousarray(nodes[order]), np.ascontiguousarray(feats[order]),
                                    int(num_original), feat_min, feat_max)


def per_target_budgets(graph: Graph, targets: np.ndarray, n_flips: int, degree_multiple: float) -> np.ndarray:
    """Each target's budget: ``n_flips + floor(degree_multiple * degree)`` (Nettack's
    experiments: the degree plus 2 is ``n_flips: 2, degree_multiple: 1``)."""
    deg = graph.degrees()[np.asarray(targets, np.int64)]
    return (int(n_flips) + np.floor(float(degree_multiple) * deg)).astype(np.int64)


__all__ = ["MAX_TARGETS", "SELECTIONS", "TargetSelection", "TargetedModification", "check_listed",
           "per_target_budgets", "select_targets", "target_selection"]
