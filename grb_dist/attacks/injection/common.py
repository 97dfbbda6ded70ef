"""Machinery of the injection attacks: the attack context (its surrogate side from
:mod:`grb_dist.attacks.shared.surrogate`), vectorised edge selection, the batched targets'
loss and the sign-ascent loop.

Everything here is sparse: the perturbed graph is the (local) edge_index with the injected
block appended (:func:`grb_dist.models.tensors.apply_injection`); no N x N matrix is ever built.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.utils import scatter

from grb_dist.attacks.base import input_grad
from grb_dist.attacks.shared.incremental import IncrementalSurrogate
from grb_dist.attacks.shared.surrogate import SurrogateCache, surrogate_parts
from grb_dist.core.graph import Graph, Injection
from grb_dist.models.tensors import apply_injection

log = logging.getLogger(__name__)

#: Bound on the random keys materialised at once by :func:`random_target_choice`.
_KEY_BLOCK = 1 << 22


@dataclass
class AttackContext:
    """The (possibly restricted) graph an attack works on, in local node ids.

    Attributes:
        x: local features, n_local x D float32 (on ``device``).
        edge_index: local edges, 2 x E_local int64.
        targets: local ids of the targets, T int64.
        labels: the surrogate's clean predictions on the targets, T int64.
        degrees: current degree of every target in the clean graph, T int64.
        subset: global id of every local node (``None`` when local == global).
        num_original: N, node count of the full graph.
        feat_min, feat_max: the feature limits.
        model: the surrogate (in eval mode while the context is used).
        incremental: the surrogate's incremental evaluation on this graph (``None``: every
            step runs the ordinary forward on the whole perturbed graph).
    """

    x: torch.Tensor
    edge_index: torch.Tensor
    targets: torch.Tensor
    labels: torch.Tensor
    degrees: torch.Tensor
    subset: torch.Tensor | None
    num_original: int
    feat_min: float
    feat_max: float
    model: torch.nn.Module
    device: torch.device
    incremental: IncrementalSurrogate | None = None
    #: the last (inj_edges, its version, perturbed edge_index or incremental program): while an
    #: attack optimises features on fixed edges, the surrogate's structure for them is
    #: built once.
    _perturbed: tuple | None = field(default=None, repr=False)

    @property
    def num_local(self) -> int:
        return int(self.x.shape[0])

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])

    def logits(self, inj_x: torch.Tensor, inj_edges: torch.Tensor) -> torch.Tensor:
        """Surrogate logits on the targets (T x C) with the injection applied (local ids)."""
        cached = self._perturbed
        fresh = cached is None or cached[0] is not inj_edges or cached[1] != inj_edges._version
        if self.incremental is not None:
            if fresh or cached[3] != inj_x.shape[0]:
                program = self.incremental.for_edges(inj_edges, inj_x.shape[0])
                self._perturbed = cached = (inj_edges, inj_edges._version, program, inj_x.shape[0])
            return cached[2](inj_x)
        if fresh:
            x, ei = apply_injection(self.x, self.edge_index, inj_x, inj_edges)
            self._perturbed = (inj_edges, inj_edges._version, ei, None)
        else:
            x, ei = torch.cat([self.x, inj_x], dim=0), cached[2]
        return self.model(x, ei)[self.targets]

    def to_injection(self, inj_x: torch.Tensor, local_edges: torch.Tensor) -> Injection:
        """Map local results to an :class:`Injection` in global ids (numpy, CPU)."""
        n_loc = self.num_local
        src = local_edges[0].detach().cpu().long() - n_loc + self.num_original
        dst = local_edges[1].detach().cpu().long()
        injected = dst >= n_loc
        if self.subset is not None:
            sub = self.subset.cpu()
            mapped = sub[dst.clamp(max=n_loc - 1)]
            dst = torch.where(injected, dst - n_loc + self.num_original, mapped)
        else:
            dst = torch.where(injected, dst - n_loc + self.num_original, dst)
        edges = torch.stack([src, dst]).numpy().astype(np.int64)
        feats = inj_x.detach().cpu().numpy().astype(np.float32)
        return Injection(
            features=np.ascontiguousarray(feats),
            edges=np.ascontiguousarray(edges),
            num_original=self.num_original,
        )


def build_context(
    graph: Graph,
    model: torch.nn.Module,
    targets: np.ndarray,
    feat_min: float,
    feat_max: float,
    device: str | torch.device = "cpu",
    *,
    incremental: bool = True,
    cache: SurrogateCache | None = None,
) -> AttackContext:
    """Restrict ``graph`` to the targets' receptive field and compute the clean labels.

    With ``incremental`` (and a surrogate that declares its program) the surrogate's clean
    pass is computed here once and every attack step evaluates only the rows the injection
    reaches (:mod:`grb_dist.attacks.shared.incremental`). With a ``cache``, all of this
    is computed once for several attacks on the same graph, surrogate and targets.

    The subgraph holds every node within ``hops + 1`` of a target, so that the degrees of
    the nodes at distance ``hops`` (used by GCN normalisation, attention and mean
    aggregation) are exact and the surrogate's outputs on the targets equal those on the
    full graph. Injected nodes only attach to targets, so they stay inside it.
    """
    device = torch.device(device)
    parts = cache.get(graph, model, targets, device, incremental) if cache is not None else None
    if parts is None:
        parts = surrogate_parts(graph, model, targets, device, incremental)
        if cache is not None:
            cache.put(graph, model, targets, device, incremental, parts)
    return AttackContext(**parts, num_original=graph.num_nodes, feat_min=feat_min, feat_max=feat_max,
                         model=model, device=device)


def random_target_choice(n_rows: int, k: int, n_targets: int, gen: torch.Generator) -> torch.Tensor:
    """``k`` distinct positions in ``[0, n_targets)`` for each of ``n_rows`` rows, uniformly.

    Returns an int64 tensor n_rows x k (CPU). Vectorised, without an ``n_targets``-long
    array per row when ``k`` is small against ``n_targets`` (GRB's injection: 100 edges per
    node among up to 197k targets): ``k`` uniform draws per row, the repeats within a row
    drawn again until none is left (about ``k^2 / 2 n_targets`` per row and round; the set
    is uniform over the k-subsets, since the procedure commutes with any relabelling of the
    targets). Otherwise (``8 k > n_targets``) the top-k of random keys per row, in blocks of
    rows so that at most ~4M keys exist at once.
    """
    if k > n_targets:
        raise ValueError(f"cannot choose {k} distinct targets out of {n_targets}")
    if n_rows == 0 or k == 0:
        return torch.empty(n_rows, k, dtype=torch.long)
    if 8 * k <= n_targets:
        pos = torch.randint(n_targets, (n_rows, k), generator=gen)
        while True:
            pos = pos.sort(dim=1).values
            repeat = torch.zeros_like(pos, dtype=torch.bool)
            repeat[:, 1:] = pos[:, 1:] == pos[:, :-1]
            count = int(repeat.sum())
            if not count:
                return pos
            pos[repeat] = torch.randint(n_targets, (count,), generator=gen)
    rows_per_block = max(1, _KEY_BLOCK // n_targets)
    out = []
    for start in range(0, n_rows, rows_per_block):
        m = min(rows_per_block, n_rows - start)
        keys = torch.rand(m, n_targets, generator=gen)
        out.append(keys.topk(k, dim=1).indices)
    return torch.cat(out, 0)


def random_edges(
    n_inject: int, edges_per_node: int, targets: torch.Tensor, first_id: int, gen: torch.Generator
) -> torch.Tensor:
    """Random injection edges: each injected node to ``edges_per_node`` distinct targets.

    Args:
        targets: ids (T) the injected nodes may attach to.
        first_id: id of the first injected node; node ``i`` gets id ``first_id + i``.

    Returns:
        2 x (n_inject * edges_per_node) int64 on ``targets.device``: row 0 injected ids,
        row 1 target ids.
    """
    pos = random_target_choice(n_inject, edges_per_node, targets.numel(), gen).to(targets.device)
    src = torch.arange(n_inject, device=targets.device).repeat_interleave(edges_per_node) + first_id
    return torch.stack([src, targets[pos.reshape(-1)]])


def chunked_edges(order: torch.Tensor, n_inject: int, k: int, n_targets: int, gen: torch.Generator) -> torch.Tensor:
    """Deal a target ordering in consecutive chunks of ``k``: injected node ``i`` gets chunk ``i``.

    ``order`` holds distinct target positions (each target at most once). When it is
    shorter than ``n_inject * k`` the ordering continues with fresh random permutations of
    all targets; every copy is cut to a multiple of ``k`` so that no chunk spans two copies,
    hence the targets of one injected node are always distinct.

    Returns n_inject x k int64 target positions (on ``order.device``).
    """
    need = n_inject * k
    dev = order.device
    usable = (order.numel() // k) * k
    pieces = [order[: min(usable, need)]] if usable else []
    have = pieces[0].numel() if pieces else 0
    per_copy = (n_targets // k) * k
    while have < need:
        perm = torch.randperm(n_targets, generator=gen)[:per_copy].to(dev)
        pieces.append(perm[: need - have])
        have += pieces[-1].numel()
    return torch.cat(pieces).reshape(n_inject, k)


def target_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the targets' logits (T x C) against the clean labels (T)."""
    return F.cross_entropy(logits, labels)


