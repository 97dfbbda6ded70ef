"""Accuracy of a model on a (possibly perturbed) graph, per difficulty."""

from __future__ import annotations

from typing import Iterable

import torch

from grb_dist.core.names import DIFFICULTIES
from grb_dist.core.graph import Graph, Injection
from grb_dist.models.tensors import TorchGraph, check_logits, perturbed_tensors
from grb_dist.models.precision import precision_mode


@torch.no_grad()
def predict_tensors(model: torch.nn.Module, tensors: TorchGraph, precision: str = "fp32") -> torch.Tensor:
    """Predicted classes of every node of ``tensors``, model in eval mode, no grad, in
    ``precision`` (:mod:`grb_dist.models.precision`)."""
    was_training = model.training
    model.eval()
    try:
        with precision_mode(precision, tensors.x.device):
            out = model(tensors.x, tensors.edge_index)
        check_logits(out, int(tensors.x.shape[0]), _classes(model, tensors), "the model, scored,")
        return out.argmax(1)
    finally:
        model.train(was_training)


def _classes(model: torch.nn.Module, tensors: TorchGraph) -> int:
    """The class count scoring expects: the model's own (``num_classes``) if it says, else
    one more than the largest label."""
    known = getattr(model, "num_classes", None)
    return int(known) if isinstance(known, int) else int(tensors.y.max()) + 1


def predict(model: torch.nn.Module, graph: Graph, injection: Injection | None = None, device="cpu") -> torch.Tensor:
    """Predicted classes of every node (original and injected), model in eval mode, no grad."""
    return predict_tensors(model, perturbed_tensors(graph, injection, device))


def difficulty_accuracy(pred: torch.Tensor, graph: Graph, difficulties: Iterable[str] = DIFFICULTIES) -> dict[str, float]:
    """Accuracy of predictions ``pred`` (one per node) on the test nodes of each difficulty."""
    pred = pred.cpu()
    y = torch.as_tensor(graph.labels)
    out = {}
    for d in difficulties:
        idx = torch.as_tensor(graph.targets(d))
        out[d] = float((pred[idx] == y[idx]).float().mean())
    return out


def evaluate(
    model: torch.nn.Module,
    graph: Graph,
    injection: Injection | None = None,
    difficulties: Iterable[str] = DIFFICULTIES,
    device="cpu",
) -> dict[str, float]:
    """Accuracy on the test nodes of each difficulty: ``{"easy": 0.81, ...}``."""
    return difficulty_accuracy(predict(model, graph, injection, device), graph, difficulties)
