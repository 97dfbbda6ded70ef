"""Leaderboard reductions on hand-made scores tables (per scenario and difficulty), their
renderings (Markdown, CSV, LaTeX, HTML, terminal) and ``grb-dist leaderboard`` on a run
directory built without Ray."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from grb_dist.evaluation.metrics import attack_scores, defense_scores
from grb_dist.leaderboard import attack_board, defense_board, leaderboards, parse_name, render, to_arrow
from grb_dist.leaderboard.render import LONG_COLUMNS, latex_escape, long_table
from grb_dist.store import RunLock, RunStore, schema

# accuracies[attack][repeat] = {defense: acc}
ACC = {
    "rnd": [{"gcn": 0.80, "gat": 0.70, "mlp": 0.60, "sage": 0.50}, {"gcn": 0.78, "gat": 0.72, "mlp": 0.60, "sage": 0.52}],
    "fgsm": [{"gcn": 0.30, "gat": 0.40, "mlp": 0.60, "sage": 0.20}, {"gcn": 0.32, "gat": 0.44, "mlp": 0.60, "sage": 0.22}],
}
CLEAN = {"gcn": 0.85, "gat": 0.80, "mlp": 0.60, "sage": 0.70}


def table() -> pd.DataFrame:
    """The hand-computed injection table (no ``scenario`` column: the GRB default)."""
    rows = []
    for d, acc in CLEAN.items():
        rows.append({"difficulty": "full", "attack": "none", "surrogate": "none", "defense": d, "repeat": 0, "accuracy": acc})
    for a, reps in ACC.items():
        for r, accs in enumerate(reps):
            for d, acc in accs.items():
                rows.append({"difficulty": "full", "attack": a, "surrogate": "gcn", "defense": d, "repeat": r, "accuracy": acc})
    rows.append({"difficulty": "easy", "attack": "rnd", "surrogate": "gcn", "defense": "gcn", "repeat": 0, "accuracy": 0.9})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- synthetic runs

DEFENSES = ("gcn", "gcn_ln", "gat", "mlp")
ATTACKS = {"injection": ("fgsm", "tdgia"), "modification": ("dice", "fga")}


def _default(field: pa.Field):
    """A neutral value of a SCORES column the synthetic rows do not set."""
    t = field.type
    if pa.types.is_list(t):
        return []
    if pa.types.is_string(t):
        return "x"
    if pa.types.is_integer(t):
        return 0
    if pa.types.is_floating(t):
        return 0.0
    if pa.types.is_timestamp(t):
        return dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    if pa.types.is_boolean(t):
        return False
    return None


def synthetic_scores(scenarios=("injection", "modification"), difficulties=("easy", "medium", "hard", "full"),
                     repeats: int = 2, budgets: tuple[int, ...] = (10,), seed: int = 0) -> pd.DataFrame:
    """Score rows with every column of ``schema.SCORES``: per scenario its own clean rows
    (attack ``none``, repeat 0) and attacked rows (modification rows inject no node)."""
    rng = np.random.default_rng(seed)
    rows = []
    for scenario in scenarios:
        for d in difficulties:
            for defense in DEFENSES:
                cells = [("none", "none", 0, 0)]
                cells += [(a, "gcn", r, b) for a in ATTACKS.get(scenario, ("rnd",)) for r in range(repeats)
                          for b in budgets]
                for attack, surrogate, repeat, budget in cells:
                    clean = attack == "none"
                    rows.append({
                        "cell_id": f"{scenario}-{d}-{defense}-{attack}-{repeat}-{budget}",
                        "config_hash": "c0ffee0123456789", "perturbation_id": None if clean else f"p-{attack}-{repeat}",
                        "dataset": "csbm", "dataset_fingerprint": "f" * 64, "scenario": scenario, "difficulty": d,
                        "attack": attack, "surrogate": surrogate, "defense": defense, "repeat": repeat,
                        "accuracy": float(rng.uniform(0.7, 0.9) if clean else rng.uniform(0.1, 0.6)),
                        "n_targets": 50, "n_injected": 0 if clean or scenario == "modification" else budget,
                        "version": "0.1.0", "created_at": dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc),
                    })
    full = [{f.name: r.get(f.name, _default(f)) for f in schema.SCORES} for r in rows]
    return pa.Table.from_pylist(full, schema=schema.SCORES).to_pandas()


MANIFEST_DATASET = {"label": "csbm", "source": "csbm", "fingerprint": "f" * 64, "parts": {}, "normalize": "arctan",
                    "data_seed": 0, "num_nodes": 2000, "num_edges": 5000, "num_features": 32, "num_classes": 4}


def make_run(root: Path, scores: pd.DataFrame) -> RunStore:
    """A run directory with a manifest and ``scores``, written through the store (no Ray)."""
    lock = RunLock(root).acquire()
    try:
        store = RunStore.open(root, dataset=MANIFEST_DATASET, components={"job": {"seed": {"seed": 0}}},
                              config={"dataset": "csbm"}, config_hash="c0ffee0123456789", lock=lock)
        store.write_scores(pa.Table.from_pandas(scores, schema=schema.SCORES, preserve_index=False).to_pylist())
    finally:
        lock.release()
    return store


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# ----------------------------------------------------------------------------- ranking


def test_hand_computed_weighted():
    # descending for attacks: 0.8, 0.7, 0.6, 0.5 with weights 1, 1/4, 1/9, 1/16 normalised
    w = np.array([1, 1 / 4, 1 / 9, 1 / 16]) / sum([1, 1 / 4, 1 / 9, 1 / 16])
    assert attack_scores([0.5, 0.8, 0.6, 0.7])["weighted"] == pytest.approx(float(w @ [0.8, 0.7, 0.6, 0.5]))
    assert attack_scores([0.5, 0.8, 0.6, 0.7])["avg_3_max"] == pytest.approx(0.7)


def test_attack_board_matches_metric_functions():
    board = attack_board(table(), "full")
    assert list(board["attack"]) == ["fgsm", "rnd"]  # lower weighted = stronger attack ranks first
    assert list(board["rank"]) == [1, 2] and set(board["scenario"]) == {"injection"}
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
        assert row["n_attacks"] == 2 and row["n_repeats"] == 2  # rnd and fgsm; the clean row is not counted
    mlp = board.set_index("defense").loc["mlp"]
    assert mlp["weighted_mean"] == pytest.approx(0.6) and mlp["weighted_std"] == pytest.approx(0.0)


def test_boards_per_difficulty_and_partial_runs():
    boards = leaderboards(table())
    assert list(boards) == ["injection/attacks-easy", "injection/defenses-easy", "injection/attacks-full",
                            "injection/defenses-full"]
    easy = boards["injection/defenses-easy"]
    assert easy.loc[0, "defense"] == "gcn" and pd.isna(easy.loc[0, "clean_accuracy"])
    assert attack_board(table(), "hard").empty and defense_board(table(), "hard").empty
    for name, b in boards.items():
        assert to_arrow(name, b).num_rows == len(b)


def test_scenarios_are_ranked_apart():
    """A modification board is the injection table's board relabelled: rows of the other
    scenario (its clean rows included) never enter it."""
    inj = table().assign(scenario="injection")
    mod = table().assign(scenario="modification")
    mod["accuracy"] = mod["accuracy"] / 2
    both = pd.concat([inj, mod], ignore_index=True)
    boards = leaderboards(both)
    assert [parse_name(n)[0] for n in boards] == ["injection"] * 4 + ["modification"] * 4
    alone = defense_board(table(), "full")
    got = boards["injection/defenses-full"]
    pd.testing.assert_frame_equal(got.drop(columns="scenario"), alone.drop(columns="scenario"))
    half = boards["modification/defenses-full"].set_index("defense")
    assert half.loc["mlp", "clean_accuracy"] == pytest.approx(0.3)
    assert set(boards["modification/attacks-full"]["scenario"]) == {"modification"}
    with pytest.raises(ValueError, match="several scenarios"):
        attack_board(both, "full")  # which scenario? never mixed silently
    only = leaderboards(both, ["full"], ["modification"])
    assert list(only) == ["modification/attacks-full", "modification/defenses-full"]


def test_any_scenario_value_and_board_names():
    other = table().assign(scenario="poisoning")
    assert list(leaderboards(other))[0] == "poisoning/attacks-easy"
    assert parse_name("attacks-full") == ("injection", "attacks", "full")  # the layout before scenarios
    assert parse_name("modification/defenses-hard") == ("modification", "defenses", "hard")
    with pytest.raises(ValueError):
        parse_name("injection/nothing-full")


# ----------------------------------------------------------------------------- renderings


@pytest.mark.parametrize("fmt, needle", [("md", "| Rank | Attack |"), ("csv", "weighted_mean"), ("html", "<table"),
                                         ("latex", "\\toprule")])
def test_render_formats(fmt, needle):
    text = render(leaderboards(table()), fmt)
    assert needle in text and "fgsm" in text


def test_render_unknown_format():
    from grb_dist.core.errors import ConfigError

    with pytest.raises(ConfigError, match="format"):
        render({}, "pdf")


def test_titles_say_the_scenario():
    boards = leaderboards(synthetic_scores(difficulties=("full",)))
    md = render(boards, "md")
    assert "### Attacks over defenses (full; injection;" in md
    assert "### Defenses over attacks (full; modification;" in md


def test_long_csv_is_one_table_pandas_reads():
    boards = leaderboards(synthetic_scores())
    back = pd.read_csv(io.StringIO(render(boards, "csv")))
    assert list(back.columns) == LONG_COLUMNS
    assert len(back) == sum(len(b) for b in boards.values())
    assert set(back["scenario"]) == {"injection", "modification"} and set(back["board"]) == {"attacks", "defenses"}
    assert back["rank"].dtype.kind == "i" and back["weighted_mean"].dtype.kind == "f"
    one = back.query("scenario == 'modification' and board == 'defenses' and difficulty == 'hard'")
    board = boards["modification/defenses-hard"]
    assert list(one["defense"]) == list(board["defense"])
    np.testing.assert_allclose(one["weighted_mean"], board["weighted_mean"], rtol=5e-6)  # CSV: 6 significant digits
    assert one["attack"].isna().all() and one["n_defenses"].isna().all()
    assert list(long_table({}).columns) == LONG_COLUMNS  # nothing to show: still a well-formed table


def test_latex_booktabs_and_escaping():
    scores = synthetic_scores(scenarios=("injection",), difficulties=("full",))
    scores.loc[scores["attack"] == "fgsm", "attack"] = "fgsm_50%&#"
    text = render(leaderboards(scores), "latex")
    assert text.count("\\begin{table}") == 2 == text.count("\\end{table}")
    for rule in ("\\toprule", "\\midrule", "\\bottomrule"):
        assert text.count(rule) == 2
    assert "gcn\\_ln" in text and "fgsm\\_50\\%\\&\\#" in text
    assert "_" not in text.replace("\\_", "")  # every underscore escaped
    for line in text.splitlines():
        if line.endswith("\\\\"):  # a row: cells separated by unescaped & only
            assert line.count(" & ") == 7, line
    assert latex_escape("a_b{c}~^\\") == "a\\_b\\{c\\}\\textasciitilde{}\\textasciicircum{}\\textbackslash{}"


def test_html_is_a_sortable_page():
    text = render(leaderboards(table()), "html")
    assert text.startswith("<!doctype html>") and "<style>" in text and "addEventListener" in text
    assert 'data-value="' in text and 'class="board"' in text


def test_one_repeat_shows_the_mean_alone_and_says_why():
    """A board over one repeat has no spread to show: its cells hold the mean alone (never
    ``± 0.0000``, which reads as no variance), its legend says a spread needs --repeats > 1,
    and the CSV keeps its numeric std columns; two repeats show ``mean ± std``."""
    import re

    from rich.console import Console

    from grb_dist.leaderboard.render import rich_tables

    one = leaderboards(synthetic_scores(scenarios=("injection",), difficulties=("full",), repeats=1))
    two = leaderboards(synthetic_scores(scenarios=("injection",), difficulties=("full",), repeats=2))
    spread = re.compile(r"\d\.\d{4}(?: ± | \$\\pm\$ )\d\.\d{4}")  # a metric cell: mean ± std
    for fmt in ("md", "html", "latex"):
        assert not spread.search(render(one, fmt)) and "0.0000" not in render(one, fmt), fmt
        assert spread.search(render(two, fmt)), fmt
    md = render(one, "md")
    row = next(line for line in md.splitlines() if line.startswith("| 1 | "))
    assert row.count(" | ") == 7 and "±" not in row and row.endswith(" | 1 |"), row  # Repeats 1
    assert md.count("a spread needs --repeats > 1") == 2  # both boards' legends
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(*rich_tables(one))
    text = " ".join(out.getvalue().split())
    assert not spread.search(text) and "0.0000" not in text and "--repeats > 1" in text
    back = pd.read_csv(io.StringIO(render(one, "csv")))
    assert back["weighted_std"].dtype.kind in "if" and (back["weighted_std"] == 0).all() and (back["n_repeats"] == 1).all()


# ----------------------------------------------------------------------------- the command

runner = CliRunner()


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_run(tmp_path / "run", synthetic_scores(difficulties=("easy", "full")))
    return tmp_path / "run"


def _app():
    from grb_dist.cli import app

    return app


def run_bytes(root: Path) -> dict[str, bytes | None]:
    """Every entry of a run directory: a file's bytes, ``None`` for a directory."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes() for p in root.rglob("*")}


