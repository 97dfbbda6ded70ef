"""Rendering leaderboards: Markdown, CSV and HTML (results are data; these are views)."""

from __future__ import annotations

import html
from typing import Mapping

import pandas as pd

FORMATS = ("md", "csv", "html")

_ATTACK_COLS = [("Rank", "rank"), ("Attack", "attack"), ("Surrogate", "surrogate"), ("Average", "average"),
                ("Avg 3-Max", "avg_3_max"), ("Weighted", "weighted"), ("Defenses", "n_defenses"), ("Repeats", "n_repeats")]
_DEFENSE_COLS = [("Rank", "rank"), ("Defense", "defense"), ("Clean", "clean_accuracy"), ("Average", "average"),
                 ("Avg 3-Min", "avg_3_min"), ("Weighted", "weighted"), ("Attacks", "n_attacks"), ("Repeats", "n_repeats")]


def title(name: str) -> str:
    kind, _, difficulty = name.partition("-")
    if kind == "attacks":
        return f"Attacks over defenses ({difficulty}; accuracy, lower = stronger attack)"
    return f"Defenses over attacks ({difficulty}; accuracy, higher = more robust)"


def cells(board: pd.DataFrame, name: str) -> tuple[list[str], list[list[str]]]:
    """Header and formatted rows: ``mean ± std`` with 4 decimals for the metrics."""
    cols = _ATTACK_COLS if name.startswith("attacks") else _DEFENSE_COLS
    header = [h for h, _ in cols]
    rows = []
    for _, r in board.iterrows():
        row = []
        for _, key in cols:
            if f"{key}_mean" in board.columns:
                row.append(f"{r[f'{key}_mean']:.4f} ± {r[f'{key}_std']:.4f}")
            elif key == "clean_accuracy":
                row.append("" if pd.isna(r[key]) else f"{r[key]:.4f}")
            else:
                row.append(str(r[key]))
        rows.append(row)
    return header, rows


def to_markdown(board: pd.DataFrame, name: str) -> str:
    header, rows = cells(board, name)
    lines = [f"### {title(name)}", "", "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if not rows:
        lines.append("| " + " | ".join("" for _ in header) + " |")
    return "\n".join(lines) + "\n"


def to_html(board: pd.DataFrame, name: str) -> str:
    header, rows = cells(board, name)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<h3>{html.escape(title(name))}</h3>\n<table>\n<thead><tr>{head}</tr></thead>\n<tbody>{body}</tbody>\n</table>\n"


def render(boards: Mapping[str, pd.DataFrame], fmt: str = "md") -> str:
    """All ``boards`` in one document of format ``md``, ``csv`` (raw numbers, a ``board``
    column names the table) or ``html``."""
    if fmt == "md":
        return "\n".join(to_markdown(b, n) for n, b in boards.items())
    if fmt == "html":
        return "<!doctype html>\n<meta charset=\"utf-8\">\n" + "\n".join(to_html(b, n) for n, b in boards.items())
    if fmt == "csv":
        return "".join(b.assign(board=n).to_csv(index=False) for n, b in boards.items())
    from grb_dist.errors import ConfigError

    raise ConfigError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
