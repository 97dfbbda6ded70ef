"""Graph convolutional network (Kipf & Welling, 2017) on ``torch_geometric``'s GCNConv.

The symmetric normalisation ``D^-1/2 (A + I) D^-1/2`` is computed once per graph (not once
per layer) and every GCNConv propagates with it.
"""

from torch_geometric.nn import GCNConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm

from grb_dist.models.base import GraphModel, adjacency_t
from grb_dist.models.propagation import gcn_conv


def normalized_adjacency_t(edge_index, num_nodes):
    """``D^-1/2 (A + I) D^-1/2`` (transposed) as a sparse CSR tensor."""
    adj, _ = gcn_norm(adjacency_t(edge_index, num_nodes), num_nodes=num_nodes, add_self_loops=True)
    return adj


class GCN(GraphModel):
    sparse_propagation = True

    @property
    def receptive_hops(self) -> int:
        """One hop per layer: a node's output depends on nodes that far away at most."""
        return len(self.layers)

    def propagation_graph(self, edge_index, num_nodes):
        return normalized_adjacency_t(edge_index, num_nodes)

    def make_layer(self, index, in_width, out_width, last):
        return GCNConv(in_width, out_width, normalize=False), out_width

    def call_layer(self, i, layer, h, edge_index):
        return gcn_conv(layer, h, edge_index)

    def incremental_layer(self, ops, i, layer, h):
        h = ops.propagate(ops.map(layer.lin, h), "gcn")
        return h if layer.bias is None else ops.map(lambda t: t + layer.bias, h)
