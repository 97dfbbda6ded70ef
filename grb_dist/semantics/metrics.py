"""Semantics-aware robustness metrics (Gosch et al. 2023, section 5 and appendix G), as pure
functions.

An attack on a node v adds edges to v one at a time (its *order*). For a classifier h and a
node, the *flip count* is the first number of added edges k >= 1 at which h's decision at v
differs from its clean decision (``inf`` when it never does within the steps evaluated).

Per node, with a local budget Delta (the attack may add at most Delta edges):

* ``robustness(flip, Delta) = min(flip, Delta + 1) - 1``: the number of changes the
  classifier withstands inside the budget (Delta when it never flips);
* conventional robustness ``Robustness(f, y, v)`` = robustness of f's flip count;
* semantics-aware robustness ``Robustness(f, g, v) = min(Robustness(f), Robustness(g))``:
  f is only credited for the changes it withstands while g keeps its decision (a flip of f
  at the same step as g's, or after it, is a change of semantics, not an adversarial
  example);
* the semantic boundary ``Robustness(g, y, v)`` = robustness of g's flip count;

all three counted on the nodes that f and g both classify correctly on the clean graph
(see :func:`node_robustness`).

Degree-corrected averages (equation 6 / 46) divide each node's robustness by its clean
degree and average over the counted nodes with degree > 0. Then ``R_adv = R(f, g) / R(g)``,
``R_over = 1 - R(f, g) / R(f)``, ``F1-rob`` the harmonic mean of ``R_adv`` and
``1 - R_over``, and ``F_beta-rob = (1 + b^2) (1 - R_over) R_adv / (b^2 (1 - R_over) + R_adv)``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

#: Columns a per-node table needs for :func:`node_robustness` / :func:`reduce_metrics`.
NODE_COLUMNS = ("degree", "label", "f_clean", "g_clean", "f_flip", "g_flip")


def robustness(flip: np.ndarray, budget: np.ndarray | float) -> np.ndarray:
    """Changes withstood inside ``budget``: ``min(flip, budget + 1) - 1`` (float; ``flip``
    may hold ``inf`` for "never flipped", ``budget`` may be ``inf`` for no bound)."""
    flip = np.asarray(flip, dtype=np.float64)
    budget = np.asarray(budget, dtype=np.float64)
    return np.minimum(flip, budget + 1.0) - 1.0


def node_robustness(nodes: pd.DataFrame, budget: np.ndarray | float) -> pd.DataFrame:
    """Per-node robustness values at ``budget`` (scalar or one per row).

    With a reference (``g_clean >= 0``) a node is counted for ``rob_f_y`` (conventional),
    ``rob_f_g`` (semantics-aware) and ``rob_g_y`` (the semantic boundary) when f and g both
    classify it correctly on the clean graph, so that the three averages run over the same
    nodes and ``R(f, g) <= min(R(f), R(g))``. (Counting f-g agreement on nodes that g gets
    wrong would credit f with g's robustness there: the attacks connect classes other than
    the true one, i.e. towards g's wrong decision, which then never changes.) Without a
    reference (``g_clean < 0``, real graphs) ``rob_f_y`` counts the nodes f gets right and
    the other two are NaN. ``rob_g`` is g's robustness on every node g gets right (the
    boundary of Figure 1, independent of f) and ``violated`` whether g's decision changes
    within the budget there. Returns a frame with the same index.
    """
    deg = nodes["degree"].to_numpy(np.float64)
    y = nodes["label"].to_numpy()
    f0 = nodes["f_clean"].to_numpy()
    g0 = nodes["g_clean"].to_numpy()
    rf = robustness(nodes["f_flip"].to_numpy(np.float64), budget)
    rg = robustness(nodes["g_flip"].to_numpy(np.float64), budget)
    has_g = g0 >= 0
    g_right = has_g & (g0 == y)
    both = g_right & (f0 == y)
    out = pd.DataFrame(index=nodes.index)
    out["rob_f_y"] = np.where(np.where(has_g, both, f0 == y), rf, np.nan)
    out["rob_f_g"] = np.where(both, np.minimum(rf, rg), np.nan)
    out["rob_g_y"] = np.where(both, rg, np.nan)
    out["rob_g"] = np.where(g_right, rg, np.nan)
    budget_arr = np.broadcast_to(np.asarray(budget, dtype=np.float64), deg.shape)
    hit = (nodes["g_flip"].to_numpy(np.float64) <= budget_arr).astype(np.float64)
    out["violated"] = np.where(g_right, hit, np.nan)
    out["degree"] = deg
    return out


def degree_corrected(values: np.ndarray, degree: np.ndarray) -> float:
    """Mean of ``values / degree`` over entries with degree > 0 and a value (not NaN);
    NaN when there are none."""
    values = np.asarray(values, dtype=np.float64)
    degree = np.asarray(degree, dtype=np.float64)
    keep = (degree > 0) & ~np.isnan(values)
    return float(np.mean(values[keep] / degree[keep])) if keep.any() else float("nan")


def f_beta_rob(r_adv: float, r_over: float, beta: float = 1.0) -> float:
    """``F_beta-rob`` of ``R_adv`` and ``1 - R_over`` (``beta = 1``: F1-rob, the harmonic
    mean); 0 when both are 0, NaN when either is NaN."""
    a, b = float(r_adv), 1.0 - float(r_over)
    if np.isnan(a) or np.isnan(b):
        return float("nan")
    den = beta * beta * b + a
    return float((1 + beta * beta) * b * a / den) if den > 0 else 0.0


def summarize(rob: pd.DataFrame, beta: float = 1.0) -> dict[str, float]:
    """The reduced metrics of one group of :func:`node_robustness` rows."""
    deg = rob["degree"].to_numpy()
    r_f = degree_corrected(rob["rob_f_y"].to_numpy(), deg)
    r_fg = degree_corrected(rob["rob_f_g"].to_numpy(), deg)
    r_g = degree_corrected(rob["rob_g_y"].to_numpy(), deg)
    r_adv = r_fg / r_g if r_g and not np.isnan(r_g) else float("nan")
    r_over = 1.0 - r_fg / r_f if r_f and not np.isnan(r_f) else float("nan")
    counted = rob["violated"].to_numpy()
    keep = (deg > 0) & ~np.isnan(counted)
    return {
        "R": r_f,
        "R_fg": r_fg,
        "R_g": r_g,
        "R_adv": r_adv,
        "R_over": r_over,
        "F1_rob": f_beta_rob(r_adv, r_over, 1.0),
        "Fbeta_rob": f_beta_rob(r_adv, r_over, beta),
        "beta": float(beta),
        "violated": float(counted[keep].mean()) if keep.any() else float("nan"),
        "nodes": int((deg > 0).sum()),
    }


def budget_values(budget: str | int | float, degree: np.ndarray) -> np.ndarray:
    """Per-node local budget for a budget name: an integer, ``deg``, ``deg+N`` or ``inf``."""
    degree = np.asarray(degree, dtype=np.float64)
    if isinstance(budget, (int, float)) and not isinstance(budget, bool):
        return np.full(degree.shape, float(budget))
    text = str(budget).strip().lower().replace(" ", "")
    if text in ("inf", "unbounded", "none"):
        return np.full(degree.shape, np.inf)
    if text.startswith("deg"):
        rest = text[3:]
        return degree + (float(int(rest)) if rest else 0.0)
    return np.full(degree.shape, float(int(text)))


def reduce_metrics(
    nodes: pd.DataFrame, budgets: Sequence[str | int], keys: Sequence[str], beta: float = 1.0
) -> pd.DataFrame:
    """R, R(f, g), R(g), R_adv, R_over, F1-rob (and F_beta-rob), violated share per group of
    ``keys`` and budget. ``nodes`` holds :data:`NODE_COLUMNS` and ``keys``."""
    rows = []
    for budget in budgets:
        rob = node_robustness(nodes, budget_values(budget, nodes["degree"].to_numpy()))
        for k in keys:
            rob[k] = nodes[k].to_numpy()
        for group, part in rob.groupby(list(keys), sort=True, dropna=False):
            group = group if isinstance(group, tuple) else (group,)
            rows.append({**dict(zip(keys, group)), "budget": str(budget), **summarize(part, beta)})
    return pd.DataFrame(rows)


__all__ = [
    "NODE_COLUMNS",
    "budget_values",
    "degree_corrected",
    "f_beta_rob",
    "node_robustness",
    "reduce_metrics",
    "robustness",
    "summarize",
]
