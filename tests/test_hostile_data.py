"""Hostile dataset files, one regression test per class: sizes a file declares (checked from
its headers before anything is unpacked), values that are not what the format holds, paths
that are not regular files, graphs without edges, and messages that name the real problem.
Every refusal is one :class:`DatasetError` line (one ``error:`` line and exit code 2 in the
CLI), built from tiny files in ``tmp_path``."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from typer.testing import CliRunner

import grb_dist.core.jobfile as jobfile
import grb_dist.core.resources as resources
from grb_dist.cli import app
from grb_dist.core.errors import ConfigError, DatasetError
from grb_dist.core.graph import MAX_NODES, canonical_edges
from grb_dist.datasets import declared_graph, load_dataset, load_npz_graph

from helpers import tiny_csbm

runner = CliRunner()
N = 60


def ring(n: int = N) -> sp.csr_matrix:
    """A symmetric 0/1 adjacency: a ring plus chords."""
    rows = np.concatenate([np.arange(n), np.arange(n)])
    cols = np.concatenate([(np.arange(n) + 1) % n, (np.arange(n) + 7) % n])
    adj = sp.coo_matrix((np.ones(rows.size, np.float32), (rows, cols)), shape=(n, n)).tocsr()
    return ((adj + adj.T) > 0).astype(np.float32).tocsr()


def split_arrays(n: int = N, **changes) -> dict:
    half, val = n // 2, n // 2 + n // 10
    third = (n - val) // 3
    split = {"index_train": np.arange(half), "index_val": np.arange(half, val), "index_test": np.arange(val, n),
             "index_test_easy": np.arange(val, val + third), "index_test_medium": np.arange(val + third, val + 2 * third),
             "index_test_hard": np.arange(val + 2 * third, n)}
    return {**split, **changes}


def grb_dir(tmp_path: Path, name: str = "graph", n: int = N, **files) -> Path:
    """A GRB-layout directory; ``files`` replace its arrays (a dict is saved with np.savez,
    a sparse matrix with save_npz)."""
    d = tmp_path / name
    d.mkdir()
    arrays = {"adj": ring(n), "features": {"data": np.random.default_rng(0).normal(size=(n, 5)).astype(np.float32)},
              "labels": {"data": np.arange(n) % 3}, "index": split_arrays(n)}
    arrays.update(files)
    for key, value in arrays.items():
        if isinstance(value, dict):
            np.savez(d / f"{key}.npz", **value)
        else:
            sp.save_npz(d / f"{key}.npz", value)
    return d


def npz_file(path: Path, adj: sp.csr_matrix | None = None, shape=None, **arrays) -> Path:
    """A graph in the ``adj_data/...`` convention (no attributes: identity features)."""
    adj = ring() if adj is None else adj
    np.savez(path, adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr,
             adj_shape=np.array(adj.shape if shape is None else shape), **{"labels": np.arange(adj.shape[0]) % 3,
                                                                            **arrays})
    return path


def error_line(result, *words: str) -> str:
    """The one ``error:`` line of a refused command (exit code 2)."""
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------- sizes, from the headers


def test_a_graph_larger_than_memory_is_refused_from_its_headers_before_unpacking(tmp_path, monkeypatch):
    # every array fits half of a 2 MiB machine on its own; the graph they make does not
    n = 300
    adj = sp.random(n, n, density=0.12, format="csr", random_state=0)
    adj = ((adj + adj.T) > 0).astype(np.float32).tocsr()
    features = np.ones((n, 700), np.float32)  # 840,000 bytes, compressed to a few KiB
    d = tmp_path / "graph"
    d.mkdir()
    sp.save_npz(d / "adj.npz", adj)
    np.savez_compressed(d / "features.npz", data=features)
    np.savez(d / "labels.npz", data=np.arange(n) % 3)
    np.savez(d / "index.npz", **split_arrays(n))
    monkeypatch.setattr(resources, "machine_memory", lambda: 2 << 20)
    size = declared_graph(d)
    assert (size.nodes, size.features, size.entries) == (n, 700, adj.nnz)
    assert features.nbytes < (1 << 20) < size.nbytes
    tracemalloc.start()
    try:
        with pytest.raises(DatasetError) as exc:
            load_dataset(d)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert f"{d}: 300 nodes with a dense 300 x 700 attribute matrix and {adj.nnz:,} adjacency entries" in str(exc.value)
    assert "more than half of this machine's 2.0 MiB" in str(exc.value)
    assert peak < features.nbytes // 4  # the features were never unpacked


def deflated_features(d: Path, rows: int, cols: int, value: float = 0.0) -> int:
    """Replace ``d``'s features.npz by a deflated ``rows x cols`` float32 array of ``value``
    (a compressed bomb when large: a few MB on disk), written without holding it; its bytes."""
    row = np.full(cols, value, np.float32).tobytes()
    with zipfile.ZipFile(d / "features.npz", "w", zipfile.ZIP_DEFLATED) as z, \
            z.open("data.npy", "w", force_zip64=True) as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f4", "fortran_order": False, "shape": (rows, cols)})
        for _ in range(rows):
            fh.write(row)
    return rows * cols * 4


PEAK = """
import resource, sys
import grb_dist.core.resources as resources
from grb_dist.core.errors import DatasetError
from grb_dist.datasets import load_dataset
resources.machine_memory = lambda: int(sys.argv[2])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
try:
    load_dataset(sys.argv[1])
    print("loaded")
