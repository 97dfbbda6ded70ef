"""Nettack (grb_dist.attacks.targeted): the closed-form scores against a plain recomputation of
the surrogate, the two unnoticeability tests against the paper's formulas written out here,
the threat model of direct and influencer attacks, and its strength against random flips."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from grb_dist.attacks.targeted import nettack as nt
from grb_dist.attacks.targeted.plausibility import DegreeTest, cooccurrence_allowed, degree_stats
from grb_dist.core.errors import ConfigError
from tests.helpers import tiny_csbm


def random_graph(n: int = 14, d: int = 7, c: int = 3, p: float = 0.22, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = np.triu((rng.random((n, n)) < p).astype(float), 1)
    a = a + a.T
    a[0, :] = a[:, 0] = 0  # node 0: a leaf on node 1 (removals there would leave singletons)
    a[0, 1] = a[1, 0] = 1
    x = (rng.random((n, d)) < 0.4).astype(float)
    return a, x, rng.normal(size=(d, c)), rng.normal(size=c)


def flipped(a: np.ndarray, m: int, n: int) -> np.ndarray:
    out = a.copy()
    out[m, n] = out[n, m] = 1 - out[m, n]
    return out


@pytest.mark.parametrize("target", [0, 1, 5])
@pytest.mark.parametrize("with_bias", [False, True])
def test_flip_logits_equal_a_recomputation_for_every_pair(target, with_bias):
    """Every pair of the graph, touching the target or not: the closed-form logits of the
    target after the flip equal Â'² (X W + b) recomputed from the flipped adjacency."""
    a, x, w, b = random_graph(seed=target)
    b = b if with_bias else None
    z = x @ w + (0 if b is None else b)
    step = nt._Step(sp.csr_matrix(a), z, target)
    m, n = (arr.ravel() for arr in np.meshgrid(np.arange(a.shape[0]), np.arange(a.shape[0]), indexing="ij"))
    keep = m != n
    m, n = m[keep], n[keep]
    got = nt.flip_logits(step, m, n)
    want = np.stack([nt.surrogate_logits(sp.csr_matrix(flipped(a, i, j)), x, w, b)[target] for i, j in zip(m, n)])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(step.logits(), nt.surrogate_logits(sp.csr_matrix(a), x, w, b)[target], atol=1e-12)


def test_feature_flip_margins_equal_a_recomputation():
    a, x, w, _ = random_graph(seed=3)
    target, label = 2, 1
    nodes = np.array([2, 4, 7])
    step = nt._Step(sp.csr_matrix(a), x @ w, target)
    got = nt.feature_flip_margins(step, w, nodes, x[nodes], label)
    for i, node in enumerate(nodes):
        for j in range(x.shape[1]):
            x2 = x.copy()
            x2[node, j] = 1 - x2[node, j]
            want = nt.margins_of(nt.surrogate_logits(sp.csr_matrix(a), x2, w)[target], label)
            assert got[i, j] == pytest.approx(want, abs=1e-12)


def paper_log_likelihood(degrees) -> float:
    """Eq. 6 and 7 of Zügner et al. (2018), written out over the degrees >= d_min = 2."""
    d = np.array([v for v in degrees if v >= 2], dtype=float)
    alpha = 1 + len(d) / (sum(math.log(v) for v in d) - len(d) * math.log(2 - 0.5))
    return len(d) * math.log(alpha) + len(d) * alpha * math.log(2) - (alpha + 1) * sum(math.log(v) for v in d)


def test_degree_test_is_the_papers_likelihood_ratio():
    clean = np.array([1, 2, 2, 3, 3, 3, 4, 5, 6, 9])
    test = DegreeTest(clean, cutoff=0.004)
    assert test.ll0 == pytest.approx(paper_log_likelihood(clean))
    # every pair flipped alone, adding or removing, against the statistic written out
    m, n = (arr.ravel() for arr in np.meshgrid(np.arange(10), np.arange(10), indexing="ij"))
    keep = m < n
    m, n = m[keep], n[keep]
    for delta_value in (1.0, -1.0):
        delta = np.full(m.size, delta_value)
        count, logsum = test.after_flips(clean, m, n, delta)
        stat = test.statistic(count, logsum)
        for k in range(m.size):
            new = clean.astype(float).copy()
            new[[m[k], n[k]]] += delta_value
            assert (count[k], logsum[k]) == pytest.approx(degree_stats(new))
            pooled = np.concatenate([clean, new])
            want = -2 * paper_log_likelihood(pooled) + 2 * (paper_log_likelihood(clean) + paper_log_likelihood(new))
            assert stat[k] == pytest.approx(want, rel=1e-9, abs=1e-9)
        assert np.array_equal(test.allows(clean, m, n, delta), stat < 0.004)
    # the unperturbed sequence is the pooled one doubled: no evidence of a change
    assert test.statistic(*degree_stats(clean)) == pytest.approx(0.0, abs=1e-9)


