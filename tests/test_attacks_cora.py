"""Injection attacks on the real cora-legacy graph (GRB layout, 2,708 nodes).

One GCN surrogate (seed 0) and one separately seeded GCN target (seed 1) are trained once
for the module. Full difficulty, 60 injected nodes x 20 edges, feature limits = the
normalised features' own min and max (null limits), black-box transfer: every optimising
attack must cut the target's accuracy by at least 20 points; RND by less than any of them.

Step counts are shorter than GRB's 1000 to keep the test fast; the step sizes are larger
accordingly (sign steps of 0.1 reach the limits of cora-legacy's ~[-0.07, 0.93] box in 10
steps).
"""

from __future__ import annotations


import numpy as np
import pytest
import torch

from grb_dist.attacks import audit_injection, build_attack, resolve_feature_limits
from grb_dist.datasets import load_dataset
from grb_dist.evaluation.evaluate import evaluate
from grb_dist.models.train import TrainConfig, train

BUDGET = dict(n_inject=60, edges_per_node=20, feat_lim_min=None, feat_lim_max=None, seed=0)
SETTINGS = {
    "rnd": {},
    "fgsm": dict(steps=10, step_size=0.1),
    "pgd": dict(steps=10, step_size=0.1),
    "speit": dict(steps=10, step_size=0.1),
    "tdgia": dict(steps=5, step_size=0.2, sequential_step=0.2),  # 5 rounds x 5 steps
}
OPTIMISING = ("fgsm", "pgd", "speit", "tdgia")


@pytest.fixture(scope="module")
def cora(cora_legacy):
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    g = load_dataset(cora_legacy)
    params = {"hidden_sizes": [64, 64, 64]}
    surrogate = train("gcn", g, params, TrainConfig(seed=0)).model
    target = train("gcn", g, params, TrainConfig(seed=1)).model
    clean = evaluate(target, g)["full"]
    return g, surrogate, target, clean


@pytest.fixture(scope="module")
def results(cora):
    g, surrogate, target, clean = cora
    snapshot = (g.features.copy(), g.edge_index.copy(), g.labels.copy())
    out = {}
    for name, extra in SETTINGS.items():
        attack = build_attack(name, {**BUDGET, **extra})
        inj = attack.attack(g, surrogate, g.targets("full"))
        out[name] = (attack, inj, evaluate(target, g, inj)["full"])
    return out, snapshot


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_attack_passes_audit_on_cora(name, cora, results):
    g = cora[0]
    attack, inj, _ = results[0][name]
    lo, hi = resolve_feature_limits(attack.config, g)
    assert (lo, hi) == (float(g.features.min()), float(g.features.max()))
    audit_injection(g, inj, n_inject=60, edges_per_node=20, feat_min=lo, feat_max=hi, targets=g.targets("full"))
    assert inj.features.shape == (60, g.num_features) and inj.edges.shape == (2, 1200)


def test_graph_unchanged_by_attacks(cora, results):
    g = cora[0]
    x, ei, y = results[1]
    np.testing.assert_array_equal(g.features, x)
    np.testing.assert_array_equal(g.edge_index, ei)
    np.testing.assert_array_equal(g.labels, y)


def test_black_box_attacks_are_effective(cora, results):
    clean = cora[3]
    acc = {name: r[2] for name, r in results[0].items()}
    report = ", ".join(f"{k} {v:.4f}" for k, v in acc.items())
    assert clean > 0.8, f"clean target accuracy {clean:.4f}"
    for name in OPTIMISING:
        assert clean - acc[name] >= 0.20, f"{name} too weak: clean {clean:.4f}; attacked {report}"
    assert clean - acc["rnd"] < min(clean - acc[n] for n in OPTIMISING), report
