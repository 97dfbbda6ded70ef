"""The board of a per-target scenario: how often each attack turns each defense's correct
decision at a target, the way targeted attacks are reported (Zügner et al. 2018; Pro-GNN's
Table 3 reports the accuracy on the attacked nodes).

Every score row of such a scenario carries its targets' predictions and margins
(``target_nodes``, ``target_margins``); the clean row of a defense is scored on the same
targets. Per (attack, surrogate, defense) and repeat: the accuracy on the targets, and the
success rate: of the targets whose clean margin is above 0 (classified correctly), the share
whose margin after the attack is at most 0 (a tie counts as misclassified). Mean and
standard deviation over repeats; the mean margin after the attack over every target and
repeat. Ranked by success rate, highest first (the pairs where the attack works best).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grb_dist.core.names import CLEAN
from grb_dist.store import schema


def _clean_margins(clean: pd.DataFrame) -> dict[str, dict[int, float]]:
    """Per defense, target -> margin on the clean graph."""
    out: dict[str, dict[int, float]] = {}
    for _, r in clean.iterrows():
        out.setdefault(r["defense"], {}).update(zip(map(int, r["target_nodes"]), map(float, r["target_margins"])))
    return out


def success_rate(nodes, margins, clean: dict[int, float]) -> float:
    """Of ``nodes`` classified correctly on the clean graph (``clean`` margin > 0), the share
    whose ``margins`` after the attack are at most 0; NaN when none was correct."""
    before = np.array([clean.get(int(n), np.nan) for n in nodes], dtype=np.float64)
    ok = before > 0
    return float((np.asarray(margins, dtype=np.float64)[ok] <= 0).mean()) if ok.any() else float("nan")


def targets_board(scores: pd.DataFrame, difficulty: str, scenario: str) -> pd.DataFrame:
    """The per-target board of ``scenario`` on ``difficulty`` (columns of
    ``schema.TARGET_BOARD``; module docstring); ``scores``: that scenario's transfer rows."""
    df = scores[scores["difficulty"] == difficulty]
    clean_rows = df[df["attack"] == CLEAN]
    clean = _clean_margins(clean_rows)
    clean_acc = clean_rows.groupby("defense")["accuracy"].mean()
    rows = []
    for (attack, surrogate, defense), g in df[df["attack"] != CLEAN].groupby(["attack", "surrogate", "defense"]):
        accs, rates, margins = [], [], []
        for _, r in g.iterrows():
            accs.append(float(r["accuracy"]))
            rates.append(success_rate(r["target_nodes"], r["target_margins"], clean.get(defense, {})))
            margins.extend(map(float, r["target_margins"]))
        rated = [x for x in rates if not np.isnan(x)]
        rows.append({
            "scenario": scenario, "difficulty": difficulty, "attack": attack, "surrogate": surrogate,
            "defense": defense, "clean_accuracy": float(clean_acc[defense]) if defense in clean_acc.index else None,
            "accuracy_mean": float(np.mean(accs)), "accuracy_std": float(np.std(accs)),
            "success_mean": float(np.mean(rated)) if rated else None,
            "success_std": float(np.std(rated)) if rated else None,
            "margin_mean": float(np.mean(margins)) if margins else None,
            "n_targets": int(g["n_targets"].max()), "n_repeats": int(g["repeat"].nunique()),
        })
    if not rows:
        return schema.TARGET_BOARD.empty_table().to_pandas()
    out = pd.DataFrame(rows).astype({"success_mean": "float64", "success_std": "float64", "margin_mean": "float64"})
    out = out.assign(_key=-out["success_mean"].fillna(-1.0))
    out = out.sort_values(["_key", "accuracy_mean", "attack", "surrogate", "defense"], kind="stable").drop(columns="_key")
    out.insert(5, "rank", np.arange(1, len(out) + 1, dtype=np.int64))
    return out[schema.TARGET_BOARD.names].reset_index(drop=True)


__all__ = ["success_rate", "targets_board"]
