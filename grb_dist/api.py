"""The Python API at the top of grb-dist: bring your own model, defense or attack.

Three ways, from the quickest to the most permanent (``docs/extending.md``):

1. :func:`benchmark` takes a ``torch.nn.Module`` class (or a factory, or a registered name,
   trained by the job's protocol) or a trained module instance (scored as given), runs the
   standard attacks of a dataset's job (or of a PyG ``Data``) against it on the sweep's Ray
   machinery and returns its leaderboard rows as a DataFrame.
2. :func:`register_model`, :func:`register_defense`, :func:`register_attack` add a class to
   the tables of :mod:`grb_dist.models.registry` and :mod:`grb_dist.attacks.registry` in
   this process; every command and function that takes a name (``build_defense``,
   ``build_attack``, a job's ``defenses:`` ...) then knows it.
3. Installed packages declare entry points (groups ``grb_dist.defenses``,
   ``grb_dist.models``, ``grb_dist.attacks``), found when a name is not a built-in; or a
   job or the command line names a ``module:Class`` spec (``--defenses
   mypkg.models:MyGCN``), registered as ``mypkg.models.mygcn``. A spec names a class
   deriving from the table's base (a model, a ``torch.nn.Module``, an attack), never a
   function.

**Registrations are per process; they travel to the Ray workers.** A sweep takes a snapshot
of every table's additions (:func:`grb_dist.core.registry.snapshot`) once, puts it in Ray's
object store, and every worker restores it once before its first task. Ray serialises a
class of an importable module by reference (on a cluster the module must be installed on
every node), a class defined in ``__main__`` or inside a function by value. Nothing of them
is written to the run directory. Stored cells are keyed by name and parameters, not by code:
after changing a registered class, use a new run directory.

Each function imports what it needs when called, so ``import grb_dist`` stays light.
"""

from __future__ import annotations

import logging
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from grb_dist.core.errors import ConfigError, GrbDistError
from grb_dist.core.names import DIFFICULTIES, is_plain_name, normalize_name
from grb_dist.core.scenario import DEFAULT, Scenario, scenarios

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def register_model(name: str, cls: type, *, replace: bool = False) -> str:
    """Register a GraphModel subclass: :func:`grb_dist.models.registry.register_model`."""
    from grb_dist.models.registry import register_model as register

    return register(name, cls, replace=replace)


def register_defense(name: str, factory_or_class: Any, config_cls: type | None = None, *,
                     replace: bool = False) -> str:
    """Register a defense module or factory: :func:`grb_dist.models.registry.register_defense`."""
    from grb_dist.models.registry import register_defense as register

    return register(name, factory_or_class, config_cls, replace=replace)


def register_attack(name: str, cls: type, scenario: str = DEFAULT.name, *, replace: bool = False) -> str:
    """Register an attack class: :func:`grb_dist.attacks.registry.register_attack`."""
    from grb_dist.attacks.registry import register_attack as register

    return register(name, cls, scenario, replace=replace)


def register_scenario(scenario: Scenario, attacks: Mapping[str, type] | None = None, *,
                      replace: bool = False) -> Scenario:
    """Register a scenario (a :class:`~grb_dist.core.scenario.Scenario`) and its attacks:
    :func:`grb_dist.attacks.registry.register_scenario`. A job then lists its attacks in a
    section of its name, and ``--scenario <name>`` (or ``all``) sweeps it."""
    from grb_dist.attacks.registry import register_scenario as register

    return register(scenario, attacks, replace=replace)


def unregister(name: str, kind: str = "model") -> None:
    """Forget a registration (``kind``: ``model`` for models and defenses, ``scenario`` for a
    scenario, or an attack's scenario). Built-ins cannot be removed."""
    if kind in ("model", "defense"):
        from grb_dist.models.registry import MODELS as table
    elif kind == "scenario":
        from grb_dist.core.scenario import TABLE as table
    else:
        from grb_dist.attacks.registry import attack_registry

        table = attack_registry(kind)
    table.remove(name)


def registered() -> list[tuple[str, str]]:
    """``(kind, name)`` of this process's additions: ``model`` for models and defenses,
    ``scenario`` for scenarios, the scenario for attacks."""
    from grb_dist.core.registry import snapshot

    kinds = {"model": "model", "scenario": "scenario", **{s.attack_kind: s.name for s in scenarios()}}
    return [(kinds.get(kind, kind), name) for kind, entries in snapshot().items() for name in entries]


