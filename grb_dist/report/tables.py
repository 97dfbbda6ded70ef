"""The numbers behind the report's figures and its metadata, as pure functions of a scores
table (``schema.SCORES`` columns) and a run manifest.

Every function works within one scenario at a time and for any set of scenario values:
each scenario has its own clean rows (attack ``none``), attacks and budgets. The figures of
the GRB setting (heatmaps, difficulty and budget curves) are drawn from the transfer rows
(:func:`~grb_dist.leaderboard.rank.transfer_rows`), as the GRB leaderboards are; adaptive
rows have their own section.
"""

from __future__ import annotations

import datetime as dt
import platform
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Mapping

import pandas as pd

from grb_dist.core.names import DIFFICULTIES
from grb_dist.leaderboard.rank import CLEAN, adaptive_rows, of_scenario, scenarios_of, transfer_rows

#: Column name of the clean accuracy in an accuracy matrix (always the first column).
CLEAN_COLUMN = "clean"
#: The degree bands, the x axis of the accuracy-vs-difficulty figure (``full`` is their union).
BANDS = tuple(d for d in DIFFICULTIES if d != "full")


def difficulties_of(scores: pd.DataFrame) -> list[str]:
    """Difficulties present in ``scores``, in the GRB order easy, medium, hard, full."""
    present = set(scores["difficulty"].unique()) if len(scores) else set()
    return [d for d in DIFFICULTIES if d in present] + sorted(present.difference(DIFFICULTIES))


def report_difficulty(difficulties: list[str]) -> str | None:
    """The one difficulty a per-scenario figure of the report shows: ``full`` when present
    (every test node), else the last in GRB order (as the end of a sweep picks its boards)."""
    return "full" if "full" in difficulties else (difficulties[-1] if difficulties else None)


def _attack_labels(attacked: pd.DataFrame) -> pd.Series:
    """A column label per attacked row: the attack, with its surrogate when the scenario
    has several surrogates (each pair is a leaderboard row of its own)."""
    if attacked["surrogate"].nunique() > 1:
        return attacked["attack"].astype(str) + " (" + attacked["surrogate"].astype(str) + ")"
    return attacked["attack"].astype(str)


def accuracy_matrix(scores: pd.DataFrame, scenario: str, difficulty: str) -> pd.DataFrame:
    """Defenses (rows) x attacks (columns) mean accuracy over repeats on ``difficulty`` of
    ``scenario``; the first column is the clean accuracy. Rows are ordered by clean accuracy
    (best first), attack columns by their mean accuracy (strongest attack first)."""
    _, df = of_scenario(scores, scenario)
    df = df[df["difficulty"] == difficulty]
    if df.empty:
        return pd.DataFrame()
    clean = df[df["attack"] == CLEAN].groupby("defense")["accuracy"].mean().rename(CLEAN_COLUMN)
    attacked = df[df["attack"] != CLEAN]
    if len(attacked):
        matrix = (attacked.assign(column=_attack_labels(attacked))
                  .pivot_table(index="defense", columns="column", values="accuracy", aggfunc="mean"))
        matrix = matrix[matrix.mean(axis=0).sort_values(kind="stable").index]
    else:
        matrix = pd.DataFrame(index=sorted(df["defense"].unique()))
    out = pd.concat([clean, matrix], axis=1)
    out.index.name, out.columns.name = "defense", None
    order = out[CLEAN_COLUMN].fillna(-1.0) if CLEAN_COLUMN in out else pd.Series(0.0, index=out.index)
    return out.loc[order.sort_values(ascending=False, kind="stable").index]


