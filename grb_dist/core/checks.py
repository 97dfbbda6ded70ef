"""Input checks of plain values that run before anything is computed or written.

Everything a sweep or a training run is given (job files, CLI values, dataset names, the run
directory, the Ray address, stored models) is checked here before Ray starts and before a
run directory is made, so that bad input ends with one line naming the problem and nothing
half-made on disk. Every function raises a :class:`~grb_dist.core.errors.GrbDistError` subclass.

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
job file                    1 MiB, 1 MiB JSON    YAML aliases can expand a small file
==========================  ===================  =============================================

:func:`check_memory` compares the memory tasks need (estimated by
:mod:`grb_dist.sweep.preflight`) with the memory of the machine (or of the largest node of a
cluster). The checks that need models, attacks or a loaded graph live there too.
"""

from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Iterator, Mapping

import yaml

from grb_dist.core.errors import ConfigError
from grb_dist.core.names import SPEC, is_name

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
#: Largest job file read, in bytes.
MAX_JOB_BYTES = 1 << 20
#: Largest job after YAML alias expansion, in characters of its JSON form.
MAX_JOB_SIZE = 1 << 20

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


# --------------------------------------------------------------------------- job documents


def special_file_kind(mode: int) -> str | None:
    """``None`` for the ``stat`` mode of a regular file, else what it is in words (``a
    directory``, ``a FIFO``, ``a device or socket``): a FIFO would block its reader forever
    and a device (``/dev/urandom``) never end, so input files are refused before they are
    opened when this is not ``None``."""
    if stat.S_ISREG(mode):
        return None
    return "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"


