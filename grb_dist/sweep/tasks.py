"""The sweep's work as the Ray edge runs it: its tasks and the Scorer actor.

:mod:`grb_dist.cluster.ray_edge` knows neither the sweep nor its worker; it runs the plain
functions and the class of this module as Ray tasks and actors. The runner
(:mod:`grb_dist.sweep.runner`) reaches Ray only through this module, which offers the
edge's functions it needs (:func:`put`, :func:`wait`, :func:`get`, ...) beside the sweep's
own submissions (:func:`submit_train`, :func:`submit_attack`, :func:`submit_poison`,
:func:`start_scorer`, :func:`submit_score`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from grb_dist.cluster.ray_edge import (ActorLost, TaskFailed, cancel, cluster_size, device, fetch_nested, get, gpu_memory,
                                       in_worker, kill, nodes, options, put, put_registrations, wait)
from grb_dist.cluster import ray_edge
from grb_dist.core.graph import Graph
from grb_dist.core.resources import Peak, peak_memory
from grb_dist.sweep import worker

# ---------------------------------------------------------------- in the worker
# Each result carries the memory its task held at its peak (:func:`peak_memory`): the
# sweep's timeline records it beside what the task reserved of Ray.


def train(graph: Graph, task) -> worker.TrainedModel:
    """A training task (:func:`worker.train_task`) on this worker's device."""
    with peak_memory() as peak:
        result = worker.train_task(graph, task, device=device())
    result.peak = peak
    return result


def attack(graph: Graph, cells: list, models: list):
    """A batch of attack cells on one surrogate and difficulty: the surrogate is loaded and
    its clean pass computed once (:func:`worker.attack_batch`); ``models``: ``(name,
    params, [state_ref])`` of the surrogate, then of the model whose predictions the cells
    fight when they have one (adaptive cells); one return value per cell (submitted with
    ``num_returns=len(cells)``), so each perturbation goes to the Scorers as soon as the
    batch ends, without passing through the driver."""
    dev = device()
    with peak_memory() as peak:
        surrogate, *labeler = [worker.load_model(graph, name, params, fetch_nested(ref[0]), dev)
                               for name, params, ref in models]
        results = worker.attack_batch(graph, cells, surrogate, device=dev, labeler=labeler[0] if labeler else None)
    for r in results:
        r.peak = peak
    return results[0] if len(results) == 1 else tuple(results)


def poison(graph: Graph, task, attack: worker.AttackResult | None, state: list):
    """Train a defense on a poisoned graph and score it (:func:`worker.poison_task`);
    ``state``: ``[ref]`` of the stored state_dict when the run holds the model, else ``[]``."""
    perturbation, scored = (attack.perturbation, attack.scored) if attack is not None else (None, None)
    with peak_memory() as peak:
        result = worker.poison_task(graph, task, perturbation, device=device(),
                                    state_dict=fetch_nested(state[0]) if state else None, scored=scored)
    result.peak = peak
    return result


#: What a scoring call carries so that any Scorer, fresh or restarted, can load what it
#: needs: ``[graph_ref, [(defense, params, state_dict_ref, train_seconds), ...],
#: registrations]``; refs nested in a list, which Ray passes unresolved.
ScorerSetup = list


@dataclass
class Scored:
    """What a scoring call returns: one result per defense (:meth:`worker.Scorer.score`),
    and the memory the Scorer held meanwhile (its defenses and the graph included)."""

    results: list[dict]
    peak: Peak


class ScorerActor:
    """The actor around :class:`worker.Scorer`.

    The constructor takes no object refs: Ray warns (and cannot promise to restore them on
    a restart, ray-project/ray#53727) when an actor with ``max_restarts > 0`` has
    constructor arguments in the object store. Instead every :meth:`score` call carries a
    :data:`ScorerSetup`; the actor loads the graph and each defense on the first call that
    needs it and keeps them, so a restarted actor loads them again from the refs of the
    call Ray retries (the driver holds those refs for the whole sweep).
    """

    def __init__(self, name: str):
        self.name = name
        self.scorer: worker.Scorer | None = None

    def __repr__(self) -> str:  # the actor's name in Ray's logs and dashboard
        return self.name

    def _hold(self, setup: ScorerSetup) -> worker.Scorer:
        graph_ref, models, _registrations = setup  # restored by score's in_worker
        if self.scorer is None:
            self.scorer = worker.Scorer(fetch_nested(graph_ref), {}, device())
        scorer = self.scorer
        for name, params, ref, secs in models:
            if name not in scorer.models:
                scorer.models[name] = worker.load_model(scorer.graph, name, params, fetch_nested(ref), scorer.device)
                scorer.train_seconds[name] = float(secs)
        return scorer

    def pid(self) -> int:
        return os.getpid()

    def names(self) -> list[str]:
        """The defenses loaded so far."""
        return self.scorer.names() if self.scorer is not None else []

    def score(self, setup: ScorerSetup, attack: worker.AttackResult | None, difficulty: str,
              defenses: list[str]) -> Scored:
        with in_worker(setup[2]), peak_memory() as peak:
            scorer = self._hold(setup)
            if attack is None:
                results = scorer.score(None, difficulty, defenses)
            else:
                results = scorer.score(attack.perturbation, difficulty, defenses, attack.scored)
        return Scored(results, peak)


