"""A study's settings (Gosch et al. 2023): the job file, its checks, its graph section and its
units.

:class:`StudySpec` is a study job file (``grb_dist/jobs/studies/*.yaml``) read by
:func:`load_spec` and checked by :func:`check_spec` (every error that can be found before
work starts). The work is split into :class:`Unit` s, one per (K, graph seed, model,
attack) (:func:`units`); a unit's id hashes what its rows depend on, so a re-run only does
the missing units. :data:`ROW_COLUMNS` are the columns of a unit's rows.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from grb_dist.core.bounds import (
    MAX_BUDGETS, MAX_STEPS, check_int, check_work_size, check_positive_number, check_seed,
)
from grb_dist.core.resources import TaskMemory, check_memory, machine_memory
from grb_dist.core.errors import ConfigError
from grb_dist.semantics.search import check_model, check_search

#: Columns of a unit's rows (the Parquet schema of ``nodes/``).
ROW_COLUMNS = (
    "study", "K", "graph_seed", "model", "attack", "node", "target_class", "degree", "label",
    "f_clean", "g_clean", "g_features", "f_flip", "g_flip", "steps", "val_accuracy",
)
#: Budgets reduced by default (the paper's local budgets and no bound).
DEFAULT_BUDGETS = ("1", "2", "3", "4", "deg", "deg+2", "inf")
GRAPH_KINDS = ("csbm", "cba", "npz")
#: Graph kinds sampled per K, with a Bayes classifier as the reference.
SYNTHETIC = ("csbm", "cba")
REFERENCES = ("bayes", "none")


@dataclass(frozen=True)
class StudySpec:
    """A study's settings (a job file, see ``grb_dist/jobs/studies/over-robustness-*.yaml``).

    Attributes:
        study: the study's name (its directory under the output; letters, digits, ``-_.``).
        graph: ``kind: csbm`` with ``num_nodes``, ``num_classes``, ``num_features``,
            ``sigma``, ``p``, ``q``; ``kind: cba`` with ``m``, ``affinity_same``,
            ``affinity_diff`` instead of ``p``, ``q``; or ``kind: npz`` with ``path`` (a
            real graph) and ``features`` (``raw``, or ``row``: rows scaled to sum 1).
        K: the CSBM / CBA mean distances (ignored for real graphs).
        graphs: graphs (seeds) per K; for a real graph, the number of splits.
        nodes: new (test) nodes per graph.
        seed: base seed of graphs, splits, new nodes, models and DICE.
        reference: ``bayes`` (CSBM and CBA) or ``none``.
        models: model name -> hyper-parameters (as in a sweep job's ``models:``; ``train:``
            inside an entry overrides the training settings).
        per_K: K -> model name -> hyper-parameters merged over ``models`` at that K (the
            paper tunes every model per K; ``grb-dist study-tune`` writes it).
        search: model name -> {parameter: [values]}, the grid ``grb-dist study-tune``
            searches per K (:mod:`grb_dist.semantics.tune`); it does not change the rows.
        attacks: attack names.
        budgets: local budgets reduced into tables: integers, ``deg``, ``deg+N``, ``inf``.
        max_steps: the most edges an attack adds (the cap of the ``inf`` budget).
        train_fraction: share of the known nodes used for training (the rest validates).
        test_fraction: real graphs: share of nodes held out as new nodes (``nodes`` of them
            are attacked).
        train: training settings (``epochs``, ``patience``, ``lr``, ``weight_decay``).
    """

    study: str = "over-robustness-csbm"
    graph: Mapping[str, Any] = field(default_factory=lambda: {"kind": "csbm"})
    K: tuple[float, ...] = (0.1, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0)
    graphs: int = 10
    nodes: int = 200
    seed: int = 0
    reference: str = "bayes"
    models: Mapping[str, Any] = field(default_factory=lambda: {"gcn": {"hidden_sizes": [64]}})
    per_K: Mapping[Any, Any] = field(default_factory=dict)
    search: Mapping[str, Any] = field(default_factory=dict)
    attacks: tuple[str, ...] = ("l2-weak",)
    budgets: tuple[str, ...] = DEFAULT_BUDGETS
    max_steps: int = 64
    train_fraction: float = 0.8
    test_fraction: float = 0.1
    train: Mapping[str, Any] = field(default_factory=lambda: {"epochs": 300, "patience": 50})

    @property
    def kind(self) -> str:
        return str(self.graph.get("kind", "csbm"))

    @property
    def synthetic(self) -> bool:
        """A CSBM or CBA study (graphs sampled per K, Bayes reference available)."""
        return self.kind in SYNTHETIC

    def shared(self) -> dict[str, Any]:
        """The settings every unit's rows depend on (graphs, nodes, training ...): not the
        lists of K, graphs, models, attacks and budgets, nor the models' settings."""
        d = asdict(self)
        for key in ("K", "graphs", "attacks", "budgets", "search", "models", "per_K"):
            d.pop(key)
        d["graph"] = dict(self.graph)
        return d

    def models_at(self, K: float) -> dict[str, Any]:
        """``models`` with the ``per_K`` entries of ``K`` merged over each model's entry."""
        extra = next((v for k, v in self.per_K.items() if math.isclose(float(k), float(K))), {})
        out = {str(k): dict(v or {}) for k, v in self.models.items()}
        for name, params in extra.items():
            out[str(name)] = {**out.get(str(name), {}), **dict(params or {})}
        return out


