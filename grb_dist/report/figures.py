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


def heatmap(matrix: pd.DataFrame, name: str, title: str, caption: str) -> Figure:
    """Defenses x attacks accuracy heatmap (0 to 1, annotated), the clean column first and
    set apart by a line."""
    plt = _pyplot()
    values = matrix.to_numpy(dtype=np.float64)
    n_rows, n_cols = values.shape
    fig, ax = plt.subplots(figsize=(2.2 + 0.78 * n_cols, 1.3 + 0.36 * n_rows))
    im = ax.imshow(np.ma.masked_invalid(values), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(n_cols), [str(c) for c in matrix.columns], rotation=35, ha="right")
    ax.set_yticks(range(n_rows), [str(i) for i in matrix.index])
    ax.set_xlabel("attack")
    ax.set_ylabel("defense")
    ax.set_title(title, fontsize=11, loc="left")
    if n_cols > 1:
        ax.axvline(0.5, color="white", linewidth=3)
    if n_rows * n_cols <= 600:
        for i in range(n_rows):
            for j in range(n_cols):
                v = values[i, j]
                if np.isfinite(v):
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8,
                            color="black" if v > 0.6 else "white")
    fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02, label="accuracy")
    return _render(fig, name, caption)


def difficulty_lines(curves: Mapping[str, pd.DataFrame], name: str, title: str, caption: str) -> Figure:
    """Accuracy per degree band (easy, medium, hard), one line per defense; one panel for
    the clean accuracy and one for the mean accuracy under attack (those present)."""
    plt = _pyplot()
    panels = [(k, t) for k, t in (("clean", "clean"), ("attacked", "under attack (mean over attacks, repeats)"))
              if k in curves]
    defenses = sorted(set().union(*(set(curves[k].index) for k, _ in panels)))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels) + 2.2, 3.6), sharey=True, squeeze=False)
    cmap = plt.get_cmap("tab20" if len(defenses) > 10 else "tab10")
    for ax, (key, panel_title) in zip(axes[0], panels):
        table = curves[key]
        x = np.arange(len(table.columns))
        for i, defense in enumerate(defenses):
            if defense in table.index:
                ax.plot(x, table.loc[defense].to_numpy(dtype=np.float64), marker="o", linewidth=1.6,
                        color=cmap(i % cmap.N), label=str(defense))
        ax.set_xticks(x, [str(c) for c in table.columns])
        ax.set_xlim(-0.3, len(x) - 0.7)
        ax.set_title(panel_title, fontsize=10)
        ax.set_xlabel("difficulty (test-node degree band)")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("accuracy")
    axes[0][-1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8, frameon=False, title="defense")
    fig.suptitle(title, fontsize=11, x=0.02, ha="left")
    fig.tight_layout()
    return _render(fig, name, caption)


def budget_lines(curves: Mapping[str, pd.DataFrame], name: str, title: str, caption: str,
                 xlabel: str = "injected nodes") -> Figure:
    """Mean accuracy over defenses against the attack budget (``xlabel``: injected nodes, or
    the share of edges flipped), one line per attack, one panel per difficulty."""
    plt = _pyplot()
    items = list(curves.items())
    ncols = min(2, len(items))
    nrows = -(-len(items) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols + 1.6, 3.2 * nrows), sharey=True, squeeze=False)
    for ax in axes.flat[len(items):]:
        ax.set_visible(False)
    for ax, (difficulty, table) in zip(axes.flat, items):
        for column in table.columns:
            series = table[column].dropna()
            ax.plot(series.index.to_numpy(), series.to_numpy(dtype=np.float64), marker="o", linewidth=1.6,
                    label=str(column))
        ax.set_title(str(difficulty), fontsize=10)
        ax.set_xlabel(xlabel)
        ax.grid(True, alpha=0.3)
    for row in axes:
        row[0].set_ylabel("mean accuracy\nover defenses")
    axes[0][-1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8, frameon=False, title="attack")
    fig.suptitle(title, fontsize=11, x=0.02, ha="left")
    fig.tight_layout()
    return _render(fig, name, caption)
