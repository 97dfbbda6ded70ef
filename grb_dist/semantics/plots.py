"""Figures of a study, from its Parquet rows alone (matplotlib, Agg backend).

- :func:`plot_over_robustness`: R_over against K per model, mean and standard error over
  graphs (Gosch et al. 2023, Figure 3a; l2-weak at the local budget deg(v) by default);
- :func:`plot_degree_robustness`: mean robustness by node degree per model, with the Bayes
  classifier's robustness as the semantic boundary (Figure 1);
- :func:`plot_degree_boxplot`: the distribution of robustness by degree on a real graph,
  the largest over target classes per node (Figure 4 / Figure 34).

A chart of lines against K or degree becomes one bar per line when there is a single K or
degree (a lone dot per line on a meaningless axis says nothing). Every figure is written
atomically as PNG; :func:`write_plots` writes all that the rows
allow and returns their paths.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from grb_dist.semantics.metrics import budget_values, node_robustness
from grb_dist.semantics.tables import metrics_table, read_nodes


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, path: Path) -> Path:
    """Write ``fig`` to ``path`` as PNG (atomically) and close it."""
    from grb_dist.core.fileio import atomic_path

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=130, bbox_inches="tight")
    plt.close(fig)
    return path


def _finish_lines(plt, fig, ax, path: Path) -> Path:
    """Legend and grid of a line chart, then :func:`_save`."""
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(plt, fig, path)


#: One line of a chart: its label, x and y values, error bars (or None) and matplotlib style.
Series = tuple[str, Sequence[float], Sequence[float], "Sequence[float] | None", dict]


def _lines_or_bars(plt, fig, ax, series: Sequence[Series], xlabel: str, path: Path, integer_x: bool = False) -> Path:
    """``series`` as lines against x, then saved; when they all have one and the same x (a
    study with one K, nodes of one degree), a line would be a lone dot on a meaningless
    axis, so each series is a bar instead, named under it, and the x label says the one value."""
    xs = {float(v) for _, x, _, _, _ in series for v in x}
    if len(xs) == 1:
        for i, (label, _, y, err, style) in enumerate(series):
            ax.bar(i, float(np.asarray(y)[0]), width=0.6, color=style.get("color", f"C{i}"),
                   yerr=None if err is None else [float(np.asarray(err)[0])], capsize=4)
        ax.set_xticks(range(len(series)), [label for label, *_ in series], rotation=20 if len(series) > 4 else 0,
                      ha="right" if len(series) > 4 else "center")
        ax.set_xlabel(f"{xlabel}: {next(iter(xs)):g} only")
        ax.grid(alpha=0.3, axis="y")
        return _save(plt, fig, path)
    for label, x, y, err, style in series:
        ax.errorbar(x, y, yerr=err, label=label, **{"marker": "o", "capsize": 3, **style})
    ax.set_xlabel(xlabel)
    if integer_x:
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return _finish_lines(plt, fig, ax, path)


def plot_over_robustness(nodes: pd.DataFrame, path: Path, attack: str = "l2-weak", budget: str = "deg") -> Path | None:
    """R_over vs K per model (mean +- standard error over graph seeds); a bar per model when
    the study has one K."""
    sel = nodes[(nodes["attack"] == attack) & (nodes["g_clean"] >= 0)]
    if sel.empty:
        return None
    per_graph = metrics_table(sel, [budget], keys=("model", "K", "graph_seed"))
    agg = per_graph.groupby(["model", "K"])["R_over"].agg(["mean", "std", "count"]).reset_index()
    plt = _figure()
    fig, ax = plt.subplots(figsize=(6, 4))
    series = [(str(model), part["K"].to_numpy(), part["mean"].to_numpy(),
               (part["std"].fillna(0) / np.sqrt(part["count"].clip(lower=1))).to_numpy(), {})
              for model, part in agg.groupby("model")]
    ax.set_ylabel("R_over")
    ax.set_title(f"Robustness beyond semantic change ({attack}, budget {budget})")
    return _lines_or_bars(plt, fig, ax, series, "K (distance of class means / sigma)", path)


def _rob_by_degree(nodes: pd.DataFrame, budget: str, column: str) -> pd.DataFrame:
    cap = np.minimum(budget_values(budget, nodes["degree"].to_numpy()), nodes["steps"].to_numpy())
    rob = node_robustness(nodes, cap)
    return pd.DataFrame({"model": nodes["model"].to_numpy(), "degree": nodes["degree"].to_numpy(),
                         "value": rob[column].to_numpy(), "node": nodes["node"].to_numpy(),
                         "graph_seed": nodes["graph_seed"].to_numpy(),
                         "target_class": nodes["target_class"].to_numpy()})


def plot_degree_robustness(nodes: pd.DataFrame, path: Path, K: float | None = 1.5, attack: str = "l2-weak",
                           budget: str = "inf", max_degree: int = 10) -> Path | None:
    """Mean conventional robustness by degree per model, and the Bayes semantic boundary (bars
    when the nodes have one degree)."""
    sel = nodes[(nodes["attack"] == attack) & (nodes["g_clean"] >= 0)]
    if sel.empty:
        return None
    ks = np.sort(sel["K"].unique())
    k = ks[np.argmin(np.abs(ks - K))] if K is not None else ks[0]
    sel = sel[(sel["K"] == k) & (sel["degree"] > 0) & (sel["degree"] <= max_degree)]
    if sel.empty:
        return None
    plt = _figure()
    fig, ax = plt.subplots(figsize=(6, 4))
    f = _rob_by_degree(sel, budget, "rob_f_y").groupby(["model", "degree"])["value"].mean().reset_index()
    series = [(str(model), part["degree"].to_numpy(), part["value"].to_numpy(), None, {})
              for model, part in f.groupby("model")]
    g = _rob_by_degree(sel.drop_duplicates(["graph_seed", "node"]), budget, "rob_g")
    g = g.groupby("degree")["value"].mean().reset_index()
    series.append(("semantic boundary (Bayes)", g["degree"].to_numpy(), g["value"].to_numpy(), None,
                   {"color": "black", "linestyle": "--", "linewidth": 2, "marker": None}))
    ax.set_ylabel("mean robustness (edges added)")
    ax.set_title(f"Degree-dependent robustness, K = {k:g} ({attack})")
    return _lines_or_bars(plt, fig, ax, series, "node degree", path, integer_x=True)  # degrees are whole numbers


def per_node_class_robustness(nodes: pd.DataFrame, budget: str = "inf", how: str = "max") -> pd.DataFrame:
    """Per (model, graph seed, node): robustness over target classes (``max`` or ``min``)."""
    r = _rob_by_degree(nodes, budget, "rob_f_y").dropna(subset=["value"])
    return r.groupby(["model", "graph_seed", "node", "degree"])["value"].agg(how).reset_index()


def plot_degree_boxplot(nodes: pd.DataFrame, path: Path, models: Sequence[str] | None = None,
                        attack: str = "l2-weak-class", budget: str = "inf", max_degree: int = 8) -> Path | None:
    """Box plot of robustness by degree (largest over target classes per node), per model."""
    sel = nodes[nodes["attack"] == attack]
    if sel.empty:
        return None
    r = per_node_class_robustness(sel, budget, "max")
    r = r[(r["degree"] >= 1) & (r["degree"] <= max_degree)]
    names = [m for m in (models or sorted(r["model"].unique())) if m in set(r["model"])]
    if not names:
        return None
    plt = _figure()
    fig, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 4), squeeze=False, sharey=True)
    for ax, model in zip(axes[0], names):
        part = r[r["model"] == model]
        degrees = list(range(1, max_degree + 1))
        data = [part.loc[part["degree"] == d, "value"].to_numpy() for d in degrees]
        ax.boxplot([d if d.size else [np.nan] for d in data], positions=degrees, widths=0.6)
        ax.plot(degrees, degrees, color="grey", linestyle=":", label="degree")
        ax.set_xlabel("node degree")
        ax.set_title(model)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("structure perturbations until the prediction changes")
    return _save(plt, fig, path)


def write_plots(directory: str | Path) -> list[Path]:
    """Every figure the rows of a study directory allow, under ``<dir>/plots/``."""
    directory = Path(directory)
    nodes = read_nodes(directory)
    if nodes.empty:
        return []
    plots = directory / "plots"
    out = [
        plot_over_robustness(nodes, plots / "over_robustness_vs_K.png"),
        plot_degree_robustness(nodes, plots / "degree_robustness.png"),
        plot_degree_boxplot(nodes, plots / "degree_boxplot.png"),
    ]
    return [p for p in out if p is not None]


__all__ = ["per_node_class_robustness", "plot_degree_boxplot", "plot_degree_robustness",
           "plot_over_robustness", "write_plots"]
