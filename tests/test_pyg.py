"""PyG interop: a PyG ``Data`` in (:func:`from_pyg`), clean and perturbed graphs out
(:func:`to_pyg`), and plain PyG code scoring what grb-dist scores."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.data import Data, InMemoryDataset

from grb_dist.attacks import build_attack
from grb_dist.core.errors import ConfigError, DatasetError
from grb_dist.datasets.pyg import from_pyg
from grb_dist.evaluation.evaluate import evaluate
from grb_dist.models import build_model
from grb_dist.models.io import state_dict_from_bytes
from grb_dist.models.pyg import to_pyg
from grb_dist.store import RunStore

from helpers import tiny_csbm


@pytest.fixture(scope="module")
def graph():
    return tiny_csbm(n=300)


def planetoid_like(n: int = 120, seed: int = 0) -> Data:
    """A directed random graph with Planetoid-style masks (train / val / test)."""
    rng = np.random.default_rng(seed)
    ei = torch.from_numpy(rng.integers(0, n, size=(2, 4 * n)))
    mask = lambda lo, hi: torch.arange(n).ge(lo) & torch.arange(n).lt(hi)  # noqa: E731
    return Data(x=torch.randn(n, 5), edge_index=ei, y=torch.from_numpy(rng.integers(0, 3, n)),
                train_mask=mask(0, 40), val_mask=mask(40, 60), test_mask=mask(60, n))


def test_round_trip_keeps_graph_and_grb_split(graph):
    back = from_pyg(to_pyg(graph), name=graph.name)
    np.testing.assert_array_equal(back.features, graph.features)
    np.testing.assert_array_equal(back.edge_index, graph.edge_index)
    np.testing.assert_array_equal(back.labels, graph.labels)
    assert back.split.keys() == graph.split.keys()
    for key in graph.split:
        np.testing.assert_array_equal(back.split[key], graph.split[key])


def test_planetoid_masks_keep_train_val_and_cut_test_by_degree():
    data = planetoid_like()
    g = from_pyg(data)
    np.testing.assert_array_equal(g.split["train"], np.arange(40))
    np.testing.assert_array_equal(g.split["val"], np.arange(40, 60))
    np.testing.assert_array_equal(g.split["test_full"], np.arange(60, 120))
    bands = [g.split[k] for k in ("test_easy", "test_medium", "test_hard")]
    assert [b.size for b in bands] == [20, 20, 20]
    np.testing.assert_array_equal(np.sort(np.concatenate(bands)), g.split["test_full"])
    deg = g.degrees()
    assert deg[bands[0]].max() <= deg[bands[1]].min() and deg[bands[1]].max() <= deg[bands[2]].min()
    # made undirected, without self-loops or duplicates
    pairs = set(map(tuple, g.edge_index.T.tolist()))
    assert all((b, a) in pairs and a != b for a, b in pairs)


def test_without_masks_the_grb_split_is_drawn_and_a_one_graph_dataset_is_read():
    data = planetoid_like()
    for key in ("train_mask", "val_mask", "test_mask"):
        del data[key]

    class One(InMemoryDataset):
        def __init__(self):
            super().__init__(None)
            self.data, self.slices = self.collate([data])

    a, b = from_pyg(data, seed=1), from_pyg(One(), seed=1)
    assert set(a.split) == {"train", "val", "test_easy", "test_medium", "test_hard", "test_full"}
    for key in a.split:
        np.testing.assert_array_equal(a.split[key], b.split[key])


@pytest.mark.parametrize("change, message", [
    (dict(edge_weight=lambda d: torch.full((d.edge_index.shape[1],), 0.5)), "weights other than 1"),
    (dict(edge_attr=lambda d: torch.ones(d.edge_index.shape[1], 2)), "edge_attr"),
    (dict(x=lambda d: None), "no data.x"),
    (dict(x=lambda d: d.x.to(torch.complex64)), "real numbers"),
    (dict(y=lambda d: torch.zeros(d.num_nodes, 3, dtype=torch.long)), "one class id per node"),
    (dict(y=lambda d: d.y.float()), "integer class ids"),
    (dict(test_mask=lambda d: None), "not test_mask"),
    (dict(train_mask=lambda d: d.train_mask.long()), "boolean mask"),
])
def test_what_grb_cannot_score_is_refused_with_the_reason(change, message):
    data = planetoid_like()
    for key, make in change.items():
        data[key] = make(data)
    with pytest.raises(DatasetError, match=message):
        from_pyg(data)


def test_several_graphs_are_refused():
    with pytest.raises(DatasetError, match="pass dataset\\[i\\]"):
        from_pyg([planetoid_like(), planetoid_like(seed=1)])


def test_perturbed_data_scores_in_plain_pyg_as_grb_dist_scores_it(graph):
    torch.manual_seed(0)
    model = build_model("gcn", graph.num_features, graph.num_classes, {"hidden_sizes": [16]}).eval()
    attack = build_attack("rnd", dict(n_inject=10, edges_per_node=4, seed=0))
    injection = attack.attack(graph, model, graph.targets("full"))
    data = to_pyg(graph, injection)
    n = graph.num_nodes
    assert data.num_nodes == n + 10 and bool(data.injected_mask[n:].all()) and not data.injected_mask[:n].any()
    assert (data.y[n:] == -1).all() and not data.test_mask[n:].any()
    with torch.no_grad():
        pred = model(data.x, data.edge_index).argmax(-1)
    scores = evaluate(model, graph, injection)
    for difficulty in ("easy", "medium", "hard", "full"):
        mask = data[f"test_{difficulty}_mask" if difficulty != "full" else "test_mask"]
        plain = (pred[mask] == data.y[mask]).float().mean().item()
        assert plain == pytest.approx(scores[difficulty], abs=1e-6)


# ------------------------------------------------------------------ benchmark() with PyG objects


def plain_gcn(d: int, c: int) -> torch.nn.Module:
    """A PyG model as PyG code writes one (not a grb-dist GraphModel). Its class is made
    here, inside a function, so that it travels to Ray's workers by value, as a class of a
    notebook or a script (``__main__``) does; the test module is not importable there."""
    from torch_geometric.nn import GCNConv

    class PlainGCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = GCNConv(d, 16), GCNConv(16, c)

        def forward(self, x, edge_index):
            return self.conv2(torch.relu(self.conv1(x, edge_index)), edge_index)

    return PlainGCN()


def trained_gcn(data: Data, epochs: int = 30) -> torch.nn.Module:
    torch.manual_seed(0)
    model = plain_gcn(data.num_features, int(data.y.max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    seen = data.subgraph(data.train_mask)
    for _ in range(epochs):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(seen.x, seen.edge_index), seen.y).backward()
        opt.step()
    return model.eval()


def test_benchmark_scores_a_trained_module_on_a_data_as_given(graph, tmp_path, ray_local):
    import grb_dist
    from grb_dist import api

    data = to_pyg(graph)
    model = trained_gcn(data)
    with torch.no_grad():
        pred = model(data.x, data.edge_index).argmax(1)
    expected = {d: float((pred[m] == data.y[m]).float().mean())
                for d, m in (("easy", data.test_easy_mask), ("full", data.test_mask))}
    try:
        rows = grb_dist.benchmark(model, dataset=data, attacks=["rnd"], difficulties=["easy", "full"], steps=2,
                                  out=tmp_path / "run", n_inject=5, edges_per_node=3, progress=False,
                                  train={"epochs": 5}, models={"gcn": {"hidden_sizes": [8]}})
    finally:
        api.unregister("plaingcn")
    assert set(rows["defense"]) == {"plaingcn"} and (rows["weights"] == "given").all()
    clean = rows[rows["row"] == "clean"].set_index("difficulty")["accuracy_mean"]
    # scored with the weights it was given: the clean accuracy is the module's own, not a retrained one's
    for difficulty, accuracy in expected.items():
        assert clean[difficulty] == pytest.approx(accuracy, abs=1e-6)
    store = RunStore.existing(tmp_path / "run")
    row = store.read_models().set_index("name").loc["plaingcn"]
    stored = store.read_model(f"plaingcn-{int(row['seed'])}", state_dict_from_bytes)
    given = model.state_dict()
    assert stored.keys() == given.keys() and all(torch.equal(stored[k], given[k]) for k in given)
    manifest = store.manifest()["dataset"]
    assert manifest["label"] == "pyg" and manifest["normalize"] == "none"


def test_a_given_module_that_does_not_fit_the_graph_is_refused_before_ray(graph, tmp_path):
    import grb_dist
    from grb_dist import api

    wrong = plain_gcn(graph.num_features + 1, graph.num_classes)
    try:
        with pytest.raises(ConfigError, match="the given module fails on the graph"):
            grb_dist.benchmark(wrong, dataset=to_pyg(graph), out=tmp_path / "run", progress=False)
        too_few = plain_gcn(graph.num_features, graph.num_classes - 1)
        with pytest.raises(ConfigError, match=r"the given module returned shape .*expected"):
            grb_dist.benchmark(too_few, dataset=to_pyg(graph), out=tmp_path / "run", progress=False)
    finally:
        api.unregister("plaingcn")
    assert not (tmp_path / "run").exists()


def test_the_from_pyg_example_reproduces_stored_scores_in_plain_pyg(npz_dir, tmp_path):
    """docs/examples/from_pyg.py as a user runs it: a PyG GCN trained the usual way,
    benchmarked as given, every stored score recomputed from to_pyg() in plain PyG code
    (the script asserts they agree)."""
    script = Path(__file__).resolve().parents[1] / "docs" / "examples" / "from_pyg.py"
    proc = subprocess.run([sys.executable, str(script), str(npz_dir / "cora.npz"), str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if "stored" in ln]
    assert len(lines) == 3 and all("weights" not in ln for ln in lines)  # clean, rnd and fgsm
    assert "given" in proc.stdout and "score 3/3 cells" in proc.stderr
