"""How a computing process treats the large memory blocks it frees (Linux with glibc).

glibc serves every block above its mmap threshold (which adapts, up to 32 MiB) with a
fresh ``mmap`` and returns it with ``munmap`` when freed. A training epoch or an attack
step on a graph of 660k nodes allocates and frees dozens of N x 128 float tensors
(338 MB each), and the kernel faults in and zeroes every one of them page by page: on the
2-core machine of docs/attacks.md that is about half of a GCN epoch's time.

:func:`configure` (``cache``, the default) raises the mmap and trim thresholds so that
freed blocks stay in the process's heap and are reused without faults; :func:`release`
gives the heap's free memory back to the system (``malloc_trim``), which every sweep task
does when it ends, so an idle worker holds only what it keeps. The price is a higher peak:
freed blocks of one size do not always fit the next request, so a task's peak resident
memory grows by about 40% at the aminer twin's shape (measured in docs/attacks.md). Set
``GRB_DIST_ALLOCATOR=system`` to keep glibc's defaults (a lower peak, slower on large
graphs). Elsewhere (no glibc, e.g. macOS) both calls do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from functools import lru_cache

from grb_dist.core.errors import ConfigError

#: The environment variable that chooses the policy: ``cache`` (default) or ``system``.
ALLOCATOR_ENV = "GRB_DIST_ALLOCATOR"
MODES = ("cache", "system")

# mallopt parameters (malloc.h) and the largest value an int parameter takes.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_LARGEST = 2**31 - 1


def mode() -> str:
    """The policy :data:`ALLOCATOR_ENV` asks for; :class:`ConfigError` for an unknown one."""
    value = os.environ.get(ALLOCATOR_ENV, "cache").strip() or "cache"
    if value not in MODES:
        raise ConfigError(f"{ALLOCATOR_ENV}={value!r} is not an allocator policy; use one of {', '.join(MODES)}")
    return value


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


_configured: str | None = None


def configure() -> str:
    """Apply :func:`mode` to this process once (later calls check the environment again but
    change nothing); return what is in force: ``cache``, ``system`` or ``unavailable`` (no
    glibc)."""
    global _configured
    wanted = mode()
    if _configured is None:
        libc = _libc()
        if libc is None:
            _configured = "unavailable"
        elif wanted == "cache":
            ok = libc.mallopt(_M_MMAP_THRESHOLD, _LARGEST) and libc.mallopt(_M_TRIM_THRESHOLD, _LARGEST)
            _configured = "cache" if ok else "system"
        else:
            _configured = "system"
    return _configured


def release() -> None:
    """Give the free memory of this process's heap back to the system (glibc only)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


__all__ = ["ALLOCATOR_ENV", "MODES", "configure", "mode", "release"]
