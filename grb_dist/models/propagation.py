"""Products of a fixed sparse propagation matrix with dense features, for training.

Autograd's backward pass of ``torch.sparse.mm(A, h)`` with a CSR ``A`` multiplies by
``A^T``, a CSC view that is converted back to CSR, a sort of every entry, on every call; on
large graphs that conversion is a large part of a propagation's forward and backward time
(figures: docs/performance.md). :func:`propagate` transposes a matrix once, on its first
backward pass, and keeps the result with the matrix (the matrix itself when it is
symmetric, as the normalised adjacency of an undirected graph is); its forward pass writes
the product straight into its output (``torch.sparse.mm`` allocates a second N x F buffer).
The values are ``torch.sparse.mm``'s, bit for bit, in both directions.
"""

from __future__ import annotations

import warnings

import torch

# The attribute that holds a matrix's transpose (``_SYMMETRIC`` when it is the matrix).
_KEY = "_grb_dist_transpose"
_SYMMETRIC = "symmetric"


def _is_csr(adj) -> bool:
    return isinstance(adj, torch.Tensor) and adj.layout == torch.sparse_csr


def propagate(adj: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """``adj @ h`` for a sparse CSR ``adj`` (constant) and a dense ``h`` (N x F),
    differentiable in ``h``; ``torch.sparse.mm`` otherwise (other layouts, autocast)."""
    if not _is_csr(adj) or h.dim() != 2 or torch.is_autocast_enabled(h.device.type):
        return torch.sparse.mm(adj, h)
    return _Product.apply(h, adj)


def transpose(adj: torch.Tensor) -> torch.Tensor:
    """``adj^T`` as CSR, computed once per matrix and kept on it; ``adj`` itself when the
    two are equal (a symmetric matrix: no second copy is kept)."""
    kept = getattr(adj, _KEY, None)
    if kept is None:
        with warnings.catch_warnings():  # torch flags sparse CSR as beta
            warnings.simplefilter("ignore", UserWarning)
            at = adj.t().to_sparse_csr()
        same = (torch.equal(at.crow_indices(), adj.crow_indices()) and torch.equal(at.col_indices(), adj.col_indices())
                and torch.equal(at.values(), adj.values()))
        kept = _SYMMETRIC if same else at
        setattr(adj, _KEY, kept)
    return adj if isinstance(kept, str) else kept


def product(adj: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """``adj @ h`` (sparse CSR times dense, no autograd) written straight into its output:
    ``torch.sparse.mm``'s values without its second N x F buffer."""
    return torch.mm(adj, h.contiguous(), out=h.new_empty(adj.shape[0], h.shape[1]))


class _Product(torch.autograd.Function):
    """``adj @ h``; the backward pass is ``adj^T @ grad`` with the kept transpose."""

    @staticmethod
    def forward(ctx, h, adj):
        ctx.adj = adj
        return product(adj, h)

    @staticmethod
    def backward(ctx, grad):
        return product(transpose(ctx.adj), grad), None


def gcn_conv(layer: torch.nn.Module, h: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
    """``torch_geometric``'s ``GCNConv`` without its own normalisation (``normalize=False``)
    on a propagation matrix ``adj``: its linear map, :func:`propagate` and its bias; the
    layer itself for any other kind of graph argument, or when it normalises."""
    if not _is_csr(adj) or layer.normalize:
        return layer(h, adj)
    out = propagate(adj, layer.lin(h))
    return out if layer.bias is None else out + layer.bias


def appnp(prop: torch.nn.Module, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
    """``torch_geometric``'s ``APPNP`` propagation module ``prop`` (``normalize=False``, no
    edge dropout) on a propagation matrix ``adj``: ``K`` steps of
    ``x <- (1 - alpha) adj x + alpha h`` with :func:`propagate`, the same arithmetic in
    the same order; the module itself for any other graph argument, with its own
    normalisation or with edge dropout."""
    if not _is_csr(adj) or prop.normalize or (prop.dropout > 0 and prop.training):
        return prop(x, adj)
    h = x
    for _ in range(prop.K):
        x = propagate(adj, x)
        x = x * (1 - prop.alpha)
        x = x + prop.alpha * h
    return x
