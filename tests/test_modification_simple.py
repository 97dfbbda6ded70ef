"""The non-gradient modification attacks (RND, DICE, FLIP, NEA, STACK): audit, budget,
determinism, no side effects on the clean graph, and their algorithms on hand-made graphs
against plain references."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch

from grb_dist.attacks.audit import audit_modification
from grb_dist.attacks.registry import MODIFICATION
from grb_dist.attacks.shared.flips import ModContext
from grb_dist.attacks.modification.dice import DICE, DICEConfig
from grb_dist.attacks.modification.flip import FLIP, FLIPConfig, sampled_betweenness
from grb_dist.attacks.modification.nea import NEA, NEAConfig
from grb_dist.attacks.modification.selection import select_ranked
from grb_dist.attacks.modification.spectral import SINGLE_PRECISION_TOL, adjacency, eigenpairs, sum_of_powers
from grb_dist.attacks.modification.stack import STACK, STACKConfig
from grb_dist.datasets import load_dataset
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph, Modification, canonical_edges
from grb_dist.models.tensors import apply_modification
from grb_dist.models.tensors import graph_tensors

from helpers import tiny_csbm

SIMPLE = ("rnd", "dice", "flip", "nea", "stack")
RANDOM = ("rnd", "dice")
VARIANTS = (("flip", {"variant": "betweenness", "betweenness_sources": 16}), ("flip", {"variant": "eigenvector"}),
            ("nea", {"candidates": "edges_and_pairs"}), ("stack", {"candidates": "edges_and_pairs"}))


class FixedLogits(torch.nn.Module):
    """A surrogate whose predictions are given: logits are one-hot rows of ``classes``."""

    def __init__(self, classes: np.ndarray, num_classes: int):
        super().__init__()
        self.logits = torch.nn.functional.one_hot(torch.as_tensor(classes), num_classes).float()
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.logits + 0 * self.dummy


class Linear(torch.nn.Module):
    """A feature-only surrogate (an untrained linear layer, fixed seed)."""

    def __init__(self, d: int, c: int):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(d, c)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


def graph_from_pairs(pairs: list[tuple[int, int]], n: int, classes: int = 2) -> Graph:
    src = np.array([p[0] for p in pairs])
    dst = np.array([p[1] for p in pairs])
    ei, _ = canonical_edges(src, dst, n)
    x = np.eye(n, 4, dtype=np.float32)
    y = np.arange(n) % classes
    return Graph(features=x, edge_index=ei, labels=y, name="hand")


def keys(pairs: np.ndarray, n: int) -> set[int]:
    return set((pairs[0] * n + pairs[1]).tolist())


def edge_set(edge_index: np.ndarray | torch.Tensor) -> set[tuple[int, int]]:
    ei = np.asarray(edge_index)
    return set(zip(ei[0].tolist(), ei[1].tolist()))


def sequential_select(pairs: np.ndarray, is_removal: np.ndarray, degrees: np.ndarray, budget: int) -> list[int]:
    """GRB's rule, one candidate at a time: skip a removal that would isolate an endpoint."""
    deg = degrees.copy()
    out = []
    for c in range(pairs.shape[1]):
        if len(out) == budget:
            break
        i, j = pairs[:, c]
        if is_removal[c]:
            if deg[i] <= 1 or deg[j] <= 1:
                continue
            deg[i] -= 1
            deg[j] -= 1
        out.append(c)
    return out


def run(name: str, graph: Graph, targets: np.ndarray, seed: int = 0, **options) -> tuple[Modification, int]:
    cls = MODIFICATION.get(name)
    attack = cls(cls.Config(seed=seed, **options))
    model = Linear(graph.num_features, graph.num_classes)
    mod = attack.attack(graph, model, targets)
    return mod, attack.budget(graph, targets.size).n_edge_mod


def expected_flips(name: str, graph: Graph, targets: np.ndarray, budget: int, **options) -> int:
    """``min(budget, what is available)``: removal-only attacks can remove at most the clean
    edges touching a target (the isolation rule leaves far more than a 5% budget on these
    graphs; its exact count is checked on hand-made graphs below); the others have far more
    pairs to draw from than the budget."""
    if name in RANDOM or options.get("candidates", "edges") == "edges_and_pairs":
        return budget
    is_t = np.zeros(graph.num_nodes, bool)
    is_t[targets] = True
    ei = graph.edge_index
    return min(budget, int(((ei[0] < ei[1]) & (is_t[ei[0]] | is_t[ei[1]])).sum()))


