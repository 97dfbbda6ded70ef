"""Meta-gradient PR-BCD: block-sparse structure poisoning for large graphs (Geisler et al.,
NeurIPS 2021, "Robustness of Graph Neural Networks at Scale", whose PR-BCD takes
meta-gradients for poisoning; the meta-gradient is Zügner & Günnemann's, ICLR 2019).

The search is the evasion PR-BCD's (:mod:`grb_dist.attacks.modification.prbcd`): relaxed flip
weights ``p`` in [0, 1] on a random block of candidate pairs, a projected gradient step
onto ``{0 <= p <= 1, sum(p) <= budget}`` per step, zero-weight entries resampled during the
first ``resample_fraction`` of the steps, the best block kept, and discrete flips sampled
from the final weights. What differs is the loss and the candidates:

- the loss is the attacker's loss of a model *trained* on the relaxed graph: Metattack's
  linearised GCN ``Â (Â X W1) W2`` (``Â`` the GCN normalisation of ``A + Delta(p) + I``),
  trained for ``train_iters`` steps of gradient descent with momentum from a fresh seeded
  initialisation, each step differentiable (``create_graph``), so the gradient with respect
  to ``p`` runs through the whole training (the meta-gradient). The loss is ``loss``
  (``ce`` by default: Meta-Self's cross-entropy) on the unlabelled nodes against
  self-training labels (:func:`~grb_dist.attacks.poisoning.base.self_training_labels`);
- the candidates are any node pairs (:func:`~grb_dist.attacks.shared.flips.sample_global_pairs`),
  the budget a share of all edges.

``inner: model`` (the default of adaptive cells, ``Attack.adaptive_defaults``) trains the
attacked model's own architecture instead of the linearised GCN: a copy of the surrogate
with freshly drawn weights, evaluated on the relaxed graph through its edge-weighted
program or ``weighted_forward`` (:func:`~grb_dist.models.weighted.weighted_logits`: the
same requirement as the adaptive evasion attacks), trained by the same differentiable
gradient descent with momentum. The meta-gradient then runs through the defense's own
layers (attention, layer norm, GNNGuard's and Jaccard's edge weights, R-GCN's Gaussians) as
Mujkanovic et al. (NeurIPS 2022) unroll a defense's training for adaptive poisoning. A
defense whose training is its own procedure (Pro-GNN's alternating structure learning) is
not unrolled: the attack refuses it with one line. Memory is the unrolled training's
saved tensors, ``train_iters`` times those of one step (measured on one step and checked
against half the machine's memory before the search starts): on prognn-cora with the
default block of 100,000 pairs, about 27 MiB a step for a GCN, 43 MiB for GCN-Jaccard,
108 MiB for GCN-SVD and 264 MiB for an 8-head GAT.

Scaling: the training depends on the graph only through the training rows of ``Â² X``, so
every inner step costs ``O(n_train D h)`` whatever the graph's size, and the graph enters
through two sparse products whose gradient with respect to the weights is a sampled dense
product at the structure's entries (:class:`~grb_dist.attacks.shared.csr.CSRProduct`). Memory is
``O(E + B + N D + train_iters (D h + n_train (h + C)))``; nothing is N x N. Evaluating a
discrete candidate (the best-so-far check each step, the final samples) is one training
without the reverse pass.
"""

from __future__ import annotations

import math
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import torch

from grb_dist.attacks.adaptive import meta_gradient_reason
from grb_dist.attacks.poisoning.base import MEMORY_FRACTION, PoisoningAttack, self_training_labels
from grb_dist.attacks.shared.csr import CSRPattern, CSRProduct
from grb_dist.attacks.shared.flips import ModContext, all_pairs, attack_loss, sample_global_pairs
from grb_dist.attacks.shared.relaxed import Block, PRBCDConfig, default_block_size, search
from grb_dist.attacks.shared.weighted import edge_weight_reason
from grb_dist.core.bounds import check_int
from grb_dist.core.resources import format_bytes, machine_memory
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Modification
from grb_dist.models.weighted import (
    EdgeListOps, declares_program, has_weighted_forward, kept_structures, plain_kernels, weighted_logits,
)


#: The models a meta-gradient can train: Metattack's linearised GCN, or the surrogate's own.
INNER = ("linear", "model")