@pytest.mark.parametrize("args", [
    ["--format", "md"],
    [],
    ["--scenario", "modification", "--difficulty", "full", "--format", "csv"],
    ["--difficulty", "easy", "--format", "latex", "--output", "-"],
    ["--format", "csv", "--output", "boards"],
    ["--format", "html", "--output", "boards.html"],
])
def test_leaderboard_never_writes_into_the_run(run, args):
    """A read-only command: the run's bytes (its leaderboard/ files included) are the same
    after it, whatever it prints or writes elsewhere."""
    (run / "leaderboard").mkdir(exist_ok=True)
    (run / "leaderboard" / "old.md").write_text("the sweep's\n")
    before = run_bytes(run)
    r = runner.invoke(_app(), ["leaderboard", "run", *args])
    assert r.exit_code == 0, r.output
    assert r.output.strip(), r.output  # the boards, or where they were written
    assert run_bytes(run) == before


def test_report_writes_its_report_and_nothing_else_of_the_run(run, tmp_path):
    """report: its page and figures under --output (default RUN/report/); no other byte of
    the run changes."""
    before = run_bytes(run)
    r = runner.invoke(_app(), ["report", "run", "--output", str(tmp_path / "elsewhere")])
    assert r.exit_code == 0, r.output
    assert run_bytes(run) == before and (tmp_path / "elsewhere" / "index.html").is_file()
    r = runner.invoke(_app(), ["report", "run"])
    assert r.exit_code == 0, r.output
    after = run_bytes(run)
    assert (run / "report" / "index.html").is_file()
    assert {k: v for k, v in after.items() if k != "report" and not k.startswith("report/")} == before


