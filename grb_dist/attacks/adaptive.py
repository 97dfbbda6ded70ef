"""Which models an adaptive (white-box) gradient attack can differentiate.

Adaptive evaluation (Mujkanovic et al., NeurIPS 2022, "Are Defenses for Graph Neural
Networks Robust?") attacks every defense with itself as the attack's surrogate. The gradient
attacks of each scenario (those whose ``follows_gradients`` is true: FGSM, PGD, SPEIT,
TDGIA; FGA, PGD, PR-BCD, GR-BCD; targeted FGA and local PR-BCD, as modification) need:

* **injection**: the loss differentiable in the injected nodes' features, which holds for
  every model that reads node features (any ``forward(x, edge_index)`` built from torch
  operations); label propagation alone reads none (its class sets ``reads_features =
  False``), so injected features get no gradient;
* **modification**: the loss differentiable in edge weights, i.e. a declared program that
  :class:`~grb_dist.attacks.shared.weighted.WeightedSurrogate` replays with weights, or
  a ``weighted_forward(x, edge_index, edge_weight)`` (:mod:`grb_dist.models.weighted`); for
  ``<model>_lp`` the wrapped model needs one too;
* **poisoning** (``meta_prbcd`` with ``inner: model``: the defense is trained after the
  attack, so only a gradient through its training adapts to it): the same, and a
  meta-gradient through the model's training:
  its training is plain gradient descent (not Pro-GNN's own procedure), its edge-weighted
  evaluation is differentiable twice (``GraphModel.twice_differentiable``), and it reads
  the edges at all (an MLP does not).

:func:`transfer_only_reason` says, from class attributes and a dry run of the declared
program (no tensor computed), when a model cannot be attacked adaptively: such a defense is
then evaluated by transfer attacks only. Which defenses are exact and which use a surrogate
gradient is in ``docs/attacks.md`` ("Adaptive attacks: gradients through each defense").
"""

from __future__ import annotations

import torch

from grb_dist.attacks.shared.weighted import edge_weight_reason, program_operators
from grb_dist.core.scenario import Scenario
from grb_dist.core.scenario import scenario as scenario_of


def training_reason(model: torch.nn.Module) -> str | None:
    """Why a meta-gradient cannot run through ``model``'s training (``None``: it can): a
    model with a training procedure of its own (``train_on``: Pro-GNN's alternating
    structure learning) is not unrolled as plain gradient descent."""
    inner = getattr(model, "model", None) if getattr(type(model), "wraps_model", False) else None
    if callable(getattr(model, "train_on", None)) or callable(getattr(inner, "train_on", None)):
        name = getattr(type(model), "display_name", type(model).__name__)
        return f"{name} trains by a procedure of its own, which a meta-gradient does not unroll"
    return None


def transfer_only_reason(model: torch.nn.Module, scenario: str | Scenario) -> str | None:
    """``None`` when ``model`` can be attacked adaptively by the gradient attacks of
    ``scenario`` (a name or a :class:`~grb_dist.core.scenario.Scenario`; an unknown name
    raises), else a one-line reason that starts with what is missing: an injection's
    gradients run through the features of injected nodes, a modification's through edge
    weights, a poisoning's also through the defense's training. Static checks only: cheap,
    nothing is trained or evaluated."""
    s = scenario_of(scenario)
    if s.injects:
        return feature_reason(model)
    reason = edge_weight_reason(model)
    if s.poisons and reason is None:
        return meta_gradient_reason(model)
    return reason


def meta_gradient_reason(model: torch.nn.Module) -> str | None:
    """Why no meta-gradient runs through ``model``'s training on an edge-weighted graph
    (``None``: one does). Assumes :func:`edge_weight_reason` found nothing."""
    reason = training_reason(model)
    if reason is not None:
        return reason
    inner = getattr(model, "model", None) if getattr(type(model), "wraps_model", False) else None
    for m in (model, inner):
        if m is None:
            continue
        name = getattr(type(m), "display_name", type(m).__name__)
        if not getattr(type(m), "twice_differentiable", True):
            return f"{name}'s edge-weight gradient is differentiable once, not twice as a meta-gradient needs"
    if program_operators(model) == set():
        name = getattr(type(model), "display_name", type(model).__name__)
        return f"{name} reads no edges, so a poisoned structure cannot change it"
    return None


def feature_reason(model: torch.nn.Module) -> str | None:
    """Why injected features get no gradient through ``model`` (``None``: they do). A
    plain ``torch.nn.Module`` is assumed to read its features."""
    cls = type(model)
    if getattr(cls, "reads_features", True):
        return None
    name = getattr(cls, "display_name", cls.__name__)
    return f"{name} reads no node features, so injected features get no gradient"


__all__ = ["feature_reason", "meta_gradient_reason", "training_reason", "transfer_only_reason"]