@dataclass(frozen=True)
class MetaPRBCDConfig(PRBCDConfig):
    """Attributes (beyond :class:`~grb_dist.attacks.shared.relaxed.PRBCDConfig`, whose
    ``steps`` is the number of search steps, each one meta-gradient):
        lr: step-size factor of the search: the step is ``lr * budget`` times the
            meta-gradient, decayed by ``1 / sqrt(t + 1)`` after the resampling phase (the
            evasion rule without its ``1 / N``: a meta-gradient of the mean loss over the
            unlabelled nodes is already small per pair).
        loss: the attacker's loss on the unlabelled nodes (default ``ce``, Meta-Self).
        train_iters: differentiable training steps of the surrogate per meta-gradient.
        train_lr / train_momentum: its gradient descent (Metattack's 0.1 and 0.9).
        hidden: its hidden width (``inner: linear``).
        inner: the model trained inside the meta-gradient: ``linear`` (Metattack's
            linearised GCN, the default) or ``model`` (the surrogate's own architecture,
            from fresh weights: adaptive poisoning).
    """

    steps: int = 100
    lr: float = 0.03
    loss: str = "ce"
    train_iters: int = 100
    train_lr: float = 0.1
    train_momentum: float = 0.9
    hidden: int = 16
    inner: str = "linear"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.inner not in INNER:
            raise ConfigError(f"meta_prbcd: inner must be one of {', '.join(INNER)}, got {self.inner!r}")
        check_int(self.train_iters, "meta_prbcd: train_iters", 1, 100_000)
        check_int(self.hidden, "meta_prbcd: hidden", 1, 16_384)
        if not (isinstance(self.train_lr, (int, float)) and math.isfinite(self.train_lr) and self.train_lr > 0):
            raise ConfigError(f"meta_prbcd: train_lr must be a positive finite number, got {self.train_lr}")
        if not (isinstance(self.train_momentum, (int, float)) and 0 <= self.train_momentum < 1):
            raise ConfigError(f"meta_prbcd: train_momentum must be in [0, 1), got {self.train_momentum}")


