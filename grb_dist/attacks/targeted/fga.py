"""FGA, targeted: the fast gradient attack on one node (Chen et al., 2018, "Fast Gradient
Attack on Network Embedding"), each target attacked alone on the clean graph.

For a target ``t`` fought for class ``y`` (the surrogate's clean prediction: the attacker
has no test labels), ``budget`` times:

1. the gradient of the surrogate's loss at ``t`` (``loss``; default the paper's
   cross-entropy of ``t``'s logits against ``y``) with respect to the weight of every pair
   ``(t, v)``, ``v != t``, is taken on the current graph (the clean graph with ``t``'s
   earlier flips; an edge has weight 1, an absent pair 0);
2. each pair's *gain* is its gradient times the direction of its flip (``+g`` to add an
   absent pair, ``-g`` to remove an edge): the first-order change of the loss;
3. the pair of the largest gain is flipped. A pair is flipped at most once; when no pair
   has a positive gain the attack stops (as the global FGA, which flips only pairs of
   positive gradient).

Departures from the paper: Chen et al. differentiate a dense N x N adjacency (the gradient
matrix symmetrised) of the attacked GCN and flip the link of the largest absolute gradient
whose sign its flip follows; that is the pair of the largest gain here, computed without
anything N x N, on the job's surrogate (any model with a weighted program or a
``weighted_forward``), for the surrogate's prediction rather than the true label; only
direct flips (pairs at ``t``), as the targeted scenario demands; and the early stop above.

Exact and local (:func:`local_gains`; surrogates whose declared program is weighted, i.e.
every built-in GNN but the attention ones). With ``L`` the program's depth (the most
propagations on any path: the receptive field that
:func:`~grb_dist.attacks.shared.surrogate.receptive_hops` reports) and ``C`` the target and
its flipped partners (the nodes whose edges or degrees differ from the clean graph), the
program runs with edge weights on the ball of radius ``R = max(L, 2L - 2)`` around ``C``
(the nodes on its rim get their full degree), with the pairs ``(t, v)`` of the ball as
differentiable weights, a probe on row ``t`` of every propagation's output and a
differentiable degree of ``t``. What stays exact:

* every value of the ball the target's logits read: a node at distance ``d`` from ``C`` has
  its value after ``k`` propagations right when ``d + k <= R``; the other values of the
  ball are pinned to those of a clean pass over the whole graph (done once per batch),
  which they equal, since no node of ``C`` is within ``k`` hops of them (``R >= 2k``);
  pinned values do not reach ``t``'s logits at the current graph (``R >= L``), so no
  gradient is lost;
* every pair ``(t, v)`` with ``v`` outside the ball: ``v`` is more than ``L`` hops from ``t``,
  so at weight 0 its gradient is its message alone plus the change of ``t``'s degree:
  ``sum_k n_k(t, v) <probe_k, H_k[v]> + d loss / d deg(t)``, with ``H_k`` the clean input
  of propagation ``k``, ``n_k(t, v)`` its normalisation at ``(t, v)`` and ``probe_k`` the
  gradient at row ``t`` of its output.

These are the numbers the weighted surrogate gives on the whole graph (the tests check it
for every weighted operator, before and after flips).

Cost per flip: a breadth-first search to radius ``R`` around ``C``, the program forward
and backward on that ball (O(E_ball F)) and, for the pairs outside it, one product of each
propagation's clean input with a vector (O(N F)); once per batch the clean pass over the
whole graph, whose propagation inputs are kept (memory O(N F) per propagation). Nothing
is N x N. Other surrogates (attention models, through their ``weighted_forward``), and
``receptive_field: false``, are evaluated on the whole graph with the N - 1 pairs of ``t``
as a differentiable vector beside the clean edges (:func:`full_gains`): O(E F + N) per flip.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from grb_dist.attacks.base import gradients, input_grad
from grb_dist.attacks.shared.flips import attack_loss, check_loss
from grb_dist.attacks.shared.incremental import Ops, program_depth
from grb_dist.attacks.shared.weighted import WEIGHTED_MODELS, program_is_weighted, weighted_surrogate
from grb_dist.attacks.targeted.base import TargetContext, TargetedAttack, TargetedConfig
from grb_dist.core.errors import ConfigError
from grb_dist.models.tensors import graph_tensors


@dataclass(frozen=True)
class FGAConfig(TargetedConfig):
    """Attributes:
        loss: the loss at the target: ``ce`` (the paper's cross-entropy), ``margin``,
            ``tanh_margin`` or ``prob_margin`` (:func:`~grb_dist.attacks.shared.flips.attack_loss`).
        receptive_field: evaluate on the target's receptive field (exact; surrogates with a
            weighted program), else on the whole graph (the same flips, slower).

    ``steps`` is not read: FGA takes one gradient per flip, ``budget`` of them.
    """

    loss: str = "ce"
    receptive_field: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_loss(self.loss)
        if not isinstance(self.receptive_field, bool):
            raise ConfigError(f"receptive_field must be true or false, got {self.receptive_field!r}")


# ---------------------------------------------------------------------- the weighted program


@dataclass
class _H:
    """A handle of :class:`WeightedProgram`: a value and how many propagations made it."""

    t: torch.Tensor
    depth: int


def _inverse_root(d: torch.Tensor) -> torch.Tensor:
    return torch.where(d > 0, d.clamp_min(1e-12).pow(-0.5), torch.zeros_like(d))


def _inverse(d: torch.Tensor) -> torch.Tensor:
    return torch.where(d > 0, 1.0 / d.clamp_min(1e-12), torch.zeros_like(d))


def end_factor(kind: str, degree: torch.Tensor) -> torch.Tensor:
    """Per node of degree ``degree``, its factor in the entries of the operator ``kind``: an
    entry ``(r, c)`` of weight ``w`` is ``f(r) w f(c)`` (``gcn``, ``sym``, ``sum``); for
    ``mean`` it is ``w / deg(r)``, and this is the column's factor, 1."""
    if kind == "gcn":
        return _inverse_root(degree + 1)
    if kind == "sym":
        return _inverse_root(degree)
    if kind in ("sum", "mean"):
        return torch.ones_like(degree)
    raise ConfigError(f"the surrogate uses the {kind!r} operator, which has no edge-weighted form; FGA's "
                      f"receptive-field evaluation needs one of: {WEIGHTED_MODELS}")