@dataclass(frozen=True)
class Unit:
    """One work unit: a graph (K, seed), a model and an attack."""

    K: float
    graph_seed: int
    model: str
    attack: str

    def unit_id(self, spec: StudySpec) -> str:
        """Content hash of what this unit's rows depend on: the study's shared settings, the
        unit's model's settings at its K, and the unit (other models' settings do not count,
        so a study re-run with models added or removed keeps the others' units)."""
        from grb_dist.defenses.build import resolve_params

        model = resolve_params(self.model, spec.models_at(self.K)) if spec.models else None
        payload = json.dumps({"spec": spec.shared(), "model": model, "unit": asdict(self)}, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:20]


def units(spec: StudySpec) -> list[Unit]:
    """Every unit of the study, in a stable order."""
    ks = spec.K if spec.synthetic else (float("nan"),)
    names = [str(m) for m in spec.models]

    def beside_base(m: str) -> tuple[int, bool]:  # ``gcn_lp`` right after ``gcn``: one training
        base = m[:-3] if m.endswith("_lp") and m[:-3] in names else m
        return names.index(base), base != m

    models = sorted(names, key=beside_base)
    return [
        Unit(float(k), spec.seed + g, m, a)
        for k in ks for g in range(spec.graphs) for m in models for a in spec.attacks
    ]


# ---------------------------------------------------------------------------------------
# job files and checks


def _name_ok(name: str) -> bool:
    return bool(name) and all(ch.isalnum() or ch in "-_." for ch in name) and not name.startswith(".")


def load_spec(path: str | Path | None = None, *, check: bool = True, allow_import: bool = False,
              **overrides: Any) -> StudySpec:
    """The study of a YAML job file (read like the sweep's, ``module:Class`` specs in it only
    with ``allow_import``; default: the CSBM study) with ``overrides`` (values that are
    ``None`` are ignored), checked (:func:`check_spec`) unless ``check`` is false."""
    from grb_dist.core.jobfile import load_job_document

    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.exists():
            raise ConfigError(f"job file {p} does not exist")
        data = load_job_document(p, allow_import=allow_import) or {}  # the sweep's guards
        if not isinstance(data, Mapping):
            raise ConfigError(f"job file {p}: expected a mapping at the top level")
    known = set(StudySpec.__dataclass_fields__)
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"job file: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    data = {**data, **{k: v for k, v in overrides.items() if v is not None}}
    for key in ("K", "attacks", "budgets"):
        if key in data:
            value = data[key]
            data[key] = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    if "K" in data:
        try:
            data["K"] = tuple(float(k) for k in data["K"])
        except (TypeError, ValueError):
            raise ConfigError(f"K must be numbers, got {data['K']!r}") from None
    if "budgets" in data:
        data["budgets"] = tuple(str(b) for b in data["budgets"])
    if "attacks" in data:
        data["attacks"] = tuple(str(a).lower() for a in data["attacks"])
    for key in ("graph", "models", "train", "per_K", "search"):
        if key in data and not isinstance(data[key], Mapping):
            raise ConfigError(f"job file: {key} must be a mapping")
    _narrow(data, overrides)
    try:
        spec = StudySpec(**data)
    except TypeError as exc:
        raise ConfigError(f"job file: {exc}") from None
    if check:
        check_spec(spec)
    return spec


