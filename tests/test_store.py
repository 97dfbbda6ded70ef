"""The run store: fingerprints, the writer's lock, manifests and growth, batched hive-partitioned
score files, torn and foreign files, compaction, perturbation and model round-trips."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from grb_dist.core.errors import StoreError
from grb_dist.core.fileio import HOST_TAG, atomic_path
from grb_dist.core.graph import Injection
from grb_dist.store import (
    RunLock, RunLockedError, RunStore, ScoreWriter, fingerprint_parts, graph_fingerprint, schema, write_table,
)
from grb_dist.store.parquet import read_dir
from grb_dist.store.run import STORE_FORMAT

from helpers import tiny_csbm

FP = "a" * 64
DATASET = {"label": "d", "source": "d", "fingerprint": FP, "parts": {}, "normalize": "arctan"}
COMPONENTS = {"job": {"seed": {"seed": 0}}, "models": {"gcn-0": {"params": {"hidden": 8}}}, "attacks": {}}


def row(cell_id: str, accuracy: float = 0.5, **kw) -> dict:
    r = {
        "cell_id": cell_id, "config_hash": "h", "perturbation_id": None, "dataset": "d", "dataset_fingerprint": FP,
        "scenario": "injection", "difficulty": "full", "attack": "none", "surrogate": "none", "defense": "gcn",
        "repeat": 0, "seed": 0, "defense_seed": 0, "accuracy": accuracy, "n_targets": 10, "n_injected": 0,
        "n_injected_edges": 0, "n_edges_added": 0, "n_edges_removed": 0, "n_nodes_modified": 0, "attack_seconds": 0.0, "score_seconds": 0.1, "defense_train_seconds": 1.0,
        "version": "0", "created_at": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
    }
    r.update(kw)
    return r


def open_run(root, dataset=DATASET, components=COMPONENTS, lock=None):
    lock = lock or RunLock(root).acquire()
    return RunStore.open(root, dataset=dataset, components=components, config={"job": 1}, config_hash="h1",
                         lock=lock), lock


def score_files(store: RunStore) -> list[str]:
    return sorted(str(p.relative_to(store.root / "scores")) for p in (store.root / "scores").rglob("*.parquet"))


# ----------------------------------------------------------------------------- fingerprints


def test_fingerprint_is_content_and_names_the_differing_part():
    g = tiny_csbm(n=120, seed=0)
    assert graph_fingerprint(g, "arctan") == graph_fingerprint(tiny_csbm(n=120, seed=0), "arctan")
    assert len(graph_fingerprint(g, "arctan")) == 64
    base = fingerprint_parts(g, "arctan")
    x = g.features.copy()
    x[3, 2] += 1e-3
    changed = {
        "features": fingerprint_parts(g.with_features(x), "arctan"),
        "split": fingerprint_parts(g.with_split({**g.split, "train": g.split["train"][1:]}), "arctan"),
        "normalize": fingerprint_parts(g, "tanh"),
    }
    for part, parts in changed.items():
        assert [k for k in base if base[k] != parts[k]] == [part]
    other = tiny_csbm(n=120, seed=1)
    assert graph_fingerprint(other, "arctan") != graph_fingerprint(g, "arctan")


# ----------------------------------------------------------------------------- the lock

HOLD = """
import sys, time
from grb_dist.store import RunLock
RunLock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(60)
"""


def _holder(root):
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(root)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "locked"
    return p


def test_second_writer_is_refused_with_the_holders_pid(tmp_path):
    root = tmp_path / "run"
    p = _holder(root)
    try:
        with pytest.raises(RunLockedError, match=f"pid {p.pid}") as err:
            RunLock(root).acquire()
        assert "--wait" in str(err.value) and "\n" not in str(err.value)
    finally:
        p.kill()
        p.wait()
    # the holder was SIGKILLed: its lock is stale and is taken over, with our pid in the file
    lock = RunLock(root).acquire()
    assert lock.holder()["pid"] == os.getpid()
    lock.release()


def test_wait_queues_behind_the_holder(tmp_path):
    root = tmp_path / "run"
    first = RunLock(root).acquire()
    (root / "manifest.json").write_text("{}")  # something written: the directory stays
    waited, got = [], []

    def second():
        got.append(RunLock(root).acquire(wait=True, on_wait=waited.append))

    t = threading.Thread(target=second)
    t.start()
    t.join(0.5)
    assert t.is_alive() and waited and f"pid {os.getpid()}" in waited[0]
    first.release()
    t.join(10)
    assert not t.is_alive() and got[0].held
    got[0].release()


def test_refused_start_leaves_no_directory(tmp_path):
    root = tmp_path / "new"
    lock = RunLock(root).acquire()
    assert (root / ".lock").is_file()
    lock.release()
    assert not root.exists()


def test_startup_removes_only_stale_temporaries(tmp_path):
    store, lock = open_run(tmp_path / "run")
    part = store.root / "scores" / "scenario=injection" / "dataset=d" / "difficulty=full"
    part.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        stale = part / f".part-1.parquet.tmp-{HOST_TAG}-{dead.pid}-abcd1234"
        legacy_stale = store.root / "models" / f".gcn-0.pt.tmp-{dead.pid}-abcd1234"
        in_flight = store.root / "models" / f".gcn-0.pt.tmp-{HOST_TAG}-{live.pid}-abcd1234"
        other_host = part / f".part-2.parquet.tmp-0123abcd-{dead.pid}-abcd1234"
        for f in (stale, legacy_stale, in_flight, other_host):
            f.write_bytes(b"PAR1 partial")
        lock.release()
        store, lock = open_run(store.root)
        assert not stale.exists() and not legacy_stale.exists()
        assert in_flight.exists(), "a live process's temporary file was deleted"
        assert other_host.exists(), "another host's temporary file was deleted"
        lock.release()
    finally:
        live.kill()
        live.wait()


# ----------------------------------------------------------------------------- manifest and growth


def test_manifest_grows_and_refuses_changed_meaning(tmp_path):
    run = tmp_path / "run"
    assert RunStore.check(run, DATASET, COMPONENTS) is False
    assert not run.exists()  # check writes nothing
    with pytest.raises(StoreError, match="lock"):
        RunStore.open(run, dataset=DATASET, components=COMPONENTS, config={}, config_hash="h", lock=RunLock(run))
    store, lock = open_run(run)
    m = store.manifest()
    assert m["store_format"] == STORE_FORMAT and m["dataset"]["fingerprint"] == FP
    # growing: a new model and a new attack are welcome
    more = {**COMPONENTS, "models": {**COMPONENTS["models"], "mlp-0": {"params": {}}}, "attacks": {"fgsm/easy": {"steps": 2}}}
    assert RunStore.check(run, DATASET, more) is True
    store, _ = open_run(run, components=more, lock=lock)
    assert set(store.manifest()["components"]["models"]) == {"gcn-0", "mlp-0"}
    before = sorted(p.name for p in run.rglob("*"))
    # changing what a known name means is refused, with the reason
    changed = {**more, "models": {"gcn-0": {"params": {"hidden": 64}}}}
    with pytest.raises(StoreError, match="models gcn-0 has other settings.*hidden"):
        RunStore.check(run, DATASET, changed)
    with pytest.raises(StoreError, match="job seed"):
        RunStore.check(run, DATASET, {**more, "job": {"seed": {"seed": 1}}})
    other = {**DATASET, "fingerprint": "b" * 64, "parts": {"features": "x"}, "normalize": "tanh"}
    with pytest.raises(StoreError, match="another dataset.*normalisation arctan vs tanh.*features differ"):
        RunStore.check(run, other, COMPONENTS)
    with pytest.raises(StoreError, match="another dataset"):
        open_run(run, dataset=other, lock=lock)
    assert sorted(p.name for p in run.rglob("*")) == before
    lock.release()
    # a directory that is not a run, and an old-layout run
    notrun = tmp_path / "other"
    notrun.mkdir()
    (notrun / "notes.txt").write_text("x")
    with pytest.raises(StoreError, match="not a grb-dist run"):
        RunStore.check(notrun, DATASET, COMPONENTS)
    with pytest.raises(StoreError, match="no manifest"):
        RunStore.existing(notrun)
    old = tmp_path / "old"
    old.mkdir()
    (old / "manifest.json").write_text(json.dumps({"config_hash": "x", "version": "0.1.0", "config": {}}))
    with pytest.raises(StoreError, match="older layout"):
        RunStore.check(old, DATASET, COMPONENTS)


# ----------------------------------------------------------------------------- batched, partitioned scores


def test_writer_batches_by_rows_and_time_into_hive_partitions(tmp_path):
    store, lock = open_run(tmp_path / "run")
    now = [0.0]
    w = ScoreWriter(store, max_rows=5, max_seconds=10.0, clock=lambda: now[0])
    assert w.add([row(f"a{i}") for i in range(3)]) == 0 and len(w) == 3
    assert score_files(store) == []
    assert w.add([row(f"b{i}", difficulty="easy") for i in range(3)]) == 6  # 6 >= 5 rows: written
    files = score_files(store)
    assert len(files) == 2  # one file per partition in the batch
    assert {f.rsplit("/", 1)[0] for f in files} == {"scenario=injection/dataset=d/difficulty=full",
                                                    "scenario=injection/dataset=d/difficulty=easy"}
    w.add([row("c0")])
    assert w.seconds_until_due() == 10.0 and not w.due()
    now[0] = 10.5
    assert w.due() and w.seconds_until_due() == 0.0
    assert w.add([row("c1")]) == 2
    assert w.flush() == 0  # nothing buffered
    assert store.done_cells() == {*(f"a{i}" for i in range(3)), *(f"b{i}" for i in range(3)), "c0", "c1"}
    df = store.read_scores()
    assert list(df.columns) == schema.SCORES.names and len(df) == 8
    assert set(df.loc[df.cell_id.str.startswith("b"), "difficulty"]) == {"easy"}
    assert df["accuracy"].dtype == np.float64 and df["repeat"].dtype == np.int32
    # the files hold no partition columns; the directory names carry them
    one = pq.read_schema(store.root / "scores" / files[0])
    assert "difficulty" not in one.names and "cell_id" in one.names
    # one call each: pandas, pyarrow.dataset (hive partitioning)
    by_pandas = pd.read_parquet(store.root / "scores")
    assert len(by_pandas) == 8 and set(by_pandas["difficulty"].astype(str)) == {"easy", "full"}
    by_arrow = pads.dataset(store.root / "scores", format="parquet", partitioning="hive").to_table()
    assert by_arrow.num_rows == 8 and set(by_arrow.column("scenario").to_pylist()) == {"injection"}
    lock.release()


def test_torn_and_foreign_files_are_reported_never_counted_and_quarantined(tmp_path):
    store, lock = open_run(tmp_path / "run")
    good = store.write_scores([row("c1", 0.25), row("c2", 0.75)])[0]
    torn = store.write_scores([row("c3"), row("c4")])[0]
    data = torn.read_bytes()
    torn.write_bytes(data[: len(data) // 2])  # a truncated file
    foreign = good.parent / "foreign.parquet"
    pq.write_table(pa.table({"cell_id": ["c9"], "x": [1.0]}), foreign)  # valid Parquet, not ours
    misplaced = store.root / "scores" / "stray.parquet"  # outside the partition layout
    write_table(pa.Table.from_pylist([{**schema.ADDED_DEFAULTS, **row("c8")}],
                                     schema=schema.SCORE_FILE), misplaced)
    assert store.done_cells() == {"c1", "c2"}
    warnings = []
    df = store.read_scores(on_warning=warnings.append)
    assert sorted(df["cell_id"]) == ["c1", "c2"] and df["accuracy"].tolist() == [0.25, 0.75]
    assert len(warnings) == 4 and any("foreign.parquet" in w and "no checksum" in w for w in warnings)
    assert "also reads the 3 skipped entries" in warnings[-1]
    assert any(torn.name in w and "checksum mismatch" in w for w in warnings)
    # start-up (under the lock) moves them out of the table: pandas reads the directory again
    lock.release()
    store, lock = open_run(store.root)
    assert not torn.exists() and not foreign.exists() and not misplaced.exists()
    assert len(list((store.root / "quarantine" / "scores").rglob("*.parquet"))) == 3
    # a truncated perturbation file is quarantined too, and then not stored
    inj = Injection(np.ones((2, 3), np.float32), np.array([[10, 11], [0, 1]]), 10)
    store.write_perturbation("p1", inj, {"config_hash": "h", "scenario": "injection", "dataset": "d",
                                         "dataset_fingerprint": FP, "difficulty": "full", "attack": "fgsm",
                                         "surrogate": "gcn", "repeat": 0, "seed": 1, "params_json": "{}",
                                         "feat_lim_min": 0.0, "feat_lim_max": 1.0, "attack_seconds": 0.1})
    pert = store.perturbation_path("p1")
    pert.write_bytes(pert.read_bytes()[:-20])
    lock.release()
    store, lock = open_run(store.root)
    assert not store.has_perturbation("p1") and not pert.exists()
    assert (store.root / "quarantine" / "perturbations" / pert.relative_to(store.root / "perturbations")).is_file()
    assert sorted(pd.read_parquet(store.root / "scores")["cell_id"]) == ["c1", "c2"]
    lock.release()


def test_crash_during_write_leaves_no_partial_file(tmp_path, monkeypatch):
    store, lock = open_run(tmp_path / "run")
    store.write_scores([row("c1", 0.25)])

    class Crash(RuntimeError):
        pass

    def half_write(table, where, **kw):
        with open(where, "wb") as fh:
            fh.write(b"PAR1 half a file")
        raise Crash("power cut")

    monkeypatch.setattr(pq, "write_table", half_write)
    w = store.score_writer(max_rows=1)
    with pytest.raises(Crash):
        w.add([row("c3", 0.99)])
    assert len(w) == 0  # taken out of the buffer before writing: never written twice
    monkeypatch.undo()
    assert len(score_files(store)) == 1 and not list(store.root.rglob(".*tmp*"))
    assert store.read_scores()["accuracy"].tolist() == [0.25]
    lock.release()


def test_compact_merges_files_without_changing_rows(tmp_path):
    store, lock = open_run(tmp_path / "run")
    rng = np.random.default_rng(0)
    for b in range(12):
        store.write_scores([row(f"c{b}-{i}", float(rng.random()), difficulty=("easy", "full")[i % 2],
                                attack="fgsm", repeat=b) for i in range(7)])
    before = store.read_scores().sort_values("cell_id").reset_index(drop=True)
    assert len(score_files(store)) == 24
    stats = store.compact()
    assert stats == {"partitions": 2, "files_before": 24, "files_after": 2, "rows": 84, "skipped": 0}
    assert len(score_files(store)) == 2
    after = store.read_scores().sort_values("cell_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(before, after)
    raw = pd.read_parquet(store.root / "scores")
    assert len(raw) == 84 and raw["cell_id"].is_unique
    assert store.compact()["partitions"] == 0  # nothing small left to merge
    lock.release()


def test_compact_interrupted_after_the_rename_is_finished_on_recovery(tmp_path, monkeypatch):
    store, lock = open_run(tmp_path / "run")
    for b in range(3):
        store.write_scores([row(f"c{b}-{i}", 0.1 * i) for i in range(4)])
    before = store.read_scores().sort_values("cell_id").reset_index(drop=True)
    real_unlink = type(store.root).unlink

    def die_on_source(self, *a, **kw):
        if self.name.startswith("part-"):
            raise KeyboardInterrupt  # the process stops between the rename and the removals
        return real_unlink(self, *a, **kw)

    monkeypatch.setattr(type(store.root), "unlink", die_on_source)
    with pytest.raises(KeyboardInterrupt):
        store.compact()
    monkeypatch.undo()
    assert len(score_files(store)) == 4 and (store.root / "scores" / ".compact-journal.json").is_file()
    # grb-dist's reader counts the duplicated rows once
    pd.testing.assert_frame_equal(store.read_scores().sort_values("cell_id").reset_index(drop=True), before)
    lock.release()
    store, lock = open_run(store.root)  # start-up recovery finishes the compaction
    assert len(score_files(store)) == 1 and not (store.root / "scores" / ".compact-journal.json").exists()
    raw = pd.read_parquet(store.root / "scores")
    assert len(raw) == 12 and raw["cell_id"].is_unique
    lock.release()


def test_compact_interrupted_before_the_rename_keeps_the_old_files(tmp_path, monkeypatch):
    store, lock = open_run(tmp_path / "run")
    for b in range(3):
        store.write_scores([row(f"c{b}-{i}") for i in range(4)])
    files = score_files(store)
    real_replace = os.replace

    def die(src, dst):
        if str(dst).endswith(".parquet") and "part-" in str(dst):
            raise KeyboardInterrupt
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", die)
    with pytest.raises(KeyboardInterrupt):
        store.compact()
    monkeypatch.undo()
    lock.release()
    store, lock = open_run(store.root)
    assert score_files(store) == files and len(pd.read_parquet(store.root / "scores")) == 12
    assert not list(store.root.rglob(".*tmp*")) and not (store.root / "scores" / ".compact-journal.json").exists()
    lock.release()


def test_atomic_path_rename(tmp_path):
    target = tmp_path / "x.bin"
    with atomic_path(target) as tmp:
        tmp.write_bytes(b"abc")
        assert not target.exists()
    assert target.read_bytes() == b"abc"
    assert os.listdir(tmp_path) == ["x.bin"]


# ----------------------------------------------------------------------------- perturbations and models


def test_perturbation_roundtrip(tmp_path):
    store, lock = open_run(tmp_path / "run")
    rng = np.random.default_rng(0)
    inj = Injection(rng.normal(size=(4, 3)).astype(np.float32),
                    np.array([[10, 10, 11, 12, 13], [0, 1, 2, 3, 4]], dtype=np.int64), 10)
    meta = {"config_hash": "h", "scenario": "injection", "dataset": "d", "dataset_fingerprint": FP,
            "difficulty": "full", "attack": "fgsm", "surrogate": "gcn", "repeat": 1, "seed": 5, "params_json": "{}",
            "feat_lim_min": -0.5, "feat_lim_max": 0.75, "attack_seconds": 0.5}
    store.write_perturbation("p1", inj, meta)
    fresh = RunStore.existing(store.root)  # found by id without an in-memory index
    back = fresh.read_perturbation("p1")
    np.testing.assert_array_equal(back.features, inj.features)
    np.testing.assert_array_equal(back.edges, inj.edges)
    assert back.num_original == 10 and back.features.dtype == np.float32
    m = fresh.perturbation_meta("p1")
    assert m["attack_seconds"] == 0.5 and (m["feat_lim_min"], m["feat_lim_max"]) == (-0.5, 0.75)
    assert m["difficulty"] == "full" and m["dataset"] == "d"
    assert (store.root / "perturbations" / "scenario=injection" / "dataset=d" / "difficulty=full" / "p1.parquet").is_file()
    df = fresh.read_perturbations()
    assert df.loc[0, "n_inject"] == 4 and len(df.loc[0, "features"]) == 12
    assert len(pd.read_parquet(store.root / "perturbations")) == 1
    with pytest.raises(StoreError):
        fresh.read_perturbation("nope")
    lock.release()


def test_model_roundtrip_weights_only(tmp_path):
    import torch

    from grb_dist.models.io import state_dict_from_bytes, state_dict_to_bytes

    store, lock = open_run(tmp_path / "run")
    sd = {"w": torch.arange(6.0).reshape(2, 3)}
    meta = {"model_id": "m", "role": "target", "name": "gcn", "seed": 0, "params_json": "{}", "train_json": "{}",
            "best_epoch": 3, "best_val_accuracy": 0.5, "train_seconds": 1.5}
    assert not store.has_model("gcn-0")
    store.write_model("gcn-0", state_dict_to_bytes(sd), meta)
    assert store.has_model("gcn-0") and store.has_model("gcn-0", "m") and not store.has_model("gcn-0", "other")
    assert torch.equal(torch.load(store.model_path("gcn-0"), weights_only=True)["w"], sd["w"])  # the .pt format
    assert torch.equal(store.read_model("gcn-0", state_dict_from_bytes)["w"], sd["w"])
    assert store.read_model_meta("gcn-0")["train_seconds"] == 1.5
    store.model_path("gcn-0").write_bytes(b"tampered")
    with pytest.raises(StoreError, match="cannot load model"):
        store.read_model("gcn-0", state_dict_from_bytes)
    lock.release()


def test_the_store_stands_on_core_only():
    """The store imports no torch, no Ray and nothing of grb_dist but core (fresh interpreter)."""
    code = (
        "import sys\n"
        "import grb_dist.store, grb_dist.store.recovery\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'ray')\n"
        "             or (m.startswith('grb_dist.') and not m.startswith(('grb_dist.core', 'grb_dist.store')))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_read_empty_dir_has_schema_columns(tmp_path):
    df = read_dir(tmp_path, schema.MODELS)
    assert list(df.columns) == schema.MODELS.names and df.empty
    store, lock = open_run(tmp_path / "run")
    assert list(store.read_scores().columns) == schema.SCORES.names and store.done_cells() == set()
    lock.release()


# ----------------------------------------------------------------------------- the run is a jail


def test_a_lock_that_is_a_symlink_is_refused_and_its_target_untouched(tmp_path):
    store, lock = open_run(tmp_path / "run")
    store.write_scores([row("c0")])
    lock.release()
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    lock_path = store.root / ".lock"
    lock_path.unlink(missing_ok=True)
    lock_path.symlink_to(outside)
    with pytest.raises(StoreError, match="symlink"):
        RunLock(store.root).acquire()
    assert outside.read_text() == "keep me"
    lock_path.unlink()
    lock_path.mkdir()  # neither a directory
    with pytest.raises(StoreError, match="not a plain file"):
        RunLock(store.root).acquire()


@pytest.mark.parametrize("entry", ["../../precious.parquet", "/tmp/../{outside}", "scores/link/x.parquet"])
def test_a_journal_naming_paths_outside_the_run_changes_nothing(tmp_path, entry):
    store, lock = open_run(tmp_path / "run")
    store.write_scores([row("c0")])
    lock.release()
    outside = tmp_path / "precious.parquet"
    outside.write_text("keep me")
    (store.root / "scores" / "link").symlink_to(tmp_path)  # a symlink inside the run, leading out
    (tmp_path / "x.parquet").write_text("keep me too")
    journal = store.root / "scores" / ".compact-journal.json"
    target = next((store.root / "scores").rglob("part-*.parquet")).relative_to(store.root)
    journal.write_text(json.dumps({"target": str(target), "sources": [entry.format(outside=outside)]}))
    with pytest.raises(StoreError, match="outside the run|symlink"):
        open_run(store.root)  # start-up recovery reads the journal
    assert outside.read_text() == "keep me" and (tmp_path / "x.parquet").read_text() == "keep me too"
    assert journal.is_file()  # left for the user to look at
