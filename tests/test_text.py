"""Counts and numbers as grb-dist writes them: plural-aware counts (``1 surrogate``,
``2 difficulties``), durations in words and CSV files with a name on every column and rounded
floats."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from grb_dist.cli import app
from grb_dist.core.text import csv_text, duration, plural, plural_form
from grb_dist.leaderboard.rank import leaderboards
from grb_dist.leaderboard.render import render
from test_leaderboard import make_run, synthetic_scores

runner = CliRunner()


def test_plural_counts():
    assert plural(1, "surrogate") == "1 surrogate"
    assert plural(2, "surrogate") == "2 surrogates"
    assert plural(0, "repeat") == "0 repeats"
    assert plural(1, "difficulty") == "1 difficulty" and plural(4, "difficulty") == "4 difficulties"
    assert plural(np.int64(1), "figure") == "1 figure" and plural(np.int64(3), "figure") == "3 figures"
    assert plural(2_000, "node") == "2,000 nodes"
    assert plural(2, "CSV file") == "2 CSV files" and plural(1, "score file") == "1 score file"
    assert [plural_form(w) for w in ("day", "batch", "epoch", "training epoch", "study")] == [
        "days", "batches", "epochs", "training epochs", "studies"]
    assert plural(2, "matrix", "matrices") == "2 matrices"


def test_durations_in_words():
    assert [duration(s) for s in (0.04, 13.5, 59.94, 59.96, 245, 3599.9)] == [
        "0.0 s", "13.5 s", "59.9 s", "1 min 00 s", "4 min 05 s", "59 min 59 s"]
    assert duration(7800) == "2 h 10 min" and duration(86399) == "23 h 59 min" and duration(97200) == "1 d 03 h"
    assert duration(-0.2) == "0.0 s"  # a difference of two clocks that went below zero


def test_compact_counts_in_the_singular(tmp_path):
    run = tmp_path / "run"
    make_run(run, synthetic_scores(scenarios=("injection",), difficulties=("full",)))
    r = runner.invoke(app, ["compact", str(run)])
    assert r.exit_code == 0, r.output
    assert "1 score file -> 1 (0 partitions merged, 0 rows rewritten unchanged)" in r.output, r.output
    r = runner.invoke(app, ["leaderboard", str(run), "--format", "csv", "--output", str(tmp_path / "boards")])
    assert r.exit_code == 0 and "wrote 2 CSV files" in r.output, r.output


def _significant(text: str) -> int:
    """Significant digits of a number as written."""
    mantissa = text.lstrip("-").split("e")[0].replace(".", "").lstrip("0")
    return len(mantissa)


def test_csv_text_names_every_column_and_rounds_floats():
    frame = pd.DataFrame({"a": [np.float32(0.8844444), 1.0, 123456.78], "n": [1, 2, 3]},
                         index=pd.Index(["x", "y", "z"], name="budget"))
    text = csv_text(frame, index_label="budget")
    assert text.splitlines() == ["budget,a,n", "x,0.884444,1", "y,1,2", "z,123457,3"]
    assert csv_text(frame).splitlines()[0] == "a,n"  # no index: no unnamed column


def test_leaderboard_csv_floats_are_rounded():
    boards = leaderboards(synthetic_scores())
    text = render(boards, "csv")
    back = pd.read_csv(io.StringIO(text), dtype=str)
    assert all(c and not c.startswith("Unnamed") for c in back.columns)
    values = [v for c in ("weighted_mean", "average_std", "clean_accuracy") for v in back[c].dropna()]
    assert values and max(_significant(v) for v in values) <= 6, values
    board = boards["injection/attacks-full"]
    one = pd.read_csv(io.StringIO(text)).query("scenario == 'injection' and board == 'attacks' and difficulty == 'full'")
    np.testing.assert_allclose(one["weighted_mean"], board["weighted_mean"], rtol=5e-6)
