"""Rendering leaderboards: Markdown, CSV, LaTeX, HTML and rich tables (results are data;
these are views).

Boards are keyed ``<scenario>/<kind>-<difficulty>`` (see :func:`~grb_dist.leaderboard.rank.board_name`).
Every renderer keeps one table per board; the long CSV is the one exception, a single
table whose ``scenario``, ``board`` and ``difficulty`` columns say which board a row is of.
The transfer board, stored in long form, is shown as a matrix (surrogates x defenses).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Mapping, Sequence

import pandas as pd

from grb_dist.core.text import csv_text
from grb_dist.leaderboard.rank import parse_name, transfer_matrix

if TYPE_CHECKING:  # rich is imported only by the terminal view
    from rich.table import Table

FORMATS = ("md", "csv", "latex", "html")

_ATTACK_COLS = [("Rank", "rank"), ("Attack", "attack"), ("Surrogate", "surrogate"), ("Average", "average"),
                ("Avg 3-Max", "avg_3_max"), ("Weighted", "weighted"), ("Defenses", "n_defenses"), ("Repeats", "n_repeats")]
_DEFENSE_COLS = [("Rank", "rank"), ("Defense", "defense"), ("Clean", "clean_accuracy"), ("Average", "average"),
                 ("Avg 3-Min", "avg_3_min"), ("Weighted", "weighted"), ("Attacks", "n_attacks"), ("Repeats", "n_repeats")]
_ROBUSTNESS_COLS = [("Rank", "rank"), ("Defense", "defense"), ("Clean", "clean_accuracy"),
                    ("Transfer", "transfer_accuracy"), ("Transfer attack", "transfer_attack"),
                    ("Adaptive", "adaptive_accuracy"), ("Adaptive attack", "adaptive_attack"), ("Gap", "gap"),
                    ("Robust", "robust_accuracy"), ("Adaptive attacks", "n_adaptive"), ("Note", "note")]
_TARGET_COLS = [("Rank", "rank"), ("Attack", "attack"), ("Surrogate", "surrogate"), ("Defense", "defense"),
                ("Clean", "clean_accuracy"), ("Accuracy", "accuracy"), ("Success", "success"),
                ("Margin", "margin_mean"), ("Targets", "n_targets"), ("Repeats", "n_repeats")]
_TEXT_KEYS = {"attack", "surrogate", "defense", "transfer_attack", "adaptive_attack", "note"}
#: Numbers of the robustness and targets boards that may be missing (printed ``-``);
#: ``gap`` and ``margin_mean`` are signed.
_OPTIONAL = {"transfer_accuracy", "adaptive_accuracy", "gap", "robust_accuracy", "margin_mean"}
_SIGNED = {"gap", "margin_mean"}

#: Columns of the long CSV, in order: which board, then the union of both boards' columns.
LONG_COLUMNS = ["scenario", "board", "difficulty", "rank", "attack", "surrogate", "defense", "clean_accuracy",
                "average_mean", "average_std", "avg_3_max_mean", "avg_3_max_std", "avg_3_min_mean", "avg_3_min_std",
                "weighted_mean", "weighted_std", "n_defenses", "n_attacks", "n_repeats"]
#: Columns the long CSV adds, after :data:`LONG_COLUMNS`, when it holds a robustness or a
#: transfer board (a run without adaptive rows keeps the GRB header).
ADAPTIVE_LONG_COLUMNS = ["transfer_accuracy", "transfer_attack", "adaptive_accuracy", "adaptive_attack", "gap",
                         "robust_accuracy", "accuracy_mean", "n_transfer", "n_adaptive", "note"]
#: Columns the long CSV adds, after those, when it holds a per-target scenario's board.
TARGET_LONG_COLUMNS = ["accuracy_mean", "accuracy_std", "success_mean", "success_std", "margin_mean", "n_targets"]
_INT_COLUMNS = ("rank", "n_defenses", "n_attacks", "n_repeats", "n_transfer", "n_adaptive", "n_targets")


def title(name: str) -> str:
    """The caption of a board: what is ranked, on which difficulty and scenario."""
    scenario, kind, difficulty = parse_name(name)
    if kind == "attacks":
        return f"Attacks over defenses ({difficulty}; {scenario}; accuracy, lower = stronger attack)"
    if kind == "robustness":
        return f"Transfer vs adaptive attacks ({difficulty}; {scenario}; accuracy, higher = more robust)"
    if kind == "transfer":
        return f"Transfer matrix, surrogate x defense ({difficulty}; {scenario}; accuracy, lower = stronger attacks)"
    if kind == "targets":
        return f"Attacks on each target ({difficulty}; {scenario}; success rate, higher = stronger attack)"
    return f"Defenses over attacks ({difficulty}; {scenario}; accuracy, higher = more robust)"


#: What a metric cell of one repeat shows: its mean alone (a standard deviation over one
#: repeat would print as 0.0000, which reads as no spread at all).
_ONE_REPEAT = " (the mean alone where Repeats is 1: a spread needs --repeats > 1)"

#: What the columns of each kind of board are: the legend under every view of a board.
LEGENDS = {
    "attacks": ("Ranked by Weighted, lowest first. Each value: the defenses' accuracy under the attack, mean ± std "
                f"over Repeats{_ONE_REPEAT}. Average: mean over the Defenses; Avg 3-Max: mean of the 3 highest (the most robust "
                "defenses); Weighted: accuracies sorted highest first, weighted 1/i² (GRB's weighted score); "
                "Defenses: defenses scored."),
    "defenses": ("Ranked by Weighted, highest first. Clean: accuracy without attack. Each other value: the "
                 f"defense's accuracy over the Attacks and Clean, mean ± std over Repeats{_ONE_REPEAT}. Average: their mean; "
                 "Avg 3-Min: mean of the 3 lowest (the strongest attacks); Weighted: accuracies sorted lowest first, "
                 "weighted 1/i² (GRB's weighted score); Attacks: attacks scored (Clean not counted)."),
    "robustness": ("Ranked by Robust, highest first, defenses attacked adaptively before those attacked by transfer "
                   "only (whose Robust is an upper bound). Clean: accuracy without attack; Transfer: the lowest "
                   "accuracy (mean over repeats) under an attack made on a surrogate model, named in Transfer "
                   "attack; Adaptive: the lowest under an attack made on the defense itself, named in Adaptive "
                   "attack; Gap: Transfer - Adaptive, what transfer-only evaluation overstates; Robust: the lower "
                   "of Transfer and Adaptive; Adaptive attacks: attacks run adaptively."),
    "targets": ("Ranked by Success, highest first. Each target attacked alone, with its own budget. Clean: the "
                "defense's accuracy on the same targets without attack; Accuracy: on the targets, each on the "
                "graph with its own flips; Success: of the targets the defense classifies correctly on the clean "
                "graph (margin above 0), the share it misclassifies after the attack (margin at most 0); both "
                f"mean ± std over Repeats{_ONE_REPEAT}; Margin: the defense's mean margin (logit of the label minus "
                "the highest other) after the attack, over targets and repeats, negative = misclassified; "
                "Targets: attacked nodes."),
    "transfer": ("Each cell: the accuracy of the defense (column) under the attacks made on the surrogate (row), "
                 "mean over those attacks and repeats; lower = the surrogate's attacks transfer better. Row "
                 "adaptive: each defense under attacks made on itself (mean over its adaptive attacks)."),
}


def legend(name: str) -> str:
    """The legend of board ``name``: which metric ranks, what each column is."""
    return LEGENDS[parse_name(name)[1]]


def file_stem(name: str) -> str:
    """A flat file name for a board (``injection-attacks-full``), for one file per board."""
    scenario, kind, difficulty = parse_name(name)
    return f"{scenario}-{kind}-{difficulty}"


_COLUMNS = {"attacks": _ATTACK_COLS, "defenses": _DEFENSE_COLS, "robustness": _ROBUSTNESS_COLS,
            "targets": _TARGET_COLS}


def _cell(r: pd.Series, key: str, columns: pd.Index, pm: str) -> tuple[str, float | None]:
    """One formatted cell and its numeric value (None for text): ``mean ± std`` with 4
    decimals for the metrics, the mean alone over one repeat (or without a std)."""
    if f"{key}_mean" in columns:
        mean, std = r[f"{key}_mean"], r[f"{key}_std"]
        if pd.isna(std) or ("n_repeats" in columns and r["n_repeats"] == 1):
            return f"{mean:.4f}", float(mean)
        return f"{mean:.4f}{pm}{std:.4f}", float(mean)
    if key == "clean_accuracy":
        return ("", None) if pd.isna(r[key]) else (f"{r[key]:.4f}", float(r[key]))
    if key in _OPTIONAL:
        return ("-", None) if pd.isna(r[key]) else (f"{r[key]:{'+' if key in _SIGNED else ''}.4f}", float(r[key]))
    if key in _TEXT_KEYS:
        return ("" if r[key] is None or (isinstance(r[key], float) and pd.isna(r[key])) else str(r[key])), None
    return str(r[key]), float(r[key])


def layout(board: pd.DataFrame, name: str, pm: str = " ± ") -> tuple[list[tuple[str, bool]],
                                                                      list[list[tuple[str, float | None]]]]:
    """The header (label, whether a text column) and the rows of ``(text, value)`` cells of a
    board (value None: text or missing); a transfer board as its matrix, a row per surrogate."""
    if parse_name(name)[1] == "transfer":
        m = transfer_matrix(board)
        header = [("Surrogate", True)] + [(str(c), False) for c in m.columns]
        rows = [[(str(i), None)] + [("-", None) if pd.isna(v) else (f"{v:.4f}", float(v)) for v in r]
                for i, r in zip(m.index, m.to_numpy())]
        return header, rows
    cols = _COLUMNS[parse_name(name)[1]]
    header = [(h, k in _TEXT_KEYS) for h, k in cols]
    return header, [[_cell(r, key, board.columns, pm) for _, key in cols] for _, r in board.iterrows()]


def cells(board: pd.DataFrame, name: str, pm: str = " ± ") -> tuple[list[str], list[list[str]]]:
    """Header and formatted rows of a board."""
    header, rows = layout(board, name, pm)
    return [h for h, _ in header], [[text for text, _ in r] for r in rows]


def to_markdown(board: pd.DataFrame, name: str) -> str:
    header, rows = cells(board, name)
    lines = [f"### {title(name)}", "", "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if not rows:
        lines.append("| " + " | ".join("" for _ in header) + " |")
    lines += ["", f"*{legend(name)}*"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- HTML

#: Inline style of the HTML views (the leaderboard page and the report).
STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d2430;
       max-width: 1240px; margin: 0 auto; padding: 24px 28px 64px; background: #fbfbfd; }
h1 { font-size: 26px; margin: 0 0 4px; } h2 { font-size: 20px; margin: 36px 0 8px; border-bottom: 2px solid #dfe3ea; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 22px 0 6px; color: #36405a; }
table.board { border-collapse: collapse; margin: 4px 0 14px; font-variant-numeric: tabular-nums; background: #fff;
              box-shadow: 0 1px 2px rgba(0,0,0,.06); }
table.board th, table.board td { padding: 4px 9px; border-bottom: 1px solid #e6e9ef; text-align: right; white-space: nowrap; }
table.board th { background: #eef1f6; font-weight: 600; cursor: pointer; user-select: none; }
table.board th:hover { background: #e1e6ef; }
table.board th.asc::after { content: " \\25B2"; font-size: 10px; } table.board th.desc::after { content: " \\25BC"; font-size: 10px; }
table.board td.text, table.board th.text { text-align: left; }
table.board tbody tr:nth-child(even) { background: #f7f8fb; }
table.meta td { padding: 2px 14px 2px 0; vertical-align: top; } table.meta td:first-child { color: #5a6478; }
code { font-size: 13px; background: #eef1f6; padding: 1px 4px; border-radius: 3px; }
figure { margin: 12px 0 24px; } figure img { max-width: 100%; height: auto; border: 1px solid #e6e9ef; background: #fff; }
figcaption { color: #5a6478; font-size: 13px; margin-top: 4px; }
nav a { margin-right: 14px; } .muted { color: #5a6478; }
"""

