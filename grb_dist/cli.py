"""The ``grb-dist`` command line: argument parsing and dispatch only.

Errors of grb_dist (bad input) are printed as one line on stderr with exit code 2.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import shutil
from pathlib import Path
from typing import Callable, Iterator, Mapping, Optional

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from grb_dist.core.version import __version__
from grb_dist.core.errors import GrbDistError

VERBOSE_FLAGS = ("-v", "--verbose")


class _Group(TyperGroup):
    """The command group of ``grb-dist``: ``-v/--verbose`` is accepted after the sub-command
    too (``grb-dist train -v`` == ``grb-dist -v train``); it is moved in front of the
    sub-command before parsing, unless it is the value of one of its options or comes
    after ``--``."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        args = list(args)
        for i, token in enumerate(args):
            if token == "--" or not token.startswith("-") and token not in self.commands:
                break
            if token in self.commands:
                rest, moved, takes_value = args[i + 1:], [], _value_options(self.commands[token])
                j = 0
                while j < len(rest):
                    if rest[j] == "--":
                        break
                    if rest[j] in VERBOSE_FLAGS and rest[j] not in takes_value:
                        moved.append(rest.pop(j))
                        continue
                    j += 2 if rest[j] in takes_value else 1
                if moved:
                    args = args[:i] + ["--verbose", token] + rest
                break
        return super().parse_args(ctx, args)


def _value_options(command) -> set[str]:
    """The option names of ``command`` that take a value (the token after them is that value);
    a sub-command that defines ``-v`` itself keeps it."""
    names: set[str] = set()
    for param in getattr(command, "params", []):
        opts = list(getattr(param, "opts", [])) + list(getattr(param, "secondary_opts", []))
        if getattr(param, "param_type_name", "") != "option":
            continue
        if not getattr(param, "is_flag", False) and not getattr(param, "count", False):
            names.update(opts)
        elif any(o in VERBOSE_FLAGS for o in opts):
            names.update(o for o in opts if o in VERBOSE_FLAGS)
    return names


app = typer.Typer(
    cls=_Group, add_completion=False, no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]},
    help="The Graph Robustness Benchmark, distributed with Ray.",
)
# Wide enough for the tables when output is not a terminal (pipes, CI logs).
console = Console(width=shutil.get_terminal_size((120, 24)).columns)
err_console = Console(stderr=True, width=shutil.get_terminal_size((120, 24)).columns)

DataDir = typer.Option(None, "--data-dir", envvar="GRB_DIST_DATA", help="Cache directory of downloaded datasets (default: ~/.cache/grb-dist).")
VerifyOption = typer.Option(True, "--verify/--no-verify", help="Check official dataset files against the catalogue's sizes and checksums.")


def handle_errors(fn: Callable) -> Callable:
    """Turn a :class:`GrbDistError` into a one-line message and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except GrbDistError as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"grb-dist {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress of the library (also accepted after the command)."),
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """The Graph Robustness Benchmark, distributed with Ray. Every command takes -h/--help."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if verbose:  # also when logging was configured before (an embedding program, the tests)
        logging.getLogger().setLevel(logging.INFO)


@app.command()
@handle_errors
def datasets(data_dir: Optional[Path] = DataDir) -> None:
    """List the dataset catalogue and whether each dataset is available locally."""
    from grb_dist.datasets import CATALOG, is_available

    table = Table(title="grb-dist datasets")
    for col in ("name", "nodes", "edges", "features", "classes", "source", "local"):
        table.add_column(col, justify="right" if col in ("nodes", "edges", "features", "classes") else "left", no_wrap=True)
    for name in CATALOG:
        info = CATALOG.get(name)
        local = "generated" if info.source == "csbm" else ("yes" if is_available(info, data_dir) else "no")
        table.add_row(info.name, f"{info.nodes:,}", f"{info.edges:,}", str(info.features), str(info.classes), info.source, local)
    console.print(table)


