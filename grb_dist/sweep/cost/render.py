"""The plan's rendering: what ``grb-dist plan`` shows of a forecast
(:func:`~grb_dist.sweep.cost.predict.predict_cost`), as Markdown lines (:func:`plan_lines`)
or one JSON document (:func:`plan_document`). Plain functions of the forecast: the command
prints what they return."""

from __future__ import annotations

import math
from typing import Any, Optional

from grb_dist.core.text import duration, plural


def plan_document(prepared, work, cal, fc, where: str) -> dict[str, Any]:
    """The plan as one JSON-ready document (:func:`~grb_dist.sweep.cost.forecast.plan_summary`,
    with the job's identity)."""
    from grb_dist.sweep.cost.forecast import plan_summary

    spec = prepared.spec
    summary = plan_summary(work, cal, fc)
    summary["cluster"]["where"] = where
    return {"dataset": spec.dataset, "nodes": prepared.graph.num_nodes, "scenarios": list(spec.scenarios),
            "run_dir": prepared.where, "cells": len(prepared.cells.scores), "to_compute": len(work.todo), **summary}


def plan_lines(prepared, work, cal, fc, where: str) -> list[str]:
    """The plan in Markdown: the job, the calibration, a table of the stages, the predicted
    wall time, a warning for a task that does not fit the machine."""
    spec = prepared.spec
    lines = [f"plan: {spec.dataset} ({plural(prepared.graph.num_nodes, 'node')}, {' + '.join(spec.scenarios)}): "
             f"{plural(len(prepared.cells.scores), 'cell')}, {len(work.todo):,} to compute -> {prepared.where} "
             "(nothing computed or written)", *_calibration_lines(cal, fc.cluster, where)]
    if not work.todo:
        return lines + ["nothing to compute: every cell of this job is stored"]
    lines += ["", *_stage_table(fc)]
    warning = _memory_warning(work, cal, fc)
    if warning:
        lines.append(warning)
    lines += ["", f"predicted wall time: {duration(fc.total)}" + (
        f" (at most {duration(fc.upper)} if no training stops early)" if fc.upper > fc.total * 1.005 else "")
        + (f"; between {duration(fc.bounds[0])} and {duration(fc.bounds[1])} with the estimated figures"
           if fc.bounds else "")]
    if fc.stages["train"].upper > fc.stages["train"].task_seconds * 1.005:
        lines += [f"note: {note}" for note in fc.notes]
    return lines + [f"note: {note}" for note in fc.pricing]


def _stage_table(fc) -> list[str]:
    """The plan's table: per stage what it computes, its task time, when it runs, the peak
    memory of one of its tasks; then the total."""
    s = fc.stages
    more = s["train"].upper > s["train"].task_seconds * 1.005
    rows = [("train", f"{plural(s['train'].count, 'model')}", duration(s["train"].task_seconds)
             + (f" (at most {duration(s['train'].upper)})" if more else "")),
            ("attack", f"{plural(s['attack'].count, 'perturbation')}", duration(s["attack"].task_seconds)),
            ("score", f"{plural(s['score'].count, 'cell')}", duration(s["score"].task_seconds))]
    lines = ["| stage | to compute | task time | runs, in the schedule | peak memory per task |", "|---|---|---|---|---|"]
    for name, count, task_time in rows:
        st = s[name]
        span = f"{_clock(st.start)} - {_clock(st.end)}" if st.count else "-"
        lines.append(f"| {name} | {count} | {task_time} | {span} | {_gib(fc.peak_task(name))} |")
    lines.append(f"| total | | | setup {duration(fc.setup)} + schedule {duration(fc.schedule)} + end "
                 f"{duration(fc.total - fc.setup - fc.schedule)} | |")
    return lines


def _memory_warning(work, cal, fc) -> Optional[str]:
    """A line naming the largest task whose peak memory exceeds this machine's (or the
    joined cluster's largest node's), and how many more do; ``None`` when all fit."""
    from grb_dist.core.resources import format_bytes
    from grb_dist.sweep.cost.forecast import memory_limit, task_figures

    limit, where = memory_limit(fc.cluster)
    over = [t for t in task_figures(work, cal, fc, limit) if not t["fits"]]
    if not over:
        return None
    top = max(over, key=lambda t: t["peak_bytes"])
    more = len(over) - 1
    others = f"{plural(more, 'other task')} {'does' if more == 1 else 'do'} not either; " if more else ""
    return (f"warning: {top['what']} ({format_bytes(top['peak_bytes'])}) does not fit {where} "
            f"({format_bytes(limit)}); {others}the sweep cannot run it there: plan for a machine with more "
            "memory, or lighten the job (fewer or smaller models, a smaller graph)")


def _calibration_lines(cal, cluster, where: str) -> list[str]:
    """The plan's lines on the cluster and the calibration: what was measured and where,
    the full-size checks of a sampled calibration, the figures a budget left unmeasured."""
    measured = (f"{plural(cal.measured, 'figure')} measured in {duration(cal.seconds)}"
                + (f", {cal.reused:,} from the cache" if cal.reused else "")) if cal.measured \
        else "every figure from the cache"
    lines = [f"cluster: {cluster.cpus:g} CPUs, {cluster.gpus:g} GPUs, {plural(cluster.threads, 'thread')} per task "
             f"({where}); calibration on {cal.machine['device']} ({cal.machine['processor']}): {measured}"
             + (f", on samples of {' and '.join(f'{k:,}' for k in cal.samples)} nodes" if cal.samples else "")]
    if cal.check is not None:
        model, took, predicted, scale = cal.check
        others = "every figure's" if cal.attack_check is None and not cal.architecture_checks else "the other figures'"
        lines.append(f"extrapolation checked on the whole graph: an epoch of {model} took {duration(took)} against "
                     f"{duration(predicted)} extrapolated; {others} growth beyond the samples is taken {scale:.2f}x")
    elif cal.check_budget:
        lines.append("extrapolation not checked on the whole graph (an epoch there takes longer than a check may within "
                     "the measuring budget): the figures grow as the samples say, which is optimistic on a large graph "
                     "(docs/performance.md, \"How accurate the plan is\"); a budget of "
                     f"{math.ceil(cal.check_budget):,} s buys the check (grb-dist plan --budget SECONDS)")
    from grb_dist.sweep.cost.calibrate import architecture

    for model, took, predicted, scale in cal.architecture_checks:
        lines.append(f"  and for {architecture(model)} and its variants: an epoch of {model} took {duration(took)} "
                     f"against {duration(predicted)} extrapolated; their trainings' growth is taken {scale:.2f}x")
    if cal.attack_check is not None:
        what, took, predicted, scale = cal.attack_check
        lines.append(f"attacks checked on the whole graph: {what} would take {duration(took)} against "
                     f"{duration(predicted)} extrapolated; the attacks' growth beyond the samples is taken "
                     f"{scale:.2f}x")
    if cal.estimated:
        lines.append(f"the measuring budget ran out: {plural(cal.estimated, 'figure')} not measured, each taken as the "
                     "median measured figure of its kind; the bounds take them at the fastest and the slowest "
                     "(grb-dist plan --budget SECONDS measures longer)")
    return lines


def _clock(seconds: float) -> str:
    """A moment of the schedule as h:mm:ss from its start."""
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _gib(size: int) -> str:
    return f"{size / 2**30:.2f} GiB" if size else "-"


__all__ = ["plan_document", "plan_lines"]
