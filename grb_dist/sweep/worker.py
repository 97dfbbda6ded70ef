"""The work of a sweep as plain Python (no Ray): train, attack, score, and poison (train a
defense on a perturbed graph and score it).

:mod:`grb_dist.sweep.tasks` hands these functions and :class:`Scorer` to the Ray edge as tasks and
actors; tests and debugging can call them directly. Nothing here writes files: results go
back to the caller (the driver is the single writer of the run directory, which also makes
the sweep work on clusters without a shared file system).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import torch

from grb_dist.attacks import SurrogateCache, build_attack
from grb_dist.attacks.poisoning.base import poisoning_targets
from grb_dist.attacks.shared.surrogate import receptive_hops
from grb_dist.core.resources import Peak
from grb_dist.core.scenario import scenario as scenario_of
from grb_dist.core.targeted import TargetedModification, select_targets
from grb_dist.defenses import build_defense, train_defense
from grb_dist.evaluation.evaluate import difficulty_accuracy, predict_tensors
from grb_dist.evaluation.targeted import TargetEvaluator
from grb_dist.core.graph import Graph, Injection, Modification, modified_graph
from grb_dist.models.tensors import perturb_tensors
from grb_dist.models.train import TrainConfig
from grb_dist.store.schema import model_meta
from grb_dist.sweep.cells import AttackCell, ModelTask, PoisonTask
from grb_dist.models.tensors import graph_tensors

log = logging.getLogger(__name__)


# ----------------------------------------------------------------- training


@dataclass
class TrainedModel:
    """A training result in transportable form: the state_dict (CPU tensors) and metadata;
    ``peak``: the memory the task held (set by the Ray edge's wrapper, :mod:`grb_dist.sweep.tasks`)."""

    state_dict: dict[str, torch.Tensor]
    meta: dict[str, Any]
    peak: Peak | None = None


def train_task(graph: Graph, task: ModelTask, *, device: str = "cpu", transductive: bool = False) -> TrainedModel:
    """Train one model (a defense or a surrogate) as ``task`` describes; ``transductive``:
    on the whole graph (the poisoning scenario)."""
    cfg = TrainConfig(**{**task.train, "seed": task.seed})
    kwargs: dict[str, Any] = {"device": device, "transductive": transductive or task.transductive}
    if task.at is not None:
        kwargs["at_config"] = dict(task.at)
    start = time.perf_counter()
    result = train_defense(task.name, graph, dict(task.params), cfg, **kwargs)
    seconds = time.perf_counter() - start
    state = {k: v.detach().cpu() for k, v in result.model.state_dict().items()}
    reason = "patience" if result.stopped_early else "epochs" if result.epochs_run else "untrained"
    meta = model_meta(task, best_epoch=result.best_epoch, best_val_accuracy=result.best_val_accuracy,
                      train_seconds=seconds, epochs_run=result.epochs_run, stop_reason=reason)
    return TrainedModel(state, meta)


def load_model(graph: Graph, name: str, params: Mapping[str, Any], state_dict: Mapping[str, torch.Tensor],
               device: str = "cpu") -> torch.nn.Module:
    """Build defense ``name`` and load a trained state_dict into it (eval mode)."""
    model = build_defense(name, graph, dict(params))
    model.load_state_dict(dict(state_dict))
    return model.to(device).eval()


# ----------------------------------------------------------------- attacking


@dataclass
class AttackResult:
    """A perturbation (an injection or a modification), how long it took to generate, and
    the nodes its rows are scored on when the attack chose its own (a published Nettack
    set: :func:`scored_nodes`); ``peak``: the memory its task held (its batch's)."""

    perturbation_id: str
    perturbation: Injection | Modification
    seconds: float
    scored: np.ndarray | None = None
    peak: Peak | None = None


def cell_attack(cell: AttackCell) -> Any:
    """``cell``'s attack, built from its parameters; one that reads files beside the graph is
    pinned to the contents the sweep checked before it started (``cell.inputs``): a file
    changed since is an error, never read as the file the cell's id names."""
    attack = build_attack(cell.attack, dict(cell.params), cell.scenario)
    if cell.inputs:
        attack.pin_inputs(dict(cell.inputs))
    return attack


def scored_nodes(graph: Graph, cell: AttackCell) -> np.ndarray | None:
    """The nodes ``cell``'s perturbation is scored on instead of the difficulty's test nodes:
    those its attack reports (``scored_nodes(graph)``: a targeted published set, which chose
    its own targets), else ``None``."""
    attack = cell_attack(cell)
    nodes = getattr(attack, "scored_nodes", None)
    return nodes(graph) if callable(nodes) else None


def accuracies(pred: torch.Tensor, graph: Graph, difficulties: list[str],
               scored: np.ndarray | None = None) -> dict[str, tuple[float, int]]:
    """``(accuracy, number of nodes)`` of ``pred`` per difficulty: on its test nodes, or on
    ``scored`` for every difficulty when given (the attack's own targets)."""
    if scored is None:
        acc = difficulty_accuracy(pred, graph, difficulties)
        return {d: (acc[d], int(graph.targets(d).size)) for d in difficulties}
    y = torch.as_tensor(graph.labels)
    idx = torch.as_tensor(scored)
    acc = float((pred.cpu()[idx] == y[idx]).float().mean())
    return dict.fromkeys(difficulties, (acc, int(idx.numel())))


def attack_task(graph: Graph, cell: AttackCell, surrogate: torch.nn.Module, *, device: str = "cpu",
                cache: SurrogateCache | None = None, labels: np.ndarray | None = None) -> AttackResult:
    """Run ``cell``'s attack (of its scenario) on ``surrogate`` against the difficulty's
    targets (audited).

    ``cache`` shares an injection surrogate's clean pass between cells on the same surrogate
    and difficulty (see :func:`attack_batch`); ``labels`` (one per node) are the labels
    the attack fights instead of the surrogate's predictions (:func:`attacker_labels`)."""
    torch.manual_seed(cell.seed)
    attack = cell_attack(cell)
    start = time.perf_counter()
    perturbation = attack.attack(graph, surrogate, cell_targets(graph, cell), device=device, cache=cache, labels=labels)
    seconds = time.perf_counter() - start
    scored = attack.scored_nodes(graph) if callable(getattr(attack, "scored_nodes", None)) else None
    return AttackResult(cell.perturbation_id, perturbation, seconds, scored)


def cell_targets(graph: Graph, cell: AttackCell) -> np.ndarray:
    """The nodes ``cell``'s attack fights: a global poisoning attack every unlabelled node, a
    per-target scenario's its selection (each attacked alone), the others their
    difficulty's test nodes."""
    if cell.selection is not None:
        return select_targets(graph, cell.difficulty, cell.selection)
    if scenario_of(cell.scenario).poisons and not cell.targeted:
        return poisoning_targets(graph)
    return graph.targets(cell.difficulty)


def attacker_labels(graph: Graph, model: torch.nn.Module, device: str = "cpu") -> np.ndarray:
    """``model``'s clean predictions on every node of ``graph``: the labels an adaptive
    attack fights. The attacker has no test labels (GRB's threat model); its own surrogate's
    predictions are its best guess of them, the same guess its transfer attacks use, so an
    adaptive attack differs from a transfer one by its gradients only. (Fighting the
    defense's own predictions would push its mistakes towards the truth.)"""
    with torch.no_grad():
        return predict_tensors(model, graph_tensors(graph, device)).cpu().numpy()


def attack_batch(graph: Graph, cells: list[AttackCell], surrogate: torch.nn.Module, *,
                 device: str = "cpu", labeler: torch.nn.Module | None = None) -> list[AttackResult]:
    """Run several cells on one surrogate, computing its clean pass once per difficulty;
    with a ``labeler`` (adaptive cells: the attacker's own model) the cells fight its
    predictions (:func:`attacker_labels`).

    Each result's ``seconds`` is the cell's own attack time; the first cell of a
    difficulty also carries the shared clean pass."""
    cache = SurrogateCache()
    labels = attacker_labels(graph, labeler, device) if labeler is not None else None
    return [attack_task(graph, cell, surrogate, device=device, cache=cache, labels=labels) for cell in cells]


# ----------------------------------------------------------------- poisoning


@dataclass
class PoisonResult:
    """A defense trained on a poisoned graph (``trained``: ``None`` when it was loaded from
    the run) and one scoring result per difficulty (as :meth:`Scorer.score` gives them);
    ``peak``: the memory the task held."""

    trained: TrainedModel | None
    results: dict[str, dict[str, Any]]
    peak: Peak | None = None


def poison_task(graph: Graph, task: PoisonTask, perturbation: Modification | None, *, device: str = "cpu",
                state_dict: Mapping[str, torch.Tensor] | None = None,
                scored: np.ndarray | None = None) -> PoisonResult:
    """Train ``task``'s defense on ``graph`` with ``perturbation`` applied (transductively:
    the whole poisoned graph, the defender's training labels; ``None``: the clean graph),
    or load ``state_dict`` when the run already holds the model, and score it on the
    test nodes of every difficulty of ``task.cells`` (on ``scored`` when the attack chose
    its own targets), on the graph it was trained on."""
    if task.selection is not None:
        return poison_targets(graph, task, perturbation, device=device, state_dict=state_dict)
    poisoned = modified_graph(graph, perturbation)
    model = task.model
    if state_dict is None:
        trained = train_task(poisoned, model, device=device, transductive=True)
        state_dict, seconds = trained.state_dict, float(trained.meta["train_seconds"])
    else:
        trained, seconds = None, float("nan")
    defense = load_model(poisoned, model.name, model.params, state_dict, device)
    start = time.perf_counter()
    pred = predict_tensors(defense, graph_tensors(poisoned, device))
    difficulties = [c.difficulty for c in task.cells]
    accuracy = accuracies(pred, poisoned, difficulties, scored)
    each = (time.perf_counter() - start) / max(1, len(difficulties))
    results = {d: {"defense": model.name, "accuracy": accuracy[d][0], "n_targets": accuracy[d][1],
                   "score_seconds": each, "defense_train_seconds": seconds} for d in difficulties}
    return PoisonResult(trained, results)


def poison_targets(graph: Graph, task: PoisonTask, perturbation: TargetedModification | None, *,
                   device: str = "cpu", state_dict: Mapping[str, torch.Tensor] | None = None) -> PoisonResult:
    """A per-target poisoning task: ``task``'s defense trained on the graph with each target's
    flips alone (one training per target with flips, the task's seed) and scored at that
    target; ``None``: trained once on the clean graph (or loaded from ``state_dict``) and
    scored at every difficulty's targets. The per-target models are not kept (only their
    scores): a target's model is one training of the defense on one perturbed graph."""
    model, start = task.model, time.perf_counter()
    if perturbation is None:
        if state_dict is None:
            trained = train_task(graph, model, device=device, transductive=True)
            state_dict, seconds = trained.state_dict, float(trained.meta["train_seconds"])
        else:
            trained, seconds = None, float("nan")
        evaluator = TargetEvaluator(graph, graph_tensors(graph, device))
        defense = load_model(graph, model.name, model.params, state_dict, device)
        results = {}
        for c in task.cells:
            targets = select_targets(graph, c.difficulty, task.selection)
            with torch.no_grad():
                pred, margin = evaluator.clean_outcomes(defense, targets)
            results[c.difficulty] = _target_result(model.name, graph, targets, pred, margin, start, seconds)
        return PoisonResult(trained, results)
    targets = perturbation.targets
    pred, margin = np.zeros(targets.size, np.int64), np.zeros(targets.size)
    seconds = 0.0
    for i, t in enumerate(targets.tolist()):
        poisoned = modified_graph(graph, perturbation.of(t))
        trained = train_task(poisoned, model, device=device, transductive=True)
        seconds += float(trained.meta["train_seconds"])
        defense = load_model(poisoned, model.name, model.params, trained.state_dict, device)
        with torch.no_grad():
            p, m = TargetEvaluator(poisoned, graph_tensors(poisoned, device)).clean_outcomes(defense, np.array([t]))
        pred[i], margin[i] = p[0], m[0]
    return PoisonResult(None, {c.difficulty: _target_result(model.name, graph, targets, pred, margin, start, seconds)
                               for c in task.cells})


def _target_result(defense: str, graph: Graph, targets: np.ndarray, pred: np.ndarray, margin: np.ndarray,
                   start: float, train_seconds: float) -> dict[str, Any]:
    """A per-target scoring result (as :meth:`Scorer.score_targets` gives them)."""
    return {"defense": defense, "accuracy": float((pred == graph.labels[targets]).mean()) if targets.size else float("nan"),
            "n_targets": int(targets.size), "score_seconds": time.perf_counter() - start,
            "defense_train_seconds": train_seconds, "target_nodes": targets.tolist(),
            "target_predictions": pred.tolist(), "target_margins": margin.tolist()}


# ----------------------------------------------------------------- scoring


class Scorer:
    """Holds trained defenses and scores perturbations against them.

    Args:
        graph: the clean graph.
        models: defense name -> (params, state_dict, train_seconds).
        device: torch device of the held models.
    """

    def __init__(self, graph: Graph, models: Mapping[str, tuple[Mapping, Mapping, float]], device: str = "cpu"):
        self.graph = graph
        self.device = device
        self.clean = graph_tensors(graph, device)  # once: every perturbation is applied to these
        self.models = {name: load_model(graph, name, p, sd, device) for name, (p, sd, _) in models.items()}
        self.train_seconds = {name: float(s) for name, (_, _, s) in models.items()}
        self.per_target: TargetEvaluator | None = None  # made on the first targeted perturbation

    def names(self) -> list[str]:
        return sorted(self.models)

    def score(self, perturbation: Injection | Modification | None, difficulty: str,
              defenses: list[str], scored: np.ndarray | None = None) -> list[dict[str, Any]]:
        """One result per requested held defense: accuracy, n_targets, score_seconds; on
        ``scored`` instead of the difficulty's test nodes when the attack chose its own.

        The perturbed graph is assembled once and shared by every defense; defenses that
        pre-process the graph (GNN-SVD, GNNGuard, R-GCN) do so on the perturbed graph, as
        a deployed model would.
        """
        if isinstance(perturbation, TargetedModification) or (perturbation is None and scored is not None):
            return self.score_targets(perturbation, scored, defenses)
        tensors = perturb_tensors(self.clean, perturbation)
        out = []
        for name in defenses:
            start = time.perf_counter()
            pred = predict_tensors(self.models[name], tensors)
            acc, n = accuracies(pred, self.graph, [difficulty], scored)[difficulty]
            out.append({"defense": name, "accuracy": acc, "n_targets": n,
                        "score_seconds": time.perf_counter() - start,
                        "defense_train_seconds": self.train_seconds[name]})
        return out


    def score_targets(self, perturbation: TargetedModification | None, scored: np.ndarray | None,
                      defenses: list[str]) -> list[dict[str, Any]]:
        """A per-target scenario's rows: per defense, each target's prediction and margin on
        the graph with its own flips (``perturbation``; ``None``: the clean graph, at the
        nodes ``scored``), and the accuracy over the targets."""
        if self.per_target is None:
            self.per_target = TargetEvaluator(self.graph, self.clean)
        targets = perturbation.targets if perturbation is not None else np.asarray(scored, np.int64)
        out = []
        for name in defenses:
            start = time.perf_counter()
            model = self.models[name]
            if perturbation is None:
                pred, margin = self.per_target.clean_outcomes(model, targets)
            else:
                pred, margin = self.per_target.outcomes(model, perturbation, receptive_hops(model))
            out.append(_target_result(name, self.graph, targets, pred, margin, start, self.train_seconds[name]))
        return out


def perturbation_sizes(perturbation: Injection | Modification | TargetedModification | None) -> dict[str, int]:
    """The size columns of a score row: injected nodes and edges, added and removed edges,
    nodes with modified features."""
    sizes = dict.fromkeys(("n_injected", "n_injected_edges", "n_edges_added", "n_edges_removed", "n_nodes_modified"), 0)
    if isinstance(perturbation, (Modification, TargetedModification)):
        sizes.update(n_edges_added=int(perturbation.added.shape[1]), n_edges_removed=int(perturbation.removed.shape[1]),
                     n_nodes_modified=perturbation.n_nodes_modified)
    elif perturbation is not None:
        edges = int(np.asarray(perturbation.edges).shape[1])
        sizes.update(n_injected=perturbation.n_inject, n_injected_edges=edges, n_edges_added=edges)
    return sizes
