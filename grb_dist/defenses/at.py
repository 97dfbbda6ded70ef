"""Adversarial training (GRB "AT": Zheng et al. 2021, appendix A.4.3, Table 5): with injection
(the default) or with modification (``scenario: modification``, flip-based AT).

Each training epoch (after ``warmup_epochs`` clean epochs), an FGSM injection attack runs
for ``steps`` sign steps against the *current* model on the training graph: ``n_inject``
new nodes, each linked to ``edges_per_node`` distinct training nodes drawn at random,
features starting at 0 and pushed up the cross-entropy of the training nodes' true labels
within ``[feat_min, feat_max]``. The model then takes its training step on the injected
graph, with the loss on the original training nodes only (the injected nodes have no
labels). Every epoch's attack is independent of the previous ones (GRB, Zheng et al. 2021,
appendix A.5.1).

Flip-based AT (:class:`ModificationAT`) instead flips ``ratio_edge_mod`` of the training
view's edges each epoch, every flip touching a training node: one greedy round of GR-BCD
(the gradient of the training loss w.r.t. the flip weights of a random block of pairs, the
largest positive entries flipped) for models differentiable in edge weights
(:class:`~grb_dist.attacks.shared.weighted.WeightedSurrogate`), and DICE on the true
training labels (remove same-label edges, connect different labels) for the others (GAT,
R-GCN), which say so in the log once.

Only training nodes are ever targeted: the hook receives the training view (the subgraph
induced by the training nodes, see :func:`grb_dist.models.views.induced`), so validation
and test nodes do not exist for it. The attack runs with the model in eval mode (dropout
off) and the previous mode is restored; the model's parameters get no gradient from it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping

import torch

from grb_dist.attacks.injection.fgsm import fgsm_inject
from grb_dist.core.config import from_dict
from grb_dist.core.errors import ConfigError
from grb_dist.core.scenario import DEFAULT, find_scenario, scenarios
from grb_dist.core.scenario import scenario as scenario_of
from grb_dist.models.tensors import apply_injection
from grb_dist.models.views import InductiveView

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
    scenario: str = DEFAULT.name
    ratio_edge_mod: float = 0.05

    def __post_init__(self) -> None:
        evasion = [s.name for s in scenarios() if not (s.poisons or s.per_target)]  # a whole graph's perturbation
        if find_scenario(self.scenario) is None or self.scenario not in evasion:
            raise ConfigError(f"adversarial_training.scenario must be an evasion scenario ({' or '.join(evasion)}), "
                              f"got {self.scenario!r}")
        if not 0 < self.ratio_edge_mod <= 1:
            raise ConfigError(f"adversarial_training.ratio_edge_mod must be in (0, 1], got {self.ratio_edge_mod}")
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


def training_attack(config: ATConfig) -> "InjectionAT | ModificationAT":
    """The training-time attack of ``config``'s scenario (one instance per training run)."""
    return InjectionAT(config) if scenario_of(config.scenario).injects else ModificationAT(config)


class ModificationAT:
    """The :data:`grb_dist.models.train.Augment` hook of flip-based adversarial training
    (see the module docstring). Returns ``(x, edge_index')`` of the training view with
    ``ratio_edge_mod`` of its edges flipped."""

    #: Candidate pairs drawn per epoch, as a multiple of the flips.
    BLOCK_FACTOR = 10

    def __init__(self, config: ATConfig):
        self.config = config
        self.epoch = 0
        self._warned = False

    def __call__(self, model: torch.nn.Module, view: InductiveView, generator: torch.Generator):
        epoch, self.epoch = self.epoch, self.epoch + 1
        if epoch < self.config.warmup_epochs:
            return view.x, view.edge_index
        n = view.x.shape[0]
        ei = view.edge_index
        budget = max(1, round(self.config.ratio_edge_mod * ei.shape[1] / 2))
        pairs, exists = self._block(view, budget, generator)
        if pairs.shape[1] == 0:
            return view.x, ei
        was_training = model.training
        model.eval()
        try:
            chosen = self._gradient_flips(model, view, pairs, exists, budget)
        finally:
            model.train(was_training)
        if chosen is None:
            chosen = self._dice_flips(view, pairs, exists, budget, generator)
        flip, ex = pairs[:, chosen], exists[chosen]
        keys = ei[0] * n + ei[1]
        rem = flip[:, ex]
        keep = ~torch.isin(keys, torch.cat([rem[0] * n + rem[1], rem[1] * n + rem[0]]))
        add = flip[:, ~ex]
        return view.x, torch.cat([ei[:, keep], add, add.flip(0)], dim=1)

    @staticmethod
    def _block(view: InductiveView, budget: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Distinct random pairs (a training node, any node of the view), smaller id first,
        and whether each is an edge."""
        n, dev = view.x.shape[0], view.x.device
        k = ModificationAT.BLOCK_FACTOR * budget
        a = view.mask_idx[torch.randint(0, view.mask_idx.numel(), (k,), generator=generator).to(dev)]
        b = torch.randint(0, n, (k,), generator=generator).to(dev)
        keep = a != b
        lo, hi = torch.minimum(a[keep], b[keep]), torch.maximum(a[keep], b[keep])
        keys = torch.unique(lo * n + hi)
        edge_keys = view.edge_index[0] * n + view.edge_index[1]
        return torch.stack([keys // n, keys % n]), torch.isin(keys, edge_keys)

    def _gradient_flips(self, model, view, pairs, exists, budget) -> torch.Tensor | None:
        """Indices of the pairs with the largest positive gradient of the training loss, or
        ``None`` when the model is not differentiable in edge weights."""
        import torch.nn.functional as F

        from grb_dist.attacks.base import frozen_parameters
        from grb_dist.attacks.shared.weighted import WeightedSurrogate
        from grb_dist.core.errors import ConfigError

        with frozen_parameters(model):
            try:
                ws = WeightedSurrogate(model, view.x, view.edge_index)
                p = torch.zeros(pairs.shape[1], dtype=view.x.dtype, device=view.x.device, requires_grad=True)
                sign = 1.0 - 2.0 * exists.to(view.x.dtype)
                logits = ws.logits(pairs, sign * p)
            except ConfigError:
                if not self._warned:
                    log.info("flip-based AT: %s is not differentiable in edge weights; DICE flips instead",
                             type(model).__name__)
                    self._warned = True
                return None
            loss = F.cross_entropy(logits[view.mask_idx], view.y[view.mask_idx])
            (grad,) = torch.autograd.grad(loss, p)
        k = min(budget, int((grad > 0).sum()))
        return torch.topk(grad, k).indices

    @staticmethod
    def _dice_flips(view, pairs, exists, budget, generator) -> torch.Tensor:
        """DICE on the true labels: same-label edges removed, different-label pairs added."""
        same = view.y[pairs[0]] == view.y[pairs[1]]
        useful = torch.nonzero((exists & same) | (~exists & ~same)).flatten()
        order = torch.randperm(useful.numel(), generator=generator).to(useful.device)
        return useful[order[:budget]]
