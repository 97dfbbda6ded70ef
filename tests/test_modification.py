"""The modification scenario: the Modification type, its audit, the edge-weighted surrogate,
the gradient attacks (FGA, PGD, PR-BCD, GR-BCD), and the scenario in job specs and the store."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grb_dist.attacks import build_attack
from grb_dist.attacks.audit import MODIFICATION_RULES, audit_modification
from grb_dist.attacks.registry import MODIFICATION
from grb_dist.attacks.base import Budget
from grb_dist.attacks.shared.flips import ModContext, attack_loss, project_budget
from grb_dist.attacks.shared.weighted import WeightedSurrogate
from grb_dist.core.errors import AuditError, ConfigError, GrbDistError
from grb_dist.core.graph import Modification, canonical_pairs
from grb_dist.models.tensors import apply_modification
from grb_dist.models.grammar import build_model
from grb_dist.sweep.job import parse_job
from grb_dist.sweep.overrides import apply_overrides
from grb_dist.sweep.cells import run_cells
from grb_dist.sweep.resolve import resolve
from grb_dist.models.tensors import graph_tensors
from helpers import small, tiny_csbm

GRADIENT_ATTACKS = ("fga", "pgd", "prbcd", "grbcd")


@pytest.fixture(scope="module")
def graph():
    return tiny_csbm(240, seed=3)


@pytest.fixture(scope="module")
def surrogate(graph):
    torch.manual_seed(0)
    return build_model("gcn", graph.num_features, graph.num_classes, {"hidden_sizes": [16]}).eval()


def edge_set(edge_index) -> set[tuple[int, int]]:
    ei = np.asarray(edge_index)
    return set(zip(ei[0].tolist(), ei[1].tolist()))


# ------------------------------------------------------------------ the type


def test_apply_then_inverse_gives_back_the_clean_graph(graph):
    t = graph.targets("full")
    ctx = ModContext(graph, None, t, Budget(-1, 1, n_edge_mod=10), torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    flips = np.concatenate([ctx.target_edges[:, :7], ctx.sample_pairs(9, gen, exclude=ctx.edge_keys)], axis=1)
    nodes = np.sort(t[:3])
    feats = np.full((3, graph.num_features), 0.25, dtype=np.float32)
    mod = ctx.result(flips, nodes, feats)
    assert mod.removed.shape[1] == 7 and mod.added.shape[1] == 9
    before = (graph.features.copy(), graph.edge_index.copy())
    clean = graph_tensors(graph)
    perturbed = apply_modification(clean, mod)
    assert np.array_equal(graph.features, before[0]) and np.array_equal(graph.edge_index, before[1])
    assert len(edge_set(perturbed.edge_index)) == graph.edge_index.shape[1] + 2 * (9 - 7)
    assert (perturbed.x[nodes] == 0.25).all()
    back = apply_modification(perturbed, mod.inverse(graph))
    assert edge_set(back.edge_index) == edge_set(graph.edge_index)
    assert torch.equal(back.x, clean.x)
    # the sorted order of a loaded graph
    key = back.edge_index[0] * graph.num_nodes + back.edge_index[1]
    assert (key[1:] > key[:-1]).all()


def _valid(graph):
    t = graph.targets("full")
    ei = graph.edge_index
    e = ei[:, (ei[0] < ei[1]) & np.isin(ei[0], t)][:, :4]
    n = graph.num_nodes
    keys = set((ei[0] * n + ei[1]).tolist())
    absent = np.array([(int(a), int(b)) for a in t[:20] for b in range(n) if a < b and a * n + b not in keys][:4]).T
    mod = Modification.build(e[:, :2], absent[:, :2], n, graph.num_features, np.sort(t[:2]),
                             np.zeros((2, graph.num_features), np.float32))
    return mod, t, e[:, 2:], absent[:, 2:]


def _violations(graph, mod: Modification, t, spare_edges, spare_absent):
    """One hand-made violation per rule: (rule, modification)."""
    n = graph.num_nodes
    off_target = np.setdiff1d(np.arange(n), t)
    ei = graph.edge_index
    far_edge = ei[:, (ei[0] < ei[1]) & ~np.isin(ei[0], t) & ~np.isin(ei[1], t)][:, :1]
    r = lambda **k: Modification(**{**mod.__dict__, **k})  # noqa: E731
    return {
        "shape": r(removed=mod.removed.astype(np.int32)),
        "edge_order": r(removed=mod.removed[::-1].copy()),
        "self_loop": r(added=np.concatenate([mod.added, [[t[0]], [t[0]]]], axis=1)),
        "duplicate_edge": r(added=canonical_pairs(np.concatenate([mod.added, mod.removed[:, :1]], axis=1), n)),
        "edge_budget": mod,  # audited with a budget of 3 below
        "removed_exists": r(removed=canonical_pairs(spare_absent, n)),
        "added_absent": r(added=canonical_pairs(spare_edges, n)),
        "touches_target": r(removed=far_edge),
        "node_budget": mod,  # audited with n_node_mod 1 below
        "node_target": r(nodes=np.sort(np.array([off_target[0], off_target[1]]))),
        "feature_finite": r(features=np.full_like(mod.features, np.nan)),
        "feature_range": r(features=np.full_like(mod.features, 5.0)),
    }


def test_audit_accepts_a_valid_modification_and_rejects_each_rule(graph):
    mod, t, spare_edges, spare_absent = _valid(graph)
    kwargs = dict(n_edge_mod=4, n_node_mod=2, feat_min=-1.0, feat_max=1.0, targets=t)
    audit_modification(graph, mod, **kwargs)
    cases = _violations(graph, mod, t, spare_edges, spare_absent)
    assert set(cases) == set(MODIFICATION_RULES)
    for rule, bad in cases.items():
        kw = dict(kwargs)
        if rule == "edge_budget":
            kw["n_edge_mod"] = 3
        if rule == "node_budget":
            kw["n_node_mod"] = 1
        with pytest.raises(AuditError, match=f"'{rule}'"):
            audit_modification(graph, bad, **kw)


# ------------------------------------------------------------------ the weighted surrogate


@pytest.mark.parametrize("name", ["gcn", "gcn_ln", "sgc", "appnp", "tagcn", "gin", "sage", "mlp"])
def test_weighted_surrogate_equals_the_forward_on_the_modified_graph(graph, name):
    torch.manual_seed(1)
    hidden = {"hidden_sizes": [8]} if name == "appnp" else {"hidden_sizes": [8, 8]}
    model = build_model(name, graph.num_features, graph.num_classes, hidden).double().eval()
    t = graph.targets("full")
    ctx = ModContext(graph, model, t, Budget(-1, 1, n_edge_mod=10), torch.device("cpu"))
    gen = torch.Generator().manual_seed(2)
    pairs = canonical_pairs(np.concatenate([ctx.target_edges[:, :15], ctx.sample_pairs(25, gen)], axis=1), graph.num_nodes)
    pairs = pairs[:, np.unique(pairs[0] * graph.num_nodes + pairs[1], return_index=True)[1]]
    x = torch.as_tensor(graph.features, dtype=torch.float64)
    ws = WeightedSurrogate(model, x, torch.as_tensor(graph.edge_index))
    sign = torch.as_tensor(np.where(ctx.exists(pairs), -1.0, 1.0), dtype=torch.float64)
    got = ws.logits(torch.as_tensor(pairs), sign)
    clean = graph_tensors(graph)
    perturbed = apply_modification(clean._replace(x=x), ctx.result(pairs))
    want = model(perturbed.x, perturbed.edge_index)
    assert torch.allclose(got, want, atol=1e-10)
    # the gradient w.r.t. relaxed weights matches finite differences
    p = torch.full((pairs.shape[1],), 0.4, dtype=torch.float64, requires_grad=True)
    pt = torch.as_tensor(pairs)
    assert torch.autograd.gradcheck(lambda p: ws.logits(pt, sign * p)[t[:10]], (p,), eps=1e-6, atol=1e-6)


class _NoWeights(torch.nn.Module):
    """A plain module with neither a program nor weighted_forward."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x, edge_index):
        return self.inner(x, edge_index)


