"""Injection attacks on tiny graphs: audit, budgets, determinism, unchanged inputs,
receptive-field equivalence, config validation and the tensor-level FGSM."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from grb_dist.attacks import (
    INJECTION,
    AttackConfig,
    InjectionAttack,
    audit_injection,
    build_attack,
    fgsm_inject,
    resolve_feature_limits,
)
from grb_dist.attacks.injection.common import build_context, chunked_edges, random_target_choice
from grb_dist.attacks.injection.tdgia import class_balanced_order, round_sizes
from grb_dist.datasets.csbm import CSBMConfig, sample_csbm
from grb_dist.datasets.normalize import normalize_features
from grb_dist.datasets.split import grb_split
from grb_dist.core.errors import ConfigError, UnknownNameError
from grb_dist.core.graph import Graph
from grb_dist.models.tensors import apply_injection
from grb_dist.models import build_model
from grb_dist.models.tensors import graph_tensors

JOBS = Path(__file__).resolve().parents[1] / "grb_dist" / "jobs"
ALL = sorted(INJECTION.names())


def tiny_graph(n: int = 240, deg: float = 3.0, seed: int = 0) -> Graph:
    cfg = CSBMConfig(num_nodes=n, num_classes=3, num_features=8, K=2.0, deg_same=deg, deg_diff=0.5)
    g, _ = sample_csbm(cfg, seed=seed, name="tiny")
    g = g.with_features(normalize_features(g.features, "arctan"))
    return g.with_split(grb_split(g.degrees(), seed=seed))


def surrogate(g: Graph, hidden=(16,), seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_model("gcn", g.num_features, g.num_classes, {"hidden_sizes": list(hidden)}).eval()


PARAMS = dict(n_inject=6, edges_per_node=4, steps=3, step_size=0.05, seed=0)


def make(name: str, **kw) -> InjectionAttack:
    extra = {"sequential_step": 0.34} if name == "tdgia" else {}
    return build_attack(name, {**PARAMS, **extra, **kw})


@pytest.fixture(scope="module")
def g() -> Graph:
    return tiny_graph()


@pytest.fixture(scope="module")
def model(g) -> torch.nn.Module:
    return surrogate(g)


@pytest.mark.parametrize("name", ALL)
def test_attack_respects_threat_model_and_inputs(name, g, model):
    copies = {k: v.copy() for k, v in (("x", g.features), ("ei", g.edge_index), ("y", g.labels))}
    params = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.train()  # the attack must switch to eval and restore this
    targets = g.targets("full")
    tcopy = targets.copy()
    inj = make(name).attack(g, model, targets)
    assert model.training
    model.eval()
    assert all(p.grad is None for p in model.parameters())
    for k, v in model.state_dict().items():
        assert torch.equal(v, params[k])
    np.testing.assert_array_equal(g.features, copies["x"])
    np.testing.assert_array_equal(g.edge_index, copies["ei"])
    np.testing.assert_array_equal(g.labels, copies["y"])
    np.testing.assert_array_equal(targets, tcopy)
    assert inj.features.shape == (6, g.num_features) and inj.features.dtype == np.float32
    assert inj.edges.shape == (2, 6 * 4) and inj.edges.dtype == np.int64
    assert inj.num_original == g.num_nodes
    lo, hi = resolve_feature_limits(make(name).config, g)
    audit_injection(g, inj, n_inject=6, edges_per_node=4, feat_min=lo, feat_max=hi, targets=targets)
    assert np.isin(inj.edges[1], targets).all()


@pytest.mark.parametrize("name", ALL)
def test_same_seed_same_injection(name, g, model):
    t = g.targets("easy")
    a = make(name, seed=3).attack(g, model, t)
    b = make(name, seed=3).attack(g, model, t)
    np.testing.assert_array_equal(a.edges, b.edges)
    np.testing.assert_array_equal(a.features, b.features)
    c = make(name, seed=4).attack(g, model, t)
    assert not (np.array_equal(a.edges, c.edges) and np.array_equal(a.features, c.features))


def test_attack_instance_is_reusable_and_stateless(g, model):
    att = make("tdgia")
    before = dict(vars(att))
    a = att.attack(g, model, g.targets("full"))
    b = att.attack(g, model, g.targets("full"))
    assert vars(att) == before
    np.testing.assert_array_equal(a.features, b.features)


@pytest.mark.parametrize("name", ["fgsm", "tdgia"])
def test_asymmetric_explicit_limits_are_honoured(name, g, model):
    inj = make(name, feat_lim_min=-0.1, feat_lim_max=0.7, steps=5, step_size=0.5).attack(g, model, g.targets("full"))
    assert inj.features.min() >= np.float32(-0.1) and inj.features.max() <= np.float32(0.7)
    assert inj.features.max() > 0.3  # the upper half of the box is used


def test_null_limits_use_the_data_range(g):
    lo, hi = resolve_feature_limits(AttackConfig(), g)
    assert lo == float(g.features.min()) and hi == float(g.features.max())
    lo, hi = resolve_feature_limits(AttackConfig(feat_lim_min=-0.5), g)
    assert lo == -0.5 and hi == float(g.features.max())


def test_receptive_field_subgraph_matches_full_graph():
    g = tiny_graph(n=600, deg=1.2, seed=1)
    m = surrogate(g, hidden=(8,))  # 2 layers -> 3-hop subgraph
    targets = g.targets("easy")
    ctx = build_context(g, m, targets, -1.0, 1.0)
    assert ctx.subset is not None and ctx.num_local < g.num_nodes
    gen = torch.Generator().manual_seed(0)
    inj_x = torch.rand(5, g.num_features, generator=gen)
    pos = random_target_choice(5, 3, targets.size, gen)
    local_edges = torch.stack([torch.arange(5).repeat_interleave(3) + ctx.num_local, ctx.targets[pos.reshape(-1)]])
    with torch.no_grad():
        local = ctx.logits(inj_x, local_edges)
        inj = ctx.to_injection(inj_x, local_edges)
        t = graph_tensors(g)
        x, ei = apply_injection(t.x, t.edge_index, torch.from_numpy(inj.features), torch.from_numpy(inj.edges))
        full = m(x, ei)[torch.as_tensor(targets)]
        clean = m(t.x, t.edge_index)[torch.as_tensor(targets)].argmax(1)
    assert set(inj.edges[1]) <= set(targets)
    np.testing.assert_array_equal(np.asarray(inj.edges[0]), np.arange(5).repeat(3) + g.num_nodes)
    torch.testing.assert_close(local, full, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ctx.labels, clean)


def test_random_choice_is_distinct_per_row_and_blocked():
    gen = torch.Generator().manual_seed(0)
    import grb_dist.attacks.injection.common as common

    old = common._KEY_BLOCK
    common._KEY_BLOCK = 50  # force several blocks
    try:
        pos = random_target_choice(40, 7, 9, gen)
    finally:
        common._KEY_BLOCK = old
    assert pos.shape == (40, 7)
    assert all(len(set(r.tolist())) == 7 for r in pos)
    assert pos.min() >= 0 and pos.max() < 9


def test_random_choice_of_few_among_many_is_distinct_and_uniform():
    gen = torch.Generator().manual_seed(0)
    # 8 k <= n_targets: k draws per row, repeats drawn again (here about half of the rows have one)
    pos = random_target_choice(20_000, 10, 100, gen)
    assert pos.shape == (20_000, 10) and pos.min() >= 0 and pos.max() < 100
    assert (pos.sort(dim=1).values.diff(dim=1) != 0).all()  # distinct per row
    counts = torch.bincount(pos.reshape(-1), minlength=100).double()
    chi2 = float(((counts - 2000) ** 2 / 2000).sum())  # 99 degrees of freedom: mean 99, sd 14
    assert chi2 < 99 + 5 * 14
    # two given targets share a row as often as in a uniform k-subset: 20000 * 10 * 9 / (100 * 99)
    for a, b in ((0, 1), (0, 99), (42, 57)):
        together = int(((pos == a).any(dim=1) & (pos == b).any(dim=1)).sum())
        assert abs(together - 181.8) < 5 * 13.4, (a, b, together)
    # no n_targets-long array per row: a target set no key array could hold
    huge = random_target_choice(4, 3, 10**15, gen)
    assert huge.shape == (4, 3) and all(len(set(r.tolist())) == 3 for r in huge) and huge.max() < 10**15


def test_chunked_edges_reuse_never_duplicates_within_a_node():
    gen = torch.Generator().manual_seed(0)
    pos = chunked_edges(torch.arange(7), n_inject=9, k=3, n_targets=7, gen=gen)
    assert pos.shape == (9, 3)
    assert all(len(set(r.tolist())) == 3 for r in pos)
    assert set(pos[:2].reshape(-1).tolist()) == set(range(6))  # the given order comes first


def test_tdgia_rounds_and_class_balance():
    assert round_sizes(60, 0.2) == [12] * 5
    assert round_sizes(7, 0.5) == [3, 3, 1]
    assert round_sizes(3, 0.1) == [1, 1, 1]
    sel = torch.arange(12)
    classes = torch.tensor([0] * 6 + [1] * 3 + [2] * 3)
    order = class_balanced_order(sel, classes, torch.Generator().manual_seed(0))
    assert sorted(order.tolist()) == list(range(12))
    first4 = classes[order[:4]].tolist()
    assert first4.count(0) == 2 and first4.count(1) == 1 and first4.count(2) == 1


def test_tdgia_with_few_targets_reuses_without_duplicates(g, model):
    targets = g.targets("easy")[:5]
    inj = make("tdgia", n_inject=6, edges_per_node=4, sequential_step=1.0).attack(g, model, targets)
    assert inj.edges.shape[1] == 24 and np.isin(inj.edges[1], targets).all()


def test_speit_one_per_target_covers_every_target(g, model):
    targets = g.targets("easy")[:20]
    inj = make("speit", edge_mode="one_per_target").attack(g, model, targets)
    assert set(inj.edges[1].tolist()) == set(targets.tolist())


def test_bad_inputs_raise_config_error_before_work(g):
    class Exploding(torch.nn.Module):
        def forward(self, x, edge_index):
            raise AssertionError("the surrogate must not be called")

    boom = Exploding()
    t = g.targets("easy")
    with pytest.raises(ConfigError, match="edges_per_node"):
        make("fgsm", edges_per_node=t.size + 1).attack(g, boom, t)
    with pytest.raises(ConfigError, match="empty"):
        make("fgsm").attack(g, boom, np.array([], dtype=np.int64))
    with pytest.raises(ConfigError, match="implausible"):
        make("fgsm", feat_lim_max=100.0).attack(g, boom, t)
    with pytest.raises(ConfigError, match="outside"):
        make("fgsm").attack(g, boom, np.array([0, g.num_nodes]))
    with pytest.raises(ConfigError, match="min must be < max"):
        make("fgsm", feat_lim_min=0.99).attack(g, boom, t)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_inject": 0}, "n_inject"),
        ({"n_inject": -3}, "n_inject"),
        ({"edges_per_node": 0}, "edges_per_node"),
        ({"feat_lim_min": 0.5, "feat_lim_max": 0.5}, "smaller"),
        ({"feat_lim_min": 1.0, "feat_lim_max": -1.0}, "smaller"),
        ({"step_size": 0.0}, "step_size"),
        ({"steps": -1}, "steps"),
        ({"n_inject": 2.5}, "integer"),
        ({"bogus": 1}, "valid keys are"),
    ],
)
def test_invalid_config_rejected(params, match):
    with pytest.raises(ConfigError, match=match):
        build_attack("fgsm", {**PARAMS, **params})


def test_attack_specific_options_validated():
    with pytest.raises(ConfigError, match="sequential_step"):
        build_attack("tdgia", {"sequential_step": 0.0})
    with pytest.raises(ConfigError, match="valid keys are"):
        build_attack("fgsm", {"sequential_step": 0.2})
    with pytest.raises(ConfigError, match="edge_mode"):
        build_attack("speit", {"edge_mode": "two_layer"})
    with pytest.raises(ConfigError, match="random_start_std"):
        build_attack("pgd", {"random_start_std": -1.0})


def test_unknown_attack_lists_valid_names():
    with pytest.raises(UnknownNameError, match="fgsm, pgd, rnd, speit, tdgia"):
        build_attack("sga", {})
    with pytest.raises(ConfigError, match="nettack is a targeted attack, not an injection attack"):
        build_attack("nettack", {})  # an attack of another scenario says where it belongs
    assert type(build_attack("TDGIA", {})).__name__ == "TDGIA"


@pytest.mark.parametrize("job", sorted(p.name for p in JOBS.glob("*.yaml")))
def test_job_file_attack_sections_build(job):
    spec = yaml.safe_load((JOBS / job).read_text())["injection"]
    for difficulty, budget in spec["budgets"].items():
        for name, own in spec["attacks"].items():
            att = build_attack(name, {**spec["attack"], **budget, **(own or {})})
            assert att.config.n_inject == budget["n_inject"]
            assert att.config.steps == spec["attack"]["steps"]


def test_fgsm_inject_tensor_level(g):
    m = surrogate(g)
    m.train()
    t = graph_tensors(g)
    targets = torch.as_tensor(g.split["train"])
    gen = torch.Generator().manual_seed(0)
    feats, edges = fgsm_inject(
        m, t.x, t.edge_index, targets, t.y[targets], n_inject=5, edges_per_node=3,
        feat_min=-0.5, feat_max=0.5, steps=4, step_size=0.1, generator=gen,
    )
    assert m.training and all(p.grad is None for p in m.parameters())
    assert feats.shape == (5, g.num_features) and feats.dtype == torch.float32 and not feats.requires_grad
    assert edges.shape == (2, 15) and edges.dtype == torch.int64
    np.testing.assert_array_equal(edges[0].numpy(), np.arange(5).repeat(3) + g.num_nodes)
    assert torch.isin(edges[1], targets).all()
    assert feats.min() >= -0.5 and feats.max() <= 0.5 and feats.abs().max() > 0
    for row in edges[1].reshape(5, 3):
        assert len(set(row.tolist())) == 3
    # it raises the loss it attacks
    m.eval()
    with torch.no_grad():
        x, ei = apply_injection(t.x, t.edge_index, feats, edges)
        ce_after = torch.nn.functional.cross_entropy(m(x, ei)[targets], t.y[targets])
        x0, ei0 = apply_injection(t.x, t.edge_index, torch.zeros_like(feats), edges)
        ce_zero = torch.nn.functional.cross_entropy(m(x0, ei0)[targets], t.y[targets])
    assert ce_after > ce_zero
    with pytest.raises(ConfigError):
        fgsm_inject(m, t.x, t.edge_index, targets[:2], t.y[targets[:2]], n_inject=1, edges_per_node=3,
                    feat_min=-0.5, feat_max=0.5, steps=1, step_size=0.1, generator=gen)
