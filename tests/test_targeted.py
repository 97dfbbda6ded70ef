"""The targeted scenario: each target attacked alone within its own budget (RND, DICE,
Nettack), audited per target, scored per target on its own perturbed graph, its targets
chosen per difficulty, stored, planned into cells and ranked on the targets board."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch

from grb_dist.attacks.audit import audit_targeted
from grb_dist.attacks.registry import TARGETED, build_attack
from grb_dist.attacks.shared.surrogate import receptive_hops
from grb_dist.attacks.targeted.nettack import nettack, train_linear_gcn
from grb_dist.core.errors import AuditError, ConfigError
from grb_dist.core.graph import Graph, Modification
from grb_dist.core.targeted import TargetSelection, TargetedModification, check_listed, select_targets
from grb_dist.datasets.csbm import CSBMConfig, sample_csbm
from grb_dist.datasets.split import grb_split
from grb_dist.evaluation.targeted import TargetEvaluator, margins
from grb_dist.leaderboard.targets import success_rate, targets_board
from grb_dist.models import build_model
from grb_dist.models.tensors import graph_tensors
from grb_dist.models.train import TrainConfig, train
from grb_dist.store import RunLock, RunStore, schema
from grb_dist.sweep.cells import run_cells
from grb_dist.sweep.job import parse_job

from helpers import small, tiny_csbm, whole_graph_outcomes

pytestmark = pytest.mark.usefixtures("one_thread")

ATTACKS = sorted(TARGETED.names())
#: settings that keep an attack fast on the small graph (Nettack's linear surrogate's epochs)
FAST = {"nettack": {"epochs": 50}}
FP = "f" * 64


def clean_pairs(g: Graph) -> set[tuple[int, int]]:
    """The undirected edges of ``g`` as (smaller, larger) pairs."""
    ei = g.edge_index
    return {(int(min(u, v)), int(max(u, v))) for u, v in zip(ei[0], ei[1])}


def hand_degrees(g: Graph) -> np.ndarray:
    deg = np.zeros(g.num_nodes, np.int64)
    for u, v in clean_pairs(g):
        deg[u] += 1
        deg[v] += 1
    return deg


def targeted(name: str, **kw):
    return build_attack(name, {**FAST.get(name, {}), **kw}, "targeted")


@pytest.fixture(scope="module")
def g() -> Graph:
    return tiny_csbm(n=300)


@pytest.fixture(scope="module")
def model(g) -> torch.nn.Module:
    return train("gcn", g, {"hidden_sizes": [16]}, TrainConfig(epochs=40, patience=40, seed=0)).model


@pytest.fixture(scope="module")
def targets(g) -> np.ndarray:
    """Ten test nodes and both ends of an edge (two targets that are neighbours)."""
    u, v = sorted(next(iter(sorted(clean_pairs(g)))))
    return np.unique(np.concatenate([g.targets("full")[:10], [u, v]])).astype(np.int64)


# ----------------------------------------------------------------------------- attacks


@pytest.mark.parametrize("name", ATTACKS)
def test_each_target_gets_direct_flips_within_its_own_budget(name, g, model, targets):
    edges, deg = clean_pairs(g), hand_degrees(g)
    budget = {int(t): 1 + int(np.floor(0.5 * deg[t])) for t in targets}
    assert len(set(budget.values())) > 1  # the budgets differ between targets
    mod = targeted(name, n_flips=1, degree_multiple=0.5, seed=0).attack(g, model, targets)
    assert isinstance(mod, TargetedModification) and mod.num_original == g.num_nodes
    np.testing.assert_array_equal(mod.targets, targets)
    # every pair starts at a target (direct), removed pairs are edges, added pairs are not
    assert np.isin(mod.removed[0], targets).all() and np.isin(mod.added[0], targets).all()
    assert all((min(a, b), max(a, b)) in edges for a, b in mod.removed.T.tolist())
    assert not any((min(a, b), max(a, b)) in edges for a, b in mod.added.T.tolist())
    assert mod.n_nodes_modified == 0
    per = mod.flips_per_target()
    assert per.sum() == mod.n_edge_flips
    for i, t in enumerate(targets.tolist()):
        gone, new = mod.partners(t)
        assert per[i] == gone.size + new.size <= budget[t]
        assert t not in gone and t not in new and np.unique(np.concatenate([gone, new])).size == per[i]
        one = mod.of(t)  # this target's flips alone, canonical, every pair touching it
        assert isinstance(one, Modification) and one.n_edge_flips == per[i]
        for pairs, partners in ((one.removed, gone), (one.added, new)):
            assert ((pairs[0] == t) | (pairs[1] == t)).all() and (pairs[0] < pairs[1]).all()
            keys = pairs[0] * g.num_nodes + pairs[1]
            assert (np.diff(keys) > 0).all()
            assert sorted(np.where(pairs[0] == t, pairs[1], pairs[0]).tolist()) == sorted(partners.tolist())
    assert per.sum() > 0


def test_rnd_spends_every_targets_whole_budget(g, model, targets):
    deg = hand_degrees(g)
    mod = targeted("rnd", n_flips=2, degree_multiple=1.0, seed=1).attack(g, model, targets)
    np.testing.assert_array_equal(mod.flips_per_target(), 2 + deg[targets])


def test_neighbouring_targets_each_keep_their_own_flips(g, model):
    """Two adjacent targets that both remove their shared edge hold it once each, target first."""
    deg = hand_degrees(g)
    u, v = sorted(next(iter(sorted(clean_pairs(g)))))
    mod = targeted("dice", n_flips=int(max(deg[u], deg[v])), add_ratio=0.0, seed=0).attack(
        g, model, np.array([u, v]), labels=np.zeros(g.num_nodes, np.int64))  # one class: every edge is "inside"
    assert v in mod.partners(u)[0] and u in mod.partners(v)[0]
    assert sorted(mod.of(u).removed.T.tolist()) == sorted([min(u, w), max(u, w)] for w in mod.partners(u)[0].tolist())


@pytest.mark.parametrize("name", ATTACKS)
def test_attack_leaves_graph_unchanged_and_repeats_with_its_seed(name, g, model, targets):
    before = {k: getattr(g, k).copy() for k in ("features", "edge_index", "labels")}
    split = {k: v.copy() for k, v in g.split.items()}
    tcopy = targets.copy()
    a = targeted(name, n_flips=2, degree_multiple=0.5, seed=3).attack(g, model, targets)
    b = targeted(name, n_flips=2, degree_multiple=0.5, seed=3).attack(g, model, targets)
    for k, v in before.items():
        np.testing.assert_array_equal(getattr(g, k), v)
    assert set(g.split) == set(split) and all(np.array_equal(g.split[k], v) for k, v in split.items())
    np.testing.assert_array_equal(targets, tcopy)
    for field in ("targets", "removed", "added", "nodes", "features"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


# ----------------------------------------------------------------------------- the audit


def hand_graph() -> Graph:
    """A 6-cycle 0-1-2-3-4-5-0 with 2 features."""
    src = np.arange(6)
    dst = (src + 1) % 6
    ei = np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])])
    ei = ei[:, np.lexsort((ei[1], ei[0]))].astype(np.int64)
    return Graph(np.zeros((6, 2), np.float32), ei, np.array([0, 0, 0, 1, 1, 1]))


def hand_mod(targets, removed=((), ()), added=((), ()), nodes=None, feats=None) -> TargetedModification:
    return TargetedModification.build(np.array(targets), np.array(removed, np.int64).reshape(2, -1),
                                      np.array(added, np.int64).reshape(2, -1), 6, 2, nodes, feats)


def audit(mod: TargetedModification, budgets, features: bool = False) -> None:
    audit_targeted(hand_graph(), mod, np.array(budgets, np.int64), feat_min=-1.0, feat_max=1.0, features=features)


def test_audit_passes_a_valid_targeted_modification():
    # targets 0 and 1 are neighbours: each removes their edge, each adds a pair of its own
    audit(hand_mod([0, 1], removed=[[0, 1], [1, 0]], added=[[0, 1], [3, 4]]), [2, 2])
    audit(hand_mod([2], nodes=[2], feats=[[0.5, -0.5]]), [1], features=True)


@pytest.mark.parametrize("mod, budgets, features, rule", [
    (hand_mod([0], removed=[[1], [2]]), [3], False, "touches_target"),  # (1, 2) starts at no target
    (hand_mod([0], added=[[0, 0], [2, 3]]), [1], False, "edge_budget"),  # two flips, a budget of one
    (hand_mod([0, 3], added=[[0, 3, 3], [2, 0, 5]]), [1, 1], False, "edge_budget"),  # target 3 over its own
    (hand_mod([0], removed=[[0], [3]]), [2], False, "removed_exists"),  # (0, 3) is no edge
    (hand_mod([0], added=[[0], [5]]), [2], False, "added_absent"),  # (0, 5) is one
    (hand_mod([0], nodes=[0], feats=[[0.5, 0.5]]), [2], False, "node_target"),  # features by an attack of none
    (hand_mod([0], nodes=[4], feats=[[0.5, 0.5]]), [2], True, "node_target"),  # a non-target's features
])
def test_audit_rejects_each_broken_rule(mod, budgets, features, rule):
    with pytest.raises(AuditError, match=f"'{rule}'"):
        audit(mod, budgets, features)


def test_audit_rejects_pairs_not_grouped_by_target():
    """The pairs must be grouped by target (``partners`` and ``of`` look a target's rows up by
    binary search): made without ``build``, target 3's pair (3, 1) ahead of target 0's would
    be read as target 0's, re-adding the edge (0, 1), and lost to target 3."""
    added = np.array([[3, 0, 3], [1, 2, 5]], np.int64)  # (3, 1) and (0, 2), (3, 5): each an absent pair
    mod = TargetedModification(np.array([0, 3]), np.zeros((2, 0), np.int64), added, np.zeros(0, np.int64),
                               np.zeros((0, 2), np.float32), 6)
    with pytest.raises(AuditError):
        audit(mod, [2, 2])


