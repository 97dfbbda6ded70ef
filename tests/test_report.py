"""``grb-dist report``: the pure tables and page on synthetic scores (both scenarios), the
files it writes (atomically, also from a read-only run), and the page opened in a real
headless Chromium: every section in the DOM, every figure decoded, a non-trivial screenshot."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from grb_dist.report import PAGE, SECTIONS, build_report, write_report
from grb_dist.report.tables import accuracy_matrix, budget_curves, difficulty_curves, has_budget_sweep

from test_leaderboard import MANIFEST_DATASET, make_run, synthetic_scores, tree

runner = CliRunner()
MANIFEST = {"dataset": MANIFEST_DATASET, "config_hash": "c0ffee0123456789", "version": "0.1.0",
            "created_at": "2026-01-02T00:00:00+00:00", "jobs": [{"config_hash": "c0ffee0123456789"}]}
ENV = {"grb-dist": "0.1.0", "python": "3.11.0", "torch": "2.13.0", "ray": "2.60.0"}
NOW = dt.datetime(2026, 1, 3, 12, 0, tzinfo=dt.timezone.utc)


def _app():
    from grb_dist.cli import app

    return app


class _Dom(HTMLParser):
    """Ids of every element, attributes of every <img> and <body>, <table> count."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.images: list[dict[str, str]] = []
        self.body: dict[str, str] = {}
        self.tables = 0

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "img":
            self.images.append(a)
        elif tag == "body":
            self.body = a
        elif tag == "table" and "board" in a.get("class", ""):
            self.tables += 1


def dom(text: str) -> _Dom:
    parser = _Dom()
    parser.feed(text)
    return parser


# ----------------------------------------------------------------------------- pure functions


def test_accuracy_matrix_clean_first_mean_over_repeats():
    scores = synthetic_scores(difficulties=("hard",))
    m = accuracy_matrix(scores, "modification", "hard")
    assert list(m.columns)[0] == "clean" and set(m.columns) == {"clean", "dice", "fga"}
    mod = scores[(scores["scenario"] == "modification") & (scores["difficulty"] == "hard")]
    want = mod[mod["attack"] == "dice"].groupby("defense")["accuracy"].mean()
    np.testing.assert_allclose(m.loc[want.index, "dice"], want)
    assert list(m["clean"]) == sorted(m["clean"], reverse=True)  # best clean accuracy first
    assert accuracy_matrix(scores, "injection", "easy").empty


def test_difficulty_curves_use_the_bands_only():
    curves = difficulty_curves(synthetic_scores(), "injection")
    assert set(curves) == {"clean", "attacked"}
    assert list(curves["clean"].columns) == ["easy", "medium", "hard"]  # full is their union: not a band
    assert difficulty_curves(synthetic_scores(difficulties=("full",)), "injection") == {}


def test_budget_curves_only_when_an_attack_has_several_budgets():
    one = synthetic_scores(difficulties=("full",))
    assert not has_budget_sweep(one)  # modification rows (n_injected 0) never count as a sweep
    swept = synthetic_scores(difficulties=("full",), budgets=(10, 20, 40))
    assert has_budget_sweep(swept)
    curves = budget_curves(swept, "injection")
    assert list(curves) == ["full"] and list(curves["full"].index) == [10, 20, 40]
    assert budget_curves(swept, "modification") == {}


def test_report_page_sections_metadata_and_figures():
    scores = synthetic_scores(difficulties=("easy", "full"))
    rep = build_report(scores, MANIFEST, env=ENV, generated_at=NOW)
    d = dom(rep.html)
    assert {"run", "leaderboards", "heatmaps", "difficulty", "leaderboards-injection",
            "leaderboards-modification"} <= d.ids and "budget" not in d.ids
    assert d.tables == 8  # 2 scenarios x 2 difficulties x (attacks, defenses)
    assert [f.name for f in rep.figures] == ["heatmap-injection-easy", "heatmap-injection-full",
                                             "heatmap-modification-easy", "heatmap-modification-full",
                                             "difficulty-injection", "difficulty-modification"]
    assert len(d.images) == len(rep.figures)
    assert all(i["src"].startswith("data:image/png;base64,") for i in d.images)
    for fig in rep.figures:
        assert fig.png.startswith(b"\x89PNG") and fig.pdf.startswith(b"%PDF")
    for needle in ("f" * 64, "c0ffee0123456789", "torch 2.13.0", "ray 2.60.0", "python 3.11.0", "2026-01-03 12:00 UTC",
                   f"{len(scores):,} (injection", "Scenario: modification", "(easy; modification;"):
        assert needle in rep.html, needle
    again = build_report(scores, MANIFEST, env=ENV, generated_at=NOW)
    assert again.html == rep.html  # deterministic: equal inputs, equal page


