"""FGSM (iterative): random injection edges, features by sign-gradient ascent from 0.

``X <- clip(X + step_size * sign(grad_X CE(surrogate(A', [X_orig; X])[targets], y_hat)))``
(Goodfellow et al., 2015, iterated; GRB's injection variant). Also provides
:func:`fgsm_inject`, the tensor-level version used by adversarial training.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from grb_dist.attacks.base import surrogate_mode
from grb_dist.attacks.injection.base import AttackConfig, InjectionAttack
from grb_dist.attacks.injection.common import AttackContext, random_edges, sign_ascent, target_loss
from grb_dist.core.errors import ConfigError
from grb_dist.models.tensors import apply_injection


@dataclass(frozen=True)
class FGSMConfig(AttackConfig):
    """FGSM uses only the shared :class:`AttackConfig` fields."""


def fgsm_inject(
    model: torch.nn.Module,
    x: torch.Tensor,
    edge_index: torch.Tensor,
    targets: torch.Tensor,
    labels: torch.Tensor,
    *,
    n_inject: int,
    edges_per_node: int,
    feat_min: float,
    feat_max: float,
    steps: int,
    step_size: float,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Tensor-level FGSM injection (for adversarial training).

    Injected node ``i`` (global id ``N + i``) links to ``edges_per_node`` distinct targets
    drawn uniformly with ``generator``; its features start at 0 and take ``steps`` sign
    steps of ``step_size`` up the mean cross-entropy of ``model`` on ``targets`` against
    ``labels``, clipped to ``[feat_min, feat_max]`` after each step. The model runs in eval
    mode (its previous mode is restored); gradients are taken w.r.t. the injected features
    only, so the model's parameters accumulate no ``.grad``.

    Args:
        model: ``(x, edge_index) -> logits``.
        x: N x D float features of the graph (e.g. the training subgraph).
        edge_index: 2 x E int64 edges (both directions).
        targets: T int64 node ids the injected nodes attach to and whose loss is raised.
        labels: T int64 labels of the targets (true training labels in adversarial
            training, surrogate predictions in a black-box attack).
        n_inject, edges_per_node: the budget (``edges_per_node <= T``).
        feat_min, feat_max: feature limits.
        steps, step_size: sign-ascent schedule.
        generator: CPU ``torch.Generator`` for the edge choice.

    Returns:
        ``(inj_features, inj_edges)``: n_inject x D float32 (detached) and 2 x
        (n_inject * edges_per_node) int64 with row 0 = ``N .. N + n_inject - 1`` and
        row 1 = targets, both on ``x.device``.
    """
    if n_inject <= 0 or edges_per_node <= 0:
        raise ConfigError(f"fgsm_inject needs n_inject > 0 and edges_per_node > 0, got {n_inject}, {edges_per_node}")
    if edges_per_node > targets.numel():
        raise ConfigError(f"edges_per_node={edges_per_node} exceeds the {targets.numel()} targets")
    if not feat_min < feat_max:
        raise ConfigError(f"feat_min ({feat_min}) must be smaller than feat_max ({feat_max})")
    n = x.shape[0]
    targets = targets.to(x.device).long()
    labels = labels.to(x.device).long()
    inj_edges = random_edges(n_inject, edges_per_node, targets, n, generator)
    x0 = torch.zeros(n_inject, x.shape[1], dtype=torch.float32, device=x.device)
    x_const = x.detach()

    # The edges stay fixed: one perturbed edge_index for every step, so the model can
    # reuse the propagation structure it builds for it.
    _, ei = apply_injection(x_const, edge_index, x0, inj_edges)

    def loss_fn(inj_x: torch.Tensor) -> torch.Tensor:
        return target_loss(model(torch.cat([x_const, inj_x]), ei)[targets], labels)

    with surrogate_mode(model):
        feats = sign_ascent(
            loss_fn, x0, steps=steps, step_size=step_size, feat_min=feat_min, feat_max=feat_max
        )
    return feats, inj_edges


class FGSM(InjectionAttack):
    """Iterative FGSM injection: random edges, features from 0 by clipped sign ascent."""

    Config = FGSMConfig
    name = "fgsm"

    def optimize(self, ctx: AttackContext, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        # the same draws and steps as fgsm_inject, evaluated through the context (which
        # re-evaluates only the rows the injection reaches)
        cfg = self.config
        edges = random_edges(cfg.n_inject, cfg.edges_per_node, ctx.targets, ctx.num_local, gen)
        x0 = torch.zeros(cfg.n_inject, ctx.num_features, dtype=ctx.x.dtype, device=ctx.device)

        def loss_fn(inj_x: torch.Tensor) -> torch.Tensor:
            return target_loss(ctx.logits(inj_x, edges), ctx.labels)

        feats = sign_ascent(
            loss_fn, x0, steps=cfg.steps, step_size=cfg.step_size, feat_min=ctx.feat_min, feat_max=ctx.feat_max
        )
        return feats, edges
