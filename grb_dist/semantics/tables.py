"""A study directory's rows reduced into its tables (Gosch et al. 2023).

A study writes ``<out>/<study>/study.json`` (its settings) and one Parquet file of rows
per unit under ``nodes/`` (:mod:`grb_dist.semantics.run`). :func:`read_nodes` reads the
rows of the study last run there; :func:`metrics_table` reduces them into R, R(f, g), R(g),
R_adv, R_over and F1-rob per model, attack, K and budget (:mod:`grb_dist.semantics.metrics`),
:func:`table1` into the Bayes accuracy per K and :func:`table2` into the share of nodes whose
Bayes decision changes within each budget; :func:`write_tables` writes them next to the rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from grb_dist.core.errors import ConfigError
from grb_dist.core.text import csv_text
from grb_dist.semantics.metrics import budget_values, node_robustness, summarize
from grb_dist.semantics.spec import DEFAULT_BUDGETS, ROW_COLUMNS, StudySpec, check_budget, units


def study_budgets(directory: str | Path) -> tuple[str, ...]:
    """The budgets of the study written in ``directory`` (its study.json), else the defaults."""
    path = Path(directory) / "study.json"
    try:
        budgets = json.loads(path.read_text()).get("budgets")
    except (OSError, ValueError, AttributeError):
        return DEFAULT_BUDGETS
    if isinstance(budgets, list) and budgets and all(isinstance(b, str) for b in budgets):
        try:
            for b in budgets:
                check_budget(b)
        except ConfigError:
            return DEFAULT_BUDGETS
        return tuple(budgets)
    return DEFAULT_BUDGETS


def stored_spec(directory: str | Path) -> StudySpec | None:
    """The study last run in ``directory`` (its study.json), or None when unreadable."""
    try:
        data = json.loads((Path(directory) / "study.json").read_text())
        known = set(StudySpec.__dataclass_fields__)
        return StudySpec(**{k: v for k, v in data.items() if k in known})
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def read_nodes(directory: str | Path) -> pd.DataFrame:
    """The rows of the units of the study last run in ``directory`` (its study.json; every
    unit file when there is none, or when none of the files has an id of that study, as
    in a directory written before unit ids named only the unit's own model), an empty
    frame with the columns when none."""
    files = sorted(p for p in (Path(directory) / "nodes").glob("*.parquet") if not p.name.startswith("."))
    spec = stored_spec(directory)
    if spec is not None:
        try:
            wanted = {u.unit_id(spec) for u in units(spec)}
        except (ConfigError, TypeError, ValueError, AttributeError):
            wanted = None
        if wanted is not None and any(f.stem in wanted for f in files):
            files = [f for f in files if f.stem in wanted]
    if not files:
        return pd.DataFrame(columns=list(ROW_COLUMNS))
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def table1(nodes: pd.DataFrame) -> pd.DataFrame:
    """Bayes accuracy per K with (X, A) and without (X) structure (one row per node)."""
    sel = nodes[nodes["g_clean"] >= 0].drop_duplicates(["K", "graph_seed", "node"])
    if sel.empty:
        return pd.DataFrame(columns=["K", "bayes_x", "bayes_xa", "nodes"])
    acc = sel.assign(bayes_x=sel["g_features"] == sel["label"], bayes_xa=sel["g_clean"] == sel["label"])
    return acc.groupby("K").agg(bayes_x=("bayes_x", "mean"), bayes_xa=("bayes_xa", "mean"),
                                nodes=("node", "size")).reset_index()


#: Table 2's node populations (new nodes of degree > 0), by name: the file it is written to
#: and which nodes it counts, in words.
TABLE2_POPULATIONS = {
    "caption": ("table2.csv", "nodes the Bayes classifier gets right (the paper's caption)"),
    "paper": ("table2_paper.csv", "nodes the Bayes classifier and the attacked MLP both get right (the paper's "
              "numbers, as its published evaluation code records semantic changes)"),
}


def table2(nodes: pd.DataFrame, budgets: Sequence[str], attack: str = "l2-weak", population: str = "caption",
           model: str = "mlp") -> pd.DataFrame:
    """Share of new nodes whose Bayes decision changes within each budget (K x budget),
    among nodes with degree > 0 that the Bayes classifier gets right on the clean graph
    (the attack connects classes other than the true one, so a node g gets wrong is pushed
    towards g's decision, not away from it). ``population="paper"`` counts of those only
    the nodes that ``model`` (the attacked MLP) also gets right, in that model's rows: the
    population of the paper's Table 2 (:data:`TABLE2_POPULATIONS`); empty when the study has
    no such model."""
    if population not in TABLE2_POPULATIONS:
        raise ConfigError(f"unknown Table 2 population {population!r}; choose {' or '.join(TABLE2_POPULATIONS)}")
    sel = nodes[(nodes["attack"] == attack) & (nodes["g_clean"] == nodes["label"]) & (nodes["degree"] > 0)]
    if population == "paper":
        sel = sel[(sel["model"] == model) & (sel["f_clean"] == sel["label"])]
    sel = sel.drop_duplicates(["K", "graph_seed", "node"])
    rows = []
    for b in budgets:
        if str(b) in ("inf", "unbounded", "none"):
            continue
        lim = np.minimum(budget_values(b, sel["degree"].to_numpy()), sel["steps"].to_numpy())
        hit = sel["g_flip"].to_numpy() <= lim
        part = sel.assign(violated=hit).groupby("K")["violated"].mean()
        rows.append(part.rename(str(b)))
    return pd.DataFrame(rows).rename_axis(index="budget", columns="K") if rows else pd.DataFrame()


def table2_wide(t2: pd.DataFrame) -> pd.DataFrame:
    """:func:`table2` with its budgets as a column ``budget`` and its K columns headed
    ``K=<value>``: the table as table2.csv and the report show it."""
    frame = t2.reset_index()
    frame.columns = ["budget", *(f"K={float(k):g}" for k in t2.columns)]
    return frame


def metrics_table(nodes: pd.DataFrame, budgets: Sequence[str],
                  keys: Sequence[str] = ("model", "attack", "K")) -> pd.DataFrame:
    """R, R(f, g), R(g), R_adv, R_over, F1-rob per group of ``keys`` and budget; the
    per-node budget is capped by the steps evaluated."""
    if nodes.empty:
        return pd.DataFrame()
    rows = []
    keys = list(keys)
    for b in budgets:
        cap = np.minimum(budget_values(b, nodes["degree"].to_numpy()), nodes["steps"].to_numpy())
        rob = node_robustness(nodes, cap)
        for k in keys:
            rob[k] = nodes[k].to_numpy()
        for group, part in rob.groupby(keys, sort=True, dropna=False):
            group = group if isinstance(group, tuple) else (group,)
            rows.append({**dict(zip(keys, group)), "budget": str(b), **summarize(part)})
    return pd.DataFrame(rows)


def write_tables(directory: str | Path, budgets: Sequence[str] = DEFAULT_BUDGETS) -> dict[str, Path]:
    """Reduce a study directory's rows into metrics.parquet / metrics.csv, table1.csv,
    table2.csv and table2_paper.csv (:data:`TABLE2_POPULATIONS`; atomic writes); returns the paths written. The CSV files have a name on
    every column and floats to 6 significant digits (:func:`~grb_dist.core.text.csv_text`);
    metrics.parquet keeps full precision."""
    import pyarrow as pa

    from grb_dist.core.fileio import write_bytes
    from grb_dist.store.parquet import write_table

    directory = Path(directory)
    nodes = read_nodes(directory)
    written: dict[str, Path] = {}
    metrics = metrics_table(nodes, budgets)
    if not metrics.empty:
        write_table(pa.Table.from_pandas(metrics, preserve_index=False), directory / "metrics.parquet")
        write_bytes(csv_text(metrics).encode(), directory / "metrics.csv")
        written["metrics"] = directory / "metrics.parquet"
    t1 = table1(nodes)
    if not t1.empty:
        write_bytes(csv_text(t1).encode(), directory / "table1.csv")
        written["table1"] = directory / "table1.csv"
    for population, (name, _) in TABLE2_POPULATIONS.items():
        t2 = table2(nodes, budgets, population=population)
        if not t2.empty:
            write_bytes(csv_text(table2_wide(t2)).encode(), directory / name)
            written[name.removesuffix(".csv")] = directory / name
    return written


__all__ = ["TABLE2_POPULATIONS", "metrics_table", "read_nodes", "stored_spec", "study_budgets", "table1", "table2", "table2_wide", "write_tables"]
