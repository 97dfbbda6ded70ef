"""Job files of a sweep: strict parsing from YAML into a frozen :class:`JobSpec`.

A job file (``grb_dist/jobs/<dataset>.yaml``) is read as safe YAML (no key twice, at most
1 MiB, also after alias expansion); unknown keys are rejected with the list of valid keys.
Each scenario's attack settings are the same three sections (:class:`ScenarioSection`): the
top-level ``attack``, ``budgets`` and ``attacks`` for injection, the same keys inside
``modification:`` for modification and inside ``poisoning:`` for poisoning. Names are checked against the tables by
:func:`grb_dist.sweep.resolve.resolve`; :mod:`grb_dist.sweep.cells` turns a job into cells.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Mapping

from grb_dist.core.bounds import MAX_REPEATS, check_dataset_ref, check_int, check_seed
from grb_dist.core.jobfile import document_size, load_job_document
from grb_dist.core.config import TrainSection, canonical_json, from_dict, to_dict
from grb_dist.core.errors import ConfigError
from grb_dist.core.names import (DIFFICULTIES, POISONING_DIFFICULTY, SCENARIOS, is_name, normalize_name,
                                 unknown_name_message)

#: Seed offset of the attacker's surrogates relative to the defenders' seed.
SURROGATE_SEED_OFFSET = 1
#: Attack seed of repeat r: ``seed + ATTACK_SEED_STRIDE * (r + 1)``.
ATTACK_SEED_STRIDE = 1000
#: Name of the default job (and dataset).
DEFAULT_JOB = "csbm"


def jobs_dir() -> Path:
    """Directory of the shipped job files.

    The job files are package data (``grb_dist/jobs/*.yaml``), found with
    :mod:`importlib.resources`, so checkouts, editable installs and installed wheels all see
    them. ``$GRB_DIST_JOBS`` overrides the location (a directory of job files); ``--job FILE``
    overrides it per command.
    """
    env = os.environ.get("GRB_DIST_JOBS")
    if env:
        path = Path(env).expanduser()
        if path.is_dir():
            return path
        raise ConfigError(f"GRB_DIST_JOBS={env} is not a directory; point it at a directory of job files or unset it")
    shipped = resources.files("grb_dist").joinpath("jobs")
    if shipped.is_dir():
        return Path(str(shipped))
    raise ConfigError(
        "cannot find the job files (grb_dist/jobs/ in the installed package); reinstall grb-dist, "
        "set GRB_DIST_JOBS to a directory of job files or pass --job FILE"
    )


def content_hash(obj: Any, length: int = 16) -> str:
    """sha256 of the canonical JSON of ``obj``, hex, first ``length`` characters."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:length]


#: Keys of a job's ``modification:`` and ``poisoning:`` sections.
MODIFICATION_KEYS = ("attack", "budgets", "attacks")
#: The scenarios whose settings live in a section of their own (injection's are top-level).
SECTIONED = ("modification", "poisoning")


@dataclass(frozen=True)
class ScenarioSection:
    """One scenario's attack settings, the same three sections for both scenarios.

    Attributes:
        attack: settings shared by the scenario's attacks.
        budgets: per difficulty, settings that override them.
        attacks: per attack, its own settings.
    """

    attack: Mapping[str, Any]
    budgets: Mapping[str, Any]
    attacks: Mapping[str, Any]


@dataclass(frozen=True)
class JobSpec:
    """A sweep job (one dataset; the injection, modification or poisoning scenario, or all).
    See ``grb_dist/jobs/csbm.yaml`` for the layout.

    The injection scenario's attacks are the top-level ``attack`` (shared settings),
    ``budgets`` (per difficulty) and ``attacks`` (per attack) sections; the modification and
    poisoning scenarios' are the same three keys inside ``modification:`` and
    ``poisoning:``. ``all`` sweeps injection, modification, and poisoning when the job lists
    poisoning attacks. Mapping sections are checked for shape here and for content by the
    registries in :func:`resolve`.
    """

    dataset: str
    scenario: Literal["injection", "modification", "poisoning", "all"] = "injection"
    normalize: str = "arctan"
    seed: int = 0
    repeats: int = 1
    difficulties: tuple[str, ...] = DIFFICULTIES
    train: TrainSection = TrainSection()
    models: Mapping[str, Any] = field(default_factory=dict)
    defenses: tuple[str, ...] = ("gcn",)
    surrogates: tuple[str, ...] = ("gcn",)
    attack: Mapping[str, Any] = field(default_factory=dict)
    budgets: Mapping[str, Any] = field(default_factory=dict)
    attacks: Mapping[str, Any] = field(default_factory=dict)
    adversarial_training: Mapping[str, Any] = field(default_factory=dict)
    modification: Mapping[str, Any] = field(default_factory=dict)
    poisoning: Mapping[str, Any] = field(default_factory=dict)
    #: Also attack every defense with itself as the surrogate (white-box): the scenario's
    #: gradient attacks, scored on that defense (threat ``adaptive``).
    adaptive: bool = False

    def __post_init__(self) -> None:
        check_dataset_ref(self.dataset)
        check_int(self.repeats, "repeats", 1, MAX_REPEATS)
        # the job seed, the surrogates' seed + 1 and every repeat's attack seed stay below 2**63
        check_seed(self.seed, "seed", span=ATTACK_SEED_STRIDE * self.repeats + SURROGATE_SEED_OFFSET)
        for key in ("difficulties", "defenses", "surrogates"):
            values = getattr(self, key)
            if not values:
                raise ConfigError(f"job {key} must not be empty")
            canon = tuple(normalize_name(v) for v in values)
            if len(set(canon)) != len(canon):
                raise ConfigError(f"job {key} lists a name twice: {', '.join(values)}")
            object.__setattr__(self, key, canon)
        for d in self.difficulties:
            if d not in DIFFICULTIES:
                raise ConfigError(unknown_name_message("difficulty", d, DIFFICULTIES))
        for key in ("models", "attack", "budgets", "attacks", "adversarial_training", *SECTIONED):
            section = getattr(self, key)
            if not isinstance(section, Mapping):
                raise ConfigError(f"job {key}: expected a mapping, got {type(section).__name__}")
        for key in ("models", "budgets", "attacks"):
            for name, value in getattr(self, key).items():
                if value is not None and not isinstance(value, Mapping):
                    raise ConfigError(f"job {key}.{name}: expected a mapping of options, got {value!r}")
        for d in self.budgets:
            if d not in DIFFICULTIES:
                raise ConfigError("job budgets: " + unknown_name_message("difficulty", d, DIFFICULTIES))
        # normalise names and freeze mapping sections into plain sorted dicts
        object.__setattr__(self, "attacks", {normalize_name(k): dict(v or {}) for k, v in self.attacks.items()})
        object.__setattr__(self, "models", {normalize_name(k): dict(v or {}) for k, v in self.models.items()})
        object.__setattr__(self, "budgets", {k: dict(v or {}) for k, v in self.budgets.items()})
        object.__setattr__(self, "attack", dict(self.attack))
        object.__setattr__(self, "adversarial_training", dict(self.adversarial_training))
        for key in SECTIONED:
            object.__setattr__(self, key, _scenario_section(getattr(self, key), key))
        for scenario in self.scenarios:
            if not self.scenario_attacks(scenario):
                where = "attacks" if scenario == "injection" else f"{scenario}.attacks"
                raise ConfigError(f"job {where} must name at least one attack for the {scenario} scenario")

    @property
    def scenarios(self) -> tuple[str, ...]:
        """The scenarios this job sweeps (``all``: poisoning only when it lists attacks)."""
        if self.scenario != "all":
            return (self.scenario,)
        return tuple(s for s in SCENARIOS if s != "poisoning" or self.poisoning["attacks"])

    def section(self, scenario: str) -> "ScenarioSection":
        """The attack settings of ``scenario``: the top-level sections for injection, those
        inside ``modification:`` / ``poisoning:`` for the others."""
        if scenario == "injection":
            return ScenarioSection(self.attack, self.budgets, self.attacks)
        m = getattr(self, scenario)
        return ScenarioSection(m["attack"], m["budgets"], m["attacks"])

    def poisoning_difficulties(self, targetable: bool = True) -> tuple[str, ...]:
        """What a poisoning perturbation of an attack is computed for: with
        ``poisoning.budgets`` given (targeted poisoning), one per difficulty of the job,
        fighting that difficulty's test nodes with its budget; otherwise, or for an attack
        that is not ``targetable`` (a published set), one global perturbation fighting every
        unlabelled node, keyed under :data:`~grb_dist.core.names.POISONING_DIFFICULTY`."""
        return tuple(self.difficulties) if targetable and self.poisoning_targeted else (POISONING_DIFFICULTY,)

    @property
    def poisoning_targeted(self) -> bool:
        """Whether poisoning perturbations fight one difficulty each (``poisoning.budgets``
        given): :meth:`poisoning_difficulties`."""
        return bool(self.poisoning["budgets"])

    def scenario_attacks(self, scenario: str) -> Mapping[str, Mapping[str, Any]]:
        """Attack name -> its own parameters, for ``scenario``."""
        return self.section(scenario).attacks

    def to_dict(self) -> dict[str, Any]:
        data = json.loads(canonical_json(to_dict(self)))
        if not self.adaptive:  # jobs without adaptive cells keep the hash they always had
            del data["adaptive"]
        if not any(data["poisoning"].values()):  # likewise jobs without a poisoning section
            del data["poisoning"]
        return data

    @property
    def config_hash(self) -> str:
        """Hash of the whole job: a run directory belongs to exactly one."""
        return content_hash(self.to_dict())

    def attack_params(self, attack: str, difficulty: str, seed: int, scenario: str = "injection",
                      defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Parameters of ``build_attack``: ``defaults`` <- ``attack:`` <- ``budgets[difficulty]`` <-
        ``attacks[name]`` <- seed (of the top level for injection, of ``modification:`` /
        ``poisoning:`` for those); ``defaults``: an adaptive cell's (``Attack.adaptive_defaults``)."""
        s = self.section(scenario)
        return {**(defaults or {}), **s.attack, **s.budgets.get(difficulty, {}), **s.attacks[attack], "seed": seed}

    def attack_seed(self, repeat: int) -> int:
        return self.seed + ATTACK_SEED_STRIDE * (repeat + 1)


def _scenario_section(section: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A ``modification:`` or ``poisoning:`` section in canonical form (every key present,
    names normalised)."""
    unknown = [k for k in section if k not in MODIFICATION_KEYS]
    if unknown:
        raise ConfigError(f"job {where}: unknown key {unknown[0]!r}; valid keys: {', '.join(MODIFICATION_KEYS)}")
    out: dict[str, Any] = {}
    for key in MODIFICATION_KEYS:
        value = section.get(key) or {}
        if not isinstance(value, Mapping):
            raise ConfigError(f"job {where}.{key}: expected a mapping, got {type(value).__name__}")
        if key != "attack":
            for name, entry in value.items():
                if entry is not None and not isinstance(entry, Mapping):
                    raise ConfigError(f"job {where}.{key}.{name}: expected a mapping of options, got {entry!r}")
        out[key] = dict(value)
    for d in out["budgets"]:
        if d not in DIFFICULTIES:
            raise ConfigError(f"job {where}.budgets: " + unknown_name_message("difficulty", d, DIFFICULTIES))
    out["attacks"] = {normalize_name(k): dict(v or {}) for k, v in out["attacks"].items()}
    out["budgets"] = {k: dict(v or {}) for k, v in out["budgets"].items()}
    return out


def parse_job(data: Any, *, where: str = "job") -> JobSpec:
    """Build a :class:`JobSpec` from a parsed YAML document."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping at the top level, got {type(data).__name__}")
    document_size(data)  # bounded: YAML aliases can expand a small file into a huge job
    return from_dict(JobSpec, data, where=where)


def load_job(path: str | Path, *, allow_import: bool = False) -> JobSpec:
    """Read a job file (:func:`~grb_dist.core.jobfile.load_job_document`: safe YAML, bounded,
    no duplicate keys, ``module:Class`` specs only with ``allow_import``); raises
    :class:`ConfigError` on any defect."""
    path = Path(path)
    return parse_job(load_job_document(path, allow_import=allow_import), where=f"job file {path.name}")


#: The job a catalogue dataset without a job file of its own runs, by its kind (the
#: catalogue's ``source``): Pro-GNN's graphs run Pro-GNN's setting as ``prognn-cora.yaml`` has
#: it (raw features, 2-layer models, its defenses and poisoning attacks); any other kind, the
#: default job.
KIND_JOBS = {"prognn": ("prognn-cora", "Pro-GNN's setting")}


@dataclass(frozen=True)
class DatasetJob:
    """The job file a dataset runs (:func:`dataset_job`): ``path``; ``made_for``, the catalogue
    dataset it is made for when the file is another dataset's (its ``dataset:`` becomes that
    one); ``note``, the one line that says so (``None`` when the dataset runs its own job)."""

    path: Path
    made_for: str | None = None
    note: str | None = None

    def load(self, *, allow_import: bool = False) -> "JobSpec":
        """The job, with ``dataset:`` set to the dataset it is made for."""
        spec = load_job(self.path, allow_import=allow_import)
        return with_spec(spec, dataset=self.made_for) if self.made_for else spec


def dataset_job(dataset: str | None) -> DatasetJob:
    """The job of ``dataset`` without ``--job``: a catalogue dataset's own job file
    (``<jobs dir>/<name>.yaml``); for a catalogue dataset without one, the job of its kind
    (:data:`KIND_JOBS`), else the default job, with a note that says which; the default job,
    without a note, for ``None`` and for a path (the documented rule)."""
    from grb_dist.datasets.catalog import CATALOG

    d = jobs_dir()
    default = d / f"{DEFAULT_JOB}.yaml"
    # only a plain name selects a shipped job: ``../cluster`` must never read <jobs dir>/../cluster.yaml
    if dataset is None or not is_name(dataset) or Path(dataset).exists():
        return DatasetJob(default)
    stem = normalize_name(dataset).replace("_", "-")
    if (d / f"{stem}.yaml").is_file():
        return DatasetJob(d / f"{stem}.yaml")
    info = CATALOG.find(dataset)
    if info is None:  # not a catalogue name: loading it says what is wrong
        return DatasetJob(default)
    name = CATALOG.canonical(dataset)
    kind, setting = KIND_JOBS.get(info.source, (None, None))
    if kind is not None and (d / f"{kind}.yaml").is_file():
        return DatasetJob(d / f"{kind}.yaml", name, (
            f"note: {name} has no job of its own ({d.name}/{name}.yaml); it runs {setting} as {kind}.yaml has it "
            f"(its models, attacks and hyper-parameters) on {name}; --job FILE sets your own"))
    return DatasetJob(default, name, (
        f"note: {name} has no job of its own ({d.name}/{name}.yaml); it runs the default job's models, attacks "
        f"and hyper-parameters ({DEFAULT_JOB}.yaml) on {name}; --job FILE sets your own"))


def default_job_path(dataset: str | None) -> Path:
    """The job file ``dataset`` runs without ``--job`` (:func:`dataset_job`)."""
    return dataset_job(dataset).path


def dataset_label(dataset: str) -> str:
    """The name of a dataset in the ``dataset=`` partition of a run: a catalogue name as it
    is, a path by its file name without suffix (made a plain directory name)."""
    from grb_dist.store import safe_label

    p = Path(dataset)
    if p.exists() or len(p.parts) > 1 or p.suffix == ".npz":
        return safe_label(p.stem if p.suffix == ".npz" else (p.resolve().name or p.stem))
    return safe_label(dataset)


def with_spec(spec: JobSpec, **changes: Any) -> JobSpec:
    """A copy of ``spec`` with fields replaced (validated again)."""
    return parse_job({**spec.to_dict(), **changes}) if changes else replace(spec)


__all__ = ["ATTACK_SEED_STRIDE", "DEFAULT_JOB", "DatasetJob", "JobSpec", "KIND_JOBS", "SURROGATE_SEED_OFFSET",
           "ScenarioSection", "canonical_json", "content_hash", "dataset_job", "dataset_label", "default_job_path",
           "jobs_dir", "load_job", "parse_job", "with_spec"]
