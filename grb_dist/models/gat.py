"""Graph attention network (Velickovic et al., 2018) on ``torch_geometric``'s GATConv.

Hidden layers concatenate ``heads`` attention heads of ``hidden_size`` each; the output
layer has one head.
"""

from dataclasses import dataclass

from torch_geometric.nn import GATConv

from grb_dist.core.errors import ConfigError
from grb_dist.models.base import GraphModel, ModelConfig


@dataclass(frozen=True)
class GATConfig(ModelConfig):
    """Attributes: heads: attention heads of every hidden layer."""

    heads: int = 4

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.heads < 1:
            raise ConfigError(f"GAT heads must be >= 1, got {self.heads}")


class GAT(GraphModel):
    Config = GATConfig

    @property
    def receptive_hops(self) -> int:
        """One hop per layer: a node's output depends on nodes that far away at most."""
        return len(self.layers)

    def make_layer(self, index, in_width, out_width, last):
        if last:
            return GATConv(in_width, out_width, heads=1), out_width
        heads = self.config.heads
        return GATConv(in_width, out_width, heads=heads, concat=True), out_width * heads

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
