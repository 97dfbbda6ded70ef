"""Input validation without Ray: job values and their bounds, every section's keys, names,
job size, labels and splits, damaged dataset files, download verification, memory estimates."""

from __future__ import annotations

import http.server
import shutil
import socket
import threading
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from grb_dist.core.jobfile import MAX_JOB_BYTES
from grb_dist.core.paths import check_output_file
from grb_dist.core.resources import check_memory, check_ray_address, format_bytes
from grb_dist.models.memory import GraphShape, estimate_memory
from grb_dist.datasets import CATALOG, load_dataset, load_grb_dir, load_npz_graph
from grb_dist.core.fileio import file_sha256
from grb_dist.datasets.grb import GRB_FILES, download_grb, verify_dataset_dir
from grb_dist.datasets.split import grb_split
from grb_dist.core.errors import ConfigError, DatasetError, GrbDistError
from grb_dist.core.graph import Graph, canonical_edges
from grb_dist.sweep.job import default_job_path, jobs_dir, load_job, parse_job
from grb_dist.sweep.overrides import apply_overrides
from grb_dist.sweep.resolve import resolve

from helpers import path_graph, small


# --------------------------------------------------------------------------- job values


@pytest.mark.parametrize("train, word", [
    ({"epochs": -5}, "train.epochs"),
    ({"epochs": 0}, "train.epochs"),
    ({"lr": -1}, "train.lr"),
    ({"lr": 0}, "train.lr"),
    ({"lr": float("inf")}, "train.lr"),
    ({"weight_decay": -0.1}, "train.weight_decay"),
    ({"patience": 0}, "train.patience"),
])
def test_train_section_checked_when_the_job_is_parsed(train, word):
    with pytest.raises(ConfigError, match=word):
        parse_job(small(train=train))


@pytest.mark.parametrize("changes, word", [
    ({"seed": -1}, "seed"),
    ({"seed": 2**63}, "seed"),
    ({"seed": 2**64 + 5}, "seed"),
    ({"seed": 2**63 - 10}, "derived"),  # the attack seed of repeat 1 would pass 2**63
    ({"repeats": 10**6}, "repeats"),
])
def test_seed_range_and_repeats(changes, word):
    with pytest.raises(ConfigError, match=word):
        parse_job(small(**changes))
    assert parse_job(small(seed=2**63 - 1 - 2001 - 1)).seed == 2**63 - 2003  # the largest seed 2 repeats allow


@pytest.mark.parametrize("changes, word", [
    ({"n_inject": 10**9}, "n_inject"),
    ({"n_inject": 10**30}, "n_inject"),  # beyond int64
    ({"edges_per_node": 10**7}, "edges_per_node"),
    ({"steps": 10**9}, "steps"),
])
def test_budget_upper_bounds_from_overrides(changes, word):
    spec = apply_overrides(parse_job(small()), **changes)  # the CLI's --n-inject / --edges-per-node / --steps
    with pytest.raises(ConfigError, match=word):
        resolve(spec)


def test_budget_bound_in_every_section():
    for job in (small(attack={"n_inject": 10**8}), small(budgets={"easy": {"n_inject": 10**8}}),
                small(attacks={"fgsm": {"n_inject": 10**8}})):
        with pytest.raises(ConfigError, match="n_inject"):
            resolve(parse_job(job))


def test_model_sizes_bounded_before_any_model_is_built():
    with pytest.raises(ConfigError, match="hidden size"):
        resolve(parse_job(small(models={"gcn": {"hidden_sizes": [10**6]}})))
    with pytest.raises(ConfigError, match="heads"):
        resolve(parse_job(small(models={"gat": {"heads": 1000}}, defenses=["gat"])))


def test_plan_size_bounded():
    job = small(defenses=["gcn", "mlp", "gat", "sage", "sgc", "appnp", "gin", "tagcn", "gcn_ln", "gat_ln"], difficulties=["easy", "medium", "hard", "full"],
                attacks={"fgsm": {}, "rnd": {}, "pgd": {}}, repeats=10_000)
    with pytest.raises(ConfigError, match="cells"):
        resolve(parse_job(job))