# ----------------------------------------------------------------------------- DICE


def test_dice_removal_only_removes_same_label_edges(g, model):
    labels = np.random.default_rng(7).integers(0, 3, g.num_nodes)  # not the graph's labels, not predictions
    nbrs = {v: set() for v in range(g.num_nodes)}
    for a, b in clean_pairs(g):
        nbrs[a].add(b)
        nbrs[b].add(a)
    chosen = np.array([v for v in range(g.num_nodes) if sum(labels[w] == labels[v] for w in nbrs[v]) >= 2][:12])
    assert chosen.size >= 5
    mod = targeted("dice", n_flips=2, add_ratio=0.0, seed=0).attack(g, model, chosen, labels=labels)
    assert mod.added.shape[1] == 0
    for t in chosen.tolist():
        gone, _ = mod.partners(t)
        assert gone.size == 2 and set(gone.tolist()) <= nbrs[t] and (labels[gone] == labels[t]).all()


@pytest.mark.parametrize("n_flips", [2, 60])  # a large pool drawn by rejection, a small one filtered
def test_dice_addition_only_connects_other_labels(g, model, targets, n_flips):
    labels = np.random.default_rng(8).integers(0, 3, g.num_nodes)
    edges = clean_pairs(g)
    mod = targeted("dice", n_flips=n_flips, add_ratio=1.0, seed=0).attack(g, model, targets, labels=labels)
    assert mod.removed.shape[1] == 0
    for t in targets.tolist():
        new = mod.partners(t)[1]
        assert new.size == n_flips and np.unique(new).size == n_flips
        assert (labels[new] != labels[t]).all() and not any((min(t, w), max(t, w)) in edges for w in new.tolist())


