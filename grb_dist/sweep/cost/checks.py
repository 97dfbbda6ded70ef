"""The full-size checks of a calibration on samples: one measurement of each kind of work on
the whole graph, when it is cheap, against what the samples extrapolate (plain Python).

An epoch of the first surrogate's training scales the growth of the models' figures
(:func:`full_size_check`); an epoch of each other architecture that weighs in the job's
trainings scales its own variants' (:func:`architecture_checks`: how much faster than
linearly an epoch grows differs between architectures); the costliest attack scales the
attacks' (:func:`attack_check`).
Both measure through the whole graph's calibrator (``whole``, a
:class:`~grb_dist.sweep.cost.calibrate._Calibrator`) and are cached like any figure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from grb_dist.sweep.cells import AttackCell, Cells, ModelTask
from grb_dist.sweep.cost.scaling import Rate, check_scale, extrapolate

#: A full-size check (an epoch's two trainings, an attack's runs) is measured when it is
#: extrapolated to take at most this (seconds), or :data:`CHECK_SHARE` of the measuring
#: budget when that is more (:func:`check_limit`).
CHECK_S = 20.0
#: The share of a calibration's measuring budget one full-size check may take: the default
#: three-minute plan keeps to :data:`CHECK_S`; a longer budget buys the checks of a larger
#: graph (on the aminer twin an epoch alone takes 11-18 s, its check about 40 s).
CHECK_SHARE = 0.1


def check_limit(budget: float | None, least: float = CHECK_S) -> float:
    """Seconds one full-size check may take under a measuring ``budget``: ``least`` (also
    without a budget), or :data:`CHECK_SHARE` of the budget when that is more."""
    return least if budget is None else max(least, CHECK_SHARE * budget)


#: Runs of one step, as many as an attack's measurement takes at most: a cold and a warm
#: step, two short runs, and a longer one when the fixed part dominates (each pays the
#: attack's fixed part; ``timing.lengthened``).
ATTACK_RUNS = 5


def full_size_check(cells: Cells, whole: Any, points: Mapping[tuple[str, str], list[tuple[float, Rate]]]
                    ) -> tuple[str, float, float, float]:
    """The first surrogate's epoch on the whole graph (the second epoch of a 2-epoch
    training, timed inside it; for a model that reports no epochs, the difference of a 1-
    and a 2-epoch training) against the epoch extrapolated from the samples (model,
    measured s, extrapolated s, the :func:`check_scale` it gives, at least 1); cached like
    any figure. :func:`whole_graph_checks` measures it when :func:`check_price` is within the
    limit. The epoch, not a 1-epoch training: a training's fixed part (building the model
    and its graphs) is a small share of the samples' short runs, its extrapolation is noisy,
    and a long training hardly pays it."""
    task = cells.surrogates[0]
    return _epoch_check(task, whole, points["train", task.file_stem], 2)


def check_price(cells: Cells, points: Mapping[tuple[str, str], list[tuple[float, Rate]]]) -> float | None:
    """Seconds :func:`full_size_check` would take, by the samples' extrapolation (its 1- and
    2-epoch trainings of the first surrogate); ``None`` when that was not measured."""
    measured = points.get(("train", cells.surrogates[0].file_stem))
    if measured is None:
        return None
    rate = extrapolate(measured)
    return rate.seconds(1) + rate.seconds(2)


def _epoch_check(task: ModelTask, whole: Any, measured: list[tuple[float, Rate]], epochs: int
                 ) -> tuple[str, float, float, float]:
    """The check of ``task``'s epoch on the whole graph: a training of ``epochs`` epochs read
    inside it (the median epoch after the first), or for a model that reports no epochs the
    difference of a 1- and a 2-epoch training."""
    rate = extrapolate(measured)

    def measure() -> Rate:
        whole.on_step(f"checking the extrapolation: {epochs} epochs of {task.name} on the whole graph")
        inside, seconds, _ = whole.read_inside(task, epochs)
        if inside is not None:
            return Rate(inside.fixed, inside.unit, 0)
        two = seconds if epochs == 2 else whole._train(task, 2)[0]
        one = whole._train(task, 1)[0]
        return Rate(max(0.0, 2 * one - two), max(0.0, two - one), 0)

    epoch = whole.cached(f"check-epoch:{whole.model_key(task)}", measure).unit
    # the models' work grows at least as the extrapolation says: a graph larger than the
    # samples does not run faster per edge; a check that reads faster says the samples'
    # figure of this one model was slowed, and scaling every figure down by it spreads that
    # (the checks' current figures: docs/performance.md, section "How accurate the plan is")
    return task.name, epoch, rate.unit, max(1.0, check_scale(measured, epoch, lambda r: r.unit))


#: An architecture whose trainings the samples put at this share of the job's training time
#: or more is checked on the whole graph too (:func:`architecture_checks`).
ARCHITECTURE_SHARE = 0.2
#: ... on a training of this many epochs (the median after the first: one epoch is one
#: reading of a machine shared with the kernel's page faults) ...
ARCHITECTURE_EPOCHS = 3
#: ... when that training of its cheapest task is extrapolated to take at most this (seconds).
ARCHITECTURE_CHECK_S = 40.0


def architecture(name: str) -> str:
    """The architecture of a model or defense name (``gat_ln_at`` -> ``gat``; a name the
    grammar does not parse is its own)."""
    from grb_dist.core.errors import ConfigError
    from grb_dist.models.grammar import check_name

    try:
        return check_name(name).base
    except ConfigError:
        return name


def architecture_checks(trainings: list[ModelTask], whole: Any,
                        points: Mapping[tuple[str, str], list[tuple[float, Rate]]], first: str | None,
                        slower: float = 1.0, limit: float = ARCHITECTURE_CHECK_S
                        ) -> dict[str, tuple[str, float, float, float]]:
    """Full-size checks like :func:`full_size_check` for the architectures other than
    ``first`` (the one already checked) whose ``trainings`` are extrapolated to take at
    least :data:`ARCHITECTURE_SHARE` of them all, each on its cheapest task (``gat`` for
    ``gat``, ``gat_ln`` and ``gat_at``) when its training of :data:`ARCHITECTURE_EPOCHS`
    epochs, ``slower`` times (what the first check found), is extrapolated to take at most
    ``limit`` seconds: architecture -> (model, measured, extrapolated, scale),
    the scale for the trainings of that architecture. How much faster than linearly an
    epoch grows beyond the samples differs between architectures (figures:
    docs/performance.md, section "How accurate the plan is"), so one architecture's growth
    does not tell another's."""
    cost: dict[str, float] = {}
    tasks: dict[str, list[ModelTask]] = {}
    for t in trainings:
        measured = points.get(("train", t.file_stem))
        if measured is None:
            continue
        arch = architecture(t.name)
        cost[arch] = cost.get(arch, 0.0) + extrapolate(measured).seconds(int(t.train.get("epochs", 200)))
        tasks.setdefault(arch, []).append(t)
    total = sum(cost.values())
    checks = {}
    for arch in sorted(cost, key=cost.__getitem__, reverse=True):
        if cost[arch] < ARCHITECTURE_SHARE * total:
            break
        if arch == first:
            continue
        price, task = min(((extrapolate(points["train", t.file_stem]).seconds(ARCHITECTURE_EPOCHS), t)
                           for t in tasks[arch]), key=lambda pair: pair[0])
        if max(1.0, slower) * price <= limit:
            checks[arch] = _epoch_check(task, whole, points["train", task.file_stem], ARCHITECTURE_EPOCHS)
    return checks


