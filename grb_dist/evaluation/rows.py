"""A model's output at one node of a perturbed graph, computed on the rows it reads only.

A model that declares its eval-mode program (:meth:`grb_dist.models.base.GraphModel.incremental`:
row-wise ``map`` operations and ``propagate`` with a sparse operator) reads, for its output
at ``t``, the last propagation's input at ``t`` and its neighbours, that propagation's
input at their neighbours, and so on: a ``k``-th last propagation reads rows within ``k``
hops of ``t``. :class:`RowProgram` records the program once per model and evaluates it
backwards from ``t``: the rows each operation must produce, then each operation on those
rows alone, in the graph with one target's flips (its neighbours and degrees from the clean
CSR plus the flips). The operations before the first propagation do not depend on the
graph: they are computed once on every row and gathered from then on.

So a three-layer GCN's output at a target costs its 2-hop ball's first propagation and
less after, however large its 4-hop ball (which the ball evaluation of :mod:`.targeted`
runs the whole model on). Attention (``attend``) is not supported: such a model is
evaluated on the ball.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

#: The propagation operators evaluated here (see ``grb_dist.attacks.shared.incremental.KINDS``).
KINDS = ("gcn", "sym", "sum", "mean")


class Unsupported(Exception):
    """The program uses an operation this module does not evaluate (attention)."""


class _Node:
    __slots__ = ("op", "fn", "inputs", "kind", "static", "value")

    def __init__(self, op: str, inputs: tuple, fn: Callable | None = None, kind: str | None = None):
        self.op, self.inputs, self.fn, self.kind = op, inputs, fn, kind
        # no propagation upstream: the same on every graph, computed once on every row
        self.static = op != "propagate" and all(i.static for i in inputs)
        self.value: torch.Tensor | None = None


class _Recorder:
    """The operations of a declared program, recorded in the order run (a topological one)."""

    def __init__(self) -> None:
        self.nodes: list[_Node] = []

    def _add(self, node: _Node) -> _Node:
        self.nodes.append(node)
        return node

    def map(self, fn, *hs):
        return self._add(_Node("map", hs, fn=fn))

    def propagate(self, h, kind):
        if kind not in KINDS:
            raise Unsupported(f"propagation {kind!r}")
        return self._add(_Node("propagate", (h,), kind=kind))

    def attend(self, *args, **kwargs):
        raise Unsupported("attention")


def declares_program(model: torch.nn.Module) -> bool:
    """Whether ``model``'s own class declares its program (an inherited one may not fit)."""
    own = type(model).__dict__
    return "incremental_layer" in own or "incremental" in own


class RowProgram:
    """``model``'s declared program on ``x`` (the clean features, N x F), ready to evaluate
    one node at a time on perturbed graphs (module docstring). Raises :class:`Unsupported`
    for a model that declares no program, or one with attention."""

    def __init__(self, model: torch.nn.Module, x: torch.Tensor):
        if not declares_program(model):
            raise Unsupported(f"{type(model).__name__} declares no program")
        rec = _Recorder()
        self.leaf = _Node("leaf", ())
        with torch.no_grad():
            self.out = model.incremental(rec, self.leaf)
        self.nodes = rec.nodes
        self.leaf.value = x
        for node in self.nodes:  # the graph-free prefix, on every row, once
            if node.static:
                node.value = node.fn(*(i.value for i in node.inputs))

    @torch.no_grad()
    def logits(self, target: int, neighbours: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
               degree: Callable[[np.ndarray], np.ndarray]) -> torch.Tensor:
        """The output at ``target`` in a graph given by ``neighbours(rows) -> (row, col)``
        (every edge entry of those rows, both directions listed, no self-loops) and
        ``degree(nodes)``."""
        return self.run(self.plan(target, neighbours), lambda nodes: torch.as_tensor(degree(nodes), dtype=torch.float64))

    def plan(self, target: int, neighbours: Callable[[np.ndarray], tuple]) -> "Plan":
        """The index work of evaluating the output at ``target`` in a graph given by
        ``neighbours(rows) -> (row, col)`` or ``(row, col, ref)``: ``ref[i]`` the index of
        entry ``i``'s weight in the ``weights`` given to :meth:`run` (-1: weight 1). A plan
        holds for any weights and degrees of the same structure."""
        need: dict[int, np.ndarray] = {id(self.out): np.array([target], np.int64)}
        entries: dict[int, tuple] = {}
        for node in reversed(self.nodes):  # the rows each operation must produce
            rows = need.get(id(node))
            if rows is None or node.static:
                continue
            if node.op == "propagate":
                entries[id(node)] = got = neighbours(rows)
                rows = np.union1d(rows, got[1])
            for i in node.inputs:
                need[id(i)] = rows if id(i) not in need else np.union1d(need[id(i)], rows)
        steps = [(node, _Step(node, need, entries.get(id(node)))) for node in self.nodes
                 if not node.static and id(node) in need]
        return Plan(steps, _gather(self.out, need, np.array([target], np.int64)))

    def run(self, plan: "Plan", degree: Callable[[np.ndarray], torch.Tensor],
            weights: torch.Tensor | None = None) -> torch.Tensor:
        """The output at the plan's target, differentiable in ``weights`` (the entries'
        weights by their ``ref``) and in what ``degree(nodes)`` returns (a tensor of weighted
        degrees). The operators are those of the whole-graph weighted surrogate
        (:mod:`grb_dist.attacks.shared.weighted`): ``gcn`` takes ``D + 1``, ``sym`` and
        ``mean`` give a row of degree 0 nothing."""
        for node, step in plan.steps:
            if node.op == "map":
                node.value = node.fn(*(i.value[g] for i, g in zip(node.inputs, step.gathers)))
            else:
                node.value = step.propagate(node.inputs[0].value, degree, weights)
        return self.out.value[plan.out][0]


