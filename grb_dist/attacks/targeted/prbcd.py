"""PR-BCD, targeted: the local attack of Geisler et al. (NeurIPS 2021, "Robustness of Graph
Neural Networks at Scale"), each target attacked alone on the clean graph.

For a target ``t`` fought for class ``y`` (the surrogate's clean prediction) with a budget of
``b`` flips, the flips of the pairs ``(t, v)`` are relaxed to weights ``p`` in [0, 1] on a
random *block* of ``block_size`` partners ``v`` (all ``N - 1`` when fewer; at least ``2 b``).
The search is the global PR-BCD's (:func:`grb_dist.attacks.shared.relaxed.search`, the
method described in :mod:`grb_dist.attacks.modification.prbcd`), on one target's loss:
``steps`` steps of projected gradient ascent on the loss at ``t`` (``loss``, default the
margin), each followed by the projection onto ``{0 <= p <= 1, sum(p) <= b}``
(:func:`~grb_dist.attacks.shared.flips.project_budget`); during the first
``resample_fraction`` of the steps the block entries whose weight fell to zero, and at
least the lower half of the block, are replaced by fresh random partners; the step is
``lr * b * max(1, sqrt(N / block))`` (the authors' local attack), decayed by
``1 / sqrt(t + 1)`` after the resampling phase; the block and weights whose top-``b`` flips
hurt most so far are restored when the block freezes and at the end. Then discrete flips
are sampled (:func:`~grb_dist.attacks.shared.flips.sample_flips`: the top-``b`` entries and
``n_samples`` Bernoulli draws within the budget, the one of the highest loss wins). When
even the winner does not raise the loss at ``t`` above the clean graph's, the target gets
no flips (as the authors' local attack).

Departures from the authors' local PR-BCD (``LocalPRBCD`` in their code): the best block is
judged by the loss of its top-``b`` flips (the global PR-BCD here) rather than by the margin
of the relaxed graph; the defaults are the global PR-BCD's here (``steps`` 100,
``resample_fraction`` 0.8, ``n_samples`` 20; the authors: 150 epochs of which the last 50
without resampling, 20 samples); zero weights are ``1e-7`` (the authors: ``1e-14``); the
labels are the surrogate's predictions; only direct flips. The step size follows the
authors' local attack, not the global PR-BCD's ``lr * b / N``: one target's gradient does
not shrink with ``N`` as a loss averaged over many targets does.

Cost per step, as the authors' local attack and the global PR-BCD: one forward and backward
of the surrogate on the whole graph with the block's 2 x ``block_size`` weighted entries,
and one more forward for the top-``b`` flips (the weighted surrogate built once per batch:
:func:`~grb_dist.attacks.shared.weighted.weighted_surrogate`), O(E F + block); nothing is
N x N. A target's receptive field does not bound it: every block partner with a non-zero
weight brings its own neighbourhood in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from grb_dist.attacks.audit import member
from grb_dist.attacks.shared.flips import attack_loss, check_loss, draw_pairs
from grb_dist.attacks.shared.relaxed import Block, search
from grb_dist.attacks.shared.weighted import weighted_surrogate
from grb_dist.attacks.targeted.base import TargetContext, TargetedAttack, TargetedConfig
from grb_dist.core.bounds import check_int, check_positive_number
from grb_dist.core.graph import undirected_keys
from grb_dist.models.tensors import graph_tensors


@dataclass(frozen=True)
class PRBCDConfig(TargetedConfig):
    """Attributes:
        steps: projected gradient steps per target.
        block_size: partners in a target's block (at most ``N - 1``, at least twice the
            target's budget).
        lr: step-size factor: the step is ``lr * budget * max(1, sqrt(N / block))``.
        resample_fraction: share of the steps during which the block is resampled.
        loss: ``margin`` (default), ``ce``, ``tanh_margin`` or ``prob_margin``.
        n_samples: Bernoulli samples drawn from the final weights.
    """

    steps: int = 100
    block_size: int = 10_000
    lr: float = 1.0
    resample_fraction: float = 0.8
    loss: str = "margin"
    n_samples: int = 20

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int(self.steps, "prbcd steps", 1, 1 << 20)
        check_int(self.block_size, "prbcd block_size", 1, 1 << 40)
        check_positive_number(self.lr, "prbcd lr")
        check_positive_number(self.resample_fraction, "prbcd resample_fraction", allow_zero=True, maximum=1.0)
        check_loss(self.loss)
        check_int(self.n_samples, "prbcd n_samples", 0, 1 << 20)


class OneTarget:
    """What :class:`~grb_dist.attacks.shared.relaxed.Block` reads of a
    :class:`~grb_dist.attacks.shared.flips.ModContext`, for one target: the tensors, the
    clean edges, the batch's weighted surrogate and the loss at the target."""

    def __init__(self, shared: dict, target: int, label: int):
        self.tensors, self.weighted, self.edge_keys = shared["tensors"], shared["weighted"], shared["keys"]
        self.n, self.device = shared["n"], shared["device"]
        self.target = target
        self._t = torch.tensor([target], device=self.device)
        self._y = torch.tensor([label], device=self.device)

    def exists(self, pairs: np.ndarray) -> np.ndarray:
        """Whether each canonical pair (2 x M) is an edge of the clean graph."""
        return member(pairs[0] * self.n + pairs[1], self.edge_keys)

    def loss(self, logits: torch.Tensor, kind: str = "margin") -> torch.Tensor:
        return attack_loss(logits[self._t], self._y, kind)

    def loss_of(self, partners: np.ndarray, kind: str) -> float:
        """The loss at the target with the pairs ``(target, partners)`` flipped."""
        pairs = self.pairs(partners)
        sign = torch.as_tensor(np.where(self.exists(pairs), -1.0, 1.0), dtype=self.tensors.x.dtype,
                               device=self.device)
        with torch.no_grad():
            return float(self.loss(self.weighted.logits(torch.as_tensor(pairs, device=self.device), sign), kind))

    def pairs(self, partners: np.ndarray) -> np.ndarray:
        """Canonical pairs (smaller id first) of the target with ``partners``."""
        v = np.asarray(partners, np.int64)
        return np.stack([np.minimum(v, self.target), np.maximum(v, self.target)])

    def fresh(self, k: int, exclude: np.ndarray | None, gen: torch.Generator) -> np.ndarray:
        """Up to ``k`` distinct random pairs of the target (canonical), none of the keys in
        ``exclude``: drawn, or (when they are at least half of what is left) a random
        subset of all that is left."""
        n, t = self.n, self.target
        excluded = np.zeros(0, np.int64) if exclude is None else np.asarray(exclude, np.int64)
        if k <= 0:
            return np.zeros((2, 0), np.int64)
        if 2 * k < n - 1 - excluded.size:
            return draw_pairs(n, k, gen, excluded, among=np.array([t], np.int64))
        others = self.pairs(np.delete(np.arange(n, dtype=np.int64), t))
        left = others[:, ~np.isin(others[0] * n + others[1], excluded)]
        order = torch.randperm(left.shape[1], generator=gen).numpy()
        return left[:, order[:k]]


