"""Running a sweep on Ray, through its tasks (:mod:`grb_dist.sweep.tasks`, on the Ray edge).

Shape of a run (see ``docs/sweep.md``)::

    ray.put(graph) once
    train   : one task per missing (model, seed)        -> driver writes models/<name>-<seed>.pt
    attack  : one task per batch of missing perturbations, as soon as its surrogate is stored
              (surrogates train first; training and attack tasks then alternate, so every
              stage moves from the start)
                                                         -> driver writes perturbations/.../<id>.parquet
    score   : every perturbation -> the Scorer actor holding each defense (fractional GPU when
              present), as soon as both the perturbation and the defense are stored; a Scorer
              loads a defense's state_dict on its first call for it and keeps it
                                                         -> driver buffers the rows and writes them in
                                                            batches: scores/scenario=/dataset=/difficulty=/part-*.parquet

Work is submitted with a bound on in-flight refs and collected with ``ray.wait``; the driver
never blocks in ``ray.get`` on a ref that is not ready. The driver is the single writer of
the run directory (workers return results; the caller holds the run's lock), so cells are
written exactly once per run and the sweep needs no shared file system. Score rows are
buffered and written every ``flush_rows`` rows or ``flush_seconds`` seconds, whichever comes
first, and on every exit path (Ctrl-C included); a SIGKILL loses only the buffered rows,
whose cells the next run recomputes. Fault tolerance (``RaySettings.faults``): tasks have ``max_retries``; Scorer
actors ``max_restarts`` and ``max_task_retries``, and a scoring call that still fails with
the actor gone is resubmitted (up to ``resubmits`` times) to the restarted actor. Scorer
constructors take no object refs (Ray cannot promise to restore those on a restart,
ray-project/ray#53727): every scoring call carries the refs it needs, nested in a list, and a
restarted Scorer loads again from them.

Tasks and actors are named after their work (``train:gcn/s0``,
``attack:injection/fgsm/gcn/full/r0+3``, ``scorer:0``), so the dashboard and
``ray list tasks`` show which cell runs where; a local Ray's job is named after the run.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import os
import sys
import time
from dataclasses import replace
from typing import Any, Callable

from grb_dist.core.errors import GrbDistError
from grb_dist.core.names import TRANSFER
from grb_dist.core.resources import Peak
from grb_dist.core.graph import Graph
from grb_dist.models.io import state_dict_from_bytes, state_dict_to_bytes
from grb_dist.store import RunStore, ScoreWriter, schema
from grb_dist.sweep import tasks as ray_tasks
from grb_dist.sweep import worker
from grb_dist.sweep.cells import ATTACK_BATCH, AttackCell, Cells, PoisonTask, ScoreCell, needed_work
from grb_dist.sweep.placement import Placement, place
from grb_dist.sweep.sizing import Sizes, memory_held
from grb_dist.sweep.progress import Stage, SweepProgress, SweepSummary, Tally
from grb_dist.cluster.ray_edge import ActorLost, SweepMetrics, TaskFailed
from grb_dist.cluster.settings import RaySettings

log = logging.getLogger(__name__)


class SweepError(GrbDistError):
    """A sweep could not run (training failed, Ray refused the resources ...)."""


def train_task_name(task: Any) -> str:
    """The Ray name of a training task: ``train:<model>/s<seed>``."""
    return f"train:{task.name}/s{task.seed}"


def attack_task_name(cells: list[AttackCell]) -> str:
    """The Ray name of an attack task: its first cell,
    ``attack:<scenario>/<attack>/<surrogate>/<difficulty>/r<repeat>``, plus ``+k`` for the
    ``k`` other cells of its batch; an adaptive cell's surrogate reads ``adaptive:<defense>``."""
    a = cells[0]
    more = f"+{len(cells) - 1}" if len(cells) > 1 else ""
    return f"attack:{a.scenario}/{a.attack}/{_attacker(a)}/{a.difficulty}/r{a.repeat}{more}"


def _attacker(a: AttackCell) -> str:
    """Whom an attack cell attacks: its surrogate, or ``adaptive:<defense>``."""
    return a.surrogate if a.threat == TRANSFER else f"{a.threat}:{a.surrogate}"


def scorer_name(index: int) -> str:
    """The Ray name of Scorer actor ``index``: ``scorer:<index>``."""
    return f"scorer:{index}"


# ---------------------------------------------------------------- the sweep


