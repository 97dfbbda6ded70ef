"""The Ray edge: the only module of grb_dist that imports Ray.

Everything the sweep and the study ask of Ray goes through here, as plain functions the
rest of the package calls without knowing Ray:

- joining a cluster or starting a local Ray (:func:`connect`, :func:`disconnect`), with
  the dashboard's URL and token hint, and a watchdog that ends a local Ray with this process;
- the graph and the registry snapshot in the object store once per run (:func:`put`,
  :func:`put_registrations`); every worker restores the snapshot once (:func:`_restore`);
- training and attack tasks and the Scorer actors of a sweep (:func:`submit_train`,
  :func:`submit_attack`, :func:`start_scorer`, :func:`submit_score`), collected with
  :func:`wait` and :func:`get`, whose failures come back as :class:`TaskFailed` or
  :class:`ActorLost` (no Ray exception leaves this module);
- the study's independent work units, with a bound on work in flight (:func:`run_units`).

Ray's private API is used in two places only, each guarded with a fallback for other Ray
versions: turning token authentication on explicitly for a local Ray, and asking for the
dashboard's URL when ``ray.init`` did not return it.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import ray
import ray.exceptions
from ray.job_config import JobConfig

from grb_dist.core import allocator, registry
from grb_dist.core.errors import ConfigError, GrbDistError
from grb_dist.core.graph import Graph
from grb_dist.sweep import reaper as reaper_mod
from grb_dist.sweep import worker
from grb_dist.sweep.settings import RaySettings, check_reachable


class TaskFailed(GrbDistError):
    """A task or actor call raised, or its worker died beyond its retries; the message is
    the cause in one line."""


class ActorLost(TaskFailed):
    """A Scorer actor died (or is restarting) while it held the call."""


# ---------------------------------------------------------------- connecting


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
    reaper: Any = None  # grb_dist.sweep.reaper.Reaper of a local Ray started here
    dashboard_token: str | None = None
    kept: str | None = None  # the address of a local Ray left running after the sweep (keep)


#: Ray's switch of token authentication (``token`` or ``disabled``), read by ``ray.init``.
AUTH_MODE_ENV = "RAY_AUTH_MODE"

#: The namespace of a local Ray started by :func:`connect`.
NAMESPACE = "grb-dist"


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
        check_reachable(address)
    if settings.include_dashboard and not address and not dashboard_available():
        raise ConfigError(f"--dashboard: this Ray has no dashboard packages; {DASHBOARD_HINT}, or leave --dashboard out")
    if ray.is_initialized():
        return RayContext(False, _dashboard_url(None), *cluster_size(), dashboard_token=_token_hint())
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
    if job_name:
        kwargs["job_config"] = JobConfig(metadata={"job_name": job_name})
    if address:
        kwargs["address"] = address
    elif settings.keep:  # a head node of its own, left running: joined like a cluster
        _explicit_token_auth()
        kwargs["address"] = _start_head(settings)
        kwargs["namespace"] = NAMESPACE
    else:
        kwargs["address"] = "local"
        kwargs["namespace"] = NAMESPACE
        _explicit_token_auth()
        if settings.num_cpus is not None:
            kwargs["num_cpus"] = settings.num_cpus
        if settings.include_dashboard is not None:
            kwargs["include_dashboard"] = settings.include_dashboard
        if settings.include_dashboard is not False and dashboard_available():  # the printed URL is this sweep's own
            kwargs["dashboard_port"] = free_port()
    try:
        with _keep_sigterm_handler():
            ctx = ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"cannot reach Ray at {address or 'a new local instance'}: {msg}") from None
    if settings.keep and not address:
        return RayContext(False, _dashboard_url(ctx), *cluster_size(), dashboard_token=_token_hint(),
                          kept=kwargs["address"])
    reaper = None
    if not address:  # a local Ray of ours: ended with this process, even after a SIGKILL
        reaper = reaper_mod.start()
    return RayContext(True, _dashboard_url(ctx), *cluster_size(), reaper=reaper, dashboard_token=_token_hint())


def dashboard_available() -> bool:
    """Whether Ray's dashboard can start here: its packages come with ``ray[default]``
    (``pip install 'grb-dist[dashboard]'``); a minimal Ray runs every sweep without them."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("aiohttp", "aiohttp_cors", "prometheus_client"))


