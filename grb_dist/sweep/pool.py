"""The device workers of a sweep on a GPU cluster, and which of them are busy (plain Python
on the Ray edge's handles).

On a cluster with GPUs the sweep's training, attack and poisoning work runs in long-lived
:class:`~grb_dist.sweep.tasks.DeviceWorker` actors, several per GPU, each reserving a share
of its card sized by the job's largest task (:func:`~grb_dist.sweep.sizing.device_layout`),
so that the actors on a card never hold more than it has. The driver hands an actor one call
at a time, and only when it is idle: a long training never queues behind another while an
actor is free.
"""

from __future__ import annotations

from typing import Any, Callable

from grb_dist.sweep import tasks


class DevicePool:
    """``n`` device-worker actors started with ``opts`` (named ``device:<i>``)."""

    def __init__(self, n: int, opts: dict[str, Any]) -> None:
        self.names = [f"device:{i}" for i in range(n)]
        self.opts = opts  # each actor's: what it reserves of Ray
        self.actors = [tasks.start_device_worker(name, opts) for name in self.names]
        self.busy: set[int] = set()  # actors with a call in flight
        self.of_ref: dict[Any, int] = {}  # ref of a call in flight -> its actor

    def __len__(self) -> int:
        return len(self.actors)

    def idle(self) -> bool:
        """Whether an actor can take a call now."""
        return len(self.busy) < len(self.actors)

    def submit(self, fn: Callable[..., Any], graph_ref: Any, args: tuple, registrations: list, name: str,
               num_returns: int = 1) -> list:
        """``fn(graph, *args)`` on an idle actor (:meth:`idle` must be true); its refs."""
        i = next(i for i in range(len(self.actors)) if i not in self.busy)
        refs = tasks.call_device_worker(self.actors[i], fn, graph_ref, args, registrations, name, num_returns)
        refs = refs if isinstance(refs, list) else [refs]
        self.busy.add(i)
        self.of_ref.update(dict.fromkeys(refs, i))
        return refs

    def done(self, ref: Any) -> str | None:
        """A ref of a call has come back (every ref of a call comes back at once): its actor
        is idle again. The actor's name, ``None`` when the ref is not a call of this pool."""
        i = self.of_ref.pop(ref, None)
        if i is None:
            return None
        self.busy.discard(i)
        return self.names[i]

    def info(self) -> list[dict]:
        """Each actor's process, device and calls (waits for them)."""
        return [tasks.get(tasks.info_of(a)) for a in self.actors]

    def kill(self) -> None:
        tasks.kill(self.actors)


__all__ = ["DevicePool"]
