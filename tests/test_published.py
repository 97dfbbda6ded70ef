"""Pro-GNN's graphs and published perturbations: the loader (largest component in original
order, split, difficulty bands), the download cache, and the ``published`` attack that
replays a perturbed matrix as an audited Modification.

A synthetic folder in Pro-GNN's layout (built in tmp_path from a tiny graph) runs
everywhere; the tests on the real published files use the ``prognn_dir`` fixture."""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from grb_dist.attacks.poisoning.published import Published, PublishedConfig
from grb_dist.attacks.registry import MODIFICATION, POISONING, attack_class, build_attack
from grb_dist.core.errors import ConfigError, DatasetError
from grb_dist.core.graph import Graph, modified_graph
from grb_dist.datasets import CATALOG, load_dataset
from grb_dist.datasets import prognn_readers
from grb_dist.datasets.prognn import PROGNN_ENV, degree_bands, download_prognn_file, load_prognn, prognn_folder
from grb_dist.datasets.prognn_readers import read_published

N_FULL = 40
OUTSIDE = (3, 17, 25, 38, 39)  # not in the largest component: 38-39 an edge, the rest isolated
LCC = np.array([i for i in range(N_FULL) if i not in OUTSIDE])
N = LCC.size  # 35


def _edges_full() -> list[tuple[int, int]]:
    chain = [(int(a), int(b)) for a, b in zip(LCC[:-1], LCC[1:])]
    chords = [(int(LCC[j]), int(LCC[j + 5])) for j in range(0, N - 5, 4)]
    return chain + chords + [(38, 39)]


def _adjacency(pairs, n: int) -> sp.csr_matrix:
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    a = sp.coo_matrix((np.ones(len(pairs), np.float32), (pairs[:, 0], pairs[:, 1])), shape=(n, n)).tocsr()
    return ((a + a.T) > 0).astype(np.float32).tocsr()


def _clean_lcc_pairs() -> list[tuple[int, int]]:
    new = {int(old): i for i, old in enumerate(LCC)}
    return [(new[a], new[b]) for a, b in _edges_full() if a in new and b in new]


def _save_perturbed(path: Path, removed, added) -> sp.csr_matrix:
    keep = [p for p in _clean_lcc_pairs() if p not in set(removed)]
    adj = _adjacency(keep + list(added), N)
    path.parent.mkdir(parents=True, exist_ok=True)
    sp.save_npz(path, adj)
    return adj


def make_layout(root: Path, name: str = "cora") -> Path:
    """A folder in Pro-GNN's layout for a 40-node graph whose largest component has 35 nodes."""
    rng = np.random.default_rng(0)
    adj = _adjacency(_edges_full(), N_FULL)
    attr = sp.csr_matrix((rng.random((N_FULL, 8)) < 0.3).astype(np.float32))
    (root / "npz").mkdir(parents=True)
    np.savez(root / "npz" / f"{name}.npz", adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr,
             adj_shape=np.array(adj.shape), attr_data=attr.data, attr_indices=attr.indices, attr_indptr=attr.indptr,
             attr_shape=np.array(attr.shape), labels=np.arange(N_FULL) % 3)
    (root / "splits").mkdir()
    split = {"idx_train": list(range(5)), "idx_val": list(range(5, 10)), "idx_test": list(range(10, N))}
    (root / "splits" / f"{name}_prognn_splits.json").write_text(json.dumps(split))
    _save_perturbed(root / "meta" / f"{name}_meta_adj_0.05.npz", removed=[(0, 1), (7, 8)],
                    added=[(0, 30), (2, 20), (11, 33)])
    _save_perturbed(root / "nettack" / f"{name}_nettack_adj_1.0.npz", removed=[(10, 11)], added=[(12, 34)])
    (root / "nettack" / f"{name}_nettacked_nodes.json").write_text(json.dumps({**split, "attacked_test_nodes": [12, 10]}))
    return root


@pytest.fixture
def layout(tmp_path, monkeypatch) -> Path:
    monkeypatch.delenv(PROGNN_ENV, raising=False)
    return make_layout(tmp_path / "prognn")


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def _matrix(graph: Graph) -> sp.csr_matrix:
    n = graph.num_nodes
    return sp.csr_matrix((np.ones(graph.edge_index.shape[1], np.float32), graph.edge_index), shape=(n, n))


