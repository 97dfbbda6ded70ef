"""Every Ray option of a sweep or a study (:class:`RaySettings`), checked without starting Ray.

The options come in three groups, as Ray's own documentation groups them: which Ray to join
or what a local one has (:class:`Connection`, what ``ray.init`` takes), what each task and
actor reserves and how much runs at once (:class:`Scaling`, what ``.options()`` takes), and
what happens when a worker dies (:class:`FaultTolerance`)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from urllib.parse import urlparse

from grb_dist.core.errors import ConfigError


@dataclass(frozen=True)
class Connection:
    """Which Ray a sweep joins, or what the local Ray it starts has.

    Attributes:
        address: cluster to join (``auto``, ``host:port``, ``ray://host:port``); ``None``
            uses ``$RAY_ADDRESS`` or starts a local Ray.
        num_cpus: CPUs of a local Ray (``None`` = all); ignored when joining a cluster.
        num_gpus: GPUs of a local Ray (``None`` = the GPUs it finds); ignored when joining a
            cluster. Declaring GPUs a machine lacks runs the GPU path's actors on its CPUs.
        memory: bytes of memory a local Ray lets its tasks and actors reserve (``None`` =
            Ray's default, about 70% of what is free); ignored when joining a cluster.
        gpu_memory: bytes of memory of each GPU (``None`` = asked of the cluster's GPU);
            tasks and actors reserve a share of a GPU sized by their GPU memory against it.
        include_dashboard: start the dashboard of a local Ray (``None`` = Ray's default).
        keep: leave a local Ray (and its dashboard) running after the sweep, to look at the
            run's timeline and logs afterwards: it is started as its own head node
            (``ray start --head``) instead of inside this process; ``ray stop`` ends it.
    """

    address: str | None = None
    num_cpus: int | None = None
    num_gpus: int | None = None
    memory: int | None = None
    gpu_memory: int | None = None
    include_dashboard: bool | None = None
    keep: bool = False

    def __post_init__(self) -> None:
        if self.num_cpus is not None and self.num_cpus < 1:
            raise ConfigError(f"--num-cpus must be >= 1, got {self.num_cpus}")
        for name in ("num_gpus", "memory", "gpu_memory"):
            value = getattr(self, name)
            if value is not None and (value < 0 or (name != "num_gpus" and value == 0)):
                raise ConfigError(f"{name} must be {'>= 0' if name == 'num_gpus' else '> 0'}, got {value}")

    def resolved_address(self) -> str | None:
        return self.address or os.environ.get("RAY_ADDRESS") or None


@dataclass(frozen=True)
class Scaling:
    """What each task and actor reserves, and how much of the work runs at once.

    Attributes:
        max_in_flight: bound on submitted-but-unfinished attack tasks and scoring calls
            (``0`` = twice the cluster's CPUs).
        train_num_cpus / attack_num_cpus: CPUs reserved per training / attack task.
        scorer_num_cpus: CPUs reserved per Scorer actor. The default 0 lets scoring (forward
            passes only) share cores with attack tasks, so that one-CPU clusters never
            deadlock; raise it to reserve cores on big nodes.
        workers_per_gpu: most device-worker actors per GPU (``0`` = as many as the job's
            largest task fits on the GPU, at most the node's CPUs per GPU).
        num_scorers: Scorer actors, each holding a share of the defenses (``0`` = one per
            two cluster CPUs, or two per GPU, at most one per defense).
        threads: torch intra-op threads of every training and attack task and Scorer actor
            (1..1024; ``None`` = Ray's default), passed as ``$GRB_DIST_TORCH_THREADS`` in
            their runtime environment.
    """

    max_in_flight: int = 0
    train_num_cpus: float = 1.0
    attack_num_cpus: float = 1.0
    scorer_num_cpus: float = 0.0
    workers_per_gpu: int = 0
    num_scorers: int = 0
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.threads is not None and not 1 <= self.threads <= 1024:
            raise ConfigError(f"--threads must be in 1..1024, got {self.threads}")
        if self.max_in_flight < 0 or self.num_scorers < 0 or self.workers_per_gpu < 0:
            raise ConfigError("max_in_flight, num_scorers and workers_per_gpu must be >= 0 (0 = automatic)")
        for name in ("train_num_cpus", "attack_num_cpus"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0")
        if self.scorer_num_cpus < 0:
            raise ConfigError("scorer_num_cpus must be >= 0")


@dataclass(frozen=True)
class FaultTolerance:
    """What happens when a worker dies.

    Attributes:
        max_retries: retries of a failed training or attack task (worker crash).
        max_restarts / max_task_retries: restarts of a dead Scorer and retries of its calls.
        resubmits: resubmissions of a scoring call that failed because its actor died.
    """

    max_retries: int = 3
    max_restarts: int = 4
    max_task_retries: int = 2
    resubmits: int = 3

    def __post_init__(self) -> None:
        if min(self.max_retries, self.max_restarts, self.max_task_retries, self.resubmits) < 0:
            raise ConfigError("retry and restart counts must be >= 0")


@dataclass(frozen=True)
class RaySettings:
    """Every Ray option of a sweep, in one place, in its three groups (each checked when made).

    Attributes:
        connection: which Ray, or what a local one has (:class:`Connection`).
        scaling: what each task and actor reserves, how much runs at once (:class:`Scaling`).
        faults: retries and restarts (:class:`FaultTolerance`).
    """

    connection: Connection = field(default_factory=Connection)
    scaling: Scaling = field(default_factory=Scaling)
    faults: FaultTolerance = field(default_factory=FaultTolerance)

    def resolved_address(self) -> str | None:
        return self.connection.resolved_address()


def check_reachable(address: str) -> None:
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


__all__ = ["Connection", "FaultTolerance", "RaySettings", "Scaling", "check_reachable"]
