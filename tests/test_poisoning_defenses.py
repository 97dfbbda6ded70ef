"""GCN-Jaccard, Soft-Median GDC and Pro-GNN: each against a plain reference on a tiny graph,
Pro-GNN's operators against their definitions, state_dict round trips, size refusals, and
training through the trainer (transductive and inductive) with the name suffixes."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph, canonical_edges
from grb_dist.datasets.split import grb_split
from grb_dist.defenses import build_defense, train_defense
from grb_dist.evaluation.evaluate import evaluate
from grb_dist.models import build_model, check_name
from grb_dist.models.robust import prognn as prognn_module
from grb_dist.models.robust.prognn import Smoothness, Structure, dense_adjacency, project, prox_l1, prox_nuclear
from grb_dist.models.robust.softmedian import SoftMedianConfig, TopK, soft_median, symmetric_normalized, topk_ppr
from grb_dist.models.tensors import graph_tensors
from grb_dist.models.train import TrainConfig

from helpers import tiny_csbm

AT_SMALL = {"n_inject": 5, "edges_per_node": 3, "steps": 2, "step_size": 0.01, "warmup_epochs": 1}
SMALL = {"jaccard": {"hidden_sizes": [16]}, "softmedian": {"hidden_sizes": [16], "k": 16},
         "prognn": {"hidden_sizes": [16]}}


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny():
    return tiny_csbm(n=200, classes=3, features=16, K=3.0)


def random_graph(n: int, p: float, seed: int) -> torch.Tensor:
    """Both directions of a random undirected graph's edges (no self-loops)."""
    rng = np.random.default_rng(seed)
    pairs = [(i, j) for i, j in itertools.combinations(range(n), 2) if rng.random() < p]
    src, dst = np.array(pairs).T
    ei, _ = canonical_edges(src, dst, n)
    return torch.as_tensor(ei, dtype=torch.long)


def dense_gcn_norm(adj: torch.Tensor) -> torch.Tensor:
    a = adj + torch.eye(adj.shape[0])
    d = a.sum(1).rsqrt()
    return d[:, None] * a * d[None, :]


# --------------------------------------------------------------------------- GCN-Jaccard


def reference_kept(x: np.ndarray, edge_index: torch.Tensor, threshold: float, measure: str) -> set[tuple[int, int]]:
    """The edges GCN-Jaccard keeps, one at a time from the definitions: the Jaccard
    similarity of the sets of non-zero features, or the cosine similarity."""
    kept = set()
    for i, j in edge_index.t().tolist():
        a, b = x[i], x[j]
        if measure == "jaccard":
            sa, sb = set(np.flatnonzero(a).tolist()), set(np.flatnonzero(b).tolist())
            sim = len(sa & sb) / len(sa | sb) if sa | sb else 0.0
        else:
            na, nb = math.sqrt(sum(u * u for u in a)), math.sqrt(sum(v * v for v in b))
            sim = sum(u * v for u, v in zip(a, b)) / (na * nb) if na and nb else 0.0
        if sim >= threshold:
            kept.add((i, j))
    return kept


def sparse_real_features(n: int, d: int, seed: int) -> np.ndarray:
    """Non-binary features with zeros (TF-IDF-like: positive values on a random support)."""
    rng = np.random.default_rng(seed)
    return (rng.uniform(0.1, 3.0, (n, d)) * (rng.random((n, d)) < 0.4)).astype(np.float32)


