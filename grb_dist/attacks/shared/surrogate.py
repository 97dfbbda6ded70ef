"""What the attack scenarios share about a surrogate: how far its outputs reach
(:func:`receptive_hops`), the receptive-field subgraph and clean pass of its targets
(:func:`surrogate_parts`), and the cache that computes them once for several attacks on
the same graph, surrogate and targets (:class:`SurrogateCache`)."""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.utils import k_hop_subgraph

from grb_dist.attacks.shared.incremental import IncrementalSurrogate, program_depth, supports_incremental
from grb_dist.core.graph import Graph
from grb_dist.models.tensors import graph_tensors

#: Use the receptive-field subgraph only when it holds less than this fraction of the nodes.
SUBGRAPH_MAX_FRACTION = 0.9


def receptive_hops(model: torch.nn.Module) -> int | None:
    """How many hops of neighbourhood a node's output depends on; ``None`` when unknown.

    A model's own class may declare it (an integer or a property ``receptive_hops``; every
    built-in GNN does), else the depth of the program its own class declares
    (:func:`~grb_dist.attacks.shared.incremental.program_depth`). A subclass that
    inherits a declaration but may compute something else, and any other model, get
    ``None``: attacks then run on the whole graph, which is always correct.
    """
    own = type(model).__dict__.get("receptive_hops", vars(model).get("receptive_hops"))
    if own is not None:
        hops = getattr(model, "receptive_hops")
        if isinstance(hops, int) and not isinstance(hops, bool):
            return hops
    return program_depth(model)


class SurrogateCache:
    """The surrogate-side work attacks can share: receptive-field subgraph, clean labels and
    the incremental clean pass, per (graph, surrogate, targets, device).

    Pass one instance to several :meth:`InjectionAttack.attack` calls (repeats and attacks
    on the same surrogate and difficulty, e.g. one sweep task's batch of cells): the first
    call computes, the others reuse. Entries hold their graph and surrogate, so an entry is
    only ever matched by the very same objects, which must not change meanwhile (the
    surrogate is frozen during attacks).
    """

    def __init__(self) -> None:
        self._entries: list[tuple[Graph, torch.nn.Module, bytes, str, bool, dict]] = []
        #: how many contexts were computed and how many were reused
        self.built = 0
        self.reused = 0

    def get(self, graph: Graph, model: torch.nn.Module, targets: np.ndarray, device: torch.device, incremental: bool):
        key = _targets_key(targets)
        for g, m, k, d, inc, parts in self._entries:
            if g is graph and m is model and k == key and d == str(device) and inc == incremental:
                self.reused += 1
                return parts
        return None

    def put(self, graph: Graph, model: torch.nn.Module, targets: np.ndarray, device: torch.device,
            incremental: bool, parts: dict) -> None:
        self._entries.append((graph, model, _targets_key(targets), str(device), incremental, parts))
        self.built += 1


def _targets_key(targets: np.ndarray) -> bytes:
    return np.ascontiguousarray(targets, dtype=np.int64).tobytes()


def surrogate_parts(graph: Graph, model: torch.nn.Module, targets: np.ndarray, device: torch.device,
                    incremental: bool) -> dict:
    """The surrogate's side of an attack context: the targets' receptive-field subgraph
    (every node within ``hops + 1`` of a target, when it is smaller than
    :data:`SUBGRAPH_MAX_FRACTION` of the graph), the clean labels on the targets and, with
    ``incremental`` and a surrogate that declares its program, the incremental clean pass."""
    t = graph_tensors(graph, device)
    n = graph.num_nodes
    tgt = torch.as_tensor(targets, dtype=torch.long, device=device)
    deg = torch.bincount(t.edge_index[0], minlength=n)[tgt]
    hops = receptive_hops(model)
    subset = None
    x, ei, local_t = t.x, t.edge_index, tgt
    if hops is not None:
        sub, sub_ei, mapping, _ = k_hop_subgraph(tgt, hops + 1, t.edge_index, relabel_nodes=True, num_nodes=n)
        if sub.numel() < SUBGRAPH_MAX_FRACTION * n:
            subset, x, ei, local_t = sub, t.x[sub], sub_ei, mapping
    inc = None
    if incremental and supports_incremental(model):
        inc = IncrementalSurrogate(model, x, ei, local_t)
        labels = inc.clean_logits.argmax(1)
    else:
        with torch.no_grad():
            labels = model(x, ei)[local_t].argmax(1)
    return dict(x=x, edge_index=ei, targets=local_t, labels=labels, degrees=deg, subset=subset, incremental=inc)


__all__ = ["SUBGRAPH_MAX_FRACTION", "SurrogateCache", "receptive_hops", "surrogate_parts"]
