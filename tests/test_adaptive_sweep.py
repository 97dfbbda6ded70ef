"""Adaptive cells of a sweep: the defense itself as the surrogate (white-box), next to the
transfer cells, growing a run without recomputing anything it holds."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from grb_dist.attacks.audit import audit_injection, audit_modification
from grb_dist.attacks.registry import build_attack
from grb_dist.core.graph import Modification
from grb_dist.core.names import ADAPTIVE, CLEAN, TRANSFER
from grb_dist.store import RunStore, graph_fingerprint
from grb_dist.store.scores import write_checksummed
from grb_dist.sweep import worker
from grb_dist.sweep.job import parse_job
from grb_dist.sweep.cells import run_cells
from grb_dist.sweep.runner import attack_task_name

from helpers import tiny_csbm
from test_sweep_bookkeeping import InProcessEdge, run

JOB = {
    "dataset": "csbm", "seed": 0, "repeats": 2, "difficulties": ["full"], "scenario": "all",
    "train": {"epochs": 5, "patience": 5},
    "models": {"gcn": {"hidden_sizes": [8]}, "sage": {"hidden_sizes": [8]}},
    "defenses": ["gcn", "sage"], "surrogates": ["gcn"],
    "attack": {"n_inject": 4, "edges_per_node": 2, "steps": 2},
    "attacks": {"rnd": {}, "fgsm": {}},
    "modification": {"attack": {"ratio_edge_mod": 0.02, "steps": 2}, "attacks": {"dice": {}, "pgd": {}}},
}


@pytest.fixture(scope="module")
def graph():
    return tiny_csbm(n=200)


def _plan(graph, transfer_only=None, **changes):
    spec = parse_job({**JOB, **changes})
    return run_cells(spec, graph_fingerprint(graph, spec.normalize), transfer_only)


def test_adaptive_adds_cells_and_keeps_every_transfer_id(graph):
    before, after = _plan(graph), _plan(graph, adaptive=True)
    assert before.spec.config_hash == parse_job(JOB).config_hash  # a job without the switch keeps its hash
    assert after.spec.config_hash != before.spec.config_hash
    old = {c.cell_id for c in before.scores}
    transfer = [c for c in after.scores if c.threat == TRANSFER]
    adaptive = [c for c in after.scores if c.threat == ADAPTIVE]
    assert {c.cell_id for c in transfer} == old and {a.perturbation_id for a in before.attacks} <= {
        a.perturbation_id for a in after.attacks}
    # gradient attacks only (fgsm, modification pgd; not rnd, dice), per defense, difficulty, repeat
    assert sorted({(c.scenario, c.attack) for c in adaptive}) == [("injection", "fgsm"), ("modification", "pgd")]
    assert len(adaptive) == 2 * 2 * 1 * 2
    by_pert = {}
    for c in adaptive:
        by_pert.setdefault(c.perturbation_id, []).append(c)
    assert all(len(cs) == 1 for cs in by_pert.values())  # scored on its own defense only
    stems = {t.name: t.file_stem for t in after.targets}
    for a in (a for a in after.attacks if a.threat == ADAPTIVE):
        (cell,) = by_pert[a.perturbation_id]
        assert a.surrogate == cell.defense == cell.surrogate and a.surrogate_model == stems[cell.defense]
    # the gcn defense attacked by itself is another perturbation than one from the gcn surrogate
    assert not {c.perturbation_id for c in adaptive} & {a.perturbation_id for a in before.attacks}
    assert "adaptive:gcn" in attack_task_name([a for a in after.attacks if a.threat == ADAPTIVE][:1])


def test_transfer_only_defenses_get_no_adaptive_cells(graph):
    p = _plan(graph, {("modification", "sage"): "no weights"}, adaptive=True)
    adaptive = {(c.scenario, c.defense) for c in p.scores if c.threat == ADAPTIVE}
    assert adaptive == {("injection", "gcn"), ("injection", "sage"), ("modification", "gcn")}
    assert p.transfer_only == {("modification", "sage"): "no weights"}
    # without the switch the reasons are not kept
    assert _plan(graph, {("modification", "sage"): "no weights"}).transfer_only == {}


def test_the_switch_grows_a_run_by_its_adaptive_cells_only(tmp_path, graph, monkeypatch):
    first, _, summary, _ = run(tmp_path, graph, InProcessEdge(), monkeypatch, job=JOB)
    assert summary.computed == len(first.scores)
    edge = InProcessEdge()
    p, store, summary, _ = run(tmp_path, graph, edge, monkeypatch, job={**JOB, "adaptive": True})
    adaptive = [c for c in p.scores if c.threat == ADAPTIVE]
    assert summary.computed == len(adaptive) and summary.skipped == len(first.scores)
    assert edge.submitted["train"] == 0  # the defenses are loaded, not retrained
    assert edge.submitted["attack"] >= 1
    assert len(store.read_perturbations()) == len(p.attacks)
    scores = store.read_scores()
    assert dict(scores["threat"].value_counts()) == {TRANSFER: len(first.scores), ADAPTIVE: len(adaptive)}
    mine = scores[scores["threat"] == ADAPTIVE]
    assert (mine["surrogate"] == mine["defense"]).all() and (mine["attack"] != CLEAN).all()
    assert set(store.read_perturbations().groupby("threat").size().index) == {TRANSFER, ADAPTIVE}


def test_adaptive_perturbations_attack_the_stored_defense_and_pass_the_audit(tmp_path, graph, monkeypatch):
    p, store, _, _ = run(tmp_path, graph, InProcessEdge(), monkeypatch, job={**JOB, "adaptive": True})
    params = {t.file_stem: dict(t.params) for t in p.models}
    names = {t.file_stem: t.name for t in p.models}
    for a in (a for a in p.attacks if a.threat == ADAPTIVE):
        stored = store.read_perturbation(a.perturbation_id)
        attack = build_attack(a.attack, dict(a.params), a.scenario)
        targets, budget = attack.check_inputs(graph, graph.targets(a.difficulty))
        if isinstance(stored, Modification):
            audit_modification(graph, stored, n_edge_mod=budget.n_edge_mod, n_node_mod=budget.n_node_mod,
                               feat_min=budget.feat_min, feat_max=budget.feat_max, targets=targets)
        else:
            audit_injection(graph, stored, n_inject=budget.n_inject, edges_per_node=budget.edges_per_node,
                            feat_min=budget.feat_min, feat_max=budget.feat_max, targets=targets)
        # the same attack run here on the stored weights of the defense gives the same perturbation
        def load(stem):
            state = torch.load(store.root / "models" / f"{stem}.pt", weights_only=True)
            return worker.load_model(graph, names[stem], params[stem], state)

        # it fights the predictions of the attacker's own (first) surrogate, as transfer does
        assert a.labels_from == p.surrogates[0].file_stem
        labels = worker.attacker_labels(graph, load(a.labels_from))
        again = worker.attack_task(graph, a, load(a.surrogate_model), labels=labels).perturbation
        for name in ("features", "edges", "added", "removed"):
            if hasattr(stored, name):
                np.testing.assert_allclose(np.asarray(getattr(again, name)), np.asarray(getattr(stored, name)),
                                           rtol=1e-5, atol=1e-6)


def test_rows_written_before_the_threat_column_read_as_transfer(tmp_path, graph, monkeypatch):
    p, store, _, _ = run(tmp_path, graph, InProcessEdge(), monkeypatch, job=JOB)
    for path in (store.root / "scores").rglob("*.parquet"):  # as an older version wrote them
        write_checksummed(pq.read_table(path).drop_columns(["threat"]), path)
    assert "threat" not in pq.read_schema(next((store.root / "scores").rglob("*.parquet"))).names
    scores = RunStore.existing(store.root).read_scores()
    assert len(scores) == len(p.scores) and set(scores["threat"]) == {TRANSFER}


@pytest.mark.parametrize("scenario, name, params", [
    ("injection", "fgsm", {"n_inject": 4, "edges_per_node": 2, "steps": 3}),
    ("modification", "pgd", {"ratio_edge_mod": 0.02, "steps": 3}),
])
def test_given_labels_replace_the_surrogates_predictions(graph, scenario, name, params):
    from grb_dist.models.grammar import build_model

    torch.manual_seed(0)
    model = build_model("gcn", graph.num_features, graph.num_classes, {"hidden_sizes": [8]}).eval()
    targets = graph.targets("full")
    attack = build_attack(name, {**params, "seed": 3}, scenario)
    own = worker.attacker_labels(graph, model)
    plain, same = (attack.attack(graph, model, targets, labels=labels) for labels in (None, own))
    flipped = attack.attack(graph, model, targets, labels=(own + 1) % graph.num_classes)
    key = "features" if scenario == "injection" else "added"
    assert np.array_equal(getattr(plain, key), getattr(same, key))  # its own predictions: the default
    assert not np.array_equal(np.asarray(getattr(plain, key)), np.asarray(getattr(flipped, key)))


@pytest.mark.parametrize("name", ["fga", "grbcd", "pgd", "prbcd"])
def test_gradient_modification_attacks_run_on_a_model_that_reads_no_graph(graph, name):
    """An MLP's output does not depend on the edges: the edge gradient is 0 (the attacks
    still run and stay within budget), and PGD's feature part still attacks its features."""
    from grb_dist.models.grammar import build_model

    torch.manual_seed(0)
    mlp = build_model("mlp", graph.num_features, graph.num_classes, {"hidden_sizes": [8]}).eval()
    targets = graph.targets("full")
    params = {"ratio_edge_mod": 0.02, "steps": 3, "seed": 1}
    if name == "pgd":
        params["n_node_mod"] = 3
    attack = build_attack(name, params, "modification")
    mod = attack.attack(graph, mlp, targets)  # audited inside
    assert mod.n_edge_flips <= attack.check_inputs(graph, targets)[1].n_edge_mod
    if name == "pgd":
        assert mod.n_nodes_modified == 3 and not np.allclose(mod.features, graph.features[mod.nodes])


