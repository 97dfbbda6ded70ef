"""Leaderboards as pure functions: a scores table -> ranked tables, per scenario and difficulty.

Every board is computed within one scenario (``injection``, ``modification`` or any other
value of the scores' ``scenario`` column): each scenario has its own clean rows, attacks
and budgets, so mixing them would rank unlike things together.

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

from grb_dist.core.names import CLEAN, DIFFICULTIES, SCENARIOS
from grb_dist.evaluation.metrics import attack_scores, defense_scores
from grb_dist.store import schema

#: Scenario of a scores table without a ``scenario`` column (the GRB leaderboard setting).
DEFAULT_SCENARIO = "injection"
KINDS = ("attacks", "defenses")


def board_name(scenario: str, kind: str, difficulty: str) -> str:
    """The key of a board: ``<scenario>/<kind>-<difficulty>`` (also its path under
    ``RUN_DIR/leaderboard/``, without suffix)."""
    return f"{scenario}/{kind}-{difficulty}"


def parse_name(name: str) -> tuple[str, str, str]:
    """``(scenario, kind, difficulty)`` of a board key; a key without a scenario
    (``attacks-full``, the layout before scenarios) is an injection board."""
    scenario, _, rest = name.rpartition("/")
    kind, _, difficulty = rest.partition("-")
    if kind not in KINDS:
        raise ValueError(f"not a leaderboard name: {name!r}")
    return scenario or DEFAULT_SCENARIO, kind, difficulty


def scenarios_of(scores: pd.DataFrame) -> list[str]:
    """The scenarios present in ``scores``: the GRB ones first, then any other, sorted."""
    if "scenario" not in scores.columns:
        return [DEFAULT_SCENARIO] if len(scores) else []
    present = set(scores["scenario"].dropna().astype(str).unique())
    return [s for s in SCENARIOS if s in present] + sorted(present.difference(SCENARIOS))


def of_scenario(scores: pd.DataFrame, scenario: str | None) -> tuple[str, pd.DataFrame]:
    """The rows of one scenario and its name. ``None`` picks the only scenario present;
    several scenarios without a choice are an error (their boards must not be mixed)."""
    present = scenarios_of(scores)
    if scenario is None:
        if len(present) > 1:
            raise ValueError(f"the scores hold several scenarios ({', '.join(present)}); pass scenario=")
        scenario = present[0] if present else DEFAULT_SCENARIO
    if "scenario" not in scores.columns:
        return scenario, scores if scenario == DEFAULT_SCENARIO else scores.iloc[0:0]
    return scenario, scores[scores["scenario"] == scenario]


def _empty(table_schema: pa.Schema) -> pd.DataFrame:
    return table_schema.empty_table().to_pandas()


def _mean_std(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=np.float64)
    return float(a.mean()), float(a.std(ddof=0))


def attack_board(scores: pd.DataFrame, difficulty: str, scenario: str | None = None) -> pd.DataFrame:
    """Attacks ranked over defenses on ``difficulty`` of ``scenario`` (columns of
    ``schema.ATTACK_BOARD``; ``scenario`` may be left out when the scores hold one)."""
    scenario, scores = of_scenario(scores, scenario)
    df = scores[(scores["difficulty"] == difficulty) & (scores["attack"] != CLEAN)]
    if df.empty:
        return _empty(schema.ATTACK_BOARD)
    rows = []
    for (attack, surrogate), g in df.groupby(["attack", "surrogate"], sort=True):
        per_repeat = [attack_scores(r["accuracy"].to_numpy()) for _, r in g.groupby("repeat", sort=True)]
        row = {"scenario": scenario, "difficulty": difficulty, "attack": attack, "surrogate": surrogate}
        for key in ("average", "avg_3_max", "weighted"):
            row[f"{key}_mean"], row[f"{key}_std"] = _mean_std([s[key] for s in per_repeat])
        row["n_defenses"] = int(g.groupby("repeat")["defense"].nunique().max())
        row["n_repeats"] = len(per_repeat)
        rows.append(row)
    out = pd.DataFrame(rows).sort_values(["weighted_mean", "attack", "surrogate"], ascending=[True, True, True])
    out.insert(4, "rank", np.arange(1, len(out) + 1, dtype=np.int64))
    return out[schema.ATTACK_BOARD.names].reset_index(drop=True)


def defense_board(scores: pd.DataFrame, difficulty: str, scenario: str | None = None) -> pd.DataFrame:
    """Defenses ranked over attacks (the scenario's clean row included) on ``difficulty`` of
    ``scenario`` (columns of ``schema.DEFENSE_BOARD``)."""
    scenario, scores = of_scenario(scores, scenario)
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
            n_attacks = max(n_attacks, len(accs))  # the clean row is not an attack
            if defense in clean.index:
                accs.append(float(clean[defense]))
            if accs:
                per_repeat.append(defense_scores(accs))
        row = {"scenario": scenario, "difficulty": difficulty, "defense": defense}
        for key in ("average", "avg_3_min", "weighted"):
            row[f"{key}_mean"], row[f"{key}_std"] = _mean_std([s[key] for s in per_repeat])
        row["clean_accuracy"] = float(clean[defense]) if defense in clean.index else None
        row["n_attacks"] = n_attacks
        row["n_repeats"] = len(per_repeat)
        rows.append(row)
    out = pd.DataFrame(rows).sort_values(["weighted_mean", "defense"], ascending=[False, True])
    out.insert(3, "rank", np.arange(1, len(out) + 1, dtype=np.int64))
    return out[schema.DEFENSE_BOARD.names].reset_index(drop=True)


def leaderboards(scores: pd.DataFrame, difficulties: list[str] | None = None,
                 scenarios: list[str] | None = None) -> dict[str, pd.DataFrame]:
    """``{"<scenario>/attacks-<difficulty>": ..., "<scenario>/defenses-<difficulty>": ...}``
    for each scenario present in ``scores`` (or the given ones) and each difficulty that
    scenario holds (or the given ones), in the GRB order easy, medium, hard, full."""
    out: dict[str, pd.DataFrame] = {}
    for scenario in scenarios or scenarios_of(scores):
        _, mine = of_scenario(scores, scenario)
        present = set(mine["difficulty"].unique()) if len(mine) else set()
        for d in difficulties or [d for d in DIFFICULTIES if d in present]:
            out[board_name(scenario, "attacks", d)] = attack_board(mine, d, scenario)
            out[board_name(scenario, "defenses", d)] = defense_board(mine, d, scenario)
    return out


def to_arrow(name: str, board: pd.DataFrame) -> pa.Table:
    """The Arrow table of a board with its schema (by the kind in its name)."""
    sch = schema.ATTACK_BOARD if parse_name(name)[1] == "attacks" else schema.DEFENSE_BOARD
    return pa.Table.from_pandas(board, schema=sch, preserve_index=False)
