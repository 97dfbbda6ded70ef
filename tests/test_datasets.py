import http.server
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from grb_dist.datasets import CATALOG, load_dataset, load_grb_dir, load_npz_graph, normalize_features
from grb_dist.datasets.grb import GRB_FILES, download_grb
from grb_dist.datasets.split import grb_split
from grb_dist.core.errors import ConfigError, DatasetError, UnknownNameError


def test_cora_legacy_loads_with_official_split(cora_legacy):
    g = load_grb_dir(cora_legacy)
    assert (g.num_nodes, g.num_features, g.num_classes) == (2708, 1433, 7)
    assert g.num_edges == 5278
    assert {k: v.size for k, v in g.split.items()} == {
        "train": 1624, "val": 274, "test_easy": 270, "test_medium": 270, "test_hard": 270, "test_full": 810,
    }
    deg = g.degrees()
    means = [deg[g.split[f"test_{d}"]].mean() for d in ("easy", "medium", "hard")]
    assert means[0] < means[1] < means[2]


@pytest.mark.parametrize("name, nodes, classes", [("cora", 2708, 7), ("citeseer", 3312, 6), ("polblogs", 1490, 2), ("cora_ml", 2995, 7)])
def test_npz_conventions(npz_dir, name, nodes, classes):
    g, report = load_npz_graph(npz_dir / f"{name}.npz")
    assert g.num_nodes == nodes and g.num_classes == classes
    ei = g.edge_index
    assert (ei[0] != ei[1]).all(), "self-loops must be removed"
    keys = ei[0] * nodes + ei[1]
    assert np.unique(keys).size == keys.size, "no duplicate edges"
    rev = np.sort(ei[1] * nodes + ei[0])
    assert np.array_equal(np.sort(keys), rev), "edges must be symmetric"
    assert report["undirected_edges"] == g.num_edges


def test_load_dataset_splits_npz_deterministically(npz_dir):
    a = load_dataset(npz_dir / "cora.npz", seed=3)
    b = load_dataset(npz_dir / "cora.npz", seed=3)
    c = load_dataset(npz_dir / "cora.npz", seed=4)
    for k in a.split:
        np.testing.assert_array_equal(a.split[k], b.split[k])
    assert not np.array_equal(a.split["train"], c.split["train"])
    assert a.features.min() >= -1 and a.features.max() <= 1


def test_grb_split_sizes_disjoint_and_degree_ordered():
    rng = np.random.default_rng(0)
    deg = rng.poisson(5, size=1000) + rng.integers(0, 3, size=1000) * 10
    s = grb_split(deg, seed=0)
    n = 1000
    assert s["test_easy"].size == s["test_medium"].size == s["test_hard"].size == 100
    assert s["train"].size == 600 and s["val"].size == 100
    allidx = np.concatenate([s["train"], s["val"], s["test_full"]])
    assert np.unique(allidx).size == n == allidx.size
    np.testing.assert_array_equal(np.sort(np.concatenate([s["test_easy"], s["test_medium"], s["test_hard"]])), s["test_full"])
    m = [deg[s[f"test_{d}"]].mean() for d in ("easy", "medium", "hard")]
    assert m[0] < m[1] < m[2]
    # the 5% extremes never become test nodes
    order = np.argsort(deg, kind="stable")
    assert deg[s["test_full"]].max() <= deg[order[int(0.95 * n)]]
    s2 = grb_split(deg, seed=0)
    for k in s:
        np.testing.assert_array_equal(s[k], s2[k])


@pytest.mark.parametrize("n", [2708, 2995, 3312, 1490, 2680, 89_250, 20, 999])
def test_grb_split_sizes_follow_grbs_truncating_formula(n):
    """Per band int(0.1 N) test nodes and int(0.6 N) training nodes, truncated as GRB's code
    computes them (rounding gave 271 and 1,625 on Cora's 2,708 nodes, where GRB's official
    split holds 270 per band and 1,624)."""
    s = grb_split(np.arange(n) % 17, seed=1)
    assert s["test_easy"].size == s["test_medium"].size == s["test_hard"].size == int(n * 0.1)
    assert s["train"].size == int(n * 0.6) and s["val"].size == n - int(n * 0.6) - 3 * int(n * 0.1)


def test_a_resplit_cora_has_the_official_splits_sizes(cora_legacy):
    g = load_grb_dir(cora_legacy)
    official = {k: v.size for k, v in g.split.items()}
    mine = {k: v.size for k, v in grb_split(g.degrees(), seed=0).items()}
    assert mine == official


