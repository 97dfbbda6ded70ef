"""Job files of a sweep: strict parsing from YAML into a frozen :class:`JobSpec`.

A job file (``grb_dist/jobs/<dataset>.yaml``) is read as safe YAML (no key twice, at most
1 MiB, also after alias expansion); unknown keys are rejected with the list of valid keys.
Each scenario's attack settings are a section of the job under the scenario's name
(``injection:``, ``modification:``, ``poisoning:``), each with the same three keys
(:class:`ScenarioSection`); a file that keeps injection's keys at its root (the older layout)
still loads, with a note. Names are checked against the tables by
:func:`grb_dist.sweep.resolve.resolve`; :mod:`grb_dist.sweep.cells` turns a job into cells.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Mapping

from grb_dist.core.bounds import MAX_REPEATS, check_dataset_ref, check_int, check_seed
from grb_dist.core.jobfile import document_size, load_job_document
from grb_dist.core.config import TrainSection, canonical_json, from_dict, to_dict
from grb_dist.core.errors import ConfigError
from grb_dist.core.names import DIFFICULTIES, POISONING_DIFFICULTY, normalize_name, unknown_name_message
from grb_dist.core.scenario import ALL, BUILTIN, DEFAULT, Scenario, scenario_names
from grb_dist.core.scenario import scenario as scenario_of
from grb_dist.core.scenario import scenarios as all_scenarios
from grb_dist.core.targeted import TargetSelection, target_selection

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


#: Keys of a scenario's section of a job (``injection:``, ``modification:``, ...).
SECTION_KEYS = ("attack", "budgets", "attacks")
#: The key a per-target scenario's section adds: how its targets are chosen
#: (:class:`~grb_dist.core.targeted.TargetSelection`).
TARGETS_KEY = "targets"
#: What a job file that keeps injection's settings at its root hears, once per load.
ROOT_NOTE = ("note: {where} keeps injection's attack, budgets and attacks at the top level; move them under "
             "an injection: section (every scenario has its own section now; the run ids stay the same)")


@dataclass(frozen=True)
class ScenarioSection:
    """One scenario's attack settings: the same three keys in every scenario's section.

    Attributes:
        attack: settings shared by the scenario's attacks.
        budgets: per difficulty, settings that override them.
        attacks: per attack, its own settings.
    """

    attack: Mapping[str, Any]
    budgets: Mapping[str, Any]
    attacks: Mapping[str, Any]
    #: a per-target scenario's target selection (empty: the defaults)
    targets: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobSpec:
    """A sweep job: one dataset, a scenario (or ``all``), the models and each scenario's
    attacks. See ``grb_dist/jobs/csbm.yaml`` for the layout.

    Each scenario's attacks are its section of the job (``injection:``, ``modification:``,
    ``poisoning:``, and any registered scenario's), each with the keys ``attack`` (shared
    settings), ``budgets`` (per difficulty) and ``attacks`` (per attack): ``sections`` here,
    by scenario name. ``all`` sweeps every scenario, an optional one (poisoning) only when
    the job lists attacks for it. Mapping sections are checked for shape here and for
    content by the registries in :func:`resolve`.
    """

    dataset: str
    scenario: str = DEFAULT.name
    normalize: str = "arctan"
    seed: int = 0
    repeats: int = 1
    difficulties: tuple[str, ...] = DIFFICULTIES
    train: TrainSection = TrainSection()
    models: Mapping[str, Any] = field(default_factory=dict)
    defenses: tuple[str, ...] = ("gcn",)
    surrogates: tuple[str, ...] = ("gcn",)
    adversarial_training: Mapping[str, Any] = field(default_factory=dict)
    #: Also attack every defense with itself as the surrogate (white-box): the scenario's
    #: gradient attacks, scored on that defense (threat ``adaptive``).
    adaptive: bool = False
    #: Each scenario's section (scenario name -> ``attack``, ``budgets``, ``attacks``).
    sections: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_dataset_ref(self.dataset)
        if self.scenario != ALL:
            object.__setattr__(self, "scenario", scenario_of(self.scenario).name)
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
        for key in ("models", "adversarial_training", "sections"):
            section = getattr(self, key)
            if not isinstance(section, Mapping):
                raise ConfigError(f"job {key}: expected a mapping, got {type(section).__name__}")
        for name, value in self.models.items():
            if value is not None and not isinstance(value, Mapping):
                raise ConfigError(f"job models.{name}: expected a mapping of options, got {value!r}")
        # normalise names and freeze mapping sections into plain sorted dicts
        object.__setattr__(self, "models", {normalize_name(k): dict(v or {}) for k, v in self.models.items()})
        object.__setattr__(self, "adversarial_training", dict(self.adversarial_training))
        sections = {scenario_of(k).name: v for k, v in self.sections.items()}  # unknown scenarios raise here
        object.__setattr__(self, "sections", {s.name: _scenario_section(sections.get(s.name) or {}, s.name)
                                              for s in all_scenarios()})
        for name in self.scenarios:
            if not self.scenario_attacks(name):
                raise ConfigError(f"job {scenario_of(name).job_section} must name at least one attack for the {name} "
                                  "scenario")

    @property
    def scenarios(self) -> tuple[str, ...]:
        """The scenarios this job sweeps (:func:`swept`)."""
        return swept(self.scenario, self)

    def section(self, scenario: str | Scenario) -> ScenarioSection:
        """The attack settings of ``scenario``: its section of the job."""
        name = scenario_of(scenario).name
        m = self.sections.get(name) or _scenario_section({}, name)  # a scenario registered after the job was read
        return ScenarioSection(m["attack"], m["budgets"], m["attacks"], m.get(TARGETS_KEY, {}))

    def target_selection(self, scenario: str | Scenario) -> TargetSelection | None:
        """How a per-target scenario chooses its targets (its section's ``targets``, with the
        job's seed); ``None`` for the other scenarios."""
        if not scenario_of(scenario).per_target:
            return None
        pinned = self.__dict__.get("_pinned", {}).get(scenario_of(scenario).name)
        return pinned or target_selection(self.section(scenario).targets, self.seed)

    def with_targets(self, pick: Callable[[TargetSelection], TargetSelection]) -> JobSpec:
        """This job with each per-target scenario's selection replaced by ``pick`` of it: the
        targets chosen on the graph where the sweep is prepared
        (:func:`grb_dist.attacks.targeted.protocol.pin`). The chosen nodes are not part of the
        job's definition (its document, its hash) but of its cells' ids; a copy of the job
        made later (``dataclasses.replace``) has them no more, and a selection that needs
        them then refuses to choose (:func:`~grb_dist.core.targeted.select_targets`)."""
        out = replace(self)
        pins = {s: pick(sel) for s in self.scenarios if (sel := self.target_selection(s)) is not None}
        object.__setattr__(out, "_pinned", pins)
        return out

    def scenario_attacks(self, scenario: str | Scenario) -> Mapping[str, Mapping[str, Any]]:
        """Attack name -> its own parameters, for ``scenario``."""
        return self.section(scenario).attacks

    def targeted(self, scenario: str | Scenario) -> bool:
        """Whether a poisoning scenario's perturbations fight one difficulty each (its section
        gives ``budgets``): :meth:`perturbation_difficulties`."""
        return scenario_of(scenario).poisons and bool(self.section(scenario).budgets)

    def perturbation_difficulties(self, scenario: str | Scenario, targetable: bool = True) -> tuple[str, ...]:
        """What an attack's perturbations of ``scenario`` are computed for: in evasion, one per
        difficulty of the job. In poisoning, with budgets per difficulty given (targeted
        poisoning), likewise, each fighting that difficulty's test nodes with its budget;
        otherwise, or for an attack that is not ``targetable`` (a published set), one global
        perturbation fighting every unlabelled node, keyed under
        :data:`~grb_dist.core.names.POISONING_DIFFICULTY`. A per-target scenario: one per
        difficulty (its targets)."""
        s = scenario_of(scenario)
        if not s.poisons or s.per_target or (targetable and self.targeted(s)):
            return tuple(self.difficulties)
        return (POISONING_DIFFICULTY,)

    def to_dict(self) -> dict[str, Any]:
        """The job as a document, each scenario's section under its name (sections without
        settings left out)."""
        data = json.loads(canonical_json(to_dict(self)))
        sections = data.pop("sections")
        data.update({name: sec for name, sec in sections.items() if any(sec.values())})
        return data

    def _hashed(self) -> dict[str, Any]:
        """The document the job's hash is taken of: the layout jobs had before every scenario
        had a section (injection's keys at the root, ``modification`` always, ``poisoning``
        and ``adaptive`` only when set, a registered scenario's section only when it has
        settings), so that every run keeps its id."""
        data = json.loads(canonical_json(to_dict(self)))
        sections = data.pop("sections")
        if not self.adaptive:
            del data["adaptive"]
        for s in all_scenarios():
            sec = sections[s.name]
            if s.legacy_layout:
                data.update(sec)
            elif any(sec.values()) or (s in BUILTIN and not s.optional):
                data[s.name] = sec
        return data

    @property
    def config_hash(self) -> str:
        """Hash of the whole job: a run directory belongs to exactly one."""
        return content_hash(self._hashed())

    def attack_params(self, attack: str, difficulty: str, seed: int, scenario: str | Scenario = DEFAULT.name,
                      defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Parameters of ``build_attack``: ``defaults`` <- ``attack:`` <- ``budgets[difficulty]`` <-
        ``attacks[name]`` <- seed, of ``scenario``'s section; ``defaults``: an adaptive cell's
        (``Attack.adaptive_defaults``)."""
        s = self.section(scenario)
        return {**(defaults or {}), **s.attack, **s.budgets.get(difficulty, {}), **s.attacks[attack], "seed": seed}

    def attack_seed(self, repeat: int) -> int:
        return self.seed + ATTACK_SEED_STRIDE * (repeat + 1)


def swept(scenario: str, job: JobSpec) -> tuple[str, ...]:
    """The scenarios ``--scenario scenario`` sweeps with ``job``'s sections: that one, or for
    ``all`` every scenario, an optional one (poisoning) only when the job lists its attacks."""
    if scenario != ALL:
        return (scenario_of(scenario).name,)
    return tuple(s.name for s in all_scenarios() if not s.optional or job.scenario_attacks(s.name))


def _scenario_section(section: Any, where: str) -> dict[str, Any]:
    """A scenario's section in canonical form (every key present, names normalised)."""
    if not isinstance(section, Mapping):
        raise ConfigError(f"job {where}: expected a mapping, got {type(section).__name__}")
    keys = SECTION_KEYS + ((TARGETS_KEY,) if scenario_of(where).per_target else ())
    unknown = [k for k in section if k not in keys]
    if unknown:
        raise ConfigError(f"job {where}: unknown key {unknown[0]!r}; valid keys: {', '.join(keys)}")
    out: dict[str, Any] = {}
    for key in SECTION_KEYS:
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
    if TARGETS_KEY in keys:
        value = section.get(TARGETS_KEY) or {}
        if not isinstance(value, Mapping):
            raise ConfigError(f"job {where}.{TARGETS_KEY}: expected a mapping, got {type(value).__name__}")
        target_selection(value, 0)  # its checks, now
        out[TARGETS_KEY] = dict(value)
    return out


#: The keys of a job document other than the scenarios' sections.
_KEYS = tuple(f.name for f in fields(JobSpec) if f.name != "sections")


def root_layout(data: Mapping[str, Any]) -> bool:
    """Whether a job document keeps injection's settings at its root (the layout from before
    every scenario had a section): it loads, with :data:`ROOT_NOTE`."""
    return isinstance(data, Mapping) and any(k in data for k in SECTION_KEYS)


def parse_job(data: Any, *, where: str = "job") -> JobSpec:
    """Build a :class:`JobSpec` from a parsed YAML document: the job's keys, and a section per
    scenario under the scenario's name (injection's keys at the root, the older layout, go
    to its section)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping at the top level, got {type(data).__name__}")
    document_size(data)  # bounded: YAML aliases can expand a small file into a huge job
    data = dict(data)
    if root_layout(data):
        root = next(s for s in all_scenarios() if s.legacy_layout)
        if root.name in data:
            raise ConfigError(f"{where}: {root.name}'s settings are given twice, at the top level and in its "
                              f"{root.name}: section; keep the section")
        data[root.name] = {k: data.pop(k) for k in SECTION_KEYS if k in data}
    names = scenario_names()
    unknown = sorted(k for k in data if k not in _KEYS and k not in names)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; valid keys are: "
                          f"{', '.join(sorted((*_KEYS, *names)))}")
    data["sections"] = {k: data.pop(k) for k in names if k in data}
    return from_dict(JobSpec, data, where=where)


def load_job(path: str | Path, *, allow_import: bool = False,
             on_note: Callable[[str], None] | None = None) -> JobSpec:
    """Read a job file (:func:`~grb_dist.core.jobfile.load_job_document`: safe YAML, bounded,
    no duplicate keys, ``module:Class`` specs only with ``allow_import``); raises
    :class:`ConfigError` on any defect. A file in the layout from before every scenario had
    a section loads, and ``on_note`` hears how to update it (:data:`ROOT_NOTE`)."""
    path = Path(path)
    data = load_job_document(path, allow_import=allow_import)
    spec = parse_job(data, where=f"job file {path.name}")
    if root_layout(data) and on_note is not None:  # a job that does not load gets its error alone
        on_note(ROOT_NOTE.format(where=f"job file {path.name}"))
    return spec


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

    def load(self, *, allow_import: bool = False, on_note: Callable[[str], None] | None = None) -> "JobSpec":
        """The job, with ``dataset:`` set to the dataset it is made for."""
        spec = load_job(self.path, allow_import=allow_import, on_note=on_note)
        return with_spec(spec, dataset=self.made_for) if self.made_for else spec


def dataset_job(dataset: str | None) -> DatasetJob:
    """The job of ``dataset`` without ``--job``: a catalogue dataset's own job file
    (``<jobs dir>/<name>.yaml``); for a catalogue dataset without one, the job of its kind
    (:data:`KIND_JOBS`), else the default job, with a note that says which; the default job,
    without a note, for ``None`` and for a path (read by the one rule of
    :func:`~grb_dist.datasets.ref.dataset_ref`: a plain name that is also a folder here is an
    error that says how to name each)."""
    from grb_dist.datasets.catalog import CATALOG
    from grb_dist.datasets.ref import dataset_ref

    d = jobs_dir()
    default = d / f"{DEFAULT_JOB}.yaml"
    # only a plain name selects a shipped job: ``../cluster`` must never read <jobs dir>/../cluster.yaml
    if dataset is None or dataset_ref(dataset).is_path:
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
    from grb_dist.datasets.ref import dataset_ref
    from grb_dist.store import safe_label

    p = dataset_ref(dataset).path
    if p is not None:
        return safe_label(p.stem if p.suffix == ".npz" else (p.resolve().name or p.stem))
    return safe_label(dataset)


def with_spec(spec: JobSpec, **changes: Any) -> JobSpec:
    """A copy of ``spec`` with fields replaced (validated again)."""
    return parse_job({**spec.to_dict(), **changes}) if changes else replace(spec)


__all__ = ["ATTACK_SEED_STRIDE", "DEFAULT_JOB", "DatasetJob", "JobSpec", "KIND_JOBS", "ROOT_NOTE", "SECTION_KEYS",
           "SURROGATE_SEED_OFFSET", "ScenarioSection", "canonical_json", "content_hash", "dataset_job", "dataset_label",
           "default_job_path", "jobs_dir", "load_job", "parse_job", "root_layout", "swept", "with_spec"]