def test_report_has_budget_section_when_budgets_vary():
    rep = build_report(synthetic_scores(scenarios=("injection",), difficulties=("full",), budgets=(10, 20)),
                       MANIFEST, env=ENV, generated_at=NOW)
    assert "budget" in dom(rep.html).ids and rep.figures[-1].name == "budget-injection"


def test_timeline_section_from_the_runs_records(tmp_path):
    """A run's recorded tasks become the timeline figure: one band per stage, one row per
    task running at once (lanes never overlap); none recorded, no section."""

    import pandas as pd

    from grb_dist.report.figures import lanes
    from grb_dist.store import RunStore

    t0 = dt.datetime(2026, 1, 3, 12, tzinfo=dt.timezone.utc)
    at = lambda s: t0 + dt.timedelta(seconds=s)  # noqa: E731
    rows = [("train", "target gcn (seed 0)", 0, 4), ("train", "surrogate gcn (seed 1)", 0, 3),
            ("attack", "fgsm on gcn, full, repeat 0", 3, 5), ("score", "fgsm, full: 2 cells on scorer 0", 5, 6)]
    (tmp_path / "timeline").mkdir()
    store = RunStore(tmp_path)
    store.write_timeline("20260103T120000-1", [dict(stage=a, task=b, started=at(c), finished=at(d)) for a, b, c, d in rows])
    (tmp_path / "timeline" / "broken.parquet").write_bytes(b"not parquet")  # left out, not fatal
    tasks = store.read_timeline()
    assert len(tasks) == 4 and set(tasks["invocation"]) == {"20260103T120000-1"}
    scores = synthetic_scores(scenarios=("injection",), difficulties=("full",))
    rep = build_report(scores, MANIFEST, env=ENV, generated_at=NOW, tasks=tasks)
    assert "timeline" in dom(rep.html).ids and rep.figures[-1].name == "timeline"
    assert rep.figures[-1].png.startswith(b"\x89PNG")
    plain = build_report(scores, MANIFEST, env=ENV, generated_at=NOW, tasks=store.read_timeline().iloc[:0])
    assert "timeline" not in dom(plain.html).ids
    # two trainings at once need two rows; a task starting when another ended reuses its row
    import numpy as np

    assert list(lanes(np.array([0.0, 0.0, 4.0, 1.0]), np.array([4.0, 3.0, 5.0, 2.0]))) == [0, 1, 0, 2]
    assert pd.api.types.is_datetime64_any_dtype(tasks["started"])


def test_write_report_is_atomic(tmp_path, monkeypatch):
    rep = build_report(synthetic_scores(scenarios=("injection",), difficulties=("full",)), MANIFEST, env=ENV,
                       generated_at=NOW)
    import grb_dist.core.fileio as fileio

    real, calls = fileio.write_bytes, []

    def failing(data, path):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real(data, path)

    monkeypatch.setattr(fileio, "write_bytes", failing)
    from grb_dist.core.errors import ConfigError

    with pytest.raises(ConfigError, match="No space left"):
        write_report(rep, tmp_path / "out")
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert PAGE not in names and not any(n.startswith(".") for n in names)  # no page, no temporary
    monkeypatch.setattr(fileio, "write_bytes", real)
    page = write_report(rep, tmp_path / "out")
    assert page.read_text() == rep.html


# ----------------------------------------------------------------------------- the command


def test_report_command_default_dir_and_bad_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_run(tmp_path / "run", synthetic_scores(scenarios=("modification",), difficulties=("full",)))
    (tmp_path / "afile").write_text("x")
    before = tree(tmp_path)
    for args, word in ((["--output", "afile"], "is a file"), (["--output", "no/such/dir"], "does not exist")):
        r = runner.invoke(_app(), ["report", "run", *args])
        assert r.exit_code == 2 and r.output.startswith("error:") and word in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1 and tree(tmp_path) == before
    r = runner.invoke(_app(), ["report", "nowhere"])
    assert r.exit_code == 2 and r.output.startswith("error:")
    (tmp_path / "empty").mkdir()
    shutil.copy(tmp_path / "run" / "manifest.json", tmp_path / "empty")
    r = runner.invoke(_app(), ["report", "empty"])
    assert r.exit_code == 2 and "empty has no scores yet" in r.output and tree(tmp_path / "empty") == ["manifest.json"]
    r = runner.invoke(_app(), ["report", "run"])
    assert r.exit_code == 0, r.output
    files = sorted(p.name for p in (tmp_path / "run" / "report").iterdir())
    assert files == ["heatmap-modification-full.pdf", "heatmap-modification-full.png", PAGE]


