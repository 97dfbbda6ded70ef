"""The samples a large graph's cost is calibrated on, and the extrapolation from them."""

from __future__ import annotations

import numpy as np
import pytest

from grb_dist.core.errors import ConfigError, DatasetError
from grb_dist.datasets.sample import MIN_GROUP, sample_graph
from grb_dist.sweep.cost.calibrate import CHECK_SCALE, Rate, check_scale, extrapolate, sample_sizes
from helpers import tiny_csbm


@pytest.fixture(scope="module")
def graph():
    return tiny_csbm(n=6000, seed=1)


def test_a_sample_keeps_the_degrees_and_every_split(graph):
    s = sample_graph(graph, 1500, seed=3)
    s.validate()  # both directions of every edge, no self-loops or duplicates, a valid split
    assert abs(s.num_nodes - 1500) <= len(graph.split) * MIN_GROUP
    mean = lambda g: 2 * g.num_edges / g.num_nodes  # noqa: E731
    assert mean(s) == pytest.approx(mean(graph), rel=0.1)
    # an induced subgraph of a quarter of the nodes would keep about a quarter of the degree
    assert s.num_edges == pytest.approx(graph.num_edges * s.num_nodes / graph.num_nodes, rel=0.1)
    assert set(s.split) == set(graph.split)
    for name, idx in graph.split.items():
        assert s.split[name].size == pytest.approx(idx.size * s.num_nodes / graph.num_nodes, rel=0.2, abs=MIN_GROUP)
    assert s.num_classes == graph.num_classes and s.num_features == graph.num_features


def test_a_sample_is_reproducible_and_its_rows_are_the_graphs(graph):
    a, b = sample_graph(graph, 1000, seed=7), sample_graph(graph, 1000, seed=7)
    assert np.array_equal(a.edge_index, b.edge_index) and np.array_equal(a.features, b.features)
    rows = {tuple(r) for r in graph.features.round(5)}
    assert all(tuple(r) in rows for r in a.features.round(5)[:50])


def test_a_sample_as_large_as_the_graph_is_the_graph_and_an_empty_one_is_refused(graph):
    assert sample_graph(graph, graph.num_nodes) is graph
    with pytest.raises(DatasetError, match="at least one node"):
        sample_graph(graph, 0)


def test_which_graphs_are_sampled():
    assert sample_sizes(2_485) == () and sample_sizes(2_485, "sampled") == (621, 1_242)
    assert sample_sizes(659_574) == (5_000, 20_000) and sample_sizes(659_574, "full") == ()
    with pytest.raises(ConfigError, match="auto, sampled, full"):
        sample_sizes(10, "most")


def test_extrapolation_is_linear_in_the_share_and_the_check_scales_its_growth():
    small, large = Rate(1.0, 0.1, 100, 0.5), Rate(2.0, 0.25, 250, 0.5)
    full = extrapolate([(0.1, small), (0.2, large)])
    assert (full.fixed, full.unit, full.peak, full.clean) == pytest.approx((10.0, 1.45, 1450, 0.5))
    scaled = extrapolate([(0.1, small), (0.2, large)], 2.0)
    assert scaled.seconds(1) - large.seconds(1) == pytest.approx(2 * (full.seconds(1) - large.seconds(1)))
    assert scaled.peak == full.peak  # memory grows with the graph, not with its caches
    # a noisy sample that is faster on the larger graph: no negative growth
    assert extrapolate([(0.1, large), (0.2, small)]) == small
    # the check: the scale that makes one epoch take what it measured, within its range
    points = [(0.1, small), (0.2, large)]
    assert extrapolate(points, check_scale(points, 20.0)).seconds(1) == pytest.approx(20.0)
    assert check_scale(points, 1e6) == CHECK_SCALE[1] and check_scale(points, 0.0) == CHECK_SCALE[0]
    # the check on another cost (an attack's clean pass and its steps)
    cost = lambda r: r.clean + r.seconds(100)  # noqa: E731
    assert cost(extrapolate(points, check_scale(points, 300.0, cost))) == pytest.approx(300.0)


def test_a_larger_sample_slowed_by_other_work_is_taken_at_the_growth_bound():
    """A sample 4x larger that took 15x as long (a machine busy with other jobs) grows at most
    4 ** MAX_GROWTH = 8x; growth within the bound is taken as measured."""
    from grb_dist.sweep.cost.scaling import MAX_GROWTH

    small = Rate(1.0, 0.02, 100)
    slowed, fine = Rate(3.0, 0.30, 300), Rate(3.0, 0.07, 300)
    bound = 4 ** MAX_GROWTH
    capped = extrapolate([(0.05, small), (0.2, slowed)])
    as_if = extrapolate([(0.05, small), (0.2, Rate(3.0, 0.02 * bound, 300))])
    assert capped.unit == pytest.approx(as_if.unit) and capped.fixed == pytest.approx(as_if.fixed)
    assert capped.unit == pytest.approx(0.16 + (0.14 / 0.15) * 0.8)  # not 0.30 + (0.28 / 0.15) * 0.8
    assert extrapolate([(0.05, small), (0.2, fine)]).unit == pytest.approx(0.07 + (0.05 / 0.15) * 0.8)
