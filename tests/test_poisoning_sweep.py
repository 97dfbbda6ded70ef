"""The poisoning scenario end to end: its plan, a real local Ray sweep (2 CPUs), scores that
a direct train-and-evaluate on the stored perturbation reproduces, and resume after an
interruption."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch

from grb_dist.attacks.poisoning.base import poisoning_targets
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Modification, modified_graph, undirected_keys
from grb_dist.core.names import CLEAN, POISONING_DIFFICULTY

POISONING = "poisoning"
from grb_dist.datasets import load_dataset
from grb_dist.defenses import train_defense
from grb_dist.evaluation.evaluate import difficulty_accuracy, predict_tensors
from grb_dist.models.io import state_dict_from_bytes
from grb_dist.models.tensors import apply_modification, graph_tensors
from grb_dist.models.train import TrainConfig
from grb_dist.store import RunLock, RunStore, graph_fingerprint
from grb_dist.sweep.job import parse_job
from grb_dist.sweep.cells import needed_work, run_cells, run_components
from grb_dist.sweep.session import dataset_identity

JOB = {
    "dataset": "csbm", "seed": 0, "repeats": 2, "difficulties": ["easy", "full"], "scenario": "poisoning",
    "train": {"epochs": 30, "patience": 10}, "models": {"gcn": {"hidden_sizes": [16]}},
    "defenses": ["gcn", "mlp"], "surrogates": ["gcn"], "attacks": {"fgsm": {}},
    "poisoning": {"attack": {"ratio_edge_mod": 0.1}, "attacks": {"dice": {}, "rnd": {}}},
}


@pytest.fixture(scope="module")
def job():
    return parse_job(JOB)


@pytest.fixture(scope="module")
def graph(job):
    return load_dataset(job.dataset, normalize=job.normalize, seed=job.seed)


def job_plan(job, graph):
    return run_cells(job, graph_fingerprint(graph, job.normalize))


def sweep(job, graph, run_dir, on_progress=None):
    from grb_dist.sweep.runner import run_sweep
    from grb_dist.cluster.settings import RaySettings

    p = job_plan(job, graph)
    with RunLock(run_dir) as lock:
        store = RunStore.open(run_dir, dataset=dataset_identity(job, graph), components=run_components(p),
                              config=job.to_dict(), config_hash=job.config_hash, lock=lock)
        return store, run_sweep(p, graph, store, RaySettings(), on_progress=on_progress, flush_rows=1)


# ------------------------------------------------------------------------------ the plan


def test_plan_one_global_perturbation_per_attack_surrogate_and_repeat(job, graph):
    p = job_plan(job, graph)
    assert {a.difficulty for a in p.attacks} == {POISONING_DIFFICULTY} and {a.scenario for a in p.attacks} == {POISONING}
    assert len(p.attacks) == 2 * 1 * 2  # attacks x surrogates x repeats
    assert len(p.poisoned) == 2 + len(p.attacks) * 2  # a clean training per defense, then one per perturbation
    # every poisoning training is scored on every difficulty, and those are the plan's cells
    assert sorted(c.cell_id for pt in p.poisoned for c in pt.cells) == sorted(c.cell_id for c in p.scores)
    assert all([c.difficulty for c in pt.cells] == ["easy", "full"] for pt in p.poisoned)
    stems = [pt.model.file_stem for pt in p.poisoned]
    assert len(set(stems)) == len(stems) and all(c.defense_model == pt.model.file_stem for pt in p.poisoned
                                                 for c in pt.cells)
    clean = [pt for pt in p.poisoned if pt.perturbation_id is None]
    assert {pt.model.name for pt in clean} == {"gcn", "mlp"} and all(c.attack == CLEAN for pt in clean for c in pt.cells)
    # the evasion defenses are not trained: a poisoning run trains its surrogate and its poisoned models only
    work = needed_work(p, set(), lambda pid: False)
    assert [t.role for t in work.models] == ["surrogate"] and len(work.poisoned) == len(p.poisoned)
    assert len(set(p.scores)) == len({c.cell_id for c in p.scores})


def test_a_job_without_poisoning_keeps_its_hash_and_all_takes_poisoning_when_listed(job):
    plain = parse_job({k: v for k, v in JOB.items() if k not in ("poisoning", "scenario")})
    assert "poisoning" not in plain.to_dict()
    assert parse_job({**plain.to_dict(), "poisoning": {}}).config_hash == plain.config_hash
    both = {**JOB, "scenario": "all", "modification": {"attacks": {"rnd": {}}}}
    assert parse_job(both).scenarios == ("injection", "modification", "poisoning")
    assert parse_job({**both, "poisoning": {}}).scenarios == ("injection", "modification")
    with pytest.raises(ConfigError, match="poisoning.attacks must name at least one attack"):
        parse_job({**JOB, "poisoning": {}})
    with pytest.raises(ConfigError, match="job poisoning: unknown key 'attackz'"):
        parse_job({**JOB, "poisoning": {"attackz": {}}})


def test_modified_graph_equals_the_tensor_modification(graph):
    rng = np.random.default_rng(0)
    keys = undirected_keys(graph)
    removed = np.stack([keys[:7] // graph.num_nodes, keys[:7] % graph.num_nodes])
    added = np.stack([np.arange(10, 20), np.arange(500, 510)])
    added = added[:, ~np.isin(added[0] * graph.num_nodes + added[1], keys)]
    mod = Modification.build(removed, added, graph.num_nodes, graph.num_features)
    g = modified_graph(graph, mod)
    t = apply_modification(graph_tensors(graph, "cpu"), mod)
    assert np.array_equal(g.edge_index, t.edge_index.numpy())
    assert g.num_edges == graph.num_edges - 7 + added.shape[1] and g.split is graph.split
    assert modified_graph(g, mod.inverse(graph)).edge_index.tolist() == graph.edge_index.tolist()
    assert modified_graph(graph, None) is graph
    del rng


def test_poisoning_targets_are_the_unlabelled_nodes(graph):
    t = poisoning_targets(graph)
    assert np.intersect1d(t, graph.split["train"]).size == 0
    assert t.size + graph.split["train"].size == graph.num_nodes
    # a node of no split is not fought (Metattack's idx_unlabeled is val + test)
    loose = int(graph.split["val"][0])
    split = {k: v[v != loose] for k, v in graph.split.items()}
    t = poisoning_targets(dataclasses.replace(graph, split=split))
    assert loose not in t and t.size + graph.split["train"].size == graph.num_nodes - 1


# ------------------------------------------------------------------------------ on Ray


@pytest.fixture(scope="module")
def full_run(ray_local, job, graph, tmp_path_factory):
    return sweep(job, graph, tmp_path_factory.mktemp("poison") / "run")


def test_every_poisoning_cell_once(full_run, job, graph):
    store, summary = full_run
    p = job_plan(job, graph)
    df = store.read_scores()
    assert summary.failures == 0 and summary.computed == len(p.scores) == len(df)
    assert set(df["cell_id"]) == {c.cell_id for c in p.scores} and set(df["scenario"]) == {POISONING}
    attacked = df[df["attack"] != CLEAN]
    budget = round(0.1 * graph.num_edges)
    assert ((attacked["n_edges_added"] + attacked["n_edges_removed"]) <= budget).all()
    assert (attacked["n_edges_added"] + attacked["n_edges_removed"] > 0).all()
    models = store.read_models()
    assert sorted(models["role"].unique()) == ["poisoned", "surrogate"] and len(models) == 1 + len(p.poisoned)
    # how each training ended is stored: its epochs and why it stopped (30 epochs, patience 10)
    assert set(models["stop_reason"]) <= {"patience", "epochs"} and models["epochs_run"].between(1, 30).all()
    assert ((models["stop_reason"] == "epochs") == (models["epochs_run"] == 30)).all()


def test_a_poisoning_cell_trains_on_the_perturbed_graph_and_equals_a_direct_run(full_run, job, graph):
    store, _ = full_run
    p = job_plan(job, graph)
    df = store.read_scores().set_index("cell_id")
    pt = next(pt for pt in p.poisoned if pt.perturbation_id is not None and pt.model.name == "gcn"
              and pt.cells[0].attack == "dice")
    mod = store.read_perturbation(pt.perturbation_id)
    poisoned = modified_graph(graph, mod)
    cfg = TrainConfig(**{**pt.model.train, "seed": pt.model.seed})
    direct = train_defense("gcn", poisoned, dict(pt.model.params), cfg, transductive=True).model
    stored = state_dict_from_bytes(store.model_path(pt.model.file_stem).read_bytes())
    for k, v in direct.state_dict().items():
        assert torch.equal(v, stored[k]), k
    # ... and not on the clean graph
    clean = train_defense("gcn", graph, dict(pt.model.params), cfg, transductive=True).model
    assert any(not torch.equal(v, stored[k]) for k, v in clean.state_dict().items())
    acc = difficulty_accuracy(predict_tensors(direct, graph_tensors(poisoned, "cpu")), poisoned, ["easy", "full"])
    for c in pt.cells:
        assert df.loc[c.cell_id, "accuracy"] == pytest.approx(acc[c.difficulty], abs=0)


def _table(store):
    cols = ["cell_id", "attack", "defense", "difficulty", "repeat", "accuracy", "n_edges_added", "n_edges_removed"]
    return store.read_scores()[cols].sort_values("cell_id").reset_index(drop=True)


def test_an_interrupted_poisoning_sweep_resumes_to_the_same_scores(full_run, job, graph, tmp_path):
    run_dir = tmp_path / "run"
    stop_at = 4

    def interrupt(progress):
        if progress.computed >= stop_at:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep(job, graph, run_dir, on_progress=interrupt)
    done_before = RunStore.existing(run_dir).done_cells()
    total = len(job_plan(job, graph).scores)
    assert stop_at <= len(done_before) < total
    store, summary = sweep(job, graph, run_dir)
    assert summary.skipped == len(done_before) and summary.computed == total - len(done_before)
    pd.testing.assert_frame_equal(_table(store), _table(full_run[0]))
    _, again = sweep(job, graph, run_dir)
    assert again.computed == 0 and again.skipped == total


def test_a_stored_poisoned_model_is_scored_without_training(full_run, job, graph):
    from grb_dist.sweep.worker import poison_task

    store, _ = full_run
    p = job_plan(job, graph)
    pt = next(pt for pt in p.poisoned if pt.perturbation_id is not None and pt.model.name == "gcn")
    mod = store.read_perturbation(pt.perturbation_id)
    stored = state_dict_from_bytes(store.model_path(pt.model.file_stem).read_bytes())
    loaded = poison_task(graph, pt, mod, state_dict=stored)
    df = store.read_scores().set_index("cell_id")
    assert loaded.trained is None
    assert [loaded.results[c.difficulty]["accuracy"] for c in pt.cells] == [df.loc[c.cell_id, "accuracy"]
                                                                              for c in pt.cells]


def test_an_attack_with_its_own_targets_is_scored_on_them(graph):
    from grb_dist.sweep.worker import accuracies

    pred = torch.as_tensor(graph.labels).clone()
    wrong = graph.targets("full")[:10]
    pred[wrong] = (pred[wrong] + 1) % graph.num_classes
    plain = accuracies(pred, graph, ["easy", "full"])
    assert plain["full"] == (pytest.approx(1 - 10 / graph.targets("full").size), graph.targets("full").size)
    # a targeted set (a published Nettack set) reports on its attacked nodes, under every difficulty
    scored = np.sort(np.concatenate([wrong[:4], graph.targets("full")[-4:]]))
    own = accuracies(pred, graph, ["easy", "full"], scored)
    assert own == {"easy": (0.5, 8), "full": (0.5, 8)}


# ------------------------------------------------------------------------------ targeted poisoning

TARGETED = {**JOB, "repeats": 1, "poisoning": {**JOB["poisoning"], "budgets": {"easy": {"ratio_edge_mod": 0.02}}}}


def test_budgets_per_difficulty_make_poisoning_targeted(job, graph):
    targeted = parse_job(TARGETED)
    assert targeted.targeted(POISONING) and not job.targeted(POISONING)
    p = job_plan(targeted, graph)
    # a perturbation per (attack, difficulty): easy's budget from budgets.easy, full's from attack:
    assert sorted((a.attack, a.difficulty, a.params["ratio_edge_mod"]) for a in p.attacks) == [
        ("dice", "easy", 0.02), ("dice", "full", 0.1), ("rnd", "easy", 0.02), ("rnd", "full", 0.1)]
    assert all(a.targeted for a in p.attacks)
    # each poisoned training is scored on its perturbation's difficulty alone; clean ones on all
    of = {a.perturbation_id: a for a in p.attacks}
    for pt in p.poisoned:
        want = ["easy", "full"] if pt.perturbation_id is None else [of[pt.perturbation_id].difficulty]
        assert [c.difficulty for c in pt.cells] == want
    # a targeted 'full' perturbation is not the global one; the clean rows are the same
    plain = job_plan(parse_job({**TARGETED, "poisoning": JOB["poisoning"]}), graph)
    assert not {a.perturbation_id for a in plain.attacks} & set(of)
    assert not any(a.targeted for a in plain.attacks)
    assert {c.cell_id for c in plain.scores if c.attack == CLEAN} == {c.cell_id for c in p.scores if c.attack == CLEAN}
    # a published set does not depend on the nodes fought: it stays global, scored on every difficulty
    mixed = job_plan(parse_job({**TARGETED, "poisoning": {**TARGETED["poisoning"], "attacks": {"published": {}}}}),
                     graph)
    assert [(a.difficulty, a.targeted) for a in mixed.attacks] == [("full", False)]
    assert all([c.difficulty for c in pt.cells] == ["easy", "full"] for pt in mixed.poisoned)


def test_a_targeted_poisoning_perturbation_fights_its_difficultys_test_nodes(job, graph):
    from grb_dist.sweep.worker import attack_task

    surrogate = train_defense("gcn", graph, {"hidden_sizes": [16]}, TrainConfig(epochs=5, seed=0),
                              transductive=True).model
    easy = graph.targets("easy")

    def flips(cell):
        mod = attack_task(graph, cell, surrogate).perturbation
        return np.concatenate([mod.added, mod.removed], axis=1)

    cell = next(a for a in job_plan(parse_job(TARGETED), graph).attacks if (a.attack, a.difficulty) == ("dice", "easy"))
    pairs = flips(cell)
    assert 0 < pairs.shape[1] <= round(0.02 * graph.num_edges)
    assert np.isin(pairs, easy).any(axis=0).all()  # every flip touches an easy test node
    # the global perturbation fights every unlabelled node, most of them outside the easy set
    glob = flips(next(a for a in job_plan(job, graph).attacks if a.attack == "dice" and a.repeat == 0))
    assert not np.isin(glob, easy).any(axis=0).all()


# ------------------------------------------------------------------------------ adaptive poisoning

ADAPTIVE = {**JOB, "repeats": 1, "adaptive": True, "defenses": ["gcn", "mlp"],
            "poisoning": {"attack": {"ratio_edge_mod": 0.05},
                          "attacks": {"dice": {}, "meta_prbcd": {"steps": 3, "train_iters": 5, "block_size": 2000,
                                                                 "n_samples": 2}}}}


@pytest.fixture(scope="module")
def adaptive_job():
    return parse_job(ADAPTIVE)


def adaptive_plan(job, graph):
    from grb_dist.sweep.resolve import resolve, transfer_only

    resolved = resolve(job)
    return run_cells(resolved, graph_fingerprint(graph, job.normalize), transfer_only(resolved, graph))


def test_adaptive_poisoning_plans_a_meta_gradient_through_each_differentiable_defense(adaptive_job, graph):
    from grb_dist.core.names import ADAPTIVE as THREAT

    p = adaptive_plan(adaptive_job, graph)
    adaptive = [a for a in p.attacks if a.threat == THREAT]
    # meta_prbcd follows gradients, DICE does not; the MLP reads no edges
    assert [(a.attack, a.surrogate) for a in adaptive] == [("meta_prbcd", "gcn")]
    assert "reads no edges" in p.transfer_only[POISONING, "mlp"]
    a = adaptive[0]
    clean_gcn = next(pt.model for pt in p.poisoned if pt.perturbation_id is None and pt.model.name == "gcn")
    assert a.params["inner"] == "model" and a.surrogate_model == clean_gcn.file_stem
    assert a.labels_from == next(s.file_stem for s in p.surrogates if s.tag == "transductive")
    scored = [pt for pt in p.poisoned if pt.perturbation_id == a.perturbation_id]
    assert [pt.model.name for pt in scored] == ["gcn"] and {c.threat for c in scored[0].cells} == {THREAT}
    # the transfer cells keep their ids when adaptive is switched on
    plain = job_plan(parse_job({**ADAPTIVE, "adaptive": False}), graph)
    assert {c.cell_id for c in plain.scores} < {c.cell_id for c in p.scores}
    # the defense's clean model is trained once, before the attack, and its clean rows load it
    work = needed_work(p, set(), lambda pid: False)
    assert [t.file_stem for t in work.models].count(clean_gcn.file_stem) == 1


def test_an_adaptive_poisoning_cell_equals_a_direct_attack_and_training(ray_local, adaptive_job, graph, tmp_path):
    from grb_dist.core.names import ADAPTIVE as THREAT
    from grb_dist.attacks import build_attack
    from grb_dist.sweep.worker import attacker_labels, load_model
    from grb_dist.sweep.runner import run_sweep
    from grb_dist.cluster.settings import RaySettings

    p = adaptive_plan(adaptive_job, graph)
    with RunLock(tmp_path / "run") as lock:
        store = RunStore.open(tmp_path / "run", dataset=dataset_identity(adaptive_job, graph),
                              components=run_components(p), config=adaptive_job.to_dict(),
                              config_hash=adaptive_job.config_hash, lock=lock)
        summary = run_sweep(p, graph, store, RaySettings(), flush_rows=1)
    df = store.read_scores()
    assert summary.failures == 0 and len(df) == len(p.scores)
    a = next(a for a in p.attacks if a.threat == THREAT)
    # the defense's clean model was trained once: by its training task, then loaded by its clean rows
    timeline = pd.concat([pd.read_parquet(f) for f in (tmp_path / "run" / "timeline").glob("*.parquet")])
    trained = timeline[timeline["stage"] == "train"]["task"]
    assert sum(t.startswith("poisoned gcn") or t.startswith("gcn poisoned by none") for t in trained) == 1, list(trained)
    # the stored perturbation is the attack run directly on the defense's clean model
    state = lambda stem: state_dict_from_bytes(store.model_path(stem).read_bytes())  # noqa: E731
    defense = load_model(graph, "gcn", dict(p.targets[0].params), state(a.surrogate_model))
    surrogate = load_model(graph, "gcn", dict(p.surrogates[0].params), state(a.labels_from))
    torch.manual_seed(a.seed)
    direct = build_attack(a.attack, dict(a.params), POISONING).attack(graph, defense,
                                                                      labels=attacker_labels(graph, surrogate))
    stored = store.read_perturbation(a.perturbation_id)
    assert np.array_equal(direct.added, stored.added) and np.array_equal(direct.removed, stored.removed)
    assert stored.n_edge_flips > 0
    # ... and the defense trained on it is scored like any poisoning cell
    pt = next(pt for pt in p.poisoned if pt.perturbation_id == a.perturbation_id)
    poisoned = modified_graph(graph, stored)
    cfg = TrainConfig(**{**pt.model.train, "seed": pt.model.seed})
    model = train_defense("gcn", poisoned, dict(pt.model.params), cfg, transductive=True).model
    acc = difficulty_accuracy(predict_tensors(model, graph_tensors(poisoned, "cpu")), poisoned, ["easy", "full"])
    rows = df.set_index("cell_id")
    for c in pt.cells:
        assert rows.loc[c.cell_id, "threat"] == THREAT and rows.loc[c.cell_id, "surrogate"] == "gcn"
        assert rows.loc[c.cell_id, "accuracy"] == pytest.approx(acc[c.difficulty], abs=0)
