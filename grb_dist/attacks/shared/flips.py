"""The base of every attack that flips edges: the modification attacks (evasion) and the
poisoning attacks (:class:`~grb_dist.attacks.poisoning.base.PoisoningAttack` derives from
:class:`ModificationAttack`): config, budget, context and candidate pairs.

GRB's modification scenario (Zheng et al. 2021, sections 3.2 and A.4.2): at test time the attacker
flips (adds or removes) at most ``n_edge_mod`` undirected edges of the full graph, every one
touching a target node, and attacks that also change features (PGD) replace the features of
at most ``n_node_mod`` targets with values inside ``[feat_lim_min, feat_lim_max]``. The
attack is a black-box transfer attack: gradient attacks optimise against the attacker's own
surrogate and fight its clean predictions; attacks that use labels (DICE) use the
surrogate's predictions, never the true test labels. Passing the target model as the
surrogate gives the adaptive variant.

:meth:`ModificationAttack.attack` is a template method: it resolves and checks the budget
(before any work), runs the attack-specific :meth:`ModificationAttack.generate` on a
:class:`ModContext`, and audits the result
(:func:`grb_dist.attacks.audit.audit_modification`; :meth:`ModificationAttack.audited`).
Everything is sparse: candidate pairs are sampled among the pairs that touch a target, or
any two nodes for a poisoning attack (:func:`draw_pairs`), or restricted to the targets' edges, and
gradients are taken with respect to the weights of those pairs
(:class:`~grb_dist.attacks.shared.weighted.WeightedSurrogate`); nothing builds an
N x N matrix.
"""

from __future__ import annotations

import logging
import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from grb_dist.attacks.audit import audit_modification, member
from grb_dist.attacks.base import Attack, Budget, check_targets, resolve_feature_limits
from grb_dist.attacks.base import surrogate_mode
from grb_dist.attacks.shared.surrogate import SurrogateCache
from grb_dist.attacks.shared.weighted import EdgeWeightSurrogate, WeightedSurrogate, weighted_surrogate
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph, Modification, canonical_pairs, undirected_keys
from grb_dist.core.names import check_precision
from grb_dist.core.scenario import MODIFICATION, POISONING
from grb_dist.models.tensors import graph_tensors

log = logging.getLogger(__name__)

LOSSES = ("ce", "margin", "tanh_margin", "prob_margin")


@dataclass(frozen=True)
class ModificationConfig:
    """Hyper-parameters shared by every modification attack.

    Attributes:
        n_edge_mod: maximum number of flipped edges; ``None`` = ``ratio_edge_mod`` of the
            graph's undirected edges (rounded, at least 1).
        ratio_edge_mod: the edge budget as a share of the graph's edges, in (0, 1].
        n_node_mod: maximum number of targets whose features change (attacks that change
            features only); ``None`` = ``ratio_node_mod`` of the targets (at least 1).
        ratio_node_mod: that budget as a share of the targets, in (0, 1].
        feat_lim_min / feat_lim_max: feature limits; ``None`` = the graph's own min / max.
        steps: optimisation steps (ignored by attacks that do not optimise).
        seed: seed of every random choice.
        precision: accepted for symmetry with injection attacks; modification attacks
            run in the graph's dtype (``fp32``).
    """

    n_edge_mod: int | None = None
    ratio_edge_mod: float = 0.05
    n_node_mod: int | None = None
    ratio_node_mod: float = 0.05
    feat_lim_min: float | None = None
    feat_lim_max: float | None = None
    steps: int = 100
    seed: int = 0
    precision: str = "fp32"

    def __post_init__(self) -> None:
        check_precision(self.precision)
        for name in ("n_edge_mod", "n_node_mod"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or v <= 0):
                raise ConfigError(f"{name} must be a positive integer or null, got {v}")
        for name in ("ratio_edge_mod", "ratio_node_mod"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and 0 < v <= 1):
                raise ConfigError(f"{name} must be in (0, 1], got {v}")
        if self.steps < 0:
            raise ConfigError(f"steps must be >= 0, got {self.steps}")
        for name in ("feat_lim_min", "feat_lim_max"):
            v = getattr(self, name)
            if v is not None and not math.isfinite(v):
                raise ConfigError(f"{name} must be finite or null, got {v}")
        if self.feat_lim_min is not None and self.feat_lim_max is not None and self.feat_lim_min >= self.feat_lim_max:
            raise ConfigError(f"feat_lim_min ({self.feat_lim_min}) must be smaller than feat_lim_max ({self.feat_lim_max})")