except DatasetError as exc:
    print(exc)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base)
"""


def load_peak(d: Path, memory: int) -> tuple[str, int]:
    """Load ``d`` in a subprocess that believes the machine has ``memory`` bytes: what it
    said, and how far its resident memory grew past what importing grb-dist took."""
    out = subprocess.run([sys.executable, "-c", PEAK, str(d), str(memory)], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()
    return out[-2], int(out[-1])


def test_a_compressed_bomb_is_refused_by_what_its_load_would_hold(tmp_path):
    """A features.npz that deflates a 240 x 1,000,000 float32 array (960 MB) into a few MB, on
    a machine of 3 GiB: the array alone is below half of it, but loading holds it and its
    normalised copy (1.9 GB), so the load is refused from the headers, before resident memory
    grows; an array half as large loads, and its peak stays within what the rule counts."""
    d = grb_dir(tmp_path, n=240)
    stored = deflated_features(d, 240, 1_000_000)
    assert (d / "features.npz").stat().st_size < stored // 100
    memory = 3 << 30
    assert stored < memory // 2 < 2 * stored
    said, grew = load_peak(d, memory)
    assert said.startswith(f"{d}: 240 nodes with a dense 240 x 1,000,000 attribute matrix") and \
        "loading holds the stored features and their normalised copy" in said and \
        "more than half of this machine's 3.0 GiB" in said, said
    assert grew < 200 << 20, grew  # refused before anything was unpacked
    # half as many columns: loaded; at its peak it held about the stored array and one copy
    ok = grb_dir(tmp_path, "ok", n=240)
    half = deflated_features(ok, 240, 500_000, value=1.5)
    said, grew = load_peak(ok, memory)
    assert said == "loaded" and grew < 2.4 * half, (said, grew / half)


def test_a_header_promising_more_than_its_file_holds_is_a_damaged_file(tmp_path):
    """A features.npz whose header promises 20 GB but holds 64 KiB is damaged, and the
    message says so first (not that 20 GB would not fit), read from its headers alone."""
    d = grb_dir(tmp_path)
    with zipfile.ZipFile(d / "features.npz", "w") as z, z.open("data.npy", "w", force_zip64=True) as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f4", "fortran_order": False, "shape": (100_000, 50_000)})
        fh.write(bytes(1 << 16))
    with pytest.raises(DatasetError) as exc:
        load_dataset(d)
    assert re.search(r"features\.npz: array 'data' declares shape \(100000, 50000\) \(20,000,000,000 bytes\) but "
                     r"holds 65,\d+; the file is damaged: fetch it again$", str(exc.value)), str(exc.value)
    assert "would take" not in str(exc.value)


@pytest.mark.parametrize("nodes", [10**9, 4 * 10**9])
def test_a_node_count_its_arrays_cannot_hold_is_a_damaged_file(tmp_path, nodes):
    path = npz_file(tmp_path / "huge.npz", shape=[nodes, nodes])  # a 60-node file claiming more
    with pytest.raises(DatasetError) as exc:
        load_npz_graph(path)
    assert str(exc.value) == (f"{path}: the adjacency declares {nodes:,} rows but its indptr holds 60; the file is "
                              "damaged: fetch it again")
    with pytest.raises(DatasetError, match="64-bit"):
        canonical_edges(np.zeros(1), np.ones(1), MAX_NODES + 1)


# ---------------------------------------------------------------- values


@pytest.mark.parametrize("files, words", [
    (dict(index=split_arrays(index_train=np.arange(N) < N // 2)),
     "index.npz: split 'index_train' is a boolean mask, not node ids; store the ids of its nodes"),
    (dict(labels={"data": np.eye(3)[np.arange(N) % 3]}),
     "labels.npz: labels must be a vector of integer class ids, got shape (60, 3); one-hot rows?"),
    (dict(labels={"data": np.where(np.arange(N) == 0, 1e30, np.arange(N) % 3)}),
     "labels must hold integer class ids, found 1e+30 (beyond 64-bit integers)"),
    (dict(labels={"data": (np.arange(N) % 3).astype(np.uint64) + np.uint64(2**63)}),
     "labels must hold integer class ids, found 9.22e+18 (beyond 64-bit integers)"),
    (dict(index=split_arrays(index_train=np.r_[np.arange(N // 2 - 1), 1e20])),
     "split 'index_train' must hold integer node ids, found 1e+20"),
    (dict(features={"data": np.full((N, 5), 1e300)}),
     "features.npz: features hold values up to 1e+300, beyond float32's range"),
    (dict(features={"data": np.where(np.eye(N, 5) > 0, np.nan, 1.0)}),
     "features.npz: features hold 5 NaN or infinite values"),
    (dict(features={"data": np.zeros((N, 0), np.float32)}), "features.npz: features have no columns (shape (60, 0))"),
])
def test_values_are_refused_as_what_they_are(tmp_path, files, words):
    with pytest.raises(DatasetError) as exc:
        load_dataset(grb_dir(tmp_path, **files))
    assert words in str(exc.value)


def test_whole_numbers_and_column_vectors_are_ids(tmp_path):
    labels = (np.arange(N) % 3).astype(np.float64).reshape(-1, 1)
    g = load_dataset(grb_dir(tmp_path, labels={"data": labels}, index=split_arrays(index_val=np.arange(30, 36.0))))
    assert g.labels.dtype == np.int64 and g.labels.tolist() == (np.arange(N) % 3).tolist()
    assert g.split["val"].tolist() == list(range(30, 36))


def test_attributes_must_match_the_adjacency_and_have_columns(tmp_path):
    attr = sp.csr_matrix(np.ones((N + 10, 4), np.float32))
    keys = dict(attr_data=attr.data, attr_indices=attr.indices, attr_indptr=attr.indptr)
    with pytest.raises(DatasetError, match="attribute matrix has 70 rows but the adjacency 60 nodes"):
        load_npz_graph(npz_file(tmp_path / "rows.npz", attr_shape=np.array(attr.shape), **keys))
    empty = sp.csr_matrix((N, 0), dtype=np.float32)
    with pytest.raises(DatasetError, match=r"attributes have no columns \(shape \(60, 0\)\)"):
        load_npz_graph(npz_file(tmp_path / "cols.npz", attr_data=empty.data, attr_indices=empty.indices,
                                attr_indptr=empty.indptr, attr_shape=np.array(empty.shape)))
    g = tiny_csbm(n=60)
    with pytest.raises(DatasetError, match="features have no columns"):
        dataclasses.replace(g, features=np.zeros((60, 0), np.float32)).validate()


# ---------------------------------------------------------------- paths that are not regular files


def test_paths_that_are_not_regular_files_are_refused_before_they_are_opened(tmp_path):
    os.mkfifo(tmp_path / "fifo.npz")
    (tmp_path / "urandom.npz").symlink_to("/dev/urandom")
    (tmp_path / "loop.npz").symlink_to("loop.npz")
    (tmp_path / "null").symlink_to("/dev/null")
    cases = {"fifo.npz": "is a FIFO, not a regular file", "urandom.npz": "is a device or socket, not a regular file",
             "loop.npz": "Too many levels of symbolic links", "null": "is a device or socket, not a regular file"}
    for name, words in cases.items():  # each returns at once: a FIFO or a device would block or never end
        with pytest.raises(DatasetError, match=words):
            load_dataset(tmp_path / name)
    os.mkfifo(tmp_path / "job.yaml")
    with pytest.raises(ConfigError, match="job file .* is a FIFO, not a regular file; give a YAML file"):
        jobfile.read_job_text(tmp_path / "job.yaml")


@pytest.mark.parametrize("content, words", [
    (b"<!DOCTYPE html><html>404</html>", "is an HTML page, not a valid .npz"),
    (b"\x80\x04\x95" + bytes(20), "is a Python pickle (never loaded), not a valid .npz"),
    (b"", "is empty, not a valid .npz"),
])
def test_files_that_are_not_npz_archives_say_what_they_are(tmp_path, content, words):
    (tmp_path / "x.npz").write_bytes(content)
    with pytest.raises(DatasetError, match=re.escape(words)):
        load_dataset(tmp_path / "x.npz")
    np.save(tmp_path / "one.npy", np.arange(3))
    (tmp_path / "one.npy").rename(tmp_path / "one.npz")
    with pytest.raises(DatasetError, match="is a single .npy array, not a valid .npz"):
        load_dataset(tmp_path / "one.npz")


# ---------------------------------------------------------------- graphs without edges


def test_a_graph_without_edges_trains_and_scores(tmp_path):
    edgeless = sp.csr_matrix((N, N), dtype=np.float32)
    for g in (load_dataset(grb_dir(tmp_path, adj=edgeless)), load_dataset(npz_file(tmp_path / "e.npz", edgeless))):
        assert g.num_edges == 0 and g.edge_index.shape == (2, 0) and len(g.split["test_full"])
    result = runner.invoke(app, ["train", "--dataset", str(tmp_path / "graph"), "--model", "gcn", "--epochs", "2"])
    assert result.exit_code == 0, result.output
    assert "full" in result.output and "error" not in result.output


# ---------------------------------------------------------------- through the CLI


def test_a_hostile_dataset_is_one_error_line_in_the_cli(tmp_path):
    os.mkfifo(tmp_path / "fifo.npz")
    error_line(runner.invoke(app, ["train", "--dataset", str(tmp_path / "fifo.npz")]), "fifo.npz is a FIFO")
    d = grb_dir(tmp_path, index=split_arrays(index_train=np.arange(N) < N // 2))
    error_line(runner.invoke(app, ["train", "--dataset", str(d)]), "'index_train' is a boolean mask")
    npz_file(tmp_path / "huge.npz", shape=[10**9, 10**9])
    error_line(runner.invoke(app, ["train", "--dataset", str(tmp_path / "huge.npz")]),
               "huge.npz: the adjacency declares 1,000,000,000 rows", "the file is damaged")