def test_degree_test_rejects_a_hub_and_keeps_small_changes():
    rng = np.random.default_rng(0)
    clean = np.maximum(1, np.round(rng.pareto(1.5, 2000) + 1)).astype(int)
    test = DegreeTest(clean)
    grown = clean.copy()
    grown[:200] += 30  # 200 nodes gain 30 edges: a visibly different distribution
    assert test.statistic(*degree_stats(grown)) > 0.004
    one = clean.copy()
    one[np.argmax(clean)] += 1
    assert test.statistic(*degree_stats(one)) < 0.004


def test_cooccurrence_filter_on_a_hand_sized_matrix():
    """Features 0-1, 1-2 and 3-4 co-occur (degrees 1, 2, 1, 1, 1); feature 5 never does.
    Node 2 ({3}): sigma 0.5, feature 4 reaches 1/1 -> allowed. Node 4 ({1}): sigma 0.25,
    features 0 and 2 reach 1/2 -> allowed. Node 0 ({0, 1}): sigma 0.75, feature 2 reaches
    only 1/2 -> nothing. Node 5 ({5}): its feature co-occurs with nothing -> nothing."""
    rows = [{0, 1}, {1, 2}, {3}, {3, 4}, {1}, {5}]
    x = np.zeros((6, 6))
    for i, feats in enumerate(rows):
        x[i, list(feats)] = 1
    want = np.zeros((6, 6), dtype=bool)
    want[2, 4] = True
    want[4, [0, 2]] = True
    nodes = np.arange(6)
    assert np.array_equal(cooccurrence_allowed(x, nodes), want)
    assert np.array_equal(cooccurrence_allowed(sp.csr_matrix(x), nodes[::-1]), want[::-1])


def touched(result) -> set[int]:
    return {v for kind, m, n in result.perturbations for v in ((m, n) if kind == "edge" else (m,))}


@pytest.mark.parametrize("structure,features", [(True, False), (False, True), (True, True)])
def test_direct_attack_touches_only_the_target_within_budget(structure, features):
    a, x, w, _ = random_graph(n=20, seed=4)
    target, budget = 3, 6
    label = int(np.argmax(nt.surrogate_logits(sp.csr_matrix(a), x, w)[target]))
    cfg = nt.NettackConfig(structure=structure, features=features, cooc_constraint=False, ll_constraint=False)
    res = nt.nettack(sp.csr_matrix(a), x, w, target, label, budget, cfg)
    assert 0 < len(res.perturbations) <= budget
    assert all(m == target for _, m, _ in res.perturbations)
    assert structure or not res.edge_flips
    assert features or not res.feature_flips
    changed = np.argwhere(np.triu(res.adj.toarray() != a))
    assert len(changed) == len(res.edge_flips) and all(target in pair for pair in changed)
    assert set(map(tuple, np.argwhere(res.features != x))) == set(res.feature_flips)
    degree = np.asarray(res.adj.sum(axis=1)).ravel()
    assert np.all((degree > 0) | (a.sum(1) == 0))  # no node left without edges
    # the margins it reports are the surrogate's on the graphs it made
    assert res.margins[-1] == pytest.approx(nt.margins_of(nt.surrogate_logits(res.adj, res.features, w)[target], label))