@app.command()
@handle_errors
def train(
    dataset: str = typer.Option("csbm", "--dataset", "-d", help="Catalogue name, GRB directory or .npz file."),
    model: str = typer.Option("gcn", "--model", "-m", help="Registered model or defense: a base model (appnp, gat, gatguard, gcn, gcnsvd, gin, gnnguard, lp, mlp, rgcn, sage, sgc, tagcn) with optional suffixes _ln (layer norm), _at (adversarial training), _lp (label propagation on top), e.g. gcn_ln_at."),
    seed: Optional[int] = typer.Option(None, help="Seed of the model only: initialisation, dropout, adversarial training (default: the job's seed). The graph and split stay fixed when it changes (see --split-seed)."),
    split_seed: Optional[int] = typer.Option(None, "--split-seed", help="Seed of generated graphs (csbm, twins) and of the GRB split of graphs without one (default: the job's seed, as in a sweep)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="torch intra-op threads (1..1024; default: torch's choice)."),
    epochs: Optional[int] = typer.Option(None, help="Maximum training epochs (default: the job's)."),
    lr: Optional[float] = typer.Option(None, help="Adam learning rate (default: the job's, per model)."),
    hidden: Optional[str] = typer.Option(None, help="Hidden sizes, comma-separated (e.g. 64,64,64; default: the job's)."),
    job: Optional[Path] = typer.Option(None, "--job", help="Job file with the hyper-parameters (default: the dataset's shipped job, grb_dist/jobs/<dataset>.yaml, else the default job)."),
    normalize: str = typer.Option("arctan", help="Feature normalisation: arctan, tanh, standardize, none."),
    device: str = typer.Option("cpu", help="Torch device (cpu, cuda, cuda:1)."),
    data_dir: Optional[Path] = DataDir,
    download: bool = typer.Option(True, help="Download missing official datasets."),
    verify: bool = VerifyOption,
) -> None:
    """Train a model or defense inductively and print its accuracy on each difficulty.

    Hyper-parameters come from the dataset's job file (seed 001 Tables 5-10), flags override them.
    --seed changes the model only; --split-seed changes the generated graph and the split.
    """
    from grb_dist.core.config import to_dict
    from grb_dist.datasets import load_dataset
    from grb_dist.defenses import resolve_params, train_defense
    from grb_dist.core.errors import ConfigError
    from grb_dist.evaluation.evaluate import evaluate
    from grb_dist.models import MODELS
    from grb_dist.models.train import TrainConfig, report_epochs
    from grb_dist.checks import check_seed, check_train_inputs, check_train_memory
    from grb_dist.sweep.spec import default_job_path, load_job

    _check_threads(threads)
    spec = load_job(job or default_job_path(dataset))
    seed = spec.seed if seed is None else seed
    split_seed = spec.seed if split_seed is None else check_seed(split_seed, "--split-seed")
    params, overrides = resolve_params(model, spec.models)  # unknown names fail before any loading
    if hidden:
        try:
            params["hidden_sizes"] = [int(h) for h in hidden.split(",")]
        except ValueError:
            raise ConfigError(f"--hidden must be comma-separated integers, got {hidden!r}") from None
    flags = {k: v for k, v in {"epochs": epochs, "lr": lr}.items() if v is not None}
    check_train_inputs(dataset, model, params, seed)
    config = TrainConfig(**{**to_dict(spec.train), **overrides, **flags, "seed": seed})
    at = spec.adversarial_training if MODELS.get(model).adversarial else None
    graph = load_dataset(dataset, data_dir=data_dir, normalize=normalize, seed=split_seed, download=download, verify=verify)
    check_train_memory(graph, model, params, at)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    with _epoch_progress(f"{model} on {graph.name}") as on_epoch, report_epochs(on_epoch):
        result = train_defense(model, graph, params, config, at_config=at, device=device)
    acc = evaluate(result.model, graph, device=device)
    table = Table(title=f"{model} on {graph.name} (best epoch {result.best_epoch + 1} of {result.epochs_run}, {result.seconds:.1f}s)")
    for col in ("difficulty", "targets", "accuracy"):
        table.add_column(col)
    for d, a in acc.items():
        table.add_row(d, str(graph.targets(d).size), f"{a:.4f}")
    console.print(table)


#: Without a terminal, ``train`` prints its progress every this many epochs.
PROGRESS_EVERY = 10


@contextlib.contextmanager
def _epoch_progress(what: str) -> Iterator[Callable[[Mapping[str, float]], None]]:
    """An ``on_epoch`` callback that shows training progress on stderr: a status line that
    is rewritten every epoch on a terminal, else one line every :data:`PROGRESS_EVERY`
    epochs (and the first)."""

    def line(row: Mapping[str, float]) -> str:
        return (f"training {what}: epoch {int(row['epoch']) + 1}/{int(row['epochs'])}, "
                f"val acc {row['val_accuracy']:.4f} (best {row['best_val_accuracy']:.4f} at epoch {int(row['best_epoch']) + 1})")

    if err_console.is_terminal:
        with err_console.status(f"training {what} ...") as status:
            yield lambda row: status.update(line(row))
    else:
        def every(row: Mapping[str, float]) -> None:
            epoch = int(row["epoch"]) + 1
            if epoch == 1 or epoch % PROGRESS_EVERY == 0:
                err_console.print(line(row), highlight=False, soft_wrap=True)

        yield every


def _check_threads(threads: Optional[int]) -> None:
    """``--threads`` is in 1..1024 (or not given)."""
    if threads is not None and not 1 <= threads <= 1024:
        from grb_dist.core.errors import ConfigError

        raise ConfigError(f"--threads must be in 1..1024, got {threads}")


@app.command()
@handle_errors
def sweep(
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help="Catalogue name (uses its shipped job, grb_dist/jobs/<name>.yaml) or a dataset path (uses the default job); default: csbm."),
    job: Optional[Path] = typer.Option(None, "--job", help="Job file (YAML) instead of the dataset's shipped job."),
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
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Run directory (default: results/<dataset>)."),
    address: Optional[str] = typer.Option(None, "--address", envvar="RAY_ADDRESS", help="Ray cluster to join (auto, host:port); default: start a local Ray."),
    num_cpus: Optional[int] = typer.Option(None, "--num-cpus", help="CPUs of the local Ray (default: all)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="torch intra-op threads of each training, attack and scoring task (1..1024; default: Ray's, one per reserved CPU)."),
    dashboard: Optional[bool] = typer.Option(None, "--dashboard/--no-dashboard", help="Start the Ray dashboard of a local Ray (default: Ray's choice)."),
    wait: bool = typer.Option(False, "--wait", help="When another sweep holds the run directory, wait for it instead of failing."),
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
    from grb_dist.checks import check_ray_address, check_sweep
    from grb_dist.sweep.session import lock_run, prepare, resolve_job

    check_ray_address(address)
    _check_flush(flush_rows, flush_seconds)
    _check_threads(threads)
    overrides = dict(attacks=attacks, defenses=defenses, surrogates=surrogates, difficulties=difficulties,
                     repeats=repeats, seed=seed, n_inject=n_inject, edges_per_node=edges_per_node, steps=steps,
                     scenario=scenario, ratio_edge_mod=ratio_edge_mod)
    spec = resolve_job(dataset, job, overrides)
    prepared = prepare(spec, out=out, data_dir=data_dir, download=download, verify=verify)  # validates; writes nothing
    check_sweep(prepared, local=address is None)  # run directory writable, stored models, memory: before Ray

    from grb_dist.sweep.runner import RaySettings

    settings = RaySettings(address=address, num_cpus=num_cpus, include_dashboard=dashboard, threads=threads)
    lock, prepared = lock_run(prepared, wait=wait, on_wait=lambda who: err_console.print(
        f"waiting for {who} to finish with {prepared.run_dir}", highlight=False))
    try:
        _sweep_locked(prepared, settings, lock, flush_rows, flush_seconds)
    finally:
        lock.release()


def _sweep_locked(prepared, settings, lock, flush_rows: int, flush_seconds: float) -> None:
    """The part of ``sweep`` that runs while holding the run directory's lock: the session's
    :func:`~grb_dist.sweep.session.execute` with the CLI's output around it."""
    import time

    from grb_dist.leaderboard import render
    from grb_dist.sweep.progress import PlainProgress, RichProgress
    from grb_dist.sweep.session import execute, missing_cells

    spec, p = prepared.spec, prepared.plan
    show = [d for d in ("full",) if d in spec.difficulties] or list(spec.difficulties[-1:])
    missing = missing_cells(prepared)

    def on_connect(ctx, store) -> None:
        if settings.resolved_address():  # a joined cluster: its memory is known only now
            _check_cluster_memory(prepared)
        console.print(
            f"[bold]sweep[/] {spec.dataset} ({prepared.graph.num_nodes:,} nodes, {' + '.join(spec.scenarios)}): "
            f"{sum(len(spec.scenario_attacks(s)) for s in spec.scenarios)} attacks x "
            f"{len(p.surrogates)} surrogates x {len(p.targets)} defenses x {len(spec.difficulties)} difficulties x "
            f"{spec.repeats} repeats = {len(p.scores)} cells, {len(missing)} to compute -> {prepared.run_dir}"
            + (" (resuming or growing the run)" if prepared.resume else ""),
            highlight=False, soft_wrap=True,
        )
        dashboard = ctx.dashboard_url or "not running"
        if ctx.dashboard_url and ctx.dashboard_token:
            dashboard += (f" (asks for Ray's token once per browser: paste the output of `ray get-auth-token`, "
                          f"or the contents of {ctx.dashboard_token})")
        console.print(f"Ray: {ctx.cpus:g} CPUs, {ctx.gpus:g} GPUs; dashboard: {dashboard}", highlight=False,
                      soft_wrap=True)

    # three live rows on a terminal; timestamped lines otherwise (CI, nohup, tee)
    if not missing:
        display = None
    elif console.is_terminal:
        display = RichProgress(console)
    else:
        display = PlainProgress(lambda line: console.print(line, highlight=False, markup=False, soft_wrap=True))
    start = time.perf_counter()
    try:
        if display is None:  # nothing to compute: no Ray, no writes
            outcome = execute(prepared, settings, lock, on_warning=_warn)
        else:
            with display:
                outcome = execute(prepared, settings, lock, on_connect=on_connect, on_progress=display,
                                  flush_rows=flush_rows, flush_seconds=flush_seconds, on_warning=_warn,
                                  job_name=f"grb-dist sweep {spec.dataset} -> {prepared.run_dir}")
    except KeyboardInterrupt:
        if display is not None:
            display.stop()
        err_console.print("interrupted: finished cells are kept; run the same command again to resume")
        raise typer.Exit(130) from None
    elapsed = time.perf_counter() - start
    boards = {k: v for k, v in outcome.boards.items() if k.split("-", 1)[1] in show}
    console.print(render(boards, "md"), highlight=False, markup=False)
    summary = outcome.summary
    if summary is None:
        console.print(f"nothing to do: all {len(p.scores)} cells of this job are already in {prepared.run_dir}",
                      highlight=False)
        return
    console.print(
        f"{summary.done}/{summary.total} cells ({summary.computed} computed, {summary.skipped} already done, "
        f"{summary.failures} failed) in {elapsed:.1f}s; results in {prepared.run_dir}", highlight=False,
    )
    for e in summary.errors[:10]:
        err_console.print(f"failed: {e}", highlight=False, soft_wrap=True)
    if summary.failures:
        raise typer.Exit(1)


def _check_cluster_memory(prepared) -> None:
    """The sweep's largest task must fit the largest live node of the joined cluster (its Ray
    memory plus object store); before anything is written."""
    import ray

    from grb_dist.checks import check_memory, sweep_memory

    sizes = [n.get("Resources", {}).get("memory", 0) + n.get("Resources", {}).get("object_store_memory", 0)
             for n in ray.nodes() if n.get("Alive")]
    if sizes and max(sizes) > 0:
        check_memory(sweep_memory(prepared.spec, prepared.graph), int(max(sizes)), "the largest node of the cluster")


def _check_flush(rows: int, seconds: float) -> None:
    import math

    from grb_dist.core.errors import ConfigError

    if not 1 <= rows <= 10_000_000:
        raise ConfigError(f"--flush-rows must be in 1..10,000,000, got {rows}")
    if not (math.isfinite(seconds) and 0 <= seconds <= 86_400):
        raise ConfigError(f"--flush-seconds must be in 0..86,400, got {seconds}")


def _warn(message: str) -> None:
    err_console.print(f"warning: {message}", highlight=False, soft_wrap=True)


@app.command()
@handle_errors
def leaderboard(
    run_dir: Path = typer.Argument(..., help="Run directory of a (finished or partial) sweep."),
    scenario: Optional[str] = typer.Option(None, "--scenario", help="One scenario: injection or modification (default: every scenario in the run)."),
    difficulty: Optional[str] = typer.Option(None, "--difficulty", help="One difficulty (default: all in the run)."),
    fmt: Optional[str] = typer.Option(None, "--format", "-f", help="md, csv, latex or html (default: tables on a terminal, Markdown otherwise)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write to this file instead of printing; with csv a directory (one CSV per board) or a .csv file (one long table)."),
) -> None:
    """Re-reduce the scores of a run into leaderboards per scenario and difficulty.

    Also refreshes RUN_DIR/leaderboard/<scenario>/ (unless the run is read-only).
    """
    from grb_dist.core.errors import ConfigError
    from grb_dist.core.names import difficulty_key
    from grb_dist.leaderboard import FORMATS, render
    from grb_dist.checks import check_output_file, run_is_writable
    from grb_dist.store import RunStore
    from grb_dist.leaderboard.reduce import reduce_run

    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    if scenario is not None and not scenario.strip():
        raise ConfigError("--scenario is empty; choose injection or modification")
    ds = [difficulty_key(difficulty)[5:]] if difficulty else None
    csv_dir = output is not None and fmt == "csv" and (output.is_dir() or output.suffix.lower() != ".csv")
    if csv_dir:
        from grb_dist.report import check_output_dir

        check_output_dir(output)
    elif output is not None:
        check_output_file(output)
    store = RunStore.existing(run_dir)
    save = run_is_writable(store.root)  # a read-only run is reported, not refreshed
    boards = reduce_run(store, ds, save=save, on_warning=_warn, scenarios=[scenario] if scenario else None)
    if not save:
        err_console.print(f"note: {run_dir} is read-only; its leaderboard/ files are not refreshed", highlight=False)
    if output is None and fmt in (None, "md") and console.is_terminal:
        from grb_dist.leaderboard.render import rich_tables

        for table in rich_tables(boards):
            console.print(table)
        return
    if output is None:
        typer.echo(render(boards, fmt or "md"), nl=False)
        return
    from grb_dist.store.parquet import write_bytes

    try:
        if csv_dir:
            from grb_dist.leaderboard.render import file_stem, to_csv

            output.mkdir(exist_ok=True)
            for name, board in boards.items():
                write_bytes(to_csv(board).encode(), output / f"{file_stem(name)}.csv")
        else:
            write_bytes(render(boards, fmt or "md").encode(), output)
    except OSError as exc:
        raise ConfigError(f"cannot write --output {output}: {exc.strerror or exc}") from None
    console.print(f"wrote {len(boards)} CSV files to {output}" if csv_dir else f"wrote {output}", highlight=False)


@app.command()
@handle_errors
def report(
    run_dir: Path = typer.Argument(..., help="Run directory of a (finished or partial) sweep, or a study directory (grb-dist study's OUT/<study>)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Directory of the report (default: RUN_DIR/report)."),
) -> None:
    """Write a self-contained HTML report of a run: metadata, leaderboards, figures.

    One directory (default RUN_DIR/report): index.html with everything embedded, and each
    figure as PNG and PDF. Every file is written atomically. On a study directory (seed
    002, grb-dist study) the page shows the study's settings, reduced tables and figures.
    """
    from grb_dist.report import build_report, build_study_report, check_output_dir, is_study_dir, write_report
    from grb_dist.store import RunStore

    if not is_study_dir(run_dir) and run_dir.is_dir() and not (run_dir / "manifest.json").exists():
        # an output directory of grb-dist study (OUT, holding OUT/<study>): the study in it
        studies = sorted(d for d in run_dir.iterdir() if d.is_dir() and is_study_dir(d))
        if len(studies) == 1:
            run_dir = studies[0]
        elif studies:
            raise GrbDistError(f"{run_dir} holds {len(studies)} studies; give one: "
                               + ", ".join(str(d) for d in studies))
    if is_study_dir(run_dir):
        out = check_output_dir(output if output is not None else run_dir / "report")
        rep = build_study_report(run_dir)
        page = write_report(rep, out)
        console.print(f"wrote {page} and {len(rep.figures)} figures (PNG) in {out}", highlight=False)
        return
    store = RunStore.existing(run_dir)
    out = check_output_dir(output if output is not None else store.root / "report")
    scores = store.read_scores(on_warning=_warn)
    if scores.empty:
        raise GrbDistError(f"{run_dir} has no scores yet; run the sweep first")
    rep = build_report(scores, store.manifest())
    page = write_report(rep, out)
    console.print(f"wrote {page} and {len(rep.figures)} figures (PNG and PDF) in {out}", highlight=False)


@app.command()
@handle_errors
def compact(
    run_dir: Path = typer.Argument(..., help="Run directory to compact."),
    min_rows: int = typer.Option(100_000, "--min-rows", min=2, help="Files with fewer rows than this are merged."),
    wait: bool = typer.Option(False, "--wait", help="Wait for a sweep that holds the run directory."),
) -> None:
    """Merge the small score files of each partition into one file, without changing any row.

    Takes the run's lock (not while a sweep runs on it, unless --wait).
    """
    from grb_dist.store import RunLock, RunStore

    store = RunStore.existing(run_dir)
    lock = RunLock(store.root).acquire(wait=wait, on_wait=lambda who: err_console.print(
        f"waiting for {who} to finish with {run_dir}", highlight=False))
    try:
        store.recover()
        stats = store.compact(min_rows=min_rows)
    finally:
        lock.release()
    console.print(f"compacted {run_dir}: {stats['files_before']} score files -> {stats['files_after']} "
                  f"({stats['partitions']} partitions merged, {stats['rows']} rows rewritten unchanged)", highlight=False)


def _csv(value: Optional[str]) -> Optional[list[str]]:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


@app.command()
@handle_errors
def study(
    job: Optional[Path] = typer.Option(None, "--job", help="Study job file (YAML), or a shipped study: over-robustness-csbm (default), over-robustness-cba, over-robustness-cora-ml."),
    out: Path = typer.Option(Path("results"), "--out", help="Output directory; the study writes OUT/<study>/ (nodes/ Parquet per unit, reduced tables, plots/)."),
    address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address (default: a local Ray started here)."),
    num_cpus: Optional[int] = typer.Option(None, "--num-cpus", help="CPUs of the local Ray (default: all)."),
    graphs: Optional[int] = typer.Option(None, "--graphs", help="Graphs per K (or splits of a real graph)."),
    nodes: Optional[int] = typer.Option(None, "--nodes", help="New (test) nodes attacked per graph."),
    k: Optional[str] = typer.Option(None, "--k", help="K values, comma-separated (CSBM and CBA studies)."),
    models: Optional[str] = typer.Option(None, "--models", help="Models, comma-separated (hyper-parameters from the job where it has them)."),
    attacks: Optional[str] = typer.Option(None, "--attacks", help="Attacks, comma-separated: l2-weak, l2-strong, dice, l2-weak-class, nettack, sga, grbcd."),
    budgets: Optional[str] = typer.Option(None, "--budgets", help="Local budgets, comma-separated: integers >= 1, deg, deg+N, inf."),
    dataset: Optional[Path] = typer.Option(None, "--dataset", help="The .npz file of a real-graph study (graph kind npz)."),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Most edges an attack adds to a node (cap of the inf budget)."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Maximum training epochs."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Base seed of graphs, splits, nodes and models."),
    ray_on: bool = typer.Option(True, "--ray/--no-ray", help="Run the units as Ray tasks (default) or one after another in this process."),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Write the PNG figures after the run."),
) -> None:
    """Semantics-aware robustness study (seed 002): R, R_adv, R_over, F1-rob, Tables 1-2, figures.

    One unit per (K, graph seed, model, attack); each unit's per-node rows are written
    atomically to OUT/<study>/nodes/<unit id>.parquet and a re-run only does missing units.
    """
    from grb_dist.checks import check_ray_address, check_writable_dir
    from grb_dist.core.errors import ConfigError
    from grb_dist.semantics.study import run_study

    job = _study_job(job)
    if num_cpus is not None and num_cpus < 1:
        raise ConfigError(f"--num-cpus must be >= 1, got {num_cpus}")
    spec = _study_spec(job, k, models, epochs, graphs=graphs, nodes=nodes, max_steps=max_steps, seed=seed,
                       attacks=_csv(attacks), budgets=_csv(budgets), dataset=dataset)
    check_ray_address(address)
    check_writable_dir(out, "output directory", "--out")
    directory = run_study(spec, out, address=address, num_cpus=num_cpus, use_ray=ray_on,
                          progress=lambda msg: err_console.print(msg, highlight=False))
    written = [directory / name for name in ("metrics.csv", "table1.csv", "table2.csv") if (directory / name).exists()]
    if plots:
        from grb_dist.semantics.plots import write_plots

        written += write_plots(directory)
    console.print(f"study {spec.study}: {directory}", highlight=False)
    for path in written:
        console.print(f"  {path}", highlight=False)


def _study_spec(job: Path, k: Optional[str], models: Optional[str], epochs: Optional[int],
                dataset: Optional[Path] = None, **overrides):
    """The checked study of ``job`` with the command line's overrides (``--k`` and
    ``--models`` narrow its per_K and search sections too)."""
    from grb_dist.core.errors import ConfigError
    from grb_dist.semantics.study import load_spec

    if k is not None:
        try:
            overrides["K"] = [float(v) for v in _csv(k) or []]
        except ValueError:
            raise ConfigError(f"--k must be comma-separated numbers, got {k!r}") from None
    spec = load_spec(job, check=False)
    if models is not None:
        overrides["models"] = {m: dict(spec.models.get(m, {}) or {}) for m in _csv(models) or []}
    if dataset is not None:
        overrides["graph"] = {**dict(spec.graph), "path": str(dataset)}
    if epochs is not None:
        overrides["train"] = {**dict(spec.train), "epochs": epochs}
    return load_spec(job, **overrides)


def _study_job(job: Optional[Path]) -> Path:
    """``job``, or the shipped study it names (default: over-robustness-csbm)."""
    import importlib.resources

    from grb_dist.core.errors import ConfigError

    shipped = importlib.resources.files("grb_dist") / "jobs" / "studies"
    studies = sorted(p.name[: -len(".yaml")] for p in shipped.iterdir() if p.name.endswith(".yaml"))
    job = job if job is not None else Path("over-robustness-csbm")
    if not job.exists() and str(job) in studies:  # a shipped study by name
        return Path(str(shipped / f"{job}.yaml"))
    if not job.exists():
        raise ConfigError(f"job file {job} does not exist; give a YAML file or a shipped study ({', '.join(studies)})")
    return job


@app.command("study-tune")
@handle_errors
def study_tune(
    output: Path = typer.Argument(..., help="Where to write the tuned job (YAML): the job with its per_K section filled."),
    job: Optional[Path] = typer.Option(None, "--job", help="Study job file with a search: section, or a shipped study (default: over-robustness-csbm)."),
    graphs: int = typer.Option(3, "--graphs", help="Graphs per K each setting is trained on (the paper: 10)."),
    k: Optional[str] = typer.Option(None, "--k", help="K values to tune, comma-separated (default: the job's)."),
    models: Optional[str] = typer.Option(None, "--models", help="Models to tune, comma-separated (default: every model of search:)."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Maximum training epochs."),
    address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address (default: a local Ray started here)."),
    num_cpus: Optional[int] = typer.Option(None, "--num-cpus", help="CPUs of the local Ray (default: all)."),
    ray_on: bool = typer.Option(True, "--ray/--no-ray", help="Train as Ray tasks (default) or one after another here."),
) -> None:
    """Per-K hyper-parameter search (seed 002, appendix H): the best validation accuracy per K.

    Every setting of the job's search: grid is trained on the study's first GRAPHS graphs of
    each K; the best per (K, model), and for <model>_lp the best of the model and of lp, go
    into per_K of a copy of the job written to OUTPUT (run it with grb-dist study --job OUTPUT).
    """
    import yaml

    from grb_dist.checks import check_ray_address
    from grb_dist.core.errors import ConfigError
    from grb_dist.semantics.tune import per_k_section, tune
    from grb_dist.store.parquet import write_bytes

    job = _study_job(job)
    if output.exists() and output.is_dir():
        raise ConfigError(f"{output} is a directory; give the path of the YAML file to write")
    if not output.parent.is_dir():
        raise ConfigError(f"the directory of {output} does not exist; create it first")
    data = yaml.safe_load(job.read_text()) or {}
    spec = _study_spec(job, k, None, epochs)
    search = dict(spec.search)
    if models is not None:
        names = _csv(models) or []
        unknown = [m for m in names if m not in search]
        if unknown:
            raise ConfigError(f"--models: {', '.join(unknown)} not in the job's search: ({', '.join(search)})")
        search = {m: search[m] for m in names}
    check_ray_address(address)
    table = tune(spec, search, graphs=graphs, address=address, num_cpus=num_cpus, use_ray=ray_on,
                 progress=lambda msg: err_console.print(msg, highlight=False))
    per_k = per_k_section(spec, table)
    tuned = {**data, "per_K": {**{float(x): v for x, v in (data.get("per_K") or {}).items()}, **per_k}}
    header = f"# {spec.study} tuned by grb-dist study-tune ({graphs} graph(s) per K)\n"
    class NoAliases(yaml.SafeDumper):  # every entry written out, no &id001 / *id001
        def ignore_aliases(self, data):
            return True

    write_bytes((header + yaml.dump(tuned, Dumper=NoAliases, sort_keys=False)).encode(), output)
    best = table[table["best"]]
    view = Table("K", "model", "best setting", "val accuracy")
    for row in best.itertuples():
        view.add_row(f"{row.K:g}", row.model, ", ".join(f"{a}={b}" for a, b in row.setting.items()), f"{row.val_accuracy:.3f}")
    console.print(view)
    console.print(f"wrote {output}", highlight=False)


@app.command("study-plot")
@handle_errors
def study_plot(
    study_dir: Path = typer.Argument(..., help="A study directory (OUT/<study>) with nodes/*.parquet."),
) -> None:
    """Re-reduce a study's rows into its tables and write its figures (PNG) under plots/."""
    from grb_dist.core.errors import ConfigError
    from grb_dist.semantics.plots import write_plots
    from grb_dist.semantics.study import study_budgets, write_tables

    if not (study_dir / "nodes").is_dir():
        raise ConfigError(f"{study_dir} is not a study directory (no nodes/ inside)")
    written = list(write_tables(study_dir, study_budgets(study_dir)).values()) + write_plots(study_dir)
    for path in written:
        console.print(str(path), highlight=False)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
