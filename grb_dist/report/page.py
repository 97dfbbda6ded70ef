"""The report as one self-contained HTML page: inline CSS, sortable leaderboards (a small
inline script) and figures embedded as base64 PNG. Pure: strings in, a string out."""

from __future__ import annotations

import base64
import html
from typing import Mapping, Sequence

import pandas as pd

from grb_dist.leaderboard.rank import parse_name
from grb_dist.leaderboard.render import SORT_SCRIPT, STYLE, to_html
from grb_dist.report.figures import Figure
from grb_dist.report.tables import RunInfo

#: Sections of the page, by element id, in order (``budget`` only when the run sweeps budgets).
SECTIONS = ("run", "leaderboards", "heatmaps", "difficulty", "budget")

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

_READING = ("Attacks over defenses: for each (attack, surrogate) and repeat, the accuracies of every defense give "
            "Average, Avg 3-Max (mean of the 3 highest) and Weighted (sorted descending, weights 1/i&sup2;); lower "
            "is a stronger attack. Defenses over attacks: the accuracies under every attack plus the clean one give "
            "Average, Avg 3-Min and Weighted (sorted ascending); higher is more robust. Values are mean &plusmn; "
            "standard deviation over repeats. Click a column header to sort.")


def _meta_table(info: RunInfo) -> str:
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in info.rows)
    return f'<table class="meta">{rows}</table>'


def _leaderboards(boards: Mapping[str, pd.DataFrame]) -> str:
    """Boards grouped by scenario (one sub-section each), in the order given."""
    by_scenario: dict[str, list[str]] = {}
    for name in boards:
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
                boxes.append(f'<div class="box">{to_html(boards[name], name, heading="h4")}{empty}</div>')
            tables.append('<div class="pair">' + "".join(boxes) + "</div>")
        sid = html.escape(f"leaderboards-{scenario}")
        parts.append(f'<section class="scenario" id="{sid}" data-scenario="{html.escape(scenario)}">\n'
                     f"<h3>Scenario: {html.escape(scenario)}</h3>\n" + "\n".join(tables) + "</section>")
    return "\n".join(parts)


def _figure(fig: Figure) -> str:
    data = base64.b64encode(fig.png).decode("ascii")
    name = html.escape(fig.name)
    return (f'<figure id="fig-{name}">\n<img src="data:image/png;base64,{data}" alt="{html.escape(fig.caption)}">\n'
            f'<figcaption>{html.escape(fig.caption)} (files: <a href="{name}.png">{name}.png</a>, '
            f'<a href="{name}.pdf">{name}.pdf</a>)</figcaption>\n</figure>')


def _section(sid: str, heading: str, intro: str, figures: Sequence[Figure], grid: bool = False) -> str:
    """A section of figures; ``grid`` lays narrow figures out side by side."""
    body = "\n".join(_figure(f) for f in figures) or '<p class="note">Nothing to draw for this run.</p>'
    if grid and figures:
        body = f'<div class="grid">\n{body}\n</div>'
    return f'<section id="{sid}">\n<h2>{heading}</h2>\n<p class="note">{intro}</p>\n{body}\n</section>'


def build_html(info: RunInfo, boards: Mapping[str, pd.DataFrame], heatmaps: Sequence[Figure],
               difficulty: Sequence[Figure], budget: Sequence[Figure] | None) -> str:
    """The report page. ``budget`` None leaves its section out (the run has one budget per
    attack)."""
    sections = [
        f'<section id="run">\n<h2>Run</h2>\n{_meta_table(info)}\n</section>',
        f'<section id="leaderboards">\n<h2>Leaderboards</h2>\n<p class="note">{_READING}</p>\n'
        f"{_leaderboards(boards)}\n</section>",
        _section("heatmaps", "Accuracy: attack x defense",
                 "Mean accuracy over repeats per scenario and difficulty; the first column is the clean accuracy, "
                 "attacks follow from the strongest (lowest mean accuracy).", heatmaps, grid=True),
        _section("difficulty", "Accuracy vs difficulty",
                 "Per defense, on the easy / medium / hard degree bands of the test nodes (GRB's split; low degree "
                 "is easy to attack).", difficulty),
    ]
    links = [("run", "Run"), ("leaderboards", "Leaderboards"), ("heatmaps", "Heatmaps"),
             ("difficulty", "Difficulty")]
    if budget is not None:
        sections.append(_section("budget", "Accuracy vs budget",
                                 "Mean accuracy over defenses for attacks run with several budgets.", budget))
        links.append(("budget", "Budget"))
    nav = " ".join(f'<a href="#{sid}">{text}</a>' for sid, text in links)
    return (
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{html.escape(info.title)}</title>\n<style>{STYLE}{_EXTRA_STYLE}</style>\n</head>\n<body>\n"
        f'<header id="top">\n<h1>{html.escape(info.title)}</h1>\n'
        '<p class="muted">Graph Robustness Benchmark: black-box, inductive, evasion; every attack against every '
        "defense, per scenario and difficulty.</p>\n"
        f"<nav>{nav}</nav>\n</header>\n" + "\n".join(sections) + "\n"
        f"<script>{SORT_SCRIPT}</script>\n<script>{_IMAGE_CHECK_SCRIPT}</script>\n</body>\n</html>\n"
    )