# ----------------------------------------------------------------------------- Nettack


def scipy_adjacency(g: Graph) -> sp.csr_matrix:
    ei = g.edge_index
    return sp.csr_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(g.num_nodes, g.num_nodes))


def nettack_partners(g: Graph, target: int, label: int, budget: int, seed: int, epochs: int) -> list[int]:
    adj = scipy_adjacency(g)
    w1, w2 = train_linear_gcn(adj, g.features, g.labels, g.split["train"], g.split["val"], hidden=16,
                              epochs=epochs, seed=seed)
    result = nettack(adj, g.features, w1 @ w2, target, label, budget)
    assert all(m == target for m, _ in result.edge_flips)
    return sorted(n for _, n in result.edge_flips)


def test_sweeps_nettack_flips_what_the_function_flips_for_the_given_label(g, model):
    deg = hand_degrees(g)
    t = int(next(v for v in g.targets("full") if deg[v] >= 3))
    attack = build_attack("nettack", {"n_flips": 2, "degree_multiple": 1.0, "seed": 5, "epochs": 60}, "targeted")
    labels = np.roll(g.labels, 1)  # another class than the truth at most nodes
    mod = attack.attack(g, model, np.array([t]), labels=labels)
    got = sorted(np.concatenate(mod.partners(t)).tolist())
    want = nettack_partners(g, t, int(labels[t]), 2 + int(deg[t]), seed=5, epochs=60)
    assert got == want and len(got) > 0