def test_adaptive_cells_take_the_attacks_defaults_under_the_jobs_settings(graph):
    def params(p, threat):
        return {(a.scenario, a.attack): {k: v for k, v in a.params.items() if k != "seed"}
                for a in p.attacks if a.threat == threat}

    p = _plan(graph, adaptive=True)
    transfer, adaptive = params(p, TRANSFER), params(p, ADAPTIVE)
    # modification gradient attacks fight a defense with the probability margin, injection ones as transferred
    assert adaptive["modification", "pgd"] == {**transfer["modification", "pgd"], "loss": "prob_margin"}
    assert "loss" not in transfer["modification", "pgd"]
    assert adaptive["injection", "fgsm"] == transfer["injection", "fgsm"]
    # injection PGD ascends from 0 and from the targets' mean features and keeps its best iterate
    with_pgd = _plan(graph, adaptive=True, attacks={"fgsm": {}, "pgd": {}})
    assert params(with_pgd, ADAPTIVE)["injection", "pgd"] == {**params(with_pgd, TRANSFER)["injection", "pgd"],
                                                              "start": "both", "keep_best": True}
    # a loss the job names wins, in both threats
    mod = {**JOB["modification"], "attacks": {"dice": {}, "pgd": {"loss": "ce"}}}
    named = _plan(graph, adaptive=True, modification=mod)
    assert params(named, ADAPTIVE)["modification", "pgd"]["loss"] == params(named, TRANSFER)["modification", "pgd"]["loss"] == "ce"
    # the run manifest keeps the adaptive settings under their own names
    from grb_dist.sweep.cells import run_components
    attacks = run_components(p)["attacks"]
    assert attacks["modification/pgd/full/adaptive"]["loss"] == "prob_margin" and "loss" not in attacks["modification/pgd/full"]