class DeviceWorker:
    """A long-lived actor that holds a share of a GPU for the sweep's life and runs its
    training, attack and poisoning work one call at a time (:meth:`run`): torch and CUDA
    start once per actor, not once per task (a Ray task with a GPU gets a fresh worker
    process every time). The graph of a run is resolved once per actor and kept.

    A call that runs out of GPU memory (the actors sharing the card peaked together beyond
    the figures they reserve) gives the card's cached blocks back and tries again, up to
    :data:`OOM_RETRIES` times, after the others had time to finish."""

    def __init__(self, name: str):
        self.name = name
        self.graphs: dict[str, Graph] = {}
        self.calls = 0

    def __repr__(self) -> str:  # the actor's name in Ray's logs and dashboard
        return self.name

    def info(self) -> dict:
        """This actor's process, its device and how many calls it ran."""
        return {"name": self.name, "pid": os.getpid(), "device": device(), "calls": self.calls}

    def run(self, fn, registrations: list, graph: list, *args):
        """``fn(graph, *args)`` on this actor's device; ``graph``: ``[ref]`` of the run's graph."""
        key = graph[0].hex()
        if key not in self.graphs:
            self.graphs = {key: fetch_nested(graph[0])}  # one run's graph at a time
        self.calls += 1
        for attempt in range(OOM_RETRIES + 1):
            try:
                with in_worker(registrations):
                    return fn(self.graphs[key], *args)
            except RuntimeError as exc:  # torch.OutOfMemoryError is a RuntimeError
                if "out of memory" not in str(exc).lower() or attempt == OOM_RETRIES:
                    raise
                _release_device_memory(wait=2 ** (attempt + 1))
            finally:  # what the call cached on the card is free for the actors beside this one
                _release_device_memory(wait=0)


#: Tries again of a :class:`DeviceWorker` call that ran out of GPU memory.
OOM_RETRIES = 3


def _release_device_memory(wait: float) -> None:
    """Give the GPU's cached blocks back (when CUDA started here), then wait about ``wait``
    seconds (with jitter) for the calls beside this one to end."""
    import random
    import sys
    import time

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    if wait:
        time.sleep(wait * random.uniform(0.75, 1.25))


# ---------------------------------------------------------------- in the driver


def submit_train(graph_ref: Any, task: Any, registrations: list, opts: dict, name: str) -> Any:
    """A training task (:func:`train`); its ref."""
    return ray_edge.submit(train, (graph_ref, task), registrations, opts, name)


def submit_attack(graph_ref: Any, cells: list, models: list, registrations: list, opts: dict, name: str) -> list:
    """An attack task over a batch of cells on one stored surrogate (``models``: ``(name,
    params, state_ref)`` of the surrogate, and of the labels' model when the cells have
    one); one ref per cell."""
    refs = ray_edge.submit(attack, (graph_ref, cells, [(m, p, [ref]) for m, p, ref in models]), registrations, opts,
                           name, num_returns=len(cells))
    return refs if len(cells) > 1 else [refs]


def submit_poison(graph_ref: Any, task: Any, pert_ref: Any, state_ref: Any, registrations: list, opts: dict,
                  name: str) -> Any:
    """A poisoning task (train on the perturbation of ``pert_ref``, ``None`` for the clean
    graph, then score); its ref. ``state_ref``: the stored model's, or ``None``."""
    state = [state_ref] if state_ref is not None else []
    return ray_edge.submit(poison, (graph_ref, task, pert_ref, state), registrations, opts, name)


def start_device_worker(name: str, opts: dict[str, Any]) -> Any:
    """A :class:`DeviceWorker` actor named ``name``."""
    return ray_edge.start_actor(DeviceWorker, name, opts, name)


def call_device_worker(actor: Any, fn, graph_ref: Any, args: tuple, registrations: list, name: str,
                       num_returns: int = 1) -> Any:
    """``fn(graph, *args)`` (:func:`train`, :func:`attack` or :func:`poison`) on ``actor``;
    its ref, or a list of ``num_returns`` refs."""
    return ray_edge.call(actor, "run", fn, registrations, [graph_ref], *args, num_returns=num_returns, name=name)


def info_of(actor: Any) -> Any:
    """The ref of a :class:`DeviceWorker`'s :meth:`~DeviceWorker.info`."""
    return ray_edge.call(actor, "info")


def start_scorer(name: str, opts: dict[str, Any]) -> Any:
    """A Scorer actor named ``name`` (with a suffix while an earlier sweep's still holds it)."""
    return ray_edge.start_actor(ScorerActor, name, opts, name)


def submit_score(scorer: Any, setup: ScorerSetup, pert_ref: Any, difficulty: str, defenses: list[str]) -> Any:
    """A scoring call: ``defenses`` on the perturbation of ``pert_ref`` (``None``: clean)."""
    return ray_edge.call(scorer, "score", setup, pert_ref, difficulty, defenses)


__all__ = ["ActorLost", "DeviceWorker", "Scored", "ScorerActor", "call_device_worker", "info_of",
           "start_device_worker", "ScorerSetup", "TaskFailed", "attack", "cancel", "cluster_size", "get", "gpu_memory", "kill", "nodes",
           "options", "poison", "put", "put_registrations", "start_scorer", "submit_attack", "submit_poison",
           "submit_score", "submit_train", "train", "wait"]
