"""How a training process treats the large memory blocks it frees (Linux with glibc).

glibc serves every block above its mmap threshold (which adapts, up to 32 MiB) with a
fresh ``mmap`` and returns it with ``munmap`` when freed. A training epoch on a graph of
660k nodes allocates and frees dozens of N x 128 float tensors (338 MB each), and the
kernel faults in and zeroes every one of them page by page, every epoch.

Within :func:`reusing_freed_blocks` freed blocks stay in the process's heap (the mmap and
trim thresholds raised) and the next epoch reuses them without a fault; on leaving it, the
thresholds go back to glibc's adapted values and the heap's free memory is given back to
the system (``malloc_trim``). Training runs inside it (sweep tasks, ``grb-dist train``,
the plan's calibration): its epochs allocate the same shapes again and again, so the
freed blocks fit. Attacks do not: the shapes of their buffers change from step to step
(PR-BCD resamples its block), freed blocks no longer fit the next requests and the heap
grows, so they keep glibc's behaviour. Figures in docs/attacks.md ("Freed memory").

``GRB_DIST_ALLOCATOR=system`` keeps glibc's behaviour for training too (a lower peak,
slower on large graphs). Elsewhere (no glibc, e.g. macOS) nothing changes.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
from functools import lru_cache
from typing import Iterator

from grb_dist.core.errors import ConfigError

#: The environment variable that chooses the policy: ``cache`` (default) or ``system``.
ALLOCATOR_ENV = "GRB_DIST_ALLOCATOR"
MODES = ("cache", "system")

# mallopt parameters (malloc.h); the largest value an int parameter takes; glibc's adapted
# thresholds after a large block was freed (mmap: 32 MiB on 64-bit, trim: twice that).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_LARGEST = 2**31 - 1
_MMAP_DEFAULT, _TRIM_DEFAULT = 32 * 2**20, 64 * 2**20


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


def training_policy() -> str:
    """What :func:`reusing_freed_blocks` does here: ``cache``, ``system`` or
    ``unavailable`` (no glibc)."""
    wanted = mode()
    return "unavailable" if _libc() is None else wanted


@contextlib.contextmanager
def reusing_freed_blocks() -> Iterator[None]:
    """Within: freed large blocks stay in the heap for reuse (policy ``cache``); after:
    glibc's thresholds again and the heap's free memory given back (see the module doc)."""
    libc = _libc()
    cache = libc is not None and mode() == "cache"
    if cache:
        libc.mallopt(_M_MMAP_THRESHOLD, _LARGEST)
        libc.mallopt(_M_TRIM_THRESHOLD, _LARGEST)
    try:
        yield
    finally:
        if cache:
            libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_DEFAULT)
            libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_DEFAULT)
        release()


def release() -> None:
    """Give the free memory of this process's heap back to the system (glibc only)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


__all__ = ["ALLOCATOR_ENV", "MODES", "mode", "release", "reusing_freed_blocks", "training_policy"]