TARGETED_JOB = {
    "dataset": "csbm", "seed": 0, "repeats": 1, "difficulties": ["full"], "scenario": "targeted", "adaptive": True,
    "train": {"epochs": 5, "patience": 5},
    "models": {"gcn": {"hidden_sizes": [8]}, "sage": {"hidden_sizes": [8]}},
    "defenses": ["gcn", "sage"], "surrogates": ["gcn"],
    "attacks": {"fgsm": {}},
    "targeted": {"targets": {"n": 3, "min_degree": 1}, "attack": {"n_flips": 2},
                 "attacks": {"rnd": {}, "nettack": {"epochs": 20}, "fga": {}, "prbcd": {"steps": 5}}},
}


def test_targeted_gradient_attacks_get_adaptive_cells_on_each_defense(tmp_path, graph, monkeypatch):
    """FGA and local PR-BCD follow the surrogate's gradients: an adaptive targeted job attacks
    each defense with itself (Nettack's own linear surrogate and the baselines do not); the
    perturbation is the attack run on the stored defense, per target, audited."""
    p, store, summary, _ = run(tmp_path, graph, InProcessEdge(), monkeypatch, job=TARGETED_JOB)
    adaptive = [c for c in p.scores if c.threat == ADAPTIVE]
    assert sorted({(c.attack, c.defense) for c in adaptive}) == [
        ("fga", "gcn"), ("fga", "sage"), ("prbcd", "gcn"), ("prbcd", "sage")]
    assert summary.failures == 0 and summary.computed == len(p.scores)
    scores = store.read_scores()
    mine = scores[scores["threat"] == ADAPTIVE]
    assert len(mine) == 4 and (mine["surrogate"] == mine["defense"]).all()
    assert all(len(v) == 3 for v in mine["target_nodes"])
    params = {t.file_stem: dict(t.params) for t in p.models}
    names = {t.file_stem: t.name for t in p.models}

    def load(stem):
        state = torch.load(store.root / "models" / f"{stem}.pt", weights_only=True)
        return worker.load_model(graph, names[stem], params[stem], state)

    labels = worker.attacker_labels(graph, load(p.surrogates[0].file_stem))
    for a in (a for a in p.attacks if a.threat == ADAPTIVE):
        stored = store.read_perturbation(a.perturbation_id)
        again = worker.attack_task(graph, a, load(a.surrogate_model), labels=labels).perturbation
        for name in ("targets", "removed", "added"):
            np.testing.assert_array_equal(getattr(again, name), getattr(stored, name))