def _partition(names: list[str], n: int) -> list[list[str]]:
    parts = [names[i::n] for i in range(n)]
    return [p for p in parts if p]


#: Without news from Ray, the driver reports progress at least this often (seconds).
HEARTBEAT = 2.0


def run_sweep(
    cells: Cells,
    graph: Graph,
    store: RunStore,
    settings: RaySettings = RaySettings(),
    *,
    on_progress: Callable[[SweepProgress], None] | None = None,
    flush_rows: int = 4096,
    flush_seconds: float = 10.0,
    sizes: Sizes | None = None,
    name: str | None = None,
) -> SweepSummary:
    """Compute every score cell of ``cells`` that ``store`` does not hold yet.

    Ray must be connected (:func:`connect`) and ``store`` opened for writing (under the
    run's lock). ``on_progress`` is called at the start, after each trained model,
    generated perturbation and computed cell, and every :data:`HEARTBEAT` seconds while
    nothing ends; an exception it raises (e.g. ``KeyboardInterrupt``) stops the sweep
    after writing the buffered rows and cancelling in-flight work, leaving only complete
    cells behind. Score rows are written every ``flush_rows`` rows or ``flush_seconds``
    seconds, whichever comes first. ``sizes``: the peak memory of each task, which it
    reserves of Ray (default: :class:`~grb_dist.sweep.sizing.Sizes` from the estimates).
    ``name``: the run in the sweep's metrics on Ray's export
    (:class:`~grb_dist.cluster.ray_edge.SweepMetrics`; default: the run directory).
    """
    return _Sweep(cells, graph, store, settings, on_progress, flush_rows, flush_seconds, sizes, name).run()


