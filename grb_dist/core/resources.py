"""Where a run goes and whether it fits there: the Ray address, the memory of this machine
and the check of the tasks' memory against it.

:func:`check_memory` compares the memory tasks need (estimated by
:mod:`grb_dist.sweep.preflight`) with the memory of the machine (or of the largest node of a
cluster). :func:`peak_memory` measures what a task held at its peak (the sweep's timeline
records it beside what the task reserved).
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from grb_dist.core.errors import ConfigError


def check_ray_address(address: str | None) -> str | None:
    """``auto``, ``local``, ``host:port`` or ``ray://host:port`` with a port in 1..65535."""
    if address is None or address in ("auto", "local"):
        return address
    rest = address
    for scheme in ("ray://", "http://", "https://"):
        if rest.startswith(scheme):
            rest = rest[len(scheme):]
            break
    host, sep, port = rest.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    ok_port = port.isdigit() and 1 <= int(port) <= 65535
    ok_host = bool(host) and not any(c.isspace() or c in "/?#@" for c in host)
    if not (sep and ok_port and ok_host):
        raise ConfigError(
            f"Ray address {address!r} is not host:port (port 1-65535), ray://host:port or auto"
        )
    return address


@dataclass(frozen=True)
class TaskMemory:
    """A lower bound of the memory of one task, and what the task is."""

    bytes: int
    task: str
    hint: str


def machine_memory() -> int:
    """Memory of this machine in bytes: physical memory, or the cgroup limit when lower."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        import psutil

        total = int(psutil.virtual_memory().total)
    for f in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(f).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:
            total = int(text)
    return int(total)


#: The share of this machine's memory a local Ray lets its tasks and actors reserve (Ray's
#: ``memory`` resource, set explicitly): the rest is the driver's, Ray's own and the object
#: store's, which fills as objects are put.
LOCAL_RAY_SHARE = 0.9


def reservable_memory() -> int:
    """The bytes a local Ray started by grb-dist lets its tasks and actors reserve."""
    return int(machine_memory() * LOCAL_RAY_SHARE)


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


@dataclass
class Peak:
    """The most memory a block of work held (:func:`peak_memory`): ``host``, the largest
    resident set of this process while it ran, in bytes (what the process held before
    included: a worker's imports, the graph it reads); ``gpu``, the most GPU memory torch's
    allocator reserved meanwhile (a CUDA context's own is not counted); ``host_start``, the
    resident set when the block started. ``None`` where it could not be read: the host's off
    Linux, ``gpu`` where CUDA did not run."""

    host: int | None = None
    gpu: int | None = None
    host_start: int | None = None


_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _high_water_mark() -> int | None:
    """This process's largest resident set since it started or since the mark was last
    reset (Linux ``VmHWM``), in bytes."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _reset_high_water_mark() -> bool:
    """Set the high-water mark to the current resident set (``5`` written to
    ``/proc/self/clear_refs``, Linux 4.0 and later); whether it was."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


@contextmanager
def peak_memory() -> Iterator[Peak]:
    """Measure the :class:`Peak` of the block: the kernel's high-water mark of this
    process, reset when the block starts (no sampling: a spike between two samples is not
    missed), and torch's peak statistics of the GPU when CUDA runs in this process (torch is
    not imported here). Meant for a process that runs one task at a time, as a Ray worker
    does: the mark is the process's, whichever thread allocated."""
    peak = Peak()
    host = _reset_high_water_mark()
    if host:
        peak.host_start = _high_water_mark()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.reset_peak_memory_stats()
    try:
        yield peak
    finally:
        peak.host = _high_water_mark() if host else None
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():  # CUDA may have started in the block
            peak.gpu = int(torch.cuda.max_memory_reserved())


def check_memory(tasks: list[TaskMemory], available: int, where: str) -> None:
    """Raise :class:`ConfigError` when the largest task cannot fit into ``available`` bytes."""
    if not tasks:
        return
    top = max(tasks, key=lambda m: m.bytes)
    if top.bytes > available:
        raise ConfigError(
            f"the largest task, {top.task}, needs at least {format_bytes(top.bytes)} of memory but {where} "
            f"has {format_bytes(available)}; lower {top.hint}, or run on a machine with more memory"
        )


__all__ = ["LOCAL_RAY_SHARE", "Peak", "TaskMemory", "check_memory", "check_ray_address", "format_bytes", "machine_memory",
           "peak_memory", "reservable_memory"]