def _differing_pairs(a: sp.spmatrix, b: sp.spmatrix) -> int:
    """The number of node pairs (u < v) where two symmetric 0/1 matrices differ."""
    return int((sp.triu(a, 1).tocsr() != sp.triu(b, 1).tocsr()).nnz)


def _attack(graph: Graph, **params) -> Published:
    return build_attack("published", {"seed": 0, **params}, "poisoning")


# --------------------------------------------------------------------------- the loader


def test_synthetic_layout_loads_the_largest_component_in_original_order(layout):
    g = load_prognn("cora", root=layout)
    assert g.name == "prognn-cora" and (g.num_nodes, g.num_edges) == (N, len(_clean_lcc_pairs()))
    base = np.load(layout / "npz" / "cora.npz")
    attr = sp.csr_matrix((base["attr_data"], base["attr_indices"], base["attr_indptr"]), shape=tuple(base["attr_shape"]))
    np.testing.assert_array_equal(g.features, attr.toarray()[LCC])  # row i is original node LCC[i]
    np.testing.assert_array_equal(g.labels, (np.arange(N_FULL) % 3)[LCC])
    assert (g.split["train"].size, g.split["val"].size, g.split["test_full"].size) == (5, 5, N - 10)


def test_difficulty_bands_split_the_test_set_by_degree(layout):
    g = load_prognn("cora", root=layout, seed=3)
    bands = [g.split[k] for k in ("test_easy", "test_medium", "test_hard")]
    together = np.concatenate(bands)
    assert np.unique(together).size == together.size  # disjoint
    np.testing.assert_array_equal(np.sort(together), g.split["test_full"])  # and covering
    assert max(b.size for b in bands) - min(b.size for b in bands) <= 1
    deg = g.degrees()
    assert deg[bands[0]].max() <= deg[bands[1]].min() and deg[bands[1]].max() <= deg[bands[2]].min()
    again = load_prognn("cora", root=layout, seed=3)
    assert all(np.array_equal(g.split[k], again.split[k]) for k in g.split)


def test_degree_bands_break_ties_by_the_seed():
    degrees = np.ones(30, dtype=np.int64)  # all tied: the seed alone decides the bands
    a, b = degree_bands(degrees, np.arange(30), seed=0), degree_bands(degrees, np.arange(30), seed=1)
    assert not np.array_equal(a["test_easy"], b["test_easy"])
    with pytest.raises(DatasetError, match="at least 3"):
        degree_bands(degrees, np.arange(2))


def test_a_given_folder_that_is_missing_or_a_file_is_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv(PROGNN_ENV, raising=False)
    with pytest.raises(DatasetError) as exc:
        load_prognn("cora", root=tmp_path / "nowhere")
    assert "does not exist" in _one_line(exc)
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(DatasetError) as exc:
        load_prognn("cora", root=tmp_path / "a-file")
    assert "is a file, not a folder" in _one_line(exc)
    monkeypatch.setenv(PROGNN_ENV, str(tmp_path / "a-file"))
    with pytest.raises(DatasetError, match=r"\$GRB_DIST_PROGNN .* is a file"):
        prognn_folder()


def test_a_given_folder_is_read_as_it_is(layout):
    (layout / "splits" / "cora_prognn_splits.json").unlink()
    with pytest.raises(DatasetError) as exc:
        load_prognn("cora", root=layout)
    assert "has no splits/cora_prognn_splits.json" in _one_line(exc)
    with pytest.raises(DatasetError, match="unknown Pro-GNN dataset 'pubmd'"):
        load_prognn("pubmd", root=layout)


def test_bad_split_files_are_refused(layout, monkeypatch):
    path = layout / "splits" / "cora_prognn_splits.json"
    path.write_text(json.dumps({"idx_train": [0, 1], "idx_val": [2], "idx_test": [3, 99]}))
    with pytest.raises(DatasetError, match="names node 99, outside"):
        load_prognn("cora", root=layout)
    path.write_text(json.dumps({"idx_train": [0, 0.5], "idx_val": [2], "idx_test": [3]}))
    with pytest.raises(DatasetError, match="list of integer node ids"):
        load_prognn("cora", root=layout)
    path.write_text("[1, 2")
    with pytest.raises(DatasetError, match="not valid JSON"):
        load_prognn("cora", root=layout)
    monkeypatch.setattr(prognn_readers, "MAX_JSON_BYTES", 4)
    with pytest.raises(DatasetError, match="more than the 4 of a split"):
        load_prognn("cora", root=layout)


