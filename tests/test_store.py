"""The run store: atomic per-cell files, manifests, perturbation round-trips."""

from __future__ import annotations

import datetime as dt
import os

import numpy as np
import pyarrow as pa
import pytest

from grb_dist.errors import StoreError
from grb_dist.graph import Injection
from grb_dist.store import RunStore, atomic_path, schema, write_table
from grb_dist.store.parquet import read_dir


def row(cell_id: str, accuracy: float = 0.5, **kw) -> dict:
    r = {
        "cell_id": cell_id, "config_hash": "h", "perturbation_id": None, "dataset": "d", "scenario": "injection",
        "difficulty": "full", "attack": "none", "surrogate": "none", "defense": "gcn", "repeat": 0, "seed": 0,
        "defense_seed": 0, "accuracy": accuracy, "n_targets": 10, "n_injected": 0, "n_injected_edges": 0,
        "attack_seconds": 0.0, "score_seconds": 0.1, "defense_train_seconds": 1.0, "version": "0",
        "created_at": dt.datetime.now(dt.timezone.utc),
    }
    r.update(kw)
    return r


def test_manifest_checks(tmp_path):
    run = tmp_path / "run"
    assert RunStore.check(run, {"a": 1}, "h1") is False
    assert not run.exists()  # check writes nothing
    RunStore.open(run, {"a": 1}, "h1")
    assert RunStore.check(run, {"a": 1}, "h1") is True
    before = sorted(p.name for p in run.rglob("*"))
    with pytest.raises(StoreError, match="different configuration"):
        RunStore.open(run, {"a": 2}, "h2")
    assert sorted(p.name for p in run.rglob("*")) == before
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    with pytest.raises(StoreError, match="not a grb-dist run"):
        RunStore.check(other, {}, "h")
    with pytest.raises(StoreError, match="no manifest"):
        RunStore.existing(other)


def test_scores_one_file_per_cell_and_rewrite_is_idempotent(tmp_path):
    store = RunStore.open(tmp_path / "run", {}, "h")
    store.write_score(row("c1", 0.25))
    store.write_score(row("c2", 0.75))
    store.write_score(row("c1", 0.25))  # a re-run of a cell replaces, never duplicates
    df = store.read_scores()
    assert sorted(df["cell_id"]) == ["c1", "c2"]
    assert store.done_cells() == {"c1", "c2"}
    assert df["accuracy"].dtype == np.float64 and df["repeat"].dtype == np.int32


def test_crash_during_write_leaves_no_partial_file(tmp_path, monkeypatch):
    store = RunStore.open(tmp_path / "run", {}, "h")
    store.write_score(row("c1", 0.25))

    # a crash while writing (the writer raises half-way): the old file is intact, no temp left
    class Crash(RuntimeError):
        pass

    import pyarrow.parquet as pq

    def half_write(table, where, **kw):
        with open(where, "wb") as fh:
            fh.write(b"PAR1 half a file")
        raise Crash("power cut")

    monkeypatch.setattr(pq, "write_table", half_write)
    with pytest.raises(Crash):
        store.write_score(row("c1", 0.99))
    with pytest.raises(Crash):
        store.write_score(row("c3", 0.99))
    monkeypatch.undo()
    files = sorted(p.name for p in (store.root / "scores").iterdir())
    assert files == ["c1.parquet"]
    assert store.read_scores()["accuracy"].tolist() == [0.25]


def test_killed_process_leftovers_are_ignored_and_removed(tmp_path):
    store = RunStore.open(tmp_path / "run", {}, "h")
    store.write_score(row("c1"))
    # what a SIGKILL between write and rename leaves behind: a hidden temporary file
    stale = store.root / "scores" / ".c2.parquet.tmp-123-abcd"
    stale.write_bytes(b"PAR1 truncated")
    assert store.done_cells() == {"c1"}
    assert len(store.read_scores()) == 1
    RunStore.open(store.root, {}, "h")  # resume cleans up
    assert not stale.exists()


def test_atomic_path_rename(tmp_path):
    target = tmp_path / "x.bin"
    with atomic_path(target) as tmp:
        tmp.write_bytes(b"abc")
        assert not target.exists()
    assert target.read_bytes() == b"abc"
    assert os.listdir(tmp_path) == ["x.bin"]


def test_perturbation_roundtrip(tmp_path):
    store = RunStore.open(tmp_path / "run", {}, "h")
    rng = np.random.default_rng(0)
    inj = Injection(rng.normal(size=(4, 3)).astype(np.float32),
                    np.array([[10, 10, 11, 12, 13], [0, 1, 2, 3, 4]], dtype=np.int64), 10)
    meta = {"config_hash": "h", "dataset": "d", "difficulty": "full", "attack": "fgsm", "surrogate": "gcn",
            "repeat": 1, "seed": 5, "params_json": "{}", "attack_seconds": 0.5}
    store.write_perturbation("p1", inj, meta)
    back = store.read_perturbation("p1")
    np.testing.assert_array_equal(back.features, inj.features)
    np.testing.assert_array_equal(back.edges, inj.edges)
    assert back.num_original == 10 and back.features.dtype == np.float32
    assert store.perturbation_meta("p1")["attack_seconds"] == 0.5
    df = store.read_perturbations()
    assert df.loc[0, "n_inject"] == 4 and len(df.loc[0, "features"]) == 12
    with pytest.raises(StoreError):
        store.read_perturbation("nope")


def test_model_roundtrip_weights_only(tmp_path):
    import torch

    store = RunStore.open(tmp_path / "run", {}, "h")
    sd = {"w": torch.arange(6.0).reshape(2, 3)}
    meta = {"model_id": "m", "role": "target", "name": "gcn", "seed": 0, "params_json": "{}", "train_json": "{}",
            "best_epoch": 3, "best_val_accuracy": 0.5, "train_seconds": 1.5}
    assert not store.has_model("gcn-0")
    store.write_model("gcn-0", sd, meta)
    assert store.has_model("gcn-0")
    assert torch.equal(torch.load(store.model_path("gcn-0"), weights_only=True)["w"], sd["w"])
    assert store.read_model_meta("gcn-0")["train_seconds"] == 1.5


def test_read_empty_dir_has_schema_columns(tmp_path):
    df = read_dir(tmp_path, schema.SCORES)
    assert list(df.columns) == schema.SCORES.names and df.empty
    write_table(pa.Table.from_pylist([row("a")], schema=schema.SCORES), tmp_path / "a.parquet")
    assert len(read_dir(tmp_path, schema.SCORES)) == 1
