"""Graph convolutional network (Kipf & Welling, 2017) on ``torch_geometric``'s GCNConv."""

from torch_geometric.nn import GCNConv

from grb_dist.models.base import GraphModel


class GCN(GraphModel):
    sparse_propagation = True

    def make_layer(self, index, in_width, out_width, last):
        return GCNConv(in_width, out_width, add_self_loops=True, normalize=True), out_width
