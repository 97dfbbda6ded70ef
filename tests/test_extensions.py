"""Bring your own defense, model or attack: the registration API and its errors,
``module:Class`` specs, entry points of an installed package (the example defense, in a
subprocess), and ``grb_dist.benchmark`` on a torch module defined here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import torch
from torch import nn

import grb_dist
from grb_dist import api
from grb_dist.attacks import INJECTION, MODIFICATION, build_attack
from grb_dist.attacks.injection.rnd import RND
from grb_dist.attacks.modification.rnd import RND as ModRND
from grb_dist.defenses import build_defense, train_defense
from grb_dist.core.errors import ConfigError, UnknownNameError
from grb_dist.core.errors import ExtensionTypeError
from grb_dist.models.grammar import is_model_name
from grb_dist.models.registry import MODELS, model_names
from grb_dist.models.gcn import GCN
from grb_dist.models.grammar import check_name
from grb_dist.models.train import TrainConfig
from grb_dist.sweep.job import parse_job
from grb_dist.sweep.resolve import resolve

from helpers import tiny_csbm

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "grb_dist_example_defense"


class Linear(nn.Module):
    """A feature-only defense: one linear map (ignores the graph)."""

    def __init__(self, in_features: int, num_classes: int):
        super().__init__()
        self.lin = nn.Linear(in_features, num_classes)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


@dataclass(frozen=True)
class WideConfig:
    hidden: int = 8


class Wide(nn.Module):
    def __init__(self, in_features: int, num_classes: int, config: WideConfig):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, config.hidden), nn.ReLU(), nn.Linear(config.hidden, num_classes))

    def forward(self, x, edge_index):
        return self.net(x)


class MyGCN(GCN):
    """A GraphModel subclass: registered as a model, with every suffix variant."""


class MyRND(RND):
    """An injection attack subclass (same behaviour as RND)."""


@pytest.fixture
def registry_cleanup():
    """Forget what a test registered (registrations are per process)."""
    yield
    for kind, name in api.registered():
        api.unregister(name, kind)


# ------------------------------------------------------------------ the registration API


def test_register_defense_builds_trains_and_has_variants(registry_cleanup):
    g = tiny_csbm(n=200)
    assert grb_dist.register_defense("my-linear", Linear) == "my_linear"
    assert {"my_linear", "my_linear_at", "my_linear_lp", "my_linear_at_lp"} <= set(model_names())
    assert not is_model_name("my_linear_ln")  # no config with layer_norm: no _ln variant
    with pytest.raises(ConfigError, match="layer_norm"):
        check_name("my_linear_ln")
    model = build_defense("my_linear", g, {})
    assert isinstance(model, Linear)
    result = train_defense("my_linear_lp", g, {}, TrainConfig(epochs=3))
    assert type(result.model).__name__ == "LabelPropagationOn"
    with pytest.raises(ConfigError, match="takes no parameters"):
        build_defense("my_linear", g, {"hidden": 3})


def test_register_defense_with_config_and_factory(registry_cleanup):
    g = tiny_csbm(n=200)
    grb_dist.register_defense("wide", Wide, WideConfig)
    assert build_defense("wide", g, {"hidden": 5}).net[0].out_features == 5
    with pytest.raises(ConfigError, match="unknown key"):
        build_defense("wide", g, {"width": 5})
    grb_dist.register_defense("factory", lambda d, c: Linear(d, c))
    assert isinstance(build_defense("factory", g, {}), Linear)
    grb_dist.register_defense("bad_factory", lambda d, c: 42)
    with pytest.raises(ConfigError, match="not a torch.nn.Module"):
        build_defense("bad_factory", g, {})


def test_register_model_has_every_suffix(registry_cleanup):
    g = tiny_csbm(n=200)
    assert grb_dist.register_model("MyGCN", MyGCN) == "mygcn"
    model = build_defense("mygcn_ln_at_lp", g, {"hidden_sizes": [4]})
    assert isinstance(model.model, MyGCN) and model.model.config.layer_norm
    assert check_name("mygcn_at").adversarial


def test_register_attack_is_validated_like_builtins(registry_cleanup):
    assert grb_dist.register_attack("my_rnd", MyRND) == "my_rnd"
    assert "my_rnd" in INJECTION and "my_rnd" not in MODIFICATION
    attack = build_attack("my_rnd", {"n_inject": 3, "edges_per_node": 2})
    assert isinstance(attack, MyRND)
    with pytest.raises(ConfigError, match="unknown key"):
        build_attack("my_rnd", {"n_inject": 3, "nodes": 2})
    grb_dist.register_attack("my_mod_rnd", ModRND, scenario="modification")
    with pytest.raises(ConfigError, match="is a modification attack"):
        build_attack("my_mod_rnd", {}, "injection")


@pytest.mark.parametrize("name", ["../evil", "a/b", "with space", "dotted.name", "", "x" * 65, "mod:Class"])
def test_bad_names_are_refused(name, registry_cleanup):
    with pytest.raises(ConfigError, match="not a plain name"):
        grb_dist.register_defense(name, Linear)
    with pytest.raises(ConfigError, match="not a plain name"):
        grb_dist.register_attack(name, MyRND)


def test_clashes_need_replace(registry_cleanup):
    with pytest.raises(ConfigError, match="is a built-in"):
        grb_dist.register_defense("gcn", Linear)
    with pytest.raises(ConfigError, match="is a built-in"):
        grb_dist.register_attack("fgsm", MyRND)
    with pytest.raises(ConfigError, match="defense suffix"):
        grb_dist.register_defense("lin_lp", Linear)
    grb_dist.register_defense("lin", Linear)
    grb_dist.register_defense("lin", Linear)  # the same object again: a no-op
    with pytest.raises(ConfigError, match="already registered"):
        grb_dist.register_defense("lin", Wide, WideConfig)
    grb_dist.register_defense("lin", Wide, WideConfig, replace=True)
    assert MODELS.get("lin").config_cls is WideConfig
    # the did-you-mean messages of the built-ins are kept
    with pytest.raises(UnknownNameError, match="did you mean 'gcn'"):
        MODELS.get("gcm")


def test_wrong_base_classes_are_refused(registry_cleanup):
    with pytest.raises(ExtensionTypeError, match="not a subclass of GraphModel"):
        grb_dist.register_model("m", Linear)
    with pytest.raises(ExtensionTypeError, match="not a torch.nn.Module"):
        grb_dist.register_defense("d", dict)
    with pytest.raises(ExtensionTypeError, match="module instance"):
        grb_dist.register_defense("d", Linear(3, 2))
    with pytest.raises(ExtensionTypeError, match="not a subclass of InjectionAttack"):
        grb_dist.register_attack("a", Linear)
    with pytest.raises(ExtensionTypeError, match="scenario='modification'"):
        grb_dist.register_attack("a", ModRND)
    with pytest.raises(ConfigError, match="unknown scenario"):
        grb_dist.register_attack("a", MyRND, scenario="evasion")


# ------------------------------------------------------------------ module:Class specs


@pytest.fixture
def spec_module(tmp_path, monkeypatch):
    """An importable module ``ext_spec_mod`` with a defense, a model and an attack."""
    (tmp_path / "ext_spec_mod.py").write_text(textwrap.dedent('''
        from torch import nn
        from grb_dist.attacks.injection.rnd import RND
        from grb_dist.models.gcn import GCN

        class Lin(nn.Module):
            def __init__(self, d, c):
                super().__init__()
                self.lin = nn.Linear(d, c)

            def forward(self, x, edge_index):
                return self.lin(x)

        class SpecGCN(GCN):
            pass

        class XOnly(nn.Module):
            def __init__(self, d, c):
                super().__init__()
                self.lin = nn.Linear(d, c)

            def forward(self, x):
                return self.lin(x)

        class Pooled(Lin):
            def forward(self, x, edge_index):
                return self.lin(x).mean(0, keepdim=True)

        class SpecRND(RND):
            pass

        NOT_A_CLASS = 3

        def MAKE(d, c):
            raise SystemExit("a spec must never call a function")
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "ext_spec_mod"
    sys.modules.pop("ext_spec_mod", None)
    for kind, name in api.registered():
        api.unregister(name, kind)


def test_specs_in_a_job(spec_module):
    spec = parse_job({
        "dataset": "csbm", "defenses": ["ext_spec_mod:Lin", "ext_spec_mod:SpecGCN_ln", "gcn"],
        "surrogates": ["gcn"], "attacks": {"ext_spec_mod:SpecRND": {}}, "attack": {"n_inject": 3, "edges_per_node": 2},
    })
    assert spec.defenses == ("ext_spec_mod.lin", "ext_spec_mod.specgcn_ln", "gcn")
    assert list(spec.scenario_attacks("injection")) == ["ext_spec_mod.specrnd"]
    resolve(spec)  # imports the module and registers the three classes
    assert check_name("ext_spec_mod.specgcn_ln").implied == {"layer_norm": True}
    assert "ext_spec_mod.specrnd" in INJECTION


def test_a_spec_whose_forward_does_not_fit_is_refused_before_ray(spec_module, monkeypatch):
    """A defense's forward is probed on a two-node graph before Ray starts: one that does not
    take (x, edge_index), or returns one row for the graph, is one line naming the defense."""
    from grb_dist.datasets import load_dataset
    from grb_dist.sweep.preflight import check_user_forwards

    graph = load_dataset("csbm")
    job = {"dataset": "csbm", "surrogates": ["gcn"], "attacks": {"rnd": {}}}
    check_user_forwards(resolve(parse_job({**job, "defenses": ["ext_spec_mod:Lin", "gcn"]})), graph)
    for cls, message in (("XOnly", r"forward\(x, edge_index\) fails: TypeError"), ("Pooled", r"returned shape \(1, 4\)")):
        with pytest.raises(ConfigError, match=message) as info:
            check_user_forwards(resolve(parse_job({**job, "defenses": [f"ext_spec_mod:{cls}"]})), graph)
        assert "\n" not in str(info.value) and f"ext_spec_mod.{cls.lower()}" in str(info.value)


@pytest.mark.parametrize("value, message", [
    ("no_such_module_xyz:Foo", "cannot import 'no_such_module_xyz'.*ModuleNotFoundError"),
    ("ext_spec_mod:Missing", "has no attribute 'Missing'"),
    ("ext_spec_mod:NOT_A_CLASS", "names a value of type int, not a class"),
    ("builtins:print", "names a function, not a class"),
    ("os:system", "names a function, not a class"),
    ("ext_spec_mod:MAKE", "names a function, not a class"),
    ("ext_spec_mod:SpecRND", "is an injection attack"),
    ("../ext_spec_mod:Lin", "not a module:Class spec"),
    ("ext_spec_mod:Lin()", "not a module:Class spec"),
])
def test_bad_specs_are_one_line_errors(spec_module, value, message):
    with pytest.raises(ConfigError, match=message) as info:
        resolve(parse_job({"dataset": "csbm", "defenses": [value], "attacks": {"rnd": {}}}))
    assert "\n" not in str(info.value)


def test_cli_spec_import_failure_is_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "grb_dist.cli", "sweep", "--defenses", "no_such_module_xyz:MyGCN", "--out",
         str(tmp_path / "run")], capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "no_such_module_xyz" in lines[0], proc.stderr
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------ entry points (installed package)


def test_example_package_entry_point_in_a_sweep(tmp_path):
    """The example package, installed into a temporary --target directory (no change to the
    test venv), is found by name through its entry point in ``grb-dist sweep``, and as a
    ``module:Class`` spec; the Ray workers find both."""
    target, source = tmp_path / "site", tmp_path / "src"
    # built from a copy: setuptools writes build/ and *.egg-info next to the sources
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--quiet",
                    "--target", str(target), str(source)], check=True, capture_output=True, timeout=300, cwd=tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           "RAY_AUTH_MODE": "disabled"}
    job = tmp_path / "job.yaml"
    job.write_text(textwrap.dedent("""
        dataset: csbm
        seed: 0
        train: {epochs: 20, patience: 10}
        models:
          gcn: {hidden_sizes: [16]}
          example_mean_gcn: {hidden: 16, threshold: 0.0}
        defenses: [gcn]
        surrogates: [gcn]
        attack: {n_inject: 5, edges_per_node: 3, steps: 2}
        attacks: {rnd: {}, fgsm: {}}
    """))
    run = tmp_path / "run"
    # the same class twice: by its entry point's name, and as a module:Class spec
    cmd = [sys.executable, "-m", "grb_dist.cli", "sweep", "--job", str(job), "--defenses",
           "example_mean_gcn,grb_dist_example_defense:MeanGCN,gcn",
           "--attacks", "rnd", "--difficulties", "easy", "--repeats", "1", "--steps", "2", "--num-cpus", "1",
           "--no-dashboard", "--out", str(run)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=540, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    scores = pd.read_parquet(run / "scores")
    mine = scores[scores["defense"] == "example_mean_gcn"]
    assert set(mine["attack"]) == {"none", "rnd"} and len(mine) == 2
    assert mine["accuracy"].between(0, 1).all()
    assert set(scores["defense"]) == {"example_mean_gcn", "grb_dist_example_defense.meangcn", "gcn"}
    assert len(scores) == 6
    # without the package on the path the name is unknown, listed with the valid ones
    env.pop("PYTHONPATH")
    proc = subprocess.run(cmd[:6] + ["--defenses", "example_mean_gcn", "--out", str(tmp_path / "other")],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and "unknown model 'example_mean_gcn'" in proc.stderr, proc.stderr


# ------------------------------------------------------------------ benchmark()


def test_benchmark_a_module_defined_here(tmp_path, ray_local):
    """A torch module class defined inside the test (not importable by the workers: it
    travels to them by value) is benchmarked on the Ray the session started."""

    class TwoHop(nn.Module):
        """Features averaged over in-neighbours, then a linear map."""

        def __init__(self, in_features: int, num_classes: int):
            super().__init__()
            self.lin = nn.Linear(2 * in_features, num_classes)

        def forward(self, x, edge_index):
            src, dst = edge_index
            agg = torch.zeros_like(x).index_add_(0, dst, x[src])
            deg = torch.zeros(x.shape[0], dtype=x.dtype).index_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
            return self.lin(torch.cat([x, agg / deg.clamp(min=1).unsqueeze(1)], dim=1))

    try:
        rows = grb_dist.benchmark(
            TwoHop, attacks=["rnd", "fgsm"], difficulties=["easy", "full"], repeats=1, steps=2, out=tmp_path / "run",
            n_inject=5, edges_per_node=3, train={"epochs": 10, "patience": 5},
            models={"gcn": {"hidden_sizes": [8]}},
        )
    finally:
        api.unregister("twohop")
    assert list(rows.columns) == ["row", "scenario", "difficulty", "defense", "attack", "surrogate", "threat", "weights",
                                  "accuracy_mean", "accuracy_std", "n_repeats", "avg_3_min_mean", "weighted_mean",
                                  "rank", "clean_accuracy"]
    assert (rows["weights"] == "trained").all()  # a class: trained by the job's protocol
    assert set(rows["defense"]) == {"twohop"}
    attacked = rows[rows["row"] == "attack"]
    for difficulty in ("easy", "full"):
        mine = attacked[attacked["difficulty"] == difficulty]
        assert sorted(mine["attack"]) == ["fgsm", "rnd"]  # one row per attack
    assert len(rows[rows["row"] == "clean"]) == 2 and len(rows[rows["row"] == "defense"]) == 2
    assert rows["accuracy_mean"].between(0, 1).all() and (rows["accuracy_std"] >= 0).all()
    assert (rows["scenario"] == "injection").all()
    assert (rows.loc[rows["row"] == "defense", "rank"] == 1).all()
    assert (tmp_path / "run" / "scores").is_dir()


def test_import_grb_dist_stays_light():
    code = ("import sys, grb_dist; assert 'torch' not in sys.modules; "
            "assert callable(grb_dist.register_defense); assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
