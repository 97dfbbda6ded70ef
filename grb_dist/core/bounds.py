"""Bounds and checks of plain values (names, dataset references, numbers, budgets, the
number of cells, model widths) that run before anything is computed or written.

Everything a sweep or a training run is given is checked before Ray starts and before a
run directory is made, so that bad input ends with one line naming the problem and nothing
half-made on disk. Every function here raises a :class:`~grb_dist.core.errors.GrbDistError`
subclass; job files are read by :mod:`grb_dist.core.jobfile`, output paths checked by
:mod:`grb_dist.core.paths`, the Ray address and the machine's memory by
:mod:`grb_dist.core.resources`.

Upper bounds exist where memory (or the number of cells) grows with a value:

==========================  ===================  =============================================
value                       bound                why
==========================  ===================  =============================================
seeds                       ``[0, 2**63)``       numpy and torch seeds; derived seeds included
``n_inject``                10,000,000 and N     injected features and edges are held in memory
``edges_per_node``          100,000              injected edges
``steps``                   10,000,000           (time, and a typo guard)
``repeats``                 10,000               cells of the run
cells of a run              1,000,000            the cells themselves live in the driver's memory
hidden width / heads        16,384 / 64          weights are allocated when models are built
propagation ``k``           10,000               TAGCN weights, GNN-SVD rank
==========================  ===================  =============================================

The checks that need models, attacks or a loaded graph live in :mod:`grb_dist.sweep.preflight`.
"""

from __future__ import annotations

import math
import os
from pathlib import PurePath
from typing import Any, Mapping

from grb_dist.core.errors import ConfigError
from grb_dist.core.names import is_name

#: Seeds lie in [0, SEED_LIMIT): numpy's and torch's generators take them as 64-bit integers.
SEED_LIMIT = 2**63
MAX_N_INJECT = 10_000_000
MAX_EDGES_PER_NODE = 100_000
MAX_STEPS = 10_000_000
MAX_REPEATS = 10_000
MAX_CELLS = 1_000_000
MAX_HIDDEN = 16_384
MAX_LAYERS = 64
MAX_HEADS = 64
MAX_K = 10_000
#: The most budgets one budget list (``--n-inject``, ``--ratio-edge-mod``, a study's ``--budgets``) may hold.
MAX_BUDGETS = 32

#: Integer budget keys of the attack sections and their upper bounds.
BUDGET_BOUNDS = {"n_inject": MAX_N_INJECT, "edges_per_node": MAX_EDGES_PER_NODE, "steps": MAX_STEPS}


# --------------------------------------------------------------------------- names


def looks_like_path(value: str) -> bool:
    """Whether a dataset reference is meant as a path (it has a directory part, starts with
    ``~`` or ``.``, or names an ``.npz`` file)."""
    seps = {"/", os.sep} | ({os.altsep} if os.altsep else set())
    return any(s in value for s in seps) or value.startswith(("~", ".")) or value.endswith(".npz")


def check_name(value: Any, what: str) -> str:
    """``value`` if it is a plain name (see :func:`is_name`), else :class:`ConfigError`."""
    if not is_name(value):
        raise ConfigError(
            f"{what} {value!r} is not a name: use letters, digits, '.', '_', '+' and '-' "
            "(no path separators, no '..')"
        )
    return value


