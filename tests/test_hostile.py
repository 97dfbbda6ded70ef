"""Hostile input, one regression test per class: names that would run code, usage mistakes,
path values, numbers out of range, devices, model sizes that explode within per-number
bounds, and model outputs that would score as a plausible accuracy. Every refusal is one
``error:`` line with exit code 2 and nothing written."""

from __future__ import annotations

import math

import numpy as np
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from grb_dist.cli import app
from grb_dist.core.jobfile import load_job_document, named_specs
from grb_dist.core.errors import ConfigError
from grb_dist.models.tensors import check_device, check_logits
from grb_dist.sweep.job import jobs_dir
from grb_dist.models.memory import GraphShape, ModelSize, estimate_memory, model_size

from helpers import tiny_csbm

runner = CliRunner()


def error_line(result, *words: str) -> str:
    """The one ``error:`` line of a refused command (exit code 2)."""
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert lines and lines[0].startswith("error:"), result.output
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def job_with(tmp_path: Path, **changes) -> Path:
    job = yaml.safe_load((jobs_dir() / "csbm.yaml").read_text())
    job.update(changes)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


# ---------------------------------------------------------------- no code runs from names


def test_specs_in_a_job_file_need_allow_import(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    job = job_with(tmp_path, defenses=["gcn", "os:system"], models={"gcn": {}, "mypkg.models:MyGCN": {}})
    assert sorted(spec for _, spec in named_specs(yaml.safe_load(job.read_text()))) == [
        "mypkg.models:MyGCN", "os:system"]
    for command in (["sweep", "--job", str(job)], ["train", "--job", str(job)]):
        line = error_line(runner.invoke(app, command), "--allow-import", "runs its code")
        assert "os:system" in line or "mypkg.models:MyGCN" in line
    # with consent the specs are read, and still only a class may be named: a function is refused
    error_line(runner.invoke(app, ["sweep", "--job", str(job), "--allow-import", "--out", "run"]), "mypkg")
    job = job_with(tmp_path, defenses=["gcn", "os:system"])
    error_line(runner.invoke(app, ["sweep", "--job", str(job), "--allow-import", "--out", "run"]), "not a class")
    # names typed on the command line need no consent, and follow the same rule
    error_line(runner.invoke(app, ["sweep", "--defenses", "builtins:print", "--out", "run"]), "not a class")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml"]
    load_job_document(job, allow_import=True)  # the document itself is fine
    with pytest.raises(ConfigError, match="--allow-import"):
        load_job_document(job)


def test_cuda_device_strings_are_not_specs(tmp_path):
    (tmp_path / "j.yaml").write_text("device: cuda:0\naddress: ray://host:10001\n")
    assert list(named_specs(load_job_document(tmp_path / "j.yaml"))) == []


# ---------------------------------------------------------------- usage mistakes: one line


@pytest.mark.parametrize("args, words", [
    (["sweep", "--bogus"], ["No such option: --bogus"]),
    (["train", "--epochs", "abc"], ["'--epochs'"]),
    (["leaderboard"], ["Missing argument"]),
    (["report", "a", "b"], ["unexpected extra argument"]),
    (["study", "--seed", "x"], ["'--seed'"]),
])
def test_usage_mistakes_are_one_error_line_and_a_hint(args, words):
    result = runner.invoke(app, args, prog_name="grb-dist")
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 2, result.output
    assert lines[0].startswith("error:") and all(w in lines[0] for w in words), lines[0]
    assert lines[1].startswith("try 'grb-dist") and lines[1].endswith("--help'"), lines[1]
    assert "╭" not in result.output  # no boxed panel


def test_help_and_version_are_unchanged():
    assert runner.invoke(app, ["train", "--help"]).exit_code == 0
    assert runner.invoke(app, ["--version"]).output.startswith("grb-dist ")
    assert runner.invoke(app, []).exit_code == 2  # no command: the help, as before


# ---------------------------------------------------------------- path values


@pytest.mark.parametrize("args, words", [
    (["sweep", "--out", ""], ["--out", "non-empty path"]),
    (["sweep", "--out", "x" * 300], ["--out", "300 bytes", "at most 255"]),
    (["leaderboard", ""], ["run_dir", "non-empty path"]),
    (["report", "run", "--output", ""], ["--output", "non-empty path"]),
    (["study", "--out", ""], ["--out", "non-empty path"]),
    (["train", "--job", "a/" * 2100], ["--job", "at most 4,095"]),
])
def test_path_values_are_checked_before_anything_runs(args, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    error_line(runner.invoke(app, args), *words)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- numbers, devices, budgets


@pytest.mark.parametrize("args, words", [
    (["--lr", "inf"], ["train.lr", "finite"]),
    (["--lr", "nan"], ["train.lr", "finite"]),
    (["--lr", "1e9"], ["train.lr", "at most 10"]),
    (["--epochs", "10000000"], ["train.epochs"]),
    (["--hidden", ""], ["--hidden", "comma-separated integers"]),
    (["--hidden", "0"], ["hidden_sizes must be positive"]),
    (["--device", "meta"], ["--device meta"]),
    (["--device", "cuda:99"], ["cuda:99"]),
    (["--device", "bogus"], ["not a torch device"]),
])
def test_train_options_out_of_range_are_refused(args, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    error_line(runner.invoke(app, ["train", *args]), *words)


def test_devices():
    assert check_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA GPU"):
            check_device("cuda")


def test_adversarial_training_budget_is_checked_by_train(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    job = yaml.safe_load((jobs_dir() / "csbm.yaml").read_text())
    job["adversarial_training"]["n_inject"] = 50_000
    (tmp_path / "at.yaml").write_text(yaml.safe_dump(job))
    error_line(runner.invoke(app, ["train", "--job", "at.yaml", "--model", "gcn_at"]), "exceeds", "training nodes")


# ---------------------------------------------------------------- model sizes


def test_model_sizes_grow_with_their_own_knobs():
    assert model_size("gcn", {"hidden_sizes": [64, 64]}) == ModelSize((64, 64))
    assert model_size("gat", {"hidden_sizes": [16], "heads": 8}).widths == (128,)
    assert model_size("tagcn", {"hidden_sizes": [32], "k": 7}).copies == 8
    assert model_size("appnp", {"hidden_sizes": [64], "k": 10}, num_classes=7).per_node == 140
    shape = GraphShape(num_nodes=100_000, num_edges=500_000, num_features=100, num_classes=10, n_train=60_000,
                       n_val=10_000, targets={"full": 30_000})

    def training(size):
        return next(t for t in estimate_memory(shape, [("m", size, None)], []) if t.task.startswith("training"))

    base = training(model_size("tagcn", {"hidden_sizes": [64], "k": 2}))
    huge = training(model_size("tagcn", {"hidden_sizes": [64], "k": 10_000}))
    assert huge.bytes > 1000 * base.bytes / 2 and "hops" in huge.hint
    # per-number bounds pass, the product does not: refused before training
    wide = model_size("gcn", {"hidden_sizes": [16_384] * 16})
    assert training(wide).bytes > 16 * 16_384 ** 2 * 4 * 4


def test_train_refuses_a_model_that_does_not_fit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    hidden = ",".join(["16384"] * 16)
    error_line(runner.invoke(app, ["train", "--hidden", hidden]), "needs at least", "hidden sizes")


# ---------------------------------------------------------------- model outputs


@pytest.mark.parametrize("out, words", [
    (torch.zeros(5, 3), None),
    (torch.zeros(5, 4), "expected (5, 3)"),
    (torch.zeros(4, 3), "expected (5, 3)"),
    (torch.full((5, 3), math.nan), "NaN or infinite"),
    (torch.zeros(5, 3, dtype=torch.long), "floating-point"),
    ((torch.zeros(5, 3),), "not a tensor"),
])
def test_model_outputs_are_checked(out, words):
    if words is None:
        check_logits(out, 5, 3)
        return
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        check_logits(out, 5, 3)


def test_nan_and_too_wide_models_fail_training_and_scoring_in_one_line():
    from grb_dist.evaluation.evaluate import evaluate
    from grb_dist.models.train import TrainConfig, train_model

    g = tiny_csbm(n=120)

    class Wide(torch.nn.Module):
        def __init__(self, extra: int, nan: bool = False):
            super().__init__()
            self.lin, self.nan = torch.nn.Linear(g.num_features, g.num_classes + extra), nan

        def forward(self, x, edge_index):
            out = self.lin(x)
            return out * math.nan if self.nan else out

    for model, words in ((Wide(2), "expected"), (Wide(0, nan=True), "NaN")):
        with pytest.raises(ConfigError, match=words):
            train_model(model, g, TrainConfig(epochs=2))
        with pytest.raises(ConfigError, match=words):
            evaluate(model, g)
    assert set(evaluate(Wide(0), g)) == {"easy", "medium", "hard", "full"}


# ---------------------------------------------------------------- dataset files


def _grb_dir(tmp_path: Path, n: int = 60, **files) -> Path:
    """A small GRB-layout directory (a ring plus chords), with ``files`` replacing its arrays."""
    import numpy as np
    import scipy.sparse as sp

    d = tmp_path / "graph"
    d.mkdir()
    rows = np.concatenate([np.arange(n), np.arange(n)])
    cols = np.concatenate([(np.arange(n) + 1) % n, (np.arange(n) + 7) % n])
    adj = sp.coo_matrix((np.ones(rows.size, np.float32), (rows, cols)), shape=(n, n)).tocsr()
    adj = ((adj + adj.T) > 0).astype(np.float32).tocsr()
    rng = np.random.default_rng(0)
    arrays = {
        "adj.npz": adj,
        "features.npz": {"data": rng.normal(size=(n, 5)).astype(np.float32)},
        "labels.npz": {"data": np.arange(n) % 3},
        "index.npz": {"index_train": np.arange(0, 30), "index_val": np.arange(30, 36), "index_test": np.arange(36, 60),
                      "index_test_easy": np.arange(36, 44), "index_test_medium": np.arange(44, 52),
                      "index_test_hard": np.arange(52, 60)},
    }
    arrays.update(files)
    for name, value in arrays.items():
        if callable(value):
            value(d / name)
        elif isinstance(value, dict):
            np.savez(d / name, **value)
        else:
            sp.save_npz(d / name, value)
    return d


def _weighted(value):
    def write(path):
        import numpy as np
        import scipy.sparse as sp

        a = sp.load_npz(path.parent.parent / "good" / "adj.npz").astype(np.float64)
        a.data[:4] = value
        sp.save_npz(path, a)
    return write


@pytest.fixture
def good(tmp_path):
    d = _grb_dir(tmp_path)
    return d.rename(tmp_path / "good")


@pytest.mark.parametrize("files, words", [
    (dict(features={"data": (np.ones((60, 5)) * 1j).astype(np.complex64)}), "complex numbers"),
    (dict(features={"data": np.full((60, 5), "x")}), "strings"),
    (dict(labels={"data": np.array(["a", "b", "c"] * 20)}), "integer class ids, found strings"),
    (dict(labels={"data": np.arange(60) % 3 + 0.5}), "integer class ids, found fractional"),
])
def test_values_that_are_not_numbers_are_refused(tmp_path, files, words):
    from grb_dist.core.errors import DatasetError
    from grb_dist.datasets import load_dataset

    files = {f"{k}.npz": v for k, v in files.items()}
    with pytest.raises(DatasetError, match=words):
        load_dataset(_grb_dir(tmp_path, **files))


def test_fractional_split_indices_are_named_as_such(tmp_path):
    from grb_dist.core.errors import DatasetError
    from grb_dist.datasets import load_dataset

    index = {"index_train": np.arange(0, 30) + 0.5, "index_val": np.arange(30, 36), "index_test": np.arange(36, 60),
             "index_test_easy": np.arange(36, 44), "index_test_medium": np.arange(44, 52),
             "index_test_hard": np.arange(52, 60)}
    with pytest.raises(DatasetError, match="'index_train' must hold integer node ids, found fractional"):
        load_dataset(_grb_dir(tmp_path, **{"index.npz": index}))
    # whole numbers stored as floats are node ids
    index["index_train"] = np.arange(0, 30).astype(np.float64)
    (tmp_path / "graph").rename(tmp_path / "old")
    assert load_dataset(_grb_dir(tmp_path, **{"index.npz": index})).split["train"].dtype == np.int64


@pytest.mark.parametrize("value", [math.nan, -1.0, 0.0, 0.5, math.inf])
def test_edge_weights_other_than_edges_are_refused(good, tmp_path, value):
    from grb_dist.core.errors import DatasetError
    from grb_dist.datasets import load_dataset

    with pytest.raises(DatasetError, match="not edges of weight 1"):
        load_dataset(_grb_dir(tmp_path, **{"adj.npz": _weighted(value)}))


def test_repeated_edge_counts_are_edges(good, tmp_path):
    from grb_dist.datasets import load_dataset

    a, b = load_dataset(good), load_dataset(_grb_dir(tmp_path, **{"adj.npz": _weighted(2.0)}))
    np.testing.assert_array_equal(a.edge_index, b.edge_index)


def test_fifos_devices_and_directories_are_not_dataset_files(good, tmp_path):
    import os

    from grb_dist.core.errors import DatasetError
    from grb_dist.datasets import load_dataset

    (good / "adj.npz").unlink()
    os.mkfifo(good / "adj.npz")
    with pytest.raises(DatasetError, match="is a FIFO, not a regular file"):
        load_dataset(good)  # returns at once: the FIFO is never opened
    (good / "adj.npz").unlink()
    (good / "adj.npz").symlink_to("/dev/zero")
    with pytest.raises(DatasetError, match="device or socket, not a regular file"):
        load_dataset(good)
    (tmp_path / "dir.npz").mkdir()
    from grb_dist.datasets.npz import load_npz_graph

    with pytest.raises(DatasetError, match="is a directory, not a regular file"):
        load_npz_graph(tmp_path / "dir.npz")


def test_sizes_are_checked_against_memory_before_allocation(tmp_path, monkeypatch):
    import scipy.sparse as sp

    import grb_dist.core.resources as resources
    from grb_dist.core.errors import DatasetError
    from grb_dist.datasets.npz import load_npz_graph

    # a compressed member that unpacks to more than the machine has: refused from its header
    monkeypatch.setattr(resources, "machine_memory", lambda: 64 * 1024)
    np.savez_compressed(tmp_path / "bomb.npz", data=np.zeros((300, 300), np.float32))
    from grb_dist.datasets.members import open_npz, read_array

    with open_npz(tmp_path / "bomb.npz") as npz, pytest.raises(DatasetError, match="would take 351.6 KiB"):
        read_array(npz, "data", tmp_path / "bomb.npz")
    # identity features of a graph without attributes, and a wide attribute matrix
    adj = sp.random(300, 300, density=0.01, format="csr", random_state=0)
    adj.data[:] = 1
    np.savez(tmp_path / "noattr.npz", adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr,
             adj_shape=np.array(adj.shape), labels=np.arange(300) % 2)
    with pytest.raises(DatasetError, match="identity features for 300 nodes"):
        load_npz_graph(tmp_path / "noattr.npz")
    wide = sp.csr_matrix((300, 10**6), dtype=np.float32)
    np.savez(tmp_path / "wide.npz", adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr,
             adj_shape=np.array(adj.shape), attr_data=wide.data, attr_indices=wide.indices, attr_indptr=wide.indptr,
             attr_shape=np.array(wide.shape), labels=np.arange(300) % 2)
    with pytest.raises(DatasetError, match="300 x 1,000,000 attribute matrix"):
        load_npz_graph(tmp_path / "wide.npz")


def test_a_graph_without_edges_is_fingerprinted():
    from grb_dist.store.fingerprint import fingerprint_parts

    g = tiny_csbm(n=60)
    import dataclasses

    edgeless = dataclasses.replace(g, edge_index=np.zeros((2, 0), np.int64))
    parts = fingerprint_parts(edgeless, "none")
    assert parts["edges"] != fingerprint_parts(g, "none")["edges"]


# ---------------------------------------------------------------- run directories


@pytest.fixture
def run(tmp_path):
    """A run written through the store (synthetic scores, no Ray), beside a folder outside it."""
    from test_leaderboard import make_run, synthetic_scores

    make_run(tmp_path / "run", synthetic_scores(scenarios=("injection",), difficulties=("easy", "full")))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    return tmp_path / "run"


def _outside(run: Path) -> list[str]:
    return sorted(p.name for p in (run.parent / "outside").iterdir())


@pytest.mark.parametrize("entry", ["quarantine", "scores", "leaderboard", "manifest.json"])
def test_symlinks_in_a_run_are_refused_and_nothing_outside_changes(run, entry):
    import shutil

    target = run.parent / "outside" / entry
    if (run / entry).exists():
        shutil.move(str(run / entry), target)
    else:
        target.mkdir()
    (run / entry).symlink_to(target)
    before = sorted(str(p) for p in target.rglob("*")) if target.is_dir() else [target.read_text()]
    for args in (["compact", str(run)], ["leaderboard", str(run)], ["report", str(run), "--output",
                                                                        str(run.parent / "rep")]):
        error_line(runner.invoke(app, args), "is a symlink", "never follows a link")
    after = sorted(str(p) for p in target.rglob("*")) if target.is_dir() else [target.read_text()]
    assert before == after and "keep.txt" in _outside(run) and not (run.parent / "rep").exists()


@pytest.mark.parametrize("content, words", [("[1, 2]", "a JSON list"), ('"x"', "a JSON str"),
                                            (None, "no valid dataset entry")])
def test_a_damaged_manifest_is_one_line(run, content, words):
    import json

    manifest = run / "manifest.json"
    if content is None:
        data = json.loads(manifest.read_text())
        data["dataset"] = "x"
        content = json.dumps(data)
    manifest.write_text(content)
    for args in (["report", str(run), "--output", str(run.parent / "rep")], ["compact", str(run)]):
        error_line(runner.invoke(app, args), "is damaged", words)


def test_compact_refuses_what_is_not_an_intact_run(run, tmp_path):
    import shutil

    shutil.rmtree(run / "scores")
    (run / "scores").write_text("not a directory")
    error_line(runner.invoke(app, ["compact", str(run)]), "scores is not a directory", "not an intact run")
    (tmp_path / "plain").mkdir()
    error_line(runner.invoke(app, ["compact", str(tmp_path / "plain")]), "not a grb-dist run directory")


def test_tampered_copied_and_foreign_score_files_are_not_counted_and_quarantined_on_write(run):
    import shutil

    import pandas as pd

    clean = runner.invoke(app, ["leaderboard", str(run), "--format", "csv"])
    assert clean.exit_code == 0 and "warning" not in clean.output
    files = sorted((run / "scores").rglob("part-*.parquet"))
    tampered, copied = files[0], files[-1]
    shutil.copy(copied, copied.with_name("part-copy.parquet"))  # a copy: pandas would count its rows twice
    (run / "scores" / "notes.txt").write_text("pandas reads every file it finds")
    (run / "scores" / "linked.parquet").symlink_to(files[-1])
    import pyarrow.parquet as pq

    t = pq.read_table(tampered)
    pq.write_table(t.set_column(t.schema.get_field_index("accuracy"), "accuracy",
                                pa_zeros(t.num_rows)), tampered)  # values edited in place
    read = runner.invoke(app, ["leaderboard", str(run), "--format", "csv"])  # the tampered cells would be missing
    assert read.exit_code == 2 and "checksum mismatch" in read.output and f"{t.num_rows} cells" in read.output
    r = runner.invoke(app, ["compact", str(run)])
    assert r.exit_code == 0, r.output
    quarantined = sorted(p.name for p in (run / "quarantine").rglob("*") if not p.name.startswith("."))
    assert {"part-copy.parquet", "notes.txt", "linked.parquet", tampered.name} <= set(quarantined)
    stored = pd.read_parquet(run / "scores")
    assert stored["cell_id"].is_unique  # pandas now sees what grb-dist sees
    # the quarantined cells are still missing: boards are refused until a sweep recomputes them
    r = runner.invoke(app, ["leaderboard", str(run)])
    assert r.exit_code == 2 and "moved to quarantine/ earlier" in r.output, r.output


def pa_zeros(n: int):
    import pyarrow as pa

    return pa.array([0.0] * n, type=pa.float64())


def test_outputs_that_are_devices_and_full_devices_are_one_line(run):
    import os

    error_line(runner.invoke(app, ["leaderboard", str(run), "--output", "/dev/null"]), "not a regular file")
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")  # never replaced
    if os.path.exists("/dev/full"):
        import subprocess
        import sys

        with open("/dev/full", "w") as full:
            p = subprocess.run([sys.executable, "-m", "grb_dist.cli", "leaderboard", str(run)], stdout=full,
                               stderr=subprocess.PIPE, text=True, timeout=120)
        assert p.returncode == 2 and p.stderr.strip().startswith("error: No space left on device"), p.stderr


# ---------------------------------------------------------------- the study


@pytest.mark.parametrize("args, words", [
    (["--epochs", "0"], "train.epochs"),
    (["--seed", "-1"], "seed must be in"),
    (["--seed", str(2**64)], "seed must be in"),
    (["--graphs", "1000000000"], "graphs must be in"),
    (["--nodes", "1000000000"], "nodes must be in"),
    (["--k", "1e308"], "K must be in [0, 100]"),
    (["--attacks", ""], "--attacks is empty"),
    (["--budgets", ","], "--budgets is empty"),
    (["--models", "os:system"], "not a class"),
])
def test_the_study_validates_before_it_writes(tmp_path, args, words):
    error_line(runner.invoke(app, ["study", "--out", str(tmp_path / "out"), "--no-ray", *args]), words)
    assert not (tmp_path / "out").exists()


def test_study_job_files_get_the_sweep_rules(tmp_path):
    import importlib.resources

    job = yaml.safe_load((importlib.resources.files("grb_dist") / "jobs" / "studies" /
                          "over-robustness-csbm.yaml").read_text())
    cases = {"nodes": {"graph": {**job["graph"], "num_nodes": 10**9}},
             "hidden": {"models": {**job["models"], "gcn": {"hidden_sizes": [10**6]}}},
             "spec": {"models": {"mypkg:Net": {}}}}
    words = {"nodes": "graph.num_nodes", "hidden": "hidden_sizes", "spec": "--allow-import"}
    for name, change in cases.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({**job, **change}))
        error_line(runner.invoke(app, ["study", "--job", str(tmp_path / f"{name}.yaml"), "--out",
                                       str(tmp_path / "out"), "--no-ray"]), words[name])
    (tmp_path / "bin.yaml").write_bytes(b"\x00\x01\xff binary")
    error_line(runner.invoke(app, ["study", "--job", str(tmp_path / "bin.yaml"), "--out", str(tmp_path / "out")]),
               "not UTF-8")
    (tmp_path / "bomb.yaml").write_text("a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
                                        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\n"
                                        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d]\nbudgets: [*e, *e, *e, *e, *e, *e]\n")
    error_line(runner.invoke(app, ["study", "--job", str(tmp_path / "bomb.yaml"), "--out", str(tmp_path / "out")]),
               "aliases")
    assert not (tmp_path / "out").exists()
