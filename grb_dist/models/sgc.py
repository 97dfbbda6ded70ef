"""Simplified graph convolution (Wu et al., 2019).

The first layer is ``S^k X W``: a linear map followed by ``k`` hops of propagation with the
GCN-normalised adjacency (torch_geometric's APPNP propagation with ``alpha=0``, which equals
SGConv's ``S^k`` but propagates the narrow projected features instead of the raw ones);
the following layers are linear, as in GRB's SGCN with hidden sizes.
"""

from dataclasses import dataclass

from torch import nn
from torch_geometric.nn import APPNP

from grb_dist.core.errors import ConfigError
from grb_dist.models.base import GraphModel, ModelConfig
from grb_dist.models.gcn import normalized_adjacency_t
from grb_dist.models.propagation import appnp


@dataclass(frozen=True)
class SGCConfig(ModelConfig):
    """Attributes: k: propagation hops (GRB: 4)."""

    k: int = 4

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.k < 1:
            raise ConfigError(f"SGC k must be >= 1, got {self.k}")

    def footprint(self, num_classes: int) -> tuple[int, int]:
        """The input propagated k times."""
        return self.k + 1, 0


class SGC(GraphModel):
    Config = SGCConfig
    sparse_propagation = True

    @property
    def receptive_hops(self) -> int:
        """k propagations."""
        return int(self.config.k)

    def propagation_graph(self, edge_index, num_nodes):
        return normalized_adjacency_t(edge_index, num_nodes)

    def make_layer(self, index, in_width, out_width, last):
        if index == 0:
            return nn.ModuleDict({"lin": nn.Linear(in_width, out_width), "prop": APPNP(K=self.config.k, alpha=0.0, normalize=False)}), out_width
        return nn.Linear(in_width, out_width), out_width

    def call_layer(self, i, layer, h, edge_index):
        return appnp(layer["prop"], layer["lin"](h), edge_index) if i == 0 else layer(h)

    def incremental_layer(self, ops, i, layer, h):
        if i > 0:
            return ops.map(layer, h)
        h = ops.map(layer["lin"], h)
        for _ in range(self.config.k):  # APPNP with alpha = 0 is k plain propagations
            h = ops.propagate(h, "gcn")
        return h