def check_dataset_ref(dataset: Any) -> str:
    """A job's ``dataset``: a catalogue name (a plain name) or a path to a dataset.

    Paths are recognised by their directory part, a leading ``.`` or ``~``, or an ``.npz``
    suffix (``./cora``, ``../data/cora``, ``cora.npz``); a path must end in a name of its
    own (not ``/``, ``.`` or ``..``), which names the run. Anything else must be a plain
    name, so that a name can never reach outside the job directory (``../cluster``) or the
    results directory.
    """
    if not isinstance(dataset, str) or not dataset.strip():
        raise ConfigError(f"dataset must be a catalogue name or a path, got {dataset!r}")
    if "\x00" in dataset or any(c in dataset for c in "\r\n"):
        raise ConfigError(f"dataset {dataset!r} contains control characters")
    if looks_like_path(dataset):
        if PurePath(dataset).name in ("", ".", ".."):
            raise ConfigError(
                f"dataset path {dataset!r} does not end in a name; give the dataset directory by a "
                "path that ends in its own name (e.g. ../cora or an absolute path)"
            )
        return dataset
    if not is_name(dataset):
        raise ConfigError(
            f"dataset {dataset!r} is not a catalogue name (letters, digits, '.', '_', '+', '-'; no '..'); "
            "give a dataset path with its directory, e.g. ./NAME"
        )
    return dataset


# --------------------------------------------------------------------------- numbers


def check_int(value: Any, what: str, low: int, high: int, *, hint: str = "") -> int:
    """``value`` if it is an int in ``[low, high]`` (bools are not ints here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{what} must be an integer, got {value!r}")
    if not low <= value <= high:
        shown = f"{value:,}" if abs(value) < 10**30 else f"a {len(str(abs(value)))}-digit number"
        raise ConfigError(f"{what} must be in [{low:,}, {high:,}], got {shown}" + (f"; {hint}" if hint else ""))
    return value


def check_seed(seed: Any, what: str = "seed", *, span: int = 0) -> int:
    """A seed in ``[0, 2**63)``; ``span`` is the largest offset added to it (derived seeds)."""
    return check_int(seed, what, 0, SEED_LIMIT - 1 - span,
                     hint=f"seeds (and the seeds derived from them, up to seed + {span:,}) must stay below 2**63"
                     if span else "seeds must stay below 2**63")


def check_positive_number(value: Any, what: str, *, allow_zero: bool = False, maximum: float | None = None) -> float:
    """A finite number above 0 (or at least 0), at most ``maximum`` when one is given."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{what} must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"{what} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{what} must be at most {maximum:g}, got {value!r}")
    return float(value)


def check_budgets(sections: Mapping[str, Mapping[str, Any]]) -> None:
    """Upper bounds of ``n_inject``, ``edges_per_node`` and ``steps`` wherever they appear
    (``sections``: a label such as ``attack`` or ``budgets.full`` -> its mapping)."""
    for label, section in sections.items():
        for key, bound in BUDGET_BOUNDS.items():
            value = (section or {}).get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > bound:
                check_int(value, f"{label}.{key}", 0, bound, hint="memory and time grow with it")


def check_work_size(n_cells: int, hint: str = "narrow --attacks, --defenses, --difficulties or --repeats",
                    what: str = "cells") -> None:
    """At most :data:`MAX_CELLS` units of work (cells of a sweep, units of a study)."""
    if n_cells > MAX_CELLS:
        raise ConfigError(f"the job has {n_cells:,} {what}, more than {MAX_CELLS:,}; {hint} (or split it into "
                          "several runs)")


def check_model_bounds(name: str, config: Any) -> None:
    """Bounds of the sizes a model allocates when it is built (``config``: its typed config)."""
    hidden = tuple(getattr(config, "hidden_sizes", ()) or ())
    if len(hidden) > MAX_LAYERS:
        raise ConfigError(f"model {name}: {len(hidden)} hidden layers, more than {MAX_LAYERS}")
    for h in hidden:
        check_int(h, f"model {name}: hidden size", 1, MAX_HIDDEN, hint="weights are allocated when the model is built")
    for key, bound in (("heads", MAX_HEADS), ("k", MAX_K)):
        value = getattr(config, key, None)
        if isinstance(value, int) and not isinstance(value, bool):
            check_int(value, f"model {name}: {key}", 0, bound)


__all__ = ["BUDGET_BOUNDS", "MAX_BUDGETS", "MAX_CELLS", "SEED_LIMIT", "check_budgets", "check_dataset_ref", "check_int", "check_model_bounds", "check_name", "check_work_size", "check_positive_number", "check_seed", "looks_like_path"]
