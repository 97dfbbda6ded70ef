"""Bring your own model, defense or attack, without editing grb-dist.

Three ways, from the quickest to the most permanent (``docs/extending.md``):

1. :func:`benchmark` takes a ``torch.nn.Module`` class (or a factory, or a registered name),
   runs the standard attacks of a dataset's job against it on the sweep's Ray machinery and
   returns its leaderboard rows as a DataFrame.
2. :func:`register_model`, :func:`register_defense`, :func:`register_attack` add a class to
   grb-dist's registries in this process; every command and function that takes a name
   (``build_defense``, ``build_attack``, a job's ``defenses:`` ...) then knows it.
3. Installed packages declare entry points (groups ``grb_dist.defenses``,
   ``grb_dist.models``, ``grb_dist.attacks``), found when a name is not a built-in; or a
   job or the command line names a ``module:Class`` spec (``--defenses
   mypkg.models:MyGCN``), registered as ``mypkg.models.mygcn``.

What can be registered:

* a **model**: a :class:`~grb_dist.models.base.GraphModel` subclass with its typed
  ``Config`` (a dataclass derived from :class:`~grb_dist.models.base.ModelConfig`); like the
  built-ins it comes with every suffix combination (``<name>_ln``, ``_at``, ``_lp`` ...);
* a **defense**: any ``torch.nn.Module`` with ``forward(x, edge_index) -> logits``, given as
  its class or as a factory. It is built as ``factory(in_features, num_classes)``, or
  ``factory(in_features, num_classes, config)`` when it has a config class (``config_cls``,
  or a dataclass ``Config`` attribute of the class), whose fields are then its parameters in
  a job's ``models:`` section (unknown keys are errors, as for built-ins). It is trained by
  grb-dist's inductive trainer (``<name>_at`` with adversarial training, ``<name>_lp`` with
  label propagation on top) unless the module declares ``trainable = False``: then it is
  used as built (parameter-free, or loading its own weights);
* an **attack**: an :class:`~grb_dist.attacks.base.InjectionAttack` or
  :class:`~grb_dist.attacks.modification.base.ModificationAttack` subclass whose ``Config``
  derives from the scenario's base config; its parameters are checked like built-ins'.

Names are plain names (letters, digits, ``_``, ``-``; never a path, no dots: names with a dot
belong to ``module:Class`` specs). A built-in name is refused unless ``replace=True``; so is a
name registered for another object. Built-ins always win over entry points of the same name.

**Registrations are per process; they travel to the Ray workers.** Before a sweep submits
work, the driver publishes its registrations (:func:`grb_dist.sweep.tasks.publish_registrations`, called by
:func:`grb_dist.sweep.runner.run_sweep`) to a small named actor of the Ray job, and every
training task, attack task and Scorer actor installs them when it starts
(:func:`grb_dist.sweep.tasks.install_registrations`). Ray serialises them as it serialises every task argument: a
class of an importable module by reference (the worker imports that module; on a cluster it
must be installed on every node), a class defined in ``__main__`` or inside a function by
value. Nothing of them is ever written to the run directory (models are stored as
state_dicts and loaded with ``torch.load(weights_only=True)``). Entry points are also found by
the workers on their own. Resuming or growing a
run needs the same registrations: a re-run of the same command registers them again.
Stored cells are keyed by name and parameters, not by code: after changing a registered
class, use a new run directory.

**Security.** A ``module:Class`` spec is only ever imported as a module name with
:func:`importlib.import_module` (no file paths, nothing evaluated from a job file beyond
that import) and is looked up when a name is otherwise unknown. Importing a module runs its
code, so name only modules you trust, as with any Python import.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from grb_dist.core.errors import ConfigError, GrbDistError
from grb_dist.core.names import normalize_name, spec_of

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: Entry-point groups: what an installed package declares, and what it may hold.
GROUPS = {"defenses": "grb_dist.defenses", "models": "grb_dist.models", "attacks": "grb_dist.attacks"}
#: A name given to ``register_*`` (lower-cased): no dots, no path separators.
_PLAIN = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")

class ExtensionTypeError(ConfigError, TypeError):
    """An object of the wrong kind was registered (not a GraphModel, Module or attack class)."""


@dataclass(frozen=True)
class Registration:
    """One user registration: what :func:`install` replays in a Ray worker.

    Attributes:
        kind: ``model`` (a GraphModel subclass), ``defense`` (any module and its factory),
            ``injection`` or ``modification`` (an attack class).
        name: the registered (normalised) name.
        target: the class or factory.
        config_cls: the config class of a defense (``None``: no parameters, or not a defense).
        source: where it came from (``register``, ``entry point``, ``spec``), for messages.
    """

    kind: str
    name: str
    target: Any
    config_cls: Any = None
    source: str = "register"


#: This process's registrations: (kind family, name) -> Registration; the family is
#: ``model`` for models and defenses (one name space), else the attack scenario.
_REGISTERED: dict[tuple[str, str], Registration] = {}


# ----------------------------------------------------------------------- the API


def register_model(name: str, cls: type, *, replace: bool = False) -> str:
    """Register :class:`~grb_dist.models.base.GraphModel` subclass ``cls`` under ``name``
    with its typed ``Config``; ``<name>_ln``, ``<name>_at``, ``<name>_lp`` ... work like the
    built-ins' variants. Returns the registered (normalised) name.

    Raises:
        ExtensionTypeError: ``cls`` is not a GraphModel subclass, or its ``Config`` is not a
            dataclass derived from ModelConfig.
        ConfigError: ``name`` is not a plain name, ends in a defense suffix, or is taken
            (a built-in, or registered for another class) and ``replace`` is false.
    """
    return _register(Registration("model", _plain_name(name, "model"), cls), replace=replace)


def register_defense(name: str, factory_or_class: Any, config_cls: type | None = None, *,
                     replace: bool = False) -> str:
    """Register a defense: a ``torch.nn.Module`` subclass, or a factory returning one, whose
    ``forward(x, edge_index)`` returns logits (N x C). Returns the registered name.

    The module is built as ``factory(in_features, num_classes)``, or with a third argument,
    the typed config, when ``config_cls`` is given (or the class has a dataclass ``Config``
    attribute). A :class:`~grb_dist.models.base.GraphModel` subclass is registered as a model
    (:func:`register_model`). Raises like :func:`register_model`.
    """
    return _register(_defense_registration(_plain_name(name, "defense"), factory_or_class, config_cls, "register"),
                     replace=replace)


def register_attack(name: str, cls: type, scenario: str = "injection", *, replace: bool = False) -> str:
    """Register attack class ``cls`` for ``scenario`` (``injection``: an
    :class:`~grb_dist.attacks.base.InjectionAttack` subclass; ``modification``: a
    :class:`~grb_dist.attacks.modification.base.ModificationAttack` subclass), with its
    ``Config`` checked like the built-ins'. Returns the registered name."""
    from grb_dist.attacks import SCENARIOS

    if scenario not in SCENARIOS:
        raise ConfigError(f"unknown scenario {scenario!r}; choose one of: {', '.join(SCENARIOS)}")
    return _register(Registration(scenario, _plain_name(name, f"{scenario} attack"), cls), replace=replace)