class PRBCD(TargetedAttack):
    """Targeted (local) PR-BCD (module docstring)."""

    Config = PRBCDConfig
    name = "prbcd"

    @property
    def follows_gradients(self) -> bool:
        """Its flips follow the surrogate's gradients: an adaptive job also attacks each
        defense with itself."""
        return True

    def shared(self, ctx: TargetContext) -> dict:
        """The batch's weighted surrogate, tensors and clean edge keys (built once)."""
        out = ctx.memo.get(self.name)
        if out is None:
            g = graph_tensors(ctx.graph, ctx.device)
            out = ctx.memo[self.name] = dict(tensors=g, weighted=weighted_surrogate(ctx.model, g.x, g.edge_index),
                                             keys=undirected_keys(ctx.graph), n=ctx.n, device=ctx.device)
            out["weighted"].check()
        return out

    def block_size(self, n: int, budget: int) -> int:
        return int(min(n - 1, max(self.config.block_size, 2 * budget)))

    def attack_one(self, ctx: TargetContext, target: int, budget: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, None]:
        cfg = self.config
        view = OneTarget(self.shared(ctx), target, int(ctx.labels[target]))
        if budget <= 0 or ctx.n < 2:
            return np.zeros(0, np.int64), None
        gen = torch.Generator(device="cpu").manual_seed(int(rng.integers(0, 2**63 - 1)))
        size = self.block_size(ctx.n, budget)

        def fresh(k: int, exclude: np.ndarray) -> np.ndarray:
            return view.fresh(k, exclude, gen)

        step = cfg.lr * budget * max(1.0, math.sqrt(ctx.n / size))
        with torch.enable_grad():  # also under a caller's no_grad
            block = Block(view, fresh(size, None))  # type: ignore[arg-type]  # OneTarget reads as a ModContext
            flips = search(block, cfg, budget, step, size, fresh, gen)  # type: ignore[arg-type]
        partners = (flips[0] + flips[1] - target).astype(np.int64)
        if partners.size and not view.loss_of(partners, cfg.loss) > view.loss_of(partners[:0], cfg.loss):
            return np.zeros(0, np.int64), None  # no better than the clean graph: no flips
        return partners, None


__all__ = ["OneTarget", "PRBCD", "PRBCDConfig"]