def test_sweeps_nettack_fights_the_surrogates_clean_prediction(g):
    deg = hand_degrees(g)
    torch.manual_seed(11)
    guess = build_model("gcn", g.num_features, g.num_classes, {"hidden_sizes": [8]}).eval()  # untrained
    with torch.no_grad():
        pred = guess(torch.as_tensor(g.features), torch.as_tensor(g.edge_index)).argmax(1).numpy()
    t = int(next(v for v in g.targets("full") if deg[v] >= 2 and pred[v] != g.labels[v]))
    mod = targeted("nettack", n_flips=3, seed=2).attack(g, guess, np.array([t]))
    got = sorted(np.concatenate(mod.partners(t)).tolist())
    assert got == nettack_partners(g, t, int(pred[t]), 3, seed=2, epochs=50) and len(got) > 0


# ----------------------------------------------------------------------------- scoring per target


@pytest.fixture(scope="module")
def big() -> Graph:
    cfg = CSBMConfig(num_nodes=3000, num_classes=3, num_features=16, K=2.0, deg_same=1.6, deg_diff=0.4)
    graph, _ = sample_csbm(cfg, seed=1, name="sparse")
    return graph.with_split(grb_split(graph.degrees(), seed=1))


@pytest.fixture(scope="module")
def big_model(big) -> torch.nn.Module:
    return train("gcn", big, {"hidden_sizes": [16]}, TrainConfig(epochs=30, patience=30, seed=0)).model


@pytest.fixture(scope="module")
def big_mod(big) -> TargetedModification:
    """Hand-made flips on the sparse graph: two neighbouring targets that both remove their
    edge, each target removing one edge and adding one to a far node, one of them with new
    features too, one target with new features only, one untouched."""
    deg = hand_degrees(big)
    nbrs = {v: set() for v in range(big.num_nodes)}
    for a, b in clean_pairs(big):
        nbrs[a].add(b)
        nbrs[b].add(a)
    rich = [v for v in range(big.num_nodes) if deg[v] >= 3 and all(deg[w] >= 2 for w in nbrs[v])]
    # the first target, u: after losing its edge to v its 2-hop field still reaches past its neighbours
    u = next(x for x in rich if max(nbrs[x]) > x)
    v = max(nbrs[u])
    rng = np.random.default_rng(0)
    others = [int(x) for x in rng.choice([x for x in rich if x > u], size=6, replace=False) if x != v][:5]
    ts = sorted({u, v, *others})
    rem, add = [], []
    for t in ts[:-2]:  # the last two keep the clean graph's edges
        gone = v if t == u else u if t == v else min(nbrs[t])
        rem.append((t, gone))
        far = int(rng.integers(big.num_nodes))
        while far == t or far in nbrs[t]:
            far = int(rng.integers(big.num_nodes))
        add.append((t, far))
    rows = rng.normal(size=(2, big.num_features)).astype(np.float32)
    return TargetedModification.build(np.array(ts), np.array(rem).T, np.array(add).T, big.num_nodes,
                                      big.num_features, np.array([ts[1], ts[-2]]), rows)


