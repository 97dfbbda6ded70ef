"""A scenario is one object and one registration: a toy scenario declared in this file, and
nowhere in the package, runs through the sweep (``grb-dist sweep`` on a real local Ray), the
plan (``grb-dist plan``) and the boards (``grb-dist leaderboard``, the report) as the
built-in ones do.

The toy flips edges at test time, as modification does, but under a name, a job section, a
budget label and a threat model of its own; its one attack is modification's RND declared
for it. The sweep's Ray workers get the scenario and its attack from the registry snapshot
every sweep ships them (the attack class travels by value: this test module is not
importable there).
"""

from __future__ import annotations

import json
import sys
from typing import ClassVar

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from grb_dist import api
from grb_dist.attacks.modification.rnd import RND
from grb_dist.cli import app
from grb_dist.core.errors import ConfigError
from grb_dist.core.scenario import Scenario, scenario_names
from grb_dist.sweep.job import parse_job
from grb_dist.sweep.resolve import resolve

runner = CliRunner()


class ToyRND(RND):
    """Modification's RND, declared for the toy scenario."""

    scenarios: ClassVar[tuple[str, ...]] = ("toy",)


TOY = Scenario("toy", "edges", threat_model="white-box toy, evasion", budget_label="toy flips", optional=True)

JOB = {
    "dataset": "csbm", "seed": 0, "repeats": 1, "difficulties": ["easy", "full"], "scenario": "toy",
    "train": {"epochs": 20, "patience": 5}, "models": {"gcn": {"hidden_sizes": [8]}, "mlp": {"hidden_sizes": [8]}},
    "defenses": ["gcn", "mlp"], "surrogates": ["gcn"],
    "injection": {"attack": {"n_inject": 4, "edges_per_node": 2, "steps": 2}, "attacks": {"fgsm": {}}},
    "toy": {"attack": {"ratio_edge_mod": 0.05}, "attacks": {"toy_rnd": {}}},
}


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy registered (one call); the job file that sweeps it; everything forgotten after."""
    import ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    api.register_scenario(TOY, {"toy_rnd": ToyRND})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    job = tmp_path / "toy.yaml"
    job.write_text(yaml.safe_dump(JOB))
    yield job
    api.unregister("toy_rnd", "toy")
    api.unregister("toy", "scenario")
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def test_the_toy_is_a_scenario_like_the_others(toy):
    assert scenario_names()[-1] == "toy" and ("scenario", "toy") in api.registered()
    spec = parse_job(JOB)
    assert spec.scenarios == ("toy",) and set(spec.scenario_attacks("toy")) == {"toy_rnd"}
    # ``all``: an optional scenario joins when its section lists attacks; the injection
    # and modification sections must list some
    everything = parse_job({**JOB, "scenario": "all", "modification": {"attacks": {"rnd": {}}}})
    assert everything.scenarios == ("injection", "modification", "toy")
    # a built-in job's hash does not change because a scenario was registered
    plain = {k: v for k, v in JOB.items() if k not in ("toy", "scenario")}
    hashed = parse_job(plain).config_hash
    api.unregister("toy", "scenario")
    assert parse_job(plain).config_hash == hashed
    with pytest.raises(ConfigError, match="unknown key.*'toy'"):
        parse_job(JOB)  # the section of a scenario nobody registered
    for bad, why in ((Scenario("modification", "edges"), "built-in and cannot be replaced"),
                     ("toy", "takes a grb_dist.core.scenario.Scenario"),
                     (Scenario("toy2", "nodes", legacy_layout=True), "only injection keeps the layout")):
        with pytest.raises(ConfigError, match=why):
            api.register_scenario(bad)
    api.register_scenario(TOY)  # back, with the attack table it had
    with pytest.raises(ConfigError, match="toy_rnd is a toy attack.*list it under toy.attacks"):
        resolve(parse_job({**JOB, "scenario": "modification", "modification": {"attacks": {"toy_rnd": {}}}}))


def test_the_toy_runs_through_the_plan_the_sweep_and_the_boards(toy, tmp_path):
    args = ["--job", str(toy), "--out", str(tmp_path / "run"), "--no-dashboard"]
    plan = runner.invoke(app, ["plan", *args])
    assert plan.exit_code == 0, plan.output
    # the surrogate and two defenses; toy_rnd x 2 difficulties; 2 defenses x (2 clean + 2)
    assert "| train | 3 models |" in plan.output and "| attack | 2 perturbations |" in plan.output
    assert "| score | 8 cells |" in plan.output and not (tmp_path / "run").exists()

    swept = runner.invoke(app, ["sweep", *args, "--num-cpus", "2"])
    assert swept.exit_code == 0, swept.output
    scores = pd.read_parquet(tmp_path / "run" / "scores")
    assert set(scores["scenario"]) == {"toy"} and len(scores) == 8
    assert set(scores["attack"]) == {"none", "toy_rnd"}
    attacked = scores[scores["attack"] == "toy_rnd"]
    assert (attacked["n_injected"] == 0).all() and attacked["accuracy"].between(0, 1).all()
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert {"toy/toy_rnd/easy", "toy/toy_rnd/full"} <= set(manifest["components"]["attacks"])

    boards = runner.invoke(app, ["leaderboard", str(tmp_path / "run")])
    assert boards.exit_code == 0, boards.output
    written = {p.relative_to(tmp_path / "run" / "leaderboard").as_posix()
               for p in (tmp_path / "run" / "leaderboard").rglob("*.md")}
    assert {"toy/attacks-full.md", "toy/defenses-easy.md"} <= written

    report = runner.invoke(app, ["report", str(tmp_path / "run"), "--output", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    page = (tmp_path / "report" / "index.html").read_text()
    assert "toy: white-box toy, evasion" in page and "black-box, inductive, evasion" not in page
