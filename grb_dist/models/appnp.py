"""APPNP (Gasteiger et al., 2019): an MLP, then personalised-PageRank propagation.

Uses ``torch_geometric``'s APPNP propagation (``k`` power-iteration steps, teleport ``alpha``).
"""

from dataclasses import dataclass

from torch import nn
from torch_geometric.nn import APPNP as APPNPProp

from grb_dist.core.errors import ConfigError
from grb_dist.models.base import GraphModel, ModelConfig
from grb_dist.models.gcn import normalized_adjacency_t
from grb_dist.models.propagation import appnp


@dataclass(frozen=True)
class APPNPConfig(ModelConfig):
    """Attributes: k: propagation steps (GRB: 10); alpha: teleport probability (GRB: 0.01)."""

    hidden_sizes: tuple[int, ...] = (64,)
    k: int = 10
    alpha: float = 0.01

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.k < 1 or not 0.0 <= self.alpha <= 1.0:
            raise ConfigError(f"APPNP needs k >= 1 and alpha in [0, 1], got k={self.k}, alpha={self.alpha}")

    def footprint(self, num_classes: int) -> tuple[int, int]:
        """k propagation steps of the class scores, kept for the backward pass."""
        return 1, 2 * self.k * num_classes


class APPNP(GraphModel):
    Config = APPNPConfig
    graph_layers = False
    sparse_propagation = True

    @property
    def receptive_hops(self) -> int:
        """k propagation steps."""
        return int(self.config.k)

    def propagation_graph(self, edge_index, num_nodes):
        return normalized_adjacency_t(edge_index, num_nodes)

    def __init__(self, in_features, num_classes, config=None):
        super().__init__(in_features, num_classes, config)
        self.propagate = APPNPProp(K=self.config.k, alpha=self.config.alpha, normalize=False)

    def make_layer(self, index, in_width, out_width, last):
        return nn.Linear(in_width, out_width), out_width

    def call_layer(self, i, layer, h, edge_index):
        return layer(h)

    def output(self, h, edge_index):
        return appnp(self.propagate, h, edge_index)

    def incremental_layer(self, ops, i, layer, h):
        return ops.map(layer, h)

    def incremental_output(self, ops, h):
        alpha = self.config.alpha
        h0 = h
        for _ in range(self.config.k):
            h = ops.map(lambda p, t: p * (1 - alpha) + alpha * t, ops.propagate(h, "gcn"), h0)
        return h