class WeightedProgram(Ops):
    """A model's declared program on an edge list with weights (both directions listed),
    with the normalisations of :class:`~grb_dist.attacks.shared.weighted.WeightedSurrogate`
    computed from ``degree`` (given: it may differ from the listed weights' sums).

    Args:
        row, col: the entries (``row`` receives from ``col``).
        weight: their weights (may require gradients).
        degree: each node's weighted degree.
        pin: ``pin(k, depth, x)``: propagation ``k``'s input ``x`` (rows x width) with some
            rows replaced (their values known from elsewhere).
        probe_row: a row that gets a zero, differentiable probe added to every propagation's
            output (``probes``: ``d loss / d probe`` is the gradient at that row).
        record: keep every propagation's input (detached) in ``inputs``.
    """

    def __init__(self, row: torch.Tensor, col: torch.Tensor, weight: torch.Tensor, degree: torch.Tensor, *,
                 pin=None, probe_row: int | None = None, record: bool = False):
        self.row, self.col, self.weight, self.degree = row, col, weight, degree
        self.n = degree.shape[0]
        self.pin, self.probe_row, self.record = pin, probe_row, record
        self.kinds: list[str] = []
        self.inputs: list[torch.Tensor] = []
        self.probes: list[torch.Tensor] = []
        self._norms: dict[str, tuple] = {}

    def _norm(self, kind: str) -> tuple[torch.Tensor, torch.Tensor | None]:
        if kind not in self._norms:
            d, w = self.degree, self.weight
            f = end_factor(kind, d)
            if kind == "mean":
                vals, loop = _inverse(d)[self.row] * w, None
            else:
                vals, loop = f[self.row] * w * f[self.col], (f * f if kind == "gcn" else None)
            self._norms[kind] = (vals, loop)
        return self._norms[kind]

    def map(self, fn, *hs):
        return _H(fn(*(h.t for h in hs)), max(h.depth for h in hs))

    def propagate(self, h, kind):
        k = len(self.kinds)
        self.kinds.append(kind)
        x = h.t.reshape(h.t.shape[0], -1)
        if self.record:
            self.inputs.append(x.detach())
        if self.pin is not None:
            x = self.pin(k, h.depth, x)
        vals, loop = self._norm(kind)
        vals = vals.to(x.dtype)
        if vals.requires_grad or x.requires_grad:
            out = x.new_zeros(self.n, x.shape[1]).index_add(0, self.row, vals[:, None] * x[self.col])
        else:  # no gradient wanted (the clean pass): a sparse product, no E x F temporary
            a = torch.sparse_coo_tensor(torch.stack([self.row, self.col]), vals, (self.n, self.n),
                                        check_invariants=False)
            out = torch.sparse.mm(a, x)
        if loop is not None:
            out = out + loop.to(x.dtype)[:, None] * x
        if self.probe_row is not None:
            z = torch.zeros(1, out.shape[1], dtype=out.dtype, device=out.device, requires_grad=True)
            self.probes.append(z)
            out = out.index_add(0, torch.tensor([self.probe_row], device=out.device), z)
        return _H(out.reshape(out.shape[0], *h.t.shape[1:]), h.depth + 1)

    def attend(self, xl, a_src, a_dst, negative_slope):
        raise ConfigError(f"attention is not differentiable in edge weights; FGA's receptive-field evaluation "
                          f"needs one of: {WEIGHTED_MODELS}")


