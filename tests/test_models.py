import numpy as np
import pytest
import torch

from grb_dist.datasets import load_dataset
from grb_dist.core.errors import ConfigError, UnknownNameError
from grb_dist.evaluation.evaluate import evaluate
from grb_dist.models import ARCHITECTURES, build_model, check_name, model_config
from grb_dist.models.train import TrainConfig, train
from grb_dist.models.tensors import graph_tensors

from helpers import tiny_csbm

SMALL = {"hidden_sizes": [16]}


@pytest.fixture(scope="module")
def tiny():
    return tiny_csbm(n=400, classes=3, features=16, K=2.0)


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_every_model_trains_and_beats_chance(tiny, name):
    r = train(name, tiny, SMALL, TrainConfig(epochs=150, patience=40, seed=0))
    acc = evaluate(r.model, tiny)["full"]
    assert acc > 1 / 3 + 0.3, f"{name}: {acc}"  # chance is 1/3
    assert not r.model.training


@pytest.mark.parametrize("name", ["gcn_ln", "gat_ln", "appnp_ln", "sgc_ln"])
def test_layer_norm_variants(tiny, name):
    spec = check_name(name)
    model = build_model(name, tiny.num_features, tiny.num_classes, SMALL)
    assert model.config.layer_norm and model.input_norm is not None
    assert isinstance(model, spec.cls)
    n_graph_layers = len(model.layers)
    assert len(model.norms) == n_graph_layers - 1  # after every layer but the last
    r = train(name, tiny, SMALL, TrainConfig(epochs=100, seed=0))
    assert evaluate(r.model, tiny)["full"] > 0.6


def test_training_is_deterministic(tiny):
    a = train("gcn", tiny, SMALL, TrainConfig(epochs=30, seed=5))
    b = train("gcn", tiny, SMALL, TrainConfig(epochs=30, seed=5))
    c = train("gcn", tiny, SMALL, TrainConfig(epochs=30, seed=6))
    for k, v in a.model.state_dict().items():
        assert torch.equal(v, b.model.state_dict()[k])
    assert any(not torch.equal(v, c.model.state_dict()[k]) for k, v in a.model.state_dict().items())


def test_training_is_inductive(tiny):
    """Perturbing test nodes' features must not change the trained weights."""
    noisy = tiny.features.copy()
    noisy[tiny.split["test_full"]] = 5.0
    a = train("gcn", tiny, SMALL, TrainConfig(epochs=20, seed=0))
    b = train("gcn", tiny.with_features(noisy), SMALL, TrainConfig(epochs=20, seed=0))
    for k, v in a.model.state_dict().items():
        assert torch.equal(v, b.model.state_dict()[k])


def test_early_stopping_keeps_best_state(tiny):
    r = train("gcn", tiny, SMALL, TrainConfig(epochs=300, patience=5, seed=0))
    assert r.epochs_run <= r.best_epoch + 6
    assert r.stopped_early and r.epochs_run == r.best_epoch + 6 < 300  # 5 epochs without a lower val loss
    full = train("gcn", tiny, SMALL, TrainConfig(epochs=4, patience=5, seed=0))
    assert not full.stopped_early and full.epochs_run == 4
    best = min(h["val_loss"] for h in r.history)
    assert r.best_val_loss == pytest.approx(best)


def test_gcn_on_cora_legacy_reaches_paper_accuracy(cora_legacy):
    g = load_dataset(cora_legacy)
    r = train("gcn", g, {"hidden_sizes": [64, 64, 64]}, TrainConfig(seed=0))
    acc = evaluate(r.model, g)
    assert acc["full"] >= 0.82, acc


def test_model_config_strict():
    with pytest.raises(ConfigError, match="valid keys"):
        model_config("gcn", {"hiden_sizes": [3]})
    with pytest.raises(ConfigError, match="heads"):
        model_config("gat", {"heads": 0})
    with pytest.raises(UnknownNameError, match="did you mean 'gcn'"):
        check_name("gcm")
    assert model_config("GCN-LN", {}).layer_norm is True
    assert check_name("GAT-LN") == check_name("gat_ln")