#: What to install for the dashboard, in messages.
DASHBOARD_HINT = "install Ray's dashboard with pip install 'grb-dist[dashboard]'"


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now (the OS picks it)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_head(settings: RaySettings) -> str:
    """Start a local Ray head node that outlives this process (``ray start --head`` on free
    ports, its dashboard on 127.0.0.1); its address."""
    import subprocess
    import sys

    port = free_port()
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", f"--port={port}",
           "--node-ip-address=127.0.0.1", "--disable-usage-stats"]
    if settings.num_cpus is not None:
        cmd.append(f"--num-cpus={settings.num_cpus}")
    if settings.include_dashboard is not False and dashboard_available():
        cmd += ["--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={free_port()}"]
    else:
        cmd.append("--include-dashboard=false")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        raise ConfigError(f"cannot start a Ray head node to keep (--keep-ray): {last}")
    return f"127.0.0.1:{port}"


@contextmanager
def _keep_sigterm_handler() -> Iterator[None]:
    """``ray.init`` replaces the driver's SIGTERM handler with ``sys.exit``; a handler the
    caller installed (a Python function: ``grb-dist sweep`` and ``study`` stop on SIGTERM as
    on Ctrl-C, see :func:`grb_dist.cli.base.interruptible`) is put back afterwards. Without
    one, Ray's stays."""
    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if callable(before):
            signal.signal(signal.SIGTERM, before)


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


def disconnect(context: RayContext) -> None:
    """Leave Ray; a local Ray started by :func:`connect` is stopped, and its watchdog ends
    whatever process of it outlived ``ray.shutdown()``."""
    try:
        if context.started and ray.is_initialized():
            ray.shutdown()
    finally:
        if context.reaper is not None:
            context.reaper.stop()


@ray.remote
def _worker_size() -> int:
    """A fresh worker's resident bytes once it holds what every task imports (the worker
    module: torch and the models)."""
    import importlib
    import resource

    importlib.import_module(worker.__name__)  # what a task's first call imports
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def startup_report(num_cpus: int, include_dashboard: bool | None) -> None:
    """Print (JSON) what a sweep's Ray costs before and after its work on this machine: the
    seconds of ``ray.init`` for a local Ray of ``num_cpus`` CPUs (as :func:`connect` starts
    it), of its first task on every one of those fresh workers (process start and imports, all
    at once), of ``ray.shutdown``, and a worker's resident bytes. Run by ``sweep --plan``'s
    calibration in a process of its own (its imports are timed by the caller)."""
    import json
    import time

    start = time.perf_counter()
    ctx = connect(RaySettings(num_cpus=num_cpus, include_dashboard=include_dashboard))
    up = time.perf_counter()
    try:
        sizes = ray.get([_worker_size.options(num_cpus=1).remote() for _ in range(num_cpus)])
        ready = time.perf_counter()
    finally:
        disconnect(ctx)
    print(json.dumps({"ray_start": up - start, "workers": ready - up, "shutdown": time.perf_counter() - ready,
                      "worker_bytes": max(sizes)}))


# ---------------------------------------------------------------- object store and results


def put(value: Any) -> Any:
    """``value`` in the object store; its ref."""
    return ray.put(value)


def put_registrations() -> list:
    """This process's registry additions (:func:`grb_dist.core.registry.snapshot`) in the
    object store, once per run: the ref nested in a list (Ray passes it unresolved), which
    every task and actor call carries; a worker restores a snapshot once."""
    return [ray.put(registry.snapshot())]


_restored: set[str] = set()  # snapshots this worker restored


def _restore(registrations: list) -> None:
    """In a worker: restore the driver's registry snapshot, once per snapshot."""
    ref = registrations[0]
    key = ref.hex()
    if key not in _restored:
        registry.restore(ray.get(ref))
        _restored.add(key)


def wait(refs: list, timeout: float | None) -> list:
    """The first ref of ``refs`` that is ready within ``timeout`` seconds (``[]`` if none)."""
    ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
    return ready


def get(ref: Any) -> Any:
    """The result of ``ref``; :class:`ActorLost` when its actor died, :class:`TaskFailed`
    when the work failed."""
    try:
        return ray.get(ref)
    except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
        raise ActorLost(_cause(exc)) from None
    except ray.exceptions.RayError as exc:
        raise TaskFailed(_cause(exc)) from None


def cancel(refs: Iterable[Any]) -> None:
    """Cancel what is still in flight (best effort)."""
    for ref in refs:
        try:
            ray.cancel(ref, force=False)
        except Exception:  # noqa: BLE001 - best effort (actor calls, finished refs)
            pass


def kill(actors: Iterable[Any]) -> None:
    for actor in actors:
        ray.kill(actor, no_restart=True)