def test_catalogue_entries_load_through_load_dataset(layout, monkeypatch):
    for name, size in (("prognn-cora", 2485), ("prognn-citeseer", 2110), ("prognn-cora-ml", 2810),
                       ("prognn-polblogs", 1222)):
        assert CATALOG.get(name).nodes == size and CATALOG.get(name).source == "prognn"
    monkeypatch.setenv(PROGNN_ENV, str(layout))
    g = load_dataset("prognn-cora", normalize="none", verify=False)  # the synthetic graph is not Cora's size
    assert g.num_nodes == N and set(np.unique(g.features)) <= {0.0, 1.0}
    with pytest.raises(DatasetError, match="not the official prognn-cora"):
        load_dataset("prognn-cora")


# --------------------------------------------------------------------------- the download cache


@pytest.fixture
def serve():
    servers = []

    def start(directory: Path) -> str:
        handler = functools.partial(_QuietHandler, directory=str(directory))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_downloads_fill_the_cache_and_are_checked(layout, tmp_path, serve, monkeypatch):
    url = serve(layout)
    files = ("npz/cora.npz", "splits/cora_prognn_splits.json")
    urls = {f: f"{url}/{f}" for f in files}
    cache = tmp_path / "cache"
    # the synthetic files are not the published ones: their checksums reject them, leaving nothing behind
    with pytest.raises(DatasetError) as exc:
        load_prognn("cora", data_dir=cache, urls=urls)
    assert "rejected" in _one_line(exc) and not (cache / "prognn" / "npz" / "cora.npz").exists()
    g = load_prognn("cora", data_dir=cache, urls=urls, verify=False)
    assert g.num_nodes == N and all((cache / "prognn" / f).is_file() for f in files)
    assert not list((cache / "prognn").rglob("*.part"))
    again = load_prognn("cora", data_dir=cache, download=False, verify=False)  # from the cache
    np.testing.assert_array_equal(again.edge_index, g.edge_index)
    with pytest.raises(DatasetError, match="not in the Pro-GNN cache .* --no-download"):
        load_prognn("citeseer", data_dir=cache, download=False)
    with pytest.raises(DatasetError, match="rejected: .* not a valid .npz"):
        download_prognn_file("npz/citeseer.npz", cache, url=f"{url}/splits/cora_prognn_splits.json", verify=False)


