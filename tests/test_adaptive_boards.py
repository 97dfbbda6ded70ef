"""Adaptive (white-box) evaluation next to the GRB transfer boards: the robustness board, the
transfer matrix and ``adaptive_vs_transfer`` on a hand-computed scores table, the GRB
boards left as they were, the boards saved and printed, and the report's section."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from grb_dist.leaderboard import (
    adaptive_vs_transfer,
    attack_board,
    defense_board,
    leaderboards,
    robustness_board,
    to_arrow,
    transfer_board,
    transfer_matrix,
)
from grb_dist.leaderboard.reduce import reduce_run
from grb_dist.leaderboard.render import ADAPTIVE_LONG_COLUMNS, LEGENDS, LONG_COLUMNS, render, to_markdown
from grb_dist.report import build_report
from grb_dist.store import RunStore, schema

from test_leaderboard import make_run, synthetic_scores
from test_report import ENV, MANIFEST, NOW, dom

CLEAN = {"gcn": 0.85, "gat": 0.80, "mlp": 0.60, "sage": 0.70}
# TRANSFER[(attack, surrogate)][defense] = accuracies of repeats 0 and 1
TRANSFER = {
    ("fgsm", "gcn"): {"gcn": (0.50, 0.54), "gat": (0.60, 0.62), "mlp": (0.60, 0.60), "sage": (0.40, 0.44)},
    ("pgd", "gcn"): {"gcn": (0.46, 0.50), "gat": (0.64, 0.66), "mlp": (0.60, 0.60), "sage": (0.45, 0.45)},
    ("pgd", "sgc"): {"gcn": (0.52, 0.52), "gat": (0.58, 0.60), "mlp": (0.58, 0.60), "sage": (0.50, 0.50)},
}
# ADAPTIVE[defense][attack] = accuracies of repeats 0 and 1 (the surrogate is the defense); sage has none
ADAPTIVE = {"gcn": {"fgsm": (0.30, 0.34), "pgd": (0.20, 0.24)}, "gat": {"pgd": (0.62, 0.64)},
            "mlp": {"pgd": (0.40, 0.40)}}


def hand(adaptive: bool = True, threat: bool = True) -> pd.DataFrame:
    rows = [{"difficulty": "full", "attack": "none", "surrogate": "none", "defense": d, "repeat": 0, "accuracy": a,
             "threat": "transfer"} for d, a in CLEAN.items()]
    for (attack, surrogate), accs in TRANSFER.items():
        for d, pair in accs.items():
            rows += [{"difficulty": "full", "attack": attack, "surrogate": surrogate, "defense": d, "repeat": r,
                      "accuracy": a, "threat": "transfer"} for r, a in enumerate(pair)]
    if adaptive:
        for d, attacks in ADAPTIVE.items():
            for attack, pair in attacks.items():
                rows += [{"difficulty": "full", "attack": attack, "surrogate": d, "defense": d, "repeat": r,
                          "accuracy": a, "threat": "adaptive"} for r, a in enumerate(pair)]
    df = pd.DataFrame(rows)
    return df if threat else df.drop(columns="threat")


# ----------------------------------------------------------------------------- the GRB boards


def test_grb_boards_ignore_adaptive_rows():
    without = hand(adaptive=False, threat=False)  # a run written before the threat column
    for board in (attack_board, defense_board):
        pd.testing.assert_frame_equal(board(hand(), "full"), board(without, "full"))
    # an adaptive pgd row would otherwise be the pair (pgd, gcn) of defense gcn: it must not count
    assert set(zip(attack_board(hand(), "full")["attack"], attack_board(hand(), "full")["surrogate"])) == set(TRANSFER)
    nulls = hand(adaptive=False).assign(threat=None)  # missing values read as transfer
    pd.testing.assert_frame_equal(defense_board(nulls, "full"), defense_board(without, "full"))


def test_only_scenarios_with_adaptive_rows_or_several_surrogates_get_the_new_boards():
    assert list(leaderboards(hand())) == ["injection/attacks-full", "injection/defenses-full",
                                          "injection/robustness-full", "injection/transfer-full"]
    assert list(leaderboards(hand(adaptive=False))) == ["injection/attacks-full", "injection/defenses-full",
                                                        "injection/transfer-full"]  # two surrogates
    one = hand(adaptive=False, threat=False)
    one = one[one["surrogate"] != "sgc"]
    assert list(leaderboards(one)) == ["injection/attacks-full", "injection/defenses-full"]
    two = pd.concat([hand().assign(scenario="injection"), one.assign(scenario="modification")], ignore_index=True)
    # every GRB board first (both scenarios), then the adaptive boards
    assert list(leaderboards(two)) == ["injection/attacks-full", "injection/defenses-full",
                                       "modification/attacks-full", "modification/defenses-full",
                                       "injection/robustness-full", "injection/transfer-full"]


# ----------------------------------------------------------------------------- robustness board


def test_robustness_board_worst_cases_gap_and_ranks():
    b = robustness_board(hand(), "full").set_index("defense")
    assert list(b.index) == ["gat", "mlp", "gcn", "sage"]  # sage (0.42) is transfer only: after mlp (0.40)
    assert list(b["rank"]) == [1, 2, 3, 4]
    want = {  # transfer worst (pair), adaptive worst (attack), gap, robust, n_transfer, n_adaptive, note
        "gcn": (0.48, "pgd from gcn", 0.22, "pgd", 0.26, 0.22, 3, 2, ""),
        "gat": (0.59, "pgd from sgc", 0.63, "pgd", -0.04, 0.59, 3, 1, "adaptive weaker than transfer"),
        "mlp": (0.59, "pgd from sgc", 0.40, "pgd", 0.19, 0.40, 3, 1, ""),
    }
    for d, (t, ta, a, aa, gap, robust, nt, na, note) in want.items():
        row = b.loc[d]
        assert row["transfer_accuracy"] == pytest.approx(t) and row["transfer_attack"] == ta
        assert row["adaptive_accuracy"] == pytest.approx(a) and row["adaptive_attack"] == aa
        assert row["gap"] == pytest.approx(gap) and row["robust_accuracy"] == pytest.approx(robust)
        assert (row["n_transfer"], row["n_adaptive"], row["note"]) == (nt, na, note)
        assert row["clean_accuracy"] == pytest.approx(CLEAN[d])
    sage = b.loc["sage"]
    assert sage["transfer_accuracy"] == pytest.approx(0.42) and sage["transfer_attack"] == "fgsm from gcn"
    assert pd.isna(sage["adaptive_accuracy"]) and pd.isna(sage["gap"]) and pd.isna(sage["adaptive_attack"])
    assert sage["robust_accuracy"] == pytest.approx(0.42) and sage["note"] == "transfer only"
    assert to_arrow("injection/robustness-full", robustness_board(hand(), "full")).schema == schema.ROBUSTNESS_BOARD


def test_robustness_board_ties_by_name_and_without_threat_column():
    tie = hand()
    tie.loc[(tie["threat"] == "adaptive") & (tie["defense"] == "mlp"), "accuracy"] = 0.59  # mlp robust 0.59 = gat
    assert list(robustness_board(tie, "full")["defense"][:2]) == ["gat", "mlp"]
    plain = robustness_board(hand(adaptive=False, threat=False), "full")
    assert list(plain["defense"]) == ["gat", "mlp", "gcn", "sage"]  # 0.59, 0.59 (tie by name), 0.48, 0.42
    assert set(plain["note"]) == {"transfer only"} and (plain["n_adaptive"] == 0).all()
    np.testing.assert_allclose(plain["robust_accuracy"], [0.59, 0.59, 0.48, 0.42])
    assert robustness_board(hand(), "easy").empty


def test_adaptive_vs_transfer_per_attack():
    got = adaptive_vs_transfer(hand(), "injection", "full")
    assert list(zip(got["defense"], got["attack"])) == [(d, a) for d in ("gat", "gcn", "mlp", "sage")
                                                        for a in ("fgsm", "pgd")]
    g = got.set_index(["defense", "attack"])
    assert g.loc[("gat", "pgd"), "transfer_accuracy"] == pytest.approx(0.59)  # worst of gcn 0.65, sgc 0.59
    assert g.loc[("gat", "pgd"), "transfer_surrogate"] == "sgc"
    assert g.loc[("gat", "pgd"), "gap"] == pytest.approx(-0.04)
    assert g.loc[("gcn", "fgsm"), "adaptive_accuracy"] == pytest.approx(0.32)
    assert g.loc[("gcn", "fgsm"), "gap"] == pytest.approx(0.20)
    assert g.loc[("gcn", "pgd"), "transfer_surrogate"] == "gcn" and g.loc[("gcn", "pgd"), "gap"] == pytest.approx(0.26)
    assert g["adaptive_accuracy"].isna().sum() == 4  # fgsm of gat and mlp, both of sage
    checked = got.dropna(subset=["gap"])
    assert list(checked.loc[checked["gap"] < -0.01, "defense"]) == ["gat"]  # the one adaptive attack weaker


# ----------------------------------------------------------------------------- transfer matrix


def test_transfer_matrix_means_over_attacks_and_the_adaptive_row():
    board = transfer_board(hand(), "full")
    assert list(board.columns) == schema.TRANSFER_BOARD.names
    m = transfer_matrix(board)
    assert list(m.index) == ["gcn", "sgc", "adaptive"] and list(m.columns) == ["gat", "gcn", "mlp", "sage"]
    np.testing.assert_allclose(m.loc["gcn"], [0.63, 0.50, 0.60, 0.435])
    np.testing.assert_allclose(m.loc["sgc"], [0.59, 0.52, 0.59, 0.50])
    np.testing.assert_allclose(m.loc["adaptive", ["gat", "gcn", "mlp"]], [0.63, 0.27, 0.40])
    assert np.isnan(m.loc["adaptive", "sage"])
    n = board.set_index(["surrogate", "defense"])["n_attacks"]
    assert (n[("gcn", "gcn")], n[("sgc", "gcn")], n[("adaptive", "gcn")], n[("adaptive", "gat")]) == (2, 1, 2, 1)
    assert "adaptive" not in set(transfer_board(hand(threat=False), "full")["surrogate"])


# ----------------------------------------------------------------------------- rendering, saving, printing


def test_markdown_and_long_csv_of_the_new_boards():
    boards = leaderboards(hand())
    md = to_markdown(boards["injection/robustness-full"], "injection/robustness-full")
    assert LEGENDS["robustness"] in md and "| Rank | Defense | Clean | Transfer |" in md
    assert "| 1 | gat | 0.8000 | 0.5900 | pgd from sgc | 0.6300 | pgd | -0.0400 | 0.5900 | 1 |" in md
    assert "| 4 | sage | 0.7000 | 0.4200 | fgsm from gcn | - |  | - | 0.4200 | 0 | transfer only |" in md
    mt = to_markdown(boards["injection/transfer-full"], "injection/transfer-full")
    assert LEGENDS["transfer"] in mt and "| Surrogate | gat | gcn | mlp | sage |" in mt
    assert "| adaptive | 0.6300 | 0.2700 | 0.4000 | - |" in mt
    back = pd.read_csv(io.StringIO(render(boards, "csv")))
    assert list(back.columns) == LONG_COLUMNS + ADAPTIVE_LONG_COLUMNS
    rob = back[back["board"] == "robustness"].set_index("defense")
    assert rob.loc["gcn", "gap"] == pytest.approx(0.26) and rob.loc["sage", "note"] == "transfer only"
    for fmt, needle in (("html", "pgd from sgc"), ("latex", "Transfer attack")):
        assert needle in render(boards, fmt)


@pytest.fixture
def adaptive_run(tmp_path, monkeypatch):
    """A run whose stored scores read back with adaptive rows (the store's SCORES schema has
    no threat column yet, so the rows are handed to the reduction directly)."""
    monkeypatch.chdir(tmp_path)
    frame = hand().assign(scenario="injection")
    make_run(tmp_path / "run", synthetic_scores(scenarios=("injection",), difficulties=("full",)))
    monkeypatch.setattr(RunStore, "read_scores", lambda self, on_warning=None, complete=False: frame)
    return tmp_path / "run", frame


def test_reduce_writes_the_new_boards_with_their_schemas(adaptive_run):
    root, frame = adaptive_run
    boards = reduce_run(RunStore.existing(root))
    for kind, sch in (("robustness", schema.ROBUSTNESS_BOARD), ("transfer", schema.TRANSFER_BOARD)):
        path = root / "leaderboard" / "injection" / f"{kind}-full.parquet"
        assert pq.read_schema(path).remove_metadata() == sch
        back = pd.read_parquet(path)
        pd.testing.assert_frame_equal(back, boards[f"injection/{kind}-full"], check_dtype=False)
        assert LEGENDS[kind] in (root / "leaderboard" / "injection" / f"{kind}-full.md").read_text()
    back = pd.read_parquet(root / "leaderboard" / "injection" / "robustness-full.parquet").set_index("defense")
    assert back.loc["gcn", "robust_accuracy"] == pytest.approx(0.22) and back.loc["gat", "rank"] == 1


def test_leaderboard_command_prints_the_new_boards_after_the_grb_ones(adaptive_run, monkeypatch):
    from rich.console import Console

    import grb_dist.cli.base as cli
    from grb_dist.cli import app

    r = CliRunner().invoke(app, ["leaderboard", "run", "--format", "md"])
    assert r.exit_code == 0, r.output
    order = [r.output.index(t) for t in ("### Attacks over defenses", "### Defenses over attacks",
                                         "### Transfer vs adaptive attacks", "### Transfer matrix")]
    assert order == sorted(order)
    root, frame = adaptive_run
    marked = frame.replace({"defense": {"sage": "[bold]sage[/bold]"}})
    monkeypatch.setattr(RunStore, "read_scores", lambda self, on_warning=None, complete=False: marked)
    monkeypatch.setattr(cli, "console", Console(force_terminal=True, width=250, color_system=None))
    r = CliRunner().invoke(app, ["leaderboard", "run"])
    assert r.exit_code == 0, r.output
    assert "Transfer vs adaptive attacks (full; injection;" in r.output and "┃" in r.output
    assert "[bold]sage[/bold]" in r.output  # a name is printed as it is, not read as markup
    assert r.output.index("Defenses over attacks") < r.output.index("Transfer matrix")


# ----------------------------------------------------------------------------- report


def _report_scores(adaptive: bool) -> pd.DataFrame:
    base = synthetic_scores(scenarios=("injection",), difficulties=("easy", "full"))
    if not adaptive:
        return base.assign(threat="transfer")
    own = base[base["attack"] == "fgsm"].copy()
    own = own.assign(surrogate=own["defense"], threat="adaptive", accuracy=own["accuracy"] / 2,
                     cell_id=own["cell_id"] + "-adaptive")
    return pd.concat([base.assign(threat="transfer"), own], ignore_index=True)


def test_report_section_only_with_adaptive_rows():
    plain = build_report(synthetic_scores(scenarios=("injection",), difficulties=("easy", "full")), MANIFEST,
                         env=ENV, generated_at=NOW)
    transfer = build_report(_report_scores(False), MANIFEST, env=ENV, generated_at=NOW)
    assert transfer.html == plain.html  # a threat column of transfer rows changes nothing
    assert "adaptive" not in dom(plain.html).ids and "Transfer vs adaptive" not in plain.html
    rep = build_report(_report_scores(True), MANIFEST, env=ENV, generated_at=NOW)
    d = dom(rep.html)
    assert {"adaptive", "adaptive-injection"} <= d.ids
    assert d.tables == 4 + 1  # the GRB boards of easy and full, the robustness board of full
    names = [f.name for f in rep.figures]
    assert names == ["heatmap-injection-easy", "heatmap-injection-full", "adaptive-injection-full",
                     "transfer-injection-full", "difficulty-injection"]
    same = {f.name: f.png for f in plain.figures}
    for f in rep.figures:  # the GRB figures are drawn from the transfer rows: the same bytes
        if f.name in same:
            assert f.png == same[f.name], f.name
    assert 'data-board="injection/robustness-full"' in rep.html and "Adaptive attacks</td><td>fgsm" in rep.html
    assert 'href="#adaptive"' in rep.html and 'href="#adaptive"' not in plain.html