@pytest.mark.parametrize("features,params,measure", [
    ("binary", {}, "jaccard"),
    ("real", {}, "jaccard"),  # the default whatever the values: the non-zero patterns
    ("real", {"similarity": "cosine"}, "cosine"),  # the variant, asked for by name
], ids=["binary", "real-jaccard", "real-cosine"])
def test_jaccard_equals_a_plain_reference(features, params, measure):
    n, d, threshold = 14, 8, 0.3
    ei = random_graph(n, 0.35, seed=2)
    x = sparse_real_features(n, d, seed=1)
    if features == "binary":
        x = (x != 0).astype(np.float32)
    x[3] = 0  # an empty feature set: similarity 0 with everything
    kept = reference_kept(x, ei, threshold, measure)
    assert 0 < len(kept) < ei.shape[1], "the tiny graph must have edges on both sides of the threshold"
    if features == "real":
        other = "cosine" if measure == "jaccard" else "jaccard"
        assert kept != reference_kept(x, ei, threshold, other), "the two measures must disagree here"
    torch.manual_seed(0)
    model = build_model("jaccard", d, 3, {"hidden_sizes": [8], "threshold": threshold, **params}).eval()
    xt = torch.as_tensor(x)
    assert {tuple(e) for e in model.pruned_edges(xt, ei).t().tolist()} == kept
    adj = torch.zeros(n, n)
    for i, j in kept:
        adj[j, i] = 1.0  # row = target
    a = dense_gcn_norm(adj)
    l0, l1 = model.layers
    h = torch.relu(a @ (xt @ l0.lin.weight.T) + l0.bias)
    expected = a @ (h @ l1.lin.weight.T) + l1.bias
    torch.testing.assert_close(model(xt, ei), expected, rtol=1e-4, atol=1e-5)
    ones = torch.ones(ei.shape[1])
    torch.testing.assert_close(model.weighted_forward(xt, ei, ones), expected, rtol=1e-4, atol=1e-5)


def test_jaccard_drops_every_edge_of_identity_features():
    """Identity features (polblogs): distinct singleton sets, every edge's Jaccard is 0."""
    n = 8
    ei = random_graph(n, 0.5, seed=4)
    model = build_model("jaccard", n, 2, {"hidden_sizes": [4]}).eval()
    assert model.pruned_edges(torch.eye(n), ei).shape[1] == 0


def test_jaccard_ignores_a_dissimilar_edge_and_keeps_its_measure():
    n, d = 10, 6
    x = torch.zeros(n, d)
    x[:5, :3] = 1
    x[5:, 3:] = 1  # two groups with disjoint features
    ei = random_graph(n, 0.5, seed=3)
    same_group = (ei[0] < 5) == (ei[1] < 5)
    ei = ei[:, same_group]
    model = build_model("jaccard", d, 2, {"hidden_sizes": [4]}).eval()
    clean = model(x, ei)
    attacked = torch.cat([ei, torch.tensor([[0, 9], [9, 0]])], dim=1)  # an edge across the groups
    torch.testing.assert_close(model(x, attacked), clean)
    cosine = build_model("jaccard", d, 2, {"hidden_sizes": [4], "similarity": "cosine"})
    assert cosine.measure_name() == "cosine"
    cosine.load_state_dict(model.state_dict())
    assert cosine.measure_name() == "jaccard"  # the measure the loaded weights were trained with
    with pytest.raises(ConfigError, match="similarity must be one of jaccard, cosine"):
        build_model("jaccard", d, 2, {"similarity": "auto"})


# --------------------------------------------------------------------------- Soft-Median GDC


def reference_topk_ppr(ei: torch.Tensor, n: int, alpha: float, k: int) -> tuple[list[list[int]], list[list[float]]]:
    adj = torch.zeros(n, n, dtype=torch.float64)
    adj[ei[0], ei[1]] = 1.0
    t = dense_gcn_norm(adj)
    ppr = alpha * torch.linalg.inv(torch.eye(n, dtype=torch.float64) - (1 - alpha) * t)
    index, weight = [], []
    for i in range(n):
        order = sorted(range(n), key=lambda j: -float(ppr[i, j]))
        top = order[:k]
        if k < n:  # the test graph must not have a tie at the cut
            assert float(ppr[i, order[k - 1]]) - float(ppr[i, order[k]]) > 1e-6
        total = sum(float(ppr[i, j]) for j in top)
        index.append(top)
        weight.append([float(ppr[i, j]) / total for j in top])
    return index, weight