def test_ball_is_the_3_hop_ball_a_proper_subset_on_a_sparse_graph(big, big_mod):
    nbrs = {v: set() for v in range(big.num_nodes)}
    for a, b in clean_pairs(big):
        nbrs[a].add(b)
        nbrs[b].add(a)
    ev = TargetEvaluator(big, graph_tensors(big))
    for t in big_mod.targets.tolist():
        added = big_mod.partners(t)[1]
        seen, frontier = {t}, nbrs[t] | set(added.tolist())  # the clean graph and t's added edges
        for _ in range(3):
            seen |= frontier
            frontier = {w for x in frontier for w in nbrs[x]} - seen
        ball = ev.ball(t, added, 2)
        assert ball is not None and ball.size < big.num_nodes // 2
        assert ball.tolist() == sorted(seen)


def test_per_target_outcomes_equal_whole_graph_outcomes(big, big_model, big_mod):
    assert receptive_hops(big_model) == 2
    ev = TargetEvaluator(big, graph_tensors(big))
    pred, marg = ev.outcomes(big_model, big_mod, 2)
    want_pred, want_marg = whole_graph_outcomes(big, big_model, big_mod)
    np.testing.assert_array_equal(pred, want_pred)
    np.testing.assert_allclose(marg, want_marg, atol=1e-4)
    assert np.abs(marg - clean_margins(big, big_model, big_mod.targets)).max() > 1e-3  # the flips matter


def test_too_small_a_declared_field_falls_back_to_the_whole_graph(big, big_model, big_mod):
    ev = TargetEvaluator(big, graph_tensors(big))
    pred, marg = ev.outcomes(big_model, big_mod, 0)
    want_pred, want_marg = whole_graph_outcomes(big, big_model, big_mod)
    np.testing.assert_array_equal(pred, want_pred)
    np.testing.assert_allclose(marg, want_marg, atol=1e-4)


@pytest.mark.parametrize("hops", [2, None])
def test_outcomes_of_an_attack_on_a_dense_graph_equal_whole_graph_outcomes(g, model, targets, hops):
    """On the small graph the balls pass half the graph (and with no known field there are
    none): every target is scored on the whole graph, with its own flips only."""
    mod = targeted("rnd", n_flips=3, degree_multiple=1.0, seed=4).attack(g, model, targets)
    pred, marg = TargetEvaluator(g, graph_tensors(g)).outcomes(model, mod, hops)
    want_pred, want_marg = whole_graph_outcomes(g, model, mod)
    np.testing.assert_array_equal(pred, want_pred)
    np.testing.assert_allclose(marg, want_marg, atol=1e-4)


