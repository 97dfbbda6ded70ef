"""Degree-corrected CSBM and the calibrated ``csbm-grb-*`` twins (fast, tiny scale)."""

import hashlib

import numpy as np
import pytest

from grb_dist.datasets.csbm import CSBMConfig, bayes_predict, sample_csbm, sample_inductive_nodes
from grb_dist.datasets.split import grb_split
from grb_dist.errors import ConfigError


def _band_degrees(g):
    deg = g.degrees()
    g = g.with_split(grb_split(deg, seed=0))
    return {d: deg[g.targets(d)].mean() for d in ("easy", "medium", "hard")}


def test_plain_csbm_is_unchanged_by_the_degree_option():
    # The embedded default dataset's graph, as generated before degree correction existed.
    cfg = CSBMConfig(num_nodes=2000, num_classes=4, num_features=32, K=1.5, deg_same=4.0, deg_diff=1.0)
    g, _ = sample_csbm(cfg, seed=0)
    digest = hashlib.sha256(g.edge_index.tobytes() + g.features.tobytes() + g.labels.tobytes()).hexdigest()
    assert digest.startswith("928318cddafa075e")


@pytest.mark.parametrize("spread", [0.5, 1.0])
def test_degree_corrected_csbm_keeps_edge_counts_and_homophily(spread):
    cfg = CSBMConfig(num_nodes=20000, num_classes=6, num_features=4, deg_same=6.0, deg_diff=3.0, degree_spread=spread)
    g, _ = sample_csbm(cfg, seed=3)
    expected = cfg.num_nodes * (cfg.deg_same + cfg.deg_diff) / 2
    assert abs(g.num_edges - expected) < 4 * np.sqrt(expected)
    ei = g.edge_index
    assert (g.labels[ei[0]] == g.labels[ei[1]]).mean() == pytest.approx(cfg.homophily, abs=0.01)
    assert (ei[0] != ei[1]).all()
    keys = ei[0] * g.num_nodes + ei[1]
    assert np.unique(keys).size == keys.size
    # degrees are spread out: the hard band's mean degree is several times the easy band's,
    # where the plain CSBM's Poisson degrees differ by less than 2x.
    plain = _band_degrees(sample_csbm(CSBMConfig(**{**cfg.__dict__, "degree_spread": 0.0}), seed=3)[0])
    bands = _band_degrees(g)
    assert plain["hard"] / plain["easy"] < 2.0
    assert bands["hard"] / bands["easy"] > (2.5 if spread == 0.5 else 5.0)


def test_degree_corrected_config_refuses_plain_model_tools():
    cfg = CSBMConfig(num_nodes=300, num_classes=3, num_features=4, degree_spread=0.5)
    g, means = sample_csbm(cfg, seed=0)
    with pytest.raises(ConfigError, match="degree-corrected"):
        bayes_predict(g, cfg, means, np.arange(5))
    with pytest.raises(ConfigError, match="degree-corrected"):
        sample_inductive_nodes(g, cfg, means, num_new=5)
    with pytest.raises(ConfigError):
        CSBMConfig(degree_spread=-0.1)