def test_report_leaves_the_run_untouched(tmp_path, monkeypatch):
    """With --output elsewhere nothing under the run changes (a read-only run works)."""
    monkeypatch.chdir(tmp_path)
    make_run(tmp_path / "run", synthetic_scores(scenarios=("injection",), difficulties=("full",)))
    before = tree(tmp_path / "run")
    mode = (tmp_path / "run").stat().st_mode
    os.chmod(tmp_path / "run", 0o555)
    try:
        r = runner.invoke(_app(), ["report", "run", "--output", "elsewhere"])
    finally:
        os.chmod(tmp_path / "run", mode)
    assert r.exit_code == 0, r.output
    assert tree(tmp_path / "run") == before and (tmp_path / "elsewhere" / PAGE).is_file()


# ----------------------------------------------------------------------------- in a browser


def chromium() -> str:
    """The Chromium binary; a clear failure (never a silent skip) when there is none."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("chromium is not installed, so the report cannot be checked in a browser: "
                "apt-get install chromium (bash .ci/run installs it)")


def _browser(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
           "--no-first-run", f"--user-data-dir={profile}", "--virtual-time-budget=10000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


def test_report_in_headless_chromium(tmp_path, monkeypatch):
    binary = chromium()
    monkeypatch.chdir(tmp_path)
    store = make_run(tmp_path / "run", synthetic_scores(difficulties=("easy", "medium", "hard", "full"),
                                                        budgets=(10, 20)))
    t0 = NOW - dt.timedelta(minutes=5)
    store.write_timeline("20260103T115500-1", [  # the driver's records of the sweep: the Timeline section
        {"stage": stage, "task": f"{stage} {i}", "started": t0 + dt.timedelta(seconds=i),
         "finished": t0 + dt.timedelta(seconds=i + 2)} for i, stage in enumerate(("train", "attack", "score"))])
    r = runner.invoke(_app(), ["report", "run", "--output", "site"])
    assert r.exit_code == 0, r.output
    page = (tmp_path / "site" / PAGE).resolve()
    url = page.as_uri()

    dumped = _browser(binary, tmp_path / "profile-dom", "--dump-dom", url)
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    d = dom(dumped.stdout)
    assert set(SECTIONS) - {"adaptive"} <= d.ids and "adaptive" not in d.ids, sorted(d.ids)  # no adaptive rows
    assert {"leaderboards-injection", "leaderboards-modification"} <= d.ids
    assert d.tables == 16  # 2 scenarios x 4 difficulties x (attacks, defenses)
    n_figures = len(list((tmp_path / "site").glob("*.png")))
    assert len(d.images) == n_figures == 8 + 2 + 1 + 1  # heatmaps, difficulty lines, budget curve, timeline
    for img in d.images:
        w, h = (int(v) for v in img["data-natural-size"].split("x"))
        assert w > 100 and h > 100, img["alt"]
    assert d.body.get("data-images-decoded") == str(n_figures)

    shot = tmp_path / "screenshot.png"
    done = _browser(binary, tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1280,2600", url)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    assert _png_size(shot) == (1280, 2600)
    import matplotlib.image as mpimg

    pixels = mpimg.imread(str(shot))[..., :3]
    assert shot.stat().st_size > 50_000 and pixels.std() > 0.05  # text, tables and colour, not a blank page
    assert len(np.unique((pixels.reshape(-1, 3) * 255).astype(np.uint8), axis=0)) > 200


# --------------------------------------------------- a study (Gosch et al. 2023)


#: A tiny CSBM study (two models, the attacks of its three figures), run without Ray in seconds.
TINY_STUDY = dict(
    study="tiny", graph={"kind": "csbm", "num_nodes": 120, "num_classes": 2, "num_features": 8, "sigma": 1.0,
                         "p": 0.05, "q": 0.01},
    K=[1.0, 2.0], graphs=1, nodes=10, max_steps=6, budgets=["1", "deg", "inf"],
    models={"gcn": {"hidden_sizes": [8]}, "mlp": {"hidden_sizes": [8]}},
    attacks=["l2-weak", "l2-weak-class"], train={"epochs": 10, "patience": 5},
)


def test_report_of_a_study(tmp_path):
    from grb_dist.report.page import STUDY_SECTIONS
    from grb_dist.semantics.run import run_study
    from grb_dist.semantics.spec import load_spec
    from grb_dist.semantics.tables import metrics_table, read_nodes

    directory = run_study(load_spec(None, **TINY_STUDY), tmp_path, use_ray=False)
    before = sorted(p.relative_to(directory) for p in directory.rglob("*"))
    r = runner.invoke(_app(), ["report", str(directory)])
    assert r.exit_code == 0, r.output
    out = directory / "report"
    html = (out / PAGE).read_text()
    d = dom(html)
    assert set(STUDY_SECTIONS) <= d.ids, sorted(d.ids)
    assert {"fig-study-over-robustness", "fig-study-degree-robustness", "fig-study-degree-boxplot"} <= d.ids
    assert len(d.images) == 3 and all(i["src"].startswith("data:image/png;base64,") for i in d.images)
    assert sorted(p.name for p in out.iterdir()) == [PAGE, "study-degree-boxplot.png", "study-degree-robustness.png",
                                                     "study-over-robustness.png"]
    # reduced tables: one metrics table per attack, Table 1 and Table 2 in both populations
    assert d.tables == 2 + 1 + 2
    assert "Table 2 (table2.csv)" in html and "Table 2 (table2_paper.csv)" in html
    for needle in ("Attack: l2-weak", "Attack: l2-weak-class", "R_adv", "R_over", "F1-rob", "Table 2", "K=1",
                   "K=2", "Bayes (X, A)", "tiny", "csbm"):
        assert needle in html, needle
    # the numbers are the study's own reduction
    metrics = metrics_table(read_nodes(directory), ("1", "deg", "inf"))
    value = metrics[(metrics["model"] == "mlp") & (metrics["attack"] == "l2-weak") & (metrics["budget"] == "deg")]
    assert f'data-value="{float(value["R"].iloc[0])!r}"' in html
    # the study itself is left as it was; a study without rows is a one-line error
    assert sorted(p.relative_to(directory) for p in directory.rglob("*") if "report" not in p.parts) == before
    # the study command's --out directory: its one study is found
    r = runner.invoke(_app(), ["report", str(tmp_path), "-o", str(tmp_path / "page")])
    assert r.exit_code == 0, r.output
    assert "tiny" in (tmp_path / "page" / PAGE).read_text()
    empty = tmp_path / "empty"
    (empty / "nodes").mkdir(parents=True)
    (empty / "study.json").write_text("{}")
    r = runner.invoke(_app(), ["report", str(empty)])
    assert r.exit_code != 0 and "no rows yet" in r.output and not (empty / "report").exists()
    r = runner.invoke(_app(), ["report", str(tmp_path)])  # two studies there: they are named
    assert r.exit_code != 0 and "holds 2 studies" in r.output



def test_a_name_keeps_its_colour_in_every_figure_and_heatmaps_scale_to_the_data():
    from grb_dist.report.figures import accuracy_scale, palette

    some, more = palette(["gcn", "gat", "mlp"]), palette(["gcn", "gat", "mlp", "fgsm", "tdgia"])
    assert len({c for c, _ in some.values()}) == 3  # distinct colours
    colours = palette(f"d{i}" for i in range(25))
    assert len(set(colours.values())) == 25  # past the colours, line styles tell them apart
    scores = synthetic_scores(scenarios=("injection",), difficulties=("easy", "full"), budgets=(10, 20))
    from grb_dist.report.tables import figure_names

    names = figure_names(scores)
    assert {"gcn", "gat", "fgsm", "tdgia"} <= names and not any("@" in n for n in names)
    assert more["gcn"] != more["gat"]
    assert accuracy_scale(np.array([0.71, 0.93, np.nan])) == (0.70, 0.95)
    lo, hi = accuracy_scale(np.array([0.99, 0.995]))
    assert hi - lo >= 0.1 - 1e-9 and lo >= 0 and hi <= 1
    assert accuracy_scale(np.array([np.nan])) == (0.0, 1.0)
