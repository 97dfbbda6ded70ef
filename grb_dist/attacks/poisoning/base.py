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

from typing import ClassVar

import numpy as np
import torch

from grb_dist.attacks.base import check_targets
from grb_dist.attacks.shared.surrogate import SurrogateCache
from grb_dist.attacks.shared.flips import ModContext, ModificationAttack, ModificationConfig
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph, Modification
from grb_dist.core.scenario import POISONING


#: Share of this machine's memory a poisoning attack's estimated state may take.
MEMORY_FRACTION = 0.5


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


def self_training_labels(ctx: ModContext) -> np.ndarray:
    """A label per node: the true label on the training nodes (the attacker knows them), the
    surrogate's prediction (or the given ``labels``) elsewhere: Metattack's self-training."""
    labels = np.array(ctx.predictions, dtype=np.int64, copy=True)
    train = ctx.graph.split["train"]
    labels[train] = ctx.graph.labels[train]
    return labels


class PoisoningAttack(ModificationAttack):
    """Base class of attacks made for poisoning (Metattack, meta-gradient PR-BCD, published
    perturbations).

    Subclasses set ``Config`` (a subclass of
    :class:`~grb_dist.attacks.shared.flips.ModificationConfig`) and implement
    :meth:`generate` on a :class:`~grb_dist.attacks.shared.flips.ModContext` whose
    ``targets`` are the unlabelled nodes and whose ``graph`` carries the training split.

    Class flags (beyond the modification ones; ``global_pairs`` is on by default):
        trains: True when the attack trains models itself (meta-gradients through training):
            the forecast (``sweep --plan``) prices it as a training per step.
    """

    scenario: ClassVar[str] = POISONING.name
    name: ClassVar[str] = POISONING.name
    global_pairs: ClassVar[bool] = True
    scenarios: ClassVar[tuple[str, ...]] = (POISONING.name,)
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
        return self.audited(graph, surrogate, targets, budget, device, labels)

__all__ = ["MEMORY_FRACTION", "ModificationConfig", "PoisoningAttack", "poisoning_targets", "self_training_labels"]
