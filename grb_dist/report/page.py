"""The report as one self-contained HTML page: inline CSS, sortable leaderboards (a small
inline script) and figures embedded as base64 PNG. Pure: strings in, a string out."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from typing import Mapping, Sequence

import pandas as pd

from grb_dist.core.scenario import find_scenario
from grb_dist.leaderboard.rank import GRB_KINDS, TARGET_KIND, board_name, parse_name
from grb_dist.leaderboard.render import LEGENDS, SORT_SCRIPT, STYLE, html_cell, html_table, to_html
from grb_dist.report.figures import Figure
from grb_dist.report.tables import RunInfo

#: Sections of the page, by element id, in order (``adaptive`` only when the run has adaptive
#: rows, ``budget`` only when it sweeps budgets, ``timeline`` only when tasks were recorded).
SECTIONS = ("run", "leaderboards", "heatmaps", "adaptive", "difficulty", "budget", "timeline")
#: Sections of a study's page, by element id, in order (``table1`` and ``table2`` only when
#: the study has a Bayes reference, CSBM graphs).
STUDY_SECTIONS = ("study", "metrics", "table1", "table2", "figures")

_EXTRA_STYLE = """
h4 { font-size: 14px; margin: 18px 0 4px; color: #36405a; font-weight: 600; }
.pair { display: flex; flex-wrap: wrap; gap: 0 32px; align-items: flex-start; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(440px, 1fr)); gap: 4px 24px; align-items: start; }
.grid figure { margin: 8px 0 12px; } .note { color: #5a6478; font-size: 13px; margin: 2px 0 10px; }
"""

#: After the load event, every image's decoded size goes into ``data-natural-size`` and
#: the count of decoded images into the body's ``data-images-decoded``, so a headless
#: browser's DOM dump shows that the embedded figures really decode.
_IMAGE_CHECK_SCRIPT = """
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images), ok = 0;
  imgs.forEach(function (img) {
    img.setAttribute("data-natural-size", img.naturalWidth + "x" + img.naturalHeight);
    if (img.complete && img.naturalWidth > 0 && img.naturalHeight > 0) { ok += 1; }
  });
  document.body.setAttribute("data-images-decoded", String(ok));
});
"""

_READING = (f"<b>Attacks over defenses</b>: {html.escape(LEGENDS['attacks'])} <b>Defenses over attacks</b>: "
            f"{html.escape(LEGENDS['defenses'])} Click a column header to sort.")


@dataclass(frozen=True)
class AdaptiveView:
    """One scenario of the "Transfer vs adaptive" section: its robustness board (key and
    rows) and figures (bars, then the transfer matrix's heatmap when there is one)."""

    name: str
    board: pd.DataFrame
    figures: tuple[Figure, ...]


_ADAPTIVE_INTRO = ("Transfer attacks are made on surrogate models and replayed against each defense (the GRB "
                   "setting, as in the leaderboards above); adaptive attacks differentiate through the defense "
                   "itself (white box), which transfer-only evaluation never tries and so flatters defenses "
                   "(Mujkanovic et al., NeurIPS 2022). ")


def _adaptive(views: Sequence[AdaptiveView]) -> str:
    """The "Transfer vs adaptive" section: per scenario its bars, robustness table and
    transfer matrix."""
    parts = []
    for view in views:
        scenario, _, difficulty = parse_name(view.name)
        figures = "\n".join(_figure(f) for f in view.figures)
        parts.append(f'<section class="scenario" id="{html.escape(f"adaptive-{scenario}")}" '
                     f'data-scenario="{html.escape(scenario)}">\n<h3>Scenario: {html.escape(scenario)} '
                     f"({html.escape(difficulty)})</h3>\n{figures}\n"
                     f'{to_html(view.board, view.name, heading="h4", with_legend=False)}</section>')
    note = html.escape(_ADAPTIVE_INTRO + LEGENDS["robustness"] + " Transfer matrix: " + LEGENDS["transfer"])
    return (f'<section id="adaptive">\n<h2>Transfer vs adaptive</h2>\n<p class="note">{note}</p>\n'
            + "\n".join(parts) + "\n</section>")


def _meta_table(info: RunInfo) -> str:
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in info.rows)
    return f'<table class="meta">{rows}</table>'


