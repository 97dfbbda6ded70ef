"""Calibration of a sweep's cost: a few epochs and steps of each kind of task, on the actual
graph and this machine, timed (plain Python, no Ray).

Each kind of work is measured where it runs: a training task on a fresh model, an attack on
its surrogate (or, for an adaptive cell, on the defense it attacks), a scoring call on a
held defense. Costs are linear in what the job sets (:class:`Rate`):

* training: ``fixed + epochs * unit``, early stopping off: a 2-epoch run (first calls
  allocate), its second epoch the unit on a large graph; on a small one a run of 3 to 40
  epochs (about :data:`~grb_dist.sweep.cost.timing.RUN_S`), the median of its epochs after
  the first the unit, read inside the run through the training loop's epoch hook. A model
  that reports no epochs takes the difference of two runs (:mod:`~grb_dist.sweep.cost.timing`);
* an attack: ``clean + fixed + steps * unit``: ``clean`` is the surrogate's clean pass, which
  the cells of one attack task share; measured as a cold 1-step run, then two warm runs of a
  few steps;
* scoring: one forward pass of a defense on freshly assembled tensors of a perturbed graph
  (the best of two), plus assembling them once per call;
* a per-target scenario's (``targeted``) attack and scoring: a setup plus T times one target's,
  timed through the real attack and evaluator on a few targets (:mod:`~grb_dist.sweep.cost.targeted`);
* early stopping: the first surrogate trained in full, when that is short
  (:data:`FULL_TRAINING_S`), and the job's cheapest trainings (:data:`BEST_EPOCHS_S`):
  their median best epoch stands for every training's.

Alongside the time, the peak resident memory of each measurement above the process's own
(the kernel's high-water mark) bounds the task's memory from below. Adaptive attacks are
measured on the last difficulty and scaled to the others by their transfer counterpart.

A graph above :data:`~grb_dist.sweep.cost.scaling.SAMPLE_ABOVE` nodes is measured on two samples
and each figure extrapolated to the whole graph (:mod:`grb_dist.sweep.cost.scaling`), checked
against a few measurements there (:mod:`grb_dist.sweep.cost.checks`); a budget bounds the
measuring (:func:`calibrate`).

Results are cached per machine (:mod:`grb_dist.sweep.cost.machine`), keyed by what each figure
depends on (the graph's or the sample's content, the model or attack parameters without
epochs, steps and seeds): a second ``--plan`` of the same job measures nothing.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from grb_dist.core import allocator
from grb_dist.core.config import canonical_json
from grb_dist.core.errors import ConfigError
from grb_dist.core.fileio import write_bytes
from grb_dist.core.names import TRANSFER
from grb_dist.sweep.job import content_hash
from grb_dist.sweep.cost.machine import (CALIBRATION_VERSION, Startup, StartupProbe, cache_dir, cache_path, code_hash,
                                    cpu_model, entries, gpu_machine, machine_identity, measure_startup)
from grb_dist.sweep.cells import AttackCell, ModelTask, Cells, Work
from grb_dist.sweep.cost.checks import Checks, architecture, whole_graph_checks
from grb_dist.sweep.cost import targeted
from grb_dist.sweep.cost.scaling import (CHECK_SCALE, SAMPLE_ABOVE, SAMPLE_NODES, SAMPLING, Progress, Rate, check_scale,
                                    extrapolate, fill, interleaved, sample_sizes)
from grb_dist.sweep.cost.timing import fit_rate, lengthened, run_counts, timed

#: The first surrogate is trained in full (to see where early stopping ends the job's
#: trainings) when that takes at most this long (seconds) by its calibrated rate.
FULL_TRAINING_S = 120.0

#: A first run longer than this (seconds) is a large graph's: it is timed, not repeated.
LARGE_S = 1.0


@dataclass
class Calibration:
    """The rates of every model, attack shape and defense of a run's work, on one machine,
    and what Ray costs around them (``startup``); ``measured`` / ``reused``: how many
    figures were measured now / read from the cache; ``seconds``: how long measuring took."""

    machine: dict[str, Any]
    train: dict[str, Rate]  # model file stem -> rate per epoch
    attack: dict[str, Rate]  # perturbation id -> rate per step
    score: dict[str, Rate]  # defense -> seconds of one forward pass (``fixed``)
    startup: Startup
    perturb: dict[str, Rate] = dataclasses.field(default_factory=dict)  # scenario -> assembling a perturbed graph
    best_epoch: int | None = None  # the median best epoch of a few full trainings (:func:`_best_epoch`)
    measured: int = 0
    reused: int = 0
    seconds: float = 0.0
    samples: tuple[int, ...] = ()  # nodes of the samples measured on (none: the graph itself)
    check: tuple[str, float, float, float] | None = None  # the full-size check: model, measured s, extrapolated s, scale
    architecture_checks: tuple[tuple[str, float, float, float], ...] = ()  # the same for other architectures
    attack_check: tuple[str, float, float, float] | None = None  # the same for attacks (:func:`~grb_dist.sweep.cost.checks.attack_check`)
    estimated: int = 0  # figures not measured within the budget
    check_budget: float = 0.0  # sampled, the first check not measured: the budget that would buy it (0: none needed)
    bounds: tuple["Calibration", ...] = ()  # with the estimated figures at their fastest and slowest
    # a per-target scenario's (cost.targeted): scenario:difficulty:defense -> a clean pass + ``unit`` per
    # target scored alone; perturbation id -> its targets (its rate in ``attack``: a setup + ``unit`` per target)
    target_score: dict[str, Rate] = dataclasses.field(default_factory=dict)
    targets: dict[str, int] = dataclasses.field(default_factory=dict)


def _rate(entry: Any) -> Rate | None:
    try:
        return Rate(float(entry["fixed"]), float(entry["unit"]), int(entry["peak"]), float(entry.get("clean", 0.0)))
    except (KeyError, TypeError, ValueError):
        return None


class _Calibrator:
    """Measures the rates a run's work needs, reusing the cache and the models it trained."""

    def __init__(self, cells: Cells, graph: Any, device: str, threads: int, fingerprint: str,
                 on_step: Callable[[str], None] | None, machine: Mapping[str, Any] | None = None) -> None:
        self.cells, self.graph, self.device, self.threads = cells, graph, device, threads
        self.fingerprint = fingerprint
        self.on_step = on_step or (lambda _: None)
        self.elsewhere = machine is not None  # another machine's figures: read, never measured here
        self.machine = dict(machine) if machine is not None else machine_identity(device, threads)
        self.path = cache_path(self.machine)
        self.cache = entries(self.path)
        self.tasks = {t.file_stem: t for t in cells.trainings}  # the poisoning scenario's too
        self.models: dict[str, Any] = {}  # file stem -> a briefly trained model
        self.perturbation: Any = None  # the last one an attack made (what scoring is timed on)
        self.perturbation_scenario = ""
        self.targeted: dict[str, Any] = {}  # attack key -> a few targets' perturbation (cost.targeted)
        self.measured = 0
        self.reused = 0
        self.epoch_ends: list[float] = []  # of the last training (:meth:`_train`)

    # -- keys: what each figure depends on
    def model_key(self, task: ModelTask) -> str:
        """A training's key; a transductive one's (trained on the whole graph)
        is shared by every perturbation it is trained on."""
        train = {k: v for k, v in task.train.items() if k not in ("epochs", "patience")}
        at = {**task.at, "warmup_epochs": 0} if task.at is not None else None  # as timed (see _train)
        what = {"dataset": self.fingerprint, "name": task.name, "params": dict(task.params), "train": train, "at": at}
        return content_hash({**what, "transductive": True} if task.transductive else what)

    def attack_key(self, a: AttackCell) -> str:
        params = {k: v for k, v in a.params.items() if k not in ("steps", "seed")}
        labels = self.model_key(self.tasks[a.labels_from]) if a.labels_from else None
        return content_hash({"dataset": self.fingerprint, "scenario": a.scenario, "attack": a.attack,
                             "params": params, "difficulty": a.difficulty,
                             "model": self.model_key(self.tasks[a.surrogate_model]), "labels": labels})

    def startup(self, cpus: int, dashboard: bool | None) -> Callable[[], Startup]:
        """Ray's start-up with ``cpus`` workers: from the cache, else measured beside the
        caller (:class:`~grb_dist.sweep.cost.machine.StartupProbe`); the function returned waits for it and caches it.
        Its ``cancel`` stops a measurement still running."""
        key = f"startup:{cpus}:{dashboard}"
        try:
            found = Startup(**{k: float(v) for k, v in self.cache[key].items() if k != "worker_bytes"},
                            worker_bytes=int(self.cache[key]["worker_bytes"]))
            self.reused += 1
            done = lambda: found  # noqa: E731
            done.cancel = lambda: None  # type: ignore[attr-defined]
            return done
        except (KeyError, TypeError, ValueError, AttributeError):
            pass
        if self.elsewhere:
            self._missing()
        self.on_step("timing a local Ray's start")
        probe = StartupProbe(cpus, dashboard)

        def finish() -> Startup:
            result = probe.result()
            self.cache[key] = dataclasses.asdict(result)
            self.measured += 1
            self.save()
            return result

        finish.cancel = probe.cancel  # type: ignore[attr-defined]
        return finish

    def _missing(self) -> None:
        raise ConfigError(
            f"the calibration of {self.machine.get('processor')} has no figure for part of this job's work; "
            f"run the same `grb-dist sweep ... --plan` once on a node with that GPU and copy its "
            f"{self.path.parent}/{self.path.name} here")

    def cached(self, key: str, measure: Callable[[], Rate]) -> Rate:
        rate = _rate(self.cache.get(key))
        self.reused += rate is not None
        if rate is None and self.elsewhere:
            self._missing()
        if rate is None:
            rate = measure()
            self.cache[key] = dataclasses.asdict(rate)
            self.measured += 1
            self.save()  # figure by figure: an interrupted calibration keeps what it measured
        return rate

    # -- measurements
    def model(self, stem: str) -> Any:
        """A model of ``stem`` trained for one epoch (what attacks and scoring run on)."""
        if stem not in self.models:
            self._train(self.tasks[stem], 1)
        return self.models[stem]

    def _train(self, task: ModelTask, epochs: int) -> tuple[float, int]:
        """Seconds and peak bytes of a training of ``epochs`` epochs; the seconds at which
        each epoch ended, less the time the kernel spent in the training's page faults until
        then (:meth:`_kernel`), are left in ``self.epoch_ends`` (empty for a model that
        trains by a procedure of its own, which reports no epochs)."""
        from grb_dist.models.train import report_epochs
        from grb_dist.sweep.worker import train_task

        # an adversarially trained model attacks from its first epoch here (no clean warm-up
        # epochs): every timed epoch is one of the attacked epochs that dominate its cost
        at = {**task.at, "warmup_epochs": 0} if task.at is not None else None
        quick = dataclasses.replace(task, train={**task.train, "epochs": epochs, "patience": epochs + 1}, at=at)
        ends: list[float] = []
        kernel = self._kernel()
        start, faults = time.perf_counter(), kernel()
        with report_epochs(lambda _: ends.append(time.perf_counter() - start - (kernel() - faults))):
            seconds, peak, result = timed(lambda: train_task(self.graph, quick, device=self.device,
                                                              transductive=task.transductive))
        self.epoch_ends = ends
        self.models[task.file_stem] = _to_model(self.graph, task, result.state_dict, self.device)
        return seconds, peak

    def _kernel(self) -> Callable[[], float]:
        """The process's kernel time per torch thread so far, read at each epoch's end,
        where the heap keeps a training's freed memory (``cache``, on the CPU); else 0. A
        training's heap grows over its first epochs, whose every new page the kernel faults
        in and zeroes; later epochs reuse it and fault none, and the difference is kernel time
        (figures: docs/performance.md, section "Freed memory"). So an epoch less the kernel's
        time is a long training's epoch, read off a few; a run's own faults stay in its fixed
        part. Under ``system`` every epoch faults, and nothing is taken off."""
        try:
            import resource
        except ImportError:  # not a Unix
            return lambda: 0.0
        if self.device != "cpu" or allocator.training_policy() != "cache":
            return lambda: 0.0
        threads = max(1, int(self.threads))
        return lambda: resource.getrusage(resource.RUSAGE_SELF).ru_stime / threads

    def _inside(self, seconds: float, peak: int) -> Rate | None:
        """The rate read inside the last training of ``seconds``: the median of its epochs
        after the first (the first pays for first calls), the rest of the run its fixed
        part; ``None`` for a model that reports no epochs (Pro-GNN) or a 1-epoch run. One
        run read inside, not the difference of two runs: each run's fixed part (building
        the model and its graphs) varies by more than a short epoch lasts."""
        ends = self.epoch_ends
        if len(ends) < 2:
            return None
        unit = statistics.median(b - a for a, b in zip(ends, ends[1:]))
        return Rate(max(0.0, seconds - len(ends) * unit), unit, peak)

    def read_inside(self, task: ModelTask, epochs: int = 2) -> tuple[Rate | None, float, int]:
        """A training of ``epochs`` epochs: its rate read inside it (:meth:`_inside`; with
        2, the second epoch), and the run's seconds and peak bytes."""
        seconds, peak = self._train(task, epochs)
        return self._inside(seconds, peak), seconds, peak

    def train_rate(self, task: ModelTask) -> Rate:
        def measure() -> Rate:
            self.on_step(f"training {task.name}" + (" (on the whole graph)" if task.transductive
                                                    else ""))
            # first calls allocate and compile: a 2-epoch training, read inside on a large
            # graph (its first epoch over LARGE_S), the warm-up on a small one
            rate, seconds, peak = self.read_inside(task)
            if rate is not None:
                if self.epoch_ends[0] > LARGE_S:
                    return rate
                n = max(3, run_counts(rate.unit)[1])  # about RUN_S of epochs, 3 to MAX_RUN
                longer, more = self._train(task, n)
                inside = self._inside(longer, more)
                return dataclasses.replace(inside, peak=max(peak, more)) if inside is not None else rate
            # a model that reports no epochs: the difference of two runs after a 1-epoch one
            warm = self._train(task, 1)
            epochs = run_counts(warm[0])
            runs = [warm if warm[0] > LARGE_S else self._train(task, epochs[0]), self._train(task, epochs[1])]
            epochs, runs = lengthened(epochs, runs, lambda n: self._train(task, n))
            return fit_rate(epochs, (runs[0][0], runs[1][0]), max(peak, *(p for _, p in (warm, *runs))))

        return self.cached(self.model_key(task), measure)

    def attack_rate(self, a: AttackCell) -> Rate:
        if a.selection is not None:  # each target attacked alone: priced per target
            return targeted.attack_rate(self, a)

        def measure() -> Rate:
            from grb_dist.attacks import SurrogateCache
            from grb_dist.sweep.worker import attack_task, attacker_labels

            who = a.surrogate if a.threat == TRANSFER else f"{a.threat} {a.surrogate}"
            self.on_step(f"{a.scenario} {a.attack} on {who}, {a.difficulty}")
            model = self.model(a.surrogate_model)
            labels = attacker_labels(self.graph, self.model(a.labels_from), self.device) if a.labels_from else None
            cache = SurrogateCache()

            def run(steps: int) -> tuple[float, int]:
                cell = dataclasses.replace(a, params={**a.params, "steps": steps})
                seconds, peak, result = timed(lambda: attack_task(self.graph, cell, model, device=self.device,
                                                                   cache=cache, labels=labels))
                self.perturbation, self.perturbation_scenario = result.perturbation, a.scenario
                return seconds, peak

            cold, warm = run(1), run(1)  # the cold run computes the shared clean pass
            if not a.gradient_steps:  # its length does not follow ``steps`` (RND, DICE, Metattack): a whole run
                return Rate(warm[0], 0.0, max(cold[1], warm[1]), max(0.0, cold[0] - warm[0]))
            steps = run_counts(warm[0])
            runs = [warm if steps[0] == 1 else run(steps[0]), run(steps[1])]
            steps, runs = lengthened(steps, runs, run)
            return fit_rate(steps, (runs[0][0], runs[1][0]), max(cold[1], warm[1], runs[1][1]), cold[0] - warm[0])

        return self.cached(self.attack_key(a), measure)

    def score_rate(self, defense: str) -> Rate:
        """One forward pass of ``defense`` on a perturbed graph it has not seen (a sweep's
        every call; models that pre-process the graph do it again), the best of two."""
        task = next(t for t in self.cells.targets if t.name == defense)

        def measure() -> Rate:
            from grb_dist.evaluation.evaluate import predict_tensors

            self.on_step(f"scoring {defense}")
            model = self.model(task.file_stem)
            runs = []
            for _ in range(2):
                tensors = self._perturbed()
                runs.append(timed(lambda: predict_tensors(model, tensors)))
            return Rate(min(s for s, _, _ in runs), 0.0, max(p for _, p, _ in runs))

        return self.cached("forward:" + self.model_key(task), measure)

    def best_epoch(self, task: ModelTask, rate: Rate) -> int | None:
        """The epoch of the lowest validation loss of ``task`` trained in full (on the whole
        graph, also when the calibration measured samples), as the sweep trains it (early
        stopping on), when that takes at most :data:`FULL_TRAINING_S` by ``rate``, its
        calibrated rate; else ``None``. It tells how long the job's trainings run."""
        epochs, patience = int(task.train.get("epochs", 200)), int(task.train.get("patience", 0) or 0)
        if rate.seconds(epochs) > FULL_TRAINING_S:
            return None

        def measure() -> Rate:
            from grb_dist.sweep.worker import train_task

            self.on_step(f"training {task.name} in full (where early stopping ends it)")
            return Rate(float(train_task(self.graph, task, device=self.device).meta["best_epoch"]), 0.0, 0)

        return int(self.cached(f"best:{self.model_key(task)}:{epochs}:{patience}", measure).fixed)

    def _perturbed(self) -> Any:
        """Fresh tensors of the graph with the last perturbation the calibration made."""
        from grb_dist.models.tensors import graph_tensors, perturb_tensors

        return perturb_tensors(graph_tensors(self.graph, self.device), self.perturbation)

    def perturb_rate(self, scenario: str) -> Rate:
        """Assembling a perturbed graph (once per scoring call), the best of two."""
        def measure() -> Rate:
            if self.perturbation is None or self.perturbation_scenario != scenario:
                from grb_dist.sweep.worker import attack_task

                cell = next(a for a in self.cells.attacks if a.scenario == scenario and a.threat == TRANSFER)
                cell = dataclasses.replace(cell, params={**cell.params, "steps": 1})  # one step of one attack
                self.perturbation = attack_task(self.graph, cell, self.model(cell.surrogate_model),
                                                device=self.device).perturbation
                self.perturbation_scenario = scenario
            runs = [timed(self._perturbed) for _ in range(2)]
            return Rate(min(s for s, _, _ in runs), 0.0, max(p for _, p, _ in runs))

        return self.cached(f"perturb:{self.fingerprint}:{scenario}", measure)

    def save(self) -> None:
        if not self.measured or self.elsewhere:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            merged = {**entries(self.path), **self.cache}  # another job's figures too
            write_bytes(canonical_json({"machine": self.machine, "entries": merged}).encode(), self.path)
        except OSError:  # a cache that cannot be written costs a calibration next time, nothing else
            pass


