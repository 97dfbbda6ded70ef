"""The commands that read a run: ``grb-dist leaderboard``, ``report`` and ``compact``.

None of them imports torch, Ray or the sweep (a study directory's report loads what the study
needs): the leaderboards come from :mod:`grb_dist.leaderboard.reduce`, the report from
:mod:`grb_dist.report`, the files from :mod:`grb_dist.store`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

import grb_dist.cli.base as base
from grb_dist.cli.base import app, handle_errors, out_value, path_value, warn
from grb_dist.core.errors import GrbDistError
from grb_dist.core.text import plural
from grb_dist.store.remote import is_remote, staged


@app.command()
@handle_errors
def leaderboard(
    run_dir: Path = typer.Argument(..., parser=out_value, help="Run directory of a (finished or partial) sweep, or a run in object storage (s3://bucket/prefix)."),
    scenario: Optional[str] = typer.Option(None, "--scenario", help="One scenario: injection, modification, poisoning, targeted, targeted-poisoning or a registered one (default: every scenario in the run)."),
    difficulty: Optional[str] = typer.Option(None, "--difficulty", help="One difficulty: easy, medium, hard or full (default: every difficulty in the run; one the run does not hold is an error)."),
    fmt: Optional[str] = typer.Option(None, "--format", "-f", help="md, csv, latex or html (default: tables on a terminal, Markdown otherwise)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", parser=path_value, help="Write to this file instead of printing (- prints); with csv a directory (one CSV per board) or a .csv file (one long table). A symlink to a regular file writes its target; a device, FIFO or socket is refused."),
) -> None:
    """Re-reduce the scores of a run into leaderboards per scenario and difficulty.

    Reads the run and never writes into it (the sweep writes RUN_DIR/leaderboard/ when it
    ends); --output writes the boards elsewhere. A scenario or difficulty the run does not
    hold is an error.
    """
    from grb_dist.core.paths import check_output_file
    from grb_dist.core.errors import ConfigError
    from grb_dist.core.names import difficulty_key
    from grb_dist.leaderboard import FORMATS, render
    from grb_dist.leaderboard.reduce import is_csv_dir, reduce_run, write_boards
    from grb_dist.store import RunStore

    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    if scenario is not None and not scenario.strip():
        raise ConfigError("--scenario is empty; choose injection, modification, poisoning or targeted")
    ds = [difficulty_key(difficulty)[5:]] if difficulty else None
    stdout = output is not None and str(output) == "-"  # printed, in the format asked (Markdown by default)
    if stdout:
        output = None
    csv_dir = output is not None and is_csv_dir(output, fmt)
    if csv_dir:
        from grb_dist.report import check_output_dir

        check_output_dir(output)
    elif output is not None:
        check_output_file(output)
    with staged(run_dir, write=False) as local:  # a remote run: read from its staging copy
        # read only: nothing of the run is written (its leaderboard/ files are the sweep's)
        boards = reduce_run(RunStore.existing(local), ds, save=False, on_warning=warn,
                            scenarios=[scenario] if scenario else None)
    if output is None and not stdout and fmt in (None, "md"):
        base.print_boards(boards)
        return
    if output is None:
        typer.echo(render(boards, fmt or "md"), nl=False)
        return
    try:
        write_boards(boards, output, fmt or "md")  # by the output rule (grb_dist.core.fileio.write_output)
    except OSError as exc:  # the directory of --format csv could not be made
        raise ConfigError(f"cannot write --output {output}: {exc.strerror or exc}") from None
    base.console.print(f"wrote {plural(len(boards), 'CSV file')} to {output}" if csv_dir else f"wrote {output}", highlight=False)


@app.command()
@handle_errors
def report(
    run_dir: Path = typer.Argument(..., parser=out_value, help="Run directory of a (finished or partial) sweep, a run in object storage (s3://bucket/prefix), or a study directory (grb-dist study's OUT/<study>)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", parser=path_value, help="Directory of the report (default: RUN_DIR/report; for a run in object storage a local directory must be given)."),
) -> None:
    """Write a self-contained HTML report of a run: metadata, leaderboards, figures.

    One directory (default RUN_DIR/report): index.html with everything embedded, and each
    figure as PNG and PDF. Every file is written atomically; nothing else of the run is
    written. On a study directory (grb-dist study's OUT/<study>) the page shows the study's
    settings, reduced tables and figures.
    """
    from grb_dist.report import check_output_dir, write_report
    from grb_dist.report.study import build_study_report, is_study_dir
    from grb_dist.store import RunStore

    if is_remote(run_dir):
        if output is None:
            raise GrbDistError(f"the report of {run_dir} is written on this machine: give --output DIR")
        out = check_output_dir(output)
        with staged(run_dir, write=False) as local:
            _write_run_report(RunStore.existing(local), out, run_dir)
        return
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
        base.console.print(f"wrote {page} and {plural(len(rep.figures), 'figure')} (PNG) in {out}", highlight=False)
        return
    store = RunStore.existing(run_dir)
    _write_run_report(store, check_output_dir(output if output is not None else store.root / "report"), run_dir)


def _write_run_report(store, out: Path, named) -> None:
    """The HTML report of a sweep's run into ``out`` (``named``: the run as the user gave it)."""
    from grb_dist.report import build_report, write_report

    scores = store.read_scores(on_warning=warn, complete=True)  # a run missing cells is refused, as by leaderboard
    if scores.empty:
        raise GrbDistError(f"{named} has no scores yet; run the sweep first")
    rep = build_report(scores, store.manifest(), tasks=store.read_timeline())
    page = write_report(rep, out)
    base.console.print(f"wrote {page} and {plural(len(rep.figures), 'figure')} (PNG and PDF) in {out}", highlight=False)


@app.command()
@handle_errors
def compact(
    run_dir: Path = typer.Argument(..., parser=out_value, help="Run directory to compact, or a run in object storage (s3://bucket/prefix)."),
    min_rows: int = typer.Option(100_000, "--min-rows", min=2, help="Files with fewer rows than this are merged."),
    wait: bool = typer.Option(False, "--wait/--no-wait", help="Wait for a sweep that holds the run directory."),
) -> None:
    """Merge the small score files of each partition into one file, without changing any row.

    Takes the run's lock (not while a sweep runs on it, unless --wait).
    """
    from grb_dist.store import RunLock, RunStore

    with staged(run_dir, write=True, on_warning=warn) as local:  # a remote run: under its lease, uploaded after
        store = RunStore.existing(local)
        lock = RunLock(store.root).acquire(wait=wait, on_wait=lambda who: base.err_console.print(
            f"waiting for {who} to finish with {run_dir}", highlight=False))
        try:
            store.recover()
            stats = store.compact(min_rows=min_rows)
        finally:
            lock.release()
    base.console.print(f"compacted {run_dir}: {plural(stats['files_before'], 'score file')} -> {stats['files_after']:,} "
                       f"({plural(stats['partitions'], 'partition')} merged, {plural(stats['rows'], 'row')} rewritten "
                       "unchanged)", highlight=False, soft_wrap=True)
