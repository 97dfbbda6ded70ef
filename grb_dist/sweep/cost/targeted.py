"""Calibrating a per-target scenario (``targeted``): each target attacked alone, and scored alone.

An attack cell of such a scenario attacks the T targets its selection gives on its difficulty
(:func:`~grb_dist.core.targeted.select_targets`), each alone: a setup per cell (the attack
built, the surrogate's labels; Nettack also trains its linear surrogate and prepares the
graph) plus one attack per target, which grows with the target's budget (Nettack takes a
step per flip). It is timed through the real attack on a few targets
(:data:`MEASURED_TARGETS`, drawn as the selection draws them, same seed and degree bound,
whatever its ``n``): after a cold run, one run on one target and one on all of them, and
``fixed + weight * unit`` fitted with a target's weight ``1 + its budget``
(:func:`attack_rate`). A cell's rate (:func:`per_target`) is that setup and, per target,
the unit times the mean weight of the cell's own targets: ``fixed + T * unit`` seconds.

A score cell evaluates each target alone
(:meth:`~grb_dist.evaluation.targeted.TargetEvaluator.outcomes`): one clean pass per call,
then one evaluation per target, on the target's ball for a model with a receptive field and
on the whole graph for one without (GCN-SVD: a full forward pass, its SVD included, per
target). It is timed per defense and difficulty (GRB's difficulties are degree bands: a
hard target's ball is larger, up to half the graph, past which the whole graph is run)
through the real evaluator (:func:`score_rate`) on the perturbation of a few targets
(:data:`SCORED_TARGETS`): after a call that pays the first calls and checks the model's
ball against the whole graph, a call on those targets and a call on none (the clean pass
alone, after a perturbed graph as in a sweep, so a model that keeps its last graph's
structure rebuilds it): ``fixed + T * unit`` per cell.

Both run with NumPy's and SciPy's BLAS held to the task's threads, as in a sweep's tasks
(:func:`~grb_dist.sweep.cost.timing.blas_threads`): Nettack and GCN-SVD's SVD are SciPy work.

The plain floor of the calibration (:mod:`~grb_dist.sweep.cost.calibrate`) calls these with
its calibrator (``c``): its graph, device, models, cache and keys.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np

from grb_dist.core.names import TRANSFER
from grb_dist.core.scenario import scenario as scenario_of
from grb_dist.core.targeted import TargetedModification, select_targets
from grb_dist.sweep.cells import AttackCell, Cells
from grb_dist.sweep.cost.scaling import Rate
from grb_dist.sweep.cost.timing import blas_threads, timed
from grb_dist.sweep.job import content_hash

#: Targets an attack figure is timed on (a run on the first of them, one on all).
MEASURED_TARGETS = 8
#: Targets a scoring figure is timed on, at most (of the perturbation an attack made on the former).
SCORED_TARGETS = MEASURED_TARGETS


def is_per_target(scenario: str) -> bool:
    return scenario_of(scenario).per_target


def measured_targets(graph: Any, cell: AttackCell) -> np.ndarray:
    """The targets ``cell``'s attack is timed on: :data:`MEASURED_TARGETS` drawn as its
    selection draws (the same seed and degree bound: with ``n`` at most that, the cell's own
    targets), or the first listed ones of its difficulty."""
    selection = cell.selection
    if selection.select == "random":
        selection = dataclasses.replace(selection, n=MEASURED_TARGETS)
    found = select_targets(graph, cell.difficulty, selection)[:MEASURED_TARGETS]
    # a sample of a large graph may keep none that qualify: then its difficulty's first test nodes
    return found if found.size else np.asarray(graph.targets(cell.difficulty), np.int64)[:MEASURED_TARGETS]


def _measured_key(c: Any, cell: AttackCell) -> dict[str, Any]:
    selection = cell.selection.to_dict()
    if cell.selection.select == "random":
        selection["n"] = MEASURED_TARGETS
    return {"attack": c.attack_key(cell), "targets": selection}


def attack_rate(c: Any, a: AttackCell) -> Rate:
    """``a``'s attack per target weight (module docstring): ``fixed`` its setup, ``unit`` per
    weight (``1 +`` a target's budget); the perturbation of the last run is kept for scoring."""
    def measure() -> Rate:
        from grb_dist.sweep.worker import attacker_labels, cell_attack

        who = a.surrogate if a.threat == TRANSFER else f"{a.threat} {a.surrogate}"
        pool = measured_targets(c.graph, a)
        c.on_step(f"{a.scenario} {a.attack} on {who}, {a.difficulty}, on {len(pool)} targets")
        model = c.model(a.surrogate_model)
        labels = attacker_labels(c.graph, c.model(a.labels_from), c.device) if a.labels_from else None
        attack = cell_attack(a)
        weight = np.cumsum(1 + attack.budgets(c.graph, pool)).astype(float)

        def run(n: int) -> tuple[float, int]:
            import torch

            torch.manual_seed(a.seed)
            seconds, peak, mod = timed(lambda: attack.attack(c.graph, model, pool[:n], device=c.device,
                                                             labels=labels))
            c.targeted[c.attack_key(a)] = mod
            return seconds, peak

        with blas_threads(c.threads):
            cold, one = run(1), run(1)  # the cold run pays the first calls
            if len(pool) < 2:  # one target: nothing tells its attack from the setup; all per target
                return Rate(0.0, one[0] / weight[0], max(cold[1], one[1]))
            many = run(len(pool))
            if many[0] - one[0] < 0.5 * one[0]:  # the setup dominates: the better of two of each
                one, many = min(one, run(1)), min(many, run(len(pool)))
        unit = max(0.0, (many[0] - one[0]) / (weight[-1] - weight[0]))
        return Rate(max(0.0, one[0] - weight[0] * unit), unit, max(cold[1], one[1], many[1]))

    return c.cached("targeted:" + content_hash(_measured_key(c, a)), measure)


def figure(scenario: str, difficulty: str, defense: str) -> str:
    """The name of a per-target scoring figure (:attr:`Calibration.target_score`'s key)."""
    return f"{scenario}:{difficulty}:{defense}"


def scoring_cell(cells: Cells, scenario: str, difficulty: str) -> AttackCell:
    """The cell whose perturbation ``difficulty``'s scoring figures are timed on: its first
    transfer cell of ``scenario`` (else its first cell of it)."""
    tried = [a for a in cells.attacks if a.scenario == scenario and a.difficulty == difficulty]
    return next((a for a in tried if a.threat == TRANSFER), tried[0])


def restrict(mod: TargetedModification, targets: np.ndarray) -> TargetedModification:
    """``mod`` with ``targets``' perturbations only."""
    r, a = np.isin(mod.owners("removed"), targets), np.isin(mod.owners("added"), targets)
    n = np.isin(mod.nodes, targets)
    return TargetedModification.build(targets, mod.removed[:, r], mod.added[:, a], mod.num_original,
                                      mod.features.shape[1], mod.nodes[n], mod.features[n], mod.feat_min,
                                      mod.feat_max, None if mod.direct else mod.removed_by[r],
                                      None if mod.direct else mod.added_by[a])


def _scored(c: Any, cell: AttackCell) -> TargetedModification:
    """The perturbation of a few of ``cell``'s targets: the one its attack figure made, else made now."""
    key = c.attack_key(cell)
    if key not in c.targeted:
        from grb_dist.sweep.worker import attacker_labels, cell_attack

        labels = attacker_labels(c.graph, c.model(cell.labels_from), c.device) if cell.labels_from else None
        pool = measured_targets(c.graph, cell)[:SCORED_TARGETS]
        c.targeted[key] = cell_attack(cell).attack(c.graph, c.model(cell.surrogate_model), pool, device=c.device,
                                                   labels=labels)
    mod = c.targeted[key]
    changed = mod.flips_per_target() > 0
    if mod.nodes.size:
        changed |= np.isin(mod.targets, mod.nodes)
    return restrict(mod, mod.targets[changed][:SCORED_TARGETS])


def score_rate(c: Any, scenario: str, difficulty: str, defense: str) -> Rate:
    """``defense`` scoring a per-target perturbation of ``difficulty`` (module docstring):
    ``fixed`` the clean pass of a call, ``unit`` one target evaluated alone."""
    task = next(t for t in c.cells.targets if t.name == defense)
    cell = scoring_cell(c.cells, scenario, difficulty)

    def measure() -> Rate:
        from grb_dist.attacks.shared.surrogate import receptive_hops
        from grb_dist.evaluation.targeted import TargetEvaluator
        from grb_dist.models.tensors import graph_tensors

        c.on_step(f"scoring {defense} per target, {difficulty}")
        model = c.model(task.file_stem)
        hops = receptive_hops(model)
        with blas_threads(c.threads):
            mod = _scored(c, cell)
            evaluator = TargetEvaluator(c.graph, graph_tensors(c.graph, c.device))
            evaluator.outcomes(model, restrict(mod, mod.targets[:1]), hops)  # first calls; the ball checked
            seconds, peak, _ = timed(lambda: evaluator.outcomes(model, mod, hops))
            clean, clean_peak, _ = timed(lambda: evaluator.outcomes(model, restrict(mod, mod.targets[:0]), hops))
        # no target of a few flipped (budgets of 0 flips): none is evaluated alone
        return Rate(clean, max(0.0, seconds - clean) / max(1, mod.targets.size), max(peak, clean_peak))

    key = {"model": c.model_key(task), "perturbation": _measured_key(c, cell), "scored": SCORED_TARGETS}
    return c.cached("target-forward:" + content_hash(key), measure)


def loads(graph: Any, cells: Cells) -> dict[str, tuple[int, float]]:
    """Per perturbation of a per-target scenario: its number of targets on ``graph`` and their
    mean weight (``1 +`` budget) under its attack's budgets."""
    from grb_dist.sweep.worker import cell_attack

    chosen: dict[tuple[str, Any], np.ndarray] = {}
    out = {}
    for a in cells.attacks:
        if a.selection is None:
            continue
        if (a.difficulty, a.selection) not in chosen:
            chosen[a.difficulty, a.selection] = select_targets(graph, a.difficulty, a.selection)
        targets = chosen[a.difficulty, a.selection]
        weights = 1 + cell_attack(a).budgets(graph, targets) if targets.size else np.ones(1)
        out[a.perturbation_id] = (int(targets.size), float(np.mean(weights)))
    return out


def per_target(rates: Mapping[str, Rate], load: Mapping[str, tuple[int, float]]) -> dict[str, Rate]:
    """The perturbations' rates with each per-target one's unit per target (its targets' mean
    weight times the unit per weight): ``fixed + T * unit`` prices its cell."""
    return {pid: Rate(r.fixed, r.unit * load[pid][1], r.peak, r.clean) if pid in load else r
            for pid, r in rates.items()}


__all__ = ["MEASURED_TARGETS", "SCORED_TARGETS", "attack_rate", "figure", "is_per_target", "loads", "measured_targets",
           "per_target", "restrict", "score_rate", "scoring_cell"]
