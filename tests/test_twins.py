"""Degree-corrected CSBM and the calibrated ``csbm-grb-*`` twins (fast, tiny scale)."""

import hashlib

import numpy as np
import pytest

from grb_dist.datasets.csbm import CSBMConfig, bayes_predict, sample_csbm, sample_inductive_nodes
from grb_dist.datasets.split import grb_split
from grb_dist.core.errors import ConfigError


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


# --- the catalogue's calibrated twins -------------------------------------------------------

from grb_dist.datasets import CATALOG, load_dataset  # noqa: E402
from grb_dist.datasets.catalog import GRB_DATASETS, TWIN_PARAMS  # noqa: E402

#: Mean test-node degree of the real graphs, Easy / Hard (GRB, Zheng et al. 2021, Table 4).
_TABLE4_EASY_HARD = {"grb-cora": (1.53, 5.23), "grb-citeseer": (1.01, 3.82), "grb-flickr": (5.00, 11.03),
                     "grb-reddit": (29.23, 150.99), "grb-aminer": (1.99, 13.25)}


@pytest.mark.parametrize("real", GRB_DATASETS, ids=lambda d: d.name)
def test_twin_keeps_the_real_counts_and_the_requested_parameters(real):
    twin = CATALOG.get(f"csbm-{real.name}")
    cfg = twin.csbm
    assert (twin.nodes, twin.edges, twin.features, twin.classes) == (real.nodes, real.edges, real.features, real.classes)
    assert (cfg.num_nodes, cfg.num_features, cfg.num_classes) == (real.nodes, real.features, real.classes)
    # expected undirected edges N (deg_same + deg_diff) / 2 = the real edge count
    assert cfg.num_nodes * (cfg.deg_same + cfg.deg_diff) / 2 == pytest.approx(real.edges, rel=1e-9)
    params = TWIN_PARAMS[real.name]
    assert cfg.homophily == pytest.approx(params["homophily"])
    assert (cfg.K, cfg.degree_spread) == (params["K"], params["degree_spread"])


@pytest.mark.parametrize("name", ["grb-cora", "grb-citeseer", "grb-flickr"])
def test_twin_at_reduced_size_has_the_real_graphs_degree_bands(name):
    # Generated with 4,000 nodes and the twin's expected degrees: the homophily is the requested
    # one and the hard / easy band degree ratio is within a factor 2 of the real graph's.
    cfg = CATALOG.get(f"csbm-{name}").csbm
    g, _ = sample_csbm(CSBMConfig(**{**cfg.__dict__, "num_nodes": 4000, "num_features": 4}), seed=0)
    ei = g.edge_index
    assert (g.labels[ei[0]] == g.labels[ei[1]]).mean() == pytest.approx(cfg.homophily, abs=0.03)
    bands = _band_degrees(g)
    easy, hard = _TABLE4_EASY_HARD[name]
    assert 0.5 < (bands["hard"] / bands["easy"]) / (hard / easy) < 2.0


def test_cora_twin_is_neither_trivial_nor_random_for_a_gcn():
    import torch

    from grb_dist.evaluation.evaluate import evaluate
    from grb_dist.models.train import TrainConfig, train

    torch.set_num_threads(1)
    g = load_dataset("csbm-grb-cora", seed=0)
    model = train("gcn", g, {"hidden_sizes": [64, 64, 64]}, TrainConfig(seed=0, epochs=40)).model
    acc = evaluate(model, g)
    # calibrated to GRB's clean GCN accuracy on grb-cora (about 0.84 full): far from 1/7 and from 1
    assert 0.70 < acc["full"] < 0.95
    assert acc["easy"] < acc["hard"]  # low-degree targets get less help from the structure
