"""Nettack's protocol for choosing targets: by the margins of a model trained on the clean graph.

Zügner et al. (KDD 2018, section 5) attack, per dataset, the correctly classified nodes of
the 10 highest and the 10 lowest classification margins and 20 others drawn at random. The
margins here are those of Nettack's own surrogate, the linearised two-layer GCN
``Â² X W1 W2`` (:func:`~grb_dist.attacks.targeted.nettack.train_linear_gcn`), trained on the
clean graph's training nodes with the job's seed; a margin is the true label's logit minus
the best other's. (DeepRobust's example takes a ReLU GCN's instead: the same protocol on
another model, so its nodes differ.)

:func:`pin` chooses them once, where a sweep is prepared: the chosen nodes then travel in
the job's :class:`~grb_dist.core.targeted.TargetSelection`, so every task of the run fights
the same ones whatever machine it runs on.
"""

from __future__ import annotations

import numpy as np

from grb_dist.attacks.targeted.base import clean_adjacency
from grb_dist.attacks.targeted.nettack import surrogate_logits, train_linear_gcn
from grb_dist.core.graph import Graph
from grb_dist.core.targeted import TargetSelection, by_margins


def clean_margins(graph: Graph, seed: int) -> np.ndarray:
    """Per node, the true label's logit minus the best other's under the linearised GCN
    trained on the clean graph (module docstring); float64, N."""
    n, adj = graph.num_nodes, clean_adjacency(graph)
    val = graph.split.get("val")
    w1, w2 = train_linear_gcn(adj, graph.features, graph.labels, graph.split["train"],
                              val if val is not None and val.size else None, seed=seed)
    logits = surrogate_logits(adj, graph.features, w1 @ w2)
    labels = np.asarray(graph.labels, dtype=np.int64)
    own = logits[np.arange(n), labels]
    logits[np.arange(n), labels] = -np.inf
    return own - logits.max(axis=1)


def pin(graph: Graph, selection: TargetSelection, difficulties: tuple[str, ...]) -> TargetSelection:
    """``selection`` with its targets on each of ``difficulties`` chosen (a selection that
    needs no model is returned as it is)."""
    if not selection.needs_margins:
        return selection
    margins = clean_margins(graph, selection.seed)
    return selection.pinned({d: by_margins(graph, d, selection, margins) for d in difficulties})


__all__ = ["clean_margins", "pin"]
