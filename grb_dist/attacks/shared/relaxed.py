"""The relaxed block search of PR-BCD (Geisler et al., NeurIPS 2021), shared by the attacks
that relax edge flips to weights: modification's PR-BCD, PGD and GR-BCD, and poisoning's
meta-PR-BCD. :class:`Block` holds a block of candidate pairs with flip weights ``p``;
:func:`search` runs PR-BCD's projected steps on it with resampling (the method is described
in :mod:`grb_dist.attacks.modification.prbcd`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from grb_dist.attacks.base import input_grad
from grb_dist.attacks.shared.flips import ModContext, ModificationConfig, check_loss, project_budget, sample_flips
from grb_dist.core.errors import ConfigError

#: Weights below this count as zero (the entry is resampled, never flipped).
EPS = 1e-7


@dataclass(frozen=True)
class PRBCDConfig(ModificationConfig):
    """Attributes:
        block_size: candidate pairs in the block; ``None`` = max(20 x budget, 100,000),
            at most the number of candidate pairs. Must exceed the budget.
        lr: step-size factor; the step is ``lr * budget / N`` times the gradient, decayed by
            ``1 / sqrt(t + 1)`` after the resampling phase (Geisler et al.).
        resample_fraction: share of the steps during which zero-weight entries are resampled.
        loss: ``margin`` (default: the strongest on cora-legacy in ``bench/attacks/modification.py``),
            ``tanh_margin``, ``prob_margin`` (Geisler et al.) or ``ce``.
        n_samples: Bernoulli samples drawn from the final weights.
    """

    steps: int = 100
    block_size: int | None = None
    lr: float = 1000.0
    resample_fraction: float = 0.8
    loss: str = "margin"
    n_samples: int = 20

    def __post_init__(self) -> None:
        super().__post_init__()
        check_loss(self.loss)
        if self.block_size is not None and self.block_size < 1:
            raise ConfigError(f"block_size must be >= 1 or null, got {self.block_size}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ConfigError(f"lr must be a positive finite number, got {self.lr}")
        if not 0 <= self.resample_fraction <= 1:
            raise ConfigError(f"resample_fraction must be in [0, 1], got {self.resample_fraction}")
        if self.n_samples < 0:
            raise ConfigError(f"n_samples must be >= 0, got {self.n_samples}")


class Block:
    """A block of candidate pairs with relaxed flip weights ``p`` (the relaxation of
    PR-BCD and PGD), evaluated on the surrogate through ``ctx.weighted``."""

    def __init__(self, ctx: ModContext, pairs: np.ndarray, p: torch.Tensor | None = None):
        self.ctx = ctx
        self.set(pairs, p if p is not None else torch.full((pairs.shape[1],), EPS, dtype=ctx.tensors.x.dtype))

    def set(self, pairs: np.ndarray, p: torch.Tensor) -> None:
        self.pairs = pairs
        self.pairs_t = torch.as_tensor(pairs, device=self.ctx.device)
        # +p adds an absent pair, -p removes an existing edge
        self.sign = torch.as_tensor(np.where(self.ctx.exists(pairs), -1.0, 1.0), dtype=p.dtype, device=self.ctx.device)
        self.p = p.to(self.ctx.device)

    @property
    def keys(self) -> np.ndarray:
        return self.pairs[0] * self.ctx.n + self.pairs[1]

    def loss(self, p: torch.Tensor, kind: str, x: torch.Tensor | None = None) -> torch.Tensor:
        return self.ctx.loss(self.ctx.weighted.logits(self.pairs_t, self.sign * p, x), kind)

    def gradient(self, kind: str, x: torch.Tensor | None = None) -> tuple[float, torch.Tensor]:
        p = self.p.detach().requires_grad_(True)
        loss = self.loss(p, kind, x)
        grad = input_grad(loss, p)
        return float(loss.detach()), grad

    def top_loss(self, budget: int, kind: str, x: torch.Tensor | None = None) -> float:
        """The loss with the ``budget`` largest weights flipped (no gradient)."""
        mask = torch.zeros_like(self.p)
        k = min(budget, int((self.p > EPS).sum()))
        if k:
            mask[torch.topk(self.p, k).indices] = 1
        with torch.no_grad():
            return float(self.loss(mask, kind, x))

    def discrete(self, gen: torch.Generator, budget: int, n_samples: int, kind: str,
                 x: torch.Tensor | None = None) -> np.ndarray:
        """The best sampled flips (canonical pairs) of the current weights."""
        def score(mask: torch.Tensor) -> float:
            with torch.no_grad():
                return float(self.loss(mask.to(self.p.dtype), kind, x))

        p = torch.where(self.p > EPS, self.p, torch.zeros_like(self.p)).detach()
        mask = sample_flips(p, budget, gen, n_samples, score)
        return self.pairs[:, mask.cpu().numpy()] if mask is not None else self.pairs[:, :0]


def default_block_size(budget: int, available: int) -> int:
    return int(min(available, max(20 * budget, 100_000)))


def search(block: Block, cfg: PRBCDConfig, budget: int, step: float, size: int,
           fresh: Callable[[int, np.ndarray], np.ndarray], gen: torch.Generator) -> np.ndarray:
    """PR-BCD's search on ``block`` (module docstring), shared with the poisoning variant:
    ``cfg.steps`` projected gradient steps of size ``step``, decayed by ``1 / sqrt(t + 1)``
    after the resampling phase; the block resampled (:func:`resample`, new pairs from
    ``fresh(k, exclude_keys)``) during the first ``resample_fraction`` of the steps; the best
    block (``size`` pairs) and weights so far, judged by the loss of their top-budget flips, restored when the
    search space freezes and at the end; then the discrete flips (canonical pairs) sampled."""
    resample_steps = int(cfg.resample_fraction * cfg.steps)
    best_score, best = -math.inf, (block.pairs, block.p)
    for t in range(cfg.steps):
        _, grad = block.gradient(cfg.loss)
        lr = step / math.sqrt(max(0, t - resample_steps) + 1)
        block.p = project_budget(block.p + lr * grad, budget)
        score = block.top_loss(budget, cfg.loss)
        if score > best_score:
            best_score, best = score, (block.pairs, block.p.clone())
        if t < resample_steps - 1:
            resample(block, size, fresh)
        elif t == resample_steps - 1:
            block.set(*best)
    if cfg.steps:
        block.set(*best)
    return block.discrete(gen, budget, cfg.n_samples, cfg.loss)


def resample(block: Block, size: int, fresh: Callable[[int, np.ndarray], np.ndarray]) -> None:
    """Keep the block's non-zero entries, at most its better half, and fill the rest with
    ``fresh`` pairs (weight EPS): at least half of the block is new every step."""
    ctx = block.ctx
    order = torch.argsort(block.p, descending=True)
    n_keep = min(int((block.p > EPS).sum()), block.p.numel() // 2)
    keep = np.zeros(block.p.numel(), dtype=bool)
    keep[order[:n_keep].cpu().numpy()] = True
    kept = block.pairs[:, keep]
    new = fresh(size - kept.shape[1], kept[0] * ctx.n + kept[1])
    p = torch.cat([block.p[torch.as_tensor(keep, device=block.p.device)],
                   torch.full((new.shape[1],), EPS, dtype=block.p.dtype, device=block.p.device)])
    block.set(np.concatenate([kept, new], axis=1), p)


__all__ = ["EPS", "Block", "PRBCDConfig", "default_block_size", "resample", "search"]
