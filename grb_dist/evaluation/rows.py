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

from typing import Any, Callable

import numpy as np
import torch

#: The propagation operators evaluated here (see ``grb_dist.attacks.shared.incremental.KINDS``).
KINDS = ("gcn", "sym", "sum", "mean")


class Unsupported(Exception):
    """The program uses an operation this module does not evaluate (attention)."""


class _Node:
    __slots__ = ("op", "fn", "inputs", "kind", "static", "value", "rows")

    def __init__(self, op: str, inputs: tuple, fn: Callable | None = None, kind: str | None = None):
        self.op, self.inputs, self.fn, self.kind = op, inputs, fn, kind
        # no propagation upstream: the same on every graph, computed once on every row
        self.static = op != "propagate" and all(i.static for i in inputs)
        self.value: torch.Tensor | None = None
        self.rows: np.ndarray | None = None


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
        def weighted(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, None]:
            return (*neighbours(rows), None)

        return self.run(target, weighted, lambda nodes: torch.as_tensor(degree(nodes), dtype=torch.float64))

    def run(self, target: int, neighbours: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, Any]],
            degree: Callable[[np.ndarray], torch.Tensor]) -> torch.Tensor:
        """The output at ``target`` in a weighted graph, differentiable in its weights:
        ``neighbours(rows) -> (row, col, weight)`` (``weight``: a tensor of the entries'
        weights, or ``None`` for 1) and ``degree(nodes)``, a tensor of weighted degrees. The
        operators are those of the whole-graph weighted surrogate
        (:mod:`grb_dist.attacks.shared.weighted`): ``gcn`` takes ``D + 1``, ``sym`` and
        ``mean`` give a row of degree 0 nothing."""
        need: dict[int, np.ndarray] = {id(self.out): np.array([target], np.int64)}
        for node in reversed(self.nodes):  # the rows each operation must produce
            rows = need.get(id(node))
            if rows is None or node.static:
                continue
            if node.op == "propagate":
                rows = np.union1d(rows, neighbours(rows)[1])
            for i in node.inputs:
                need[id(i)] = rows if id(i) not in need else np.union1d(need[id(i)], rows)
        for node in self.nodes:
            if node.static or id(node) not in need:
                continue
            rows = need[id(node)]
            if node.op == "map":
                node.value = node.fn(*(_at(i, rows) for i in node.inputs))
            else:
                node.value = self._propagate(node, rows, neighbours, degree)
            node.rows = rows
        return _at(self.out, np.array([target], np.int64))[0]

    @staticmethod
    def _propagate(node: _Node, rows: np.ndarray, neighbours, degree) -> torch.Tensor:
        (h,) = node.inputs
        r, c, ew = neighbours(rows)
        if node.kind == "gcn":  # D~^-1/2 (A + I) D~^-1/2, D~ = D + 1
            r, c = np.concatenate([r, rows]), np.concatenate([c, rows])
            if ew is not None:
                ew = torch.cat([ew, torch.ones(rows.size, dtype=ew.dtype, device=ew.device)])
        if node.kind in ("gcn", "sym"):
            nodes = np.union1d(rows, c)
            d = degree(nodes) + (1 if node.kind == "gcn" else 0)
            inv = torch.where(d > 0, d.clamp_min(1e-12).pow(-0.5), torch.zeros_like(d))
            w = inv[_pos(nodes, r)] * inv[_pos(nodes, c)]
        elif node.kind == "mean":  # D^-1 A
            d = degree(rows)
            w = torch.where(d > 0, 1.0 / d.clamp_min(1e-12), torch.zeros_like(d))[_pos(rows, r)]
        else:  # sum: A
            w = None
        if ew is not None:
            w = ew if w is None else w.to(ew.dtype) * ew
        elif w is None:
            w = torch.ones(r.size)
        src = _at(h, c)
        weight = w.to(device=src.device, dtype=src.dtype)
        out = torch.zeros((rows.size, *src.shape[1:]), dtype=src.dtype, device=src.device)
        index = torch.as_tensor(np.searchsorted(rows, r), device=src.device)
        return out.index_add(0, index, src * weight.view(-1, *([1] * (src.dim() - 1))))


def _pos(sorted_nodes: np.ndarray, v: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(np.searchsorted(sorted_nodes, v))


def csr_rows(indptr: np.ndarray, indices: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row of each entry, column) of the CSR rows ``rows``, gathered at once."""
    starts = indptr[rows]
    lens = indptr[rows + 1] - starts
    flat = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
    return np.repeat(rows, lens), indices[flat]


def _at(node: _Node, rows: np.ndarray) -> Any:
    """``node``'s value at ``rows`` (sorted, within the rows it was computed on)."""
    if node.static:
        return node.value[torch.as_tensor(rows, device=node.value.device)]
    pos = np.searchsorted(node.rows, rows)
    return node.value[torch.as_tensor(pos, device=node.value.device)]


__all__ = ["KINDS", "RowProgram", "Unsupported", "csr_rows", "declares_program"]