@pytest.mark.parametrize("features", [False, True])
def test_influencer_attack_never_touches_the_target(features):
    a, x, w, _ = random_graph(n=24, p=0.25, seed=5)
    target = int(np.argmax(a.sum(1)))
    label = int(np.argmax(nt.surrogate_logits(sp.csr_matrix(a), x, w)[target]))
    cfg = nt.NettackConfig(direct=False, n_influencers=3, features=features, cooc_constraint=False,
                           ll_constraint=False)
    res = nt.nettack(sp.csr_matrix(a), x, w, target, label, 8, cfg)
    assert 0 < len(res.perturbations) <= 8
    assert target not in touched(res)
    assert set(res.influencers) <= set(np.flatnonzero(a[target])) and len(res.influencers) == 3
    assert all(m in set(res.influencers) for _, m, _ in res.perturbations)
    assert np.array_equal(res.adj.toarray()[target], a[target])
    assert features or len(res.edge_flips) == len(res.perturbations)
    assert res.margins[-1] < res.margins[0]


def test_degree_constraint_holds_for_every_applied_flip():
    g = tiny_csbm(n=200, seed=1)
    a = sp.csr_matrix((np.ones(g.edge_index.shape[1]), tuple(g.edge_index)), shape=(g.num_nodes,) * 2)
    w = np.random.default_rng(0).normal(size=(g.features.shape[1], int(g.labels.max()) + 1))
    target = int(np.argmax(g.degrees()))
    res = nt.nettack(a, g.features, w, target, int(g.labels[target]), 10, nt.NettackConfig(ll_cutoff=0.004))
    test = DegreeTest(g.degrees())
    assert test.statistic(*degree_stats(np.asarray(res.adj.sum(axis=1)).ravel())) < 0.004 or not res.perturbations
    assert len(set(res.edge_flips)) == len(res.edge_flips)


def test_nettack_lowers_the_margin_more_than_random_flips():
    g = tiny_csbm(n=300, seed=0)
    a = sp.csr_matrix((np.ones(g.edge_index.shape[1]), tuple(g.edge_index)), shape=(g.num_nodes,) * 2)
    train, val, test = g.split["train"], g.split["val"], g.split["test_full"]
    w1, w2 = nt.train_linear_gcn(a, g.features, g.labels, train, val, epochs=100, seed=0)
    w = w1 @ w2
    logits = nt.surrogate_logits(a, g.features, w)
    correct = test[logits[test].argmax(1) == g.labels[test]]
    assert correct.size >= 8, "the surrogate should classify most test nodes of a well separated CSBM"
    rng = np.random.default_rng(0)
    ours, rand = [], []
    for target in correct[:8]:
        target, label = int(target), int(g.labels[target])
        budget = int(g.degrees()[target]) + 2
        res = nt.nettack(a, g.features, w, target, label, budget, nt.NettackConfig(ll_constraint=False))
        ours.append(res.margins[-1])
        draws = []
        for _ in range(5):  # random flips of the target's pairs, same budget
            others = rng.choice(np.setdiff1d(np.arange(g.num_nodes), [target]), budget, replace=False)
            b = a.tolil(copy=True)
            for v in others:
                b[target, v] = b[v, target] = 1 - b[target, v]
            draws.append(nt.margins_of(nt.surrogate_logits(b.tocsr(), g.features, w)[target], label))
        rand.append(np.mean(draws))
    ours, rand = np.array(ours), np.array(rand)
    assert np.all(ours < rand), (ours, rand)
    assert np.mean(ours < 0) > np.mean(rand < 0) or np.mean(ours < 0) == 1.0


def test_config_and_inputs_are_checked():
    with pytest.raises(ConfigError, match="structure"):
        nt.NettackConfig(structure=False, features=False)
    with pytest.raises(ConfigError, match="n_influencers"):
        nt.NettackConfig(n_influencers=0)
    a, x, w, _ = random_graph()
    with pytest.raises(ConfigError, match="symmetric"):
        nt.nettack(sp.csr_matrix(np.triu(a)), x, w, 1, 0, 2)
    with pytest.raises(ConfigError, match="target"):
        nt.nettack(sp.csr_matrix(a), x, w, a.shape[0], 0, 2)
    isolated = a.copy()
    isolated[3, :] = isolated[:, 3] = 0
    with pytest.raises(ConfigError, match="influencers"):
        nt.nettack(sp.csr_matrix(isolated), x, w, 3, 0, 2, nt.NettackConfig(direct=False))
