"""Graph attention network (Velickovic et al., 2018) on ``torch_geometric``'s GATConv.

Hidden layers concatenate ``heads`` attention heads of ``hidden_size`` each; the output
layer has one head.

Edge weights (adaptive modification attacks, :meth:`GAT.weighted_forward`): the attention
softmax is weighted, ``alpha_ij = w_ij exp(e_ij) / sum_k w_ik exp(e_ik)`` (self-loops weight
1). This is exact at every binary graph (weight 1 = the edge, weight 0 = no edge) and a
smooth interpolation in between, with a finite gradient at weight 0. The declared program's
``attend`` stays unweighted (the incremental injection path), so the attacks use
``weighted_forward`` for GAT.

Training and inference compute the layers with :func:`grb_dist.models.attention.gat_conv`:
``GATConv``'s parameters and values, aggregated with sparse products instead of per-edge
messages (an E x heads x C tensor per layer kept for the backward pass), over the graph's
:class:`~grb_dist.models.attention.AttentionGraph`, built once per graph.
"""

from dataclasses import dataclass

from torch_geometric.nn import GATConv

from grb_dist.core.errors import ConfigError
from grb_dist.models.attention import AttentionGraph, gat_conv, lean_attention
from grb_dist.models.base import GraphModel, ModelConfig
from grb_dist.models.weighted import gat_layer


@dataclass(frozen=True)
class GATConfig(ModelConfig):
    """Attributes: heads: attention heads of every hidden layer."""

    heads: int = 4

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.heads < 1:
            raise ConfigError(f"GAT heads must be >= 1, got {self.heads}")


def attention_layer(conv, in_width: int, out_width: int, heads: int):
    """An attention layer of ``heads`` heads concatenated (one head: the output layer), and
    its output width (what :meth:`GraphModel.make_layer` returns); GAT's and GATv2's."""
    if heads == 1:
        return conv(in_width, out_width, heads=1), out_width
    return conv(in_width, out_width, heads=heads, concat=True), out_width * heads


class GAT(GraphModel):
    """GAT; :meth:`weighted_forward` uses the weighted attention softmax (module docstring)."""

    Config = GATConfig

    @property
    def receptive_hops(self) -> int:
        """One hop per layer: a node's output depends on nodes that far away at most."""
        return len(self.layers)

    def make_layer(self, index, in_width, out_width, last):
        return attention_layer(GATConv, in_width, out_width, 1 if last else self.config.heads)

    def propagation_graph(self, edge_index, num_nodes):
        """The edges ``GATConv`` attends over (self-loops replaced by one per node), with
        their sparse structures."""
        return AttentionGraph.of(edge_index, num_nodes)

    def call_layer(self, i, layer, h, edge_index):
        if not lean_attention(layer, h):
            return layer(h, edge_index)
        return gat_conv(layer, h, self._cached_propagation_graph(edge_index, h.size(0), h.dtype))

    def incremental_layer(self, ops, i, layer, h):
        heads, c = layer.heads, layer.out_channels
        xl = ops.map(lambda t: layer.lin(t).view(-1, heads, c), h)
        a_src = ops.map(lambda t: (t * layer.att_src).sum(-1), xl)
        a_dst = ops.map(lambda t: (t * layer.att_dst).sum(-1), xl)
        out = ops.attend(xl, a_src, a_dst, layer.negative_slope)

        def finish(t):
            t = t.reshape(-1, heads * c) if layer.concat else t.mean(dim=1)
            return t if layer.bias is None else t + layer.bias

        return ops.map(finish, out)

    def weighted_forward(self, x, edge_index, edge_weight):
        """Eval-mode logits with edge weights (the weighted attention softmax)."""
        h = self.run_layers(x, lambda i, layer, h: gat_layer(layer, h, edge_index, edge_weight))
        return self.output(h, edge_index)