def test_surrogates_without_a_weighted_path_are_refused(graph):
    model = build_model("gat", graph.num_features, graph.num_classes, {"hidden_sizes": [8]}).eval()
    attack = MODIFICATION.get("prbcd")(MODIFICATION.get("prbcd").Config(steps=1))
    attack.attack(graph, model, graph.targets("easy"))  # GAT: the weighted attention softmax
    with pytest.raises(ConfigError, match="_NoWeights is not differentiable in edge weights"):
        attack.attack(graph, _NoWeights(model), graph.targets("easy"))


def test_projection_meets_the_budget_and_the_box():
    p = torch.tensor([2.0, 0.9, 0.5, -0.3, 0.7])
    q = project_budget(p, 1.5)
    assert float(q.sum()) == pytest.approx(1.5, abs=1e-5) and (q >= 0).all() and (q <= 1).all()
    assert torch.equal(project_budget(torch.tensor([0.2, 0.3]), 1.0), torch.tensor([0.2, 0.3]))


def test_losses_rank_a_misclassification_higher():
    labels = torch.tensor([0, 0])
    right, wrong = torch.tensor([[3.0, 0.0], [3.0, 0.0]]), torch.tensor([[0.0, 3.0], [0.0, 3.0]])
    for kind in ("ce", "margin", "tanh_margin"):
        assert attack_loss(wrong, labels, kind) > attack_loss(right, labels, kind)


