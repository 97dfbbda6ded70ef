"""The report's figures, drawn with matplotlib (Agg backend) into PNG and PDF bytes.

matplotlib is imported inside :func:`_pyplot` only, so importing this module (and running
``grb-dist --help``) stays fast. Each function takes the pure tables of
:mod:`grb_dist.report.tables` and returns a :class:`Figure` (bytes, nothing written).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

DPI = 120
#: Qualitative colours, each of its own hue (tab10, then ten more): a name keeps its colour
#: in every figure of a report (:func:`palette`).
COLOURS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#000000", "#00008b", "#8b0000",
)
#: Line styles that tell apart names sharing a colour (more names than colours).
STYLES = ("-", "--", ":", "-.")


def palette(names: Any) -> dict[str, tuple[str, str]]:
    """``name -> (colour, line style)`` for every name of a report, assigned in sorted order,
    so that a defense or attack has one colour across all of the report's figures."""
    ordered = sorted({str(n) for n in names})
    return {n: (COLOURS[i % len(COLOURS)], STYLES[(i // len(COLOURS)) % len(STYLES)]) for i, n in enumerate(ordered)}


def accuracy_scale(values: np.ndarray) -> tuple[float, float]:
    """The colour scale of a heatmap: the data's range widened to multiples of 0.05 (at
    least 0.1 wide, within 0..1), so that close accuracies get distinct colours."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return 0.0, 1.0
    lo, hi = np.floor(finite.min() * 20) / 20, np.ceil(finite.max() * 20) / 20
    if hi - lo < 0.1:
        lo, hi = max(0.0, hi - 0.1), max(hi, min(1.0, lo + 0.1))
    return float(max(0.0, lo)), float(min(1.0, max(hi, lo + 0.05)))


@dataclass(frozen=True)
class Figure:
    """One rendered figure: its file stem, caption, and the PNG and PDF bytes."""

    name: str
    caption: str
    png: bytes
    pdf: bytes


def _pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _render(fig: Any, name: str, caption: str) -> Figure:
    """PNG and PDF bytes of ``fig`` (without creation dates, so equal inputs give equal
    files), then close it."""
    plt = _pyplot()
    try:
        png, pdf = io.BytesIO(), io.BytesIO()
        fig.savefig(png, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
        fig.savefig(pdf, format="pdf", bbox_inches="tight", metadata={"CreationDate": None, "Creator": None})
    finally:
        plt.close(fig)
    return Figure(name, caption, png.getvalue(), pdf.getvalue())


def heatmap(matrix: pd.DataFrame, name: str, title: str, caption: str, *, xlabel: str = "attack",
            ylabel: str = "defense", first_column_apart: bool = True, last_row_apart: bool = False) -> Figure:
    """Defenses x attacks accuracy heatmap (annotated; colours scaled to the board's range,
    :func:`accuracy_scale`, which the colour bar names), the clean column first and set
    apart by a line (``first_column_apart``); other matrices name their axes (``xlabel``,
    ``ylabel``) and may set their last row apart instead (the transfer matrix's adaptive row)."""
    plt = _pyplot()
    values = matrix.to_numpy(dtype=np.float64)
    n_rows, n_cols = values.shape
    lo, hi = accuracy_scale(values)
    fig, ax = plt.subplots(figsize=(2.2 + 0.78 * n_cols, 1.3 + 0.36 * n_rows))
    im = ax.imshow(np.ma.masked_invalid(values), cmap="viridis", vmin=lo, vmax=hi, aspect="auto")
    ax.set_xticks(range(n_cols), [str(c) for c in matrix.columns], rotation=35, ha="right")
    ax.set_yticks(range(n_rows), [str(i) for i in matrix.index])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11, loc="left")
    if first_column_apart and n_cols > 1:
        ax.axvline(0.5, color="white", linewidth=3)
    if last_row_apart and n_rows > 1:
        ax.axhline(n_rows - 1.5, color="white", linewidth=3)
    if n_rows * n_cols <= 600:
        for i in range(n_rows):
            for j in range(n_cols):
                v = values[i, j]
                if np.isfinite(v):
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8,
                            color="black" if (v - lo) > 0.6 * (hi - lo) else "white")
    fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02, label=f"accuracy (scale {lo:.2f} to {hi:.2f})")
    return _render(fig, name, caption)


def difficulty_lines(curves: Mapping[str, pd.DataFrame], name: str, title: str, caption: str,
                     colours: Mapping[str, tuple[str, str]] | None = None) -> Figure:
    """Accuracy per degree band (easy, medium, hard), one line per defense (``colours``:
    :func:`palette`); one panel for the clean accuracy and one for the mean accuracy under
    attack (those present)."""
    plt = _pyplot()
    panels = [(k, t) for k, t in (("clean", "clean"), ("attacked", "under attack (mean over attacks, repeats)"))
              if k in curves]
    defenses = sorted(set().union(*(set(curves[k].index) for k, _ in panels)))
    colours = colours or palette(defenses)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels) + 2.2, 3.6), sharey=True, squeeze=False)
    for ax, (key, panel_title) in zip(axes[0], panels):
        table = curves[key]
        x = np.arange(len(table.columns))
        shown = [d for d in defenses if d in table.index]
        width = 0.8 / max(1, len(shown))
        for i, defense in enumerate(shown):
            colour, style = colours[str(defense)]
            values = table.loc[defense].to_numpy(dtype=np.float64)
            if len(x) == 1:  # one band: a line needs two points, so bars side by side
                ax.bar(x + (i + 0.5) * width - 0.4, values, width, color=colour, label=str(defense))
            else:
                ax.plot(x, values, marker="o", linewidth=1.6, color=colour, linestyle=style, label=str(defense))
        ax.set_xticks(x, [str(c) for c in table.columns])
        ax.set_xlim(-0.5, len(x) - 0.5)
        ax.set_title(panel_title, fontsize=10)
        ax.set_xlabel("difficulty (test-node degree band)")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("accuracy")
    axes[0][-1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8, frameon=False, title="defense")
    fig.suptitle(title, fontsize=11, x=0.02, ha="left")
    fig.tight_layout()
    return _render(fig, name, caption)


