"""GAT's attention layer (``torch_geometric``'s ``GATConv``) without per-edge feature tensors.

``GATConv`` gathers every edge's source features and multiplies them by the edge's attention
coefficient: two E x heads x C tensors, the first kept for the backward pass (and the
backward pass makes as many again). :func:`gat_conv` computes the same layer with the
layer's own parameters, from the same attention coefficients (the same logits, softmax and
dropout, in the same edge order, so the same random dropout mask), but aggregates them with
sparse products, one per head:

* forward: ``out_h = A_h @ xl_h``, ``A_h[i, j] = alpha_jih`` (a CSR matrix, rows = targets);
* backward: ``d xl_h = A_h^T @ d out_h`` (a CSR matrix with rows = sources) and
  ``d alpha_eh = <d out[dst_e, h], xl[src_e, h]>``, a sampled dense-dense product (SDDMM,
  ``torch.sparse.sampled_addmm``) over blocks of target rows of about ``chunk`` edges.

What the backward pass keeps is ``xl`` (N x heads x C) and the coefficients (E x heads), never
an E x heads x C tensor. The CSR structures of a graph (:class:`AttentionGraph`) are built
once per graph by the models (their propagation cache) and derived without sorting again
for GNNGuard's pruned edges (:meth:`AttentionGraph.derived`).

The values equal ``GATConv``'s up to float rounding (the sums run in another order);
``tests/test_gat_lean.py`` checks outputs and gradients against it. :func:`pyg_attention`
switches the models back to ``GATConv``'s own forward (``bench/training/gat_memory.py``
compares the two); under autocast and inside :func:`~grb_dist.models.weighted.plain_kernels`
(a gradient of a gradient) the models use it too.
"""

from __future__ import annotations

import warnings
from contextvars import ContextVar
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable
from torch_geometric.utils import softmax

from grb_dist.models.propagation import product
from grb_dist.models.weighted import csr_structure, finish_heads, plain_kernels_on, switched_on

#: Edges per block of the backward pass's sampled product (a block is whole target rows).
EDGE_CHUNK = 1 << 20

Structure = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # (crow, col, perm): csr_structure

_PYG: ContextVar[bool] = ContextVar("grb_dist_pyg_attention", default=False)


def pyg_attention():
    """Within this block, GAT and GATGuard run ``GATConv``'s own forward (per-edge messages),
    for comparisons. Reentrant."""
    return switched_on(_PYG)


def lean_attention(layer: nn.Module, h: torch.Tensor) -> bool:
    """Whether :func:`gat_conv` computes ``layer`` on ``h``: a ``GATConv`` with one linear
    map and no edge features, outside :func:`pyg_attention`, autocast and
    :func:`~grb_dist.models.weighted.plain_kernels` (its backward pass is not differentiable)."""
    return (not _PYG.get() and not plain_kernels_on() and not torch.is_autocast_enabled(h.device.type)
            and getattr(layer, "lin", None) is not None and getattr(layer, "lin_edge", None) is None)


@dataclass(frozen=True)
class AttentionGraph:
    """The edges a layer attends over and their CSR structures both ways.

    ``edge_index``: 2 x E (sources, targets) in the order the attention coefficients are
    computed in (``GATConv``'s: self-loops removed, then one per node appended); ``by_dst``:
    the :func:`~grb_dist.models.weighted.csr_structure` with rows = targets, ``by_src`` with
    rows = sources (``perm`` maps CSR positions to edges)."""

    edge_index: torch.Tensor
    by_dst: Structure
    by_src: Structure

    @property
    def num_nodes(self) -> int:
        return self.by_dst[0].numel() - 1

    @classmethod
    def of(cls, edge_index: torch.Tensor, num_nodes: int, self_loops: bool = True) -> "AttentionGraph":
        """The graph ``GATConv`` attends over: with ``self_loops``, the edges without their
        self-loops followed by one self-loop per node (``add_self_loops=True``); otherwise
        the edges as they are."""
        if not self_loops:
            src, dst = edge_index
            return cls(edge_index, csr_structure(dst, src, num_nodes), csr_structure(src, dst, num_nodes))
        edge_index = edge_index[:, edge_index[0] != edge_index[1]]
        src, dst = edge_index
        base = cls(edge_index, csr_structure(dst, src, num_nodes), csr_structure(src, dst, num_nodes))
        return base.derived(None, loops=True)

    def derived(self, keep: torch.Tensor | None, loops: bool) -> "AttentionGraph":
        """The graph of this one's edges where ``keep`` (all when ``None``), in their order,
        followed with ``loops`` by one self-loop per node, without sorting anything again;
        this graph must have no self-loops when ``loops`` is set."""
        n = self.num_nodes
        edge_index = self.edge_index if keep is None else self.edge_index[:, keep]
        if loops:
            nodes = torch.arange(n, device=edge_index.device)
            edge_index = torch.cat([edge_index, torch.stack([nodes, nodes])], dim=1)
        return AttentionGraph(edge_index, _derive(self.by_dst, keep, loops), _derive(self.by_src, keep, loops))


