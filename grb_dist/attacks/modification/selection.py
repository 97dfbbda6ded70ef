"""Shared helpers of the ranking attacks (FLIP, NEA, STACK): config checks, rank order with
a deterministic tie-break, and GRB's "do not isolate a node" rule, vectorised.

GRB's FLIP / NEA / STACK walk their ranked candidates one by one and skip a removal that
would leave one of its endpoints without edges (unless ``allow_isolate``). That sequential
rule is a fixed point: removal ``e`` is accepted iff each endpoint ``x`` still has at least
two edges after the removals accepted *before* ``e`` in rank order, i.e.
``accepted_before(e, x) <= deg(x) - 2``. :func:`select_ranked` computes that fixed point
without a Python loop over edges: a few rounds, each of which counts the accepted removals
before every candidate at each endpoint with one cumulative sum over the candidates grouped
by node (the grouping sort is done once). The round map is antitone (more acceptances earlier
mean fewer later), so starting from "accept all" the rounds alternate between supersets and
subsets of the fixed point and meet it after as many rounds as the longest chain of
dependent decisions (a handful on real graphs). Should the cap be reached first, the last
subset round is used: it never isolates a node (a subset of a safe set of removals is safe).
"""

from __future__ import annotations

import numpy as np

from grb_dist.core.errors import ConfigError

MAX_ROUNDS = 200


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    """Raise a one-line :class:`ConfigError` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ConfigError(f"unknown {name} {value!r}; choose one of: {', '.join(choices)}")


def check_bool(name: str, value: object) -> None:
    """Raise a one-line :class:`ConfigError` unless ``value`` is a bool."""
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, got {value!r}")


def rank_order(scores: np.ndarray, keys: np.ndarray, descending: bool = True) -> np.ndarray:
    """Positions of ``scores`` best first; ties broken by ascending ``keys`` (pair keys), so
    the order never depends on the input order."""
    s = -scores if descending else scores
    return np.lexsort((keys, s))


def _exclusive_counts(order_pos: np.ndarray, group_start: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """For every (node, position) incidence sorted by (node, position): the sum of
    ``weight`` over the same node's earlier positions."""
    w = weight[order_pos].astype(np.int64)
    c = np.cumsum(w)
    before = c - w
    return before - before[group_start]


def select_ranked(pairs: np.ndarray, is_removal: np.ndarray, degrees: np.ndarray, budget: int,
                  allow_isolate: bool) -> np.ndarray:
    """Indices of the first ``budget`` accepted candidates of ranked ``pairs``.

    Args:
        pairs: 2 x C node pairs, already in rank order (best first), distinct.
        is_removal: C booleans, True for pairs that are edges of the clean graph; additions
            never isolate anything and are always accepted.
        degrees: clean degree of every node (N).
        budget: how many candidates to keep at most.
        allow_isolate: True accepts every candidate (GRB's ``allow_isolate=True``).

    Returns:
        int64 positions into ``pairs`` (ascending, i.e. in rank order), at most ``budget``.
    """
    c = pairs.shape[1]
    if allow_isolate or c == 0:
        return np.arange(min(budget, c), dtype=np.int64)
    nodes = np.concatenate([pairs[0], pairs[1]])
    pos = np.concatenate([np.arange(c), np.arange(c)])
    order = np.lexsort((pos, nodes))
    sn, sp_ = nodes[order], pos[order]
    first = np.ones(sn.size, dtype=bool)
    first[1:] = sn[1:] != sn[:-1]
    group_start = np.maximum.accumulate(np.where(first, np.arange(sn.size), 0))
    slack_ok = degrees[sn] - 2  # accepted_before must stay <= deg - 2
    accepted = is_removal.copy()  # round 0: every removal accepted (superset)
    safe = np.zeros(c, dtype=bool)
    for rnd in range(1, MAX_ROUNDS + 1):
        before = _exclusive_counts(sp_, group_start, accepted)
        ok_inc = before <= slack_ok
        bad = np.zeros(c, dtype=bool)
        bad[sp_[~ok_inc]] = True
        new = is_removal & ~bad
        if rnd % 2 == 1:
            safe = new
        if np.array_equal(new, accepted):
            safe = new
            break
        accepted = new
    keep = np.flatnonzero(~is_removal | safe)
    return keep[:budget].astype(np.int64)


__all__ = ["check_bool", "check_choice", "rank_order", "select_ranked"]
