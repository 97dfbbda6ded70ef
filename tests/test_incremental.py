"""Incremental surrogate evaluation (grb_dist.attacks.shared.incremental).

The incremental path must compute exactly what the ordinary forward computes: the same
logits and gradients for every built-in architecture, and therefore the same injection for
every attack. Exactness is checked in float64 (where the two paths agree to rounding, so
any algorithmic difference shows); FGSM and PGD, whose sign steps do not amplify rounding,
are also checked in float32.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from grb_dist.attacks import build_attack
from grb_dist.attacks.injection.common import build_context, random_edges
from grb_dist.attacks.shared.incremental import IncrementalSurrogate, supports_incremental
from grb_dist.datasets import load_dataset
from grb_dist.datasets.csbm import CSBMConfig, sample_csbm
from grb_dist.datasets.split import grb_split
from grb_dist.models.tensors import apply_injection
from grb_dist.models.gcn import GCN
from grb_dist.models.grammar import build_model
from grb_dist.models.tensors import graph_tensors

ARCHS = ["gcn", "gat", "gin", "appnp", "tagcn", "sage", "sgc", "mlp"]
ATTACKS = {
    "rnd": {},
    "fgsm": dict(steps=4, step_size=0.05),
    "pgd": dict(steps=4, step_size=0.05),
    "speit": dict(steps=4, step_size=0.05),
    "tdgia": dict(steps=2, step_size=0.05, sequential_step=0.5),
}


def _params(arch: str) -> dict:
    return {"hidden_sizes": [16]} if arch == "appnp" else {"hidden_sizes": [16, 16]}


def _model(arch: str, graph, seed: int = 0, dtype=torch.float32) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_model(arch, graph.num_features, graph.num_classes, _params(arch)).to(dtype).eval()


def _as64(graph):
    return dataclasses.replace(graph, features=graph.features.astype(np.float64))


@pytest.fixture(scope="module")
def csbm():
    g, _ = sample_csbm(CSBMConfig(num_nodes=400, num_classes=3, num_features=12, deg_same=4.0, deg_diff=2.0), seed=3)
    return g.with_split(grb_split(g.degrees(), seed=0))


@pytest.fixture(scope="module")
def cora(cora_legacy):
    return load_dataset(cora_legacy)


def test_every_builtin_architecture_declares_its_program():
    for arch in ARCHS:
        assert supports_incremental(build_model(arch, 8, 3, _params(arch)))


@pytest.mark.parametrize("arch", ARCHS + ["gcn_ln", "gat_ln", "sage_ln"])
def test_logits_and_gradients_equal_the_ordinary_forward(csbm, arch):
    g = _as64(csbm)
    model = _model(arch, g, dtype=torch.float64)
    for p in model.parameters():
        p.requires_grad_(False)
    t = graph_tensors(g)
    targets = torch.as_tensor(g.targets("hard"))
    inc = IncrementalSurrogate(model, t.x, t.edge_index, targets)
    torch.testing.assert_close(inc.clean_logits, model(t.x, t.edge_index)[targets], rtol=1e-10, atol=1e-10)

    gen = torch.Generator().manual_seed(1)
    n_inj = 9
    inj_edges = random_edges(n_inj, 4, targets, g.num_nodes, gen)
    program = inc.for_edges(inj_edges, n_inj)
    inj_x = torch.randn(n_inj, g.num_features, dtype=torch.float64, requires_grad=True)
    ours = program(inj_x)
    x, ei = apply_injection(t.x, t.edge_index, inj_x, inj_edges)
    ref = model(x, ei)[targets]
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-10)
    if arch == "mlp":  # the injection cannot reach an MLP's targets: constant logits
        assert program.n_variable == 0 and not ours.requires_grad
        return
    assert ours.requires_grad
    w = torch.randn_like(ref)
    (g_ours,) = torch.autograd.grad((ours * w).sum(), inj_x)
    (g_ref,) = torch.autograd.grad((ref * w).sum(), inj_x)
    assert g_ref.abs().max() > 0
    torch.testing.assert_close(g_ours, g_ref, rtol=1e-9, atol=1e-12)


def test_a_step_touches_only_rows_the_injection_reaches(cora):
    """Variable rows per propagation are a fraction of the graph and never more than the
    injected nodes' reach; the first layer's input rows are the injected nodes only."""
    model = _model("gcn", cora)
    ctx = build_context(cora, model, cora.targets("easy"), -1.0, 1.0)
    gen = torch.Generator().manual_seed(0)
    edges = random_edges(10, 3, ctx.targets, ctx.num_local, gen)
    program = ctx.incremental.for_edges(edges, 10)
    rows = [int(r[2].shape[1]) for r in program._records if r[0] == "propagate"]  # input rows of each propagation
    assert rows[0] == 10
    assert all(r < ctx.num_local / 2 for r in rows)


@pytest.mark.parametrize("graph_name", ["csbm", "cora"])
@pytest.mark.parametrize("arch", ARCHS)
def test_every_attack_gives_the_same_injection_with_and_without_the_incremental_path(request, graph_name, arch):
    g = _as64(request.getfixturevalue(graph_name))
    surrogate = _model(arch, g, dtype=torch.float64)
    targets = g.targets("full" if graph_name == "csbm" else "easy")  # easy: a smaller receptive field
    budget = dict(n_inject=12, edges_per_node=4, seed=5)
    for name, extra in ATTACKS.items():
        attack = build_attack(name, {**budget, **extra})
        fast = attack.attack(g, surrogate, targets, incremental=True)
        slow = attack.attack(g, surrogate, targets, incremental=False)
        assert np.array_equal(fast.edges, slow.edges), name
        np.testing.assert_allclose(fast.features, slow.features, atol=1e-5, rtol=0, err_msg=name)


@pytest.mark.parametrize("name", ["fgsm", "pgd"])
def test_sign_attacks_are_identical_in_float32_on_cora(cora, name):
    surrogate = _model("gcn", cora)
    attack = build_attack(name, dict(n_inject=20, edges_per_node=10, seed=0, steps=20, step_size=0.02))
    fast = attack.attack(cora, surrogate, cora.targets("full"), incremental=True)
    slow = attack.attack(cora, surrogate, cora.targets("full"), incremental=False)
    assert np.array_equal(fast.edges, slow.edges)
    np.testing.assert_allclose(fast.features, slow.features, atol=1e-5, rtol=0)
    assert np.abs(fast.features).max() > 0  # the attack really moved the features


def test_parameters_never_accumulate_gradients_and_are_restored(csbm):
    surrogate = build_model("gcn", csbm.num_features, csbm.num_classes, _params("gcn"))
    surrogate.train()
    build_attack("tdgia", dict(n_inject=6, edges_per_node=3, steps=3, sequential_step=0.5)).attack(
        csbm, surrogate, csbm.targets("hard"))
    assert all(p.grad is None for p in surrogate.parameters())
    assert all(p.requires_grad for p in surrogate.parameters())
    assert surrogate.training


class _Rescaled(GCN):
    """A user model that changes the forward of a built-in class without declaring it."""

    def forward(self, x, edge_index):
        return 2.0 * super().forward(x, edge_index)


def test_models_that_do_not_declare_their_program_fall_back(csbm):
    model = _Rescaled(csbm.num_features, csbm.num_classes, GCN.Config(hidden_sizes=(16,))).eval()
    assert not supports_incremental(model)
    ctx = build_context(csbm, model, csbm.targets("hard"), -1.0, 1.0)
    assert ctx.incremental is None
    inj = build_attack("fgsm", dict(n_inject=5, edges_per_node=3, steps=3)).attack(csbm, model, csbm.targets("hard"))
    assert inj.n_inject == 5


def test_attacks_on_one_surrogate_share_its_clean_pass(csbm):
    from grb_dist.attacks import SurrogateCache

    surrogate = _model("gcn", csbm)
    cache = SurrogateCache()
    shared, alone = [], []
    for seed in range(3):
        attack = build_attack("pgd", dict(n_inject=6, edges_per_node=3, steps=3, seed=seed))
        shared.append(attack.attack(csbm, surrogate, csbm.targets("hard"), cache=cache))
        alone.append(attack.attack(csbm, surrogate, csbm.targets("hard")))
    assert (cache.built, cache.reused) == (1, 2)
    for a, b in zip(shared, alone):
        assert np.array_equal(a.edges, b.edges)
        np.testing.assert_array_equal(a.features, b.features)
    # another difficulty is another entry
    build_attack("pgd", dict(n_inject=6, edges_per_node=3, steps=3)).attack(csbm, surrogate, csbm.targets("easy"), cache=cache)
    assert cache.built == 2


def test_precision_option(csbm):
    from grb_dist.core.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown precision 'fp16'"):
        build_attack("fgsm", {"precision": "fp16"})
    surrogate = _model("gcn", csbm)
    budget = dict(n_inject=6, edges_per_node=3, steps=5, step_size=0.05, seed=2)
    fp32 = build_attack("fgsm", budget).attack(csbm, surrogate, csbm.targets("hard"))
    tf32 = build_attack("fgsm", {**budget, "precision": "tf32"}).attack(csbm, surrogate, csbm.targets("hard"))
    np.testing.assert_array_equal(fp32.features, tf32.features)  # tf32 changes nothing on CPU
    bf16 = build_attack("fgsm", {**budget, "precision": "bf16"}).attack(csbm, surrogate, csbm.targets("hard"))
    assert bf16.features.dtype == np.float32 and np.array_equal(bf16.edges, fp32.edges)
    # bf16 products perturb the gradients a little: most signs, hence features, agree
    assert 0.5 < float((bf16.features == fp32.features).mean()) <= 1.0
