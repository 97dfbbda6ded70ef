"""Targeted FGA and PR-BCD (grb_dist.attacks.targeted.fga / .prbcd): each target's flips are
its own and within its budget, the attacks are deterministic for a seed and beat random flips
of the same budgets; FGA's flips are the largest first-order gains of a dense-adjacency GCN
written out here, and its receptive-field gains equal the whole graph's for every weighted
operator."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grb_dist.attacks.base import surrogate_mode
from grb_dist.attacks.registry import TARGETED, build_attack
from grb_dist.attacks.targeted import fga
from grb_dist.attacks.targeted.base import TargetContext
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph, canonical_edges
from grb_dist.datasets.csbm import CSBMConfig, sample_csbm
from grb_dist.datasets.normalize import normalize_features
from grb_dist.datasets.split import grb_split
from grb_dist.models import build_model
from grb_dist.models.tensors import apply_modification, graph_tensors
from grb_dist.models.train import TrainConfig, train

pytestmark = pytest.mark.usefixtures("one_thread")

BUDGET = dict(n_flips=2, degree_multiple=1.0)  # Nettack's experiments: the degree plus two
ATTACKS = {"fga": {}, "fga-whole-graph": {"receptive_field": False}, "prbcd": {"steps": 20},
           "prbcd-small-block": {"steps": 10, "block_size": 40}}


def tiny_graph(n: int = 240, seed: int = 0) -> Graph:
    cfg = CSBMConfig(num_nodes=n, num_classes=3, num_features=8, K=2.0, deg_same=3.0, deg_diff=0.5)
    g, _ = sample_csbm(cfg, seed=seed, name="tiny")
    g = g.with_features(normalize_features(g.features, "arctan"))
    return g.with_split(grb_split(g.degrees(), seed=seed))


def make(name: str, **kw):
    base = name.split("-")[0]
    return build_attack(base, {**BUDGET, "seed": 0, **ATTACKS.get(name, {}), **kw}, "targeted")


@pytest.fixture(scope="module")
def g() -> Graph:
    return tiny_graph()


@pytest.fixture(scope="module")
def model(g, one_thread) -> torch.nn.Module:
    """A GCN trained for a few dozen epochs: its gradients mean something."""
    return train("gcn", g, {"hidden_sizes": [16]}, TrainConfig(epochs=60, patience=60, seed=0)).model


@pytest.fixture(scope="module")
def targets(g) -> np.ndarray:
    return np.sort(np.random.default_rng(0).choice(np.flatnonzero(g.degrees() >= 1), 10, replace=False))


def margins(g: Graph, model, mod, targets) -> np.ndarray:
    """The surrogate's margin at each target on the graph with that target's flips alone
    (its class: the clean prediction)."""
    clean = graph_tensors(g)
    with torch.no_grad():
        labels = model(clean.x, clean.edge_index).argmax(1)
        out = []
        for t in targets.tolist():
            pert = apply_modification(clean, mod.of(t)) if mod is not None else clean
            z = model(pert.x, pert.edge_index)[t]
            y = int(labels[t])
            out.append(float(z[y] - torch.cat([z[:y], z[y + 1:]]).max()))
    return np.asarray(out)


def test_registered_in_the_targeted_table():
    assert TARGETED.get("fga") is fga.FGA
    assert TARGETED.get("prbcd").__module__ == "grb_dist.attacks.targeted.prbcd"


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_flips_touch_only_their_target_within_its_budget(name, g, model, targets):
    mod = make(name).attack(g, model, targets)
    budgets = 2 + g.degrees()[targets]
    np.testing.assert_array_equal(mod.targets, targets)
    assert (mod.flips_per_target() <= budgets).all() and mod.n_edge_flips > 0
    assert np.isin(mod.removed[0], targets).all() and np.isin(mod.added[0], targets).all()
    edges = {(int(u), int(v)) for u, v in g.edge_index.T}
    assert all((u, v) in edges for u, v in mod.removed.T)
    assert not any((u, v) in edges or u == v for u, v in mod.added.T)
    assert mod.n_nodes_modified == 0
    for t in targets.tolist():  # distinct partners, none the target
        gone, new = mod.partners(t)
        both = np.concatenate([gone, new])
        assert np.unique(both).size == both.size and t not in both


@pytest.mark.parametrize("name", ["fga", "prbcd"])
def test_deterministic_for_a_seed(name, g, model, targets):
    one, two = (make(name, steps=10).attack(g, model, targets[:3]) for _ in range(2))
    for field in ("removed", "added", "targets"):
        np.testing.assert_array_equal(getattr(one, field), getattr(two, field))


@pytest.mark.parametrize("name", ["fga", "prbcd"])
def test_lowers_the_margin_more_than_random_flips(name, g, model, targets):
    clean = margins(g, model, None, targets)
    rnd = margins(g, model, make("rnd").attack(g, model, targets), targets)
    ours = margins(g, model, make(name).attack(g, model, targets), targets)
    assert ours.mean() < rnd.mean() - 0.5 and ours.mean() < clean.mean()
    assert (ours < 0).sum() >= (rnd < 0).sum()


def test_gat_surrogate_runs_on_the_whole_graph(g, targets):
    torch.manual_seed(0)
    gat = build_model("gat", g.num_features, g.num_classes, {}).eval()
    mod = make("fga").attack(g, gat, targets[:3])
    assert (mod.flips_per_target() <= 2 + g.degrees()[targets[:3]]).all()


# ---------------------------------------------------------------------- FGA against a dense GCN


def hand_graph() -> tuple[Graph, torch.nn.Module]:
    """Sixteen nodes: two loose clusters joined by one edge (the receptive-field ball of a
    target holds only part of it), random features, a GCN with random weights."""
    rng = np.random.default_rng(3)
    src, dst = [], []
    for lo in (0, 8):
        for _ in range(11):
            u, v = rng.choice(8, 2, replace=False) + lo
            src.append(u)
            dst.append(v)
    src.append(7)
    dst.append(8)
    ei, _ = canonical_edges(np.array(src), np.array(dst), 16)
    x = rng.normal(size=(16, 4)).astype(np.float32)
    g = Graph(features=x, edge_index=ei, labels=(np.arange(16) >= 8).astype(np.int64), name="hand")
    torch.manual_seed(1)
    return g, build_model("gcn", 4, 2, {"hidden_sizes": [8]}).eval()


def dense_gcn(model, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """The GCN's logits with a dense adjacency ``a`` (float64): ``Â = D̃^-1/2 (A + I) D̃^-1/2``
    with ``D̃`` the row sums of ``A + I``, then ``Â (h W) + b`` per layer, ReLU between."""
    h = x
    for i, layer in enumerate(model.layers):
        d = (a + torch.eye(a.shape[0], dtype=a.dtype)).sum(1).pow(-0.5)
        ahat = d[:, None] * (a + torch.eye(a.shape[0], dtype=a.dtype)) * d[None, :]
        h = ahat @ (h @ layer.lin.weight.double().T) + layer.bias.double()
        if i < len(model.layers) - 1:
            h = torch.relu(h)
    return h


def dense_gains(model, x: torch.Tensor, a: np.ndarray, target: int, label: int, loss: str) -> np.ndarray:
    """Every pair ``(target, v)``'s first-order gain: ``(1 - 2 A_tv) (dL/dA_tv + dL/dA_vt)``."""
    adj = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    z = dense_gcn(model, x, adj)[target]
    if loss == "ce":
        value = torch.nn.functional.cross_entropy(z[None], torch.tensor([label]))
    else:  # margin: the best other logit minus the own
        value = torch.cat([z[:label], z[label + 1:]]).max() - z[label]
    grad = torch.autograd.grad(value, adj)[0].numpy()
    return (1 - 2 * a[target]) * (grad[target] + grad[:, target])


