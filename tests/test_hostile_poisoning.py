"""Hostile poisoning inputs, one regression test per class (issue 51): the files a poisoning
job reads beside its graph -- Pro-GNN's perturbed matrices, the attacked-node lists and the
split, found through ``$GRB_DIST_PROGNN`` or a ``root:`` in the job -- are content like the
dataset (a swapped file is never read as the old one), every one of them is opened, bounded
and validated before Ray starts or anything is written, and every damaged one is a single
``error:`` line naming the file (and the member), exit code 2.

The files are built in ``tmp_path`` in Pro-GNN's layout around a 35-node graph
(:func:`test_published.make_layout`); the last test reads the real published files."""

from __future__ import annotations

import hashlib
import io
import json
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from typer.testing import CliRunner

import grb_dist.cluster.ray_edge
from grb_dist.attacks.registry import build_attack
from grb_dist.cli import app
from grb_dist.core.errors import DatasetError, StoreError
from grb_dist.datasets.prognn import PROGNN_CHECKSUMS, PROGNN_ENV, load_prognn, prognn_folder
from grb_dist.datasets.prognn_readers import read_attacked_nodes, read_published, read_split
from grb_dist.sweep.cells import run_cells, run_components
from grb_dist.sweep.session import lock_run, open_store, prepare
from grb_dist.sweep.job import parse_job
from grb_dist.sweep.worker import attack_task, scored_nodes

from test_published import N, make_layout

runner = CliRunner()

META = "meta/cora_meta_adj_0.05.npz"
NETTACK = "nettack/cora_nettack_adj_1.0.npz"
NODES = "nettack/cora_nettacked_nodes.json"
SPLIT = "splits/cora_prognn_splits.json"

#: A poisoning job replaying a Metattack and a Nettack set of the synthetic prognn-cora.
JOB = {
    "dataset": "prognn-cora", "scenario": "poisoning", "normalize": "none", "seed": 0, "repeats": 1,
    "difficulties": ["full"], "train": {"epochs": 5, "patience": 5}, "models": {"gcn": {"hidden_sizes": [8]}},
    "defenses": ["gcn"], "surrogates": ["gcn"],
    "poisoning": {"attack": {"ratio_edge_mod": 0.05},
                  "attacks": {"published@meta": {"kind": "meta", "rate": 0.05},
                              "published@nettack": {"kind": "nettack", "rate": 1.0}}},
}