#: ``benchmark()`` keyword arguments passed to :func:`grb_dist.sweep.overrides.apply_overrides`.
_OVERRIDE_KEYS = ("seed", "surrogates", "n_inject", "edges_per_node", "ratio_edge_mod", "adaptive")


def benchmark(
    model: Any,
    dataset: Any = "csbm",
    *,
    scenario: str = DEFAULT.name,
    attacks: str | Iterable[str] | None = None,
    difficulties: str | Iterable[str] | None = None,
    repeats: int = 1,
    steps: int | None = None,
    out: str | Path | None = None,
    num_cpus: int | None = None,
    compare: bool = False,
    name: str | None = None,
    job: str | Path | None = None,
    address: str | None = None,
    data_dir: str | Path | None = None,
    download: bool = True,
    on_progress: Callable[[Any], None] | None = None,
    progress: bool = True,
    **job_overrides: Any,
) -> pd.DataFrame:
    """Benchmark one model against the standard attacks of ``dataset``'s job.

    Args:
        model: a ``torch.nn.Module`` subclass (a GraphModel is registered as a model, any
            other module as a defense), a factory ``(in_features, num_classes) -> module``,
            or a registered name (built-in, registered, entry point or ``module:Class``):
            built and trained by the job's protocol, one per seed. Or a trained module
            instance whose ``forward(x, edge_index)`` returns logits (a PyG model trained
            the usual way): scored as given, never trained (a copy of it is taken when
            the call starts); its rows say ``weights = given``.
        dataset: a catalogue name (its shipped job; one without a job of its own runs its
            kind's, Pro-GNN's graphs ``prognn-cora.yaml``, said by a logged warning), a
            dataset path (the default job), or a
            PyG ``Data`` / one-graph ``InMemoryDataset`` (the default job;
            :func:`grb_dist.datasets.pyg.from_pyg` reads it: its masks, else a GRB split,
            and its features as they are, ``normalize="none"`` unless given).
        scenario: ``injection``, ``modification``, ``poisoning`` or ``all``.
        attacks / difficulties: narrow the job's (lists or comma-separated strings).
        repeats: repeats of every attack. steps: attack optimisation steps (all attacks).
        out: the run directory (kept, and resumed by a later call with the same arguments),
            or a run in object storage (``s3://bucket/prefix``, :mod:`grb_dist.store.remote`);
            default: a temporary directory, removed afterwards.
        num_cpus: CPUs of the embedded local Ray (default: all).
        compare: also score the job's own defenses (default: only this model).
        name: the name to register ``model`` under (default: its class or function name, in
            lower case; ``model`` when that is not a plain name).
        job: a job file instead of the dataset's shipped job.
        address: a Ray cluster to join (default: ``$RAY_ADDRESS``, else a Ray this process
            already joined, else an embedded local Ray, stopped afterwards).
        on_progress: called with each ``SweepProgress`` (see
            :func:`grb_dist.sweep.runner.run_sweep`) instead of the progress display.
        progress: show progress on stderr (live bars on a terminal or in a notebook,
            timestamped lines otherwise) when no ``on_progress`` is given.
        job_overrides: ``seed``, ``surrogates``, ``n_inject``, ``edges_per_node``,
            ``ratio_edge_mod``, ``adaptive`` as in ``grb-dist sweep``; any other job key (``train``,
            ``models``, ``attack`` ...) replaces the job's, a mapping merged into the job's
            mapping (``train={"epochs": 50}``).

    Returns:
        :func:`benchmark_rows`: a ``clean`` or ``attack`` row per (scenario, difficulty,
        defense, attack, surrogate, threat) and each defense's board row (``defense``),
        with ``weights`` = ``given`` or ``trained``; ``adaptive=True`` adds the model
        attacked by itself (threat ``adaptive``).

    Raises:
        GrbDistError: invalid input (before anything runs), or cells that failed.
    """
    from grb_dist.cluster.settings import Connection, RaySettings
    from grb_dist.store.remote import staged

    # the options in four groups: what runs, where the run and its data live, which Ray, how progress shows
    what = JobChoice(scenario=scenario, attacks=_listed(attacks), difficulties=_listed(difficulties), repeats=repeats,
                     steps=steps, job=job, compare=compare, overrides=dict(job_overrides))
    where = RunPlace.given(out, data_dir, download)
    shown = Display(on_progress=on_progress, progress=progress)
    key, given, spec, graph = _benchmark_inputs(model, name, dataset, what)
    settings = RaySettings(Connection(address=address, num_cpus=num_cpus))
    with tempfile.TemporaryDirectory(prefix="grb-dist-benchmark-") as tmp, staged(where.out, write=True) as run_dir:
        outcome = _run(spec, run_dir or Path(tmp) / "run", where, settings, shown, graph=graph, given=given)
        return benchmark_rows(outcome.store.read_scores(), outcome.boards, list(spec.defenses),
                              given={key} if given else set())


