"""The targeted scenario through the sweep on a real local Ray: an interrupted targeted sweep
resumes to the scores of one uninterrupted run (per-target predictions and margins
included), every stored row equals a direct evaluation of its defense at each target on
the graph with that target's flips alone, and the boards and the report show the scenario.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from grb_dist.cli import app
from grb_dist.core.names import CLEAN
from grb_dist.datasets import load_dataset
from grb_dist.models.io import state_dict_from_bytes
from grb_dist.models.tensors import apply_modification, graph_tensors
from grb_dist.store import RunStore
from grb_dist.sweep.worker import load_model
from helpers import default_signals, pausing_sweep, wait_for

JOB = """
dataset: csbm
seed: 0
repeats: 1
difficulties: [easy, full]
train: {epochs: 25, patience: 10}
models: {gcn: {hidden_sizes: [16]}, mlp: {hidden_sizes: [16]}}
defenses: [gcn, mlp]
surrogates: [gcn]
scenario: targeted
injection: {attacks: {fgsm: {}}}
targeted:
  targets: {select: nettack, n: 6, high: 2, low: 2, min_degree: 2}   # Nettack's protocol, chosen once
  attack: {n_flips: 1, degree_multiple: 1}
  attacks: {rnd: {}, dice: {}, nettack: {epochs: 50}}
"""
#: 2 difficulties x 2 defenses x (3 attacks + the clean row)
CELLS = 2 * 2 * 4
COLUMNS = ["cell_id", "accuracy", "n_targets", "target_nodes", "target_predictions", "target_margins"]


def rows(run: Path) -> pd.DataFrame:
    if not (run / "scores").is_dir() or not any((run / "scores").rglob("*.parquet")):
        return pd.DataFrame(columns=COLUMNS)
    return pd.read_parquet(run / "scores", columns=COLUMNS).set_index("cell_id").sort_index()


@pytest.fixture(scope="module")
def setup(ray_local, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("targeted")
    job = tmp / "job.yaml"
    job.write_text(JOB)
    ref = tmp / "reference"
    r = CliRunner().invoke(app, ["sweep", "--job", str(job), "--out", str(ref)])
    assert r.exit_code == 0, r.output
    reference = rows(ref)
    assert len(reference) == CELLS and reference.index.is_unique
    return job, tmp, ray_local.get_runtime_context().gcs_address, ref, reference


def same_rows(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.index) == list(want.index)
    np.testing.assert_array_equal(got["accuracy"].to_numpy(), want["accuracy"].to_numpy())
    for col in ("target_nodes", "target_predictions"):
        assert [list(v) for v in got[col]] == [list(v) for v in want[col]], col
    for a, b in zip(got["target_margins"], want["target_margins"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_an_interrupted_targeted_sweep_resumes_to_the_same_scores(setup):
    job, tmp, address, _, reference = setup
    out, log, marker = tmp / "interrupted", tmp / "interrupted.log", tmp / "marker"
    args = ["sweep", "--job", str(job), "--out", str(out), "--address", address, "--flush-rows", "2"]
    p = subprocess.Popen([*pausing_sweep(marker, 5), *args], stdout=open(log, "w"), stderr=subprocess.STDOUT,
                         start_new_session=True, preexec_fn=default_signals)
    try:
        wait_for(marker, p, lambda: (p.poll(), log.read_text()[-3000:]))
        p.send_signal(signal.SIGINT)
        rc = p.wait(120)
    finally:
        if p.poll() is None:
            p.kill()
    assert rc == 130, log.read_text()[-3000:]
    kept = rows(out)
    assert 5 <= len(kept) < CELLS, log.read_text()[-3000:]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert f"{CELLS - len(kept)} to compute" in r.output, r.output
    same_rows(rows(out), reference)


def test_every_targeted_row_is_its_defense_at_each_target_alone(setup):
    _, _, _, ref, reference = setup
    store = RunStore.existing(ref)
    scores = pd.read_parquet(ref / "scores")
    graph = load_dataset("csbm", seed=0)
    clean = graph_tensors(graph)
    models = {}
    checked = 0
    for _, row in scores.iterrows():
        name = row["defense"]
        if name not in models:  # the defense as the run stored it
            stem = f"{name}-0"
            params = json.loads(store.read_model_meta(stem)["params_json"])
            models[name] = load_model(graph, name, params, store.read_model(stem, state_dict_from_bytes))
        model, nodes = models[name], np.asarray(row["target_nodes"], np.int64)
        assert nodes.size == row["n_targets"] > 0
        mod = None if row["attack"] == CLEAN else store.read_perturbation(row["perturbation_id"])
        for node, pred, margin in zip(nodes, row["target_predictions"], row["target_margins"]):
            g = clean if mod is None else apply_modification(clean, mod.of(int(node)))
            with torch.no_grad():
                logits = model(g.x, g.edge_index)[int(node)].double()
            y = int(graph.labels[node])
            assert int(logits.argmax()) == pred
            best_other = torch.cat([logits[:y], logits[y + 1:]]).max()
            assert float(logits[y] - best_other) == pytest.approx(margin, rel=1e-4, abs=1e-5)
            checked += 1
        labels = graph.labels[nodes]
        assert row["accuracy"] == pytest.approx(float((np.asarray(row["target_predictions"]) == labels).mean()))
    assert checked >= CELLS * 3


def test_every_row_fights_the_targets_the_protocol_chose(setup):
    """The targets chosen by the clean model's margins where the sweep was prepared are the
    ones every attack and every clean row of a difficulty holds (the chosen nodes travel in
    the cells: no task chooses again)."""
    import yaml

    from grb_dist.attacks.targeted.protocol import pin
    from grb_dist.sweep.job import parse_job

    job, _, _, ref, _ = setup
    spec = parse_job(yaml.safe_load(job.read_text()))
    chosen = dict(pin(load_dataset("csbm", seed=0), spec.target_selection("targeted"), spec.difficulties).chosen)
    scores = pd.read_parquet(ref / "scores")
    for _, row in scores.iterrows():
        assert list(row["target_nodes"]) == list(chosen[row["difficulty"]])
    assert set(scores["difficulty"]) == set(chosen)


def test_the_boards_and_the_report_show_the_targeted_scenario(setup, tmp_path):
    _, _, _, ref, _ = setup
    r = CliRunner().invoke(app, ["leaderboard", str(ref), "--difficulty", "full"])
    assert r.exit_code == 0, r.output
    assert "Attacks on each target (full; targeted; success rate" in r.output
    assert (ref / "leaderboard" / "targeted" / "targets-full.parquet").is_file()
    r = CliRunner().invoke(app, ["report", str(ref), "--output", str(tmp_path / "report")])
    assert r.exit_code == 0, r.output
    html = (tmp_path / "report" / "index.html").read_text()
    assert "black-box, evasion, each target attacked alone" in html and "Attacks on each target" in html


POISONING_JOB = """
dataset: csbm
seed: 0
repeats: 1
difficulties: [easy]
train: {epochs: 30, patience: 10}
models: {gcn: {hidden_sizes: [16]}}
defenses: [gcn]
surrogates: [gcn]
scenario: targeted-poisoning
injection: {attacks: {fgsm: {}}}
targeted-poisoning:
  targets: {n: 3, min_degree: 2}
  attack: {n_flips: 1, degree_multiple: 1}
  attacks: {nettack: {epochs: 50}}