def attack_check(figures: list[Any], whole: Any, points: Mapping[tuple[str, str], list[tuple[float, Rate]]],
                 slower: float = 1.0, limit: float = CHECK_S
                 ) -> tuple[tuple[str, float, float, float] | None, dict[str, Rate]]:
    """Of the attacks whose measurement (its clean pass and at most :data:`ATTACK_RUNS` runs
    of about a step) is extrapolated to take at most ``limit`` seconds, ``slower`` times
    (what the epoch's check found, when above 1: the whole graph runs slower than its
    extrapolation), the one whose extrapolated cost (its clean pass and its cell's steps)
    is the largest, measured on the whole graph: an injection's step grows more slowly than
    the graph (it reaches a smaller share of a larger graph), which the samples cannot
    show. Returns (what it is, its cost measured, extrapolated, the :func:`check_scale` it
    gives the other attacks) and ``{its figure's name: the figure measured}``, or ``None``
    and ``{}``."""
    def cost(cell: AttackCell) -> Callable[[Rate], float]:
        return lambda r: r.clean + r.seconds(cell.steps)

    extrapolated = [(f, extrapolate(points[f.kind, f.name])) for f in figures
                    if f.kind == "attack" and (f.kind, f.name) in points]
    cheap = [(cost(f.cell)(r), f) for f, r in extrapolated
             if f.cell.gradient_steps  # RND's steps cost nothing: checking its noise would scale all by it
             and max(1.0, slower) * (r.clean + ATTACK_RUNS * r.seconds(1)) <= limit]
    if not cheap:
        return None, {}
    predicted, f = max(cheap, key=lambda pair: pair[0])
    step = whole.on_step
    whole.on_step = lambda what: step(f"checking the extrapolation: {what} on the whole graph")
    try:
        full = f.measure(whole)
    finally:
        whole.on_step = step
    measured, a = cost(f.cell)(full), f.cell
    what = f"{a.attack} on {a.surrogate}, {a.difficulty}, {a.steps} steps"
    return (what, measured, predicted, check_scale(points[f.kind, f.name], measured, cost(a))), {f.name: full}