# ---------------------------------------------------------------------- the batch's preparation


class Prepared:
    """One batch's graph and surrogate for FGA: the CSR adjacency, the degrees, and either the
    clean pass (each propagation's kind and input over the whole graph, for
    :func:`local_gains`) or the whole-graph weighted surrogate (:func:`full_gains`)."""

    def __init__(self, ctx: TargetContext, receptive_field: bool = True):
        self.adj: sp.csr_matrix = ctx.adj
        self.n, self.model, self.device = ctx.n, ctx.model, ctx.device
        self.degree = np.diff(self.adj.indptr).astype(np.int64)
        g = graph_tensors(ctx.graph, ctx.device)
        self.x = g.x
        self.local = bool(receptive_field) and program_is_weighted(ctx.model)
        if self.local:
            self.depth = int(program_depth(ctx.model) or 0)
            self.radius = max(self.depth, 2 * self.depth - 2)
            ei = g.edge_index
            deg = torch.as_tensor(self.degree, dtype=g.x.dtype, device=ctx.device)
            prog = WeightedProgram(ei[0], ei[1], torch.ones(ei.shape[1], dtype=g.x.dtype, device=ctx.device),
                                   deg, record=True)
            with torch.no_grad():
                ctx.model.incremental(prog, _H(g.x, 0))
            self.kinds, self.inputs = prog.kinds, prog.inputs
            self.factor = {k: end_factor(k, deg) for k in set(prog.kinds)}  # the far ends' factors
        else:
            self.weighted = weighted_surrogate(ctx.model, g.x, g.edge_index)

    def gains(self, target: int, label: int, added: list[int], removed: list[int], loss: str) -> np.ndarray:
        """Every pair ``(target, v)``'s gain at the current graph (``-inf``: ``v`` the target
        or flipped already)."""
        fn = local_gains if self.local else full_gains
        with torch.enable_grad():  # also under a caller's no_grad
            return fn(self, target, label, added, removed, loss)


def ball(adj: sp.csr_matrix, seeds: np.ndarray, radius: int) -> tuple[np.ndarray, np.ndarray]:
    """The nodes within ``radius`` hops of ``seeds`` (sorted) and their distance to them."""
    dist = np.full(adj.shape[0], -1, np.int64)
    frontier = np.unique(np.asarray(seeds, np.int64))
    dist[frontier] = 0
    for r in range(1, radius + 1):
        if not frontier.size:
            break
        nbrs = np.unique(adj[frontier].indices)
        frontier = nbrs[dist[nbrs] < 0]
        dist[frontier] = r
    nodes = np.flatnonzero(dist >= 0)
    return nodes, dist[nodes]