def budget_lines(curves: Mapping[str, pd.DataFrame], name: str, title: str, caption: str,
                 xlabel: str = "injected nodes", colours: Mapping[str, tuple[str, str]] | None = None) -> Figure:
    """Mean accuracy over defenses against the attack budget (``xlabel``: injected nodes, or
    the share of edges flipped), one line per attack (``colours``: :func:`palette`), one
    panel per difficulty."""
    plt = _pyplot()
    items = list(curves.items())
    colours = colours or palette(c for _, t in items for c in t.columns)
    ncols = min(2, len(items))
    nrows = -(-len(items) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols + 1.6, 3.2 * nrows), sharey=True, squeeze=False)
    for ax in axes.flat[len(items):]:
        ax.set_visible(False)
    for ax, (difficulty, table) in zip(axes.flat, items):
        for column in table.columns:
            series = table[column].dropna()
            colour, style = colours[str(column)]
            ax.plot(series.index.to_numpy(), series.to_numpy(dtype=np.float64), marker="o", linewidth=1.6,
                    color=colour, linestyle=style, label=str(column))
        ax.set_title(str(difficulty), fontsize=10)
        ax.set_xlabel(xlabel)
        ax.grid(True, alpha=0.3)
    for row in axes:
        row[0].set_ylabel("mean accuracy\nover defenses")
    axes[0][-1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8, frameon=False, title="attack")
    fig.suptitle(title, fontsize=11, x=0.02, ha="left")
    fig.tight_layout()
    return _render(fig, name, caption)


#: Colours of the bars of :func:`threat_bars`, the same in every report.
THREAT_COLOURS = {"clean": "#9aa3b2", "transfer": "#1f77b4", "adaptive": "#d62728"}
_THREAT_BARS = (("clean", "clean_accuracy", "clean"), ("transfer", "transfer_accuracy", "transfer (worst)"),
                ("adaptive", "adaptive_accuracy", "adaptive (worst)"))


