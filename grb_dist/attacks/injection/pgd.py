"""PGD (Madry et al., 2018) on injected features: random Gaussian start, sign-gradient
ascent on the targets' cross-entropy, projection onto the feature box after every step."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from grb_dist.attacks.injection.base import AttackConfig, InjectionAttack
from grb_dist.attacks.injection.common import AttackContext, random_edges, sign_ascent, target_loss
from grb_dist.core.errors import ConfigError


@dataclass(frozen=True)
class PGDConfig(AttackConfig):
    """Attributes: random_start_std: std of the Gaussian start (in feature units; 0 = FGSM)."""

    random_start_std: float = 0.01

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.random_start_std >= 0:
            raise ConfigError(f"random_start_std must be >= 0, got {self.random_start_std}")


class PGD(InjectionAttack):
    """Projected gradient ascent: random edges, ``X0 ~ N(0, std^2)`` projected onto the box."""

    Config = PGDConfig
    name = "pgd"

    def optimize(self, ctx: AttackContext, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.config
        edges = random_edges(cfg.n_inject, cfg.edges_per_node, ctx.targets, ctx.num_local, gen)
        x0 = (torch.randn(cfg.n_inject, ctx.num_features, generator=gen) * cfg.random_start_std).to(ctx.x)

        def loss_fn(inj_x: torch.Tensor) -> torch.Tensor:
            return target_loss(ctx.logits(inj_x, edges), ctx.labels)

        feats = sign_ascent(
            loss_fn, x0, steps=cfg.steps, step_size=cfg.step_size, feat_min=ctx.feat_min, feat_max=ctx.feat_max
        )
        return feats, edges
