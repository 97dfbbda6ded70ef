"""A trained module scored as given: :class:`GivenModule`, the defense behind
``grb_dist.benchmark(trained_module, ...)``, registered like any factory
(:func:`grb_dist.models.registry.register_defense`) and never trained."""

from __future__ import annotations

import copy

from torch import nn


class GivenModule:
    """A factory of copies of one trained module: a defense scored with the weights it was
    given, never trained (``grb_dist.benchmark(trained_module, ...)``).

    The module is copied once, on the CPU and in eval mode, when this is made (later changes
    to the caller's module do not reach the run); every call returns a fresh copy marked
    ``trainable = False``, which the training step takes as "nothing to train" (0 epochs,
    its validation figures recorded as given). ``in_features`` and ``num_classes`` are not
    used: the module has its own widths, checked against the graph before a run starts.
    """

    trainable = False

    def __init__(self, module: nn.Module):
        self.module = copy.deepcopy(module).cpu().eval()
        self.__name__ = type(module).__name__

    def __call__(self, in_features: int, num_classes: int) -> nn.Module:
        module = copy.deepcopy(self.module)
        module.trainable = False
        return module


__all__ = ["GivenModule"]
