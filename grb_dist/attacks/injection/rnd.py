"""RND: random injection. Each injected node links to ``edges_per_node`` distinct targets
drawn uniformly; features are Gaussian noise clipped to the limits. No optimisation."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from grb_dist.attacks.injection.base import AttackConfig, InjectionAttack
from grb_dist.attacks.injection.common import AttackContext, random_edges


@dataclass(frozen=True)
class RNDConfig(AttackConfig):
    """RND ignores ``steps`` and ``step_size``."""


class RND(InjectionAttack):
    """Random injection: features ``N(0, s^2)`` with ``s = max(|feat_min|, |feat_max|)``
    (GRB: ``N(0, feat_max)``), clipped to ``[feat_min, feat_max]``."""

    Config = RNDConfig
    name = "rnd"
    optimizes = False

    def optimize(self, ctx: AttackContext, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.config
        edges = random_edges(cfg.n_inject, cfg.edges_per_node, ctx.targets, ctx.num_local, gen)
        scale = max(abs(ctx.feat_min), abs(ctx.feat_max))
        feats = torch.randn(cfg.n_inject, ctx.num_features, generator=gen) * scale
        return feats.clamp_(ctx.feat_min, ctx.feat_max).to(ctx.device), edges
