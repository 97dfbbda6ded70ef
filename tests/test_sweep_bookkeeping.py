"""The sweep's bookkeeping is plain Python: run without Ray.

:mod:`grb_dist.sweep.runner` reaches Ray only through :mod:`grb_dist.cluster.ray_edge`. Here a
small in-process edge stands in for it (every task runs when submitted, with the worker's
plain functions), so the driver's stages, batching, waiting cells, failures and the rows it
writes are checked without a Ray cluster.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from grb_dist.core.resources import Peak
from grb_dist.core.names import CLEAN
from grb_dist.store import RunLock, RunStore, graph_fingerprint
from grb_dist.sweep import placement, runner, worker
from grb_dist.sweep.job import parse_job
from grb_dist.sweep.cells import run_cells, run_components
from grb_dist.cluster.ray_edge import ActorLost, TaskFailed
from grb_dist.sweep.session import dataset_identity
from grb_dist.sweep.tasks import Scored
from grb_dist.cluster.settings import RaySettings

from helpers import tiny_csbm

JOB = {
    "dataset": "csbm", "seed": 0, "repeats": 2, "difficulties": ["easy", "full"],
    "train": {"epochs": 5, "patience": 5},
    "models": {"gcn": {"hidden_sizes": [8]}, "mlp": {"hidden_sizes": [8]}},
    "defenses": ["gcn", "mlp"], "surrogates": ["gcn"],
    "attack": {"n_inject": 4, "edges_per_node": 2, "steps": 2},
    "attacks": {"rnd": {}, "fgsm": {}},
}


class InProcessEdge:
    """What the runner asks of the Ray edge, computed in this process when submitted."""

    def __init__(self, fail_attack: str | None = None, lose_scorer_once: bool = False):
        self.objects: dict[int, object] = {}
        self.ids = itertools.count()
        self.fail_attack = fail_attack
        self.lose_scorer_once = lose_scorer_once
        self.submitted = {"train": 0, "attack": 0, "score": 0}
        self.cancelled: list = []

    def _ref(self, value) -> int:
        ref = next(self.ids)
        self.objects[ref] = value
        return ref

    def _value(self, ref):
        return None if ref is None else self.objects[ref]

    # the edge's functions, as the runner calls them
    put = _ref

    def put_registrations(self):
        return [self._ref({})]

    def options(self, settings, kind, **sizes):
        return {"kind": kind, **sizes}

    def cluster_size(self):
        return 2.0, 0.0

    def nodes(self):
        return [{"cpus": 2.0, "gpus": 0.0, "memory": float(2**34)}]

    def submit_train(self, graph_ref, task, registrations, opts, name):
        self.submitted["train"] += 1
        return self._ref(worker.train_task(self._value(graph_ref), task))

    def submit_attack(self, graph_ref, cells, models, registrations, opts, name):
        self.submitted["attack"] += 1
        graph = self._value(graph_ref)
        surrogate, *labeler = [worker.load_model(graph, m, p, self._value(ref)) for m, p, ref in models]
        refs = []
        for cell in cells:
            if cell.attack == self.fail_attack:
                refs.append(self._ref(TaskFailed(f"ConfigError: {cell.attack} refused")))
            else:
                refs.append(self._ref(worker.attack_batch(graph, [cell], surrogate,
                                                          labeler=labeler[0] if labeler else None)[0]))
        return refs

    def start_scorer(self, name, opts):
        return SimpleNamespace(name=name, scorer=None)

    def submit_score(self, scorer, setup, pert_ref, difficulty, defenses):
        self.submitted["score"] += 1
        if self.lose_scorer_once:
            self.lose_scorer_once = False
            return self._ref(ActorLost("the scorer's worker died"))
        graph_ref, models, _ = setup
        if scorer.scorer is None:
            scorer.scorer = worker.Scorer(self._value(graph_ref), {})
        for name, params, ref, secs in models:
            if name not in scorer.scorer.models:
                scorer.scorer.models[name] = worker.load_model(scorer.scorer.graph, name, params, self._value(ref))
                scorer.scorer.train_seconds[name] = float(secs)
        attack = self._value(pert_ref)
        results = scorer.scorer.score(attack.perturbation if attack is not None else None, difficulty, defenses)
        return self._ref(Scored(results, Peak()))  # what the edge's Scorer returns: no memory measured here

    def wait(self, refs, timeout):
        return refs[:1]

    def get(self, ref):
        value = self._value(ref)
        if isinstance(value, TaskFailed):
            raise value
        return value

    def cancel(self, refs):
        self.cancelled.extend(refs)

    def kill(self, actors):
        pass


@pytest.fixture(scope="module")
def graph():
    return tiny_csbm(n=200)


def run(tmp_path, graph, edge, monkeypatch, job=JOB):
    monkeypatch.setattr(runner, "ray_tasks", edge)
    monkeypatch.setattr(placement, "ray_tasks", edge)
    spec = parse_job(job)
    p = run_cells(spec, graph_fingerprint(graph, spec.normalize))
    seen = []
    with RunLock(tmp_path / "run") as lock:
        store = RunStore.open(tmp_path / "run", dataset=dataset_identity(spec, graph), components=run_components(p),
                              config=spec.to_dict(), config_hash=spec.config_hash, lock=lock)
        summary = runner.run_sweep(p, graph, store, RaySettings(), on_progress=seen.append)
    return p, store, summary, seen


def test_every_cell_once_without_ray(tmp_path, graph, monkeypatch):
    edge = InProcessEdge()
    p, store, summary, seen = run(tmp_path, graph, edge, monkeypatch)
    assert summary.failures == 0 and summary.computed == summary.total == len(p.scores)
    scores = store.read_scores()
    assert sorted(scores["cell_id"]) == sorted(c.cell_id for c in p.scores)
    assert scores["accuracy"].between(0, 1).all()
    assert set(scores.loc[scores["attack"] == CLEAN, "repeat"]) == {0}
    assert edge.submitted["train"] == len(p.models)  # every model trained once
    # cells on one surrogate and difficulty are batched: fewer attack tasks than perturbations
    assert 0 < edge.submitted["attack"] <= len(p.attacks)
    # the perturbations are stored with the feature limits they were held to
    perts = store.read_perturbations()
    assert len(perts) == len(p.attacks) and (perts["feat_lim_min"] < perts["feat_lim_max"]).all()
    # progress counts never go back, and end complete
    for a, b in zip(seen, seen[1:]):
        assert (b.train.done, b.attack.done, b.score.done) >= (a.train.done, a.attack.done, a.score.done)
    last = seen[-1]
    assert (last.train.done, last.attack.done, last.score.done) == (len(p.models), len(p.attacks), len(p.scores))


def test_a_failed_attack_is_counted_and_the_rest_completes(tmp_path, graph, monkeypatch):
    p, store, summary, _ = run(tmp_path, graph, InProcessEdge(fail_attack="fgsm"), monkeypatch)
    failed = [c for c in p.scores if c.attack == "fgsm"]
    assert summary.failures == len(failed) and summary.computed == len(p.scores) - len(failed)
    assert all("fgsm refused" in e for e in summary.errors) and len(summary.errors) == len(
        [a for a in p.attacks if a.attack == "fgsm"])
    assert "fgsm" not in set(store.read_scores()["attack"])


def test_a_lost_scorer_call_is_resubmitted(tmp_path, graph, monkeypatch):
    edge = InProcessEdge(lose_scorer_once=True)
    p, store, summary, _ = run(tmp_path, graph, edge, monkeypatch)
    assert summary.failures == 0 and len(store.read_scores()) == len(p.scores)


def test_a_finished_run_submits_nothing(tmp_path, graph, monkeypatch):
    run(tmp_path, graph, InProcessEdge(), monkeypatch)
    again = InProcessEdge()
    p, _, summary, _ = run(tmp_path, graph, again, monkeypatch)
    assert summary.computed == 0 and summary.skipped == len(p.scores)
    assert again.submitted == {"train": 0, "attack": 0, "score": 0}
