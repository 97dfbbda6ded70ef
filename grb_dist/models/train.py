"""The trainer: inductive (GRB protocol) or transductive (poisoning).

Inductive (the default): the model trains on the subgraph induced by the training nodes and
is validated on the subgraph induced by training + validation nodes; test nodes are never
seen during training. Transductive (``transductive=True``, the poisoning scenario's setting,
as in Zügner & Günnemann 2019 and Pro-GNN): the model sees the whole graph, its loss counts
the training nodes and its validation the validation nodes.
Early stopping keeps the state_dict of the epoch with the lowest validation loss. Training
is seeded: the same seed gives the same weights on the same device. Progress can be watched
with an ``on_epoch`` callback (an argument of :func:`train_model`, or installed with
:func:`report_epochs` for callers that train through other functions).
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

import numpy as np
import torch

from grb_dist.core import allocator
from grb_dist.core.config import TrainSection
from grb_dist.core.graph import Graph
from grb_dist.models.base import GraphModel
from grb_dist.models.grammar import build_model
from grb_dist.models.tensors import check_logits
from grb_dist.models.views import InductiveView, TrainResult, training_views

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainConfig(TrainSection):
    """Optimisation hyper-parameters (:class:`~grb_dist.core.config.TrainSection`: ``lr``,
    ``weight_decay``, ``epochs``, ``patience``) and ``seed``, the seed of the
    initialisation, dropout and any training-time attack."""

    seed: int = 0


#: Training-time perturbation hook (adversarial training): given the model in train mode and
#: the training view, return perturbed ``(x, edge_index)``; original nodes keep their ids.
Augment = Callable[[GraphModel, InductiveView, torch.Generator], tuple[torch.Tensor, torch.Tensor]]

#: Progress hook, called after every epoch with that epoch's history row (``epoch`` counted
#: from 0, ``train_loss``, ``val_loss``, ``val_accuracy``) plus ``epochs`` (the maximum),
#: ``best_epoch`` (the lowest validation loss so far), ``best_val_loss`` and
#: ``best_val_accuracy`` (the accuracy of that epoch). It must be cheap: it runs in the loop.
OnEpoch = Callable[[Mapping[str, float]], None]

_ON_EPOCH: contextvars.ContextVar[OnEpoch | None] = contextvars.ContextVar("grb_dist_on_epoch", default=None)


@contextlib.contextmanager
def report_epochs(callback: OnEpoch | None) -> Iterator[None]:
    """Within the block, :func:`train_model` calls ``callback`` after every epoch when it is
    not given an ``on_epoch`` of its own (for training that goes through other functions,
    such as :func:`grb_dist.defenses.train_defense`)."""
    token = _ON_EPOCH.set(callback)
    try:
        yield
    finally:
        _ON_EPOCH.reset(token)


def train_model(
    model: GraphModel,
    graph: Graph,
    config: TrainConfig = TrainConfig(),
    *,
    device: str | torch.device = "cpu",
    augment: Augment | None = None,
    on_epoch: OnEpoch | None = None,
    transductive: bool = False,
) -> TrainResult:
    """Train ``model`` on ``graph`` (which must carry a split): inductively, or on the whole
    graph with ``transductive`` (module docstring).

    ``on_epoch`` (default: the callback of an enclosing :func:`report_epochs`, else none) is
    called after every epoch, see :data:`OnEpoch`.
    """
    on_epoch = on_epoch if on_epoch is not None else _ON_EPOCH.get()
    model = model.to(device)
    train_view, val_view = training_views(graph, device, transductive)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    gen = torch.Generator(device="cpu").manual_seed(config.seed)
    best = (float("inf"), 0.0, -1)
    best_state: dict[str, torch.Tensor] | None = None
    history: list[dict[str, float]] = []
    start = time.perf_counter()
    # Every epoch allocates the same shapes: freed blocks are kept for the next, or given
    # back at once under GRB_DIST_ALLOCATOR=system (core.allocator).
    with allocator.training_heap():
        epoch, stopped_early = 0, False
        for epoch in range(config.epochs):
            model.train()
            x, ei = train_view.x, train_view.edge_index
            if augment is not None:
                x, ei = augment(model, train_view, gen)
                model.train()  # the hook may have switched modes
            opt.zero_grad(set_to_none=True)
            out = model(x, ei)
            if epoch == 0:  # what the model returns, checked once before it is trained on
                check_logits(out, int(x.shape[0]), int(graph.num_classes))
            loss = torch.nn.functional.cross_entropy(out[train_view.mask_idx], train_view.y[train_view.mask_idx])
            # Optional model regulariser of this forward pass (R-GCN's KL term).
            extra = model.regularization() if hasattr(model, "regularization") else None
            if extra is not None:
                loss = loss + extra
            loss.backward()
            opt.step()
            model.eval()
            with torch.no_grad():
                logits = model(val_view.x, val_view.edge_index)[val_view.mask_idx]
                yv = val_view.y[val_view.mask_idx]
                val_loss = float(torch.nn.functional.cross_entropy(logits, yv))
                val_acc = float((logits.argmax(1) == yv).float().mean())
            history.append({"epoch": epoch, "train_loss": loss.item(), "val_loss": val_loss, "val_accuracy": val_acc})
            improved = val_loss < best[0]
            if improved:
                best = (val_loss, val_acc, epoch)
                best_state = copy.deepcopy(model.state_dict())
            if on_epoch is not None:
                on_epoch({**history[-1], "epochs": config.epochs, "best_epoch": best[2], "best_val_loss": best[0],
                          "best_val_accuracy": best[1]})
            if not improved and epoch - best[2] >= config.patience:
                stopped_early = epoch + 1 < config.epochs
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    seconds = time.perf_counter() - start
    log.info("trained %s: best val loss %.4f at epoch %d (val acc %.4f), %d epochs%s, %.1fs", type(model).__name__,
             best[0], best[2] + 1, best[1], epoch + 1, " (stopped early)" if stopped_early else "", seconds)
    return TrainResult(model, best[2], best[0], best[1], epoch + 1, seconds, history, stopped_early)


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % (2**32))


def train(
    name: str,
    graph: Graph,
    params: Mapping[str, Any] | None = None,
    config: TrainConfig = TrainConfig(),
    *,
    device: str | torch.device = "cpu",
    augment: Augment | None = None,
) -> TrainResult:
    """Build registered model ``name`` with ``params`` (seeded by ``config.seed``) and train it."""
    seed_everything(config.seed)
    model = build_model(name, graph.num_features, graph.num_classes, params)
    return train_model(model, graph, config, device=device, augment=augment)