def _narrow(data: dict[str, Any], overrides: Mapping[str, Any]) -> None:
    """Overridden ``models`` / ``K`` narrow the job file's ``per_K`` and ``search`` to them
    (entries of models or K values the overrides left out are dropped). Sections given as
    overrides themselves, and the job's entries otherwise, are kept as written, for
    :func:`check_spec` to judge."""
    search = overrides.get("search") is None and isinstance(data.get("search"), Mapping)
    per_k = overrides.get("per_K") is None and isinstance(data.get("per_K"), Mapping)
    if overrides.get("models") is not None:
        names = {str(m) for m in data["models"]}
        if search:
            data["search"] = {m: v for m, v in data["search"].items() if str(m) in names}
        if per_k:
            data["per_K"] = {k: {m: v for m, v in e.items() if str(m) in names} if isinstance(e, Mapping) else e
                             for k, e in data["per_K"].items()}
    if overrides.get("K") is not None and per_k:

        def listed(k: Any) -> bool:
            try:
                return any(math.isclose(float(k), x) for x in data["K"])
            except (TypeError, ValueError):
                return True

        data["per_K"] = {k: e for k, e in data["per_K"].items() if listed(k)}


def check_budget(b: str) -> None:
    """A local budget: a positive integer, ``deg``, ``deg+N`` or ``inf``; raises
    :class:`ConfigError` otherwise."""
    text = b.strip().lower().replace(" ", "")
    if text in ("inf", "unbounded", "none"):
        return
    try:
        if text.startswith("deg"):
            rest = text[3:]
            if rest and (not rest.startswith("+") or int(rest[1:]) < 0):
                raise ValueError
            return
        if int(text) <= 0:
            raise ConfigError(f"budget {b!r} must be positive (local budgets are >= 1)")
    except ValueError:
        raise ConfigError(f"budget {b!r} is not a positive integer, deg, deg+N or inf") from None


#: Bounds of a study: as the sweep's (:mod:`grb_dist.core.bounds`) where both have the number.
MAX_GRAPHS = 10_000
MAX_STUDY_NODES = 1_000_000
MAX_STUDY_GRAPH = 10_000_000
MAX_STUDY_FEATURES = 100_000
MAX_STUDY_CLASSES = 1_000
MAX_STUDY_K = 100.0
#: Seeds derived from the study's seed: graph seeds (seed + graph) and offsets below this.
SEED_SPAN = 2**32
#: Integer keys of a synthetic graph section and their bounds (``m``: CBA edges per node).
GRAPH_INTS = {"num_nodes": (1, MAX_STUDY_GRAPH), "num_features": (1, MAX_STUDY_FEATURES),
              "num_classes": (2, MAX_STUDY_CLASSES), "m": (1, MAX_STUDY_GRAPH)}
#: Real-number keys of a synthetic graph section: probabilities, and positive or non-negative numbers.
GRAPH_PROBABILITIES = ("p", "q")
GRAPH_NUMBERS = ("sigma", "affinity_same", "affinity_diff")