def sign_ascent(
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    x0: torch.Tensor,
    *,
    steps: int,
    step_size: float,
    feat_min: float,
    feat_max: float,
    keep_best: bool = False,
) -> torch.Tensor:
    """Iterative sign-gradient ascent with projection onto ``[feat_min, feat_max]``.

    ``x <- clip(x + step_size * sign(grad_x loss_fn(x)))`` for ``steps`` steps; gradients
    are taken w.r.t. ``x`` only (``torch.autograd.grad``), so no parameter accumulates any.
    Returns the final features, detached; with ``keep_best`` the iterate of the highest loss
    among the start, every step's and the final one (the last of equals), which an ascent
    that overshoots (a defense whose loss surface has cliffs, such as GNNGuard's pruning)
    does not lose.
    """
    x = x0.detach().clamp(feat_min, feat_max)
    best, best_loss = x, -math.inf
    for _ in range(steps):
        x.requires_grad_(True)
        loss = loss_fn(x)
        if keep_best and (value := float(loss.detach())) >= best_loss:
            best, best_loss = x.detach(), value
        grad = input_grad(loss, x)
        with torch.no_grad():
            x = (x + step_size * grad.sign()).clamp_(feat_min, feat_max)
    if keep_best:
        with torch.no_grad():
            if float(loss_fn(x)) < best_loss:
                return best
    return x.detach()


def targets_mean(edges: torch.Tensor, x: torch.Tensor, n_inject: int, first_id: int) -> torch.Tensor:
    """Each injected node's mean feature row over the targets it links to (n_inject x D;
    ``edges`` 2 x E, row 0 the injected ids from ``first_id``, row 1 rows of ``x``), zero for
    a node without edges: a start whose links a defense that prunes dissimilar neighbours
    (GNNGuard) keeps, so that its gradient reaches the injected features."""
    return scatter(x[edges[1]], edges[0] - first_id, dim=0, dim_size=n_inject, reduce="mean")
