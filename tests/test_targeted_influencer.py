"""Influencer attacks (Nettack's indirect attack, ``nettack: {direct: false}``): flips between
the target's neighbours and other nodes, never at the target; their pairs carry their
target (``removed_by`` / ``added_by``) through the audit, the store and the scorer."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from grb_dist.attacks.audit import audit_targeted
from grb_dist.attacks.registry import build_attack
from grb_dist.attacks.targeted.nettack import NettackConfig, nettack, train_linear_gcn
from grb_dist.core.errors import AuditError, ConfigError
from grb_dist.core.targeted import TargetedModification
from grb_dist.datasets.csbm import CSBMConfig, sample_csbm
from grb_dist.datasets.split import grb_split
from grb_dist.evaluation.targeted import TargetEvaluator
from grb_dist.models.tensors import graph_tensors
from grb_dist.models.train import TrainConfig, train
from grb_dist.store import RunLock, RunStore, schema

from helpers import whole_graph_outcomes

pytestmark = pytest.mark.usefixtures("one_thread")

FP = "f" * 64


@pytest.fixture(scope="module")
def g():
    """Sparse enough that a target's 3-hop ball is a small part of the graph."""
    cfg = CSBMConfig(num_nodes=1500, num_classes=3, num_features=16, K=1.5, deg_same=1.8, deg_diff=0.5)
    graph, _ = sample_csbm(cfg, seed=2, name="sparse")
    return graph.with_split(grb_split(graph.degrees(), seed=2))


@pytest.fixture(scope="module")
def model(g):
    return train("gcn", g, {"hidden_sizes": [16]}, TrainConfig(epochs=30, patience=30, seed=0)).model


def adjacency(g) -> sp.csr_matrix:
    ei = g.edge_index
    a = sp.csr_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(g.num_nodes, g.num_nodes))
    a.sum_duplicates()
    a.data[:] = 1.0
    return a


@pytest.fixture(scope="module")
def targets(g):
    deg = g.degrees()
    return np.array([v for v in g.targets("full") if deg[v] >= 2][:4], np.int64)


@pytest.fixture(scope="module")
def mod(g, model, targets):
    attack = build_attack("nettack", {"direct": False, "n_influencers": 3, "n_flips": 3, "seed": 1, "epochs": 60},
                          "targeted")
    return attack.attack(g, model, targets, labels=g.labels)


def test_each_targets_flips_are_the_influencer_nettacks(g, targets, mod):
    """The sweep's attack flips, per target, what ``nettack(direct=False)`` flips alone with
    the same surrogate weights and label."""
    a = adjacency(g)
    w1, w2 = train_linear_gcn(a, g.features, g.labels, g.split["train"], g.split["val"], epochs=60, seed=1)
    cfg = NettackConfig(direct=False, n_influencers=3)
    assert not mod.direct
    for t in targets.tolist():
        want = sorted(tuple(sorted(p)) for p in nettack(a, g.features, w1 @ w2, t, int(g.labels[t]), 3,
                                                        cfg).edge_flips)
        removed, added = mod.pairs_of(t)
        got = sorted(tuple(sorted(p)) for p in np.concatenate([removed, added], axis=1).T.tolist())
        assert got == want and len(got) == 3
        nbrs = set(a[t].indices.tolist())
        for u, v in got:
            assert t not in (u, v) and (u in nbrs or v in nbrs)


def test_the_scorer_evaluates_each_target_with_its_influencers_flips(g, model, mod):
    """The ball of ``hops + 1`` around the target (its influencers' new partners included)
    gives what the whole perturbed graph gives."""
    ev = TargetEvaluator(g, graph_tensors(g))
    for t in mod.targets.tolist():
        ball = ev.ball(t, mod.pairs_of(t)[1], 2)
        assert ball is not None and ball.size < g.num_nodes // 2
    pred, marg = ev.outcomes(model, mod, 2)
    want_pred, want_marg = whole_graph_outcomes(g, model, mod)
    np.testing.assert_array_equal(pred, want_pred)
    np.testing.assert_allclose(marg, want_marg, atol=1e-4)


def influencer(g, t: int, pairs: list[tuple[int, int]]) -> TargetedModification:
    a = adjacency(g)
    p = np.array(pairs, np.int64).T.reshape(2, -1)
    exists = np.asarray(a[p[0], p[1]]).ravel() > 0
    by = np.full(p.shape[1], t, np.int64)
    return TargetedModification.build(np.array([t]), p[:, exists], p[:, ~exists], g.num_nodes, g.num_features,
                                      removed_by=by[exists], added_by=by[~exists])


