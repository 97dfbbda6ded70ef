"""Adversarial training with injection (GRB "AT", seed 001 appendix A.4.3, Table 5).

Each training epoch (after ``warmup_epochs`` clean epochs), an FGSM injection attack runs
for ``steps`` sign steps against the *current* model on the training graph: ``n_inject``
new nodes, each linked to ``edges_per_node`` distinct training nodes drawn at random,
features starting at 0 and pushed up the cross-entropy of the training nodes' true labels
within ``[feat_min, feat_max]``. The model then takes its training step on the injected
graph, with the loss on the original training nodes only (the injected nodes have no
labels). Every epoch's attack is independent of the previous ones (seed 001 A.5.1).

Only training nodes are ever targeted: the hook receives the training view (the subgraph
induced by the training nodes, see :func:`grb_dist.models.train.induced`), so validation
and test nodes do not exist for it. The attack runs with the model in eval mode (dropout
off) and the previous mode is restored; the model's parameters get no gradient from it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping

import torch

from grb_dist.attacks.injection.fgsm import fgsm_inject
from grb_dist.config import from_dict
from grb_dist.errors import ConfigError
from grb_dist.graph import apply_injection
from grb_dist.models.train import InductiveView

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ATConfig:
    """Budget of the training-time attack (a job's ``adversarial_training:`` section).

    Attributes:
        n_inject: injected nodes per epoch (Table 5: cora 20, citeseer 30, flickr 200,
            reddit 500, aminer 500).
        edges_per_node: edges of each injected node (Table 5: 20, 20, 100, 200, 100).
        steps: FGSM sign steps per epoch (Table 5: 10).
        step_size: FGSM step size (Table 5: 0.01).
        feat_min, feat_max: feature limits; ``None`` = the training features' own min / max
            (Table 5 lists the datasets' normalised feature ranges).
        warmup_epochs: clean epochs before the first attack (the paper's warm-up).
    """

    n_inject: int
    edges_per_node: int
    steps: int = 10
    step_size: float = 0.01
    feat_min: float | None = None
    feat_max: float | None = None
    warmup_epochs: int = 10

    def __post_init__(self) -> None:
        if self.n_inject < 1 or self.edges_per_node < 1 or self.steps < 1 or self.step_size <= 0:
            raise ConfigError(
                "adversarial_training needs n_inject >= 1, edges_per_node >= 1, steps >= 1 and "
                f"step_size > 0; got {self.n_inject}, {self.edges_per_node}, {self.steps}, {self.step_size}"
            )
        if self.warmup_epochs < 0:
            raise ConfigError(f"adversarial_training.warmup_epochs must be >= 0, got {self.warmup_epochs}")
        if self.feat_min is not None and self.feat_max is not None and not self.feat_min < self.feat_max:
            raise ConfigError(f"adversarial_training: feat_min ({self.feat_min}) must be below feat_max ({self.feat_max})")


def at_config(params: Mapping[str, Any] | ATConfig | None) -> ATConfig:
    """Strictly build an :class:`ATConfig` (unknown keys rejected)."""
    if isinstance(params, ATConfig):
        return params
    if params is None:
        raise ConfigError("adversarial training needs an adversarial_training section (n_inject, edges_per_node, steps, step_size)")
    return from_dict(ATConfig, params, where="adversarial_training")


class InjectionAT:
    """The :data:`grb_dist.models.train.Augment` hook of injection adversarial training.

    One instance per training run (it counts epochs for the warm-up). Calling it returns
    the injected training graph ``(x', edge_index')``: the ``n`` training-view nodes keep
    their ids, injected nodes are appended after them.
    """

    def __init__(self, config: ATConfig):
        self.config = config
        self.epoch = 0

    def __call__(self, model: torch.nn.Module, view: InductiveView, generator: torch.Generator):
        epoch, self.epoch = self.epoch, self.epoch + 1
        if epoch < self.config.warmup_epochs:
            return view.x, view.edge_index
        c = self.config
        targets = view.mask_idx
        fmin = float(view.x.min()) if c.feat_min is None else c.feat_min
        fmax = float(view.x.max()) if c.feat_max is None else c.feat_max
        was_training = model.training
        model.eval()  # no dropout, deterministic gradients during the attack
        try:
            feats, edges = fgsm_inject(
                model, view.x, view.edge_index, targets, view.y[targets],
                n_inject=c.n_inject, edges_per_node=min(c.edges_per_node, targets.numel()),
                feat_min=fmin, feat_max=fmax, steps=c.steps, step_size=c.step_size,
                generator=generator,
            )
        finally:
            model.train(was_training)
        return apply_injection(view.x, view.edge_index, feats.detach(), edges)