def _to_model(graph: Any, task: ModelTask, state_dict: Mapping[str, Any], device: str) -> Any:
    from grb_dist.sweep.worker import load_model

    return load_model(graph, task.name, dict(task.params), state_dict, device)


#: The kinds of figures: a per-target scenario's attacks (``targeted``) and scoring (``target-score``) apart.
KINDS = ("train", "attack", "targeted", "score", "target-score", "perturb")


@dataclass
class _Figure:
    """One figure of a calibration: its kind (:data:`KINDS`), its name in the
    :class:`Calibration`'s dict, and how a calibrator measures it."""

    kind: str
    name: str
    measure: Callable[["_Calibrator"], Rate]
    cell: AttackCell | None = None  # an attack figure's cell


def calibrate(cells: Cells, work: Work, graph: Any, fingerprint: str, *, device: str = "cpu", threads: int = 1,
              cpus: int = 1, dashboard: bool | None = None, on_step: Callable[[str], None] | None = None,
              machine: Mapping[str, Any] | None = None, sample: str = "auto",
              budget: float | None = None) -> Calibration:
    """The rates of every kind of task in ``work`` (of ``cells``, on ``graph`` whose content
    fingerprint is ``fingerprint``), measured with ``threads`` torch threads on ``device``
    or read from this machine's cache; Ray's start-up with ``cpus`` workers (at most this
    machine's cores) and ``dashboard`` as the sweep would start it. ``on_step(what)`` is
    called before each measurement, ``what`` with the figure's number and the time left.
    ``sample``: ``auto`` measures a graph above :data:`SAMPLE_ABOVE` nodes on two samples
    (:func:`sample_sizes`, :func:`grb_dist.datasets.sample.sample_graph`) and extrapolates
    (:func:`extrapolate`); ``full`` on the graph itself; ``sampled`` always on samples.
    ``budget``: seconds of measuring after which the figures left are not measured but
    taken between the fastest and the slowest measured figure of their kind
    (:attr:`Calibration.estimated`, :attr:`Calibration.bounds`); the first figure of each
    kind is measured whatever the budget, and a longer budget lets the full-size checks
    measure a larger graph (:func:`~grb_dist.sweep.cost.checks.check_limit`).
    ``machine``: another machine's identity (:func:`gpu_machine`), whose cached figures
    are used instead (a figure it lacks is an error: nothing is measured here)."""
    import torch

    start = time.perf_counter()
    sizes = sample_sizes(graph.num_nodes, sample)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    report = on_step or (lambda _: None)
    startup_of = None
    try:
        # the whole graph: the full-size checks and the best epoch are measured there
        whole = _Calibrator(cells, graph, device, threads, fingerprint, report, machine)
        # Ray's start runs beside the sampling, not beside a measurement: it slows what runs beside it, and
        # the first surrogate's figure scales every figure (docs/performance.md, "How accurate the plan is")
        startup_of = whole.startup(max(1, min(int(cpus), os.cpu_count() or 1)), dashboard)
        if sizes:
            from grb_dist.datasets.sample import sample_graph

            samples = [(sample_graph(graph, k, seed=0), k / graph.num_nodes) for k in sizes]
            calibrators = [_Calibrator(cells, g, device, threads, f"{fingerprint}:sample:{g.num_nodes}", report,
                                       machine) for g, _ in samples]
            shares = [share for _, share in samples]
        else:
            calibrators, shares = [whole], [1.0]
        startup = startup_of()
        lead = calibrators[0]
        figures, priced = _figures(cells, work)
        progress = Progress(len(figures), budget, report)
        rates: dict[str, dict[str, Rate]] = {kind: {} for kind in KINDS}
        points = _measure(figures, list(zip(calibrators, shares)), progress, named=bool(sizes))
        trained = list(work.trainings)
        checks = whole_graph_checks(cells, trained, figures, whole, points, budget, not progress.over()) if sizes \
            else Checks()
        for (kind, name), measured in points.items():
            # an architecture's own factor is read off its training epochs: it scales its
            # trainings, not its forward passes, whose growth it does not measure
            # (figures: docs/performance.md, section "How accurate the plan is")
            scale = (checks.attack or checks.epoch) if kind == "attack" else \
                checks.architectures.get(architecture(whole.tasks[name].name), checks.epoch) if kind == "train" \
                else checks.epoch
            rates[kind][name] = extrapolate(measured, scale[3] if scale else 1.0)
        rates["attack"].update(checks.measured)  # that figure is measured on the whole graph
        estimated = fill(rates, [(f.kind, f.name) for f in figures])
        attack = _attacks(rates, priced, loads := targeted.loads(graph, cells))  # per target: on the whole graph
        train = {t.file_stem: rates["train"][t.file_stem] for t in trained}
        whole.on_step = report
        best = _best_epoch(whole, cells, trained, rates["train"]) if not progress.over() else None
    finally:
        torch.set_num_threads(before)
        if startup_of is not None:  # interrupted: no Ray left starting
            startup_of.cancel()  # type: ignore[attr-defined]
    cal = Calibration(lead.machine, train, attack, rates["score"], startup, rates["perturb"], best,
                      sum(c.measured for c in {*calibrators, whole}), sum(c.reused for c in {*calibrators, whole}),
                      time.perf_counter() - start, samples=sizes, check=checks.epoch, attack_check=checks.attack,
                      architecture_checks=tuple(checks.architectures.values()), estimated=sum(map(len, estimated.values())),
                      check_budget=checks.budget,
                      target_score=rates["target-score"], targets={pid: n for pid, (n, _) in loads.items()})
    if estimated:
        cal.bounds = tuple(_with(cal, rates, {kind: {name: pair[side] for name, pair in names.items()}
                                              for kind, names in estimated.items()}, priced, loads) for side in (0, 1))
    return cal


