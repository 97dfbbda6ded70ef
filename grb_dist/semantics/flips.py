"""Where f and g change their decision along an attack's edge order (Gosch et al. 2023).

An attack (:mod:`grb_dist.semantics.attacks`) gives, per new node v, the order in which it
connects known nodes to v; :func:`f_flips` adds them one at a time and finds the first
prefix at which the model f changes its decision at v, :func:`g_flips` the same for the
Bayes classifier g. Models with a known receptive field are evaluated on v's ball
(:class:`BallView`), which costs the size of v's neighbourhood, not of the graph.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from grb_dist.attacks.shared.surrogate import receptive_hops

if TYPE_CHECKING:
    from grb_dist.semantics.data import Prepared

log = logging.getLogger(__name__)


def g_flips(prepared: Prepared, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(clean Bayes decisions, first step at which they change along ``order``; inf if never)."""
    t = order.shape[0]
    if prepared.g_scores is None:
        return np.full(t, -1, dtype=np.int64), np.full(t, np.inf)
    valid = order >= 0
    steps = np.where(valid[..., None], prepared.g_step[np.where(valid, order, 0)], 0.0)  # T x S x C
    delta = np.cumsum(steps, axis=1)
    g0 = prepared.g_scores.argmax(1)
    scores = prepared.g_scores[:, None, :] + delta
    changed = scores.argmax(2) != g0[:, None]
    first = np.where(changed.any(1), changed.argmax(1) + 1.0, np.inf)
    return g0, first


def node_graphs(prepared: Prepared):
    """Per new node i: ``(i, x, edges, neighbours)`` where ``x`` is the known features plus
    the node's row and ``edges(extra)`` the known graph plus the node's clean edges and the
    edges to the base ids ``extra``."""
    import torch

    graph = prepared.graph
    n = graph.num_nodes
    xb = torch.as_tensor(graph.features)
    base_ei = torch.as_tensor(graph.edge_index)
    t = prepared.y_new.size
    sorted_nb = bool(np.all(np.diff(prepared.nb_node) >= 0))
    starts = np.searchsorted(prepared.nb_node, np.arange(t + 1)) if sorted_nb else None
    for i in range(t):
        nbs = prepared.nb_base[starts[i]:starts[i + 1]] if starts is not None else prepared.nb_base[prepared.nb_node == i]
        x = torch.cat([xb, torch.as_tensor(prepared.x_new[i : i + 1])])

        def edges(extra: np.ndarray, nbs=nbs) -> torch.Tensor:
            others = torch.as_tensor(np.concatenate([nbs, extra]), dtype=torch.long)
            v = torch.full_like(others, n)
            return torch.cat([base_ei, torch.stack([v, others]), torch.stack([others, v])], 1)

        yield i, x, edges, nbs


