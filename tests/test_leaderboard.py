"""Leaderboard reductions on a hand-made scores table, and rendering."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grb_dist.evaluation.metrics import attack_scores, defense_scores
from grb_dist.leaderboard import attack_board, defense_board, leaderboards, render, to_arrow

# accuracies[attack][repeat] = {defense: acc}
ACC = {
    "rnd": [{"gcn": 0.80, "gat": 0.70, "mlp": 0.60, "sage": 0.50}, {"gcn": 0.78, "gat": 0.72, "mlp": 0.60, "sage": 0.52}],
    "fgsm": [{"gcn": 0.30, "gat": 0.40, "mlp": 0.60, "sage": 0.20}, {"gcn": 0.32, "gat": 0.44, "mlp": 0.60, "sage": 0.22}],
}
CLEAN = {"gcn": 0.85, "gat": 0.80, "mlp": 0.60, "sage": 0.70}


def table() -> pd.DataFrame:
    rows = []
    for d, acc in CLEAN.items():
        rows.append({"difficulty": "full", "attack": "none", "surrogate": "none", "defense": d, "repeat": 0, "accuracy": acc})
    for a, reps in ACC.items():
        for r, accs in enumerate(reps):
            for d, acc in accs.items():
                rows.append({"difficulty": "full", "attack": a, "surrogate": "gcn", "defense": d, "repeat": r, "accuracy": acc})
    rows.append({"difficulty": "easy", "attack": "rnd", "surrogate": "gcn", "defense": "gcn", "repeat": 0, "accuracy": 0.9})
    return pd.DataFrame(rows)


def test_hand_computed_weighted():
    # descending for attacks: 0.8, 0.7, 0.6, 0.5 with weights 1, 1/4, 1/9, 1/16 normalised
    w = np.array([1, 1 / 4, 1 / 9, 1 / 16]) / sum([1, 1 / 4, 1 / 9, 1 / 16])
    assert attack_scores([0.5, 0.8, 0.6, 0.7])["weighted"] == pytest.approx(float(w @ [0.8, 0.7, 0.6, 0.5]))
    assert attack_scores([0.5, 0.8, 0.6, 0.7])["avg_3_max"] == pytest.approx(0.7)


def test_attack_board_matches_metric_functions():
    board = attack_board(table(), "full")
    assert list(board["attack"]) == ["fgsm", "rnd"]  # lower weighted = stronger attack ranks first
    assert list(board["rank"]) == [1, 2]
    for _, row in board.iterrows():
        per = [attack_scores(list(accs.values())) for accs in ACC[row["attack"]]]
        for key in ("average", "avg_3_max", "weighted"):
            vals = [p[key] for p in per]
            assert row[f"{key}_mean"] == pytest.approx(np.mean(vals))
            assert row[f"{key}_std"] == pytest.approx(np.std(vals))
        assert row["n_defenses"] == 4 and row["n_repeats"] == 2


def test_defense_board_includes_clean_row_in_every_repeat():
    board = defense_board(table(), "full")
    expected = {}
    for d in CLEAN:
        per = [defense_scores([ACC["rnd"][r][d], ACC["fgsm"][r][d], CLEAN[d]]) for r in range(2)]
        expected[d] = {k: (np.mean([p[k] for p in per]), np.std([p[k] for p in per])) for k in per[0]}
    order = sorted(CLEAN, key=lambda d: -expected[d]["weighted"][0])
    assert list(board["defense"]) == order
    for _, row in board.iterrows():
        for key in ("average", "avg_3_min", "weighted"):
            assert row[f"{key}_mean"] == pytest.approx(expected[row["defense"]][key][0])
            assert row[f"{key}_std"] == pytest.approx(expected[row["defense"]][key][1])
        assert row["clean_accuracy"] == CLEAN[row["defense"]]
        assert row["n_attacks"] == 3 and row["n_repeats"] == 2
    mlp = board.set_index("defense").loc["mlp"]
    assert mlp["weighted_mean"] == pytest.approx(0.6) and mlp["weighted_std"] == pytest.approx(0.0)


def test_boards_per_difficulty_and_partial_runs():
    boards = leaderboards(table())
    assert list(boards) == ["attacks-easy", "defenses-easy", "attacks-full", "defenses-full"]
    easy = boards["defenses-easy"]
    assert easy.loc[0, "defense"] == "gcn" and pd.isna(easy.loc[0, "clean_accuracy"])
    assert attack_board(table(), "hard").empty and defense_board(table(), "hard").empty
    for name, b in boards.items():
        assert to_arrow(name, b).num_rows == len(b)


@pytest.mark.parametrize("fmt, needle", [("md", "| Rank | Attack |"), ("csv", "weighted_mean"), ("html", "<table>")])
def test_render_formats(fmt, needle):
    text = render(leaderboards(table()), fmt)
    assert needle in text and "fgsm" in text


def test_render_unknown_format():
    from grb_dist.errors import ConfigError

    with pytest.raises(ConfigError, match="format"):
        render({}, "pdf")