def unregister(name: str, kind: str = "model") -> None:
    """Forget a registration (``kind``: ``model`` for models and defenses, or an attack's
    scenario). Built-ins cannot be removed."""
    key = normalize_name(name)
    family = "model" if kind in ("model", "defense") else kind
    if family == "model":
        from grb_dist.models.registry import remove_model

        remove_model(key)
    else:
        from grb_dist.attacks import attack_registry

        attack_registry(family).remove(key)
    _REGISTERED.pop((family, key), None)


def registered() -> tuple[Registration, ...]:
    """This process's registrations (what the sweep sends to its Ray tasks and actors)."""
    return tuple(_REGISTERED.values())


def install(registrations: Iterable[Registration]) -> None:
    """Replay ``registrations`` (from :func:`registered` in another process) here; those this
    process already holds for the same object are skipped, others replace what is there."""
    for r in registrations:
        held = _REGISTERED.get((_family(r.kind), r.name))
        if held is not None and held.target is r.target and held.config_cls is r.config_cls:
            continue
        _register(r, replace=True)


# ----------------------------------------------------------------------- Ray workers

# ----------------------------------------------------------------------- registering


def _family(kind: str) -> str:
    return "model" if kind in ("model", "defense") else kind


def _plain_name(name: Any, what: str) -> str:
    if not isinstance(name, str):
        raise ConfigError(f"a {what} name must be a string, got {type(name).__name__}")
    key = name.lower()
    if not _PLAIN.fullmatch(key):
        raise ConfigError(
            f"{what} name {name!r} is not a plain name: use letters, digits, '_' and '-' (at most 64; no dots, "
            "no spaces, no path separators; dotted names belong to module:Class specs)"
        )
    return normalize_name(key)


