"""GR-BCD: greedy randomized block coordinate descent (Geisler et al., NeurIPS 2021).

The budget is spread evenly over ``steps`` rounds. Each round draws a fresh random block of
candidate pairs touching a target (pairs already flipped excluded), takes the gradient of
the attacker's loss on the surrogate with respect to the block's flip weights at zero (with
every earlier flip applied), and flips the block entries with the largest positive
gradient. Flips are final: the attack never undoes one.

Scaling: per round one forward and backward of the surrogate on the full graph plus the
block's and the earlier flips' weighted entries (:class:`~grb_dist.attacks.shared.weighted.WeightedSurrogate`);
memory O(E + N F + B). Nothing is N x N.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from grb_dist.attacks.base import input_grad
from grb_dist.attacks.shared.flips import (
    ModContext, ModificationAttack, ModificationConfig, candidate_pairs, check_loss,
)
from grb_dist.attacks.shared.relaxed import default_block_size
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Modification


@dataclass(frozen=True)
class GRBCDConfig(ModificationConfig):
    """Attributes:
        steps: greedy rounds (the budget is spread evenly over them; at most the budget).
        block_size: candidate pairs drawn per round; ``None`` = max(20 x budget, 100,000),
            at most the number of candidate pairs.
        loss: ``margin`` (default), ``tanh_margin``, ``prob_margin`` or ``ce``.
    """

    steps: int = 20
    block_size: int | None = None
    loss: str = "margin"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_loss(self.loss)
        if self.block_size is not None and self.block_size < 1:
            raise ConfigError(f"block_size must be >= 1 or null, got {self.block_size}")


def greedy_flips(ctx: ModContext, gen: torch.Generator, *, rounds: int, block_size: int, loss: str,
                 fixed_block: np.ndarray | None = None) -> np.ndarray:
    """Flip the budget in ``rounds`` greedy rounds by the gradient of ``loss`` w.r.t. the
    flip weights of a block (a fresh random one per round, or ``fixed_block``'s pairs not
    yet flipped); returns the flipped canonical pairs (2 x M)."""
    budget = ctx.budget.n_edge_mod
    rounds = max(1, min(rounds, budget))
    dtype = ctx.tensors.x.dtype
    flipped = np.zeros((2, 0), dtype=np.int64)
    for r in range(rounds):
        quota = budget * (r + 1) // rounds - flipped.shape[1]
        if quota <= 0:
            continue
        done = flipped[0] * ctx.n + flipped[1]
        if fixed_block is None:
            block = ctx.sample_pairs(block_size, gen, exclude=done)
        else:
            block = fixed_block[:, ~np.isin(fixed_block[0] * ctx.n + fixed_block[1], done)]
        if not block.shape[1]:
            break
        pairs = np.concatenate([flipped, block], axis=1)
        sign = torch.as_tensor(np.where(ctx.exists(pairs), -1.0, 1.0), dtype=dtype, device=ctx.device)
        p = torch.zeros(block.shape[1], dtype=dtype, device=ctx.device, requires_grad=True)
        weights = torch.cat([torch.ones(flipped.shape[1], dtype=dtype, device=ctx.device), p])
        value = ctx.loss(ctx.weighted.logits(torch.as_tensor(pairs, device=ctx.device), sign * weights), loss)
        grad = input_grad(value, p)
        k = min(quota, int((grad > 0).sum()))
        if k == 0:
            continue
        top = torch.topk(grad, k).indices.cpu().numpy()
        flipped = np.concatenate([flipped, block[:, top]], axis=1)
    return flipped


class GRBCD(ModificationAttack):
    """Greedy randomized block coordinate descent on the flips touching the targets."""

    Config = GRBCDConfig
    name = "grbcd"
    edge_gradients = True

    def generate(self, ctx: ModContext, gen: torch.Generator) -> Modification:
        cfg = self.config
        available = candidate_pairs(ctx.n, ctx.targets.size)
        size = cfg.block_size or default_block_size(ctx.budget.n_edge_mod, available)
        flips = greedy_flips(ctx, gen, rounds=max(1, cfg.steps), block_size=min(size, available), loss=cfg.loss)
        return ctx.result(flips)
