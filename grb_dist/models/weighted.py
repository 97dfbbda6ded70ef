"""Models evaluated on edge-weighted graphs, differentiable in the weights.

Adaptive modification attacks (Mujkanovic et al., 2022) differentiate a defense's loss in
the weights of node pairs. A model class takes part in two ways:

* it declares its program (:meth:`grb_dist.models.base.GraphModel.incremental`), which the
  attacks' :class:`~grb_dist.attacks.shared.weighted.WeightedSurrogate` replays on a
  weighted graph (the fast path); or
* it defines ``weighted_forward(x, edge_index, edge_weight) -> logits``: ``edge_index``
  2 x E (both directions), ``edge_weight`` E, differentiable in ``edge_weight`` and ``x``;
  an entry of weight 0 has the value of an absent edge but still carries a gradient, and
  with every weight 1 the result equals ``forward(x, edge_index)`` (eval mode).

This module holds the shared pieces: the weighted propagation operators, the weighted
softmax of attention layers and :func:`weighted_logits`, which evaluates any model with
either declaration on an explicit weighted edge list (used by ``<model>_lp``). Everything
is O(E F) time: sparse products and gathers over the edges, never an N x N matrix;
:func:`propagate` holds no E x F tensor either.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

import torch
from torch import nn

from grb_dist.core.errors import ConfigError
from grb_dist.models.propagation import product

#: The propagation operators that are functions of edge weights (see
#: :data:`grb_dist.attacks.shared.incremental.KINDS`; ``att`` is not).
WEIGHTED_KINDS = ("gcn", "sym", "sum", "mean")


def declares_program(model: nn.Module) -> bool:
    """True when ``model``'s own class declares its incremental program (the same test as
    :func:`grb_dist.attacks.shared.incremental.supports_incremental`)."""
    own = type(model).__dict__
    return "incremental_layer" in own or "incremental" in own


def has_weighted_forward(model: nn.Module) -> bool:
    """True when ``model``'s class defines ``weighted_forward``."""
    return callable(getattr(type(model), "weighted_forward", None))