def test_an_unreachable_source_says_where_to_put_the_file(tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(DatasetError) as exc:
        download_prognn_file("meta/cora_meta_adj_0.05.npz", tmp_path / "c", url=f"http://127.0.0.1:{port}/x.npz",
                             timeout=2)
    assert "by hand into" in _one_line(exc)
    assert not (tmp_path / "c").exists()


# --------------------------------------------------------------------------- the attack


def test_published_is_in_both_tables_and_builds_from_a_job_entry():
    assert attack_class("published", "modification") is Published is attack_class("published", "poisoning")
    assert "published" in MODIFICATION and "published" in POISONING
    a = build_attack("published@0.05", {"kind": "meta", "rate": 0.05, "seed": 0}, "poisoning")
    assert isinstance(a.config, PublishedConfig) and a.config.resolved_rate == 0.05
    assert Published.global_pairs and not Published.uses_surrogate
    assert build_attack("published", {"ratio_edge_mod": 0.2}, "poisoning").config.resolved_rate == 0.2
    assert build_attack("published", {"kind": "nettack"}, "poisoning").config.resolved_rate == 1.0


@pytest.mark.parametrize("params, match", [
    ({"kind": "random"}, "unknown published perturbation kind"),
    ({"kind": "meta", "rate": 0.5}, "outside 0.05..0.25"),
    ({"kind": "nettack", "rate": 9.0}, "outside 1.0..5.0"),
    ({"kind": "meta", "ratio_edge_mod": 0.01}, "outside 0.05..0.25.*ratio_edge_mod"),
    ({"name": "../../etc/cora"}, "not a name"),
    ({"root": ""}, "not a folder path"),
])
def test_bad_configs_are_one_line(params, match):
    with pytest.raises(ConfigError, match=match) as exc:
        build_attack("published", params, "poisoning")
    _one_line(exc)


def test_meta_set_replays_exactly_with_its_own_budget(layout):
    g = load_prognn("cora", root=layout)
    published = sp.load_npz(layout / "meta" / "cora_meta_adj_0.05.npz")
    expected = _differing_pairs(_matrix(g), published)
    attack = _attack(g, kind="meta", rate=0.05, root=str(layout))
    assert attack.budget(g, 1).n_edge_mod == expected == 5
    mod = attack.attack(g, torch.nn.Identity(), g.split["test_full"])
    assert (mod.removed.shape[1], mod.added.shape[1]) == (2, 3)
    assert (_matrix(modified_graph(g, mod)) != published).nnz == 0
    assert attack.scored_nodes(g) is None
    with pytest.raises(ConfigError, match="flips 5 edges .* more than n_edge_mod=4"):
        _attack(g, kind="meta", rate=0.05, root=str(layout), n_edge_mod=4).budget(g, 1)


def test_nettack_set_names_its_attacked_nodes(layout):
    g = load_prognn("cora", root=layout)
    attack = _attack(g, kind="nettack", rate=1, root=str(layout))
    np.testing.assert_array_equal(attack.scored_nodes(g), [10, 12])
    assert attack.budget(g, 1).n_edge_mod == 2


def test_the_graph_name_or_a_name_picks_the_files(layout):
    g = load_prognn("cora", root=layout)
    other = Graph(features=g.features, edge_index=g.edge_index, labels=g.labels, split=g.split, name="tiny")
    with pytest.raises(ConfigError, match="not one of Pro-GNN's .* set name:"):
        _attack(other, root=str(layout)).budget(other, 1)
    assert _attack(other, root=str(layout), name="cora").budget(other, 1).n_edge_mod == 5


def test_a_matrix_of_another_size_is_one_line(layout):
    g = load_prognn("cora", root=layout)
    sp.save_npz(layout / "meta" / "cora_meta_adj_0.1.npz", sp.identity(N + 1, dtype=np.float32, format="csr"))
    with pytest.raises(DatasetError) as exc:
        _attack(g, rate=0.1, root=str(layout)).budget(g, 1)
    text = _one_line(exc)
    assert f"holds a {N + 1} x {N + 1} adjacency but the graph has {N} nodes ({N} x {N})" in text
    assert "matching prognn-<name> graph" in text
    sp.save_npz(layout / "meta" / "cora_meta_adj_0.15.npz", sp.csr_matrix((N, N + 2), dtype=np.float32))
    with pytest.raises(DatasetError, match=f"holds a {N} x {N + 2} adjacency"):
        _attack(g, rate=0.15, root=str(layout)).budget(g, 1)


@pytest.mark.parametrize("matrix, match", [
    (sp.csr_matrix(([1.0], ([0], [1])), shape=(N, N)), "not symmetric"),
    (sp.csr_matrix(([2.0, 2.0], ([0, 1], [1, 0])), shape=(N, N)), "weights other than 1"),
    (sp.csr_matrix(([1.0], ([4], [4])), shape=(N, N)), "self-loops"),
])
def test_a_matrix_that_is_not_symmetric_0_1_is_refused(layout, matrix, match):
    path = layout / "meta" / "cora_meta_adj_0.2.npz"
    sp.save_npz(path, matrix.astype(np.float32))
    with pytest.raises(DatasetError, match=match) as exc:
        read_published(path, N)
    _one_line(exc)


def test_a_root_that_is_a_file_or_missing_is_one_line(layout, tmp_path):
    g = load_prognn("cora", root=layout)
    (tmp_path / "plain.txt").write_text("x")
    for root, match in ((tmp_path / "plain.txt", "is a file, not a folder"), (tmp_path / "gone", "does not exist")):
        with pytest.raises(DatasetError) as exc:
            _attack(g, root=str(root)).budget(g, 1)
        assert match in _one_line(exc)
    with pytest.raises(DatasetError, match="has no meta/cora_meta_adj_0.25.npz"):
        _attack(g, rate=0.25, root=str(layout)).budget(g, 1)


def test_the_cache_holds_only_what_pro_gnn_published(layout, tmp_path, monkeypatch):
    monkeypatch.setenv("GRB_DIST_DATA", str(tmp_path / "cache"))
    g = load_prognn("cora", root=layout)
    with pytest.raises(ConfigError, match="no meta set at rate 0.07"):
        _attack(g, rate=0.07).budget(g, 1)
    with pytest.raises(ConfigError, match="no nettack set of 'cora_ml'"):
        _attack(g, kind="nettack", name="cora_ml").budget(g, 1)
    # a cached copy is read (and checksummed) without a download
    (tmp_path / "cache" / "prognn" / "meta").mkdir(parents=True)
    shutil.copy(layout / "meta" / "cora_meta_adj_0.05.npz", tmp_path / "cache" / "prognn" / "meta")
    with pytest.raises(DatasetError, match="not the official file"):
        _attack(g).budget(g, 1)


# --------------------------------------------------------------------------- the real published files


def test_prognn_cora_loads_with_the_published_split(prognn_dir):
    g = load_prognn("cora", root=prognn_dir)
    assert (g.num_nodes, g.num_edges) == (2485, 5069)
    split = json.loads((prognn_dir / "splits" / "cora_prognn_splits.json").read_text())
    for key, ours in (("idx_train", "train"), ("idx_val", "val"), ("idx_test", "test_full")):
        np.testing.assert_array_equal(g.split[ours], np.sort(split[key]))
    bands = np.concatenate([g.split[k] for k in ("test_easy", "test_medium", "test_hard")])
    assert np.unique(bands).size == bands.size == len(split["idx_test"])
    np.testing.assert_array_equal(np.sort(bands), g.split["test_full"])


@pytest.mark.parametrize("name", ["cora", "citeseer", "cora_ml", "polblogs"])
def test_the_largest_component_is_the_published_node_order(prognn_dir, name):
    g = load_prognn(name, root=prognn_dir)
    published = sp.load_npz(prognn_dir / "meta" / f"{name}_meta_adj_0.05.npz")
    assert published.shape == (g.num_nodes, g.num_nodes)
    clean = sp.triu(_matrix(g), 1).tocsr()
    kept = clean.multiply(sp.triu(published, 1) > 0).nnz
    assert kept / clean.nnz > 0.9


def test_published_meta_5_percent_on_cora_replays_exactly(prognn_dir, monkeypatch):
    monkeypatch.setenv(PROGNN_ENV, str(prognn_dir))
    g = load_dataset("prognn-cora", normalize="none")
    published = sp.load_npz(prognn_dir / "meta" / "cora_meta_adj_0.05.npz")
    expected = _differing_pairs(_matrix(g), published)
    attack = _attack(g, kind="meta", rate=0.05)
    assert attack.budget(g, 1).n_edge_mod == expected == int(0.05 * g.num_edges)
    mod = attack.attack(g, torch.nn.Identity(), g.split["test_full"])
    assert mod.n_edge_flips == expected
    assert (_matrix(modified_graph(g, mod)) != published).nnz == 0


def test_published_nettack_on_cora_loads_its_attacked_nodes(prognn_dir):
    g = load_prognn("cora", root=prognn_dir)
    attack = _attack(g, kind="nettack", rate=1.0, root=str(prognn_dir))
    nodes = json.loads((prognn_dir / "nettack" / "cora_nettacked_nodes.json").read_text())["attacked_test_nodes"]
    np.testing.assert_array_equal(attack.scored_nodes(g), np.sort(nodes))
    assert np.isin(attack.scored_nodes(g), g.split["test_full"]).all()
    published = sp.load_npz(prognn_dir / "nettack" / "cora_nettack_adj_1.0.npz")
    assert attack.budget(g, 1).n_edge_mod == _differing_pairs(_matrix(g), published) > 0


def test_the_real_files_pass_the_cache_checksums(prognn_dir, tmp_path, serve):
    url = serve(prognn_dir.parent)
    urls = {"npz/cora.npz": f"{url}/npz/cora.npz",
            "splits/cora_prognn_splits.json": f"{url}/{prognn_dir.name}/splits/cora_prognn_splits.json"}
    g = load_prognn("cora", data_dir=tmp_path, urls=urls)  # verified against the published sizes and SHA-256
    assert (g.num_nodes, g.num_edges) == (2485, 5069)
    again = load_prognn("cora", data_dir=tmp_path, download=False)
    np.testing.assert_array_equal(again.edge_index, g.edge_index)
