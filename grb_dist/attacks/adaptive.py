"""Adaptive (white-box) attacks: which models an attack can differentiate.

An adaptive attack uses the defense itself as its surrogate. Injection attacks follow the
gradient of the loss in the injected nodes' features, so the defense must read features
differentiably; gradient modification attacks follow the gradient in edge weights, so the
defense must declare a program differentiable in edge weights
(:class:`~grb_dist.attacks.modification.weighted.WeightedSurrogate`).
"""

from __future__ import annotations

import torch

from grb_dist.core.errors import ConfigError


def transfer_only_reason(model: torch.nn.Module, scenario: str) -> str | None:
    """``None`` when ``model`` can be attacked adaptively in ``scenario``, else why not."""
    if scenario == "injection":
        if getattr(model, "reads_features", True) is False:
            return f"{type(model).__name__} reads no node features, so injected features get no gradient"
        return None
    from grb_dist.attacks.modification.weighted import WeightedSurrogate

    x = torch.zeros(2, 1)
    try:
        WeightedSurrogate(model, x, torch.tensor([[0, 1], [1, 0]])).check()
    except (ConfigError, RuntimeError, TypeError, ValueError, NotImplementedError) as exc:
        return f"{type(model).__name__} is not differentiable in edge weights ({str(exc).splitlines()[0]})"
    return None