# ---------------------------------------------------------------------- the gains


def _ball_graph(prep: Prepared, target: int, added: list[int], removed: list[int]) -> dict:
    """The ball of :func:`local_gains` around the target and its flipped partners: its nodes,
    distances, constant entries, candidate pairs (local ids) with their current weights, and
    the current degrees (numpy)."""
    flipped = np.asarray(added + removed, np.int64)
    nodes, dist = ball(prep.adj, np.concatenate([[target], flipped]), prep.radius)

    def local(v) -> np.ndarray:  # ids in the ball (every node asked for is in it)
        return np.searchsorted(nodes, v)

    tl = int(local(target))
    sub = prep.adj[nodes][:, nodes].tocoo()
    keep = (sub.row != tl) & (sub.col != tl)
    al = local(np.asarray(added, np.int64))
    cand = np.ones(nodes.size, bool)
    cand[tl] = False
    cand[local(flipped)] = False
    cl = np.flatnonzero(cand)
    w0 = np.isin(nodes[cl], prep.adj.indices[prep.adj.indptr[target]:prep.adj.indptr[target + 1]]).astype(float)
    degree = prep.degree[nodes].astype(float)  # the current graph's
    degree[tl] += len(added) - len(removed)
    degree[al] += 1
    degree[local(np.asarray(removed, np.int64))] -= 1
    ta = np.full(al.size, tl)
    row = np.concatenate([sub.row[keep], ta, al]).astype(np.int64)
    col = np.concatenate([sub.col[keep], al, ta]).astype(np.int64)
    return dict(nodes=nodes, dist=dist, tl=tl, row=row, col=col, cl=cl, w0=w0, degree=degree)


def _pins(prep: Prepared, nodes: np.ndarray, dist: np.ndarray):
    """``pin(k, depth, x)``: the rows whose value after ``depth`` propagations the ball cannot
    compute (``dist + depth > R``) set to the clean pass's (module docstring)."""
    rows: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def pin(k: int, depth: int, x: torch.Tensor) -> torch.Tensor:
        if depth not in rows:
            r = np.flatnonzero(dist + depth > prep.radius)
            rows[depth] = (torch.as_tensor(r, device=x.device), torch.as_tensor(nodes[r], device=x.device))
        local, glob = rows[depth]
        if not local.numel():
            return x
        x = x.clone()
        x[local] = prep.inputs[k][glob].to(x.dtype)
        return x

    return pin


def local_gains(prep: Prepared, target: int, label: int, added: list[int], removed: list[int],
                loss: str) -> np.ndarray:
    """The gains of every pair ``(target, v)`` from the ball around the target and its
    flipped partners plus the clean pass (module docstring: exact)."""
    b = _ball_graph(prep, target, added, removed)
    dev, dtype = prep.device, prep.x.dtype
    tl, cl, w0 = b["tl"], b["cl"], b["w0"]
    w = torch.tensor(w0, dtype=dtype, device=dev, requires_grad=True)
    eps = torch.zeros((), dtype=dtype, device=dev, requires_grad=True)
    base = b["degree"].copy()
    base[tl] -= w0.sum()
    base[cl] -= w0  # the candidates' weights enter the degrees as variables
    t_idx, c_idx = torch.tensor([tl], device=dev), torch.as_tensor(cl, device=dev)
    degree = (torch.as_tensor(base, dtype=dtype, device=dev).index_add(0, c_idx, w)
              .index_add(0, t_idx, (w.sum() + eps)[None]))
    tlv = np.full(cl.size, tl)
    row = torch.as_tensor(np.concatenate([b["row"], tlv, cl]), device=dev)
    col = torch.as_tensor(np.concatenate([b["col"], cl, tlv]), device=dev)
    weight = torch.cat([torch.ones(b["row"].size, dtype=dtype, device=dev), w, w])
    prog = WeightedProgram(row, col, weight, degree, pin=_pins(prep, b["nodes"], b["dist"]), probe_row=tl)
    logits = prep.model.incremental(prog, _H(prep.x[torch.as_tensor(b["nodes"], device=dev)], 0)).t
    y = torch.tensor([label], device=dev)
    grads = gradients(attack_loss(logits[tl:tl + 1], y, loss), (w, eps, *prog.probes))
    # pairs outside the ball: message plus the target's degree (module docstring)
    far = grads[1].expand(prep.n).clone()
    d_t = torch.tensor(b["degree"][tl], dtype=dtype, device=dev)
    for kind, x_k, probe in zip(prog.kinds, prep.inputs, grads[2:]):
        near = _inverse(d_t) if kind == "mean" else end_factor(kind, d_t)
        far += near * prep.factor[kind] * (x_k @ probe.reshape(-1).to(x_k.dtype))
    out = far.detach().cpu().numpy().astype(np.float64)
    out[b["nodes"][cl]] = (1 - 2 * w0) * grads[0].detach().cpu().numpy()
    out[target] = -np.inf
    out[np.asarray(added + removed, np.int64)] = -np.inf
    return out


