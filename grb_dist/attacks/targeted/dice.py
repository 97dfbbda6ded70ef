"""DICE, targeted: "delete internally, connect externally" at each target (Waniek et al.,
"Hiding individuals and communities in a social network", Nature Human Behaviour 2018), the
heuristic baseline of targeted attacks in DeepRobust and GreatX."""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from grb_dist.attacks.targeted.base import TargetContext, TargetedAttack, TargetedConfig
from grb_dist.core.bounds import check_positive_number


@dataclass(frozen=True)
class DICEConfig(TargetedConfig):
    """Attributes:
        add_ratio: the share of a target's flips that connect it to a node of another class
            (the others remove its edges to nodes of its class; where it has too few such
            edges, the rest connect too)."""

    add_ratio: float = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_number(self.add_ratio, "add_ratio", allow_zero=True, maximum=1.0)


class DICE(TargetedAttack):
    """Per target ``t`` with class ``y`` (the labels fought: the surrogate's predictions),
    ``round((1 - add_ratio) * budget)`` of its edges to nodes of class ``y`` removed (drawn
    uniformly; fewer when it has fewer) and the rest of the budget spent on edges to nodes of
    other classes that are not its neighbours (drawn uniformly). O(degree + budget) per
    target, after one list of the nodes of each class."""

    Config = DICEConfig
    name = "dice"

    def attack_one(self, ctx: TargetContext, target: int, budget: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, None]:
        labels = ctx.labels
        y = labels[target]
        nbrs = ctx.neighbours(target)
        inside = nbrs[labels[nbrs] == y]
        n_remove = min(inside.size, int(round((1 - self.config.add_ratio) * budget)))
        removed = rng.choice(inside, size=n_remove, replace=False) if n_remove else np.zeros(0, np.int64)
        lists = ctx.memo.setdefault("dice_others", {})
        others = lists.get(int(y))
        if others is None:
            others = lists[int(y)] = np.flatnonzero(labels != y)
        added = _draw_outside(others, nbrs, budget - n_remove, rng)
        return np.concatenate([removed, added]).astype(np.int64), None


def _draw_outside(pool: np.ndarray, exclude: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Up to ``k`` distinct uniform draws from ``pool`` none of which is in ``exclude`` (the
    target's neighbours: every draw is then an addition): by rejection from a large pool,
    by filtering a small one."""
    if k <= 0:
        return np.zeros(0, np.int64)
    if pool.size <= 4 * (k + exclude.size):
        out = pool[~np.isin(pool, exclude)]
        return rng.choice(out, size=min(k, out.size), replace=False)
    while True:  # each round draws from a pool over 4x the excluded and wanted: ends in a round or two
        drawn = rng.choice(pool, size=2 * k + exclude.size, replace=True)
        drawn = drawn[~np.isin(drawn, exclude)]
        _, first = np.unique(drawn, return_index=True)
        drawn = drawn[np.sort(first)]
        if drawn.size >= k:
            return drawn[:k]


__all__ = ["DICE", "DICEConfig"]
