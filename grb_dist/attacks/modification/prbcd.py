"""PR-BCD: projected randomized block coordinate descent (Geisler et al., NeurIPS 2021,
"Robustness of graph neural networks at scale").

The edge flips are relaxed to weights ``p`` in [0, 1] on a random *block* of candidate
pairs (here: pairs touching a target, as GRB's threat model demands). Each step takes the
gradient of the attacker's loss on the surrogate with respect to ``p``, moves ``p`` along it,
and projects back onto ``{0 <= p <= 1, sum(p) <= budget}``. During the first
``resample_fraction`` of the steps, the block entries whose weight fell to zero are
replaced by fresh random pairs, so the search wanders over the whole candidate space with
memory linear in the block size (at most the better half of the block is kept). After
every step the loss of the top-``budget`` flips is evaluated and the best block and weights
so far are kept; they are restored when the search space freezes and at the end, where
discrete flips are sampled from ``p`` (Bernoulli draws and the top-``budget`` entries) and
the sample that hurts the surrogate most wins.

Scaling: per step, one forward and backward of the surrogate on the full graph with the
block's 2 B weighted entries and one more forward for the top-``budget`` flips (:class:`~grb_dist.attacks.shared.weighted.WeightedSurrogate`: the clean structure is
built once, the first layer's ``X W`` computed once); memory O(E + N F + B). Nothing is
N x N and nothing depends on the number of candidate pairs, which is T (N - 1) - T (T - 1) / 2.
"""

from __future__ import annotations

import numpy as np
import torch

from grb_dist.attacks.shared.flips import ModContext, ModificationAttack, candidate_pairs
from grb_dist.attacks.shared.relaxed import Block, PRBCDConfig, default_block_size, search
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Modification


class PRBCD(ModificationAttack):
    """Projected randomized block coordinate descent on the flips touching the targets."""

    Config = PRBCDConfig
    name = "prbcd"
    edge_gradients = True

    def generate(self, ctx: ModContext, gen: torch.Generator) -> Modification:
        cfg = self.config
        budget = ctx.budget.n_edge_mod
        available = candidate_pairs(ctx.n, ctx.targets.size)
        size = cfg.block_size or default_block_size(budget, available)
        if size <= budget and size < available:
            raise ConfigError(f"prbcd: block_size={size} must exceed the budget of {budget} flips")
        block = Block(ctx, ctx.sample_pairs(min(size, available), gen))
        def fresh(k: int, exclude: np.ndarray) -> np.ndarray:  # resampled pairs: touching a target
            return ctx.sample_pairs(k, gen, exclude=exclude)

        return ctx.result(search(block, cfg, budget, cfg.lr * budget / ctx.n, size, fresh, gen))