def clean_margins(graph: Graph, model, targets: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        z = model(torch.as_tensor(graph.features), torch.as_tensor(graph.edge_index))[targets].double().numpy()
    y = graph.labels[targets]
    return np.array([row[c] - np.delete(row, c).max() for row, c in zip(z, y)])


def test_clean_outcomes_equal_a_full_clean_forward(big, big_model, big_mod):
    ts = big_mod.targets
    pred, marg = TargetEvaluator(big, graph_tensors(big)).clean_outcomes(big_model, ts)
    with torch.no_grad():
        z = big_model(torch.as_tensor(big.features), torch.as_tensor(big.edge_index))[ts]
    np.testing.assert_array_equal(pred, z.argmax(1).numpy())
    np.testing.assert_allclose(marg, clean_margins(big, big_model, ts), atol=1e-5)


def test_margins_are_the_label_logit_minus_the_best_other():
    logits = torch.tensor([[1.0, 3.0, 2.0], [0.5, -1.0, 0.2], [4.0, 4.0, 0.0]])
    np.testing.assert_allclose(margins(logits, np.array([1, 2, 0])), [1.0, -0.3, 0.0], atol=1e-6)


# ----------------------------------------------------------------------------- choosing targets


def test_random_selection_is_seeded_and_keeps_to_eligible_test_nodes(g):
    deg = hand_degrees(g)
    eligible = {int(v) for v in g.targets("easy") if deg[v] >= 3}
    assert len(eligible) > 8
    a = select_targets(g, "easy", TargetSelection(n=8, min_degree=3, seed=1))
    b = select_targets(g, "easy", TargetSelection(n=8, min_degree=3, seed=1))
    c = select_targets(g, "easy", TargetSelection(n=8, min_degree=3, seed=2))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    for s in (a, c):
        assert s.size == 8 and np.unique(s).size == 8 and set(s.tolist()) <= eligible and (np.diff(s) > 0).all()
    every = select_targets(g, "easy", TargetSelection(n=len(eligible) + 5, min_degree=3, seed=1))
    assert set(every.tolist()) == eligible


def test_listed_selection_keeps_each_difficultys_own_test_nodes(g):
    easy, hard = g.targets("easy")[:3].tolist(), g.targets("hard")[:2].tolist()
    sel = TargetSelection(select="nodes", nodes=tuple(easy + hard))
    assert select_targets(g, "easy", sel).tolist() == sorted(easy)
    assert select_targets(g, "hard", sel).tolist() == sorted(hard)
    check_listed(g, ("easy", "hard"), sel)


def test_check_listed_names_a_node_of_no_difficulty(g):
    train_node = int(g.split["train"][0])
    sel = TargetSelection(select="nodes", nodes=(int(g.targets("easy")[0]), train_node))
    with pytest.raises(ConfigError, match=str(train_node)):
        check_listed(g, ("easy", "hard"), sel)
    hard_node = int(g.targets("hard")[0])
    with pytest.raises(ConfigError, match=str(hard_node)):
        check_listed(g, ("easy",), TargetSelection(select="nodes", nodes=(hard_node,)))


@pytest.mark.parametrize("kw, word", [
    ({"select": "best"}, "select"),
    ({"n": 0}, "targets.n"),
    ({"select": "nodes", "nodes": (3, 4, 3)}, "twice"),
    ({"nodes": (3, 4)}, "select: nodes"),
    ({"select": "nodes"}, "empty"),
])
def test_target_selection_rejects_bad_input(kw, word):
    with pytest.raises(ConfigError, match=word):
        TargetSelection(**kw)


# ----------------------------------------------------------------------------- the store


def open_run(root):
    lock = RunLock(root).acquire()
    dataset = {"label": "d", "source": "d", "fingerprint": FP, "parts": {}, "normalize": "arctan"}
    store = RunStore.open(root, dataset=dataset, components={"job": {"seed": {"seed": 0}}}, config={"job": 1},
                          config_hash="h1", lock=lock)
    return store, lock


def attack_cell(scenario: str) -> SimpleNamespace:
    return SimpleNamespace(scenario=scenario, difficulty="full", attack="dice", surrogate="gcn", threat="transfer",
                           repeat=0, seed=0, params={"n_flips": 2})


def perturbation_meta(scenario: str) -> dict:
    return schema.perturbation_meta(attack_cell(scenario), config_hash="h", dataset="d", dataset_fingerprint=FP,
                                    feat_lim_min=-1.0, feat_lim_max=1.0, attack_seconds=0.5)


def test_targeted_perturbation_round_trips_through_the_store(tmp_path):
    store, lock = open_run(tmp_path / "run")
    try:
        mod = TargetedModification.build(np.array([2, 5, 9]), np.array([[5, 2], [2, 5]]),
                                         np.array([[9, 2, 9], [1, 7, 4]]), 12, 3, np.array([9]),
                                         np.array([[0.25, -0.5, 1.0]]))
        plain = Modification.build(np.array([[1], [3]]), np.array([[0], [4]]), 12, 3)
        store.write_perturbation("t1", mod, perturbation_meta("targeted"))
        store.write_perturbation("m1", plain, perturbation_meta("modification"))
        fresh = RunStore.existing(store.root)
        back = fresh.read_perturbation("t1")
        assert isinstance(back, TargetedModification) and back.num_original == 12
        for field in ("targets", "removed", "added", "nodes", "features"):
            np.testing.assert_array_equal(getattr(back, field), getattr(mod, field))
        assert back.features.dtype == np.float32 and back.features.shape == (1, 3)
        np.testing.assert_array_equal(back.partners(2)[0], [5])  # target first: each end its own
        np.testing.assert_array_equal(back.partners(5)[0], [2])
        other = fresh.read_perturbation("m1")
        assert type(other) is Modification
        np.testing.assert_array_equal(other.removed, [[1], [3]])
        np.testing.assert_array_equal(other.added, [[0], [4]])
    finally:
        lock.release()


def score_row(cell_id: str, result_extra: dict) -> dict:
    cell = SimpleNamespace(cell_id=cell_id, perturbation_id="p1", scenario="targeted", difficulty="full",
                           attack="dice", surrogate="gcn", defense="gcn", threat="transfer", repeat=0, seed=0)
    result = {"accuracy": 0.5, "n_targets": 3, "score_seconds": 0.1, "defense_train_seconds": 1.0, **result_extra}
    sizes = dict.fromkeys(("n_injected", "n_injected_edges", "n_edges_added", "n_edges_removed",
                           "n_nodes_modified"), 0)
    return schema.score_row(cell, config_hash="h", dataset="d", dataset_fingerprint=FP, defense_seed=0,
                            result=result, sizes=sizes, attack_seconds=0.0,
                            created_at=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))