def cluster_size() -> tuple[float, float]:
    """CPUs and GPUs of the connected cluster."""
    res = ray.cluster_resources()
    return float(res.get("CPU", 0)), float(res.get("GPU", 0))


def largest_node_memory() -> int:
    """Ray memory plus object store of the largest live node of the connected cluster (0
    when Ray does not say)."""
    sizes = [n.get("Resources", {}).get("memory", 0) + n.get("Resources", {}).get("object_store_memory", 0)
             for n in ray.nodes() if n.get("Alive")]
    return int(max(sizes)) if sizes else 0


def _cause(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    if cause is not None:
        return f"{type(cause).__name__}: {cause}".splitlines()[0]
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__


# ---------------------------------------------------------------- tasks and actors of a sweep


def _device() -> str:
    return "cuda" if ray.get_gpu_ids() else "cpu"


#: The environment variable that carries ``RaySettings.threads`` to tasks and actors.
THREADS_ENV = "GRB_DIST_TORCH_THREADS"


def options(settings: RaySettings, kind: str, use_gpu: bool) -> dict[str, Any]:
    """Ray options of a ``train`` or ``attack`` task or a ``scorer`` actor under ``settings``:
    resources (a GPU share only when the cluster has GPUs), retries, and the runtime
    environment that gives it ``settings.threads`` torch threads."""
    threads = {"runtime_env": {"env_vars": {THREADS_ENV: str(settings.threads)}}} if settings.threads else {}
    if kind == "scorer":
        return {"num_cpus": settings.scorer_num_cpus, "num_gpus": settings.scorer_num_gpus if use_gpu else 0,
                "max_restarts": settings.max_restarts, "max_task_retries": settings.max_task_retries, **threads}
    cpus = settings.train_num_cpus if kind == "train" else settings.attack_num_cpus
    return {"max_retries": settings.max_retries, "retry_exceptions": False, "num_cpus": cpus,
            "num_gpus": settings.task_num_gpus if use_gpu else 0, **threads}


@contextmanager
def _in_worker(registrations: list) -> Iterator[None]:
    """Around every task and actor call: the driver's registrations (restored once per
    worker) and torch's threads before it; the heap's free memory given back after it
    (:mod:`grb_dist.core.allocator`), so that an idle worker holds only what it keeps."""
    _restore(registrations)
    _set_threads()
    try:
        yield
    finally:
        allocator.release()


def _set_threads() -> None:
    """torch's intra-op threads of this worker from :data:`THREADS_ENV`, when set."""
    threads = os.environ.get(THREADS_ENV)
    if threads:
        import torch

        torch.set_num_threads(int(threads))


@ray.remote
def _train_remote(graph: Graph, task, registrations: list) -> worker.TrainedModel:
    with _in_worker(registrations):
        return worker.train_task(graph, task, device=_device())


@ray.remote
def _attack_remote(graph: Graph, cells: list, models: list, registrations: list):
    """A batch of attack cells on one surrogate and difficulty: the surrogate is loaded and
    its clean pass computed once (:func:`worker.attack_batch`); ``models``: ``(name,
    params, [state_ref])`` of the surrogate, then of the model whose predictions the cells
    fight when they have one (adaptive cells); one return value per cell (submitted with
    ``num_returns=len(cells)``), so each perturbation goes to the Scorers as soon as the
    batch ends, without passing through the driver."""
    with _in_worker(registrations):
        device = _device()
        surrogate, *labeler = [worker.load_model(graph, name, params, ray.get(ref[0]), device)
                               for name, params, ref in models]
        results = worker.attack_batch(graph, cells, surrogate, device=device, labeler=labeler[0] if labeler else None)
        return results[0] if len(results) == 1 else tuple(results)


@ray.remote
def _poison_remote(graph: Graph, task, attack: worker.AttackResult | None, state: list, registrations: list):
    """Train a defense on a poisoned graph and score it (:func:`worker.poison_task`);
    ``state``: ``[ref]`` of the stored state_dict when the run holds the model, else ``[]``."""
    with _in_worker(registrations):
        perturbation, scored = (attack.perturbation, attack.scored) if attack is not None else (None, None)
        return worker.poison_task(graph, task, perturbation, device=_device(),
                                  state_dict=ray.get(state[0]) if state else None, scored=scored)


def submit_poison(graph_ref: Any, task: Any, pert_ref: Any, state_ref: Any, registrations: list, opts: dict,
                  name: str) -> Any:
    """A poisoning task (train on the perturbation of ``pert_ref``, ``None`` for the clean
    graph, then score); its ref. ``state_ref``: the stored model's, or ``None``."""
    return _poison_remote.options(**opts, name=name).remote(graph_ref, task, pert_ref,
                                                            [state_ref] if state_ref is not None else [],
                                                            registrations)


def submit_train(graph_ref: Any, task: Any, registrations: list, opts: dict, name: str) -> Any:
    """A training task (:func:`worker.train_task`); its ref."""
    return _train_remote.options(**opts, name=name).remote(graph_ref, task, registrations)


def submit_attack(graph_ref: Any, cells: list, models: list, registrations: list, opts: dict, name: str) -> list:
    """An attack task over a batch of cells on one stored surrogate (``models``: ``(name,
    params, state_ref)`` of the surrogate, and of the labels' model when the cells have
    one); one ref per cell."""
    refs = _attack_remote.options(**opts, num_returns=len(cells), name=name).remote(
        graph_ref, cells, [(m, p, [ref]) for m, p, ref in models], registrations)
    return list(refs) if len(cells) > 1 else [refs]


#: What a scoring call carries so that any Scorer, fresh or restarted, can load what it
#: needs: ``[graph_ref, [(defense, params, state_dict_ref, train_seconds), ...],
#: registrations]``; refs nested in a list, which Ray passes unresolved.
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

    def __init__(self, name: str):
        self.name = name
        self.scorer: worker.Scorer | None = None

    def __repr__(self) -> str:  # the actor's name in Ray's logs and dashboard
        return self.name

    def _hold(self, setup: ScorerSetup) -> worker.Scorer:
        graph_ref, models, _registrations = setup  # restored by score's _in_worker
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
        with _in_worker(setup[2]):
            scorer = self._hold(setup)
            if attack is None:
                return scorer.score(None, difficulty, defenses)
            return scorer.score(attack.perturbation, difficulty, defenses, attack.scored)


ScorerActor = ray.remote(_ScorerActor)


def start_scorer(name: str, opts: dict[str, Any]) -> Any:
    """A Scorer actor named ``name``; when that name is still taken (a Scorer of an earlier
    sweep of this driver that Ray has not finished killing), with a suffix."""
    try:
        return ScorerActor.options(name=name, **opts).remote(name)
    except ValueError:
        return ScorerActor.options(name=f"{name}-{uuid.uuid4().hex[:6]}", **opts).remote(name)


def submit_score(scorer: Any, setup: ScorerSetup, pert_ref: Any, difficulty: str, defenses: list[str]) -> Any:
    """A scoring call: ``defenses`` on the perturbation of ``pert_ref`` (``None``: clean)."""
    return scorer.score.remote(setup, pert_ref, difficulty, defenses)


# ---------------------------------------------------------------- the study's work units


def _unit(fn: Callable[..., Any], registrations: list, *args: Any) -> Any:
    with _in_worker(registrations):
        return fn(*args)


def run_units(fn: Callable[..., Any], work: Iterable[tuple[str, tuple]], on_result: Callable[[int, Any], None],
              *, settings: RaySettings, job_name: str, max_in_flight: int = 0) -> None:
    """Run ``fn(*args)`` for every ``(name, args)`` of ``work`` as a Ray task (one CPU, two
    retries) on the cluster of ``settings`` (a local Ray when it names none, stopped
    afterwards), at most ``max_in_flight`` at a time (``0``: twice the cluster's CPUs), and
    hand each result to ``on_result(index, result)`` in the driver as soon as it is ready.
    A unit that fails beyond its retries raises :class:`TaskFailed`."""
    context = connect(settings, job_name=job_name)
    try:
        registrations = put_registrations()
        task = ray.remote(num_cpus=1, max_retries=2)(_unit)
        bound = max_in_flight or max(2, int(2 * cluster_size()[0]))
        pending = iter(enumerate(work))
        refs: dict[Any, int] = {}
        while True:
            while len(refs) < bound:
                item = next(pending, None)
                if item is None:
                    break
                i, (name, args) = item
                refs[task.options(name=name).remote(fn, registrations, *args)] = i
            if not refs:
                break
            ready = wait(list(refs), None)
            on_result(refs.pop(ready[0]), get(ready[0]))
    finally:
        disconnect(context)


__all__ = ["ActorLost", "RayContext", "ScorerSetup", "TaskFailed", "cancel", "cluster_size", "connect", "disconnect",
           "get", "kill", "largest_node_memory", "options", "put", "put_registrations", "run_units", "start_scorer",
           "submit_attack", "submit_score", "submit_train", "wait"]
