"""The Ray edge: the only module of grb_dist that imports Ray.

Everything the sweep and the study ask of Ray goes through here, as plain functions the
rest of the package calls without knowing Ray. It knows neither the sweep nor the study:
they hand it plain functions and classes (their work, the Scorer), which it runs as Ray
tasks and actors:

- joining a cluster or starting a local Ray (:func:`connect`, :func:`disconnect`), with
  the dashboard's URL and token hint, and a watchdog that ends a local Ray with this process;
- values and the registry snapshot in the object store once per run (:func:`put`,
  :func:`put_registrations`); every worker restores the snapshot once (:func:`in_worker`);
- tasks and actors with the resources of :func:`options` (:func:`submit`,
  :func:`start_actor`, :func:`call`), collected with :func:`wait` and :func:`get`, whose
  failures come back as :class:`TaskFailed` or :class:`ActorLost` (no Ray exception leaves
  this module);
- independent work units with a bound on work in flight (:func:`run_units`).

Ray's private API is used in two places only, each guarded with a fallback for other Ray
versions: turning token authentication on explicitly for a local Ray, and asking for the
dashboard's URL when ``ray.init`` did not return it.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
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
from grb_dist.cluster import reaper as reaper_mod
from grb_dist.cluster.settings import Connection, RaySettings, check_reachable


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
    reaper: Any = None  # grb_dist.cluster.reaper.Reaper of a local Ray started here
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
    address, conn = settings.resolved_address(), settings.connection
    if address:
        check_reachable(address)
    if conn.include_dashboard and not address and not dashboard_available():
        raise ConfigError(f"--dashboard: this Ray has no dashboard packages; {DASHBOARD_HINT}, or leave --dashboard out")
    if ray.is_initialized():
        return RayContext(False, _dashboard_url(None), *cluster_size(), dashboard_token=_token_hint())
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
    if job_name:
        kwargs["job_config"] = JobConfig(metadata={"job_name": job_name})
    if address:
        kwargs["address"] = address
    elif conn.keep:  # a head node of its own, left running: joined like a cluster
        _explicit_token_auth()
        kwargs["address"] = _start_head(conn)
        kwargs["namespace"] = NAMESPACE
    else:
        kwargs["address"] = "local"
        kwargs["namespace"] = NAMESPACE
        _explicit_token_auth()
        if conn.num_cpus is not None:
            kwargs["num_cpus"] = conn.num_cpus
        if conn.num_gpus is not None:
            kwargs["num_gpus"] = conn.num_gpus
        if conn.memory is not None:
            kwargs["_memory"] = conn.memory
        if conn.include_dashboard is not None:
            kwargs["include_dashboard"] = conn.include_dashboard
        if conn.include_dashboard is not False and dashboard_available():  # the printed URL is this sweep's own
            kwargs["dashboard_port"] = free_port()
    try:
        with _keep_sigterm_handler():
            ctx = ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"cannot reach Ray at {address or 'a new local instance'}: {msg}") from None
    if conn.keep and not address:
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


def _start_head(conn: Connection) -> str:
    """Start a local Ray head node that outlives this process (``ray start --head`` on free
    ports, its dashboard on 127.0.0.1); its address."""
    import subprocess
    import sys

    port = free_port()
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", f"--port={port}",
           "--node-ip-address=127.0.0.1", "--disable-usage-stats"]
    if conn.num_cpus is not None:
        cmd.append(f"--num-cpus={conn.num_cpus}")
    if conn.num_gpus is not None:
        cmd.append(f"--num-gpus={conn.num_gpus}")
    if conn.memory is not None:
        cmd.append(f"--memory={conn.memory}")
    if conn.include_dashboard is not False and dashboard_available():
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
def _worker_size(preload: str) -> int:
    """A fresh worker's resident bytes once it holds the module ``preload`` (what every
    task of the caller imports)."""
    import importlib
    import resource

    importlib.import_module(preload)  # what a task's first call imports
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def startup_report(num_cpus: int, include_dashboard: bool | None, preload: str) -> None:
    """Print (JSON) what a local Ray costs before and after its work on this machine: the
    seconds of ``ray.init`` for a local Ray of ``num_cpus`` CPUs (as :func:`connect` starts
    it), of its first task on every one of those fresh workers (process start and the import
    of the module ``preload``, all at once), of ``ray.shutdown``, and a worker's resident
    bytes. Run by ``sweep --plan``'s calibration in a process of its own (its imports are
    timed by the caller)."""
    import json
    import time

    start = time.perf_counter()
    ctx = connect(RaySettings(Connection(num_cpus=num_cpus, include_dashboard=include_dashboard)))
    up = time.perf_counter()
    try:
        sizes = ray.get([_worker_size.options(num_cpus=1).remote(preload) for _ in range(num_cpus)])
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


def nodes() -> list[dict[str, float]]:
    """The live nodes of the connected cluster: ``cpus``, ``gpus`` and ``memory`` (the bytes
    Ray lets tasks and actors reserve there, its ``memory`` resource)."""
    return [{"cpus": float(r.get("CPU", 0)), "gpus": float(r.get("GPU", 0)), "memory": float(r.get("memory", 0))}
            for n in ray.nodes() if n.get("Alive") for r in [n.get("Resources", {})]]


@ray.remote(num_cpus=0)
def _gpu_memory_probe() -> int:
    """Bytes of memory of the GPU this task was given, read without starting CUDA here
    (``nvidia-smi``; torch's CUDA where that is missing); 0 when neither answers."""
    import shutil
    import subprocess

    ids = ray.get_gpu_ids()
    if ids and shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits",
                              "-i", str(ids[0])], capture_output=True, text=True, timeout=30)
        if out.returncode == 0 and out.stdout.strip().split()[0].isdigit():
            return int(out.stdout.split()[0]) * 2**20
    import torch

    return int(torch.cuda.get_device_properties(0).total_memory) if torch.cuda.is_available() else 0