@pytest.fixture
def layout(tmp_path, monkeypatch) -> Path:
    """Pro-GNN's layout of the 35-node graph, named by ``$GRB_DIST_PROGNN``; the download cache
    in ``tmp_path`` (nothing may land there); the working directory ``tmp_path/work`` holding
    the job file."""
    root = make_layout(tmp_path / "prognn")
    monkeypatch.setenv(PROGNN_ENV, str(root))
    monkeypatch.setenv("GRB_DIST_DATA", str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    (work / "job.yaml").write_text(json.dumps(JOB))  # JSON is YAML
    monkeypatch.chdir(work)
    return root


@pytest.fixture
def no_ray(monkeypatch):
    """Fail loudly if a command tries to start or join Ray."""
    def refuse(*args, **kwargs):
        raise AssertionError("Ray was started although the input is bad")

    monkeypatch.setattr(grb_dist.cluster.ray_edge, "connect", refuse)


def tree(path: Path) -> dict[str, int]:
    """Every path under ``path`` with its modification time (ns)."""
    return {str(p.relative_to(path)): p.stat().st_mtime_ns for p in sorted(path.rglob("*"))}


def sweep(*args: str):
    return runner.invoke(app, ["sweep", "--job", "job.yaml", "--no-verify", *args])


def error_line(result, *words: str) -> str:
    """The one ``error:`` line of a refused command (exit code 2), holding every word."""
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def one_line(exc: pytest.ExceptionInfo) -> str:
    assert "\n" not in str(exc.value)
    return str(exc.value)


def npy(arr: np.ndarray, shape: tuple[int, ...] | None = None) -> bytes:
    """The ``.npy`` bytes of ``arr``; ``shape``: another shape written in its header (forged)."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": np.lib.format.dtype_to_descr(arr.dtype),
                                               "fortran_order": False, "shape": shape or arr.shape})
    return buf.getvalue() + arr.tobytes()


def csr_members(adj: sp.csr_matrix) -> dict[str, bytes]:
    """The members of ``scipy.sparse.save_npz(adj)`` as ``.npy`` bytes."""
    return {"indices": npy(adj.indices), "indptr": npy(adj.indptr), "format": npy(np.array("csr")),
            "shape": npy(np.array(adj.shape)), "data": npy(adj.data)}


def write_npz(path: Path, members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", method) as z:
        for key, data in members.items():
            z.writestr(f"{key}.npy", data)
    return path


def layout_graph(root: Path):
    return load_prognn("cora", root=root)


# --------------------------------------------------------------------------- 1. content, not a name


def test_a_swapped_matrix_is_another_perturbation_and_a_run_refuses_it(layout, tmp_path):
    """A perturbation's id holds the sha256 of the files it was read from: replacing the
    matrix (by one with every edge removed) gives the published set another id, the run's
    record names the old content, and the run refuses the swapped file in one line naming it,
    both digests and how to start fresh; a fresh --out computes it as new cells."""
    spec = parse_job(JOB)
    first = prepare(spec, out=tmp_path / "run", verify=False)
    meta = next(a for a in first.cells.attacks if a.attack == "published@meta")
    nettack = next(a for a in first.cells.attacks if a.attack == "published@nettack")
    before = (layout / META).read_bytes()
    assert dict(meta.inputs) == {META: _sha256(before)}
    assert set(dict(nettack.inputs)) == {NETTACK, NODES}
    assert first.components["attacks"]["poisoning/published@meta/full"]["inputs"] == dict(meta.inputs)
    lock, locked = lock_run(first)
    try:
        open_store(locked, lock)  # the run's manifest records what each name means
    finally:
        lock.release()

    sp.save_npz(layout / META, sp.csr_matrix((N, N), dtype=np.float32))  # every edge removed
    with pytest.raises(StoreError) as exc:
        prepare(spec, out=tmp_path / "run", verify=False)
    line = one_line(exc)
    assert f"{META} changed since the run read it for attack poisoning/published@meta/full" in line
    assert f"sha256 {_sha256(before)[:12]} there, {_sha256((layout / META).read_bytes())[:12]} now" in line
    assert line.endswith("restore the file the run read, or choose another --out to start a fresh run")

    fresh = prepare(spec, out=tmp_path / "fresh", verify=False)
    again = next(a for a in fresh.cells.attacks if a.attack == "published@meta")
    assert again.perturbation_id != meta.perturbation_id  # the new content: new cells
    unchanged = next(a for a in fresh.cells.attacks if a.attack == "published@nettack")
    assert unchanged.perturbation_id == nettack.perturbation_id  # its files did not change
    clean = lambda p: sorted(c.cell_id for c in p.cells.scores if c.perturbation_id is None)  # noqa: E731
    assert clean(fresh) == clean(first)


def test_a_swapped_file_through_the_cli_is_one_line_before_ray(layout, tmp_path, no_ray):
    """The same through ``grb-dist sweep`` on a run that holds the job: one line, exit 2,
    nothing of the run changed, Ray never started (it used to say "nothing to do" on a
    finished run, or compute the missing cells from the new file under the old names)."""
    first = prepare(parse_job(JOB), out=tmp_path / "work" / "run", verify=False)
    lock, locked = lock_run(first)
    try:
        open_store(locked, lock)
    finally:
        lock.release()
    nodes = json.loads((layout / NODES).read_text())
    (layout / NODES).write_text(json.dumps({**nodes, "attacked_test_nodes": [12, 11]}))  # another target set
    before = tree(tmp_path / "work")
    error_line(sweep("--out", "run"), f"{NODES} changed since the run read it", "choose another --out")
    assert tree(tmp_path / "work") == before


def test_ids_hold_the_files_content_and_jobs_without_files_keep_theirs(layout):
    spec = parse_job(JOB)
    fp = "f" * 64
    key = ("poisoning", "published@meta", "full")
    plain = run_cells(spec, fp)
    a = run_cells(spec, fp, inputs={key: {META: "a" * 64}})
    b = run_cells(spec, fp, inputs={key: {META: "b" * 64}})
    pid = lambda p: next(c.perturbation_id for c in p.attacks if c.attack == "published@meta")  # noqa: E731
    assert len({pid(plain), pid(a), pid(b)}) == 3
    assert run_components(a)["attacks"]["poisoning/published@meta/full"]["inputs"] == {META: "a" * 64}
    other = parse_job({**JOB, "poisoning": {"attack": {"ratio_edge_mod": 0.05}, "attacks": {"dice": {}}}})
    assert [c.cell_id for c in run_cells(other, fp).scores] == \
        [c.cell_id for c in run_cells(other, fp, inputs={key: {META: "a" * 64}}).scores]


def test_a_file_changed_after_the_checks_is_never_read_as_the_checked_one(layout, tmp_path):
    """The Ray task reads the files pinned to the digests the sweep checked: a file swapped
    after the checks is one line there, not a perturbation computed from another file under
    the checked file's id."""
    prepared = prepare(parse_job(JOB), out=tmp_path / "run", verify=False)
    graph = prepared.graph
    cell = next(a for a in prepared.cells.attacks if a.attack == "published@nettack")
    np.testing.assert_array_equal(scored_nodes(graph, cell), [10, 12])
    assert attack_task(graph, cell, torch.nn.Identity()).perturbation.n_edge_flips == 2
    nodes = json.loads((layout / NODES).read_text())
    (layout / NODES).write_text(json.dumps({**nodes, "attacked_test_nodes": [12, 11]}))
    with pytest.raises(DatasetError) as exc:
        scored_nodes(graph, cell)
    assert f"{layout / NODES} changed since this sweep checked it" in one_line(exc)
    sp.save_npz(layout / NETTACK, sp.csr_matrix((N, N), dtype=np.float32))
    with pytest.raises(DatasetError) as exc:
        attack_task(graph, cell, torch.nn.Identity())
    assert f"{layout / NETTACK} changed since this sweep checked it" in one_line(exc)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- 2, 3. node lists and splits before Ray


def _nodes(layout: Path, text: str) -> None:
    (layout / NODES).write_text(text)


def _split(layout: Path, text: str) -> None:
    (layout / SPLIT).write_text(text)


TRAIN = json.dumps(list(range(5)))

HOSTILE_LISTS = [
    (_nodes, '{"attacked_test_nodes": [12, 35]}', [NODES, "names node 35, outside the graph's 35 nodes"]),
    (_nodes, '{"attacked_test_nodes": [12, -1]}', [NODES, "names node -1, outside"]),
    (_nodes, '{"attacked_test_nodes": [12, %d]}' % 2**64, [NODES, "names node 18446744073709551616, outside"]),
    (_nodes, '{"attacked_test_nodes": ' + "[" * 100_000 + "]" * 100_000 + "}", [NODES, "nests its JSON deeper"]),
    (_nodes, '{"attacked_test_nodes": [12, 1', [NODES, "is not valid JSON"]),
    (_nodes, '{"attacked_test_nodes": [12, 12]}', [NODES, "lists node 12 twice"]),
    (_nodes, '{"attacked_test_nodes": [' + "12, " * 400_000 + "12]}", [NODES, "more than the 1,050,816 of a split"]),
    (_nodes, '{"attacked_test_nodes": [12, 1.5]}', [NODES, "found 1.5"]),
    (_nodes, '{"attacked_test_nodes": [12, [13]]}', [NODES, "found a list"]),
    (_nodes, '{"attacked": [12]}', [NODES, "missing 'attacked_test_nodes'"]),
    (_split, '{"idx_train": [%d], "idx_val": [5], "idx_test": [10, 11, 12]}' % 2**64,
     [SPLIT, "'idx_train' names node 18446744073709551616"]),
    (_split, '{"idx_train": ' + "[" * 100_000 + "]" * 100_000 + ', "idx_val": [5], "idx_test": [10, 11, 12]}',
     [SPLIT, "nests its JSON deeper"]),
    (_split, '{"idx_train": %s, "idx_val": [5, 5], "idx_test": [10, 11, 12]}' % TRAIN, [SPLIT, "lists node 5 twice"]),
]


@pytest.mark.parametrize("write, text, words", HOSTILE_LISTS,
                         ids=[f"{w.__name__[1:]}-{t[:24]}-{len(t)}" for w, t, _ in HOSTILE_LISTS])
def test_a_hostile_node_list_or_split_is_one_line_before_ray(layout, tmp_path, no_ray, write, text, words):
    """Every node list the job names is read before Ray starts: an id out of range, negative
    or 2**64, 100,000-deep nesting, a malformed file, a duplicate, a list larger than any
    node list of the graph, an entry that is not an integer: one line naming the file, exit
    2, no run directory (the attacked-node list used to be read first inside the Ray task,
    after the clean model had trained and cells were written; 2**64 and deep nesting were
    tracebacks)."""
    write(layout, text)
    before = tree(tmp_path / "work")
    error_line(sweep("--out", "run"), *words)
    assert tree(tmp_path / "work") == before


def test_node_lists_are_read_in_full_and_named_exactly(layout):
    g = layout_graph(layout)
    np.testing.assert_array_equal(read_attacked_nodes(layout / NODES, N), [10, 12])
    _nodes(layout, '{"attacked_test_nodes": [12, %d]}' % 10**40)
    with pytest.raises(DatasetError) as exc:
        read_attacked_nodes(layout / NODES, N)
    assert "names node 100000000000... (41 digits), outside the graph's 35 nodes" in one_line(exc)
    _split(layout, '{"idx_train": [0, true], "idx_val": [5], "idx_test": [10]}')
    with pytest.raises(DatasetError, match="'idx_train' must be a list of integer node ids, found a boolean"):
        read_split(layout / SPLIT, g.num_nodes)
    _split(layout, '{"idx_train": ' + json.dumps(list(range(36))) + ', "idx_val": [5], "idx_test": [10]}')
    with pytest.raises(DatasetError, match="'idx_train' lists 36 nodes, more than the graph's 35"):
        read_split(layout / SPLIT, g.num_nodes)


# --------------------------------------------------------------------------- 4, 5. .npz members


def test_a_corrupted_deflate_stream_is_one_line_naming_file_and_member(layout, tmp_path, no_ray):
    """The first bytes of a member's compressed data overwritten: one line naming the file and
    the member (it was "Error -3 while decompressing data" and a 182-line traceback, exit 1)."""
    path = layout / META
    adj = sp.load_npz(path)
    sp.save_npz(path, adj, compressed=True)
    data = bytearray(path.read_bytes())
    info = zipfile.ZipFile(path).getinfo("data.npy")
    name_len, extra_len = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
    start = info.header_offset + 30 + name_len + extra_len
    data[start:start + 4] = bytes(b ^ 0xFF for b in data[start:start + 4])
    path.write_bytes(bytes(data))
    with pytest.raises(DatasetError) as exc:
        read_published(path, N)
    assert one_line(exc).startswith(f"{path}: array 'data' is damaged (its compressed data does not inflate: Error -3")
    before = tree(tmp_path / "work")
    error_line(sweep("--out", "run"), str(path), "array 'data' is damaged")
    assert tree(tmp_path / "work") == before


def zip_raw(path: Path, members: list[tuple[str, int, int, int, bytes]]) -> Path:
    """A zip archive of members given as ``(name, method, crc32, size, compressed bytes)``:
    a member's data can be a deflate stream built piece by piece (see :func:`deflated_zeros`)."""
    local, central = bytearray(), bytearray()
    for name, method, crc, size, body in members:
        offset = len(local)
        local += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(body), size,
                             len(name), 0) + name.encode() + body
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, crc, len(body), size,
                               len(name), 0, 0, 0, 0, 0, offset) + name.encode()
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), len(local), 0)
    path.write_bytes(bytes(local + central + end))
    return path