"""


def test_a_targeted_poisoning_cell_is_a_direct_train_and_evaluate_per_target(ray_local, tmp_path):
    """Each target of a targeted-poisoning row: the defense trained (transductively, with its
    seed and settings) on the graph with that target's flips alone, evaluated at the target;
    the clean row: trained once on the clean graph, evaluated at the same targets."""
    from grb_dist.defenses import train_defense
    from grb_dist.models.train import TrainConfig
    from grb_dist.sweep.job import parse_job
    import yaml

    job = tmp_path / "job.yaml"
    job.write_text(POISONING_JOB)
    r = CliRunner().invoke(app, ["sweep", "--job", str(job), "--out", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    store = RunStore.existing(tmp_path / "run")
    scores = pd.read_parquet(tmp_path / "run" / "scores")
    assert set(scores["attack"]) == {CLEAN, "nettack"} and len(scores) == 2
    spec = parse_job(yaml.safe_load(POISONING_JOB))
    graph = load_dataset("csbm", seed=0)
    params = spec.models["gcn"]
    config = TrainConfig(**{**spec.train.__dict__, "seed": spec.seed})

    def direct(g, node: int) -> tuple[int, float]:
        model = train_defense("gcn", g, params, config, transductive=True).model.eval()
        with torch.no_grad():
            logits = model(torch.as_tensor(g.features), torch.as_tensor(g.edge_index))[node].double()
        y = int(graph.labels[node])
        return int(logits.argmax()), float(logits[y] - torch.cat([logits[:y], logits[y + 1:]]).max())

    from grb_dist.core.graph import modified_graph

    for _, row in scores.iterrows():
        mod = None if row["attack"] == CLEAN else store.read_perturbation(row["perturbation_id"])
        for node, pred, margin in zip(row["target_nodes"], row["target_predictions"], row["target_margins"]):
            g = graph if mod is None else modified_graph(graph, mod.of(int(node)))
            want = direct(g, int(node))
            assert pred == want[0]
            assert margin == pytest.approx(want[1], rel=1e-3, abs=1e-4)
