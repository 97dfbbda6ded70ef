"""``grb-dist sweep`` and ``grb-dist leaderboard`` through typer's test runner."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from grb_dist.attacks import INJECTION
from grb_dist.cli import app
from grb_dist.store import RunStore
from grb_dist.store.run import STORE_FORMAT

runner = CliRunner()
ATTACK = next(a for a in ("rnd", "fgsm", *INJECTION.names()) if a in INJECTION)


def tree(path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    bad_keys = tmp_path / "bad-keys.yaml"
    bad_keys.write_text("dataset: csbm\ninjection: {attacks: {fgsm: {}}}\nsurogates: [gcn]\n")
    malformed = tmp_path / "malformed.yaml"
    malformed.write_text("dataset: csbm\ninjection: {attacks: {fgsm: {}}\n")
    bad_param = tmp_path / "bad-param.yaml"
    bad_param.write_text("dataset: csbm\ninjection: {attacks: {fgsm: {steps: many}}}\n")
    other = tmp_path / "other-run"  # a run of another dataset (by content)
    other.mkdir()
    (other / "manifest.json").write_text(json.dumps({
        "store_format": STORE_FORMAT, "version": "0", "config": {}, "config_hash": "0123456789abcdef",
        "dataset": {"label": "csbm", "source": "csbm", "fingerprint": "0" * 64, "parts": {}, "normalize": "arctan"},
        "components": {}, "jobs": []}))
    return tmp_path


BAD = [
    (["--dataset", "grb-nope"], "grb-nope"),
    (["--attacks", "nope"], "nope"),
    (["--defenses", "gcn,nodefense"], "nodefense"),
    (["--surrogates", "nosurrogate"], "nosurrogate"),
    (["--difficulties", "extreme"], "extreme"),
    (["--repeats", "0"], "repeats"),
    (["--n-inject", "-3"], "n_inject"),
    (["--job", "bad-keys.yaml"], "surogates"),
    (["--job", "malformed.yaml"], "YAML"),
    (["--job", "bad-param.yaml"], "steps"),
    (["--job", "missing.yaml"], "missing.yaml"),
    (["--address", "127.0.0.1:1"], "127.0.0.1:1"),
    (["--address", "not an address"], "address"),
    (["--out", "other-run"], "another dataset"),
    (["--flush-rows", "0"], "--flush-rows"),
    (["--flush-seconds", "nan"], "--flush-seconds"),
]


@pytest.mark.parametrize("args, word", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_sweep_bad_input_one_line_nonzero_nothing_written(workdir, args, word):
    before = tree(workdir)
    out = [] if "--out" in args else ["--out", "run"]
    r = runner.invoke(app, ["sweep", *args, *out])
    assert r.exit_code != 0
    lines = r.output.strip().splitlines()
    assert len(lines) == 1, r.output
    assert lines[0].startswith("error:") and word in lines[0], lines[0]
    assert tree(workdir) == before  # nothing written: no run dir, no results/


def test_leaderboard_bad_input(workdir):
    for args in (["leaderboard", "nowhere"], ["leaderboard", "other-run", "--format", "pdf"],
                 ["leaderboard", "other-run", "--difficulty", "extreme"], ["leaderboard", "other-run"]):
        r = runner.invoke(app, args)
        assert r.exit_code != 0 and len(r.output.strip().splitlines()) == 1, (args, r.output)


def test_sweep_then_leaderboard(ray_local, workdir, monkeypatch):
    from grb_dist.cluster import ray_edge

    monkeypatch.setattr(ray_edge, "dashboard_available", lambda: False)  # its hint holds brackets
    args = ["sweep", "--attacks", ATTACK, "--defenses", "gcn,mlp", "--difficulties", "easy,full", "--repeats", "1",
            "--steps", "3", "--n-inject", "5", "--edges-per-node", "3", "--out", "run"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "dashboard:" in r.output and "Defenses over attacks (full" in r.output
    # every line prints literally: the hint's [dashboard] is not swallowed as markup
    assert "dashboard: not running (install Ray's dashboard with pip install 'grb-dist[dashboard]')" in r.output
    assert re.search(r"boards of easy: grb-dist leaderboard \S*run\n", r.output), r.output
    assert "8/8 cells (8 computed" in r.output
    store = RunStore.existing(workdir / "run")
    assert len(store.read_scores()) == 8
    # the driver's timeline of this invocation: every trained model, perturbation and scoring call
    tasks = store.read_timeline()
    assert set(tasks["stage"]) == {"train", "attack", "score"} and tasks["invocation"].nunique() == 1
    assert (tasks["stage"] == "train").sum() == len(list((workdir / "run" / "models").glob("*.pt")))
    assert (tasks["stage"] == "attack").sum() == len(store.read_perturbations())
    assert (tasks["started"] <= tasks["finished"]).all()
    # what each task held at its peak and reserved; the sweep names the task that held the most
    assert (tasks["peak_memory"] > 0).all() and (tasks["reserved_memory"] > 0).all()
    assert re.search(r"the most a task held: memory [\d.]+ [MG]iB \((train|attack|score): .*; it reserved ", r.output), \
        r.output
    # not a terminal: the boards in Markdown, each with its legend naming the ranking metric
    assert "| Rank | Defense |" in r.output and "*Ranked by Weighted, highest first." in r.output
    r = runner.invoke(app, args)  # resume: nothing left to do
    assert r.exit_code == 0 and "nothing to do: all 8 cells" in r.output, r.output
    # on a terminal the same boards are rich tables, as `grb-dist leaderboard` prints them
    import io

    from rich.console import Console

    import grb_dist.cli.base as base

    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=150, color_system=None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(base, "console", terminal)
        r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    text = screen.getvalue()
    assert "|---|" not in text and "###" not in text and "┃ Rank" in text
    assert "Defenses over attacks (full" in text and "Ranked by Weighted, highest first." in text
    r = runner.invoke(app, ["leaderboard", "run", "--difficulty", "easy"])
    assert r.exit_code == 0 and "(easy;" in r.output and "(full;" not in r.output
    for fmt in ("csv", "html", "md"):
        r = runner.invoke(app, ["leaderboard", "run", "--format", fmt, "--output", f"board.{fmt}"])
        assert r.exit_code == 0, r.output
        assert ATTACK in (workdir / f"board.{fmt}").read_text()


def test_keep_ray_leaves_the_dashboard_up_after_the_sweep(tmp_path):
    """--keep-ray: the sweep's own head node and dashboard answer after the command ended;
    the printed URL is this sweep's (a port of its own). The head node lives in a temporary
    directory of its own and is ended here by its processes (never `ray stop`, which would
    end every Ray of this user)."""
    import signal
    import tempfile
    import urllib.request

    import psutil

    ray_tmp = tempfile.mkdtemp(prefix="rk", dir="/tmp")  # short: Ray's socket paths have a length limit
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    args = ["--attacks", "rnd", "--defenses", "gcn", "--difficulties", "full", "--repeats", "1", "--steps", "2",
            "--n-inject", "3", "--edges-per-node", "2", "--num-cpus", "1", "--out", str(tmp_path / "run")]
    try:
        proc = subprocess.run([sys.executable, "-m", "grb_dist.cli", "sweep", *args, "--keep-ray", "--dashboard"],
                              capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        kept = re.search(r"Ray stays up \(--keep-ray\) at (\S+): dashboard (http://\S+) ", proc.stdout)
        assert kept, proc.stdout[-2000:]
        with urllib.request.urlopen(f"{kept.group(2)}/api/jobs/", timeout=30) as page:  # the sweep has ended
            jobs = page.read().decode()
        assert "--keep-ray" in jobs and "SUCCEEDED" in jobs  # this sweep's own Ray, its job finished
    finally:
        for p in psutil.process_iter(["cmdline"]):
            try:
                if any(ray_tmp in part for part in p.info["cmdline"] or ()):
                    p.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_dashboard_asked_for_without_its_packages_is_one_line(workdir, monkeypatch):
    """A minimal Ray (``ray`` without the ``dashboard`` extra) runs sweeps; asking it for a
    dashboard is one line naming the extra, before Ray starts or anything is written."""
    from grb_dist.cluster import ray_edge

    monkeypatch.setattr(ray_edge, "dashboard_available", lambda: False)
    r = runner.invoke(app, ["sweep", "--attacks", "rnd", "--defenses", "gcn", "--dashboard", "--out", "run"])
    assert r.exit_code == 2, r.output
    assert "pip install 'grb-dist[dashboard]'" in r.output and len(r.output.strip().splitlines()) <= 2
    assert not (workdir / "run").exists()


def test_a_read_only_finished_run_resumes_to_nothing_to_do(ray_local, workdir, monkeypatch):
    """A re-run with nothing to do needs no write access: no lock, no write, no Ray; the
    boards come from the store. The run is made read-only with chmod; as root (whom chmod
    does not stop) every way of writing also fails as on a read-only file system, and the
    tree is compared before and after."""
    import errno
    import os
    import stat

    import grb_dist.core.fileio as fileio
    import grb_dist.sweep.preflight as preflight
    import grb_dist.cluster.ray_edge as ray_edge
    from grb_dist.core.errors import ConfigError
    from grb_dist.store.lock import RunLock

    args = ["sweep", "--attacks", ATTACK, "--defenses", "gcn,mlp", "--difficulties", "easy,full", "--repeats", "1",
            "--steps", "3", "--n-inject", "5", "--edges-per-node", "3", "--out", "run"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    run = workdir / "run"

    def read_only(*_args, **_kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    def not_writable(path, what, flag):
        raise ConfigError(f"{what} {path} is not writable; choose another {flag} or fix its permissions")

    monkeypatch.setattr(RunLock, "acquire", read_only)
    monkeypatch.setattr(fileio, "temporary_path", read_only)  # every atomic write starts here
    monkeypatch.setattr(preflight, "check_writable_dir", not_writable)  # what a user without root finds
    monkeypatch.setattr(ray_edge, "connect", lambda *a, **k: pytest.fail("Ray started"))
    paths = [run, *run.rglob("*")]
    modes = {p: p.stat().st_mode for p in paths}
    for p in paths:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        before = {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in paths}
        r = runner.invoke(app, args)
        after = {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in [run, *run.rglob("*")]}
    finally:
        for p, mode in modes.items():
            p.chmod(mode)
    assert r.exit_code == 0, r.output
    assert "nothing to do: all 8 cells" in r.output and "Defenses over attacks (full" in r.output, r.output
    assert "not writable" not in r.output and after == before


def test_a_catalogue_dataset_without_a_job_runs_its_kinds_job_and_says_so(tmp_path):
    """prognn-citeseer, prognn-cora-ml and prognn-polblogs have no job file: each runs Pro-GNN's
    setting (prognn-cora.yaml's models and hyper-parameters) on itself, not the default job,
    and one line says so; a dataset with its own job, the default and a path say nothing."""
    from grb_dist.sweep.job import dataset_job, load_job
    from grb_dist.sweep.session import resolve_job

    prognn = load_job(dataset_job("prognn-cora").path)
    for name in ("prognn-citeseer", "prognn-cora-ml", "prognn-polblogs"):
        notes: list[str] = []
        spec = resolve_job(name, None, {}, on_note=notes.append)
        assert spec.dataset == name
        assert (spec.normalize, spec.scenario, spec.defenses) == (prognn.normalize, prognn.scenario, prognn.defenses)
        assert spec.models == prognn.models and spec.train == prognn.train
        assert len(notes) == 1 and notes[0].startswith(f"note: {name} has no job of its own")
        assert "prognn-cora.yaml" in notes[0] and "--job FILE" in notes[0]
    for shipped in ("prognn-cora", "grb-cora", "csbm", None, str(tmp_path)):  # a shipped job, the default, a path
        notes = []
        resolve_job(shipped, None, {}, on_note=notes.append)
        assert notes == []


@pytest.mark.parametrize("command", ["train", "sweep"])
def test_the_note_of_a_dataset_without_a_job_is_one_line_on_stderr(tmp_path, monkeypatch, command):
    """train and sweep print the note once, on stderr, before the dataset is loaded (here a
    missing one: its one-line error follows, exit 2, nothing written)."""
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, [command, "--dataset", "prognn-polblogs", "--data-dir", str(tmp_path / "cache"),
                                 "--no-download"])
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    notes = [line for line in lines if line.startswith("note:")]
    assert len(notes) == 1 and "prognn-polblogs has no job of its own" in notes[0] and "prognn-cora.yaml" in notes[0]
    assert lines[-1].startswith("error:") and len(lines) == 2, r.output
    assert tree(tmp_path) == []
