import math

import pytest

from grb_dist.evaluation.metrics import (
    accuracy, attack_scores, average, defense_scores, rank_weights, top_k_mean, weighted,
)


def test_rank_weights_hand_worked():
    w = rank_weights(3)
    z = 1 + 1 / 4 + 1 / 9
    assert w.tolist() == pytest.approx([1 / z, 0.25 / z, (1 / 9) / z])
    assert math.isclose(w.sum(), 1.0)


def test_weighted_orders():
    s = [0.2, 0.8, 0.5]
    z = 1 + 1 / 4 + 1 / 9
    # attacks: descending (most robust defense first)
    assert weighted(s, descending=True) == pytest.approx((0.8 + 0.5 / 4 + 0.2 / 9) / z)
    # defenses: ascending (strongest attack first)
    assert weighted(s, descending=False) == pytest.approx((0.2 + 0.5 / 4 + 0.8 / 9) / z)


def test_top_k_and_average():
    s = [0.1, 0.9, 0.4, 0.7]
    assert top_k_mean(s, 3, largest=True) == pytest.approx((0.9 + 0.7 + 0.4) / 3)
    assert top_k_mean(s, 3, largest=False) == pytest.approx((0.1 + 0.4 + 0.7) / 3)
    assert top_k_mean([0.5, 0.7], 3) == pytest.approx(0.6)
    assert average(s) == pytest.approx(0.525)


def test_score_dicts_and_types():
    a = attack_scores([0.5, 0.6, 0.7, 0.8])
    d = defense_scores([0.5, 0.6, 0.7, 0.8])
    assert set(a) == {"average", "avg_3_max", "weighted"}
    assert set(d) == {"average", "avg_3_min", "weighted"}
    assert a["avg_3_max"] == pytest.approx(0.7)
    assert d["avg_3_min"] == pytest.approx(0.6)
    assert all(type(v) is float for v in (*a.values(), *d.values()))
    # a stronger attack (lower accuracies) gets a lower weighted score
    assert attack_scores([0.1, 0.2])["weighted"] < a["weighted"]


def test_accuracy_and_errors():
    assert accuracy([1, 2, 3], [1, 0, 3]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        accuracy([1], [1, 2])
    with pytest.raises(ValueError):
        average([])