def check_spec(spec: StudySpec) -> None:
    """Every check that can fail before work starts; raises :class:`ConfigError` (a real
    graph's file: :class:`~grb_dist.core.errors.DatasetError`). The study's output is
    made only after it passed, so nothing is written for a study it refuses."""
    from grb_dist.models.grammar import check_name
    from grb_dist.semantics.attacks import check_attack

    if not isinstance(spec.study, str) or not _name_ok(spec.study):
        raise ConfigError(f"study name {spec.study!r} must be letters, digits, '-', '_' or '.'")
    if spec.kind not in GRAPH_KINDS:
        raise ConfigError(f"graph kind {spec.kind!r} is not one of {', '.join(GRAPH_KINDS)}")
    if spec.reference not in REFERENCES:
        raise ConfigError(f"reference {spec.reference!r} is not one of {', '.join(REFERENCES)}")
    if spec.reference == "bayes" and not spec.synthetic:
        raise ConfigError("a reference classifier (bayes) needs a CSBM or CBA; a real graph has none: set reference: none")
    check_int(spec.graphs, "graphs", 1, MAX_GRAPHS, hint="each is a graph trained on and attacked")
    check_int(spec.nodes, "nodes", 1, MAX_STUDY_NODES, hint="each attacked node is one attack run")
    check_int(spec.max_steps, "max_steps", 1, MAX_STEPS)
    check_seed(spec.seed, "seed", span=spec.graphs + SEED_SPAN)
    for key in ("train_fraction", "test_fraction"):
        value = getattr(spec, key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
            raise ConfigError(f"{key} must be a number in (0, 1), got {value!r}")
    check_lists(spec)
    for b in spec.budgets:
        check_budget(b)
    graph = None
    if spec.synthetic:
        for k in spec.K:
            if not math.isfinite(k) or not 0 <= k <= MAX_STUDY_K:
                raise ConfigError(f"K must be in [0, {MAX_STUDY_K:g}] (the distance of the class means in standard "
                                  f"deviations; the paper's range is 0.1 to 5), got {k:g}")
        check_graph_numbers(spec)
        graph_config(spec, spec.K[0])  # n too small for the classes, p/q or m out of range
    else:
        graph = real_graph(spec)
    for k, entries in spec.per_K.items():
        try:
            known_k = spec.synthetic and any(math.isclose(float(k), float(x)) for x in spec.K)
        except (TypeError, ValueError):
            known_k = False
        if not known_k:
            raise ConfigError(f"per_K: {k!r} is not one of the study's K values ({', '.join(f'{x:g}' for x in spec.K)})")
        if not isinstance(entries, Mapping) or not all(isinstance(v, Mapping) for v in entries.values()):
            raise ConfigError(f"per_K.{k}: expected model name -> hyper-parameter mapping")
        unknown = sorted(str(m) for m in entries if str(m) not in {str(x) for x in spec.models})
        if unknown:
            raise ConfigError(f"per_K.{k}: model(s) {', '.join(unknown)} not in models:")
    for name in spec.models:
        check_name(str(name))
        for k in spec.K if spec.synthetic else (float("nan"),):
            check_model(str(name), spec.models_at(k))
        for attack in spec.attacks:
            check_attack(attack, str(name).lower())
    for attack in spec.attacks:
        check_attack(attack)
        if attack == "l2-weak-class" and spec.synthetic and int(spec.graph.get("num_classes", 2)) < 2:
            raise ConfigError("l2-weak-class needs at least 2 classes")
    if spec.search:
        check_search(spec, spec.search)
    unknown = set(spec.train) - {"epochs", "patience", "lr", "weight_decay"}
    if unknown:
        raise ConfigError(f"train: unknown key(s) {', '.join(sorted(unknown))}")
    from grb_dist.core.config import TrainSection

    TrainSection(**dict(spec.train))  # epochs, patience, lr and weight decay in range
    n_units = len(spec.K if spec.synthetic else (0,)) * spec.graphs * len(spec.models) * len(spec.attacks)
    check_work_size(n_units, hint="narrow --k, --graphs, --models or --attacks", what="units")
    check_study_memory(study_memory(spec, graph))


def check_study_memory(tasks: list[TaskMemory]) -> None:
    """:func:`study_memory`'s tasks within this machine's memory; the graph alone first (every
    task holds it, so when it does not fit, its sizes are what to lower)."""
    available = machine_memory()
    check_memory([t for t in tasks if t.task.startswith("the graph")], available, "this machine")
    check_memory(tasks, available, "this machine")


def check_lists(spec: StudySpec) -> None:
    """At least one model, attack, budget (and K of a synthetic graph), none given twice
    (a unit or a table row would be counted twice); at most the sweep's number of budgets."""
    if not spec.models:
        raise ConfigError("at least one model is needed (models:, or --models)")
    if not spec.attacks:
        raise ConfigError("at least one attack is needed (attacks:, or --attacks)")
    if not spec.budgets:
        raise ConfigError("at least one budget is needed (budgets:, or --budgets)")
    if spec.synthetic and not spec.K:
        raise ConfigError("at least one K is needed (K:, or --k)")
    if len(spec.budgets) > MAX_BUDGETS:
        raise ConfigError(f"at most {MAX_BUDGETS} budgets (as a sweep's budget lists), got {len(spec.budgets)}")
    for what, values in (("K", [f"{k:g}" for k in spec.K] if spec.synthetic else []), ("attacks", spec.attacks),
                         ("budgets", [b.strip().lower().replace(" ", "") for b in spec.budgets])):
        twice = sorted({v for i, v in enumerate(values) if v in values[:i]})
        if twice:
            raise ConfigError(f"{what} lists {', '.join(twice)} twice; give each once")
    names = [str(m).lower() for m in spec.models]
    twice = sorted({v for i, v in enumerate(names) if v in names[:i]})
    if twice:
        raise ConfigError(f"models: {', '.join(twice)} given twice (model names ignore case); give each once")


def check_graph_numbers(spec: StudySpec) -> None:
    """A synthetic graph's numbers are numbers of the right kind within the sweep's bounds
    (before :func:`graph_config` converts them): :data:`GRAPH_INTS` integers,
    ``p`` and ``q`` probabilities, ``sigma`` above 0, the CBA affinities at least 0."""
    g = dict(spec.graph)
    for key, (low, high) in GRAPH_INTS.items():
        if key in g:
            check_int(g[key], f"graph.{key}", low, high)
    for key in GRAPH_PROBABILITIES:
        if key in g:
            check_positive_number(g[key], f"graph.{key}", allow_zero=True, maximum=1.0)
    for key in GRAPH_NUMBERS:
        if key in g:
            check_positive_number(g[key], f"graph.{key}", allow_zero=key != "sigma")


def real_graph(spec: StudySpec):
    """The real graph of an ``npz`` study, read and checked as a dataset file (a FIFO, a
    pickle, a page saved as .npz, missing or malformed arrays: one error) before any
    work; its graph section's keys checked first."""
    from grb_dist.datasets.npz import load_npz_graph

    unknown = set(spec.graph) - {"kind", "path", "features"}
    if unknown:
        raise ConfigError(f"graph: unknown key(s) {', '.join(sorted(unknown))} for a real graph (kind, path, features)")
    if spec.graph.get("features", "raw") not in ("raw", "row"):
        raise ConfigError(f"graph.features must be raw or row (row-normalised), got {spec.graph.get('features')!r}")
    path = spec.graph.get("path")
    if not path or not isinstance(path, (str, Path)):
        raise ConfigError("graph kind npz needs a path to the .npz file (graph.path, or --dataset)")
    if not Path(str(path)).exists():
        raise ConfigError(f"dataset file {path} does not exist")
    graph, _ = load_npz_graph(Path(str(path)))
    if graph.num_nodes < 3:
        raise ConfigError(f"dataset {path} has {graph.num_nodes} node(s); a study needs known nodes to train on "
                          "and held-out nodes to attack")
    return graph


def _steps(spec: StudySpec) -> int:
    """At least the length of every node's attack order: ``max_steps`` with an ``inf``
    budget, else the largest integer budget (``deg+N``: N) below it."""
    from grb_dist.semantics.metrics import budget_values

    most = max(float(budget_values(b, np.zeros(1))[0]) for b in spec.budgets)
    return int(min(most, spec.max_steps))


def study_memory(spec: StudySpec, graph: Any = None,
                 models: Iterable[tuple[str, Mapping[str, Any]]] | None = None) -> list[TaskMemory]:
    """Lower bounds of the memory of the study's tasks, largest first: the graph with its new
    nodes alone (a synthetic graph's expected edges from ``p``/``q`` or ``m``, a real
    ``graph`` as loaded), training and scoring each model (``models``: ``(name,
    parameters)``; default: every model at every K) as the sweep estimates them
    (:func:`grb_dist.models.memory.estimate_memory`), a unit's attack orders and reference
    flips (new nodes x steps x classes), the Bayes reference's terms (new nodes x classes x
    features), and the reduction of every unit's rows into the tables."""
    from grb_dist.models.memory import GraphShape, estimate_memory, model_size

    if spec.synthetic:
        g = dict(spec.graph)
        n, c, d = int(g.get("num_nodes", 1000)), int(g.get("num_classes", 2)), int(g.get("num_features", 21))
        t, total = spec.nodes, int(g.get("num_nodes", 1000)) + spec.nodes
        if spec.kind == "cba":
            edges = float(g.get("m", 2)) * total
        else:  # expected same- and different-class pairs joined with probability p / q
            size = total / c
            edges = float(g.get("p", 0.0063)) * c * size * (size - 1) / 2 + float(g.get("q", 0.0015)) * total * (total - size) / 2
        n_train = max(1, round(spec.train_fraction * n))
        shape = GraphShape(total, int(edges), d, c, n_train, n - n_train, {})
    else:
        n, c, d = graph.num_nodes, int(graph.num_classes), graph.num_features
        t = min(spec.nodes, max(1, round(spec.test_fraction * n)))
        known = n - max(1, round(spec.test_fraction * n))
        n_train = max(1, round(spec.train_fraction * known))
        shape = GraphShape(n, graph.num_edges, d, c, n_train, known - n_train, {})
    if models is None:
        models = [(str(m), spec.models_at(k).get(str(m), {})) for k in (spec.K if spec.synthetic else (math.nan,))
                  for m in spec.models]
    sizes = {}
    for name, params in {json.dumps([n, p], sort_keys=True, default=str): (n, p) for n, p in models}.values():
        size = model_size(name, check_model(name, {name: params}), c)
        sizes[json.dumps([name, asdict(size)], sort_keys=True)] = (name, size, None)
    graph_bytes = shape.num_nodes * (d * 4 + 8) + 4 * shape.num_edges * 8  # as the sweep counts a graph
    tasks = [TaskMemory(graph_bytes, f"the graph ({shape.num_nodes:,} nodes with the new ones, about "
                        f"{shape.num_edges:,} edges, {d:,} features)",
                        "graph.num_nodes, num_features, p and q (CBA: m) or nodes" if spec.synthetic else "the dataset")]
    tasks += estimate_memory(shape, list(sizes.values()), [])
    s = _steps(spec)
    reference = spec.synthetic and spec.reference == "bayes"
    flips = t * s * 8 + (3 * t * s * c * 8 + shape.num_nodes * c * 8 if reference else 0)
    tasks.append(TaskMemory(graph_bytes + flips, f"attacking {t:,} new nodes with up to {s:,} edges each"
                            + (f" ({c:,} classes)" if reference else ""), "nodes, max_steps or num_classes"))
    if reference:
        tasks.append(TaskMemory(graph_bytes + 2 * t * c * d * 8, f"the Bayes reference of {t:,} new nodes ({c:,} classes "
                                f"x {d:,} features)", "nodes, num_classes or num_features"))
    per_unit = sum(t * (c - 1 if a == "l2-weak-class" else 1) for a in spec.attacks)
    rows = len(spec.K if spec.synthetic else (0,)) * spec.graphs * len(spec.models) * per_unit
    tasks.append(TaskMemory(rows * len(ROW_COLUMNS) * 8, f"reducing the study's {rows:,} node rows into its tables",
                            "graphs, nodes, K, models or attacks"))
    return sorted(tasks, key=lambda m: -m.bytes)


# ---------------------------------------------------------------------------------------
# the graph section


def csbm_config(spec: StudySpec, K: float):
    """The :class:`CSBMConfig` of the study's graph section at mean distance ``K``.

    ``p`` / ``q`` (edge probabilities, the paper's parametrisation) are converted to the
    expected same- / different-class degrees of the config."""
    from grb_dist.datasets.csbm import CSBMConfig

    g = dict(spec.graph)
    unknown = set(g) - {"kind", "num_nodes", "num_classes", "num_features", "sigma", "p", "q"}
    if unknown:
        raise ConfigError(f"graph: unknown key(s) {', '.join(sorted(unknown))} for a CSBM "
                          "(num_nodes, num_classes, num_features, sigma, p, q)")
    n = int(g.get("num_nodes", 1000))
    c = int(g.get("num_classes", 2))
    if n < 2 * c or c < 2:
        raise ConfigError(f"CSBM num_nodes={n} is too small for {c} classes (need at least 2 per class)")
    p, q = float(g.get("p", 0.0063)), float(g.get("q", 0.0015))
    if not (0 <= p <= 1 and 0 <= q <= 1):
        raise ConfigError(f"CSBM p and q must be probabilities, got p={p}, q={q}")
    return CSBMConfig(
        num_nodes=n, num_classes=c, num_features=int(g.get("num_features", 21)), K=float(K),
        sigma=float(g.get("sigma", 1.0)), deg_same=p * (n / c - 1), deg_diff=q * (n - n / c),
    )


def cba_config(spec: StudySpec, K: float):
    """The :class:`CBAConfig` of the study's graph section at mean distance ``K``."""
    from grb_dist.datasets.csbm import CBAConfig

    g = dict(spec.graph)
    unknown = set(g) - {"kind", "num_nodes", "num_classes", "num_features", "sigma", "m", "affinity_same", "affinity_diff"}
    if unknown:
        raise ConfigError(f"graph: unknown key(s) {', '.join(sorted(unknown))} for a CBA "
                          "(num_nodes, num_classes, num_features, sigma, m, affinity_same, affinity_diff)")
    n, c, m = int(g.get("num_nodes", 1000)), int(g.get("num_classes", 2)), int(g.get("m", 2))
    if n < 2 * c or c < 2:
        raise ConfigError(f"CBA num_nodes={n} is too small for {c} classes (need at least 2 per class)")
    return CBAConfig(num_nodes=n, num_classes=c, num_features=int(g.get("num_features", 21)), K=float(K),
                     sigma=float(g.get("sigma", 1.0)), m=m, affinity_same=float(g.get("affinity_same", 3.16)),
                     affinity_diff=float(g.get("affinity_diff", 0.74)))


def graph_config(spec: StudySpec, K: float):
    """:func:`csbm_config` or :func:`cba_config`, by the study's graph kind."""
    return cba_config(spec, K) if spec.kind == "cba" else csbm_config(spec, K)


__all__ = [
    "DEFAULT_BUDGETS", "GRAPH_KINDS", "REFERENCES", "ROW_COLUMNS", "SYNTHETIC", "StudySpec", "Unit", "cba_config",
    "check_budget", "check_graph_numbers", "check_lists", "check_model", "check_spec", "check_study_memory",
    "csbm_config", "graph_config", "load_spec", "real_graph", "study_memory", "units",
]