def check_attack(name: str, graph: Graph, targets: np.ndarray, **options) -> Modification:
    """Run one attack and check audit, budget, determinism, purity and invertibility."""
    x0, ei0, y0 = graph.features.copy(), graph.edge_index.copy(), graph.labels.copy()
    mod, budget = run(name, graph, targets, **options)
    audit_modification(graph, mod, n_edge_mod=budget, n_node_mod=0, feat_min=-1e9, feat_max=1e9, targets=targets)
    assert mod.n_edge_flips == expected_flips(name, graph, targets, budget, **options)
    again, _ = run(name, graph, targets, **options)
    assert np.array_equal(again.removed, mod.removed) and np.array_equal(again.added, mod.added)
    if name in RANDOM:
        other, _ = run(name, graph, targets, seed=1, **options)
        n = graph.num_nodes
        assert keys(other.removed, n) | keys(other.added, n) != keys(mod.removed, n) | keys(mod.added, n)
    assert np.array_equal(graph.features, x0) and np.array_equal(graph.edge_index, ei0)
    assert np.array_equal(graph.labels, y0)
    clean = graph_tensors(graph)
    perturbed = apply_modification(clean, mod)
    assert edge_set(perturbed.edge_index) != edge_set(clean.edge_index)
    back = apply_modification(perturbed, mod.inverse(graph))
    assert edge_set(back.edge_index) == edge_set(ei0)
    assert back.edge_index.shape == clean.edge_index.shape
    if not options.get("allow_isolate", False) and name in ("flip", "nea", "stack"):
        deg0 = graph.degrees()
        deg = np.bincount(perturbed.edge_index[0].numpy(), minlength=graph.num_nodes)
        assert not ((deg0 > 0) & (deg == 0)).any(), "a node was isolated"
    return mod


@pytest.fixture(scope="module")
def csbm() -> Graph:
    return tiny_csbm()


@pytest.fixture(scope="module")
def cora(cora_legacy) -> Graph:
    return load_dataset(str(cora_legacy))


@pytest.mark.parametrize("name", SIMPLE)
def test_attack_on_tiny_csbm(csbm: Graph, name: str) -> None:
    check_attack(name, csbm, csbm.targets("full"))


@pytest.mark.parametrize("name,options", VARIANTS)
def test_variants_on_tiny_csbm(csbm: Graph, name: str, options: dict) -> None:
    check_attack(name, csbm, csbm.targets("full"), **options)


@pytest.mark.parametrize("name", SIMPLE)
def test_attack_on_cora(cora: Graph, name: str) -> None:
    mod = check_attack(name, cora, cora.targets("full"))
    assert mod.n_edge_flips == round(0.05 * cora.num_edges)


def test_registry_flags() -> None:
    for name in SIMPLE:
        cls = MODIFICATION.get(name)
        assert cls.name == name
        assert cls.uses_surrogate == (name == "dice")
        assert not cls.edge_gradients and not cls.changes_features


# ------------------------------------------------------------------ FLIP

def star_graph() -> tuple[Graph, np.ndarray]:
    """Hub 0 linked to 1..6; 1-2, 2-3, 3-4 chained; 7-8 pendant pair; targets all."""
    pairs = [(0, i) for i in range(1, 7)] + [(1, 2), (2, 3), (3, 4), (7, 8), (6, 8)]
    g = graph_from_pairs(pairs, 9)
    return g, np.arange(9)


def test_flip_degree_removes_highest_degree_sum_first() -> None:
    g, targets = star_graph()
    deg = g.degrees()
    mod = FLIP(FLIPConfig(n_edge_mod=3, allow_isolate=True)).attack(g, Linear(4, 2), targets)
    assert mod.added.shape[1] == 0 and mod.removed.shape[1] == 3
    e = g.edge_index[:, g.edge_index[0] < g.edge_index[1]]
    sums = deg[e[0]] + deg[e[1]]
    removed = deg[mod.removed[0]] + deg[mod.removed[1]]
    kept = np.array([s for (u, v), s in zip(e.T.tolist(), sums) if (u, v) not in set(map(tuple, mod.removed.T.tolist()))])
    assert removed.min() >= kept.max()
    ascend = FLIP(FLIPConfig(n_edge_mod=2, mode="ascend", allow_isolate=True)).attack(g, Linear(4, 2), targets)
    low = deg[ascend.removed[0]] + deg[ascend.removed[1]]
    assert sorted(low.tolist()) == sorted(sums.tolist())[:2]


@pytest.mark.parametrize("allow", [False, True])
def test_flip_isolation_rule_matches_sequential_reference(allow: bool) -> None:
    g, targets = star_graph()
    budget = g.num_edges
    mod = FLIP(FLIPConfig(n_edge_mod=budget, allow_isolate=allow)).attack(g, Linear(4, 2), targets)
    deg = g.degrees()
    e = g.edge_index[:, g.edge_index[0] < g.edge_index[1]]
    order = np.lexsort((e[0] * 9 + e[1], -(deg[e[0]] + deg[e[1]])))
    ranked = e[:, order]
    if allow:
        expect = ranked
    else:
        expect = ranked[:, sequential_select(ranked, np.ones(ranked.shape[1], bool), deg, budget)]
    assert keys(mod.removed, 9) == keys(expect, 9)
    after = np.bincount(apply_modification(graph_tensors(g), mod).edge_index[0].numpy(), minlength=9)
    assert allow or (after >= 1).all()
    assert not allow or mod.removed.shape[1] == g.num_edges


