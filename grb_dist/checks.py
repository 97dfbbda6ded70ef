"""Input checks that run before anything is computed or written.

Everything a sweep or a training run is given (job files, CLI values, dataset names, the run
directory, the Ray address, stored models) is checked here before Ray starts and before a
run directory is made, so that bad input ends with one line naming the problem and nothing
half-made on disk. Every function raises a :class:`~grb_dist.core.errors.GrbDistError` subclass.

Upper bounds exist where memory (or the size of the plan) grows with a value:

==========================  ===================  =============================================
value                       bound                why
==========================  ===================  =============================================
seeds                       ``[0, 2**63)``       numpy and torch seeds; derived seeds included
``n_inject``                10,000,000 and N     injected features and edges are held in memory
``edges_per_node``          100,000              injected edges
``steps``                   10,000,000           (time, and a typo guard)
``repeats``                 10,000               cells of the plan
cells of a plan             1,000,000            the plan itself lives in the driver's memory
hidden width / heads        16,384 / 64          weights are allocated when models are built
propagation ``k``           10,000               TAGCN weights, GNN-SVD rank
job file                    1 MiB, 1 MiB JSON    YAML aliases can expand a small file
==========================  ===================  =============================================

:func:`estimate_memory` gives a lower bound of the memory the largest task of a sweep needs
(graph arrays, activations of the widest model, injected nodes); :func:`check_memory`
compares it with the memory of the machine (or of the largest node of a cluster).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Iterable, Mapping

from grb_dist.core.errors import ConfigError, StoreError

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
#: Largest job file read, in bytes.
MAX_JOB_BYTES = 1 << 20
#: Largest job after YAML alias expansion, in characters of its JSON form.
MAX_JOB_SIZE = 1 << 20

#: Integer budget keys of the attack sections and their upper bounds.
BUDGET_BOUNDS = {"n_inject": MAX_N_INJECT, "edges_per_node": MAX_EDGES_PER_NODE, "steps": MAX_STEPS}

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")


# --------------------------------------------------------------------------- names


def is_name(value: Any) -> bool:
    """Whether ``value`` is a plain name: letters, digits, ``. _ + -`` (not first), no ``..``,
    at most 128 characters. Names never contain path separators."""
    return isinstance(value, str) and bool(_NAME.fullmatch(value)) and ".." not in value


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


def check_positive_number(value: Any, what: str, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{what} must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"{what} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return float(value)


def check_budgets(sections: Mapping[str, Mapping[str, Any]]) -> None:
    """Upper bounds of ``n_inject``, ``edges_per_node`` and ``steps`` wherever they appear
    (``sections``: a label such as ``attack`` or ``budgets.full`` -> its mapping)."""
    for label, section in sections.items():
        for key, bound in BUDGET_BOUNDS.items():
            value = (section or {}).get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > bound:
                check_int(value, f"{label}.{key}", 0, bound, hint="memory and time grow with it")


def check_plan_size(n_cells: int) -> None:
    if n_cells > MAX_CELLS:
        raise ConfigError(
            f"the job has {n_cells:,} cells, more than {MAX_CELLS:,}; narrow --attacks, --defenses, "
            "--difficulties or --repeats (or split the study into several runs)"
        )


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


def read_job_text(path: Path) -> str:
    """The text of a job file, at most :data:`MAX_JOB_BYTES` (also for pipes and devices)."""
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


def check_output_file(path: str | Path, flag: str = "--output") -> Path:
    """A file about to be written: its directory exists and is writable, and the path itself
    is not a directory."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{flag} {path} is a directory; give a file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError(f"{flag} {path}: the directory {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ConfigError(f"{flag} {path}: {parent if not path.exists() else path} is not writable")
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
class GraphShape:
    """The sizes of a graph that memory depends on."""

    num_nodes: int
    num_edges: int  # undirected
    num_features: int
    num_classes: int
    n_train: int
    n_val: int
    targets: Mapping[str, int]  # difficulty -> number of target nodes

    @classmethod
    def of(cls, graph: Any) -> "GraphShape":
        split = graph.split
        return cls(graph.num_nodes, graph.num_edges, graph.num_features, int(graph.num_classes),
                   int(split["train"].size) if "train" in split else graph.num_nodes,
                   int(split["val"].size) if "val" in split else 0,
                   {k[5:]: int(v.size) for k, v in split.items() if k.startswith("test_")})


@dataclass(frozen=True)
class TaskMemory:
    """A lower bound of the memory of one task, and what the task is."""

    bytes: int
    task: str
    hint: str


_F = 4  # bytes of a float32
_I = 8  # bytes of an int64


def _graph_bytes(g: GraphShape) -> int:
    # features, both directions of every edge (2 x 2E int64), labels
    return g.num_nodes * g.num_features * _F + 4 * g.num_edges * _I + g.num_nodes * _I


def model_widths(name: str, params: Mapping[str, Any]) -> list[int]:
    """Output widths of a model's hidden layers (attention heads concatenated); [] for label
    propagation."""
    from grb_dist.models.lp import LabelPropagation
    from grb_dist.models.registry import check_name as model_spec
    from grb_dist.models.registry import model_config

    if model_spec(name).cls is LabelPropagation:
        return []
    p = {k: v for k, v in dict(params).items() if k != "lp"}
    config = model_config(name, p)
    heads = int(getattr(config, "heads", 1) or 1)
    return [int(h) * heads for h in getattr(config, "hidden_sizes", ())]


def _weights(widths: list[int], d: int, c: int) -> int:
    dims = [d, *widths, c]
    return sum(a * b + b for a, b in zip(dims, dims[1:]))


def _pass(nodes: int, d: int, widths: list[int], c: int, *, grad: bool) -> int:
    """Activations of one full-batch pass over ``nodes`` nodes: the input, and for every layer
    its output (two tensors per layer kept for the backward pass when ``grad``)."""
    if grad:
        return nodes * (d + 2 * sum(widths) + 2 * c) * _F
    return nodes * (d + 2 * max([*widths, c])) * _F


def estimate_memory(
    g: GraphShape,
    models: Iterable[tuple[str, list[int], Mapping[str, Any] | None]],
    attacks: Iterable[tuple[str, str, int, int, list[int]]],
    max_n_inject: int = 0,
) -> list[TaskMemory]:
    """Lower bounds of the memory of every kind of task of a sweep, largest first.

    Args:
        g: the graph's sizes.
        models: ``(name, hidden widths, adversarial-training budget or None)`` of every model
            trained (defenses and surrogates).
        attacks: ``(label, difficulty, n_inject, edges_per_node, surrogate widths)`` of
            every attack cell kind.
        max_n_inject: the largest injection any Scorer evaluates.

    A task holds at least the graph's arrays; training keeps every layer's activations of
    the training subgraph and four copies of the weights (weights, gradients, two Adam
    moments); an attack holds its injected features (value, gradient, optimiser state), its
    injected edges and the surrogate's activations on targets + injected nodes; a Scorer runs
    inference on the whole perturbed graph. Sparse propagation structures, PyG's per-edge
    messages, framework overhead and allocator slack come on top, so real peaks are higher
    (measured: about 1.5x for GCN training at the grb-aminer shape).
    """
    d, c = g.num_features, g.num_classes
    graph = _graph_bytes(g)
    out: list[TaskMemory] = []
    for name, widths, at in models:
        n = g.n_train
        total = graph + _pass(n, d, widths, c, grad=True) + 4 * _weights(widths, d, c) * _F
        if at:
            k, e = int(at.get("n_inject", 0)), int(at.get("edges_per_node", 0))
            total += k * d * _F * 3 + 4 * k * e * _I + _pass(k, d, widths, c, grad=True)
        widest = max(widths, default=0)
        out.append(TaskMemory(total, f"training {name} ({n:,} training nodes, widest layer {widest:,})",
                              f"the hidden sizes of {name}" if widest else "the dataset"))
    for label, difficulty, k, e, widths in attacks:
        t = g.targets.get(difficulty, 0)
        total = (graph + k * d * _F * 3 + 4 * k * e * _I + _pass(t + k, d, widths, c, grad=True)
                 + _weights(widths, d, c) * _F)
        out.append(TaskMemory(total, f"attack {label} on {difficulty} ({k:,} injected nodes x {e:,} edges)",
                              "n_inject / edges_per_node"))
    widest_all = max((w for _, ws, _ in models for w in ws), default=0)
    n = g.num_nodes + max_n_inject
    out.append(TaskMemory(graph + _pass(n, d, [widest_all], c, grad=False),
                          f"scoring on the perturbed graph ({n:,} nodes)", "n_inject or the hidden sizes"))
    return sorted(out, key=lambda m: -m.bytes)


def sweep_memory(spec: Any, graph: Any) -> list[TaskMemory]:
    """:func:`estimate_memory` of a validated job spec on its loaded graph."""
    from grb_dist.attacks import build_attack
    from grb_dist.defenses import resolve_params
    from grb_dist.models import MODELS

    g = GraphShape.of(graph)
    widths = {}
    models = []
    for name in dict.fromkeys((*spec.defenses, *spec.surrogates)):
        params, _ = resolve_params(name, spec.models)
        widths[name] = model_widths(name, params)
        at = spec.adversarial_training if MODELS.get(name).adversarial else None
        models.append((name, widths[name], at))
    attacks = []
    max_k = 0
    # modification attacks hold one graph plus a block of pairs: the injection estimate of
    # the same surrogate with nothing injected bounds them from below
    for attack in spec.modification["attacks"] if "modification" in spec.scenarios else ():
        for s in spec.surrogates:
            attacks.append((f"{attack}/{s}", spec.difficulties[-1], 0, 0, widths[s]))
    for attack in spec.attacks if "injection" in spec.scenarios else ():
        for difficulty in spec.difficulties:
            cfg = build_attack(attack, spec.attack_params(attack, difficulty, spec.attack_seed(0))).config
            max_k = max(max_k, cfg.n_inject)
            for s in spec.surrogates:
                attacks.append((f"{attack}/{s}", difficulty, cfg.n_inject, cfg.edges_per_node, widths[s]))
    return estimate_memory(g, models, attacks, max_k)


def check_injection_sizes(spec: Any, graph: Any) -> None:
    """``n_inject`` at most the graph's node count (the adversarial training's at most its
    training nodes): injecting more nodes than the graph has is no longer a perturbation."""
    from grb_dist.attacks import build_attack
    from grb_dist.models import MODELS

    n = graph.num_nodes
    for attack in spec.attacks if "injection" in spec.scenarios else ():
        for difficulty in spec.difficulties:
            k = build_attack(attack, spec.attack_params(attack, difficulty, spec.attack_seed(0))).config.n_inject
            if k > n:
                raise ConfigError(
                    f"attack {attack} on {difficulty}: n_inject={k:,} exceeds the {n:,} nodes of {graph.name!r}; "
                    "lower n_inject (GRB budgets inject about 1-3% of N)"
                )
    if any(MODELS.get(m).adversarial for m in (*spec.defenses, *spec.surrogates)):
        k = int(spec.adversarial_training.get("n_inject", 0))
        n_train = int(graph.split["train"].size) if "train" in graph.split else n
        if k > n_train:
            raise ConfigError(
                f"adversarial_training.n_inject={k:,} exceeds the {n_train:,} training nodes of {graph.name!r}; lower it"
            )


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


# --------------------------------------------------------------------------- stored models


def check_stored_models(run_dir: str | Path, tasks: Iterable[Any], graph: Any) -> None:
    """Every state_dict a resumed sweep will reuse loads (``weights_only``) into its model.

    ``tasks``: the plan's :class:`~grb_dist.sweep.spec.ModelTask` objects. A damaged,
    tampered or foreign ``models/<name>-<seed>.pt`` is a one-line error naming the file,
    before Ray starts (instead of an unpickling traceback in the middle of the sweep).
    """
    import torch

    from grb_dist.defenses import build_defense
    from grb_dist.models.io import state_dict_from_bytes

    models = Path(run_dir) / "models"
    if not models.is_dir():
        return
    for task in tasks:
        path = models / f"{task.file_stem}.pt"
        if not (path.is_file() and (Path(run_dir) / "training" / f"{task.file_stem}.parquet").is_file()):
            continue  # not stored completely: the sweep trains it again
        fix = f"delete it (and training/{task.file_stem}.parquet) to retrain the model"
        try:
            state = state_dict_from_bytes(path.read_bytes())
        except Exception as exc:  # noqa: BLE001 - any failure of an untrusted file is reported the same way
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
            raise StoreError(f"stored model {path} is damaged or not a state_dict ({type(exc).__name__}: {first}); {fix}") from None
        if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise StoreError(f"stored model {path} is not a state_dict of tensors; {fix}")
        expected = build_defense(task.name, graph, dict(task.params)).state_dict()
        if set(state) != set(expected) or any(tuple(state[k].shape) != tuple(v.shape) for k, v in expected.items()):
            raise StoreError(f"stored model {path} does not fit model {task.name} on this dataset; {fix}")


# --------------------------------------------------------------------------- commands


def check_sweep(prepared: Any, *, local: bool) -> None:
    """The checks of ``grb-dist sweep`` that need the loaded dataset, after
    :func:`grb_dist.sweep.session.prepare` and before the run directory is locked (made) or
    Ray starts: the run directory can be written, ``n_inject`` fits the graph, stored models
    load, and (for a local Ray, ``local``) the largest task fits this machine's memory."""
    check_writable_dir(prepared.run_dir, "run directory", "--out")
    check_injection_sizes(prepared.spec, prepared.graph)
    check_stored_models(prepared.run_dir, prepared.plan.models, prepared.graph)
    if local:
        check_memory(sweep_memory(prepared.spec, prepared.graph), machine_memory(), "this machine")


def check_train_inputs(dataset: str, model: str, params: Mapping[str, Any], seed: Any) -> None:
    """``grb-dist train``'s values before the dataset is loaded: the dataset reference, the
    seed and the model's sizes (``--hidden``)."""
    from grb_dist.models.lp import LabelPropagation
    from grb_dist.models.registry import check_name as model_spec
    from grb_dist.models.registry import model_config

    check_dataset_ref(dataset)
    check_seed(seed, "--seed")
    if model_spec(model).cls is not LabelPropagation:
        check_model_bounds(model, model_config(model, {k: v for k, v in params.items() if k != "lp"}))


def check_train_memory(graph: Any, model: str, params: Mapping[str, Any], at: Mapping[str, Any] | None) -> None:
    """Training ``model`` on ``graph`` fits this machine's memory (lower bound)."""
    tasks = estimate_memory(GraphShape.of(graph), [(model, model_widths(model, params), at)], [], 0)
    check_memory([t for t in tasks if t.task.startswith("training")], machine_memory(), "this machine")


__all__ = [
    "check_sweep", "check_train_inputs", "check_train_memory",
    "BUDGET_BOUNDS", "GraphShape", "MAX_CELLS", "MAX_JOB_BYTES", "MAX_JOB_SIZE", "SEED_LIMIT", "TaskMemory",
    "check_budgets", "check_dataset_ref", "check_injection_sizes", "check_int", "check_memory",
    "check_model_bounds", "check_name", "check_output_file", "check_plan_size", "check_positive_number",
    "check_ray_address", "check_seed", "check_stored_models", "check_writable_dir", "document_size",
    "estimate_memory", "format_bytes", "is_name", "machine_memory", "model_widths", "read_job_text",
    "run_is_writable", "sweep_memory",
]
