"""PyG interop: a PyG ``Data`` in (:func:`from_pyg`), clean and perturbed graphs out
(:func:`to_pyg`), and plain PyG code scoring what grb-dist scores."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.data import Data, InMemoryDataset

from grb_dist.attacks import build_attack
from grb_dist.core.errors import DatasetError
from grb_dist.datasets.pyg import from_pyg
from grb_dist.evaluation.evaluate import evaluate
from grb_dist.models import build_model
from grb_dist.models.pyg import to_pyg

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
