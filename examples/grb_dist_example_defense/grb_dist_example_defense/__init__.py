"""An example defense for grb-dist: a mean-aggregation GCN that ignores dissimilar neighbours.

Installed, this package declares the entry point ``example_mean_gcn`` in the group
``grb_dist.defenses`` (see ``pyproject.toml``), so ``grb-dist sweep --defenses
example_mean_gcn`` scores it with no import by the user and no change to grb-dist.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["MeanGCN", "MeanGCNConfig"]


@dataclass(frozen=True)
class MeanGCNConfig:
    """Hyper-parameters of :class:`MeanGCN` (a job sets them under ``models: {example_mean_gcn: ...}``).

    Attributes:
        hidden: width of the hidden layer.
        threshold: edges whose endpoints' input features have a cosine similarity below
            this value are dropped before aggregating.
        dropout: dropout probability before the second layer.
    """

    hidden: int = 32
    threshold: float = 0.1
    dropout: float = 0.5

    def __post_init__(self) -> None:
        if self.hidden < 1:
            raise ValueError(f"hidden must be >= 1, got {self.hidden}")
        if not -1.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be in [-1, 1], got {self.threshold}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")


def mean_aggregate(h: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """Mean of each node's own row and its in-neighbours' rows (``edge_index`` is 2 x E,
    source then target)."""
    src, dst = edge_index
    total = h.clone().index_add_(0, dst, h[src])
    count = torch.ones(h.shape[0], dtype=h.dtype, device=h.device).index_add_(
        0, dst, torch.ones(dst.shape[0], dtype=h.dtype, device=h.device))
    return total / count.unsqueeze(1)


class MeanGCN(nn.Module):
    """Two mean-aggregation graph layers over the edges whose endpoints look alike.

    Before aggregating, every edge whose endpoints' *input* features have a cosine
    similarity below ``threshold`` is dropped (the idea of GCN-Jaccard, Wu et al. 2019, with
    cosine similarity for real-valued features); each layer then averages a node's row
    with its remaining neighbours' rows and applies a linear map.

    What it does against injection: an injected node whose features point away from those
    of the nodes it links to loses those edges, so it cannot move their predictions.
    What it does not do: an attacker that knows the rule (or is simply constrained to
    features resembling the targets') can craft injected features above the threshold, and
    the filter also removes genuine heterophilous edges. It is an example of the extension
    interface, not a state-of-the-art defense; measure it with grb-dist like any other.

    ``forward(x, edge_index) -> logits`` (N x C), as grb-dist expects; trained by grb-dist's
    inductive trainer like the built-in models.
    """

    Config = MeanGCNConfig

    def __init__(self, in_features: int, num_classes: int, config: MeanGCNConfig | None = None):
        super().__init__()
        self.config = config or MeanGCNConfig()
        self.lin1 = nn.Linear(in_features, self.config.hidden)
        self.lin2 = nn.Linear(self.config.hidden, num_classes)

    def similar_edges(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """The edges whose endpoints' features have cosine similarity >= ``threshold``."""
        src, dst = edge_index
        sim = nn.functional.cosine_similarity(x[src], x[dst], dim=1)
        return edge_index[:, sim >= self.config.threshold]

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        edges = self.similar_edges(x, edge_index)
        h = torch.relu(self.lin1(mean_aggregate(x, edges)))
        h = nn.functional.dropout(h, p=self.config.dropout, training=self.training)
        return self.lin2(mean_aggregate(h, edges))
