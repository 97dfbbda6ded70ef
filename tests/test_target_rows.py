"""A model's output at a target computed on the rows its declared program reads
(``grb_dist.evaluation.rows``): the same logits as the whole perturbed graph, for every
built-in operator, direct and influencer flips; what the per-target scorer uses for a model
that declares its program."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grb_dist.core.targeted import TargetedModification
from grb_dist.defenses import build_defense
from grb_dist.evaluation.rows import RowProgram, Unsupported
from grb_dist.evaluation.targeted import TargetEvaluator
from grb_dist.models.tensors import apply_modification, graph_tensors
from helpers import tiny_csbm, whole_graph_outcomes

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def g():
    return tiny_csbm(n=300)


def flips(g, rng, influencer: bool) -> TargetedModification:
    """Per target, one removed edge and two added pairs (at the target, or at a neighbour of
    it for an influencer perturbation)."""
    ei = g.edge_index
    deg = g.degrees()
    targets = [int(v) for v in g.targets("full") if deg[v] >= 2][:5]
    removed, added, rb, ab = [], [], [], []
    for t in targets:
        nbrs = np.unique(ei[1][ei[0] == t])
        u = int(nbrs[0]) if influencer else t
        u_nbrs = np.unique(ei[1][ei[0] == u])
        gone = int(u_nbrs[u_nbrs != t][0]) if influencer else int(nbrs[0])
        removed.append((u, gone))
        far = [int(v) for v in rng.permutation(g.num_nodes) if v not in u_nbrs and v not in (u, t)][:2]
        added += [(u, v) for v in far]
        rb.append(t)
        ab += [t, t]
    by = dict(removed_by=np.array(rb), added_by=np.array(ab)) if influencer else {}
    return TargetedModification.build(np.array(targets), np.array(removed).T, np.array(added).T, g.num_nodes,
                                      g.num_features, **by)


MODELS = [
    ("gcn", {"hidden_sizes": [16, 16]}), ("gcn", {"hidden_sizes": [8], "layer_norm": True}),
    ("sgc", {"hidden_sizes": [], "k": 3}), ("sage", {"hidden_sizes": [8]}), ("gin", {"hidden_sizes": [8]}),
    ("tagcn", {"hidden_sizes": [8]}), ("appnp", {"hidden_sizes": [8]}), ("mlp", {"hidden_sizes": [8]}),
]


@pytest.mark.parametrize("influencer", [False, True], ids=["direct", "influencer"])
@pytest.mark.parametrize("name, params", MODELS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(MODELS)])
def test_the_rows_a_program_reads_give_the_whole_graphs_logits(g, name, params, influencer):
    torch.manual_seed(0)
    model = build_defense(name, g, params).eval()
    mod = flips(g, np.random.default_rng(3), influencer)
    ev = TargetEvaluator(g, graph_tensors(g))
    program = RowProgram(model, ev.clean.x)
    clean = graph_tensors(g)
    with torch.no_grad():
        for t in mod.targets.tolist():
            got = program.logits(t, *ev.perturbed(mod, t))
            pg = apply_modification(clean, mod.of(t))
            want = model(pg.x, pg.edge_index)[t]
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_which_models_are_evaluated_by_rows(g):
    """Every built-in GNN without attention declares a program evaluated by rows; attention
    models and the models without a declared program are evaluated otherwise."""
    x = graph_tensors(g).x
    for name, params in MODELS:
        RowProgram(build_defense(name, g, params).eval(), x)
    with pytest.raises(Unsupported, match="attention"):
        RowProgram(build_defense("gat", g, {"hidden_sizes": [4], "heads": 2}).eval(), x)
    with pytest.raises(Unsupported, match="RGCN declares no program"):
        RowProgram(build_defense("rgcn", g, {"hidden_sizes": [8]}).eval(), x)


def test_the_scorer_uses_the_rows_also_where_the_ball_passes_half_the_graph(g):
    """On the small dense graph every ball passes half the graph: a 3-layer GCN is scored on
    the rows its program reads all the same, and gives what the whole graph gives."""
    torch.manual_seed(0)
    model = build_defense("gcn", g, {"hidden_sizes": [16, 16]}).eval()
    mod = flips(g, np.random.default_rng(5), False)
    ev = TargetEvaluator(g, graph_tensors(g))
    assert all(ev.ball(t, mod.pairs_of(t)[1], 3) is None for t in mod.targets.tolist())
    pred, marg = ev.outcomes(model, mod, 3)
    assert ev.programs.get(model) is not None and not ev.whole_graph
    want_pred, want_marg = whole_graph_outcomes(g, model, mod)
    np.testing.assert_array_equal(pred, want_pred)
    np.testing.assert_allclose(marg, want_marg, atol=1e-4)
