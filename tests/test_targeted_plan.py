"""``grb-dist sweep --plan`` of the targeted scenario: each target attacked alone and scored
alone, priced per target (``grb_dist/sweep/cost/targeted.py``): an attack cell is a setup
plus T times one target's attack, a score cell a clean pass plus T evaluations of one target.

The cost model's arithmetic is checked on given figures; the plans themselves on a small
CSBM job, comparing what the plan computes (never a time against a threshold)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from grb_dist.cli import app
from grb_dist.sweep.cells import needed_work, run_cells
from grb_dist.sweep.cost.calibrate import Calibration, Rate, Startup
from grb_dist.sweep.cost.forecast import Cluster, forecast, per_target_notes, task_figures
from grb_dist.sweep.cost.targeted import figure
from grb_dist.sweep.job import parse_job
from helpers import small

runner = CliRunner()
FINGERPRINT = "f" * 64


def targeted_job(n: int = 4, **changes) -> dict:
    """A small targeted job: two difficulties, GCN and GCN-SVD defending, RND and Nettack
    attacking ``n`` targets per difficulty."""
    job = small(scenario="targeted", repeats=1, difficulties=["easy", "full"], train={"epochs": 10, "patience": 5},
                defenses=["gcn", "gcnsvd"],
                targeted={"targets": {"select": "random", "n": n, "min_degree": 2},
                          "attack": {"n_flips": 1, "degree_multiple": 1},
                          "attacks": {"rnd": {}, "nettack": {"epochs": 20}}})
    job.update(changes)
    return job


# ------------------------------------------------------------------ the cost model, on given figures

def test_the_forecast_prices_a_targeted_cell_per_target():
    """Given figures: an attack cell costs its setup plus T times one target's attack, a
    score cell its clean pass plus T evaluations, a clean row the clean pass; the notes
    say so, and a job without a targeted scenario gets none of it."""
    cells = run_cells(parse_job(targeted_job()), FINGERPRINT)
    work = needed_work(cells, set(), lambda _: False)
    targeted = [a for a in work.attacks_to_run if a.scenario == "targeted"]
    assert targeted and all(a.selection is not None for a in targeted)
    counts = {a.perturbation_id: 3 + i for i, a in enumerate(targeted)}
    scoring = {figure(c.scenario, c.difficulty, c.defense): Rate(0.25, 0.125, 40) for c in work.todo}
    cal = Calibration({"device": "cpu"}, {t.file_stem: Rate(0.0, 0.01, 10) for t in work.models},
                      {a.perturbation_id: Rate(2.0, 0.5, 20) for a in work.attacks_to_run},
                      {c.defense: Rate(0.0625, 0.0, 30) for c in work.todo}, Startup(0.0, 0.0, 0.0, 0.0, 100),
                      target_score=scoring, targets=counts)
    fc = forecast(cells, work, cal, Cluster(cpus=1))
    tasks = task_figures(work, cal, fc)
    for t in (t for t in tasks if t["kind"] == "attack"):
        assert t["targets"] == counts[t["perturbation"]]
        assert t["seconds"] == pytest.approx(2.0 + 0.5 * t["targets"])
    scores = [t for t in tasks if t["kind"] == "score"]
    for t in scores:
        expected = 0.25 + 0.125 * counts[t["perturbation"]] if t["perturbation"] else 0.25
        assert t["seconds"] == pytest.approx(expected)
        assert t["task_bytes"] == 40  # the larger of the forward pass's and the per-target scoring's
    assert fc.stages["attack"].task_seconds == pytest.approx(sum(2.0 + 0.5 * n for n in counts.values()))
    assert fc.stages["score"].task_seconds >= sum(t["seconds"] for t in scores)
    assert fc.pricing and fc.pricing[0].startswith("targeted attacks are priced per target")
    injection = run_cells(parse_job(small()), FINGERPRINT)
    assert per_target_notes(needed_work(injection, set(), lambda _: False), cal) == []


# ------------------------------------------------------------------ plans of a small targeted job

class _NoRay:
    """Ray's start-up, not timed: these tests plan, they do not measure a local Ray's start."""

    def __init__(self, cpus, dashboard):
        pass

    def result(self):
        return Startup(1.0, 1.0, 1.0, 1.0, 100 * 2**20)

    def cancel(self):
        pass


@pytest.fixture(scope="module")
def plan_cache(tmp_path_factory):
    """One calibration cache for the module's plans: a figure one plan measured, the next reuses."""
    return tmp_path_factory.mktemp("targeted-plan-cache")


@pytest.fixture
def plan(tmp_path, monkeypatch, plan_cache, one_thread):
    """``plan(job, *flags)``: the JSON plan of ``job`` (a dict), nothing of the run written."""
    import grb_dist.sweep.cost.calibrate as cal

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(plan_cache))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(cal, "StartupProbe", _NoRay)

    def run(job: dict, *flags: str, text: bool = False):
        path = tmp_path / "job.yaml"
        path.write_text(yaml.safe_dump(job))
        args = ["plan", "--job", str(path), "--out", str(tmp_path / "run"), "--no-dashboard", *flags]
        r = runner.invoke(app, args if text else [*args, "--json"])
        assert r.exit_code == 0, r.output
        assert not (tmp_path / "run").exists()
        return r.stdout if text else json.loads(r.stdout)

    return run


def _graph_and_selection(job: dict):
    from grb_dist.datasets import load_dataset

    spec = parse_job(job)
    return load_dataset(spec.dataset, normalize=spec.normalize, seed=spec.seed), spec.target_selection("targeted")