def check_loss(loss: str) -> None:
    if loss not in LOSSES:
        raise ConfigError(f"unknown loss {loss!r}; choose one of: {', '.join(LOSSES)}")


def candidate_pairs(num_nodes: int, num_targets: int) -> int:
    """Number of node pairs with at least one target endpoint (no self-pairs)."""
    n, t = int(num_nodes), int(num_targets)
    return t * (n - 1) - t * (t - 1) // 2


def all_pairs(num_nodes: int) -> int:
    """Number of unordered node pairs without self-pairs, ``N (N - 1) / 2``."""
    n = int(num_nodes)
    return n * (n - 1) // 2


def draw_pairs(n: int, k: int, gen: torch.Generator, exclude: np.ndarray | None = None,
               among: np.ndarray | None = None, rounds: int = 8) -> np.ndarray:
    """Up to ``k`` distinct uniform canonical pairs ``(u < v)`` of ``n`` nodes, one end drawn
    among ``among`` (``None``: all nodes), the other among all nodes, none of the keys
    ``u * n + v`` in ``exclude``; vectorised: at most ``rounds`` rounds of draws, topped up
    after de-duplication (2 x k int64, in draw order)."""
    ends = torch.as_tensor(among) if among is not None else None
    excl = np.unique(exclude) if exclude is not None and exclude.size else np.zeros(0, np.int64)
    keys = np.zeros(0, np.int64)
    for _ in range(rounds):
        need = k - keys.size
        if need <= 0:
            break
        draw = int(need * 1.2) + 16
        a = (ends[torch.randint(0, ends.numel(), (draw,), generator=gen)] if ends is not None
             else torch.randint(0, n, (draw,), generator=gen)).numpy()
        b = torch.randint(0, n, (draw,), generator=gen).numpy()
        ok = a != b
        new = np.minimum(a[ok], b[ok]) * n + np.maximum(a[ok], b[ok])
        if excl.size:
            new = new[~np.isin(new, excl)]
        keys = np.concatenate([keys, new[~np.isin(new, keys)]])
        _, first = np.unique(keys, return_index=True)
        keys = keys[np.sort(first)]
    keys = keys[:k]
    return np.stack([keys // n, keys % n])


def sample_global_pairs(n: int, k: int, gen: torch.Generator, exclude: np.ndarray | None = None) -> np.ndarray:
    """Up to ``k`` distinct uniform canonical pairs of ``n`` nodes (any two nodes: the
    poisoning attacks' candidates), none of the keys in ``exclude`` (:func:`draw_pairs`)."""
    excl = np.unique(exclude) if exclude is not None and exclude.size else np.zeros(0, np.int64)
    return draw_pairs(n, min(int(k), all_pairs(n) - excl.size), gen, excl, rounds=16)


class ModificationAttack(Attack):
    """Base class of modification attacks.

    Subclasses set ``Config`` (a subclass of :class:`ModificationConfig`) and implement
    :meth:`generate`. Instances hold only their config.

    Class flags:
        uses_surrogate: False for attacks that never evaluate the surrogate (RND, FLIP,
            NEA, STACK); their result does not depend on it.
        edge_gradients: True for attacks that differentiate the surrogate in edge weights
            (their surrogate needs a weighted program or ``weighted_forward``, see
            :func:`~.weighted.weighted_surrogate`).
        changes_features: True for attacks that also modify node features (PGD).
        global_pairs: True for attacks that may flip any node pair (Metattack, a published
            perturbation): the budget counts every pair and the audit checks no target rule.
        scenarios: the scenarios whose table may hold the attack (every modification attack
            is a poisoning perturbation too; :mod:`grb_dist.attacks.poisoning`).
        targetable: False for attacks whose perturbation does not depend on the nodes fought
            (a published set): a poisoning job with budgets per difficulty computes one
            perturbation per difficulty of the others, and one global of these.
    """

    Config: ClassVar[type[ModificationConfig]] = ModificationConfig
    name: ClassVar[str] = MODIFICATION.name
    scenario: ClassVar[str] = MODIFICATION.name
    uses_surrogate: ClassVar[bool] = True
    edge_gradients: ClassVar[bool] = False
    changes_features: ClassVar[bool] = False
    global_pairs: ClassVar[bool] = False
    scenarios: ClassVar[tuple[str, ...]] = (MODIFICATION.name, POISONING.name)
    targetable: ClassVar[bool] = True

    @property
    def follows_gradients(self) -> bool:
        return self.edge_gradients

    @property
    def adaptive_defaults(self) -> dict[str, Any]:
        """The gradient attacks fight a defense with the probability margin (bounded per
        node) unless the job names a loss: the margin of log-probabilities, the transfer
        default, lets a defense with large or sharp logits (layer norm, attention, label
        propagation) steer the gradient towards nodes it is already sure of."""
        return {"loss": "prob_margin"} if self.edge_gradients else {}

    def edge_budget(self, graph: Graph) -> int:
        """The flips that ``ratio_edge_mod`` names on ``graph`` (rounded, at least one); an
        attack whose authors round otherwise says so here."""
        return max(1, round(self.config.ratio_edge_mod * graph.num_edges))

    def budget(self, graph: Graph, num_targets: int) -> Budget:
        """The budget of this config on ``graph`` with ``num_targets`` targets; raises
        :class:`ConfigError` when it is empty or exceeds what the graph allows."""
        cfg = self.config
        n_edge = cfg.n_edge_mod if cfg.n_edge_mod is not None else self.edge_budget(graph)
        if self.global_pairs:
            available, which = graph.num_nodes * (graph.num_nodes - 1) // 2, "node pairs"
        else:
            available, which = candidate_pairs(graph.num_nodes, num_targets), f"node pairs that touch the {num_targets:,} targets"
        if n_edge > available:
            raise ConfigError(
                f"{self.name}: a budget of {n_edge:,} flipped edges exceeds the {available:,} {which} of "
                f"{graph.name!r}; lower n_edge_mod / ratio_edge_mod"
            )
        n_node = cfg.n_node_mod if cfg.n_node_mod is not None else max(1, round(cfg.ratio_node_mod * num_targets))
        if self.changes_features and n_node > num_targets:
            raise ConfigError(
                f"{self.name}: n_node_mod={n_node} exceeds the {num_targets} targets; lower n_node_mod"
            )
        lo, hi = resolve_feature_limits(cfg, graph)  # type: ignore[arg-type]
        return Budget(lo, hi, n_edge_mod=int(n_edge), n_node_mod=int(n_node) if self.changes_features else 0)

    def check_inputs(self, graph: Graph, targets: np.ndarray) -> tuple[np.ndarray, Budget]:
        """Validate ``targets`` and resolve the budget (before any work)."""
        targets = check_targets(graph, targets)
        return targets, self.budget(graph, targets.size)

    def attack(self, graph: Graph, surrogate: torch.nn.Module, targets: np.ndarray, *,
               device: str | torch.device = "cpu", cache: SurrogateCache | None = None,
               labels: np.ndarray | None = None) -> Modification:
        """Generate an audited modification of ``graph`` against ``surrogate``.

        Args:
            graph: the clean graph (never modified).
            surrogate: a trained model ``(x, edge_index) -> logits`` (frozen during the
                attack, restored afterwards); its clean predictions are the labels fought.
            targets: distinct node ids (a difficulty's test nodes).
            device: where the computation runs.
            cache: accepted for the one attack interface; modification attacks compute
                their surrogate's clean pass on their own.
            labels: a class per node fought instead of the surrogate's clean predictions
                (see :meth:`Attack.attack`).
        """
        targets, budget = self.check_inputs(graph, targets)
        return self.audited(graph, surrogate, targets, budget, device, labels)

    def audited(self, graph: Graph, surrogate: torch.nn.Module, targets: np.ndarray, budget: Budget,
                device: str | torch.device, labels: np.ndarray | None) -> Modification:
        """:meth:`generate` on checked inputs, with the surrogate frozen; the result audited
        against the threat model and carrying the feature limits."""
        gen = torch.Generator(device="cpu").manual_seed(self.config.seed)
        with surrogate_mode(surrogate):
            ctx = ModContext(graph, surrogate, targets, budget, torch.device(device), labels)
            if self.edge_gradients:
                ctx.weighted.check()
            log.info("%s: %d flips, %d feature rows on %s (%d targets)", self.name, budget.n_edge_mod,
                     budget.n_node_mod, graph.name, targets.size)
            mod = self.generate(ctx, gen)
        audit_modification(graph, mod, n_edge_mod=budget.n_edge_mod, n_node_mod=budget.n_node_mod,
                           feat_min=budget.feat_min, feat_max=budget.feat_max,
                           targets=None if self.global_pairs else targets)
        return dataclasses.replace(mod, feat_min=budget.feat_min, feat_max=budget.feat_max)

    def generate(self, ctx: "ModContext", gen: torch.Generator) -> Modification:
        """Attack-specific work; returns a :class:`Modification` (use :meth:`ModContext.result`)."""
        raise NotImplementedError


class ModContext:
    """The graph, targets, budget and surrogate of one modification attack, with the shared
    sparse helpers: edge membership, candidate sampling, the surrogate's clean predictions
    and its edge-weighted evaluation (built on first use)."""

    def __init__(self, graph: Graph, surrogate: torch.nn.Module, targets: np.ndarray, budget: Budget,
                 device: torch.device, labels: np.ndarray | None = None):
        self.graph = graph
        self.labels = None if labels is None else np.asarray(labels, dtype=np.int64)
        self.model = surrogate
        self.targets = targets
        self.budget = budget
        self.device = device
        self.n = graph.num_nodes
        self.is_target = np.zeros(self.n, dtype=bool)
        self.is_target[targets] = True

    # ------------------------------------------------------------------ structure

    @cached_property
    def edge_keys(self) -> np.ndarray:
        """Sorted keys ``u * N + v`` (u < v) of the clean graph's undirected edges."""
        return undirected_keys(self.graph)

    def exists(self, pairs: np.ndarray) -> np.ndarray:
        """Whether each canonical pair (2 x M, u < v) is an edge of the clean graph."""
        return member(pairs[0] * self.n + pairs[1], self.edge_keys)

    @cached_property
    def target_edges(self) -> np.ndarray:
        """Canonical clean edges (2 x M, u < v) with at least one target endpoint."""
        ei = self.graph.edge_index
        m = (ei[0] < ei[1]) & (self.is_target[ei[0]] | self.is_target[ei[1]])
        return np.ascontiguousarray(ei[:, m])

    def sample_pairs(self, k: int, gen: torch.Generator, exclude: np.ndarray | None = None) -> np.ndarray:
        """Up to ``k`` distinct random canonical pairs touching a target (one end drawn
        among the targets, the other among all nodes), none of the keys in ``exclude``;
        vectorised (a few rounds of draws topped up after de-duplication)."""
        return draw_pairs(self.n, k, gen, exclude, among=self.targets)

    def fixed_candidates(self, n_pairs: int | None, gen: torch.Generator) -> np.ndarray:
        """The candidate set of FGA and PGD: every clean edge touching a target plus
        ``n_pairs`` random absent pairs touching a target (``None``: 20 x the budget, at
        least 10,000)."""
        k = n_pairs if n_pairs is not None else max(20 * self.budget.n_edge_mod, 10_000)
        extra = self.sample_pairs(k, gen, exclude=self.edge_keys) if k else np.zeros((2, 0), np.int64)
        return np.concatenate([self.target_edges, extra], axis=1)

    # ------------------------------------------------------------------ surrogate

    @cached_property
    def tensors(self):
        return graph_tensors(self.graph, self.device)

    @cached_property
    def predictions(self) -> np.ndarray:
        """The labels attacks fight, for every node: the given ``labels``, else the
        surrogate's clean predictions."""
        if self.labels is not None:
            return self.labels
        with torch.no_grad():
            g = self.tensors
            return self.model(g.x, g.edge_index).argmax(1).cpu().numpy()

    @cached_property
    def weighted(self) -> WeightedSurrogate | EdgeWeightSurrogate:
        """The surrogate's edge-weighted evaluation: its program when that is weighted,
        else its ``weighted_forward`` (:func:`~.weighted.weighted_surrogate`)."""
        g = self.tensors
        return weighted_surrogate(self.model, g.x, g.edge_index)

    @cached_property
    def target_tensor(self) -> torch.Tensor:
        return torch.as_tensor(self.targets, device=self.device)

    @cached_property
    def target_labels(self) -> torch.Tensor:
        return torch.as_tensor(self.predictions[self.targets], device=self.device)

    def loss(self, logits: torch.Tensor, kind: str = "ce") -> torch.Tensor:
        """The attacker's loss on the targets (higher = more damage)."""
        return attack_loss(logits[self.target_tensor], self.target_labels, kind)

    # ------------------------------------------------------------------ result

    def result(self, flips: np.ndarray, nodes: np.ndarray | None = None, features: np.ndarray | None = None) -> Modification:
        """A :class:`Modification` from canonical flipped pairs (2 x M): existing pairs are
        removed, absent ones added."""
        flips = canonical_pairs(flips, self.n)
        ex = self.exists(flips)
        return Modification.build(flips[:, ex], flips[:, ~ex], self.n, self.graph.num_features, nodes, features)


def attack_loss(logits: torch.Tensor, labels: torch.Tensor, kind: str) -> torch.Tensor:
    """The attacker's loss on ``logits`` of the targets against ``labels`` (mean over the
    targets; higher = more damage). ``ce``: cross-entropy; ``margin``: best other logit minus
    the own logit (the CW loss, as Xu et al. 2019's CW-type loss); ``tanh_margin``: tanh of
    the log-probability margin; ``prob_margin``: the probability margin (the last two from
    Geisler et al. 2021: bounded, so targets already misclassified stop pulling)."""
    if kind == "ce":
        return F.cross_entropy(logits, labels)
    if kind == "margin":
        scores = logits
    else:
        scores = F.log_softmax(logits, dim=1) if kind == "tanh_margin" else F.softmax(logits, dim=1)
    own = scores.gather(1, labels[:, None]).squeeze(1)
    other = scores.scatter(1, labels[:, None], float("-inf")).max(1).values
    margin = other - own
    return torch.tanh(margin).mean() if kind == "tanh_margin" else margin.mean()


def project_budget(p: torch.Tensor, budget: float, eps: float = 1e-7, iters: int = 60) -> torch.Tensor:
    """Euclidean projection of ``p`` onto ``{0 <= p <= 1, sum(p) <= budget}`` (a bisection
    on the shift ``mu`` of ``clamp(p - mu, 0, 1)``)."""
    clipped = p.clamp(0, 1)
    if clipped.sum() <= budget:
        return clipped
    lo, hi = (p.min() - 1).item(), p.max().item()
    for _ in range(iters):
        mu = (lo + hi) / 2
        if (p - mu).clamp(0, 1).sum() > budget:
            lo = mu
        else:
            hi = mu
        if hi - lo < eps:
            break
    return (p - hi).clamp(0, 1)


def sample_flips(p: torch.Tensor, budget: int, gen: torch.Generator, n_samples: int, score) -> torch.Tensor:
    """Discrete flips from relaxed weights ``p`` (Xu et al. 2019; Geisler et al. 2021): the
    top-``budget`` entries and ``n_samples`` Bernoulli draws (those over budget dropped);
    the mask with the highest ``score(mask)`` wins."""
    best_mask, best = None, -math.inf
    k = min(budget, int((p > 0).sum()))
    top = torch.zeros_like(p, dtype=torch.bool)
    if k:
        top[torch.topk(p, k).indices] = True
    candidates = [top]
    for _ in range(n_samples):
        m = torch.rand(p.shape, generator=gen).to(p.device) < p
        if int(m.sum()) <= budget:
            candidates.append(m)
    for m in candidates:
        s = float(score(m))
        if s > best:
            best, best_mask = s, m
    return best_mask


__all__ = [
    "Budget", "LOSSES", "ModContext", "ModificationAttack", "ModificationConfig", "attack_loss",
    "all_pairs", "candidate_pairs", "check_loss", "draw_pairs", "project_budget", "sample_flips", "sample_global_pairs",
]