class BallView:
    """f's logits at a new node v computed on the ball of radius ``hops + 1`` around v.

    For a model whose output at a node depends on nodes at most ``hops`` away, the induced
    subgraph on that ball gives the same output at v as the whole graph: it holds every
    node within ``hops`` of v with all its edges (the extra hop keeps their degrees, which
    normalisations read, exact). An edge check then costs the size of v's neighbourhood,
    not of the graph. Balls over half the graph use the whole graph.
    """

    def __init__(self, model, prepared: Prepared, hops: int):
        import scipy.sparse as sp
        import torch

        graph = prepared.graph
        self.model, self.n, self.hops = model, graph.num_nodes, hops
        ei = graph.edge_index
        adj = sp.csr_matrix((np.ones(ei.shape[1], dtype=np.float32), (ei[0], ei[1])), shape=(self.n, self.n))
        self.indptr, self.indices = adj.indptr.astype(np.int64), adj.indices.astype(np.int64)
        self.features = torch.as_tensor(graph.features)

    def _rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row of each entry, column) of the adjacency rows ``rows``, gathered at once."""
        starts = self.indptr[rows]
        lens = self.indptr[rows + 1] - starts
        flat = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        return np.repeat(rows, lens), self.indices[flat]

    def ball(self, neighbours: np.ndarray) -> np.ndarray | None:
        """Sorted known nodes within ``hops + 1`` of v (v's neighbours given), or None."""
        seen = np.zeros(self.n, dtype=bool)
        frontier = np.unique(neighbours)
        seen[frontier] = True
        total = frontier.size
        for _ in range(self.hops):
            if frontier.size == 0:
                break
            reached = self._rows(frontier)[1]
            frontier = np.unique(reached[~seen[reached]])
            seen[frontier] = True
            total += frontier.size
            if 2 * total > self.n:
                return None
        return np.flatnonzero(seen)

    def logits(self, x_row, neighbours: np.ndarray, full: Callable[[], Any]):
        """v's logits with ``neighbours`` (base ids); ``full()`` gives them on the whole graph."""
        import torch

        nodes = self.ball(neighbours)
        if nodes is None:
            return full()
        row, col = self._rows(nodes)
        inside = np.zeros(self.n, dtype=bool)
        inside[nodes] = True
        keep = inside[col]
        local = np.stack([np.searchsorted(nodes, row[keep]), np.searchsorted(nodes, col[keep])])
        v = nodes.size
        pos = torch.as_tensor(np.searchsorted(nodes, neighbours), dtype=torch.long)
        vv = torch.full_like(pos, v)
        ei = torch.cat([torch.as_tensor(local, dtype=torch.long), torch.stack([vv, pos]), torch.stack([pos, vv])], 1)
        x = torch.cat([self.features[torch.as_tensor(nodes)], x_row])
        return self.model(x, ei)[v]


def f_flips(model, prepared: Prepared, order: np.ndarray, steps: np.ndarray,
            adaptive: Callable[[int, Any, Any, np.ndarray], np.ndarray] | None = None,
            ball: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """f's clean decision at each new node and the first prefix of its order (1-based) at
    which it changes (inf when not within the node's ``steps``), adding one edge at a time.

    Models with a known receptive field are evaluated on v's ball (:class:`BallView`;
    ``ball=False``: always on the whole graph), after a check on the first attacked node
    that the ball and the whole graph agree.
    Returns (f_clean, f_flip, order) — ``order`` is the adaptive attack's when given.
    """
    import torch

    n = prepared.graph.num_nodes
    t = prepared.y_new.size
    f0 = np.zeros(t, dtype=np.int64)
    flips = np.full(t, np.inf)
    uses_graph = getattr(getattr(model, "model", model), "uses_graph", True) or hasattr(model, "model")
    hops = receptive_hops(model) if uses_graph and ball else None
    view = BallView(model, prepared, hops) if hops is not None else None
    checked = False
    order = order.copy()
    with torch.no_grad():
        for i, x, edges, nbs in node_graphs(prepared):

            def logits(extra: np.ndarray, x=x, edges=edges, nbs=nbs):
                full = lambda: model(x, edges(extra))[n]  # noqa: E731
                if view is None:
                    return full()
                return view.logits(x[n:], np.concatenate([nbs, extra]), full)

            clean = edges(np.empty(0, np.int64))
            if adaptive is not None:
                with torch.enable_grad():
                    order[i] = adaptive(i, x, clean, nbs)
            extra = order[i, : int(steps[i])]
            extra = extra[extra >= 0]
            if view is not None and not checked and view.ball(np.concatenate([nbs, extra])) is not None:
                whole = model(x, edges(extra))[n]
                if not torch.allclose(logits(extra), whole, rtol=1e-4, atol=1e-5):
                    log.warning("%s: its output on a node's %d-hop ball differs from the whole graph's; "
                                "evaluating on the whole graph", type(model).__name__, hops + 1)
                    view = None
                checked = True
            f0[i] = int(logits(np.empty(0, np.int64)).argmax())
            if not uses_graph:
                continue
            for k in range(1, int(steps[i]) + 1):
                if order[i, k - 1] < 0:
                    break
                if int(logits(order[i, :k]).argmax()) != f0[i]:
                    flips[i] = k
                    break
    return f0, flips, order


__all__ = ["BallView", "f_flips", "g_flips", "node_graphs"]
