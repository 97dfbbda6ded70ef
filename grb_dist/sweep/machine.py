"""Which machine a calibration belongs to, and the file its figures are cached in.

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
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from grb_dist.core import allocator
from grb_dist.core.errors import ConfigError
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

    root = Path(__file__).resolve().parents[1]
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


__all__ = ["CALIBRATION_VERSION", "cache_dir", "cache_path", "code_hash", "cpu_model", "entries", "gpu_machine",
           "machine_identity", "read_cache"]