@dataclass(frozen=True)
class JobChoice:
    """What :func:`benchmark` runs, besides the model and the dataset: the flags of
    ``grb-dist sweep`` (``scenario`` ... ``steps``, and in ``overrides`` the keys of
    :data:`_OVERRIDE_KEYS`), the job file, whether the job's own defenses are scored too,
    and other job keys that replace the job's (``overrides``)."""

    scenario: str = DEFAULT.name
    attacks: str | tuple[str, ...] | None = None
    difficulties: str | tuple[str, ...] | None = None
    repeats: int = 1
    steps: int | None = None
    job: str | Path | None = None
    compare: bool = False
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def flags(self) -> dict[str, Any]:
        """The changes :func:`grb_dist.sweep.overrides.apply_overrides` makes to the job."""
        flags = {k: self.overrides[k] for k in _OVERRIDE_KEYS if k in self.overrides}
        flags.update(scenario=self.scenario, attacks=self.attacks, difficulties=self.difficulties,
                     repeats=self.repeats, steps=self.steps)
        return flags

    def job_keys(self) -> dict[str, Any]:
        """The other job keys, which replace the job's (a mapping merged into the job's)."""
        return {k: v for k, v in self.overrides.items() if k not in _OVERRIDE_KEYS}


@dataclass(frozen=True)
class RunPlace:
    """Where :func:`benchmark`'s run lives (``out``; ``None``: a temporary directory) and
    where its dataset is found (``data_dir``, ``download``)."""

    out: Path | str | None = None  # a run in object storage: its URI (s3://bucket/prefix)
    data_dir: str | Path | None = None
    download: bool = True

    @classmethod
    def given(cls, out: str | Path | None, data_dir: str | Path | None, download: bool) -> "RunPlace":
        """``out`` as a path, or as text when it names a run in object storage."""
        from grb_dist.store.remote import is_remote

        return cls(out=out if is_remote(out) or out is None else Path(out), data_dir=data_dir, download=download)


@dataclass(frozen=True)
class Display:
    """How :func:`benchmark` reports progress: to ``on_progress``, else (``progress``) to
    the progress display on stderr."""

    on_progress: Callable[[Any], None] | None = None
    progress: bool = True


def _benchmark_inputs(model: Any, name: str | None, dataset: Any, what: JobChoice):
    """``(key, given, spec, graph)`` of :func:`benchmark`: the model registered under ``key``
    (a module instance wrapped as ``given``, a :class:`~grb_dist.defenses.given.GivenModule`,
    else ``None``), the job, and the graph of a PyG ``dataset`` (its features as given:
    ``normalize`` defaults to ``none``), else ``None`` (the dataset is loaded by name)."""
    pyg = not isinstance(dataset, (str, Path))
    job_keys = what.job_keys()
    if pyg:
        job_keys.setdefault("normalize", "none")
    given = None
    if _module_instance(model):
        from grb_dist.defenses.given import GivenModule

        given = GivenModule(model)  # the copy every run of this call uses
    key = _benchmark_name(given or model, name)
    spec = _benchmark_spec(key, _pyg_label(dataset) if pyg else dataset, what.job, what.flags(), job_keys,
                           what.compare)
    graph = None
    if pyg:
        from grb_dist.datasets.pyg import from_pyg

        graph = from_pyg(dataset, name=spec.dataset, seed=spec.seed)
    return key, given, spec, graph


