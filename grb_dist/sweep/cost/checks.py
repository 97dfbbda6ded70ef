"""The full-size checks of a calibration on samples: one measurement of each kind of work on
the whole graph, when it is cheap, against what the samples extrapolate (plain Python).

A training epoch of the first surrogate scales the growth of the models' figures
(:func:`full_size_check`); the costliest attack scales the attacks' (:func:`attack_check`).
Both measure through the whole graph's calibrator (``whole``, a
:class:`~grb_dist.sweep.cost.calibrate._Calibrator`) and are cached like any figure.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from grb_dist.sweep.cells import AttackCell, Cells
from grb_dist.sweep.cost.scaling import Rate, check_scale, extrapolate

#: The full-size check: one epoch of the first surrogate on the whole graph, measured when
#: its extrapolated cost is at most this (seconds).
CHECK_S = 20.0


def full_size_check(cells: Cells, whole: Any, points: Mapping[tuple[str, str], list[tuple[float, Rate]]]
                    ) -> tuple[str, float, float, float] | None:
    """One epoch of the first surrogate on the whole graph against the epoch extrapolated
    from the samples, when that is at most :data:`CHECK_S` (model, measured s, extrapolated
    s, the :func:`check_scale` it gives); cached like any figure."""
    task = cells.surrogates[0]
    measured = points.get(("train", task.file_stem))
    predicted = extrapolate(measured).seconds(1) if measured is not None else None
    if predicted is None or predicted > CHECK_S:
        return None

    def measure() -> Rate:
        whole.on_step(f"checking the extrapolation: 1 epoch of {task.name} on the whole graph")
        return Rate(whole._train(task, 1)[0], 0.0, 0)

    seconds = whole.cached(f"check:{whole.model_key(task)}", measure).fixed
    return task.name, seconds, predicted, check_scale(measured, seconds)


def attack_check(figures: list[Any], whole: Any, points: Mapping[tuple[str, str], list[tuple[float, Rate]]]
                 ) -> tuple[tuple[str, float, float, float] | None, dict[str, Rate]]:
    """The attack whose extrapolated cost (its clean pass and its cell's steps) is the
    largest, measured on the whole graph when that measurement (a cold and a warm step, two
    short runs) is extrapolated to take at most :data:`CHECK_S`: an injection's step grows
    more slowly than the graph (it reaches a smaller share of a larger graph), which the
    samples cannot show. Returns (what it is, its cost measured, extrapolated, the
    :func:`check_scale` it gives the other attacks) and ``{its figure's name: the figure
    measured}``, or ``None`` and ``{}``."""
    def cost(cell: AttackCell) -> Callable[[Rate], float]:
        return lambda r: r.clean + r.seconds(int(cell.params.get("steps", 0) or 0))

    stepped = [(cost(f.cell)(extrapolate(points[f.kind, f.name])), f) for f in figures
               if f.kind == "attack" and (f.kind, f.name) in points and extrapolate(points[f.kind, f.name]).unit > 0]
    if not stepped:
        return None, {}
    predicted, f = max(stepped, key=lambda pair: pair[0])
    rate = extrapolate(points[f.kind, f.name])
    if rate.clean + 4 * rate.seconds(1) > CHECK_S:
        return None, {}
    step = whole.on_step
    whole.on_step = lambda what: step(f"checking the extrapolation: {what} on the whole graph")
    try:
        full = f.measure(whole)
    finally:
        whole.on_step = step
    measured, a = cost(f.cell)(full), f.cell
    what = f"{a.attack} on {a.surrogate}, {a.difficulty}, {int(a.params.get('steps', 0) or 0)} steps"
    return (what, measured, predicted, check_scale(points[f.kind, f.name], measured, cost(a))), {f.name: full}


__all__ = ["CHECK_S", "attack_check", "full_size_check"]