def _leaderboards(boards: Mapping[str, pd.DataFrame]) -> str:
    """The GRB boards grouped by scenario (one sub-section each), in the order given; a
    per-target scenario's targets board under each difficulty's pair."""
    by_scenario: dict[str, list[str]] = {}
    for name in (n for n in boards if parse_name(n)[1] in GRB_KINDS):  # the others: section adaptive
        by_scenario.setdefault(parse_name(name)[0], []).append(name)
    parts = []
    for scenario, names in by_scenario.items():
        by_difficulty: dict[str, list[str]] = {}
        for name in names:
            by_difficulty.setdefault(parse_name(name)[2], []).append(name)
        tables = []
        for group in by_difficulty.values():  # the attack and defense boards side by side
            boxes = []
            for name in group:
                empty = '<p class="note">No attacked cells on this difficulty yet.</p>' if boards[name].empty else ""
                boxes.append(f'<div class="box">{to_html(boards[name], name, heading="h4", with_legend=False)}{empty}</div>')
            tables.append('<div class="pair">' + "".join(boxes) + "</div>")
            per_target = board_name(scenario, TARGET_KIND, parse_name(group[0])[2])
            if per_target in boards:  # a per-target scenario's board, under its pair, with its legend
                tables.append(f'<div class="box">{to_html(boards[per_target], per_target, heading="h4")}</div>')
        sid = html.escape(f"leaderboards-{scenario}")
        parts.append(f'<section class="scenario" id="{sid}" data-scenario="{html.escape(scenario)}">\n'
                     f"<h3>Scenario: {html.escape(scenario)}</h3>\n" + "\n".join(tables) + "</section>")
    return "\n".join(parts)


def _figure(fig: Figure) -> str:
    """A figure embedded as base64 PNG, with links to its files (the PDF when it has one)."""
    data = base64.b64encode(fig.png).decode("ascii")
    name = html.escape(fig.name)
    files = f'<a href="{name}.png">{name}.png</a>' + (f', <a href="{name}.pdf">{name}.pdf</a>' if fig.pdf else "")
    return (f'<figure id="fig-{name}">\n<img src="data:image/png;base64,{data}" alt="{html.escape(fig.caption)}">\n'
            f'<figcaption>{html.escape(fig.caption)} (files: {files})</figcaption>\n</figure>')


def frame_table(frame: pd.DataFrame, name: str, digits: int = 4) -> str:
    """Any table as a sortable ``<table class="board">`` (the leaderboards' style and sort
    script): text columns left-aligned, integers in full, other numbers to ``digits``
    significant digits, each with its exact value in ``data-value``; missing numbers print
    as ``-``."""
    numeric = {c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])
               and not pd.api.types.is_bool_dtype(frame[c])}
    integer = {c for c in numeric if pd.api.types.is_integer_dtype(frame[c])}
    head = "".join(f'<th class="{"num" if c in numeric else "text"}">{html.escape(str(c))}</th>'
                   for c in frame.columns)
    def cell(c, v) -> str:
        if c in numeric and pd.notna(v):
            return html_cell(f"{int(v):,}" if c in integer else f"{float(v):.{digits}g}", float(v))
        return html_cell("-" if c in numeric else str(v), None)

    return html_table(name, head, [[cell(c, v) for c, v in zip(frame.columns, row)]
                                   for row in frame.itertuples(index=False)])


def _section(sid: str, heading: str, intro: str, figures: Sequence[Figure], grid: bool = False) -> str:
    """A section of figures; ``grid`` lays narrow figures out side by side."""
    body = "\n".join(_figure(f) for f in figures) or '<p class="note">Nothing to draw for this run.</p>'
    if grid and figures:
        body = f'<div class="grid">\n{body}\n</div>'
    return f'<section id="{sid}">\n<h2>{heading}</h2>\n<p class="note">{intro}</p>\n{body}\n</section>'


def build_html(info: RunInfo, boards: Mapping[str, pd.DataFrame], heatmaps: Sequence[Figure],
               difficulty: Sequence[Figure], budget: Sequence[Figure] | None,
               timeline: Sequence[Figure] = (), adaptive: Sequence[AdaptiveView] = ()) -> str:
    """The report page. ``budget`` None leaves its section out (the run has one budget per
    attack), as an empty ``timeline`` does (a run made before timelines were recorded) and
    an empty ``adaptive`` (a run without adaptive rows)."""
    sections = [
        f'<section id="run">\n<h2>Run</h2>\n{_meta_table(info)}\n</section>',
        f'<section id="leaderboards">\n<h2>Leaderboards</h2>\n<p class="note">{_READING}</p>\n'
        f"{_leaderboards(boards)}\n</section>",
        _section("heatmaps", "Accuracy: attack x defense",
                 "Mean accuracy over repeats per scenario and difficulty; the first column is the clean accuracy, "
                 "attacks follow from the strongest (lowest mean accuracy).", heatmaps, grid=True),
        *([_adaptive(adaptive)] if adaptive else []),
        _section("difficulty", "Accuracy vs difficulty",
                 "Per defense, on the easy / medium / hard degree bands of the test nodes (GRB's split; low degree "
                 "is easy to attack).", difficulty),
    ]
    links = [("run", "Run"), ("leaderboards", "Leaderboards"), ("heatmaps", "Heatmaps"),
             *([("adaptive", "Transfer vs adaptive")] if adaptive else []), ("difficulty", "Difficulty")]
    if budget is not None:
        sections.append(_section("budget", "Accuracy vs budget",
                                 "Mean accuracy over defenses for attacks run with several budgets.", budget))
        links.append(("budget", "Budget"))
    if timeline:
        sections.append(_section("timeline", "Timeline",
                                 "Every task of the run's sweeps from the run's own records (timeline/): a task ends "
                                 "when the driver collected its result and starts the seconds its worker measured "
                                 "before; one row per task running at once; a dashed line marks a resumed sweep.",
                                 timeline))
        links.append(("timeline", "Timeline"))
    return document(info.title, subtitle(boards), links, sections)


