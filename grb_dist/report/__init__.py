"""A publishable report of a run: one self-contained HTML page and its figures (PNG, PDF);
of a semantics-aware robustness study directory (Gosch et al. 2023) likewise
(:mod:`grb_dist.report.study`, built on this module's :class:`Report` and :func:`write_report`;
this module does not import it).

:func:`build_report` is pure (a scores table and the run's manifest in, the page and the
figures' bytes out); :func:`write_report` writes them, each file atomically, the page last,
so an error never leaves a half-written file; :func:`check_output_dir` checks the
destination first (nothing is written when it is not usable).
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from grb_dist.core.paths import output_target
from grb_dist.core.errors import ConfigError, GrbDistError
from grb_dist.core.scenario import find_scenario
from grb_dist.leaderboard.rank import (
    board_name,
    has_adaptive,
    leaderboards,
    of_scenario,
    scenarios_of,
    transfer_matrix,
    transfer_rows,
)
from grb_dist.core.text import plural
from grb_dist.report.figures import Figure, budget_lines, difficulty_lines, heatmap, palette, threat_bars, timeline
from grb_dist.report.page import SECTIONS, AdaptiveView, build_html
from grb_dist.store.parquet import safe_label
from grb_dist.report.tables import (
    accuracy_matrix,
    budget_curves,
    difficulties_of,
    difficulty_curves,
    figure_names,
    environment,
    has_budget_sweep,
    report_difficulty,
    run_info,
)

PAGE = "index.html"


@dataclass(frozen=True)
class Report:
    """The rendered report: the HTML page and every figure (embedded in the page, and
    written next to it as PNG and PDF)."""

    html: str
    figures: tuple[Figure, ...]


def report_figures(scores: pd.DataFrame) -> tuple[list[Figure], list[Figure], list[Figure] | None]:
    """Heatmaps (per scenario and difficulty), accuracy-vs-difficulty lines (per scenario)
    and budget curves (per scenario; None when no attack has several budgets), of the
    transfer rows (adaptive ones are drawn by :func:`adaptive_views`)."""
    scores = transfer_rows(scores)
    heatmaps, difficulty, budget = [], [], [] if has_budget_sweep(scores) else None
    colours = palette(figure_names(scores))
    for scenario in scenarios_of(scores):
        _, mine = of_scenario(scores, scenario)
        label = safe_label(scenario)  # file names
        for d in difficulties_of(mine):
            matrix = accuracy_matrix(mine, scenario, d)
            if not matrix.empty:
                heatmaps.append(heatmap(matrix, f"heatmap-{label}-{safe_label(d)}", f"{scenario}, {d}: accuracy",
                                        f"Accuracy per defense and attack, {scenario} scenario, {d} difficulty."))
        curves = difficulty_curves(mine, scenario)
        if curves:
            difficulty.append(difficulty_lines(curves, f"difficulty-{label}", f"{scenario}: accuracy vs difficulty",
                                               f"Accuracy per defense on each degree band, {scenario} scenario.", colours))
        if budget is not None:
            bcurves = budget_curves(mine, scenario)
            if bcurves:
                known = find_scenario(scenario)
                xlabel = known.budget_label if known else "budget"
                budget.append(budget_lines(bcurves, f"budget-{label}", f"{scenario}: accuracy vs budget",
                                           f"Mean accuracy over defenses per budget, {scenario} scenario.", xlabel,
                                           colours))
    return heatmaps, difficulty, budget


def adaptive_views(scores: pd.DataFrame, boards: Mapping[str, pd.DataFrame]) -> list[AdaptiveView]:
    """Per scenario with adaptive rows, on its :func:`report_difficulty`: the robustness board
    of ``boards`` (:func:`~grb_dist.leaderboard.rank.leaderboards`) drawn as bars (clean,
    transfer, adaptive per defense, in rank order) and its transfer matrix as a heatmap."""
    views = []
    for scenario in scenarios_of(scores):
        _, mine = of_scenario(scores, scenario)
        d = report_difficulty(difficulties_of(mine))
        name = board_name(scenario, "robustness", d or "")
        if d is None or not has_adaptive(mine) or name not in boards:
            continue
        label = f"{safe_label(scenario)}-{safe_label(d)}"
        figures = [threat_bars(boards[name], f"adaptive-{label}", f"{scenario}, {d}: transfer vs adaptive",
                               f"Per defense: clean accuracy, and the worst accuracy under transfer and under "
                               f"adaptive attacks (mean over repeats), {scenario} scenario, {d} difficulty; "
                               "defenses in rank order of the robustness board.")]
        matrix = transfer_matrix(boards.get(board_name(scenario, "transfer", d), pd.DataFrame()))
        if not matrix.empty:
            figures.append(heatmap(matrix, f"transfer-{label}", f"{scenario}, {d}: transfer matrix",
                                   f"Mean accuracy per surrogate (row) and defense (column) over the surrogate's "
                                   f"attacks and repeats; last row: each defense under its own adaptive attacks; "
                                   f"{scenario} scenario, {d} difficulty.", xlabel="defense", ylabel="surrogate",
                                   first_column_apart=False, last_row_apart=matrix.index[-1] == "adaptive"))
        views.append(AdaptiveView(name, boards[name], tuple(figures)))
    return views


def build_report(scores: pd.DataFrame, manifest: Mapping[str, Any], *, env: Mapping[str, str] | None = None,
                 generated_at: dt.datetime | None = None, tasks: pd.DataFrame | None = None) -> Report:
    """The report of a run from its scores (``schema.SCORES`` columns) and manifest, with
    the timeline of ``tasks`` (``schema.TIMELINE`` rows) when there are any."""
    if scores.empty:
        raise GrbDistError("the run has no scores yet; run the sweep first")
    now = generated_at or dt.datetime.now(dt.timezone.utc)
    info = run_info(scores, manifest, env if env is not None else environment(), now)
    heatmaps, difficulty, budget = report_figures(scores)
    spans = []
    if tasks is not None and not tasks.empty:
        spans.append(timeline(tasks, "timeline", f"{plural(len(tasks), 'task')} of "
                              f"{plural(tasks['invocation'].nunique(), 'sweep')}",
                              "Tasks of the run per stage over time, from timeline/."))
    boards = leaderboards(scores)
    adaptive = adaptive_views(scores, boards)
    page = build_html(info, boards, heatmaps, difficulty, budget, spans, adaptive)
    extra = [f for view in adaptive for f in view.figures]
    return Report(page, tuple(heatmaps + extra + difficulty + (budget or []) + spans))


def check_output_dir(path: str | Path, flag: str = "--output") -> Path:
    """A directory about to be written: it is a writable directory, or it does not exist and
    its parent is one (it is created then); the page and figures it holds are regular files
    or symlinks to them (:func:`~grb_dist.core.paths.output_target`). Writes nothing."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"{flag} {path} is a file; give a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise ConfigError(f"{flag} {path} is not writable; choose another {flag}")
        for entry in path.iterdir():  # what the report would replace: regular files only
            if entry.name == PAGE or entry.suffix in (".png", ".pdf"):
                output_target(entry, "report file", f"remove it or choose another {flag}")
        return path
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError(f"{flag} {path}: the directory {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {path}: {parent} is not writable; choose another {flag}")
    return path


def write_report(report: Report, directory: str | Path) -> Path:
    """Write the figures (``<name>.png``, and ``<name>.pdf`` when it has one) and then ``index.html`` into
    ``directory`` (created if missing), each file by the output rule
    (:func:`~grb_dist.core.fileio.write_output`: temporary file + rename; a symlink's
    regular-file target is written, a device, FIFO or socket refused). Returns the page's
    path."""
    from grb_dist.core.fileio import write_output

    directory = Path(directory)

    def write(data: bytes, name: str) -> None:
        write_output(data, directory / name, "report file", "remove it or choose another --output")

    try:
        directory.mkdir(exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot write the report to {directory}: {exc.strerror or exc}") from None
    for fig in report.figures:
        write(fig.png, f"{fig.name}.png")
        if fig.pdf:  # a study's figures come as PNG only
            write(fig.pdf, f"{fig.name}.pdf")
    write(report.html.encode("utf-8"), PAGE)
    return directory / PAGE


__all__ = ["PAGE", "Report", "SECTIONS", "adaptive_views", "build_report", "check_output_dir", "report_figures",
           "write_report"]