class RelaxedGraph:
    """The clean graph plus a block of pairs with relaxed weights: ``A + Delta(p)``
    (``+p`` on an absent pair, ``-p`` on an edge, both directions) and its normalisation
    ``Â = D^-1/2 (A + Delta + I) D^-1/2`` as differentiable sparse products, on the device
    of ``pairs`` (``edges`` and ``train`` are moved there)."""

    def __init__(self, n: int, edges: torch.Tensor, pairs: torch.Tensor, sign: torch.Tensor,
                 train: torch.Tensor, dtype: torch.dtype):
        device = pairs.device
        edges, train = edges.to(device), train.to(device)
        loop = torch.arange(n, device=device)
        self.n, self.dtype = n, dtype
        # raw entries: clean edges (both directions), the block's pairs (both), the diagonal;
        # a block pair that is an edge is one entry of weight 1 - p (duplicates merged)
        self.m_edges = edges.shape[1]
        row = torch.cat([edges[0], pairs[0], pairs[1], loop])
        col = torch.cat([edges[1], pairs[1], pairs[0], loop])
        keys, self.entry = torch.unique(row * n + col, return_inverse=True)
        self.row, self.col = keys // n, keys % n
        self.sign = sign
        self.full = CSRPattern(self.row, self.col, (n, n))
        pos = torch.full((n,), -1, dtype=torch.long, device=device)
        pos[train] = torch.arange(train.numel(), device=device)
        self.train_entries = torch.nonzero(pos[self.row] >= 0).squeeze(1)
        self.rows = CSRPattern(pos[self.row[self.train_entries]], self.col[self.train_entries], (train.numel(), n))
        self.train_values = self.train_entries[self.rows.order]  # the train rows' values in their CSR order

    def values(self, p: torch.Tensor) -> torch.Tensor:
        """``Â``'s entries for block weights ``p``."""
        w_pairs = self.sign * p
        raw = torch.cat([p.new_ones(self.m_edges), w_pairs, w_pairs, p.new_ones(self.n)])
        w = p.new_zeros(self.row.numel()).index_add(0, self.entry, raw)
        deg = p.new_zeros(self.n).index_add(0, self.row, w)
        s = deg.rsqrt()
        return w * s[self.row] * s[self.col]

    def prop(self, values: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return CSRProduct.apply(values[self.full.order], h, self.full)

    def train_rows(self, values: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """``Â[train] @ h``."""
        return CSRProduct.apply(values[self.train_values], h, self.rows)


class MetaObjective:
    """The attacker's loss of the linearised GCN trained on a :class:`RelaxedGraph`; its
    tensors live on ``device``."""

    def __init__(self, features: np.ndarray, train: np.ndarray, labels: np.ndarray, targets: np.ndarray,
                 num_classes: int, *, kind: str = "ce", hidden: int = 16, iters: int = 100, lr: float = 0.1,
                 momentum: float = 0.9, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"):
        self.x = torch.as_tensor(np.asarray(features), dtype=dtype, device=device)
        self.train = torch.as_tensor(np.asarray(train), dtype=torch.long, device=device)
        y = torch.as_tensor(np.asarray(labels), dtype=torch.long, device=device)
        self.y_train = y[self.train]
        self.targets = torch.as_tensor(np.asarray(targets), dtype=torch.long, device=device)
        self.y_targets = y[self.targets]
        self.c, self.kind, self.hidden, self.iters, self.lr, self.momentum = num_classes, kind, hidden, iters, lr, momentum
        self.dtype = dtype

    def kept(self) -> Any:
        """Nothing to keep: the linearised training has its own sparse products."""
        return nullcontext()

    def relax(self, ctx: ModContext, pairs: torch.Tensor, sign: torch.Tensor) -> RelaxedGraph:
        """The relaxed graph of a block of pairs (``sign``: -1 on an edge, +1 on an absent pair)."""
        return RelaxedGraph(ctx.n, torch.as_tensor(ctx.graph.edge_index), pairs, sign, self.train, self.dtype)

    def init_weights(self, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Glorot-uniform ``W1`` (D x h) and ``W2`` (h x C) drawn from ``gen``."""
        def glorot(a: int, b: int) -> torch.Tensor:
            bound = math.sqrt(6.0 / (a + b))
            return (torch.rand(a, b, generator=gen, dtype=torch.float64) * 2 - 1).mul_(bound).to(self.x)
        return glorot(self.x.shape[1], self.hidden), glorot(self.hidden, self.c)

    def loss(self, graph: RelaxedGraph, p: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
        """The attacker's loss after training from ``(w1, w2)``; differentiable in ``p``
        through the training when ``p`` requires grad."""
        meta = p.requires_grad
        values = graph.values(p)
        ax = graph.prop(values, self.x)
        f = graph.train_rows(values, ax)
        w1, w2 = w1.clone().requires_grad_(True), w2.clone().requires_grad_(True)
        v1, v2 = torch.zeros_like(w1), torch.zeros_like(w2)
        with torch.enable_grad():
            for _ in range(self.iters):
                train_loss = torch.nn.functional.cross_entropy(f @ w1 @ w2, self.y_train)
                g1, g2 = torch.autograd.grad(train_loss, (w1, w2), create_graph=meta)
                v1, v2 = self.momentum * v1 + g1, self.momentum * v2 + g2
                w1, w2 = w1 - self.lr * v1, w2 - self.lr * v2
                if not meta:
                    w1, w2 = w1.detach().requires_grad_(True), w2.detach().requires_grad_(True)
                    v1, v2 = v1.detach(), v2.detach()
        logits = graph.prop(values, graph.prop(values, self.x @ w1)) @ w2
        return attack_loss(logits[self.targets], self.y_targets, self.kind)


class _Weighted(torch.nn.Module):
    """A model called on an edge-weighted graph, so that :func:`torch.func.functional_call`
    can swap its parameters. A model with a declared program keeps its propagation
    operators while the edge weights are the same tensor (the steps of one unrolled
    training), instead of normalising the graph again at every step."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model
        self.ops: tuple[torch.Tensor, EdgeListOps] | None = None

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor) -> torch.Tensor:
        if has_weighted_forward(self.model) or not declares_program(self.model):
            return weighted_logits(self.model, x, edge_index, edge_weight)
        if self.ops is None or self.ops[0] is not edge_weight:
            self.ops = (edge_weight, EdgeListOps(edge_index, edge_weight, x.shape[0]))
        return self.model.incremental(self.ops[1], x)


class RelaxedEdges:
    """The clean edges (weight 1) plus a block of pairs (weight ``sign * p``), both
    directions, coalesced by summing: the edge list a model's weighted program reads."""

    def __init__(self, n: int, edges: torch.Tensor, pairs: torch.Tensor, sign: torch.Tensor):
        keys = torch.cat([edges[0] * n + edges[1], pairs[0] * n + pairs[1], pairs[1] * n + pairs[0]])
        unique, self.inverse = torch.unique(keys, return_inverse=True)
        self.edge_index = torch.stack([unique // n, unique % n])
        self.m_edges, self.sign = edges.shape[1], sign

    def weights(self, p: torch.Tensor) -> torch.Tensor:
        w = self.sign * p
        raw = torch.cat([p.new_ones(self.m_edges), w, w])
        return p.new_zeros(self.edge_index.shape[1]).index_add(0, self.inverse, raw)


class ModelObjective:
    """The attacker's loss of the surrogate's own architecture trained on a
    :class:`RelaxedEdges` graph (``inner: model``; module docstring)."""

    def __init__(self, model: torch.nn.Module, features: np.ndarray, train: np.ndarray, labels: np.ndarray,
                 targets: np.ndarray, *, kind: str = "ce", iters: int = 100, lr: float = 0.1,
                 momentum: float = 0.9):
        reason = edge_weight_reason(model) or meta_gradient_reason(model)
        if reason is not None:
            raise ConfigError(f"meta_prbcd (inner: model): {reason}")
        self.module = _Weighted(model)  # functional_call swaps its parameters; it is never changed
        self.names = [name for name, _ in self.module.named_parameters()]
        first = next(self.module.parameters(), torch.empty(0))
        self.dtype, device = first.dtype, first.device  # the surrogate's device: everything computes there
        self.x = torch.as_tensor(np.asarray(features), dtype=self.dtype, device=device)
        self.train = torch.as_tensor(np.asarray(train), dtype=torch.long, device=device)
        y = torch.as_tensor(np.asarray(labels), dtype=torch.long, device=device)
        self.y_train = y[self.train]
        self.targets = torch.as_tensor(np.asarray(targets), dtype=torch.long, device=device)
        self.y_targets = y[self.targets]
        self.kind, self.iters, self.lr, self.momentum = kind, iters, lr, momentum

    def relax(self, ctx: ModContext, pairs: torch.Tensor, sign: torch.Tensor) -> RelaxedEdges:
        return RelaxedEdges(ctx.n, torch.as_tensor(ctx.graph.edge_index, device=pairs.device), pairs, sign)

    def init_weights(self, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
        """The model's parameters drawn afresh (every submodule's ``reset_parameters``) under
        a seed drawn from ``gen``; the surrogate's own weights are restored afterwards."""
        params = list(self.module.parameters())
        kept = [w.detach().clone() for w in params]
        cuda = sorted({w.device.index or 0 for w in params if w.device.type == "cuda"})
        try:
            with torch.random.fork_rng(devices=cuda), torch.no_grad():
                torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=gen)))
                for module in self.module.modules():
                    if module is not self.module and callable(getattr(module, "reset_parameters", None)):
                        module.reset_parameters()
                return tuple(w.detach().clone() for w in params)
        finally:
            with torch.no_grad():
                for w, k in zip(params, kept):
                    w.copy_(k)

    def logits(self, graph: RelaxedEdges, weight: torch.Tensor, params: tuple[torch.Tensor, ...]) -> torch.Tensor:
        return torch.func.functional_call(self.module, dict(zip(self.names, params)),
                                          (self.x, graph.edge_index, weight))

    def loss(self, graph: RelaxedEdges, p: torch.Tensor, *weights: torch.Tensor) -> torch.Tensor:
        """The attacker's loss after training from ``weights``; differentiable in ``p``
        through the training when ``p`` requires grad."""
        with self.kept():
            return self._loss(graph, graph.weights(p), p.requires_grad, weights)

    @contextmanager
    def kept(self) -> Iterator[None]:
        """The propagation operators and their sparse structures computed once while the
        graph is the same (one unrolled training and its reverse pass), dropped after."""
        try:
            with kept_structures():
                yield
        finally:
            self.module.ops = None

    def _loss(self, graph: RelaxedEdges, weight: torch.Tensor, meta: bool,
              weights: tuple[torch.Tensor, ...]) -> torch.Tensor:
        params = tuple(w.clone().requires_grad_(True) for w in weights)
        velocity = tuple(torch.zeros_like(w) for w in weights)
        # a meta-gradient differentiates every step's backward pass: no once-differentiable kernels
        with torch.enable_grad(), plain_kernels() if meta else nullcontext():
            for _ in range(self.iters if params else 0):  # a model without parameters is not trained
                logits = self.logits(graph, weight, params)
                train_loss = torch.nn.functional.cross_entropy(logits[self.train], self.y_train)
                grads = torch.autograd.grad(train_loss, params, create_graph=meta, allow_unused=True)
                grads = tuple(torch.zeros_like(w) if g is None else g for w, g in zip(params, grads))
                velocity = tuple(self.momentum * v + g for v, g in zip(velocity, grads))
                params = tuple(w - self.lr * v for w, v in zip(params, velocity))
                if not meta:
                    params = tuple(w.detach().requires_grad_(True) for w in params)
                    velocity = tuple(v.detach() for v in velocity)
        logits = self.logits(graph, weight, params)
        return attack_loss(logits[self.targets], self.y_targets, self.kind)

    def step_bytes(self, graph: RelaxedEdges) -> int:
        """Bytes that one differentiable training step keeps for the reverse pass (measured
        with saved-tensor hooks on one step; each storage counted once, the inputs that
        exist before the step -- features, structure, the model's buffers -- not at all):
        the unrolled training keeps ``iters`` times as much."""
        kept = {t.untyped_storage().data_ptr() for t in (self.x, graph.edge_index, graph.inverse, self.train,
                                                           self.y_train, *self.module.buffers())}
        seen: dict[int, int] = {}

        def pack(t: torch.Tensor) -> torch.Tensor:
            storage = t.untyped_storage()
            if storage.data_ptr() not in kept:
                seen[storage.data_ptr()] = storage.nbytes()
            return t

        p = torch.zeros(graph.sign.numel(), dtype=self.dtype, device=self.x.device, requires_grad=True)
        params = tuple(w.detach().requires_grad_(True) for w in self.module.parameters())
        with torch.enable_grad(), plain_kernels(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            logits = self.logits(graph, graph.weights(p), params)
            loss = torch.nn.functional.cross_entropy(logits[self.train], self.y_train)
            torch.autograd.grad(loss, params or (p,), create_graph=True, allow_unused=True)
        return sum(seen.values())


class MetaBlock(Block):
    """A block of global candidate pairs whose loss is the meta objective's."""

    def __init__(self, ctx: ModContext, objective: MetaObjective | ModelObjective, pairs: np.ndarray,
                 gen: torch.Generator):
        self.objective = objective
        self.gen = gen
        self.eval_weights = objective.init_weights(torch.Generator().manual_seed(int(torch.randint(
            0, 2**62, (1,), generator=gen))))
        super().__init__(ctx, pairs)

    def set(self, pairs: np.ndarray, p: torch.Tensor) -> None:
        super().set(pairs, p.to(self.objective.dtype))
        ctx = self.ctx
        self.graph = self.objective.relax(ctx, self.pairs_t, self.sign)

    def loss(self, p: torch.Tensor, kind: str, x: torch.Tensor | None = None) -> torch.Tensor:
        return self.objective.loss(self.graph, p, *self.eval_weights)

    def gradient(self, kind: str, x: torch.Tensor | None = None) -> tuple[float, torch.Tensor]:
        """The meta-gradient at ``p`` from a fresh initialisation."""
        p = self.p.detach().requires_grad_(True)
        with self.objective.kept():
            loss = self.objective.loss(self.graph, p, *self.objective.init_weights(self.gen))
            (grad,) = torch.autograd.grad(loss, p)
        return float(loss.detach()), grad


#: The unrolled training's resident growth over its saved tensors (the temporaries the hooks do
#: not see): measured 1.30x for a GCN and 1.00x for GCN-Jaccard on prognn-cora, 30 steps.
UNROLL_MARGIN = 1.3


def check_unrolled_memory(objective: ModelObjective, ctx: ModContext, pairs: np.ndarray, iters: int) -> None:
    """Refuse (one line) an unrolled training whose saved tensors, ``iters + 1`` times one
    step's (measured on one step of the block's relaxed graph) with :data:`UNROLL_MARGIN`,
    exceed :data:`MEMORY_FRACTION` of this machine's memory."""
    sign = torch.ones(pairs.shape[1], dtype=objective.dtype, device=ctx.device)
    relaxed = objective.relax(ctx, torch.as_tensor(pairs, device=ctx.device), sign)
    need = int(UNROLL_MARGIN * (iters + 1) * objective.step_bytes(relaxed))
    total = machine_memory()
    if need > MEMORY_FRACTION * total:
        raise ConfigError(
            f"meta_prbcd (inner: model): unrolling {iters} training steps of {type(ctx.model).__name__} on "
            f"{ctx.graph.name!r} keeps about {format_bytes(need)}, more than {MEMORY_FRACTION:.0%} of this machine's "
            f"{format_bytes(total)}; lower train_iters or block_size, or use inner: linear"
        )


class MetaPRBCD(PoisoningAttack):
    """Projected randomized block coordinate descent on meta-gradients, over all node pairs."""

    Config = MetaPRBCDConfig
    name = "meta_prbcd"
    trains = True

    @property
    def follows_gradients(self) -> bool:
        """With ``inner: model`` the meta-gradient runs through the attacked model's own
        training, so attacking a defense itself (adaptive) is another attack."""
        return True

    @property
    def adaptive_defaults(self) -> dict[str, Any]:
        return {"inner": "model"}

    def check_inputs(self, graph, targets: np.ndarray):
        targets, budget = super().check_inputs(graph, targets)
        size = self._block_size(graph.num_nodes, budget.n_edge_mod)
        if size <= budget.n_edge_mod and size < all_pairs(graph.num_nodes):
            raise ConfigError(f"meta_prbcd: block_size={size:,} must exceed the budget of {budget.n_edge_mod:,} flips; "
                              "raise block_size (or leave it null) or lower the budget")
        return targets, budget

    def _block_size(self, n: int, budget: int) -> int:
        return self.config.block_size or default_block_size(budget, all_pairs(n))

    def generate(self, ctx: ModContext, gen: torch.Generator) -> Modification:
        cfg, graph = self.config, ctx.graph
        budget = ctx.budget.n_edge_mod
        available = all_pairs(ctx.n)
        size = self._block_size(ctx.n, budget)
        labels = self_training_labels(ctx)
        objective: MetaObjective | ModelObjective
        if cfg.inner == "model":
            objective = ModelObjective(ctx.model, graph.features, graph.split["train"], labels, ctx.targets,
                                       kind=cfg.loss, iters=cfg.train_iters, lr=cfg.train_lr,
                                       momentum=cfg.train_momentum)
        else:
            objective = MetaObjective(graph.features, graph.split["train"], labels, ctx.targets,
                                      int(graph.num_classes), kind=cfg.loss, hidden=cfg.hidden,
                                      iters=cfg.train_iters, lr=cfg.train_lr, momentum=cfg.train_momentum,
                                      device=ctx.device)
        pairs = sample_global_pairs(ctx.n, min(size, available), gen)
        if cfg.inner == "model":
            check_unrolled_memory(objective, ctx, pairs, cfg.train_iters)
        block = MetaBlock(ctx, objective, pairs, gen)
        def fresh(k: int, exclude: np.ndarray) -> np.ndarray:  # resampled pairs: any pair of the graph
            return sample_global_pairs(ctx.n, k, gen, exclude=exclude)

        return ctx.result(search(block, cfg, budget, cfg.lr * budget, size, fresh, gen))


__all__ = ["INNER", "MetaObjective", "MetaPRBCD", "MetaPRBCDConfig", "ModelObjective", "RelaxedEdges", "RelaxedGraph",
           "UNROLL_MARGIN", "check_unrolled_memory"]
