"""How much memory each task of a sweep holds at its peak, and what it reserves of Ray for it
(plain Python: no Ray, no torch).

Every training, attack and poisoning task, and every Scorer actor, reserves its peak memory
(Ray's ``memory`` resource) and, on a GPU, a share of the card sized by its GPU memory, so
that Ray never packs two tasks that do not fit a node or a card together. A task's figure
is the plan's, where ``sweep --plan`` measured it on this job (:class:`Sizes` ``plan``: the
peak bytes of each task, keyed by :func:`plan_key`), else the lower bound of
:func:`~grb_dist.models.memory.estimate_memory` times :data:`ESTIMATE_FACTOR`, what real
peaks measured above it. Each figure says which it is (:attr:`TaskSize.source`).

:func:`check_fits` refuses, before Ray runs anything, a task that fits no node of the
cluster, naming the task, its figure and the largest node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from grb_dist.core.errors import ConfigError
from grb_dist.core.scenario import scenario as scenario_of
from grb_dist.core.resources import format_bytes
from grb_dist.models.memory import GraphShape, estimate_memory, model_size
from grb_dist.sweep.cells import AttackCell, Cells, ModelTask, PoisonTask, Work

#: Measured peak / estimated lower bound: the estimate leaves out sparse propagation
#: structures, per-edge messages and allocator slack (about 1.5x for GCN training at the
#: grb-aminer twin's shape, docs/performance.md).
ESTIMATE_FACTOR = 1.5
#: Host bytes of a Ray worker with torch imported, beside its task's own (CPU).
WORKER_BYTES = 512 * 2**20
#: Host bytes of a worker that started CUDA (its libraries and context), beside its task's.
CUDA_WORKER_BYTES = 2 * 2**30
#: The smallest share of a GPU a task or actor reserves (Ray counts shares in 1/10000).
MIN_SHARE = 0.01


@dataclass(frozen=True)
class TaskSize:
    """The peak memory of one task: ``what`` it is, in words; ``own``: the bytes its work
    holds (tensors, the graph's copies), on the GPU when it runs there, else on the host;
    ``source``: ``plan`` (measured by ``sweep --plan``) or ``estimate``."""

    what: str
    own: int
    source: str

    def host(self, gpu: bool) -> int:
        """Host bytes of the task's worker: the worker's own size, plus the task's work when it
        runs on the CPU."""
        return CUDA_WORKER_BYTES if gpu else WORKER_BYTES + self.own

    def gpu(self) -> int:
        """GPU bytes of the task when it runs on a GPU."""
        return self.own


def plan_key(kind: str, name: str) -> str:
    """The key of a task's figure in a plan: ``train:<model file stem>``,
    ``attack:<perturbation id>``, ``poison:<model file stem>`` or ``score:<defense>``."""
    return f"{kind}:{name}"


def gpu_share(size: int, gpu_memory: int) -> float:
    """The share of a GPU of ``gpu_memory`` bytes that ``size`` bytes take, rounded up to
    hundredths (at least :data:`MIN_SHARE`, at most one card)."""
    if gpu_memory <= 0:
        return MIN_SHARE
    return min(1.0, max(MIN_SHARE, math.ceil(100 * size / gpu_memory) / 100))


class Sizes:
    """The peak memory of every task of ``cells`` on ``graph``: the plan's figure where
    ``plan`` has one (peak bytes keyed by :func:`plan_key`), else the estimate."""

    def __init__(self, cells: Cells, graph: Any, plan: Mapping[str, int] | None = None) -> None:
        self.cells, self.plan = cells, dict(plan or {})
        self.shape = GraphShape.of(graph)
        self.models = {t.file_stem: t for t in cells.models}
        self.classes = int(graph.num_classes)

    def _figure(self, key: str, what: str, estimate: int) -> TaskSize:
        if key in self.plan:
            return TaskSize(what, int(self.plan[key]), "plan")
        return TaskSize(what, int(estimate * ESTIMATE_FACTOR), "estimate")

    def _training(self, task: ModelTask, shape: GraphShape) -> int:
        m = model_size(task.name, dict(task.params), self.classes)
        return estimate_memory(shape, [(task.name, m, dict(task.at) if task.at else None)], [], 0)[0].bytes

    def train(self, task: ModelTask) -> TaskSize:
        whole = task.transductive or task.role == "poisoned"
        shape = self._whole() if whole else self.shape
        return self._figure(plan_key("train", task.file_stem), f"training {task.name} (seed {task.seed})",
                            self._training(task, shape))

    def poison(self, task: PoisonTask) -> TaskSize:
        """A defense trained on the whole poisoned graph and scored there."""
        m = task.model
        return self._figure(plan_key("poison", m.file_stem), f"training {m.name} on the poisoned graph",
                            self._training(m, self._whole()))

    def attack(self, cell: AttackCell) -> TaskSize:
        surrogate = self.models.get(cell.surrogate_model)
        widths = model_size(surrogate.name, dict(surrogate.params), self.classes) if surrogate else [64]
        k, e = int(cell.params.get("n_inject", 0) or 0), int(cell.params.get("edges_per_node", 0) or 0)
        scenario = scenario_of(cell.scenario)
        if not scenario.injects:
            k = e = 0  # one graph plus a block of pairs: bounded below by the clean pass
        shape = self._whole() if scenario.poisons else self.shape
        difficulty = "all" if scenario.poisons else cell.difficulty
        estimate = estimate_memory(shape, [], [(cell.attack, difficulty, k, e, widths)], 0)[0].bytes
        return self._figure(plan_key("attack", cell.perturbation_id),
                            f"attack {cell.attack} ({cell.scenario}, {cell.difficulty}) on {cell.surrogate}", estimate)

    def scorer(self, defenses: Iterable[str]) -> TaskSize:
        """A Scorer actor holding ``defenses``: the clean graph and one forward pass of the
        widest on the largest perturbed graph (the plan's largest scoring figure)."""
        names = list(defenses)
        planned = [self.plan[k] for k in (plan_key("score", d) for d in names) if k in self.plan]
        if planned:
            return TaskSize(f"scoring {', '.join(names)}", int(max(planned)), "plan")
        targets = {t.name: t for t in self.cells.targets}
        models = [(d, model_size(targets[d].name, dict(targets[d].params), self.classes), None)
                  for d in names if d in targets]
        k = max((int(a.params.get("n_inject", 0) or 0) for a in self.cells.attacks), default=0)
        scoring = next(t for t in estimate_memory(self.shape, models, [], k) if t.task.startswith("scoring"))
        return TaskSize(f"scoring {', '.join(names)}", int(scoring.bytes * ESTIMATE_FACTOR), "estimate")

    def _whole(self) -> GraphShape:
        """The graph's shape with every node in the training pass (a transductive training)."""
        g = self.shape
        return GraphShape(g.num_nodes, g.num_edges, g.num_features, g.num_classes, g.num_nodes, g.n_val,
                          {**g.targets, "all": g.num_nodes})

    def of_work(self, work: Work) -> list[TaskSize]:
        """The figure of every task of ``work`` (trainings, attacks, poisoning tasks), largest first."""
        sizes = [self.train(t) for t in work.models]
        sizes += [self.attack(a) for a in work.attacks_to_run]
        sizes += [self.poison(p) for p in work.poisoned]
        return sorted(sizes, key=lambda s: -s.own)

    def every(self, work: Work, defenses: Iterable[str]) -> list[TaskSize]:
        """The figures of every task of ``work`` and of the Scorer holding ``defenses``: what
        must fit a node."""
        return self.of_work(work) + [self.scorer(defenses)]


def check_fits(sizes: list[TaskSize], *, host: float, gpu: float = 0.0, where: str = "the largest node") -> None:
    """Refuse, in one line, the largest task that fits no node: ``host``: the largest node's
    reservable memory (bytes); ``gpu``: the memory of one GPU (0: the tasks run on CPUs)."""
    for size in sizes:
        need, have = (size.gpu(), gpu) if gpu else (size.host(False), host)
        if have > 0 and need > have:
            kind = "GPU memory" if gpu else "memory"
            raise ConfigError(
                f"{size.what} needs {format_bytes(need)} of {kind} ({'measured by --plan' if size.source == 'plan' else 'estimated'}) "
                f"but {where} has {format_bytes(have)}; run on a larger node, or leave the task's model or attack "
                f"out of the job")




#: A task that held more than this many times what it reserved is reported at the end of
#: its sweep: Ray packs tasks by what they reserve, so a node may hold more than it has.
OVER_RESERVED = 1.25


def memory_held(rows: Iterable[Mapping[str, Any]]) -> tuple[str | None, list[str]]:
    """What a sweep's tasks held at their peak against what they reserved, from its
    timeline rows (:data:`~grb_dist.store.schema.TIMELINE`): a line naming the task that
    held the most of each kind of memory (host, GPU), ``None`` when none was measured; and
    a warning for each kind that tasks held more than :data:`OVER_RESERVED` times what they
    reserved."""
    rows = list(rows)
    held, warnings = [], []
    for kind, label in (("memory", "memory"), ("gpu_memory", "GPU memory")):
        measured = [r for r in rows if r.get(f"peak_{kind}")]
        if not measured:
            continue
        top = max(measured, key=lambda r: r[f"peak_{kind}"])
        reserved = top.get(f"reserved_{kind}")
        held.append(f"{label} {format_bytes(top[f'peak_{kind}'])} ({top['stage']}: {top['task']}"
                    + (f"; it reserved {format_bytes(reserved)})" if reserved else ")"))
        over = [r for r in measured if r.get(f"reserved_{kind}") and r[f"peak_{kind}"] > OVER_RESERVED * r[f"reserved_{kind}"]]
        if over:
            worst = max(over, key=lambda r: r[f"peak_{kind}"] / r[f"reserved_{kind}"])
            warnings.append(
                f"{len(over)} of {len(measured)} tasks held more {label} than {OVER_RESERVED:g}x what they reserved "
                f"(the most: {worst['stage']}: {worst['task']}, {format_bytes(worst[f'peak_{kind}'])} against "
                f"{format_bytes(worst[f'reserved_{kind}'])}), and Ray packs tasks by what they reserve: plan this "
                f"job (grb-dist plan) so that its sweeps reserve the measured figures")
    return ("the most a task held: " + "; ".join(held) if held else None), warnings


#: Device-worker actors per GPU at most, unless the settings say otherwise: more processes
#: on one card add CUDA contexts and contention sooner than throughput.
WORKERS_PER_GPU = 4
#: GPU bytes of a CUDA context, beside the tensors of a worker's task.
CUDA_CONTEXT_BYTES = 600 * 2**20


@dataclass(frozen=True)
class DeviceLayout:
    """How a sweep's actors share the GPUs of a cluster: ``workers`` device-worker actors in
    all, each reserving ``worker_share`` of a GPU; each Scorer reserving ``scorer_share``."""

    workers: int
    worker_share: float
    scorer_share: float


def device_layout(largest: int, scorer: int, *, gpu_memory: int, gpus: int, cpus: float, scorers: int,
                  cap: int = 0) -> DeviceLayout:
    """The :class:`DeviceLayout` of a cluster of ``gpus`` GPUs of ``gpu_memory`` bytes each
    (0: unknown) and ``cpus`` CPUs, for device workers whose largest task holds ``largest``
    GPU bytes and ``scorers`` Scorer actors of ``scorer`` GPU bytes: as many workers per GPU
    as fit beside that GPU's Scorers, at most ``cap`` (0: :data:`WORKERS_PER_GPU`) and the
    CPUs per GPU (each worker reserves a CPU)."""
    gpus = max(1, int(gpus))
    cap = cap or WORKERS_PER_GPU
    per_gpu = -(-max(1, scorers) // gpus)
    if gpu_memory > 0:
        scorer_share = gpu_share(scorer + CUDA_CONTEXT_BYTES, gpu_memory)
        worker_share = gpu_share(largest + CUDA_CONTEXT_BYTES, gpu_memory)
    else:  # unknown: an even split
        scorer_share, worker_share = MIN_SHARE * 10, 0.0
    left = max(MIN_SHARE, 1.0 - per_gpu * scorer_share)
    fit = int(left / worker_share + 1e-9) if worker_share else cap
    k = max(1, min(cap, fit, int(cpus // gpus) or 1))
    share = min(worker_share, left) if worker_share else math.floor(100 * left / k) / 100
    return DeviceLayout(k * gpus, max(MIN_SHARE, share), scorer_share)


__all__ = ["CUDA_CONTEXT_BYTES", "CUDA_WORKER_BYTES", "DeviceLayout", "ESTIMATE_FACTOR", "MIN_SHARE", "Sizes", "TaskSize",
           "OVER_RESERVED", "WORKERS_PER_GPU", "WORKER_BYTES", "check_fits", "device_layout", "gpu_share", "memory_held",
           "plan_key"]
