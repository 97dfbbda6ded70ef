"""Topology adaptive GCN (Du et al., 2017) on ``torch_geometric``'s TAGConv."""

from dataclasses import dataclass

from torch_geometric.nn import TAGConv

from grb_dist.core.errors import ConfigError
from grb_dist.models.base import GraphModel, ModelConfig


@dataclass(frozen=True)
class TAGCNConfig(ModelConfig):
    """Attributes: k: hops of every layer's polynomial filter (GRB: 2)."""

    k: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.k < 1:
            raise ConfigError(f"TAGCN k must be >= 1, got {self.k}")

    def footprint(self, num_classes: int) -> tuple[int, int]:
        """Every layer keeps its input propagated k times and k + 1 weight matrices."""
        return self.k + 1, 0


class TAGCN(GraphModel):
    Config = TAGCNConfig
    sparse_propagation = True

    @property
    def receptive_hops(self) -> int:
        """k hops per layer."""
        return len(self.layers) * int(self.config.k)

    def make_layer(self, index, in_width, out_width, last):
        return TAGConv(in_width, out_width, K=self.config.k), out_width

    def incremental_layer(self, ops, i, layer, h):
        hops = [h]
        for _ in range(self.config.k):
            hops.append(ops.propagate(hops[-1], "sym"))

        def combine(*ts):
            out = layer.lins[0](ts[0])
            for lin, t in zip(layer.lins[1:], ts[1:]):
                out = out + lin(t)
            return out if layer.bias is None else out + layer.bias

        return ops.map(combine, *hops)
