"""Adaptive (white-box) attacks: gradients through every built-in defense.

Every defense of the GRB job is built untrained on a tiny random graph, in float64 and eval
mode; the autograd gradients an adaptive attack uses are checked against central finite
differences: in the features (injection) and in the relaxed pair weights ``delta``
(modification, through :func:`weighted_surrogate`). Defenses that cannot be attacked in a
scenario must say why (:func:`transfer_only_reason`).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grb_dist.attacks.adaptive import transfer_only_reason
from grb_dist.attacks.registry import attack_class, attack_registry
from grb_dist.attacks.shared.flips import Budget, ModContext
from grb_dist.attacks.shared.weighted import EdgeWeightSurrogate, WeightedSurrogate, weighted_surrogate
from grb_dist.attacks.registry import build_attack
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph, Modification, canonical_edges
from grb_dist.datasets.split import grb_split
from grb_dist.defenses import build_defense
from grb_dist.models.robust import svd as svd_module
from helpers import tiny_csbm

#: The defenses of grb_dist/jobs/grb-cora.yaml, plus label propagation alone, GATv2 and
#: GCN-SVD's scalable variant.
DEFENSES = ["gcn", "gcn_ln", "gcn_at", "gat", "gat_ln", "gat_at", "gatv2", "gin", "gin_ln", "appnp", "appnp_ln",
            "tagcn", "tagcn_ln", "sage", "sage_ln", "sgc", "sgc_ln", "mlp", "rgcn", "rgcn_at", "gnnguard",
            "gatguard", "gcnsvd", "gcnsvd_sparse", "gcn_lp", "lp"]
#: Small hyper-parameters by base name.
PARAMS = {"appnp": {"hidden_sizes": [6], "k": 3}, "sgc": {"hidden_sizes": [6], "k": 2}, "gat": {"hidden_sizes": [4], "heads": 2},
          "gatv2": {"hidden_sizes": [4], "heads": 2}, "gatguard": {"hidden_sizes": [4], "heads": 2},
          "gcnsvd": {"hidden_sizes": [6], "k": 3}, "tagcn": {"hidden_sizes": [6], "k": 2}}
#: Defenses whose class has weighted_forward (the others replay their program).
WEIGHTED_FORWARD = ["gat", "gatv2", "rgcn", "gnnguard", "gatguard", "gcnsvd", "gcnsvd_sparse", "gcn_lp", "lp", "gat_lp",
                    "rgcn_lp"]


def random_graph(n: int = 20, d: int = 5, classes: int = 3, seed: int = 0) -> Graph:
    """A random undirected graph (every node has an edge) with Gaussian features."""
    rng = np.random.default_rng(seed)
    a, b = np.triu_indices(n, 1)
    keep = rng.random(a.size) < 0.2
    ring = np.arange(n)
    src, dst = np.concatenate([a[keep], ring]), np.concatenate([b[keep], (ring + 1) % n])
    ei, _ = canonical_edges(src, dst, n)
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = rng.integers(0, classes, n)
    y[:classes] = np.arange(classes)
    g = Graph(features=x, edge_index=ei, labels=y, name="random")
    return g.with_split(grb_split(g.degrees(), seed=0))


@pytest.fixture(scope="module")
def graph() -> Graph:
    return random_graph()


def build(name: str, graph: Graph) -> torch.nn.Module:
    base = name.split("_")[0]
    torch.manual_seed(3)
    params = dict(PARAMS.get(base, {"hidden_sizes": [6]})) if base != "lp" else {"iterations": 10}
    if name.endswith("_lp"):
        params["lp"] = {"iterations": 10}
    return build_defense(name, graph, params).double().eval()


def tensors(graph: Graph) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.as_tensor(graph.features, dtype=torch.float64), torch.as_tensor(graph.edge_index)


def projection(n: int, c: int) -> torch.Tensor:
    """Fixed random weights of a scalar loss of the logits (no cancellation)."""
    return torch.randn(n, c, generator=torch.Generator().manual_seed(7), dtype=torch.float64)


def block_pairs(graph: Graph, k: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    """``k`` existing edges and ``k`` absent pairs (one direction each) and their signs."""
    rng = np.random.default_rng(1)
    ei = graph.edge_index
    edges = ei[:, ei[0] < ei[1]]
    existing = edges[:, rng.choice(edges.shape[1], k, replace=False)]
    present = set(map(tuple, edges.T.tolist()))
    absent = [(u, v) for u in range(graph.num_nodes) for v in range(u + 1, graph.num_nodes) if (u, v) not in present]
    absent = np.array(absent)[rng.choice(len(absent), k, replace=False)].T
    pairs = torch.as_tensor(np.concatenate([existing, absent], axis=1))
    sign = torch.cat([-torch.ones(k), torch.ones(k)]).double()
    return pairs, sign


def directional_differences(f, v: torch.Tensor, directions: torch.Tensor, eps: float) -> torch.Tensor:
    """Central differences of ``f`` at ``v`` along each of ``directions`` (K x v.shape)."""
    return torch.stack([(f(v + eps * d) - f(v - eps * d)) / (2 * eps) for d in directions])


def gradient(loss: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """d loss / d v, zeros where ``loss`` does not depend on ``v``."""
    if not loss.requires_grad:
        return torch.zeros_like(v)
    (grad,) = torch.autograd.grad(loss, v, allow_unused=True)
    return torch.zeros_like(v) if grad is None else grad


def central_differences(f, v: torch.Tensor, eps: float) -> torch.Tensor:
    out = torch.zeros_like(v)
    flat = v.reshape(-1)
    for i in range(flat.numel()):
        e = torch.zeros_like(flat)
        e[i] = eps
        out.view(-1)[i] = (f((flat + e).view_as(v)) - f((flat - e).view_as(v))) / (2 * eps)
    return out


def assert_close_gradient(grad: torch.Tensor, fd: torch.Tensor, rtol: float = 1e-5) -> None:
    scale = fd.abs().max().clamp_min(1e-8)
    assert (grad - fd).abs().max() <= rtol * scale + 1e-9, (grad, fd)


# ------------------------------------------------------------------ injection: gradients in x


@pytest.mark.parametrize("name", DEFENSES)
def test_feature_gradient_matches_finite_differences(graph, name):
    model = build(name, graph)
    x, ei = tensors(graph)
    r = projection(graph.num_nodes, graph.num_classes)

    def loss(x):
        return (model(x, ei) * r).sum()

    xg = x.clone().requires_grad_(True)
    grad = gradient(loss(xg), xg)
    reason = transfer_only_reason(model, "injection")
    if name == "lp":
        assert reason == "label propagation reads no node features, so injected features get no gradient"
        assert not grad.any()
        return
    assert reason is None
    assert grad.abs().max() > 0, "the features get a gradient"
    # directional derivatives along random directions and single rows' features
    gen = torch.Generator().manual_seed(5)
    directions = torch.randn(4, *x.shape, generator=gen, dtype=torch.float64)
    rows = torch.zeros(2, *x.shape, dtype=torch.float64)
    rows[0, 0], rows[1, -1] = 1.0, 1.0
    directions = torch.cat([directions, rows])
    with torch.no_grad():
        fd = directional_differences(loss, x, directions, 1e-6)
    assert_close_gradient((directions * grad).sum(dim=(1, 2)), fd)


# ------------------------------------------------------------------ modification: gradients in delta


def _surrogate_loss(model, graph):
    x, ei = tensors(graph)
    surrogate = weighted_surrogate(model, x, ei)
    pairs, sign = block_pairs(graph)
    r = projection(graph.num_nodes, graph.num_classes)
    return surrogate, lambda p: (surrogate.logits(pairs, sign * p) * r).sum()


@pytest.mark.parametrize("name", DEFENSES)
def test_edge_weight_gradient_matches_finite_differences(graph, name, monkeypatch):
    model = build(name, graph)
    assert transfer_only_reason(model, "modification") is None
    surrogate, loss = _surrogate_loss(model, graph)
    expected = EdgeWeightSurrogate if name.split("_")[0] in WEIGHTED_FORWARD or name in WEIGHTED_FORWARD \
        else WeightedSurrogate
    assert isinstance(surrogate, expected)
    p0 = torch.as_tensor(np.random.default_rng(2).uniform(0.3, 0.7, 12))
    if name.startswith("gcnsvd"):
        # the documented surrogate: the rank-k basis is a constant of the gradient, so the
        # finite differences hold the basis of p0 fixed too
        with torch.no_grad():
            loss(p0)
        basis = svd_module.svd_basis
        fixed = {}

        def frozen(*args, **kwargs):
            if "b" not in fixed:
                fixed["b"] = basis(*args, **kwargs)
            return fixed["b"]

        monkeypatch.setattr(svd_module, "svd_basis", frozen)
    p = p0.clone().requires_grad_(True)
    grad = gradient(loss(p), p)
    with torch.no_grad():
        fd = central_differences(loss, p0, 1e-6)
    if name != "mlp":
        assert grad.abs().max() > 0, "the pair weights get a gradient"
    assert_close_gradient(grad, fd)


def test_gnnguard_pruning_is_away_from_the_checked_points(graph):
    """The finite differences above are valid: no cosine similarity is near the threshold."""
    from grb_dist.models.robust.gnnguard import edge_cosine

    model = build("gnnguard", graph)
    x, ei = tensors(graph)
    pairs, _ = block_pairs(graph)
    both = torch.cat([ei, pairs, pairs.flip(0)], dim=1)
    sims = edge_cosine(x, both)
    assert (sims - model.config.threshold).abs().min() > 1e-4


@pytest.mark.parametrize("name", WEIGHTED_FORWARD + ["rgcn_ln", "gatguard_ln"])
def test_weighted_forward_with_unit_weights_is_forward(graph, name):
    model = build(name, graph)
    x, ei = tensors(graph)
    with torch.no_grad():
        want = model(x, ei)
        got = model.weighted_forward(x, ei, torch.ones(ei.shape[1], dtype=torch.float64))
    assert torch.allclose(got, want, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("name", DEFENSES)
def test_binary_weights_equal_the_forward_on_the_flipped_graph(graph, name):
    """delta = 0 is the clean graph (absent pairs present with weight 0), delta = sign the
    graph with every pair of the block flipped."""
    model = build(name, graph)
    x, ei = tensors(graph)
    surrogate = weighted_surrogate(model, x, ei)
    pairs, sign = block_pairs(graph)
    k = pairs.shape[1] // 2
    removed, added = pairs[:, :k], pairs[:, k:]
    keys = ei[0] * graph.num_nodes + ei[1]
    gone = torch.cat([removed[0] * graph.num_nodes + removed[1], removed[1] * graph.num_nodes + removed[0]])
    flipped = torch.cat([ei[:, ~torch.isin(keys, gone)], added, added.flip(0)], dim=1)
    with torch.no_grad():
        assert torch.allclose(surrogate.logits(pairs, 0 * sign), model(x, ei), atol=1e-9)
        assert torch.allclose(surrogate.logits(pairs, sign), model(x, flipped), atol=1e-9)


# ------------------------------------------------------------------ transfer_only_reason


class _Plain(torch.nn.Module):
    def __init__(self, d: int, c: int):
        super().__init__()
        self.lin = torch.nn.Linear(d, c)

    def forward(self, x, edge_index):
        return self.lin(x)


class _PlainWeighted(_Plain):
    def weighted_forward(self, x, edge_index, edge_weight):
        return self.lin(x)


def test_transfer_only_reasons(graph):
    plain = _Plain(graph.num_features, graph.num_classes)
    assert transfer_only_reason(plain, "injection") is None
    assert transfer_only_reason(plain, "modification") == (
        "_Plain is not differentiable in edge weights: declare GraphModel.incremental or "
        "weighted_forward(x, edge_index, edge_weight)")
    assert transfer_only_reason(_PlainWeighted(graph.num_features, graph.num_classes), "modification") is None
    lp_on_plain = build("gcn_lp", graph)
    lp_on_plain.model = plain
    reason = transfer_only_reason(lp_on_plain, "modification")
    assert reason.startswith("_Plain is not differentiable in edge weights") and "LabelPropagationOn" in reason
    assert transfer_only_reason(build("lp", graph), "modification") is None
    with pytest.raises(ConfigError, match="unknown scenario .evasion."):
        transfer_only_reason(plain, "evasion")
    with pytest.raises(ConfigError, match="_Plain is not differentiable in edge weights"):
        weighted_surrogate(plain, *tensors(graph))
    # the attacks that get adaptive cells: those that follow their surrogate's gradients
    following = {s: sorted(n for n in attack_registry(s).names() if attack_class(n, s)().follows_gradients)
                 for s in ("injection", "modification")}
    assert following == {"injection": ["fgsm", "pgd", "speit", "tdgia"],
                         "modification": ["fga", "grbcd", "pgd", "prbcd"]}


def test_mod_context_prefers_the_program(graph):
    t = graph.targets("full")
    for name, cls in (("gcn", WeightedSurrogate), ("rgcn", EdgeWeightSurrogate)):
        model = build(name, graph).float()
        ctx = ModContext(graph, model, t, Budget(-1, 1, n_edge_mod=3), torch.device("cpu"))
        assert isinstance(ctx.weighted, cls)
        ctx.weighted.check()


# ------------------------------------------------------------------ an adaptive attack end to end


@pytest.mark.parametrize("name", ["rgcn", "gnnguard", "gcnsvd", "gcnsvd_sparse"])
def test_pgd_modification_against_robust_surrogates(name):
    g = tiny_csbm(n=80, features=8)
    params = {"hidden_sizes": [8], **({"k": 4} if name.startswith("gcnsvd") else {})}
    torch.manual_seed(0)
    model = build_defense(name, g, params).eval()
    attack = build_attack("pgd", {"n_edge_mod": 6, "n_node_mod": 2, "steps": 5, "n_candidate_pairs": 40},
                          "modification")
    targets = g.targets("full")
    mod = attack.attack(g, model, targets)
    assert isinstance(mod, Modification)
    assert 0 < mod.n_edge_flips <= 6 and mod.n_nodes_modified <= 2
    flipped = np.concatenate([mod.removed, mod.added], axis=1)
    assert np.isin(flipped, targets).any(axis=0).all()


# ---------------------------------------------------------------------- injection PGD past GNNGuard's pruning


def test_targets_mean_is_each_injected_nodes_mean_over_its_targets():
    from grb_dist.attacks.injection.common import targets_mean

    x = torch.tensor([[1.0, 0.0], [3.0, 2.0], [5.0, 4.0]])
    edges = torch.tensor([[10, 10, 11], [0, 2, 1]])  # injected 10 -> 0 and 2, 11 -> 1, 12 has none
    torch.testing.assert_close(targets_mean(edges, x, 3, 10), torch.tensor([[3.0, 2.0], [3.0, 2.0], [0.0, 0.0]]))


def test_sign_ascent_keeps_the_iterate_of_the_highest_loss():
    """Steps of 0.03 on ``-|x - 0.05|`` from 0 go 0.03, 0.06, 0.03: the last iterate is 0.03,
    the best 0.06."""
    from grb_dist.attacks.injection.common import sign_ascent

    def loss(x):
        return -(x - 0.05).abs().sum()

    kw = dict(steps=3, step_size=0.03, feat_min=-1.0, feat_max=1.0)
    torch.testing.assert_close(sign_ascent(loss, torch.zeros(1), **kw), torch.tensor([0.03]))
    torch.testing.assert_close(sign_ascent(loss, torch.zeros(1), keep_best=True, **kw), torch.tensor([0.06]))


def test_pgd_from_the_targets_mean_reaches_through_gnnguards_pruning():
    """GNNGuard drops an injected node's edges when its features are far from its targets'
    (at 0: similarity 0), and a dropped edge passes no gradient: PGD from 0 never moves
    (gradient masking). From the targets' mean the edges are kept, the features move and
    the targets' loss rises above the start's."""
    import torch.nn.functional as F

    from grb_dist.attacks.injection.common import targets_mean
    from grb_dist.models.tensors import apply_injection

    g = random_graph(n=40, d=8, seed=1)
    g = Graph(features=np.abs(g.features), edge_index=g.edge_index, labels=g.labels, name="nonnegative",
              split=g.split)
    torch.manual_seed(3)
    model = build_defense("gnnguard", g, {"hidden_sizes": [6]}).eval()
    targets = g.targets("full")[:8]
    x, ei = torch.as_tensor(g.features), torch.as_tensor(g.edge_index)
    labels = model(x, ei).argmax(1)[torch.as_tensor(targets)]

    def loss(features, edges):
        xa, ea = apply_injection(x, ei, torch.as_tensor(features), torch.as_tensor(edges))
        with torch.no_grad():
            return float(F.cross_entropy(model(xa, ea)[torch.as_tensor(targets)], labels))

    base = dict(n_inject=3, edges_per_node=4, steps=30, step_size=0.05, random_start_std=0.0, seed=0,
                feat_lim_min=0.0, feat_lim_max=4.0)
    masked = build_attack("pgd", base, "injection").attack(g, model, targets)
    assert np.all(masked.features == 0)
    adaptive = build_attack("pgd", {**base, "start": "targets", "keep_best": True}, "injection")
    adaptive = adaptive.attack(g, model, targets)
    start = targets_mean(torch.as_tensor(adaptive.edges), x, 3, g.num_nodes).numpy()
    assert not np.allclose(adaptive.features, start)
    reached = loss(adaptive.features, adaptive.edges)
    assert reached > loss(start, adaptive.edges) + 1e-4
    assert reached > loss(masked.features, masked.edges) + 1e-3  # above the masked attack's (the clean loss)
    # both starts (the same edges and noise): the ascent of the higher loss, here the targets' one
    both = build_attack("pgd", {**base, "start": "both", "keep_best": True}, "injection").attack(g, model, targets)
    np.testing.assert_array_equal(both.edges, adaptive.edges)
    np.testing.assert_array_equal(both.features, adaptive.features)
