"""End-to-end sweeps on a real local Ray (2 CPUs): completeness, re-checkable scores,
leaderboards, resume after an interruption, and a killed scoring actor."""

from __future__ import annotations

import os
import signal

import numpy as np
import pandas as pd
import pytest
import torch

from grb_dist.attacks import INJECTION
from grb_dist.datasets import load_dataset
from grb_dist.evaluation.evaluate import evaluate
from grb_dist.leaderboard import leaderboards
from grb_dist.store import RunLock, RunStore, graph_fingerprint
from grb_dist.leaderboard.reduce import reduce_run
from grb_dist.sweep.session import dataset_identity
from grb_dist.core.names import CLEAN
from grb_dist.sweep.job import parse_job
from grb_dist.sweep.cells import run_cells, run_components
from grb_dist.sweep.resolve import resolve
from grb_dist.defenses import build_defense

#: Two real attacks (the cheapest registered ones).
TEST_ATTACKS = ([a for a in ("rnd", "fgsm", "pgd", "speit", "tdgia") if a in INJECTION] or INJECTION.names())[:2]

JOB = {
    "dataset": "csbm", "seed": 0, "repeats": 2, "difficulties": ["easy", "full"],
    "train": {"epochs": 30, "patience": 10},
    "models": {"gcn": {"hidden_sizes": [16]}, "mlp": {"hidden_sizes": [16]}},
    "defenses": ["gcn", "mlp"], "surrogates": ["gcn"],
    "attack": {"n_inject": 8, "edges_per_node": 4, "steps": 5, "step_size": 0.01},
    "budgets": {"easy": {"n_inject": 4}},
    "attacks": {a: {} for a in TEST_ATTACKS},
}
KEY = ["cell_id", "perturbation_id", "attack", "surrogate", "defense", "difficulty", "repeat", "seed", "accuracy",
       "n_targets", "n_injected", "n_injected_edges", "config_hash"]


@pytest.fixture(scope="module")
def job():
    spec = parse_job(JOB)
    resolve(spec)
    return spec


@pytest.fixture(scope="module")
def graph(job):
    return load_dataset(job.dataset, normalize=job.normalize, seed=job.seed)


def job_plan(job, graph):
    return run_cells(job, graph_fingerprint(graph, job.normalize))


def sweep(job, graph, run_dir, on_progress=None, flush_rows=4096, **scaling):
    from grb_dist.sweep.runner import run_sweep
    from grb_dist.cluster.settings import RaySettings, Scaling

    p = job_plan(job, graph)
    with RunLock(run_dir) as lock:
        store = RunStore.open(run_dir, dataset=dataset_identity(job, graph), components=run_components(p),
                              config=job.to_dict(), config_hash=job.config_hash, lock=lock)
        return store, run_sweep(p, graph, store, RaySettings(scaling=Scaling(**scaling)), on_progress=on_progress,
                                flush_rows=flush_rows)