@pytest.mark.parametrize("loss", ["ce", "margin"])
@pytest.mark.parametrize("receptive_field", [True, False])
@pytest.mark.parametrize("target", [2, 7, 12])
def test_fga_flips_the_largest_dense_first_order_gain(target, receptive_field, loss):
    g, model = hand_graph()
    x = torch.tensor(g.features, dtype=torch.float64)
    a = np.zeros((16, 16))
    a[g.edge_index[0], g.edge_index[1]] = 1.0
    with torch.no_grad():  # the dense GCN is the model
        want = model(torch.tensor(g.features), torch.as_tensor(g.edge_index)).double()
        np.testing.assert_allclose(dense_gcn(model, x, torch.tensor(a)).numpy(), want.numpy(), atol=1e-5)
    label = int(want[target].argmax())
    attack = fga.FGA(fga.FGAConfig(n_flips=4, loss=loss, receptive_field=receptive_field))
    with surrogate_mode(model):
        ctx = TargetContext(g, model, torch.device("cpu"))
        flips, _ = attack.attack_one(ctx, target, 4, np.random.default_rng(0))
    assert ctx.memo["fga"].local == receptive_field
    assert flips.size >= 1
    done = []
    for v in flips.tolist():  # each flip: the best pair of the graph with the earlier ones applied
        gains = dense_gains(model, x, a, target, label, loss)
        gains[[target, *done]] = -np.inf
        top2 = np.sort(gains)[-2:]
        assert top2[1] - top2[0] > 1e-6, "near tie: the test graph is not well posed"
        assert v == int(np.argmax(gains)) and gains[v] > 0
        a[target, v] = a[v, target] = 1 - a[target, v]
        done.append(v)
    if flips.size < 4:  # it stopped: no pair left with a positive gain
        gains = dense_gains(model, x, a, target, label, loss)
        gains[[target, *done]] = -np.inf
        assert gains.max() <= 1e-9


