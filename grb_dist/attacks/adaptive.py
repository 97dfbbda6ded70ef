"""Which models an adaptive (white-box) gradient attack can differentiate.

Adaptive evaluation (Mujkanovic et al., NeurIPS 2022, "Are Defenses for Graph Neural
Networks Robust?") attacks every defense with itself as the attack's surrogate. The gradient
attacks of each scenario (those whose ``follows_gradients`` is true: FGSM, PGD, SPEIT,
TDGIA; FGA, PGD, PR-BCD, GR-BCD) need:

* **injection**: the loss differentiable in the injected nodes' features, which holds for
  every model that reads node features (any ``forward(x, edge_index)`` built from torch
  operations); label propagation alone reads none (its class sets ``reads_features =
  False``), so injected features get no gradient;
* **modification**: the loss differentiable in edge weights, i.e. a declared program that
  :class:`~grb_dist.attacks.modification.weighted.WeightedSurrogate` replays with weights, or
  a ``weighted_forward(x, edge_index, edge_weight)`` (:mod:`grb_dist.models.weighted`); for
  ``<model>_lp`` the wrapped model needs one too.

:func:`transfer_only_reason` says, from class attributes and a dry run of the declared
program (no tensor computed), when a model cannot be attacked adaptively: such a defense is
then evaluated by transfer attacks only. Which defenses are exact and which use a surrogate
gradient is in ``docs/attacks.md`` ("Adaptive attacks: gradients through each defense").
"""

from __future__ import annotations

import torch

from grb_dist.attacks.modification.weighted import edge_weight_reason
from grb_dist.core.errors import ConfigError
from grb_dist.core.names import SCENARIOS


def transfer_only_reason(model: torch.nn.Module, scenario: str) -> str | None:
    """``None`` when ``model`` can be attacked adaptively by the gradient attacks of
    ``scenario`` (``"injection"`` or ``"modification"``), else a one-line reason that starts
    with what is missing. Static checks only: cheap, nothing is trained or evaluated."""
    if scenario not in SCENARIOS:
        raise ConfigError(f"scenario must be one of {', '.join(SCENARIOS)}, got {scenario!r}")
    if scenario == "injection":
        return feature_reason(model)
    return edge_weight_reason(model)


def feature_reason(model: torch.nn.Module) -> str | None:
    """Why injected features get no gradient through ``model`` (``None``: they do). A
    plain ``torch.nn.Module`` is assumed to read its features."""
    cls = type(model)
    if getattr(cls, "reads_features", True):
        return None
    name = getattr(cls, "display_name", cls.__name__)
    return f"{name} reads no node features, so injected features get no gradient"


__all__ = ["feature_reason", "transfer_only_reason"]