@pytest.mark.parametrize("changes, word", [
    ({"models": {"gcn": {"hidden_sizes": [8]}, "gin": {"hiden_sizes": [8]}}}, "hiden_sizes"),  # gin is not swept
    ({"models": {"nomodel": {}}}, "nomodel"),
    ({"budgets": {"full": {"n_inject": 8}, "hard": {"n_injcet": 3}}}, "n_injcet"),  # hard is not run
    ({"adversarial_training": {"n_inject": 5, "edges_per_node": 3, "stepz": 2}}, "stepz"),  # no *_at defense
    ({"models": {"gcn": {"hidden_sizes": [8], "train": {"lr": -1}}}}, "lr"),
])
def test_unknown_keys_rejected_in_unused_sections(changes, word):
    spec = parse_job(small(**changes))
    with pytest.raises(GrbDistError, match=word):
        resolve(spec)


def test_shipped_jobs_still_validate():
    for path in sorted(jobs_dir().glob("*.yaml")):
        resolve(load_job(path))


# --------------------------------------------------------------------------- names


def test_a_dataset_name_never_reaches_outside_the_job_directory(tmp_path, monkeypatch):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    shutil.copy(jobs_dir() / "csbm.yaml", jobs / "csbm.yaml")
    (tmp_path / "cluster.yaml").write_text("dataset: csbm\nattacks: {rnd: {}}\n")  # jobs/../cluster.yaml
    monkeypatch.setenv("GRB_DIST_JOBS", str(jobs))
    monkeypatch.chdir(tmp_path / "jobs")
    assert default_job_path("../cluster") == jobs / "csbm.yaml"  # a path runs the default job
    assert default_job_path("csbm") == jobs / "csbm.yaml"


@pytest.mark.parametrize("dataset", ["..", ".", "../", "data/..", "/", "grb cora", "grb-cora\nx", ""])
def test_dataset_must_be_a_name_or_a_path_ending_in_a_name(dataset):
    with pytest.raises(ConfigError, match="dataset"):
        parse_job(small(dataset=dataset))


@pytest.mark.parametrize("dataset", ["csbm", "grb-cora", "CSBM_GRB_Aminer", "../data/cora", "./cora", "cora.npz", "/abs/cora"])
def test_dataset_names_and_paths_accepted(dataset):
    assert parse_job(small(dataset=dataset)).dataset == dataset


# --------------------------------------------------------------------------- job files


LAUGHS = """dataset: csbm
attacks: {fgsm: {}}
adversarial_training:
  a: &a [xxxxxxxx, xxxxxxxx, xxxxxxxx, xxxxxxxx, xxxxxxxx, xxxxxxxx, xxxxxxxx, xxxxxxxx, xxxxxxxx, xxxxxxxx]
  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
  e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
  f: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
"""


def test_alias_expansion_is_bounded(tmp_path):
    f = tmp_path / "laughs.yaml"
    f.write_text(LAUGHS)
    assert f.stat().st_size < 2048
    with pytest.raises(ConfigError, match="expands"):
        load_job(f)


def test_recursive_alias_and_deep_nesting(tmp_path):
    f = tmp_path / "loop.yaml"
    f.write_text("dataset: csbm\nattacks: {fgsm: {}}\nmodels: &m {gcn: *m}\n")
    with pytest.raises(ConfigError, match="expands"):
        load_job(f)
    f.write_text("dataset: csbm\nattacks: " + "[" * 20000 + "]" * 20000 + "\n")
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_job(f)


