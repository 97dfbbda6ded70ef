"""``grb-dist sweep``: run the benchmark on Ray, with its progress and leaderboards on the console.

The sweep (:mod:`grb_dist.sweep`), torch and Ray are imported when the command runs.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Optional

import typer
from rich.text import Text

import grb_dist.cli.base as base
from grb_dist.cli.base import (
    AllowImport, DataDir, VerifyOption, app, check_threads, handle_errors, interruptible, note, out_value, path_value,
    warn,
)
from grb_dist.core.text import plural


@app.command()
@handle_errors
def sweep(
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help="Catalogue name (uses its shipped job, grb_dist/jobs/<name>.yaml; one without a job runs its kind's, Pro-GNN's graphs prognn-cora.yaml, said in a note) or a dataset path (uses the default job); default: csbm."),
    job: Optional[Path] = typer.Option(None, "--job", parser=path_value, help="Job file (YAML) instead of the dataset's shipped job."),
    allow_import: bool = AllowImport,
    scenario: Optional[str] = typer.Option(None, "--scenario", help="injection (graph injection), modification (edge flips and feature changes at test time), poisoning (edge flips before the defenses train) or all (every scenario of the job: poisoning too when it lists poisoning attacks, as the default job does); default: the job's (injection)."),
    attacks: Optional[str] = typer.Option(None, help="Attacks to run, comma-separated (default: the job's); with several scenarios each keeps the names it knows."),
    defenses: Optional[str] = typer.Option(None, help="Defenses to score, comma-separated."),
    surrogates: Optional[str] = typer.Option(None, help="Surrogate models of the attacker, comma-separated."),
    difficulties: Optional[str] = typer.Option(None, help="Difficulties, comma-separated (easy, medium, hard, full)."),
    repeats: Optional[int] = typer.Option(None, help="Repeats of every attack."),
    seed: Optional[int] = typer.Option(None, help="Job seed (graph, split, models, attacks)."),
    n_inject: Optional[str] = typer.Option(None, "--n-inject", help="Injected nodes (overrides every budget); a comma-separated list (20,40,60) sweeps each value as attack <name>@<value>."),
    edges_per_node: Optional[int] = typer.Option(None, "--edges-per-node", help="Edges per injected node."),
    steps: Optional[int] = typer.Option(None, help="Attack optimisation steps."),
    ratio_edge_mod: Optional[str] = typer.Option(None, "--ratio-edge-mod", help="Modification budget: flipped edges as a share of the graph's edges, in (0, 1]; a comma-separated list (0.01,0.05) sweeps each value as attack <name>@<value>."),
    adaptive: Optional[bool] = typer.Option(None, "--adaptive/--no-adaptive", help="Also attack every defense with itself as the surrogate (white-box): the scenario's gradient attacks, scored on that defense, next to the transfer cells (default: the job's, off)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", parser=out_value, help="Run directory (default: results/<dataset>), or a run in object storage: s3://bucket/prefix, gs://bucket/prefix (docs/cluster.md)."),
    address: Optional[str] = typer.Option(None, "--address", envvar="RAY_ADDRESS", help="Ray cluster to join (auto, host:port); default: start a local Ray."),
    num_cpus: Optional[int] = typer.Option(None, "--num-cpus", help="CPUs of the local Ray (default: all)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="torch intra-op threads of each training, attack and scoring task (1..1024; default: Ray's, one per reserved CPU)."),
    dashboard: Optional[bool] = typer.Option(None, "--dashboard/--no-dashboard", help="Start the Ray dashboard of a local Ray (default: Ray's choice)."),
    keep_ray: bool = typer.Option(False, "--keep-ray", help="Leave the local Ray and its dashboard running after the sweep, to look at its timeline and logs (stop it with `ray stop`)."),
    wait: bool = typer.Option(False, "--wait/--no-wait", help="When another sweep holds the run directory, wait for it instead of failing."),
    flush_rows: int = typer.Option(4096, "--flush-rows", help="Write buffered score rows every N rows ..."),
    flush_seconds: float = typer.Option(10.0, "--flush-seconds", help="... or every T seconds, whichever comes first."),
    data_dir: Optional[Path] = DataDir,
    download: bool = typer.Option(True, help="Download missing official datasets."),
    verify: bool = VerifyOption,
    plan_only: bool = typer.Option(False, "--plan", help="Predict the sweep's cost and stop: cells per stage, wall time per stage and in total, peak memory per task, from a short calibration on this machine (cached in ~/.cache/grb-dist/calibration). Computes and writes nothing of the run."),
    cpus: Optional[float] = typer.Option(None, "--cpus", help="With --plan: the CPUs of the cluster to plan for (default: the cluster of --address, else this machine's or --num-cpus)."),
    gpus: Optional[float] = typer.Option(None, "--gpus", help="With --plan: the GPUs of that cluster (default: 0 with --cpus, else the cluster's)."),
    gpu_kind: Optional[str] = typer.Option(None, "--gpu-kind", help="With --plan and --gpus: the cluster's GPU (h100, a100 ...), calibrated once on a node with it; default: this machine's GPU."),
    plan_budget: Optional[float] = typer.Option(None, "--plan-budget", help="With --plan: stop measuring after SECONDS (default: what keeps the whole --plan within 3 minutes); the figures left are estimated from the measured ones of their kind, and the prediction comes with bounds."),
    calibration: str = typer.Option("auto", "--calibration", help="With --plan: where to measure: auto (samples of a graph above 60,000 nodes, else the graph itself), sampled or full."),
    as_json: bool = typer.Option(False, "--json", help="With --plan: print the plan as one JSON document on stdout instead of the tables: the cluster, the totals, each stage, and every task to compute with its predicted seconds, peak memory in bytes and whether it fits this machine (progress goes to stderr)."),
) -> None:
    """Run the benchmark: every attack of the scenario(s) against every defense, per difficulty, on Ray.

    Results go to Parquet tables under the run directory. A re-run skips finished cells
    (resume); a job with more attacks, defenses, surrogates, difficulties or repeats grows the
    run (only the new cells are computed). One sweep at a time per run directory.
    """
    from grb_dist.store.remote import is_remote, staged
    from grb_dist.sweep.session import prepare, resolve_job

    entered = time.perf_counter()
    _check_run_options(address, keep_ray, threads, flush_rows, flush_seconds)
    _check_plan_options(plan_only, cpus, gpus, gpu_kind, plan_budget, calibration, as_json)
    overrides = dict(attacks=attacks, defenses=defenses, surrogates=surrogates, difficulties=difficulties,
                     repeats=repeats, seed=seed, n_inject=n_inject, edges_per_node=edges_per_node, steps=steps,
                     scenario=scenario, ratio_edge_mod=ratio_edge_mod, adaptive=adaptive)
    with interruptible(_plan_interrupted() if plan_only else INTERRUPTED):  # Ctrl-C and SIGTERM: a clean stop
        spec = resolve_job(dataset, job, overrides, allow_import=allow_import, on_note=note)
        loading = time.perf_counter()
        # a run in object storage: its staging copy, pulled (and for a sweep, under its lease,
        # uploaded while the sweep writes and when it ends)
        with staged(out, write=not plan_only, on_warning=warn) as run_dir:
            prepared = prepare(spec, out=run_dir, data_dir=data_dir, download=download, verify=verify,
                               location=out if is_remote(out) else None)  # writes nothing
            if plan_only:
                # the sweep's own start: this process so far (its start, imports, the graph)
                started = _process_age(time.perf_counter() - loading)
                _plan(prepared, _plan_cluster(address, num_cpus, cpus, gpus, threads), gpu_kind, started, dashboard,
                      described=cpus is not None, budget=plan_budget or _default_budget(entered),
                      calibration=calibration, as_json=as_json)
                return

            def settings():
                from grb_dist.cluster.settings import RaySettings

                return RaySettings(address=address, num_cpus=num_cpus, include_dashboard=dashboard, threads=threads,
                                   keep=keep_ray)

            _run(prepared, settings, local=address is None, wait=wait, flush_rows=flush_rows,
                 flush_seconds=flush_seconds)


#: What an interrupted sweep (Ctrl-C, SIGTERM) says.
INTERRUPTED = "interrupted: finished cells are kept; run the same command again to resume"


#: The whole ``--plan`` command answers within this many seconds by default (its start and
#: the graph's loading, the calibration and the forecast), however fast the machine.
PLAN_SECONDS = 180.0
#: Seconds of a default plan kept for what follows the measuring budget: the full-size
#: checks of a sampled calibration (an epoch of a training and an attack on the whole
#: graph), the cleanup and the forecast.
PLAN_RESERVE = 60.0


#: At most this much of the process's life before the command counts as its start (seconds):
#: a process that ran other commands first (a test runner, a notebook) counts the command's.
START_CAP = 15.0


def _default_budget(entered: float) -> float:
    """The measuring budget that keeps the whole ``--plan`` within :data:`PLAN_SECONDS`:
    what is left after the process's start (at most :data:`START_CAP`) and the command's
    work since it was ``entered`` (a ``time.perf_counter()``; the graph's loading), less
    :data:`PLAN_RESERVE`; at least 10 s (the first figure of each kind is measured anyway)."""
    command = time.perf_counter() - entered
    before = min(START_CAP, max(0.0, _process_age(command) - command))
    return max(10.0, PLAN_SECONDS - before - command - PLAN_RESERVE)


def _plan_interrupted() -> str:
    """What an interrupted ``--plan`` says: it computes no cells, and what it measured is kept."""
    from grb_dist.sweep.cost.calibrate import cache_dir

    return (f"interrupted: --plan wrote no run and computed no cells; the calibration figures it measured are kept "
            f"in {cache_dir()} and the next --plan reuses them")


def _run(prepared, settings, *, local: bool, wait: bool, flush_rows: int, flush_seconds: float) -> None:
    """The session's steps (:func:`~grb_dist.sweep.session.run`) with the CLI's output around
    them: a finished run's boards at once; else, under the run's lock, the notes, the line
    that says what the sweep computes and where Ray is, the progress display, and the boards."""
    from grb_dist.sweep.progress import PlainProgress, RichProgress
    from grb_dist.sweep.session import missing_cells, run, stage_totals

    spec = prepared.spec
    held: dict = {}  # the run under the lock, its settings, display and start; the Ray context

    def on_locked(locked):
        p = locked.cells
        held["prepared"] = locked
        for (scenario, defense), reason in p.transfer_only.items():
            base.console.print(f"note: {defense} is scored by transfer only in {scenario}: {reason}",
                               highlight=False, markup=False, soft_wrap=True)
        # three live rows on a terminal; timestamped lines otherwise (CI, nohup, tee); none when
        # another sweep finished the run meanwhile (no Ray, no writes)
        if not missing_cells(locked):
            display = None
        elif base.console.is_terminal:
            display = RichProgress(base.console, stage_totals(locked))
        else:
            display = PlainProgress(lambda line: base.console.print(line, highlight=False, markup=False,
                                                                    soft_wrap=True))
        held["display"], held["start"] = display, time.perf_counter()
        return display

    def ray_settings():
        held["settings"] = settings()
        return held["settings"]

    def on_connect(ctx, store) -> None:
        held["ctx"] = ctx
        _announce(held["prepared"], held["settings"], ctx)

    try:
        outcome = run(prepared, ray_settings, local=local, on_locked=on_locked, wait=wait,
                      on_wait=lambda who: base.err_console.print(
                          f"waiting for {who} to finish with {prepared.where}", highlight=False, markup=False),
                      on_warning=warn, on_connect=on_connect, flush_rows=flush_rows, flush_seconds=flush_seconds,
                      job_name=f"grb-dist sweep {spec.dataset} -> {prepared.where}")
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (interruptible): the rows are written, Ray is stopped
        if held.get("display") is not None:
            held["display"].stop()
        raise
    if "start" not in held:  # every cell stored: no lock, no Ray, no write
        _show(prepared, outcome, 0.0)
    else:
        _show(held["prepared"], outcome, time.perf_counter() - held["start"], held.get("ctx"))


def _announce(prepared, settings, ctx) -> None:
    """What the sweep computes, once Ray is up and the run directory open, and where Ray's
    dashboard is."""
    spec, p = prepared.spec, prepared.cells
    from grb_dist.sweep.session import missing_cells

    missing = missing_cells(prepared)
    adaptive = sum(c.threat != "transfer" for c in p.scores)
    base.console.print(
        Text.assemble(("sweep", "bold"), " ")
        + f"{spec.dataset} ({plural(prepared.graph.num_nodes, 'node')}, {' + '.join(spec.scenarios)}): "
        f"{plural(sum(len(spec.scenario_attacks(s)) for s in spec.scenarios), 'attack')} x "
        f"{plural(len(spec.surrogates), 'surrogate')} x {plural(len(p.targets), 'defense')} x "
        f"{plural(len(spec.difficulties), 'difficulty')} x {plural(spec.repeats, 'repeat')}"
        + (f" + {adaptive:,} adaptive" if adaptive else "") + " = "
        f"{plural(len(p.scores), 'cell')}, {len(missing):,} to compute -> {prepared.where}"
        + (" (resuming or growing the run)" if prepared.resume else ""),
        highlight=False, soft_wrap=True,
    )
    from grb_dist.cluster.ray_edge import DASHBOARD_HINT, dashboard_available

    dashboard = ctx.dashboard_url or ("not running" if dashboard_available() else f"not running ({DASHBOARD_HINT})")
    if ctx.dashboard_url and ctx.dashboard_token:
        dashboard += (f" (asks for Ray's token once per browser: paste the output of `ray get-auth-token`, "
                      f"or the contents of {ctx.dashboard_token})")
    base.console.print(f"Ray: {ctx.cpus:g} CPUs, {ctx.gpus:g} GPUs; dashboard: {dashboard}", highlight=False,
                       soft_wrap=True)
    from grb_dist.sweep.session import plan_figures

    measured = "as the last --plan of this job measured it" if plan_figures(prepared) else \
        "estimated from the sizes of the graph, models and attacks (sweep --plan measures it)"
    where = "in device workers on the GPUs" if ctx.gpus else "as Ray tasks"
    base.console.print(f"memory: each task reserves its peak, {measured}; training and attacks run {where}",
                       highlight=False, soft_wrap=True)


def _show(prepared, outcome, elapsed: float, ctx=None) -> None:
    """The end of a sweep: the leaderboards of the full difficulty (else the last), and
    what was done (or that there was nothing to do), and where a kept Ray is (``ctx``, the
    Ray context); exit code 1 when cells failed."""
    spec, p = prepared.spec, prepared.cells
    show = [d for d in ("full",) if d in spec.difficulties] or list(spec.difficulties[-1:])
    boards = {k: v for k, v in outcome.boards.items() if k.split("-", 1)[1] in show}
    base.print_boards(boards)
    others = [d for d in spec.difficulties if d not in show]
    if boards and others:
        base.console.print(f"boards of {', '.join(others)}: grb-dist leaderboard {prepared.where}", soft_wrap=True)
    summary = outcome.summary
    if summary is None:
        one = len(p.scores) == 1
        base.console.print(f"nothing to do: {'the' if one else 'all'} {plural(len(p.scores), 'cell')} of this job "
                           f"{'is' if one else 'are'} already in {prepared.where}",
                      highlight=False)
        return
    base.console.print(
        f"{summary.done}/{plural(summary.total, 'cell')} ({summary.computed} computed, {summary.skipped} already done, "
        f"{summary.failures} failed) in {elapsed:.1f}s; results in {prepared.where}", highlight=False,
    )
    for e in summary.errors[:10]:
        base.err_console.print(f"failed: {e}", highlight=False, soft_wrap=True, markup=False)
    if ctx is not None and ctx.kept:
        base.console.print(f"Ray stays up (--keep-ray) at {ctx.kept}: dashboard {ctx.dashboard_url or 'not running'} "
                           f"(Jobs, Actors, Metrics and the timeline of this sweep); the next sweep can join it with "
                           f"--address {ctx.kept}; stop it with `ray stop`", highlight=False, soft_wrap=True)
    if summary.failures:
        raise typer.Exit(1)


def _check_run_options(address: Optional[str], keep_ray: bool, threads: Optional[int], flush_rows: int,
                       flush_seconds: float) -> None:
    """The sweep's own options, before anything is loaded."""
    from grb_dist.core.resources import check_ray_address
    from grb_dist.core.errors import ConfigError

    check_ray_address(address)
    _check_flush(flush_rows, flush_seconds)
    check_threads(threads)
    if keep_ray and address:
        raise ConfigError("--keep-ray keeps a local Ray; a joined cluster (--address) stays up anyway: leave one out")


def _check_plan_options(plan_only: bool, cpus: Optional[float], gpus: Optional[float],
                        gpu_kind: Optional[str], budget: Optional[float] = None, calibration: str = "auto",
                        as_json: bool = False) -> None:
    from grb_dist.core.errors import ConfigError
    from grb_dist.sweep.cost.calibrate import SAMPLING

    if as_json and not plan_only:
        raise ConfigError("--json prints a plan: add --plan (or leave it out)")
    given = [flag for flag, v in (("--cpus", cpus), ("--gpus", gpus), ("--gpu-kind", gpu_kind),
                                  ("--plan-budget", budget), ("--calibration", None if calibration == "auto" else 1))
             if v is not None]
    if given and not plan_only:
        raise ConfigError(f"{given[0]} describes the cluster of a plan: add --plan (or leave it out)")
    if cpus is not None and not 1 <= cpus <= 1_000_000:
        raise ConfigError(f"--cpus must be in 1..1,000,000, got {cpus:g}")
    if gpus is not None and not 0 <= gpus <= 100_000:
        raise ConfigError(f"--gpus must be in 0..100,000, got {gpus:g}")
    if gpu_kind is not None and not (gpu_kind.replace("-", "").isalnum() and len(gpu_kind) <= 40):
        raise ConfigError(f"--gpu-kind must be a GPU's name such as h100 or a100, got {gpu_kind!r}")
    if gpu_kind is not None and not gpus:
        raise ConfigError("--gpu-kind names the GPUs of --gpus: give --gpus N (N > 0)")
    if budget is not None and not 0 < budget <= 1e7:
        raise ConfigError(f"--plan-budget must be a number of seconds in (0, 10,000,000], got {budget:g}")
    if calibration not in SAMPLING:
        raise ConfigError(f"--calibration must be one of {', '.join(SAMPLING)}, got {calibration!r}")


def _plan_cluster(address: Optional[str], num_cpus: Optional[int], cpus: Optional[float], gpus: Optional[float],
                  threads: Optional[int]):
    """The cluster of ``--plan``: the one described by ``--cpus``/``--gpus``, else the joined
    cluster's size and largest node's memory (``--address``), else the local Ray's (this
    machine, ``--num-cpus``)."""
    import os

    from grb_dist.sweep.cost.forecast import Cluster

    memory = 0
    if cpus is None and address:
        from grb_dist.cluster.ray_edge import cluster_size, connect, disconnect, nodes
        from grb_dist.cluster.settings import RaySettings

        ctx = connect(RaySettings(address=address, include_dashboard=False))
        try:
            (cpus, found), memory = cluster_size(), int(max((n["memory"] for n in nodes()), default=0))
        finally:
            disconnect(ctx)
        gpus = found if gpus is None else gpus
    elif cpus is None:
        import torch

        cpus = float(num_cpus or os.cpu_count() or 1)
        gpus = float(torch.cuda.device_count()) if gpus is None else gpus
    return Cluster(cpus=cpus, gpus=gpus or 0.0, local=not address, threads=threads or 1, memory=memory)


def _process_age(fallback: float) -> float:
    """Seconds since this process started (Linux), else ``fallback``."""
    import os

    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(fallback, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return fallback


def _plan(prepared, cluster, gpu_kind: Optional[str], load_seconds: float, dashboard: Optional[bool], *,
          described: bool, budget: Optional[float] = None, calibration: str = "auto", as_json: bool = False) -> None:
    """``--plan``: calibrate, forecast and print the plan (stdout: Markdown, or with
    ``as_json`` one JSON document; stderr: progress)."""
    import sys

    from grb_dist.sweep.cost.predict import predict_cost

    step, stop = _calibration_progress(prepared, gpu_kind, budget, calibration)
    try:
        # --json: stdout holds the document alone; whatever prints while measuring goes to stderr
        with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
            work, cal, fc = predict_cost(prepared, cluster, load_seconds=load_seconds, gpu_kind=gpu_kind,
                                         dashboard=dashboard, on_step=step, sample=calibration, budget=budget)
    finally:
        stop()
    _keep_figures(prepared, work, cal, fc)
    where = gpu_kind or (described and "described by --cpus/--gpus") or (
        "this machine" if cluster.local else "the cluster at --address")
    if as_json:
        _print_json(prepared, work, cal, fc, where)
    else:
        _print_plan(prepared, work, cal, fc, where)


def _keep_figures(prepared, work, cal, fc) -> None:
    """The peak memory of every task of the plan, kept for the job's sweep: each of its tasks
    reserves its figure of Ray (:mod:`grb_dist.sweep.sizing`; the task's own bytes, the
    graph's copy included)."""
    from grb_dist.sweep.cost.forecast import task_figures
    from grb_dist.sweep.cost.machine import save_plan_figures

    figures = {t["key"]: int(t["task_bytes"] + fc.graph_bytes) for t in task_figures(work, cal, fc)}
    save_plan_figures(prepared.spec.config_hash, prepared.fingerprint, str(cal.machine.get("device", "")), figures)


def _calibration_progress(prepared, gpu_kind: Optional[str], budget: Optional[float], calibration: str):
    """The calibration's progress on stderr: a spinner on a terminal; on a pipe a line now,
    then one whenever a measurement starts 5 s after the last line. Returns the function
    each measurement calls and the one that ends the display."""
    from grb_dist.sweep.cost.calibrate import sample_sizes

    sizes = sample_sizes(prepared.graph.num_nodes, calibration)
    if base.err_console.is_terminal:
        status = base.err_console.status("calibrating")
        status.start()
        return (lambda what: status.update(f"calibrating: {what}")), status.stop
    measured_on = (f"samples of {' and '.join(f'{k:,}' for k in sizes)} of its {prepared.graph.num_nodes:,} nodes, "
                   "extrapolated" if sizes else "the whole graph")
    base.err_console.print(f"calibrating for a {gpu_kind} GPU (from its cached figures, or on this machine's if it is "
                           "one) ..." if gpu_kind else
                           f"calibrating on this machine: a few epochs and steps of each kind of task on {measured_on}"
                           + (f", for at most {_duration(budget)}" if budget else "") + " ...",
                           highlight=False, markup=False, soft_wrap=True)
    last = [time.perf_counter()]

    def step(what: str) -> None:
        if time.perf_counter() - last[0] >= 5.0:
            last[0] = time.perf_counter()
            base.err_console.print(f"calibrating: {what}", highlight=False, markup=False, soft_wrap=True)

    return step, lambda: None


def _print_json(prepared, work, cal, fc, where: str) -> None:
    """``--plan --json``: the plan as one JSON document on stdout
    (:func:`~grb_dist.sweep.cost.forecast.plan_summary`, with the job's identity)."""
    import json

    from grb_dist.sweep.cost.forecast import plan_summary

    spec = prepared.spec
    summary = plan_summary(work, cal, fc)
    summary["cluster"]["where"] = where
    doc = {"dataset": spec.dataset, "nodes": prepared.graph.num_nodes, "scenarios": list(spec.scenarios),
           "run_dir": prepared.where, "cells": len(prepared.cells.scores), "to_compute": len(work.todo),
           **summary}
    base.console.out(json.dumps(doc, indent=2), highlight=False)


def _print_plan(prepared, work, cal, fc, where: str) -> None:
    """The plan's Markdown on stdout: the job, the calibration, a table of the stages, the
    predicted wall time, a warning for a task that does not fit the machine."""
    spec = prepared.spec
    print_ = lambda text: base.console.print(text, highlight=False, markup=False, soft_wrap=True)  # noqa: E731
    print_(f"plan: {spec.dataset} ({plural(prepared.graph.num_nodes, 'node')}, {' + '.join(spec.scenarios)}): "
           f"{plural(len(prepared.cells.scores), 'cell')}, {len(work.todo):,} to compute -> {prepared.where} "
           "(nothing computed or written)")
    for line in _calibration_lines(cal, fc.cluster, where):
        print_(line)
    if not work.todo:
        print_("nothing to compute: every cell of this job is stored")
        return
    print_("")
    for line in _stage_table(fc):
        print_(line)
    warning = _memory_warning(work, cal, fc)
    if warning:
        print_(warning)
    print_("")
    print_(f"predicted wall time: {_duration(fc.total)}" + (
        f" (at most {_duration(fc.upper)} if no training stops early)" if fc.upper > fc.total * 1.005 else "")
        + (f"; between {_duration(fc.bounds[0])} and {_duration(fc.bounds[1])} with the estimated figures"
           if fc.bounds else ""))
    if fc.stages["train"].upper > fc.stages["train"].task_seconds * 1.005:
        for note in fc.notes:
            print_(f"note: {note}")


def _stage_table(fc) -> list[str]:
    """The plan's table: per stage what it computes, its task time, when it runs, the peak
    memory of one of its tasks; then the total."""
    s = fc.stages
    more = s["train"].upper > s["train"].task_seconds * 1.005
    rows = [("train", f"{plural(s['train'].count, 'model')}", _duration(s["train"].task_seconds)
             + (f" (at most {_duration(s['train'].upper)})" if more else "")),
            ("attack", f"{plural(s['attack'].count, 'perturbation')}", _duration(s["attack"].task_seconds)),
            ("score", f"{plural(s['score'].count, 'cell')}", _duration(s["score"].task_seconds))]
    lines = ["| stage | to compute | task time | runs, in the schedule | peak memory per task |", "|---|---|---|---|---|"]
    for name, count, task_time in rows:
        st = s[name]
        span = f"{_clock(st.start)} - {_clock(st.end)}" if st.count else "-"
        lines.append(f"| {name} | {count} | {task_time} | {span} | {_gib(fc.peak_task(name))} |")
    lines.append(f"| total | | | setup {_duration(fc.setup)} + schedule {_duration(fc.schedule)} + end "
                 f"{_duration(fc.total - fc.setup - fc.schedule)} | |")
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
    measured = (f"{plural(cal.measured, 'figure')} measured in {_duration(cal.seconds)}"
                + (f", {cal.reused:,} from the cache" if cal.reused else "")) if cal.measured \
        else "every figure from the cache"
    lines = [f"cluster: {cluster.cpus:g} CPUs, {cluster.gpus:g} GPUs, {plural(cluster.threads, 'thread')} per task "
             f"({where}); calibration on {cal.machine['device']} ({cal.machine['processor']}): {measured}"
             + (f", on samples of {' and '.join(f'{k:,}' for k in cal.samples)} nodes" if cal.samples else "")]
    if cal.check is not None:
        model, took, predicted, scale = cal.check
        others = "every figure's" if cal.attack_check is None and not cal.architecture_checks else "the other figures'"
        lines.append(f"extrapolation checked on the whole graph: an epoch of {model} took {_duration(took)} against "
                     f"{_duration(predicted)} extrapolated; {others} growth beyond the samples is taken {scale:.2f}x")
    from grb_dist.sweep.cost.calibrate import architecture

    for model, took, predicted, scale in cal.architecture_checks:
        lines.append(f"  and for {architecture(model)} and its variants: an epoch of {model} took {_duration(took)} "
                     f"against {_duration(predicted)} extrapolated; their trainings' growth is taken {scale:.2f}x")
    if cal.attack_check is not None:
        what, took, predicted, scale = cal.attack_check
        lines.append(f"attacks checked on the whole graph: {what} would take {_duration(took)} against "
                     f"{_duration(predicted)} extrapolated; the attacks' growth beyond the samples is taken "
                     f"{scale:.2f}x")
    if cal.estimated:
        lines.append(f"the measuring budget ran out: {plural(cal.estimated, 'figure')} not measured, each taken as the "
                     "median measured figure of its kind; the bounds take them at the fastest and the slowest "
                     "(--plan-budget SECONDS measures longer)")
    return lines


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"
    return f"{int(seconds // 86400)} d {int(seconds % 86400 // 3600):02d} h"


def _clock(seconds: float) -> str:
    """A moment of the schedule as h:mm:ss from its start."""
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _gib(size: int) -> str:
    return f"{size / 2**30:.2f} GiB" if size else "-"


def _check_flush(rows: int, seconds: float) -> None:
    import math

    from grb_dist.core.errors import ConfigError

    if not 1 <= rows <= 10_000_000:
        raise ConfigError(f"--flush-rows must be in 1..10,000,000, got {rows}")
    if not (math.isfinite(seconds) and 0 <= seconds <= 86_400):
        raise ConfigError(f"--flush-seconds must be in 0..86,400, got {seconds}")
