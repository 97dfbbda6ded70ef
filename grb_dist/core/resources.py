"""Where a run goes and whether it fits there: the Ray address, the memory of this machine
and the check of the tasks' memory against it.

:func:`check_memory` compares the memory tasks need (estimated by
:mod:`grb_dist.sweep.preflight`) with the memory of the machine (or of the largest node of a
cluster).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

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


__all__ = ["LOCAL_RAY_SHARE", "TaskMemory", "check_memory", "check_ray_address", "format_bytes", "machine_memory",
           "reservable_memory"]
