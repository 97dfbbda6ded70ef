"""Reductions over large arrays in row blocks, so that checking or normalising an N x D
feature matrix allocates a block's temporaries, not another matrix of its size (a dataset
may take a large share of the machine's memory; ``np.isfinite(x).all()`` or ``np.abs(x).max()``
would add a quarter or a whole copy of it)."""

from __future__ import annotations

from typing import Iterator

import numpy as np

#: Bytes of the float64 temporaries one block may take.
BLOCK_BYTES = 32 << 20


def row_blocks(arr: np.ndarray) -> Iterator[slice]:
    """Slices of ``arr``'s first axis whose rows hold at most :data:`BLOCK_BYTES` as float64
    (at least one row each)."""
    n = arr.shape[0] if arr.ndim else 1
    row = 8 * (int(np.prod(arr.shape[1:])) if arr.ndim > 1 else 1)
    step = max(1, BLOCK_BYTES // max(row, 1))
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))


def count_nonfinite(arr: np.ndarray) -> int:
    """Entries of ``arr`` that are NaN or infinite (0 for integer and boolean arrays)."""
    if arr.dtype.kind not in "fc":
        return 0
    return sum(int(arr[b].size - np.count_nonzero(np.isfinite(arr[b]))) for b in row_blocks(arr))


def abs_max(arr: np.ndarray) -> float:
    """The largest absolute value of ``arr`` (0 when empty)."""
    if not arr.size:
        return 0.0
    return max(float(np.abs(arr[b]).max()) for b in row_blocks(arr))


def mean_std(arr: np.ndarray, axis: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Mean and (population) standard deviation of ``arr``, over all entries (``axis=None``)
    or per column (``axis=0``), accumulated in float64 block by block (two passes)."""
    shape = () if axis is None else arr.shape[1:]
    total, count = np.zeros(shape), 0
    for b in row_blocks(arr):
        block = np.asarray(arr[b], dtype=np.float64)
        total += block.sum() if axis is None else block.sum(axis=0)
        count += block.size if axis is None else block.shape[0]
    mean = total / max(count, 1)
    squares = np.zeros(shape)
    for b in row_blocks(arr):
        block = np.asarray(arr[b], dtype=np.float64) - mean
        squares += (block * block).sum() if axis is None else (block * block).sum(axis=0)
    return mean, np.sqrt(squares / max(count, 1))


__all__ = ["BLOCK_BYTES", "abs_max", "count_nonfinite", "mean_std", "row_blocks"]