def _derive(structure: Structure, keep: torch.Tensor | None, loops: bool) -> Structure:
    """A CSR structure restricted to the kept edges (renumbered in their order) and, with
    ``loops``, with the entry ``(i, i)`` of every row inserted where it sorts (edge number
    ``kept + i``); columns stay sorted within rows."""
    crow, col, perm = structure
    n = crow.numel() - 1
    if keep is not None:
        kept = keep[perm]  # in CSR order
        rank = torch.cumsum(keep, 0) - 1  # an edge's number among the kept edges
        done = torch.zeros(kept.numel() + 1, dtype=torch.long, device=crow.device)
        done[1:] = torch.cumsum(kept, 0)
        crow, col, perm = done[crow], col[kept], rank[perm[kept]]
    if not loops:
        return crow, col, perm
    e = col.numel()
    counts = crow.diff()
    rows = torch.arange(n, device=crow.device)
    row_of = torch.repeat_interleave(rows, counts, output_size=e)
    after = col > row_of  # entries that go after their row's self-loop
    new_crow = crow + torch.arange(n + 1, device=crow.device)
    before = counts - torch.bincount(row_of[after], minlength=n)
    at = new_crow[:-1] + before
    pos = torch.arange(e, device=crow.device) + row_of + after
    new_col, new_perm = col.new_empty(e + n), perm.new_empty(e + n)
    new_col[pos], new_perm[pos] = col, perm
    new_col[at], new_perm[at] = rows, rows + e
    return new_crow, new_col, new_perm


def _csr(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, values, shape, check_invariants=False)


def spmm_heads(structure: Structure, alpha: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``out[r, h] = sum over the structure's entries (r, c) of alpha[e, h] x[c, h]`` (``e``
    the entry's edge): one CSR product per head; ``alpha`` E x heads, ``x`` N x heads x C."""
    crow, col, perm = structure
    n, heads = crow.numel() - 1, alpha.shape[1]
    values = alpha.t()[:, perm]  # heads x E, in CSR order
    out = [product(_csr(crow, col, values[h].contiguous(), (n, x.shape[0])), x[:, h]) for h in range(heads)]
    return torch.stack(out, dim=1)


def _row_blocks(crow: torch.Tensor, chunk: int) -> list[tuple[int, int]]:
    """Consecutive row ranges of about ``chunk`` entries each (a row's entries never split)."""
    e, n = int(crow[-1]), crow.numel() - 1
    if e <= chunk:
        return [(0, n)]
    cuts = torch.searchsorted(crow, torch.arange(chunk, e, chunk, device=crow.device), right=True) - 1
    bounds = [0, *sorted(set(cuts.tolist())), n]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def sddmm_heads(structure: Structure, g: torch.Tensor, x: torch.Tensor, chunk: int = EDGE_CHUNK) -> torch.Tensor:
    """``out[e, h] = <g[r_e, h], x[c_e, h]>`` for every entry ``(r_e, c_e)`` of the structure,
    by edge (E x heads): a sampled dense-dense product per head and block of about ``chunk``
    entries; nothing per edge but the block's values is allocated."""
    crow, col, perm = structure
    heads = g.shape[1]
    out = g.new_empty(col.numel(), heads)
    for h in range(heads):
        gh, xt = g[:, h].contiguous(), x[:, h].contiguous().t()
        for a, b in _row_blocks(crow, chunk):
            e0, e1 = int(crow[a]), int(crow[b])
            if e1 == e0:
                continue
            pattern = _csr(crow[a:b + 1] - e0, col[e0:e1], g.new_zeros(e1 - e0), (b - a, x.shape[0]))
            out[perm[e0:e1], h] = torch.sparse.sampled_addmm(pattern, gh[a:b], xt, beta=0.0).values()
    return out


class _Aggregate(torch.autograd.Function):
    """``out[i, h] = sum_(j -> i) alpha[e, h] xl[j, h]`` over an :class:`AttentionGraph`, with
    its gradients in ``xl`` and ``alpha`` (module docstring)."""

    @staticmethod
    def forward(ctx, xl, alpha, graph, chunk):
        ctx.save_for_backward(xl, alpha)
        ctx.graph, ctx.chunk = graph, chunk
        return spmm_heads(graph.by_dst, alpha, xl)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        xl, alpha = ctx.saved_tensors
        grad = grad.contiguous()
        grad_xl = spmm_heads(ctx.graph.by_src, alpha, grad) if ctx.needs_input_grad[0] else None
        grad_alpha = sddmm_heads(ctx.graph.by_dst, grad, xl, ctx.chunk) if ctx.needs_input_grad[1] else None
        return grad_xl, grad_alpha, None, None


def aggregate(xl: torch.Tensor, alpha: torch.Tensor, graph: AttentionGraph, chunk: int = EDGE_CHUNK) -> torch.Tensor:
    """The attention-weighted sum of the sources' ``xl`` (N x heads x C) at every target, with
    the coefficients ``alpha`` (E x heads, in ``graph.edge_index``'s order)."""
    return _Aggregate.apply(xl, alpha, graph, max(1, int(chunk)))


def gat_conv(layer: nn.Module, x: torch.Tensor, graph: AttentionGraph, log_weight: torch.Tensor | None = None,
             chunk: int = EDGE_CHUNK) -> torch.Tensor:
    """``layer`` (a ``GATConv``) on ``x`` over ``graph``, whose edges are the ones the layer
    attends over (its self-loops already in place); ``log_weight`` (E) shifts the logits
    before the softmax (GNNGuard's ``GuardGATConv``)."""
    heads, c = layer.heads, layer.out_channels
    xl = layer.lin(x).view(-1, heads, c)
    a_src, a_dst = (xl * layer.att_src).sum(-1), (xl * layer.att_dst).sum(-1)
    src, dst = graph.edge_index
    e = F.leaky_relu(a_src[src] + a_dst[dst], layer.negative_slope)
    if log_weight is not None:
        e = e + log_weight.view(-1, 1)
    alpha = softmax(e, dst, num_nodes=x.shape[0])
    alpha = F.dropout(alpha, p=layer.dropout, training=layer.training)
    return finish_heads(layer, aggregate(xl, alpha, graph, chunk), x)


__all__ = [
    "EDGE_CHUNK", "AttentionGraph", "aggregate", "gat_conv", "lean_attention", "pyg_attention", "sddmm_heads",
    "spmm_heads",
]
