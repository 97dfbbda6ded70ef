"""GNNGuard (Zhang & Zitnik, 2020): edge re-weighting by feature similarity, layer by layer.

Before every graph layer, each edge ``(j -> i)`` that the earlier layers kept gets the
cosine similarity of its endpoints' current representations (the layer's input), computed
on the edges only (O(E d) time as a sampled dense-dense product, O(E) memory plus one
normalised copy of the features; never an N x N matrix):

1. ``s_ij = cos(h_i, h_j)``; edges with ``s_ij < threshold`` (or ``s_ij <= 0``) are dropped,
   at this layer and every later one: the pruning is cumulative, as in the authors' code,
   DeepRobust's and the original GRB's, where each layer re-weights the graph the previous
   layer left (an edge pruned at the first layer never reaches the second);
2. row normalisation over each node's kept in-edges: ``a_ij = s_ij / sum_k s_ik``;
3. optional self-weight: a self-loop with ``a_ii = 1 / (1 + d_i)``, ``d_i`` = kept edges;
4. the layer aggregates with these weights (GCN: ``out_i = sum_j a_ij W h_j + b``;
   GAT: attention logits get ``+ log a_ij`` before the softmax, i.e. the attention is
   re-weighted by ``a_ij`` and renormalised).

Everything but the drop decision is differentiable, so an adaptive attack sees through the
defense.

Edge weights (adaptive modification attacks, ``weighted_forward``): an input edge weight
``w_ij`` multiplies the similarity before the row normalisation, ``a_ij = w_ij s_ij / sum_k
w_ik s_ik``, and the self-weight uses the weighted kept degree ``1 / (1 + sum_k w_ik)``; the
GAT backbone takes ``a`` in a weighted softmax (``a_ij exp(e_ij) / sum_k a_ik exp(e_ik)``,
equal to the ``+ log a_ij`` shift for positive ``a``, with weight 0 = absent edge). The hard
pruning (``s_ij < threshold``) stays as in ``forward``: the mask is piecewise constant, so
pruned pairs get zero gradient and the gradient is that of the soft-weighted version within
the current mask (a surrogate of the non-differentiable drop). With every weight 1 the
values equal ``forward``.

Differences to the authors' code, on purpose: no dense N x N similarity; the weights are the
paper's ``a_ij`` (the authors' code passes ``exp(a_ij)`` to a GCN layer that normalises them
again, the original GRB ``exp(a_ij)`` unnormalised: the two references disagree there); the
similarities are differentiable (the authors' code computes them in NumPy, so neither its
training nor an attack sees through them); no learned edge-pruning layer and no ``beta``
memory gate (both off in the authors' code too).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv, GCNConv
from torch_geometric.utils import scatter, softmax

from grb_dist.core.errors import ConfigError
from grb_dist.models.attention import AttentionGraph, gat_conv, lean_attention
from grb_dist.models.base import GraphModel, ModelConfig
from grb_dist.models.propagation import product
from grb_dist.models.weighted import (
    csr_matrix, csr_structure, finish_heads, plain_kernels_on, propagate, propagate_attention, sampled_dot,
    weighted_softmax,
)

@dataclass(frozen=True)
class GNNGuardConfig(ModelConfig):
    """GNNGuard hyper-parameters (GCN backbone).

    Attributes:
        threshold: edges whose cosine similarity is below this are dropped; in [0, 1]
            (original: 0.1).
        self_weight: add a self-loop of weight ``1 / (1 + kept degree)``.
    """

    hidden_sizes: tuple[int, ...] = (64, 64)
    dropout: float = 0.1
    threshold: float = 0.1
    self_weight: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.threshold <= 1.0:
            raise ConfigError(f"GNNGuard threshold must be in [0, 1], got {self.threshold}")


@dataclass(frozen=True)
class GATGuardConfig(GNNGuardConfig):
    """GNNGuard with a GAT backbone. Attributes: heads: attention heads of hidden layers."""

    heads: int = 4

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.heads < 1:
            raise ConfigError(f"GATGuard heads must be >= 1, got {self.heads}")


@dataclass(frozen=True)
class EdgePattern:
    """The edges of a graph without self-loops and their CSR structures both ways
    (:func:`~grb_dist.models.weighted.csr_structure`: rows = sources, and rows = targets),
    built once per graph (the models keep it with their propagation cache) instead of once
    per layer and forward pass.

    ``loops``: the input edges that are self-loops (removed; ``None`` when there are none),
    so that input edge weights can be matched to :attr:`edge_index`. ``symmetric``: both
    structures are the same pattern (every edge's reverse is an edge too, as in an
    undirected graph)."""

    edge_index: torch.Tensor
    loops: torch.Tensor | None
    by_src: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    by_dst: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    symmetric: bool = False

    @classmethod
    def of(cls, edge_index: torch.Tensor, num_nodes: int) -> "EdgePattern":
        loops = edge_index[0] == edge_index[1]
        if bool(loops.any()):
            edge_index = edge_index[:, ~loops]
        else:
            loops = None
        src, dst = edge_index
        by_src, by_dst = csr_structure(src, dst, num_nodes), csr_structure(dst, src, num_nodes)
        return cls(edge_index, loops, by_src, by_dst, _same_pattern(by_src, by_dst))

    def weights(self, edge_weight: torch.Tensor | None) -> torch.Tensor | None:
        """``edge_weight`` of the input edges restricted to :attr:`edge_index`."""
        return edge_weight if edge_weight is None or self.loops is None else edge_weight[~self.loops]


class _EdgeCosine(torch.autograd.Function):
    """``out_e = cos(h[src_e], h[dst_e])`` for every edge of an :class:`EdgePattern`, as a
    sampled dense-dense product (SDDMM, ``torch.sparse.sampled_addmm``) of the normalised
    rows; the backward pass is two sparse-dense products (one when the edges are
    symmetric: the sum of the two matrices has their pattern). No E x d tensor in either
    direction, and only ``h`` is kept (the normalised copy is made again in the backward
    pass; ``h`` is the layer's input, which its linear map keeps anyway)."""

    EPS = 1e-12  # as F.normalize: h / max(|h|, eps)

    @staticmethod
    def forward(ctx, h, crow, col, perm, crow_t, col_t, perm_t, symmetric):
        n = h.size(0)
        hn = h / h.norm(dim=1, keepdim=True).clamp_min(_EdgeCosine.EPS)
        out = sampled_dot(crow, col, perm, hn, hn, n)
        ctx.save_for_backward(h, crow, col, perm, crow_t, col_t, perm_t)
        ctx.symmetric = symmetric
        return out

    @staticmethod
    def backward(ctx, grad):
        h, crow, col, perm, crow_t, col_t, perm_t = ctx.saved_tensors
        n = h.size(0)
        norm = h.norm(dim=1)
        inv = norm.clamp_min(_EdgeCosine.EPS).reciprocal_()  # hn = h * inv (row-wise)
        g = grad.contiguous()
        # d out_e / d hn[src] = hn[dst], d out_e / d hn[dst] = hn[src]: gh = G hn = (G inv) h,
        # the row scaling folded into the matrix's values (no N x d copy of hn); one product
        # with each structure, or one with their sum when they are the same pattern
        if ctx.symmetric:
            gh = product(csr_matrix(crow, col, (g[perm] + g[perm_t]) * inv[col], n), h)
        else:
            gh = product(csr_matrix(crow, col, g[perm] * inv[col], n), h)
            gh += product(csr_matrix(crow_t, col_t, g[perm_t] * inv[col_t], n), h)
        # through hn = h / max(|h|, eps): (gh - hn <gh, hn>) / |h|, or gh / eps below eps
        dot = torch.einsum("ij,ij->i", gh, h).mul_(inv).masked_fill_(norm <= _EdgeCosine.EPS, 0)
        grad_h = gh.addcmul_(h, dot.mul_(inv).unsqueeze_(1), value=-1).mul_(inv.unsqueeze(1))
        return grad_h, None, None, None, None, None, None, None


def _same_pattern(a: tuple[torch.Tensor, ...], b: tuple[torch.Tensor, ...]) -> bool:
    """Whether two :func:`csr_structure` results have the same rows and columns."""
    return torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def edge_cosine(h: torch.Tensor, edge_index: torch.Tensor | EdgePattern) -> torch.Tensor:
    """Cosine similarity of the endpoints of every edge (of ``edge_index``, or of an
    :class:`EdgePattern`'s edges), differentiable in ``h``."""
    if plain_kernels_on():  # a meta-gradient differentiates the backward pass: plain operators
        src, dst = edge_index.edge_index if isinstance(edge_index, EdgePattern) else edge_index
        hn = F.normalize(h, dim=1, eps=_EdgeCosine.EPS)
        return (hn[src] * hn[dst]).sum(1)
    if isinstance(edge_index, EdgePattern):
        return _EdgeCosine.apply(h, *edge_index.by_src, *edge_index.by_dst, edge_index.symmetric)
    src, dst = edge_index
    by_src, by_dst = csr_structure(src, dst, h.size(0)), csr_structure(dst, src, h.size(0))
    return _EdgeCosine.apply(h, *by_src, *by_dst, _same_pattern(by_src, by_dst))


def guard_weights(
    h: torch.Tensor, edge_index: torch.Tensor | EdgePattern, threshold: float, self_weight: bool,
    edge_weight: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GNNGuard edge weights from representations ``h`` (N x d).

    Returns ``(edge_index', weight)``: the kept edges (plus self-loops when
    ``self_weight``) and their weights ``a_ij`` (see the module docstring). ``edge_index``
    may be given as its :class:`EdgePattern` (built once per graph). An ``edge_weight`` (E,
    one per input edge) multiplies the similarities before the normalisation and counts in
    the kept degree (``weighted_forward``); ``None`` is weight 1 everywhere.
    """
    n = h.size(0)
    pattern = edge_index if isinstance(edge_index, EdgePattern) else EdgePattern.of(edge_index, n)
    return guard_edges(h, pattern, threshold, self_weight, edge_weight)[1:]


def guard_edges(
    h: torch.Tensor, pattern: EdgePattern, threshold: float, self_weight: bool, edge_weight: torch.Tensor | None = None,
    alive: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`guard_weights` on an :class:`EdgePattern`, and ahead of its results the mask of
    the pattern's edges that are kept (the returned edges are those, in their order, then
    the self-loops). ``alive``: the mask of the pattern's edges the earlier layers kept
    (``None``: all of them); an edge outside it stays pruned."""
    ei, w = pattern.edge_index, pattern.weights(edge_weight)
    n = h.size(0)
    sim = edge_cosine(h, pattern)
    keep = sim >= threshold
    # Edges exactly at a zero similarity carry no weight either (threshold 0).
    keep &= sim > 0
    if alive is not None:
        keep &= alive
    ei, sim = ei[:, keep], sim[keep]
    ones = torch.ones_like(sim)
    if w is not None:
        w = w[keep].to(sim.dtype)
        sim, ones = sim * w, w
    dst = ei[1]
    row_sum = scatter(sim, dst, dim=0, dim_size=n, reduce="sum")
    weight = sim / row_sum[dst].clamp_min(1e-12)
    if self_weight:
        kept_deg = scatter(ones, dst, dim=0, dim_size=n, reduce="sum")
        loops = torch.arange(n, device=h.device)
        ei = torch.cat([ei, torch.stack([loops, loops])], dim=1)
        weight = torch.cat([weight, 1.0 / (1.0 + kept_deg)])
    return keep, ei, weight


class GuardGATConv(GATConv):
    """GATConv whose attention logits are shifted by ``log(edge weight)`` before the
    softmax (the edge weight is passed as ``edge_attr``; no learned edge features)."""

    def edge_update(self, alpha_j, alpha_i, edge_attr, index, ptr, dim_size):
        alpha = alpha_j if alpha_i is None else alpha_j + alpha_i
        if index.numel() == 0:
            return alpha
        alpha = F.leaky_relu(alpha, self.negative_slope)
        if edge_attr is not None:
            alpha = alpha + torch.log(edge_attr.clamp_min(1e-12)).view(-1, 1)
        alpha = softmax(alpha, index, ptr, dim_size)
        return F.dropout(alpha, p=self.dropout, training=self.training)


def _weighted_gcn(layer: GCNConv, h: torch.Tensor, edge_index: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``layer`` (a ``GCNConv`` without its own normalisation) on the guard-weighted edges:
    its linear map, a sparse propagation (:func:`~grb_dist.models.weighted.propagate`: no
    E x F message tensor, which ``GCNConv``'s message passing would hold) and its bias."""
    out = propagate(layer.lin(h), edge_index, weight, h.size(0))
    return out if layer.bias is None else out + layer.bias


class GNNGuard(GraphModel):
    """GCN + GNNGuard ("gcnguard" in GRB, registered as ``gnnguard``).

    ``weighted_forward``: the input weight multiplies the cosine similarity before the row
    normalisation; the hard pruning stays (pruned pairs get zero gradient): the gradient of
    the soft-weighted version within the current pruning mask (module docstring)."""

    Config = GNNGuardConfig

    @property
    def receptive_hops(self) -> int:
        """One hop per layer: a layer's guard weights at a node read its own and its neighbours'
        representations and its kept degree, nothing further."""
        return len(self.layers)

    def make_layer(self, index, in_width, out_width, last):
        return GCNConv(in_width, out_width, add_self_loops=False, normalize=False), out_width

    def propagation_graph(self, edge_index, num_nodes):
        return EdgePattern.of(edge_index, num_nodes)

    def forward(self, x, edge_index):
        return self.weighted_forward(x, edge_index, None)

    def weighted_forward(self, x, edge_index, edge_weight):
        """Logits with edge weights (``None``: the plain forward): guard weights of the
        weighted edges, the hard and cumulative pruning kept (see the module docstring)."""
        c = self.config
        pattern = self._cached_propagation_graph(edge_index, x.size(0), x.dtype)
        alive = None

        def call(i, layer, h):
            nonlocal alive
            alive, ei, w = guard_edges(h, pattern, c.threshold, c.self_weight, edge_weight, alive)
            return _weighted_gcn(layer, h, ei, w)

        return self.output(self.run_layers(x, call), edge_index)


class GATGuard(GraphModel):
    """GAT + GNNGuard (``gatguard``): hidden layers concatenate ``heads`` heads, each layer a
    ``GuardGATConv`` computed with sparse products (:func:`grb_dist.models.attention.gat_conv`
    over the kept edges' structures, derived from the graph's :class:`EdgePattern`).

    ``weighted_forward``: GNNGuard's weighted guard weights (see :class:`GNNGuard`) in a
    weighted attention softmax ``a_ij exp(e_ij) / sum_k a_ik exp(e_ik)`` (the forward's
    ``+ log a_ij`` shift, with weight 0 = absent edge and a finite gradient)."""

    Config = GATGuardConfig

    @property
    def receptive_hops(self) -> int:
        """One hop per layer: guard weights and attention at a node read its own and its
        neighbours' representations, nothing further."""
        return len(self.layers)

    def make_layer(self, index, in_width, out_width, last):
        heads = 1 if last else self.config.heads
        conv = GuardGATConv(in_width, out_width, heads=heads, concat=not last, add_self_loops=False)
        return conv, out_width * heads if not last else out_width

    propagation_graph = GNNGuard.propagation_graph

    def forward(self, x, edge_index):
        c = self.config
        pattern = self._cached_propagation_graph(edge_index, x.size(0), x.dtype)
        alive = None

        def call(i, layer, h):
            nonlocal alive
            alive, ei, w = guard_edges(h, pattern, c.threshold, c.self_weight, alive=alive)
            if not lean_attention(layer, h):
                return layer(h, ei, edge_attr=w)
            # GuardGATConv's forward with sparse products (grb_dist.models.attention)
            graph = AttentionGraph(pattern.edge_index, pattern.by_dst, pattern.by_src).derived(alive, c.self_weight)
            return gat_conv(layer, h, graph, torch.log(w.clamp_min(1e-12)))

        return self.output(self.run_layers(x, call), edge_index)

    def weighted_forward(self, x, edge_index, edge_weight):
        """Logits with edge weights: guard weights of the weighted edges in a weighted
        attention softmax, the hard and cumulative pruning kept (see the module docstring)."""
        c = self.config
        pattern = self._cached_propagation_graph(edge_index, x.size(0), x.dtype)
        alive = None

        def call(i, layer, h):
            nonlocal alive
            alive, ei, a = guard_edges(h, pattern, c.threshold, c.self_weight, edge_weight, alive)
            heads, width, n = layer.heads, layer.out_channels, h.shape[0]
            xl = layer.lin(h).view(-1, heads, width)
            a_src, a_dst = (xl * layer.att_src).sum(-1), (xl * layer.att_dst).sum(-1)
            src, dst = ei
            e = F.leaky_relu(a_src[src] + a_dst[dst], layer.negative_slope)
            return finish_heads(layer, propagate_attention(xl, weighted_softmax(e, a, dst, n), ei, n), h)

        return self.output(self.run_layers(x, call), edge_index)