def read_job_text(path: Path) -> str:
    """The text of a job file, at most :data:`MAX_JOB_BYTES`; a FIFO or a device is refused
    before it is opened (reading one could block forever or never end)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise ConfigError(f"cannot read job file {path}: {exc.strerror or exc}") from None
    kind = special_file_kind(mode)
    if kind:
        raise ConfigError(f"job file {path} is {kind}, not a regular file; give a YAML file")
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_JOB_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read job file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_JOB_BYTES:
        raise ConfigError(f"job file {path} is larger than {MAX_JOB_BYTES // 1024} KiB; a job is a short YAML document")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"job file {path} is not UTF-8 text") from None


class _StrictLoader(yaml.SafeLoader):
    """``yaml.safe_load`` that refuses a key given twice in one mapping (YAML would keep the
    last one silently)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise ConfigError(f"key {key!r} is given twice in one mapping (line {key_node.start_mark.line + 1}); "
                                  "keep one")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_job_document(path: Path, *, allow_import: bool = False) -> Any:
    """The YAML document of job file ``path``: a regular file of at most
    :data:`MAX_JOB_BYTES`, safely loaded (no Python objects), no key twice in a mapping, at
    most :data:`MAX_JOB_SIZE` once aliases are expanded, and no ``module:Class`` spec unless
    ``allow_import`` (:func:`refuse_specs`). Every defect is one :class:`ConfigError` line."""
    text = read_job_text(path)
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except ConfigError as exc:
        raise ConfigError(f"job file {path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"job file {path} is not valid YAML{at}") from None
    except RecursionError:
        raise ConfigError(f"job file {path} is nested too deeply") from None
    document_size(data)
    if not allow_import:
        refuse_specs(data, f"job file {path}")
    return data


def named_specs(obj: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """``(key path, spec)`` of every ``module:Class`` spec in a parsed job document: a string
    value or mapping key that is one (``defenses: [mypkg.models:MyGCN]``)."""
    stack = [(where, obj)]
    while stack:
        at, o = stack.pop()
        if isinstance(o, Mapping):
            for k, v in o.items():
                key = f"{at}.{k}" if at else str(k)
                if isinstance(k, str) and SPEC.fullmatch(k.strip()):
                    yield key, k
                stack.append((key, v))
        elif isinstance(o, (list, tuple)):
            stack.extend((f"{at}[{i}]", v) for i, v in enumerate(o))
        elif isinstance(o, str) and SPEC.fullmatch(o.strip()):
            yield at, o


def refuse_specs(document: Any, where: str) -> None:
    """A job file may name ``module:Class`` specs only with the user's consent
    (``--allow-import``): importing the module runs its code, and a job file may come from
    anyone. Names typed on the command line and installed entry points need no consent."""
    for at, spec in named_specs(document):
        raise ConfigError(
            f"{where} names {spec!r} at {at}: importing a module runs its code, so specs in job files need "
            "--allow-import (pass it if you trust the module; or install it as a package with an entry point)"
        )


def document_size(obj: Any, limit: int = MAX_JOB_SIZE) -> int:
    """Approximate length of the JSON form of ``obj`` with every shared (aliased) part counted
    each time it appears; stops and raises :class:`ConfigError` as soon as it passes ``limit``
    (so it takes time proportional to ``limit`` at most, also for recursive documents)."""
    total = 0
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, Mapping):
            total += 2 + 2 * len(o)
            if total <= limit:
                stack.extend(o.keys())
                stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            total += 2 + len(o)
            if total <= limit:
                stack.extend(o)
        elif isinstance(o, str):
            total += len(o) + 2
        elif isinstance(o, bool) or o is None:
            total += 5
        elif isinstance(o, int):
            total += 1 + o.bit_length() * 3 // 10
        else:
            total += 24
        if total > limit:
            raise ConfigError(
                f"the job expands to more than {limit // 1024} KiB (YAML aliases repeat their anchor's "
                "content); write the job out without nested aliases"
            )
    return total


# --------------------------------------------------------------------------- files and places


def _nearest_existing(path: Path) -> Path:
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_writable_dir(path: str | Path, what: str, flag: str) -> None:
    """A directory that will be created or written: it (or, when it does not exist yet, its
    nearest existing ancestor) must be a writable directory, and an existing run's
    sub-directories writable too."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"{what} {path} exists and is not a directory; choose another {flag}")
        targets = [path] + [p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")]
        for t in targets:
            if not os.access(t, os.W_OK | os.X_OK):
                raise ConfigError(f"{what} {t} is not writable; choose another {flag} or fix its permissions")
        return
    base = _nearest_existing(path)
    if not base.is_dir():
        raise ConfigError(f"cannot create {what} {path}: {base} is not a directory; choose another {flag}")
    if not os.access(base, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot create {what} {path}: {base} is not writable; choose another {flag}")


def output_target(path: str | Path, what: str = "--output", fix: str = "give a file path") -> Path:
    """The file that writing ``path`` replaces: the output rule of every command that writes
    where the user says (``--output``, ``study-tune``'s OUTPUT, the files of a report).

    Outputs are written to a temporary file in the directory of the file written and
    renamed over it, so: a regular file, or a path that does not exist, is itself; a
    symlink is followed when its target is a regular file (the target is rewritten, the
    link kept); anything else is refused with :class:`ConfigError` before it is touched: a
    directory, a device, FIFO or socket (a rename would replace the node), and a symlink to
    one of them, to nothing or in a loop. Reads only."""
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise ConfigError(f"cannot use {what} {path}: {exc.strerror or exc}") from None
    shown, target = str(path), path
    if stat.S_ISLNK(mode):
        try:
            target = path.resolve(strict=True)
            mode = os.stat(target).st_mode
        except (OSError, RuntimeError):  # a dangling link, a loop
            raise ConfigError(f"{what} {path} is a symlink that leads to no file; {fix}") from None
        shown = f"{path} (a symlink to {target})"
    kind = special_file_kind(mode)
    if kind == "a directory" and target is path:
        raise ConfigError(f"{what} {path} is a directory; give a file name")
    if kind:
        # the rename of a new file over it would replace the node (a device became a file)
        raise ConfigError(f"{what} {shown} is {kind}, not a regular file; {fix}")
    return target


def check_output_file(path: str | Path, flag: str = "--output") -> Path:
    """A file about to be written, by the output rule (:func:`output_target`): a regular
    file, a new path or a symlink to a regular file, whose directory exists and is
    writable. Returns ``path``."""
    path = Path(path)
    fix = "give a file path" + (" (to print, give --output - or leave --output out)" if flag == "--output" else "")
    target = output_target(path, flag, fix)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError(f"{flag} {path}: the directory {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise ConfigError(f"{flag} {path}: {parent if not target.exists() else target} is not writable")
    return path


def run_is_writable(run_dir: str | Path) -> bool:
    """Whether a run directory (and its leaderboard directory, if present) can be written."""
    run_dir = Path(run_dir)
    board = run_dir / "leaderboard"
    return os.access(run_dir, os.W_OK | os.X_OK) and (not board.exists() or os.access(board, os.W_OK | os.X_OK))


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


# --------------------------------------------------------------------------- memory


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


__all__ = [
    "BUDGET_BOUNDS", "MAX_CELLS", "MAX_JOB_BYTES", "MAX_JOB_SIZE", "SEED_LIMIT", "TaskMemory", "check_budgets",
    "MAX_BUDGETS", "check_dataset_ref", "check_int", "check_memory", "check_model_bounds", "check_name", "check_output_file",
    "check_work_size", "check_positive_number", "output_target", "check_ray_address", "check_seed", "check_writable_dir",
    "document_size", "format_bytes", "load_job_document", "named_specs", "refuse_specs", "looks_like_path", "machine_memory", "read_job_text", "run_is_writable",
    "special_file_kind",
]
