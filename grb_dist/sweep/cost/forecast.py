"""What a sweep will cost: its work (:class:`~grb_dist.sweep.cells.Work`) priced by a
:class:`~grb_dist.sweep.cost.calibrate.Calibration` and scheduled on a described cluster, the way
the runner schedules it (plain Python: no Ray, no torch).

The cost model, in epochs, steps and calls:

* a training task runs ``fixed + epochs * unit`` seconds. Early stopping ends it
  ``patience`` epochs after its best epoch, which is unknown before training: the forecast
  takes the best epoch of the first surrogate's full training where the calibration could
  afford it, else assumes it halfway through the epochs patience leaves open, and also
  gives the bound with every epoch run;
* an attack task (up to :data:`~grb_dist.sweep.cells.ATTACK_BATCH` cells on one surrogate
  and difficulty) runs its surrogate's clean pass once plus ``fixed + steps * unit`` per cell;
* a scoring call assembles the perturbed graph once and runs one forward pass per defense
  it scores, plus :data:`CALL_S`;
* a per-target scenario's (``targeted``) attack cell costs a setup plus ``T`` times one
  target's attack, and its score cell a clean pass plus ``T`` evaluations of one target alone
  (``T`` its difficulty's targets; :mod:`~grb_dist.sweep.cost.targeted`);
* a poisoning task trains a defense on the whole (poisoned) graph, priced like a training
  by a transductive rate, plus one forward pass; it can start once its perturbation exists.

The schedule replays the runner's order: surrogates first, then training and attack tasks
alternating, one CPU each (a GPU share on GPU clusters); each Scorer actor serves its calls
one at a time, on the same cores (its reservation is 0 CPUs), so busy cores share their time
(processor sharing) when tasks and Scorers ask for more threads than the cluster has. Jobs
side by side also share memory bandwidth and caches; that is not modelled, so large graphs come out
optimistic (figures: docs/performance.md).
Around the schedule: the command's start and loading the graph (timed by the plan itself),
the driver's imports, starting a local Ray and its workers and stopping it (calibrated:
:class:`~grb_dist.sweep.cost.calibrate.Startup`), and the reduction at the end (:data:`REDUCE_S`).

:func:`task_figures` gives each task of the work its own figures (seconds, peak memory,
whether it fits the machine), :func:`plan_summary` the whole plan, both as plain data
(``sweep --plan --json``; what sizes Ray's memory requests).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grb_dist.core.errors import ConfigError
from grb_dist.core.resources import reservable_memory
from grb_dist.core.text import duration
from grb_dist.sweep.cost.calibrate import Calibration
from grb_dist.sweep.cost.targeted import figure
from grb_dist.core.names import TRANSFER
from grb_dist.sweep.cells import ATTACK_BATCH, AttackCell, Cells, ModelTask, PoisonTask, ScoreCell, Work

#: Seconds of a scoring call beyond its forward passes (the actor call, assembling the
#: perturbed graph).
CALL_S = 0.005
#: Seconds of the end of a sweep besides stopping Ray: the last rows, the timeline, the
#: leaderboards.
REDUCE_S = 1.0


@dataclass(frozen=True)
class Cluster:
    """The cluster a sweep would run on: CPUs, GPUs, whether Ray starts locally, the
    torch threads of each task, and the memory of its largest node (bytes; 0: unknown,
    this machine's is taken: :func:`memory_limit`)."""

    cpus: float
    gpus: float = 0.0
    local: bool = True
    threads: int = 1
    memory: int = 0

    def __post_init__(self) -> None:
        if not self.cpus >= 1:
            raise ConfigError(f"--cpus must be >= 1, got {self.cpus:g}")
        if self.gpus < 0:
            raise ConfigError(f"--gpus must be >= 0, got {self.gpus:g}")


@dataclass
class StageForecast:
    """One stage: its tasks (models, perturbations, score cells), the task-seconds they
    cost, when the stage starts and ends in the schedule, and the largest memory one of
    its tasks holds (above the graph and a worker's own size, which ``peak_task`` adds)."""

    name: str
    count: int
    task_seconds: float = 0.0
    start: float = 0.0
    end: float = 0.0
    peak: int = 0
    upper: float = 0.0  # training: task-seconds with every epoch run


@dataclass
class Forecast:
    """A sweep's predicted cost: its stages, the time before the first task (loading the
    graph, starting Ray and the workers), the schedule's length, and the whole command."""

    stages: dict[str, StageForecast]
    setup: float
    schedule: float
    total: float
    upper: float  # the total with every training running all its epochs
    cluster: Cluster
    worker_bytes: int
    graph_bytes: int
    notes: list[str] = field(default_factory=list)
    pricing: list[str] = field(default_factory=list)  # how parts of the work are priced (always shown)
    bounds: tuple[float, float] | None = None  # the total's range when some figures were estimated, not measured
    stored: frozenset[str] = frozenset()  # file stems of the models the run holds (loaded, not trained)

    def peak_task(self, stage: str) -> int:
        """The resident memory of the stage's largest task: a worker, the graph, its work."""
        s = self.stages[stage]
        return self.worker_bytes + self.graph_bytes + s.peak if s.count else 0


def expected_epochs(train: dict[str, Any], best_epoch: int | None = None) -> float:
    """Epochs a training is expected to run: ``patience`` epochs after ``best_epoch``
    (the median of a few trainings in full), or without one, after a best epoch halfway through
    the epochs that patience leaves open; at most ``epochs``."""
    epochs, patience = int(train.get("epochs", 200)), int(train.get("patience", 0) or 0)
    if patience <= 0 or patience >= epochs:
        return float(epochs)
    best = best_epoch if best_epoch is not None else (epochs - patience) / 2
    return min(float(epochs), best + patience + 1)


def training_seconds(task: ModelTask, cal: Calibration) -> float:
    """Seconds a training is expected to take: :func:`expected_epochs` at its calibrated rate."""
    return cal.train[task.file_stem].seconds(expected_epochs(dict(task.train), cal.best_epoch))


def attack_seconds(a: AttackCell, cal: Calibration) -> float:
    """Seconds of one attack cell beside its task's shared clean pass: ``fixed + steps *
    unit``, or for a per-target scenario's ``fixed + T * unit`` (``T`` its targets)."""
    return cal.attack[a.perturbation_id].seconds(cal.targets.get(a.perturbation_id, a.steps))


def score_seconds(c: ScoreCell, cal: Calibration) -> float:
    """Seconds of one score cell in its call: a forward pass; for a per-target scenario's
    perturbation a clean pass plus one evaluation per target (its clean row: the clean pass)."""
    rate = cal.target_score.get(figure(c.scenario, c.difficulty, c.defense)) if c.per_target else None
    if rate is None:
        return cal.score[c.defense].fixed
    return rate.seconds(cal.targets[c.perturbation_id]) if c.perturbation_id in cal.targets else rate.fixed


def score_peak(defense: str, cal: Calibration) -> int:
    """The most a defense's scoring held above its process's, per-target scoring included."""
    return max([cal.score[defense].peak, *(r.peak for k, r in cal.target_score.items() if k.endswith(f":{defense}"))])


def forecast(cells: Cells, work: Work, calibration: Calibration, cluster: Cluster, *, load_seconds: float = 0.0,
             graph_bytes: int = 0, stored: frozenset[str] = frozenset(), n_scorers: int = 0) -> Forecast:
    """The predicted cost of ``work`` on ``cluster``: ``stored`` are the file stems of the
    models the run already holds (loaded, not trained); ``load_seconds`` how long loading
    the graph took and ``graph_bytes`` its size; ``n_scorers``: Scorer actors (0 = the
    runner's default)."""
    cal = calibration
    # a defense's clean model that adaptive poisoning attacks run on is a training task of its
    # own, which its clean rows then load: counted once
    to_train = list({t.file_stem: t for t in work.trainings
                     if t.file_stem not in stored}.values())
    # a targeted-poisoning task trains its defense once per target
    times = {pt.model.file_stem: cal.targets.get(pt.perturbation_id, 1) for pt in work.poisoned
             if pt.selection is not None and pt.perturbation_id is not None}
    train_s = {t.file_stem: training_seconds(t, cal) * times.get(t.file_stem, 1) for t in to_train}
    upper_s = sum(cal.train[t.file_stem].seconds(int(t.train.get("epochs", 200))) for t in to_train)
    stages = {
        "train": StageForecast("train", len(to_train), sum(train_s.values()),
                               peak=max((cal.train[t.file_stem].peak for t in to_train), default=0), upper=upper_s),
        "attack": StageForecast("attack", len(work.attacks_to_run),
                                peak=max((cal.attack[a.perturbation_id].peak for a in work.attacks_to_run), default=0)),
        "score": StageForecast("score", len(work.todo),
                               peak=max((score_peak(c.defense, cal) for c in work.todo if not c.trained_on_perturbation),
                                        default=0)),
    }
    schedule = _Schedule(cells, work, cal, cluster, train_s, stored, n_scorers, stages).run()
    up = cal.startup
    setup = load_seconds + up.driver_import + (up.ray_start if cluster.local else 0.0) + up.workers
    total = setup + schedule + REDUCE_S + (up.shutdown if cluster.local else 0.0)
    upper = total + max(0.0, upper_s - stages["train"].task_seconds) / max(1.0, cluster.cpus)
    notes = []
    if to_train and cal.best_epoch is not None:
        notes.append(f"training assumes early stopping where it ended trainings in full (median best epoch "
                     f"{cal.best_epoch}); with every epoch run it is at most the upper figure")
    elif to_train:
        notes.append("training assumes early stopping halfway through the epochs patience leaves open (the "
                     "surrogate's full training was too long to try); with every epoch run it is at most the "
                     "upper figure")
    return Forecast(stages, setup, schedule, total, max(total, upper), cluster, up.worker_bytes, graph_bytes, notes,
                    stored=stored, pricing=per_target_notes(work, cal))


class _Schedule:
    """An event simulation of the runner (see the module docstring)."""

    def __init__(self, cells: Cells, work: Work, cal: Calibration, cluster: Cluster, train_s: dict[str, float],
                 stored: frozenset[str], n_scorers: int, stages: dict[str, StageForecast]) -> None:
        self.cal, self.cluster, self.stages = cal, cluster, stages
        self.slots = int(cluster.cpus) if not cluster.gpus else max(1, min(int(cluster.cpus), int(cluster.gpus * 4)))
        self.threads = cluster.threads
        self.ready = set(stored)
        self.train_queue = [t for t in work.models if t.file_stem not in stored]
        self.train_s = train_s
        self.attack_queue = list(work.attacks_to_run)
        self.stem_of = {t.name: t.file_stem for t in cells.targets}
        # poisoning tasks wait for their perturbation (None: the clean graph, at once)
        self.poison_of: dict[str | None, list[PoisonTask]] = {}
        for pt in work.poisoned:
            self.poison_of.setdefault(pt.perturbation_id, []).append(pt)
        self.poison_queue: list[PoisonTask] = []
        defenses = sorted({c.defense for c in work.todo if not c.trained_on_perturbation})
        n = n_scorers or max(1, int(cluster.gpus) if cluster.gpus else int(cluster.cpus) // 2)
        n = max(1, min(n, len(defenses) or 1))
        self.holder = {d: i % n for i, d in enumerate(defenses)}
        self.scorer_queue: list[list[float]] = [[] for _ in range(n)]
        self.scorer_busy = [False] * n
        # score cells by perturbation and difficulty; cells waiting for their defense
        self.by_pert: dict[str | None, list[ScoreCell]] = {}
        for c in work.todo:
            if not c.trained_on_perturbation:
                self.by_pert.setdefault(c.perturbation_id, []).append(c)
        self.waiting: dict[str, list[tuple[str | None, ScoreCell]]] = {}
        self.running: list[list[Any]] = []  # [remaining seconds, kind, payload]
        self.tasks = {"train": 0, "attack": 0, "poison": 0}
        self.now = 0.0
        self.started: set[str] = set()
        stored_perts = {a.perturbation_id for a in work.attacks_needed} - {a.perturbation_id for a in work.attacks_to_run}
        for pid in [None, *sorted(stored_perts)]:
            if pid in self.by_pert or pid in self.poison_of:
                self.perturbation_done(pid)

    # -- events
    def call_s(self, c: ScoreCell) -> float:
        """A scoring call's own seconds: the actor call and assembling the perturbed graph."""
        perturb = self.cal.perturb.get(c.scenario)
        return CALL_S + (perturb.fixed if perturb is not None and c.perturbation_id is not None else 0.0)

    def perturbation_done(self, pid: str | None) -> None:
        self.poison_queue.extend(self.poison_of.pop(pid, ()))
        groups: dict[tuple[int, str], float] = {}
        for c in self.by_pert.get(pid, []):
            if self.stem_of[c.defense] in self.ready:
                key = (self.holder[c.defense], c.difficulty)
                groups[key] = groups.get(key, self.call_s(c)) + score_seconds(c, self.cal)
            else:
                self.waiting.setdefault(c.defense, []).append((pid, c))
        for (i, _), seconds in groups.items():
            self.scorer_queue[i].append(seconds)

    def model_done(self, stem: str) -> None:
        self.ready.add(stem)
        for defense in [d for d, s in self.stem_of.items() if s == stem]:
            groups: dict[tuple[str | None, str], float] = {}
            for pid, c in self.waiting.pop(defense, []):
                groups[(pid, c.difficulty)] = groups.get((pid, c.difficulty), self.call_s(c)) + score_seconds(c, self.cal)
            self.scorer_queue[self.holder[defense]].extend(groups.values())

    def next_work(self) -> tuple[str, Any, float] | None:
        ready = next((a for a in self.attack_queue if a.surrogate_model in self.ready
                      and (a.labels_from or a.surrogate_model) in self.ready), None)
        if self.train_queue and (ready is None or self.tasks["train"] <= self.tasks["attack"]):
            t = self.train_queue.pop(0)
            return "train", t.file_stem, self.train_s[t.file_stem]
        if ready is None:
            # a poisoning task whose model is a training task of its own waits for it, then loads it
            pending = {t.file_stem for t in self.train_queue} | {r[2] for r in self.running if r[1] == "train"}
            pt = next((pt for pt in self.poison_queue if pt.model.file_stem not in pending), None)
            if pt is None:
                return None
            self.poison_queue.remove(pt)
            stem = pt.model.file_stem
            train = 0.0 if stem in self.ready else self.train_s.get(stem, 0.0)
            seconds = train + self.cal.score[pt.model.name].fixed * len(pt.cells)
            return "poison", stem, seconds
        same = [b for b in self.attack_queue if (b.surrogate_model, b.labels_from, b.difficulty)
                == (ready.surrogate_model, ready.labels_from, ready.difficulty)]
        batch = same[:max(1, min(ATTACK_BATCH, len(same) // max(1, int(self.cluster.cpus))))]
        for b in batch:
            self.attack_queue.remove(b)
        seconds = self.cal.attack[batch[0].perturbation_id].clean + sum(attack_seconds(b, self.cal) for b in batch)
        self.stages["attack"].task_seconds += seconds
        return "attack", batch, seconds

    def mark(self, stage: str) -> None:
        s = self.stages[stage]
        if stage not in self.started:
            self.started.add(stage)
            s.start = self.now
        s.end = self.now

    def run(self) -> float:
        while True:
            while sum(self.tasks.values()) < self.slots:
                job = self.next_work()
                if job is None:
                    break
                kind, payload, seconds = job
                self.tasks[kind] += 1
                self.mark("train" if kind == "poison" else kind)
                self.running.append([seconds, kind, payload])
            for i, queue in enumerate(self.scorer_queue):
                if not self.scorer_busy[i] and queue:
                    seconds = queue.pop(0)
                    self.scorer_busy[i] = True
                    self.stages["score"].task_seconds += seconds
                    self.mark("score")
                    self.running.append([seconds, "score", i])
            if not self.running:
                return self.now
            rate = 1.0 if self.cluster.gpus else min(1.0, self.cluster.cpus / (self.threads * len(self.running)))
            step = min(r[0] for r in self.running) / rate
            self.now += step
            finished = [r for r in self.running if r[0] <= step * rate + 1e-12]
            self.running = [r for r in self.running if r[0] > step * rate + 1e-12]
            for r in self.running:
                r[0] -= step * rate
            for _, kind, payload in finished:
                self.mark("train" if kind == "poison" else kind)
                if kind == "poison":  # trained and scored: its cells are done
                    self.tasks["poison"] -= 1
                elif kind == "train":
                    self.tasks["train"] -= 1
                    self.model_done(payload)
                elif kind == "attack":
                    self.tasks["attack"] -= 1
                    for a in payload:
                        self.perturbation_done(a.perturbation_id)
                else:
                    self.scorer_busy[payload] = False


# ---------------------------------------------------------------- figures per task, as plain data

def memory_limit(cluster: Cluster) -> tuple[int, str]:
    """The memory a task must fit (bytes) and where: the largest node of a joined cluster
    when it is known (:attr:`Cluster.memory`), else what a local Ray lets a task reserve
    on this machine (:func:`~grb_dist.core.resources.reservable_memory`)."""
    if cluster.memory > 0:
        return cluster.memory, "the largest node of the cluster"
    return reservable_memory(), "this machine"


def task_figures(work: Work, calibration: Calibration, fc: Forecast, memory: int | None = None
                 ) -> list[dict[str, Any]]:
    """Every task of ``work`` as the forecast ``fc`` prices it, one dict each (JSON-ready):
    trainings, attacks (one per perturbation), poisoning tasks (a defense trained on a
    graph and scored there), score cells (one forward pass each; poisoning's cells are
    scored by their poisoning task). Each has ``kind`` (``train``, ``attack``, ``poison``,
    ``score``), ``key`` (``<kind>:<model file stem | perturbation id | defense>``), ``name``
    (the model, attack or defense), ``what`` (in words), the fields that tell it apart
    (``model``, ``surrogate``, ``difficulty``, ...), ``seconds`` (predicted, run alone: an
    attack with its surrogate's clean pass, which an attack task's cells share),
    ``task_bytes`` (its calibrated peak above a worker and the graph), ``peak_bytes``
    (host memory: a worker, the graph and ``task_bytes``, the figure of
    :meth:`Forecast.peak_task`) and ``fits``: ``peak_bytes`` at most ``memory`` (default
    :func:`memory_limit` of the forecast's cluster). Models the run holds are not trained."""
    limit = memory_limit(fc.cluster)[0] if memory is None else memory
    base = fc.worker_bytes + fc.graph_bytes
    tasks = [*(_train_task(t, calibration) for t in work.models if t.file_stem not in fc.stored),
             *(_attack_task(a, calibration) for a in work.attacks_to_run),
             *(_poison_task(pt, calibration, work, fc.stored) for pt in work.poisoned),
             *(_score_task(c, calibration) for c in work.todo if not c.trained_on_perturbation)]
    for t in tasks:
        t.update(seconds=round(t["seconds"], 6), peak_bytes=base + t["task_bytes"],
                 fits=base + t["task_bytes"] <= limit)
    return tasks


def _train_task(t: ModelTask, cal: Calibration) -> dict[str, Any]:
    return {"kind": "train", "key": f"train:{t.file_stem}", "name": t.name, "what": f"training {t.name}",
            "model": t.file_stem, "role": t.role, "seconds": training_seconds(t, cal),
            "task_bytes": cal.train[t.file_stem].peak}


def _attack_task(a: AttackCell, cal: Calibration) -> dict[str, Any]:
    rate = cal.attack[a.perturbation_id]
    threat = "" if a.threat == TRANSFER else f"{a.threat} "
    out = {"kind": "attack", "key": f"attack:{a.perturbation_id}", "name": a.attack,
           "what": f"{a.scenario} {threat}{a.attack} on {a.surrogate}, {a.difficulty}", "surrogate": a.surrogate,
           "difficulty": a.difficulty, "scenario": a.scenario, "threat": a.threat, "repeat": a.repeat,
           "steps": a.steps, "perturbation": a.perturbation_id, "seconds": rate.clean + attack_seconds(a, cal),
           "task_bytes": rate.peak}
    if a.perturbation_id in cal.targets:  # priced per target: its setup and each target's attack
        out.update(targets=cal.targets[a.perturbation_id], setup_seconds=rate.fixed, target_seconds=rate.unit)
    return out


def _poison_task(pt: PoisonTask, cal: Calibration, work: Work, stored: frozenset[str]) -> dict[str, Any]:
    """A poisoning task: it trains its model (unless a training task of its own or the run
    does) and scores it on each of its cells, as the schedule prices it."""
    t, score = pt.model, cal.score[pt.model.name]
    trains = t.file_stem not in stored and t.file_stem not in {m.file_stem for m in work.models}
    graph = f"poisoned graph {pt.perturbation_id[:16]}" if pt.perturbation_id else "clean graph"
    return {"kind": "poison", "key": f"poison:{t.file_stem}", "name": t.name,
            "what": f"training {t.name} on the {graph}" if trains else f"scoring {t.name} on the {graph}",
            "model": t.file_stem, "perturbation": pt.perturbation_id, "cells": len(pt.cells),
            "seconds": (training_seconds(t, cal) * (cal.targets.get(pt.perturbation_id, 1) if pt.selection else 1)
                        if trains else 0.0) + score.fixed * len(pt.cells),
            "task_bytes": cal.train[t.file_stem].peak if trains else score.peak}


def _score_task(c: ScoreCell, cal: Calibration) -> dict[str, Any]:
    out = {"kind": "score", "key": f"score:{c.defense}", "name": c.defense, "what": f"scoring {c.defense}",
           "cell": c.cell_id, "attack": c.attack, "surrogate": c.surrogate, "difficulty": c.difficulty,
           "scenario": c.scenario, "threat": c.threat, "repeat": c.repeat, "perturbation": c.perturbation_id,
           "seconds": score_seconds(c, cal), "task_bytes": score_peak(c.defense, cal)}
    rate = cal.target_score.get(figure(c.scenario, c.difficulty, c.defense))
    if c.per_target and c.perturbation_id in cal.targets and rate is not None:
        out.update(targets=cal.targets[c.perturbation_id], target_seconds=rate.unit)
    return out


def _short(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 0.1 else duration(seconds)


def _span(values: list[float]) -> str:
    low, high = _short(min(values)), _short(max(values))
    return low if low == high else f"{low} to {high}"


def per_target_notes(work: Work, cal: Calibration) -> list[str]:
    """How a per-target scenario's work is priced, with its figures (none without such work)."""
    attacks = [a for a in work.attacks_to_run if a.perturbation_id in cal.targets]
    cells = [c for c in work.todo if c.per_target and c.perturbation_id in cal.targets]
    scored: dict[str, list[float]] = {}
    for c in sorted(cells, key=lambda c: c.defense):
        rate = cal.target_score.get(figure(c.scenario, c.difficulty, c.defense))
        if rate is not None:
            scored.setdefault(c.defense, []).append(rate.unit)
    if not attacks and not scored:
        return []
    counts = {a.difficulty: cal.targets[a.perturbation_id] for a in [*attacks, *cells]}
    told = ", ".join(f"{d} {n:,}" for d, n in counts.items())
    lines = [f"targeted attacks are priced per target, each target attacked alone ({told} targets per cell)"]
    by_attack: dict[str, list[Any]] = {}
    for a in attacks:
        by_attack.setdefault(a.attack, []).append(cal.attack[a.perturbation_id])
    if by_attack:
        each = ", ".join(f"{name} {_short(max(r.fixed for r in rates))} + {_short(max(r.unit for r in rates))} per "
                         "target" for name, rates in by_attack.items())
        lines[0] += f": per cell a setup plus each target's attack, timed on a few targets and scaled by their budgets: {each}"
    if scored:
        each = ", ".join(f"{d} {_span(units)}" for d, units in scored.items())
        lines.append(f"targeted score cells evaluate each target alone: per cell a clean pass plus, per target, {each} "
                     "(a model without a receptive field, such as gcnsvd, runs on the whole graph for each target)")
    return lines


def plan_summary(work: Work, calibration: Calibration, fc: Forecast) -> dict[str, Any]:
    """The plan as plain data (``sweep --plan --json``): the cluster and the memory a task
    must fit, the calibration, the totals (seconds; ``bounds`` when figures were
    estimated), each stage (as the plan's table: ``train`` counts the poisoning tasks'
    trainings, ``peak_bytes`` is :meth:`Forecast.peak_task`) and :func:`task_figures`."""
    cal, cluster = calibration, fc.cluster
    limit, where = memory_limit(cluster)
    return {
        "cluster": {"cpus": cluster.cpus, "gpus": cluster.gpus, "local": cluster.local, "threads": cluster.threads,
                    "memory_bytes": limit, "memory_of": where},
        "calibration": {"device": cal.machine.get("device"), "processor": cal.machine.get("processor"),
                        "measured": cal.measured, "reused": cal.reused, "seconds": round(cal.seconds, 3),
                        "samples": list(cal.samples), "estimated": cal.estimated, "best_epoch": cal.best_epoch,
                        "check_budget": round(cal.check_budget, 1) or None},
        "totals": {"seconds": round(fc.total, 3), "upper_seconds": round(fc.upper, 3),
                   "setup_seconds": round(fc.setup, 3), "schedule_seconds": round(fc.schedule, 3),
                   "end_seconds": round(fc.total - fc.setup - fc.schedule, 3),
                   "bounds": [round(b, 3) for b in fc.bounds] if fc.bounds else None},
        "stages": {name: {"count": st.count, "task_seconds": round(st.task_seconds, 3),
                          "upper_task_seconds": round(st.upper, 3) if name == "train" else None,
                          "start": round(st.start, 3), "end": round(st.end, 3), "peak_bytes": fc.peak_task(name)}
                   for name, st in fc.stages.items()},
        "notes": list(fc.notes) + list(fc.pricing),
        "tasks": task_figures(work, cal, fc, limit),
    }


__all__ = ["CALL_S", "Cluster", "Forecast", "REDUCE_S", "StageForecast", "attack_seconds", "expected_epochs", "forecast",
           "memory_limit", "per_target_notes", "plan_summary", "score_peak", "score_seconds", "task_figures",
           "training_seconds"]