class _Step:
    """One operation's index work in a :class:`Plan`: where its inputs' rows sit, and for a
    propagation its entries (with a self-loop per row for ``gcn``), their rows' positions
    and the nodes whose degrees it reads."""

    def __init__(self, node: _Node, need: dict, entries: tuple | None):
        rows = need[id(node)]
        self.rows = rows
        if node.op == "map":
            self.gathers = [_gather(i, need, rows) for i in node.inputs]
            return
        r, c, *ref = entries
        ref = ref[0] if ref else None
        self.kind = node.kind
        if node.kind == "gcn":  # D~^-1/2 (A + I) D~^-1/2, D~ = D + 1
            r, c = np.concatenate([r, rows]), np.concatenate([c, rows])
            if ref is not None:
                ref = np.concatenate([ref, np.full(rows.size, -1)])
        if node.kind in ("gcn", "sym"):  # the degrees of both ends
            self.nodes = np.union1d(rows, c)
            self.pr, self.pc = _pos(self.nodes, r), _pos(self.nodes, c)
        else:  # mean: the receiving row's; sum: none
            self.nodes, self.pr, self.pc = rows, _pos(rows, r), None
        self.index = _pos(rows, r)
        self.src = _gather(node.inputs[0], need, c)
        self.ref = None if ref is None else torch.as_tensor(ref)
        self.n = r.size

    def propagate(self, h: torch.Tensor, degree, weights: torch.Tensor | None) -> torch.Tensor:
        w = None
        if self.kind in ("gcn", "sym"):
            d = degree(self.nodes) + (1 if self.kind == "gcn" else 0)
            inv = torch.where(d > 0, d.clamp_min(1e-12).pow(-0.5), torch.zeros_like(d))
            w = inv[self.pr] * inv[self.pc]
        elif self.kind == "mean":  # D^-1 A
            d = degree(self.nodes)
            w = torch.where(d > 0, 1.0 / d.clamp_min(1e-12), torch.zeros_like(d))[self.pr]
        if self.ref is not None and weights is not None and weights.numel():  # an empty block: every ref is -1
            ref = self.ref.to(weights.device)
            ew = torch.where(ref >= 0, weights[ref.clamp_min(0)], torch.ones((), dtype=weights.dtype,
                                                                              device=weights.device))
            w = ew if w is None else w.to(ew.dtype) * ew
        src = h[self.src.to(h.device)]
        w = torch.ones(self.n, dtype=src.dtype) if w is None else w
        weight = w.to(device=src.device, dtype=src.dtype)
        out = torch.zeros((self.rows.size, *src.shape[1:]), dtype=src.dtype, device=src.device)
        return out.index_add(0, self.index.to(src.device), src * weight.view(-1, *([1] * (src.dim() - 1))))


class Plan:
    """The index work of one target's evaluation (:meth:`RowProgram.plan`)."""

    def __init__(self, steps: list, out: torch.Tensor):
        self.steps, self.out = steps, out


def _gather(node: _Node, need: dict, rows: np.ndarray) -> torch.Tensor:
    """Where ``rows`` sit in ``node``'s value: the rows themselves for a graph-free value
    (computed on every row), else their positions among the rows it is computed on."""
    return torch.as_tensor(rows) if node.static else _pos(need[id(node)], rows)


def _pos(sorted_nodes: np.ndarray, v: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(np.searchsorted(sorted_nodes, v))


def csr_rows(indptr: np.ndarray, indices: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row of each entry, column) of the CSR rows ``rows``, gathered at once."""
    starts = indptr[rows]
    lens = indptr[rows + 1] - starts
    flat = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
    return np.repeat(rows, lens), indices[flat]


__all__ = ["KINDS", "Plan", "RowProgram", "Unsupported", "csr_rows", "declares_program"]
