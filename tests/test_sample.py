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


def test_an_architecture_that_weighs_in_the_trainings_is_checked_on_its_cheapest_task():
    """Each architecture other than the first checked one whose trainings are extrapolated
    to take at least ARCHITECTURE_SHARE of them all gets its own check, on its cheapest
    task, when that is cheap; the scale is at least 1 and the figure cached."""
    from types import SimpleNamespace

    from grb_dist.sweep.cost import checks

    def task(name: str) -> SimpleNamespace:
        return SimpleNamespace(name=name, file_stem=f"{name}-0", train={"epochs": 100})

    def points(unit: float) -> list[tuple[float, Rate]]:  # 1 and 4 times `unit` on 5% and 20% of the nodes
        return [(0.05, Rate(0.1, unit, 0)), (0.2, Rate(0.1, 4 * unit, 0))]

    measured_epoch = {"gat-0": 20.0, "sage-0": 1.0}

    class Whole:
        on_step = staticmethod(lambda what: None)
        model_key = staticmethod(lambda t: t.file_stem)

        def __init__(self):
            self.cache, self.trained = {}, []

        def cached(self, key, measure):
            return self.cache.setdefault(key, measure())

        def read_inside(self, t, epochs):
            self.trained.append((t.name, epochs))
            return Rate(1.0, measured_epoch[t.file_stem], 0), 0.0, 0

    tasks = [task(n) for n in ("gcn", "gcn_at", "gat_at", "gat", "gat_ln", "sage", "sgc")]
    units = {"gcn": 0.1, "gcn_at": 0.5, "gat_at": 4.0, "gat": 0.5, "gat_ln": 0.55, "sage": 0.1, "sgc": 0.05}
    found = {("train", t.file_stem): points(units[t.name]) for t in tasks}
    whole = Whole()
    out = checks.architecture_checks(tasks, whole, found, first="gcn")
    # gat weighs most; gcn is the one checked already; sage and sgc weigh too little
    assert set(out) == {"gat"} and whole.trained == [("gat", checks.ARCHITECTURE_EPOCHS)]
    model, epoch, extrapolated, scale = out["gat"]
    # 0.5 s and 2 s an epoch on 5% and 20% of the nodes: 10 s on the whole graph; 20 s measured
    assert model == "gat" and epoch == 20.0 and extrapolated == pytest.approx(10.0)
    assert scale == pytest.approx((20.0 - 2.0) / (10.0 - 2.0))
    assert any(k.startswith("check-epoch:gat-0") for k in whole.cache)
    # the same architecture whose every task is too costly to train twice on the whole graph: no check
    assert checks.architecture_checks(tasks, Whole(), found, first="gcn", slower=1e6) == {}
    # a check that reads faster than the extrapolation scales by 1, never down
    measured_epoch["gat-0"] = 0.5
    assert checks.architecture_checks(tasks, Whole(), found, first="gcn")["gat"][3] == 1.0


def test_the_best_epoch_is_the_median_of_the_surrogate_and_the_cheapest_trainings():
    """Besides the first surrogate, the job's cheapest trainings are trained in full while
    they fit BEST_EPOCHS_S together; their median best epoch stands for every training's."""
    from types import SimpleNamespace

    import grb_dist.sweep.cost.calibrate as cal

    def task(name: str) -> SimpleNamespace:
        return SimpleNamespace(name=name, file_stem=f"{name}-0", train={"epochs": 100}, transductive=False)

    best = {"gcn": 141, "mlp": 82, "sgc": 49, "gat": 60, "gat_at": 70}
    trained: list[str] = []
    whole = SimpleNamespace(model_key=lambda t: t.name,
                            best_epoch=lambda t, rate: trained.append(t.name) or best[t.name])
    tasks = [task(n) for n in best]
    rates = {"gcn-0": Rate(0, 0.05, 0), "mlp-0": Rate(0, 0.05, 0), "sgc-0": Rate(0, 0.1, 0),
             "gat-0": Rate(0, 0.2, 0), "gat_at-0": Rate(0, 1.0, 0)}  # 5, 5, 10, 20, 100 s in full
    cells = SimpleNamespace(surrogates=[tasks[0]])
    # the surrogate, then mlp, sgc (15 s together), not gat (35 s) nor gat_at
    assert cal._best_epoch(whole, cells, tasks, rates) == 82 and trained == ["gcn", "mlp", "sgc"]
