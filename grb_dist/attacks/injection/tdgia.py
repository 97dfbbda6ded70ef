"""TDGIA (Zou et al., KDD 2021): topological defective graph injection.

Nodes are injected in sequential rounds of ``sequential_step * n_inject`` nodes. Each round
scores every target by how weak it is,

    s = 0.9 (p + 2) / deg + 0.1 (p + 2) / (sqrt(deg) sqrt(edges_per_node)),

with ``p`` the surrogate's current probability of the target's clean predicted label and
``deg`` its current degree + 1 (injected edges of earlier rounds included); the top
``n_round * edges_per_node`` targets are dealt to the round's injected nodes with classes
balanced (the greedy "least-used class first" interleaving of the original), each target
once per round. When there are fewer targets than edge slots, the dealing continues with
fresh random orderings, never giving one injected node the same target twice.

Features use the smooth reparameterisation ``X = mid + half * sin(Z)`` with
``mid = (feat_max + feat_min) / 2`` and ``half = (feat_max - feat_min) / 2``, so both limits
are honoured (the original used ``feat_max * sin(Z)`` and ignored ``feat_min``). ``Z`` of all
nodes injected so far is optimised with Adam (lr ``step_size``) for ``steps`` steps per
round on ``mean(relu(smooth - CE_i)^2)``, i.e. each target's cross-entropy is pushed up to
``smooth`` and no further.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from grb_dist.attacks.injection.base import AttackConfig, InjectionAttack
from grb_dist.attacks.base import input_grad
from grb_dist.attacks.injection.common import AttackContext, chunked_edges
from grb_dist.core.errors import ConfigError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TDGIAConfig(AttackConfig):
    """Attributes:
    sequential_step: fraction of ``n_inject`` injected per round (0 < s <= 1; GRB: 0.2).
    smooth: the cross-entropy level of the smooth loss (original: 4).
    score_weight: weight of the ``1/deg`` term in the score (original: 0.9; the other
        term gets ``1 - score_weight``).
    """

    sequential_step: float = 0.2
    smooth: float = 4.0
    score_weight: float = 0.9

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 < self.sequential_step <= 1.0:
            raise ConfigError(f"sequential_step must be in (0, 1], got {self.sequential_step}")
        if not self.smooth > 0:
            raise ConfigError(f"smooth must be > 0, got {self.smooth}")
        if not 0.0 <= self.score_weight <= 1.0:
            raise ConfigError(f"score_weight must be in [0, 1], got {self.score_weight}")


def round_sizes(n_inject: int, sequential_step: float) -> list[int]:
    """Injected nodes per round: ``max(1, int(n_inject * step))`` until the budget is used."""
    per = max(1, int(n_inject * sequential_step))
    sizes, done = [], 0
    while done < n_inject:
        sizes.append(min(per, n_inject - done))
        done += sizes[-1]
    return sizes


def class_balanced_order(sel: torch.Tensor, classes: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Order the selected target positions ``sel`` so that classes interleave in proportion.

    Vectorised form of the original greedy (shuffle, group by class, repeatedly take from
    the class with the smallest used fraction): item ``r`` of class ``c`` (of size ``n_c``)
    comes at key ``r / n_c``, ties broken by class id.
    """
    perm = torch.randperm(sel.numel(), generator=gen).to(sel.device)
    sel, classes = sel[perm], classes[perm]
    by_class = torch.sort(classes, stable=True).indices
    sel, classes = sel[by_class], classes[by_class]
    counts = torch.bincount(classes)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(sel.numel(), device=sel.device) - starts[classes]
    key = rank.double() / counts[classes].double()
    # a stable sort of the class-grouped list by key breaks ties by class id
    return sel[torch.sort(key, stable=True).indices]


class TDGIA(InjectionAttack):
    """Sequential topological injection with smooth sine-parameterised features."""

    Config = TDGIAConfig
    name = "tdgia"

    def optimize(self, ctx: AttackContext, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.config
        k = cfg.edges_per_node
        t = ctx.targets.numel()
        dev = ctx.device
        mid = (ctx.feat_max + ctx.feat_min) / 2.0
        half = (ctx.feat_max - ctx.feat_min) / 2.0
        z = torch.empty(0, ctx.num_features, dtype=ctx.x.dtype, device=dev)
        edges = torch.empty(2, 0, dtype=torch.long, device=dev)
        extra_deg = torch.zeros(t, dtype=torch.long, device=dev)
        target_pos = torch.full((ctx.num_local,), -1, dtype=torch.long, device=dev)
        target_pos[ctx.targets] = torch.arange(t, device=dev)

        def features(zz: torch.Tensor) -> torch.Tensor:
            return (mid + half * torch.sin(zz)).clamp(ctx.feat_min, ctx.feat_max)

        rounds = round_sizes(cfg.n_inject, cfg.sequential_step)
        for r, n_r in enumerate(rounds):
            with torch.no_grad():
                probs = F.softmax(ctx.logits(features(z), edges), dim=1)
            p = probs.gather(1, ctx.labels[:, None]).squeeze(1)
            deg = (ctx.degrees + extra_deg + 1).to(probs.dtype)
            w = cfg.score_weight
            score = w * (p + 2) / deg + (1 - w) * (p + 2) / (deg.sqrt() * math.sqrt(k))
            n_sel = min(n_r * k, t)
            sel = score.topk(n_sel).indices
            order = class_balanced_order(sel, ctx.labels[sel], gen)
            pos = chunked_edges(order, n_r, k, t, gen)
            first = ctx.num_local + z.shape[0]
            src = torch.arange(n_r, device=dev).repeat_interleave(k) + first
            new_edges = torch.stack([src, ctx.targets[pos.reshape(-1)]])
            edges = torch.cat([edges, new_edges], 1)
            extra_deg += torch.bincount(pos.reshape(-1), minlength=t)
            z_new = torch.randn(n_r, ctx.num_features, generator=gen).to(ctx.x)
            z = torch.cat([z.detach(), z_new]).requires_grad_(True)
            opt = torch.optim.Adam([z], lr=cfg.step_size)
            for _ in range(cfg.steps):
                ce = F.cross_entropy(ctx.logits(features(z), edges), ctx.labels, reduction="none")
                loss = F.relu(cfg.smooth - ce).pow(2).mean()
                z.grad = input_grad(loss, z)
                opt.step()
            log.debug("tdgia round %d/%d: %d nodes, loss %.4f", r + 1, len(rounds), n_r, float(loss.detach()) if cfg.steps else float("nan"))
        return features(z.detach()), edges
