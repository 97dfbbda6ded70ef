"""A sparse matrix with a fixed pattern and changing values, and its product with a dense
matrix differentiable in both: what the attacks that relax edge flips to weights compute
with (the edge-weighted surrogate of PR-BCD, PGD, FGA and GR-BCD; meta-PR-BCD's relaxed
graph). The pattern is built once; a step only changes the values.

Values are given in the pattern's CSR order (sorted by row, then column: ``row`` and
``col``); :attr:`CSRPattern.order` maps that order to the entries as they were given. The
product's backward pass takes the transpose from the same pattern (a permutation of the
values, no transposition per step) and the values' gradient as a sampled product at the
pattern's entries (no E x F temporary). Its backward is itself differentiable where a
meta-gradient needs it (grad mode on in the backward pass: ``create_graph``).
"""

from __future__ import annotations

import warnings

import torch

from grb_dist.models.propagation import product


def _crow(index: torch.Tensor, n: int) -> torch.Tensor:
    crow = torch.zeros(n + 1, dtype=torch.long, device=index.device)
    crow[1:] = torch.cumsum(torch.bincount(index, minlength=n), 0)
    return crow


class CSRPattern:
    """The fixed entries ``(row, col)`` of a ``shape`` matrix in CSR order.

    Args:
        row, col: the entries, in any order, no duplicates.
        shape: (rows, columns).
        symmetric: the pattern equals its transpose (its transpose then reuses its arrays).
        mirrored: the entries are ``[pairs, pairs flipped]`` (so symmetric): entry ``i``'s
            transpose is entry ``i +- m``, found without a search.

    Attributes:
        row, col: the entries in CSR order; ``order``: their positions among the given ones.
        perm_t: the CSR position of each entry of the transpose, in the transpose's CSR order.
    """

    def __init__(self, row: torch.Tensor, col: torch.Tensor, shape: tuple[int, int], *, symmetric: bool = False,
                 mirrored: bool = False):
        n_rows, n_cols = shape
        key = row * n_cols + col
        order = torch.argsort(key)
        self.shape, self.order = shape, order
        self.row, self.col = row[order].contiguous(), col[order].contiguous()
        self.crow = _crow(self.row, n_rows)
        if mirrored:  # entry i's transpose is entry i +- m
            m = row.numel() // 2
            position = torch.empty_like(order)
            position[order] = torch.arange(order.numel(), device=order.device)
            self.perm_t = position[(order + m) % (2 * m)]
        elif symmetric:
            self.perm_t = torch.searchsorted(key[order], self.col * n_cols + self.row)
        else:
            self.perm_t = torch.argsort(self.col * n_rows + self.row)
        if mirrored or symmetric:
            self.crow_t, self.col_t = self.crow, self.col
        else:
            self.crow_t, self.col_t = _crow(self.col, n_cols), self.row[self.perm_t].contiguous()

    @staticmethod
    def _csr(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
        with warnings.catch_warnings():  # torch flags sparse CSR as beta on every construction
            warnings.simplefilter("ignore", UserWarning)
            return torch.sparse_csr_tensor(crow, col, values, size=shape, check_invariants=False)

    @staticmethod
    def _times(a: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """``a @ h`` in ``a``'s dtype outside autocast; straight into its output (no second
        N x F buffer) unless the product itself is to be differentiated."""
        with torch.autocast(h.device.type, enabled=False):
            h = h.to(a.dtype).contiguous()
            return a @ h if torch.is_grad_enabled() else product(a, h)

    def mm(self, values: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """``S(values) @ h`` (values in CSR order)."""
        return self._times(self._csr(self.crow, self.col, values, self.shape), h)

    def tmm(self, values: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """``S(values)^T @ g``."""
        return self._times(self._csr(self.crow_t, self.col_t, values[self.perm_t], self.shape[::-1]), g)

    def sampled(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """``(a @ b^T)`` at the pattern's entries, in CSR order."""
        mask = self._csr(self.crow, self.col, a.new_zeros(self.row.numel()), self.shape)
        with torch.autocast(a.device.type, enabled=False):
            return torch.sparse.sampled_addmm(mask, a.contiguous(), b.T, beta=0.0).values()


class CSRProduct(torch.autograd.Function):
    """``S(values) @ h`` for a fixed :class:`CSRPattern`, differentiable in ``values`` (CSR
    order) and ``h``."""

    @staticmethod
    def forward(ctx, values, h, pattern):  # noqa: D401
        ctx.save_for_backward(values, h)
        ctx.pattern = pattern
        return pattern.mm(values, h)

    @staticmethod
    def backward(ctx, grad):
        values, h = ctx.saved_tensors
        s = ctx.pattern
        grad = grad.contiguous()
        grad_values = s.sampled(grad.to(values.dtype), h.to(values.dtype)) if ctx.needs_input_grad[0] else None
        grad_h = s.tmm(values, grad) if ctx.needs_input_grad[1] else None
        return grad_values, grad_h, None


__all__ = ["CSRPattern", "CSRProduct"]