def _defense_registration(name: str, obj: Any, config_cls: type | None, source: str) -> Registration:
    """A Registration for ``obj`` as a defense (a GraphModel subclass becomes a model)."""
    import torch

    from grb_dist.models.base import GraphModel

    if inspect.isclass(obj):
        if issubclass(obj, GraphModel):
            if config_cls is not None:
                raise ExtensionTypeError(f"{_describe(obj)} is a GraphModel: its config is its Config attribute, "
                                         "do not pass config_cls")
            return Registration("model", name, obj, None, source)
        if not issubclass(obj, torch.nn.Module):
            raise ExtensionTypeError(f"defense {name!r}: {_describe(obj)} is not a torch.nn.Module subclass "
                                     "(a defense maps (x, edge_index) to logits)")
        if config_cls is None:
            own = getattr(obj, "Config", None)
            config_cls = own if inspect.isclass(own) and dataclasses.is_dataclass(own) else None
    elif not callable(obj):
        raise ExtensionTypeError(f"defense {name!r}: expected a torch.nn.Module subclass or a factory "
                                 f"(in_features, num_classes) -> module, got {type(obj).__name__}")
    elif isinstance(obj, torch.nn.Module):
        raise ExtensionTypeError(f"defense {name!r}: got a module instance; register its class or a factory "
                                 "(grb-dist builds and trains a fresh module per seed)")
    if config_cls is not None and not (inspect.isclass(config_cls) and dataclasses.is_dataclass(config_cls)):
        raise ExtensionTypeError(f"defense {name!r}: config_cls must be a dataclass, got {config_cls!r}")
    return Registration("defense", name, obj, config_cls, source)


def _check_attack(r: Registration) -> None:
    from grb_dist.attacks.base import AttackConfig, InjectionAttack
    from grb_dist.attacks.modification.base import ModificationAttack, ModificationConfig

    base, config = (InjectionAttack, AttackConfig) if r.kind == "injection" else (ModificationAttack, ModificationConfig)
    other = ModificationAttack if r.kind == "injection" else InjectionAttack
    cls = r.target
    if not (inspect.isclass(cls) and issubclass(cls, base)):
        hint = (f"; it is a {'modification' if r.kind == 'injection' else 'injection'} attack: pass "
                f"scenario={'modification' if r.kind == 'injection' else 'injection'!r}"
                if inspect.isclass(cls) and issubclass(cls, other) else "")
        raise ExtensionTypeError(f"{r.kind} attack {r.name!r}: {_describe(cls)} is not a subclass of {base.__name__}{hint}")
    cfg = getattr(cls, "Config", None)
    if not (inspect.isclass(cfg) and dataclasses.is_dataclass(cfg) and issubclass(cfg, config)):
        raise ExtensionTypeError(f"{r.kind} attack {r.name!r}: {cls.__name__}.Config must be a dataclass derived "
                                 f"from {config.__name__}")


