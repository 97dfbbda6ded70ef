"""Where a sweep's work runs on the connected cluster, and what each piece reserves there.

On CPUs every training, attack and poisoning task is a Ray task that reserves its CPUs and
its peak memory (:mod:`grb_dist.sweep.sizing`), so Ray packs them by memory; Ray reuses a
CPU worker process from task to task. On a cluster with GPUs the same work runs in
long-lived device workers (:class:`~grb_dist.sweep.pool.DevicePool`), several per GPU, each
reserving a share of its card sized by the job's largest task; the Scorer actors reserve a
share sized by theirs. CUDA then starts once per actor, not once per task.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from grb_dist.cluster.settings import RaySettings
from grb_dist.core.graph import Graph
from grb_dist.sweep import tasks as ray_tasks
from grb_dist.sweep.cells import AttackCell, Cells, PoisonTask, Work
from grb_dist.sweep.pool import DevicePool
from grb_dist.sweep.sizing import Sizes, TaskSize, check_fits, device_layout


#: Scorer actors per GPU (by default): two score side by side while a third call's
#: perturbation is assembled; each holds half of the defenses.
SCORERS_PER_GPU = 2


@dataclass
class Placement:
    """What a sweep got from Ray: its cluster's CPUs and GPUs, the bound on work in flight,
    the graph and the registrations in the object store, the device workers (GPU clusters
    only), the Scorers' options, and what each call in flight reserved (:meth:`reservation`)."""

    settings: RaySettings
    sizes: Sizes
    cpus: float
    max_in_flight: int
    n_scorers: int
    scorer_opts: dict
    graph_ref: Any
    registrations: list
    pool: DevicePool | None = None
    reserved: dict[Any, tuple[int | None, int | None]] = field(default_factory=dict)

    def can_submit(self) -> bool:
        """Whether a training, attack or poisoning call can start now (on a GPU cluster: a
        device worker is idle)."""
        return self.pool is None or self.pool.idle()

    def _task_opts(self, kind: str, size: TaskSize) -> dict:
        return ray_tasks.options(self.settings, kind, memory=size.host(False))

    def _reserves(self, opts: dict) -> tuple[int | None, int | None]:
        """The host and GPU bytes a task or actor started with ``opts`` reserves."""
        gpu = int(opts.get("num_gpus", 0) * (self.settings.connection.gpu_memory or 0))
        return opts.get("memory"), gpu or None

    def _reserve(self, refs: list, opts: dict) -> list:
        """``refs`` of a call submitted with ``opts`` (a device worker's: the actor's)."""
        self.reserved.update(dict.fromkeys(refs, self._reserves(opts)))
        return refs

    def train(self, task: Any, name: str) -> list:
        if self.pool is not None:
            return self._reserve(self.pool.submit(ray_tasks.train, self.graph_ref, (task,), self.registrations, name),
                                 self.pool.opts)
        opts = self._task_opts("train", self.sizes.train(task))
        return self._reserve([ray_tasks.submit_train(self.graph_ref, task, self.registrations, opts, name)], opts)

    def attack(self, cells: list[AttackCell], models: list, name: str) -> list:
        if self.pool is not None:
            nested = [(m, p, [ref]) for m, p, ref in models]
            return self._reserve(self.pool.submit(ray_tasks.attack, self.graph_ref, (cells, nested), self.registrations,
                                                  name, num_returns=len(cells)), self.pool.opts)
        opts = self._task_opts("attack", max((self.sizes.attack(c) for c in cells), key=lambda s: s.own))
        return self._reserve(ray_tasks.submit_attack(self.graph_ref, cells, models, self.registrations, opts, name),
                             opts)

    def poison(self, task: PoisonTask, pert_ref: Any, state_ref: Any, name: str) -> list:
        if self.pool is not None:
            state = [state_ref] if state_ref is not None else []
            return self._reserve(self.pool.submit(ray_tasks.poison, self.graph_ref, (task, pert_ref, state),
                                                  self.registrations, name), self.pool.opts)
        opts = self._task_opts("train", self.sizes.poison(task))
        return self._reserve([ray_tasks.submit_poison(self.graph_ref, task, pert_ref, state_ref, self.registrations,
                                                      opts, name)], opts)

    def done(self, ref: Any) -> str | None:
        """A training, attack or poisoning ref came back; the device worker that ran it, if any."""
        return self.pool.done(ref) if self.pool is not None else None

    def reservation(self, ref: Any, kind: str) -> tuple[int | None, int | None]:
        """What the call of ``ref`` (``kind``: train, attack, poison or score) reserved of
        Ray: host bytes and GPU bytes (``None``: nothing), a device worker's or Scorer's
        call its actor's."""
        if kind == "score":
            return self._reserves(self.scorer_opts)
        return self.reserved.pop(ref, (None, None))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.kill()