#: Besides the first surrogate, the job's cheapest trainings are trained in full to see where
#: early stopping ends them, as many as take at most this together (seconds, by their rates).
BEST_EPOCHS_S = 30.0


def _best_epoch(whole: _Calibrator, cells: Cells, trained: list[ModelTask], rates: Mapping[str, Rate]) -> int | None:
    """The median best epoch of the first surrogate's full training (when it takes at most
    :data:`FULL_TRAINING_S`) and of the job's cheapest other trainings that take at most
    :data:`BEST_EPOCHS_S` together (:meth:`_Calibrator.best_epoch`), ``None`` without any:
    one model's best epoch stood for every training's (on cora-legacy's job the
    surrogate's 141, its 23 defenses' 81 on average)."""
    first = cells.surrogates[0]
    found = [whole.best_epoch(first, rates[first.file_stem])] if first.file_stem in rates else []
    spent, keys = 0.0, {whole.model_key(first)}
    by_cost = sorted(((rates[t.file_stem].seconds(int(t.train.get("epochs", 200))), t) for t in trained
                      if t.file_stem in rates and not t.transductive), key=lambda pair: pair[0])
    for cost, task in by_cost:
        if spent + cost > BEST_EPOCHS_S:
            break
        if whole.model_key(task) not in keys:  # another seed of a model trained: the same figure
            keys.add(whole.model_key(task))
            found.append(whole.best_epoch(task, rates[task.file_stem]))
            spent += cost
    found = [b for b in found if b is not None]
    return int(statistics.median(found)) if found else None


