"""Scoring a targeted perturbation: each target's prediction and margin on the graph with its
own flips and no other target's.

A model whose output at a node depends on nodes at most ``hops`` away (its receptive field,
:func:`grb_dist.attacks.shared.surrogate.receptive_hops`, passed in by the caller) is
evaluated on the target's ball of radius ``hops + 1`` in the perturbed graph: the induced
subgraph holds every node within ``hops`` of the target with all its edges (the extra hop
keeps their degrees, which normalisations read, exact), so a target costs the size of its
neighbourhood, not of the graph. A model that declares its program (every built-in GNN
without attention) is evaluated on less: the rows its output at the target reads, layer by
layer (:mod:`.rows`), the first layer's transform of every node computed once. The first
perturbed target of each model is also evaluated
on the whole graph, and a model whose two answers differ is evaluated on the whole graph
from then on (a defense that reads the graph globally: a low-rank or diffusion step). A
model without a known receptive field is always evaluated on the whole graph, once per
target with flips.

The margin of a target is ``logit[y] - max_{c != y} logit[c]`` with ``y`` its label: negative
when it is misclassified (Nettack's measure).
"""

from __future__ import annotations

import logging
import weakref
from typing import Callable

import numpy as np
import torch

from grb_dist.core.graph import Graph
from grb_dist.core.targeted import TargetedModification
from grb_dist.evaluation.rows import RowProgram, Unsupported, csr_rows
from grb_dist.models.tensors import TorchGraph, apply_modification

log = logging.getLogger(__name__)


def margins(logits: torch.Tensor, labels: np.ndarray) -> np.ndarray:
    """``logit[y] - max_{c != y} logit[c]`` per row of ``logits`` (float64)."""
    z = logits.detach().to("cpu", torch.float64)
    y = torch.as_tensor(np.asarray(labels, np.int64))
    own = z.gather(1, y[:, None]).squeeze(1)
    other = z.scatter(1, y[:, None], float("-inf")).max(1).values
    return (own - other).numpy()


