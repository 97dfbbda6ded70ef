"""The one attack interface of every scenario, and what every scenario's attacks share.

Every attack derives from :class:`Attack`: it holds only its typed config, names its
``scenario``, resolves its :class:`Budget` on a graph and target set before any work
(:meth:`Attack.check_inputs`), and generates an audited perturbation with
:meth:`Attack.attack` (same signature in every scenario), which carries the feature limits it
was held to (``feat_min`` / ``feat_max`` of the :class:`~grb_dist.core.graph.Injection` or
:class:`~grb_dist.core.graph.Modification`). The scenarios are siblings above it:
:mod:`~grb_dist.attacks.injection.base` (injection), :mod:`~grb_dist.attacks.modification`
and :mod:`~grb_dist.attacks.poisoning.base` (poisoning, a modification made before
training), the last two on the edge-flip base :mod:`~grb_dist.attacks.shared.flips`.

Shared here: the feature limits of a config on a graph, the target checks, and the surrogate
helpers (frozen for an attack; gradients of a loss w.r.t. an attack's inputs).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Iterator

import numpy as np
import torch

from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph, Injection, Modification

if TYPE_CHECKING:
    from grb_dist.attacks.shared.surrogate import SurrogateCache

#: Explicit feature limits may not exceed this multiple of the data's largest absolute value.
PLAUSIBLE_RANGE_FACTOR = 10.0


def resolve_feature_limits(config: Any, graph: Graph) -> tuple[float, float]:
    """The ``(feat_min, feat_max)`` an attack uses on ``graph`` (``config``: any attack config
    with ``feat_lim_min`` / ``feat_lim_max``).

    ``None`` limits take the graph's own feature minimum / maximum. Raises
    :class:`ConfigError` when ``min >= max`` or when an explicit limit lies beyond
    ``PLAUSIBLE_RANGE_FACTOR`` times the data's largest absolute feature value (a sign of
    limits meant for un-normalised features).
    """
    feats = graph.features
    if feats.size == 0:
        raise ConfigError(f"graph {graph.name!r} has no features; cannot resolve feature limits")
    data_min, data_max = float(feats.min()), float(feats.max())
    lo = data_min if config.feat_lim_min is None else float(config.feat_lim_min)
    hi = data_max if config.feat_lim_max is None else float(config.feat_lim_max)
    scale = max(abs(data_min), abs(data_max))
    bound = PLAUSIBLE_RANGE_FACTOR * scale if scale > 0 else PLAUSIBLE_RANGE_FACTOR
    for name, v in (("feat_lim_min", config.feat_lim_min), ("feat_lim_max", config.feat_lim_max)):
        if v is not None and abs(v) > bound:
            raise ConfigError(
                f"{name}={v} is implausible for {graph.name!r}: its features lie in "
                f"[{data_min:.3g}, {data_max:.3g}] (limit |value| <= {bound:.3g}); "
                "use limits on the normalised scale or null for the data's own range"
            )
    if lo >= hi:
        raise ConfigError(
            f"feature limits [{lo}, {hi}] are empty on {graph.name!r} (min must be < max); "
            "set feat_lim_min / feat_lim_max explicitly"
        )
    return lo, hi


def check_targets(graph: Graph, targets: np.ndarray) -> np.ndarray:
    """``targets`` as distinct int64 node ids of ``graph``; :class:`ConfigError` otherwise."""
    targets = np.asarray(targets)
    if targets.ndim != 1 or targets.size == 0:
        raise ConfigError("the target set is empty; pick a difficulty with test nodes")
    if not np.issubdtype(targets.dtype, np.integer):
        raise ConfigError(f"targets must be integer node ids, got dtype {targets.dtype}")
    targets = targets.astype(np.int64)
    if targets.min() < 0 or targets.max() >= graph.num_nodes:
        raise ConfigError(f"targets contain node ids outside [0, {graph.num_nodes})")
    if np.unique(targets).size != targets.size:
        raise ConfigError("targets contain repeated node ids")
    return targets


@dataclass(frozen=True)
class Budget:
    """What an attack may change on one graph and target set, resolved before any work.

    Attributes:
        feat_min, feat_max: the feature limits of injected or changed nodes.
        n_inject, edges_per_node: injection: new nodes, and edges of each.
        n_edge_mod, n_node_mod: modification: flipped edges, and nodes whose features change.
    """

    feat_min: float
    feat_max: float
    n_inject: int = 0
    edges_per_node: int = 0
    n_edge_mod: int = 0
    n_node_mod: int = 0


class Attack:
    """The interface of every attack, of any scenario (injection, modification, poisoning).

    An instance holds only its typed config (class attribute ``Config``), so it can be
    reused and shared. Subclasses of a scenario's base implement the attack-specific step.
    """

    Config: ClassVar[type]
    #: The scenario the attack belongs to (``injection``, ``modification`` or ``poisoning``).
    scenario: ClassVar[str]
    #: Whether a gradient attack's work grows with its ``steps`` setting; one whose length
    #: something else sets (Metattack: a greedy step per flip of its budget) is priced by
    #: ``sweep --plan`` as a whole run, and reports no steps per second.
    runs_steps: ClassVar[bool] = True

    def __init__(self, config=None):
        config = config or self.Config()
        if not isinstance(config, self.Config):
            raise ConfigError(f"{type(self).__name__} needs a {self.Config.__name__}, got {type(config).__name__}")
        self.config = config

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config})"

    @property
    def follows_gradients(self) -> bool:
        """Whether the attack follows its surrogate's gradients (FGSM, PGD, PR-BCD ...), so
        that attacking a defense itself (adaptive) is another attack than transferring."""
        return False

    @property
    def adaptive_defaults(self) -> dict[str, Any]:
        """Config values an adaptive cell (the defense itself as the surrogate) runs the
        attack with where the job does not set them: what suits the logits of any defense,
        which the plain surrogate of a transfer attack never shows (``docs/adaptive.md``)."""
        return {}

    def check_inputs(self, graph: Graph, targets: np.ndarray) -> tuple[np.ndarray, Budget]:
        """Validate ``targets`` and resolve the budget on ``graph``; raise
        :class:`ConfigError` before any work when they do not fit."""
        raise NotImplementedError

    def attack(self, graph: Graph, surrogate: torch.nn.Module, targets: np.ndarray, *,
               device: str | torch.device = "cpu", cache: "SurrogateCache | None" = None,
               labels: np.ndarray | None = None) -> Injection | Modification:
        """An audited perturbation of ``graph`` against ``surrogate`` on ``targets``,
        carrying its feature limits. ``cache`` shares a surrogate's clean pass between
        attacks on the same graph, surrogate and targets (where the attack can use it).
        ``labels``: a class per node of ``graph``, the labels the attack fights (default:
        the surrogate's own clean predictions); an adaptive attack on a defense passes the
        predictions of the attacker's own model, its best guess of the truth."""
        raise NotImplementedError


@contextlib.contextmanager
def frozen_parameters(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Parameters of ``model`` do not require gradients inside the block (restored after)."""
    saved = [(p, p.requires_grad) for p in model.parameters()]
    for p, _ in saved:
        p.requires_grad_(False)
    try:
        yield model
    finally:
        for p, flag in saved:
            p.requires_grad_(flag)


@contextlib.contextmanager
def surrogate_mode(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Freeze ``model`` for an attack: eval mode (dropout off) and parameters that do not
    require gradients (autograd then records nothing for them); both restored on exit."""
    was_training = model.training
    model.eval()
    with frozen_parameters(model):
        try:
            yield model
        finally:
            model.train(was_training)


def gradients(loss: torch.Tensor, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """``d loss / d v`` for each ``v`` of ``inputs``; zeros for an input the loss does not
    depend on (injected nodes that reach no target, the edge weights of a model that reads
    no graph, such as an MLP)."""
    if not loss.requires_grad:
        return tuple(torch.zeros_like(v) for v in inputs)
    grads = torch.autograd.grad(loss, inputs, allow_unused=True)
    return tuple(torch.zeros_like(v) if g is None else g for g, v in zip(grads, inputs))


def input_grad(loss: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``d loss / d x`` (:func:`gradients` of one input)."""
    return gradients(loss, (x,))[0]