def deflated_zeros(header: bytes, zeros: int) -> tuple[int, bytes]:
    """``(crc32, raw deflate stream)`` of ``header`` followed by ``zeros`` zero bytes, built
    without deflating them all: after a full flush the compressor starts afresh, so every
    16 MiB block of zeros compresses to the same bytes, which are repeated."""
    block = bytes(1 << 24)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = [c.compress(header) + c.flush(zlib.Z_FULL_FLUSH)]
    crc = zlib.crc32(header)
    piece = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    full, rest = divmod(zeros, len(block))
    body += [piece] * full
    for _ in range(full):
        crc = zlib.crc32(block, crc)
    body.append(c.compress(bytes(rest)) + c.flush())
    return zlib.crc32(bytes(rest), crc), b"".join(body)


PEAK = """
import resource, sys
from grb_dist.core.errors import DatasetError
from grb_dist.datasets.prognn_readers import read_published
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
try:
    read_published(sys.argv[1], int(sys.argv[2]))
    print("read")
except DatasetError as exc:
    print(exc)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base)
"""


def test_a_member_inflating_to_1_28_gb_is_refused_from_the_headers(tmp_path):
    """A 1.3 MB matrix of a 2,485-node graph (Pro-GNN's cora) whose ``data`` member inflates to
    1.28 GB beside an ``indices`` of 2 entries: refused from the members' headers, before any
    array is inflated; measured in a subprocess, its resident memory stays within 100 MB of
    what importing grb-dist took (it used to unpack the member first: 1.7 GB at its peak)."""
    n, values = 2485, 320_000_000
    header = npy(np.zeros(0, np.float32), shape=(values,))
    crc, body = deflated_zeros(header, 4 * values)
    indptr = np.concatenate([[0, 1, 2], np.full(n - 2, 2)]).astype(np.int32)
    members = [(f"{k}.npy", zipfile.ZIP_STORED, zlib.crc32(b), len(b), b) for k, b in
               (("indices", npy(np.array([1, 0], np.int32))), ("indptr", npy(indptr)), ("format", npy(np.array("csr"))),
                ("shape", npy(np.array([n, n]))))]
    path = zip_raw(tmp_path / "cora_meta_adj_0.05.npz", [*members, ("data.npy", zipfile.ZIP_DEFLATED, crc,
                                                                       len(header) + 4 * values, body)])
    assert path.stat().st_size < 1_400_000 and zipfile.ZipFile(path).getinfo("data.npy").file_size > 1_280_000_000
    out = subprocess.run([sys.executable, "-c", PEAK, str(path), str(n)], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()
    said, grew = out[-2], int(out[-1])
    assert said == (f"{path}: the perturbed adjacency declares 320,000,000 values but 2 indices (from their headers: "
                    "one value per index); the file is damaged: fetch it again"), said
    assert grew < 100 << 20, grew


def test_more_entries_than_node_pairs_are_refused_before_reading(layout):
    """Lengths that agree but exceed the N(N-1) pairs of a graph without self-loops (a small
    file could otherwise make the reader hold about 1,000 times its size): damaged."""
    path = layout / "meta" / "cora_meta_adj_0.1.npz"
    k = 2000
    indptr = np.concatenate([[0], np.full(N, k)]).astype(np.int32)
    write_npz(path, {"indices": npy(np.ones(k, np.int32)), "indptr": npy(indptr), "format": npy(np.array("csr")),
                     "shape": npy(np.array([N, N])), "data": npy(np.ones(k, np.float32))})
    with pytest.raises(DatasetError) as exc:
        read_published(path, N)
    assert one_line(exc) == (f"{path}: the perturbed adjacency declares 2,000 entries, more than the 1,190 pairs of 35 "
                             "nodes without self-loops; the file is damaged: fetch it again")


# --------------------------------------------------------------------------- 6. exact messages


def test_a_damaged_24_kb_file_is_damaged_not_too_large(layout, tmp_path, no_ray):
    """An ``indices`` header forged to declare 10^9 entries in a file of a few KB: the file is
    damaged, said as such; it is not blamed on memory (it used to read "would take 29.8 GiB,
    more than half of this machine's ...; use a smaller graph")."""
    path = layout / META
    members = csr_members(sp.load_npz(path).tocsr())
    members["indices"] = npy(sp.load_npz(path).tocsr().indices, shape=(10**9,))
    write_npz(path, members)
    with pytest.raises(DatasetError) as exc:
        read_published(path, N)
    line = one_line(exc)
    assert line.startswith(f"{path}: array 'indices' declares shape (1000000000,) (4,000,000,000 bytes) but holds ")
    assert line.endswith("the file is damaged: fetch it again") and "would take" not in line and "memory" not in line
    error_line(sweep("--out", "run"), "declares shape (1000000000,)", "the file is damaged")


def forge_size(path: Path, member: str, size: int) -> zipfile.ZipInfo:
    """Write ``size`` as ``member``'s uncompressed size in ``path``'s zip directory (what
    readers trust); its entry as it was."""
    info = zipfile.ZipFile(path).getinfo(member)
    data = bytearray(path.read_bytes())
    at = next(i for i in range(len(data)) if data[i:i + 4] == b"PK\x01\x02"
              and data[i + 46:i + 46 + len(member)] == member.encode())
    struct.pack_into("<I", data, at + 24, size)
    path.write_bytes(bytes(data))
    return info


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_forged_zip_sizes_are_damage(layout, method):
    """A member whose zip entry declares more than its bytes can hold (stored: more than it
    stores; deflated: beyond deflate's 1,032 to 1) is damaged, said before any size is judged."""
    path = write_npz(layout / META, csr_members(sp.load_npz(layout / META).tocsr()), method)
    info = forge_size(path, "data.npy", zipfile.ZipFile(path).getinfo("data.npy").compress_size * 2000)
    with pytest.raises(DatasetError) as exc:
        read_published(path, N)
    line = one_line(exc)
    said = ("is stored uncompressed in" if method == zipfile.ZIP_STORED else
            f"bytes inflated from {info.compress_size:,} compressed, more than deflate can hold")
    assert line.startswith(f"{path}: array 'data' ") and said in line and line.endswith("the file is damaged: fetch it again")


def test_an_entry_stored_twice_is_a_duplicate_not_a_weight(layout):
    path = layout / META
    dup = sp.csr_matrix((np.ones(4, np.float32), np.array([1, 1, 0, 0]), np.concatenate([[0, 2], np.full(N - 1, 4)])),
                        shape=(N, N))
    sp.save_npz(path, dup)
    with pytest.raises(DatasetError) as exc:
        read_published(path, N)
    line = one_line(exc)
    assert "stores the entry (0, 1) more than once (2 entries stored twice or more); the file is damaged" in line
    assert "weight" not in line


def test_a_rate_never_published_is_named_as_such(layout):
    g = layout_graph(layout)
    attack = build_attack("published", {"seed": 0, "kind": "meta", "rate": 0.07, "root": str(layout)}, "poisoning")
    with pytest.raises(DatasetError) as exc:
        attack.budget(g, 1)
    line = one_line(exc)
    assert ("has no meta/cora_meta_adj_0.07.npz, and Pro-GNN published no meta set at rate 0.07 (only 0.05, 0.1, "
            "0.15, 0.2, 0.25); pick one that was published, or place your own file there") in line
    assert "http" not in line  # no address of a file that was never published
    nettack = build_attack("published", {"seed": 0, "kind": "nettack", "name": "cora_ml", "root": str(layout)},
                           "poisoning")
    with pytest.raises(DatasetError, match=r"Pro-GNN published no nettack set of 'cora_ml' \(only of cora, citeseer"):
        nettack.budget(g, 1)


def test_an_empty_grb_dist_prognn_is_refused_not_a_download(layout, tmp_path, monkeypatch, no_ray):
    monkeypatch.setenv(PROGNN_ENV, "")
    with pytest.raises(DatasetError) as exc:
        prognn_folder()
    assert one_line(exc).startswith("$GRB_DIST_PROGNN is set but empty; set it to the folder")
    error_line(sweep("--out", "run"), "$GRB_DIST_PROGNN is set but empty", "or unset it")
    assert not (tmp_path / "cache").exists()  # nothing was downloaded
    assert not (tmp_path / "work" / "run").exists()


# --------------------------------------------------------------------------- the real published files


def test_the_record_of_a_published_set_is_its_published_checksum(prognn_dir, monkeypatch):
    """The digests a run records of Pro-GNN's files are the SHA-256 of the published files,
    which anyone can check against the public ones."""
    g = load_prognn("cora", root=prognn_dir)
    for params, files in (({"kind": "meta", "rate": 0.05}, [META]),
                          ({"kind": "nettack", "rate": 1.0}, [NETTACK, NODES])):
        attack = build_attack("published", {"seed": 0, "root": str(prognn_dir), **params}, "poisoning")
        assert attack.input_digests(g) == {f: PROGNN_CHECKSUMS[f][1] for f in files}
