"""The base class and config of injection attacks.

An injection attack adds ``n_inject`` nodes to a graph, each with at most
``edges_per_node`` edges to target nodes, and features inside ``[feat_min, feat_max]``
(GRB threat model, Zheng et al. 2021, section 3.2). Attacks are black-box transfer attacks:
they optimise against a surrogate model the attacker trained itself, using the surrogate's
own clean predictions on the targets as labels. Passing the target model as the surrogate
gives the adaptive (white-box) variant.

:class:`InjectionAttack.attack` is a template method: it validates the inputs (before any
work), restricts the computation to the targets' receptive field, runs the attack-specific
:meth:`InjectionAttack.optimize` on local tensors, maps the result back to global node ids
and audits it (:func:`grb_dist.attacks.audit.audit_injection`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from grb_dist.attacks.audit import audit_injection
from grb_dist.attacks.base import Attack, Budget, check_targets, resolve_feature_limits, surrogate_mode
from grb_dist.attacks.injection.common import AttackContext, SurrogateCache, build_context
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph, Injection
from grb_dist.core.names import check_precision
from grb_dist.core.scenario import INJECTION
from grb_dist.models.precision import precision_mode

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AttackConfig:
    """Hyper-parameters shared by every injection attack.

    Attributes:
        n_inject: number of injected nodes (> 0).
        edges_per_node: maximum number of edges of each injected node (> 0).
        feat_lim_min: lower feature limit; ``None`` = the graph's (normalised) feature minimum.
        feat_lim_max: upper feature limit; ``None`` = the graph's (normalised) feature maximum.
        steps: optimisation steps (per sequential round for TDGIA; ignored by RND).
        step_size: step size (sign step for FGSM/PGD, Adam learning rate for SPEIT/TDGIA).
        seed: seed of every random choice of the attack.
        precision: ``fp32`` (default), ``tf32`` (GPU only) or ``bf16`` for the surrogate's
            dense products during the optimisation (:mod:`grb_dist.models.precision`).
    """

    n_inject: int = 60
    edges_per_node: int = 20
    feat_lim_min: float | None = None
    feat_lim_max: float | None = None
    steps: int = 1000
    step_size: float = 0.01
    seed: int = 0
    precision: str = "fp32"

    def __post_init__(self) -> None:
        check_precision(self.precision)
        if self.n_inject <= 0:
            raise ConfigError(f"n_inject must be > 0, got {self.n_inject}")
        if self.edges_per_node <= 0:
            raise ConfigError(f"edges_per_node must be > 0, got {self.edges_per_node}")
        if self.steps < 0:
            raise ConfigError(f"steps must be >= 0, got {self.steps}")
        if not (self.step_size > 0 and math.isfinite(self.step_size)):
            raise ConfigError(f"step_size must be a positive finite number, got {self.step_size}")
        for name in ("feat_lim_min", "feat_lim_max"):
            v = getattr(self, name)
            if v is not None and not math.isfinite(v):
                raise ConfigError(f"{name} must be finite or null, got {v}")
        if (
            self.feat_lim_min is not None
            and self.feat_lim_max is not None
            and self.feat_lim_min >= self.feat_lim_max
        ):
            raise ConfigError(
                f"feat_lim_min ({self.feat_lim_min}) must be smaller than feat_lim_max ({self.feat_lim_max})"
            )


class InjectionAttack(Attack):
    """Base class of injection attacks.

    Subclasses set ``Config`` (their typed config, a subclass of :class:`AttackConfig`) and
    implement :meth:`optimize`. Instances hold only their config: nothing is kept on
    ``self`` between calls, so an instance can be reused and shared.

    Class flags:
        optimizes: False for attacks that never call the surrogate's gradients (RND).
        injected_links: True when the attack may link injected nodes to each other.
    """

    Config: ClassVar[type[AttackConfig]] = AttackConfig
    name: ClassVar[str] = INJECTION.name
    scenario: ClassVar[str] = INJECTION.name
    optimizes: ClassVar[bool] = True
    injected_links: ClassVar[bool] = False

    @property
    def follows_gradients(self) -> bool:
        return self.optimizes


    def check_inputs(self, graph: Graph, targets: np.ndarray) -> tuple[np.ndarray, Budget]:
        """Validate ``targets`` and the budget against ``graph``; return ``(targets, budget)``.

        Raises :class:`ConfigError` on an empty or out-of-range target set, on repeated
        targets, when ``edges_per_node`` exceeds the number of targets, or on implausible
        feature limits.
        """
        targets = check_targets(graph, targets)
        if self.config.edges_per_node > targets.size:
            raise ConfigError(
                f"edges_per_node={self.config.edges_per_node} exceeds the {targets.size} available "
                "targets (edges must go to distinct targets); lower edges_per_node or use more targets"
            )
        lo, hi = resolve_feature_limits(self.config, graph)
        return targets, Budget(lo, hi, n_inject=self.config.n_inject, edges_per_node=self.config.edges_per_node)

    def attack(
        self,
        graph: Graph,
        surrogate: torch.nn.Module,
        targets: np.ndarray,
        *,
        device: str | torch.device = "cpu",
        incremental: bool = True,
        cache: SurrogateCache | None = None,
        labels: np.ndarray | None = None,
    ) -> Injection:
        """Generate an audited injection against ``surrogate`` on ``graph``.

        Args:
            graph: the clean graph (never modified).
            surrogate: a trained model ``(x, edge_index) -> logits``; its clean predictions
                on ``targets`` are the labels the attack fights. Put in eval mode during the
                attack and restored afterwards; its parameters receive no gradients.
            targets: int array (T,), distinct node ids to attack (a difficulty's test nodes).
            device: where the computation runs (``"cpu"``, ``"cuda"``).
            incremental: evaluate the surrogate incrementally (only the rows the injection
                reaches, :mod:`grb_dist.attacks.shared.incremental`) when its class
                declares its program; ``False`` runs the ordinary forward on the whole
                perturbed graph every step. Both give the same injection.
            cache: a :class:`SurrogateCache` shared by several attacks on the same graph,
                surrogate and targets: the surrogate's clean pass is then computed once.
            labels: a class per node of ``graph`` the attack fights on the targets instead
                of the surrogate's clean predictions (see :meth:`Attack.attack`).

        Returns:
            an :class:`Injection` with ``features`` (n_inject x D float32) and ``edges``
            (2 x M int64, row 0 injected ids in [N, N + n_inject)) that passed the audit.
        """
        targets, budget = self.check_inputs(graph, targets)
        lo, hi = budget.feat_min, budget.feat_max
        cfg = self.config
        gen = torch.Generator(device="cpu").manual_seed(cfg.seed)
        with surrogate_mode(surrogate):
            ctx = build_context(graph, surrogate, targets, lo, hi, device, incremental=incremental, cache=cache)
            if labels is not None:
                ctx.labels = torch.as_tensor(np.asarray(labels)[targets], dtype=torch.long, device=ctx.device)
            log.info(
                "%s: %d injected x %d edges on %s (%d targets, %d/%d nodes in the receptive field)",
                self.name, cfg.n_inject, cfg.edges_per_node, graph.name, targets.size,
                ctx.num_local, graph.num_nodes,
            )
            with precision_mode(cfg.precision, ctx.device):
                feats, local_edges = self.optimize(ctx, gen)
        injection = ctx.to_injection(feats, local_edges)
        audit_injection(
            graph, injection, n_inject=cfg.n_inject, edges_per_node=cfg.edges_per_node,
            feat_min=lo, feat_max=hi, targets=targets if not self.injected_links else None,
        )
        return dataclasses.replace(injection, feat_min=lo, feat_max=hi)

    def optimize(self, ctx: AttackContext, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Attack-specific work on the local (receptive-field) graph.

        Returns ``(features, edges)``: features n_inject x D float32 on ``ctx.device``;
        edges 2 x M int64 in local ids (row 0 in ``[ctx.num_local, ctx.num_local + n_inject)``).
        """
        raise NotImplementedError