def _check_model(r: Registration) -> None:
    from grb_dist.models.base import GraphModel, ModelConfig

    cls = r.target
    if not (inspect.isclass(cls) and issubclass(cls, GraphModel)):
        raise ExtensionTypeError(f"model {r.name!r}: {_describe(cls)} is not a subclass of GraphModel "
                                 "(register any other torch.nn.Module with register_defense)")
    cfg = getattr(cls, "Config", None)
    if not (inspect.isclass(cfg) and dataclasses.is_dataclass(cfg) and issubclass(cfg, ModelConfig)):
        raise ExtensionTypeError(f"model {r.name!r}: {cls.__name__}.Config must be a dataclass derived from ModelConfig")


def _register(r: Registration, *, replace: bool) -> str:
    """Check ``r`` and add it to its registry; remember it for :func:`registered`."""
    if r.kind == "model":
        _check_model(r)
        from grb_dist.models.registry import add_model

        key = add_model(r.name, r.target, replace=replace)
    elif r.kind == "defense":
        from torch import nn

        from grb_dist.models.registry import add_defense

        cls = r.target if inspect.isclass(r.target) else nn.Module
        key = add_defense(r.name, r.target, cls, r.config_cls, replace=replace)
    else:
        _check_attack(r)
        from grb_dist.attacks import attack_registry

        key = attack_registry(r.kind).add(r.name, r.target, replace=replace)
    _REGISTERED[(_family(r.kind), key)] = dataclasses.replace(r, name=key)
    return key


def _describe(obj: Any) -> str:
    if inspect.isclass(obj):
        return f"class {obj.__module__}.{obj.__qualname__}"
    return repr(obj)


# ----------------------------------------------------------------------- lazy lookup


def entry_points(group: str) -> list[metadata.EntryPoint]:
    """The installed entry points of ``group`` (reads package metadata; imports nothing)."""
    try:
        return list(metadata.entry_points(group=group))
    except Exception:  # noqa: BLE001 - broken metadata of another package must not break lookups
        return []


def available(family: str) -> list[str]:
    """Names that entry points could provide to registry ``family`` (not loaded)."""
    groups = (GROUPS["defenses"], GROUPS["models"]) if family == "model" else (GROUPS["attacks"],)
    return [normalize_name(ep.name) for g in groups for ep in entry_points(g) if _PLAIN.fullmatch(normalize_name(ep.name))]


def resolve_model(key: str) -> bool:
    """The model registry's resolver: a ``module:Class`` spec seen under ``key``, or an entry
    point named ``key`` (or its base without ``_ln``/``_at``/``_lp``)."""
    from grb_dist.models.registry import split_suffixes

    if spec_of(key) is not None:
        _resolve_spec(key, "model")
        return True
    base, suffixes = split_suffixes(key)
    if suffixes and spec_of(base) is not None:
        _resolve_spec(base, "model")
        return True
    for name in dict.fromkeys((key, base)):
        for group in (GROUPS["defenses"], GROUPS["models"]):
            if _resolve_entry_point(group, name, "model"):
                return True
    return False


def attack_resolver(scenario: str) -> Callable[[str], bool]:
    """The resolver of ``scenario``'s attack registry (specs, then entry points)."""

    def resolve(key: str) -> bool:
        if spec_of(key) is not None:
            return _resolve_spec(key, scenario)
        return _resolve_entry_point(GROUPS["attacks"], key, scenario)

    return resolve


def _resolve_entry_point(group: str, key: str, family: str) -> bool:
    """Load the entry point of ``group`` named ``key`` (when there is one) and register it;
    whether it went to registry ``family``."""
    for ep in entry_points(group):
        if normalize_name(ep.name) != key or not _PLAIN.fullmatch(key):
            continue
        try:
            obj = ep.load()
        except Exception as exc:  # noqa: BLE001 - any import error of the plugin, in one line
            raise ConfigError(f"cannot load entry point {ep.name!r} ({ep.value}) of group {group}: "
                              f"{type(exc).__name__}: {_first_line(exc)}") from None
        return _register_found(key, obj, family, f"entry point {ep.name} = {ep.value} ({group})", "entry point")
    return False