#: Inline script: a click on a header sorts its table by that column (numbers by the
#: ``data-value`` of their cells, text alphabetically); a second click reverses.
SORT_SCRIPT = """
document.querySelectorAll("table.board").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, col) {
    th.addEventListener("click", function () {
      var asc = !th.classList.contains("asc");
      table.querySelectorAll("th").forEach(function (h) { h.classList.remove("asc", "desc"); });
      th.classList.add(asc ? "asc" : "desc");
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col], y = b.cells[col], vx = x.dataset.value, vy = y.dataset.value, c;
        if (vx !== undefined && vy !== undefined) { c = parseFloat(vx) - parseFloat(vy); }
        else if (vx === undefined && vy === undefined) { c = x.textContent.localeCompare(y.textContent); }
        else { c = vx === undefined ? 1 : -1; }
        return asc ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


def html_cell(text: str, value: float | None) -> str:
    """A ``<td>``: numbers carry their exact value in ``data-value`` (sorting), text is
    left-aligned."""
    if value is None:
        return f'<td class="text">{html.escape(text)}</td>'
    return f'<td data-value="{value!r}">{html.escape(text)}</td>'


def html_table(name: str, head: str, rows: Sequence[Sequence[str]]) -> str:
    """A sortable ``<table class="board">`` of header cells ``head`` and rows of ``<td>``s."""
    body = "".join("<tr>" + "".join(tds) + "</tr>" for tds in rows)
    return (f'<table class="board" data-board="{html.escape(name)}">\n<thead><tr>{head}</tr></thead>\n'
            f"<tbody>{body}</tbody>\n</table>\n")


def to_html(board: pd.DataFrame, name: str, heading: str = "h3", with_legend: bool = True) -> str:
    """A board as a heading and a sortable ``<table class="board">`` (numeric cells carry
    their value in ``data-value``), with its :func:`legend` unless ``with_legend`` is false
    (a page that explains the boards once)."""
    header, body = layout(board, name)
    head = "".join(f'<th class="{"text" if text else "num"}">{html.escape(h)}</th>' for h, text in header)
    rows = [[html_cell(t, v) for t, v in r] for r in body]
    note = f'<p class="muted legend">{html.escape(legend(name))}</p>\n' if with_legend else ""
    return f"<{heading}>{html.escape(title(name))}</{heading}>\n" + html_table(name, head, rows) + note


def html_page(boards: Mapping[str, pd.DataFrame]) -> str:
    """A standalone, styled page of sortable tables."""
    tables = "\n".join(to_html(b, n) for n, b in boards.items())
    return (f"<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>grb-dist leaderboards</title>\n"
            f"<style>{STYLE}</style>\n</head>\n<body>\n<h1>grb-dist leaderboards</h1>\n{tables}\n"
            f"<script>{SORT_SCRIPT}</script>\n</body>\n</html>\n")


# --------------------------------------------------------------------------- LaTeX

_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped (``gcn_ln`` -> ``gcn\\_ln``)."""
    return "".join(_LATEX_ESCAPES.get(c, c) for c in str(text))