def numpy_gdc(adj: np.ndarray, alpha: float, k: int) -> np.ndarray:
    """Geisler et al.'s GDC matrix from its definition, dense, in numpy: the PPR of the
    GCN-normalised graph, each row's ``k`` largest entries scaled to sum 1, a self-loop of
    weight 1 where a row lost its own entry, then ``D^-1/2 P D^-1/2`` with ``D`` the
    column sums."""
    n = adj.shape[0]
    a = adj + np.eye(n)
    d = a.sum(1)
    t = a / np.sqrt(np.outer(d, d))
    ppr = alpha * np.linalg.inv(np.eye(n) - (1 - alpha) * t)
    p = np.zeros((n, n))
    for i in range(n):
        top = np.argsort(-ppr[i])[:k]
        p[i, top] = ppr[i, top] / ppr[i, top].sum()
    return sym_normalized_dense(p)


def sym_normalized_dense(p: np.ndarray) -> np.ndarray:
    p = p.copy()
    for i in range(p.shape[0]):
        if p[i, i] == 0:
            p[i, i] = 1.0
    c = p.sum(0)
    return p / np.sqrt(np.outer(c, c))


def dense_topk(ppr: TopK, n: int) -> np.ndarray:
    out = np.zeros((n, n))
    np.add.at(out, (np.repeat(np.arange(n), ppr.index.shape[1]), ppr.index.reshape(-1).numpy()),
              ppr.weight.reshape(-1).double().numpy())
    return out


def rows_of(dense: np.ndarray) -> tuple[list[list[int]], list[list[float]]]:
    """The non-zero entries of every row: the ``(index, weight)`` lists of a node's sources."""
    index = [np.flatnonzero(row).tolist() for row in dense]
    return index, [dense[i, cols].tolist() for i, cols in enumerate(index)]


def reference_soft_median(h: np.ndarray, index, weight, temperature: float) -> np.ndarray:
    """The soft median of every node from its definition, one node at a time."""
    n, d = h.shape
    out = np.zeros((n, d))
    for i in range(n):
        slots = [(j, w) for j, w in zip(index[i], weight[i]) if w > 0]
        total = sum(w for _, w in slots)
        median = np.zeros(d)
        for f in range(d):
            acc = 0.0
            for value, w in sorted(((h[j, f], w) for j, w in slots), key=lambda t: t[0]):
                acc += w
                if acc >= total / 2:
                    median[f] = value
                    break
        dist = [math.sqrt(sum((h[j, f] - median[f]) ** 2 for f in range(d))) / math.sqrt(d) for j, _ in slots]
        soft = [math.exp(-c / temperature) for c in dist]
        soft = [s / sum(soft) for s in soft]
        mixed = [s * w for s, (_, w) in zip(soft, slots)]
        for (j, _), m in zip(slots, mixed):
            out[i] += m / sum(mixed) * total * h[j]
    return out


def test_topk_ppr_equals_the_dense_diffusion():
    n, k = 16, 6
    ei = random_graph(n, 0.3, seed=5)
    config = SoftMedianConfig(k=k, ppr_tol=1e-10)
    got = topk_ppr(ei, n, config)
    index, weight = reference_topk_ppr(ei, n, config.alpha, k)
    for i in range(n):
        order = torch.argsort(got.weight[i], descending=True)
        assert got.index[i, order].tolist() == index[i]
        np.testing.assert_allclose(got.weight[i, order].numpy(), weight[i], rtol=1e-4, atol=1e-6)


