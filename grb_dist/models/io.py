"""A trained model's state_dict as bytes, the form in which a run stores it
(``models/<name>-<seed>.pt``): ``torch.save`` of the dict, read back with
``torch.load(weights_only=True)`` -- tensors and plain containers only, never arbitrary
pickled objects, so a tampered file cannot run code."""

from __future__ import annotations

import io
from typing import Mapping

import torch


def state_dict_to_bytes(state_dict: Mapping[str, torch.Tensor]) -> bytes:
    """The bytes ``torch.save`` writes for ``state_dict`` (as a plain dict)."""
    buf = io.BytesIO()
    torch.save(dict(state_dict), buf)
    return buf.getvalue()


def state_dict_from_bytes(data: bytes) -> dict[str, torch.Tensor]:
    """The state_dict in ``data`` (written by :func:`state_dict_to_bytes`), on the CPU.

    Loaded with ``weights_only=True``; a damaged or foreign payload raises what
    ``torch.load`` raises.
    """
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


__all__ = ["state_dict_from_bytes", "state_dict_to_bytes"]
