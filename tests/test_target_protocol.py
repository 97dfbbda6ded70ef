"""Nettack's protocol for choosing targets (``targets: {select: nettack}``): the correctly
classified nodes of highest and lowest margin and random others, the margins of the
linearised GCN trained on the clean graph, chosen once where the sweep is prepared and
pinned into every cell."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from grb_dist.attacks.targeted.nettack import train_linear_gcn
from grb_dist.attacks.targeted.protocol import clean_margins, pin
from grb_dist.core.errors import ConfigError
from grb_dist.core.targeted import TargetSelection, by_margins, select_targets, target_selection
from grb_dist.sweep.cells import run_cells
from grb_dist.sweep.job import parse_job
from grb_dist.sweep.session import prepare
from helpers import small, tiny_csbm

pytestmark = pytest.mark.usefixtures("one_thread")

FP = "f" * 64


@pytest.fixture(scope="module")
def g():
    return tiny_csbm(n=300)


def hand_degree(g, v: int) -> int:
    ei = g.edge_index
    return len({int(u) for u in ei[1][ei[0] == v]} | {int(u) for u in ei[0][ei[1] == v]})


def test_by_margins_takes_the_extremes_of_the_correct_and_draws_the_rest(g):
    rng = np.random.default_rng(3)
    m = rng.normal(size=g.num_nodes)
    sel = TargetSelection(select="nettack", n=10, high=3, low=2, min_degree=2, seed=4)
    got = by_margins(g, "full", sel, m)
    # the protocol written out with plain Python
    eligible = [int(v) for v in g.targets("full") if hand_degree(g, int(v)) >= 2 and m[v] > 0]
    ranked = sorted(eligible, key=lambda v: (-m[v], v))
    high, low = set(ranked[:3]), set(ranked[-2:])
    assert len(eligible) > 10 and got.size == 10 and np.unique(got).size == 10 and (np.diff(got) > 0).all()
    chosen = set(got.tolist())
    assert high <= chosen and low <= chosen and chosen <= set(eligible)
    # the five others are drawn: another seed draws others, the extremes stay
    other = set(by_margins(g, "full", TargetSelection(select="nettack", n=10, high=3, low=2, min_degree=2, seed=5),
                           m).tolist())
    assert high | low <= other and other != chosen
    np.testing.assert_array_equal(got, by_margins(g, "full", sel, m))


def test_by_margins_never_takes_a_misclassified_node_and_takes_all_when_few_qualify(g):
    m = -np.ones(g.num_nodes)
    correct = g.targets("easy")[:4]
    m[correct] = [0.5, 2.0, 1.0, 3.0]
    sel = TargetSelection(select="nettack", n=10, high=1, low=1, min_degree=0)
    assert by_margins(g, "easy", sel, m).tolist() == sorted(correct.tolist())
    with pytest.raises(ValueError, match="one per node"):
        by_margins(g, "easy", sel, m[:-1])


@pytest.mark.parametrize("section, word", [
    ({"select": "random", "high": 3}, "unknown key 'high' for select: random"),
    ({"select": "nettack", "nodes": [1]}, "unknown key 'nodes' for select: nettack"),
    ({"select": "nettack", "n": 10, "high": 6, "low": 5}, "exceed targets.n"),
    ({"select": "margins"}, "targets.select must be one of random, nodes, nettack"),
])
def test_a_nettack_section_is_checked(section, word):
    with pytest.raises(ConfigError, match=word):
        target_selection(section, 0)


def test_an_unpinned_nettack_selection_refuses_to_choose(g):
    sel = TargetSelection(select="nettack", n=5, high=1, low=1)
    assert sel.needs_margins
    with pytest.raises(ConfigError, match="no targets chosen on easy"):
        select_targets(g, "easy", sel)
    pinned = sel.pinned({"easy": np.array([9, 4])})
    assert not pinned.needs_margins and select_targets(g, "easy", pinned).tolist() == [4, 9]
    with pytest.raises(ConfigError, match="no targets chosen on hard"):
        select_targets(g, "hard", pinned)


def test_clean_margins_are_the_linear_gcns_label_logit_minus_the_best_other():
    """Against a dense computation of ``Â² X W1 W2`` with the same trained weights, on a
    graph hard enough that the model misclassifies some nodes."""
    g = tiny_csbm(n=300, K=0.5)
    got = clean_margins(g, seed=2)
    n, ei = g.num_nodes, g.edge_index
    a = np.zeros((n, n))
    a[ei[0], ei[1]] = 1.0
    w1, w2 = train_linear_gcn(sp.csr_matrix(a), g.features, g.labels, g.split["train"], g.split["val"], seed=2)
    a_hat = a + np.eye(n)
    d = 1 / np.sqrt(a_hat.sum(1))
    a_hat = d[:, None] * a_hat * d[None, :]
    logits = a_hat @ a_hat @ np.asarray(g.features, np.float64) @ w1 @ w2
    want = np.array([logits[v, g.labels[v]] - np.delete(logits[v], g.labels[v]).max() for v in range(n)])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
    assert 0.5 < (got[g.targets("full")] > 0).mean() < 1.0  # a real classifier: mostly right, not always


def job(targets: dict):
    return parse_job(small(scenario="targeted", targeted={"attack": {"n_flips": 1}, "attacks": {"rnd": {}},
                                                           "targets": targets}))


def test_prepare_pins_the_protocols_targets_into_every_cell(tmp_path):
    spec = job({"select": "nettack", "n": 6, "high": 2, "low": 2, "min_degree": 1})
    prepared = prepare(spec, out=tmp_path / "run")
    sel = prepared.spec.target_selection("targeted")
    assert {d for d, _ in sel.chosen} == set(spec.difficulties)
    want = pin(prepared.graph, spec.target_selection("targeted"), spec.difficulties)
    assert sel == want  # the same nodes when chosen again: the training is seeded
    for d, nodes in sel.chosen:
        assert len(nodes) == 6 and set(nodes) <= set(prepared.graph.targets(d).tolist())
    attacks = [a for a in prepared.cells.attacks if a.scenario == "targeted"]
    assert attacks and all(a.selection == sel for a in attacks)
    # other chosen nodes make other cells; the job's own hash does not move
    moved = spec.with_targets(lambda s: s.pinned({d: np.asarray(v) + 1 for d, v in sel.chosen}))
    assert moved.config_hash == spec.config_hash == prepared.spec.config_hash
    before = {c.cell_id for c in run_cells(prepared.spec, FP).scores}
    after = {c.cell_id for c in run_cells(moved, FP).scores}
    assert before and not before & after
