"""A frozen surrogate evaluated with differentiable edge weights, sparse end to end.

Gradient modification attacks (FGA, PGD, PR-BCD, GR-BCD) need the surrogate's loss as a
function of the weights of a set of node pairs: existing edges whose weight may drop from
1 towards 0 (removal) and absent pairs whose weight may rise from 0 (addition). The
perturbed adjacency is ``A + Delta`` with ``Delta`` non-zero on the pairs of a block only
(both directions, ``-p`` on an existing edge, ``+p`` on an absent pair).

:class:`WeightedSurrogate` runs the model's declared program (the same ``map`` /
``propagate`` operations the incremental injection path replays, see
:meth:`grb_dist.models.base.GraphModel.incremental`) on the whole graph with these weights:

* the clean graph's structure (CSR) and its transpose permutation are built once
  (:class:`~grb_dist.attacks.shared.csr.CSRPattern`);
  a propagation multiplies with the clean structure (values recomputed from the weighted
  degrees, gradients for the values by a sampled dense product at the structure's
  entries, so memory stays O(E + N F)) plus a scatter over the block's 2 B entries: nothing is N x N;
* operations whose inputs do not depend on the weights or on modified features (the first
  layer's ``X W``) are computed on the first call and reused by every later step.

GAT's attention (``attend``) is not a function of edge weights in the program. Models whose
program cannot be replayed with weights but whose class defines ``weighted_forward(x,
edge_index, edge_weight)`` (GAT, GATv2, R-GCN, GNNGuard, GATGuard, GCN-SVD, label
propagation and ``<model>_lp``, see :mod:`grb_dist.models.weighted`) are evaluated by
:class:`EdgeWeightSurrogate` instead: the clean edges with weight 1 plus the block's pairs
with weight ``delta``, coalesced. :func:`weighted_surrogate` picks the path (the program
first: it is faster) and :func:`edge_weight_reason` says why a model has neither.
"""

from __future__ import annotations

from typing import Callable

import torch

from grb_dist.attacks.shared.csr import CSRPattern, CSRProduct
from grb_dist.attacks.shared.incremental import KINDS, Ops, supports_incremental
from grb_dist.core.errors import ConfigError
from grb_dist.models.weighted import WEIGHTED_KINDS, has_weighted_forward

#: Surrogates whose program is differentiable in edge weights, for error messages.
WEIGHTED_MODELS = "gcn, sgc, appnp, tagcn, gin, sage, mlp (and their _ln variants)"
#: Every built-in model that gradient modification attacks can differentiate, for messages.
EDGE_WEIGHT_MODELS = (f"{WEIGHTED_MODELS}; through weighted_forward: gat, gatv2, rgcn, gnnguard, gatguard, "
                      "gcnsvd, gcnsvd_sparse, jaccard, lp and <model>_lp")


class _Value:
    """A handle of the program: a tensor and whether it is the same on every call."""

    __slots__ = ("t", "static")

    def __init__(self, t: torch.Tensor, static: bool):
        self.t = t
        self.static = static