def difficulty_curves(scores: pd.DataFrame, scenario: str) -> dict[str, pd.DataFrame]:
    """Per defense (rows) and degree band (columns easy, medium, hard present): the clean
    accuracy (``"clean"``) and the mean accuracy under every attack, surrogate and repeat
    (``"attacked"``). Empty dict when the scenario holds none of the bands."""
    _, df = of_scenario(scores, scenario)
    df = df[df["difficulty"].isin(BANDS)]
    if df.empty:
        return {}
    bands = [b for b in BANDS if b in set(df["difficulty"])]
    out = {}
    for key, part in (("clean", df[df["attack"] == CLEAN]), ("attacked", df[df["attack"] != CLEAN])):
        if len(part):
            out[key] = (part.pivot_table(index="defense", columns="difficulty", values="accuracy", aggfunc="mean")
                        .reindex(columns=bands))
    return out


#: Separator of a budget-axis attack name, ``<attack>@<budget>`` (as ``grb_dist.attacks.BUDGET_SEP``;
#: not imported from there, which would import torch).
BUDGET_SEP = "@"


def with_budgets(attacked: pd.DataFrame) -> pd.DataFrame:
    """Attacked rows with two more columns: ``base`` (the attack; ``fgsm`` for a budget-axis
    entry ``fgsm@20``) and ``budget`` (the value after ``@``, else ``n_injected``)."""
    name = attacked["attack"].astype(str)
    parts = name.str.partition(BUDGET_SEP)
    value = pd.to_numeric(parts[2], errors="coerce")
    axis = (parts[1] == BUDGET_SEP) & value.notna()
    injected = attacked["n_injected"].astype("float64") if "n_injected" in attacked else float("nan")
    return attacked.assign(base=parts[0].where(axis, name), budget=value.where(axis, injected))


def figure_names(scores: pd.DataFrame) -> set[str]:
    """Every name a figure of the report may draw: defenses, attacks (a budget axis's
    ``fgsm@20`` as ``fgsm``) and ``attack (surrogate)`` labels; the keys of the report's
    palette (:func:`grb_dist.report.figures.palette`)."""
    names = set(scores["defense"].astype(str))
    attacked = scores[scores["attack"] != CLEAN]
    if len(attacked):
        base = with_budgets(attacked)["base"].astype(str)
        names |= set(base) | set(base + " (" + attacked["surrogate"].astype(str) + ")")
    return names


def has_budget_sweep(scores: pd.DataFrame) -> bool:
    """Whether some attack of some scenario and difficulty was run with several budgets
    (``<attack>@<budget>`` entries of a budget axis, or a varying ``n_injected``): only then
    is a budget curve worth drawing."""
    attacked = scores[scores["attack"] != CLEAN]
    if attacked.empty:
        return False
    keys = [k for k in ("scenario", "difficulty", "surrogate") if k in attacked.columns] + ["base"]
    return bool((with_budgets(attacked).groupby(keys)["budget"].nunique() > 1).any())


def budget_curves(scores: pd.DataFrame, scenario: str) -> dict[str, pd.DataFrame]:
    """Per difficulty where some attack has several budgets: mean accuracy over defenses and
    repeats, budgets (rows: the values of ``<attack>@<budget>`` entries, else ``n_injected``)
    x attacks (columns, ``fgsm@20`` and ``fgsm@40`` both in column ``fgsm``); only those
    attacks."""
    _, df = of_scenario(scores, scenario)
    attacked = df[df["attack"] != CLEAN]
    out = {}
    for d in difficulties_of(attacked):
        part = with_budgets(attacked[attacked["difficulty"] == d])
        part = part.assign(column=_attack_labels(part.assign(attack=part["base"])))
        swept = part.groupby("column")["budget"].nunique()
        part = part[part["column"].isin(swept[swept > 1].index)]
        if len(part):
            table = part.pivot_table(index="budget", columns="column", values="accuracy", aggfunc="mean")
            if table.index.to_series().mod(1).eq(0).all():
                table.index = table.index.astype("int64")  # node counts stay integers
            table.index.name = "budget"
            out[d] = table
    return out


# --------------------------------------------------------------------------- metadata