def test_leaderboard_scenario_filter(run):
    r = runner.invoke(_app(), ["leaderboard", "run", "--scenario", "modification", "--difficulty", "full",
                               "--format", "csv"])
    assert r.exit_code == 0, r.output
    back = pd.read_csv(io.StringIO(r.output))
    assert set(back["scenario"]) == {"modification"} and set(back["difficulty"]) == {"full"}
    assert set(back["attack"].dropna()) == {"dice", "fga"}


def test_leaderboard_csv_directory_one_table_per_board(run, tmp_path):
    r = runner.invoke(_app(), ["leaderboard", "run", "--format", "csv", "--output", "boards"])
    assert r.exit_code == 0, r.output
    files = sorted(p.name for p in (tmp_path / "boards").iterdir())
    assert files == sorted(f"{s}-{k}-{d}.csv" for s in ("injection", "modification") for k in ("attacks", "defenses")
                           for d in ("easy", "full"))
    for f in files:
        back = pd.read_csv(tmp_path / "boards" / f)
        expected = schema.ATTACK_BOARD if "-attacks-" in f else schema.DEFENSE_BOARD
        assert list(back.columns) == expected.names and len(back) > 0
        assert set(back["scenario"]) == {f.split("-")[0]}
    r = runner.invoke(_app(), ["leaderboard", "run", "--format", "csv", "--output", "all.csv"])
    assert r.exit_code == 0 and list(pd.read_csv(tmp_path / "all.csv").columns) == LONG_COLUMNS


