"""The semantics-aware robustness study (seed 002): job files, work units, the Ray wrapper.

A study samples graphs (CSBMs for each K and graph seed, or one real graph split
inductively), trains each model inductively on 80% of the known nodes (validated on the
other 20%, which are removed from the graph while training), then classifies new nodes
added one at a time to the known graph and attacks each with local-budget structure
attacks (:mod:`grb_dist.semantics.attacks`). On CSBMs the Bayes classifier is the
reference g (:mod:`grb_dist.datasets.csbm`); on real graphs there is none.

The work is split into units, one per (K, graph seed, model, attack). :func:`run_unit` is
a plain function returning one row per (new node[, target class]) with its degree, label,
f's clean decision and the flip count of f and of g along the attack's order
(:mod:`grb_dist.semantics.metrics` turns these into robustness at every budget).
:func:`run_study` runs the pending units as Ray tasks (a local Ray by default, a cluster
with ``address``) and writes one Parquet file per unit atomically under
``<out>/<study>/nodes/<unit id>.parquet``; unit ids hash the study's settings and the
unit, so a re-run only does the missing units. :func:`write_tables` reduces the rows into
``metrics.parquet`` / ``.csv``, ``table1.csv`` and ``table2.csv`` next to them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from grb_dist.core.errors import ConfigError
from grb_dist.semantics.attacks import (
    ADAPTIVE_ATTACKS,
    SURROGATE_ATTACKS,
    attack_order,
    check_attack,
    grbcd_order,
    nettack_order,
    sga_order,
)

log = logging.getLogger(__name__)

#: The linearised 2-layer GCN surrogate of Nettack (appendix H): ``A_hat^2 X W``.
NETTACK_SURROGATE = {"hidden_sizes": [], "k": 2, "dropout": 0.0}
from grb_dist.semantics.metrics import budget_values

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

    def core(self) -> dict[str, Any]:
        """The settings a unit's rows depend on, every model's included."""
        d = self.shared()
        d["models"] = {k: v for k, v in self.models.items()}
        d["per_K"] = {str(float(k)): dict(v) for k, v in self.per_K.items()}
        return d

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


# ---------------------------------------------------------------------------------------
# job files and checks


def _name_ok(name: str) -> bool:
    return bool(name) and all(ch.isalnum() or ch in "-_." for ch in name) and not name.startswith(".")


def load_spec(path: str | Path | None = None, *, check: bool = True, **overrides: Any) -> StudySpec:
    """The study of a YAML job file (``yaml.safe_load``; default: the CSBM study) with
    ``overrides`` (values that are ``None`` are ignored), checked (:func:`check_spec`)
    unless ``check`` is false."""
    import yaml

    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"job file {p} does not exist")
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"job file {p} is not valid YAML: {str(exc).splitlines()[0]}") from None
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


def _check_budget(b: str) -> None:
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


def _needs_gatv2(spec: StudySpec) -> None:
    """Register seed 002's GATv2 (``gatv2``) when the study uses it (in this process: the
    driver and every Ray worker that runs a unit)."""
    from grb_dist.semantics.gatv2 import NAME, register

    if any(str(m).lower() == NAME or str(m).lower().startswith(NAME + "_") for m in spec.models):
        register()


def check_spec(spec: StudySpec) -> None:
    """Every check that can fail before work starts; raises :class:`ConfigError`."""
    from grb_dist.defenses.build import resolve_params
    from grb_dist.models.registry import check_name

    _needs_gatv2(spec)
    if not _name_ok(spec.study):
        raise ConfigError(f"study name {spec.study!r} must be letters, digits, '-', '_' or '.'")
    if spec.kind not in GRAPH_KINDS:
        raise ConfigError(f"graph kind {spec.kind!r} is not one of {', '.join(GRAPH_KINDS)}")
    if spec.reference not in REFERENCES:
        raise ConfigError(f"reference {spec.reference!r} is not one of {', '.join(REFERENCES)}")
    if spec.reference == "bayes" and not spec.synthetic:
        raise ConfigError("a reference classifier (bayes) needs a CSBM or CBA; a real graph has none: set reference: none")
    if spec.graphs < 1 or spec.nodes < 1:
        raise ConfigError(f"graphs and nodes must be >= 1, got {spec.graphs} and {spec.nodes}")
    if spec.max_steps < 1:
        raise ConfigError(f"max_steps must be >= 1, got {spec.max_steps}")
    if not 0 < spec.train_fraction < 1 or not 0 < spec.test_fraction < 1:
        raise ConfigError("train_fraction and test_fraction must be in (0, 1)")
    if not spec.budgets:
        raise ConfigError("at least one budget is needed")
    for b in spec.budgets:
        _check_budget(b)
    if not spec.attacks or not spec.models:
        raise ConfigError("at least one attack and one model are needed")
    if spec.synthetic:
        if not spec.K:
            raise ConfigError("at least one K is needed")
        for k in spec.K:
            if not math.isfinite(k) or k < 0:
                raise ConfigError(f"K must be >= 0, got {k}")
        graph_config(spec, spec.K[0])  # n too small for the classes, p/q or m out of range
    else:
        unknown = set(spec.graph) - {"kind", "path", "features"}
        if unknown:
            raise ConfigError(f"graph: unknown key(s) {', '.join(sorted(unknown))} for a real graph (kind, path, features)")
        if spec.graph.get("features", "raw") not in ("raw", "row"):
            raise ConfigError(f"graph.features must be raw or row (row-normalised), got {spec.graph.get('features')!r}")
        path = spec.graph.get("path")
        if not path:
            raise ConfigError("graph kind npz needs a path to the .npz file (graph.path, or --dataset)")
        if not Path(str(path)).is_file():
            raise ConfigError(f"dataset file {path} does not exist")
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
            resolve_params(str(name), spec.models_at(k))
        for attack in spec.attacks:
            check_attack(attack, str(name).lower())
    for attack in spec.attacks:
        check_attack(attack)
        if attack == "l2-weak-class" and spec.synthetic and int(spec.graph.get("num_classes", 2)) < 2:
            raise ConfigError("l2-weak-class needs at least 2 classes")
    if spec.search:
        from grb_dist.semantics.tune import check_search

        check_search(spec, spec.search)
    unknown = set(spec.train) - {"epochs", "patience", "lr", "weight_decay"}
    if unknown:
        raise ConfigError(f"train: unknown key(s) {', '.join(sorted(unknown))}")


def csbm_config(spec: StudySpec, K: float):
    """The :class:`CSBMConfig` of the study's graph section at mean distance ``K``.

    ``p`` / ``q`` (edge probabilities, the paper's parametrisation) are converted to the
    expected same- / different-class degrees of the config."""
    from grb_dist.datasets.csbm import CSBMConfig

    g = dict(spec.graph)
    n = int(g.get("num_nodes", 1000))
    c = int(g.get("num_classes", 2))
    if n < 2 * c or c < 2:
        raise ConfigError(f"CSBM num_nodes={n} is too small for {c} classes (need at least 2 per class)")
    p, q = float(g.get("p", 0.0063)), float(g.get("q", 0.0015))
    if not (0 <= p <= 1 and 0 <= q <= 1):
        raise ConfigError(f"CSBM p and q must be probabilities, got p={p}, q={q}")
    unknown = set(g) - {"kind", "num_nodes", "num_classes", "num_features", "sigma", "p", "q"}
    if unknown:
        raise ConfigError(f"graph: unknown key(s) {', '.join(sorted(unknown))}")
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
# graphs and new nodes


@dataclass
class Prepared:
    """A known graph (with its train/val split), the new nodes and the reference.

    ``nb_node`` / ``nb_base``: the clean edges of the new nodes (new index, base id).
    ``g_scores``: T x C clean log-posteriors of the Bayes classifier (``None``: no reference);
    ``g_step``: N x C change of class c's log-posterior when an edge to known node j is
    added (on a CSBM it depends on j's class only, on a CBA on its degree too);
    ``g_features``: T features-only Bayes decisions.
    """

    graph: Any
    x_new: np.ndarray
    y_new: np.ndarray
    nb_node: np.ndarray
    nb_base: np.ndarray
    g_scores: np.ndarray | None = None
    g_step: np.ndarray | None = None
    g_features: np.ndarray | None = None

    @property
    def degree(self) -> np.ndarray:
        return np.bincount(self.nb_node, minlength=self.y_new.size)


def _train_val_split(n: int, fraction: float, rng: np.random.Generator) -> dict[str, np.ndarray]:
    perm = rng.permutation(n)
    cut = max(1, min(n - 1, int(round(fraction * n))))
    return {"train": np.sort(perm[:cut]), "val": np.sort(perm[cut:])}


def bayes_terms(config, means: np.ndarray, x_new: np.ndarray, nb_counts: np.ndarray,
                class_sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bayes log-posteriors of new nodes with ``nb_counts`` (T x C) neighbours per class
    among known nodes of ``class_sizes``; returns (T x C scores, C x C step, T x C feature
    term). Equals :func:`grb_dist.datasets.csbm.bayes_log_posterior` on the known graph
    plus the node."""
    C = config.num_classes
    x = np.asarray(x_new, dtype=np.float64)
    feat = -((x[:, None, :] - means[None].astype(np.float64)) ** 2).sum(-1) / (2 * config.sigma**2)
    lp, l1p = math.log(max(config.p, 1e-300)), math.log(max(1 - config.p, 1e-300))
    lq, l1q = math.log(max(config.q, 1e-300)), math.log(max(1 - config.q, 1e-300))
    same = np.eye(C)
    edge = same * lp + (1 - same) * lq  # [c, c']: class-c hypothesis, a class-c' neighbour
    non = same * l1p + (1 - same) * l1q
    non_nb = class_sizes[None, :] - nb_counts
    scores = feat + nb_counts @ edge.T + non_nb @ non.T
    return scores, (edge - non), feat


def prepare_csbm(spec: StudySpec, K: float, graph_seed: int) -> Prepared:
    """Sample the known CSBM graph, its split and ``spec.nodes`` new nodes (each sampled
    conditioned on the known graph only: edges among new nodes are dropped)."""
    from grb_dist.datasets.csbm import sample_csbm, sample_inductive_nodes

    config = csbm_config(spec, K)
    graph, means = sample_csbm(config, seed=graph_seed, name=f"csbm-K{K:g}")
    rng = np.random.default_rng([graph_seed, 1])
    graph = graph.with_split(_train_val_split(graph.num_nodes, spec.train_fraction, rng))
    n = graph.num_nodes
    full = sample_inductive_nodes(graph, config, means, spec.nodes, seed=graph_seed + 7919)
    ei = full.edge_index
    keep = (ei[0] >= n) & (ei[1] < n)
    nb_node, nb_base = ei[0][keep] - n, ei[1][keep]
    x_new, y_new = full.features[n:], full.labels[n:]
    prepared = Prepared(graph, x_new, y_new, nb_node, nb_base)
    if spec.reference == "bayes":
        counts = np.zeros((y_new.size, config.num_classes))
        np.add.at(counts, (nb_node, graph.labels[nb_base]), 1.0)
        sizes = np.bincount(graph.labels, minlength=config.num_classes).astype(np.float64)
        scores, step, feat = bayes_terms(config, means, x_new, counts, sizes)
        prepared.g_scores, prepared.g_step, prepared.g_features = scores, step[:, graph.labels].T, feat.argmax(1)
    return prepared


def prepare_cba(spec: StudySpec, K: float, graph_seed: int) -> Prepared:
    """Sample the known CBA graph, its split and ``spec.nodes`` new nodes, each attached
    to the known graph alone (appendix C), and the CBA Bayes classifier's terms."""
    from grb_dist.datasets.csbm import cba_bayes_terms, sample_cba, sample_cba_new_nodes

    config = cba_config(spec, K)
    graph, means = sample_cba(config, seed=graph_seed, name=f"cba-K{K:g}")
    rng = np.random.default_rng([graph_seed, 1])
    graph = graph.with_split(_train_val_split(graph.num_nodes, spec.train_fraction, rng))
    x_new, y_new, nb_node, nb_base = sample_cba_new_nodes(graph, config, means, spec.nodes, seed=graph_seed + 7919)
    prepared = Prepared(graph, x_new, y_new, nb_node, nb_base)
    if spec.reference == "bayes":
        scores, step, feat = cba_bayes_terms(graph, config, means, x_new, nb_node, nb_base)
        prepared.g_scores, prepared.g_step, prepared.g_features = scores, step, feat.argmax(1)
    return prepared


def prepare_npz(spec: StudySpec, graph_seed: int) -> Prepared:
    """Split a real graph inductively: ``test_fraction`` of the nodes are held out (their
    edges to known nodes kept, edges among them dropped), ``spec.nodes`` of them attacked;
    the known nodes are split ``train_fraction`` / rest into train / validation."""
    from grb_dist.datasets.npz import load_npz_graph
    from grb_dist.core.graph import Graph

    full, _ = load_npz_graph(Path(str(spec.graph["path"])))
    if spec.graph.get("features", "raw") == "row":  # rows scaled to sum 1 (bag-of-words)
        sums = np.abs(full.features).sum(1, keepdims=True)
        full = full.with_features((full.features / np.maximum(sums, 1e-12)).astype(np.float32))
    n = full.num_nodes
    rng = np.random.default_rng([graph_seed, 2])
    perm = rng.permutation(n)
    n_test = max(1, int(round(spec.test_fraction * n)))
    test = np.sort(perm[:n_test])
    known = np.sort(perm[n_test:])
    pos = np.full(n, -1, dtype=np.int64)
    pos[known] = np.arange(known.size)
    ei = full.edge_index
    inner = (pos[ei[0]] >= 0) & (pos[ei[1]] >= 0)
    base_ei = np.stack([pos[ei[0][inner]], pos[ei[1][inner]]])
    graph = Graph(features=full.features[known], edge_index=base_ei, labels=full.labels[known],
                  name=full.name, num_classes=full.num_classes)
    graph = graph.with_split(_train_val_split(known.size, spec.train_fraction, rng))
    attacked = np.sort(rng.choice(test, size=min(spec.nodes, test.size), replace=False))
    tpos = np.full(n, -1, dtype=np.int64)
    tpos[attacked] = np.arange(attacked.size)
    sel = (tpos[ei[0]] >= 0) & (pos[ei[1]] >= 0)
    return Prepared(graph, full.features[attacked], full.labels[attacked], tpos[ei[0][sel]], pos[ei[1][sel]])


_PREPARED: dict[str, Prepared] = {}


def _remember(cache: dict[str, Any], key: str, make: Callable[[], Any], limit: int) -> Any:
    """``cache[key]``, made by ``make()`` on a miss; a cache holding ``limit`` entries is
    emptied first (the per-process caches of this module stay small)."""
    if key not in cache:
        value = make()
        if len(cache) >= limit:
            cache.clear()
        cache[key] = value
    return cache[key]


def prepare(spec: StudySpec, K: float, graph_seed: int) -> Prepared:
    """:func:`prepare_csbm`, :func:`prepare_cba` or :func:`prepare_npz`, cached per process (units of the same
    graph share it)."""
    key = json.dumps({"shared": spec.shared(), "K": K, "seed": graph_seed}, sort_keys=True, default=str)
    make = {"csbm": prepare_csbm, "cba": prepare_cba}.get(spec.kind)
    return _remember(_PREPARED, key, lambda: make(spec, K, graph_seed) if make else prepare_npz(spec, graph_seed), 9)


# ---------------------------------------------------------------------------------------
# one unit


#: Trained underlying models of this process, keyed by graph, architecture, parameters and
#: training settings: ``<model>`` and ``<model>_lp`` with the same settings train the same
#: network (``*_lp`` trains the model, then wraps it), so it is trained once.
_INNER: dict[str, tuple[dict, float]] = {}


def train_study_model(spec: StudySpec, prepared: Prepared, name: str, seed: int, graph_key: str = "",
                      K: float = float("nan")):
    """The model ``name`` (its settings at ``K``) trained inductively on the known graph;
    returns (module, val acc).

    With a ``graph_key`` (the graph's identity), the trained underlying network is kept per
    process and reused by the ``_lp`` variant with the same settings (seeded training:
    the weights are those a fresh training would give)."""
    from grb_dist.core.config import from_dict
    from grb_dist.defenses.build import build_defense, resolve_params, train_defense
    from grb_dist.models.lp import LabelPropagationOn
    from grb_dist.models.registry import check_name
    from grb_dist.models.train import TrainConfig, seed_everything

    params, overrides = resolve_params(name, spec.models_at(K))
    train = from_dict(TrainConfig, {**dict(spec.train), **overrides, "seed": seed}, where="train")
    ms = check_name(name)
    inner_params = {k: v for k, v in params.items() if k != "lp"}
    key = json.dumps([graph_key, ms.cls.__qualname__, dict(ms.implied), ms.base, ms.adversarial,
                      inner_params, asdict(train)], sort_keys=True, default=str)
    shareable = bool(graph_key) and ms.trainable and not ms.adversarial and ms.factory is None
    if shareable and key in _INNER:
        state, val_acc = _INNER[key]
        seed_everything(seed)
        module = build_defense(name, prepared.graph, params)
        inner = module.model if isinstance(module, LabelPropagationOn) else module
        inner.load_state_dict(state)
        return module.eval(), val_acc
    result = train_defense(name, prepared.graph, params, train)
    module = result.model.eval()
    if shareable:
        inner = module.model if isinstance(module, LabelPropagationOn) else module
        _remember(_INNER, key, lambda: ({k: v.detach().clone() for k, v in inner.state_dict().items()},
                                         float(result.best_val_accuracy)), 32)
    return module, float(result.best_val_accuracy)


def _surrogate(spec: StudySpec, prepared: Prepared, seed: int):
    """Nettack's and SGA's surrogate (:data:`NETTACK_SURROGATE`) trained on the known graph."""
    from grb_dist.core.config import from_dict
    from grb_dist.defenses.build import train_defense
    from grb_dist.models.train import TrainConfig

    train = {**dict(spec.train), "seed": seed}
    result = train_defense("sgc", prepared.graph, dict(NETTACK_SURROGATE), from_dict(TrainConfig, train, where="train"))
    return result.model.eval()


def g_flips(prepared: Prepared, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(clean Bayes decisions, first step at which they change along ``order``; inf if never)."""
    t = order.shape[0]
    if prepared.g_scores is None:
        return np.full(t, -1, dtype=np.int64), np.full(t, np.inf)
    valid = order >= 0
    steps = np.where(valid[..., None], prepared.g_step[np.where(valid, order, 0)], 0.0)  # T x S x C
    delta = np.cumsum(steps, axis=1)
    g0 = prepared.g_scores.argmax(1)
    scores = prepared.g_scores[:, None, :] + delta
    changed = scores.argmax(2) != g0[:, None]
    first = np.where(changed.any(1), changed.argmax(1) + 1.0, np.inf)
    return g0, first


def node_steps(spec: StudySpec, degree: np.ndarray) -> np.ndarray:
    """Per node, the most edges any budget of the study allows (capped by ``max_steps``)."""
    most = np.zeros(degree.shape)
    for b in spec.budgets:
        most = np.maximum(most, budget_values(b, degree))
    return np.minimum(most, spec.max_steps).astype(np.int64)


def _node_graphs(prepared: Prepared):
    """Per new node i: ``(i, x, edges, neighbours)`` where ``x`` is the known features plus
    the node's row and ``edges(extra)`` the known graph plus the node's clean edges and the
    edges to the base ids ``extra``."""
    import torch

    graph = prepared.graph
    n = graph.num_nodes
    xb = torch.as_tensor(graph.features)
    base_ei = torch.as_tensor(graph.edge_index)
    t = prepared.y_new.size
    sorted_nb = bool(np.all(np.diff(prepared.nb_node) >= 0))
    starts = np.searchsorted(prepared.nb_node, np.arange(t + 1)) if sorted_nb else None
    for i in range(t):
        nbs = prepared.nb_base[starts[i]:starts[i + 1]] if starts is not None else prepared.nb_base[prepared.nb_node == i]
        x = torch.cat([xb, torch.as_tensor(prepared.x_new[i : i + 1])])

        def edges(extra: np.ndarray, nbs=nbs) -> torch.Tensor:
            others = torch.as_tensor(np.concatenate([nbs, extra]), dtype=torch.long)
            v = torch.full_like(others, n)
            return torch.cat([base_ei, torch.stack([v, others]), torch.stack([others, v])], 1)

        yield i, x, edges, nbs


def receptive_hops(model) -> int | None:
    """How many hops away a node's output can depend on other nodes: a model's own
    ``receptive_hops``, else its declared program's depth; ``None`` when unknown (label
    propagation and other global models)."""
    from grb_dist.attacks.injection.incremental import program_depth

    hops = getattr(model, "receptive_hops", None)
    return int(hops) if hops is not None else program_depth(model)


class BallView:
    """f's logits at a new node v computed on the ball of radius ``hops + 1`` around v.

    For a model whose output at a node depends on nodes at most ``hops`` away, the induced
    subgraph on that ball gives the same output at v as the whole graph: it holds every
    node within ``hops`` of v with all its edges (the extra hop keeps their degrees, which
    normalisations read, exact). An edge check then costs the size of v's neighbourhood,
    not of the graph. Balls over half the graph use the whole graph.
    """

    def __init__(self, model, prepared: "Prepared", hops: int):
        import scipy.sparse as sp
        import torch

        graph = prepared.graph
        self.model, self.n, self.hops = model, graph.num_nodes, hops
        ei = graph.edge_index
        adj = sp.csr_matrix((np.ones(ei.shape[1], dtype=np.float32), (ei[0], ei[1])), shape=(self.n, self.n))
        self.indptr, self.indices = adj.indptr.astype(np.int64), adj.indices.astype(np.int64)
        self.features = torch.as_tensor(graph.features)

    def _rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row of each entry, column) of the adjacency rows ``rows``, gathered at once."""
        starts = self.indptr[rows]
        lens = self.indptr[rows + 1] - starts
        flat = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        return np.repeat(rows, lens), self.indices[flat]

    def ball(self, neighbours: np.ndarray) -> np.ndarray | None:
        """Sorted known nodes within ``hops + 1`` of v (v's neighbours given), or None."""
        seen = np.zeros(self.n, dtype=bool)
        frontier = np.unique(neighbours)
        seen[frontier] = True
        total = frontier.size
        for _ in range(self.hops):
            if frontier.size == 0:
                break
            reached = self._rows(frontier)[1]
            frontier = np.unique(reached[~seen[reached]])
            seen[frontier] = True
            total += frontier.size
            if 2 * total > self.n:
                return None
        return np.flatnonzero(seen)

    def logits(self, x_row, neighbours: np.ndarray, full: Callable[[], Any]):
        """v's logits with ``neighbours`` (base ids); ``full()`` gives them on the whole graph."""
        import torch

        nodes = self.ball(neighbours)
        if nodes is None:
            return full()
        row, col = self._rows(nodes)
        inside = np.zeros(self.n, dtype=bool)
        inside[nodes] = True
        keep = inside[col]
        local = np.stack([np.searchsorted(nodes, row[keep]), np.searchsorted(nodes, col[keep])])
        v = nodes.size
        pos = torch.as_tensor(np.searchsorted(nodes, neighbours), dtype=torch.long)
        vv = torch.full_like(pos, v)
        ei = torch.cat([torch.as_tensor(local, dtype=torch.long), torch.stack([vv, pos]), torch.stack([pos, vv])], 1)
        x = torch.cat([self.features[torch.as_tensor(nodes)], x_row])
        return self.model(x, ei)[v]


def f_flips(model, prepared: Prepared, order: np.ndarray, steps: np.ndarray,
            adaptive: Callable[[int, Any, Any, np.ndarray], np.ndarray] | None = None,
            ball: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """f's clean decision at each new node and the first prefix of its order (1-based) at
    which it changes (inf when not within the node's ``steps``), adding one edge at a time.

    Models with a known receptive field are evaluated on v's ball (:class:`BallView`;
    ``ball=False``: always on the whole graph), after a check on the first attacked node
    that the ball and the whole graph agree.
    Returns (f_clean, f_flip, order) — ``order`` is the adaptive attack's when given.
    """
    import torch

    n = prepared.graph.num_nodes
    t = prepared.y_new.size
    f0 = np.zeros(t, dtype=np.int64)
    flips = np.full(t, np.inf)
    uses_graph = getattr(getattr(model, "model", model), "uses_graph", True) or hasattr(model, "model")
    hops = receptive_hops(model) if uses_graph and ball else None
    view = BallView(model, prepared, hops) if hops is not None else None
    checked = False
    order = order.copy()
    with torch.no_grad():
        for i, x, edges, nbs in _node_graphs(prepared):

            def logits(extra: np.ndarray, x=x, edges=edges, nbs=nbs):
                full = lambda: model(x, edges(extra))[n]  # noqa: E731
                if view is None:
                    return full()
                return view.logits(x[n:], np.concatenate([nbs, extra]), full)

            clean = edges(np.empty(0, np.int64))
            if adaptive is not None:
                with torch.enable_grad():
                    order[i] = adaptive(i, x, clean, nbs)
            extra = order[i, : int(steps[i])]
            extra = extra[extra >= 0]
            if view is not None and not checked and view.ball(np.concatenate([nbs, extra])) is not None:
                whole = model(x, edges(extra))[n]
                if not torch.allclose(logits(extra), whole, rtol=1e-4, atol=1e-5):
                    log.warning("%s: its output on a node's %d-hop ball differs from the whole graph's; "
                                "evaluating on the whole graph", type(model).__name__, hops + 1)
                    view = None
                checked = True
            f0[i] = int(logits(np.empty(0, np.int64)).argmax())
            if not uses_graph:
                continue
            for k in range(1, int(steps[i]) + 1):
                if order[i, k - 1] < 0:
                    break
                if int(logits(order[i, :k]).argmax()) != f0[i]:
                    flips[i] = k
                    break
    return f0, flips, order


#: The last (graph, trained model) of this process: the units of one (K, graph, model) run
#: one after another (attacks are the innermost loop of :func:`units`), so a process trains
#: each model once, not once per attack. Training is seeded, so a hit changes no result.
_LAST_TRAINED: dict[str, tuple] = {}


def _graph_key(spec: StudySpec, unit: Unit) -> str:
    return json.dumps([spec.shared(), unit.K, unit.graph_seed], sort_keys=True, default=str)


def _trained(spec: StudySpec, unit: Unit) -> tuple:
    """``(prepared graph, model, validation accuracy)`` of ``unit``'s (K, graph, model)."""
    key = json.dumps([asdict(spec), unit.K, unit.graph_seed, unit.model], sort_keys=True, default=str)

    def train() -> tuple:
        prepared = prepare(spec, unit.K, unit.graph_seed)
        return (prepared, *train_study_model(spec, prepared, unit.model, unit.graph_seed, _graph_key(spec, unit), unit.K))

    return _remember(_LAST_TRAINED, key, train, 1)


#: Orders of the surrogate attacks (Nettack, SGA) per graph: they depend on the surrogate,
#: not on the attacked model, so the models of one graph share them.
_SURROGATE_ORDERS: dict[str, np.ndarray] = {}


def surrogate_orders(spec: StudySpec, unit: Unit, prepared: Prepared, S: int) -> np.ndarray:
    """T x S edge orders of ``unit.attack`` (Nettack or SGA) on its seeded surrogate."""
    import torch

    def compute() -> np.ndarray:
        surrogate = _surrogate(spec, prepared, unit.graph_seed)
        surrogate_order = nettack_order if unit.attack == "nettack" else sga_order
        n = prepared.graph.num_nodes
        order = np.full((prepared.y_new.size, S), -1, dtype=np.int64)
        for i, x, edges, nbs in _node_graphs(prepared):
            cand = np.setdiff1d(np.arange(n), nbs)
            with torch.enable_grad():
                order[i] = surrogate_order(surrogate, x, edges(np.empty(0, np.int64)), n,
                                           int(prepared.y_new[i]), cand, S)
        return order

    return _remember(_SURROGATE_ORDERS, json.dumps([_graph_key(spec, unit), unit.attack, S]), compute, 8)


def run_unit(spec: StudySpec, unit: Unit) -> pd.DataFrame:
    """The rows of one unit (see :data:`ROW_COLUMNS`); a plain function (no Ray)."""
    import torch

    torch.set_num_threads(1)
    _needs_gatv2(spec)
    prepared, model, val_acc = _trained(spec, unit)
    degree = prepared.degree
    steps = node_steps(spec, degree)
    S = int(steps.max()) if steps.size else 0
    graph = prepared.graph
    target_classes: list[np.ndarray | None] = [None]
    if unit.attack == "l2-weak-class":
        target_classes = [np.full(prepared.y_new.size, c) for c in range(graph.num_classes)]
    frames = []
    for target in target_classes:
        rows_mask = np.ones(prepared.y_new.size, dtype=bool) if target is None else prepared.y_new != target
        adaptive = None
        if unit.attack in ADAPTIVE_ATTACKS:
            order = np.full((prepared.y_new.size, S), -1, dtype=np.int64)

            def adaptive(i, x, clean, nbs):
                cand = np.setdiff1d(np.arange(graph.num_nodes), nbs)
                return grbcd_order(model, x, clean, graph.num_nodes, cand, S)
        elif unit.attack in SURROGATE_ATTACKS:
            order = surrogate_orders(spec, unit, prepared, S)
        else:
            # rows whose label is the target class are dropped below; give them another class
            tc = None if target is None else np.where(rows_mask, target, (target + 1) % graph.num_classes)
            order = attack_order(unit.attack, graph.features, graph.labels, prepared.x_new, prepared.y_new,
                                 prepared.nb_node, prepared.nb_base, S, seed=unit.graph_seed, target_class=tc)
        f0, ff, order = f_flips(model, prepared, order, steps, adaptive)
        g0, gf = g_flips(prepared, order)
        valid = (order >= 0).sum(1)
        frame = pd.DataFrame({
            "study": spec.study, "K": float(unit.K), "graph_seed": int(unit.graph_seed), "model": unit.model,
            "attack": unit.attack, "node": np.arange(prepared.y_new.size, dtype=np.int64),
            "target_class": -1 if target is None else int(target[0]),
            "degree": degree.astype(np.int64), "label": prepared.y_new.astype(np.int64),
            "f_clean": f0, "g_clean": g0,
            "g_features": prepared.g_features if prepared.g_features is not None else np.full(f0.size, -1),
            "f_flip": ff, "g_flip": np.where(gf <= np.minimum(steps, valid), gf, np.inf),
            "steps": np.minimum(steps, valid).astype(np.int64), "val_accuracy": val_acc,
        })
        frames.append(frame[rows_mask])
    out = pd.concat(frames, ignore_index=True)
    return out[list(ROW_COLUMNS)]


# ---------------------------------------------------------------------------------------
# the study on Ray, the store, the tables


def study_dir(out: str | Path, spec: StudySpec) -> Path:
    return Path(out) / spec.study


def pending_units(spec: StudySpec, out: str | Path) -> list[tuple[Unit, Path]]:
    """Units whose Parquet file is not written yet, with their target paths."""
    nodes = study_dir(out, spec) / "nodes"
    todo = []
    for unit in units(spec):
        path = nodes / f"{unit.unit_id(spec)}.parquet"
        if not path.exists():
            todo.append((unit, path))
    return todo


def _write_rows(frame: pd.DataFrame, path: Path) -> None:
    import pyarrow as pa

    from grb_dist.store.parquet import write_table

    path.parent.mkdir(parents=True, exist_ok=True)
    write_table(pa.Table.from_pandas(frame, preserve_index=False), path)


def _unit_task(spec_dict: dict, unit_dict: dict) -> pd.DataFrame:
    spec = StudySpec(**spec_dict)
    return run_unit(spec, Unit(**unit_dict))


def run_study(
    spec: StudySpec,
    out: str | Path,
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    use_ray: bool = True,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Run the pending units (Ray tasks, or in this process with ``use_ray=False``), write
    each unit's rows atomically, then the reduced tables; returns the study directory."""
    check_spec(spec)
    directory = study_dir(out, spec)
    _check_same_settings(spec, directory)
    todo = pending_units(spec, out)
    say = progress or (lambda _msg: None)
    total = len(units(spec))
    say(f"study {spec.study}: {total} units, {total - len(todo)} done, {len(todo)} to run")
    directory.mkdir(parents=True, exist_ok=True)
    _write_spec(spec, directory)
    start = time.perf_counter()

    def done(count: int, unit: Unit) -> None:
        elapsed = time.perf_counter() - start
        left = elapsed / count * (len(todo) - count)
        say(f"[{count}/{len(todo)}] K={unit.K:g} graph={unit.graph_seed} {unit.model} {unit.attack} "
            f"({elapsed:.0f} s, about {_duration(left)} left)")

    if todo and not use_ray:
        for i, (unit, path) in enumerate(todo, 1):
            _write_rows(run_unit(spec, unit), path)
            done(i, unit)
    elif todo:
        from grb_dist.sweep.runner import RaySettings
        from grb_dist.sweep.tasks import run_units

        spec_dict = asdict(spec)
        finished = [0]

        def on_result(i: int, frame: pd.DataFrame) -> None:
            unit, path = todo[i]
            _write_rows(frame, path)
            finished[0] += 1
            done(finished[0], unit)

        run_units(_unit_task, [(f"study {u.model} {u.attack} K={u.K:g}", (spec_dict, asdict(u))) for u, _ in todo],
                  on_result, settings=RaySettings(address=address, num_cpus=num_cpus, include_dashboard=False),
                  job_name=f"grb-dist study {spec.study}")
    write_tables(directory, spec.budgets)
    return directory


def _duration(seconds: float) -> str:
    """``42 s``, ``7 min``, ``2.5 h``: a remaining time, as precise as it can be."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _check_same_settings(spec: StudySpec, directory: Path) -> None:
    """A study directory holds units of one set of shared settings: a run whose settings
    differ (nodes, graph, training ...) would mix its rows with the old ones."""
    old = stored_spec(directory)
    if old is None:
        return
    before, now = old.shared(), spec.shared()
    changed = sorted(k for k in set(before) | set(now)
                     if json.dumps(before.get(k), sort_keys=True, default=str) != json.dumps(now.get(k), sort_keys=True, default=str))
    if changed:
        raise ConfigError(f"{directory} holds study {spec.study!r} run with other settings ({', '.join(changed)}); "
                          "give another --out or another study name")


def _write_spec(spec: StudySpec, directory: Path) -> None:
    from grb_dist.core.fileio import write_bytes

    write_bytes(json.dumps(asdict(spec), indent=2, sort_keys=True, default=str).encode(), directory / "study.json")


def study_budgets(directory: str | Path) -> tuple[str, ...]:
    """The budgets of the study written in ``directory`` (its study.json), else the defaults."""
    path = Path(directory) / "study.json"
    try:
        budgets = json.loads(path.read_text()).get("budgets")
    except (OSError, ValueError, AttributeError):
        return DEFAULT_BUDGETS
    if isinstance(budgets, list) and budgets and all(isinstance(b, str) for b in budgets):
        try:
            for b in budgets:
                _check_budget(b)
        except ConfigError:
            return DEFAULT_BUDGETS
        return tuple(budgets)
    return DEFAULT_BUDGETS


def stored_spec(directory: str | Path) -> StudySpec | None:
    """The study last run in ``directory`` (its study.json), or None when unreadable."""
    try:
        data = json.loads((Path(directory) / "study.json").read_text())
        known = set(StudySpec.__dataclass_fields__)
        return StudySpec(**{k: v for k, v in data.items() if k in known})
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def read_nodes(directory: str | Path) -> pd.DataFrame:
    """The rows of the units of the study last run in ``directory`` (its study.json; every
    unit file when there is none, or when none of the files has an id of that study, as
    in a directory written before unit ids named only the unit's own model), an empty
    frame with the columns when none."""
    files = sorted(p for p in (Path(directory) / "nodes").glob("*.parquet") if not p.name.startswith("."))
    spec = stored_spec(directory)
    if spec is not None:
        try:
            wanted = {u.unit_id(spec) for u in units(spec)}
        except (ConfigError, TypeError, ValueError, AttributeError):
            wanted = None
        if wanted is not None and any(f.stem in wanted for f in files):
            files = [f for f in files if f.stem in wanted]
    if not files:
        return pd.DataFrame(columns=list(ROW_COLUMNS))
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def table1(nodes: pd.DataFrame) -> pd.DataFrame:
    """Bayes accuracy per K with (X, A) and without (X) structure (one row per node)."""
    sel = nodes[nodes["g_clean"] >= 0].drop_duplicates(["K", "graph_seed", "node"])
    if sel.empty:
        return pd.DataFrame(columns=["K", "bayes_x", "bayes_xa", "nodes"])
    acc = sel.assign(bayes_x=sel["g_features"] == sel["label"], bayes_xa=sel["g_clean"] == sel["label"])
    return acc.groupby("K").agg(bayes_x=("bayes_x", "mean"), bayes_xa=("bayes_xa", "mean"),
                                nodes=("node", "size")).reset_index()


def table2(nodes: pd.DataFrame, budgets: Sequence[str], attack: str = "l2-weak") -> pd.DataFrame:
    """Share of new nodes whose Bayes decision changes within each budget (K x budget),
    among nodes with degree > 0 that the Bayes classifier gets right on the clean graph
    (the attack connects classes other than the true one, so a node g gets wrong is pushed
    towards g's decision, not away from it)."""
    sel = nodes[(nodes["attack"] == attack) & (nodes["g_clean"] == nodes["label"]) & (nodes["degree"] > 0)]
    sel = sel.drop_duplicates(["K", "graph_seed", "node"])
    rows = []
    for b in budgets:
        if str(b) in ("inf", "unbounded", "none"):
            continue
        lim = np.minimum(budget_values(b, sel["degree"].to_numpy()), sel["steps"].to_numpy())
        hit = sel["g_flip"].to_numpy() <= lim
        part = sel.assign(violated=hit).groupby("K")["violated"].mean()
        rows.append(part.rename(str(b)))
    return pd.DataFrame(rows) if rows else pd.DataFrame()


def metrics_table(nodes: pd.DataFrame, budgets: Sequence[str],
                  keys: Sequence[str] = ("model", "attack", "K")) -> pd.DataFrame:
    """R, R(f, g), R(g), R_adv, R_over, F1-rob per group of ``keys`` and budget; the
    per-node budget is capped by the steps evaluated."""
    from grb_dist.semantics.metrics import node_robustness, summarize

    if nodes.empty:
        return pd.DataFrame()
    rows = []
    keys = list(keys)
    for b in budgets:
        cap = np.minimum(budget_values(b, nodes["degree"].to_numpy()), nodes["steps"].to_numpy())
        rob = node_robustness(nodes, cap)
        for k in keys:
            rob[k] = nodes[k].to_numpy()
        for group, part in rob.groupby(keys, sort=True, dropna=False):
            group = group if isinstance(group, tuple) else (group,)
            rows.append({**dict(zip(keys, group)), "budget": str(b), **summarize(part)})
    return pd.DataFrame(rows)


def write_tables(directory: str | Path, budgets: Sequence[str] = DEFAULT_BUDGETS) -> dict[str, Path]:
    """Reduce a study directory's rows into metrics.parquet / metrics.csv, table1.csv and
    table2.csv (atomic writes); returns the paths written."""
    import pyarrow as pa

    from grb_dist.core.fileio import write_bytes
    from grb_dist.store.parquet import write_table

    directory = Path(directory)
    nodes = read_nodes(directory)
    written: dict[str, Path] = {}
    metrics = metrics_table(nodes, budgets)
    if not metrics.empty:
        write_table(pa.Table.from_pandas(metrics, preserve_index=False), directory / "metrics.parquet")
        write_bytes(metrics.to_csv(index=False).encode(), directory / "metrics.csv")
        written["metrics"] = directory / "metrics.parquet"
    t1 = table1(nodes)
    if not t1.empty:
        write_bytes(t1.to_csv(index=False).encode(), directory / "table1.csv")
        written["table1"] = directory / "table1.csv"
    t2 = table2(nodes, budgets)
    if not t2.empty:
        write_bytes(t2.to_csv().encode(), directory / "table2.csv")
        written["table2"] = directory / "table2.csv"
    return written


__all__ = [
    "DEFAULT_BUDGETS", "ROW_COLUMNS", "Prepared", "StudySpec", "Unit", "bayes_terms", "check_spec",
    "cba_config", "csbm_config", "f_flips", "graph_config", "prepare_cba", "g_flips", "load_spec", "metrics_table", "node_steps", "pending_units",
    "prepare", "read_nodes", "run_study", "run_unit", "table1", "table2", "units", "write_tables",
]