# ---------------------------------------------------------------------- receptive field = whole graph


@pytest.mark.parametrize("name,params", [("gcn", {"hidden_sizes": [16]}), ("gcn", {"hidden_sizes": [16, 16]}),
                                         ("sage", {}), ("gin", {}), ("tagcn", {}), ("sgc", {}), ("appnp", {})])
def test_receptive_field_gains_equal_the_whole_graphs(name, params, g):
    """The ball around the target and its flipped partners, the pinned clean values and the
    formula for the pairs outside the ball give the whole graph's gradient (the weighted
    surrogate, with all N - 1 pairs of the target) for every pair, before and after flips."""
    torch.manual_seed(0)
    model = build_model(name, g.num_features, g.num_classes, params).eval()
    with surrogate_mode(model):
        ctx = TargetContext(g, model, torch.device("cpu"))
        local, whole = fga.Prepared(ctx, True), fga.Prepared(ctx, False)
        assert local.local and not whole.local
        rng = np.random.default_rng(1)
        for t in rng.choice(np.flatnonzero(g.degrees() >= 2), 3, replace=False).tolist():
            nbrs = ctx.neighbours(t)
            far = np.setdiff1d(np.arange(g.num_nodes), np.append(nbrs, t))
            added = rng.choice(far, 2, replace=False).tolist()
            for done in (([], []), (added, [int(nbrs[0])])):
                assert fga.ball(ctx.adj, np.array([t, *done[0], *done[1]]), local.radius)[0].size < g.num_nodes or \
                    name in ("tagcn", "sgc", "appnp")  # deep programs reach (almost) everything
                for loss in ("ce", "margin"):
                    want = whole.gains(t, int(ctx.labels[t]), *done, loss)
                    got = local.gains(t, int(ctx.labels[t]), *done, loss)
                    finite = np.isfinite(want)
                    np.testing.assert_array_equal(np.isfinite(got), finite)
                    scale = np.abs(want[finite]).max()
                    np.testing.assert_allclose(got[finite], want[finite], rtol=0, atol=1e-5 * scale)


@pytest.mark.parametrize("name,params", [("gcn", {"hidden_sizes": [16]}), ("gcn", {"hidden_sizes": [16, 16]}),
                                         ("sage", {}), ("gin", {}), ("tagcn", {}), ("sgc", {}), ("appnp", {})])
