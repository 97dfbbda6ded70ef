"""Running a sweep on Ray: the only module of grb_dist that imports Ray.

Shape of a run (see ``docs/sweep.md``)::

    ray.put(graph) once
    train   : one task per missing (model, seed)        -> driver writes models/<name>-<seed>.pt
    hold    : Scorer actors load the target state_dicts once (fractional GPU when present),
              as soon as every needed defense is stored
    attack  : one task per missing perturbation, as soon as its surrogate is stored (surrogates
              train first, so attacks overlap the defenses' training)
                                                         -> driver writes perturbations/.../<id>.parquet
    score   : every perturbation -> every Scorer (each holds a share of the defenses)
                                                         -> driver buffers the rows and writes them in
                                                            batches: scores/scenario=/dataset=/difficulty=/part-*.parquet

Work is submitted with a bound on in-flight refs and collected with ``ray.wait``; the driver
never blocks in ``ray.get`` on a ref that is not ready. The driver is the single writer of
the run directory (workers return results; the caller holds the run's lock), so cells are
written exactly once per run and the sweep needs no shared file system. Score rows are
buffered and written every ``flush_rows`` rows or ``flush_seconds`` seconds, whichever comes
first, and on every exit path (Ctrl-C included); a SIGKILL loses only the buffered rows,
whose cells the next run recomputes. Fault tolerance: tasks have ``max_retries``; Scorer
actors ``max_restarts`` and ``max_task_retries``, and a scoring call that still fails with
the actor gone is resubmitted (up to ``resubmits`` times) to the restarted actor.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlparse

import ray
import ray.exceptions

import grb_dist
from grb_dist.errors import ConfigError, GrbDistError
from grb_dist.graph import Graph
from grb_dist.store import RunStore, ScoreWriter
from grb_dist.sweep import worker
from grb_dist.sweep.spec import CLEAN, AttackCell, Plan, ScoreCell

log = logging.getLogger(__name__)


class SweepError(GrbDistError):
    """A sweep could not run (training failed, Ray refused the resources ...)."""


@dataclass(frozen=True)
class RaySettings:
    """Every Ray option of a sweep, in one place.

    Attributes:
        address: cluster to join (``auto``, ``host:port``, ``ray://host:port``); ``None``
            uses ``$RAY_ADDRESS`` or starts a local Ray.
        num_cpus: CPUs of a local Ray (``None`` = all); ignored when joining a cluster.
        include_dashboard: start the dashboard of a local Ray (``None`` = Ray's default).
        max_in_flight: bound on submitted-but-unfinished attack tasks and scoring calls
            (``0`` = twice the cluster's CPUs).
        train_num_cpus / attack_num_cpus: CPUs reserved per training / attack task.
        scorer_num_cpus: CPUs reserved per Scorer actor. The default 0 lets scoring (forward
            passes only) share cores with attack tasks, so that one-CPU clusters never
            deadlock; raise it to reserve cores on big nodes.
        task_num_gpus / scorer_num_gpus: GPU share per task / Scorer when the cluster has
            GPUs (fractions let several share a card); ignored on CPU-only clusters.
        num_scorers: Scorer actors, each holding a share of the defenses (``0`` = one per
            two cluster CPUs or per GPU, at most one per defense).
        max_retries: retries of a failed training or attack task (worker crash).
        max_restarts / max_task_retries: restarts of a dead Scorer and retries of its calls.
        resubmits: resubmissions of a scoring call that failed because its actor died.
        threads: torch intra-op threads of every training and attack task and Scorer actor
            (1..1024; ``None`` = Ray's default), passed as ``$GRB_DIST_TORCH_THREADS`` in
            their runtime environment.
    """

    address: str | None = None
    num_cpus: int | None = None
    include_dashboard: bool | None = None
    max_in_flight: int = 0
    train_num_cpus: float = 1.0
    attack_num_cpus: float = 1.0
    scorer_num_cpus: float = 0.0
    task_num_gpus: float = 0.25
    scorer_num_gpus: float = 0.25
    num_scorers: int = 0
    max_retries: int = 3
    max_restarts: int = 4
    max_task_retries: int = 2
    resubmits: int = 3
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.threads is not None and not 1 <= self.threads <= 1024:
            raise ConfigError(f"--threads must be in 1..1024, got {self.threads}")
        if self.num_cpus is not None and self.num_cpus < 1:
            raise ConfigError(f"--num-cpus must be >= 1, got {self.num_cpus}")
        if self.max_in_flight < 0 or self.num_scorers < 0:
            raise ConfigError("max_in_flight and num_scorers must be >= 0 (0 = automatic)")
        for name in ("train_num_cpus", "attack_num_cpus"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0")
        for name in ("scorer_num_cpus", "task_num_gpus", "scorer_num_gpus"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0")
        if min(self.max_retries, self.max_restarts, self.max_task_retries, self.resubmits) < 0:
            raise ConfigError("retry and restart counts must be >= 0")

    def resolved_address(self) -> str | None:
        return self.address or os.environ.get("RAY_ADDRESS") or None


@dataclass
class RayContext:
    """What :func:`connect` did: whether it started Ray here, and the dashboard URL."""

    started: bool
    dashboard_url: str | None
    cpus: float
    gpus: float
    reaper: Any = None  # grb_dist.reaper.Reaper of a local Ray started here


def _check_reachable(address: str) -> None:
    if address == "auto" or address.startswith("local"):
        return
    parsed = urlparse(address if "://" in address else f"tcp://{address}")
    host, port = parsed.hostname, parsed.port
    if not host or not port:
        raise ConfigError(f"Ray address {address!r} is not host:port, ray://host:port or auto")
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as exc:
        raise ConfigError(f"cannot reach Ray at {address}: {exc.strerror or exc}") from None


def connect(settings: RaySettings) -> RayContext:
    """Join the cluster of ``settings`` or start a local Ray; raise ConfigError when unreachable."""
    address = settings.resolved_address()
    if address:
        _check_reachable(address)
    if ray.is_initialized():
        return RayContext(False, _dashboard_url(None), *_cluster_size())
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
    if address:
        kwargs["address"] = address
    else:
        kwargs["address"] = "local"
        if settings.num_cpus is not None:
            kwargs["num_cpus"] = settings.num_cpus
        if settings.include_dashboard is not None:
            kwargs["include_dashboard"] = settings.include_dashboard
    try:
        ctx = ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"cannot reach Ray at {address or 'a new local instance'}: {msg}") from None
    reaper = None
    if not address:  # a local Ray of ours: ended with this process, even after a SIGKILL
        from grb_dist import reaper as reaper_mod

        reaper = reaper_mod.start()
    return RayContext(True, _dashboard_url(ctx), *_cluster_size(), reaper=reaper)


def _dashboard_url(ctx: Any) -> str | None:
    url = getattr(ctx, "dashboard_url", None) if ctx is not None else None
    if not url:
        try:
            from ray._private.worker import get_dashboard_url

            url = get_dashboard_url()
        except Exception:  # the dashboard is optional
            url = None
    if not url:
        return None
    return url if "://" in url else f"http://{url}"


def _cluster_size() -> tuple[float, float]:
    res = ray.cluster_resources()
    return float(res.get("CPU", 0)), float(res.get("GPU", 0))


def disconnect(context: RayContext) -> None:
    """Leave Ray; a local Ray started by :func:`connect` is stopped, and its watchdog ends
    whatever process of it outlived ``ray.shutdown()``."""
    try:
        if context.started and ray.is_initialized():
            ray.shutdown()
    finally:
        if context.reaper is not None:
            context.reaper.stop()


# ---------------------------------------------------------------- remote wrappers


def _device() -> str:
    return "cuda" if ray.get_gpu_ids() else "cpu"


#: At most this many attack cells (same surrogate and difficulty) run in one task.
ATTACK_BATCH = 4

#: The environment variable that carries ``RaySettings.threads`` to tasks and actors.
THREADS_ENV = "GRB_DIST_TORCH_THREADS"


def _thread_options(settings: RaySettings) -> dict[str, Any]:
    """Ray options that give a task or actor ``settings.threads`` torch threads (none when unset)."""
    if settings.threads is None:
        return {}
    return {"runtime_env": {"env_vars": {THREADS_ENV: str(settings.threads)}}}


def _set_threads() -> None:
    """torch's intra-op threads of this worker from :data:`THREADS_ENV`, when set; and the
    driver's user registrations (:func:`grb_dist.extensions.install_published`)."""
    from grb_dist.extensions import install_published

    install_published()
    threads = os.environ.get(THREADS_ENV)
    if threads:
        import torch

        torch.set_num_threads(int(threads))


@ray.remote
def _train_remote(graph: Graph, task) -> worker.TrainedModel:
    _set_threads()
    return worker.train_task(graph, task, device=_device())


@ray.remote
def _attack_remote(graph: Graph, cells: list[AttackCell], name: str, params: dict, state_ref: list):
    """A batch of attack cells on one surrogate and difficulty: the surrogate is loaded and
    its clean pass computed once (:func:`worker.attack_batch`); one return value per cell
    (submitted with ``num_returns=len(cells)``), so each perturbation goes to the Scorers
    as soon as the batch ends, without passing through the driver."""
    _set_threads()
    device = _device()
    surrogate = worker.load_model(graph, name, params, ray.get(state_ref[0]), device)
    results = worker.attack_batch(graph, cells, surrogate, device=device)
    return results[0] if len(results) == 1 else tuple(results)


class _ScorerActor:
    """Ray wrapper of :class:`worker.Scorer`; state_dicts arrive as refs (nested in a list,
    so a restarted actor fetches them again from the object store)."""

    def __init__(self, graph_ref: list, models: list[tuple[str, dict, list, float]]):
        _set_threads()
        graph = ray.get(graph_ref[0])
        loaded = {name: (params, ray.get(ref[0]), secs) for name, params, ref, secs in models}
        self.scorer = worker.Scorer(graph, loaded, _device())

    def pid(self) -> int:
        return os.getpid()

    def names(self) -> list[str]:
        return self.scorer.names()

    def score(self, attack: worker.AttackResult | None, difficulty: str, defenses: list[str]) -> list[dict]:
        return self.scorer.score(attack.perturbation if attack is not None else None, difficulty, defenses)


ScorerActor = ray.remote(_ScorerActor)


# ---------------------------------------------------------------- the sweep


@dataclass
class SweepProgress:
    """Reported after every finished score cell (and at start): cells done / total, failures."""

    done: int
    total: int
    failures: int
    elapsed: float
    phase: str
    computed: int = 0  # cells written by this invocation
    scorers: tuple = ()  # Scorer actor handles (tests kill them to check fault tolerance)


@dataclass
class SweepSummary:
    total: int
    done: int
    computed: int
    skipped: int
    failures: int
    seconds: float
    errors: list[str] = field(default_factory=list)


def _partition(names: list[str], n: int) -> list[list[str]]:
    parts = [names[i::n] for i in range(n)]
    return [p for p in parts if p]


def run_sweep(
    plan: Plan,
    graph: Graph,
    store: RunStore,
    settings: RaySettings = RaySettings(),
    *,
    on_progress: Callable[[SweepProgress], None] | None = None,
    flush_rows: int = 4096,
    flush_seconds: float = 10.0,
) -> SweepSummary:
    """Compute every score cell of ``plan`` that ``store`` does not hold yet.

    Ray must be connected (:func:`connect`) and ``store`` opened for writing (under the
    run's lock). ``on_progress`` is called after each computed cell; an exception it raises
    (e.g. ``KeyboardInterrupt``) stops the sweep after writing the buffered rows and
    cancelling in-flight work, leaving only complete cells behind. Score rows are written
    every ``flush_rows`` rows or ``flush_seconds`` seconds, whichever comes first.
    """
    start = time.perf_counter()
    spec = plan.spec
    writer = store.score_writer(flush_rows, flush_seconds)
    identity = store.manifest()["dataset"]
    label, fingerprint = identity["label"], identity["fingerprint"]
    done_ids = store.done_cells()
    todo = [c for c in plan.scores if c.cell_id not in done_ids]
    total = len(plan.scores)
    skipped = total - len(todo)
    state = {"done": skipped, "computed": 0, "failures": 0}
    errors: list[str] = []
    scorers: list = []

    def report(phase: str) -> None:
        if on_progress is not None:
            on_progress(SweepProgress(state["done"], total, state["failures"], time.perf_counter() - start,
                                      phase, state["computed"], tuple(scorers)))

    report("plan")
    if not todo:
        return SweepSummary(total, skipped, 0, skipped, 0, time.perf_counter() - start)

    cpus, gpus = _cluster_size()
    use_gpu = gpus > 0
    max_in_flight = settings.max_in_flight or max(2, int(2 * cpus))
    task_opts = {"max_retries": settings.max_retries, "retry_exceptions": False, **_thread_options(settings)}
    train_opts = {**task_opts, "num_cpus": settings.train_num_cpus, "num_gpus": settings.task_num_gpus if use_gpu else 0}
    attack_opts = {**task_opts, "num_cpus": settings.attack_num_cpus, "num_gpus": settings.task_num_gpus if use_gpu else 0}

    # which perturbations and models this invocation needs
    todo_by_pert: dict[str | None, dict[str, list[ScoreCell]]] = {}
    for c in todo:
        todo_by_pert.setdefault(c.perturbation_id, {}).setdefault(c.difficulty, []).append(c)
    attacks_needed = [a for a in plan.attacks if a.perturbation_id in todo_by_pert]
    attacks_to_run = [a for a in attacks_needed if not store.has_perturbation(a.perturbation_id)]
    target_names = sorted({c.defense for c in todo})
    surrogate_stems = {a.surrogate_model for a in attacks_to_run}
    # surrogates first: attacks can start while the defenses still train
    tasks = [s for s in plan.surrogates if s.file_stem in surrogate_stems] + [
        t for t in plan.targets if t.name in target_names
    ]
    params_of = {t.file_stem: dict(t.params) for t in plan.models}
    name_of = {t.file_stem: t.name for t in plan.models}
    seed_of = {t.name: t.seed for t in plan.targets}
    target_stem = {t.name: t.file_stem for t in plan.targets}
    needed_targets = {target_stem[n] for n in target_names}
    n_scorers = settings.num_scorers or max(1, int(gpus) if use_gpu else int(cpus) // 2)
    scorer_opts = {
        "num_cpus": settings.scorer_num_cpus,
        "num_gpus": settings.scorer_num_gpus if use_gpu else 0,
        "max_restarts": settings.max_restarts,
        "max_task_retries": settings.max_task_retries,
        **_thread_options(settings),
    }

    graph_ref = ray.put(graph)
    from grb_dist.extensions import publish

    publish()  # user models, defenses and attacks, for the workers (grb_dist.extensions)
    in_flight: dict[Any, tuple] = {}
    state_refs: dict[str, Any] = {}  # file stem -> ref of the stored state_dict
    train_secs: dict[str, float] = {}
    holder: dict[str, int] = {}  # defense -> index of the Scorer holding it
    # perturbation id -> (attack seconds, size columns of its score rows)
    pert_info: dict[str | None, tuple[float, dict]] = {None: (0.0, worker.perturbation_sizes(None))}
    pending: list[tuple[Any, str | None]] = []  # perturbations waiting for the Scorers
    limits: dict[str, tuple[float, float]] = {}  # resolved feature limits by attack parameters

    def feature_limits(a: AttackCell) -> tuple[float, float]:
        from grb_dist.attacks import build_attack

        key = _json({"difficulty": a.difficulty, "params": {k: v for k, v in a.params.items() if k != "seed"},
                     "attack": a.attack, "scenario": a.scenario})
        if key not in limits:
            attack = build_attack(a.attack, dict(a.params), a.scenario)
            if a.scenario == "injection":
                _, lo, hi = attack.check_inputs(graph, graph.targets(a.difficulty))
            else:
                budget = attack.check_inputs(graph, graph.targets(a.difficulty))[1]
                lo, hi = budget.feat_min, budget.feat_max
            limits[key] = (float(lo), float(hi))
        return limits[key]

    def model_ready(stem: str) -> None:
        # what the Scorers hold is exactly what is stored
        state_refs[stem] = ray.put(store.read_state_dict(stem))
        train_secs[stem] = float(store.read_model_meta(stem)["train_seconds"])

    def submit_score(i: int, pert_ref: Any, difficulty: str, group: list[ScoreCell], attempt: int) -> None:
        ref = scorers[i].score.remote(pert_ref, difficulty, [c.defense for c in group])
        in_flight[ref] = ("score", (i, pert_ref, difficulty, group, attempt))

    def submit_scores(pert_ref: Any, pid: str | None) -> None:
        if not scorers:
            pending.append((pert_ref, pid))
            return
        for difficulty, cells in todo_by_pert[pid].items():
            by_scorer: dict[int, list[ScoreCell]] = {}
            for c in cells:
                by_scorer.setdefault(holder[c.defense], []).append(c)
            for i, group in by_scorer.items():
                submit_score(i, pert_ref, difficulty, group, 0)

    def start_scorers_when_ready() -> None:
        """Hold: once every needed defense is stored, Scorers load a share each."""
        if scorers or not needed_targets <= set(state_refs):
            return
        for i, part in enumerate(_partition(target_names, min(n_scorers, len(target_names)))):
            models = [(n, params_of[target_stem[n]], [state_refs[target_stem[n]]], train_secs[target_stem[n]])
                      for n in part]
            scorers.append(ScorerActor.options(**scorer_opts).remote([graph_ref], models))
            holder.update({n: i for n in part})
        for item in pending:
            submit_scores(*item)
        pending.clear()

    try:
        train_queue = []
        for t in tasks:
            if store.has_model(t.file_stem, t.model_id):
                model_ready(t.file_stem)
            else:
                train_queue.append(t)
        if None in todo_by_pert:
            submit_scores(None, None)
        to_run = {a.perturbation_id for a in attacks_to_run}
        attack_queue = list(attacks_to_run)
        for a in attacks_needed:  # perturbations stored by an earlier run: score them only
            if a.perturbation_id not in to_run:
                try:
                    inj = store.read_perturbation(a.perturbation_id)
                    secs = float(store.perturbation_meta(a.perturbation_id)["attack_seconds"])
                except GrbDistError as exc:  # unreadable: recompute it
                    log.warning("%s", exc)
                    attack_queue.append(a)
                    if a.surrogate_model not in state_refs and all(t.file_stem != a.surrogate_model for t in train_queue):
                        train_queue[:0] = [s for s in plan.surrogates if s.file_stem == a.surrogate_model]
                    continue
                pert_info[a.perturbation_id] = (secs, worker.perturbation_sizes(inj))
                submit_scores(ray.put(worker.AttackResult(a.perturbation_id, inj, secs)), a.perturbation_id)
        start_scorers_when_ready()

        def next_work() -> tuple[str, Any] | None:
            if train_queue:
                return "train", train_queue.pop(0)
            for k, a in enumerate(attack_queue):
                if a.surrogate_model in state_refs:
                    # cells on the same surrogate and difficulty share its clean pass; batch
                    # them, but keep enough batches to occupy every CPU
                    same = [b for b in attack_queue if (b.surrogate_model, b.difficulty) == (a.surrogate_model, a.difficulty)]
                    size = max(1, min(ATTACK_BATCH, len(same) // max(1, int(cpus))))
                    batch = same[:size]
                    for b in batch:
                        attack_queue.remove(b)
                    return "attack", batch
            return None

        report("train" if train_queue else "attack")
        while train_queue or attack_queue or in_flight or pending:
            while len(in_flight) < max_in_flight:
                work = next_work()
                if work is None:
                    break
                kind, item = work
                if kind == "train":
                    ref = _train_remote.options(**train_opts).remote(graph_ref, item)
                else:
                    stem = item[0].surrogate_model
                    refs = _attack_remote.options(**attack_opts, num_returns=len(item)).remote(
                        graph_ref, item, name_of[stem], params_of[stem], [state_refs[stem]])
                    for r, a in zip(refs if len(item) > 1 else [refs], item):
                        in_flight[r] = (kind, a)
                    continue
                in_flight[ref] = (kind, item)
            if not in_flight:
                raise SweepError("the sweep stalled: work is left but nothing can run (a bug; please report it)")
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=writer.seconds_until_due())
            if writer.due():
                writer.flush()
            for ref in ready:
                kind, info = in_flight.pop(ref)
                if kind == "train":
                    t = info
                    try:
                        trained = ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        raise SweepError(f"training {t.name} (seed {t.seed}) failed: {_cause(exc)}") from None
                    store.write_model(t.file_stem, trained.state_dict, trained.meta)
                    model_ready(t.file_stem)
                    start_scorers_when_ready()
                    report("train" if train_queue or any(v[0] == "train" for v in in_flight.values()) else "attack")
                elif kind == "attack":
                    a: AttackCell = info
                    try:
                        result: worker.AttackResult = ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        n = sum(len(v) for v in todo_by_pert[a.perturbation_id].values())
                        state["failures"] += n
                        errors.append(f"{a.attack} on {a.surrogate} ({a.difficulty}, repeat {a.repeat}): {_cause(exc)}")
                        log.error("attack failed: %s", errors[-1])
                        report("attack")
                        continue
                    lo, hi = feature_limits(a)
                    store.write_perturbation(a.perturbation_id, result.perturbation, {
                        "config_hash": plan.config_hash, "scenario": a.scenario, "dataset": label,
                        "dataset_fingerprint": fingerprint, "difficulty": a.difficulty,
                        "attack": a.attack, "surrogate": a.surrogate, "repeat": a.repeat, "seed": a.seed,
                        "params_json": _json(a.params), "feat_lim_min": lo, "feat_lim_max": hi,
                        "attack_seconds": result.seconds,
                    })
                    pert_info[a.perturbation_id] = (result.seconds, worker.perturbation_sizes(result.perturbation))
                    submit_scores(ref, a.perturbation_id)  # the attack's own ref: no copy through the driver
                else:
                    i, pert_ref, difficulty, group, attempt = info
                    try:
                        results = ray.get(ref)
                    except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
                        if attempt < settings.resubmits:
                            log.warning("scorer %d died (%s); resubmitting", i, type(exc).__name__)
                            submit_score(i, pert_ref, difficulty, group, attempt + 1)
                        else:
                            state["failures"] += len(group)
                            errors.append(f"scoring on scorer {i} failed: {_cause(exc)}")
                            report("score")
                        continue
                    except ray.exceptions.RayError as exc:
                        state["failures"] += len(group)
                        errors.append(f"scoring {group[0].attack} ({difficulty}): {_cause(exc)}")
                        report("score")
                        continue
                    by_def = {r["defense"]: r for r in results}
                    rows = [_row(plan, c, by_def[c.defense], seed_of[c.defense], pert_info[c.perturbation_id],
                                 label, fingerprint) for c in group]
                    writer.add(rows)
                    for _ in rows:
                        state["done"] += 1
                        state["computed"] += 1
                        report("score" if not (train_queue or attack_queue) else "attack")
    finally:
        _flush_on_exit(writer, propagating=sys.exc_info()[0] is not None)
        for ref in list(in_flight):
            try:
                ray.cancel(ref, force=False)
            except Exception:  # noqa: BLE001 - best effort (actor calls, finished refs)
                pass
        for s in scorers:
            ray.kill(s, no_restart=True)
    return SweepSummary(total, state["done"], state["computed"], skipped, state["failures"],
                        time.perf_counter() - start, errors)


def _json(obj: Any) -> str:
    from grb_dist.sweep.spec import canonical_json

    return canonical_json(obj)


def _flush_on_exit(writer: ScoreWriter, *, propagating: bool) -> None:
    """Write the buffered rows on the way out; a failure to do so does not hide the error
    that is already propagating (the rows are then recomputed by the next run)."""
    try:
        writer.flush()
    except Exception:
        if not propagating:
            raise
        log.exception("could not write the buffered score rows (they will be recomputed)")


def _row(plan: Plan, c: ScoreCell, r: dict, defense_seed: int, pert: tuple[float, dict], label: str,
         fingerprint: str) -> dict:
    import datetime as dt

    attack_seconds, sizes = pert
    return {
        "cell_id": c.cell_id, "config_hash": plan.config_hash, "perturbation_id": c.perturbation_id,
        "dataset": label, "dataset_fingerprint": fingerprint, "scenario": c.scenario, "difficulty": c.difficulty,
        "attack": c.attack, "surrogate": c.surrogate, "defense": c.defense, "repeat": c.repeat, "seed": c.seed,
        "defense_seed": defense_seed, "accuracy": float(r["accuracy"]), "n_targets": int(r["n_targets"]),
        **sizes, "attack_seconds": float(attack_seconds),
        "score_seconds": float(r["score_seconds"]), "defense_train_seconds": float(r["defense_train_seconds"]),
        "version": grb_dist.__version__, "created_at": dt.datetime.now(dt.timezone.utc),
    }


def _cause(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    if cause is not None:
        return f"{type(cause).__name__}: {cause}".splitlines()[0]
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__


__all__ = ["CLEAN", "RayContext", "RaySettings", "SweepError", "SweepProgress", "SweepSummary", "connect",
           "disconnect", "run_sweep"]
