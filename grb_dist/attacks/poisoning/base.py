"""The base class of poisoning attacks and what they share.

Poisoning (Zügner & Günnemann, ICLR 2019; Jin et al., KDD 2020): the attacker perturbs the
graph *before* the defender trains on it; the defender then trains on the perturbed graph
(transductively: the whole graph, its own training labels) and is scored on the test nodes.
A poisoning perturbation is a :class:`~grb_dist.core.graph.Modification` like an evasion
one, so the store, the audit and the scoring path are shared.

What differs from the modification scenario:

- the attacked nodes are the *unlabelled* ones (every node outside the training split,
  :func:`poisoning_targets`): the attacker knows the training labels, as in Metattack;
- a global attack (``global_pairs``) may flip any node pair, not only pairs touching a
  target; its budget is a share of the graph's edges (``ratio_edge_mod``, 5-25% in the
  literature) or a count (``n_edge_mod``);
- the labels it fights on the unlabelled nodes are the surrogate's predictions (or the
  ``labels`` passed in), the true labels on the training nodes (:func:`self_training_labels`,
  Metattack's self-training).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np
import torch

from grb_dist.attacks.audit import audit_modification
from grb_dist.attacks.base import check_targets
from grb_dist.attacks.base import surrogate_mode
from grb_dist.attacks.injection.common import SurrogateCache
from grb_dist.attacks.modification.base import ModContext, ModificationAttack, ModificationConfig
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph, Modification


#: Share of this machine's memory a poisoning attack's estimated state may take.
MEMORY_FRACTION = 0.5


def training_reason(model: torch.nn.Module) -> str | None:
    """Why a meta-gradient cannot run through ``model``'s training (``None``: it can): a
    model with a training procedure of its own (``train_on``: Pro-GNN's alternating
    structure learning) is not unrolled as plain gradient descent."""
    inner = getattr(model, "model", None) if getattr(type(model), "wraps_model", False) else None
    if callable(getattr(model, "train_on", None)) or callable(getattr(inner, "train_on", None)):
        name = getattr(type(model), "display_name", type(model).__name__)
        return f"{name} trains by a procedure of its own, which a meta-gradient does not unroll"
    return None


def poisoning_targets(graph: Graph) -> np.ndarray:
    """The nodes a poisoning attack fights: Metattack's unlabelled nodes, the validation and
    test nodes (``idx_unlabeled = idx_val + idx_test`` in the authors' and Pro-GNN's
    scripts; a node of no split is not fought). A graph without validation or test split
    has every node outside the training split fought."""
    if "train" not in graph.split or graph.split["train"].size == 0:
        raise ConfigError(f"graph {graph.name!r} has no training split; poisoning needs one (the defender's labels)")
    held_out = [graph.split[k] for k in ("val", "test_full") if k in graph.split]
    if held_out:
        return np.setdiff1d(np.concatenate(held_out), graph.split["train"]).astype(np.int64)
    keep = np.ones(graph.num_nodes, dtype=bool)
    keep[graph.split["train"]] = False
    return np.flatnonzero(keep).astype(np.int64)


def all_pairs(num_nodes: int) -> int:
    """Number of unordered node pairs without self-pairs, ``N (N - 1) / 2``."""
    n = int(num_nodes)
    return n * (n - 1) // 2


def self_training_labels(ctx: ModContext) -> np.ndarray:
    """A label per node: the true label on the training nodes (the attacker knows them), the
    surrogate's prediction (or the given ``labels``) elsewhere: Metattack's self-training."""
    labels = np.array(ctx.predictions, dtype=np.int64, copy=True)
    train = ctx.graph.split["train"]
    labels[train] = ctx.graph.labels[train]
    return labels


def sample_global_pairs(n: int, k: int, gen: torch.Generator, exclude: np.ndarray | None = None) -> np.ndarray:
    """Up to ``k`` distinct uniform canonical pairs ``(u < v)`` of ``n`` nodes, none of the
    keys ``u * n + v`` in ``exclude``; vectorised rounds of draws topped up after
    de-duplication (2 x k int64, in draw order)."""
    excl = np.unique(exclude) if exclude is not None and exclude.size else np.zeros(0, np.int64)
    keys = np.zeros(0, np.int64)
    k = min(int(k), all_pairs(n) - excl.size)
    for _ in range(16):
        need = k - keys.size
        if need <= 0:
            break
        draw = int(need * 1.2) + 16
        a = torch.randint(0, n, (draw,), generator=gen).numpy()
        b = torch.randint(0, n, (draw,), generator=gen).numpy()
        ok = a != b
        new = np.minimum(a[ok], b[ok]) * n + np.maximum(a[ok], b[ok])
        if excl.size:
            new = new[~np.isin(new, excl)]
        keys = np.concatenate([keys, new[~np.isin(new, keys)]])
        _, first = np.unique(keys, return_index=True)
        keys = keys[np.sort(first)]
    keys = keys[:k]
    return np.stack([keys // n, keys % n])


class PoisoningAttack(ModificationAttack):
    """Base class of attacks made for poisoning (Metattack, meta-gradient PR-BCD, published
    perturbations).

    Subclasses set ``Config`` (a subclass of
    :class:`~grb_dist.attacks.modification.base.ModificationConfig`) and implement
    :meth:`generate` on a :class:`~grb_dist.attacks.modification.base.ModContext` whose
    ``targets`` are the unlabelled nodes and whose ``graph`` carries the training split.

    Class flags (beyond the modification ones; ``global_pairs`` is on by default):
        trains: True when the attack trains models itself (meta-gradients through training):
            the forecast (``sweep --plan``) prices it as a training per step.
    """

    scenario: ClassVar[str] = "poisoning"
    name: ClassVar[str] = "poisoning"
    global_pairs: ClassVar[bool] = True
    scenarios: ClassVar[tuple[str, ...]] = ("poisoning",)
    trains: ClassVar[bool] = False

    def attack(self, graph: Graph, surrogate: torch.nn.Module, targets: np.ndarray | None = None, *,
               device: str | torch.device = "cpu", cache: SurrogateCache | None = None,
               labels: np.ndarray | None = None) -> Modification:
        """An audited poisoning perturbation of ``graph`` (which must carry a training split).

        ``targets``: the nodes fought (default :func:`poisoning_targets`); ``surrogate``: the
        attacker's trained model, whose predictions label the unlabelled nodes (``labels``
        replaces them); the other arguments as :meth:`ModificationAttack.attack`."""
        targets = poisoning_targets(graph) if targets is None else check_targets(graph, targets)
        _, budget = self.check_inputs(graph, targets)
        gen = torch.Generator(device="cpu").manual_seed(self.config.seed)
        with surrogate_mode(surrogate):
            ctx = ModContext(graph, surrogate, targets, budget, torch.device(device), labels)
            if self.edge_gradients:
                ctx.weighted.check()
            mod = self.generate(ctx, gen)
        audit_modification(graph, mod, n_edge_mod=budget.n_edge_mod, n_node_mod=budget.n_node_mod,
                           feat_min=budget.feat_min, feat_max=budget.feat_max,
                           targets=None if self.global_pairs else targets)
        return dataclasses.replace(mod, feat_min=budget.feat_min, feat_max=budget.feat_max)


__all__ = ["MEMORY_FRACTION", "ModificationConfig", "PoisoningAttack", "all_pairs", "poisoning_targets",
           "sample_global_pairs",
           "self_training_labels", "training_reason"]
