"""GRB metrics as pure functions returning plain floats.

``scores`` are accuracies: of one attack against n defenses (attack scores) or of one
defense under n attacks, the no-attack row included (defense scores).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def _arr(scores: Sequence[float]) -> np.ndarray:
    a = np.asarray(scores, dtype=np.float64).ravel()
    if a.size == 0:
        raise ValueError("metrics need at least one score")
    return a


def accuracy(pred: Sequence[int], labels: Sequence[int]) -> float:
    """Fraction of equal entries."""
    p, y = np.asarray(pred), np.asarray(labels)
    if p.shape != y.shape or p.size == 0:
        raise ValueError("accuracy needs two non-empty arrays of the same shape")
    return float((p == y).mean())


def average(scores: Sequence[float]) -> float:
    """Mean of the scores."""
    return float(_arr(scores).mean())


def top_k_mean(scores: Sequence[float], k: int = 3, largest: bool = True) -> float:
    """Mean of the k largest (``largest=True``, Avg 3-Max) or smallest (Avg 3-Min) scores.

    With fewer than k scores, the mean of all of them.
    """
    a = np.sort(_arr(scores))
    a = a[::-1] if largest else a
    return float(a[: max(1, k)].mean())


def rank_weights(n: int) -> np.ndarray:
    """GRB weights ``w_i = (1 / i^2) / sum_j (1 / j^2)``, i = 1..n."""
    w = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** 2
    return w / w.sum()


def weighted(scores: Sequence[float], descending: bool = True) -> float:
    """Weighted accuracy: scores sorted (descending for attacks: most robust defense first;
    ascending for defenses: strongest attack first), weighted by :func:`rank_weights`."""
    a = np.sort(_arr(scores))
    if descending:
        a = a[::-1]
    return float((a * rank_weights(a.size)).sum())


def attack_scores(accuracies: Sequence[float]) -> dict[str, float]:
    """An attack's scores over defenses: Average, Avg 3-Max, Weighted (lower = stronger)."""
    return {
        "average": average(accuracies),
        "avg_3_max": top_k_mean(accuracies, 3, largest=True),
        "weighted": weighted(accuracies, descending=True),
    }


def defense_scores(accuracies: Sequence[float]) -> dict[str, float]:
    """A defense's scores over attacks: Average, Avg 3-Min, Weighted (higher = more robust)."""
    return {
        "average": average(accuracies),
        "avg_3_min": top_k_mean(accuracies, 3, largest=False),
        "weighted": weighted(accuracies, descending=False),
    }