def test_job_file_size_bounded(tmp_path):
    f = tmp_path / "big.yaml"
    f.write_text("dataset: csbm\nattacks: {fgsm: {}}\n" + "# padding\n" * (MAX_JOB_BYTES // 10 + 1))
    with pytest.raises(ConfigError, match="larger than"):
        load_job(f)


# --------------------------------------------------------------------------- labels and splits


def test_a_stray_label_does_not_make_a_million_classes():
    g = path_graph(30)
    labels = g.labels.copy()
    labels[0] = 10**6
    with pytest.raises(DatasetError, match="dense"):
        Graph(g.features, g.edge_index, labels, g.split, "stray").validate()


def test_labels_dense_and_at_least_two_classes():
    g = path_graph(30)
    gap = np.where(g.labels == 1, 3, 0)  # classes 0 and 3: 1 and 2 are empty
    with pytest.raises(DatasetError, match="dense"):
        Graph(g.features, g.edge_index, gap, g.split, "gap").validate()
    with pytest.raises(DatasetError, match="at least 2"):
        Graph(g.features, g.edge_index, np.zeros_like(g.labels), g.split, "one").validate()
    g.validate()  # the intact graph passes


@pytest.mark.parametrize("change, word", [
    (lambda s: {**s, "train": np.concatenate([s["train"], s["test_hard"][:3]])}, "share"),
    (lambda s: {**s, "val": np.concatenate([s["val"], s["train"][:1]])}, "share"),
    (lambda s: {**s, "test_easy": np.concatenate([s["test_easy"], s["test_hard"][:1]])}, "difficult"),
    (lambda s: {**s, "train": np.concatenate([s["train"], s["train"][:1]])}, "twice"),
    (lambda s: {**s, "val": np.array([0.5, 1.5])}, "integer"),
    (lambda s: {**s, "train": np.array([-1, 2])}, "outside"),
])
def test_split_disjoint_and_inside_the_graph(change, word):
    g = path_graph(60)
    bad = change({k: v.copy() for k, v in g.split.items()})
    with pytest.raises(DatasetError, match=word):
        Graph(g.features, g.edge_index, g.labels, bad, "bad").validate()


@pytest.fixture
def cora_copy(cora_legacy, tmp_path):
    d = tmp_path / "cora"
    shutil.copytree(cora_legacy, d)
    for f in d.iterdir():
        f.chmod(0o644)
    return d


def test_grb_split_with_training_on_test_nodes_is_refused(cora_legacy, cora_copy):
    idx = dict(np.load(cora_legacy / "index.npz"))
    idx["index_train"] = np.concatenate([idx["index_train"], idx["index_test_hard"][:5]])
    np.savez(cora_copy / "index.npz", **idx)
    with pytest.raises(DatasetError, match="inductive"):
        load_grb_dir(cora_copy)


# --------------------------------------------------------------------------- damaged dataset files


def _save_csr(path: Path, data, indices, indptr, shape) -> None:
    np.savez(path, data=np.asarray(data), indices=np.asarray(indices), indptr=np.asarray(indptr),
             shape=np.asarray(shape), format=np.array("csr"))


def test_adjacency_column_index_beyond_n(cora_legacy, cora_copy):
    a = sp.load_npz(cora_legacy / "adj.npz").tocsr()
    indices = a.indices.copy()
    indices[5] = a.shape[0] + 3
    _save_csr(cora_copy / "adj.npz", a.data, indices, a.indptr, a.shape)
    with pytest.raises(DatasetError, match=r"column index 2711 outside \[0, 2708\)"):
        load_grb_dir(cora_copy)


def test_adjacency_indptr_inconsistent(cora_legacy, cora_copy):
    a = sp.load_npz(cora_legacy / "adj.npz").tocsr()
    indptr = a.indptr.copy()
    indptr[10], indptr[11] = indptr[11] + 5, indptr[10]
    _save_csr(cora_copy / "adj.npz", a.data, a.indices, indptr, a.shape)
    with pytest.raises(DatasetError, match="indptr"):
        load_grb_dir(cora_copy)


def test_npz_report_counts_are_exact_and_non_negative(npz_dir, tmp_path):
    # rows 0..4 of a CSR matrix: 0->1, 1->2, 2->3 stored twice, 3->3 (a self-loop), 4->0: every
    # edge in one direction only, as the Nettack files store them
    indptr, indices = np.array([0, 1, 2, 4, 5, 6]), np.array([1, 2, 3, 3, 3, 0])
    np.savez(tmp_path / "g.npz", adj_data=np.ones(6, np.float32), adj_indices=indices, adj_indptr=indptr,
             adj_shape=np.array([5, 5]), labels=np.array([0, 1, 0, 1, 0]))
    _, r = load_npz_graph(tmp_path / "g.npz")
    assert r["directed_entries"] == 6
    assert r["self_loops_removed"] == 1 and r["duplicate_entries_removed"] == 1
    assert r["undirected_edges"] == 4 and r["reverse_edges_added"] == 4
    for name in ("cora", "citeseer", "polblogs", "cora_ml"):
        _, r = load_npz_graph(npz_dir / f"{name}.npz")
        assert all(v >= 0 for v in r.values()), (name, r)
        distinct = r["directed_entries"] - r["self_loops_removed"] - r["duplicate_entries_removed"]
        assert 2 * r["undirected_edges"] == distinct + r["reverse_edges_added"], (name, r)


# --------------------------------------------------------------------------- downloads


class _Files(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def serve(tmp_path):
    """Serve a directory over HTTP; yields a function dir -> base URL."""
    servers = []

    def start(directory: Path) -> str:
        handler = lambda *a, **k: _Files(*a, directory=str(directory), **k)  # noqa: E731
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()


def _official(directory: Path) -> dict[str, tuple[int, str]]:
    return {f: ((directory / f).stat().st_size, file_sha256(directory / f)) for f in GRB_FILES}


def test_download_verified_by_size_and_sha256(cora_legacy, tmp_path, serve):
    checksums = _official(cora_legacy)
    source = tmp_path / "mirror"
    shutil.copytree(cora_legacy, source)
    x = np.load(cora_legacy / "features.npz")["data"]
    np.savez(source / "features.npz", data=np.full_like(x, 7.0))  # a tampered file that parses
    url = serve(source)
    urls = {f: f"{url}/{f}" for f in GRB_FILES}
    with pytest.raises(DatasetError, match="--no-verify") as exc:
        download_grb("grb-test", urls, tmp_path / "cache", checksums=checksums)
    assert "features.npz" in str(exc.value)
    assert not (tmp_path / "cache" / "grb-test" / "features.npz").exists()
    assert not list((tmp_path / "cache" / "grb-test").glob("*.part"))
    # the escape hatch: parse checks only
    target = download_grb("grb-test", urls, tmp_path / "cache", checksums=checksums, verify=False)
    assert float(np.load(target / "features.npz")["data"].max()) == 7.0
    # the intact files pass, and a cached copy is compared again
    good = download_grb("grb-good", {f: f"{serve(cora_legacy)}/{f}" for f in GRB_FILES}, tmp_path / "cache",
                        checksums=checksums)
    verify_dataset_dir(good, checksums, "grb-good")
    with pytest.raises(DatasetError, match="bytes"):
        verify_dataset_dir(target, checksums, "grb-test")
    data = bytearray((good / "labels.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other content
    (good / "labels.npz").write_bytes(bytes(data))
    with pytest.raises(DatasetError, match="SHA-256.*--no-verify"):
        verify_dataset_dir(good, checksums, "grb-good")


def test_download_size_mismatch(cora_legacy, tmp_path, serve):
    checksums = {f: (size + 1, sha) for f, (size, sha) in _official(cora_legacy).items()}
    urls = {f: f"{serve(cora_legacy)}/{f}" for f in GRB_FILES}
    with pytest.raises(DatasetError, match="bytes"):
        download_grb("grb-test", urls, tmp_path / "cache", checksums=checksums)


def test_non_npz_download_is_refused_without_pickle_advice(cora_legacy, tmp_path, serve):
    source = tmp_path / "mirror"
    shutil.copytree(cora_legacy, source)
    (source / "labels.npz").write_text("<!DOCTYPE html><html><body>quota exceeded</body></html>")
    urls = {f: f"{serve(source)}/{f}" for f in GRB_FILES}
    with pytest.raises(DatasetError) as exc:
        download_grb("grb-html", urls, tmp_path / "cache")
    assert "labels.npz" in str(exc.value) and "HTML" in str(exc.value)
    assert "pickle" not in str(exc.value)
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    shutil.copy(tmp_path / "obj.npy", tmp_path / "obj.npz")  # an .npy pickle under an .npz name
    with pytest.raises(DatasetError) as exc:
        load_npz_graph(tmp_path / "obj.npz")
    assert "pickle" not in str(exc.value)


def test_offline_failure_leaves_no_empty_cache_directory(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    urls = {f: f"http://127.0.0.1:{port}/{f}" for f in GRB_FILES}
    cache = tmp_path / "fresh" / "cache"
    with pytest.raises(DatasetError, match="by hand"):
        download_grb("grb-x", urls, cache, timeout=2)
    assert not (tmp_path / "fresh").exists()
    with pytest.raises(DatasetError):
        load_dataset("grb-citeseer", data_dir=cache)  # no source known: nothing created either
    assert not (tmp_path / "fresh").exists()


def test_files_of_another_release_are_not_the_catalogue_dataset(cora_legacy, tmp_path):
    """The early GRB release of Cora placed where grb-cora belongs: refused (2,708 x 1,433 is
    not grb-cora's 2,680 x 302) unless --no-verify."""
    shutil.copytree(cora_legacy, tmp_path / "grb-cora")
    with pytest.raises(DatasetError, match="not the official grb-cora.*--no-verify"):
        load_dataset("grb-cora", data_dir=tmp_path)
    g = load_dataset("grb-cora", data_dir=tmp_path, verify=False)
    assert g.num_nodes == 2708


def test_catalogue_checksums_are_well_formed():
    for name in CATALOG:
        for fname, (size, sha) in CATALOG.get(name).checksums.items():
            assert fname in GRB_FILES and size > 0 and len(sha) == 64 and int(sha, 16) >= 0


# --------------------------------------------------------------------------- places, addresses, memory


@pytest.mark.parametrize("address", ["host:notaport", "host:", ":6379", "host:70000", "host:0", "ray://host:x", "a b:1"])
def test_malformed_ray_addresses(address):
    with pytest.raises(ConfigError, match="host:port"):
        check_ray_address(address)


@pytest.mark.parametrize("address", [None, "auto", "local", "10.0.0.1:6379", "ray://head:10001", "[::1]:6379"])
def test_wellformed_ray_addresses(address):
    assert check_ray_address(address) == address


def test_output_file_checks(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        check_output_file(tmp_path / "missing" / "board.md")
    with pytest.raises(ConfigError, match="is a directory"):
        check_output_file(tmp_path)
    assert check_output_file(tmp_path / "board.md") == tmp_path / "board.md"


AMINER = GraphShape(num_nodes=659_574, num_edges=2_878_577, num_features=100, num_classes=18,
                    n_train=395_744, n_val=65_958, targets={"easy": 65_957, "hard": 65_957, "full": 197_871})


def test_memory_estimate_is_a_lower_bound_of_measured_peaks():
    # measured (README, bench/training/foundation.py): GCN [128, 128, 128] training at the
    # grb-aminer shape peaks at 3.2 GB RSS; FGSM 1500 x 100 at 4.0 GB
    tasks = estimate_memory(AMINER, [("gcn", [128, 128, 128], None)], [("fgsm/gcn", "full", 1500, 100, [128, 128, 128])])
    train = next(t for t in tasks if t.task.startswith("training gcn"))
    attack = next(t for t in tasks if t.task.startswith("attack"))
    assert 1.0e9 < train.bytes < 3.2e9
    assert 0.3e9 < attack.bytes < 4.0e9


def test_memory_check_names_the_largest_task():
    tasks = estimate_memory(AMINER, [("gcn", [128], None), ("wide", [8192, 8192], None)], [])
    with pytest.raises(ConfigError, match=r"training wide .* needs at least .* but this machine has 8\.0 GiB"):
        check_memory(tasks, 8 << 30, "this machine")
    check_memory(tasks, 1 << 40, "this machine")
    assert format_bytes(3 * 2**30) == "3.0 GiB"
    # injected nodes count: a huge injection dominates
    big = estimate_memory(AMINER, [("gcn", [64], None)], [("rnd/gcn", "full", 5_000_000, 100, [64])], 5_000_000)
    assert big[0].task.startswith("attack rnd/gcn") and big[0].bytes > 8 * 5_000_000 * 100 * 4


def test_canonical_edges_and_sorted_unique_match_numpy():
    from grb_dist.core.graph import sorted_unique

    rng = np.random.default_rng(3)
    for n, m in ((2, 3), (50, 400), (3000, 20000)):
        src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
        ei, counts = canonical_edges(src, dst, n)
        keep = src != dst
        und = np.unique(np.minimum(src, dst)[keep] * n + np.maximum(src, dst)[keep])
        ref = np.concatenate([np.stack([und // n, und % n]), np.stack([und % n, und // n])], axis=1)
        ref = ref[:, np.lexsort((ref[1], ref[0]))]
        np.testing.assert_array_equal(ei, ref)
        assert counts == {"input_entries": m, "self_loops_removed": int((~keep).sum()), "undirected_edges": und.size}
        np.testing.assert_array_equal(sorted_unique(src), np.unique(src))


def test_unwritable_cache_is_one_error(tmp_path):
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(DatasetError, match="cannot create the dataset cache"):
        download_grb("grb-x", {}, tmp_path / "a-file" / "cache")


def test_forged_array_header_is_refused_before_allocation(tmp_path):
    """An .npy member whose header declares 10**12 rows: refused from the header, nothing allocated."""
    import zipfile

    header = {"descr": "<f4", "fortran_order": False, "shape": (10**12, 100)}
    member = tmp_path / "data.npy"
    with open(member, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        fh.write(b"\0" * 64)
    with zipfile.ZipFile(tmp_path / "features.npz", "w") as z:
        z.write(member, "data.npy")
    from grb_dist.datasets.members import open_npz, read_array

    with open_npz(tmp_path / "features.npz") as npz, pytest.raises(DatasetError, match="declares shape"):
        read_array(npz, "data", tmp_path / "features.npz")


# ----------------------------------------------------------------------------- job documents


def test_job_documents_refuse_fifos_duplicate_keys_and_alias_bombs(tmp_path):
    """One loader for the sweep's and the study's job files: a FIFO is refused before it is
    opened (reading it would block), a key given twice is an error (YAML keeps the last one
    silently), and the alias-expansion bound holds for study jobs too."""
    import os

    from grb_dist.core.jobfile import load_job_document
    from grb_dist.semantics.spec import load_spec
    from grb_dist.sweep.job import load_job

    fifo = tmp_path / "job.fifo"
    os.mkfifo(fifo)
    for load in (load_job, load_spec):
        with pytest.raises(ConfigError, match="not a regular file"):
            load(fifo)
    twice = tmp_path / "twice.yaml"
    twice.write_text("dataset: csbm\nrepeats: 1\nrepeats: 3\n")
    with pytest.raises(ConfigError, match="'repeats' is given twice"):
        load_job(twice)
    study = tmp_path / "study.yaml"
    study.write_text("nodes: 10\nnodes: 20\n")
    with pytest.raises(ConfigError, match="given twice"):
        load_spec(study)
    bomb = tmp_path / "bomb.yaml"
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]"
              for i in range(1, 9)]
    bomb.write_text("\n".join(lines) + "\nbudgets: *a8\n")
    for load in (load_job_document, load_spec):
        with pytest.raises(ConfigError, match="too large|1 MiB|expand"):
            load(bomb)