# ------------------------------------------------------------------ the gradient attacks


@pytest.mark.parametrize("name", GRADIENT_ATTACKS)
def test_gradient_attacks_are_audited_deterministic_and_leave_the_graph_alone(graph, surrogate, name):
    cls = MODIFICATION.get(name)
    before = (graph.features.copy(), graph.edge_index.copy())
    targets = graph.targets("full")
    a = cls(cls.Config(steps=4, seed=7))
    m1 = a.attack(graph, surrogate, targets)
    m2 = cls(cls.Config(steps=4, seed=7)).attack(graph, surrogate, targets)
    budget = a.budget(graph, targets.size)
    audit_modification(graph, m1, n_edge_mod=budget.n_edge_mod, n_node_mod=budget.n_node_mod,
                       feat_min=budget.feat_min, feat_max=budget.feat_max, targets=targets)
    assert 0 < m1.n_edge_flips <= budget.n_edge_mod
    for field in ("removed", "added", "nodes", "features"):
        assert np.array_equal(getattr(m1, field), getattr(m2, field)), field
    assert np.array_equal(graph.features, before[0]) and np.array_equal(graph.edge_index, before[1])
    assert (m1.n_nodes_modified > 0) == (name == "pgd")
    assert all(p.grad is None for p in surrogate.parameters()) and not surrogate.training


def test_gradient_attacks_raise_the_surrogate_loss(graph, surrogate):
    targets = graph.targets("full")
    clean = graph_tensors(graph)
    with torch.no_grad():
        y = surrogate(clean.x, clean.edge_index).argmax(1)[targets]

    def loss(mod):
        g = apply_modification(clean, mod)
        with torch.no_grad():
            return float(attack_loss(surrogate(g.x, g.edge_index)[targets], y, "ce"))

    rnd = MODIFICATION.get("rnd")
    base = loss(rnd(rnd.Config(seed=0)).attack(graph, surrogate, targets))
    for name in GRADIENT_ATTACKS:
        cls = MODIFICATION.get(name)
        assert loss(cls(cls.Config(steps=10, seed=0)).attack(graph, surrogate, targets)) > base, name


def test_budget_errors_come_before_any_work(graph, surrogate):
    t = graph.targets("easy")
    with pytest.raises(ConfigError, match="exceeds the .* node pairs"):
        build_attack("rnd", {"n_edge_mod": 10**9}, "modification").check_inputs(graph, t)
    for bad in ({"ratio_edge_mod": 0}, {"ratio_edge_mod": 1.5}, {"n_edge_mod": -3}, {"n_node_mod": 0},
                {"loss": "hinge"}, {"steps": -1}):
        with pytest.raises(ConfigError):
            build_attack("prbcd", bad, "modification")
    with pytest.raises(ConfigError, match="n_node_mod=.* exceeds"):
        build_attack("pgd", {"n_node_mod": t.size + 1}, "modification").check_inputs(graph, t)
    with pytest.raises(ConfigError, match="must exceed the budget"):
        build_attack("prbcd", {"n_edge_mod": 50, "block_size": 10, "steps": 1}, "modification").attack(graph, surrogate, t)


# ------------------------------------------------------------------ jobs, plans, store


def test_scenario_all_plans_both_and_keeps_injection_ids():
    inj = parse_job(small(modification={"attacks": {"prbcd": {"steps": 2}}}))
    both = apply_overrides(inj, scenario="all")
    resolve(both)
    p_inj, p_all = run_cells(inj, "f" * 16), run_cells(both, "f" * 16)
    assert {c.scenario for c in p_all.scores} == {"injection", "modification"}
    inj_ids = {c.cell_id for c in p_inj.scores}
    assert inj_ids == {c.cell_id for c in p_all.scores if c.scenario == "injection"}
    mod_ids = {c.cell_id for c in p_all.scores if c.scenario == "modification"}
    assert mod_ids and not mod_ids & inj_ids
    # clean rows per scenario, attack cells of the modification scenario
    assert {c.attack for c in p_all.attacks if c.scenario == "modification"} == {"prbcd"}