@pytest.fixture(scope="module")
def full_run(ray_local, job, graph, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("sweep") / "run"
    store, summary = sweep(job, graph, run_dir)
    return store, summary


def test_every_cell_exactly_once(full_run, job, graph):
    store, summary = full_run
    p = job_plan(job, graph)
    df = store.read_scores()
    assert summary.failures == 0 and summary.computed == len(p.scores) == summary.total
    assert len(df) == len(p.scores) and df["cell_id"].is_unique
    assert set(df["cell_id"]) == {c.cell_id for c in p.scores}
    attacked = df[df["attack"] != CLEAN]
    combos = attacked.groupby(["attack", "surrogate", "defense", "difficulty", "repeat"]).size()
    assert len(combos) == len(job.scenario_attacks("injection")) * 1 * 2 * 2 * 2 and (combos == 1).all()
    clean = df[df["attack"] == CLEAN]
    assert len(clean) == 2 * 2 and (clean["repeat"] == 0).all() and clean["perturbation_id"].isna().all()
    assert df["accuracy"].between(0, 1).all() and (df["score_seconds"] > 0).all()
    assert (attacked["attack_seconds"] > 0).all() and (df["defense_train_seconds"] > 0).all()
    assert (df["config_hash"] == job.config_hash).all()
    assert (df["dataset_fingerprint"] == graph_fingerprint(graph, job.normalize)).all() and set(df["dataset"]) == {"csbm"}
    budget = {"easy": 4, "full": 8}
    assert (attacked["n_injected"] == attacked["difficulty"].map(budget)).all()
    assert (attacked["n_injected_edges"] <= attacked["n_injected"] * 4).all()
    # black-box: the surrogate is a separately seeded model, not a target's file
    models = store.read_models()
    assert set(models["role"]) == {"target", "surrogate"}
    assert models.loc[models["role"] == "surrogate", "seed"].tolist() != models.loc[models["name"] == "gcn"].query("role == 'target'")["seed"].tolist()


def test_scores_recheck_from_stored_models_and_perturbations(full_run, job, graph):
    store, _ = full_run
    p = job_plan(job, graph)
    df = store.read_scores()
    params = {t.name: t.params for t in p.targets}
    stems = {t.name: t.file_stem for t in p.targets}
    models = {}
    for name in params:
        m = build_defense(name, graph, params[name])
        m.load_state_dict(torch.load(store.model_path(stems[name]), weights_only=True))
        models[name] = m.eval()
    for _, row in df.iterrows():
        inj = None if row["attack"] == CLEAN else store.read_perturbation(row["perturbation_id"])
        acc = evaluate(models[row["defense"]], graph, inj, [row["difficulty"]])[row["difficulty"]]
        assert acc == pytest.approx(row["accuracy"], abs=1e-9), row.to_dict()
        assert row["n_targets"] == graph.targets(row["difficulty"]).size
    pert = store.read_perturbations()
    assert set(pert["perturbation_id"]) == set(df["perturbation_id"].dropna())
    # the resolved feature limits (the job sets none: the normalised features' own range)
    assert (pert["feat_lim_min"] == float(graph.features.min())).all()
    assert (pert["feat_lim_max"] == float(graph.features.max())).all()


def test_leaderboards_match_metric_functions(full_run):
    store, _ = full_run
    boards = reduce_run(store)
    expected = leaderboards(store.read_scores())
    assert set(boards) == {f"injection/{k}-{d}" for k in ("attacks", "defenses") for d in ("easy", "full")}
    for name, board in boards.items():
        pd.testing.assert_frame_equal(board, expected[name])
        saved = pd.read_parquet(store.root / "leaderboard" / f"{name}.parquet")
        pd.testing.assert_frame_equal(saved, board, check_dtype=False)
        assert (store.root / "leaderboard" / f"{name}.md").read_text().startswith("###")
    a = boards["injection/attacks-full"]
    assert a["n_defenses"].eq(2).all() and a["n_repeats"].eq(2).all()
    d = boards["injection/defenses-full"]
    assert d["n_attacks"].eq(len(TEST_ATTACKS)).all()  # the clean row is not counted


def _table(store: RunStore) -> pd.DataFrame:
    return store.read_scores()[KEY].sort_values("cell_id").reset_index(drop=True)


def test_resume_after_interrupt(full_run, job, graph, tmp_path):
    run_dir = tmp_path / "run"
    stop_at = 5

    def interrupt(progress):
        if progress.computed >= stop_at:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep(job, graph, run_dir, on_progress=interrupt)
    store = RunStore.existing(run_dir)
    done_before = store.done_cells()
    assert stop_at <= len(done_before) < len(job_plan(job, graph).scores)
    assert not [p for p in run_dir.rglob(".*tmp*")]  # no partial files
    store, summary = sweep(job, graph, run_dir)
    assert summary.skipped == len(done_before)
    assert summary.computed == len(job_plan(job, graph).scores) - len(done_before)
    pd.testing.assert_frame_equal(_table(store), _table(full_run[0]))
    # a third run has nothing to do
    _, again = sweep(job, graph, run_dir)
    assert again.computed == 0 and again.skipped == len(job_plan(job, graph).scores)


def test_killed_scoring_actor_is_restarted_and_every_cell_done_once(full_run, job, graph, tmp_path, ray_local):
    ray = ray_local
    killed = []

    def kill_scorer(progress):
        if progress.computed >= 2 and not killed and progress.scorers:
            pid = ray.get(progress.scorers[0].pid.remote())
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    store, summary = sweep(job, graph, tmp_path / "run", on_progress=kill_scorer, num_scorers=1)
    assert killed, "the scorer was never killed"
    assert summary.failures == 0 and summary.computed == len(job_plan(job, graph).scores)
    df = store.read_scores()
    assert df["cell_id"].is_unique and len(df) == len(job_plan(job, graph).scores)
    pd.testing.assert_frame_equal(_table(store), _table(full_run[0]))
    np.testing.assert_array_equal(np.sort(df["cell_id"]), np.sort(full_run[0].read_scores()["cell_id"]))


def test_failed_attack_is_counted_and_other_cells_complete(ray_local, graph, tmp_path):
    # edges_per_node above the number of easy targets: the attack task raises a ConfigError
    bad = parse_job({**JOB, "difficulties": ["easy"], "repeats": 1, "attacks": {TEST_ATTACKS[0]: {}},
                     "attack": {**JOB["attack"], "edges_per_node": graph.targets("easy").size + 1}})
    store, summary = sweep(bad, graph, tmp_path / "run")
    assert summary.failures == 2 and summary.computed == 2 and len(summary.errors) == 1
    assert "edges_per_node" in summary.errors[0]
    df = store.read_scores()
    assert set(df["attack"]) == {CLEAN} and len(df) == 2


def test_damaged_perturbation_is_recomputed(full_run, job, graph, tmp_path):
    import shutil

    import pyarrow.parquet as pq

    run_dir = tmp_path / "run"
    shutil.copytree(full_run[0].root, run_dir)
    store = RunStore.existing(run_dir)
    pid = store.read_scores()["perturbation_id"].dropna().iloc[0]
    path = store.perturbation_path(pid)
    data = bytearray(path.read_bytes())
    data[8:-8] = b"\0" * (len(data) - 16)  # damaged inside, Parquet magic intact
    path.write_bytes(bytes(data))
    # drop that perturbation's score rows, so that the sweep needs the perturbation again
    for f in (run_dir / "scores").rglob("*.parquet"):
        t = pq.read_table(f)
        keep = [i for i, p in enumerate(t.column("perturbation_id").to_pylist()) if p != pid]
        if len(keep) < t.num_rows:
            pq.write_table(t.take(keep), f)
    lost = len(full_run[0].read_scores()) - len(store.read_scores())
    assert lost > 0
    store, summary = sweep(job, graph, run_dir)
    assert summary.computed == lost and summary.failures == 0
    pd.testing.assert_frame_equal(_table(store), _table(full_run[0]))
    store.read_perturbation(pid)  # stored again, readable
