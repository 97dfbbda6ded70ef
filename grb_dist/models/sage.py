"""GraphSAGE (Hamilton et al., 2017), full batch, on ``torch_geometric``'s SAGEConv."""

from torch_geometric.nn import SAGEConv

from grb_dist.models.base import GraphModel


class GraphSAGE(GraphModel):
    sparse_propagation = True

    @property
    def receptive_hops(self) -> int:
        """One hop per layer: a node's output depends on nodes that far away at most."""
        return len(self.layers)

    def make_layer(self, index, in_width, out_width, last):
        return SAGEConv(in_width, out_width, aggr="mean"), out_width

    def incremental_layer(self, ops, i, layer, h):
        agg = ops.propagate(h, "mean")
        return ops.map(lambda a, t: layer.lin_l(a) + layer.lin_r(t), agg, h)