class TargetEvaluator:
    """Per-target predictions and margins of models on one graph (module docstring)."""

    def __init__(self, graph: Graph, clean: TorchGraph):
        self.graph, self.clean, self.n = graph, clean, graph.num_nodes
        ei = graph.edge_index
        order = np.argsort(ei[0], kind="stable")
        self.indices = ei[1][order].astype(np.int64)
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(ei[0], minlength=self.n))]).astype(np.int64)
        self.checked: set[tuple[int, str]] = set()  # (model id, how) compared with the whole graph once
        self.whole_graph: set[int] = set()  # models (by id) found to read beyond their declared field
        self.programs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> RowProgram or None

    def _rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row of each entry, column) of the adjacency rows ``rows``, gathered at once."""
        return csr_rows(self.indptr, self.indices, rows)

    def ball(self, target: int, added: np.ndarray, hops: int) -> np.ndarray | None:
        """Sorted nodes within ``hops + 1`` of ``target`` in the clean graph plus its added
        pairs ``added`` (2 x a; every end taken as a neighbour of the target: a superset of its
        ball in the perturbed graph, also for an influencer's pairs one hop away), or ``None``
        past half the graph."""
        seen = np.zeros(self.n, dtype=bool)
        seen[target] = True
        frontier = np.unique(np.concatenate([self._rows(np.array([target]))[1], np.asarray(added).ravel()]))
        for _ in range(hops + 1):
            frontier = frontier[~seen[frontier]]
            seen[frontier] = True
            if 2 * int(seen.sum()) > self.n:
                return None
            if frontier.size == 0:
                break
            frontier = np.unique(self._rows(frontier)[1])
        return np.flatnonzero(seen)

    def _ball_logits(self, model: torch.nn.Module, mod: TargetedModification, target: int,
                     nodes: np.ndarray) -> torch.Tensor:
        removed, added = mod.pairs_of(target)
        row, col = self._rows(nodes)
        inside = np.zeros(self.n, dtype=bool)
        inside[nodes] = True
        keep = inside[col]
        src, dst = row[keep], col[keep]
        if removed.size:
            gone = np.isin(src * self.n + dst, np.concatenate([removed[0] * self.n + removed[1],
                                                               removed[1] * self.n + removed[0]]))
            src, dst = src[~gone], dst[~gone]
        src, dst = np.concatenate([src, added[0], added[1]]), np.concatenate([dst, added[1], added[0]])
        local = np.stack([np.searchsorted(nodes, src), np.searchsorted(nodes, dst)])
        local = local[:, np.argsort(local[0] * nodes.size + local[1], kind="stable")]
        device = self.clean.x.device
        x = self.clean.x[torch.as_tensor(nodes, device=device)]
        feats = mod.feature_row(target)
        pos = int(np.searchsorted(nodes, target))
        if feats is not None:
            x = x.clone()
            x[pos] = torch.as_tensor(feats, device=device, dtype=x.dtype)
        return model(x, torch.as_tensor(local, device=device))[pos]

    def _local_logits(self, model: torch.nn.Module, mod: TargetedModification, target: int,
                      hops: int | None) -> tuple[torch.Tensor | None, str]:
        """``target``'s logits computed locally and how (``rows``: on the rows the model's
        declared program reads, :mod:`.rows`; ``ball``: on its ball); ``None`` where neither
        applies (no known field, a ball past half the graph, a model found to read beyond its
        field)."""
        if hops is None or id(model) in self.whole_graph:
            return None, "whole"
        program = self._program(model)
        if program is not None and mod.feature_row(target) is None:
            return program.logits(target, *self.perturbed(mod, target)), "rows"
        nodes = self.ball(target, mod.pairs_of(target)[1], hops)
        return (None, "whole") if nodes is None else (self._ball_logits(model, mod, target, nodes), "ball")

    def _program(self, model: torch.nn.Module) -> RowProgram | None:
        if model not in self.programs:
            try:
                self.programs[model] = RowProgram(model, self.clean.x)
            except Unsupported:
                self.programs[model] = None
        return self.programs[model]

    def perturbed(self, mod: TargetedModification, target: int) -> tuple[Callable, Callable]:
        """``(neighbours, degree)`` of the graph with ``target``'s flips (:meth:`RowProgram.logits`)."""
        removed, added = mod.pairs_of(target)
        gone = np.concatenate([removed[0] * self.n + removed[1], removed[1] * self.n + removed[0]])
        src, dst = np.concatenate([added[0], added[1]]), np.concatenate([added[1], added[0]])
        ends = np.unique(np.concatenate([removed.ravel(), added.ravel()]))
        delta = np.zeros(ends.size, np.int64)
        np.add.at(delta, np.searchsorted(ends, removed.ravel()), -1)
        np.add.at(delta, np.searchsorted(ends, added.ravel()), 1)

        def neighbours(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            r, c = self._rows(rows)
            if gone.size:
                keep = ~np.isin(r * self.n + c, gone)
                r, c = r[keep], c[keep]
            extra = np.isin(src, rows)
            return np.concatenate([r, src[extra]]), np.concatenate([c, dst[extra]])

        def degree(nodes: np.ndarray) -> np.ndarray:
            d = self.indptr[nodes + 1] - self.indptr[nodes]
            if ends.size:  # the flips' ends: their degrees moved
                pos = np.minimum(np.searchsorted(ends, nodes), ends.size - 1)
                d = d + np.where(ends[pos] == nodes, delta[pos], 0)
            return d

        return neighbours, degree

    def _whole_logits(self, model: torch.nn.Module, mod: TargetedModification, target: int) -> torch.Tensor:
        g = apply_modification(self.clean, mod.of(target))
        return model(g.x, g.edge_index)[target]

    @torch.no_grad()
    def clean_outcomes(self, model: torch.nn.Module, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(prediction, margin) of ``model`` at ``targets`` on the clean graph (one pass)."""
        logits = model(self.clean.x, self.clean.edge_index)[torch.as_tensor(targets, device=self.clean.x.device)]
        return logits.argmax(1).cpu().numpy().astype(np.int64), margins(logits, self.graph.labels[targets])

    @torch.no_grad()
    def outcomes(self, model: torch.nn.Module, mod: TargetedModification,
                 hops: int | None) -> tuple[np.ndarray, np.ndarray]:
        """(prediction, margin) of ``model`` at each of ``mod.targets``, each on the graph
        with its own flips; ``hops``: the model's receptive field (``None``: unknown)."""
        targets = mod.targets
        clean_logits = model(self.clean.x, self.clean.edge_index)[torch.as_tensor(targets, device=self.clean.x.device)]
        rows = list(clean_logits.unbind(0))
        flips = mod.flips_per_target()
        changed = flips > 0
        if mod.nodes.size:
            changed |= np.isin(targets, mod.nodes)
        for i in np.flatnonzero(changed).tolist():
            t = int(targets[i])
            local, path = self._local_logits(model, mod, t, hops)
            if local is None:
                rows[i] = self._whole_logits(model, mod, t)
                continue
            rows[i] = local
            if (id(model), path) not in self.checked:  # each way a model is evaluated, checked once
                self.checked.add((id(model), path))
                whole = self._whole_logits(model, mod, t)
                if not torch.allclose(rows[i], whole, rtol=1e-4, atol=1e-5):
                    log.warning("%s: its output computed on a target's %d-hop neighbourhood differs from the "
                                "whole graph's; scoring it on the whole graph", type(model).__name__, hops + 1)
                    self.whole_graph.add(id(model))
                    rows[i] = whole
        logits = torch.stack(rows) if rows else clean_logits
        return logits.argmax(1).cpu().numpy().astype(np.int64), margins(logits, self.graph.labels[targets])


__all__ = ["TargetEvaluator", "margins"]
