"""What a training sees and what it returns, below the model table (so that a model with a
training procedure of its own, such as Pro-GNN, returns the trainer's own result type).

- :func:`training_views`: the training and validation views of a graph, inductive (the
  subgraphs induced by the training nodes and by training + validation nodes) or
  transductive (the whole graph twice);
- :class:`TrainResult`: a trained model and how its training went.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch_geometric.utils import subgraph

from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph
from grb_dist.models.tensors import graph_tensors


@dataclass
class TrainResult:
    """A trained model (best state loaded, in eval mode) and how training went.

    ``best_epoch`` (from 0) is the epoch of the lowest validation loss, the one early
    stopping selects on; ``best_val_accuracy`` is the validation accuracy of that epoch.
    ``stopped_early`` is true when training ended before its last epoch because the
    validation loss had not improved for ``patience`` epochs."""

    model: torch.nn.Module
    best_epoch: int
    best_val_loss: float
    best_val_accuracy: float
    epochs_run: int
    seconds: float
    history: list[dict[str, float]] = field(default_factory=list)
    stopped_early: bool = False


@dataclass(frozen=True)
class InductiveView:
    """Tensors of one induced subgraph: features, relabelled edges, labels, and the local
    positions of the nodes whose loss counts."""

    x: torch.Tensor
    edge_index: torch.Tensor
    y: torch.Tensor
    mask_idx: torch.Tensor


def induced(graph: Graph, nodes: np.ndarray, loss_nodes: np.ndarray, device) -> InductiveView:
    """The subgraph induced by ``nodes``; ``loss_nodes`` (a subset) are located in it."""
    nodes = np.sort(np.asarray(nodes, dtype=np.int64))
    t = graph_tensors(graph, device)
    idx = torch.as_tensor(nodes, device=device)
    ei, _ = subgraph(idx, t.edge_index, relabel_nodes=True, num_nodes=graph.num_nodes)
    local = torch.as_tensor(np.searchsorted(nodes, np.asarray(loss_nodes, dtype=np.int64)), device=device)
    return InductiveView(t.x[idx], ei, t.y[idx], local)


def training_views(graph: Graph, device, transductive: bool = False) -> tuple[InductiveView, InductiveView]:
    """The training and validation views of ``graph``: the subgraphs induced by the training
    nodes and by training + validation nodes, or (``transductive``) the whole graph twice."""
    split = graph.split
    for key in ("train", "val"):
        if key not in split or split[key].size == 0:
            raise ConfigError(f"graph {graph.name!r} has an empty {key!r} split; re-split it")
    if transductive:
        every = np.arange(graph.num_nodes)
        return induced(graph, every, split["train"], device), induced(graph, every, split["val"], device)
    return (induced(graph, split["train"], split["train"], device),
            induced(graph, np.concatenate([split["train"], split["val"]]), split["val"], device))