def _measure(figures: list[_Figure], where: list[tuple[_Calibrator, float]], progress: Progress, named: bool
             ) -> dict[tuple[str, str], list[tuple[float, Rate]]]:
    """Each figure measured by each calibrator: ``(kind, name) -> [(share of the nodes, rate)]``.
    The first figure of each kind comes first and is measured whatever the budget; the
    others only while ``progress`` is within it. ``named``: progress names the sample."""
    first: dict[str, _Figure] = {}
    for f in figures:
        first.setdefault(f.kind, f)
    points: dict[tuple[str, str], list[tuple[float, Rate]]] = {}
    for f in [*first.values(), *(f for f in figures if f not in first.values())]:
        if progress.over() and first[f.kind] is not f:
            continue
        for c, _ in where:
            c.on_step = lambda what, c=c: progress.step(what + (f" on {c.graph.num_nodes:,} nodes" if named else ""))
        points[f.kind, f.name] = [(share, f.measure(c)) for c, share in where]
        progress.done += 1
    return points


def _figures(cells: Cells, work: Work) -> tuple[list[_Figure], dict[str, tuple[str, ...]]]:
    """The figures ``work`` needs, in the order they are measured, and how each perturbation
    to compute is priced: by the figure of its shape (the cells of a shape differ by seed
    and steps only), or, for an adaptive shape off the last difficulty, by the figure of the
    same shape on the last difficulty scaled by the ratio of its transfer counterpart's
    costs here and there (perturbation id -> one figure's name, or the three)."""
    figures: dict[tuple[str, str], _Figure] = {}

    def add(kind: str, name: str, measure: Callable[[_Calibrator], Rate]) -> None:
        figures.setdefault((kind, name), _Figure(kind, name, measure))

    trained = work.trainings
    # the first surrogate first: its rate tells whether its full training (the best epoch) is
    # affordable, and the full-size check of a sampled calibration reads it, so a budget that
    # runs out early still leaves both
    for t in (*(cells.surrogates[:1] if any(t in cells.models for t in trained) else ()), *trained):
        add("train", t.file_stem, lambda c, t=t: c.train_rate(t))
    last = cells.spec.difficulties[-1]
    transfer = {(a.scenario, a.attack, a.difficulty): a for a in cells.attacks if a.threat == TRANSFER}
    shapes: dict[str, str] = {}  # a shape -> the perturbation id its figure is named by

    def add_attack(a: AttackCell) -> str:
        shape = canonical_json([a.scenario, a.attack, {k: v for k, v in a.params.items() if k not in ("steps", "seed")},
                                a.difficulty, a.surrogate_model, a.labels_from, a.threat])
        name, kind = shapes.setdefault(shape, a.perturbation_id), "targeted" if a.selection else "attack"
        figures.setdefault((kind, name), _Figure(kind, name, lambda c, a=a: c.attack_rate(a), a))
        return name

    priced: dict[str, tuple[str, ...]] = {}
    for a in work.attacks_to_run:
        ref = transfer.get((a.scenario, a.attack, last))
        here = transfer.get((a.scenario, a.attack, a.difficulty))
        if a.threat == TRANSFER or a.difficulty == last or ref is None or here is None:
            priced[a.perturbation_id] = (add_attack(a),)
            continue
        at_last = next(b for b in cells.attacks if (b.scenario, b.attack, b.surrogate_model, b.threat, b.difficulty)
                       == (a.scenario, a.attack, a.surrogate_model, a.threat, last))
        priced[a.perturbation_id] = tuple(add_attack(b) for b in (at_last, ref, here))
    for d in sorted({cell.defense for cell in work.todo}):
        add("score", d, lambda c, d=d: c.score_rate(d))
    for key in sorted({(s.scenario, s.difficulty, s.defense) for s in work.todo if s.per_target and s.perturbation_id}):
        add("target-score", targeted.figure(*key), lambda c, key=key: targeted.score_rate(c, *key))
    for sc in sorted({cell.scenario for cell in work.todo if not targeted.is_per_target(cell.scenario)}):
        add("perturb", sc, lambda c, sc=sc: c.perturb_rate(sc))  # per target: each target's in its scoring
    return interleaved(list(figures.values())), priced


