"""PGD (Madry et al., 2018) on injected features: random Gaussian start, sign-gradient
ascent on the targets' cross-entropy, projection onto the feature box after every step.

``start: targets`` centres the Gaussian start on each injected node's targets' mean features
instead of 0, and ``keep_best`` returns the iterate of the highest loss instead of the last:
together the adaptive cells' settings (``adaptive_defaults``). A defense that prunes edges
between dissimilar nodes (GNNGuard, GATGuard) drops every edge of an injected node that
starts at 0, and a pruned edge has no gradient, so the ascent from 0 never moves: gradient
masking. From the targets' mean the edges are kept and the gradient flows; an ascent that
steps over the pruning threshold loses its edges again, which the best iterate survives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from grb_dist.attacks.injection.base import AttackConfig, InjectionAttack
from grb_dist.attacks.injection.common import AttackContext, random_edges, sign_ascent, target_loss, targets_mean
from grb_dist.core.errors import ConfigError

STARTS = ("zeros", "targets")


@dataclass(frozen=True)
class PGDConfig(AttackConfig):
    """Attributes:
        random_start_std: std of the Gaussian start (in feature units; 0 = FGSM).
        start: the start's centre: ``zeros`` (GRB's) or ``targets`` (each injected node's
            targets' mean features).
        keep_best: return the iterate of the highest loss, not the last.
    """

    random_start_std: float = 0.01
    start: str = "zeros"
    keep_best: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.random_start_std >= 0:
            raise ConfigError(f"random_start_std must be >= 0, got {self.random_start_std}")
        if self.start not in STARTS:
            raise ConfigError(f"pgd start must be one of {', '.join(STARTS)}, got {self.start!r}")
        if not isinstance(self.keep_best, bool):
            raise ConfigError(f"pgd keep_best must be true or false, got {self.keep_best!r}")


class PGD(InjectionAttack):
    """Projected gradient ascent: random edges, ``X0 ~ N(centre, std^2)`` projected onto the box."""

    Config = PGDConfig
    name = "pgd"

    @property
    def adaptive_defaults(self) -> dict[str, Any]:
        """Against a defense itself, PGD starts from the targets' mean features and keeps its
        best iterate (module docstring)."""
        return {"start": "targets", "keep_best": True}

    def optimize(self, ctx: AttackContext, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.config
        edges = random_edges(cfg.n_inject, cfg.edges_per_node, ctx.targets, ctx.num_local, gen)
        x0 = (torch.randn(cfg.n_inject, ctx.num_features, generator=gen) * cfg.random_start_std).to(ctx.x)
        if cfg.start == "targets":
            x0 = x0 + targets_mean(edges, ctx.x, cfg.n_inject, ctx.num_local)

        def loss_fn(inj_x: torch.Tensor) -> torch.Tensor:
            return target_loss(ctx.logits(inj_x, edges), ctx.labels)

        feats = sign_ascent(loss_fn, x0, steps=cfg.steps, step_size=cfg.step_size, feat_min=ctx.feat_min,
                            feat_max=ctx.feat_max, keep_best=cfg.keep_best)
        return feats, edges
