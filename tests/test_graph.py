import numpy as np
import pytest
import torch

from grb_dist.core.errors import DatasetError
from grb_dist.core.graph import Graph, Injection, canonical_edges
from grb_dist.models.tensors import perturbed_tensors
from grb_dist.models.tensors import graph_tensors

from helpers import path_graph


def test_canonical_edges_symmetrises_and_dedupes():
    ei, counts = canonical_edges(np.array([0, 1, 1, 2, 2]), np.array([1, 0, 1, 0, 3]), 4)
    pairs = set(map(tuple, ei.T.tolist()))
    assert pairs == {(0, 1), (1, 0), (0, 2), (2, 0), (2, 3), (3, 2)}
    assert counts["self_loops_removed"] == 1
    assert counts["undirected_edges"] == 3
    assert ei.dtype == np.int64


def test_canonical_edges_rejects_out_of_range():
    with pytest.raises(DatasetError, match="outside"):
        canonical_edges(np.array([0]), np.array([5]), 3)


def _graph(**over):
    kw = dict(
        features=np.zeros((3, 2), np.float32),
        edge_index=np.array([[0, 1], [1, 0]], np.int64),
        labels=np.array([0, 1, 0], np.int64),
    )
    kw.update(over)
    return Graph(**kw)


@pytest.mark.parametrize(
    "over, match",
    [
        ({"features": np.array([[np.nan, 0], [0, 0], [0, 0]], np.float32)}, "NaN"),
        ({"features": np.zeros((3, 2), np.float64)}, "float32"),
        ({"features": np.zeros(3, np.float32)}, "2-D"),
        ({"labels": np.array([0, 1], np.int64)}, "labels must have shape"),
        ({"labels": np.array([0, -1, 0], np.int64)}, "non-negative"),
        ({"edge_index": np.array([[0, 7], [7, 0]], np.int64)}, "outside"),
        ({"edge_index": np.array([0, 1], np.int64)}, r"shape \(2, E\)"),
    ],
)
def test_validate_rejects_bad_arrays(over, match):
    with pytest.raises(DatasetError, match=match):
        _graph(**over).validate()


def test_validate_rejects_empty_split_and_bad_indices():
    with pytest.raises(DatasetError, match="empty"):
        _graph(split={"train": np.array([], np.int64)}).validate()
    with pytest.raises(DatasetError, match="outside"):
        _graph(split={"train": np.array([9], np.int64)}).validate()


def test_injection_appends_without_touching_graph():
    g = path_graph(30)
    before = g.edge_index.copy(), g.features.copy()
    inj = Injection(
        features=np.ones((2, 4), np.float32),
        edges=np.array([[30, 30, 31], [0, 5, 7]], np.int64),
        num_original=30,
    )
    t = perturbed_tensors(g, inj)
    assert t.x.shape == (32, 4)
    assert t.edge_index.shape[1] == g.edge_index.shape[1] + 6
    assert torch.equal(t.y[-2:], torch.tensor([-1, -1]))
    np.testing.assert_array_equal(g.edge_index, before[0])
    np.testing.assert_array_equal(g.features, before[1])


def test_tensors_of_read_only_arrays():
    g = path_graph(30)
    ro = g.features.copy()
    ro.setflags(write=False)
    t = graph_tensors(g.with_features(ro))
    assert t.x.shape == (30, 4)