def test_gdc_matrix_is_the_symmetrically_normalised_topk_ppr():
    """The propagation matrix is ``D^-1/2 P D^-1/2`` of the row-normalised top-k PPR ``P``
    (Geisler et al.'s GCN normalising the GDC matrix once more), not ``P`` itself."""
    n, k = 12, 4
    ei = random_graph(n, 0.3, seed=11)
    adj = np.zeros((n, n))
    adj[ei[0].numpy(), ei[1].numpy()] = 1.0
    want = numpy_gdc(adj, 0.15, k)
    model = build_model("softmedian", 3, 2, {"hidden_sizes": [4], "k": k, "ppr_tol": 1e-10})
    got = dense_topk(model.propagation_graph(ei, n), n)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    totals = want.sum(1)
    assert np.abs(totals - 1).max() > 0.05, "the test graph must tell the two normalisations apart"


def test_gdc_normalisation_adds_a_missing_self_loop():
    """A node whose own entry is not among its kept sources gets a self-loop of weight 1
    before the column sums (the reference adds the missing self-loops)."""
    index = torch.tensor([[1, 2], [1, 0], [2, 0]])
    weight = torch.tensor([[0.7, 0.3], [0.6, 0.4], [1.0, 0.0]])  # node 0 lacks itself; node 2: one empty slot
    p = dense_topk(TopK(index, weight), 3)
    got = symmetric_normalized(TopK(index, weight))
    assert got.index.shape == (3, 3)
    np.testing.assert_allclose(dense_topk(got, 3), sym_normalized_dense(p), rtol=1e-6, atol=1e-7)


def test_soft_median_equals_a_plain_reference():
    n, k, d = 9, 5, 4
    rng = np.random.default_rng(0)
    h = rng.normal(size=(n, d)).astype(np.float32)
    index = np.array([rng.choice(n, size=k, replace=False) for _ in range(n)])
    weight = rng.random((n, k)).astype(np.float32)
    weight[2, 3:] = 0  # empty slots
    for temperature in (0.2, 1.0):
        got = soft_median(torch.as_tensor(h), torch.as_tensor(index), torch.as_tensor(weight), temperature)
        want = reference_soft_median(h.astype(np.float64), index.tolist(), weight.astype(np.float64).tolist(),
                                     temperature)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)
    # a huge temperature is the weighted mean (the GCN aggregation on the same matrix)
    mean = soft_median(torch.as_tensor(h), torch.as_tensor(index), torch.as_tensor(weight), 1e9)
    want = np.einsum("nk,nkd->nd", weight, h[index])
    np.testing.assert_allclose(mean.numpy(), want, rtol=1e-4, atol=1e-5)


def test_soft_median_model_equals_the_reference_composition():
    n, d, k, temperature = 14, 5, 6, 0.5
    ei = random_graph(n, 0.35, seed=7)
    x = torch.as_tensor(np.random.default_rng(3).normal(size=(n, d)).astype(np.float32))
    torch.manual_seed(0)
    params = {"hidden_sizes": [6], "k": k, "temperature": temperature, "ppr_tol": 1e-10}
    model = build_model("softmedian", d, 3, params).eval()
    adj = np.zeros((n, n))
    adj[ei[0].numpy(), ei[1].numpy()] = 1.0
    index, weight = rows_of(numpy_gdc(adj, 0.15, k))
    l0, l1 = model.layers
    with torch.no_grad():
        h = l0.lin(x).double().numpy()
        h = np.maximum(reference_soft_median(h, index, weight, temperature) + l0.bias.double().numpy(), 0)
        h = l1.lin(torch.as_tensor(h, dtype=torch.float32)).double().numpy()
        want = reference_soft_median(h, index, weight, temperature) + l1.bias.double().numpy()
    np.testing.assert_allclose(model(x, ei).detach().numpy(), want, rtol=1e-3, atol=1e-4)


def test_soft_median_refuses_a_graph_too_large_for_its_ppr(tiny):
    with pytest.raises(ConfigError, match="max_ppr_work") as err:
        build_defense("softmedian", tiny, {"max_ppr_work": 1e6})
    assert "\n" not in str(err.value)


# --------------------------------------------------------------------------- Pro-GNN operators