def _weights(graph, selection, attack: str, difficulty: str) -> np.ndarray:
    """``1 +`` each target's budget under ``attack``: what a target's attack grows with."""
    from grb_dist.attacks import build_attack
    from grb_dist.core.targeted import select_targets

    targets = select_targets(graph, difficulty, selection)
    return 1 + build_attack(attack, {"n_flips": 1, "degree_multiple": 1}, "targeted").budgets(graph, targets)


def test_a_targeted_plan_prices_every_targeted_cell_per_target(plan):
    """Every attack task attacks its difficulty's targets (as the sweep selects them) and
    costs its setup plus T times one target's attack; every attacked score cell is
    priced per target; the clean rows by one pass; the text says how."""
    job = targeted_job()
    doc = plan(job)
    graph, selection = _graph_and_selection(job)
    from grb_dist.core.targeted import select_targets

    attacks = [t for t in doc["tasks"] if t["kind"] == "attack"]
    assert len(attacks) == 2 * 2 == doc["stages"]["attack"]["count"]  # rnd, nettack x easy, full
    for t in attacks:
        assert t["targets"] == select_targets(graph, t["difficulty"], selection).size == 4
        assert t["seconds"] == pytest.approx(t["setup_seconds"] + t["targets"] * t["target_seconds"], abs=2e-6)
    scores = [t for t in doc["tasks"] if t["kind"] == "score"]
    assert len(scores) == doc["stages"]["score"]["count"] == 2 * (2 * 2 + 2)  # defenses x (cells + clean rows)
    for t in scores:
        if t["perturbation"] is None:
            assert "targets" not in t
        else:
            assert t["targets"] == 4 and t["seconds"] >= 4 * t["target_seconds"] > 0
    assert any(note.startswith("targeted attacks are priced per target") for note in doc["notes"])
    text = plan(job, text=True)
    assert "note: targeted attacks are priced per target" in text and "note: targeted score cells" in text


def test_the_attack_price_grows_with_the_number_of_targets(plan):
    """``targets.n`` 16 against 4 on the same graph: the same setup (one figure, measured
    once), the per-target part 4x as many targets, each weighed by its budget."""
    small_job, large_job = targeted_job(4), targeted_job(16)
    four, sixteen = plan(small_job), plan(large_job)
    graph, selection = _graph_and_selection(large_job)
    _, selection_4 = _graph_and_selection(small_job)

    def attacks(doc):
        return {(t["name"], t["difficulty"]): t for t in doc["tasks"] if t["kind"] == "attack"}

    a4, a16 = attacks(four), attacks(sixteen)
    assert a4.keys() == a16.keys()
    for key, t4 in a4.items():
        t16 = a16[key]
        assert (t4["targets"], t16["targets"]) == (4, 16)
        assert t16["setup_seconds"] == t4["setup_seconds"]
        w4, w16 = (_weights(graph, s, *key) for s in (selection_4, selection))
        # one target's attack: the unit per weight times the mean weight of the cell's targets
        assert t16["target_seconds"] * w4.mean() == pytest.approx(t4["target_seconds"] * w16.mean(), rel=1e-6)
    for difficulty in ("easy", "full"):
        t4, t16 = a4["nettack", difficulty], a16["nettack", difficulty]
        assert t16["seconds"] > t4["seconds"]
        ratio = (t16["seconds"] - t16["setup_seconds"]) / (t4["seconds"] - t4["setup_seconds"])
        assert 2 < ratio < 8  # roughly proportional: 4x the targets, their budgets differ
    assert sixteen["stages"]["attack"]["task_seconds"] > four["stages"]["attack"]["task_seconds"]


def test_a_whole_graph_defense_costs_more_per_target_than_a_ball_model(plan):
    """GCN-SVD has no receptive field (its low-rank reconstruction reads the whole graph): it
    runs on the whole graph for every target, GCN on the target's ball, a small share of
    the graph here; per target the plan prices GCN-SVD above GCN on each difficulty."""
    from grb_dist.attacks.shared.surrogate import receptive_hops
    from grb_dist.defenses import build_defense

    job = targeted_job()
    graph, _ = _graph_and_selection(job)
    assert receptive_hops(build_defense("gcnsvd", graph, {})) is None
    assert receptive_hops(build_defense("gcn", graph, {"hidden_sizes": [8]})) == 2
    doc = plan(job)
    per_target = {(t["name"], t["difficulty"]): t["target_seconds"] for t in doc["tasks"]
                  if t["kind"] == "score" and t["perturbation"]}
    for difficulty in ("easy", "full"):
        assert per_target["gcnsvd", difficulty] > per_target["gcn", difficulty]


def test_a_job_of_every_scenario_with_a_targeted_section_plans(plan):
    """``--scenario all`` with a targeted section beside injection and modification: the
    plan prices the targeted cells per target and the others as before (no per-target
    figure for them)."""
    job = targeted_job(scenario="all", modification={"attacks": {"dice": {}}})
    doc = plan(job)
    assert doc["scenarios"] == ["injection", "modification", "targeted"]
    attacks = [t for t in doc["tasks"] if t["kind"] == "attack"]
    assert {t["scenario"] for t in attacks} == {"injection", "modification", "targeted"}
    for t in attacks:
        assert ("targets" in t) == (t["scenario"] == "targeted")
    for t in (t for t in doc["tasks"] if t["kind"] == "score"):
        assert ("targets" in t) == (t["scenario"] == "targeted" and t["perturbation"] is not None)
    assert doc["totals"]["seconds"] > 0
