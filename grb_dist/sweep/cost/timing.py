"""Timing a measurement of a calibration (plain Python): how many epochs or steps its runs
take (:func:`run_counts`, :func:`lengthened`), the rate fitted to two runs (:func:`fit_rate`),
a run's seconds with the peak resident memory it held (:func:`timed`), and the threads of
NumPy's and SciPy's BLAS held to a task's (:func:`blas_threads`)."""

from __future__ import annotations

import ctypes
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from grb_dist.core import allocator
from grb_dist.core.resources import peak_memory
from grb_dist.sweep.cost.scaling import Rate

#: The longer of the two timed runs of a measurement lasts about this long (seconds), in
#: 2 to 40 epochs or steps: short ones are noise on a small graph, long ones a waste on a
#: large one.
RUN_S = 0.3


#: The most epochs or steps of a timed run.
MAX_RUN = 40


def run_counts(one: float) -> tuple[int, int]:
    """Epochs (steps) of the two timed runs, given that one took ``one`` seconds."""
    longer = int(min(MAX_RUN, max(2, round(RUN_S / max(one, 1e-6)))))
    return (1, longer) if longer < 8 else (longer // 4, longer)


def timed(fn: Callable[[], Any]) -> tuple[float, int, Any]:
    """``fn()``'s seconds, the peak resident memory it held above this process's size when it
    started (the kernel's high-water mark, reset at its start: :func:`peak_memory`; 0 off
    Linux), and its result. The heap's free memory is given back first, as a sweep task
    starts with it given back (``ray_edge`` gives it back after each)."""
    allocator.release()
    with peak_memory() as peak:
        start = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - start
    return seconds, max(0, (peak.host or 0) - (peak.host_start or 0)), out


def lengthened(n: tuple[int, int], runs: list[tuple[float, int]],
                run: Callable[[int], tuple[float, int]]) -> tuple[tuple[int, int], list[tuple[float, int]]]:
    """The two timed runs, the longer one replaced by a longer run when its epochs or steps
    beyond the shorter's took less than half the shorter's time: the fixed part of the work
    dominates, and the difference the rate per epoch comes from would be mostly noise. The
    new run is made about as long again as the shorter (at most :data:`MAX_RUN` epochs or
    steps)."""
    (n1, n2), (t1, t2) = n, (runs[0][0], runs[1][0])
    if t2 - t1 >= 0.5 * t1 or n2 >= MAX_RUN:
        return n, runs
    unit = (t2 - t1) / (n2 - n1) if t2 > t1 else t1 / MAX_RUN
    n3 = int(min(MAX_RUN, max(n2 + 1, n1 + t1 / unit)))
    return (n1, n3), [runs[0], run(n3)]


def fit_rate(n: tuple[int, int], seconds: tuple[float, float], peak: int, clean: float = 0.0) -> Rate:
    unit = max(0.0, (seconds[1] - seconds[0]) / (n[1] - n[0]))
    fixed = max(0.0, seconds[0] - n[0] * unit)
    return Rate(fixed, unit, peak, max(0.0, clean))


def _openblas() -> list[tuple[Callable[[], int], Callable[[int], None]]]:
    """(get, set) of the threads of every OpenBLAS this process has loaded (NumPy's and
    SciPy's wheels each bundle one, their symbols prefixed ``scipy_`` and suffixed ``64_``
    for 64-bit integers); none off Linux or where none is loaded."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.rsplit("/", 1)[-1].lower()})
    except OSError:
        return []
    found = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("", ""), ("scipy_", ""), ("", "64_"), ("scipy_", "64_")):
            get, put = (getattr(lib, f"{prefix}openblas_{what}_num_threads{suffix}", None) for what in ("get", "set"))
            if get is not None and put is not None:
                found.append((get, put))
                break
    return found


@contextmanager
def blas_threads(n: int) -> Iterator[None]:
    """NumPy's and SciPy's BLAS (OpenBLAS) held to ``n`` threads inside the block, as a sweep
    task's are (Ray sets ``OMP_NUM_THREADS`` to a task's CPUs, at least 1), restored after:
    this process's BLAS otherwise starts a thread per core, and on a busy machine SciPy's
    small dense products (ARPACK's, in GCN-SVD's truncated SVD) ran 10x slower than in a
    task (4 s against 0.3 s a forward pass on a 2,000-node graph, 2 shared cores)."""
    libs = _openblas()
    before = [(get(), put) for get, put in libs]
    for _, put in before:
        put(max(1, int(n)))
    try:
        yield
    finally:
        for threads, put in before:
            put(threads)


__all__ = ["MAX_RUN", "RUN_S", "blas_threads", "fit_rate", "lengthened", "run_counts", "timed"]