def test_prox_l1_is_soft_thresholding():
    rng = np.random.default_rng(0)
    s = rng.normal(size=(6, 6))
    t = 0.4
    want = np.array([[v - t if v > t else v + t if v < -t else 0.0 for v in row] for row in s])
    got = prox_l1(torch.as_tensor(s), t).numpy()
    np.testing.assert_allclose(got, want)
    # the minimiser of 1/2 |z - s|^2 + t |z|_1
    objective = lambda z: 0.5 * ((z - s) ** 2).sum() + t * np.abs(z).sum()  # noqa: E731
    for _ in range(20):
        assert objective(got) <= objective(got + 0.05 * rng.normal(size=s.shape)) + 1e-12


@pytest.mark.parametrize("symmetric", [False, True])
def test_prox_nuclear_soft_thresholds_the_singular_values(symmetric):
    rng = np.random.default_rng(1)
    s = rng.normal(size=(7, 7))
    if symmetric:
        s = (s + s.T) / 2
    t = 0.8
    u, sigma, vt = np.linalg.svd(s)
    want = u @ np.diag(np.maximum(sigma - t, 0)) @ vt
    got = prox_nuclear(torch.as_tensor(s), t, symmetric=symmetric).numpy()
    np.testing.assert_allclose(got, want, atol=1e-10)
    assert np.linalg.matrix_rank(got, tol=1e-8) == int((sigma > t).sum()) < 7
    objective = lambda z: 0.5 * ((z - s) ** 2).sum() + t * np.linalg.norm(z, ord="nuc")  # noqa: E731
    for _ in range(20):
        assert objective(got) <= objective(got + 0.05 * rng.normal(size=s.shape)) + 1e-10


def test_projection_is_onto_symmetric_matrices_in_the_unit_box():
    rng = np.random.default_rng(2)
    s = rng.normal(0.5, 0.8, size=(6, 6))
    got = project(torch.as_tensor(s)).numpy()
    want = np.array([[min(1.0, max(0.0, (s[i, j] + s[j, i]) / 2)) for j in range(6)] for i in range(6)])
    np.testing.assert_allclose(got, want)
    assert np.array_equal(got, got.T) and got.min() >= 0 and got.max() <= 1
    for _ in range(20):  # no symmetric matrix in the box is closer
        y = rng.random((6, 6))
        y = (y + y.T) / 2
        assert ((got - s) ** 2).sum() <= ((y - s) ** 2).sum()


def test_feature_smoothness_equals_the_trace_formula():
    rng = np.random.default_rng(3)
    x = torch.as_tensor(rng.normal(size=(8, 5)))
    s = torch.as_tensor(rng.random((8, 8)))
    sym = (s + s.T) / 2
    d = sym.sum(1)
    r = torch.diag((d + 1e-3).rsqrt())
    lap = r @ (torch.diag(d) - sym) @ r
    torch.testing.assert_close(Smoothness(x)(s), torch.trace(x.T @ lap @ x))
    s.requires_grad_()
    (want,) = torch.autograd.grad(Smoothness(x)(s), [s])
    torch.testing.assert_close(Smoothness(x).gradient(s.detach()), want)


def test_structure_is_the_normalised_matrix():
    rng = np.random.default_rng(4)
    s = torch.as_tensor(rng.random((7, 7)))
    h = torch.as_tensor(rng.normal(size=(7, 3)))
    a = s + torch.eye(7)
    d = torch.diag(a.sum(1).rsqrt())
    torch.testing.assert_close(Structure.of(s).propagate(h), d @ a @ d @ h)


# --------------------------------------------------------------------------- Pro-GNN model