def test_grb_split_rejects_tiny_graph():
    with pytest.raises(DatasetError, match="at least"):
        grb_split(np.ones(5), seed=0)


def test_normalisations():
    x = np.random.default_rng(0).normal(3, 2, size=(50, 4)).astype(np.float32)
    a = normalize_features(x, "arctan")
    assert a.dtype == np.float32 and np.abs(a).max() < 1
    t = normalize_features(x, "tanh")
    assert np.abs(t).max() < 1
    s = normalize_features(x, "standardize")
    np.testing.assert_allclose(s.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(s.std(0), 1, atol=1e-4)
    np.testing.assert_array_equal(normalize_features(x, "none"), x)
    with pytest.raises(ConfigError, match="choose one of"):
        normalize_features(x, "l2")


def test_unknown_dataset_lists_catalogue(tmp_path):
    with pytest.raises(UnknownNameError, match="grb-aminer"):
        load_dataset("grb-amnier")
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset(tmp_path / "nowhere" / "cora.npz")


def test_catalogue_twins_match_official_sizes():
    for name in ("grb-cora", "grb-citeseer", "grb-flickr", "grb-reddit", "grb-aminer"):
        real, twin = CATALOG.get(name), CATALOG.get(f"csbm-{name}")
        assert (twin.nodes, twin.edges, twin.features, twin.classes) == (real.nodes, real.edges, real.features, real.classes)
    a = CATALOG.get("csbm-grb-aminer")
    assert (a.nodes, a.features, a.classes) == (659574, 100, 18)


# --- bad GRB directories ------------------------------------------------------------

@pytest.fixture
def cora_copy(cora_legacy, tmp_path):
    d = tmp_path / "cora"
    shutil.copytree(cora_legacy, d)
    return d


def test_missing_file(cora_copy):
    (cora_copy / "labels.npz").unlink()
    with pytest.raises(DatasetError, match="missing labels.npz"):
        load_grb_dir(cora_copy)


def test_truncated_file(cora_copy):
    p = cora_copy / "features.npz"
    p.write_bytes(p.read_bytes()[:1000])
    with pytest.raises(DatasetError, match="truncated"):
        load_grb_dir(cora_copy)


def test_wrong_shapes(cora_copy):
    np.savez(cora_copy / "labels.npz", data=np.zeros(10, np.int64))
    with pytest.raises(DatasetError, match="labels must have shape"):
        load_grb_dir(cora_copy)
    np.savez(cora_copy / "labels.npz", data=np.zeros(2708, np.int64))
    np.savez(cora_copy / "features.npz", data=np.zeros((100, 3), np.float32))
    with pytest.raises(DatasetError, match="do not belong together"):
        load_grb_dir(cora_copy)


def test_nan_features_and_label_range(cora_legacy, cora_copy):
    x = np.load(cora_legacy / "features.npz")["data"].copy()
    x[3, 3] = np.inf
    np.savez(cora_copy / "features.npz", data=x)
    with pytest.raises(DatasetError, match="NaN or inf"):
        load_grb_dir(cora_copy)


def test_index_out_of_range_and_empty_split(cora_legacy, cora_copy):
    idx = dict(np.load(cora_legacy / "index.npz"))
    idx["index_val"] = np.array([99999])
    np.savez(cora_copy / "index.npz", **idx)
    with pytest.raises(DatasetError, match="outside"):
        load_grb_dir(cora_copy)
    idx["index_val"] = np.array([], np.int64)
    np.savez(cora_copy / "index.npz", **idx)
    with pytest.raises(DatasetError, match="empty"):
        load_grb_dir(cora_copy)


def test_pickled_arrays_are_refused(tmp_path):
    np.savez(tmp_path / "x.npz", adj_data=np.array([object()], dtype=object))
    with pytest.raises(DatasetError, match="pickle|malformed|missing"):
        load_npz_graph(tmp_path / "x.npz")


# --- download ----------------------------------------------------------------------

class _RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with HTTP range support, counting the bytes it serves."""

    served = 0

    def log_message(self, *args):
        pass

    def do_GET(self):
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        start = 0
        rng = self.headers.get("Range")
        if rng:
            start = int(rng.split("=")[1].split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        type(self).served += len(body)  # counted before sending: the client may finish first
        self.wfile.write(body)


@pytest.fixture
def file_server(cora_legacy):
    handler = lambda *a, **k: _RangeHandler(*a, directory=str(cora_legacy), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _RangeHandler.served = 0
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_download_caches_atomically_and_resumes(cora_legacy, tmp_path, file_server):
    urls = {f: f"{file_server}/{f}" for f in GRB_FILES}
    cache = tmp_path / "cache"
    part = cache / "grb-test" / "features.npz.part"
    part.parent.mkdir(parents=True)
    full = (cora_legacy / "features.npz").read_bytes()
    part.write_bytes(full[: len(full) // 2])  # an interrupted earlier attempt
    target = download_grb("grb-test", urls, cache)
    assert sorted(p.name for p in target.iterdir()) == sorted(GRB_FILES)
    assert (target / "features.npz").read_bytes() == full
    total = sum((cora_legacy / f).stat().st_size for f in GRB_FILES)
    assert _RangeHandler.served == total - len(full) // 2, "the partial file must be resumed, not re-fetched"
    g = load_grb_dir(target)
    assert g.num_nodes == 2708


def test_download_rejects_corrupt_source_and_leaves_nothing(tmp_path, file_server):
    urls = {f: f"{file_server}/{f}" for f in GRB_FILES}
    urls["index.npz"] = f"{file_server}/labels.npz"  # a valid .npz without the index keys
    with pytest.raises(DatasetError, match="index_train"):
        download_grb("grb-bad", urls, tmp_path)
    left = sorted(p.name for p in (tmp_path / "grb-bad").iterdir())
    assert "index.npz" not in left and not any(n.endswith(".part") for n in left)


def test_unreachable_source_says_where_to_put_files(tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    urls = {f: f"http://127.0.0.1:{port}/{f}" for f in GRB_FILES}
    with pytest.raises(DatasetError, match="by hand into"):
        download_grb("grb-x", urls, tmp_path, timeout=2)
    assert not (tmp_path / "grb-x" / "adj.npz").exists()


def test_official_dataset_offline_error(tmp_path):
    with pytest.raises(DatasetError, match="by hand|unreachable"):
        load_dataset("grb-citeseer", data_dir=tmp_path)


def _save_raw_sparse(path: Path, fmt: str, n: int, major: np.ndarray, minor: np.ndarray) -> None:
    """An ``.npz`` in the Nettack convention holding exactly the given stored entries (in
    ``fmt`` order, duplicates and self-loops kept as stored; scipy would sum duplicates)."""
    order = np.lexsort((minor, major))
    major, minor = major[order], minor[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(major, minlength=n))])
    np.savez(path, adj_data=np.ones(major.size), adj_indices=minor, adj_indptr=indptr,
             adj_shape=np.array([n, n]), adj_format=np.array(fmt), labels=np.arange(n) % 2)


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_npz_edge_report_counts_are_exact_and_never_negative(tmp_path, fmt):
    """The load report against a set-based count, on graphs stored in one direction only,
    with duplicates in both directions and duplicated self-loops (the case an earlier report,
    ``entries - self-loops - 2 * undirected edges``, gave a negative duplicate count for)."""
    rng = np.random.default_rng(7)
    for trial in range(40):
        n = int(rng.integers(3, 12))
        src = rng.integers(0, n, int(rng.integers(0, 40)))
        dst = rng.integers(0, n, src.size)
        if trial % 4 == 0:  # one direction only, no duplicates
            keep = src < dst
            pairs = np.unique(src[keep] * n + dst[keep])
            src, dst = pairs // n, pairs % n
        path = tmp_path / f"g{trial}.npz"  # entry (src, dst): CSR stores it in row src, CSC in column dst
        _save_raw_sparse(path, fmt, n, *((src, dst) if fmt == "csr" else (dst, src)))
        _, report = load_npz_graph(path)
        stored = list(zip(src.tolist(), dst.tolist()))
        loops = sum(a == b for a, b in stored)
        distinct = {(a, b) for a, b in stored if a != b}
        undirected = {(min(a, b), max(a, b)) for a, b in distinct}
        expected = {
            "input_entries": len(stored), "directed_entries": len(stored), "self_loops_removed": loops,
            "duplicate_entries_removed": len(stored) - loops - len(distinct),
            "reverse_edges_added": sum((b, a) not in distinct for a, b in distinct),
            "undirected_edges": len(undirected),
        }
        assert report == expected, (trial, report, expected)
        assert min(report.values()) >= 0
