"""The base of targeted attacks: each target attacked alone, within a budget of its own.

A targeted attack (the ``targeted`` scenario) gets a batch of targets and returns a
:class:`~grb_dist.core.targeted.TargetedModification`: per target, the direct flips (pairs
with the target as one end, and the target's own features) that target's attack made, as
if no other target were attacked. Each target's budget is ``n_flips + floor(degree_multiple *
degree)`` flips (:func:`~grb_dist.core.targeted.per_target_budgets`; Nettack's experiments
use the degree plus two). The labels fought are the surrogate's clean predictions (the
attacker has no test labels), or those given.

A subclass implements :meth:`TargetedAttack.attack_one` (one target's partners and feature
row), or :meth:`TargetedAttack.generate` for work shared across the batch; the result is
audited (:func:`~grb_dist.attacks.audit.audit_targeted`) before it leaves.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
import torch

from grb_dist.attacks.audit import audit_targeted
from grb_dist.attacks.base import Attack, Budget, check_targets, resolve_feature_limits, surrogate_mode
from grb_dist.core.bounds import check_int
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph
from grb_dist.core.scenario import TARGETED, TARGETED_POISONING
from grb_dist.core.targeted import TargetedModification, per_target_budgets
from grb_dist.core.names import check_precision
from grb_dist.models.tensors import graph_tensors

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TargetedConfig:
    """Settings shared by every targeted attack.

    Attributes:
        n_flips: flips per target (with ``degree_multiple``: added to it).
        degree_multiple: flips per unit of the target's degree (rounded down).
        feat_lim_min / feat_lim_max: feature limits of changed features; ``None`` = the
            graph's own.
        steps: optimisation steps (ignored by attacks that do not optimise).
        seed: seed of every random choice.
        precision: accepted for symmetry with the other scenarios' attacks (``fp32``).
    """

    n_flips: int = 1
    degree_multiple: float = 0.0
    feat_lim_min: float | None = None
    feat_lim_max: float | None = None
    steps: int = 0
    seed: int = 0
    precision: str = "fp32"

    def __post_init__(self) -> None:
        check_precision(self.precision)
        check_int(self.n_flips, "n_flips", 0, 1 << 20)
        v = self.degree_multiple
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= 1000:
            raise ConfigError(f"degree_multiple must be a number in [0, 1000], got {v!r}")
        if self.n_flips == 0 and v == 0:
            raise ConfigError("a targeted budget of no flips: set n_flips >= 1 or degree_multiple > 0")
        check_int(self.steps, "steps", 0, 1 << 20)


def clean_adjacency(graph: Graph) -> sp.csr_matrix:
    """``graph``'s adjacency, CSR, 0/1, symmetric (as its edge list: both directions)."""
    n, ei = graph.num_nodes, graph.edge_index
    a = sp.csr_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(n, n))
    a.sum_duplicates()
    a.data[:] = 1.0
    return a


class TargetContext:
    """One batch's graph and surrogate, with what targeted attacks share: the CSR adjacency,
    the degrees, the labels fought (built on first use)."""

    def __init__(self, graph: Graph, surrogate: torch.nn.Module, device: torch.device,
                 labels: np.ndarray | None = None):
        self.graph, self.model, self.device = graph, surrogate, device
        self.n = graph.num_nodes
        self._labels = None if labels is None else np.asarray(labels, dtype=np.int64)
        #: what an attack computes once per batch (a name of its own per attack)
        self.memo: dict[str, Any] = {}

    @cached_property
    def adj(self) -> sp.csr_matrix:
        """The clean adjacency (:func:`clean_adjacency`)."""
        return clean_adjacency(self.graph)

    def neighbours(self, v: int) -> np.ndarray:
        a = self.adj
        return a.indices[a.indptr[v]:a.indptr[v + 1]].astype(np.int64)

    @cached_property
    def labels(self) -> np.ndarray:
        """The class fought at every node: the given labels, else the surrogate's clean
        predictions."""
        if self._labels is not None:
            return self._labels
        with torch.no_grad():
            g = graph_tensors(self.graph, self.device)
            return self.model(g.x, g.edge_index).argmax(1).cpu().numpy().astype(np.int64)


