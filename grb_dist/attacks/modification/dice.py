"""DICE: "delete internally, connect externally" (Waniek et al., "Hiding individuals and
communities in a social network", Nature Human Behaviour 2018)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from grb_dist.attacks.shared.flips import ModContext, ModificationAttack, ModificationConfig
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Modification

ROUNDS = 16


@dataclass(frozen=True)
class DICEConfig(ModificationConfig):
    """Attributes:
        add_ratio: share of the budget spent on additions, in [0, 1]; the rest removes edges
            (and goes to additions too when fewer removable edges exist).
    """

    add_ratio: float = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        v = self.add_ratio
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= 1:
            raise ConfigError(f"add_ratio must be a number in [0, 1], got {v!r}")


class DICE(ModificationAttack):
    """DICE with the surrogate's predictions as labels (never the true test labels).

    Algorithm: with ``n_add = round(add_ratio * budget)``, remove ``min(budget - n_add, R)``
    clean edges drawn uniformly among the ``R`` edges touching a target whose two endpoints
    have the same predicted class, and add the rest of the budget as distinct absent pairs
    ``(t, v)``: ``t`` a uniform target, ``v`` uniform among the nodes whose predicted class
    differs from ``t``'s (drawn directly, no rejection on class), topped up over a few rounds
    after removing duplicates and existing edges.

    Differs from the original, which uses the true labels (community memberships); here the
    labels are the surrogate's predictions (GRB's black-box threat model never shows the
    test labels). Everything is vectorised: O(E) to find the removable edges, O(budget log E)
    per round to draw additions.
    """

    Config = DICEConfig
    name = "dice"
    uses_surrogate = True

    def generate(self, ctx: ModContext, gen: torch.Generator) -> Modification:
        budget = ctx.budget.n_edge_mod
        pred = np.asarray(ctx.predictions, dtype=np.int64)
        n_add = int(round(self.config.add_ratio * budget))
        removed = same_class_edges(ctx, pred)
        n_rem = min(budget - n_add, removed.shape[1])
        pick = torch.randperm(removed.shape[1], generator=gen)[:n_rem].numpy()
        removed = removed[:, np.sort(pick)]
        added = cross_class_pairs(ctx, pred, budget - n_rem, gen)
        return ctx.result(np.concatenate([removed, added], axis=1))


def same_class_edges(ctx: ModContext, pred: np.ndarray) -> np.ndarray:
    """Canonical clean edges touching a target whose endpoints share a predicted class."""
    e = ctx.target_edges
    return e[:, pred[e[0]] == pred[e[1]]]


def cross_class_pairs(ctx: ModContext, pred: np.ndarray, k: int, gen: torch.Generator) -> np.ndarray:
    """Up to ``k`` distinct absent canonical pairs ``(target, node)`` of different predicted
    classes, drawn uniformly per target (a few rounds of draws topped up)."""
    n = ctx.n
    order = np.argsort(pred, kind="stable")
    counts = np.bincount(pred, minlength=int(pred.max()) + 1)
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    targets = ctx.targets
    cls_t = pred[targets]
    room = n - counts[cls_t]  # nodes of another class, per target
    usable = targets[room > 0]
    if k <= 0 or usable.size == 0:
        return np.zeros((2, 0), dtype=np.int64)
    keys = np.zeros(0, dtype=np.int64)
    for _ in range(ROUNDS):
        need = k - keys.size
        if need <= 0:
            break
        draw = int(need * 1.2) + 16
        t = usable[torch.randint(0, usable.size, (draw,), generator=gen).numpy()]
        c = pred[t]
        r = (torch.rand(draw, generator=gen, dtype=torch.float64).numpy() * (n - counts[c])).astype(np.int64)
        r = np.minimum(r, n - counts[c] - 1)
        slot = np.where(r < start[c], r, r + counts[c])  # skip the block of t's own class
        v = order[slot]
        lo, hi = np.minimum(t, v), np.maximum(t, v)
        new = lo * n + hi
        new = new[~ctx.exists(np.stack([lo, hi]))]
        new = new[~np.isin(new, keys)]
        _, first = np.unique(new, return_index=True)
        keys = np.concatenate([keys, new[np.sort(first)]])
    keys = keys[:k]
    return np.stack([keys // n, keys % n])


__all__ = ["DICE", "DICEConfig"]
