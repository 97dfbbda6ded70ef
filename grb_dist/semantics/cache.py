"""What the units of a study run in one process share: :class:`UnitCache`.

Units of the same graph share its sampling, a model and its ``_lp`` variant share one
training, the attacks of one (graph, model) share the trained model, and the models of one
graph share the surrogate attacks' edge orders. Everything cached is seeded, so a hit
changes no result, only the time. A run owns one cache (:func:`grb_dist.semantics.run.run_study`
without Ray); a Ray worker process keeps one for the units it runs one after another
(:func:`worker_cache`).
"""

from __future__ import annotations

from typing import Any, Callable


class UnitCache:
    """Bounded memos, one per kind of shared work; a full memo is emptied before a new entry
    goes in (they stay small: :attr:`LIMITS`).

    - ``prepared``: sampled graphs, split and new nodes per (settings, K, graph seed);
    - ``networks``: weights and validation accuracy of trained underlying networks
      (``<model>`` and ``<model>_lp`` with the same settings train the same network);
    - ``trained``: the last (prepared graph, trained model, validation accuracy): the units
      of one (K, graph, model) run one after another (attacks are the innermost loop of
      :func:`grb_dist.semantics.spec.units`), so each model is trained once, not once per attack;
    - ``orders``: the surrogate attacks' (Nettack, SGA) edge orders per graph: they depend
      on the surrogate, not on the attacked model.
    """

    LIMITS = {"prepared": 9, "networks": 32, "trained": 1, "orders": 8}

    def __init__(self) -> None:
        self._memos: dict[str, dict[str, Any]] = {kind: {} for kind in self.LIMITS}

    def get(self, kind: str, key: str, make: Callable[[], Any]) -> Any:
        """The ``kind`` entry of ``key``, made by ``make()`` on a miss."""
        memo = self._memos[kind]
        if key not in memo:
            value = make()
            if len(memo) >= self.LIMITS[kind]:
                memo.clear()
            memo[key] = value
        return memo[key]

    def lookup(self, kind: str, key: str) -> Any | None:
        """The ``kind`` entry of ``key``, or None on a miss (nothing is made)."""
        return self._memos[kind].get(key)

    def size(self, kind: str) -> int:
        """How many ``kind`` entries are held."""
        return len(self._memos[kind])


_WORKER: UnitCache | None = None


def worker_cache() -> UnitCache:
    """The cache of this process's Ray tasks (study units, tuning candidates): Ray runs many
    of them one after another in one worker process, and a cache passed from the driver
    would reach each task as a fresh copy."""
    global _WORKER
    if _WORKER is None:
        _WORKER = UnitCache()
    return _WORKER


__all__ = ["UnitCache", "worker_cache"]
