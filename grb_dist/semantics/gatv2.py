"""GATv2 (Brody et al., 2022) on ``torch_geometric``'s ``GATv2Conv``, for the semantics study.

Seed 002 studies GATv2 next to GAT with GAT's hyper-parameters. The model is registered as
``gatv2`` (with the usual ``_ln`` / ``_lp`` ... variants) through the public extension API
when :func:`register` is called; the study calls it when a job names it (in the driver and
in each Ray worker that runs one of its units). It declares no edge-weight program: GR-BCD refuses it, like GAT.
"""

from __future__ import annotations

from torch_geometric.nn import GATv2Conv

from grb_dist.models.base import GraphModel
from grb_dist.models.gat import GATConfig

NAME = "gatv2"


class GATv2(GraphModel):
    """Hidden layers concatenate ``heads`` GATv2 heads; the output layer has one head."""

    Config = GATConfig

    @property
    def receptive_hops(self) -> int:
        """One hop per layer: a node's output depends on nodes that far away at most."""
        return len(self.layers)

    def make_layer(self, index, in_width, out_width, last):
        if last:
            return GATv2Conv(in_width, out_width, heads=1), out_width
        heads = self.config.heads
        return GATv2Conv(in_width, out_width, heads=heads, concat=True), out_width * heads


def register() -> str:
    """Register :class:`GATv2` as ``gatv2`` (idempotent)."""
    from grb_dist.extensions import register_model

    return register_model(NAME, GATv2, replace=True)


__all__ = ["GATv2", "register"]
