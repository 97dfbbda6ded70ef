"""Torch views of the numpy graph types of :mod:`grb_dist.core.graph`.

:func:`graph_tensors` gives a graph's features, edges and labels as tensors (no copy on
CPU); :func:`inject_tensors`, :func:`apply_modification` and :func:`perturb_tensors` apply
an attack's perturbation to them without touching the input.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from grb_dist.core.graph import Graph, Injection, Modification


class TorchGraph(NamedTuple):
    """Torch view of a graph: ``x`` (N x D float32), ``edge_index`` (2 x E int64), ``y`` (N)."""

    x: torch.Tensor
    edge_index: torch.Tensor
    y: torch.Tensor



def graph_tensors(graph: Graph, device: str | torch.device = "cpu") -> TorchGraph:
    """Torch tensors of features, edges and labels on ``device`` (no copy on CPU)."""
    return TorchGraph(
        _as_tensor(graph.features, device),
        _as_tensor(graph.edge_index, device),
        _as_tensor(graph.labels, device),
    )


def _as_tensor(a: np.ndarray, device: str | torch.device) -> torch.Tensor:
    if not a.flags.writeable:  # arrays from Ray's object store are read-only views
        t = torch.from_numpy(a.copy()) if str(device) == "cpu" else torch.as_tensor(np.asarray(a))
    else:
        t = torch.from_numpy(a)
    return t.to(device)


def apply_injection(
    graph_x: torch.Tensor,
    graph_edge_index: torch.Tensor,
    inj_features: torch.Tensor,
    inj_edges: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Perturbed ``(x, edge_index)``: features stacked, injected edges appended both ways.

    Works on tensors so that attacks can differentiate through ``inj_features``.
    """
    x = torch.cat([graph_x, inj_features], dim=0)
    if inj_edges.numel() == 0:
        return x, graph_edge_index
    both = torch.cat([inj_edges, inj_edges.flip(0)], dim=1)
    return x, torch.cat([graph_edge_index, both], dim=1)


def perturbed_tensors(graph: Graph, injection: Injection | None, device: str | torch.device = "cpu") -> TorchGraph:
    """Torch tensors of ``graph`` with ``injection`` applied (labels of injected nodes are -1)."""
    return inject_tensors(graph_tensors(graph, device), injection)


def inject_tensors(clean: TorchGraph, injection: Injection | None) -> TorchGraph:
    """``clean`` (the tensors of a graph) with ``injection`` applied, on ``clean``'s device;
    ``clean`` itself when there is nothing to inject."""
    if injection is None or injection.n_inject == 0:
        return clean
    device = clean.x.device
    x, ei = apply_injection(
        clean.x, clean.edge_index, _as_tensor(injection.features, device), _as_tensor(injection.edges, device)
    )
    y = torch.cat([clean.y, torch.full((injection.n_inject,), -1, dtype=clean.y.dtype, device=device)])
    return TorchGraph(x, ei, y)


def apply_modification(clean: TorchGraph, modification: Modification | None) -> TorchGraph:
    """``clean`` with ``modification`` applied (new tensors; ``clean`` is not changed).

    Removed edges leave in both directions, added edges join in both directions, and the
    result's edges are sorted by (source, target) like a loaded graph's."""
    if modification is None or (modification.n_edge_flips == 0 and modification.n_nodes_modified == 0):
        return clean
    device = clean.x.device
    n = clean.x.shape[0]
    ei = clean.edge_index
    if modification.removed.shape[1]:
        r = _as_tensor(modification.removed, device)
        gone = torch.cat([r[0] * n + r[1], r[1] * n + r[0]])
        ei = ei[:, ~torch.isin(ei[0] * n + ei[1], gone)]
    if modification.added.shape[1]:
        a = _as_tensor(modification.added, device)
        ei = torch.cat([ei, a, a.flip(0)], dim=1)
    order = torch.argsort(ei[0] * n + ei[1])
    ei = ei[:, order]
    x = clean.x
    if modification.n_nodes_modified:
        x = x.clone()
        x[_as_tensor(modification.nodes, device)] = _as_tensor(modification.features, device).to(x.dtype)
    return TorchGraph(x, ei, clean.y)


def perturb_tensors(clean: TorchGraph, perturbation: "Injection | Modification | None") -> TorchGraph:
    """``clean`` with an injection or a modification applied."""
    if isinstance(perturbation, Modification):
        return apply_modification(clean, perturbation)
    return inject_tensors(clean, perturbation)


def check_device(device: str, flag: str = "--device") -> torch.device:
    """The torch device named ``device``, when this machine has it: ``cpu``, ``cuda`` or
    ``cuda:N`` (N below the number of GPUs), ``mps`` where available. Anything else (``meta``,
    which holds no data, a GPU that is not there, a typo) is one :class:`ConfigError` line."""
    from grb_dist.core.errors import ConfigError

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ConfigError(f"{flag} {device!r} is not a torch device; use cpu, cuda or cuda:N") from None
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ConfigError(f"{flag} {device}: this machine has no CUDA GPU (or this torch build has no CUDA); use cpu")
        if dev.index is not None and dev.index >= count:
            raise ConfigError(f"{flag} {device}: this machine has {count} CUDA GPU{'s' if count > 1 else ''} "
                              f"(cuda:0..cuda:{count - 1})")
        return dev
    if dev.type == "mps" and torch.backends.mps.is_available():
        return dev
    raise ConfigError(f"{flag} {device}: not a device models can be trained on here; use cpu, cuda or cuda:N")


def check_logits(out: Any, num_nodes: int, num_classes: int, what: str = "the model") -> None:
    """A model's output is what scoring needs: a tensor of ``num_nodes x num_classes`` finite
    numbers (a wrong width or a NaN would otherwise turn into a plausible accuracy through
    ``argmax``); anything else is one :class:`ConfigError` line saying what is wrong."""
    from grb_dist.core.errors import ConfigError

    if not isinstance(out, torch.Tensor):
        raise ConfigError(f"{what} returned {type(out).__name__}, not a tensor; forward(x, edge_index) must return "
                          "N x C logits")
    if tuple(out.shape) != (num_nodes, num_classes):
        raise ConfigError(f"{what} returned shape {tuple(out.shape)}, expected ({num_nodes}, {num_classes}): one row of "
                          "class scores per node, one column per class")
    if not out.dtype.is_floating_point:
        raise ConfigError(f"{what} returned {out.dtype} values; return floating-point logits")
    if not bool(torch.isfinite(out).all()):
        raise ConfigError(f"{what} returned NaN or infinite logits; forward(x, edge_index) must return finite class "
                          "scores (a diverged training gives them too: lower the learning rate)")
