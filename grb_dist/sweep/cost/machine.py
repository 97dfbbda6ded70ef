"""Which machine a calibration belongs to, the file its figures are cached in, and what
starting a local Ray costs on it (:class:`Startup`).

A calibration is valid on one machine (processor, cores, device, threads, the allocator's
policy, the versions of torch and of this package, and this package's code): its figures
are cached per machine in ``$XDG_CACHE_HOME/grb-dist/calibration/`` (default ``~/.cache``),
one JSON file named by the machine's identity, numbers only. A GPU cluster is planned from
the cached file of a machine with that GPU (:func:`gpu_machine`).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from grb_dist.core import allocator
from grb_dist.core.errors import ConfigError, GrbDistError
from grb_dist.core.version import __version__
from grb_dist.sweep.job import content_hash

#: Bump when what a calibration measures changes: older cache entries are not read.
CALIBRATION_VERSION = 1


def cpu_model() -> str:
    """This machine's processor, as the OS names it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@lru_cache(maxsize=1)
def code_hash() -> str:
    """A hash of this package's Python sources (read once per process): a calibration
    measured by other code (a faster model, a changed attack) is not reused."""
    import hashlib

    root = Path(__file__).resolve().parents[2]  # grb_dist/
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def machine_identity(device: str, threads: int) -> dict[str, Any]:
    """What makes a calibration valid on a machine: its CPU, cores, device, threads, the
    allocator's policy for training, the versions of torch and of this package, and this
    package's code."""
    import torch

    name = torch.cuda.get_device_name(0) if device.startswith("cuda") else cpu_model()
    return {"host": platform.node(), "device": device, "processor": name, "cores": os.cpu_count(),
            "threads": threads, "allocator": allocator.training_policy(), "torch": torch.__version__,
            "grb_dist": __version__, "code": code_hash(), "version": CALIBRATION_VERSION}


def cache_dir() -> Path:
    """Where calibration figures are cached, a file per machine."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "grb-dist" / "calibration"


def cache_path(machine: Mapping[str, Any]) -> Path:
    """The calibration cache file of a machine."""
    return cache_dir() / f"{content_hash(dict(machine))}.json"


def read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def entries(path: Path) -> dict[str, Any]:
    entries = read_cache(path).get("entries")
    return dict(entries) if isinstance(entries, dict) else {}


def gpu_machine(kind: str, threads: int) -> dict[str, Any]:
    """The identity of a GPU machine whose calibration this machine's cache holds: a CUDA
    device whose name contains ``kind`` (``h100``, ``a100`` ...), with ``threads`` threads,
    measured with this code."""
    root = cache_path({}).parent
    found = []
    for path in sorted(root.glob("*.json")) if root.is_dir() else ():
        machine = read_cache(path).get("machine")
        if (isinstance(machine, dict) and str(machine.get("device", "")).startswith("cuda")
                and kind.lower() in str(machine.get("processor", "")).lower() and machine.get("threads") == threads
                and machine.get("version") == CALIBRATION_VERSION and machine.get("code") == code_hash()
                and cache_path(machine) == path):
            found.append(machine)
    if not found:
        raise ConfigError(
            f"no calibration of a {kind!r} GPU in {root}: run `grb-dist sweep ... --plan` once on a node with that GPU "
            f"(it calibrates there and caches the figures) and copy its {root.name}/*.json files here")
    return found[-1]


@dataclass(frozen=True)
class Startup:
    """What a sweep's Ray costs around its work (seconds): the driver importing torch and the
    Ray edge, a local Ray's start, its fresh workers' first task (all at once: process start
    and imports), its shutdown; and a worker's resident bytes."""

    driver_import: float
    ray_start: float
    workers: float
    shutdown: float
    worker_bytes: int


class StartupProbe:
    """:class:`Startup` on this machine, measured in a process of its own that imports torch
    and the Ray edge, starts a local Ray of ``cpus`` CPUs as a sweep does, runs a first task
    on each worker and stops it (:func:`grb_dist.cluster.ray_edge.startup_report`). It starts
    at once and runs beside the caller (a calibration samples its graph meanwhile, and
    measures nothing: the probe's processes would slow what it times); :meth:`result` waits
    for it, :meth:`cancel` stops it."""

    def __init__(self, cpus: int, dashboard: bool | None) -> None:
        code = ("import json, time; t = time.perf_counter(); import torch; from grb_dist.cluster import ray_edge; "
                f"print(json.dumps({{'driver_import': time.perf_counter() - t}})); "
                f"ray_edge.startup_report({int(cpus)}, {dashboard!r}, 'grb_dist.sweep.worker')")
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)

    def result(self) -> Startup:
        try:
            out, err = self.proc.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            self.cancel()
            out, err = "", "timed out after 600 s"
        lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        merged = {k: v for line in lines for k, v in line.items()}
        if self.proc.returncode or not {"driver_import", "ray_start", "workers", "shutdown"} <= merged.keys():
            last = (err.strip().splitlines() or [f"exit status {self.proc.returncode}"])[-1][:200]
            raise GrbDistError(f"could not start a local Ray to time its start-up ({last}); "
                               "check that `grb-dist sweep` runs on this machine")
        return Startup(float(merged["driver_import"]), float(merged["ray_start"]), float(merged["workers"]),
                       float(merged["shutdown"]), int(merged["worker_bytes"]))

    def cancel(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def measure_startup(cpus: int, dashboard: bool | None) -> Startup:
    """:class:`Startup` on this machine (:class:`StartupProbe`), waited for."""
    return StartupProbe(cpus, dashboard).result()


__all__ = ["CALIBRATION_VERSION", "Startup", "StartupProbe", "measure_startup", "cache_dir", "cache_path", "code_hash", "cpu_model", "entries", "gpu_machine",
           "machine_identity", "read_cache"]


# ---------------------------------------------------------------- the plan's memory figures

def plan_path(config_hash: str, fingerprint: str) -> Path:
    """The file of the last plan's memory figures of a job on a dataset."""
    return cache_dir() / "plans" / f"{content_hash({'config': config_hash, 'dataset': fingerprint})}.json"


def save_plan_figures(config_hash: str, fingerprint: str, device: str, figures: Mapping[str, int]) -> None:
    """Keep the peak memory of every task of a plan (bytes, keyed by
    :func:`~grb_dist.sweep.sizing.plan_key`) for the job's sweep, which reserves them of Ray.
    A cache that cannot be written costs the sweep the estimates, nothing else."""
    from grb_dist.core.config import canonical_json
    from grb_dist.core.fileio import write_bytes

    path = plan_path(config_hash, fingerprint)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes(canonical_json({"device": device, "figures": dict(figures)}).encode(), path)
    except OSError:
        pass


def read_plan_figures(config_hash: str, fingerprint: str) -> tuple[dict[str, int], str]:
    """The memory figures and the device of the last plan of a job on a dataset
    (:func:`save_plan_figures`); ``({}, "")`` without one. A damaged or foreign file counts as
    none: only string keys with whole, non-negative numbers of bytes are taken."""
    data = read_cache(plan_path(config_hash, fingerprint))
    figures, device = data.get("figures"), data.get("device")
    if not isinstance(figures, dict) or not isinstance(device, str):
        return {}, ""
    good = {k: v for k, v in figures.items() if isinstance(k, str) and type(v) is int and 0 <= v < 2**50}
    return (good, device) if len(good) == len(figures) else ({}, "")