def test_score_rows_keep_their_per_target_lists(tmp_path):
    store, lock = open_run(tmp_path / "run")
    try:
        per_target = {"target_nodes": [4, 8, 15], "target_predictions": [1, 0, 2], "target_margins": [0.5, -0.25, 2.0]}
        store.write_scores([score_row("with", per_target), score_row("without", {})])
        df = store.read_scores().set_index("cell_id")
        for key, want in per_target.items():
            assert list(df.loc["with", key]) == want
            assert list(df.loc["without", key]) == []
    finally:
        lock.release()


# ----------------------------------------------------------------------------- jobs and cells


def job(targets: dict | None = None, with_targeted: bool = True):
    sections = {"modification": {"attack": {"n_edge_mod": 5}, "attacks": {"rnd": {}}}}
    if with_targeted:
        section = {"attack": {"n_flips": 1}, "attacks": {"rnd": {}, "dice": {}}}
        if targets is not None:
            section["targets"] = targets
        sections["targeted"] = section
    return parse_job(small(scenario="all", **sections))


def ids(cells, scenario: str) -> tuple[set[str], set[str]]:
    return ({c.perturbation_id for c in cells.attacks if c.scenario == scenario},
            {c.cell_id for c in cells.scores if c.scenario == scenario})


def test_a_targeted_section_takes_a_target_selection():
    spec = job({"select": "random", "n": 5})
    assert "targeted" in spec.scenarios
    assert spec.target_selection("targeted") == TargetSelection(select="random", n=5, seed=spec.seed)
    assert spec.target_selection("modification") is None


def test_targets_under_modification_are_refused():
    with pytest.raises(ConfigError, match="valid keys: attack, budgets, attacks$"):
        parse_job(small(scenario="all", modification={"attacks": {"rnd": {}}, "targets": {"n": 5}}))


def test_target_count_changes_targeted_ids_only():
    five, six = run_cells(job({"select": "random", "n": 5}), FP), run_cells(job({"select": "random", "n": 6}), FP)
    p5, s5 = ids(five, "targeted")
    p6, s6 = ids(six, "targeted")
    assert p5 and not p5 & p6 and not s5 & s6
    for scenario in ("modification", "injection"):
        assert ids(five, scenario) == ids(six, scenario) != (set(), set())


