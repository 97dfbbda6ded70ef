"""GCN-Jaccard (Wu et al., IJCAI 2019, "Adversarial examples on graph data: deep insights
into attack and defense"): a GCN on the input graph without its dissimilar edges.

Wu et al. observe that structure attacks mostly connect nodes whose features have little in
common, and that a clean citation graph rarely does; so before the GCN runs, every edge
``(i, j)`` of the *input* graph is scored by the similarity of its endpoints' features and
dropped when the score is below ``threshold`` (default 0.01, the value used in the
experiments of Pro-GNN (Jin et al., 2020) and of Geisler et al. (2021)). The score is
``J_ij = |S_i AND S_j| / |S_i OR S_j|``, the Jaccard similarity of the endpoints' feature
sets ``S_i = {f : x_if != 0}``: the non-zero pattern of the features, whatever their values
(0 when both sets are empty, where the reference code would divide by zero). This is the reference implementation's measure (DeepRobust's
``GCNJaccard``, ``binary_feature=True`` by default, which counts non-zero entries), for
binary bag-of-words features and for any other features alike.

Consequence on graphs without attributes: with identity features (polblogs) every node's
set is its own index, so every edge has ``J = 0`` and is dropped; the GCN then sees self-loops
only and is a per-node MLP of the identity features. The reference does the same. On
dense real-valued features without zeros (a CSBM's Gaussian features) every set is full,
every ``J`` is 1 and nothing is dropped: the model is a GCN.

``similarity="cosine"`` is the variant, never the default: the cosine similarity
``<x_i, x_j> / (|x_i| |x_j|)`` (0 for a zero row), what DeepRobust computes when built with
``binary_feature=False``. The measure is kept as a buffer, so a saved model computes the
measure it was trained with when reloaded.

The scores are computed on the graph of every forward pass, so the defense acts on the
perturbed graph in evasion (test time) and in poisoning (training): vectorised over the
edges, in chunks of edges (row dot products of the binarised or normalised features), never
an N x N matrix; O(E D) time per new graph, and the pruned propagation matrix is kept while
the features and edges stay the same tensors (training epochs). The pruning is a hard mask
(no gradient); gradients reach the features through the GCN only.

Edge weights (adaptive modification attacks, :meth:`GCNJaccard.weighted_forward`): the
mask is computed for every weighted pair from the features (a pair below the threshold is
dropped whatever its weight, so it gets no gradient), then the GCN runs on the kept pairs
with their weights (``D~^-1/2 (W + I) D~^-1/2``, weighted degrees); with every weight 1
this equals ``forward``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch_geometric.nn import GCNConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm

from grb_dist.core.errors import ConfigError
from grb_dist.models.base import GraphModel, ModelConfig
from grb_dist.models.gcn import normalized_adjacency_t
from grb_dist.models.propagation import gcn_conv
from grb_dist.models.weighted import without_self_loops

#: Features gathered per chunk of edges (rows x features), about 16 MiB of float32.
CHUNK_VALUES = 1 << 22
#: ``similarity`` values: the measure's code in the ``measure`` buffer.
MEASURES = {"jaccard": 1, "cosine": 2}


@dataclass(frozen=True)
class JaccardConfig(ModelConfig):
    """GCN-Jaccard hyper-parameters.

    Attributes:
        hidden_sizes: GCN widths (one hidden layer of 64, as in the benchmark of Geisler
            et al. 2021).
        threshold: edges whose similarity is below this are dropped (0.01).
        similarity: ``jaccard`` (the published method: the Jaccard similarity of the
            features' non-zero patterns, whatever their values) or ``cosine`` (the
            cosine-similarity variant; see the module docstring).
    """

    hidden_sizes: tuple[int, ...] = (64,)
    dropout: float = 0.5
    threshold: float = 0.01
    similarity: str = "jaccard"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not -1.0 <= self.threshold <= 1.0:
            raise ConfigError(f"GCN-Jaccard threshold must be in [-1, 1] (a similarity), got {self.threshold}")
        if self.similarity not in MEASURES:
            raise ConfigError(f"GCN-Jaccard similarity must be one of {', '.join(MEASURES)}, got {self.similarity!r}")


def trackable(*tensors: torch.Tensor) -> bool:
    """Whether a result computed from ``tensors`` may be kept for later calls (not under
    ``inference_mode``, no inference tensor: they have no version counter)."""
    return not torch.is_inference_mode_enabled() and not any(t.is_inference() for t in tensors)


def _row_dots(a: torch.Tensor, b: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """``<a[src_e], b[dst_e]>`` for every edge, in chunks of :data:`CHUNK_VALUES` values."""
    out = torch.empty(src.numel(), dtype=a.dtype, device=a.device)
    step = max(1, CHUNK_VALUES // max(1, a.shape[1]))
    for start in range(0, src.numel(), step):
        s, d = src[start : start + step], dst[start : start + step]
        out[start : start + step] = (a[s] * b[d]).sum(1)
    return out


@torch.no_grad()
def jaccard_similarity(x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """Jaccard similarity of the non-zero patterns of every edge's endpoints (E values;
    0 where both rows are all zero)."""
    b = (x != 0).to(torch.float32)
    counts = b.sum(1)
    src, dst = edge_index
    inter = _row_dots(b, b, src, dst)
    union = counts[src] + counts[dst] - inter
    return torch.where(union > 0, inter / union.clamp_min(1), torch.zeros_like(inter))


@torch.no_grad()
def cosine_similarity(x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of every edge's endpoints (E values; 0 where a row is zero)."""
    norm = x.norm(dim=1)
    xn = x / norm.clamp_min(1e-12).unsqueeze(1)
    src, dst = edge_index
    return _row_dots(xn, xn, src, dst)


