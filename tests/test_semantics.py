"""Semantics-aware robustness (Gosch et al. 2023): metrics, local-budget attacks, the study's units,
store and CLI."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from grb_dist.cli import app
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph, canonical_edges
from grb_dist.semantics import attacks as sa
from grb_dist.semantics import metrics as sm
from grb_dist.semantics.cache import UnitCache
from grb_dist.semantics.data import Prepared, bayes_terms, prepare
from grb_dist.attacks.shared.surrogate import receptive_hops
from grb_dist.semantics.flips import BallView, f_flips, g_flips, node_graphs
from grb_dist.semantics.kernel import run_unit, train_study_model
from grb_dist.semantics.run import pending_units, run_study
from grb_dist.semantics.spec import ROW_COLUMNS, Unit, csbm_config, load_spec, units
from grb_dist.semantics.tables import read_nodes, study_budgets


INF = math.inf


# ------------------------------------------------------------------------------ metrics


def _hand_nodes() -> pd.DataFrame:
    """Four hand-worked nodes (see the expected values in the tests)."""
    return pd.DataFrame({
        "degree": [2, 1, 4, 0],
        "label": [0, 1, 0, 1],
        "f_clean": [0, 1, 1, 1],
        "g_clean": [0, 1, 0, 1],
        "f_flip": [5.0, 1.0, INF, 2.0],
        "g_flip": [2.0, 3.0, 2.0, 1.0],
    })


def test_robustness_is_changes_withstood_within_budget():
    assert sm.robustness(np.array([1.0, 3.0, INF]), 5).tolist() == [0.0, 2.0, 5.0]
    assert sm.robustness(np.array([1.0, 3.0, INF]), 2).tolist() == [0.0, 2.0, 2.0]
    assert sm.robustness(np.array([4.0]), INF).tolist() == [3.0]


def test_node_robustness_stops_at_the_semantic_boundary():
    rob = sm.node_robustness(_hand_nodes(), INF)
    # node 0: f withstands 4 edges, g only 1 -> semantics-aware robustness is 1
    assert rob.loc[0, "rob_f_y"] == 4 and rob.loc[0, "rob_g_y"] == 1 and rob.loc[0, "rob_f_g"] == 1
    # node 1: f flips at the first edge, before g -> 0
    assert rob.loc[1, "rob_f_g"] == 0 and rob.loc[1, "rob_g_y"] == 2
    # node 2: f wrong on the clean graph -> not counted for the metrics, g's boundary still 1
    assert np.isnan(rob.loc[2, "rob_f_y"]) and np.isnan(rob.loc[2, "rob_f_g"]) and np.isnan(rob.loc[2, "rob_g_y"])
    assert rob.loc[2, "rob_g"] == 1
    # without a reference, conventional robustness counts the nodes f gets right
    no_g = sm.node_robustness(_hand_nodes().assign(g_clean=-1), INF)
    assert no_g["rob_f_y"].tolist()[:2] == [4, 0] and no_g["rob_f_g"].isna().all()


def test_reduced_metrics_hand_worked():
    s = sm.summarize(sm.node_robustness(_hand_nodes(), INF))
    assert s["R"] == pytest.approx((4 / 2 + 0 / 1) / 2)  # degree-corrected, degree 0 excluded
    assert s["R_fg"] == pytest.approx((1 / 2 + 0) / 2)
    assert s["R_g"] == pytest.approx((1 / 2 + 2 / 1) / 2)
    assert s["R_adv"] == pytest.approx(0.25 / 1.25)
    assert s["R_over"] == pytest.approx(0.75)
    assert s["F1_rob"] == pytest.approx(2 * 0.25 * 0.2 / (0.25 + 0.2))
    assert s["nodes"] == 3
    # budget 2: f's robustness at node 0 is capped at 2
    s2 = sm.summarize(sm.node_robustness(_hand_nodes(), 2))
    assert s2["R"] == pytest.approx(0.5) and s2["R_over"] == pytest.approx(0.5)
    assert s2["violated"] == pytest.approx(2 / 3)  # g flips within 2 at nodes 0 and 2, not 1


def test_f_beta_and_budget_names():
    assert sm.f_beta_rob(0.5, 0.5, 1.0) == pytest.approx(0.5)
    assert sm.f_beta_rob(1.0, 0.0, 2.0) == pytest.approx(1.0)
    assert sm.f_beta_rob(0.2, 0.6, 2.0) == pytest.approx(5 * 0.4 * 0.2 / (4 * 0.4 + 0.2))
    assert sm.f_beta_rob(0.0, 1.0) == 0.0
    deg = np.array([0, 3])
    assert sm.budget_values("deg+2", deg).tolist() == [2, 5]
    assert sm.budget_values("deg", deg).tolist() == [0, 3]
    assert sm.budget_values("3", deg).tolist() == [3, 3]
    assert np.isinf(sm.budget_values("inf", deg)).all()
    table = sm.reduce_metrics(_hand_nodes().assign(model="m"), ["inf", "2"], ["model"])
    assert table["R_over"].tolist() == pytest.approx([0.75, 0.5])


# ------------------------------------------------------------------------------ attacks


def _line():
    """Base nodes on a line: x = 0, 1, 2, 3, 10 with labels 0, 1, 1, 0, 1; new node at 0.4."""
    xb = np.array([[0.0], [1.0], [2.0], [3.0], [10.0]], dtype=np.float32)
    yb = np.array([0, 1, 1, 0, 1])
    return xb, yb, np.array([[0.4]], dtype=np.float32), np.array([0])


def test_l2_weak_and_strong_pick_closest_and_farthest_other_class():
    xb, yb, xv, yv = _line()
    none = np.empty(0, np.int64)
    weak = sa.attack_order("l2-weak", xb, yb, xv, yv, none, none, 4)
    strong = sa.attack_order("l2-strong", xb, yb, xv, yv, none, none, 4)
    assert weak.tolist() == [[1, 2, 4, -1]]
    assert strong.tolist() == [[4, 2, 1, -1]]
    # a clean neighbour is never chosen again
    weak_nb = sa.attack_order("l2-weak", xb, yb, xv, yv, np.array([0]), np.array([1]), 2)
    assert weak_nb.tolist() == [[2, 4]]
    dice = sa.attack_order("dice", xb, yb, xv, yv, none, none, 3, seed=1)
    assert sorted(dice[0].tolist()) == [1, 2, 4]
    cls = sa.attack_order("l2-weak-class", xb, yb, np.vstack([xv, xv]), np.array([0, 1]), none, none, 2,
                          target_class=np.array([1, 0]))
    assert cls.tolist() == [[1, 2], [0, 3]]


def test_attack_errors():
    with pytest.raises(ConfigError, match="did you mean|one of|unknown"):
        sa.check_attack("l2-week")
    with pytest.raises(ConfigError, match="differentiable in edge weights"):
        sa.check_attack("grbcd", "gcn_lp")
    with pytest.raises(ConfigError, match="differentiable in edge weights"):
        sa.check_attack("grbcd", "gat")
    sa.check_attack("grbcd", "gcn")


class _Spy(torch.nn.Module):
    """Records every edge_index it is called with; predicts class 1 once v has >= 2 edges
    to class-1 nodes (so f flips at a known step)."""

    uses_graph = True

    def __init__(self, labels):
        super().__init__()
        self.labels = torch.as_tensor(labels)
        self.calls = []

    def forward(self, x, edge_index):
        self.calls.append(edge_index.clone())
        n = x.shape[0]
        v = n - 1
        nb = edge_index[1][edge_index[0] == v]
        ones = int((self.labels[nb] == 1).sum())
        out = torch.zeros(n, 2)
        out[:, 0] = 1.0
        out[v, 1] = 2.0 if ones >= 2 else 0.0
        return out


def _prepared_line(nb_base=()):
    xb, yb, xv, yv = _line()
    src = np.array([0, 2])
    ei, _ = canonical_edges(src, src + 1, 5)
    graph = Graph(features=xb, edge_index=ei, labels=yb, num_classes=2)
    nb = np.asarray(nb_base, dtype=np.int64)
    return Prepared(graph, xv, yv, np.zeros(nb.size, dtype=np.int64), nb)


def test_f_flips_respects_the_budget_and_touches_only_v():
    prepared = _prepared_line(nb_base=[3])
    order = sa.attack_order("l2-weak", prepared.graph.features, prepared.graph.labels, prepared.x_new,
                            prepared.y_new, prepared.nb_node, prepared.nb_base, 3)
    spy = _Spy(np.concatenate([prepared.graph.labels, [0]]))
    f0, flips, _ = f_flips(spy, prepared, order, np.array([3]))
    assert f0.tolist() == [0] and flips.tolist() == [2.0]
    base = {tuple(e) for e in prepared.graph.edge_index.T.tolist()}
    for k, ei in enumerate(spy.calls):
        extra = [tuple(e) for e in ei.T.tolist() if tuple(e) not in base]
        assert all(5 in e for e in extra)  # only edges at v (id 5)
        assert len(extra) == 2 * (1 + k)  # clean edge + k attack edges, both directions
    # budget 1: a single attack edge at most, no flip
    spy.calls.clear()
    _, flips1, _ = f_flips(spy, prepared, order, np.array([1]))
    assert np.isinf(flips1[0]) and len(spy.calls) == 2


# ------------------------------------------------------------------------------ study

TINY = dict(
    graph={"kind": "csbm", "num_nodes": 120, "num_classes": 2, "num_features": 8, "sigma": 1.0, "p": 0.05, "q": 0.01},
    K=[1.0], graphs=1, nodes=12, max_steps=8, budgets=["1", "deg", "deg+2", "inf"],
    models={"gcn": {"hidden_sizes": [8]}, "lp": {"alpha": 0.7, "iterations": 10}, "mlp": {"hidden_sizes": [8]}},
    attacks=["l2-weak"], train={"epochs": 15, "patience": 5},
)


def test_bayes_terms_match_the_csbm_posterior():
    from grb_dist.datasets.csbm import bayes_log_posterior, sample_csbm

    spec = load_spec(None, **TINY)
    config = csbm_config(spec, 1.0)
    graph, means = sample_csbm(config, seed=3)
    v = np.array([5, 17])
    counts = np.zeros((2, 2))
    mask = np.isin(graph.edge_index[0], v)
    np.add.at(counts, (np.searchsorted(v, graph.edge_index[0][mask]), graph.labels[graph.edge_index[1][mask]]), 1)
    # known graph = every node but v: its class sizes exclude v
    sizes = np.bincount(graph.labels, minlength=2).astype(float)
    sizes = np.stack([sizes - np.eye(2)[graph.labels[i]] for i in v])
    for row, node in enumerate(v):
        scores, _, _ = bayes_terms(config, means, graph.features[[node]], counts[[row]], sizes[row])
        want = bayes_log_posterior(graph, config, means, np.array([node]))
        np.testing.assert_allclose(scores, want, rtol=1e-9)


def test_g_flip_is_where_the_bayes_decision_changes():
    spec = load_spec(None, **TINY)
    prepared = prepare(spec, 1.0, 0)
    order = sa.attack_order("l2-weak", prepared.graph.features, prepared.graph.labels, prepared.x_new,
                            prepared.y_new, prepared.nb_node, prepared.nb_base, 8)
    g0, flip = g_flips(prepared, order)
    labels = prepared.graph.labels
    step = np.stack([prepared.g_step[labels == c][0] for c in range(2)], 1)  # C x C: by class only
    assert np.allclose(prepared.g_step, step.T[labels])
    for i in range(prepared.y_new.size):
        counts = np.zeros(2)
        np.add.at(counts, labels[prepared.nb_base[prepared.nb_node == i]], 1)
        steps = int(min(flip[i], 8)) if np.isfinite(flip[i]) else 8
        for k in range(steps + 1):
            c = counts + np.bincount(labels[order[i, :k]], minlength=2)
            decision = int((prepared.g_scores[i] - (counts @ step.T) + c @ step.T).argmax())
            assert (decision != g0[i]) == (np.isfinite(flip[i]) and k >= flip[i])


def test_run_unit_rows_and_study_resume(tmp_path):
    spec = load_spec(None, **TINY)
    rows = run_unit(spec, Unit(1.0, 0, "gcn", "l2-weak"))
    assert list(rows.columns) == list(ROW_COLUMNS) and len(rows) == 12
    assert (rows["steps"] == 8).all()  # the inf budget, capped by max_steps
    assert (rows["f_flip"].isin([np.inf]) | (rows["f_flip"] <= rows["steps"])).all()
    mlp = run_unit(spec, Unit(1.0, 0, "mlp", "l2-weak"))
    assert np.isinf(mlp["f_flip"]).all()  # structure never changes an MLP
    directory = run_study(spec, tmp_path, use_ray=False)
    files = sorted((directory / "nodes").glob("*.parquet"))
    assert len(files) == 3
    stamp = [f.stat().st_mtime_ns for f in files]
    assert pending_units(spec, tmp_path) == []
    run_study(spec, tmp_path, use_ray=False)  # resumes: nothing re-run
    assert [f.stat().st_mtime_ns for f in files] == stamp
    metrics = pd.read_parquet(directory / "metrics.parquet")
    assert set(metrics["model"]) == {"gcn", "lp", "mlp"}
    deg = metrics[metrics["budget"] == "deg"].set_index("model")
    # the MLP keeps every prediction: its conventional robustness is the whole budget
    assert deg.loc["mlp", "R"] == pytest.approx(1.0)
    assert (directory / "table1.csv").exists() and (directory / "table2.csv").exists()
    from grb_dist.semantics.plots import write_plots

    assert {p.name for p in write_plots(directory)} >= {"over_robustness_vs_K.png", "degree_robustness.png"}
    assert study_budgets(directory) == tuple(TINY["budgets"])
    result = CliRunner().invoke(app, ["study-plot", str(directory)])
    assert result.exit_code == 0, result.output
    assert set(pd.read_parquet(directory / "metrics.parquet")["budget"]) == set(TINY["budgets"])
    result = CliRunner().invoke(app, ["study-plot", str(tmp_path)])
    assert result.exit_code == 2 and "not a study directory" in result.output


def test_unit_ids_hash_the_settings():
    a = load_spec(None, **TINY)
    b = load_spec(None, **{**TINY, "nodes": 13})
    u = Unit(1.0, 0, "gcn", "l2-weak")
    assert u.unit_id(a) == Unit(1.0, 0, "gcn", "l2-weak").unit_id(a)
    assert u.unit_id(a) != u.unit_id(b)
    assert u.unit_id(a) != Unit(1.0, 0, "gcn", "dice").unit_id(a)


def test_nettack_closed_form_matches_the_surrogate():
    import scipy.sparse as sp

    from grb_dist.models.sgc import SGC, SGCConfig

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    n = 30
    src, dst = rng.integers(0, n, 60), rng.integers(0, n, 60)
    keep = src != dst
    ei, _ = canonical_edges(src[keep], dst[keep], n)
    x = torch.randn(n, 5)
    model = SGC(5, 3, SGCConfig(hidden_sizes=(), k=2, dropout=0.0)).double().eval()
    v, label = 0, 1
    nbs = set(ei[1][ei[0] == v].tolist())
    cand = np.array([u for u in range(1, n) if u not in nbs])
    h = model.layers[0]["lin"](x.double()).detach().numpy()
    adj = sp.csr_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(n, n))
    got = sa.linear_gcn_margins(h, adj, v, label, cand)
    for j, u in enumerate(cand[:8]):
        e2 = torch.as_tensor(np.concatenate([ei, [[v, u], [u, v]]], 1))
        with torch.no_grad():
            z = model(x.double(), e2)[v]
        want = float(z[label] - torch.cat([z[:label], z[label + 1:]]).max())
        assert got[j] == pytest.approx(want, abs=1e-9)
    order = sa.nettack_order(model.float(), x, torch.as_tensor(ei), v, label, cand, 4)
    assert len(set(order.tolist())) == 4 and set(order.tolist()) <= set(cand.tolist())
    assert order[0] == cand[np.argmin(got)]


@pytest.mark.parametrize("attack", ["nettack", "sga"])
def test_surrogate_attack_units_run(attack):
    spec = load_spec(None, **{**TINY, "models": {"lp": {"alpha": 0.7, "iterations": 10}}, "attacks": [attack],
                              "budgets": ["deg+2"], "nodes": 4})
    rows = run_unit(spec, Unit(1.0, 0, "lp", attack))
    assert len(rows) == 4 and (rows["steps"] <= rows["degree"] + 2).all()


def test_sga_adds_nodes_of_the_best_wrong_class():
    from grb_dist.models.sgc import SGC, SGCConfig

    torch.manual_seed(0)
    rng = np.random.default_rng(1)
    n = 40
    src, dst = rng.integers(0, n, 80), rng.integers(0, n, 80)
    keep = src != dst
    ei, _ = canonical_edges(src[keep], dst[keep], n)
    x = torch.randn(n, 6)
    model = SGC(6, 3, SGCConfig(hidden_sizes=(), k=2, dropout=0.0)).eval()
    v, label = 0, 0
    nbs = set(ei[1][ei[0] == v].tolist())
    cand = np.array([u for u in range(1, n) if u not in nbs])
    order = sa.sga_order(model, x, torch.as_tensor(ei), v, label, cand, 3)
    with torch.no_grad():
        logits = model(x, torch.as_tensor(ei))
    target = int(logits[v, 1:].argmax()) + 1
    picked = order[order >= 0]
    assert picked.size > 0 and (logits[picked].argmax(1) == target).all()


def test_gatv2_is_a_study_model():
    spec = load_spec(None, **{**TINY, "models": {"gatv2_lp": {"hidden_sizes": [4], "heads": 2}}, "nodes": 3,
                              "budgets": ["deg"]})
    rows = run_unit(spec, Unit(1.0, 0, "gatv2_lp", "l2-weak"))
    assert len(rows) == 3
    with pytest.raises(ConfigError, match="differentiable in edge weights"):
        load_spec(None, **{**TINY, "models": {"gatv2": {}}, "attacks": ["grbcd"]})


def test_grbcd_only_adds_edges_at_v():
    spec = load_spec(None, **{**TINY, "models": {"gcn": {"hidden_sizes": [8]}}, "attacks": ["grbcd"],
                              "budgets": ["deg+2"], "nodes": 4})
    rows = run_unit(spec, Unit(1.0, 0, "gcn", "grbcd"))
    assert len(rows) == 4 and (rows["steps"] <= rows["degree"] + 2).all()


def test_real_graph_unit_has_no_reference(npz_dir):
    spec = load_spec("grb_dist/jobs/studies/over-robustness-cora-ml.yaml", graph={"kind": "npz", "path": str(npz_dir / "cora_ml.npz")},
                     nodes=3, max_steps=4, models={"lp": {"alpha": 0.7, "iterations": 5}}, train={"epochs": 5})
    rows = run_unit(spec, Unit(float("nan"), 0, "lp", "l2-weak-class"))
    assert (rows["g_clean"] == -1).all() and (rows["target_class"] != rows["label"]).all()
    assert len(rows) == 3 * 6  # one row per node and other class (7 classes)


@pytest.mark.parametrize("args, message", [
    (["--k", "-1"], "K must be in [0, 100]"),
    (["--budgets", "0"], "must be positive"),
    (["--budgets", "deg-1"], "deg, deg+N or inf"),
    (["--attacks", "grbcd", "--models", "lp"], "differentiable in edge weights"),
    (["--attacks", "nettak"], "attack"),
    (["--nodes", "0"], "nodes must be in [1, 1,000,000]"),
    (["--job", "grb_dist/jobs/studies/over-robustness-cora-ml.yaml"], "needs a path"),
])
def test_cli_errors_before_work(tmp_path, args, message):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["study", "--out", str(out), *args])
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and message in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1
    assert not out.exists()


def test_cli_error_reference_on_real_graph_and_small_n(npz_dir, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(f"graph: {{kind: npz, path: {npz_dir / 'cora_ml.npz'}}}\nreference: bayes\n")
    result = CliRunner().invoke(app, ["study", "--job", str(job), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "reference classifier" in result.output
    job.write_text(f"graph: {{kind: npz, path: {npz_dir / 'cora_ml.npz'}, features: tfidf}}\nreference: none\n")
    result = CliRunner().invoke(app, ["study", "--job", str(job), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "raw or row" in result.output
    job.write_text("graph: {kind: csbm, num_nodes: 3, num_classes: 2}\n")
    result = CliRunner().invoke(app, ["study", "--job", str(job), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "too small" in result.output
    assert not (tmp_path / "o").exists()


def test_study_on_ray_writes_the_same_rows(tmp_path):
    spec = load_spec(None, **{**TINY, "models": {"gcn": {"hidden_sizes": [8]}}, "nodes": 5})
    directory = run_study(spec, tmp_path, num_cpus=1)
    on_ray = read_nodes(directory)
    local = run_unit(spec, Unit(1.0, 0, "gcn", "l2-weak"))
    pd.testing.assert_frame_equal(on_ray.reset_index(drop=True), local.reset_index(drop=True))
    # the per-K search runs on Ray the same way, with the same scores
    from grb_dist.semantics.tune import tune

    search = {"gcn": {"dropout": [0.0, 0.5]}}
    on_ray = tune(spec, search, graphs=1, num_cpus=1)
    here = tune(spec, search, graphs=1, use_ray=False)
    pd.testing.assert_frame_equal(on_ray, here)


# ------------------------------------------------------------------------------ speed-ups


def _sparse_prepared(n: int = 1500, seed: int = 0) -> Prepared:
    from grb_dist.datasets.csbm import CSBMConfig, sample_csbm

    graph, _ = sample_csbm(CSBMConfig(num_nodes=n, num_classes=2, num_features=6, deg_same=1.2, deg_diff=0.3), seed=seed)
    graph = graph.with_split({"train": np.arange(n // 2), "val": np.arange(n // 2, n)})
    rng = np.random.default_rng(seed)
    return Prepared(graph, rng.standard_normal((1, 6)).astype(np.float32), np.array([0]),
                    np.zeros(2, dtype=np.int64), np.array([3, 11]))


@pytest.mark.parametrize("name,params", [
    ("gcn", {"hidden_sizes": [8]}), ("sgc", {"hidden_sizes": [], "k": 2}), ("gat", {"hidden_sizes": [4], "heads": 2}),
    ("sage", {"hidden_sizes": [8]}), ("gatv2", {"hidden_sizes": [4], "heads": 2}),
    ("rgcn", {"hidden_sizes": [8]}), ("gnnguard", {"hidden_sizes": [8]}),
    ("gatguard", {"hidden_sizes": [4], "heads": 2}), ("jaccard", {"hidden_sizes": [8]}),
])
def test_ball_view_equals_the_whole_graph(name, params):
    from grb_dist.defenses.build import build_defense

    prepared = _sparse_prepared()
    torch.manual_seed(0)
    model = build_defense(name, prepared.graph, params).eval()
    hops = receptive_hops(model)
    assert hops == 2
    view = BallView(model, prepared, hops)
    _, x, edges, nbs = next(node_graphs(prepared))
    n = prepared.graph.num_nodes
    rng = np.random.default_rng(1)
    with torch.no_grad():
        for k in (0, 1, 4):
            extra = rng.choice(np.setdiff1d(np.arange(n), nbs), size=k, replace=False)
            neighbours = np.concatenate([nbs, extra])
            ball = view.ball(neighbours)
            assert ball is not None and ball.size < n // 2  # a local evaluation, not the fallback
            whole = model(x, edges(extra))[n]
            local = view.logits(x[n:], neighbours, lambda: pytest.fail("fell back to the whole graph"))
            torch.testing.assert_close(local, whole, rtol=1e-5, atol=1e-6)


def test_a_wrong_receptive_field_falls_back_to_the_whole_graph(caplog):
    from grb_dist.defenses.build import build_defense

    prepared = _sparse_prepared()
    torch.manual_seed(0)
    model = build_defense("appnp", prepared.graph, {"hidden_sizes": [8]}).eval()  # 10 hops
    order = np.array([[40, 41, 42, 43]])
    steps = np.array([4])
    truth = f_flips(model, prepared, order, steps)
    # a wrong declaration (APPNP here reaches 10 hops): the first node's check catches it
    model.__class__ = type("WrongHops", (type(model),), {"receptive_hops": 1})
    with caplog.at_level("WARNING"):
        got = f_flips(model, prepared, order, steps)
    assert "differs from the whole graph" in caplog.text
    assert got[0].tolist() == truth[0].tolist() and got[1].tolist() == truth[1].tolist()


def test_model_and_its_lp_variant_share_one_training():
    spec = load_spec(None, **{**TINY, "models": {"gcn": {"hidden_sizes": [8]},
                                                 "gcn_lp": {"hidden_sizes": [8], "lp": {"alpha": 0.7}}}})
    prepared = prepare(spec, 1.0, 0)
    cache = UnitCache()
    train_study_model(spec, prepared, "gcn", 0, "graph-a", cache=cache)
    assert cache.size("networks") == 1
    shared, acc = train_study_model(spec, prepared, "gcn_lp", 0, "graph-a", cache=cache)
    assert cache.size("networks") == 1  # reused, not trained again
    fresh, acc_fresh = train_study_model(spec, prepared, "gcn_lp", 0)
    x, ei = torch.as_tensor(prepared.graph.features), torch.as_tensor(prepared.graph.edge_index)
    with torch.no_grad():
        torch.testing.assert_close(shared(x, ei), fresh(x, ei))
    assert acc == acc_fresh
    assert [u.model for u in units(spec)] == ["gcn", "gcn_lp"]


# ------------------------------------------------------------------------------ CBA, per-K settings


def _tiny_cba_graph():
    from grb_dist.datasets.csbm import CBAConfig, sample_cba

    config = CBAConfig(num_nodes=40, num_classes=2, num_features=4, K=1.0, m=2, affinity_same=3.0, affinity_diff=1.0)
    graph, means = sample_cba(config, seed=1)
    return config, graph, means


def test_cba_bayes_terms_match_a_node_by_node_likelihood():
    from grb_dist.datasets.csbm import cba_bayes_terms

    config, graph, means = _tiny_cba_graph()
    x = np.array([[0.3, -0.2, 0.1, 0.5]], dtype=np.float32)
    nbs = np.array([2, 7, 30])
    scores, step, _ = cba_bayes_terms(graph, config, means, x, np.zeros(3, dtype=np.int64), nbs)
    deg = np.bincount(graph.edge_index[0], minlength=40)
    want = np.zeros(2)
    for c in range(2):
        w = np.array([(1 + deg[j]) * (3.0 if graph.labels[j] == c else 1.0) for j in range(40)])
        p = w / w.sum()
        pi = 1 - (1 - p) ** 2  # picked at least once in m = 2 draws
        want[c] = -((x[0] - means[c]) ** 2).sum() / 2 + sum(
            math.log(pi[j]) if j in nbs else math.log(1 - pi[j]) for j in range(40))
    np.testing.assert_allclose(scores[0], want, rtol=1e-9)
    # Theorem 5: an edge to a node of the other class moves the posterior towards that class
    u = np.flatnonzero(graph.labels == 1)[0]
    assert step[u, 1] - step[u, 0] > 0


def test_cba_new_nodes_attach_as_the_process_says():
    from grb_dist.datasets.csbm import CBAConfig, cba_attachment, sample_cba_new_nodes

    config, graph, means = _tiny_cba_graph()
    one = CBAConfig(**{**config.__dict__, "m": 1})
    _, y, nb_node, nb_base = sample_cba_new_nodes(graph, one, means, 40000, seed=0)
    assert np.bincount(nb_node, minlength=40000).tolist() == [1] * 40000  # m = 1: one edge each
    p = cba_attachment(graph, one)
    for c in range(2):
        freq = np.bincount(nb_base[y[nb_node] == c], minlength=40) / (y == c).sum()
        np.testing.assert_allclose(freq, p[c], atol=0.01)
    _, _, nb_node2, nb_base2 = sample_cba_new_nodes(graph, config, means, 500, seed=0)
    pairs = set(zip(nb_node2.tolist(), nb_base2.tolist()))
    assert len(pairs) == nb_node2.size and np.bincount(nb_node2).max() <= 2  # repeats merged


def test_cba_study_unit_has_a_bayes_reference(tmp_path):
    spec = load_spec(None, **{**TINY, "graph": {"kind": "cba", "num_nodes": 150, "num_classes": 2,
                                                  "num_features": 8, "m": 2}})
    rows = run_unit(spec, Unit(1.0, 0, "gcn", "l2-weak"))
    assert set(rows["g_clean"]) <= {0, 1} and (rows["degree"] >= 1).all()
    assert np.isfinite(rows["g_flip"]).any()  # edges to the other class change the Bayes decision
    assert load_spec(Path("grb_dist/jobs/studies/over-robustness-cba.yaml")).kind == "cba"


def test_per_k_settings_override_the_models_at_that_k():
    spec = load_spec(None, **{**TINY, "K": [0.5, 1.0], "per_K": {0.5: {"gcn": {"dropout": 0.9}}}})
    assert spec.models_at(0.5)["gcn"] == {"hidden_sizes": [8], "dropout": 0.9}
    assert spec.models_at(1.0)["gcn"] == {"hidden_sizes": [8]}
    for per_k, message in [({2.0: {"gcn": {}}}, "not one of the study's K"),
                           ({0.5: {"sage": {}}}, "not in models"),
                           ({0.5: {"gcn": {"no_such": 1}}}, "no_such")]:
        with pytest.raises(ConfigError, match=message):
            load_spec(None, **{**TINY, "K": [0.5, 1.0], "per_K": per_k})


def test_tune_picks_the_best_setting_per_k_and_fills_lp_variants():
    from grb_dist.semantics import search as sr
    from grb_dist.semantics import tune as st

    assert sr.grid({"b": [1, 2], "a": [0]}) == [{"a": 0, "b": 1}, {"a": 0, "b": 2}]
    spec = load_spec(None, **{**TINY, "K": [0.5, 1.0], "models": {
        "gcn": {"hidden_sizes": [8]}, "lp": {"alpha": 0.7, "iterations": 10},
        "gcn_lp": {"hidden_sizes": [8], "lp": {"alpha": 0.7, "iterations": 10}}}})
    table = pd.DataFrame({"K": [0.5, 0.5, 0.5, 1.0, 1.0], "model": ["gcn", "gcn", "lp", "gcn", "gcn"],
                          "setting": [{"dropout": 0.0, "lr": 0.1}, {"dropout": 0.5, "lr": 0.1}, {"alpha": 0.9},
                                      {"dropout": 0.0, "lr": 0.1}, {"dropout": 0.5, "lr": 0.1}],
                          "val_accuracy": [0.7, 0.8, 0.6, 0.9, 0.8], "best": [False, True, True, True, False]})
    per_k = st.per_k_section(spec, table)
    assert per_k[0.5]["gcn"] == {"dropout": 0.5, "train": {"lr": 0.1}}
    assert per_k[0.5]["lp"] == {"alpha": 0.9}
    # Model+LP: the model's best and LP's best alpha (its other LP settings kept)
    assert per_k[0.5]["gcn_lp"] == {"dropout": 0.5, "train": {"lr": 0.1}, "lp": {"alpha": 0.9, "iterations": 10}}
    assert per_k[1.0]["gcn_lp"] == {"dropout": 0.0, "train": {"lr": 0.1}}
    tuned = load_spec(None, **{**TINY, "K": [0.5, 1.0], "models": spec.models, "per_K": per_k})
    assert tuned.models_at(0.5)["gcn"]["dropout"] == 0.5 and tuned.models_at(1.0)["gcn"]["dropout"] == 0.0


def test_study_tune_cli_writes_a_tuned_job(tmp_path):
    import yaml

    job = {**TINY, "study": "tiny-tune", "search": {"gcn": {"dropout": [0.0, 0.9]}, "lp": {"alpha": [0.1, 0.9]}}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    out = tmp_path / "tuned.yaml"
    result = CliRunner().invoke(app, ["study-tune", str(out), "--job", str(path), "--graphs", "1", "--no-ray"])
    assert result.exit_code == 0, result.output
    tuned = load_spec(out)
    assert set(tuned.per_K) == {1.0} and set(tuned.per_K[1.0]) == {"gcn", "lp"}
    assert tuned.per_K[1.0]["lp"]["alpha"] in (0.1, 0.9) and "val accuracy" in result.output
    assert tuned.models == load_spec(path).models  # the job's own settings are kept
    # "-": the tuned job alone on standard output (the table on standard error), no file named "-"
    runner = CliRunner(mix_stderr=False) if "mix_stderr" in CliRunner.__init__.__code__.co_varnames else CliRunner()
    result = runner.invoke(app, ["study-tune", "-", "--job", str(path), "--graphs", "1", "--no-ray"],
                           catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["per_K"] == yaml.safe_load(out.read_text())["per_K"]
    assert "val accuracy" in result.stderr and not (Path.cwd() / "-").exists()
    # errors before any work, nothing written
    for extra, message in [({"search": {"gcn_lp": {"dropout": [0.1]}},
                             "models": {**TINY["models"], "gcn_lp": {"hidden_sizes": [8]}}}, "takes the best settings"),
                           ({"search": {"sage": {"dropout": [0.1]}}}, "not in the study's models"),
                           ({"search": {"gcn": {"dropout": []}}}, "non-empty list"),
                           ({"search": {"gcn": {"no_such": [1]}}}, "no_such")]:
        path.write_text(yaml.safe_dump({**job, **extra}))
        bad = tmp_path / "bad.yaml"
        result = CliRunner().invoke(app, ["study-tune", str(bad), "--job", str(path), "--no-ray"])
        assert result.exit_code != 0 and message in result.output and not bad.exists(), result.output


def test_sigterm_stops_study_tune_with_nothing_written(tmp_path, monkeypatch):
    """SIGTERM while settings train: the interrupt message, exit 143, no tuned job."""
    import os
    import signal

    import yaml

    import grb_dist.semantics.tune as tune_module

    job = {**TINY, "study": "tiny-tune-sigterm", "search": {"gcn": {"dropout": [0.0, 0.9]}}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    real, ran = tune_module.score, []

    def score_then_sigterm(*args):
        ran.append(args)
        if len(ran) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*args)

    monkeypatch.setattr(tune_module, "score", score_then_sigterm)
    out = tmp_path / "tuned.yaml"
    before = signal.getsignal(signal.SIGTERM)
    result = CliRunner().invoke(app, ["study-tune", str(out), "--job", str(path), "--graphs", "1", "--no-ray"])
    assert result.exit_code == 143, result.output
    assert "interrupted: nothing was written" in result.output and len(ran) == 2
    assert not out.exists() and signal.getsignal(signal.SIGTERM) == before


def test_overridden_models_and_k_narrow_the_jobs_per_k_and_search(tmp_path):
    import yaml

    shipped = load_spec(Path("grb_dist/jobs/studies/over-robustness-csbm.yaml"), models={"gcn": {"hidden_sizes": [8]}})
    assert set(shipped.search) == {"gcn"}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**TINY, "K": [0.5, 1.0], "per_K": {0.5: {"gcn": {"dropout": 0.1}, "lp": {"alpha": 0.2}}}}))
    assert load_spec(path, K=[1.0]).per_K == {}
    assert load_spec(path, models={"gcn": {}}).per_K == {0.5: {"gcn": {"dropout": 0.1}}}
    path.write_text(yaml.safe_dump({**TINY, "per_K": {3.0: {"gcn": {}}}}))  # the job's own mistake is named
    with pytest.raises(ConfigError, match="not one of the study's K"):
        load_spec(path)


def test_a_study_directory_holds_one_setting_and_shows_the_last_run(tmp_path):
    spec = load_spec(None, **TINY)
    said: list[str] = []
    directory = run_study(spec, tmp_path, use_ray=False, progress=said.append)
    assert len(list((directory / "nodes").glob("*.parquet"))) == 3
    assert said[0].endswith("3 units, 0 done, 3 to run") and said[-1].startswith("[3/3] K=1 graph=0 ")
    assert all(line.endswith("left)") for line in said[1:])  # elapsed time and what is left
    # fewer models: their units are the same files (nothing re-run), the tables show them only
    fewer = load_spec(None, **{**TINY, "models": {"gcn": TINY["models"]["gcn"]}})
    assert pending_units(fewer, tmp_path) == []
    run_study(fewer, tmp_path, use_ray=False)
    assert set(pd.read_parquet(directory / "metrics.parquet")["model"]) == {"gcn"}
    assert set(read_nodes(directory)["model"]) == {"gcn"}
    # another model setting is another unit; other shared settings are refused before any work
    other = load_spec(None, **{**TINY, "models": {"gcn": {"hidden_sizes": [4]}}})
    assert len(pending_units(other, tmp_path)) == 1
    with pytest.raises(ConfigError, match="other settings .*nodes"):
        run_study(load_spec(None, **{**TINY, "nodes": 13}), tmp_path, use_ray=False)
    assert len(list((directory / "nodes").glob("*.parquet"))) == 3
    # a directory none of whose files has an id of its study.json (written before unit ids
    # named only the unit's own model) is read whole
    import json

    stored = json.loads((directory / "study.json").read_text())
    stored["models"] = {"gcn": {"hidden_sizes": [16]}}
    (directory / "study.json").write_text(json.dumps(stored))
    assert set(read_nodes(directory)["model"]) == {"gcn", "lp", "mlp"}


@pytest.fixture(scope="module")
def one_k_study(tmp_path_factory) -> Path:
    """The TINY study (one K), run here without Ray, tables and figures written."""
    return run_study(load_spec(None, **TINY), tmp_path_factory.mktemp("one-k"), use_ray=False)


def _significant(text: str) -> int:
    return len(text.lstrip("-").split("e")[0].replace(".", "").lstrip("0"))


def test_study_csv_files_name_every_column_and_round_floats(one_k_study):
    """table2.csv's first column is ``budget`` (it had no name), its K columns ``K=<value>``
    as in the report; every CSV of a study writes floats to 6 significant digits while
    metrics.parquet keeps full precision."""
    t2 = pd.read_csv(one_k_study / "table2.csv", dtype=str)
    assert list(t2.columns) == ["budget", "K=1"] and list(t2["budget"]) == ["1", "deg", "deg+2"]
    for name in ("metrics.csv", "table1.csv", "table2.csv", "table2_paper.csv"):
        frame = pd.read_csv(one_k_study / name, dtype=str)
        assert not any(c.startswith("Unnamed") for c in frame.columns), (name, list(frame.columns))
        numbers = [v for c in frame.columns if c not in ("model", "attack", "budget") for v in frame[c].dropna()]
        assert max(_significant(v) for v in numbers) <= 6, (name, numbers)
    precise = pd.read_parquet(one_k_study / "metrics.parquet")["R"]
    assert any(_significant(repr(float(v))) > 6 for v in precise)  # full precision stays in Parquet
    rounded = pd.read_csv(one_k_study / "metrics.csv")["R"]
    np.testing.assert_allclose(rounded, precise, rtol=5e-6)


def test_charts_of_one_k_are_bars_and_of_several_ks_lines(one_k_study, monkeypatch, tmp_path):
    """With one K, R_over vs K is a bar per model (a dot per model at K=1 on an axis from
    0.96 to 1.04 said nothing); with two K values it stays a line per model."""
    from grb_dist.semantics import plots

    saved = []
    monkeypatch.setattr(plots, "_save", lambda plt, fig, path: saved.append(fig.axes[0]) or path)
    nodes = read_nodes(one_k_study)
    assert plots.plot_over_robustness(nodes, tmp_path / "one.png") is not None
    ax = saved.pop()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["gcn", "lp", "mlp"]
    assert len(ax.patches) == 3 and ax.get_legend() is None and "1 only" in ax.get_xlabel()
    two = pd.concat([nodes, nodes.assign(K=2.0)], ignore_index=True)
    plots.plot_over_robustness(two, tmp_path / "two.png")
    ax = saved.pop()
    assert not ax.patches and len(ax.get_legend().get_texts()) == 3 and ax.get_xlabel().startswith("K (")
    # the same for the degree chart when every node has one degree
    three = nodes[nodes["degree"] == 3]
    plots.plot_degree_robustness(three, tmp_path / "degree.png")
    ax = saved.pop()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["gcn", "lp", "mlp", "semantic boundary (Bayes)"]
    assert len(ax.patches) == 4 and "3 only" in ax.get_xlabel()


def test_sigterm_stops_a_study_as_ctrl_c_does(tmp_path, monkeypatch):
    """SIGTERM after the first unit: the interrupt message, exit 143, the finished unit kept
    whole; the re-run does only the other units."""
    import os
    import signal

    import yaml

    import grb_dist.semantics.run as study_run

    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({**TINY, "study": "tiny-sigterm"}))
    real = study_run.run_unit
    ran = []

    def unit_then_sigterm(spec, unit, cache):
        ran.append(unit)
        if len(ran) == 2:  # the first unit's rows are written: SIGTERM as the second starts
            os.kill(os.getpid(), signal.SIGTERM)
        return real(spec, unit, cache)

    monkeypatch.setattr(study_run, "run_unit", unit_then_sigterm)
    args = ["study", "--job", str(job), "--out", str(tmp_path / "out"), "--no-ray", "--no-plots"]
    before = signal.getsignal(signal.SIGTERM)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 143, result.output
    assert "interrupted: finished units are kept; run the same command again to resume" in result.output
    assert signal.getsignal(signal.SIGTERM) == before
    nodes = tmp_path / "out" / "tiny-sigterm" / "nodes"
    kept = sorted(nodes.glob("*.parquet"))
    assert len(kept) == 1 and len(ran) == 2 and not [p for p in nodes.iterdir() if p.name.startswith(".")]
    monkeypatch.setattr(study_run, "run_unit", real)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "3 units, 1 done, 2 to run" in result.output
    assert len(list(nodes.glob("*.parquet"))) == 3


def test_table2_populations_differ_exactly_by_the_mlp_correct_filter():
    """A hand-made table: the caption's population counts every node the Bayes classifier
    gets right (degree > 0); the paper's keeps of those only the nodes the attacked MLP also
    gets right, from the MLP's rows."""
    from grb_dist.semantics.tables import table2

    rows = []
    # node: (label, g_clean, f_clean of the MLP, degree, g_flip); K = 1, one graph
    nodes = {0: (0, 0, 0, 2, 1), 1: (0, 0, 1, 2, 1), 2: (1, 1, 1, 3, 3), 3: (1, 1, 0, 3, 2),
             4: (1, 0, 1, 2, 1), 5: (0, 0, 0, 0, 1)}
    for node, (label, g, f, deg, flip) in nodes.items():
        for model, pred in (("mlp", f), ("gcn", label)):
            rows.append(dict(study="s", K=1.0, graph_seed=0, model=model, attack="l2-weak", node=node, target_class=1 - label,
                             degree=deg, label=label, f_clean=pred, g_clean=g, g_features=g, f_flip=9, g_flip=flip,
                             steps=10, val_accuracy=1.0))
    frame = pd.DataFrame(rows)
    caption = table2(frame, ["1", "2"])
    paper = table2(frame, ["1", "2"], population="paper")
    # caption: nodes 0, 1, 2, 3 (4: g wrong, 5: degree 0); flips within 1: nodes 0, 1 -> 2/4; within 2: 0, 1, 3 -> 3/4
    assert caption.loc["1", 1.0] == pytest.approx(2 / 4) and caption.loc["2", 1.0] == pytest.approx(3 / 4)
    # paper: of those, the MLP is right on 0 and 2 only -> within 1: node 0 -> 1/2; within 2: node 0 -> 1/2
    assert paper.loc["1", 1.0] == pytest.approx(1 / 2) and paper.loc["2", 1.0] == pytest.approx(1 / 2)
    without_mlp = frame[frame["model"] != "mlp"]
    assert table2(without_mlp, ["1"], population="paper").empty and not table2(without_mlp, ["1"]).empty
    with pytest.raises(ConfigError, match="population"):
        table2(frame, ["1"], population="all")
