"""``grb-dist sweep``: run the benchmark on Ray, with its progress and leaderboards on the console.

The sweep (:mod:`grb_dist.sweep`), torch and Ray are imported when the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

import grb_dist.cli.base as base
from grb_dist.cli.base import (
    AllowImport, DataDir, VerifyOption, app, check_threads, handle_errors, interruptible, path_value, warn,
)
from grb_dist.core.text import plural


@app.command()
@handle_errors
def sweep(
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help="Catalogue name (uses its shipped job, grb_dist/jobs/<name>.yaml) or a dataset path (uses the default job); default: csbm."),
    job: Optional[Path] = typer.Option(None, "--job", parser=path_value, help="Job file (YAML) instead of the dataset's shipped job."),
    allow_import: bool = AllowImport,
    scenario: Optional[str] = typer.Option(None, "--scenario", help="injection (graph injection), modification (edge flips and feature changes) or all; default: the job's (injection)."),
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
    out: Optional[Path] = typer.Option(None, "--out", "-o", parser=path_value, help="Run directory (default: results/<dataset>)."),
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
) -> None:
    """Run the benchmark: every attack of the scenario(s) against every defense, per difficulty, on Ray.

    Results go to Parquet tables under the run directory. A re-run skips finished cells
    (resume); a job with more attacks, defenses, surrogates, difficulties or repeats grows the
    run (only the new cells are computed). One sweep at a time per run directory.
    """
    from grb_dist.core.checks import check_ray_address
    from grb_dist.sweep.preflight import check_sweep
    from grb_dist.sweep.session import finished, lock_run, prepare, resolve_job

    check_ray_address(address)
    _check_flush(flush_rows, flush_seconds)
    check_threads(threads)
    if keep_ray and address:
        from grb_dist.core.errors import ConfigError

        raise ConfigError("--keep-ray keeps a local Ray; a joined cluster (--address) stays up anyway: leave one out")
    overrides = dict(attacks=attacks, defenses=defenses, surrogates=surrogates, difficulties=difficulties,
                     repeats=repeats, seed=seed, n_inject=n_inject, edges_per_node=edges_per_node, steps=steps,
                     scenario=scenario, ratio_edge_mod=ratio_edge_mod, adaptive=adaptive)
    with interruptible(INTERRUPTED):  # Ctrl-C and SIGTERM: the same clean stop
        spec = resolve_job(dataset, job, overrides, allow_import=allow_import)
        prepared = prepare(spec, out=out, data_dir=data_dir, download=download, verify=verify)  # writes nothing
        outcome = finished(prepared, on_warning=warn)  # every cell stored: no lock, no Ray, no write
        if outcome is not None:
            _show(prepared, outcome, 0.0)
            return
        check_sweep(prepared, local=address is None)  # run directory writable, stored models, memory: before Ray

        from grb_dist.sweep.settings import RaySettings

        settings = RaySettings(address=address, num_cpus=num_cpus, include_dashboard=dashboard, threads=threads,
                               keep=keep_ray)
        lock, prepared = lock_run(prepared, wait=wait, on_wait=lambda who: base.err_console.print(
            f"waiting for {who} to finish with {prepared.run_dir}", highlight=False, markup=False))
        try:
            _sweep_locked(prepared, settings, lock, flush_rows, flush_seconds)
        finally:
            lock.release()


#: What an interrupted sweep (Ctrl-C, SIGTERM) says.
INTERRUPTED = "interrupted: finished cells are kept; run the same command again to resume"


def _sweep_locked(prepared, settings, lock, flush_rows: int, flush_seconds: float) -> None:
    """The part of ``sweep`` that runs while holding the run directory's lock: the session's
    :func:`~grb_dist.sweep.session.execute` with the CLI's output around it."""
    import time

    from grb_dist.sweep.progress import PlainProgress, RichProgress
    from grb_dist.sweep.session import execute, missing_cells, stage_totals

    spec, p = prepared.spec, prepared.plan
    missing = missing_cells(prepared)

    joined = []  # the Ray context, once connected
    adaptive = sum(c.threat != "transfer" for c in p.scores)
    for (scenario, defense), reason in p.transfer_only.items():
        base.console.print(f"note: {defense} is scored by transfer only in {scenario}: {reason}", highlight=False,
                           markup=False, soft_wrap=True)

    def on_connect(ctx, store) -> None:
        joined.append(ctx)
        if settings.resolved_address():  # a joined cluster: its memory is known only now
            _check_cluster_memory(prepared)
        base.console.print(
            f"[bold]sweep[/] {spec.dataset} ({plural(prepared.graph.num_nodes, 'node')}, {' + '.join(spec.scenarios)}): "
            f"{plural(sum(len(spec.scenario_attacks(s)) for s in spec.scenarios), 'attack')} x "
            f"{plural(len(p.surrogates), 'surrogate')} x {plural(len(p.targets), 'defense')} x "
            f"{plural(len(spec.difficulties), 'difficulty')} x {plural(spec.repeats, 'repeat')}"
            + (f" + {adaptive:,} adaptive" if adaptive else "") + " = "
            f"{plural(len(p.scores), 'cell')}, {len(missing):,} to compute -> {prepared.run_dir}"
            + (" (resuming or growing the run)" if prepared.resume else ""),
            highlight=False, soft_wrap=True,
        )
        from grb_dist.sweep.ray_edge import DASHBOARD_HINT, dashboard_available

        dashboard = ctx.dashboard_url or ("not running" if dashboard_available() else f"not running ({DASHBOARD_HINT})")
        if ctx.dashboard_url and ctx.dashboard_token:
            dashboard += (f" (asks for Ray's token once per browser: paste the output of `ray get-auth-token`, "
                          f"or the contents of {ctx.dashboard_token})")
        base.console.print(f"Ray: {ctx.cpus:g} CPUs, {ctx.gpus:g} GPUs; dashboard: {dashboard}", highlight=False,
                      soft_wrap=True)

    # three live rows on a terminal; timestamped lines otherwise (CI, nohup, tee)
    if not missing:
        display = None
    elif base.console.is_terminal:
        display = RichProgress(base.console, stage_totals(prepared))
    else:
        display = PlainProgress(lambda line: base.console.print(line, highlight=False, markup=False, soft_wrap=True))
    start = time.perf_counter()
    try:
        if display is None:  # finished by another sweep meanwhile: no Ray, no writes
            outcome = execute(prepared, settings, lock, on_warning=warn)
        else:
            with display:
                outcome = execute(prepared, settings, lock, on_connect=on_connect, on_progress=display,
                                  flush_rows=flush_rows, flush_seconds=flush_seconds, on_warning=warn,
                                  job_name=f"grb-dist sweep {spec.dataset} -> {prepared.run_dir}")
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (interruptible): the rows are written, Ray is stopped
        if display is not None:
            display.stop()
        raise
    _show(prepared, outcome, time.perf_counter() - start, joined[0] if joined else None)