def full_gains(prep: Prepared, target: int, label: int, added: list[int], removed: list[int],
               loss: str) -> np.ndarray:
    """The gains of every pair ``(target, v)`` from the whole graph: the weighted surrogate
    with the ``N - 1`` pairs of the target as a differentiable vector (the flipped ones
    held flipped)."""
    n, dev = prep.n, prep.device
    others = np.delete(np.arange(n, dtype=np.int64), target)
    nbrs = prep.adj.indices[prep.adj.indptr[target]:prep.adj.indptr[target + 1]]
    sign = np.where(np.isin(others, nbrs), -1.0, 1.0)
    done = np.isin(others, np.asarray(added + removed, np.int64))
    pairs = torch.as_tensor(np.stack([np.minimum(others, target), np.maximum(others, target)]), device=dev)
    dtype = prep.x.dtype
    p = torch.zeros(others.size, dtype=dtype, device=dev, requires_grad=True)
    flip = torch.where(torch.as_tensor(done, device=dev), torch.ones_like(p), p)
    logits = prep.weighted.logits(pairs, torch.as_tensor(sign, dtype=dtype, device=dev) * flip)
    value = attack_loss(logits[target:target + 1], torch.tensor([label], device=dev), loss)
    out = np.full(n, -np.inf)
    out[others] = input_grad(value, p).detach().cpu().numpy()
    out[others[done]] = -np.inf
    return out


# ---------------------------------------------------------------------- the attack


class FGA(TargetedAttack):
    """Targeted FGA (module docstring): per target, ``budget`` greedy flips of the pair of
    the largest first-order gain of the loss at the target."""

    Config = FGAConfig
    name = "fga"

    @property
    def follows_gradients(self) -> bool:
        """Its flips follow the surrogate's gradients: an adaptive job also attacks each
        defense with itself."""
        return True

    def prepared(self, ctx: TargetContext) -> Prepared:
        prep = ctx.memo.get(self.name)
        if prep is None:
            prep = ctx.memo[self.name] = Prepared(ctx, self.config.receptive_field)
        return prep

    def attack_one(self, ctx: TargetContext, target: int, budget: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, None]:
        prep = self.prepared(ctx)
        label = int(ctx.labels[target])
        nbrs = set(ctx.neighbours(target).tolist())
        added: list[int] = []
        removed: list[int] = []
        order: list[int] = []
        for _ in range(budget):
            gains = prep.gains(target, label, added, removed, self.config.loss)
            v = int(np.argmax(gains))
            if not gains[v] > 0:
                break
            (removed if v in nbrs else added).append(v)
            order.append(v)
        return np.asarray(order, np.int64), None


__all__ = ["FGA", "FGAConfig", "Prepared", "WeightedProgram", "ball", "end_factor", "full_gains", "local_gains"]