def test_adding_a_targeted_section_changes_no_other_scenarios_ids():
    without, with_ = run_cells(job(with_targeted=False), FP), run_cells(job({"n": 5}), FP)
    assert not ids(without, "targeted")[0] and ids(with_, "targeted")[0]
    for scenario in ("modification", "injection"):
        assert ids(without, scenario) == ids(with_, scenario) != (set(), set())


# ----------------------------------------------------------------------------- the targets board


def board_row(defense: str, attack: str, repeat: int, margins_: list[float], accuracy: float) -> dict:
    return {"difficulty": "full", "attack": attack, "surrogate": "none" if attack == "none" else "gcn",
            "defense": defense, "repeat": repeat, "accuracy": accuracy, "n_targets": 4,
            "target_nodes": [1, 2, 3, 4], "target_margins": margins_}


def test_targets_board_success_rates_by_hand():
    rows = [
        # clean: gcn gets targets 1, 3, 4 right (2 is wrong); mlp gets 1 and 2 right
        board_row("gcn", "none", 0, [0.5, -0.2, 1.0, 0.3], 0.75),
        board_row("mlp", "none", 0, [0.1, 0.2, -0.5, 0.0], 0.5),  # a margin of 0 is not correct
        # rnd on gcn: repeat 0 turns 1 and 3 (0.0 counts) of {1, 3, 4}: 2/3; repeat 1 turns 4: 1/3
        board_row("gcn", "rnd", 0, [-0.1, 0.4, 0.0, 0.2], 0.25),
        board_row("gcn", "rnd", 1, [0.2, -1.0, 0.5, -0.3], 0.5),
        # nettack on gcn: every correct one turned, both repeats (target 2 does not count)
        board_row("gcn", "nettack", 0, [-1.0, 2.0, -1.0, -1.0], 0.25),
        board_row("gcn", "nettack", 1, [-1.0, 2.0, -1.0, -2.0], 0.0),
        # rnd on mlp: of {1, 2}, repeat 0 turns none, repeat 1 turns 2: 0 and 1/2
        board_row("mlp", "rnd", 0, [0.3, 0.1, -1.0, -1.0], 0.5),
        board_row("mlp", "rnd", 1, [0.3, -0.1, -1.0, -1.0], 0.25),
    ]
    board = targets_board(pd.DataFrame(rows), "full", "targeted")
    got = {(r.attack, r.defense): r for r in board.itertuples()}
    assert set(got) == {("rnd", "gcn"), ("nettack", "gcn"), ("rnd", "mlp")}
    assert got["nettack", "gcn"].success_mean == pytest.approx(1.0)
    assert got["rnd", "gcn"].success_mean == pytest.approx(0.5)
    assert got["rnd", "gcn"].success_std == pytest.approx(np.std([2 / 3, 1 / 3]))
    assert got["rnd", "mlp"].success_mean == pytest.approx(0.25)
    assert got["rnd", "gcn"].clean_accuracy == pytest.approx(0.75)
    assert got["rnd", "mlp"].clean_accuracy == pytest.approx(0.5)
    assert got["rnd", "gcn"].accuracy_mean == pytest.approx(0.375)
    assert got["nettack", "gcn"].accuracy_mean == pytest.approx(0.125)
    assert got["rnd", "gcn"].margin_mean == pytest.approx(np.mean([-0.1, 0.4, 0.0, 0.2, 0.2, -1.0, 0.5, -0.3]))
    assert got["rnd", "gcn"].n_repeats == 2
    assert [(r.attack, r.defense) for r in board.itertuples()] == [("nettack", "gcn"), ("rnd", "gcn"), ("rnd", "mlp")]
    assert board["rank"].tolist() == [1, 2, 3]


def test_success_rate_counts_only_targets_right_on_the_clean_graph():
    clean = {1: 0.5, 2: -0.1, 3: 0.2, 4: 0.0}
    assert success_rate([1, 2, 3, 4], [0.0, -5.0, 0.1, -1.0], clean) == pytest.approx(0.5)
    assert np.isnan(success_rate([2, 4], [-1.0, -1.0], clean))
    assert np.isnan(success_rate([7], [-1.0], clean))  # a target without a clean row