def _resolve_spec(key: str, family: str) -> bool:
    """Import the ``module:Class`` spec remembered under ``key`` and register what it names."""
    module_name, attr = spec_of(key)  # type: ignore[misc]
    spec = f"{module_name}:{attr}"
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - a missing module or a failing import, in one line
        raise ConfigError(f"cannot import {module_name!r} of spec {spec!r}: {type(exc).__name__}: {_first_line(exc)} "
                          "(the module must be importable: installed, or on PYTHONPATH)") from None
    obj = getattr(module, attr, None)
    name = key
    if obj is None and family == "model":  # mypkg:MyGCN_ln: the variant of MyGCN
        from grb_dist.models.registry import split_suffixes

        base_attr = attr
        while base_attr.lower().endswith(("_ln", "_at", "_lp")) and len(base_attr) > 3:
            base_attr = base_attr[:-3]
        obj = getattr(module, base_attr, None) if base_attr != attr else None
        name = split_suffixes(key)[0]
    if obj is None:
        raise ConfigError(f"spec {spec!r}: module {module_name!r} has no attribute {attr!r}")
    return _register_found(name, obj, family, f"spec {spec!r}", "spec")


def _register_found(name: str, obj: Any, family: str, where: str, source: str) -> bool:
    """Register ``obj`` found by an entry point or spec under ``name`` in the registry its
    type belongs to; whether that is registry ``family`` (an attack of the other scenario is
    registered there, so that the caller can say where it belongs)."""
    from grb_dist.attacks.base import InjectionAttack
    from grb_dist.attacks.modification.base import ModificationAttack

    if inspect.isclass(obj) and issubclass(obj, (InjectionAttack, ModificationAttack)):
        kind = "injection" if issubclass(obj, InjectionAttack) else "modification"
        if family == "model":
            raise ConfigError(f"{where} is an {kind} attack ({obj.__name__}), not a model or defense; "
                              "list it among the attacks")
        _register(Registration(kind, name, obj, None, source), replace=True)
        return kind == family
    if family != "model":
        raise ConfigError(f"{where} is not an attack: expected an InjectionAttack or ModificationAttack subclass, "
                          f"got {_describe(obj)}")
    _register(_defense_registration(name, obj, None, source), replace=True)
    return True


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""


# ----------------------------------------------------------------------- benchmark()

#: ``benchmark()`` keyword arguments passed to :func:`grb_dist.sweep.spec.apply_overrides`.
_OVERRIDE_KEYS = ("seed", "surrogates", "n_inject", "edges_per_node", "ratio_edge_mod")


