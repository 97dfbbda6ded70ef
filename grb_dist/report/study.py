"""The report of a semantics-aware robustness study (Gosch et al. 2023, ``grb-dist study``): the
same kind of self-contained HTML page as a run's report, with the study's settings, its reduced
tables (R, R_adv, R_over, F1-rob per model, attack, K and budget; Bayes accuracy; Table 2)
and its figures embedded as PNG.

Everything is computed from the study directory's Parquet rows (``nodes/``) and its
``study.json``, with the study's own reductions (:mod:`grb_dist.semantics.tables`) and
figures (:mod:`grb_dist.semantics.plots`), so the page shows what ``grb-dist study-plot``
would write. :func:`is_study_dir` tells a study directory from a sweep's run directory.
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from grb_dist.core.errors import ConfigError, GrbDistError
from grb_dist.report import Report
from grb_dist.report.figures import Figure
from grb_dist.report.page import StudyTable, build_study_html
from grb_dist.report.tables import RunInfo, environment

#: The reduced metrics shown per (model, attack, K, budget), with their column headings.
METRIC_COLUMNS = {"model": "model", "attack": "attack", "K": "K", "budget": "budget", "R": "R", "R_fg": "R(f,g)",
                  "R_g": "R(g)", "R_adv": "R_adv", "R_over": "R_over", "F1_rob": "F1-rob", "violated": "violated",
                  "nodes": "nodes"}
#: The study's figures: (plot function name in grb_dist.semantics.plots, figure name, caption).
STUDY_FIGURES = (
    ("plot_over_robustness", "study-over-robustness",
     "R_over against K per model (l2-weak, budget deg(v)); mean and standard error over graphs."),
    ("plot_degree_robustness", "study-degree-robustness",
     "Mean robustness by node degree per model (l2-weak, no budget bound), with the Bayes classifier's "
     "robustness as the semantic boundary."),
    ("plot_degree_boxplot", "study-degree-boxplot",
     "Robustness by degree (largest over target classes per node; l2-weak-class, no budget bound)."),
)


def is_study_dir(path: str | Path) -> bool:
    """Whether ``path`` is a study directory (``grb-dist study`` writes ``nodes/`` and
    ``study.json`` into it; a sweep's run directory has neither)."""
    path = Path(path)
    return (path / "nodes").is_dir() and (path / "study.json").is_file()


def read_study_spec(directory: Path) -> dict[str, Any]:
    """The study's settings as written in ``study.json`` (empty when unreadable)."""
    try:
        spec = json.loads((directory / "study.json").read_text())
    except (OSError, ValueError):
        return {}
    return spec if isinstance(spec, dict) else {}


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "-"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_text(v) if not isinstance(v, Mapping) else json.dumps(v, sort_keys=True)}"
                         for k, v in value.items()) or "-"
    return "-" if value is None else str(value)


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def study_info(directory: Path, spec: Mapping[str, Any], nodes: pd.DataFrame, env: Mapping[str, str],
               generated_at: dt.datetime) -> RunInfo:
    """The study's metadata: its settings, what its rows hold, versions and dates."""
    units = [p for p in (directory / "nodes").glob("*.parquet") if not p.name.startswith(".")]
    written = max((p.stat().st_mtime for p in units), default=None)
    name = str(spec.get("study") or directory.name)
    rows = [
        ("Study", name),
        ("Directory", str(directory)),
        ("Graph", _text(spec.get("graph"))),
        ("K values", _text(sorted(nodes["K"].dropna().unique().tolist()) or spec.get("K"))),
        ("Graphs per K", _text(spec.get("graphs"))),
        ("New nodes per graph", _text(spec.get("nodes"))),
        ("Reference classifier", _text(spec.get("reference"))),
        ("Models", _text(sorted(nodes["model"].unique().tolist()))),
        ("Attacks", _text(sorted(nodes["attack"].unique().tolist()))),
        ("Budgets", _text(spec.get("budgets"))),
        ("Most edges per attack (max_steps)", _text(spec.get("max_steps"))),
        ("Seed", _text(spec.get("seed"))),
        ("Training", _text(spec.get("train"))),
        ("Units written (nodes/*.parquet)", f"{len(units):,}"),
        ("Node rows", f"{len(nodes):,}"),
        ("Report made with", ", ".join(f"{k} {v}" for k, v in env.items())),
        ("Units last written", _when(written)),
        ("Report date", generated_at.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
    ]
    return RunInfo(title=f"grb-dist study report: {name}", rows=rows)


def study_tables(nodes: pd.DataFrame, budgets: tuple[str, ...]) -> list[StudyTable]:
    """The reduced tables of the study's rows: the metrics per attack (one table each),
    Table 1 (Bayes accuracy per K, CSBM studies) and Table 2 (semantic violations per K and
    budget), those the rows allow."""
    from grb_dist.semantics.tables import TABLE2_POPULATIONS, metrics_table, table1, table2, table2_wide

    out = []
    metrics = metrics_table(nodes, budgets)
    if not metrics.empty:
        order = {b: i for i, b in enumerate(budgets)}
        metrics = (metrics.assign(_b=metrics["budget"].map(order))
                   .sort_values(["attack", "model", "K", "_b"], kind="stable"))
        for attack, part in metrics.groupby("attack", sort=True):
            frame = part[[c for c in METRIC_COLUMNS if c in part.columns]].rename(columns=METRIC_COLUMNS)
            out.append(StudyTable("metrics", f"metrics-{attack}", f"Attack: {attack}", frame))
    t1 = table1(nodes)
    if not t1.empty:
        out.append(StudyTable("table1", "table1", "Table 1: Bayes classifier accuracy per K",
                              t1.rename(columns={"bayes_x": "Bayes (X)", "bayes_xa": "Bayes (X, A)"})))
    for population, (name, counted) in TABLE2_POPULATIONS.items():
        t2 = table2(nodes, budgets, population=population)
        if not t2.empty:
            out.append(StudyTable("table2", name.removesuffix(".csv"),
                                  f"Table 2 ({name}): share of new nodes whose Bayes decision changes within each "
                                  f"budget (l2-weak), per budget and K; counted: {counted}", table2_wide(t2)))
    return out


def study_figures(nodes: pd.DataFrame) -> list[Figure]:
    """The study's figures (those its rows allow), rendered by :mod:`grb_dist.semantics.plots`
    into a temporary directory and read back as PNG bytes."""
    from grb_dist.semantics import plots

    out = []
    with tempfile.TemporaryDirectory(prefix="grb-dist-study-") as tmp:
        for function, name, caption in STUDY_FIGURES:
            path = getattr(plots, function)(nodes, Path(tmp) / f"{name}.png")
            if path is not None:
                out.append(Figure(name, caption, Path(path).read_bytes(), b""))
    return out


def build_study_report(directory: str | Path, *, env: Mapping[str, str] | None = None,
                       generated_at: dt.datetime | None = None) -> Report:
    """The report of the study in ``directory`` (see :func:`is_study_dir`)."""
    from grb_dist.semantics.tables import read_nodes, study_budgets

    directory = Path(directory)
    if not is_study_dir(directory):
        raise ConfigError(f"{directory} is not a study directory (no nodes/ and study.json inside)")
    nodes = read_nodes(directory)
    if nodes.empty:
        raise GrbDistError(f"the study {directory} has no rows yet; run grb-dist study first")
    now = generated_at or dt.datetime.now(dt.timezone.utc)
    info = study_info(directory, read_study_spec(directory), nodes, env if env is not None else environment(), now)
    figures = study_figures(nodes)
    page = build_study_html(info, study_tables(nodes, study_budgets(directory)), figures)
    return Report(page, tuple(figures))


__all__ = ["METRIC_COLUMNS", "STUDY_FIGURES", "build_study_report", "is_study_dir", "study_figures", "study_info",
           "study_tables"]