def test_the_audit_holds_influencer_pairs_to_the_targets_neighbourhood(g, targets):
    a = adjacency(g)
    t = int(targets[0])
    nbr = int(a[t].indices[0])
    far = next(v for v in range(g.num_nodes) if v != t and not a[t, v] and not a[nbr, v])
    stranger = next(v for v in range(g.num_nodes) if v not in (t, far) and not a[t, v] and not a[far, v])
    kw = dict(feat_min=-10.0, feat_max=10.0, features=False)
    audit_targeted(g, influencer(g, t, [(nbr, far)]), np.array([1]), **kw)  # a neighbour and another node
    with pytest.raises(AuditError, match="touches its own target"):
        audit_targeted(g, influencer(g, t, [(t, far)]), np.array([1]), **kw)
    with pytest.raises(AuditError, match="no end next to its target"):
        audit_targeted(g, influencer(g, t, [(stranger, far)]), np.array([1]), **kw)
    with pytest.raises(AuditError, match="over its budget"):
        audit_targeted(g, influencer(g, t, [(nbr, far), (nbr, stranger)]), np.array([1]), **kw)


def test_an_influencer_perturbation_round_trips_through_the_store(tmp_path, g, mod):
    lock = RunLock(tmp_path / "run").acquire()
    try:
        dataset = {"label": "d", "source": "d", "fingerprint": FP, "parts": {}, "normalize": "arctan"}
        store = RunStore.open(tmp_path / "run", dataset=dataset, components={"job": {"seed": {"seed": 0}}},
                              config={"job": 1}, config_hash="h1", lock=lock)
        cell = type("Cell", (), dict(scenario="targeted", difficulty="full", attack="nettack", surrogate="gcn",
                                     threat="transfer", repeat=0, seed=0, params={"direct": False}))()
        meta = schema.perturbation_meta(cell, config_hash="h", dataset="d", dataset_fingerprint=FP,
                                        feat_lim_min=-1.0, feat_lim_max=1.0, attack_seconds=0.5)
        store.write_perturbation("i1", mod, meta)
        back = RunStore.existing(store.root).read_perturbation("i1")
        assert isinstance(back, TargetedModification) and not back.direct
        for field in ("targets", "removed", "added", "removed_by", "added_by"):
            np.testing.assert_array_equal(getattr(back, field), getattr(mod, field))
        for t in mod.targets.tolist():
            assert back.of(t).added.tolist() == mod.of(t).added.tolist()
    finally:
        lock.release()


def test_an_influencer_attack_refuses_a_target_without_neighbours_and_feature_flips(g):
    lonely = np.intersect1d(np.flatnonzero(g.degrees() == 0), g.targets("full"))
    assert lonely.size  # the sparse graph has isolated test nodes
    attack = build_attack("nettack", {"direct": False}, "targeted")
    with pytest.raises(ConfigError, match=f"target {int(lonely[0])} has no neighbour to act as an influencer"):
        attack.check_inputs(g, lonely[:1])
    build_attack("nettack", {"direct": True}, "targeted").check_inputs(g, lonely[:1])  # a direct attack adds edges
    with pytest.raises(ConfigError, match="flips edges only"):
        build_attack("nettack", {"direct": False, "features": True}, "targeted")


@pytest.mark.parametrize("name, params", [
    ("rgcn", {"hidden_sizes": [16]}), ("gnnguard", {"hidden_sizes": [16]}),
    ("gatguard", {"hidden_sizes": [8], "heads": 2}), ("jaccard", {"hidden_sizes": [16]}),
])
def test_robust_defenses_are_scored_on_the_targets_ball_exactly(g, mod, name, params):
    """The robust defenses that declare a receptive field (one hop a layer) are scored on
    each target's ball, never falling back, and give what the whole perturbed graph gives."""
    from grb_dist.attacks.shared.surrogate import receptive_hops
    from grb_dist.defenses import train_defense

    model = train_defense(name, g, params, TrainConfig(epochs=15, patience=15, seed=0)).model.eval()
    assert receptive_hops(model) == 2
    ev = TargetEvaluator(g, graph_tensors(g))
    pred, marg = ev.outcomes(model, mod, 2)
    assert not ev.whole_graph  # no target needed the whole graph
    want_pred, want_marg = whole_graph_outcomes(g, model, mod)
    np.testing.assert_array_equal(pred, want_pred)
    np.testing.assert_allclose(marg, want_marg, atol=1e-4)
