"""The run-store defects of the robustness review, each reproduced through the command line.

Every test here failed on the store of grb-dist 0.1.0 (one Parquet file per score row, cell
ids hashing the dataset's name or path, no lock, one configuration per run directory):

* the same dataset path with other content returned the first graph's results;
* two sweeps on one ``--out`` both ran (and the second deleted the first's temporaries);
* growing a finished run (more repeats, another defense) was refused;
* one file per score row;
* a truncated score file counted as done and crashed ``leaderboard``;
* a foreign Parquet file in ``scores/`` was read as rows (or crashed the reader);
* re-running a finished run started Ray before finding nothing to do.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from typer.testing import CliRunner

from grb_dist.cli import app

from helpers import default_signals, tiny_csbm

runner = CliRunner()
FLAGS = ["--attacks", "rnd", "--defenses", "gcn,mlp", "--surrogates", "gcn", "--difficulties", "easy,full",
         "--repeats", "1", "--steps", "3", "--n-inject", "5", "--edges-per-node", "3"]
CELLS = 2 * 2 + 1 * 1 * 2 * 1 * 2  # clean rows + attacked rows


def save_npz(graph, path: Path) -> None:
    adj = sp.coo_matrix((np.ones(graph.edge_index.shape[1]), graph.edge_index),
                        shape=(graph.num_nodes, graph.num_nodes)).tocsr()
    attr = sp.csr_matrix(graph.features)
    np.savez(path, adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr, adj_shape=adj.shape,
             attr_data=attr.data, attr_indices=attr.indices, attr_indptr=attr.indptr, attr_shape=attr.shape,
             labels=graph.labels)


def score_rows(run: Path) -> pd.DataFrame:
    """Every row stored under scores/, read the way a user reads it (one call)."""
    return pd.read_parquet(run / "scores")


def sweep(*args: str):
    return runner.invoke(app, ["sweep", *args])


@pytest.fixture(scope="module")
def finished(ray_local, tmp_path_factory):
    """A finished run of the small job on csbm (copied by each test that changes it)."""
    run = tmp_path_factory.mktemp("defects") / "run"
    r = sweep(*FLAGS, "--out", str(run))
    assert r.exit_code == 0, r.output
    return run


@pytest.fixture
def run(finished, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(finished, copy)
    return copy


def test_same_path_other_content_is_another_dataset(ray_local, tmp_path, monkeypatch):
    out = tmp_path / "out"
    for name, seed in (("a", 0), ("b", 1)):
        (tmp_path / name).mkdir()
        save_npz(tiny_csbm(n=300, seed=seed, K=3.0 if seed == 0 else 0.5), tmp_path / name / "data.npz")
    monkeypatch.chdir(tmp_path / "a")
    r = sweep("--dataset", "data.npz", *FLAGS, "--out", str(out))
    assert r.exit_code == 0, r.output
    first = score_rows(out)
    monkeypatch.chdir(tmp_path / "b")  # the same relative path, another graph
    r = sweep("--dataset", "data.npz", *FLAGS, "--out", str(out))
    assert r.exit_code == 2, r.output
    line = r.output.strip().splitlines()[-1]
    assert line.startswith("error:") and "another dataset" in line and "features" in line, r.output
    pd.testing.assert_frame_equal(score_rows(out), first)  # nothing written
    # in its own directory the second graph gets its own results, not the first graph's
    r = sweep("--dataset", "data.npz", *FLAGS, "--out", str(tmp_path / "out-b"))
    assert r.exit_code == 0, r.output
    second = score_rows(tmp_path / "out-b")
    assert set(second["cell_id"]).isdisjoint(set(first["cell_id"]))
    assert set(first["dataset_fingerprint"]) != set(second["dataset_fingerprint"])
    clean = lambda df: df[df.attack == "none"].set_index(["defense", "difficulty"])["accuracy"].sort_index()  # noqa: E731
    assert not np.allclose(clean(first).to_numpy(), clean(second).to_numpy())


def test_two_sweeps_on_one_out(ray_local, tmp_path):
    out = tmp_path / "out"
    address = ray_local.get_runtime_context().gcs_address
    log = open(tmp_path / "first.log", "w")
    heavy = ["--attacks", "fgsm,pgd", "--defenses", "gcn,mlp,sgc", "--difficulties", "easy,medium,hard,full",
             "--repeats", "3", "--steps", "150"]
    first = subprocess.Popen([sys.executable, "-m", "grb_dist.cli", "sweep", *heavy, "--out", str(out),
                              "--address", address], stdout=log, stderr=subprocess.STDOUT,
                             # SIGINT ends it below, also when the suite runs as a background job
                             # (started with SIGINT ignored, which the child would inherit)
                             preexec_fn=default_signals)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and first.poll() is None:
            if (out / "manifest.json").is_file():
                break
            time.sleep(0.1)
        assert first.poll() is None, (tmp_path / "first.log").read_text()
        # an in-flight temporary file of the first sweep
        tmp = out / "models" / f".x.pt.tmp-{first.pid}-0000abcd"
        tmp.write_bytes(b"in flight")
        r = sweep(*heavy, "--out", str(out))
        assert first.poll() is None, "the first sweep ended before the second started"
        assert r.exit_code == 2, r.output
        line = r.output.strip().splitlines()[-1]
        assert line.startswith("error:") and f"pid {first.pid}" in line and "--wait" in line, r.output
        assert tmp.exists(), "the second sweep deleted the first one's temporary file"
    finally:
        first.send_signal(signal.SIGINT)
        try:
            first.wait(60)
        except subprocess.TimeoutExpired:
            first.kill()
            first.wait()
        log.close()


def test_growing_a_finished_run(run, ray_local):
    before = score_rows(run)
    assert len(before) == CELLS
    grown = [*FLAGS[:-8], "--repeats", "2", "--steps", "3", "--n-inject", "5", "--edges-per-node", "3"]
    grown[grown.index("gcn,mlp")] = "gcn,mlp,sgc"
    r = sweep(*grown, "--out", str(run))
    assert r.exit_code == 0, r.output
    after = score_rows(run)
    # sgc: 2 clean + 2 difficulties x 2 repeats; gcn, mlp: 2 difficulties x 1 new repeat
    assert len(after) == CELLS + 2 + 4 + 4 and after["cell_id"].is_unique
    assert "10 to compute" in r.output
    old = after.set_index("cell_id").loc[before["cell_id"], "accuracy"]
    np.testing.assert_array_equal(old.to_numpy(), before["accuracy"].to_numpy())  # untouched
    # a change of meaning is refused with the reason, nothing written
    r = sweep(*FLAGS[:-6], "--steps", "4", "--n-inject", "5", "--edges-per-node", "3", "--out", str(run))
    assert r.exit_code == 2 and "attacks rnd/easy has other settings" in r.output and "steps" in r.output, r.output
    r = sweep(*FLAGS, "--seed", "5", "--out", str(run))  # another seed: another graph for csbm
    assert r.exit_code == 2 and "another dataset" in r.output, r.output
    assert len(score_rows(run)) == len(after)


def test_score_rows_are_batched_into_partitions(finished):
    files = sorted((finished / "scores").rglob("*.parquet"))
    rows = score_rows(finished)
    assert len(rows) == CELLS and len(files) < len(rows)
    assert {f.parent.relative_to(finished / "scores").as_posix() for f in files} <= {
        "scenario=injection/dataset=csbm/difficulty=easy", "scenario=injection/dataset=csbm/difficulty=full"}
    assert set(rows["difficulty"].astype(str)) == {"easy", "full"}


def test_truncated_score_file_is_not_counted_and_boards_refuse_to_leave_its_cells_out(run, ray_local):
    victim = sorted((run / "scores").rglob("*.parquet"))[0]
    lost = len(pq.read_table(victim))
    victim.write_bytes(victim.read_bytes()[:100])
    r = runner.invoke(app, ["leaderboard", str(run)])  # boards over fewer cells would look whole: refused
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error:"), r.output
    assert victim.name in lines[0] and "checksum mismatch" in lines[0] and "--out" in lines[0]
    r = sweep(*FLAGS, "--out", str(run))  # the lost cells are recomputed, the rest kept
    assert r.exit_code == 0 and f"{lost} to compute" in r.output, r.output
    rows = score_rows(run)
    assert len(rows) == CELLS and rows["cell_id"].is_unique
    assert (run / "quarantine" / "scores").is_dir()
    r = runner.invoke(app, ["leaderboard", str(run)])  # whole again: the boards print
    assert r.exit_code == 0 and "warning" not in r.output, r.output


KEY = ["scenario", "difficulty", "attack", "surrogate", "defense", "repeat"]


def _plant_duplicates(run: Path) -> None:
    """What a user or a tool may leave in a finished run's scores/: a foreign Parquet file
    holding a row of the run, a byte copy of a score file, and a file nested one level too
    deep in a partition: pandas reads every one of them."""
    files = sorted((run / "scores").rglob("*.parquet"))
    shutil.copy(files[0], files[0].parent / "copy.parquet")
    (files[-1].parent / "deeper").mkdir()
    shutil.copy(files[-1], files[-1].parent / "deeper" / files[-1].name)
    row = pq.read_table(files[-1]).slice(0, 1)
    pq.write_table(row, files[-1].parent / "foreign.parquet")
    assert score_rows(run).duplicated(KEY).sum() >= 3


def test_a_finished_run_rerun_with_nothing_to_do_is_cleaned_for_pandas(run, ray_local):
    _plant_duplicates(run)
    r = sweep(*FLAGS, "--out", str(run))
    assert r.exit_code == 0 and "nothing to do" in r.output, r.output
    assert "moved 3 files that grb-dist does not count" in r.output, r.output
    rows = score_rows(run)
    assert len(rows) == CELLS and not rows.duplicated(KEY).any() and rows["cell_id"].is_unique
    assert len(list((run / "quarantine" / "scores").rglob("*.parquet"))) == 3


def test_a_read_only_run_with_foreign_files_is_reported_by_leaderboard_and_report(run, ray_local, tmp_path):
    _plant_duplicates(run)
    for args in (["leaderboard", str(run)], ["report", str(run), "--output", str(tmp_path / "page")]):
        r = runner.invoke(app, args)
        assert r.exit_code == 0, r.output
        assert "copy.parquet" in r.output and "foreign.parquet" in r.output and "deeper" in r.output, r.output
        assert "would count twice" in r.output, r.output


def test_tampered_scores_refuse_boards_that_would_leave_their_cells_out(run, ray_local):
    """A score file whose accuracies were changed to 5.0 and NaN (schema kept, checksum now
    wrong): its rows are not counted, and boards over the remaining cells are refused with
    how many cells they would miss, rather than printed as if whole."""
    victim = sorted((run / "scores").rglob("*.parquet"))[0]
    table = pq.read_table(victim)
    accuracy = [5.0 if i % 2 else float("nan") for i in range(len(table))]
    pq.write_table(table.set_column(table.schema.get_field_index("accuracy"), "accuracy",
                                    pa.array(accuracy, pa.float64())), victim)
    for args in (["leaderboard", str(run)], ["report", str(run)]):
        r = runner.invoke(app, args)
        lines = r.output.strip().splitlines()
        assert r.exit_code == 2 and len(lines) == 1, r.output
        assert f"{len(table)} cells are held only in score files grb-dist does not count" in lines[0], lines[0]
        assert "checksum mismatch" in lines[0]


def test_foreign_parquet_is_not_read_as_rows(run, ray_local):
    part = next((run / "scores").rglob("*.parquet")).parent
    pq.write_table(pa.table({"cell_id": ["zzz"], "accuracy": [0.0], "defense": ["evil"]}), part / "foreign.parquet")
    r = runner.invoke(app, ["leaderboard", str(run), "--format", "csv"])
    assert r.exit_code == 0, r.output
    assert "evil" not in r.output and "foreign.parquet" in r.output
    from grb_dist.store import RunStore

    store = RunStore.existing(run)
    assert "zzz" not in store.done_cells() and len(store.read_scores(on_warning=lambda w: None)) == CELLS


def test_finished_run_rerun_does_not_start_ray(run, monkeypatch):
    from grb_dist.cluster import ray_edge

    def no_ray(*a, **kw):
        raise AssertionError("Ray was started for a finished run")

    monkeypatch.setattr(ray_edge, "connect", no_ray)
    monkeypatch.setattr(ray_edge.ray, "init", no_ray)
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*")}
    r = sweep(*FLAGS, "--out", str(run))
    assert r.exit_code == 0, r.output
    assert f"nothing to do: all {CELLS} cells" in r.output and "Defenses over attacks (full" in r.output
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.name != ".lock"} == {
        p: t for p, t in before.items() if p.name != ".lock"}
    # a narrower job on the same run has nothing to do either
    r = sweep(*FLAGS[:2], "--defenses", "gcn", *FLAGS[4:], "--out", str(run))
    assert r.exit_code == 0 and "nothing to do" in r.output, r.output


def test_compact_command_merges_files_without_changing_rows(run):
    from grb_dist.store import RunLock

    # many small files: one per row, as a long sweep with frequent flushes leaves them
    from grb_dist.store.scores import checksum_path, write_checksummed

    for f in list((run / "scores").rglob("*.parquet")):
        t = pq.read_table(f)
        for i in range(t.num_rows):
            write_checksummed(t.slice(i, 1), f.parent / f"part-split{i}-{f.stem[5:]}.parquet")
        f.unlink()
        checksum_path(f).unlink()
    before = score_rows(run).sort_values("cell_id").reset_index(drop=True)
    assert len(list((run / "scores").rglob("*.parquet"))) == CELLS
    with RunLock(run):  # not while another process holds the run
        r = runner.invoke(app, ["compact", str(run)])
        assert r.exit_code == 2 and f"pid {os.getpid()}" in r.output, r.output
    r = runner.invoke(app, ["compact", str(run)])
    assert r.exit_code == 0 and f"{CELLS} score files -> 2" in r.output, r.output
    after = score_rows(run).sort_values("cell_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(before, after)
    assert len(list((run / "scores").rglob("*.parquet"))) == 2
    r = runner.invoke(app, ["leaderboard", str(run)])
    assert r.exit_code == 0 and "warning" not in r.output, r.output