def to_latex(board: pd.DataFrame, name: str) -> str:
    """A board as a booktabs ``table`` (needs ``\\usepackage{booktabs}``)."""
    kinds = layout(board, name)[0]
    header, rows = cells(board, name, pm=" $\\pm$ ")
    align = "".join("l" if is_text else "r" for _, is_text in kinds)
    text_cols = {i for i, (_, is_text) in enumerate(kinds) if is_text}
    lines = ["\\begin{table}[htbp]", "\\centering", f"\\caption{{{latex_escape(title(name))}}}",
             f"\\label{{tab:{latex_escape(file_stem(name))}}}", f"\\begin{{tabular}}{{{align}}}", "\\toprule",
             " & ".join(latex_escape(h) for h in header) + " \\\\", "\\midrule"]
    for r in rows:  # metric cells hold $\pm$ on purpose; names are escaped
        lines.append(" & ".join(latex_escape(c) if i in text_cols else c for i, c in enumerate(r)) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- CSV


def to_csv(board: pd.DataFrame) -> str:
    """One board as one CSV table (its own columns; floats to 6 significant digits,
    :func:`~grb_dist.core.text.csv_text`)."""
    return csv_text(board)


def long_table(boards: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Every board in one long table with the columns :data:`LONG_COLUMNS`: ``scenario``,
    ``board`` (``attacks`` or ``defenses``) and ``difficulty`` say which board a row is of;
    columns a board does not have are empty."""
    parts = []
    for name, b in boards.items():
        scenario, kind, difficulty = parse_name(name)
        parts.append(b.assign(scenario=scenario, board=kind, difficulty=difficulty))
    parts = [p for p in parts if len(p)]
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    extra = any(parse_name(n)[1] in ("robustness", "transfer") for n in boards)
    targeted = any(parse_name(n)[1] == "targets" for n in boards)
    adaptive = ADAPTIVE_LONG_COLUMNS if extra else []
    out = out.reindex(columns=LONG_COLUMNS + adaptive + [c for c in TARGET_LONG_COLUMNS if targeted and c not in adaptive])
    for c in _INT_COLUMNS:
        if c in out:
            out[c] = out[c].astype("Int64")
    return out


def to_long_csv(boards: Mapping[str, pd.DataFrame]) -> str:
    """Every board as a single CSV table (see :func:`long_table`): one header line."""
    return csv_text(long_table(boards))


# --------------------------------------------------------------------------- terminal


def rich_tables(boards: Mapping[str, pd.DataFrame]) -> list["Table"]:
    """The boards as rich tables, for a terminal."""
    from rich.table import Table
    from rich.text import Text  # names are shown as they are, never read as rich markup

    out = []
    for name, board in boards.items():
        header, rows = layout(board, name)
        t = Table(title=Text(title(name)), title_justify="left", header_style="bold", caption=Text(legend(name)),
                  caption_justify="left", caption_style="dim")
        for h, is_text in header:
            t.add_column(Text(h), justify="left" if is_text else "right", no_wrap=True)
        for r in rows:
            t.add_row(*(Text(text) for text, _ in r))
        out.append(t)
    return out


def render(boards: Mapping[str, pd.DataFrame], fmt: str = "md") -> str:
    """All ``boards`` in one document of format ``md``, ``csv`` (the long table of
    :func:`long_table`), ``latex`` (one booktabs table per board) or ``html`` (a page)."""
    if fmt == "md":
        return "\n".join(to_markdown(b, n) for n, b in boards.items())
    if fmt == "html":
        return html_page(boards)
    if fmt == "csv":
        return to_long_csv(boards)
    if fmt == "latex":
        return "% grb-dist leaderboards; needs \\usepackage{booktabs}\n\n" + "\n".join(
            to_latex(b, n) for n, b in boards.items())
    from grb_dist.core.errors import ConfigError

    raise ConfigError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
