"""Defense zoo: registry names, strict configs, dense/sparse agreement, LP, R-GCN
determinism, state_dict round trips, and training on small synthetic and real graphs."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from grb_dist.datasets import load_dataset
from grb_dist.defenses import ATConfig, InjectionAT, build_defense, resolve_params, train_defense
from grb_dist.defenses import at as at_module
from grb_dist.core.errors import ConfigError, UnknownNameError
from grb_dist.evaluation.evaluate import evaluate
from grb_dist.core.graph import Graph, canonical_edges
from grb_dist.models.tensors import apply_injection
from grb_dist.models import MODELS, build_model, check_name
from grb_dist.models.grammar import is_model_name
from grb_dist.models.robust.gnnguard import GNNGuard, GNNGuardConfig, guard_weights
from grb_dist.models.lp import LPConfig, label_spreading
from grb_dist.models.robust import svd as svd_module
from grb_dist.models.robust.svd import GCNSVD, GCNSVDConfig, SparseGCNSVD, SparseGCNSVDConfig, svd_edge_weights
from grb_dist.models.train import TrainConfig
from grb_dist.models.views import induced
from grb_dist.models.tensors import graph_tensors

from helpers import tiny_csbm

JOBS = Path(__file__).resolve().parents[1] / "grb_dist" / "jobs"
ARCHS = ["gcn", "gat", "gin", "appnp", "tagcn", "sage", "sgc", "mlp"]
ROBUST = ["rgcn", "gnnguard", "gatguard", "gcnsvd", "gcnsvd_sparse"]
AT_SMALL = {"n_inject": 10, "edges_per_node": 5, "steps": 3, "step_size": 0.01, "warmup_epochs": 2}
SMALL = {
    "gcn": {"hidden_sizes": [16]},
    "rgcn": {"hidden_sizes": [16]},
    "gnnguard": {"hidden_sizes": [16], "dropout": 0.1},
    "gatguard": {"hidden_sizes": [8], "heads": 2, "dropout": 0.1},
    "gcnsvd": {"hidden_sizes": [16], "k": 20},
    "gcnsvd_sparse": {"hidden_sizes": [16], "k": 20},
}


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny():
    return tiny_csbm(n=300, classes=3, features=16, K=3.0)


@pytest.fixture(scope="module")
def cora(cora_legacy):
    return load_dataset(str(cora_legacy))


def random_graph(n: int, p: float, seed: int, d: int = 5, classes: int = 2) -> Graph:
    rng = np.random.default_rng(seed)
    iu = np.triu_indices(n, 1)
    keep = rng.random(iu[0].size) < p
    ei, _ = canonical_edges(iu[0][keep], iu[1][keep], n)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = rng.integers(0, classes, n).astype(np.int64)
    return Graph(features=x, edge_index=ei, labels=y, num_classes=classes)


def dense_adj(ei: torch.Tensor, n: int) -> torch.Tensor:
    a = torch.zeros(n, n)
    a[ei[1], ei[0]] = 1.0  # row = target, column = source
    return a


# --- registry and configs -----------------------------------------------------------


def test_every_name_is_registered():
    names = ARCHS + ROBUST
    for m in names:
        for suffix in ["", "_ln", "_at", "_lp", "_ln_at"]:
            assert is_model_name(f"{m}{suffix}")
    assert is_model_name("lp") and "lp" in MODELS
    assert not is_model_name("gcn_at_ln") and not is_model_name("gcn_ln_ln")  # order, at most once
    assert check_name("GCN-LN").implied == {"layer_norm": True}
    assert check_name("rgcn_at").adversarial and check_name("gcn_lp").label_propagation


@pytest.mark.parametrize("name", ["lp_at", "lp_ln", "lp_lp"])
def test_incompatible_combinations_are_clear_errors(name, tiny):
    with pytest.raises(ConfigError, match="label propagation 'lp' cannot"):
        check_name(name)
    with pytest.raises(ConfigError, match="cannot"):
        train_defense(name, tiny, {}, TrainConfig(epochs=1), at_config=AT_SMALL)


def test_unknown_name_lists_choices(tiny):
    with pytest.raises(UnknownNameError, match="choose one of:.*gnnguard"):
        build_defense("robustgcn", tiny, {})


def test_invalid_hyper_parameters_fail_before_training(tiny):
    n_train = tiny.split["train"].size
    with pytest.raises(ConfigError, match="rank k"):
        train_defense("gcnsvd", tiny, {"k": n_train}, TrainConfig(epochs=1))
    with pytest.raises(ConfigError, match="threshold"):
        build_defense("gnnguard", tiny, {"threshold": 1.5})
    with pytest.raises(ConfigError, match="threshold"):
        build_defense("gatguard", tiny, {"threshold": -0.1})
    with pytest.raises(ConfigError, match="unknown key"):
        build_defense("rgcn", tiny, {"hidden": 3})
    with pytest.raises(ConfigError, match="alpha"):
        build_defense("gcn_lp", tiny, {"lp": {"alpha": 1.0}})
    with pytest.raises(ConfigError, match="only applies"):
        build_defense("gcn", tiny, {"lp": {"alpha": 0.5}})
    with pytest.raises(ConfigError, match="at_config"):
        train_defense("gcn_at", tiny, {}, TrainConfig(epochs=1))
    with pytest.raises(ConfigError, match="unknown key"):
        train_defense("gcn_at", tiny, {}, TrainConfig(epochs=1), at_config={**AT_SMALL, "budget": 3})
    with pytest.raises(ConfigError, match="build_defense"):
        build_model("gcn_lp", 4, 2)
    with pytest.raises(ConfigError):
        svd_edge_weights(torch.tensor([[0, 1], [1, 0]]), 2, 2)


def test_resolve_params():
    section = {
        "gcn": {"hidden_sizes": [64, 64]},
        "gcn_ln": {"hidden_sizes": [32]},
        "gnnguard": {"hidden_sizes": [64], "dropout": 0.1, "train": {"lr": 0.001}},
    }
    assert resolve_params("gcn_ln", section) == ({"hidden_sizes": [32]}, {})
    assert resolve_params("gcn_at_lp", section) == ({"hidden_sizes": [64, 64]}, {})
    assert resolve_params("GNNGuard-AT", section) == ({"hidden_sizes": [64], "dropout": 0.1}, {"lr": 0.001})
    assert resolve_params("lp", section) == ({}, {})
    with pytest.raises(ConfigError, match="unknown key"):
        resolve_params("gcn", {"gcn": {"hiden_sizes": [3]}})
    with pytest.raises(ConfigError, match="unknown key"):
        resolve_params("gcn", {"gcn": {"train": {"learning_rate": 3}}})


@pytest.mark.parametrize("job", sorted(p.name for p in JOBS.glob("*.yaml")))
def test_job_defenses_resolve_and_build(job, tiny):
    spec = yaml.safe_load((JOBS / job).read_text())
    for name in spec["defenses"]:
        params, overrides = resolve_params(name, spec["models"])
        TrainConfig(**{**spec.get("train", {}), **overrides})
        if name.startswith("gcnsvd"):
            params = {**params, "k": 10}
        build_defense(name, tiny, params)
    ATConfig(**spec["adversarial_training"])


# --- GNNGuard and GNN-SVD against dense computations -------------------------------


def test_gnnguard_agrees_with_dense():
    g = random_graph(10, 0.4, seed=3)
    t = graph_tensors(g)
    x = t.x.clone().requires_grad_(True)
    n = g.num_nodes
    thr = 0.1
    ei, w = guard_weights(x, t.edge_index, thr, True)
    # dense reference
    a = dense_adj(t.edge_index, n)
    xn = x / x.norm(dim=1, keepdim=True)
    sim = (xn @ xn.T) * a
    sim = torch.where(sim >= thr, sim, torch.zeros_like(sim))
    deg = (sim > 0).float().sum(1)
    att = sim / sim.sum(1, keepdim=True).clamp_min(1e-12)
    att = att + torch.diag(1.0 / (1.0 + deg))
    got = torch.zeros(n, n).index_put((ei[1], ei[0]), w, accumulate=True)
    assert torch.allclose(got, att, atol=1e-6)
    # gradient through the sparse path matches the dense one
    g1 = torch.autograd.grad((got * torch.arange(n * n).view(n, n).float()).sum(), x)[0]
    g2 = torch.autograd.grad((att * torch.arange(n * n).view(n, n).float()).sum(), x)[0]
    assert torch.allclose(g1, g2, atol=1e-4)
    # a one-layer GNNGuard is exactly att @ (x W) + b
    torch.manual_seed(0)
    model = GNNGuard(5, 3, GNNGuardConfig(hidden_sizes=(), threshold=thr)).eval()
    conv = model.layers[0]
    ref = att @ (x @ conv.lin.weight.T) + conv.bias
    assert torch.allclose(model(x, t.edge_index), ref, atol=1e-5)


def _dense_guard(h: torch.Tensor, edges: torch.Tensor, thr: float) -> tuple[torch.Tensor, torch.Tensor]:
    """GNNGuard's weights written out densely: cosine on ``edges`` (a 0/1 N x N mask, rows =
    receivers), similarities below ``thr`` dropped, rows normalised, the self-weight
    ``1 / (1 + kept)`` on the diagonal; and the mask of kept edges."""
    hn = h / h.norm(dim=1, keepdim=True)
    sim = (hn @ hn.T) * edges
    kept = (sim >= thr) & (sim > 0) & (edges > 0)
    sim = torch.where(kept, sim, torch.zeros_like(sim))
    att = sim / sim.sum(1, keepdim=True).clamp_min(1e-12)
    return att + torch.diag(1.0 / (1.0 + kept.float().sum(1))), kept.float()


def test_gnnguard_pruning_is_cumulative_over_layers_as_in_the_reference_codes():
    """A two-layer GNNGuard against a dense reading of the authors' forward: the second layer
    judges only the edges the first kept, so an edge pruned at layer 1 stays out at layer 2
    even where the hidden representations of its ends have become similar."""
    g = random_graph(12, 0.45, seed=5)
    t = graph_tensors(g)
    n, thr = g.num_nodes, 0.3
    torch.manual_seed(0)
    model = GNNGuard(5, 3, GNNGuardConfig(hidden_sizes=(4,), threshold=thr, dropout=0.0)).eval()
    c1, c2 = model.layers
    a = dense_adj(t.edge_index, n)
    att1, kept1 = _dense_guard(t.x, a, thr)
    h = torch.relu(att1 @ (t.x @ c1.lin.weight.T) + c1.bias)
    att2, _ = _dense_guard(h, kept1, thr)
    with torch.no_grad():
        got = model(t.x, t.edge_index)
        assert torch.allclose(got, att2 @ (h @ c2.lin.weight.T) + c2.bias, atol=1e-5)
        # the case that tells cumulative pruning apart: edges dropped at layer 1 that layer 2's
        # similarities alone would keep
        att_fresh, kept_fresh = _dense_guard(h, a, thr)
        revived = (kept_fresh > kept1).sum()
        assert revived > 0
        assert not torch.allclose(got, att_fresh @ (h @ c2.lin.weight.T) + c2.bias, atol=1e-3)
        # weighted_forward with every weight 1 is the same model
        ones = torch.ones(t.edge_index.shape[1])
        assert torch.allclose(model.weighted_forward(t.x, t.edge_index, ones), got, atol=1e-6)


def test_gnnguard_backprop_reaches_injected_features(tiny):
    torch.manual_seed(0)
    model = build_defense("gnnguard", tiny, SMALL["gnnguard"]).eval()
    t = graph_tensors(tiny)
    # copies of their neighbours' features, so that the guard keeps their edges
    inj = t.x[[0, 3, 0]].clone().requires_grad_(True)
    edges = torch.tensor([[tiny.num_nodes] * 3 + [tiny.num_nodes + 1], [0, 1, 2, 3]])
    x, ei = apply_injection(t.x, t.edge_index, inj, edges)
    model(x, ei)[:4].sum().backward()
    assert inj.grad is not None and inj.grad[:2].abs().sum() > 0


def test_gcnsvd_sparse_agrees_with_dense():
    g = random_graph(14, 0.35, seed=1)
    t = graph_tensors(g)
    n, k = g.num_nodes, 4
    a = dense_adj(t.edge_index, n)
    u, s, vh = torch.linalg.svd(a)
    assert s[k - 1] - s[k] > 1e-3  # a well defined rank-k truncation
    recon = (u[:, :k] * s[:k]) @ vh[:k]
    ei, w = svd_edge_weights(t.edge_index, n, k, niter=6)
    got = torch.zeros(n, n).index_put((ei[0], ei[1]), w)
    ref = torch.where((a > 0) & (recon > 0), recon, torch.zeros_like(recon))
    assert torch.allclose(got, ref, atol=1e-4)
    # the GCN runs on that weighted graph: A' + I, symmetric normalisation
    torch.manual_seed(0)
    model = SparseGCNSVD(5, 2, SparseGCNSVDConfig(hidden_sizes=(), k=k, niter=6)).eval()
    conv = model.layers[0]
    a_hat = ref.T + torch.eye(n)  # messages flow source -> target
    dinv = a_hat.sum(1).rsqrt()
    ref_out = (dinv[:, None] * a_hat * dinv[None, :]) @ (t.x @ conv.lin.weight.T) + conv.bias
    assert torch.allclose(model(t.x, t.edge_index), ref_out, atol=1e-4)


def numpy_gcnsvd_layer(ei: torch.Tensor, n: int, k: int, h: np.ndarray, weight: np.ndarray,
                       bias: np.ndarray) -> np.ndarray:
    """One GCN-SVD layer as DeepRobust computes it, in numpy: the rank-k truncation of the
    adjacency's full SVD, ``D^-1/2 (R + I) D^-1/2`` with ``D`` its row sums, times ``h W^T``,
    plus the bias."""
    a = np.zeros((n, n))
    a[ei[1].numpy(), ei[0].numpy()] = 1.0
    u, s, vh = np.linalg.svd(a)
    assert s[k - 1] - s[k] > 1e-3, "the test graph must have a well defined rank-k truncation"
    m = (u[:, :k] * s[:k]) @ vh[:k] + np.eye(n)
    d = m.sum(1)
    assert (d > 0).all()
    p = m / np.sqrt(np.outer(d, d))
    return p @ (h @ weight.T) + bias


def test_gcnsvd_is_a_gcn_on_the_dense_rank_k_reconstruction():
    """``gcnsvd`` propagates over every pair of the rank-k reconstruction (not only the
    graph's edges), on each graph it is given: its training graph and a larger one."""
    g = random_graph(14, 0.35, seed=1)
    t = graph_tensors(g)
    n, k = g.num_nodes, 4
    torch.manual_seed(0)
    model = GCNSVD(5, 2, GCNSVDConfig(hidden_sizes=(), k=k)).eval()
    conv = model.layers[0]
    w, b = conv.lin.weight.detach().double().numpy(), conv.bias.detach().double().numpy()
    want = numpy_gcnsvd_layer(t.edge_index, n, k, t.x.double().numpy(), w, b)
    with torch.no_grad():
        np.testing.assert_allclose(model(t.x, t.edge_index).double().numpy(), want, rtol=1e-4, atol=1e-5)
        sparse = SparseGCNSVD(5, 2, SparseGCNSVDConfig(hidden_sizes=(), k=k, niter=6)).eval()
        sparse.load_state_dict(model.state_dict())
        assert not np.allclose(sparse(t.x, t.edge_index).double().numpy(), want, atol=1e-3)
        ones = torch.ones(t.edge_index.shape[1])
        np.testing.assert_allclose(model.weighted_forward(t.x, t.edge_index, ones).double().numpy(), want,
                                   rtol=1e-4, atol=1e-5)
        # evaluated on another graph (two injected nodes): that graph's own reconstruction
        inj = torch.tensor([[n, n, n + 1, n + 1], [0, 3, 5, n]])
        ei = torch.cat([t.edge_index, inj, inj.flip(0)], dim=1)
        x = torch.cat([t.x, torch.ones(2, 5)])
        want = numpy_gcnsvd_layer(ei, n + 2, k, x.double().numpy(), w, b)
        np.testing.assert_allclose(model(x, ei).double().numpy(), want, rtol=1e-4, atol=1e-5)


def test_gcnsvd_refuses_a_graph_whose_dense_reconstruction_does_not_fit(tiny, monkeypatch):
    n = tiny.num_nodes  # 300: 3 x 300^2 float32 = 1.08 MB
    with pytest.raises(ConfigError, match="gcnsvd_sparse is the scalable variant") as err:
        build_defense("gcnsvd", tiny, {"k": 20, "max_dense_gb": 1e-4})
    assert "\n" not in str(err.value)
    monkeypatch.setattr(svd_module, "machine_memory", lambda: 2 * 10**6)  # default: half of it
    with pytest.raises(ConfigError, match="half of this machine's memory"):
        build_defense("gcnsvd", tiny, {"k": 20})
    build_defense("gcnsvd_sparse", tiny, {"k": 20})  # the scalable variant has no such limit
    # a model that fits its graph refuses a larger one given to forward, before allocating it
    model = build_defense("gcnsvd", tiny, {"k": 20, "max_dense_gb": 1.5e6 / 2**30}).eval()
    t = graph_tensors(tiny)
    model(t.x, t.edge_index)
    x, ei = apply_injection(t.x, t.edge_index, torch.zeros(100, tiny.num_features),
                            torch.tensor([[n + i for i in range(100)], list(range(100))]))
    with pytest.raises(ConfigError, match=f"{n + 100:,} nodes"):
        model(x, ei)


# --- label propagation -------------------------------------------------------------


def clique_graph(classes: int = 3, size: int = 6) -> Graph:
    src, dst = [], []
    for c in range(classes):
        nodes = range(c * size, (c + 1) * size)
        src += [i for i in nodes for j in nodes if i < j]
        dst += [j for i in nodes for j in nodes if i < j]
    n = classes * size
    ei, _ = canonical_edges(np.array(src), np.array(dst), n)
    y = np.repeat(np.arange(classes), size).astype(np.int64)
    x = np.random.default_rng(0).standard_normal((n, 4)).astype(np.float32)  # uninformative
    train = np.array([c * size + i for c in range(classes) for i in (0, 1)])
    rest = np.setdiff1d(np.arange(n), train)
    split = {"train": train, "val": rest[::2], "test_full": rest}
    return Graph(features=x, edge_index=ei, labels=y, split=split, num_classes=classes)


def test_lp_recovers_clique_labels():
    g = clique_graph()
    model = build_defense("lp", g, {"alpha": 0.9, "iterations": 30})
    t = graph_tensors(g)
    out = model(t.x, t.edge_index)
    assert torch.equal(out.argmax(1), t.y)
    assert torch.allclose(out.exp().sum(1), torch.ones(g.num_nodes), atol=1e-5)


def test_lp_uses_training_labels_only():
    g = clique_graph()
    scrambled = g.labels.copy()
    others = np.setdiff1d(np.arange(g.num_nodes), g.split["train"])
    scrambled[others] = (scrambled[others] + 1) % 3
    g2 = Graph(features=g.features, edge_index=g.edge_index, labels=scrambled, split=g.split, num_classes=3)
    t = graph_tensors(g)
    a = build_defense("lp", g, {})(t.x, t.edge_index)
    b = build_defense("lp", g2, {})(t.x, t.edge_index)
    assert torch.equal(a, b)


def test_lp_on_model_predictions():
    g = clique_graph()
    t = graph_tensors(g)
    torch.manual_seed(0)
    model = build_defense("mlp_lp", g, {"hidden_sizes": [8], "lp": {"alpha": 0.95, "iterations": 40}}).eval()
    # an untrained MLP's soft predictions are near uniform: the clamped labels dominate
    assert torch.equal(model(t.x, t.edge_index).argmax(1), t.y)
    # the spreading itself: with alpha = 0 the output is Y (known rows one-hot)
    y0 = torch.softmax(torch.randn(g.num_nodes, 3), 1)
    assert torch.allclose(label_spreading(y0, t.edge_index, 0.0, 5), y0)


# --- R-GCN, round trips --------------------------------------------------------------


def test_rgcn_evaluation_is_deterministic(tiny):
    torch.manual_seed(0)
    model = build_defense("rgcn", tiny, SMALL["rgcn"])
    t = graph_tensors(tiny)
    model.eval()
    with torch.no_grad():
        a, b = model(t.x, t.edge_index), model(t.x, t.edge_index)
    assert torch.equal(a, b)
    model.train()
    c = model(t.x, t.edge_index)
    assert not torch.equal(a, c)  # training samples


def test_rgcn_kl_regulariser(tiny):
    torch.manual_seed(0)
    model = build_defense("rgcn", tiny, {**SMALL["rgcn"], "kl_weight": 5e-4}).train()
    t = graph_tensors(tiny)
    model(t.x, t.edge_index)
    reg = model.regularization()
    assert reg is not None and reg.requires_grad and torch.isfinite(reg)


KINDS = ["gcn", "gcn_ln", "gcn_at", "sage_ln", "rgcn", "rgcn_at", "gnnguard", "gatguard", "gcnsvd", "gcnsvd_sparse", "lp",
         "gcn_lp", "rgcn_ln_at_lp"]


@pytest.mark.parametrize("name", KINDS)
def test_state_dict_round_trip(name, tiny):
    base = check_name(name).base
    params = dict(SMALL.get(base, {}))
    torch.manual_seed(0)
    model = build_defense(name, tiny, params).eval()
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    torch.manual_seed(1)  # a different initialisation, overwritten by the load
    other = build_defense(name, tiny, params)
    other.load_state_dict(torch.load(buf, weights_only=True))
    other.eval()
    t = graph_tensors(tiny)
    inj = torch.zeros(2, tiny.num_features)
    x, ei = apply_injection(t.x, t.edge_index, inj, torch.tensor([[tiny.num_nodes] * 2, [0, 1]]))
    with torch.no_grad():
        assert torch.equal(model(x, ei), other(x, ei))
        assert model(x, ei).shape == (tiny.num_nodes + 2, tiny.num_classes)


# --- adversarial training ----------------------------------------------------------


def test_at_attacks_training_nodes_only(tiny, monkeypatch):
    seen = []
    real = at_module.fgsm_inject

    def spy(model, x, edge_index, targets, labels, **kw):
        assert not model.training  # the attack runs in eval mode
        feats, edges = real(model, x, edge_index, targets, labels, **kw)
        seen.append((x.shape[0], targets.clone(), edges.clone(), feats.clone(), kw))
        return feats, edges

    monkeypatch.setattr(at_module, "fgsm_inject", spy)
    result = train_defense("gcn_at", tiny, SMALL["gcn"], TrainConfig(epochs=6, patience=10), at_config=AT_SMALL)
    assert len(seen) == 6 - AT_SMALL["warmup_epochs"]
    train = np.sort(tiny.split["train"])
    view = induced(tiny, train, train, "cpu")
    forbidden = set(np.concatenate([tiny.split[k] for k in tiny.split if k != "train"]).tolist())
    for n_view, targets, edges, feats, kw in seen:
        assert n_view == train.size  # the attack sees the training subgraph only
        assert torch.equal(targets, view.mask_idx)
        global_targets = train[edges[1].numpy()]
        assert not forbidden & set(global_targets.tolist())
        assert set(edges[1].tolist()) <= set(targets.tolist())
        assert edges[0].min() >= n_view and edges.shape[1] == kw["n_inject"] * kw["edges_per_node"]
        lo, hi = float(view.x.min()), float(view.x.max())
        assert feats.min() >= lo - 1e-6 and feats.max() <= hi + 1e-6
    assert not result.model.training


def test_at_hook_restores_mode_and_appends_nodes(tiny):
    torch.manual_seed(0)
    model = build_defense("gcn", tiny, SMALL["gcn"])
    train = tiny.split["train"]
    view = induced(tiny, train, train, "cpu")
    hook = InjectionAT(ATConfig(**{**AT_SMALL, "warmup_epochs": 0}))
    gen = torch.Generator().manual_seed(0)
    for mode in (True, False):
        model.train(mode)
        x, ei = hook(model, view, gen)
        assert model.training is mode
        assert x.shape[0] == view.x.shape[0] + AT_SMALL["n_inject"]
        assert torch.equal(x[: view.x.shape[0]], view.x)
        assert not any(p.grad is not None for p in model.parameters())


# --- training: every defense beats chance -------------------------------------------


TRAINED = ["gcn_ln", "gcn_at", "rgcn", "rgcn_at", "gnnguard", "gatguard", "gcnsvd", "gcnsvd_sparse", "lp", "gcn_lp"]


@pytest.mark.parametrize("name", TRAINED)
def test_defense_trains_on_synthetic(name, tiny):
    base = check_name(name).base
    lr = 0.01
    result = train_defense(
        name, tiny, SMALL.get(base, {}), TrainConfig(epochs=40, patience=40, lr=lr), at_config=AT_SMALL
    )
    acc = evaluate(result.model, tiny, difficulties=["full"])["full"]
    assert acc > 0.7, acc  # chance is 1/3


CORA_AT = {"n_inject": 20, "edges_per_node": 20, "steps": 5, "step_size": 0.01, "warmup_epochs": 5}


@pytest.mark.parametrize("name", ["gcn_at", "rgcn", "gnnguard", "gatguard", "gcnsvd", "lp", "gcn_lp"])
def test_defense_trains_on_cora(name, cora):
    params = {
        "gcn_at": {"hidden_sizes": [32]},
        "gcn_lp": {"hidden_sizes": [32]},
        "rgcn": {"hidden_sizes": [32]},
        "gnnguard": {"hidden_sizes": [32], "dropout": 0.1},
        "gatguard": {"hidden_sizes": [16], "heads": 2, "dropout": 0.1},
        "gcnsvd": {"hidden_sizes": [32], "k": 50},
    }.get(name, {})
    result = train_defense(name, cora, params, TrainConfig(epochs=40, patience=40), at_config=CORA_AT)
    acc = evaluate(result.model, cora, difficulties=["full"])["full"]
    assert acc > 0.55, acc  # 7 classes: chance ~0.14, the largest class ~0.3


def test_rgcn_matches_dense_gaussian_convolution():
    """R-GCN at evaluation against the dense formulas of its docstring on a tiny graph."""
    g = tiny_csbm(n=60, classes=3, features=6, seed=2)
    t = graph_tensors(g)
    torch.manual_seed(0)
    model = build_defense("rgcn", g, {"hidden_sizes": [5]}).eval()
    n = g.num_nodes
    a = torch.zeros(n, n)
    a[t.edge_index[0], t.edge_index[1]] = 1.0
    a = a + torch.eye(n)
    d = a.sum(1)
    a_mean = d.rsqrt()[:, None] * a * d.rsqrt()[None, :]
    a_var = (1 / d)[:, None] * a * (1 / d)[None, :]
    mean, var = t.x, t.x
    for i, layer in enumerate(model.layers):
        m = layer.lin_mean(mean)
        v = torch.relu(layer.lin_var(var))
        if i < len(model.layers) - 1:
            m = torch.nn.functional.elu(m)
        att = torch.exp(-layer.gamma * v)
        mean, var = a_mean @ (m * att), a_var @ (v * att * att)
    torch.testing.assert_close(model(t.x, t.edge_index), mean, rtol=1e-4, atol=1e-5)
