"""How a training process treats the large memory blocks it frees (Linux with glibc).

glibc serves every block above its mmap threshold with a fresh ``mmap`` and returns it
with ``munmap`` when freed; the threshold adapts (up to 32 MiB) to the largest block freed
so far, and blocks below it come from the heap, whose free memory is only given back from
its top. A training epoch on a graph of 660k nodes allocates and frees dozens of N x 128
float tensors (338 MB each), and the kernel faults in and zeroes every one of them page by
page, every epoch.

Training runs inside :func:`training_heap` (sweep tasks, ``grb-dist train``, the plan's
calibration), under one of two policies:

- ``cache`` (default): freed blocks stay in the process's heap (the mmap and trim
  thresholds lifted: no block is mapped on its own, no free memory given back) and the
  next epoch reuses them without a fault; only a heap that still grows faults, over a
  training's first epochs. Its epochs allocate
  the same shapes again and again, so the freed blocks fit.
- ``system``: every block of :data:`RETURN_ABOVE` (1 MiB) or more is mapped on its own and
  given back as soon as it is freed (the threshold fixed, so it does not adapt): the
  lowest peak, slower on large graphs. With glibc's adapted threshold the blocks between
  1 and 32 MiB (row blocks, edge-sized arrays) came from the heap and fragmented it, and
  the peak grew from epoch to epoch (figures: docs/performance.md).

On leaving, the thresholds go back to glibc's adapted values and the heap's free memory is
given back to the system (``malloc_trim``). Attacks keep glibc's behaviour: the shapes of
their buffers change from step to step (PR-BCD resamples its block), freed blocks no
longer fit the next requests and the heap grows. Figures in docs/attacks.md ("Freed
memory"). Elsewhere (no glibc, e.g. macOS) nothing changes.
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

# mallopt parameters (malloc.h); glibc's adapted thresholds after a large block was freed
# (mmap: 32 MiB on 64-bit, trim: twice that).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: What the ``cache`` policy sets both thresholds to: -1, which glibc reads as the largest
#: size (mallopt(3): "setting M_TRIM_THRESHOLD to -1 disables trimming completely"). The
#: largest int, 2 GiB, trimmed a free top above 2 GiB, and a wide model's training on a large
#: graph frees more at once: GAT with adversarial training on the flickr twin faulted 8-40
#: GiB back in every epoch, 52-89 s an epoch against 42-50 s (bench/training/epochs.py).
_UNLIMITED = -1
_MMAP_DEFAULT, _TRIM_DEFAULT = 32 * 2**20, 64 * 2**20
#: Under the ``system`` policy, blocks of this size or more are given back when freed.
RETURN_ABOVE = 2**20


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
    """What :func:`training_heap` does here: ``cache``, ``system`` or ``unavailable`` (no
    glibc)."""
    wanted = mode()
    return "unavailable" if _libc() is None else wanted


@contextlib.contextmanager
def training_heap() -> Iterator[None]:
    """Within: freed large blocks stay in the heap for reuse (policy ``cache``) or are given
    back at once (``system``); after: glibc's thresholds again and the heap's free memory
    given back (see the module doc)."""
    libc = _libc()
    policy = mode() if libc is not None else None
    if policy == "cache":
        libc.mallopt(_M_MMAP_THRESHOLD, _UNLIMITED)
        libc.mallopt(_M_TRIM_THRESHOLD, _UNLIMITED)
    elif policy == "system":
        libc.mallopt(_M_MMAP_THRESHOLD, RETURN_ABOVE)
        libc.mallopt(_M_TRIM_THRESHOLD, 2 * RETURN_ABOVE)
    try:
        yield
    finally:
        if policy is not None:
            libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_DEFAULT)
            libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_DEFAULT)
        release()


def release() -> None:
    """Give the free memory of this process's heap back to the system (glibc only)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


__all__ = ["ALLOCATOR_ENV", "MODES", "RETURN_ABOVE", "mode", "release", "training_heap", "training_policy"]