def test_attacks_of_the_wrong_scenario_and_bad_sections_are_named():
    with pytest.raises(ConfigError, match="fga is a modification attack"):
        resolve(parse_job(small(attacks={"fga": {}})))
    with pytest.raises(ConfigError, match="fgsm is an injection attack"):
        resolve(parse_job(small(scenario="modification", modification={"attacks": {"fgsm": {}}})))
    with pytest.raises(ConfigError, match="modification.attacks must name"):
        parse_job(small(scenario="modification"))
    with pytest.raises(ConfigError, match="unknown key 'atacks'"):
        parse_job(small(modification={"atacks": {}}))
    with pytest.raises(ConfigError, match="ratio_edge_mod"):
        resolve(parse_job(small(scenario="all", modification={"attack": {"ratio_edge_mod": 2},
                                                                   "attacks": {"rnd": {}}})))
    # attention models have a weighted forward (a weighted softmax); a plain module has none
    resolve(parse_job(small(scenario="modification", surrogates=["gat"], modification={"attacks": {"fga": {}}})))

    class Plain(torch.nn.Module):
        def __init__(self, in_features, num_classes):
            super().__init__()
            self.lin = torch.nn.Linear(in_features, num_classes)

        def forward(self, x, edge_index):
            return self.lin(x)

    from grb_dist import api

    api.register_defense("plainmod", Plain)
    try:
        with pytest.raises(ConfigError, match="surrogate plainmod does not support .*not differentiable in edge"):
            resolve(parse_job(small(scenario="modification", surrogates=["plainmod"],
                                    modification={"attacks": {"fga": {}}})))
    finally:
        api.unregister("plainmod")
    spec = parse_job(small(scenario="all", modification={"attacks": {"rnd": {}}}))
    narrowed = apply_overrides(spec, attacks="fgsm,dice")
    assert set(narrowed.scenario_attacks("injection")) == {"fgsm"} and set(narrowed.scenario_attacks("modification")) == {"dice"}
    both = apply_overrides(spec, attacks="rnd")  # a name both scenarios know runs in both
    assert set(both.scenario_attacks("injection")) == {"rnd"} and set(both.scenario_attacks("modification")) == {"rnd"}
    with pytest.raises(GrbDistError, match="unknown"):
        apply_overrides(spec, attacks="nope")


def test_store_round_trips_a_modification(tmp_path, graph, surrogate):
    from grb_dist.store import RunLock, RunStore

    mod = build_attack("pgd", {"steps": 2}, "modification").attack(graph, surrogate, graph.targets("easy"))
    lock = RunLock(tmp_path / "run").acquire()
    store = RunStore.open(tmp_path / "run", dataset={"label": "tiny", "fingerprint": "f" * 16}, components={},
                          config={}, config_hash="0" * 16, lock=lock)
    meta = {"config_hash": "0" * 16, "scenario": "modification", "dataset": "tiny", "dataset_fingerprint": "f" * 16,
            "difficulty": "easy", "attack": "pgd", "surrogate": "gcn", "repeat": 0, "seed": 0, "params_json": "{}",
            "feat_lim_min": -1.0, "feat_lim_max": 1.0, "attack_seconds": 0.5}
    store.write_perturbation("p1", mod, meta)
    lock.release()
    back = RunStore.existing(tmp_path / "run").read_perturbation("p1")
    assert isinstance(back, Modification)
    for field in ("removed", "added", "nodes", "features"):
        assert np.array_equal(getattr(back, field), getattr(mod, field)), field
    assert back.num_original == graph.num_nodes


# ------------------------------------------------------------------ flip-based adversarial training


def test_flip_based_at_flips_its_budget_around_training_nodes(graph):
    from grb_dist.defenses import ATConfig, ModificationAT
    from grb_dist.models.views import induced

    view = induced(graph, graph.split["train"], graph.split["train"], "cpu")
    n = view.x.shape[0]
    for name in ("gcn", "gat"):  # gradient flips, and DICE flips for attention
        torch.manual_seed(0)
        model = build_model(name, graph.num_features, graph.num_classes, {"hidden_sizes": [8]})
        at = ModificationAT(ATConfig(n_inject=1, edges_per_node=1, scenario="modification", warmup_epochs=0,
                                     ratio_edge_mod=0.1))
        x, ei = at(model, view, torch.Generator().manual_seed(0))
        assert x is view.x and model.training and all(p.grad is None for p in model.parameters())
        before, after = edge_set(view.edge_index), edge_set(ei)
        flipped = {tuple(sorted(e)) for e in before ^ after}
        assert 0 < len(flipped) <= round(0.1 * len(before) / 2)
        assert after == {(b, a) for a, b in after}  # still undirected
        train_local = set(view.mask_idx.tolist())
        assert all(a in train_local or b in train_local for a, b in flipped)
        assert max(max(e) for e in after) < n
        x2, ei2 = ModificationAT(at.config)(model, view, torch.Generator().manual_seed(0))
        assert edge_set(ei2) == after, name
    with pytest.raises(ConfigError, match="scenario must be an evasion scenario \(injection or modification\)"):
        ATConfig(n_inject=1, edges_per_node=1, scenario="poison")
    resolve(parse_job(small(defenses=["gcn_at"], adversarial_training={
        "n_inject": 2, "edges_per_node": 2, "scenario": "modification", "ratio_edge_mod": 0.02})))
