"""Multi-layer perceptron: ignores the graph structure (a reference point for robustness)."""

from torch import nn

from grb_dist.models.base import GraphModel


class MLP(GraphModel):
    uses_graph = False
    graph_layers = False

    @property
    def receptive_hops(self) -> int:
        """No propagation: a node's output depends on its own features only."""
        return 0

    def make_layer(self, index, in_width, out_width, last):
        return nn.Linear(in_width, out_width), out_width

    def call_layer(self, i, layer, h, edge_index):
        return layer(h)

    def incremental_layer(self, ops, i, layer, h):
        return ops.map(layer, h)
