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
repeat. Standard deviations are population deviations (ddof = 0), so one repeat gives 0
(kept as data; the rendered boards show the mean alone there, :mod:`grb_dist.leaderboard.render`).

Both GRB boards use the *transfer* rows only (black-box: attacks made on surrogate models).
Rows of the ``threat`` ``adaptive`` (white-box: the attack differentiates through the
defense itself, whose name is then the row's surrogate) are compared with them on two more
boards, made only for a scenario that has adaptive rows (Mujkanovic et al., NeurIPS 2022:
transfer-only evaluation flatters defenses):

* robustness (:func:`robustness_board`): per defense, the worst case over the transfer
  (attack, surrogate) pairs and over its adaptive attacks (each a mean over repeats), their
  gap and the lower of the two (``robust_accuracy``, the attacker picks the stronger).
* transfer matrix (:func:`transfer_board`): per surrogate and defense the mean accuracy
  over that surrogate's attacks, plus the row ``adaptive``; also made when a scenario has
  several surrogates.

A scores table without a ``threat`` column (runs written before it) is all transfer.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from grb_dist.core.names import CLEAN, DIFFICULTIES
from grb_dist.core.scenario import DEFAULT, find_scenario, scenario_names
from grb_dist.evaluation.metrics import attack_scores, defense_scores
from grb_dist.leaderboard.targets import targets_board
from grb_dist.store import schema

#: Scenario of a scores table without a ``scenario`` column (the GRB leaderboard setting).
DEFAULT_SCENARIO = DEFAULT.name
#: The GRB boards (transfer rows only), then the boards of adaptive evaluation.
GRB_KINDS = ("attacks", "defenses")
ADAPTIVE_KINDS = ("robustness", "transfer")
#: The board of a per-target scenario (:mod:`grb_dist.leaderboard.targets`).
TARGET_KIND = "targets"
KINDS = GRB_KINDS + ADAPTIVE_KINDS + (TARGET_KIND,)
#: Values of the scores' ``threat`` column; a missing column or value is ``transfer``.
TRANSFER, ADAPTIVE = "transfer", "adaptive"
#: The surrogate label of the transfer matrix's row of adaptive attacks.
ADAPTIVE_ROW = ADAPTIVE
#: How much higher an adaptive accuracy may be than the transfer one of the same attack
#: before the robustness board notes it (a white-box attack should be at least as strong).
ADAPTIVE_TOLERANCE = 0.01


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
    """The scenarios present in ``scores``: the known ones in their order (the built-in ones
    first), then any other, sorted."""
    if "scenario" not in scores.columns:
        return [DEFAULT_SCENARIO] if len(scores) else []
    present = set(scores["scenario"].dropna().astype(str).unique())
    known = scenario_names()
    return [s for s in known if s in present] + sorted(present.difference(known))


def of_scenario(scores: pd.DataFrame, scenario: str | None) -> tuple[str, pd.DataFrame]:
    """The rows of one scenario and its name. ``None`` picks the only scenario present;
    several scenarios without a choice are an error (their boards must not be mixed)."""
    present = scenarios_of(scores)
    if scenario is None:
        if len(present) > 1:
            raise ValueError(f"the scores hold several scenarios ({', '.join(present)}); pass scenario=")
        scenario = present[0] if present else DEFAULT_SCENARIO
    if "scenario" not in scores.columns:
        return scenario, scores if find_scenario(scenario) is DEFAULT else scores.iloc[0:0]
    return scenario, scores[scores["scenario"] == scenario]


def is_adaptive(scores: pd.DataFrame) -> pd.Series:
    """Per row, whether it is of the ``adaptive`` threat (``False`` everywhere without a
    ``threat`` column; clean rows are transfer rows)."""
    if "threat" not in scores.columns:
        return pd.Series(False, index=scores.index)
    return (scores["threat"] == ADAPTIVE).fillna(False).astype(bool) & (scores["attack"] != CLEAN)


def transfer_rows(scores: pd.DataFrame) -> pd.DataFrame:
    """The rows of the transfer threat (the clean rows included): what the GRB boards use."""
    adaptive = is_adaptive(scores)
    return scores[~adaptive] if adaptive.any() else scores


def adaptive_rows(scores: pd.DataFrame) -> pd.DataFrame:
    """The attacked rows of the adaptive threat."""
    return scores[is_adaptive(scores)]


def has_adaptive(scores: pd.DataFrame) -> bool:
    """Whether ``scores`` hold any adaptive row."""
    return bool(is_adaptive(scores).any())


def _empty(table_schema: pa.Schema) -> pd.DataFrame:
    return table_schema.empty_table().to_pandas()


def _mean_std(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=np.float64)
    return float(a.mean()), float(a.std(ddof=0))


def attack_board(scores: pd.DataFrame, difficulty: str, scenario: str | None = None) -> pd.DataFrame:
    """Attacks ranked over defenses on ``difficulty`` of ``scenario`` (columns of
    ``schema.ATTACK_BOARD``; ``scenario`` may be left out when the scores hold one)."""
    scenario, scores = of_scenario(scores, scenario)
    scores = transfer_rows(scores)
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
    ``scenario`` (columns of ``schema.DEFENSE_BOARD``). Transfer rows only."""
    scenario, scores = of_scenario(scores, scenario)
    df = transfer_rows(scores[scores["difficulty"] == difficulty])
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


def _worst(per_key: pd.Series) -> tuple[float | None, object]:
    """The lowest value of a Series and its key (the first key in sorted order on a tie);
    ``(None, None)`` when empty."""
    if per_key.empty:
        return None, None
    per_key = per_key.sort_index()
    return float(per_key.min()), per_key.idxmin()


def _at(scores: pd.DataFrame, scenario: str | None, difficulty: str) -> tuple[str, pd.DataFrame, pd.DataFrame]:
    """The scenario's name, its transfer attacked rows and its adaptive rows on ``difficulty``."""
    scenario, scores = of_scenario(scores, scenario)
    df = scores[scores["difficulty"] == difficulty]
    adaptive = is_adaptive(df)
    return scenario, df[~adaptive & (df["attack"] != CLEAN)], df[adaptive]


def _per_attack(rows: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Mean accuracy over repeats per ``defense`` and ``keys``."""
    return rows.groupby(["defense", *keys], sort=True)["accuracy"].mean()


_NONE = pd.Series(dtype=np.float64)


def _by_defense(means: pd.Series) -> dict[str, pd.Series]:
    """Per defense, its part of :func:`_per_attack`'s Series (indexed by the other keys)."""
    return {d: g.droplevel("defense") for d, g in means.groupby(level="defense", sort=True)}


def _note(transfer: float | None, adaptive: float | None) -> str:
    if adaptive is None:
        return "transfer only" if transfer is not None else "no attack"
    if transfer is None:
        return "adaptive only"
    if adaptive > transfer + ADAPTIVE_TOLERANCE:
        return "adaptive weaker than transfer"
    return ""


def _robust_rank(out: pd.DataFrame) -> pd.DataFrame:
    """Rows in rank order: defenses with adaptive attacks first (their robust accuracy
    faced a white-box attacker), then transfer-only ones (an upper bound), then those
    without any attack; within each group robust accuracy descending, ties by name."""
    group = np.where(out["n_adaptive"] > 0, 0, np.where(out["robust_accuracy"].notna(), 1, 2))
    out = out.assign(_group=group, _key=-out["robust_accuracy"].fillna(-np.inf))
    return out.sort_values(["_group", "_key", "defense"], kind="stable").drop(columns=["_group", "_key"])


def robustness_board(scores: pd.DataFrame, difficulty: str, scenario: str | None = None) -> pd.DataFrame:
    """Transfer vs adaptive per defense on ``difficulty`` of ``scenario`` (columns of
    ``schema.ROBUSTNESS_BOARD``): the worst transfer (attack, surrogate) pair and the worst
    adaptive attack (each a mean over repeats), ``gap`` = transfer - adaptive,
    ``robust_accuracy`` = the lower of the two; ranked by :func:`_robust_rank`."""
    scenario, scores = of_scenario(scores, scenario)
    df = scores[scores["difficulty"] == difficulty]
    if df.empty:
        return _empty(schema.ROBUSTNESS_BOARD)
    _, transfer, adaptive = _at(df, scenario, difficulty)
    clean = df[df["attack"] == CLEAN].groupby("defense")["accuracy"].mean()
    t_by = _by_defense(_per_attack(transfer, ["attack", "surrogate"]))
    a_by = _by_defense(_per_attack(adaptive, ["attack"]))
    rows = []
    for defense in sorted(df["defense"].unique()):
        t_pairs, a_att = t_by.get(defense, _NONE), a_by.get(defense, _NONE)
        t_acc, t_key = _worst(t_pairs)
        a_acc, a_key = _worst(a_att)
        both = [v for v in (t_acc, a_acc) if v is not None]
        rows.append({
            "scenario": scenario, "difficulty": difficulty, "defense": defense,
            "clean_accuracy": float(clean[defense]) if defense in clean.index else None,
            "transfer_accuracy": t_acc, "transfer_attack": f"{t_key[0]} from {t_key[1]}" if t_key else None,
            "adaptive_accuracy": a_acc, "adaptive_attack": a_key,
            "gap": t_acc - a_acc if t_acc is not None and a_acc is not None else None,
            "robust_accuracy": min(both) if both else None,
            "n_transfer": len(t_pairs), "n_adaptive": len(a_att), "note": _note(t_acc, a_acc),
        })
    out = _robust_rank(pd.DataFrame(rows).astype({"robust_accuracy": "float64"}))
    out.insert(3, "rank", np.arange(1, len(out) + 1, dtype=np.int64))
    return out[schema.ROBUSTNESS_BOARD.names].reset_index(drop=True)


def adaptive_vs_transfer(scores: pd.DataFrame, scenario: str | None, difficulty: str) -> pd.DataFrame:
    """Per (defense, attack) on ``difficulty`` of ``scenario``: the transfer accuracy of the
    attack (worst over its surrogates, ``transfer_surrogate``; mean over repeats), the
    adaptive accuracy of the same attack (mean over repeats) and ``gap`` = transfer -
    adaptive (>= -0.01 when the adaptive attack is at least as strong, up to noise). An
    attack run one way only has a null on the other side. Sorted by defense, attack."""
    scenario, transfer, adaptive = _at(scores, scenario, difficulty)
    cols = ["scenario", "difficulty", "defense", "attack", "transfer_accuracy", "transfer_surrogate",
            "adaptive_accuracy", "gap"]
    t = _per_attack(transfer, ["attack", "surrogate"]).reset_index()
    t = t.sort_values(["defense", "attack", "accuracy", "surrogate"]).drop_duplicates(["defense", "attack"])
    t = t.rename(columns={"accuracy": "transfer_accuracy", "surrogate": "transfer_surrogate"})
    a = _per_attack(adaptive, ["attack"]).rename("adaptive_accuracy").reset_index()
    out = t.merge(a, on=["defense", "attack"], how="outer").sort_values(["defense", "attack"])
    out = out.assign(scenario=scenario, difficulty=difficulty,
                     gap=out["transfer_accuracy"] - out["adaptive_accuracy"])
    return out.reindex(columns=cols).reset_index(drop=True)


def transfer_board(scores: pd.DataFrame, difficulty: str, scenario: str | None = None) -> pd.DataFrame:
    """The transfer matrix of ``difficulty`` of ``scenario`` in long form (columns of
    ``schema.TRANSFER_BOARD``): per surrogate and defense the mean over the surrogate's
    attacks of the accuracy (mean over repeats); then the row :data:`ADAPTIVE_ROW` (each
    defense under its own adaptive attacks) when there are adaptive rows."""
    scenario, transfer, adaptive = _at(scores, scenario, difficulty)
    parts = []
    for rows, label in ((transfer, None), (adaptive, ADAPTIVE_ROW)):
        if rows.empty:
            continue
        per = rows.assign(surrogate=label) if label else rows
        means = _per_attack(per, ["surrogate", "attack"]).reset_index()
        cell = means.groupby(["surrogate", "defense"], sort=True)["accuracy"].agg(["mean", "size"]).reset_index()
        parts.append(cell.rename(columns={"mean": "accuracy_mean", "size": "n_attacks"}))
    if not parts:
        return _empty(schema.TRANSFER_BOARD)
    out = pd.concat(parts, ignore_index=True).assign(scenario=scenario, difficulty=difficulty)
    out["n_attacks"] = out["n_attacks"].astype(np.int64)
    return out[schema.TRANSFER_BOARD.names].reset_index(drop=True)


def transfer_matrix(board: pd.DataFrame) -> pd.DataFrame:
    """A transfer board as a matrix: surrogates (rows, sorted, :data:`ADAPTIVE_ROW` last) x
    defenses (columns, sorted); a pair without attacks is NaN."""
    if board.empty:
        return pd.DataFrame()
    m = board.pivot_table(index="surrogate", columns="defense", values="accuracy_mean", aggfunc="mean")
    rows = sorted(r for r in m.index if r != ADAPTIVE_ROW) + [r for r in m.index if r == ADAPTIVE_ROW]
    m = m.loc[rows, sorted(m.columns)]
    m.index.name, m.columns.name = "surrogate", None
    return m


def _shows_transfer(scores: pd.DataFrame) -> bool:
    """Whether a scenario's rows deserve a transfer matrix: adaptive rows, or several surrogates."""
    attacked = transfer_rows(scores)
    attacked = attacked[attacked["attack"] != CLEAN]
    return has_adaptive(scores) or attacked["surrogate"].nunique() > 1


def leaderboards(scores: pd.DataFrame, difficulties: list[str] | None = None,
                 scenarios: list[str] | None = None) -> dict[str, pd.DataFrame]:
    """``{"<scenario>/attacks-<difficulty>": ..., "<scenario>/defenses-<difficulty>": ...}``
    for each scenario present in ``scores`` (or the given ones) and each difficulty that
    scenario holds (or the given ones), in the GRB order easy, medium, hard, full. After
    every GRB board come, per scenario and difficulty, ``robustness`` (a scenario with
    adaptive rows), ``transfer`` (adaptive rows or several surrogates) and ``targets`` (a
    per-target scenario: :func:`~grb_dist.leaderboard.targets.targets_board`)."""
    out: dict[str, pd.DataFrame] = {}
    extra: dict[str, pd.DataFrame] = {}
    for scenario in scenarios or scenarios_of(scores):
        _, mine = of_scenario(scores, scenario)
        present = set(mine["difficulty"].unique()) if len(mine) else set()
        adaptive, matrix = has_adaptive(mine), len(mine) > 0 and _shows_transfer(mine)
        known = find_scenario(scenario)
        per_target = known is not None and known.per_target
        for d in difficulties or [d for d in DIFFICULTIES if d in present]:
            out[board_name(scenario, "attacks", d)] = attack_board(mine, d, scenario)
            out[board_name(scenario, "defenses", d)] = defense_board(mine, d, scenario)
            if adaptive:
                extra[board_name(scenario, "robustness", d)] = robustness_board(mine, d, scenario)
            if matrix:
                extra[board_name(scenario, "transfer", d)] = transfer_board(mine, d, scenario)
            if per_target:
                extra[board_name(scenario, TARGET_KIND, d)] = targets_board(transfer_rows(mine), d, scenario)
    return {**out, **extra}


#: The Arrow schema of each kind of board.
BOARD_SCHEMAS = {"attacks": schema.ATTACK_BOARD, "defenses": schema.DEFENSE_BOARD,
                 "robustness": schema.ROBUSTNESS_BOARD, "transfer": schema.TRANSFER_BOARD,
                 TARGET_KIND: schema.TARGET_BOARD}


def to_arrow(name: str, board: pd.DataFrame) -> pa.Table:
    """The Arrow table of a board with its schema (by the kind in its name)."""
    return pa.Table.from_pandas(board, schema=BOARD_SCHEMAS[parse_name(name)[1]], preserve_index=False)