def gpu_memory() -> int:
    """Bytes of memory of one GPU of the connected cluster (a probe on a sliver of one); 0
    when the cluster has none or its GPU does not say."""
    if cluster_size()[1] <= 0:
        return 0
    try:
        return int(ray.get(_gpu_memory_probe.options(num_gpus=0.001).remote(), timeout=120))
    except (ray.exceptions.RayError, TimeoutError):
        return 0


def _cause(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    if cause is not None:
        return f"{type(cause).__name__}: {cause}".splitlines()[0]
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__


# ---------------------------------------------------------------- tasks and actors


def device() -> str:
    """In a worker: ``cuda`` when Ray gave this task or actor a GPU that torch sees, else
    ``cpu`` (a cluster that declares GPUs it does not have runs the same work on CPUs)."""
    if not ray.get_gpu_ids():
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def fetch_nested(ref: Any) -> Any:
    """In a worker: the value of a ref that came nested in an argument (Ray hands a task the
    values of its top-level ref arguments only)."""
    return ray.get(ref)


#: The environment variable that carries ``Scaling.threads`` (of :class:`RaySettings`) to tasks and actors.
THREADS_ENV = "GRB_DIST_TORCH_THREADS"


def options(settings: RaySettings, kind: str, *, memory: int = 0, gpu_share: float = 0.0) -> dict[str, Any]:
    """Ray options of a ``train`` or ``attack`` task, a ``scorer`` actor or a ``device``
    worker actor under ``settings``: its CPUs, the bytes of memory it reserves (``memory``:
    its peak, so that Ray never packs tasks that do not fit a node together) and its share
    of a GPU (``gpu_share``, sized by its GPU memory; 0 on CPUs), retries or restarts, and
    the runtime environment that gives it ``settings.scaling.threads`` torch threads."""
    scaling, faults = settings.scaling, settings.faults
    threads = {"runtime_env": {"env_vars": {THREADS_ENV: str(scaling.threads)}}} if scaling.threads else {}
    sizes = {"num_gpus": gpu_share, **({"memory": int(memory)} if memory > 0 else {})}
    if kind in ("scorer", "device"):
        cpus = scaling.scorer_num_cpus if kind == "scorer" else scaling.attack_num_cpus
        return {"num_cpus": cpus, "max_restarts": faults.max_restarts,
                "max_task_retries": faults.max_task_retries, **sizes, **threads}
    cpus = scaling.train_num_cpus if kind == "train" else scaling.attack_num_cpus
    return {"max_retries": faults.max_retries, "retry_exceptions": False, "num_cpus": cpus, **sizes, **threads}


@contextmanager
def in_worker(registrations: list) -> Iterator[None]:
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


def _call(fn: Callable[..., Any], registrations: list, *args: Any) -> Any:
    with in_worker(registrations):
        return fn(*args)


#: Every task runs :func:`_call`: the plain function it is handed, inside :func:`in_worker`.
_task = ray.remote(_call)


def submit(fn: Callable[..., Any], args: tuple, registrations: list, opts: dict, name: str,
           num_returns: int = 1) -> Any:
    """``fn(*args)`` as a Ray task named ``name`` with the options ``opts``, inside
    :func:`in_worker`; top-level refs of ``args`` arrive resolved. Its ref, or a list of
    ``num_returns`` refs when ``num_returns`` > 1 (``fn`` then returns a tuple)."""
    refs = _task.options(**opts, num_returns=num_returns, name=name).remote(fn, registrations, *args)
    return list(refs) if num_returns > 1 else refs


_actor_classes: dict[type, Any] = {}


def start_actor(cls: type, name: str, opts: dict[str, Any], *args: Any) -> Any:
    """An actor of the plain class ``cls`` named ``name`` (``cls(*args)``); when that name is
    still taken (an actor of an earlier run of this driver that Ray has not finished
    killing), with a suffix. Its methods are called with :func:`call`."""
    remote = _actor_classes.get(cls)
    if remote is None:
        remote = _actor_classes[cls] = ray.remote(cls)
    try:
        return remote.options(name=name, **opts).remote(*args)
    except ValueError:
        return remote.options(name=f"{name}-{uuid.uuid4().hex[:6]}", **opts).remote(*args)


def call(actor: Any, method: str, *args: Any, num_returns: int = 1, name: str | None = None) -> Any:
    """A call of ``actor``'s ``method`` (named ``name`` on the dashboard); its ref, or a list
    of ``num_returns`` refs when ``num_returns`` > 1."""
    m = getattr(actor, method)
    if num_returns > 1 or name:
        m = m.options(num_returns=num_returns, **({"name": name} if name else {}))
    refs = m.remote(*args)
    return list(refs) if num_returns > 1 else refs


# ---------------------------------------------------------------- independent work units


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
        bound = max_in_flight or max(2, int(2 * cluster_size()[0]))
        pending = iter(enumerate(work))
        refs: dict[Any, int] = {}
        while True:
            while len(refs) < bound:
                item = next(pending, None)
                if item is None:
                    break
                i, (name, args) = item
                refs[_task.options(num_cpus=1, max_retries=2, name=name).remote(fn, registrations, *args)] = i
            if not refs:
                break
            ready = wait(list(refs), None)
            on_result(refs.pop(ready[0]), get(ready[0]))
    finally:
        disconnect(context)


class SweepMetrics:
    """The sweep's own figures on Ray's metrics export, next to Ray's: the dashboard's
    Metrics page and the Prometheus endpoint of each node (``ray start
    --metrics-export-port``), every series tagged with the ``run`` (its directory or URI):

    - ``grb_dist_items{stage, scenario, state}``: models trained (``train``, scenario
      ``all``: a model serves every scenario), perturbations made (``attack``) and cells
      scored (``score``) per scenario: ``done`` (stored ones included), ``failed``, ``left``;
    - ``grb_dist_items_per_minute{stage}``: the rate of this invocation's own work;
    - ``grb_dist_attack_steps_per_second{attack}``: steps per second of an attack's computing;
    - ``grb_dist_score_rows{state}``: score rows ``buffered`` by the driver and ``written``.

    Ray prefixes the names with ``ray_``; ``grafana-grb-dist.json`` is a dashboard of them."""

    def __init__(self, run: str):
        from ray.util.metrics import Gauge

        self.run = run
        self.items = Gauge("grb_dist_items", description="models trained, perturbations made and cells scored, "
                           "by stage, scenario and state (done, failed, left)",
                           tag_keys=("run", "stage", "scenario", "state"))
        self.rate = Gauge("grb_dist_items_per_minute", description="items of this invocation per minute, by stage",
                          tag_keys=("run", "stage"))
        self.steps = Gauge("grb_dist_attack_steps_per_second", description="an attack's optimisation steps per "
                           "second of its own computing", tag_keys=("run", "attack"))
        self.rows = Gauge("grb_dist_score_rows", description="score rows buffered by the driver and written",
                          tag_keys=("run", "state"))

    def stage(self, stage: str, counts: dict[str, tuple[int, int, int]], per_minute: float) -> None:
        """``counts``: ``{scenario: (done, failed, total)}`` of the stage."""
        for scenario, (done, failed, total) in counts.items():
            for state, value in (("done", done), ("failed", failed), ("left", max(0, total - done - failed))):
                self.items.set(value, tags={"run": self.run, "stage": stage, "scenario": scenario, "state": state})
        self.rate.set(per_minute, tags={"run": self.run, "stage": stage})

    def steps_per_second(self, attack: str, rate: float) -> None:
        self.steps.set(rate, tags={"run": self.run, "attack": attack})

    def score_rows(self, *, buffered: int, written: int) -> None:
        self.rows.set(buffered, tags={"run": self.run, "state": "buffered"})
        self.rows.set(written, tags={"run": self.run, "state": "written"})

    @staticmethod
    def settle() -> None:
        """Wait two of Ray's metric report intervals (``metrics_report_interval_ms``, 10 s by
        default), so that the last figures set reach the export before the driver leaves:
        a sweep on a cluster ends on the dashboard at its real counts."""
        from ray._raylet import Config

        try:
            seconds = Config.metrics_report_interval_ms() / 1000
        except Exception:  # noqa: BLE001 - a Ray without the setting: its default
            seconds = 10.0
        time.sleep(min(2 * seconds, 30.0) + 0.5)


__all__ = ["ActorLost", "RayContext", "SweepMetrics", "TaskFailed", "call", "cancel", "cluster_size", "connect", "device",
           "disconnect", "fetch_nested", "get", "gpu_memory", "in_worker", "kill", "nodes", "options", "put",
           "put_registrations", "run_units", "start_actor", "startup_report", "submit", "wait"]
