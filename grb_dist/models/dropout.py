"""Dropout for training on the CPU: a fast mask, kept as one byte per entry.

``torch.nn.functional.dropout`` on the CPU draws its noise with ``bernoulli_`` (one
Mersenne Twister draw per entry, a large share of a GCN training step on a large graph) and
keeps the float noise for the backward pass, one more N x F float tensor per dropout.
:func:`dropout` draws 32 random bits per entry from numpy's SFC64 generator, seeded from
torch's default generator (so ``torch.manual_seed`` still fixes every mask), keeps an entry
where they are at least ``p * 2**32`` (probability ``1 - p`` to within 2**-32), and keeps
that mask as ``torch.bool`` (a quarter of the float noise) for the backward pass, several
times faster (figures: docs/performance.md). The masks are not ``F.dropout``'s, so a
training's weights differ from one with ``F.dropout`` at the same seed; the distribution is
the same.

On other devices ``F.dropout`` is used as is: CUDA's fused kernel is fast and already keeps
a bool mask.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Zero each entry of ``x`` with probability ``p`` and scale the rest by ``1 / (1 - p)``
    (``F.dropout(x, p, training)`` in distribution; see the module docstring on the CPU)."""
    if not training or p == 0.0 or x.device.type != "cpu" or x.numel() == 0:
        return F.dropout(x, p=p, training=training)
    return _MaskedDropout.apply(x, keep_mask(x.shape, p), p)


def keep_mask(shape: torch.Size | tuple[int, ...], p: float) -> torch.Tensor:
    """A bool tensor of ``shape``, each entry True with probability ``1 - p`` (to within
    2**-32), drawn from a generator seeded by torch's default one."""
    numel = int(np.prod(shape, dtype=np.int64))
    seed = int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64))
    words = np.random.SFC64(seed).random_raw((numel + 1) // 2).view(np.uint32)[:numel]
    threshold = np.uint32(min(round(p * 2**32), 2**32 - 1))
    return torch.from_numpy(words >= threshold).view(shape)


class _MaskedDropout(torch.autograd.Function):
    """``x * keep / (1 - p)``; the backward pass multiplies by the same mask and scale."""

    @staticmethod
    def forward(ctx, x, keep, p):
        # 1 / (1 - p) rounded to x's dtype, as a Python float (exact: a widened float).
        ctx.scale = float(x.new_ones(()).div_(1 - p))
        ctx.save_for_backward(keep)
        return x.mul(keep).mul_(ctx.scale)

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None, None