class _WeightedOps(Ops):
    """Interprets a model's program on the weighted graph of one call."""

    def __init__(self, surrogate: "WeightedSurrogate", pairs: torch.Tensor, delta: torch.Tensor):
        self.s = surrogate
        self.block = surrogate.block_structure(pairs)
        # the block's entries in its CSR order: both directions of every pair
        self.bval = torch.cat([delta, delta])[self.block.order] if self.block is not None else delta
        degree = surrogate.degree.to(delta.dtype)
        self.degree = degree.index_add(0, self.block.row, self.bval) if self.block is not None else degree
        self.index = 0
        self._norms: dict[str, tuple] = {}

    def _norm(self, kind: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(clean values, block values, self-loop weights) of the operator ``kind``."""
        if kind in self._norms:
            return self._norms[kind]
        st, d = self.s.structure, self.degree
        if kind in ("gcn", "sym"):
            if kind == "gcn":
                d = d + 1
            inv = torch.where(d > 0, d.clamp_min(1e-12).pow(-0.5), torch.zeros_like(d))
            out = (inv[st.row] * inv[st.col], self._block(inv, inv), inv * inv if kind == "gcn" else None)
        elif kind == "sum":
            out = (torch.ones_like(st.row, dtype=d.dtype), self.bval, None)
        elif kind == "mean":
            inv = torch.where(d > 0, 1.0 / d.clamp_min(1e-12), torch.zeros_like(d))
            out = (inv[st.row], self._block(inv, None), None)
        else:
            raise ConfigError(
                f"the surrogate uses the {kind!r} operator, which is not differentiable in edge weights; "
                f"gradient modification attacks need one of: {WEIGHTED_MODELS}"
            )
        self._norms[kind] = out
        return out

    def _block(self, left: torch.Tensor, right: torch.Tensor | None) -> torch.Tensor | None:
        """Block values ``left[row] * delta * right[col]`` (``right`` None: 1)."""
        if self.block is None:
            return None
        b = self.block
        v = left[b.row] * self.bval
        return v * right[b.col] if right is not None else v

    def map(self, fn: Callable[..., torch.Tensor], *hs: _Value) -> _Value:
        k = self.index
        self.index += 1
        static = all(h.static for h in hs)
        if static and k in self.s.constants:
            return _Value(self.s.constants[k], True)
        out = fn(*(h.t for h in hs))
        if static:
            self.s.constants[k] = out.detach()
        return _Value(out, static)

    def propagate(self, h: _Value, kind: str) -> _Value:
        self.index += 1
        clean, block, loop = self._norm(kind)
        x = h.t
        flat = x.reshape(x.shape[0], -1)
        out = CSRProduct.apply(clean, flat, self.s.structure)
        if self.block is not None:
            out = out + CSRProduct.apply(block, flat, self.block)
        if loop is not None:
            out = out + loop.unsqueeze(1).to(flat.dtype) * flat
        return _Value(out.reshape(x.shape), False)

    def attend(self, xl, a_src, a_dst, negative_slope):
        raise ConfigError(
            "attention surrogates (GAT) are not differentiable in edge weights; gradient modification "
            f"attacks need one of: {WEIGHTED_MODELS}"
        )


class WeightedSurrogate:
    """``model``'s logits on ``(x, A + Delta)`` for a block of pair weights.

    Args:
        model: a frozen model whose class declares its program (``incremental_layer``).
        x: N x D features of the clean graph (constant).
        edge_index: 2 x 2E clean edges (both directions).
    """

    def __init__(self, model: torch.nn.Module, x: torch.Tensor, edge_index: torch.Tensor):
        if not supports_incremental(model):
            raise ConfigError(
                f"surrogate {type(model).__name__} declares no program that is differentiable in edge "
                f"weights; gradient modification attacks need one of: {WEIGHTED_MODELS}"
            )
        self.model = model
        self.x = x
        n = x.shape[0]
        self.structure = CSRPattern(edge_index[0], edge_index[1], (n, n), symmetric=True)
        self.degree = torch.bincount(self.structure.row, minlength=n)
        self.constants: dict[int, torch.Tensor] = {}
        self._block: tuple | None = None

    def block_structure(self, pairs: torch.Tensor) -> CSRPattern | None:
        """The CSR structure of a block's pairs (both directions), built once per pairs
        tensor (attacks keep the tensor while only the weights change)."""
        if pairs.shape[1] == 0:
            return None
        cached = self._block
        if cached is not None and cached[0] is pairs and cached[1] == pairs._version:
            return cached[2]
        both, n = torch.cat([pairs, pairs.flip(0)], dim=1), self.x.shape[0]
        structure = CSRPattern(both[0], both[1], (n, n), mirrored=True)
        self._block = (pairs, pairs._version, structure)
        return structure

    def check(self) -> None:
        """Run the program once (raises :class:`ConfigError` for unsupported operators)."""
        empty = torch.zeros(2, 0, dtype=torch.long, device=self.x.device)
        with torch.no_grad():
            self.logits(empty, torch.zeros(0, dtype=self.x.dtype, device=self.x.device))

    def logits(self, pairs: torch.Tensor, delta: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        """N x C logits with the pair weights changed by ``delta`` (``pairs`` 2 x B, one
        direction each, no self-loops; ``delta`` B: ``-w`` removes ``w`` of an existing edge,
        ``+w`` adds ``w`` of an absent pair) and optionally other features ``x``."""
        ops = _WeightedOps(self, pairs, delta)
        handle = _Value(self.x if x is None else x, x is None)
        return self.model.incremental(ops, handle).t




class _Probe(Ops):
    """Runs a program on placeholders, recording the operators it uses (nothing computed)."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def map(self, fn, *hs):
        return None

    def propagate(self, h, kind):
        if kind not in KINDS:
            raise ValueError(f"unknown propagation {kind!r}; use one of {KINDS}")
        self.used.add(kind)
        return None

    def attend(self, xl, a_src, a_dst, negative_slope):
        self.used.add("attend")
        return None


def program_operators(model: torch.nn.Module) -> set[str] | None:
    """The operators (:data:`KINDS` and ``"attend"``) of ``model``'s declared program, or
    ``None`` when its class declares none; cheap (no tensor is computed)."""
    if not supports_incremental(model):
        return None
    probe = _Probe()
    with torch.no_grad():
        model.incremental(probe, None)
    return probe.used


def program_is_weighted(model: torch.nn.Module) -> bool:
    """True when ``model`` declares a program that :class:`WeightedSurrogate` can replay
    with edge weights (no attention, only :data:`WEIGHTED_KINDS`)."""
    used = program_operators(model)
    return used is not None and used <= set(WEIGHTED_KINDS)


def edge_weight_reason(model: torch.nn.Module) -> str | None:
    """``None`` when gradient modification attacks can differentiate ``model`` in edge
    weights (a weighted program, or ``weighted_forward``), else why not (one line)."""
    name = type(model).__name__
    inner = getattr(model, "model", None)
    if getattr(type(model), "wraps_model", False) and isinstance(inner, torch.nn.Module):
        reason = edge_weight_reason(inner)
        if reason is not None:
            return f"{reason} ({name} runs label propagation on its predictions)"
    if program_is_weighted(model) or has_weighted_forward(model):
        return None
    used = program_operators(model)
    if used is not None:
        ops = ", ".join(sorted(used - set(WEIGHTED_KINDS)))
        return (f"{name} is not differentiable in edge weights: its program uses {ops}, which has no weighted "
                "form; define weighted_forward(x, edge_index, edge_weight)")
    return (f"{name} is not differentiable in edge weights: declare GraphModel.incremental or "
            "weighted_forward(x, edge_index, edge_weight)")


class EdgeWeightSurrogate:
    """``model.weighted_forward`` on ``(x, A + Delta)`` for a block of pair weights: the same
    interface as :class:`WeightedSurrogate` for models without a weighted program.

    Every call evaluates the clean edges with weight 1 plus the block's pairs (both
    directions) with weight ``delta``, coalesced by summing: an existing edge removed by
    ``p`` has weight ``1 - p``, an absent pair added by ``p`` weight ``p`` (present with
    weight 0 at ``p = 0``, so it still gets a gradient). The clean edge set and the
    coalesced structure of a block (while its ``pairs`` tensor is unchanged) are cached;
    only the weights are recomputed per call. Sparse: O(E + B) entries.
    """

    def __init__(self, model: torch.nn.Module, x: torch.Tensor, edge_index: torch.Tensor):
        if not has_weighted_forward(model):
            raise ConfigError(edge_weight_reason(model) or f"{type(model).__name__} defines no weighted_forward")
        self.model = model
        self.x = x
        self.n = x.shape[0]
        self.edge_index = edge_index
        self.clean_keys = edge_index[0] * self.n + edge_index[1]
        self._block: tuple | None = None

    def block_structure(self, pairs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(edge_index, inverse)`` of the clean edges plus ``pairs`` both ways, coalesced:
        entry ``k`` of the concatenation (clean, pairs, pairs flipped) adds to ``inverse[k]``."""
        cached = self._block
        if cached is not None and cached[0] is pairs and cached[1] == pairs._version:
            return cached[2]
        n = self.n
        keys = torch.cat([self.clean_keys, pairs[0] * n + pairs[1], pairs[1] * n + pairs[0]])
        unique, inverse = torch.unique(keys, return_inverse=True)
        out = (torch.stack([unique // n, unique % n]), inverse)
        self._block = (pairs, pairs._version, out)
        return out

    def check(self) -> None:
        """Run the model once on the clean graph (raises for a model that cannot)."""
        empty = torch.zeros(2, 0, dtype=torch.long, device=self.x.device)
        with torch.no_grad():
            self.logits(empty, torch.zeros(0, dtype=self.x.dtype, device=self.x.device))

    def logits(self, pairs: torch.Tensor, delta: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        """N x C logits with the pair weights changed by ``delta`` (as
        :meth:`WeightedSurrogate.logits`) and optionally other features ``x``."""
        edge_index, inverse = self.block_structure(pairs)
        ones = torch.ones(self.clean_keys.numel(), dtype=delta.dtype, device=delta.device)
        values = torch.cat([ones, delta, delta])
        weight = torch.zeros(edge_index.shape[1], dtype=delta.dtype, device=delta.device).index_add(0, inverse, values)
        return self.model.weighted_forward(self.x if x is None else x, edge_index, weight)


def weighted_surrogate(model: torch.nn.Module, x: torch.Tensor,
                       edge_index: torch.Tensor) -> "WeightedSurrogate | EdgeWeightSurrogate":
    """The edge-weighted evaluation of ``model`` for gradient modification attacks: its
    program (:class:`WeightedSurrogate`, faster) when that is differentiable in edge weights,
    else its ``weighted_forward`` (:class:`EdgeWeightSurrogate`); :class:`ConfigError` with
    the reason when it has neither."""
    if program_is_weighted(model):
        return WeightedSurrogate(model, x, edge_index)
    reason = edge_weight_reason(model)
    if reason is not None:
        raise ConfigError(f"surrogate {reason}; gradient modification attacks need one of: {EDGE_WEIGHT_MODELS}")
    return EdgeWeightSurrogate(model, x, edge_index)


__all__ = [
    "EDGE_WEIGHT_MODELS", "EdgeWeightSurrogate", "WEIGHTED_MODELS", "WeightedSurrogate", "edge_weight_reason",
    "program_is_weighted", "program_operators", "weighted_surrogate",
]
