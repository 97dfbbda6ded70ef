"""Property test: random interrupts (SIGINT and SIGKILL of the driver at random moments) and
resumes of a small sweep, with the run grown between them (more repeats, another defense),
always end with every cell exactly once and the scores of one uninterrupted run.

Each driver is a real ``grb-dist sweep`` process joining the session's local Ray (so that a
SIGKILL really kills the process that buffers and writes the rows); the reference run is an
in-process ``grb-dist sweep`` of the final job into a fresh directory. Rows are flushed
often (``--flush-rows 2 --flush-seconds 0.2``) so that kills land between, before and during
writes. The sequence is drawn from a generator seeded from the clock: set
``GRB_DIST_PROPERTY_SEED`` to replay one (the seed is printed, and named in every assertion).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from grb_dist.cli import app
from helpers import default_signals, pausing_sweep, wait_for

JOB = """
dataset: csbm
seed: 0
repeats: 1
difficulties: [easy, full]
train: {epochs: 25, patience: 10}
models: {gcn: {hidden_sizes: [16]}, mlp: {hidden_sizes: [16]}, sgc: {hidden_sizes: [16]}}
defenses: [gcn, mlp]
surrogates: [gcn]
attack: {n_inject: 6, edges_per_node: 3, steps: 5}
attacks: {fgsm: {}}
"""
#: The stages of the run: each grows the previous one.
STAGES = [[], ["--repeats", "2"], ["--repeats", "2", "--defenses", "gcn,mlp,sgc"]]
FINAL_CELLS = 3 * 2 + 1 * 2 * 2 * 3  # clean rows + attacks x difficulties x repeats x defenses


def rows(run: Path) -> pd.DataFrame:
    if not (run / "scores").is_dir() or not any((run / "scores").rglob("*.parquet")):
        return pd.DataFrame(columns=["cell_id", "accuracy"])
    return pd.read_parquet(run / "scores", columns=["cell_id", "accuracy"])  # every stored row, no dedup


def _tail(log: Path, offset: int) -> str:
    try:
        with open(log, "rb") as fh:
            fh.seek(offset)
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


@pytest.fixture
def sigint_default():
    """SIGINT raises KeyboardInterrupt in this process for the test (see :func:`default_signals`)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def driver(job: Path, out: Path, address: str, extra: list[str], log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "grb_dist.cli", "sweep", "--job", str(job), "--out", str(out), "--address", address,
           "--flush-rows", "2", "--flush-seconds", "0.2", *extra]
    return subprocess.Popen(cmd, stdout=open(log, "a"), stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=default_signals)


def run_sequence(seed: int, job: Path, tmp: Path, address: str, reference: pd.Series) -> list[str]:
    rng = random.Random(seed)
    out = tmp / f"run-{seed}"
    log = tmp / f"drivers-{seed}.log"
    history = []
    for stage in STAGES:
        for _ in range(rng.choice([1, 1, 2])):
            sig = rng.choice([signal.SIGINT, signal.SIGKILL])
            # a quarter of the kills land in start-up (imports, dataset, lock), the rest
            # while cells are computed and written
            during_work = rng.random() < 0.75
            delay = rng.uniform(0.0, 3.0) if during_work else rng.uniform(0.3, 4.0)
            offset = log.stat().st_size if log.exists() else 0
            p = driver(job, out, address, stage, log)
            if during_work:
                deadline = time.monotonic() + 120
                while p.poll() is None and time.monotonic() < deadline and "to compute" not in _tail(log, offset):
                    time.sleep(0.05)
            when = f"{'work' if during_work else 'start-up'} + {delay:.1f}s"
            try:
                p.wait(delay)
                history.append(f"{stage} finished before {sig.name} at {when} (rc {p.returncode})")
            except subprocess.TimeoutExpired:
                p.send_signal(sig)
                rc = p.wait(60)
                history.append(f"{stage} {sig.name} at {when} (rc {rc})")
            stored = rows(out)
            # never a row twice, at any point
            assert stored["cell_id"].is_unique, (seed, history)
    p = driver(job, out, address, STAGES[-1], log)
    rc = p.wait(300)
    history.append(f"final run rc {rc}")
    assert rc == 0, (seed, history, log.read_text()[-3000:])
    stored = rows(out)
    assert len(stored) == FINAL_CELLS and stored["cell_id"].is_unique, (seed, history)
    got = stored.set_index("cell_id")["accuracy"].sort_index()
    assert list(got.index) == list(reference.index), (seed, history)
    np.testing.assert_array_equal(got.to_numpy(), reference.to_numpy(), err_msg=f"seed {seed}: {history}")
    return history


