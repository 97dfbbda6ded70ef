"""GATv2 (Brody et al., 2022) on ``torch_geometric``'s ``GATv2Conv`` (``gatv2``).

Gosch et al. (2023) study GATv2 next to GAT with GAT's hyper-parameters (it takes GAT's config). It
declares no program; :meth:`GATv2.weighted_forward` evaluates it with edge weights for
adaptive modification attacks: GATv2's attention logits ``e_ij = att . leaky(W_l h_j + W_r h_i)``
in the weighted softmax ``alpha_ij = w_ij exp(e_ij) / sum_k w_ik exp(e_ik)`` (self-loops
weight 1): exact at binary weights, weight 0 = absent edge with a finite gradient.
"""

from __future__ import annotations

from torch_geometric.nn import GATv2Conv

from grb_dist.models.base import GraphModel
import torch

from grb_dist.models.gat import GATConfig, attention_layer
from grb_dist.models.weighted import finish_heads, propagate_attention, weighted_softmax, with_self_loops


class GATv2(GraphModel):
    """Hidden layers concatenate ``heads`` GATv2 heads; the output layer has one head."""

    Config = GATConfig

    @property
    def receptive_hops(self) -> int:
        """One hop per layer: a node's output depends on nodes that far away at most."""
        return len(self.layers)

    def make_layer(self, index, in_width, out_width, last):
        return attention_layer(GATv2Conv, in_width, out_width, 1 if last else self.config.heads)

    def weighted_forward(self, x, edge_index, edge_weight):
        """Eval-mode logits with edge weights (the weighted attention softmax)."""
        h = self.run_layers(x, lambda i, layer, h: gatv2_layer(layer, h, edge_index, edge_weight))
        return self.output(h, edge_index)


def gatv2_layer(layer: GATv2Conv, h: torch.Tensor, edge_index: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``GATv2Conv`` (self-loops added, no edge features, eval mode) on a weighted graph."""
    heads, c, n = layer.heads, layer.out_channels, h.shape[0]
    x_l = layer.lin_l(h).view(-1, heads, c)
    x_r = x_l if layer.share_weights else layer.lin_r(h).view(-1, heads, c)
    edge_index, weight = with_self_loops(edge_index, weight, n)
    src, dst = edge_index
    e = (torch.nn.functional.leaky_relu(x_l[src] + x_r[dst], layer.negative_slope) * layer.att).sum(-1)
    out = propagate_attention(x_l, weighted_softmax(e, weight, dst, n), edge_index, n)
    return finish_heads(layer, out, h)


__all__ = ["GATv2"]