class _Sweep:
    """The state of one :func:`run_sweep` call, one method per stage: planning, submitting
    training, attack and scoring work, collecting each kind of result, and the cleanup."""

    def __init__(self, cells: Cells, graph: Graph, store: RunStore, settings: RaySettings,
                 on_progress: Callable[[SweepProgress], None] | None, flush_rows: int,
                 flush_seconds: float, sizes: Sizes | None = None, name: str | None = None) -> None:
        self.start = time.perf_counter()
        self.cells, self.graph, self.store, self.settings = cells, graph, store, settings
        self.on_progress = on_progress
        self.spec = cells.spec
        self.writer = store.score_writer(flush_rows, flush_seconds)
        # the timeline of this invocation: one row per finished task, written at the end
        self.invocation = f"{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S}-{os.getpid()}"
        self.timeline: list[dict[str, Any]] = []
        identity = store.manifest()["dataset"]
        self.label, self.fingerprint = identity["label"], identity["fingerprint"]
        work = self.work = needed_work(cells, store.done_cells(), store.has_perturbation)
        self.sizes = sizes or Sizes(cells, graph)
        self.todo = list(work.todo)
        self.total = len(cells.scores)
        self.skipped = self.total - len(self.todo)
        # progress of the three stages; scored cells are the summary's counts
        totals = work.totals()
        self.trained, self.attacked = Stage(total=totals["train"]), Stage(total=totals["attack"])
        self.scored = Stage(self.skipped, self.total, 0, self.skipped)
        self.stages = {"train": self.trained, "attack": self.attacked, "score": self.scored}
        self.tally = Tally()  # per scenario, for the metrics
        self.tally.totals.update(("score", c.scenario) for c in cells.scores)
        self.tally.totals.update(("attack", a.scenario) for a in work.attacks_needed)
        todo_ids = {c.cell_id for c in work.todo}
        self.tally.add("score", (c for c in cells.scores if c.cell_id not in todo_ids), "done")  # stored ones
        self.computed = 0
        self.errors: list[str] = []
        self.scorers: list = []
        self.worker: str | None = None  # the actor of the result being collected, and what its call reserved
        self.reserved: tuple[int | None, int | None] = (None, None)
        self.ray: Placement | None = None  # set by connect()
        self.name = name or str(store.root)
        self.metrics: SweepMetrics | None = None  # set by connect()

        # which perturbations and models this invocation needs; poisoning cells are scored by
        # their own training task (a PoisonTask per perturbation and defense)
        self.todo_by_pert: dict[str | None, dict[str, list[ScoreCell]]] = {}
        for c in self.todo:  # a per-target scenario's clean rows are scored on its targets: a key of their own
            if not c.trained_on_perturbation:
                key = ("clean", c.scenario, c.difficulty) if c.perturbation_id is None and c.per_target else None
                self.todo_by_pert.setdefault(key or c.perturbation_id, {}).setdefault(c.difficulty, []).append(c)
        self.poison_by_pert: dict[str | None, list[PoisonTask]] = {}
        for pt in work.poisoned:
            self.poison_by_pert.setdefault(pt.perturbation_id, []).append(pt)
        self.poison_queue: list[tuple[Any, PoisonTask]] = []
        self.attacks_needed, self.attacks_to_run = list(work.attacks_needed), list(work.attacks_to_run)
        self.target_names = work.scored_defenses
        self.tasks = list(work.models)
        self.params_of = {t.file_stem: dict(t.params) for t in cells.models}
        self.name_of = {t.file_stem: t.name for t in cells.models}
        self.seed_of = {t.name: t.seed for t in cells.targets}
        self.target_stem = {t.name: t.file_stem for t in cells.targets}
        self.defenses_of: dict[str, list[str]] = {}  # file stem -> the defenses it is
        for n in self.target_names:
            self.defenses_of.setdefault(self.target_stem[n], []).append(n)

        # work in flight and waiting
        self.in_flight: dict[Any, tuple] = {}
        self.running = {"train": 0, "attack": 0, "poison": 0}  # tasks in flight
        self.batch_left: dict[int, int] = {}  # attack batch -> its cells still in flight
        self.batch_ids = itertools.count()
        self.state_refs: dict[str, Any] = {}  # file stem -> ref of the stored state_dict
        self.train_secs: dict[str, float] = {}
        self.holder: dict[str, int] = {}  # defense -> index of the Scorer holding it
        # perturbation id -> (attack seconds, size columns of its score rows)
        self.pert_info: dict[str | None, tuple[float, dict]] = {None: (0.0, worker.perturbation_sizes(None))}
        # defense -> scoring work waiting for its model: (perturbation ref, id, difficulty, cell)
        self.waiting: dict[str, list[tuple[Any, str | None, str, ScoreCell]]] = {}
        self.train_queue: list = []
        self.attack_queue: list[AttackCell] = []

    # -- progress ---------------------------------------------------------------------------

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def count(self, stage: str, items: list, state: str) -> None:
        """``items`` (cells or perturbations) of ``stage`` ended ``done`` or ``failed``."""
        counts = self.stages[stage]
        setattr(counts, state, getattr(counts, state) + len(items))
        self.tally.add(stage, items, state)

    def begin(self, stage: Stage) -> None:
        if stage.started is None:
            stage.started = self.elapsed()

    def report(self, phase: str | None = None) -> None:
        now = self.elapsed()
        for stage in self.stages.values():
            if stage.complete and stage.finished is None and stage.started is not None:
                stage.finished = now
        if phase is None:
            phase = next((name for name, stage in self.stages.items() if not stage.complete), "score")
        if self.metrics is not None:
            for name, stage in self.stages.items():
                fresh = stage.done - stage.skipped
                # a model serves every scenario: the train stage's one series is "all"
                counts = self.tally.by_scenario(name) or {"all": (stage.done, stage.failed, stage.total)}
                self.metrics.stage(name, counts, per_minute=60 * fresh / max(now - stage.started, 1e-9)
                                   if stage.started else 0.0)
            self.metrics.score_rows(buffered=len(self.writer), written=self.writer.rows_written)
        if self.on_progress is not None:
            self.on_progress(SweepProgress(self.scored.done, self.total, self.scored.failed, now, phase,
                                           self.computed, tuple(self.scorers), replace(self.trained),
                                           replace(self.attacked), replace(self.scored)))

    # -- the run ----------------------------------------------------------------------------

    def run(self) -> SweepSummary:
        if not self.todo:
            self.report("plan")
            return SweepSummary(self.total, self.skipped, 0, self.skipped, 0, time.perf_counter() - self.start)
        self.report("plan")
        self.connect()
        try:
            self.start_scorers()
            self.queue_work()
            self.loop()
        finally:
            self.cleanup(propagating=sys.exc_info()[0] is not None)
        return SweepSummary(self.total, self.scored.done, self.computed, self.skipped, self.scored.failed,
                            time.perf_counter() - self.start, self.errors, *memory_held(self.timeline))

    def connect(self) -> None:
        """What this invocation asks of Ray (:func:`~grb_dist.sweep.placement.place`): its
        tasks' and actors' resources on this cluster, its device workers on a GPU cluster,
        and the graph and the registrations (user models, defenses and attacks) in the
        object store, once."""
        self.ray = place(self.cells, self.work, self.graph, self.settings, self.target_names, self.sizes)
        self.metrics = SweepMetrics(self.name)

    def start_scorers(self) -> None:
        # Scorers start at once: they load each defense on its first scoring call
        for i, part in enumerate(_partition(self.target_names, min(self.ray.n_scorers, len(self.target_names)))):
            self.scorers.append(ray_tasks.start_scorer(scorer_name(i), self.ray.scorer_opts))
            self.holder.update({n: i for n in part})

    def queue_work(self) -> None:
        """Queue the models and perturbations to compute; score what is already stored."""
        store, trained = self.store, self.trained
        self.train_queue = []
        for t in self.tasks:
            if store.has_model(t.file_stem, t.model_id):
                self.model_ready(t.file_stem)
                trained.done += 1
                trained.skipped += 1
            else:
                self.train_queue.append(t)
        if None in self.todo_by_pert or None in self.poison_by_pert:
            self.submit_scores(None, None)
        for key in [k for k in self.todo_by_pert if isinstance(k, tuple)]:
            targets = worker.select_targets(self.graph, key[2], self.spec.target_selection(key[1]))
            self.submit_scores(ray_tasks.put(worker.AttackResult(None, None, 0.0, targets)), key)
        to_run = {a.perturbation_id for a in self.attacks_to_run}
        self.attack_queue = list(self.attacks_to_run)
        for a in self.attacks_needed:  # perturbations stored by an earlier run: score them only
            if a.perturbation_id not in to_run:
                self.score_stored(a)

    def score_stored(self, a: AttackCell) -> None:
        """Score a perturbation stored by an earlier run; recompute it when unreadable."""
        store = self.store
        try:
            inj = store.read_perturbation(a.perturbation_id)
            secs = float(store.perturbation_meta(a.perturbation_id)["attack_seconds"])
        except GrbDistError as exc:  # unreadable: recompute it
            log.warning("%s", exc)
            self.attack_queue.append(a)
            for stem in filter(None, (a.surrogate_model, a.labels_from)):
                if stem not in self.state_refs and all(t.file_stem != stem for t in self.train_queue):
                    added = [s for s in self.cells.models if s.file_stem == stem][:1]
                    self.train_queue[:0] = added
                    self.trained.total += len(added)
            return
        self.count("attack", [a], "done")
        self.attacked.skipped += 1
        self.pert_info[a.perturbation_id] = (secs, worker.perturbation_sizes(inj))
        result = worker.AttackResult(a.perturbation_id, inj, secs, worker.scored_nodes(self.graph, a))
        self.submit_scores(ray_tasks.put(result), a.perturbation_id)

    def loop(self) -> None:
        """Keep work in flight and collect it as it ends, until nothing is left."""
        self.report()
        while self.train_queue or self.attack_queue or self.poison_queue or self.in_flight or self.waiting:
            self.fill()
            if not self.in_flight:
                raise SweepError("the sweep stalled: work is left but nothing can run (a bug; please report it)")
            due = self.writer.seconds_until_due()
            ready = ray_tasks.wait(list(self.in_flight), HEARTBEAT if due is None else min(due, HEARTBEAT))
            if self.writer.due():
                self.writer.flush()
            if not ready:
                self.report()
            for ref in ready:
                kind, info = self.in_flight.pop(ref)
                self.worker = self.ray.done(ref) if kind != "score" else scorer_name(info[0])
                self.reserved = self.ray.reservation(ref, kind)
                if kind == "train":
                    self.on_trained(ref, info)
                elif kind == "attack":
                    self.on_attacked(ref, info)
                elif kind == "poison":
                    self.on_poisoned(ref, info)
                else:
                    self.on_scored(ref, info)

    def record(self, stage: str, task: str, seconds: float, peak: Peak | None) -> None:
        """A finished task in this invocation's timeline: it ended now (when the driver got
        its result) and started ``seconds`` (measured by the worker) before, on the actor that
        ran it (a device worker or a Scorer; none for a Ray task), and held ``peak`` of what it reserved."""
        end = dt.datetime.now(dt.timezone.utc)
        self.timeline.append({"stage": stage, "task": task, "finished": end, "worker": self.worker,
                              "started": end - dt.timedelta(seconds=max(0.0, float(seconds))),
                              "peak_memory": peak and peak.host, "peak_gpu_memory": peak and peak.gpu,
                              "reserved_memory": self.reserved[0], "reserved_gpu_memory": self.reserved[1]})

    def cleanup(self, *, propagating: bool) -> None:
        """Write the buffered rows and the timeline, cancel in-flight work and stop the Scorers."""
        _flush_on_exit(self.writer, propagating=propagating)
        if self.timeline:
            try:
                self.store.write_timeline(self.invocation, self.timeline)
            except OSError as exc:  # informational: never hides the error already propagating
                if not propagating:
                    raise
                log.error("the timeline of this sweep could not be written: %s", exc)
        ray_tasks.cancel(list(self.in_flight))
        ray_tasks.kill(self.scorers)
        if self.ray is not None:
            self.ray.close()
        if self.metrics is not None and self.settings.resolved_address() is not None:
            self.report()  # the rows just written; a joined cluster keeps the end state on its dashboard
            self.metrics.settle()

    # -- submitting work ----------------------------------------------------------------------

    def next_work(self) -> tuple[str, Any] | None:
        """Training and attack tasks alternate once an attack can run (its surrogate is
        stored), so that defenses, perturbations and scores all progress early."""
        attack_queue = self.attack_queue
        stored = self.state_refs
        ready = next((a for a in attack_queue if a.surrogate_model in stored and (a.labels_from or a.surrogate_model)
                      in stored), None)
        if self.train_queue and (ready is None or self.running["train"] <= self.running["attack"]):
            return "train", self.train_queue.pop(0)
        if ready is not None:
            # cells on the same surrogate and difficulty share its clean pass; batch
            # them, but keep enough batches to occupy every CPU
            same = [b for b in attack_queue if (b.surrogate_model, b.labels_from, b.difficulty) ==
                    (ready.surrogate_model, ready.labels_from, ready.difficulty)]
            size = max(1, min(ATTACK_BATCH, len(same) // max(1, int(self.ray.cpus))))
            batch = same[:size]
            for b in batch:
                attack_queue.remove(b)
            return "attack", batch
        # a defense's clean model that an adaptive attack runs on is a training task of its
        # own: its poisoning task waits for it, then loads it
        training = {t.file_stem for t in self.train_queue} | {
            t.file_stem for kind, t in self.in_flight.values() if kind == "train"}
        for i, (_, pt) in enumerate(self.poison_queue):
            if pt.model.file_stem not in training:
                return "poison", self.poison_queue.pop(i)
        return None

    def fill(self) -> None:
        """Submit training and attack tasks up to the bound on in-flight refs."""
        while len(self.in_flight) < self.ray.max_in_flight and self.ray.can_submit():
            work = self.next_work()
            if work is None:
                break
            kind, item = work
            self.running[kind] += 1
            if kind == "train":
                self.submit_train(item)
            elif kind == "attack":
                self.submit_attack(item)
            else:
                self.submit_poison(*item)

    def submit_train(self, t: Any) -> None:
        ref, = self.ray.train(t, train_task_name(t))
        self.in_flight[ref] = ("train", t)
        self.begin(self.trained)

    def submit_attack(self, batch: list[AttackCell]) -> None:
        stems = filter(None, (batch[0].surrogate_model, batch[0].labels_from))
        models = [(self.name_of[s], self.params_of[s], self.state_refs[s]) for s in stems]
        refs = self.ray.attack(batch, models, attack_task_name(batch))
        batch_id = next(self.batch_ids)
        self.batch_left[batch_id] = len(batch)
        for r, a in zip(refs, batch):
            self.in_flight[r] = ("attack", (a, batch_id))
        self.begin(self.attacked)

    def submit_score(self, i: int, pert_ref: Any, difficulty: str, group: list[ScoreCell], attempt: int) -> None:
        target_stem = self.target_stem
        models = [(c.defense, self.params_of[target_stem[c.defense]], self.state_refs[target_stem[c.defense]],
                   self.train_secs[target_stem[c.defense]]) for c in group]
        ref = ray_tasks.submit_score(self.scorers[i], [self.ray.graph_ref, models, self.ray.registrations], pert_ref,
                                     difficulty, [c.defense for c in group])
        self.in_flight[ref] = ("score", (i, pert_ref, difficulty, group, attempt))
        self.begin(self.scored)

    def submit_poison(self, pert_ref: Any, pt: PoisonTask) -> None:
        """Train ``pt``'s defense on its poisoned graph and score it (load it when stored)."""
        m = self.store.has_model(pt.model.file_stem, pt.model.model_id)
        state = ray_tasks.put(self.store.read_model(pt.model.file_stem, state_dict_from_bytes)) if m else None
        c = pt.cells[0]
        name = f"poison:{c.defense}/{c.attack}/{c.surrogate}/r{c.repeat}"
        ref, = self.ray.poison(pt, pert_ref, state, name)
        self.in_flight[ref] = ("poison", pt)
        self.begin(self.scored)

    def submit_scores(self, pert_ref: Any, pid: str | None) -> None:
        """Score a stored perturbation against every defense already stored; the other
        defenses' cells wait for their model (:meth:`model_ready`). A poisoning
        perturbation queues the trainings on it instead."""
        self.poison_queue.extend((pert_ref, pt) for pt in self.poison_by_pert.get(pid, ()))
        for difficulty, cells in self.todo_by_pert.get(pid, {}).items():
            by_scorer: dict[int, list[ScoreCell]] = {}
            for c in cells:
                if self.target_stem[c.defense] in self.state_refs:
                    by_scorer.setdefault(self.holder[c.defense], []).append(c)
                else:
                    self.waiting.setdefault(c.defense, []).append((pert_ref, pid, difficulty, c))
            for i, group in by_scorer.items():
                self.submit_score(i, pert_ref, difficulty, group, 0)

    def model_ready(self, stem: str) -> None:
        # what the Scorers hold is exactly what is stored
        self.state_refs[stem] = ray_tasks.put(self.store.read_model(stem, state_dict_from_bytes))
        self.train_secs[stem] = float(self.store.read_model_meta(stem)["train_seconds"])
        for defense in self.defenses_of.get(stem, []):  # its waiting cells, one call per perturbation
            groups: dict[tuple[str | None, str], tuple[Any, list[ScoreCell]]] = {}
            for pert_ref, pid, difficulty, c in self.waiting.pop(defense, []):
                groups.setdefault((pid, difficulty), (pert_ref, []))[1].append(c)
            for (_, difficulty), (pert_ref, group) in groups.items():
                self.submit_score(self.holder[defense], pert_ref, difficulty, group, 0)

    # -- collecting results -------------------------------------------------------------------

    def on_trained(self, ref: Any, t: Any) -> None:
        self.running["train"] -= 1
        try:
            result_model = ray_tasks.get(ref)
        except TaskFailed as exc:
            raise SweepError(f"training {t.name} (seed {t.seed}) failed: {exc}") from None
        self.store.write_model(t.file_stem, state_dict_to_bytes(result_model.state_dict), result_model.meta)
        self.record("train", f"{t.role} {t.name} (seed {t.seed})", result_model.meta.get("train_seconds", 0.0),
                    result_model.peak)
        self.model_ready(t.file_stem)
        self.trained.done += 1
        self.report()

    def on_attacked(self, ref: Any, info: tuple[AttackCell, int]) -> None:
        a, batch_id = info
        self.batch_left[batch_id] -= 1
        if not self.batch_left[batch_id]:
            del self.batch_left[batch_id]
            self.running["attack"] -= 1
        try:
            result: worker.AttackResult = ray_tasks.get(ref)
        except TaskFailed as exc:
            lost = [c for cells in self.todo_by_pert.get(a.perturbation_id, {}).values() for c in cells]
            self.count("score", lost + [c for pt in self.poison_by_pert.get(a.perturbation_id, ()) for c in pt.cells],
                       "failed")
            self.count("attack", [a], "failed")
            self.errors.append(f"{a.attack} on {_attacker(a)} ({a.difficulty}, repeat {a.repeat}): {exc}")
            log.error("attack failed: %s", self.errors[-1])
            self.report()
            return
        lo, hi = result.perturbation.feat_min, result.perturbation.feat_max
        self.store.write_perturbation(a.perturbation_id, result.perturbation, schema.perturbation_meta(
            a, config_hash=self.cells.config_hash, dataset=self.label, dataset_fingerprint=self.fingerprint,
            feat_lim_min=lo, feat_lim_max=hi, attack_seconds=result.seconds))
        self.pert_info[a.perturbation_id] = (result.seconds, worker.perturbation_sizes(result.perturbation))
        self.record("attack", f"{a.attack} on {_attacker(a)}, {a.difficulty}, repeat {a.repeat}", result.seconds,
                    result.peak)
        self.submit_scores(ref, a.perturbation_id)  # the attack's own ref: no copy through the driver
        self.count("attack", [a], "done")
        rate = self.tally.attacked(a.attack, a.gradient_steps, result.seconds)
        if rate is not None and self.metrics is not None:
            self.metrics.steps_per_second(a.attack, rate)
        self.report()

    def on_poisoned(self, ref: Any, pt: PoisonTask) -> None:
        self.running["poison"] -= 1
        c0 = pt.cells[0]
        try:
            result: worker.PoisonResult = ray_tasks.get(ref)
        except TaskFailed as exc:
            self.count("score", pt.cells, "failed")
            self.errors.append(f"poisoning {c0.defense} with {c0.attack} on {c0.surrogate} (repeat {c0.repeat}): {exc}")
            log.error("poisoning failed: %s", self.errors[-1])
            self.report()
            return
        stem = pt.model.file_stem
        if result.trained is not None:
            self.store.write_model(stem, state_dict_to_bytes(result.trained.state_dict), result.trained.meta)
            by = c0.attack if c0.threat == TRANSFER else f"{c0.threat} {c0.attack}"
            self.record("train", f"{c0.defense} poisoned by {by} (repeat {c0.repeat})",
                        result.trained.meta.get("train_seconds", 0.0), result.peak)
        own = pt.selection is not None and pt.perturbation_id is not None  # per-target trainings: not stored
        train_seconds = None if own else float(self.store.read_model_meta(stem)["train_seconds"])
        attack_seconds, sizes = self.pert_info[pt.perturbation_id]
        rows = [schema.score_row(c, config_hash=self.cells.config_hash, dataset=self.label,
                                 dataset_fingerprint=self.fingerprint, defense_seed=pt.model.seed,
                                 result={**result.results[c.difficulty],
                                         **({} if own else {"defense_train_seconds": train_seconds})},
                                 sizes=sizes, attack_seconds=attack_seconds) for c in pt.cells]
        self.writer.add(rows)
        self.count("score", pt.cells, "done")
        self.computed += len(rows)
        self.report()

    def on_scored(self, ref: Any, info: tuple) -> None:
        i, pert_ref, difficulty, group, attempt = info
        try:
            scored: ray_tasks.Scored = ray_tasks.get(ref)
        except ActorLost as exc:
            if attempt < self.settings.faults.resubmits:
                log.warning("scorer %d died (%s); resubmitting", i, exc)
                self.submit_score(i, pert_ref, difficulty, group, attempt + 1)
            else:
                self.count("score", group, "failed")
                self.errors.append(f"scoring on scorer {i} failed: {exc}")
                self.report()
            return
        except TaskFailed as exc:
            self.count("score", group, "failed")
            self.errors.append(f"scoring {group[0].attack} ({difficulty}): {exc}")
            self.report()
            return
        by_def = {r["defense"]: r for r in scored.results}
        self.record("score", f"{group[0].attack}, {difficulty}: {len(group)} cell{'s' * (len(group) != 1)} on scorer {i}",
                    sum(float(r.get("score_seconds", 0.0)) for r in scored.results), scored.peak)
        rows = []
        for c in group:
            attack_seconds, sizes = self.pert_info[c.perturbation_id]
            rows.append(schema.score_row(c, config_hash=self.cells.config_hash, dataset=self.label,
                                         dataset_fingerprint=self.fingerprint, defense_seed=self.seed_of[c.defense],
                                         result=by_def[c.defense], sizes=sizes, attack_seconds=attack_seconds))
        self.writer.add(rows)
        for c in group:
            self.count("score", [c], "done")
            self.computed += 1
            self.report()


def _flush_on_exit(writer: ScoreWriter, *, propagating: bool) -> None:
    """Write the buffered rows on the way out; a failure to do so does not hide the error
    that is already propagating (the rows are then recomputed by the next run)."""
    try:
        writer.flush()
    except Exception:
        if not propagating:
            raise
        log.exception("could not write the buffered score rows (they will be recomputed)")


__all__ = ["SweepError", "SweepProgress", "SweepSummary", "attack_task_name", "run_sweep", "scorer_name",
           "train_task_name"]