def edge_similarity(x: torch.Tensor, edge_index: torch.Tensor, measure: str) -> torch.Tensor:
    """The similarity ``measure`` (``jaccard`` or ``cosine``) of every edge's endpoints."""
    if measure == "jaccard":
        return jaccard_similarity(x, edge_index)
    return cosine_similarity(x, edge_index)


def kept_mask(x: torch.Tensor, edge_index: torch.Tensor, threshold: float, measure: str) -> torch.Tensor:
    """True for the edges GCN-Jaccard keeps (similarity >= threshold)."""
    return edge_similarity(x, edge_index, measure) >= threshold


class GCNJaccard(GraphModel):
    """GCN on the input graph without its edges of dissimilar endpoints (``jaccard``)."""

    Config = JaccardConfig

    @property
    def receptive_hops(self) -> int:
        """One hop per layer: whether an edge is kept reads its two ends' features only, so the
        pruned graph's GCN reaches as far as a GCN."""
        return len(self.layers)

    def __init__(self, in_features: int, num_classes: int, config: JaccardConfig | None = None):
        super().__init__(in_features, num_classes, config)
        # 1: Jaccard, 2: cosine (a buffer: a reloaded model keeps the measure it was trained with)
        self.register_buffer("measure", torch.tensor(MEASURES[self.config.similarity], dtype=torch.long))
        self._pruned_cache: list[tuple] = []

    def make_layer(self, index, in_width, out_width, last):
        return GCNConv(in_width, out_width, normalize=False), out_width

    def call_layer(self, i, layer, h, edge_index):
        return gcn_conv(layer, h, edge_index)

    def measure_name(self) -> str:
        """The similarity used (the ``measure`` buffer: the configured one, or a reloaded
        state_dict's)."""
        return "cosine" if int(self.measure) == MEASURES["cosine"] else "jaccard"

    def pruned_edges(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """The input edges (self-loops removed) that the similarity test keeps."""
        ei = edge_index[:, edge_index[0] != edge_index[1]]
        return ei[:, kept_mask(x, ei, self.config.threshold, self.measure_name())]

    def _propagation(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        # Keyed by the identities and in-place versions of both tensors (held, so their
        # memory cannot be reused by other tensors): the pruning depends on the features.
        for ei, ei_v, xx, x_v, adj in self._pruned_cache:
            if ei is edge_index and xx is x and ei_v == edge_index._version and x_v == x._version:
                return adj
        adj = normalized_adjacency_t(self.pruned_edges(x, edge_index), x.shape[0]).to(x.dtype)
        if trackable(edge_index, x):
            self._pruned_cache = [*self._pruned_cache, (edge_index, edge_index._version, x, x._version, adj)]
            self._pruned_cache = self._pruned_cache[-self.GRAPH_CACHE_SIZE :]
        return adj

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        adj = self._propagation(x, edge_index)
        return self.output(self.run_layers(x, lambda i, layer, h: self.call_layer(i, layer, h, adj)), adj)

    def weighted_forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor) -> torch.Tensor:
        """Eval-mode logits with edge weights: the similarity mask on every weighted pair,
        then the GCN on the kept pairs with their weights (module docstring)."""
        n = x.size(0)
        ei, w = without_self_loops(edge_index, edge_weight.to(x.dtype))
        keep = kept_mask(x, ei, self.config.threshold, self.measure_name())
        ei, w = gcn_norm(ei[:, keep], w[keep], n, add_self_loops=True)
        return self.output(self.run_layers(x, lambda i, layer, h: layer(h, ei, w)), ei)