def _show(prepared, outcome, elapsed: float, ctx=None) -> None:
    """The end of a sweep: the leaderboards of the full difficulty (else the last), and
    what was done (or that there was nothing to do), and where a kept Ray is (``ctx``, the
    Ray context); exit code 1 when cells failed."""
    spec, p = prepared.spec, prepared.plan
    show = [d for d in ("full",) if d in spec.difficulties] or list(spec.difficulties[-1:])
    boards = {k: v for k, v in outcome.boards.items() if k.split("-", 1)[1] in show}
    base.print_boards(boards)
    summary = outcome.summary
    if summary is None:
        one = len(p.scores) == 1
        base.console.print(f"nothing to do: {'the' if one else 'all'} {plural(len(p.scores), 'cell')} of this job "
                           f"{'is' if one else 'are'} already in {prepared.run_dir}",
                      highlight=False)
        return
    base.console.print(
        f"{summary.done}/{plural(summary.total, 'cell')} ({summary.computed} computed, {summary.skipped} already done, "
        f"{summary.failures} failed) in {elapsed:.1f}s; results in {prepared.run_dir}", highlight=False,
    )
    for e in summary.errors[:10]:
        base.err_console.print(f"failed: {e}", highlight=False, soft_wrap=True, markup=False)
    if ctx is not None and ctx.kept:
        base.console.print(f"Ray stays up (--keep-ray) at {ctx.kept}: dashboard {ctx.dashboard_url or 'not running'} "
                           f"(Jobs, Actors, Metrics and the timeline of this sweep); the next sweep can join it with "
                           f"--address {ctx.kept}; stop it with `ray stop`", highlight=False, soft_wrap=True)
    if summary.failures:
        raise typer.Exit(1)


def _check_cluster_memory(prepared) -> None:
    """The sweep's largest task must fit the largest live node of the joined cluster (its Ray
    memory plus object store); before anything is written."""
    from grb_dist.core.checks import check_memory
    from grb_dist.sweep.preflight import sweep_memory
    from grb_dist.sweep.ray_edge import largest_node_memory

    size = largest_node_memory()
    if size > 0:
        check_memory(sweep_memory(prepared.resolved, prepared.graph), size, "the largest node of the cluster")


def _check_flush(rows: int, seconds: float) -> None:
    import math

    from grb_dist.core.errors import ConfigError

    if not 1 <= rows <= 10_000_000:
        raise ConfigError(f"--flush-rows must be in 1..10,000,000, got {rows}")
    if not (math.isfinite(seconds) and 0 <= seconds <= 86_400):
        raise ConfigError(f"--flush-seconds must be in 0..86,400, got {seconds}")