def test_prognn_state_dict_round_trip_gives_identical_logits(tiny):
    r = train_defense("prognn", tiny, SMALL["prognn"], TrainConfig(epochs=6, patience=50), transductive=True)
    model = r.model
    t = graph_tensors(tiny)
    n = tiny.num_nodes
    assert model.learned_adj.shape == (n, n) and model.is_learned_graph(t.edge_index, n)
    assert not torch.equal(model.learned_adj, dense_adjacency(t.edge_index, n, torch.float32))  # S was learned
    other = t.edge_index[:, (t.edge_index != 0).all(0)]  # another graph (node 0 isolated): purification
    fresh = build_defense("prognn", tiny, SMALL["prognn"])
    assert fresh.learned_adj.numel() == 0
    fresh.load_state_dict(model.state_dict())
    fresh.eval()
    with torch.no_grad():
        assert torch.equal(fresh(t.x, t.edge_index), model(t.x, t.edge_index))
        assert torch.equal(fresh(t.x, other), model(t.x, other))
        assert not model.is_learned_graph(other, n)
        assert not torch.equal(model(t.x, other), model(t.x, t.edge_index))
    with torch.inference_mode():  # the purification still has its gradients
        assert torch.equal(fresh(t.x.clone(), other.clone()), model(t.x, other))


def test_prognn_trains_to_a_reasonable_accuracy(tiny):
    for transductive in (True, False):
        r = train_defense("prognn", tiny, SMALL["prognn"], TrainConfig(epochs=40), transductive=transductive)
        assert evaluate(r.model, tiny)["full"] > 0.8, transductive  # chance is 1/3


def test_prognn_refuses_a_large_graph_before_allocating(tiny, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("allocated a dense matrix before refusing")

    monkeypatch.setattr(prognn_module, "dense_adjacency", forbidden)
    n = 30_000
    src = np.arange(n - 1)
    ei, _ = canonical_edges(src, src + 1, n)
    big = Graph(features=np.zeros((n, 2), dtype=np.float32), edge_index=ei, labels=np.arange(n) % 2, name="path")
    big = big.with_split(grb_split(big.degrees(), seed=0))
    with pytest.raises(ConfigError, match="max_dense_gb") as err:
        train_defense("prognn", big, {}, TrainConfig(epochs=1), transductive=True)
    message = str(err.value)
    assert "\n" not in message and "30,000 x 30,000" in message and "GB" in message
    # a graph larger than the limit given to forward (an injected graph) is refused too
    model = build_model("prognn", tiny.num_features, tiny.num_classes, {"max_dense_gb": 1e-4})
    t = graph_tensors(tiny)
    with pytest.raises(ConfigError, match="max_dense_gb"):
        model(t.x, t.edge_index)


def test_prognn_refuses_adversarial_training(tiny):
    assert check_name("prognn_ln_lp").label_propagation
    with pytest.raises(ConfigError, match="adversarial training"):
        build_defense("prognn_at", tiny, {})


# --------------------------------------------------------------------------- the trainer


@pytest.mark.parametrize("name", ["jaccard", "softmedian", "prognn"])
@pytest.mark.parametrize("transductive", [True, False])
def test_trains_through_the_trainer(tiny, name, transductive):
    r = train_defense(name, tiny, SMALL[name], TrainConfig(epochs=25, seed=1), transductive=transductive)
    assert not r.model.training and 0 < r.epochs_run <= 25 and len(r.history) == r.epochs_run
    assert r.best_val_loss == pytest.approx(min(h["val_loss"] for h in r.history))
    assert evaluate(r.model, tiny)["full"] > 0.6, name


@pytest.mark.parametrize("name", ["jaccard_ln_lp", "softmedian_ln", "prognn_lp", "jaccard_at", "softmedian_at"])
def test_suffixes(tiny, name):
    base = name.split("_")[0]
    r = train_defense(name, tiny, SMALL[base], TrainConfig(epochs=3), at_config=AT_SMALL)
    t = graph_tensors(tiny)
    with torch.no_grad():
        out = r.model(t.x, t.edge_index)
    assert out.shape == (tiny.num_nodes, tiny.num_classes) and bool(torch.isfinite(out).all())
