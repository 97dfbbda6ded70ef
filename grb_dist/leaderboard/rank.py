"""Leaderboards as pure functions: a scores table -> ranked tables, per difficulty.

Uses the GRB metrics of :mod:`grb_dist.evaluation.metrics` (no re-implementation):

* attacks over defenses: for each (attack, surrogate) and repeat, the accuracies of every
  defense give :func:`~grb_dist.evaluation.metrics.attack_scores` (Average, Avg 3-Max,
  Weighted); the table reports their mean and standard deviation over repeats and ranks
  by Weighted, ascending (lower = stronger attack).
* defenses over attacks: for each defense and repeat, the accuracies under every
  (attack, surrogate) of that repeat plus the clean row (attack ``none``) give
  :func:`~grb_dist.evaluation.metrics.defense_scores` (Average, Avg 3-Min, Weighted); mean
  and standard deviation over repeats, ranked by Weighted, descending.

The clean row of a defense is computed once (its accuracy is deterministic) and joins every
repeat. Standard deviations are population deviations (ddof = 0), so one repeat gives 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from grb_dist.evaluation.metrics import attack_scores, defense_scores
from grb_dist.store import schema

CLEAN = "none"


def _empty(table_schema: pa.Schema) -> pd.DataFrame:
    return table_schema.empty_table().to_pandas()


def _mean_std(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=np.float64)
    return float(a.mean()), float(a.std(ddof=0))


def attack_board(scores: pd.DataFrame, difficulty: str) -> pd.DataFrame:
    """Attacks ranked over defenses on ``difficulty`` (columns of ``schema.ATTACK_BOARD``)."""
    df = scores[(scores["difficulty"] == difficulty) & (scores["attack"] != CLEAN)]
    if df.empty:
        return _empty(schema.ATTACK_BOARD)
    rows = []
    for (attack, surrogate), g in df.groupby(["attack", "surrogate"], sort=True):
        per_repeat = [attack_scores(r["accuracy"].to_numpy()) for _, r in g.groupby("repeat", sort=True)]
        row = {"difficulty": difficulty, "attack": attack, "surrogate": surrogate}
        for key in ("average", "avg_3_max", "weighted"):
            row[f"{key}_mean"], row[f"{key}_std"] = _mean_std([s[key] for s in per_repeat])
        row["n_defenses"] = int(g.groupby("repeat")["defense"].nunique().max())
        row["n_repeats"] = len(per_repeat)
        rows.append(row)
    out = pd.DataFrame(rows).sort_values(["weighted_mean", "attack", "surrogate"], ascending=[True, True, True])
    out.insert(3, "rank", np.arange(1, len(out) + 1, dtype=np.int64))
    return out[schema.ATTACK_BOARD.names].reset_index(drop=True)


def defense_board(scores: pd.DataFrame, difficulty: str) -> pd.DataFrame:
    """Defenses ranked over attacks (clean row included) on ``difficulty``
    (columns of ``schema.DEFENSE_BOARD``)."""
    df = scores[scores["difficulty"] == difficulty]
    if df.empty:
        return _empty(schema.DEFENSE_BOARD)
    clean = df[df["attack"] == CLEAN].groupby("defense")["accuracy"].mean()
    attacked = df[df["attack"] != CLEAN]
    repeats = sorted(attacked["repeat"].unique()) or [0]
    rows = []
    for defense in sorted(df["defense"].unique()):
        mine = attacked[attacked["defense"] == defense]
        per_repeat, n_attacks = [], 0
        for r in repeats:
            accs = list(mine.loc[mine["repeat"] == r, "accuracy"])
            if defense in clean.index:
                accs.append(float(clean[defense]))
            if accs:
                per_repeat.append(defense_scores(accs))
                n_attacks = max(n_attacks, len(accs))
        row = {"difficulty": difficulty, "defense": defense}
        for key in ("average", "avg_3_min", "weighted"):
            row[f"{key}_mean"], row[f"{key}_std"] = _mean_std([s[key] for s in per_repeat])
        row["clean_accuracy"] = float(clean[defense]) if defense in clean.index else None
        row["n_attacks"] = n_attacks
        row["n_repeats"] = len(per_repeat)
        rows.append(row)
    out = pd.DataFrame(rows).sort_values(["weighted_mean", "defense"], ascending=[False, True])
    out.insert(2, "rank", np.arange(1, len(out) + 1, dtype=np.int64))
    return out[schema.DEFENSE_BOARD.names].reset_index(drop=True)


def leaderboards(scores: pd.DataFrame, difficulties: list[str] | None = None) -> dict[str, pd.DataFrame]:
    """``{"attacks-<difficulty>": ..., "defenses-<difficulty>": ...}`` for each difficulty
    present in ``scores`` (or the given ones), in the GRB order easy, medium, hard, full."""
    from grb_dist.graph import DIFFICULTIES

    present = set(scores["difficulty"].unique()) if len(scores) else set()
    ds = difficulties or [d for d in DIFFICULTIES if d in present]
    out: dict[str, pd.DataFrame] = {}
    for d in ds:
        out[f"attacks-{d}"] = attack_board(scores, d)
        out[f"defenses-{d}"] = defense_board(scores, d)
    return out


def to_arrow(name: str, board: pd.DataFrame) -> pa.Table:
    """The Arrow table of a board with its schema (by the name's prefix)."""
    sch = schema.ATTACK_BOARD if name.startswith("attacks") else schema.DEFENSE_BOARD
    return pa.Table.from_pandas(board, schema=sch, preserve_index=False)