@dataclass(frozen=True)
class Checks:
    """What :func:`whole_graph_checks` found: the first surrogate's epoch check, the other
    architectures' (by architecture), the attacks' check and its figure measured on the whole
    graph (``{name: rate}``), and, when the epoch check was beyond its limit, the measuring
    budget that would buy it (0 otherwise)."""

    epoch: tuple[str, float, float, float] | None = None
    architectures: dict[str, tuple[str, float, float, float]] = field(default_factory=dict)
    attack: tuple[str, float, float, float] | None = None
    measured: dict[str, Rate] = field(default_factory=dict)
    budget: float = 0.0


def whole_graph_checks(cells: Cells, trainings: list[ModelTask], figures: list[Any], whole: Any,
                       points: Mapping[tuple[str, str], list[tuple[float, Rate]]], budget: float | None,
                       architectures: bool = True) -> Checks:
    """The full-size checks of a calibration on samples, each within :func:`check_limit` of
    the measuring ``budget``: the first surrogate's epoch (:func:`full_size_check`), the
    other architectures' when ``architectures`` (:func:`architecture_checks`), the attacks'
    (:func:`attack_check`)."""
    price = check_price(cells, points)
    checked = price is not None and price <= check_limit(budget)
    epoch = full_size_check(cells, whole, points) if checked else None
    slower = epoch[1] / epoch[2] if epoch and epoch[2] > 0 else 1.0  # the epoch: measured / extrapolated
    by_architecture = architecture_checks(trainings, whole, points, architecture(cells.surrogates[0].name), slower,
                                          check_limit(budget, ARCHITECTURE_CHECK_S)) if architectures else {}
    attack, measured = attack_check(figures, whole, points, slower, check_limit(budget))
    return Checks(epoch, by_architecture, attack, measured, price / CHECK_SHARE if price and not checked else 0.0)


__all__ = ["ARCHITECTURE_CHECK_S", "ARCHITECTURE_EPOCHS", "ARCHITECTURE_SHARE", "ATTACK_RUNS", "CHECK_S", "CHECK_SHARE",
           "architecture", "architecture_checks", "attack_check", "check_limit", "check_price", "Checks",
           "full_size_check", "whole_graph_checks"]