def test_bad_train_config():
    with pytest.raises(ConfigError):
        TrainConfig(lr=0)


@pytest.mark.parametrize("name", ["sage", "gin", "tagcn"])
def test_sparse_propagation_equals_edge_index_path(tiny, name, monkeypatch):
    torch.manual_seed(0)
    model = build_model(name, tiny.num_features, tiny.num_classes, {"hidden_sizes": [8, 8]}).eval()
    t = graph_tensors(tiny)
    x = t.x.clone().requires_grad_()
    sparse = model(x, t.edge_index)
    (g_sparse,) = torch.autograd.grad(sparse.sum(), x)
    monkeypatch.setattr(type(model), "sparse_propagation", False)
    edges_path = model(x, t.edge_index)
    (g_edges,) = torch.autograd.grad(edges_path.sum(), x)
    torch.testing.assert_close(sparse, edges_path, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(g_sparse, g_edges, rtol=1e-4, atol=1e-5)


def _dense_norm_adj(edge_index, n):
    a = torch.zeros(n, n)
    a[edge_index[0], edge_index[1]] = 1.0
    a = a + torch.eye(n)
    d = a.sum(1).pow(-0.5)
    return d[:, None] * a * d[None, :]


def test_gcn_sgc_appnp_match_dense_formulas(tiny):
    """GCN, SGC and APPNP against the textbook dense computation on a tiny graph."""
    t = graph_tensors(tiny)
    a = _dense_norm_adj(t.edge_index, tiny.num_nodes)
    torch.manual_seed(0)
    gcn = build_model("gcn", tiny.num_features, tiny.num_classes, {"hidden_sizes": [8]}).eval()
    l0, l1 = gcn.layers
    h = torch.relu(a @ (t.x @ l0.lin.weight.T) + l0.bias)
    torch.testing.assert_close(gcn(t.x, t.edge_index), a @ (h @ l1.lin.weight.T) + l1.bias, rtol=1e-4, atol=1e-5)

    sgc = build_model("sgc", tiny.num_features, tiny.num_classes, {"hidden_sizes": [8], "k": 3}).eval()
    first, last = sgc.layers
    h = torch.relu(torch.linalg.matrix_power(a, 3) @ first["lin"](t.x))
    torch.testing.assert_close(sgc(t.x, t.edge_index), last(h), rtol=1e-4, atol=1e-5)

    appnp = build_model("appnp", tiny.num_features, tiny.num_classes, {"hidden_sizes": [8], "k": 5, "alpha": 0.1}).eval()
    h0 = appnp.layers[1](torch.relu(appnp.layers[0](t.x)))
    h = h0
    for _ in range(5):
        h = 0.9 * (a @ h) + 0.1 * h0
    torch.testing.assert_close(appnp(t.x, t.edge_index), h, rtol=1e-4, atol=1e-5)


def test_propagation_graph_is_cached_per_edge_index(tiny, monkeypatch):
    model = build_model("gcn", tiny.num_features, tiny.num_classes, SMALL).eval()
    calls = []
    original = type(model).propagation_graph
    monkeypatch.setattr(type(model), "propagation_graph", lambda self, ei, n: calls.append(1) or original(self, ei, n))
    t = graph_tensors(tiny)
    ei = t.edge_index.clone()
    first = model(t.x, ei)
    model(t.x, ei)
    assert len(calls) == 1, "the same edge_index must reuse its propagation graph"
    model(t.x, ei.clone())
    assert len(calls) == 2, "another tensor is another graph"
    ei[:, :2] = ei[:, :2].flip(1)  # an in-place change bumps the version counter
    model(t.x, ei)
    assert len(calls) == 3
    torch.testing.assert_close(model(t.x, t.edge_index), first)


# ------------------------------------------------------------------ weighted propagation


def _gather_propagate(h, edge_index, weight, n):
    """The gather-and-add reference: every edge's message materialised."""
    src, dst = edge_index
    msg = h[src] * weight.view(-1, *([1] * (h.dim() - 1)))
    return torch.zeros((n, *h.shape[1:]), dtype=h.dtype).index_add(0, dst, msg)


@pytest.mark.parametrize("shape", [(5,), (2, 3)])
def test_sparse_propagation_equals_gathering_messages_and_its_gradients_check(shape):
    from grb_dist.models.weighted import propagate

    torch.manual_seed(0)
    n = 7
    # duplicate edges, a self-loop and a node without edges
    edge_index = torch.tensor([[0, 0, 1, 2, 2, 5, 3, 4, 1], [1, 1, 2, 0, 0, 4, 3, 2, 0]])
    h = torch.randn(n, *shape, dtype=torch.float64, requires_grad=True)
    w = torch.rand(edge_index.shape[1], dtype=torch.float64, requires_grad=True)
    assert torch.allclose(propagate(h, edge_index, w, n), _gather_propagate(h, edge_index, w, n), atol=1e-12)
    assert torch.autograd.gradcheck(lambda h, w: propagate(h, edge_index, w, n), (h, w))
    empty = propagate(h, edge_index[:, :0], w[:0], n)
    assert empty.shape == (n, *shape) and not empty.any()


def test_gnnguard_layers_equal_gcnconv_on_the_guard_weighted_edges():
    from grb_dist.defenses import build_defense
    from grb_dist.models.robust.gnnguard import _weighted_gcn, guard_weights

    g = tiny_csbm()
    model = build_defense("gnnguard", g, {"hidden_sizes": [16]}).eval()
    t = graph_tensors(g)
    x, edge_index = t[0], t[1]
    layer = model.layers[0]
    ei, w = guard_weights(x, edge_index, model.config.threshold, model.config.self_weight)
    with torch.no_grad():
        assert torch.allclose(_weighted_gcn(layer, x, ei, w), layer(x, ei, w), atol=1e-5)


@pytest.mark.parametrize("rows", [4, 16384])
@pytest.mark.parametrize("activate", [True, False])
def test_rgcn_messages_equal_the_plain_operators_and_their_gradients_check(activate, rows, monkeypatch):
    """R-GCN's layer keeps only its inputs for the backward pass and recomputes the rest
    (in blocks of rows: 4, 4 and 1 of the 9 here, or all at once); values and gradients are
    those of the plain operators."""
    from grb_dist.models.robust import rgcn
    from grb_dist.models.robust.rgcn import GaussianConv, _GaussianMessages

    monkeypatch.setattr(rgcn, "BLOCK_ROWS", rows)

    torch.manual_seed(0)
    gamma = 0.7
    layer = GaussianConv(5, 4, gamma, activate=activate).double()
    mean = torch.randn(9, 5, dtype=torch.float64, requires_grad=True)
    var = torch.randn(9, 5, dtype=torch.float64, requires_grad=True)
    a = layer.lin_mean(mean)
    r = torch.relu(layer.lin_var(var))
    att = torch.exp(-gamma * r)
    plain = ((torch.nn.functional.elu(a) if activate else a) * att, r * att * att)
    fused = layer.messages(mean, var)
    for p, f in zip(plain, fused):
        assert torch.allclose(p, f, atol=1e-12)
    params = (layer.lin_mean.weight, layer.lin_mean.bias, layer.lin_var.weight, layer.lin_var.bias)
    assert torch.autograd.gradcheck(lambda *t: _GaussianMessages.apply(*t, gamma, activate), (mean, var, *params))
    # the first layer reads one input for both streams
    assert torch.autograd.gradcheck(lambda m, *t: _GaussianMessages.apply(m, m, *t, gamma, activate), (mean, *params))


def test_plain_kernels_equal_the_fused_ones_and_are_differentiable_twice():
    """Inside ``plain_kernels`` (what a meta-gradient enters) GNNGuard's edge cosine and
    R-GCN's messages give the fused kernels' values and gradients, and their gradients
    are differentiable again (the fused backward passes are not)."""
    from grb_dist.models.robust.gnnguard import EdgePattern, edge_cosine
    from grb_dist.models.robust.rgcn import GaussianConv
    from grb_dist.models.weighted import plain_kernels, plain_kernels_on

    torch.manual_seed(1)
    n = 8
    edge_index = torch.tensor([[0, 0, 1, 2, 2, 5, 3, 4, 1, 6], [1, 1, 2, 0, 0, 4, 3, 2, 0, 7]])
    pattern = EdgePattern.of(edge_index, n)
    h = torch.randn(n, 4, dtype=torch.float64, requires_grad=True)
    layer = GaussianConv(4, 3, 0.7).double()
    g = torch.randn(pattern.edge_index.shape[1], dtype=torch.float64)

    def both(h):
        m, v = layer.messages(h, h * 0.5)
        return edge_cosine(h, pattern) @ g + m.sum() + (v * v).sum()

    fused = both(h)
    (fused_grad,) = torch.autograd.grad(fused, h)
    assert not plain_kernels_on()
    with plain_kernels():
        assert plain_kernels_on()
        plain = both(h)
        (plain_grad,) = torch.autograd.grad(plain, h, create_graph=True)
        assert torch.autograd.gradgradcheck(both, (h,))
    assert not plain_kernels_on()
    assert torch.allclose(plain, fused, atol=1e-12) and torch.allclose(plain_grad, fused_grad, atol=1e-12)
    # the fused kernels refuse a backward pass that is to be differentiated again
    with pytest.raises(RuntimeError):
        torch.autograd.grad(both(h), h, create_graph=True)


def test_edge_cosine_keeps_only_its_input_and_its_gradients_check():
    """GNNGuard's edge cosine normalises again in the backward pass: values and gradients
    are those of ``F.normalize`` and a gather, a zero row included."""
    from grb_dist.models.robust.gnnguard import EdgePattern, edge_cosine, guard_weights

    torch.manual_seed(0)
    n = 8
    edge_index = torch.tensor([[0, 0, 1, 2, 2, 5, 3, 4, 1, 6], [1, 1, 2, 0, 0, 4, 3, 2, 0, 7]])
    h = torch.randn(n, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda h: edge_cosine(h, edge_index), (h,))
    # every edge with its reverse: the backward pass takes one product with the summed pattern
    both = torch.cat([edge_index, edge_index.flip(0)], 1)
    assert EdgePattern.of(both, n).symmetric and not EdgePattern.of(edge_index, n).symmetric
    assert torch.autograd.gradcheck(lambda h: edge_cosine(h, both), (h,))
    assert torch.autograd.gradcheck(lambda h: edge_cosine(h, EdgePattern.of(both, n)), (h,))
    z = h.detach().clone()
    z[7] = 0
    z.requires_grad_(True)
    hn = torch.nn.functional.normalize(z, dim=1)
    want = (hn[edge_index[0]] * hn[edge_index[1]]).sum(1)
    got = edge_cosine(z, edge_index)
    assert torch.allclose(got, want, atol=1e-12)
    g = torch.randn(edge_index.shape[1], dtype=torch.float64)
    assert torch.allclose(torch.autograd.grad(got @ g, z)[0], torch.autograd.grad(want @ g, z)[0], atol=1e-12)
    # a pattern built once gives the same guard weights as the edge list (self-loop 3 -> 3 dropped)
    pattern = EdgePattern.of(edge_index, n)
    assert pattern.edge_index.shape[1] == edge_index.shape[1] - 1
    w = torch.rand(edge_index.shape[1], dtype=torch.float64)
    for a, b in zip(guard_weights(h, pattern, 0.0, True, w), guard_weights(h, edge_index, 0.0, True, w)):
        assert torch.equal(a, b)
