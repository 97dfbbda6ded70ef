"""Running a sweep on Ray: the only module of grb_dist that imports Ray.

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
whose cells the next run recomputes. Fault tolerance: tasks have ``max_retries``; Scorer
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

import itertools
import logging
import os
import socket
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable
from urllib.parse import urlparse

import ray
import ray.exceptions

from grb_dist.core.version import __version__
from grb_dist.core.errors import ConfigError, GrbDistError
from grb_dist.core.graph import Graph
from grb_dist.store import RunStore, ScoreWriter
from grb_dist.sweep import worker
from grb_dist.sweep.progress import Stage
from grb_dist.sweep.spec import CLEAN, AttackCell, Plan, ScoreCell
from grb_dist.sweep.tasks import install_registrations, publish_registrations

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
    """What :func:`connect` did: whether it started Ray here, and the dashboard URL.

    ``dashboard_token`` says where the dashboard's token is when Ray's token
    authentication is on (``None`` when it is off): the dashboard asks for it once per
    browser.
    """

    started: bool
    dashboard_url: str | None
    cpus: float
    gpus: float
    reaper: Any = None  # grb_dist.reaper.Reaper of a local Ray started here
    dashboard_token: str | None = None


#: Ray's switch of token authentication (``token`` or ``disabled``), read by ``ray.init``.
AUTH_MODE_ENV = "RAY_AUTH_MODE"

#: The namespace of a local Ray started by :func:`connect`.
NAMESPACE = "grb-dist"


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


def connect(settings: RaySettings, job_name: str | None = None) -> RayContext:
    """Join the cluster of ``settings`` or start a local Ray; raise ConfigError when unreachable.

    A local Ray runs in the namespace :data:`NAMESPACE` with token authentication on, set
    explicitly (``RAY_AUTH_MODE=token`` unless the environment says otherwise), so that Ray
    does not warn that it turned it on by default; its token is Ray's usual one
    (``ray get-auth-token`` prints it). A joined cluster's authentication is left as it is.
    ``job_name`` names the Ray job (its ``job_name`` metadata, the column Name of the
    dashboard's Jobs page).
    """
    address = settings.resolved_address()
    if address:
        _check_reachable(address)
    if ray.is_initialized():
        return RayContext(False, _dashboard_url(None), *_cluster_size(), dashboard_token=_token_hint())
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
    if job_name:
        from ray.job_config import JobConfig

        kwargs["job_config"] = JobConfig(metadata={"job_name": job_name})
    if address:
        kwargs["address"] = address
    else:
        kwargs["address"] = "local"
        kwargs["namespace"] = NAMESPACE
        _explicit_token_auth()
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
    return RayContext(True, _dashboard_url(ctx), *_cluster_size(), reaper=reaper, dashboard_token=_token_hint())


def _explicit_token_auth() -> None:
    """Turn on token authentication of the local Ray about to start, explicitly, unless
    ``RAY_AUTH_MODE`` is set already (``disabled`` then stays disabled).

    Ray >= 2.52 turns it on by default for a new local cluster when the mode is unset, and
    warns on every start that it did; with the mode set it does the same without the
    warning. Like Ray at that point, the mode is put in this process's environment (the
    local Ray's processes inherit it) and Ray's cached configuration of this process is
    read again. An older Ray without token authentication is left as it is.
    """
    if AUTH_MODE_ENV in os.environ:
        return
    try:
        from ray._private.authentication.authentication_token_setup import enable_token_auth_by_default  # noqa: F401
        from ray._raylet import Config
    except ImportError:
        return
    os.environ[AUTH_MODE_ENV] = "token"
    Config.initialize("")


def _token_hint() -> str | None:
    """Where the token of this Ray session is, when token authentication is on: the
    variable or file Ray reads it from (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``,
    ``~/.ray/auth_token``); ``None`` when it is off."""
    try:
        from ray._raylet import AuthenticationMode, get_authentication_mode

        enabled = get_authentication_mode() == AuthenticationMode.TOKEN
    except Exception:  # an older Ray without token authentication, or its API moved
        enabled = os.environ.get(AUTH_MODE_ENV, "").lower() == "token"
    if not enabled:
        return None
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "$RAY_AUTH_TOKEN"
    return os.environ.get("RAY_AUTH_TOKEN_PATH") or "~/.ray/auth_token"


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


def node_memory() -> list[int]:
    """The memory of each live node of the cluster this process is connected to: its Ray
    memory plus its object store, in bytes (a node that reports neither counts 0)."""
    return [int(n.get("Resources", {}).get("memory", 0) + n.get("Resources", {}).get("object_store_memory", 0))
            for n in ray.nodes() if n.get("Alive")]


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
    driver's user registrations (:func:`grb_dist.sweep.tasks.install_registrations`)."""
    install_registrations()
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


def train_task_name(task: Any) -> str:
    """The Ray name of a training task: ``train:<model>/s<seed>``."""
    return f"train:{task.name}/s{task.seed}"


def attack_task_name(cells: list[AttackCell]) -> str:
    """The Ray name of an attack task: its first cell,
    ``attack:<scenario>/<attack>/<surrogate>/<difficulty>/r<repeat>``, plus ``+k`` for the
    ``k`` other cells of its batch."""
    a = cells[0]
    more = f"+{len(cells) - 1}" if len(cells) > 1 else ""
    return f"attack:{a.scenario}/{a.attack}/{a.surrogate}/{a.difficulty}/r{a.repeat}{more}"


def scorer_name(index: int) -> str:
    """The Ray name of Scorer actor ``index``: ``scorer:<index>``."""
    return f"scorer:{index}"


#: What a scoring call carries so that any Scorer, fresh or restarted, can load what it
#: needs: ``[graph_ref, [(defense, params, state_dict_ref, train_seconds), ...]]``; refs
#: nested in a list, which Ray passes unresolved.
ScorerSetup = list


class _ScorerActor:
    """Ray wrapper of :class:`worker.Scorer`.

    The constructor takes no object refs: Ray warns (and cannot promise to restore them on
    a restart, ray-project/ray#53727) when an actor with ``max_restarts > 0`` has
    constructor arguments in the object store. Instead every :meth:`score` call carries a
    :data:`ScorerSetup`; the actor loads the graph and each defense on the first call that
    needs it and keeps them, so a restarted actor loads them again from the refs of the
    call Ray retries (the driver holds those refs for the whole sweep).
    """

    def __init__(self, index: int):
        _set_threads()
        self.index = index
        self.scorer: worker.Scorer | None = None

    def __repr__(self) -> str:  # the actor's name in Ray's logs and dashboard
        return scorer_name(self.index)

    def _hold(self, setup: ScorerSetup) -> worker.Scorer:
        graph_ref, models = setup
        if self.scorer is None:
            self.scorer = worker.Scorer(ray.get(graph_ref), {}, _device())
        scorer = self.scorer
        for name, params, ref, secs in models:
            if name not in scorer.models:
                scorer.models[name] = worker.load_model(scorer.graph, name, params, ray.get(ref), scorer.device)
                scorer.train_seconds[name] = float(secs)
        return scorer

    def pid(self) -> int:
        return os.getpid()

    def names(self) -> list[str]:
        """The defenses loaded so far."""
        return self.scorer.names() if self.scorer is not None else []

    def score(self, setup: ScorerSetup, attack: worker.AttackResult | None, difficulty: str,
              defenses: list[str]) -> list[dict]:
        scorer = self._hold(setup)
        return scorer.score(attack.perturbation if attack is not None else None, difficulty, defenses)


ScorerActor = ray.remote(_ScorerActor)


# ---------------------------------------------------------------- the sweep


@dataclass
class SweepProgress:
    """Reported at the start, after every trained model, generated perturbation and scored
    cell, and every few seconds while nothing ends.

    ``done`` / ``total`` / ``failures`` count score cells (``score`` has the same counts);
    ``train``, ``attack`` and ``score`` are the stages' counts (models, perturbations,
    cells; see :class:`grb_dist.sweep.progress.Stage`); ``phase`` is the first stage not
    finished (``plan``, ``train``, ``attack``, ``score``).
    """

    done: int
    total: int
    failures: int
    elapsed: float
    phase: str
    computed: int = 0  # cells written by this invocation
    scorers: tuple = ()  # Scorer actor handles (tests kill them to check fault tolerance)
    train: Stage = field(default_factory=Stage)
    attack: Stage = field(default_factory=Stage)
    score: Stage = field(default_factory=Stage)


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


#: Without news from Ray, the driver reports progress at least this often (seconds).
HEARTBEAT = 2.0


def _start_scorer(index: int, options: dict[str, Any]) -> Any:
    """Scorer actor ``index``, named :func:`scorer_name`; when that name is still taken (a
    Scorer of an earlier sweep of this driver that Ray has not finished killing), with a
    suffix."""
    try:
        return ScorerActor.options(name=scorer_name(index), **options).remote(index)
    except ValueError:
        import uuid

        return ScorerActor.options(name=f"{scorer_name(index)}-{uuid.uuid4().hex[:6]}", **options).remote(index)


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
    run's lock). ``on_progress`` is called at the start, after each trained model,
    generated perturbation and computed cell, and every :data:`HEARTBEAT` seconds while
    nothing ends; an exception it raises (e.g. ``KeyboardInterrupt``) stops the sweep
    after writing the buffered rows and cancelling in-flight work, leaving only complete
    cells behind. Score rows are written every ``flush_rows`` rows or ``flush_seconds``
    seconds, whichever comes first.
    """
    sweep = _Sweep(plan, graph, store, settings, on_progress, flush_rows, flush_seconds)
    return sweep.run()


class _Sweep:
    """The state of one :func:`run_sweep` call, one method per stage: planning, submitting
    training, attack and scoring work, collecting each kind of result, and the cleanup."""

    def __init__(self, plan: Plan, graph: Graph, store: RunStore, settings: RaySettings,
                 on_progress: Callable[[SweepProgress], None] | None, flush_rows: int,
                 flush_seconds: float) -> None:
        self.start = time.perf_counter()
        self.plan, self.graph, self.store, self.settings = plan, graph, store, settings
        self.on_progress = on_progress
        self.spec = plan.spec
        self.writer = store.score_writer(flush_rows, flush_seconds)
        identity = store.manifest()["dataset"]
        self.label, self.fingerprint = identity["label"], identity["fingerprint"]
        done_ids = store.done_cells()
        self.todo = [c for c in plan.scores if c.cell_id not in done_ids]
        self.total = len(plan.scores)
        self.skipped = self.total - len(self.todo)
        # progress of the three stages; scored cells are the summary's counts
        self.trained, self.attacked = Stage(), Stage()
        self.scored = Stage(self.skipped, self.total, 0, self.skipped)
        self.stages = {"train": self.trained, "attack": self.attacked, "score": self.scored}
        self.computed = 0
        self.errors: list[str] = []
        self.scorers: list = []

    # -- progress ---------------------------------------------------------------------------

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

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
        if self.on_progress is not None:
            self.on_progress(SweepProgress(self.scored.done, self.total, self.scored.failed, now, phase,
                                           self.computed, tuple(self.scorers), replace(self.trained),
                                           replace(self.attacked), replace(self.scored)))

    # -- the run ----------------------------------------------------------------------------

    def run(self) -> SweepSummary:
        if not self.todo:
            self.report("plan")
            return SweepSummary(self.total, self.skipped, 0, self.skipped, 0, time.perf_counter() - self.start)
        self.plan_work()
        self.open()
        try:
            self.start_scorers()
            self.queue_work()
            self.loop()
        finally:
            self.cleanup(propagating=sys.exc_info()[0] is not None)
        return SweepSummary(self.total, self.scored.done, self.computed, self.skipped, self.scored.failed,
                            time.perf_counter() - self.start, self.errors)

    def plan_work(self) -> None:
        """Which models and perturbations this invocation needs, and the Ray options."""
        plan, settings, store = self.plan, self.settings, self.store
        self.cpus, gpus = _cluster_size()
        use_gpu = gpus > 0
        self.max_in_flight = settings.max_in_flight or max(2, int(2 * self.cpus))
        task_opts = {"max_retries": settings.max_retries, "retry_exceptions": False, **_thread_options(settings)}
        self.train_opts = {**task_opts, "num_cpus": settings.train_num_cpus,
                           "num_gpus": settings.task_num_gpus if use_gpu else 0}
        self.attack_opts = {**task_opts, "num_cpus": settings.attack_num_cpus,
                            "num_gpus": settings.task_num_gpus if use_gpu else 0}

        # which perturbations and models this invocation needs
        self.todo_by_pert: dict[str | None, dict[str, list[ScoreCell]]] = {}
        for c in self.todo:
            self.todo_by_pert.setdefault(c.perturbation_id, {}).setdefault(c.difficulty, []).append(c)
        self.attacks_needed = [a for a in plan.attacks if a.perturbation_id in self.todo_by_pert]
        self.attacks_to_run = [a for a in self.attacks_needed if not store.has_perturbation(a.perturbation_id)]
        self.target_names = sorted({c.defense for c in self.todo})
        surrogate_stems = {a.surrogate_model for a in self.attacks_to_run}
        # surrogates first: attacks can start while the defenses still train
        self.tasks = [s for s in plan.surrogates if s.file_stem in surrogate_stems] + [
            t for t in plan.targets if t.name in self.target_names
        ]
        self.trained.total, self.attacked.total = len(self.tasks), len(self.attacks_needed)
        self.report("plan")
        self.params_of = {t.file_stem: dict(t.params) for t in plan.models}
        self.name_of = {t.file_stem: t.name for t in plan.models}
        self.seed_of = {t.name: t.seed for t in plan.targets}
        self.target_stem = {t.name: t.file_stem for t in plan.targets}
        self.defenses_of: dict[str, list[str]] = {}  # file stem -> the defenses it is
        for n in self.target_names:
            self.defenses_of.setdefault(self.target_stem[n], []).append(n)
        self.n_scorers = settings.num_scorers or max(1, int(gpus) if use_gpu else int(self.cpus) // 2)
        self.scorer_opts = {
            "num_cpus": settings.scorer_num_cpus,
            "num_gpus": settings.scorer_num_gpus if use_gpu else 0,
            "max_restarts": settings.max_restarts,
            "max_task_retries": settings.max_task_retries,
            **_thread_options(settings),
        }

    def open(self) -> None:
        """Put the graph and the registrations in Ray's object store; empty bookkeeping."""
        self.graph_ref = ray.put(self.graph)
        publish_registrations()  # user models, defenses and attacks, for the workers (grb_dist.extensions)
        self.in_flight: dict[Any, tuple] = {}
        self.running = {"train": 0, "attack": 0}  # training and attack tasks in flight
        self.batch_left: dict[int, int] = {}  # attack batch -> its cells still in flight
        self.batch_ids = itertools.count()
        self.state_refs: dict[str, Any] = {}  # file stem -> ref of the stored state_dict
        self.train_secs: dict[str, float] = {}
        self.holder: dict[str, int] = {}  # defense -> index of the Scorer holding it
        # perturbation id -> (attack seconds, size columns of its score rows)
        self.pert_info: dict[str | None, tuple[float, dict]] = {None: (0.0, worker.perturbation_sizes(None))}
        # defense -> scoring work waiting for its model: (perturbation ref, id, difficulty, cell)
        self.waiting: dict[str, list[tuple[Any, str | None, str, ScoreCell]]] = {}
        self.limits: dict[str, tuple[float, float]] = {}  # resolved feature limits by attack parameters
        self.train_queue: list = []
        self.attack_queue: list[AttackCell] = []

    def start_scorers(self) -> None:
        # Scorers start at once: they load each defense on its first scoring call
        for i, part in enumerate(_partition(self.target_names, min(self.n_scorers, len(self.target_names)))):
            self.scorers.append(_start_scorer(i, self.scorer_opts))
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
        if None in self.todo_by_pert:
            self.submit_scores(None, None)
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
            if a.surrogate_model not in self.state_refs and all(
                    t.file_stem != a.surrogate_model for t in self.train_queue):
                added = [s for s in self.plan.surrogates if s.file_stem == a.surrogate_model]
                self.train_queue[:0] = added
                self.trained.total += len(added)
            return
        self.attacked.done += 1
        self.attacked.skipped += 1
        self.pert_info[a.perturbation_id] = (secs, worker.perturbation_sizes(inj))
        self.submit_scores(ray.put(worker.AttackResult(a.perturbation_id, inj, secs)), a.perturbation_id)

    def loop(self) -> None:
        """Keep work in flight and collect it as it ends, until nothing is left."""
        self.report()
        while self.train_queue or self.attack_queue or self.in_flight or self.waiting:
            self.fill()
            if not self.in_flight:
                raise SweepError("the sweep stalled: work is left but nothing can run (a bug; please report it)")
            due = self.writer.seconds_until_due()
            ready, _ = ray.wait(list(self.in_flight), num_returns=1,
                                timeout=HEARTBEAT if due is None else min(due, HEARTBEAT))
            if self.writer.due():
                self.writer.flush()
            if not ready:
                self.report()
            for ref in ready:
                kind, info = self.in_flight.pop(ref)
                if kind == "train":
                    self.on_trained(ref, info)
                elif kind == "attack":
                    self.on_attacked(ref, info)
                else:
                    self.on_scored(ref, info)

    def cleanup(self, *, propagating: bool) -> None:
        """Write the buffered rows, cancel in-flight work and stop the Scorers."""
        _flush_on_exit(self.writer, propagating=propagating)
        for ref in list(self.in_flight):
            try:
                ray.cancel(ref, force=False)
            except Exception:  # noqa: BLE001 - best effort (actor calls, finished refs)
                pass
        for s in self.scorers:
            ray.kill(s, no_restart=True)

    # -- submitting work ----------------------------------------------------------------------

    def next_work(self) -> tuple[str, Any] | None:
        """Training and attack tasks alternate once an attack can run (its surrogate is
        stored), so that defenses, perturbations and scores all progress early."""
        attack_queue = self.attack_queue
        ready = next((a for a in attack_queue if a.surrogate_model in self.state_refs), None)
        if self.train_queue and (ready is None or self.running["train"] <= self.running["attack"]):
            return "train", self.train_queue.pop(0)
        if ready is not None:
            # cells on the same surrogate and difficulty share its clean pass; batch
            # them, but keep enough batches to occupy every CPU
            same = [b for b in attack_queue if (b.surrogate_model, b.difficulty) == (ready.surrogate_model, ready.difficulty)]
            size = max(1, min(ATTACK_BATCH, len(same) // max(1, int(self.cpus))))
            batch = same[:size]
            for b in batch:
                attack_queue.remove(b)
            return "attack", batch
        return None

    def fill(self) -> None:
        """Submit training and attack tasks up to the bound on in-flight refs."""
        while len(self.in_flight) < self.max_in_flight:
            work = self.next_work()
            if work is None:
                break
            kind, item = work
            self.running[kind] += 1
            if kind == "train":
                self.submit_train(item)
            else:
                self.submit_attack(item)

    def submit_train(self, t: Any) -> None:
        ref = _train_remote.options(**self.train_opts, name=train_task_name(t)).remote(self.graph_ref, t)
        self.in_flight[ref] = ("train", t)
        self.begin(self.trained)

    def submit_attack(self, batch: list[AttackCell]) -> None:
        stem = batch[0].surrogate_model
        refs = _attack_remote.options(**self.attack_opts, num_returns=len(batch), name=attack_task_name(batch)).remote(
            self.graph_ref, batch, self.name_of[stem], self.params_of[stem], [self.state_refs[stem]])
        batch_id = next(self.batch_ids)
        self.batch_left[batch_id] = len(batch)
        for r, a in zip(refs if len(batch) > 1 else [refs], batch):
            self.in_flight[r] = ("attack", (a, batch_id))
        self.begin(self.attacked)

    def submit_score(self, i: int, pert_ref: Any, difficulty: str, group: list[ScoreCell], attempt: int) -> None:
        target_stem = self.target_stem
        models = [(c.defense, self.params_of[target_stem[c.defense]], self.state_refs[target_stem[c.defense]],
                   self.train_secs[target_stem[c.defense]]) for c in group]
        ref = self.scorers[i].score.remote([self.graph_ref, models], pert_ref, difficulty, [c.defense for c in group])
        self.in_flight[ref] = ("score", (i, pert_ref, difficulty, group, attempt))
        self.begin(self.scored)

    def submit_scores(self, pert_ref: Any, pid: str | None) -> None:
        """Score a stored perturbation against every defense already stored; the other
        defenses' cells wait for their model (:meth:`model_ready`)."""
        for difficulty, cells in self.todo_by_pert[pid].items():
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
        self.state_refs[stem] = ray.put(self.store.read_state_dict(stem))
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
            result_model = ray.get(ref)
        except ray.exceptions.RayError as exc:
            raise SweepError(f"training {t.name} (seed {t.seed}) failed: {_cause(exc)}") from None
        self.store.write_model(t.file_stem, result_model.state_dict, result_model.meta)
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
            result: worker.AttackResult = ray.get(ref)
        except ray.exceptions.RayError as exc:
            self.scored.failed += sum(len(v) for v in self.todo_by_pert[a.perturbation_id].values())
            self.attacked.failed += 1
            self.errors.append(f"{a.attack} on {a.surrogate} ({a.difficulty}, repeat {a.repeat}): {_cause(exc)}")
            log.error("attack failed: %s", self.errors[-1])
            self.report()
            return
        lo, hi = self.feature_limits(a)
        self.store.write_perturbation(a.perturbation_id, result.perturbation, {
            "config_hash": self.plan.config_hash, "scenario": a.scenario, "dataset": self.label,
            "dataset_fingerprint": self.fingerprint, "difficulty": a.difficulty,
            "attack": a.attack, "surrogate": a.surrogate, "repeat": a.repeat, "seed": a.seed,
            "params_json": _json(a.params), "feat_lim_min": lo, "feat_lim_max": hi,
            "attack_seconds": result.seconds,
        })
        self.pert_info[a.perturbation_id] = (result.seconds, worker.perturbation_sizes(result.perturbation))
        self.submit_scores(ref, a.perturbation_id)  # the attack's own ref: no copy through the driver
        self.attacked.done += 1
        self.report()

    def feature_limits(self, a: AttackCell) -> tuple[float, float]:
        from grb_dist.attacks import build_attack

        key = _json({"difficulty": a.difficulty, "params": {k: v for k, v in a.params.items() if k != "seed"},
                     "attack": a.attack, "scenario": a.scenario})
        if key not in self.limits:
            graph = self.graph
            attack = build_attack(a.attack, dict(a.params), a.scenario)
            if a.scenario == "injection":
                _, lo, hi = attack.check_inputs(graph, graph.targets(a.difficulty))
            else:
                budget = attack.check_inputs(graph, graph.targets(a.difficulty))[1]
                lo, hi = budget.feat_min, budget.feat_max
            self.limits[key] = (float(lo), float(hi))
        return self.limits[key]

    def on_scored(self, ref: Any, info: tuple) -> None:
        i, pert_ref, difficulty, group, attempt = info
        try:
            results = ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
            if attempt < self.settings.resubmits:
                log.warning("scorer %d died (%s); resubmitting", i, type(exc).__name__)
                self.submit_score(i, pert_ref, difficulty, group, attempt + 1)
            else:
                self.scored.failed += len(group)
                self.errors.append(f"scoring on scorer {i} failed: {_cause(exc)}")
                self.report()
            return
        except ray.exceptions.RayError as exc:
            self.scored.failed += len(group)
            self.errors.append(f"scoring {group[0].attack} ({difficulty}): {_cause(exc)}")
            self.report()
            return
        by_def = {r["defense"]: r for r in results}
        rows = [_row(self.plan, c, by_def[c.defense], self.seed_of[c.defense], self.pert_info[c.perturbation_id],
                     self.label, self.fingerprint) for c in group]
        self.writer.add(rows)
        for _ in rows:
            self.scored.done += 1
            self.computed += 1
            self.report()


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
        "version": __version__, "created_at": dt.datetime.now(dt.timezone.utc),
    }


def _cause(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    if cause is not None:
        return f"{type(cause).__name__}: {cause}".splitlines()[0]
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__


__all__ = ["CLEAN", "RayContext", "RaySettings", "SweepError", "SweepProgress", "SweepSummary", "connect",
           "disconnect", "node_memory", "run_sweep"]