def threat_bars(board: pd.DataFrame, name: str, title: str, caption: str) -> Figure:
    """Per defense of a robustness board (``schema.ROBUSTNESS_BOARD`` rows, in rank order,
    the first at the top): horizontal bars of its clean, worst transfer and worst adaptive
    accuracy (:data:`THREAT_COLOURS`), each annotated; a side without attacks has no bar
    and a defense without adaptive attacks says so in its label."""
    plt = _pyplot()
    n = len(board)
    fig, ax = plt.subplots(figsize=(7.4, 1.1 + 0.62 * max(n, 1)))
    height = 0.26
    y = np.arange(n)
    for k, (key, column, label) in enumerate(_THREAT_BARS):
        values = board[column].to_numpy(dtype=np.float64) if n else np.zeros(0)
        pos = y + (k - 1) * height
        shown = np.isfinite(values)
        ax.barh(pos[shown], values[shown], height * 0.92, color=THREAT_COLOURS[key], label=label)
        for p, v in zip(pos[shown], values[shown]):
            ax.text(v + 0.008, p, f"{v:.2f}", va="center", ha="left", fontsize=7.5, color="#1d2430")
    labels = [str(d) + ("" if a > 0 else "\n(transfer only)") for d, a in zip(board["defense"], board["n_adaptive"])]
    ax.set_yticks(y, labels, fontsize=9)
    ax.set_ylim(n - 0.5, -0.5)  # rank 1 at the top
    ax.set_xlim(0, 1.08)
    ax.set_xlabel("accuracy (worst case over attacks, mean over repeats)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8, frameon=False, title="accuracy")
    ax.set_title(title, fontsize=11, loc="left")
    return _render(fig, name, caption)


#: Colours of the timeline's stages.
STAGE_COLOURS = {"train": "#4c72b0", "attack": "#dd8452", "score": "#55a868"}


def lanes(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """A lane per interval so that intervals of one lane never overlap (greedy, by start):
    the number of lanes is the most tasks that ran at once."""
    order = np.argsort(starts, kind="stable")
    free_at: list[float] = []  # per lane, when its last interval ends
    out = np.zeros(len(starts), dtype=int)
    for i in order:
        lane = next((k for k, t in enumerate(free_at) if t <= starts[i]), len(free_at))
        if lane == len(free_at):
            free_at.append(ends[i])
        else:
            free_at[lane] = ends[i]
        out[i] = lane
    return out


def timeline(tasks: pd.DataFrame, name: str, title: str, caption: str) -> Figure:
    """The tasks of a run (``schema.TIMELINE`` rows) as bars over seconds since the first
    one started: a band per stage (train, attack, score), one row of the band per task
    running at the same time; sweep invocations (a resumed run) are marked."""
    plt = _pyplot()
    t0 = tasks["started"].min()
    start = (tasks["started"] - t0).dt.total_seconds().to_numpy()
    end = np.maximum((tasks["finished"] - t0).dt.total_seconds().to_numpy(), start + 1e-3)
    stages = [s for s in STAGE_COLOURS if s in set(tasks["stage"])] + sorted(set(tasks["stage"]) - set(STAGE_COLOURS))
    bands, ticks, base = [], [], 0
    for stage in stages:
        mine = (tasks["stage"] == stage).to_numpy()
        lane = lanes(start[mine], end[mine])
        bands.append((stage, mine, base + lane))
        ticks.append((base + (lane.max() if lane.size else 0) / 2, f"{stage} ({mine.sum()})"))
        base += int(lane.max()) + 2 if lane.size else 1
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.18 * base))
    for stage, mine, rows in bands:
        ax.barh(rows, end[mine] - start[mine], left=start[mine], height=0.8,
                color=STAGE_COLOURS.get(stage, "#8c8c8c"), edgecolor="none")
    for _, first in tasks.groupby("invocation")["started"].min().sort_values().iloc[1:].items():
        ax.axvline((first - t0).total_seconds(), color="#444", lw=0.8, ls="--")
    ax.set_yticks([t for t, _ in ticks], [label for _, label in ticks])
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the first task started")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return _render(fig, name, caption)