def test_local_prbcd_logits_and_gradients_equal_the_whole_graphs(name, params, g):
    """Local PR-BCD's row program at one target, with a block of existing and absent pairs
    at arbitrary weights, gives the whole-graph weighted surrogate's logits at the target
    and the same gradient for every pair's weight."""
    from grb_dist.attacks.shared.weighted import weighted_surrogate
    from grb_dist.attacks.targeted.prbcd import LocalWeighted
    from grb_dist.evaluation.rows import RowProgram

    torch.manual_seed(0)
    model = build_model(name, g.num_features, g.num_classes, params).eval()
    tg = graph_tensors(g)
    whole = weighted_surrogate(model, tg.x, tg.edge_index)
    program = RowProgram(model, tg.x)
    ctx = TargetContext(g, model, torch.device("cpu"))
    indptr, indices = ctx.adj.indptr.astype(np.int64), ctx.adj.indices.astype(np.int64)
    rng = np.random.default_rng(2)
    for t in rng.choice(np.flatnonzero(g.degrees() >= 2), 3, replace=False).tolist():
        nbrs = ctx.neighbours(t)
        far = rng.choice(np.setdiff1d(np.arange(g.num_nodes), np.append(nbrs, t)), 6, replace=False)
        partners = np.concatenate([nbrs[:2], far])
        pairs = torch.as_tensor(np.stack([np.minimum(partners, t), np.maximum(partners, t)]))
        sign = torch.as_tensor(np.where(np.isin(partners, nbrs), -1.0, 1.0), dtype=torch.float32)
        p = torch.as_tensor(rng.uniform(0.05, 0.95, partners.size), dtype=torch.float32)
        out = []
        for surrogate, row in ((whole, t), (LocalWeighted(program, indptr, indices, t), 0)):
            q = p.clone().requires_grad_(True)
            z = surrogate.logits(pairs, sign * q)[row]
            (grad,) = torch.autograd.grad(z[0] - z[1:].max(), q)
            out.append((z.detach(), grad))
        torch.testing.assert_close(out[1][0], out[0][0], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out[1][1], out[0][1], rtol=1e-4, atol=1e-5)


def test_local_prbcd_flips_equal_the_whole_graph_search(g, model, targets):
    """The attack with its receptive field and on the whole graph: the same flips at every
    target (their order may differ where float rounding reorders equal scores). The block
    leaves nodes out, so the first runs on the receptive field."""
    block = g.num_nodes // 2
    local = make("prbcd", steps=15, block_size=block).attack(g, model, targets[:5])
    whole = make("prbcd", steps=15, block_size=block, receptive_field=False).attack(g, model, targets[:5])
    np.testing.assert_array_equal(local.targets, whole.targets)
    assert local.n_edge_flips > 0
    for t in targets[:5].tolist():
        for a, b in zip(local.partners(t), whole.partners(t)):
            np.testing.assert_array_equal(np.sort(a), np.sort(b))


@pytest.mark.parametrize("spare,local", [(1, True), (0, False), (-100, False)])
def test_local_prbcd_runs_on_the_receptive_field_only_when_the_block_leaves_nodes_out(g, model, spare, local):
    """A block of every node (``block_size >= N - 1``) makes the receptive field the whole
    graph: the attack then builds the whole-graph weighted surrogate instead of the row
    program; a block one node short of that keeps the row program."""
    attack = make("prbcd", block_size=g.num_nodes - 1 - spare)
    shared = attack.shared(TargetContext(g, model, torch.device("cpu")))
    assert (shared["program"] is not None) is local
    assert (shared["weighted"] is None) is local


# ---------------------------------------------------------------------- configuration


@pytest.mark.parametrize("name,params,match", [
    ("fga", {"loss": "hinge"}, "unknown loss"),
    ("fga", {"receptive_field": "yes"}, "receptive_field"),
    ("prbcd", {"block_size": 0}, "block_size"),
    ("prbcd", {"lr": 0}, "lr"),
    ("prbcd", {"lr": float("nan")}, "lr"),
    ("prbcd", {"resample_fraction": 1.5}, "resample_fraction"),
    ("prbcd", {"n_samples": -1}, "n_samples"),
    ("prbcd", {"steps": 0}, "steps"),
    ("prbcd", {"loss": "hinge"}, "unknown loss"),
    ("prbcd", {"receptive_field": 1}, "receptive_field"),
])
def test_config_errors(name, params, match):
    with pytest.raises(ConfigError, match=match):
        build_attack(name, {**BUDGET, **params}, "targeted")