def _run(spec: Any, run_dir: Path, where: RunPlace, settings: Any, shown: Display, *, graph: Any, given: Any) -> Any:
    """The sweep of :func:`benchmark`: prepare, check a given module on the graph, then the
    session's steps as ``grb-dist sweep`` takes them (:func:`grb_dist.sweep.session.run`),
    reporting as ``shown`` says. Raises when cells failed."""
    from grb_dist.store.remote import is_remote
    from grb_dist.sweep.session import prepare, run

    prepared = prepare(spec, out=run_dir, data_dir=where.data_dir, download=where.download, graph=graph,
                       location=where.out if is_remote(where.out) else None)
    if given is not None:
        _check_given(given.module, prepared.graph)
    outcome = run(prepared, lambda: settings, local=settings.resolved_address() is None,
                  on_locked=lambda locked: shown.on_progress if shown.on_progress is not None
                  else _progress_display(locked) if shown.progress else None)
    if outcome.summary is not None and outcome.summary.failures:
        first = outcome.summary.errors[0] if outcome.summary.errors else "see the log"
        raise GrbDistError(f"{outcome.summary.failures} of {outcome.summary.total} cells failed; first: {first}")
    return outcome


def _module_instance(model: Any) -> bool:
    """``model`` is a ``torch.nn.Module`` instance (not a class, factory or name)."""
    if isinstance(model, (str, type)):
        return False
    from torch import nn

    return isinstance(model, nn.Module)


def _pyg_label(data: Any) -> str:
    """The dataset name a PyG graph is recorded under: ``pyg-<its name>`` (a dataset's
    ``name``, e.g. Planetoid's ``Cora``), else ``pyg``."""
    raw = normalize_name(str(getattr(data, "name", "") or "")).replace("_", "-")
    return f"pyg-{raw}" if raw and is_plain_name(raw) else "pyg"


def _check_given(module: Any, graph: Any) -> None:
    """A given module (:class:`~grb_dist.defenses.given.GivenModule`'s copy, on the CPU in
    eval mode) maps the graph's ``(x, edge_index)`` to ``N x C`` finite logits (its own
    widths must fit the graph): checked once on the clean graph, before Ray starts."""
    import torch

    from grb_dist.models.tensors import check_logits, graph_tensors

    t = graph_tensors(graph)
    try:
        with torch.no_grad():
            out = module(t.x, t.edge_index)
    except (RuntimeError, TypeError, ValueError, IndexError) as exc:
        raise ConfigError(f"the given module fails on the graph ({graph.num_nodes:,} nodes x "
                          f"{graph.num_features:,} features): {type(exc).__name__}: {str(exc).splitlines()[0]}; it "
                          "must take forward(x, edge_index) on this graph's features") from None
    check_logits(out, graph.num_nodes, int(graph.num_classes), "the given module")


def _progress_display(prepared: Any) -> Any:
    """The sweep's progress display on stderr: live bars on a terminal or in a notebook,
    timestamped lines otherwise (``None`` when nothing is left to compute)."""
    from rich.console import Console

    from grb_dist.sweep.progress import PlainProgress, RichProgress
    from grb_dist.sweep.session import missing_cells, stage_totals

    missing = missing_cells(prepared)
    if not missing:
        return None
    console = Console(stderr=True)
    console.print(f"benchmark: {', '.join(prepared.spec.defenses)} on {prepared.spec.dataset} "
                  f"({prepared.graph.num_nodes:,} nodes): {len(missing):,} of {len(prepared.cells.scores):,} "
                  "cells to compute", highlight=False, soft_wrap=True, markup=False)
    if console.is_terminal or console.is_jupyter:
        return RichProgress(console, stage_totals(prepared))
    return PlainProgress(lambda line: print(line, file=sys.stderr, flush=True))


def _benchmark_spec(key: str, dataset: str, job: str | Path | None, overrides: Mapping[str, Any],
                    job_overrides: Mapping[str, Any], compare: bool):
    """The job of :func:`benchmark`: the dataset's job with the flags' ``overrides``, the
    model ``key`` as the defense (first, before the job's own with ``compare``), and other
    job keys replaced (mappings merged into the job's)."""
    from grb_dist.sweep.session import resolve_job
    from grb_dist.sweep.job import SECTION_KEYS, with_spec

    spec = resolve_job(dataset, job, overrides, on_note=logging.getLogger("grb_dist").warning)
    defenses = [key] + ([d for d in spec.defenses if d != normalize_name(key)] if compare else [])
    current = spec.to_dict()
    changes: dict[str, Any] = {"defenses": defenses}
    for k, v in job_overrides.items():
        # ``attack=``, ``budgets=``, ``attacks=``: injection's, as at a job file's root before it had a section
        section = changes.setdefault(DEFAULT.name, dict(current.get(DEFAULT.name, {}))) if k in SECTION_KEYS else None
        where = current if section is None else section
        merged = {**where[k], **v} if isinstance(v, Mapping) and isinstance(where.get(k), Mapping) else v
        (changes if section is None else section)[k] = merged
    return with_spec(spec, **changes)