def benchmark(
    model: Any,
    dataset: str = "csbm",
    scenario: str = "injection",
    attacks: str | Iterable[str] | None = None,
    difficulties: str | Iterable[str] | None = None,
    repeats: int = 1,
    steps: int | None = None,
    out: str | Path | None = None,
    num_cpus: int | None = None,
    *,
    compare: bool = False,
    name: str | None = None,
    job: str | Path | None = None,
    address: str | None = None,
    data_dir: str | Path | None = None,
    download: bool = True,
    on_progress: Callable[[Any], None] | None = None,
    **job_overrides: Any,
) -> pd.DataFrame:
    """Benchmark one model against the standard attacks of ``dataset``'s job.

    Args:
        model: a ``torch.nn.Module`` subclass (a GraphModel is registered as a model, any
            other module as a defense), a factory ``(in_features, num_classes) -> module``,
            or a registered name (built-in, registered, entry point or ``module:Class``).
        dataset: a catalogue name (its shipped job) or a dataset path (the default job).
        scenario: ``injection``, ``modification`` or ``all``.
        attacks / difficulties: narrow the job's (lists or comma-separated strings).
        repeats: repeats of every attack. steps: attack optimisation steps (all attacks).
        out: the run directory (kept, and resumed by a later call with the same arguments);
            default: a temporary directory, removed afterwards.
        num_cpus: CPUs of the embedded local Ray (default: all).
        compare: also score the job's own defenses (default: only this model).
        name: the name to register ``model`` under (default: its class or function name, in
            lower case; ``model`` when that is not a plain name).
        job: a job file instead of the dataset's shipped job.
        address: a Ray cluster to join (default: ``$RAY_ADDRESS``, else a Ray this process
            already joined, else an embedded local Ray, stopped afterwards).
        job_overrides: ``seed``, ``surrogates``, ``n_inject``, ``edges_per_node``,
            ``ratio_edge_mod`` as in ``grb-dist sweep``; any other job key (``train``,
            ``models``, ``attack`` ...) replaces the job's, a mapping merged into the job's
            mapping (``train={"epochs": 50}``).

    Returns:
        One row per (scenario, difficulty, defense, attack, surrogate) with ``row`` =
        ``clean`` (attack ``none``) or ``attack``: ``accuracy_mean`` and ``accuracy_std``
        over repeats (population deviation), ``n_repeats``; then, per scenario and
        difficulty, the defense board row of each scored defense (``row`` = ``defense``,
        attack and surrogate ``all``): ``accuracy_mean``/``accuracy_std`` are the board's
        Average over attacks and clean, with ``avg_3_min_mean``, ``weighted_mean``, ``rank``
        and ``clean_accuracy``.

    Raises:
        GrbDistError: invalid input (before anything runs), or cells that failed.
    """
    from grb_dist.sweep.session import execute, lock_run, prepare

    overrides: dict[str, Any] = {k: job_overrides.pop(k) for k in _OVERRIDE_KEYS if k in job_overrides}
    overrides.update(scenario=scenario, attacks=_listed(attacks), difficulties=_listed(difficulties),
                     repeats=repeats, steps=steps)
    spec = _benchmark_spec(_benchmark_name(model, name), dataset, job, overrides, job_overrides, compare)

    from grb_dist.checks import check_sweep
    from grb_dist.sweep.runner import RaySettings

    settings = RaySettings(address=address, num_cpus=num_cpus)
    with tempfile.TemporaryDirectory(prefix="grb-dist-benchmark-") as tmp:
        run_dir = Path(out) if out is not None else Path(tmp) / "run"
        prepared = prepare(spec, out=run_dir, data_dir=data_dir, download=download)
        check_sweep(prepared, local=settings.resolved_address() is None)
        lock, prepared = lock_run(prepared)
        try:
            outcome = execute(prepared, settings, lock, on_progress=on_progress)
        finally:
            lock.release()
        if outcome.summary is not None and outcome.summary.failures:
            first = outcome.summary.errors[0] if outcome.summary.errors else "see the log"
            raise GrbDistError(f"{outcome.summary.failures} of {outcome.summary.total} cells failed; first: {first}")
        return benchmark_rows(outcome.store.read_scores(), outcome.boards, list(spec.defenses))


def _benchmark_spec(key: str, dataset: str, job: str | Path | None, overrides: Mapping[str, Any],
                    job_overrides: Mapping[str, Any], compare: bool):
    """The job of :func:`benchmark`: the dataset's job with the flags' ``overrides``, the
    model ``key`` as the defense (first, before the job's own with ``compare``), and other
    job keys replaced (mappings merged into the job's)."""
    from grb_dist.sweep.session import resolve_job
    from grb_dist.sweep.spec import with_spec

    spec = resolve_job(dataset, job, overrides)
    defenses = [key] + ([d for d in spec.defenses if d != normalize_name(key)] if compare else [])
    current = spec.to_dict()
    changes: dict[str, Any] = {"defenses": defenses}
    for k, v in job_overrides.items():
        changes[k] = {**current[k], **v} if isinstance(v, Mapping) and isinstance(current.get(k), Mapping) else v
    return with_spec(spec, **changes)


