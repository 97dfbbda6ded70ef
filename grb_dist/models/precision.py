"""Numeric precision of attack and scoring computations.

``fp32`` (the default) computes everything in float32. On a GPU two faster modes exist:

- ``tf32``: float32 tensors, but matrix products use TensorFloat-32 (10-bit mantissa
  inputs, float32 accumulation) on Ampere and newer GPUs; on CPU it changes nothing (so a
  sweep whose tasks land on CPU nodes computes in fp32 there).
- ``bf16``: autocast to bfloat16 for the dense products (linear layers); sparse
  propagations stay in float32 (their inputs are cast back), injected features, gradients
  and optimiser states stay float32. Also allowed on CPU (autocast on CPU), where it is
  mostly useful to measure the effect on attack strength, not for speed.

Attacks stay correct in any mode (the audit checks the result in float32); only the
optimisation path is less precise. ``bench/attacks/precision.py`` measures the difference.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch

from grb_dist.core.names import check_precision


@contextlib.contextmanager
def precision_mode(precision: str, device: str | torch.device) -> Iterator[None]:
    """Run the enclosed computation in ``precision`` on ``device`` (see the module doc)."""
    check_precision(precision)
    dev = torch.device(device)
    if precision == "fp32" or (precision == "tf32" and dev.type != "cuda"):
        yield
    elif precision == "tf32":
        saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
    else:
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            yield
