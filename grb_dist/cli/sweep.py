"""``grb-dist sweep``: run the benchmark on Ray, with its progress and leaderboards on the console.

The sweep (:mod:`grb_dist.sweep`), torch and Ray are imported when the command runs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer
from rich.text import Text

import grb_dist.cli.base as base
from grb_dist.cli.base import (
    AllowImport, DataDir, VerifyOption, app, check_threads, handle_errors, interruptible, note, warn,
)
from grb_dist.cli.options import (
    DATASET_OPTION, JOB_OPTION, SCENARIO_OPTION, ATTACKS_OPTION, DEFENSES_OPTION, SURROGATES_OPTION,
    DIFFICULTIES_OPTION, REPEATS_OPTION, SEED_OPTION, N_INJECT_OPTION, EDGES_PER_NODE_OPTION, STEPS_OPTION,
    RATIO_EDGE_MOD_OPTION, ADAPTIVE_OPTION, OUT_OPTION, ADDRESS_OPTION, NUM_CPUS_OPTION, THREADS_OPTION,
    DASHBOARD_OPTION, DOWNLOAD_OPTION,
)
from grb_dist.core.text import duration, plural


#: ``sweep --plan``'s options, kept for the spelling of ``grb-dist plan`` it is an alias of
#: (hidden: ``plan --help`` documents them).
CPUS_OPTION = typer.Option(None, "--cpus", help="With --plan: the CPUs of the cluster to plan for (default: the cluster of --address, else this machine's or --num-cpus).", hidden=True)
GPUS_OPTION = typer.Option(None, "--gpus", help="With --plan: the GPUs of that cluster (default: 0 with --cpus, else the cluster's).", hidden=True)
GPU_KIND_OPTION = typer.Option(None, "--gpu-kind", help="With --plan and --gpus: the cluster's GPU (h100, a100 ...), calibrated once on a node with it; default: this machine's GPU.", hidden=True)
PLAN_BUDGET_OPTION = typer.Option(None, "--plan-budget", help="With --plan: stop measuring after SECONDS (default: what keeps the whole --plan within 3 minutes); the figures left are estimated from the measured ones of their kind, and the prediction comes with bounds.", hidden=True)
CALIBRATION_OPTION = typer.Option("auto", "--calibration", help="With --plan: where to measure: auto (samples of a graph above 60,000 nodes, else the graph itself), sampled or full.", hidden=True)
AS_JSON_OPTION = typer.Option(False, "--json", help="With --plan: print the plan as one JSON document on stdout instead of the tables: the cluster, the totals, each stage, and every task to compute with its predicted seconds, peak memory in bytes and whether it fits this machine (progress goes to stderr).", hidden=True)


@app.command()
@handle_errors
def sweep(
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
    keep_ray: bool = typer.Option(False, "--keep-ray", help="Leave the local Ray and its dashboard running after the sweep, to look at its timeline and logs (stop it with `ray stop`)."),
    wait: bool = typer.Option(False, "--wait/--no-wait", help="When another sweep holds the run directory, wait for it instead of failing."),
    flush_rows: int = typer.Option(4096, "--flush-rows", help="Write buffered score rows every N rows ..."),
    flush_seconds: float = typer.Option(10.0, "--flush-seconds", help="... or every T seconds, whichever comes first."),
    data_dir: Optional[Path] = DataDir,
    download: bool = DOWNLOAD_OPTION,
    verify: bool = VerifyOption,
    plan_only: bool = typer.Option(False, "--plan", help="Predict the sweep's cost and stop: the same as `grb-dist plan` with these options (whose --cpus, --gpus, --gpu-kind, --calibration and --json, and --plan-budget for its --budget, are accepted here too)."),
    cpus: Optional[float] = CPUS_OPTION,
    gpus: Optional[float] = GPUS_OPTION,
    gpu_kind: Optional[str] = GPU_KIND_OPTION,
    plan_budget: Optional[float] = PLAN_BUDGET_OPTION,
    calibration: str = CALIBRATION_OPTION,
    as_json: bool = AS_JSON_OPTION,
) -> None:
    """Run the benchmark: every attack of the scenario(s) against every defense, per difficulty, on Ray.

    Results go to Parquet tables under the run directory. A re-run skips finished cells
    (resume); a job with more attacks, defenses, surrogates, difficulties or repeats grows the
    run (only the new cells are computed). One sweep at a time per run directory.
    """
    from grb_dist.core.errors import ConfigError
    from grb_dist.store.remote import is_remote, staged
    from grb_dist.sweep.session import prepare, resolve_job

    entered = time.perf_counter()
    _check_run_options(address, keep_ray, threads, flush_rows, flush_seconds)
    overrides = dict(attacks=attacks, defenses=defenses, surrogates=surrogates, difficulties=difficulties,
                     repeats=repeats, seed=seed, n_inject=n_inject, edges_per_node=edges_per_node, steps=steps,
                     scenario=scenario, ratio_edge_mod=ratio_edge_mod, adaptive=adaptive)
    if plan_only:  # the alias of grb-dist plan
        from grb_dist.cli.plan import run_plan

        return run_plan(entered, dataset, job, allow_import, overrides, out, data_dir, download, verify,
                        cluster=(address, num_cpus, threads, dashboard, cpus, gpus, gpu_kind),
                        budget=plan_budget, calibration=calibration, as_json=as_json, budget_flag="--plan-budget")
    given = [flag for flag, v in (("--cpus", cpus), ("--gpus", gpus), ("--gpu-kind", gpu_kind), ("--plan-budget",
             plan_budget), ("--calibration", None if calibration == "auto" else 1), ("--json", as_json or None))
             if v is not None]
    if given:
        raise ConfigError(f"{given[0]} is an option of a plan: use grb-dist plan (or add --plan)")
    with interruptible(INTERRUPTED):  # Ctrl-C and SIGTERM: a clean stop
        spec = resolve_job(dataset, job, overrides, allow_import=allow_import, on_note=note)
        # a run in object storage: its staging copy, pulled, and under its lease uploaded while the
        # sweep writes and when it ends
        with staged(out, write=True, on_warning=warn) as run_dir:
            prepared = prepare(spec, out=run_dir, data_dir=data_dir, download=download, verify=verify,
                               location=out if is_remote(out) else None)

            def settings():
                from grb_dist.cluster.settings import Connection, RaySettings, Scaling

                return RaySettings(Connection(address=address, num_cpus=num_cpus, include_dashboard=dashboard,
                                              keep=keep_ray), Scaling(threads=threads))

            _run(prepared, settings, local=address is None, wait=wait, flush_rows=flush_rows,
                 flush_seconds=flush_seconds)


#: What an interrupted sweep (Ctrl-C, SIGTERM) says.
INTERRUPTED = "interrupted: finished cells are kept; run the same command again to resume"


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
        f"{summary.failures} failed) in {duration(elapsed)}; results in {prepared.where}", highlight=False,
    )
    for e in summary.errors[:10]:
        base.err_console.print(f"failed: {e}", highlight=False, soft_wrap=True, markup=False)
    if summary.memory:
        base.console.print(summary.memory, highlight=False, soft_wrap=True, markup=False)
    for w in summary.memory_warnings:
        warn(w)
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


def _check_flush(rows: int, seconds: float) -> None:
    import math

    from grb_dist.core.errors import ConfigError

    if not 1 <= rows <= 10_000_000:
        raise ConfigError(f"--flush-rows must be in 1..10,000,000, got {rows}")
    if not (math.isfinite(seconds) and 0 <= seconds <= 86_400):
        raise ConfigError(f"--flush-seconds must be in 0..86,400, got {seconds}")