def benchmark_rows(scores: pd.DataFrame, boards: Mapping[str, pd.DataFrame], defenses: list[str],
                   given: set[str] = frozenset()) -> pd.DataFrame:
    """The rows :func:`benchmark` returns, from a run's scores and leaderboards.

    One row per (scenario, difficulty, defense, attack, surrogate, threat) with ``row`` = ``clean``
    (attack ``none``) or ``attack``: ``accuracy_mean`` and ``accuracy_std`` over repeats
    (population deviation), ``n_repeats``; then, per scenario and difficulty, the defense
    board row of each scored defense (``row`` = ``defense``, attack and surrogate ``all``):
    ``accuracy_mean``/``accuracy_std`` are the board's Average over attacks and clean, with
    ``avg_3_min_mean``, ``weighted_mean``, ``rank`` and ``clean_accuracy``. ``weights`` says
    ``given`` for the ``given`` defenses (a module instance scored as passed), ``trained``
    for the rest (trained by the job's protocol)."""
    import numpy as np
    import pandas as pd

    mine = scores[scores["defense"].isin(defenses)]
    keys = ["scenario", "difficulty", "defense", "attack", "surrogate", "threat"]
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
                "attack": "all", "surrogate": "all", "threat": "transfer", "accuracy_mean": b["average_mean"],
                "accuracy_std": b["average_std"], "n_repeats": int(b["n_repeats"]),
                "avg_3_min_mean": b["avg_3_min_mean"], "weighted_mean": b["weighted_mean"],
                "rank": int(b["rank"]), "clean_accuracy": b["clean_accuracy"],
            })
    out = pd.concat([rows, pd.DataFrame(board_rows)], ignore_index=True)
    out["weights"] = np.where(out["defense"].isin(list(given)), "given", "trained")
    columns = ["row", *keys, "weights", "accuracy_mean", "accuracy_std", "n_repeats", "avg_3_min_mean",
               "weighted_mean", "rank", "clean_accuracy"]
    for c in columns:
        if c not in out.columns:
            out[c] = np.nan
    order = {d: i for i, d in enumerate(DIFFICULTIES)}
    out["_d"] = out["difficulty"].map(lambda d: order.get(d, len(order)))
    out["_r"] = out["row"].map({"clean": 0, "attack": 1, "defense": 2})
    out = out.sort_values(["scenario", "_d", "defense", "_r", "threat", "attack", "surrogate"], kind="stable")
    return out[columns].reset_index(drop=True)


def _listed(value: str | Iterable[str] | None) -> str | tuple[str, ...] | None:
    if value is None or isinstance(value, str):
        return value
    return tuple(value)


def _benchmark_name(model: Any, name: str | None) -> str:
    """Register ``model`` for :func:`benchmark` (or check the name it names); its name."""
    from grb_dist.models.grammar import check_name
    from grb_dist.models.registry import MODELS

    if isinstance(model, str):
        if name is not None:
            raise ConfigError("benchmark(): name= applies to a model object, not to a model name")
        key = normalize_name(model)
        check_name(key)  # unknown names raise, listing the valid ones
        return key
    if name is None:
        raw = getattr(model, "__name__", "") or type(model).__name__
        name = normalize_name(raw) if is_plain_name(normalize_name(raw)) else "model"
        if MODELS.is_builtin(name):  # a user class called GCN is not the built-in gcn
            name = f"{name}_user"
    # benchmark() registers what it is given: the same name given a new object replaces the
    # old registration, never a built-in
    return register_defense(name, model, replace=not MODELS.is_builtin(name))


__all__ = ["benchmark", "benchmark_rows", "register_attack", "register_defense", "register_model",
           "register_scenario", "registered", "unregister"]
