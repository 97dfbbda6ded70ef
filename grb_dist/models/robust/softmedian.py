"""Soft-Median GDC (Geisler et al., NeurIPS 2021, "Robustness of Graph Neural Networks at
Scale"): a GCN whose neighbourhood mean is replaced by the soft median, on the GDC
propagation matrix.

**Propagation matrix (GDC, Klicpera et al., NeurIPS 2019, as Geisler et al.'s code builds
it).** Two steps:

1. ``P``: the personalised PageRank diffusion of the input graph,
   ``PPR = alpha (I - (1 - alpha) T)^-1`` with ``T = D~^-1/2 (A + I) D~^-1/2``
   (``alpha = 0.15``), sparsified to the ``k = 64`` largest entries of every node's row and
   normalised so that every node's kept weights sum to 1 (GDC's top-k sparsification;
   ``T`` is symmetric, so a node's row is also its column): :func:`topk_ppr`.
2. ``a_ij = P_ij / sqrt(c_i c_j)``, ``c_j = sum_i P_ij`` the column sums of ``P`` (how much
   weight node ``j`` gives out as a source): the GCN's symmetric normalisation, which
   Geisler et al.'s GCN applies once more to the GDC matrix (its ``do_normalize_adj_once``,
   on by default, with symmetric rather than row normalisation). Before it, a node whose own
   entry is not among its kept ones gets a self-loop of weight 1, as that normalisation
   adds the missing self-loops (rare: the diagonal of the PPR matrix is in practice among
   the largest entries of its row; no node of prognn-cora lacks it). A node's weights no
   longer sum to 1.
   :func:`symmetric_normalized`.

Node ``i`` aggregates its ``k`` sources ``j`` with weights ``a_ij``. The matrix is computed
for the graph of every forward pass (the perturbed graph in evasion and in poisoning) and
kept while the edges stay the same tensor (training epochs, an attack's fixed graph).

How it is computed: never an N x N matrix. The columns are taken in blocks of ``B`` nodes
(``N x B`` dense, at most :data:`BLOCK_VALUES` values) and each block is iterated
``X <- (1 - alpha) T X + alpha E`` on the sparse ``T`` until the left-out tail of the
series, ``(1 - alpha)^t``, is below ``ppr_tol`` (57 products at the defaults); only the
top-k rows of every column are kept. Memory O(N B + N k); time O(N x nnz(T) x
iterations). **Where it stops scaling:** that time, quadratic in the graph's size: about
2e9 multiply-adds for Cora, 1e11 for PubMed (20k nodes), 1e13 for Flickr (89k nodes, 1.8M
directed edges), 3e14 for Reddit. A graph whose ``N x nnz x iterations`` is above
``max_ppr_work`` (1e13) is refused with a one-line :class:`ConfigError` before anything is
allocated, when the model is built for it and again for a larger graph given to
``forward``; beyond that a push-based approximate PPR would be needed (as Geisler et al.
use for their largest graphs).

**Soft median (Geisler et al., Eq. 7).** For node ``i`` with sources ``j`` and weights
``a_ij``, and the layer's transformed features ``h``:

1. ``m_i``: the dimension-wise weighted median of the ``h_j`` (per dimension, the first
   value in increasing order whose cumulative weight reaches half the total);
2. ``c_ij = |h_j - m_i|_2 / sqrt(d)`` (``d`` the width);
3. ``s_ij = softmax_j(-c_ij / T)`` (temperature ``T``, default 0.2, the lowest of the
   paper's Soft Median GDC settings T in {0.2, 0.5, 1.0}; lower is more robust);
4. ``out_i = sum_j w_ij h_j`` with ``w_ij = s_ij a_ij / sum_l s_il a_il * sum_l a_il``.

With ``T -> infinity`` this is the GCN aggregation on the same matrix. The choice of the
median is not differentiated (as in the paper's implementation); the gradient reaches the
chosen values, the distances, the softmax and the aggregated features. The neighbourhoods
are stored as ``N x k`` index and weight tables (an ELL sparse layout), so the median is a
batched sort over ``k`` entries and every tensor is O(N k d): the layer keeps about
``2 k d`` floats per node for its backward pass (:meth:`SoftMedianConfig.footprint`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch_geometric.nn import GCNConv
from torch_geometric.utils import coalesce, remove_self_loops

from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph
from grb_dist.models.base import GraphModel, ModelConfig
from grb_dist.models.weighted import csr_matrix, csr_structure
from grb_dist.models.propagation import product

#: Values of one dense block of PPR columns (N x B), 64 MiB of float32.
BLOCK_VALUES = 1 << 24
#: Values of the N x k x d block the median is chosen in at a time (no gradient kept).
MEDIAN_VALUES = 1 << 22


@dataclass(frozen=True)
class SoftMedianConfig(ModelConfig):
    """Soft-Median GDC hyper-parameters (defaults of Geisler et al. 2021).

    Attributes:
        hidden_sizes: widths (one hidden layer of 64).
        temperature: softmax temperature ``T`` of the soft median (0.2).
        alpha: PPR teleport probability (0.15).
        k: sources kept per node in the GDC matrix (64).
        ppr_tol: the power iteration stops when ``(1 - alpha)^t`` is below this (1e-4).
        max_ppr_work: the largest ``N x nnz x iterations`` of the PPR computation accepted
            (1e13; see the module docstring).
    """

    hidden_sizes: tuple[int, ...] = (64,)
    dropout: float = 0.5
    temperature: float = 0.2
    alpha: float = 0.15
    k: int = 64
    ppr_tol: float = 1e-4
    max_ppr_work: float = 1e13

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.temperature > 0:
            raise ConfigError(f"Soft-Median GDC temperature must be > 0, got {self.temperature}")
        if not 0 < self.alpha < 1:
            raise ConfigError(f"Soft-Median GDC alpha (PPR teleport) must be in (0, 1), got {self.alpha}")
        if self.k < 1:
            raise ConfigError(f"Soft-Median GDC k (sources per node) must be >= 1, got {self.k}")
        if not 0 < self.ppr_tol < 1:
            raise ConfigError(f"Soft-Median GDC ppr_tol must be in (0, 1), got {self.ppr_tol}")
        if not self.max_ppr_work > 0:
            raise ConfigError(f"Soft-Median GDC max_ppr_work must be > 0, got {self.max_ppr_work}")

    @property
    def iterations(self) -> int:
        """Power-iteration steps: the smallest ``t`` with ``(1 - alpha)^t <= ppr_tol``."""
        return max(1, math.ceil(math.log(self.ppr_tol) / math.log(1 - self.alpha)))

    def footprint(self, num_classes: int) -> tuple[int, int]:
        """Per layer the gathered ``k x d`` source features and their differences to the
        median, plus the ``N x k`` tables."""
        widths = sum(self.hidden_sizes) + num_classes
        return 1, 2 * self.k * widths + 3 * self.k


class TopK(NamedTuple):
    """A sparse propagation matrix with at most ``k`` sources per node (``k + 1`` where a
    self-loop was added): ``index[i, s]`` is the source in slot ``s`` of node ``i`` and
    ``weight[i, s]`` its weight (0 for an empty slot, whose index is ``i`` itself)."""

    index: torch.Tensor
    weight: torch.Tensor


def check_ppr_work(num_nodes: int, nnz: int, config: SoftMedianConfig, what: str = "Soft-Median GDC") -> None:
    """Refuse a graph whose PPR computation exceeds ``config.max_ppr_work``."""
    work = float(num_nodes) * float(nnz) * config.iterations
    if work > config.max_ppr_work:
        raise ConfigError(
            f"{what}: the top-k PPR of a graph of {num_nodes:,} nodes and {nnz:,} propagation entries takes "
            f"{work:.2g} multiply-adds ({config.iterations} power iterations), above max_ppr_work="
            f"{config.max_ppr_work:.2g}; use a smaller graph, a larger ppr_tol, or raise max_ppr_work")


def sym_transition(edge_index: torch.Tensor, num_nodes: int, dtype: torch.dtype) -> torch.Tensor:
    """``T = D~^-1/2 (A + I) D~^-1/2`` of the undirected graph (``A`` symmetrised, binary) as
    a sparse CSR matrix."""
    ei, _ = remove_self_loops(edge_index)
    ei = coalesce(torch.cat([ei, ei.flip(0)], dim=1), num_nodes=num_nodes)
    loops = torch.arange(num_nodes, device=ei.device)
    ei = torch.cat([ei, torch.stack([loops, loops])], dim=1)
    deg = torch.bincount(ei[0], minlength=num_nodes).to(dtype)
    inv = deg.rsqrt()
    crow, col, perm = csr_structure(ei[0], ei[1], num_nodes)
    return csr_matrix(crow, col, (inv[ei[0]] * inv[ei[1]])[perm], num_nodes)


@torch.no_grad()
def topk_ppr(edge_index: torch.Tensor, num_nodes: int, config: SoftMedianConfig,
             dtype: torch.dtype = torch.float32) -> TopK:
    """GDC's top-k PPR matrix ``P`` of the graph, rows normalised (module docstring, step 1)."""
    n = num_nodes
    t = sym_transition(edge_index, n, dtype)
    check_ppr_work(n, int(t.values().numel()), config)
    k = min(config.k, n)
    alpha = config.alpha
    index = torch.empty(n, k, dtype=torch.long, device=edge_index.device)
    weight = torch.empty(n, k, dtype=dtype, device=edge_index.device)
    block = max(1, min(n, BLOCK_VALUES // max(1, n)))
    for start in range(0, n, block):
        cols = torch.arange(start, min(n, start + block), device=edge_index.device)
        seed = torch.zeros(n, cols.numel(), dtype=dtype, device=edge_index.device)
        seed[cols, torch.arange(cols.numel(), device=cols.device)] = alpha
        x = seed.clone()
        for _ in range(config.iterations):
            x = product(t, x).mul_(1 - alpha).add_(seed)
        values, rows = x.topk(k, dim=0)
        index[cols], weight[cols] = rows.t(), values.t()
    empty = weight <= 0  # nodes the diffusion does not reach (other components)
    index = torch.where(empty, torch.arange(n, device=index.device).unsqueeze(1), index)
    weight = weight.masked_fill(empty, 0)
    return TopK(index, weight / weight.sum(1, keepdim=True))


@torch.no_grad()
def symmetric_normalized(ppr: TopK) -> TopK:
    """``a_ij = P_ij / sqrt(c_i c_j)`` with ``c`` the column sums of ``P`` (module docstring,
    step 2), after a self-loop of weight 1 is given to every node whose own entry is not
    among its kept ones (one more slot then, empty for the other nodes)."""
    index, weight = ppr
    n = index.shape[0]
    own = torch.arange(n, device=index.device).unsqueeze(1)
    missing = ~((index == own) & (weight > 0)).any(1)
    if bool(missing.any()):
        index = torch.cat([index, own], dim=1)
        weight = torch.cat([weight, missing.to(weight.dtype).unsqueeze(1)], dim=1)
    column = torch.zeros(n, dtype=weight.dtype, device=weight.device).index_add_(0, index.reshape(-1),
                                                                                 weight.reshape(-1))
    inv = column.rsqrt().masked_fill_(column <= 0, 0)
    return TopK(index, weight * inv.unsqueeze(1) * inv[index])


def median_slots(h: torch.Tensor, index: torch.Tensor, weight: torch.Tensor, empty: torch.Tensor) -> torch.Tensor:
    """The slot (0..k-1) holding every node's dimension-wise weighted median (N x d): per
    dimension, the first slot in increasing order of value whose cumulative weight reaches
    half the node's total. Batched sorts over the ``k`` slots, in blocks of nodes of at most
    :data:`MEDIAN_VALUES` values, in a dimension-major layout (each sort is over contiguous
    memory)."""
    n, d = h.shape
    k = index.shape[1]
    columns = h.t().contiguous()  # d x N
    slot = torch.empty(n, d, dtype=torch.long, device=h.device)
    rows = max(1, MEDIAN_VALUES // max(1, k * d))
    for start in range(0, n, rows):
        part = slice(start, start + rows)
        keys = columns[:, index[part]]  # d x rows x k
        keys.masked_fill_(empty[part], math.inf)  # empty slots sort last
        order = keys.argsort(dim=2)
        cum = weight[part].expand(d, -1, -1).gather(2, order).cumsum_(2)
        half = (0.5 * weight[part].sum(1)).view(1, -1, 1).expand(d, -1, 1).contiguous()
        # the first position whose cumulative weight reaches half (cum is non-decreasing)
        position = torch.searchsorted(cum, half).clamp_max_(k - 1)
        slot[part] = order.gather(2, position).squeeze(2).t()
    return slot


def soft_median(h: torch.Tensor, index: torch.Tensor, weight: torch.Tensor, temperature: float) -> torch.Tensor:
    """The soft median aggregation (module docstring, steps 1-4) of ``h`` (N x d) over the
    neighbourhoods ``index``/``weight`` (N x k, weight 0 = empty slot)."""
    n, d = h.shape
    k = index.shape[1]
    empty = weight <= 0
    with torch.no_grad():
        slot = median_slots(h.detach(), index, weight, empty)  # N x d
    values = h.index_select(0, index.reshape(-1)).view(n, k, d)  # differentiable
    median = values.gather(1, slot.unsqueeze(1)).squeeze(1)  # N x d
    distance = (values - median.unsqueeze(1)).norm(dim=2) / math.sqrt(d)  # N x k
    # empty slots: the lowest finite logit (a row without sources gets weight 0 everywhere
    # and a finite gradient, where -inf would give NaN)
    logits = (-distance / temperature).masked_fill(empty, torch.finfo(distance.dtype).min)
    s = torch.softmax(logits, dim=1) * weight
    total = weight.sum(1, keepdim=True)
    s = s / s.sum(1, keepdim=True).clamp_min(torch.finfo(s.dtype).tiny) * total
    return torch.bmm(s.unsqueeze(1), values).squeeze(1)


class SoftMedianGDC(GraphModel):
    """Soft-Median GDC (``softmedian``): GCN layers (linear map, soft median aggregation on
    the symmetrically normalised top-k PPR matrix, bias)."""

    Config = SoftMedianConfig

    @classmethod
    def check_graph(cls, name: str, config: SoftMedianConfig, graph: Graph) -> None:
        # entries of T: both directions of every edge plus one self-loop per node
        check_ppr_work(graph.num_nodes, 2 * graph.num_edges + graph.num_nodes, config, f"model {name}")

    def propagation_graph(self, edge_index: torch.Tensor, num_nodes: int) -> TopK:
        """The GDC matrix ``a`` of the module docstring (both steps)."""
        return symmetric_normalized(topk_ppr(edge_index, num_nodes, self.config, torch.get_default_dtype()))

    def make_layer(self, index, in_width, out_width, last):
        return GCNConv(in_width, out_width, normalize=False), out_width

    def call_layer(self, i, layer, h, edge_index):
        ppr = self._cached_propagation_graph(edge_index, h.size(0), h.dtype)
        out = soft_median(layer.lin(h), ppr.index, ppr.weight.to(h.dtype), self.config.temperature)
        return out if layer.bias is None else out + layer.bias
