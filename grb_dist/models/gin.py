"""Graph isomorphism network (Xu et al., 2019) on ``torch_geometric``'s GINConv."""

from torch import nn
from torch_geometric.nn import GINConv

from grb_dist.models.base import GraphModel


class GIN(GraphModel):
    sparse_propagation = True

    @property
    def receptive_hops(self) -> int:
        """One hop per layer: a node's output depends on nodes that far away at most."""
        return len(self.layers)

    def make_layer(self, index, in_width, out_width, last):
        if last:
            # the output layer classifies the aggregated representation linearly
            return GINConv(nn.Linear(in_width, out_width), train_eps=True), out_width
        mlp = nn.Sequential(nn.Linear(in_width, out_width), nn.ReLU(), nn.Linear(out_width, out_width))
        return GINConv(mlp, train_eps=True), out_width

    def incremental_layer(self, ops, i, layer, h):
        agg = ops.propagate(h, "sum")
        return ops.map(lambda a, t: layer.nn(a + (1 + layer.eps) * t), agg, h)