def _attacks(rates: Mapping[str, Mapping[str, Rate]], priced: Mapping[str, tuple[str, ...]],
             loads: Mapping[str, tuple[int, float]]) -> dict[str, Rate]:
    """Each perturbation's rate from the attack figures (:func:`_figures`), a per-target
    one's per target (:func:`~grb_dist.sweep.cost.targeted.per_target`)."""
    figures = {**rates["attack"], **rates["targeted"]}
    out = {}
    for pid, names in priced.items():
        if len(names) == 1:
            out[pid] = figures[names[0]]
            continue
        base, ref, here = (figures[n] for n in names)
        total = ref.seconds(10) + ref.clean
        out[pid] = base.scaled((here.seconds(10) + here.clean) / total if total > 0 else 1.0)
    return targeted.per_target(out, loads)


def _with(cal: Calibration, rates: dict[str, dict[str, Rate]], replace: dict[str, dict[str, Rate]],
          priced: Mapping[str, tuple[str, ...]], loads: Mapping[str, tuple[int, float]]) -> Calibration:
    """``cal`` with the estimated figures replaced by ``replace`` (one side of the bounds)."""
    merged = {kind: {**rates[kind], **replace.get(kind, {})} for kind in KINDS}
    return dataclasses.replace(cal, train={k: merged["train"][k] for k in cal.train},
                               attack=_attacks(merged, priced, loads), score=merged["score"],
                               perturb=merged["perturb"], target_score=merged["target-score"], bounds=())


# the machine's identity and cache (cost.machine) and the scaling of sampled figures
# (cost.scaling) are re-exported: a calibration's callers need one module
__all__ = ["CALIBRATION_VERSION", "CHECK_SCALE", "Calibration", "architecture", "Rate", "SAMPLE_ABOVE", "SAMPLE_NODES", "SAMPLING",
           "Startup", "cache_dir", "cache_path", "calibrate", "check_scale", "code_hash", "cpu_model", "extrapolate",
           "gpu_machine", "machine_identity", "measure_startup", "sample_sizes"]