def check_placement(sizes: Sizes, work: Work, defenses: list[str], settings: RaySettings) -> RaySettings:
    """Refuse (:class:`~grb_dist.core.errors.ConfigError`, one line) a task of ``work`` or
    the Scorer of ``defenses`` that fits no node of the connected cluster: its host memory
    against the largest node's reservable memory, on a GPU cluster its GPU memory against
    one GPU's. Before the run directory is opened. ``settings`` with the GPU's memory
    (asked of the cluster once)."""
    cpus, gpus = ray_tasks.cluster_size()
    every = sizes.every(work, defenses)
    if not gpus:
        check_fits(every, host=max((n["memory"] for n in ray_tasks.nodes()), default=0))
        return settings
    gpu_memory = settings.connection.gpu_memory or ray_tasks.gpu_memory()
    check_fits(every, host=0, gpu=gpu_memory, where="one GPU of the cluster")
    return replace(settings, connection=replace(settings.connection, gpu_memory=gpu_memory or None))


def place(cells: Cells, work: Work, graph: Graph, settings: RaySettings, defenses: list[str],
          sizes: Sizes | None = None) -> Placement:
    """The :class:`Placement` of ``work`` on the connected cluster: the graph and the
    registrations put in the object store once, and on a GPU cluster its device workers
    started, each reserving a share of a GPU of ``settings.connection.gpu_memory`` bytes (see
    :func:`check_placement`). ``defenses``: those the Scorers will hold."""
    sizes = sizes or Sizes(cells, graph)
    cpus, gpus = ray_tasks.cluster_size()
    scaling = settings.scaling
    n_scorers = min(scaling.num_scorers or max(1, SCORERS_PER_GPU * int(gpus) if gpus else int(cpus) // 2),
                    max(1, len(defenses)))
    in_flight = scaling.max_in_flight or max(2, int(2 * cpus))
    scorer = sizes.scorer(defenses)
    if not gpus:
        return Placement(settings, sizes, cpus, in_flight, n_scorers,
                         ray_tasks.options(settings, "scorer", memory=scorer.host(False)), ray_tasks.put(graph),
                         ray_tasks.put_registrations())
    pooled = sizes.of_work(work)
    layout = device_layout(max((s.gpu() for s in pooled), default=0), scorer.gpu(),
                           gpu_memory=settings.connection.gpu_memory or 0, gpus=int(gpus), cpus=cpus,
                           scorers=n_scorers, cap=scaling.workers_per_gpu)
    host = max((s.host(True) for s in pooled), default=0)
    pool = DevicePool(layout.workers, ray_tasks.options(settings, "device", memory=host, gpu_share=layout.worker_share))
    scorer_opts = ray_tasks.options(settings, "scorer", memory=scorer.host(True), gpu_share=layout.scorer_share)
    return Placement(settings, sizes, cpus, in_flight, n_scorers, scorer_opts, ray_tasks.put(graph),
                     ray_tasks.put_registrations(), pool)


__all__ = ["Placement", "check_placement", "place"]
