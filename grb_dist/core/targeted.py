"""Targeted (local) perturbations: one set of flips per target node, and how targets are chosen.

A targeted attack (Nettack, Zügner et al. 2018) attacks one node at a time: each target
gets its own perturbation, within its own budget, and is scored alone, on the graph with
that perturbation and no other. :class:`TargetedModification` holds the perturbations of
many targets at once (a sweep task attacks a batch of targets); :meth:`~TargetedModification.of`
gives one target's as an ordinary :class:`~grb_dist.core.graph.Modification`.

Its flips are *direct* by default: every flipped pair has its target as one end, and only
the target's features change. The pairs are stored oriented, target first (``removed[0]``
and ``added[0]`` are the targets, ``nodes`` the targets whose features change), which is how
a pair is told to its target when two targets are neighbours and both flip their edge. An
*influencer* attack (Nettack's indirect one) flips pairs at the target's neighbours and never
at the target: each pair's target is then held beside it (``removed_by``, ``added_by``).

:class:`TargetSelection` is how a job's targeted section chooses its targets per difficulty
(:func:`select_targets`): drawn from the difficulty's test nodes above a degree, listed, or
by Nettack's protocol (:func:`by_margins`: the correctly classified nodes of highest and
lowest margin and random others, the margins of a model trained on the clean graph). That
last one is chosen once, where the sweep is prepared, and *pinned*: the chosen nodes travel
in the selection (:meth:`TargetSelection.pinned`), so that every task fights the same nodes
and a model's rounding on another machine cannot change them.
Plain NumPy: the torch-free floors (the plan, the store) read it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal, Mapping

import numpy as np

from grb_dist.core.bounds import check_int
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph, Modification

#: How targets are chosen: ``random`` (drawn from the difficulty's test nodes), ``nodes``
#: (listed ids; each difficulty attacks those of its test nodes) or ``nettack`` (Nettack's
#: protocol: by a clean model's margins, :func:`by_margins`).
SELECTIONS = ("random", "nodes", "nettack")
#: The keys of a job's ``targets`` section, per selection.
SELECTION_KEYS = {"random": ("select", "n", "min_degree"), "nodes": ("select", "nodes"),
                  "nettack": ("select", "n", "min_degree", "high", "low")}
#: The most targets a difficulty may have (their perturbations travel in one task's result).
MAX_TARGETS = 1 << 20


@dataclass(frozen=True)
class TargetSelection:
    """The targets of a targeted scenario, per difficulty (a job's ``targeted.targets``).

    Attributes:
        select: ``random``: ``n`` test nodes of the difficulty with degree at least
            ``min_degree``, drawn with the job's seed (all of them when fewer qualify);
            ``nodes``: the listed ``nodes`` that are test nodes of the difficulty;
            ``nettack``: Nettack's protocol (:func:`by_margins`), ``n`` targets of which the
            ``high`` and ``low`` margins.
        n: targets per difficulty (``random``, ``nettack``).
        min_degree: the least degree of a drawn target (Nettack's experiments: nodes of
            degree above a threshold; 1 keeps isolated nodes out).
        nodes: the listed targets (``nodes``).
        seed: the seed of the draw (the job's seed: every attack, surrogate and repeat
            fights the same targets, and the clean rows are scored on them too).
        high, low: ``nettack``: the correctly classified nodes of highest and of lowest
            margin taken first (the paper: 10 and 10 of 40).
        chosen: ``nettack``, once pinned: ``(difficulty, targets)`` pairs (:meth:`pinned`).
    """

    select: Literal["random", "nodes", "nettack"] = "random"
    n: int = 40
    min_degree: int = 1
    nodes: tuple[int, ...] = ()
    seed: int = 0
    high: int = 10
    low: int = 10
    chosen: tuple[tuple[str, tuple[int, ...]], ...] = ()

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
        check_int(self.high, "targets.high", 0, MAX_TARGETS)
        check_int(self.low, "targets.low", 0, MAX_TARGETS)
        if self.select == "nettack" and self.high + self.low > self.n:
            raise ConfigError(f"targets.high + targets.low ({self.high} + {self.low}) exceed targets.n ({self.n}); "
                              "raise n or lower them")
        if self.chosen and self.select != "nettack":
            raise ConfigError("only a nettack selection is pinned to chosen nodes")
        object.__setattr__(self, "chosen", tuple(sorted((str(d), tuple(int(v) for v in vs)) for d, vs in self.chosen)))

    @property
    def needs_margins(self) -> bool:
        """Whether the targets are chosen by a model's margins and are not pinned yet."""
        return self.select == "nettack" and not self.chosen

    def pinned(self, chosen: Mapping[str, np.ndarray]) -> "TargetSelection":
        """This selection with its targets per difficulty fixed (``chosen``)."""
        return replace(self, chosen=tuple((d, tuple(int(v) for v in np.sort(vs))) for d, vs in chosen.items()))

    def to_dict(self) -> dict[str, Any]:
        """The selection as its cells' ids hash it (a pinned one: with its chosen nodes, so
        that other nodes make other cells)."""
        out: dict[str, Any] = {"select": self.select, "seed": int(self.seed)}
        if self.select == "nodes":
            out["nodes"] = list(self.nodes)
        else:
            out.update(n=int(self.n), min_degree=int(self.min_degree))
        if self.select == "nettack":
            out.update(high=int(self.high), low=int(self.low), chosen={d: list(vs) for d, vs in self.chosen})
        return out


def target_selection(section: Mapping[str, Any] | None, seed: int) -> TargetSelection:
    """The :class:`TargetSelection` of a job's ``targets`` section with the job's ``seed``."""
    section = dict(section or {})
    select = section.get("select", "random")
    keys = SELECTION_KEYS.get(select) if isinstance(select, str) else None
    if keys is None:
        raise ConfigError(f"targets.select must be one of {', '.join(SELECTIONS)}, got {select!r}")
    unknown = [k for k in section if k not in keys]
    if unknown:
        raise ConfigError(f"targets: unknown key {unknown[0]!r} for select: {select}; valid keys: {', '.join(keys)}")
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
    if selection.select == "nettack":
        chosen = dict(selection.chosen)
        if difficulty not in chosen:
            raise ConfigError(f"targets.select nettack: no targets chosen on {difficulty} yet (they are chosen by a "
                              "model's margins where the sweep is prepared: grb_dist.sweep.session.prepare)")
        return np.asarray(chosen[difficulty], dtype=np.int64)
    eligible = np.sort(test[graph.degrees()[test] >= selection.min_degree])
    if eligible.size <= selection.n:
        return eligible
    return np.sort(_stream(selection, difficulty).choice(eligible, size=selection.n, replace=False))


def _stream(selection: TargetSelection, difficulty: str) -> np.random.Generator:
    """The draw's generator: one stream per difficulty, so that adding a difficulty to a job
    changes no other's targets."""
    return np.random.default_rng([int(selection.seed) & (2**63 - 1), sum(ord(c) for c in difficulty)])


def by_margins(graph: Graph, difficulty: str, selection: TargetSelection, margins: np.ndarray) -> np.ndarray:
    """Nettack's protocol (Zügner et al. 2018, section 5): of the difficulty's test nodes of
    degree at least ``min_degree`` that the model classifies correctly (``margins``: per node,
    the true label's logit minus the best other's; positive: correct), the ``high`` of the
    highest margin (clearly correct), the ``low`` of the lowest (barely correct), and
    ``n - high - low`` drawn from the others with the job's seed; all of them when fewer
    qualify. Ties are broken by node id. Sorted."""
    test = np.asarray(graph.targets(difficulty), dtype=np.int64)
    margins = np.asarray(margins, dtype=np.float64)
    if margins.shape != (graph.num_nodes,):
        raise ValueError(f"margins: one per node ({graph.num_nodes}) expected, got shape {margins.shape}")
    eligible = np.sort(test[(graph.degrees()[test] >= selection.min_degree) & (margins[test] > 0)])
    if eligible.size <= selection.n:
        return eligible
    order = eligible[np.lexsort((eligible, -margins[eligible]))]  # highest margin first, then node id
    high, rest = order[:selection.high], order[selection.high:]
    low = rest[len(rest) - selection.low:] if selection.low else rest[:0]
    middle = np.sort(rest[:len(rest) - selection.low])
    drawn = _stream(selection, difficulty).choice(middle, size=selection.n - selection.high - selection.low,
                                                  replace=False)
    return np.sort(np.concatenate([high, low, drawn]))


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
        removed, added: int64 2 x R / 2 x A, the flipped pairs, grouped by their target,
            ascending; direct: target first.
        nodes: int64 K, the targets whose features change (sorted), ``features`` their rows.
        num_original: N.
        feat_min, feat_max: the feature limits the attack was held to.
        removed_by, added_by: int64 R / A, each pair's target (an influencer attack); ``None``
            for a direct one (a pair's target is its first end).
    """

    targets: np.ndarray
    removed: np.ndarray
    added: np.ndarray
    nodes: np.ndarray
    features: np.ndarray
    num_original: int
    feat_min: float | None = None
    feat_max: float | None = None
    removed_by: np.ndarray | None = None
    added_by: np.ndarray | None = None

    @property
    def direct(self) -> bool:
        """Whether every pair has its target as its first end (module docstring)."""
        return self.removed_by is None

    def owners(self, name: str) -> np.ndarray:
        """The target of each pair of ``removed`` or ``added``."""
        by = getattr(self, f"{name}_by")
        return getattr(self, name)[0] if by is None else by

    @property
    def n_edge_flips(self) -> int:
        return int(self.removed.shape[1] + self.added.shape[1])

    @property
    def n_nodes_modified(self) -> int:
        return int(self.nodes.shape[0])

    def flips_per_target(self) -> np.ndarray:
        """Edge flips of each target (int64 T)."""
        pos = np.searchsorted(self.targets, np.concatenate([self.owners("removed"), self.owners("added")]))
        return np.bincount(pos, minlength=self.targets.size).astype(np.int64)

    def _rows(self, name: str, target: int) -> slice:
        """The rows of ``target`` in ``removed``, ``added`` or ``nodes`` (grouped by target)."""
        owners = self.nodes if name == "nodes" else self.owners(name)
        return slice(int(np.searchsorted(owners, target, "left")), int(np.searchsorted(owners, target, "right")))

    def pairs_of(self, target: int) -> tuple[np.ndarray, np.ndarray]:
        """``target``'s removed and added pairs (2 x r, 2 x a; direct: target first)."""
        return self.removed[:, self._rows("removed", target)], self.added[:, self._rows("added", target)]

    def partners(self, target: int) -> tuple[np.ndarray, np.ndarray]:
        """The other ends of ``target``'s removed and added pairs (a direct perturbation)."""
        if not self.direct:
            raise ValueError("partners: an influencer perturbation's pairs do not start at their target (pairs_of)")
        return self.removed[1, self._rows("removed", target)], self.added[1, self._rows("added", target)]

    def feature_row(self, target: int) -> np.ndarray | None:
        """``target``'s new features, or ``None`` when they do not change."""
        rows = self._rows("nodes", target)
        return self.features[rows][0] if rows.stop > rows.start else None

    def of(self, target: int) -> Modification:
        """``target``'s perturbation alone, as a :class:`Modification` (canonical pairs)."""
        gone, new = self.pairs_of(target)
        row = self.feature_row(target)
        nodes = np.array([target], np.int64) if row is not None else None
        feats = row[None, :] if row is not None else None
        return Modification.build(gone, new, self.num_original, self.features.shape[1], nodes, feats)

    @staticmethod
    def build(targets: np.ndarray, removed: np.ndarray, added: np.ndarray, num_original: int, num_features: int,
              nodes: np.ndarray | None = None, features: np.ndarray | None = None,
              feat_min: float | None = None, feat_max: float | None = None,
              removed_by: np.ndarray | None = None, added_by: np.ndarray | None = None) -> "TargetedModification":
        """Grouped by target (stable within a target); ``nodes`` / ``features`` default to
        none; ``removed_by`` / ``added_by`` (both or neither): each pair's target, for an
        influencer attack."""
        if (removed_by is None) != (added_by is None):
            raise ValueError("removed_by and added_by go together (an influencer perturbation) or not at all")

        def grouped(pairs: np.ndarray, by: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
            pairs = np.asarray(pairs, dtype=np.int64).reshape(2, -1)
            owner = pairs[0] if by is None else np.asarray(by, dtype=np.int64).reshape(-1)
            if owner.size != pairs.shape[1]:
                raise ValueError(f"one target per pair expected: {owner.size} for {pairs.shape[1]} pairs")
            order = np.argsort(owner, kind="stable")
            return (np.ascontiguousarray(pairs[:, order]),
                    None if by is None else np.ascontiguousarray(owner[order]))

        (removed, removed_by), (added, added_by) = grouped(removed, removed_by), grouped(added, added_by)
        nodes = np.zeros(0, np.int64) if nodes is None else np.asarray(nodes, np.int64)
        feats = (np.zeros((0, num_features), np.float32) if features is None
                 else np.asarray(features, np.float32).reshape(nodes.size, num_features))
        order = np.argsort(nodes, kind="stable")
        return TargetedModification(np.unique(np.asarray(targets, np.int64)), removed, added,
                                    np.ascontiguousarray(nodes[order]), np.ascontiguousarray(feats[order]),
                                    int(num_original), feat_min, feat_max, removed_by, added_by)


def per_target_budgets(graph: Graph, targets: np.ndarray, n_flips: int, degree_multiple: float) -> np.ndarray:
    """Each target's budget: ``n_flips + floor(degree_multiple * degree)`` (Nettack's
    experiments: the degree plus 2 is ``n_flips: 2, degree_multiple: 1``)."""
    deg = graph.degrees()[np.asarray(targets, np.int64)]
    return (int(n_flips) + np.floor(float(degree_multiple) * deg)).astype(np.int64)


__all__ = ["MAX_TARGETS", "SELECTIONS", "SELECTION_KEYS", "TargetSelection", "TargetedModification", "by_margins", "check_listed",
           "per_target_budgets", "select_targets", "target_selection"]