@pytest.fixture(scope="module")
def setup(ray_local, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("interrupts")
    job = tmp / "job.yaml"
    job.write_text(JOB)
    ref = tmp / "reference"
    r = CliRunner().invoke(app, ["sweep", "--job", str(job), "--out", str(ref), *STAGES[-1]])
    assert r.exit_code == 0, r.output
    reference = rows(ref).set_index("cell_id")["accuracy"].sort_index()
    assert len(reference) == FINAL_CELLS
    return job, tmp, ray_local.get_runtime_context().gcs_address, reference


def test_random_interrupts_and_growth_end_in_one_uninterrupted_run(setup):
    job, tmp, address, reference = setup
    seed = int(os.environ.get("GRB_DIST_PROPERTY_SEED", time.time_ns() % 100_000))
    print(f"GRB_DIST_PROPERTY_SEED={seed}")
    history = run_sequence(seed, job, tmp, address, reference)
    print("\n".join(history))


# ---------------------------------------------------------------- SIGTERM

def test_sigterm_mid_sweep_stops_cleanly_and_resumes(setup):
    """SIGTERM (kill, timeout, Slurm, Kubernetes) ends a sweep as Ctrl-C does: the message,
    the buffered rows written (not recomputed by the resume), exit 143; the resume ends with
    every cell once and the scores of one uninterrupted run."""
    job, tmp, address, reference = setup
    out, log, marker = tmp / "run-sigterm", tmp / "sigterm.log", tmp / "sigterm.marker"
    args = ["sweep", "--job", str(job), "--out", str(out), "--address", address, "--flush-rows", "1000000",
            "--flush-seconds", "86400", *STAGES[-1]]
    p = subprocess.Popen([*pausing_sweep(marker, 3), *args], stdout=open(log, "w"), stderr=subprocess.STDOUT,
                         start_new_session=True, preexec_fn=default_signals)
    try:
        wait_for(marker, p, lambda: (p.poll(), log.read_text()[-3000:]))  # the driver's exit code and output
        assert rows(out).empty  # the scored cells are still in the driver's buffer
        p.send_signal(signal.SIGTERM)
        rc = p.wait(120)
    finally:
        if p.poll() is None:
            p.kill()
    text = log.read_text()
    assert rc == 143, text[-3000:]
    assert "interrupted: finished cells are kept; run the same command again to resume" in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    kept = rows(out)
    buffered = int(marker.read_text())
    assert len(kept) >= buffered >= 3 and kept["cell_id"].is_unique  # flushed on the way out
    assert not [f for f in out.rglob(".*tmp-*")], "a temporary file was left behind"

    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert f"{FINAL_CELLS - len(kept)} to compute" in r.output, r.output  # the flushed rows are not recomputed
    stored = rows(out)
    assert len(stored) == FINAL_CELLS and stored["cell_id"].is_unique
    got = stored.set_index("cell_id")["accuracy"].sort_index()
    assert list(got.index) == list(reference.index)
    np.testing.assert_array_equal(got.to_numpy(), reference.to_numpy())
    np.testing.assert_array_equal(got.loc[kept["cell_id"]].to_numpy(), kept["accuracy"].to_numpy())


def test_a_second_signal_exits_at_once(monkeypatch, sigint_default):
    """The first SIGTERM raises where Ctrl-C would (its clean-up runs); a second SIGINT or
    SIGTERM during that clean-up exits at once with its own code."""
    import typer

    from grb_dist.cli.base import Terminated, interruptible

    class Exited(BaseException):
        pass

    codes = []

    def fake_exit(code):
        codes.append(code)
        raise Exited

    monkeypatch.setattr(os, "_exit", fake_exit)
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with pytest.raises(typer.Exit) as stopped:
        with interruptible("stopped"):
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
                pytest.fail("SIGTERM raised nothing")
            except Terminated:  # the clean-up of the first signal ...
                with pytest.raises(Exited):  # ... cut short by the second
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(5)
                raise
    assert stopped.value.exit_code == 143 and codes == [130]
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before  # put back
