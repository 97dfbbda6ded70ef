"""The two Pro-GNN names: ``prognn`` is the published method (the nuclear-norm step, the
authors' coefficients for the graph's dataset, their training schedule) and ``prognn_lite``
the cheaper variant (no nuclear norm, the job's schedule). Tiny graphs, a few epochs."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from grb_dist.core.config import to_dict
from grb_dist.core.errors import ConfigError
from grb_dist.defenses import build_defense, resolve_params, train_defense
from grb_dist.models import build_model
from grb_dist.models.robust import prognn as prognn_module
from grb_dist.models.robust.prognn import AUTHORS_SETTINGS, PAPER_TRAINING, ProGNN, ProGNNLite
from grb_dist.models.train import TrainConfig
from grb_dist.sweep.job import jobs_dir, load_job

from helpers import tiny_csbm

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny():
    return tiny_csbm(n=60, classes=3, features=8, K=3.0)


def named(graph, name: str):
    return dataclasses.replace(graph, name=name)


@pytest.fixture
def nuclear_calls(monkeypatch):
    """The thresholds of every nuclear-norm proximal step taken (the real operator runs)."""
    calls: list[float] = []
    real = prognn_module.prox_nuclear

    def spy(s, threshold, symmetric=False):
        calls.append(threshold)
        return real(s, threshold, symmetric)

    monkeypatch.setattr(prognn_module, "prox_nuclear", spy)
    return calls


@pytest.mark.parametrize("dataset, beta", [("prognn-cora", 1.5), ("prognn-polblogs", 5.0), ("tiny", 1.5)])
def test_prognn_takes_the_nuclear_norm_step_with_the_authors_coefficient(tiny, nuclear_calls, dataset, beta):
    r = train_defense("prognn", named(tiny, dataset), {}, TrainConfig(epochs=3, patience=3), transductive=True)
    assert r.epochs_run == 3
    # one step on S per epoch, thresholded at lr_adj * beta (the authors' beta of that dataset)
    assert nuclear_calls == pytest.approx([0.01 * beta] * 3)


def test_the_nuclear_norm_step_shrinks_the_spectrum_of_the_structure(tiny):
    """A step of ``prognn`` on S leaves the spectrum a proximal nuclear-norm operator leaves
    (every eigenvalue moved towards 0 by lr_adj * beta, before L1 and projection), and
    ``prognn_lite`` the one without it."""
    t = torch.as_tensor
    ei = t(tiny.edge_index)
    x = t(tiny.features)
    with_nuclear = prognn_module.StructureSteps(ei, x, build_model("prognn", 8, 3, {"lam": 0.0, "alpha": 0.0}).config)
    without = prognn_module.StructureSteps(ei, x, build_model("prognn_lite", 8, 3, {"lam": 0.0, "alpha": 0.0}).config)
    a = with_nuclear.s.clone()
    with_nuclear.step(), without.step()
    # no L1, no smoothness, no GCN loss, and the Frobenius term's gradient is 0 at S = A: the
    # smooth part of the step leaves A, and what changes it is the nuclear norm's operator
    expected = prognn_module.project(prognn_module.prox_nuclear(a, 0.01 * 1.5, symmetric=True))
    torch.testing.assert_close(with_nuclear.s, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(without.s, a)  # no nuclear norm: A is already a fixed point
    assert not torch.allclose(with_nuclear.s, a, atol=1e-3)


def test_prognn_lite_takes_no_nuclear_norm_step(tiny, nuclear_calls):
    r = train_defense("prognn_lite", tiny, {}, TrainConfig(epochs=3, patience=3), transductive=True)
    assert r.epochs_run == 3 and nuclear_calls == []
    with pytest.raises(ConfigError, match="without the nuclear norm"):
        build_defense("prognn_lite", tiny, {"nuclear": True})


def test_prognn_takes_the_authors_coefficients_of_the_graphs_dataset(tiny):
    for dataset, row in (("prognn-citeseer", "citeseer"), ("polblogs", "polblogs"), ("prognn-cora-ml", "cora"),
                         ("grb-cora", "cora"), ("tiny", "cora")):
        config = build_defense("prognn", named(tiny, dataset), {}).config
        assert {k: getattr(config, k) for k in AUTHORS_SETTINGS[row]} == dict(AUTHORS_SETTINGS[row]), dataset
        assert config.nuclear and config.gamma == 1
    given = build_defense("prognn_lite", named(tiny, "prognn-polblogs"), {"lam": 0.5}).config
    assert (given.alpha, given.lam, given.nuclear) == (1e-4, 0.5, False)  # a value given is kept
    # a module built without a graph takes the dataset's row when it trains
    model = build_model("prognn", tiny.num_features, tiny.num_classes)
    assert model.config.lam is None
    model.train_on(named(tiny, "prognn-citeseer"), TrainConfig(epochs=1), transductive=True)
    assert model.config.lam == 1e-4


def test_prognn_trains_on_the_authors_schedule_and_lite_on_the_jobs():
    job = load_job(jobs_dir() / "prognn-cora.yaml")
    shared = to_dict(job.train)
    assert shared["lr"] == 0.01 and shared["epochs"] == 200
    _, own = resolve_params("prognn", job.models)
    assert {**shared, **own} == {"lr": 5e-4, "weight_decay": 5e-4, "epochs": 1000, "patience": 1000}
    assert dict(PAPER_TRAINING) == own
    _, lite = resolve_params("prognn_lite_lp", job.models)
    assert {**shared, **lite} == shared  # the job's schedule
    _, given = resolve_params("prognn", {"prognn": {"train": {"epochs": 300}}})
    assert given["epochs"] == 300 and given["lr"] == 5e-4  # the model's own train: entry wins
    # the shipped job trains the cheaper variant under its own name only
    assert "prognn_lite" in job.defenses and "prognn" not in job.defenses


class Captured(Exception):
    pass


def test_train_defense_without_a_config_uses_the_models_schedule(tiny, monkeypatch):
    seen = {}

    def capture(self, graph, train_config, **kwargs):
        seen[type(self)] = train_config
        raise Captured

    for cls in (ProGNN, ProGNNLite):
        monkeypatch.setattr(cls, "train_on", capture)
    for name in ("prognn", "prognn_lite"):
        with pytest.raises(Captured):
            train_defense(name, tiny, {})
    assert (seen[ProGNN].lr, seen[ProGNN].epochs, seen[ProGNN].patience) == (5e-4, 1000, 1000)
    assert seen[ProGNNLite] == TrainConfig()
