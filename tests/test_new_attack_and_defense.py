"""A new attack is one module plus one registration line, and so is a new defense
(docs/architecture.md, "Where a new attack, defense or dataset goes").

A temporary package holds one module with an attack and one with a defense; one
``register_*`` line each makes them work everywhere a name is taken: a job file, the plain
Python work of a sweep (train, attack, score), and a second process that restores the
registry snapshot the sweep ships to its Ray workers.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import grb_dist
from grb_dist import api
from grb_dist.core import registry
from grb_dist.store import graph_fingerprint
from grb_dist.sweep import worker
from grb_dist.sweep.job import parse_job
from grb_dist.sweep.cells import run_cells
from grb_dist.sweep.resolve import resolve

from helpers import tiny_csbm

ATTACK = '''
from dataclasses import dataclass

import torch

from grb_dist.attacks.injection.base import AttackConfig, InjectionAttack
from grb_dist.attacks.injection.common import random_edges


@dataclass(frozen=True)
class CornerConfig(AttackConfig):
    pass


class Corner(InjectionAttack):
    """Injected nodes all at the upper feature limit, linked to random targets."""

    Config = CornerConfig
    optimizes = False

    def optimize(self, ctx, gen):
        cfg = self.config
        edges = random_edges(cfg.n_inject, cfg.edges_per_node, ctx.targets, ctx.num_local, gen)
        return torch.full((cfg.n_inject, ctx.num_features), ctx.feat_max, device=ctx.device), edges
'''

DEFENSE = '''
import torch
from torch import nn


class MeanMLP(nn.Module):
    """Features averaged with the in-neighbours', then a linear map."""

    def __init__(self, in_features, num_classes):
        super().__init__()
        self.lin = nn.Linear(in_features, num_classes)

    def forward(self, x, edge_index):
        src, dst = edge_index
        agg = torch.zeros_like(x).index_add_(0, dst, x[src])
        deg = torch.zeros(x.shape[0], dtype=x.dtype).index_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
        return self.lin((x + agg) / (1 + deg).unsqueeze(1))
'''


@pytest.fixture
def package(tmp_path, monkeypatch):
    pkg = tmp_path / "my_grb_extras"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "corner.py").write_text(textwrap.dedent(ATTACK))
    (pkg / "meanmlp.py").write_text(textwrap.dedent(DEFENSE))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for kind, name in api.registered():
        api.unregister(name, kind)
    for mod in [m for m in sys.modules if m.startswith("my_grb_extras")]:
        del sys.modules[mod]


def test_one_module_and_one_line_each(package):
    from my_grb_extras.corner import Corner
    from my_grb_extras.meanmlp import MeanMLP

    grb_dist.register_attack("corner", Corner)  # the one line of the attack
    grb_dist.register_defense("meanmlp", MeanMLP)  # the one line of the defense

    spec = parse_job({
        "dataset": "csbm", "seed": 0, "defenses": ["meanmlp", "meanmlp_lp"], "surrogates": ["gcn"],
        "models": {"gcn": {"hidden_sizes": [8]}}, "train": {"epochs": 5, "patience": 5},
        "attack": {"n_inject": 4, "edges_per_node": 2}, "attacks": {"corner": {}},
        "difficulties": ["full"], "repeats": 1,
    })
    resolve(spec)
    graph = tiny_csbm(n=200)
    p = run_cells(spec, graph_fingerprint(graph, spec.normalize))
    trained = {t.name: worker.train_task(graph, t) for t in p.models}
    surrogate = worker.load_model(graph, "gcn", dict(p.surrogates[0].params), trained["gcn"].state_dict)
    [result] = worker.attack_batch(graph, list(p.attacks), surrogate)
    assert result.perturbation.n_inject == 4
    assert (result.perturbation.features == result.perturbation.features.max()).all()  # the corner
    scorer = worker.Scorer(graph, {t.name: (dict(t.params), trained[t.name].state_dict, 0.0) for t in p.targets})
    rows = scorer.score(result.perturbation, "full", ["meanmlp", "meanmlp_lp"])
    assert {r["defense"] for r in rows} == {"meanmlp", "meanmlp_lp"}
    assert all(0.0 <= r["accuracy"] <= 1.0 for r in rows)


def test_the_registrations_travel_as_one_snapshot(package):
    from my_grb_extras.corner import Corner
    from my_grb_extras.meanmlp import MeanMLP

    grb_dist.register_attack("corner", Corner)
    grb_dist.register_defense("meanmlp", MeanMLP)
    snap = registry.snapshot()
    assert set(snap["attack"]) == {"corner"} and set(snap["model"]) == {"meanmlp"}
    # what a Ray worker does with the snapshot: restore it, then every name works there
    code = textwrap.dedent(f"""
        import pickle, sys
        sys.path.insert(0, {str(package)!r})
        from grb_dist.core import registry
        registry.restore(pickle.loads(sys.stdin.buffer.read()))
        from grb_dist.attacks.registry import build_attack
        from grb_dist.models.grammar import check_name
        print(type(build_attack("corner", {{"n_inject": 2}})).__name__, check_name("meanmlp_at").adversarial)
    """)
    import pickle

    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(snap), capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    assert out.stdout.decode().split() == ["Corner", "True"]
