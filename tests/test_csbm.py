import numpy as np
import pytest

from grb_dist.datasets.csbm import (
    CBAConfig, CSBMConfig, bayes_predict, class_means, sample_cba, sample_csbm, sample_inductive_nodes,
)
from grb_dist.core.errors import ConfigError


def _stats(g):
    ei = g.edge_index
    same = g.labels[ei[0]] == g.labels[ei[1]]
    return g.num_edges, same.mean()


def test_csbm_edge_counts_homophily_and_balance():
    cfg = CSBMConfig(num_nodes=4000, num_classes=4, num_features=8, deg_same=6.0, deg_diff=2.0)
    g, means = sample_csbm(cfg, seed=1)
    n_edges, homophily = _stats(g)
    expected = cfg.num_nodes * (cfg.deg_same + cfg.deg_diff) / 2
    # binomial edge counts: within 4 standard deviations
    assert abs(n_edges - expected) < 4 * np.sqrt(expected)
    assert homophily == pytest.approx(6.0 / 8.0, abs=0.02)
    counts = np.bincount(g.labels, minlength=4) / cfg.num_nodes
    assert np.abs(counts - 0.25).max() < 0.03
    ei = g.edge_index
    assert (ei[0] != ei[1]).all()
    keys = ei[0] * g.num_nodes + ei[1]
    assert np.unique(keys).size == keys.size
    assert means.shape == (4, 8)


def test_class_means_are_k_sigma_apart():
    for c, d in ((2, 10), (5, 20), (6, 3)):
        m = class_means(c, d, K=2.0, sigma=1.5, seed=0)
        dist = np.linalg.norm(m[:, None] - m[None], axis=-1)[np.triu_indices(c, 1)]
        if d >= c or c == 2:
            np.testing.assert_allclose(dist, 3.0, rtol=1e-6)
        else:
            assert dist.mean() == pytest.approx(3.0, rel=0.5)


def test_csbm_is_seeded():
    cfg = CSBMConfig(num_nodes=500)
    a, _ = sample_csbm(cfg, seed=7)
    b, _ = sample_csbm(cfg, seed=7)
    c, _ = sample_csbm(cfg, seed=8)
    np.testing.assert_array_equal(a.edge_index, b.edge_index)
    np.testing.assert_array_equal(a.features, b.features)
    assert a.edge_index.shape != c.edge_index.shape or not np.array_equal(a.edge_index, c.edge_index)


def test_inductive_nodes_follow_the_model():
    cfg = CSBMConfig(num_nodes=3000, num_classes=3, num_features=8, deg_same=6.0, deg_diff=1.5)
    g, means = sample_csbm(cfg, seed=0)
    g2 = sample_inductive_nodes(g, cfg, means, num_new=600, seed=1)
    assert g2.num_nodes == 3600
    np.testing.assert_array_equal(g2.features[:3000], g.features)
    new = np.arange(3000, 3600)
    deg = g2.degrees()[new]
    # every earlier node (3000 original + the other new ones) is a candidate neighbour
    assert deg.mean() == pytest.approx(7.5 * 3599 / 2999, rel=0.1)
    ei = g2.edge_index
    sel = ei[0] >= 3000
    same = g2.labels[ei[0][sel]] == g2.labels[ei[1][sel]]
    assert same.mean() == pytest.approx(0.8, abs=0.05)
    # original edges are all kept
    old = set(map(tuple, g.edge_index.T.tolist()))
    assert old <= set(map(tuple, ei.T.tolist()))


def test_bayes_classifier_beats_feature_only_and_uses_structure():
    cfg = CSBMConfig(num_nodes=2000, num_classes=2, num_features=16, K=1.0, deg_same=6.0, deg_diff=1.0)
    g, means = sample_csbm(cfg, seed=0)
    nodes = np.arange(2000)
    acc = (bayes_predict(g, cfg, means, nodes) == g.labels).mean()
    feat_only = (np.argmin(((g.features[:, None] - means[None]) ** 2).sum(-1), 1) == g.labels).mean()
    # Gosch et al. 2023, Table 1: K = 1.0 gives about 68% from features and far more with structure
    assert 0.6 < feat_only < 0.76
    assert acc > feat_only + 0.1


def test_cba_power_law_and_homophily():
    cfg = CBAConfig(num_nodes=1500, num_classes=2, m=3, affinity_same=0.9, affinity_diff=0.1)
    g, _ = sample_cba(cfg, seed=0)
    deg = g.degrees()
    assert deg.max() > 8 * np.median(deg)  # heavy tail of preferential attachment
    assert _stats(g)[1] > 0.7
    assert g.num_edges <= cfg.m * cfg.num_nodes


@pytest.mark.parametrize("kw", [dict(num_classes=1), dict(num_nodes=3), dict(sigma=0.0), dict(deg_same=5000.0, num_nodes=100)])
def test_csbm_bad_parameters(kw):
    with pytest.raises(ConfigError):
        CSBMConfig(**kw)
