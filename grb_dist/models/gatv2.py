"""GATv2 (Brody et al., 2022) on ``torch_geometric``'s ``GATv2Conv`` (``gatv2``).

Seed 002 studies GATv2 next to GAT with GAT's hyper-parameters (it takes GAT's config). It
declares no edge-weight program: GR-BCD refuses it, like GAT.
"""

from __future__ import annotations

from torch_geometric.nn import GATv2Conv

from grb_dist.models.base import GraphModel
from grb_dist.models.gat import GATConfig, attention_layer


class GATv2(GraphModel):
    """Hidden layers concatenate ``heads`` GATv2 heads; the output layer has one head."""

    Config = GATConfig

    @property
    def receptive_hops(self) -> int:
        """One hop per layer: a node's output depends on nodes that far away at most."""
        return len(self.layers)

    def make_layer(self, index, in_width, out_width, last):
        return attention_layer(GATv2Conv, in_width, out_width, 1 if last else self.config.heads)


__all__ = ["GATv2"]