def benchmark_rows(scores: pd.DataFrame, boards: Mapping[str, pd.DataFrame], defenses: list[str]) -> pd.DataFrame:
    """The rows :func:`benchmark` returns, from a run's scores and leaderboards."""
    import numpy as np
    import pandas as pd

    from grb_dist.core.names import DIFFICULTIES

    mine = scores[scores["defense"].isin(defenses)]
    keys = ["scenario", "difficulty", "defense", "attack", "surrogate"]
    acc = mine.groupby(keys, sort=True)["accuracy"]
    rows = acc.agg(accuracy_mean="mean", n_repeats="count").reset_index()
    rows["accuracy_std"] = acc.agg(lambda a: float(np.std(np.asarray(a, dtype=float)))).to_numpy()
    rows.insert(0, "row", np.where(rows["attack"] == "none", "clean", "attack"))
    board_rows = []
    for board_key, board in boards.items():
        if "/defenses-" not in board_key:
            continue
        for _, b in board[board["defense"].isin(defenses)].iterrows():
            board_rows.append({
                "row": "defense", "scenario": b["scenario"], "difficulty": b["difficulty"], "defense": b["defense"],
                "attack": "all", "surrogate": "all", "accuracy_mean": b["average_mean"],
                "accuracy_std": b["average_std"], "n_repeats": int(b["n_repeats"]),
                "avg_3_min_mean": b["avg_3_min_mean"], "weighted_mean": b["weighted_mean"],
                "rank": int(b["rank"]), "clean_accuracy": b["clean_accuracy"],
            })
    out = pd.concat([rows, pd.DataFrame(board_rows)], ignore_index=True)
    columns = ["row", *keys, "accuracy_mean", "accuracy_std", "n_repeats", "avg_3_min_mean", "weighted_mean",
               "rank", "clean_accuracy"]
    for c in columns:
        if c not in out.columns:
            out[c] = np.nan
    order = {d: i for i, d in enumerate(DIFFICULTIES)}
    out["_d"] = out["difficulty"].map(lambda d: order.get(d, len(order)))
    out["_r"] = out["row"].map({"clean": 0, "attack": 1, "defense": 2})
    out = out.sort_values(["scenario", "_d", "defense", "_r", "attack", "surrogate"], kind="stable")
    return out[columns].reset_index(drop=True)


def _listed(value: str | Iterable[str] | None) -> str | tuple[str, ...] | None:
    if value is None or isinstance(value, str):
        return value
    return tuple(value)


def _benchmark_name(model: Any, name: str | None) -> str:
    """Register ``model`` for :func:`benchmark` (or check the name it names); its name."""
    from grb_dist.models.registry import MODELS, check_name

    if isinstance(model, str):
        if name is not None:
            raise ConfigError("benchmark(): name= applies to a model object, not to a model name")
        key = normalize_name(model)
        check_name(key)  # unknown names raise, listing the valid ones
        return key
    if name is None:
        raw = getattr(model, "__name__", "") or type(model).__name__
        name = normalize_name(raw) if _PLAIN.fullmatch(normalize_name(raw)) else "model"
        if MODELS.is_builtin(name):  # a user class called GCN is not the built-in gcn
            name = f"{name}_user"
    r = _defense_registration(_plain_name(name, "defense"), model, None, "benchmark")
    # benchmark() registers what it is given: the same name given a new object replaces the
    # old registration, never a built-in
    return _register(r, replace=not MODELS.is_builtin(r.name))


__all__ = [
    "ExtensionTypeError", "GROUPS", "Registration", "available", "benchmark", "benchmark_rows", "entry_points",
    "install", "register_attack", "register_defense", "register_model",
    "registered", "resolve_model", "unregister",
]
