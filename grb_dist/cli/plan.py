"""``grb-dist plan``: what a sweep will cost before it runs (also spelled ``sweep --plan``).

A short calibration on this machine (cached), then the cost model's forecast of the job on
the cluster described (this machine, the cluster at ``--address``, or ``--cpus``/``--gpus``):
per stage its tasks, their time and peak memory, the wall time. Computes and writes nothing
of the run; keeps the tasks' peak memory for the job's sweep, which reserves it of Ray. The
cost model is :mod:`grb_dist.sweep.cost`, its rendering :mod:`grb_dist.sweep.cost.render`.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Optional

import typer

import grb_dist.cli.base as base
from grb_dist.cli.base import AllowImport, DataDir, VerifyOption, app, check_threads, handle_errors, interruptible, note
from grb_dist.cli.options import (
    ADAPTIVE_OPTION, ADDRESS_OPTION, ATTACKS_OPTION, DASHBOARD_OPTION, DATASET_OPTION, DEFENSES_OPTION,
    DIFFICULTIES_OPTION, DOWNLOAD_OPTION, EDGES_PER_NODE_OPTION, JOB_OPTION, N_INJECT_OPTION, NUM_CPUS_OPTION,
    OUT_OPTION, RATIO_EDGE_MOD_OPTION, REPEATS_OPTION, SCENARIO_OPTION, SEED_OPTION, STEPS_OPTION, SURROGATES_OPTION,
    THREADS_OPTION,
)


@app.command()
@handle_errors
def plan(
    dataset: Optional[str] = DATASET_OPTION,
    job: Optional[Path] = JOB_OPTION,
    allow_import: bool = AllowImport,
    scenario: Optional[str] = SCENARIO_OPTION,
    attacks: Optional[str] = ATTACKS_OPTION,
    defenses: Optional[str] = DEFENSES_OPTION,
    surrogates: Optional[str] = SURROGATES_OPTION,
    difficulties: Optional[str] = DIFFICULTIES_OPTION,
    repeats: Optional[int] = REPEATS_OPTION,
    seed: Optional[int] = SEED_OPTION,
    n_inject: Optional[str] = N_INJECT_OPTION,
    edges_per_node: Optional[int] = EDGES_PER_NODE_OPTION,
    steps: Optional[int] = STEPS_OPTION,
    ratio_edge_mod: Optional[str] = RATIO_EDGE_MOD_OPTION,
    adaptive: Optional[bool] = ADAPTIVE_OPTION,
    out: Optional[Path] = OUT_OPTION,
    address: Optional[str] = ADDRESS_OPTION,
    num_cpus: Optional[int] = NUM_CPUS_OPTION,
    threads: Optional[int] = THREADS_OPTION,
    dashboard: Optional[bool] = DASHBOARD_OPTION,
    data_dir: Optional[Path] = DataDir,
    download: bool = DOWNLOAD_OPTION,
    verify: bool = VerifyOption,
    cpus: Optional[float] = typer.Option(None, "--cpus", help="The CPUs of the cluster to plan for (default: the cluster of --address, else this machine's or --num-cpus)."),
    gpus: Optional[float] = typer.Option(None, "--gpus", help="The GPUs of that cluster (default: 0 with --cpus, else the cluster's)."),
    gpu_kind: Optional[str] = typer.Option(None, "--gpu-kind", help="With --gpus: the cluster's GPU (h100, a100 ...), calibrated once on a node with it; default: this machine's GPU."),
    budget: Optional[float] = typer.Option(None, "--budget", help="Stop measuring after SECONDS (default: what keeps the whole command within 3 minutes); the figures left are estimated from the measured ones of their kind, and the prediction comes with bounds."),
    calibration: str = typer.Option("auto", "--calibration", help="Where to measure: auto (samples of a graph above 60,000 nodes, else the graph itself), sampled or full."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as one JSON document on stdout instead of the tables: the cluster, the totals, each stage, and every task to compute with its predicted seconds, peak memory in bytes and whether it fits this machine (progress goes to stderr)."),
) -> None:
    """Predict a sweep's cost and stop: cells per stage, wall time per stage and in total, peak memory per task.

    From a short calibration on this machine (cached in ~/.cache/grb-dist/calibration), for
    the job the same options give `grb-dist sweep`. Computes and writes nothing of the run.
    """
    overrides = dict(attacks=attacks, defenses=defenses, surrogates=surrogates, difficulties=difficulties,
                     repeats=repeats, seed=seed, n_inject=n_inject, edges_per_node=edges_per_node, steps=steps,
                     scenario=scenario, ratio_edge_mod=ratio_edge_mod, adaptive=adaptive)
    run_plan(time.perf_counter(), dataset, job, allow_import, overrides, out, data_dir, download, verify,
             cluster=(address, num_cpus, threads, dashboard, cpus, gpus, gpu_kind), budget=budget,
             calibration=calibration, as_json=as_json)


def run_plan(entered: float, dataset: Optional[str], job: Optional[Path], allow_import: bool, overrides: dict,
             out, data_dir: Optional[Path], download: bool, verify: bool, *, cluster: tuple, budget: Optional[float],
             calibration: str, as_json: bool, budget_flag: str = "--budget") -> None:
    """``grb-dist plan`` (and ``sweep --plan``) from its options; ``entered``: the
    ``time.perf_counter()`` at which the command began; ``cluster``: (address, num_cpus,
    threads, dashboard, cpus, gpus, gpu_kind); ``budget_flag``: the budget's option as the user
    spelled it (``sweep --plan``'s is ``--plan-budget``)."""
    from grb_dist.core.resources import check_ray_address
    from grb_dist.store.remote import is_remote, staged
    from grb_dist.sweep.session import prepare, resolve_job

    address, num_cpus, threads, dashboard, cpus, gpus, gpu_kind = cluster
    check_ray_address(address)
    check_threads(threads)
    _check_plan_options(cpus, gpus, gpu_kind, budget, calibration, budget_flag)
    with interruptible(_plan_interrupted()):  # Ctrl-C and SIGTERM: a clean stop, the figures measured kept
        spec = resolve_job(dataset, job, overrides, allow_import=allow_import, on_note=note)
        loading = time.perf_counter()
        with staged(out, write=False) as run_dir:  # a run in object storage: read, never written
            prepared = prepare(spec, out=run_dir, data_dir=data_dir, download=download, verify=verify,
                               location=out if is_remote(out) else None)  # writes nothing
        # the command's own start: this process so far (its start, imports, the graph)
        started = _process_age(time.perf_counter() - loading)
        _plan(prepared, _plan_cluster(address, num_cpus, cpus, gpus, threads), gpu_kind, started, dashboard,
              described=cpus is not None, budget=budget or _default_budget(entered), calibration=calibration,
              as_json=as_json)


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

    return (f"interrupted: the plan wrote no run and computed no cells; the calibration figures it measured are kept "
            f"in {cache_dir()} and the next plan reuses them")


def _check_plan_options(cpus: Optional[float], gpus: Optional[float], gpu_kind: Optional[str],
                        budget: Optional[float], calibration: str, budget_flag: str = "--budget") -> None:
    from grb_dist.core.errors import ConfigError
    from grb_dist.sweep.cost.calibrate import SAMPLING

    if cpus is not None and not 1 <= cpus <= 1_000_000:
        raise ConfigError(f"--cpus must be in 1..1,000,000, got {cpus:g}")
    if gpus is not None and not 0 <= gpus <= 100_000:
        raise ConfigError(f"--gpus must be in 0..100,000, got {gpus:g}")
    if gpu_kind is not None and not (gpu_kind.replace("-", "").isalnum() and len(gpu_kind) <= 40):
        raise ConfigError(f"--gpu-kind must be a GPU's name such as h100 or a100, got {gpu_kind!r}")
    if gpu_kind is not None and not gpus:
        raise ConfigError("--gpu-kind names the GPUs of --gpus: give --gpus N (N > 0)")
    if budget is not None and not 0 < budget <= 1e7:
        raise ConfigError(f"{budget_flag} must be a number of seconds in (0, 10,000,000], got {budget:g}")
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
        from grb_dist.cluster.settings import Connection, RaySettings

        ctx = connect(RaySettings(Connection(address=address, include_dashboard=False)))
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
    from grb_dist.sweep.cost.predict import predict_cost
    from grb_dist.sweep.cost.render import plan_document, plan_lines

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
        base.console.out(json.dumps(plan_document(prepared, work, cal, fc, where), indent=2), highlight=False)
    else:
        for line in plan_lines(prepared, work, cal, fc, where):
            base.console.print(line, highlight=False, markup=False, soft_wrap=True)


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
    from grb_dist.core.text import duration

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
                           + (f", for at most {duration(budget)}" if budget else "") + " ...",
                           highlight=False, markup=False, soft_wrap=True)
    last = [time.perf_counter()]

    def step(what: str) -> None:
        if time.perf_counter() - last[0] >= 5.0:
            last[0] = time.perf_counter()
            base.err_console.print(f"calibrating: {what}", highlight=False, markup=False, soft_wrap=True)

    return step, lambda: None
