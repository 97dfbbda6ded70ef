"""What the benchmark scripts share: where the repository and the real datasets are, running a
case in a fresh process and reading its peak memory, and timing.

A script in a topic folder imports it with one line before its own imports::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
    from common import ...

so that ``python bench/<topic>/<script>.py`` works from the repository root. Only the standard
library is imported here at module level: the runners of the peer tools (which run in their own
virtual environments, without grb_dist or torch) use it too.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

#: The repository root (the folder that holds bench/).
ROOT = Path(__file__).resolve().parents[1]
#: The environment variable naming a folder of real graphs; the test-suite reads the same one.
DATA_ENV = "GRB_DIST_TEST_DATA"
#: Real graphs, relative to a data folder (the layout the test-suite uses).
CORA_LEGACY = "grb-format/cora-legacy"
NPZ = "npz"
PROGNN = "prognn"


# ---------------------------------------------------------------------------------------- data


def data_folders() -> list[Path]:
    """Where real graphs are looked for, in order (as the test-suite looks): ``$GRB_DIST_TEST_DATA``,
    a ``shared/datasets`` folder beside the repository, then ``test-data/`` in grb-dist's download
    cache (``$GRB_DIST_DATA`` or ``~/.cache/grb-dist``)."""
    from grb_dist.datasets.grb import default_cache_dir

    folders = [Path(os.environ[DATA_ENV]).expanduser()] if os.environ.get(DATA_ENV) else []
    folders.append(ROOT.parent / "shared" / "datasets")
    folders.append(default_cache_dir() / "test-data")
    return folders


def find_data(relative: str | Path) -> Path | None:
    """The first folder of :func:`data_folders` that has ``relative``, else None."""
    return next((folder / relative for folder in data_folders() if (folder / relative).exists()), None)


def data_path(relative: str | Path) -> Path:
    """``relative`` in the first data folder that has it; when none has it, where it would be in
    the first folder (so that a default shown by ``--help`` or an error names a real place)."""
    return find_data(relative) or data_folders()[0] / relative


def cora_legacy() -> Path:
    """Cora in the GRB layout (an early GRB release: 2,708 nodes, 1,433 features)."""
    return data_path(CORA_LEGACY)


def require(path: Path, what: str) -> Path:
    """``path`` if it exists, else exit with where it was looked for and how to provide it."""
    if not Path(path).exists():
        looked = ", ".join(map(str, data_folders()))
        sys.exit(f"{what} not found at {path} (data folders: {looked}); set {DATA_ENV} to a folder holding it, "
                 "or pass its path")
    return Path(path)


# ------------------------------------------------------------------ a case in its own process


def peak_rss_gib() -> float:
    """This process's peak resident set size so far, GiB (``ru_maxrss``, KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def peak_rss_mib() -> float:
    """This process's peak resident set size so far, MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10


def emit(result: dict, marker: str = "") -> None:
    """Print a case's result as the last line of a child's output (read back by :func:`run_child`)."""
    print(marker + json.dumps(result), flush=True)


def run_child(args: Sequence[str | Path], marker: str = "", python: str | Path | None = None,
              check: bool = False, log: Path | None = None, **kwargs) -> dict | None:
    """Run ``python args...`` (this interpreter by default) in a fresh process, so that its peak
    memory is its own, and return the JSON of its last output line that starts with ``marker``
    (the result stands even if the process fails after printing it, in a library's shutdown).
    Without such a line the end of its error output is printed and None returned (``check``:
    raised instead). Its error output goes to the file ``log`` if given. ``kwargs`` go to
    :func:`subprocess.run` (``env``, ``timeout``, ``cwd``)."""
    cmd = [str(python or sys.executable), *map(str, args)]
    if log is None:
        done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
        errors = done.stderr
    else:
        with open(log, "w") as err:
            done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, **kwargs)
        errors = Path(log).read_text()
    lines = [line[len(marker):] for line in done.stdout.splitlines() if line.startswith(marker) and line[len(marker):]]
    if not lines:
        message = f"failed ({done.returncode}): {' '.join(cmd)}\n{errors[-2000:]}"
        if check:
            raise RuntimeError(message)
        print(message, file=sys.stderr, flush=True)
        return None
    return json.loads(lines[-1])


def setting(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` of a ``--set`` option: ``(KEY, VALUE as JSON, else the string)``."""
    key, _, value = text.partition("=")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


# -------------------------------------------------------------------------------------- timing


def graph_and_targets(dataset: str, n: int):
    """One torch thread; ``dataset`` loaded as a sweep loads it (the load time printed) and
    ``n`` test nodes of its ``full`` difficulty with degree at least 2 (seed 0): the set-up of
    the per-target benchmarks on the large twins."""
    import torch

    from grb_dist.core.targeted import TargetSelection, select_targets
    from grb_dist.datasets import load_dataset

    torch.set_num_threads(1)
    start = time.perf_counter()
    graph = load_dataset(dataset, seed=0)
    print(f"{dataset}: {graph.num_nodes:,} nodes, loaded in {time.perf_counter() - start:.1f} s")
    return graph, select_targets(graph, "full", TargetSelection(n=n, min_degree=2, seed=0))


def timed(fn: Callable, *args, **kwargs) -> tuple[float, object]:
    """``(wall seconds, result)`` of one call of ``fn``."""
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - start, out


def timed_on(device, fn: Callable, /, *args, **kwargs) -> tuple[float, object]:
    """:func:`timed`; on a GPU (``device`` not "cpu") the clock stops once its queued work is done."""

    def call():
        out = fn(*args, **kwargs)
        if str(device) != "cpu":
            import torch

            torch.cuda.synchronize()
        return out

    return timed(call)


def median_seconds(fn: Callable, runs: int = 5, warmup: bool = True) -> float:
    """Median wall seconds of ``runs`` calls of ``fn`` (after one call not counted)."""
    if warmup:
        fn()
    return statistics.median(timed(fn)[0] for _ in range(runs))


def interleaved(fns: dict[str, Callable], runs: int, warmup: bool = False) -> dict[str, list[float]]:
    """Wall seconds of each of ``fns`` over ``runs`` rounds, one call of each per round in turn
    (A, B, A, B, ...: a slow spell of the machine falls on both), after one call of each not
    counted when ``warmup``."""
    if warmup:
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            times[name].append(timed(fn)[0])
    return times