def subtitle(boards: Mapping[str, pd.DataFrame]) -> str:
    """The page's subtitle: the protocol of each scenario the run holds, as the scenario
    describes itself (a scenario this process does not know: its name alone)."""
    present = dict.fromkeys(parse_name(key)[0] for key in boards)
    said = [f"{name}: {s.threat_model}" if (s := find_scenario(name)) else name for name in present]
    return (f"Graph Robustness Benchmark ({'; '.join(said)})" if said else "Graph Robustness Benchmark") + \
        ": every attack against every defense, per scenario and difficulty."


def document(title: str, subtitle: str, links: Sequence[tuple[str, str]], sections: Sequence[str]) -> str:
    """A whole page: the shared style, a header with ``title``, ``subtitle`` (HTML) and the
    ``(section id, text)`` navigation links, the ``sections`` (HTML), then the sort and
    image-check scripts."""
    nav = " ".join(f'<a href="#{sid}">{text}</a>' for sid, text in links)
    return (
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}{_EXTRA_STYLE}</style>\n</head>\n<body>\n"
        f'<header id="top">\n<h1>{html.escape(title)}</h1>\n<p class="muted">{subtitle}</p>\n'
        f"<nav>{nav}</nav>\n</header>\n" + "\n".join(sections) + "\n"
        f"<script>{SORT_SCRIPT}</script>\n<script>{_IMAGE_CHECK_SCRIPT}</script>\n</body>\n</html>\n"
    )


@dataclass(frozen=True)
class StudyTable:
    """One table of a study's page: the section it belongs to (one of
    :data:`STUDY_SECTIONS`), its name (``data-board``), heading and rows."""

    section: str
    name: str
    title: str
    frame: pd.DataFrame


_STUDY_NOTES = {
    "metrics": ("Reduced metrics", "Per model, attack, K and local budget (capped by the steps evaluated): R is "
                "the degree-corrected conventional robustness of the model f, R(f,g) its semantics-aware "
                "robustness (changes withstood before the reference g changes its decision), R(g) the "
                "reference's; R_adv = R(f,g) / R(g) (1 = as robust as the semantics allow), R_over = 1 - R(f,g) / R "
                "(share of f's robustness beyond semantic change), F1-rob their harmonic trade-off; violated: "
                "share of nodes whose reference decision changes within the budget. Click a header to sort."),
    "table1": ("Bayes accuracy", "Accuracy of the Bayes-optimal classifier on the new nodes, from the features "
               "alone (X) and with the structure (X, A)."),
    "table2": ("Semantic violations", "Share of the new nodes (degree > 0) whose Bayes decision changes within "
               "each local budget under l2-weak. table2 counts the nodes the Bayes classifier gets right (the "
               "paper's caption); table2_paper only those that the attacked MLP gets right too (the population "
               "of the paper's numbers)."),
}


def build_study_html(info: RunInfo, tables: Sequence[StudyTable], figures: Sequence[Figure]) -> str:
    """The page of a semantics-aware robustness study (Gosch et al. 2023): its metadata, reduced
    tables (sortable) and figures, with the run report's style and scripts."""
    sections = [f'<section id="study">\n<h2>Study</h2>\n{_meta_table(info)}\n</section>']
    links = [("study", "Study")]
    for sid in STUDY_SECTIONS[1:-1]:
        mine = [t for t in tables if t.section == sid]
        if not mine:
            continue
        heading, note = _STUDY_NOTES[sid]
        body = "\n".join(f"<h3>{html.escape(t.title)}</h3>\n{frame_table(t.frame, t.name)}" for t in mine)
        sections.append(f'<section id="{sid}">\n<h2>{heading}</h2>\n<p class="note">{html.escape(note)}</p>\n'
                        f"{body}\n</section>")
        links.append((sid, heading))
    sections.append(_section("figures", "Figures", "The study's figures, drawn from its Parquet rows.", figures))
    links.append(("figures", "Figures"))
    return document(info.title, "Semantics-aware robustness: robustness measured against a reference classifier "
                    "(the Bayes classifier on CSBM graphs), beyond which a perturbation changes the semantics.",
                    links, sections)