class TargetedAttack(Attack):
    """Base class of targeted attacks (module docstring).

    Class flags:
        uses_surrogate: False for attacks whose flips do not depend on the surrogate (RND).
        changes_features: True for attacks that may change the target's features.
    """

    Config: ClassVar[type] = TargetedConfig
    name: ClassVar[str] = TARGETED.name
    scenario: ClassVar[str] = TARGETED.name
    scenarios: ClassVar[tuple[str, ...]] = (TARGETED.name, TARGETED_POISONING.name)
    uses_surrogate: ClassVar[bool] = True
    changes_features: ClassVar[bool] = False

    def budgets(self, graph: Graph, targets: np.ndarray) -> np.ndarray:
        """Each target's flips, at most the ``N - 1`` pairs it has."""
        cfg = self.config
        return np.minimum(per_target_budgets(graph, targets, cfg.n_flips, cfg.degree_multiple), graph.num_nodes - 1)

    def check_inputs(self, graph: Graph, targets: np.ndarray) -> tuple[np.ndarray, Budget]:
        """Validate ``targets``; the :class:`Budget` holds the largest target's flips."""
        targets = np.unique(check_targets(graph, targets))
        lo, hi = resolve_feature_limits(self.config, graph)
        return targets, Budget(lo, hi, n_edge_mod=int(self.budgets(graph, targets).max()),
                               n_node_mod=1 if self.changes_features else 0)

    def attack(self, graph: Graph, surrogate: torch.nn.Module, targets: np.ndarray, *,
               device: str | torch.device = "cpu", cache: Any = None,
               labels: np.ndarray | None = None) -> TargetedModification:
        """Each target of ``targets`` attacked alone on ``graph`` (audited; ``cache`` is
        accepted for the one attack interface)."""
        targets, budget = self.check_inputs(graph, targets)
        budgets = self.budgets(graph, targets)
        rng = np.random.default_rng(int(self.config.seed) & (2**63 - 1))
        with surrogate_mode(surrogate):
            ctx = TargetContext(graph, surrogate, torch.device(device), labels)
            log.info("%s: %d targets, %d flips in all, on %s", self.name, targets.size, int(budgets.sum()), graph.name)
            mod = self.generate(ctx, targets, budgets, rng)
        audit_targeted(graph, mod, budgets, feat_min=budget.feat_min, feat_max=budget.feat_max,
                       features=self.changes_features)
        return dataclasses.replace(mod, feat_min=budget.feat_min, feat_max=budget.feat_max)

    def generate(self, ctx: TargetContext, targets: np.ndarray, budgets: np.ndarray,
                 rng: np.random.Generator) -> TargetedModification:
        """Every target's :meth:`attack_one`, gathered (pairs flipped: an edge removed, any
        other pair added)."""
        owners, partners, rows, feats = [], [], [], []
        for t, b in zip(targets.tolist(), budgets.tolist()):
            flipped, row = self.attack_one(ctx, t, b, rng)
            owners.append(np.full(flipped.size, t, np.int64))
            partners.append(np.asarray(flipped, np.int64))
            if row is not None:
                rows.append(t)
                feats.append(row)
        return gathered(ctx, targets, np.concatenate(owners or [np.zeros(0, np.int64)]),
                        np.concatenate(partners or [np.zeros(0, np.int64)]), rows, feats)

    def attack_one(self, ctx: TargetContext, target: int, budget: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
        """The partners of ``target``'s flipped pairs (distinct, never the target) and its new
        feature row (``None``: unchanged)."""
        raise NotImplementedError


def gathered(ctx: TargetContext, targets: np.ndarray, owners: np.ndarray, partners: np.ndarray,
             rows: list[int], feats: list[np.ndarray], sources: np.ndarray | None = None) -> TargetedModification:
    """A :class:`TargetedModification` of flipped pairs ``(owners[i], partners[i])`` (direct),
    or ``(sources[i], partners[i])`` for target ``owners[i]`` (an influencer attack): those
    that are edges of the clean graph removed, the others added."""
    a = ctx.adj
    first = owners if sources is None else np.asarray(sources, np.int64)
    exists = np.asarray(a[first, partners]).ravel() > 0 if first.size else np.zeros(0, bool)
    pairs = np.stack([first, partners])
    d = ctx.graph.num_features
    by = (None, None) if sources is None else (owners[exists], owners[~exists])
    return TargetedModification.build(targets, pairs[:, exists], pairs[:, ~exists], ctx.n, d,
                                      np.asarray(rows, np.int64) if rows else None,
                                      np.stack(feats) if feats else None, removed_by=by[0], added_by=by[1])


__all__ = ["TargetContext", "TargetedAttack", "TargetedConfig", "clean_adjacency", "gathered"]
