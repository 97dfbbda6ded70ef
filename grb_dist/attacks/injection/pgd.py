"""PGD (Madry et al., 2018) on injected features: random Gaussian start, sign-gradient
ascent on the targets' cross-entropy, projection onto the feature box after every step.

``start: targets`` centres the Gaussian start on each injected node's targets' mean features
instead of 0; ``start: both`` runs the ascent from each centre (the same edges and noise) and
keeps the one whose final features reach the higher loss; ``keep_best`` returns an ascent's
iterate of the highest loss instead of its last. ``both`` with ``keep_best`` are the adaptive
cells' settings (``adaptive_defaults``). A defense that prunes edges between dissimilar nodes
(GNNGuard, GATGuard) drops every edge of an injected node that starts at 0, and a pruned edge
has no gradient, so the ascent from 0 never moves: gradient masking. From the targets' mean
the edges are kept and the gradient flows; an ascent that steps over the pruning threshold
loses its edges again, which the best iterate survives. Against other defenses the start
from 0 can be the stronger (GAT on cora-legacy), hence both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from grb_dist.attacks.injection.base import AttackConfig, InjectionAttack
from grb_dist.attacks.injection.common import AttackContext, random_edges, sign_ascent, target_loss, targets_mean
from grb_dist.core.errors import ConfigError

STARTS = ("zeros", "targets", "both")


@dataclass(frozen=True)
class PGDConfig(AttackConfig):
    """Attributes:
        random_start_std: std of the Gaussian start (in feature units; 0 = FGSM).
        start: the start's centre: ``zeros`` (GRB's), ``targets`` (each injected node's
            targets' mean features) or ``both`` (an ascent from each, the higher loss kept).
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
        """Against a defense itself, PGD ascends from 0 and from the targets' mean features and
        keeps the best iterate (module docstring)."""
        return {"start": "both", "keep_best": True}

    def optimize(self, ctx: AttackContext, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.config
        edges = random_edges(cfg.n_inject, cfg.edges_per_node, ctx.targets, ctx.num_local, gen)
        noise = (torch.randn(cfg.n_inject, ctx.num_features, generator=gen) * cfg.random_start_std).to(ctx.x)
        centres = []
        if cfg.start in ("zeros", "both"):
            centres.append(torch.zeros_like(noise))
        if cfg.start in ("targets", "both"):
            centres.append(targets_mean(edges, ctx.x, cfg.n_inject, ctx.num_local))

        def loss_fn(inj_x: torch.Tensor) -> torch.Tensor:
            return target_loss(ctx.logits(inj_x, edges), ctx.labels)

        runs = [sign_ascent(loss_fn, noise + c, steps=cfg.steps, step_size=cfg.step_size, feat_min=ctx.feat_min,
                            feat_max=ctx.feat_max, keep_best=cfg.keep_best) for c in centres]
        if len(runs) == 1:
            return runs[0], edges
        with torch.no_grad():
            losses = [float(loss_fn(r)) for r in runs]
        return runs[losses.index(max(losses))], edges  # the first of equals: from 0