def environment() -> dict[str, str]:
    """Versions of the software producing the report (package metadata only: nothing heavy
    is imported)."""
    from grb_dist.core.version import __version__

    out = {"grb-dist": __version__, "python": platform.python_version()}
    for name in ("torch", "ray", "torch-geometric", "pandas", "pyarrow"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


@dataclass(frozen=True)
class RunInfo:
    """What the report says about the run, as (label, value) rows per group."""

    title: str
    rows: list[tuple[str, str]]


def _joined(values) -> str:
    vals = sorted({str(v) for v in values if v is not None and not (isinstance(v, float) and pd.isna(v))})
    return ", ".join(vals) if vals else "-"


def _when(value: Any) -> str:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "-"
    ts = pd.Timestamp(value)
    if ts.tzinfo is None:
        ts = ts.tz_localize("UTC")
    return ts.tz_convert("UTC").strftime("%Y-%m-%d %H:%M UTC")


def run_info(scores: pd.DataFrame, manifest: Mapping[str, Any], env: Mapping[str, str],
             generated_at: dt.datetime) -> RunInfo:
    """The run's metadata: dataset (label, source, fingerprint, size), configuration hashes,
    versions (of the run's writer, from the manifest and the score rows, and of the report's
    environment), dates and the number of cells per scenario."""
    ds = manifest.get("dataset", {}) or {}
    label = str(ds.get("label") or _joined(scores.get("dataset", [])))
    size = ", ".join(f"{ds[k]:,} {w}" for k, w in (("num_nodes", "nodes"), ("num_edges", "edges"),
                                                   ("num_features", "features"), ("num_classes", "classes"))
                     if isinstance(ds.get(k), int))
    per_scenario = ", ".join(f"{s} {len(of_scenario(scores, s)[1]):,}" for s in scenarios_of(scores))
    attacked = scores[scores["attack"] != CLEAN]
    adaptive = adaptive_rows(scores)
    attacked = transfer_rows(attacked)
    run_env = manifest.get("environment") or {}
    rows = [
        ("Dataset", label + (f" ({ds['source']})" if ds.get("source") and ds.get("source") != label else "")),
        ("Dataset fingerprint", str(ds.get("fingerprint") or _joined(scores.get("dataset_fingerprint", [])))),
        ("Dataset size", size or "-"),
        ("Normalisation, data seed", f"{ds.get('normalize', '-')}, {ds.get('data_seed', '-')}"),
        ("Config hash (latest job)", str(manifest.get("config_hash", "-"))),
        ("Config hashes of the rows", _joined(scores.get("config_hash", []))),
        ("Jobs run", str(len(manifest.get("jobs", []) or []))),
        ("Cells (score rows)", f"{len(scores):,}" + (f" ({per_scenario})" if per_scenario else "")),
        ("Scenarios", ", ".join(scenarios_of(scores)) or "-"),
        ("Difficulties", ", ".join(difficulties_of(scores)) or "-"),
        ("Attacks", _joined(attacked["attack"])),
        ("Surrogates", _joined(attacked["surrogate"])),
        *([("Adaptive attacks", _joined(adaptive["attack"]))] if len(adaptive) else []),
        ("Defenses", _joined(scores["defense"])),
        ("Repeats", str(int(attacked["repeat"].max()) + 1) if len(attacked) else "-"),
        ("Run written by grb-dist", _joined([manifest.get("version"), *scores.get("version", pd.Series()).unique()])),
    ]
    for name in ("torch", "ray", "python"):
        if name in run_env:
            rows.append((f"{name} (run)", str(run_env[name])))
    rows += [
        ("Report made with", ", ".join(f"{k} {v}" for k, v in env.items())),
        ("Run created", _when(manifest.get("created_at"))),
        ("Scores written", f"{_when(scores['created_at'].min())} to {_when(scores['created_at'].max())}"
         if "created_at" in scores and len(scores) else "-"),
        ("Report date", _when(generated_at)),
    ]
    return RunInfo(title=f"grb-dist report: {label}", rows=rows)
