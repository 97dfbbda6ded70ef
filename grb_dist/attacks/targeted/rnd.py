"""RND, targeted: random flips at each target, the baseline of Nettack's experiments."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grb_dist.attacks.targeted.base import TargetContext, TargetedAttack, TargetedConfig


@dataclass(frozen=True)
class RNDConfig(TargetedConfig):
    """RND has no options of its own."""


class RND(TargetedAttack):
    """Each target's budget of partners drawn uniformly (without replacement) among the other
    nodes, each pair flipped: an edge removed, any other pair added (so on a sparse graph
    almost every flip adds an edge). O(budget) per target; the surrogate is not read."""

    Config = RNDConfig
    name = "rnd"
    uses_surrogate = False

    def attack_one(self, ctx: TargetContext, target: int, budget: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, None]:
        drawn = rng.choice(ctx.n - 1, size=budget, replace=False)
        return drawn + (drawn >= target), None  # skip the target itself


__all__ = ["RND", "RNDConfig"]
