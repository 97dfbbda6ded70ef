"""RND: random modification, the baseline of GRB's modification scenario."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from grb_dist.attacks.shared.flips import ModContext, ModificationAttack, ModificationConfig
from grb_dist.core.graph import Modification


@dataclass(frozen=True)
class RNDConfig(ModificationConfig):
    """RND has no options of its own (``steps`` is ignored)."""


class RND(ModificationAttack):
    """Random flips: ``n_edge_mod`` distinct node pairs drawn uniformly among the pairs that
    touch a target (one end a uniform target, the other a uniform node; drawn with the
    seeded generator), each flipped: a pair that is an edge is removed, any other is added.

    On a sparse graph almost every uniform pair is absent, so RND mostly adds edges, as a
    uniform random flip does.

    Scales as O(budget) draws plus a sorted-key membership test (O(budget log E)); no
    N x N matrix, no surrogate evaluation.
    """

    Config = RNDConfig
    name = "rnd"
    uses_surrogate = False

    def generate(self, ctx: ModContext, gen: torch.Generator) -> Modification:
        return ctx.result(ctx.sample_pairs(ctx.budget.n_edge_mod, gen))


__all__ = ["RND", "RNDConfig"]