@pytest.mark.parametrize("seed", range(6))
def test_select_ranked_equals_sequential_rule(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 60
    src, dst = rng.integers(0, n, 150), rng.integers(0, n, 150)
    ei, _ = canonical_edges(src, dst, n)
    deg = np.bincount(ei[0], minlength=n)
    e = ei[:, ei[0] < ei[1]]
    extra = np.stack([np.arange(10), np.arange(10) + 30])  # "additions" mixed in
    pairs = np.concatenate([e, extra], axis=1)[:, rng.permutation(e.shape[1] + 10)]
    is_rem = np.isin(pairs[0] * n + pairs[1], e[0] * n + e[1])
    for budget in (5, 40, 1000):
        got = select_ranked(pairs, is_rem, deg, budget, allow_isolate=False)
        assert got.tolist() == sequential_select(pairs, is_rem, deg, budget)


def test_sampled_betweenness_with_all_sources_is_exact() -> None:
    nx = pytest.importorskip("networkx")
    g = tiny_csbm(n=80, seed=3)
    a = adjacency(g.edge_index, g.num_nodes)
    est = sampled_betweenness(a, np.arange(g.num_nodes))
    G = nx.Graph()
    G.add_nodes_from(range(g.num_nodes))
    G.add_edges_from(g.edge_index.T.tolist())
    exact = nx.betweenness_centrality(G, normalized=False)
    assert np.allclose(est, [exact[i] for i in range(g.num_nodes)])


# ------------------------------------------------------------------ DICE

def test_dice_removes_same_class_and_adds_cross_class(csbm: Graph) -> None:
    n = csbm.num_nodes
    pred = np.random.default_rng(5).integers(0, 3, n)
    model = FixedLogits(pred, 3)
    targets = csbm.targets("full")
    for ratio in (0.0, 0.5, 1.0):
        mod = DICE(DICEConfig(n_edge_mod=30, add_ratio=ratio)).attack(csbm, model, targets)
        assert mod.n_edge_flips == 30
        assert (pred[mod.removed[0]] == pred[mod.removed[1]]).all()
        assert (pred[mod.added[0]] != pred[mod.added[1]]).all()
        assert mod.added.shape[1] == round(30 * ratio)


def test_dice_gives_missing_removals_to_additions() -> None:
    g, targets = star_graph()
    pred = np.array([0, 0, 1, 1, 1, 1, 1, 0, 1])  # same-class target edges: (0,1), (2,3), (3,4), (6,8)
    mod = DICE(DICEConfig(n_edge_mod=10, add_ratio=0.0)).attack(g, FixedLogits(pred, 2), targets)
    assert keys(mod.removed, 9) == keys(np.array([[0, 2, 3, 6], [1, 3, 4, 8]]), 9)
    assert mod.added.shape[1] == 6 and (pred[mod.added[0]] != pred[mod.added[1]]).all()


# ------------------------------------------------------------------ NEA / STACK

def connected_graph(n: int = 30, seed: int = 1) -> Graph:
    rng = np.random.default_rng(seed)
    ring = [(i, (i + 1) % n) for i in range(n)]
    chords = [tuple(p) for p in rng.integers(0, n, (25, 2)) if p[0] != p[1]]
    return graph_from_pairs(ring + chords, n)


def dense_reference_scores(g: Graph, pairs: np.ndarray, k: int, window: int) -> tuple[np.ndarray, np.ndarray]:
    """STACK and NEA scores from the dense generalized problem, one candidate at a time."""
    n = g.num_nodes
    a = adjacency(g.edge_index, n).toarray()
    vals, vecs = scipy.linalg.eigh(a + np.eye(n), np.diag(a.sum(1) + 1))
    trivial = np.argmax(vals)  # connected: lambda = 1 once
    assert np.isclose(vals[trivial], 1.0)
    keep = np.delete(np.arange(n), trivial)
    top = keep[np.argsort(-np.abs(vals[keep]), kind="stable")[:k]]
    lam, u = vals[top], vecs[:, top]
    stack, nea = [], []
    for i, j in pairs.T:
        w = 1 - 2 * a[i, j]
        new = lam + w * (2 * u[i] * u[j] - lam * (u[i] ** 2 + u[j] ** 2))
        stack.append(abs(np.sqrt((lam ** 2).sum()) - np.sqrt((new ** 2).sum())))
        s_new = sum(new ** r for r in range(1, window + 1))
        s_old = sum(lam ** r for r in range(1, window + 1))
        nea.append(abs(np.sqrt((s_new ** 2).sum()) - np.sqrt((s_old ** 2).sum())))
    return np.array(stack), np.array(nea)


@pytest.mark.parametrize("candidates", ["edges", "edges_and_pairs"])
def test_spectral_scores_equal_dense_reference(candidates: str) -> None:
    g = connected_graph()
    targets = np.arange(0, 30, 3)
    k = 6
    for cls, cfg in ((STACK, STACKConfig(k=k, tol=0.0, candidates=candidates, n_edge_mod=5)),
                     (NEA, NEAConfig(k=k, tol=0.0, window=4, candidates=candidates, n_edge_mod=5))):
        attack = cls(cfg)
        targets_, budget = attack.check_inputs(g, targets)
        ctx = ModContext(g, Linear(4, 2), targets_, budget, torch.device("cpu"))
        pairs, is_edge, score = attack.scores(ctx, torch.Generator().manual_seed(0))
        assert is_edge.sum() == ctx.target_edges.shape[1]
        assert (~is_edge).any() == (candidates == "edges_and_pairs")
        ref_stack, ref_nea = dense_reference_scores(g, pairs, k, 4)
        ref = ref_stack if cls is STACK else ref_nea
        assert np.allclose(score, ref, rtol=1e-6, atol=1e-9)
        mod = attack.attack(g, Linear(4, 2), targets)
        best = pairs[:, np.argsort(-ref, kind="stable")]
        seq = sequential_select(best, is_edge[np.argsort(-ref, kind="stable")], g.degrees(), 5)
        assert keys(np.concatenate([mod.removed, mod.added], 1), 30) == keys(best[:, seq], 30)


@pytest.mark.parametrize("tol", [0.0, SINGLE_PRECISION_TOL])
def test_eigenpairs_equal_dense_reference(tol: float) -> None:
    """ARPACK in float64 (tol 0) and in float32 with the float64 Rayleigh-Ritz step (the
    default) give the dense solver's non-trivial pairs, float64-normalised, on a graph with
    several components."""
    rng = np.random.default_rng(3)
    n, big = 400, 300
    pairs = [(i, (i + 1) % big) for i in range(big)] + [tuple(p) for p in rng.integers(0, big, (400, 2))]
    pairs += [(big + 2 * i, big + 2 * i + 1) for i in range(20)] + [(360, 361), (361, 362), (362, 363)]
    g = graph_from_pairs([p for p in pairs if p[0] != p[1]], n)
    k = 8
    vals, u = eigenpairs(g.edge_index, n, k, torch.Generator().manual_seed(0), tol=tol)
    a = adjacency(g.edge_index, n).toarray()
    d = np.diag(a.sum(1) + 1)
    ref, ref_u = scipy.linalg.eigh(a + np.eye(n), d)
    nontrivial = ~np.isclose(ref, 1.0, atol=1e-9)
    top = np.argsort(-np.abs(ref[nontrivial]), kind="stable")[:k]
    ref, ref_u = ref[nontrivial][top], ref_u[:, nontrivial][:, top]
    assert np.allclose(vals, ref, rtol=0, atol=1e-9)
    assert np.allclose(u.T @ d @ u, np.eye(k), atol=1e-10)
    cos = np.abs(np.sum(u * (d @ ref_u), axis=0))  # the same vectors up to sign
    assert np.allclose(cos, 1.0, atol=1e-6)


def test_sum_of_powers() -> None:
    v = np.array([0.5, -0.3, 1.0])
    assert np.allclose(sum_of_powers(v, 3), v + v ** 2 + v ** 3)


# ------------------------------------------------------------------ configs

@pytest.mark.parametrize("make,fragment", [
    (lambda: FLIPConfig(variant="closeness"), "degree, betweenness, eigenvector"),
    (lambda: FLIPConfig(mode="up"), "descend, ascend"),
    (lambda: FLIPConfig(betweenness_sources=0), "betweenness_sources"),
    (lambda: DICEConfig(add_ratio=1.5), "add_ratio"),
    (lambda: DICEConfig(add_ratio=-0.1), "add_ratio"),
    (lambda: STACKConfig(k=0), "k must be"),
    (lambda: NEAConfig(k=0), "k must be"),
    (lambda: NEAConfig(window=0), "window"),
    (lambda: STACKConfig(candidates="all"), "edges, edges_and_pairs"),
    (lambda: STACKConfig(allow_isolate="no"), "allow_isolate"),
])
def test_bad_config_values(make, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        make()
    msg = str(err.value)
    assert fragment in msg and "\n" not in msg