def without_self_loops(edge_index: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    keep = edge_index[0] != edge_index[1]
    return edge_index[:, keep], weight[keep]


def with_self_loops(edge_index: torch.Tensor, weight: torch.Tensor, n: int,
                    fill: torch.Tensor | float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The edges (self-loops removed) followed by one self-loop per node of weight ``fill``."""
    edge_index, weight = without_self_loops(edge_index, weight)
    loops = torch.arange(n, device=edge_index.device)
    fill_t = torch.as_tensor(fill, dtype=weight.dtype, device=weight.device).expand(n)
    return torch.cat([edge_index, torch.stack([loops, loops])], dim=1), torch.cat([weight, fill_t])


def weighted_degree(edge_index: torch.Tensor, weight: torch.Tensor, n: int) -> torch.Tensor:
    """In-degree of every node: the sum of its in-edges' weights (target = ``edge_index[1]``)."""
    return torch.zeros(n, dtype=weight.dtype, device=weight.device).index_add(0, edge_index[1], weight)


def inv_power(d: torch.Tensor, power: float) -> torch.Tensor:
    """``d ** -power`` with 0 where ``d`` is 0 (a finite gradient there)."""
    return torch.where(d > 0, d.clamp_min(1e-12).pow(-power), torch.zeros_like(d))


#: Whether :func:`plain_kernels` is on (see there).
_PLAIN: ContextVar[bool] = ContextVar("grb_dist_plain_kernels", default=False)


@contextmanager
def switched_on(var: ContextVar[bool]) -> Iterator[None]:
    """``var`` set to True within this block (reentrant; restored on the way out)."""
    token = var.set(True)
    try:
        yield
    finally:
        var.reset(token)


def plain_kernels():
    """Within this block, models whose fused kernels have a backward pass that is not
    itself differentiable (GNNGuard's edge cosine, R-GCN's Gaussian messages) compute the
    same values with plain autograd operators instead. A meta-gradient (the gradient
    through an unrolled training, adaptive poisoning) differentiates the backward pass; the
    plain forms allow that at the cost of the E x d and N x F intermediates the fused
    kernels avoid. Reentrant."""
    return switched_on(_PLAIN)


def plain_kernels_on() -> bool:
    """True inside :func:`plain_kernels`."""
    return _PLAIN.get()


#: The CSR structures kept inside :func:`kept_structures` (``None`` outside: nothing is kept).
_KEPT: ContextVar[dict | None] = ContextVar("grb_dist_kept_structures", default=None)
#: Most structures kept at once (the oldest goes first).
KEPT_STRUCTURES = 16


@contextmanager
def kept_structures() -> Iterator[None]:
    """Within this block, the weighted sparse products compute the CSR structure of the
    same edge tensors once (an unrolled training propagates over one edge list hundreds of
    times, forward and backward, and sorting it again each time is much of a meta-gradient's
    cost; figures: docs/performance.md, section "Adaptive poisoning"). Reentrant; what was
    kept is dropped on leaving."""
    if _KEPT.get() is not None:
        yield
        return
    token = _KEPT.set({})
    try:
        yield
    finally:
        _KEPT.reset(token)


def _structure(row: torch.Tensor, col: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`csr_structure`, kept inside :func:`kept_structures`. An entry holds its
    tensors, so no other tensor can take their memory (and key) while it is kept."""
    kept = _KEPT.get()
    if kept is None:
        return csr_structure(row, col, n)
    key = (row.data_ptr(), col.data_ptr(), row.numel(), row.stride(), col.stride(), row.dtype, n, row._version,
           col._version)
    hit = kept.get(key)
    if hit is None:
        if len(kept) >= KEPT_STRUCTURES:
            kept.pop(next(iter(kept)))
        hit = kept[key] = ((row, col), csr_structure(row, col, n))
    return hit[1]


def csr_structure(row: torch.Tensor, col: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The CSR structure of the ``(row, col)`` pairs of an n x n matrix: ``(crow, col
    sorted, perm)``, where ``perm`` sorts the pairs (values in CSR order are ``values[perm]``)."""
    perm = torch.argsort(row * n + col, stable=True)
    counts = torch.bincount(row, minlength=n)
    crow = torch.zeros(n + 1, dtype=torch.long, device=row.device)
    crow[1:] = torch.cumsum(counts, 0)
    return crow, col[perm], perm


def csr_matrix(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, n: int) -> torch.Tensor:
    """An n x n torch CSR tensor (no invariant checks: the structure comes from
    :func:`csr_structure`)."""
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, values, (n, n), check_invariants=False)


def sampled_dot(crow: torch.Tensor, col: torch.Tensor, perm: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                n: int) -> torch.Tensor:
    """``out_e = <a[row_e], b[col_e]>`` for the pairs of a :func:`csr_structure`, in the
    pairs' own order: a sampled dense-dense product (``torch.sparse.sampled_addmm``), no
    E x F tensor."""
    pattern = csr_matrix(crow, col, torch.zeros(col.numel(), dtype=a.dtype, device=a.device), n)
    sampled = torch.sparse.sampled_addmm(pattern, a, b.t(), beta=0.0).values()
    out = torch.empty_like(sampled)
    out[perm] = sampled
    return out


class _WeightedSpmm(torch.autograd.Function):
    """``out = A h`` with ``A[dst_e, src_e] = w_e``, as a sparse-dense product (CSR), with
    gradients in ``h`` (the transposed product) and in ``w`` (``<grad_out[dst_e],
    h[src_e]>``, a sampled dense-dense product): no E x F tensor in either direction."""

    @staticmethod
    def forward(ctx, h, src, dst, weight, n):
        crow, col, perm = _structure(dst, src, n)
        out = product(csr_matrix(crow, col, weight[perm], n), h)
        ctx.save_for_backward(h, src, dst, weight, crow, col, perm)
        ctx.n = n
        return out

    @staticmethod
    def backward(ctx, grad):
        h, src, dst, weight, crow, col, perm = ctx.saved_tensors
        n = ctx.n
        grad = grad.contiguous()
        grad_h = grad_w = None
        if torch.is_grad_enabled():  # a differentiable backward (create_graph: meta-gradients)
            if ctx.needs_input_grad[0]:
                grad_h = _WeightedSpmm.apply(grad, dst, src, weight, n)
            if ctx.needs_input_grad[3]:
                grad_w = _SampledDot.apply(grad, h, src, dst, n)
            return grad_h, None, None, grad_w, None
        if ctx.needs_input_grad[0]:
            crow_t, col_t, perm_t = _structure(src, dst, n)
            grad_h = product(csr_matrix(crow_t, col_t, weight[perm_t], n), grad)
        if ctx.needs_input_grad[3]:
            grad_w = sampled_dot(crow, col, perm, grad, h, n)
        return grad_h, None, None, grad_w, None


class _SampledDot(torch.autograd.Function):
    """``out_e = <g[dst_e], h[src_e]>``, the edge-weight gradient of :class:`_WeightedSpmm`,
    itself differentiable (its gradients are weighted sparse products), so that a training
    step through a weighted model can be differentiated again."""

    @staticmethod
    def forward(ctx, g, h, src, dst, n):
        crow, col, perm = _structure(dst, src, n)
        ctx.save_for_backward(g, h, src, dst)
        ctx.n = n
        return sampled_dot(crow, col, perm, g.contiguous(), h.contiguous(), n)

    @staticmethod
    def backward(ctx, grad_out):
        g, h, src, dst = ctx.saved_tensors
        grad_g = _WeightedSpmm.apply(h, src, dst, grad_out, ctx.n) if ctx.needs_input_grad[0] else None
        grad_h = _WeightedSpmm.apply(g, dst, src, grad_out, ctx.n) if ctx.needs_input_grad[1] else None
        return grad_g, grad_h, None, None, None


def propagate(h: torch.Tensor, edge_index: torch.Tensor, weight: torch.Tensor, n: int) -> torch.Tensor:
    """``out_i = sum_j w_ji h_j`` over the edges ``j -> i`` (any trailing shape of ``h``):
    a sparse-dense product, differentiable in ``h`` and ``weight``, that never holds an
    E x F message tensor."""
    src, dst = edge_index
    if src.numel() == 0:
        return h.new_zeros((n, *h.shape[1:])) + 0 * weight.sum()
    flat = h.reshape(h.shape[0], -1)
    out = _WeightedSpmm.apply(flat.contiguous(), src, dst, weight.to(h.dtype), n)
    return out.reshape(n, *h.shape[1:])


def operator(kind: str, edge_index: torch.Tensor, weight: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The entries ``(edge_index, values)`` of propagation operator ``kind`` (one of
    :data:`WEIGHTED_KINDS`) on the weighted graph, with weighted degrees."""
    edge_index, weight = without_self_loops(edge_index, weight)
    d = weighted_degree(edge_index, weight, n)
    src, dst = edge_index
    if kind == "gcn":  # D~^-1/2 (A + I) D~^-1/2, D~ = D + I
        inv = inv_power(d + 1, 0.5)
        edge_index, weight = with_self_loops(edge_index, weight, n)
        return edge_index, inv[edge_index[0]] * weight * inv[edge_index[1]]
    if kind == "sym":
        inv = inv_power(d, 0.5)
        return edge_index, inv[src] * weight * inv[dst]
    if kind == "mean":
        return edge_index, weight * inv_power(d, 1.0)[dst]
    if kind == "sum":
        return edge_index, weight
    raise ConfigError(f"the {kind!r} operator is not differentiable in edge weights; use one of {WEIGHTED_KINDS}")


def weighted_softmax(e: torch.Tensor, weight: torch.Tensor, index: torch.Tensor, n: int) -> torch.Tensor:
    """``alpha_k = w_k exp(e_k) / sum_{k' -> same target} w_k' exp(e_k')`` (E x H) over the
    entries grouped by ``index`` (their targets): the softmax of attention layers with edge
    weights; weight 0 is an absent edge with a finite gradient, all weights 1 the softmax."""
    heads = e.shape[1:]
    top = torch.full((n, *heads), float("-inf"), dtype=e.dtype, device=e.device)
    top = top.scatter_reduce(0, index.view(-1, *([1] * len(heads))).expand_as(e), e.detach(), "amax")
    num = weight.to(e.dtype).view(-1, *([1] * len(heads))) * torch.exp(e - top[index])
    den = torch.zeros((n, *heads), dtype=e.dtype, device=e.device).index_add(0, index, num)
    return num / (den[index] + 1e-16)


def attention(xl: torch.Tensor, a_src: torch.Tensor, a_dst: torch.Tensor, edge_index: torch.Tensor,
              weight: torch.Tensor, negative_slope: float) -> torch.Tensor:
    """GAT aggregation with self-loops of weight 1 on a weighted graph: ``out_i = sum_j
    alpha_ij xl_j`` with the weighted softmax of ``leaky(a_src_j + a_dst_i)``; ``xl`` is
    N x heads x C, ``a_src`` / ``a_dst`` N x heads."""
    n = xl.shape[0]
    edge_index, weight = with_self_loops(edge_index, weight, n)
    src, dst = edge_index
    e = torch.nn.functional.leaky_relu(a_src[src] + a_dst[dst], negative_slope)
    return propagate_attention(xl, weighted_softmax(e, weight, dst, n), edge_index, n)


def propagate_attention(xl: torch.Tensor, alpha: torch.Tensor, edge_index: torch.Tensor, n: int) -> torch.Tensor:
    """``out_i = sum_j alpha_ji xl_j`` per head (``alpha`` E x heads, ``xl`` N x heads x C)."""
    src, dst = edge_index
    msg = xl[src] * alpha.unsqueeze(-1)
    return torch.zeros((n, *xl.shape[1:]), dtype=msg.dtype, device=xl.device).index_add(0, dst, msg)


def gat_layer(layer: nn.Module, h: torch.Tensor, edge_index: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``torch_geometric``'s ``GATConv`` (self-loops added, eval mode) on a weighted graph."""
    heads, c = layer.heads, layer.out_channels
    xl = layer.lin(h).view(-1, heads, c)
    a_src, a_dst = (xl * layer.att_src).sum(-1), (xl * layer.att_dst).sum(-1)
    out = attention(xl, a_src, a_dst, edge_index, weight, layer.negative_slope)
    return finish_heads(layer, out, h)


def finish_heads(layer: nn.Module, out: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """Concatenate (or average) the heads, add the residual and the bias, as GAT layers do."""
    out = out.reshape(out.shape[0], -1) if layer.concat else out.mean(dim=1)
    if getattr(layer, "res", None) is not None:
        out = out + layer.res(h)
    return out if layer.bias is None else out + layer.bias


class EdgeListOps:
    """The operations of a model's program (:class:`grb_dist.attacks.shared.incremental.Ops`)
    evaluated on an explicit weighted edge list; handles are plain tensors."""

    def __init__(self, edge_index: torch.Tensor, edge_weight: torch.Tensor, num_nodes: int):
        self.edge_index, self.edge_weight, self.n = edge_index, edge_weight, num_nodes
        self._operators: dict[str, tuple] = {}

    def map(self, fn: Callable[..., torch.Tensor], *hs: torch.Tensor) -> torch.Tensor:
        return fn(*hs)

    def propagate(self, h: torch.Tensor, kind: str) -> torch.Tensor:
        if kind not in self._operators:
            self._operators[kind] = operator(kind, self.edge_index, self.edge_weight, self.n)
        ei, w = self._operators[kind]
        flat = h.reshape(h.shape[0], -1)
        return propagate(flat, ei, w, self.n).reshape(h.shape)

    def attend(self, xl, a_src, a_dst, negative_slope):
        return attention(xl, a_src, a_dst, self.edge_index, self.edge_weight, negative_slope)


def weighted_logits(model: nn.Module, x: torch.Tensor, edge_index: torch.Tensor,
                    edge_weight: torch.Tensor) -> torch.Tensor:
    """``model``'s eval-mode logits on the weighted graph: its ``weighted_forward`` when its
    class defines one, else its declared program on the edge list; :class:`ConfigError`
    when it has neither."""
    if has_weighted_forward(model):
        return model.weighted_forward(x, edge_index, edge_weight)
    if declares_program(model):
        return model.incremental(EdgeListOps(edge_index, edge_weight, x.shape[0]), x)
    raise ConfigError(
        f"{type(model).__name__} is not differentiable in edge weights: declare GraphModel.incremental "
        "or weighted_forward(x, edge_index, edge_weight)"
    )


__all__ = [
    "EdgeListOps", "KEPT_STRUCTURES", "WEIGHTED_KINDS", "attention", "csr_matrix", "csr_structure", "declares_program", "gat_layer",
    "has_weighted_forward", "kept_structures", "operator", "propagate", "propagate_attention", "sampled_dot", "weighted_degree",
    "weighted_logits", "weighted_softmax", "with_self_loops", "without_self_loops",
]
