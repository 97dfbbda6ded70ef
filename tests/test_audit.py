"""The threat-model audit: a valid injection passes; each rule rejects a hand-made violation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from grb_dist.attacks import AUDIT_RULES, audit_injection
from grb_dist.core.errors import AuditError
from grb_dist.core.graph import Graph, Injection, canonical_edges

N, D = 8, 3
BUDGET = dict(n_inject=2, edges_per_node=3, feat_min=-1.0, feat_max=1.0)
TARGETS = np.array([1, 2, 3, 4], dtype=np.int64)


def _graph() -> Graph:
    src = np.arange(N - 1)
    ei, _ = canonical_edges(src, src + 1, N)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(N, D)).astype(np.float32)
    return Graph(features=x, edge_index=ei, labels=np.arange(N) % 2, name="audit")


def _valid() -> Injection:
    edges = np.array([[8, 8, 8, 9, 9], [1, 2, 3, 3, 4]], dtype=np.int64)
    feats = np.array([[0.5, -1.0, 1.0], [0.0, 0.25, -0.5]], dtype=np.float32)
    return Injection(features=feats, edges=edges, num_original=N)


def _audit(inj: Injection, **kw) -> None:
    audit_injection(_graph(), inj, **{**BUDGET, "targets": TARGETS, **kw})


def _with(inj: Injection, **changes) -> Injection:
    return dataclasses.replace(inj, **changes)


def test_valid_injection_passes_and_is_not_modified():
    inj = _valid()
    feats, edges = inj.features.copy(), inj.edges.copy()
    _audit(inj)
    _audit(inj, targets=None)
    np.testing.assert_array_equal(inj.features, feats)
    np.testing.assert_array_equal(inj.edges, edges)


def test_empty_edge_list_passes():
    _audit(_with(_valid(), edges=np.empty((2, 0), dtype=np.int64)))


def test_limits_compared_at_float32_precision():
    # -0.94 is not representable; the float32 value produced by clamping must pass
    inj = _with(_valid(), features=np.full((2, D), np.float32(-0.94)))
    _audit(inj, feat_min=-0.94, feat_max=0.94)


VIOLATIONS = {
    "shape: float64 features": ("shape", lambda i: _with(i, features=i.features.astype(np.float64))),
    "shape: wrong feature width": ("shape", lambda i: _with(i, features=np.zeros((2, D + 1), np.float32))),
    "shape: 3-row edges": ("shape", lambda i: _with(i, edges=np.zeros((3, 5), np.int64))),
    "shape: int32 edges": ("shape", lambda i: _with(i, edges=i.edges.astype(np.int32))),
    "shape: other graph": ("shape", lambda i: _with(i, num_original=N + 1)),
    "node_count": ("node_count", lambda i: _with(i, features=np.zeros((3, D), np.float32))),
    "edge_endpoints: original-original edge": (
        "edge_endpoints", lambda i: _with(i, edges=np.concatenate([i.edges, [[0], [1]]], 1))),
    "edge_endpoints: endpoint out of range": (
        "edge_endpoints", lambda i: _with(i, edges=np.array([[8], [10]], np.int64))),
    "edge_endpoints: non-target original node": (
        "edge_endpoints", lambda i: _with(i, edges=np.array([[8], [6]], np.int64))),
    "self_loop": ("self_loop", lambda i: _with(i, edges=np.array([[9], [9]], np.int64))),
    "duplicate_edge: repeated": (
        "duplicate_edge", lambda i: _with(i, edges=np.array([[8, 8], [1, 1]], np.int64))),
    "duplicate_edge: both directions of an injected link": (
        "duplicate_edge", lambda i: _with(i, edges=np.array([[8, 9], [9, 8]], np.int64))),
    "edge_budget": (
        "edge_budget", lambda i: _with(i, edges=np.array([[8, 8, 8, 8], [1, 2, 3, 4]], np.int64))),
    "edge_budget: injected links count for both ends": (
        "edge_budget", lambda i: _with(i, edges=np.array([[8, 8, 8, 9], [1, 2, 3, 8]], np.int64))),
    "feature_finite": (
        "feature_finite", lambda i: _with(i, features=np.where(np.eye(2, D, dtype=bool), np.nan, i.features).astype(np.float32))),
    "feature_range: above": (
        "feature_range", lambda i: _with(i, features=(i.features + np.float32(0.01)).astype(np.float32))),
    "feature_range: below": (
        "feature_range", lambda i: _with(i, features=np.full((2, D), -1.001, np.float32))),
}


@pytest.mark.parametrize("case", sorted(VIOLATIONS))
def test_each_rule_rejects_its_violation(case):
    rule, make = VIOLATIONS[case]
    assert rule in AUDIT_RULES
    with pytest.raises(AuditError, match=f"rule '{rule}'"):
        _audit(make(_valid()))


def test_every_rule_is_exercised():
    assert {rule for rule, _ in VIOLATIONS.values()} == set(AUDIT_RULES)


def test_injected_links_within_budget_pass_without_target_restriction():
    inj = _with(_valid(), edges=np.array([[8, 8, 9], [1, 9, 4]], np.int64))
    _audit(inj)  # 8: {1, 9}, 9: {8, 4}
