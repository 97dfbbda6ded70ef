"""PGD: the projected-gradient topology attack (Xu et al., IJCAI 2019, "Topology attack and
defense for graph neural networks") with PGD on the features of chosen targets, as GRB's
modification PGD changes both.

Edges: the flips are relaxed to weights ``p`` in [0, 1] on a fixed candidate set (every
clean edge touching a target plus ``n_candidate_pairs`` random absent pairs touching a
target); each step ascends the surrogate's loss on the targets along the gradient w.r.t.
``p`` (step ``lr * budget / N / sqrt(t + 1)``) and projects onto
``{0 <= p <= 1, sum(p) <= budget}``; at the end discrete flips are sampled from ``p`` and the
most damaging sample within the budget wins.

Features: the ``n_node_mod`` targets with the largest gradient norm of the loss w.r.t.
their features (on the clean graph) are chosen once; each step moves their features by
``feat_step_size`` times the gradient's sign, clipped to ``[feat_lim_min, feat_lim_max]``.

Scaling: one forward and backward of the surrogate on the full graph per step
(:class:`~grb_dist.attacks.shared.weighted.WeightedSurrogate`); memory O(E + N F + C). Nothing is N x N.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from grb_dist.attacks.base import gradients, input_grad
from grb_dist.attacks.shared.flips import (
    ModContext, ModificationAttack, ModificationConfig, check_loss, project_budget,
)
from grb_dist.attacks.shared.relaxed import Block
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Modification


@dataclass(frozen=True)
class PGDConfig(ModificationConfig):
    """Attributes:
        n_candidate_pairs: random absent pairs among the candidates; ``None`` = 20 x budget
            (at least 10,000).
        lr: step-size factor of the edge weights (see the module docstring).
        feat_step_size: sign step of the modified features.
        loss: ``margin`` (default; Xu et al.'s CW-type loss), ``ce`` (their CE-type loss),
            ``tanh_margin`` or ``prob_margin``. On cora-legacy the margin loss lowers the
            target's accuracy by about 12 points, cross-entropy by about 8
            (``bench/attacks/modification.py``).
        n_samples: Bernoulli samples drawn from the final weights.
    """

    steps: int = 100
    n_candidate_pairs: int | None = None
    lr: float = 1000.0
    feat_step_size: float = 0.01
    loss: str = "margin"
    n_samples: int = 20

    def __post_init__(self) -> None:
        super().__post_init__()
        check_loss(self.loss)
        if self.n_candidate_pairs is not None and self.n_candidate_pairs < 0:
            raise ConfigError(f"n_candidate_pairs must be >= 0 or null, got {self.n_candidate_pairs}")
        for name in ("lr", "feat_step_size"):
            v = getattr(self, name)
            if not (v > 0 and math.isfinite(v)):
                raise ConfigError(f"{name} must be a positive finite number, got {v}")
        if self.n_samples < 0:
            raise ConfigError(f"n_samples must be >= 0, got {self.n_samples}")


class PGD(ModificationAttack):
    """Projected gradient ascent on relaxed flips plus sign PGD on chosen targets' features."""

    Config = PGDConfig
    name = "pgd"
    edge_gradients = True
    changes_features = True

    def generate(self, ctx: ModContext, gen: torch.Generator) -> Modification:
        cfg = self.config
        b = ctx.budget
        block = Block(ctx, ctx.fixed_candidates(cfg.n_candidate_pairs, gen))
        block.p = torch.zeros_like(block.p)
        x0 = ctx.tensors.x
        nodes = self._choose_nodes(ctx, block, cfg.loss)
        rows = torch.as_tensor(nodes, device=ctx.device)
        feats = x0[rows].clamp(b.feat_min, b.feat_max)

        def features(f: torch.Tensor) -> torch.Tensor:
            return x0.index_copy(0, rows, f)

        for t in range(cfg.steps):
            p = block.p.detach().requires_grad_(True)
            f = feats.detach().requires_grad_(True)
            loss = block.loss(p, cfg.loss, features(f))
            grad_p, grad_f = gradients(loss, (p, f))
            lr = cfg.lr * b.n_edge_mod / ctx.n / math.sqrt(t + 1)
            block.p = project_budget(block.p + lr * grad_p, b.n_edge_mod)
            feats = (feats + cfg.feat_step_size * grad_f.sign()).clamp(b.feat_min, b.feat_max)
        flips = block.discrete(gen, b.n_edge_mod, cfg.n_samples, cfg.loss, features(feats))
        return ctx.result(flips, nodes, feats.detach().cpu().numpy().astype(np.float32))

    @staticmethod
    def _choose_nodes(ctx: ModContext, block: Block, loss_kind: str) -> np.ndarray:
        """The ``n_node_mod`` targets whose features move the loss most (gradient norm)."""
        x = ctx.tensors.x.detach().requires_grad_(True)
        loss = block.loss(block.p, loss_kind, x)
        grad = input_grad(loss, x)
        score = grad[ctx.target_tensor].norm(dim=1)
        top = torch.topk(score, ctx.budget.n_node_mod).indices.cpu().numpy()
        return np.sort(ctx.targets[top])