def test_leaderboard_latex_and_html_files(run, tmp_path):
    for fmt, needle in (("latex", "\\bottomrule"), ("html", "<table")):
        r = runner.invoke(_app(), ["leaderboard", "run", "--format", fmt, "--output", f"boards.{fmt}"])
        assert r.exit_code == 0, r.output
        text = (tmp_path / f"boards.{fmt}").read_text()
        assert needle in text and ("gcn\\_ln" if fmt == "latex" else "gcn_ln") in text


def test_leaderboard_terminal_shows_tables(run, monkeypatch):
    from rich.console import Console

    import grb_dist.cli.base as cli

    monkeypatch.setattr(cli, "console", Console(force_terminal=True, width=200, color_system=None))
    r = runner.invoke(_app(), ["leaderboard", "run", "--scenario", "injection"])
    assert r.exit_code == 0, r.output
    assert "Attacks over defenses (easy; injection;" in r.output and "┃" in r.output
    assert "| Rank |" not in r.output and "modification" not in r.output


@pytest.mark.parametrize("args, word", [
    (["--format", "pdf"], "format"),
    (["--format", "latex2"], "format"),
    (["--scenario", "poisoning"], "poisoning"),
    (["--scenario", ""], "scenario"),
    (["--difficulty", "extreme"], "extreme"),
    (["--difficulty", "medium"], "medium"),  # a difficulty the run does not hold: no empty boards
    (["--format", "csv", "--output", "missing/dir/boards"], "does not exist"),
])
def test_leaderboard_bad_input_one_line_nothing_written(run, tmp_path, args, word):
    before = tree(tmp_path)
    r = runner.invoke(_app(), ["leaderboard", "run", *args])
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and word in lines[0], r.output
    assert tree(tmp_path) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
def test_leaderboard_read_only_run(run):
    os.chmod(run, 0o555)
    try:
        r = runner.invoke(_app(), ["leaderboard", "run", "--format", "csv"])
    finally:
        os.chmod(run, 0o755)
    assert r.exit_code == 0 and "modification" in r.output and "error" not in r.output, r.output


def test_manifest_is_untouched_by_leaderboard(run):
    before = json.loads((run / "manifest.json").read_text())
    assert runner.invoke(_app(), ["leaderboard", "run", "--format", "md"]).exit_code == 0
    assert json.loads((run / "manifest.json").read_text()) == before
