"""Job specs of a sweep: strict parsing from YAML, CLI overrides, validation, cell planning.

A job file (``grb_dist/jobs/<dataset>.yaml``) is read with ``yaml.safe_load`` into a frozen
:class:`JobSpec`; unknown keys are rejected with the list of valid keys. :func:`plan`
turns a spec into the work of a sweep:

* :class:`ModelTask` -- one training task per (model or defense, seed). Targets (the
  defenses) are trained with ``seed``; surrogates with ``seed + SURROGATE_SEED_OFFSET`` so
  that the attacker never holds a copy of a target (black-box transfer).
* :class:`AttackCell` -- one perturbation per (attack, surrogate, difficulty, repeat); the
  attack seed of repeat ``r`` is ``seed + ATTACK_SEED_STRIDE * (r + 1)``.
* :class:`ScoreCell` -- one accuracy per (perturbation, defense), plus one clean row
  (attack ``none``, surrogate ``none``) per (defense, difficulty). The clean accuracy of a
  trained defense is deterministic, so it is computed once, stored with ``repeat = 0``, and
  the leaderboards use it for every repeat.

Every id is the sha256 of the canonical JSON of the full configuration it depends on, so an
id changes exactly when something that influences its result changes.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Mapping

import yaml

from grb_dist.attacks import BUDGET_SEP, SCENARIOS, attack_class, attack_registry, base_attack_name, build_attack
from grb_dist.checks import (
    MAX_REPEATS, check_budgets, check_dataset_ref, check_int, check_model_bounds, check_plan_size,
    check_positive_number, check_seed, document_size, is_name, read_job_text,
)
from grb_dist.core.config import canonical_json, from_dict, to_dict
from grb_dist.datasets import NORMALIZATIONS
from grb_dist.defenses import at_config, resolve_params
from grb_dist.core.errors import ConfigError, GrbDistError
from grb_dist.core.names import CLEAN, DIFFICULTIES
from grb_dist.models import MODELS
from grb_dist.core.names import normalize_name, unknown_name_message

#: Seed offset of the attacker's surrogates relative to the defenders' seed.
SURROGATE_SEED_OFFSET = 1
#: Attack seed of repeat r: ``seed + ATTACK_SEED_STRIDE * (r + 1)``.
ATTACK_SEED_STRIDE = 1000
#: The attack name of clean (unperturbed) rows.
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


@dataclass(frozen=True)
class TrainSection:
    """The job's ``train:`` section (a model's ``train:`` entry overrides it)."""

    lr: float = 0.01
    weight_decay: float = 5e-4
    epochs: int = 400
    patience: int = 50

    def __post_init__(self) -> None:
        check_positive_number(self.lr, "train.lr")
        check_positive_number(self.weight_decay, "train.weight_decay", allow_zero=True)
        for key in ("epochs", "patience"):
            if getattr(self, key) < 1:
                raise ConfigError(f"train.{key} must be >= 1, got {getattr(self, key)}")


#: Keys of a job's ``modification:`` section.
MODIFICATION_KEYS = ("attack", "budgets", "attacks")


@dataclass(frozen=True)
class JobSpec:
    """A sweep job (one dataset; the injection scenario, the modification scenario or all).
    See ``grb_dist/jobs/csbm.yaml`` for the layout.

    The injection scenario's attacks are the top-level ``attack`` (shared settings),
    ``budgets`` (per difficulty) and ``attacks`` (per attack) sections; the modification
    scenario's are the same three keys inside ``modification:``. Mapping sections are
    checked for shape here and for content by the registries in :func:`validate_spec`.
    """

    dataset: str
    scenario: Literal["injection", "modification", "all"] = "injection"
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
        for key in ("models", "attack", "budgets", "attacks", "adversarial_training", "modification"):
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
        object.__setattr__(self, "modification", _modification_section(self.modification))
        for scenario in self.scenarios:
            if not self.scenario_attacks(scenario):
                where = "attacks" if scenario == "injection" else "modification.attacks"
                raise ConfigError(f"job {where} must name at least one attack for the {scenario} scenario")

    @property
    def scenarios(self) -> tuple[str, ...]:
        """The scenarios this job sweeps."""
        return SCENARIOS if self.scenario == "all" else (self.scenario,)

    def scenario_attacks(self, scenario: str) -> Mapping[str, Mapping[str, Any]]:
        """Attack name -> its own parameters, for ``scenario``."""
        return self.attacks if scenario == "injection" else self.modification["attacks"]

    def to_dict(self) -> dict[str, Any]:
        return json.loads(canonical_json(to_dict(self)))

    @property
    def config_hash(self) -> str:
        """Hash of the whole job: a run directory belongs to exactly one."""
        return content_hash(self.to_dict())

    def attack_params(self, attack: str, difficulty: str, seed: int, scenario: str = "injection") -> dict[str, Any]:
        """Parameters of ``build_attack``: ``attack:`` <- ``budgets[difficulty]`` <- ``attacks[name]`` <- seed
        (of the top level for injection, of ``modification:`` for modification)."""
        if scenario == "injection":
            shared, budgets, own = self.attack, self.budgets, self.attacks
        else:
            m = self.modification
            shared, budgets, own = m["attack"], m["budgets"], m["attacks"]
        return {**shared, **budgets.get(difficulty, {}), **own[attack], "seed": seed}

    def attack_seed(self, repeat: int) -> int:
        return self.seed + ATTACK_SEED_STRIDE * (repeat + 1)


def _modification_section(section: Mapping[str, Any]) -> dict[str, Any]:
    """The ``modification:`` section in canonical form (every key present, names normalised)."""
    unknown = [k for k in section if k not in MODIFICATION_KEYS]
    if unknown:
        raise ConfigError(f"job modification: unknown key {unknown[0]!r}; valid keys: {', '.join(MODIFICATION_KEYS)}")
    out: dict[str, Any] = {}
    for key in MODIFICATION_KEYS:
        value = section.get(key) or {}
        if not isinstance(value, Mapping):
            raise ConfigError(f"job modification.{key}: expected a mapping, got {type(value).__name__}")
        if key != "attack":
            for name, entry in value.items():
                if entry is not None and not isinstance(entry, Mapping):
                    raise ConfigError(f"job modification.{key}.{name}: expected a mapping of options, got {entry!r}")
        out[key] = dict(value)
    for d in out["budgets"]:
        if d not in DIFFICULTIES:
            raise ConfigError("job modification.budgets: " + unknown_name_message("difficulty", d, DIFFICULTIES))
    out["attacks"] = {normalize_name(k): dict(v or {}) for k, v in out["attacks"].items()}
    out["budgets"] = {k: dict(v or {}) for k, v in out["budgets"].items()}
    return out


def parse_job(data: Any, *, where: str = "job") -> JobSpec:
    """Build a :class:`JobSpec` from a parsed YAML document."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping at the top level, got {type(data).__name__}")
    document_size(data)  # bounded: YAML aliases can expand a small file into a huge job
    return from_dict(JobSpec, data, where=where)


def load_job(path: str | Path) -> JobSpec:
    """Read a job file (YAML, ``yaml.safe_load``); raises :class:`ConfigError` on any defect."""
    path = Path(path)
    text = read_job_text(path)  # at most MAX_JOB_BYTES, also from pipes and devices
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"job file {path} is not valid YAML{at}") from None
    except RecursionError:
        raise ConfigError(f"job file {path} is nested too deeply") from None
    return parse_job(data, where=f"job file {path.name}")


def default_job_path(dataset: str | None) -> Path:
    """The shipped job of a catalogue dataset; the default job for paths and ``None``."""
    d = jobs_dir()
    # only a plain name selects a shipped job: ``../cluster`` must never read <jobs dir>/../cluster.yaml
    if dataset is not None and is_name(dataset) and not Path(dataset).exists():
        candidate = d / f"{normalize_name(dataset).replace('_', '-')}.yaml"
        if candidate.is_file():
            return candidate
    return d / f"{DEFAULT_JOB}.yaml"


def _split(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    if not items:
        raise ConfigError(f"expected a comma-separated list, got {value!r}")
    return items


#: The most budgets one ``--n-inject`` / ``--ratio-edge-mod`` list may hold.
MAX_BUDGETS = 32
#: The command-line flag of each budget override (for error messages).
_BUDGET_FLAGS = {"n_inject": "--n-inject", "ratio_edge_mod": "--ratio-edge-mod"}


def _number(item: Any, key: str) -> int | float:
    """A budget value as a number: an integer for ``n_inject``, a float for ``ratio_edge_mod``."""
    text = str(item).strip()
    if isinstance(item, bool):
        raise ConfigError(f"{_BUDGET_FLAGS[key]}: {text!r} is not a number")
    if key == "n_inject":
        if isinstance(item, int):
            return item
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{_BUDGET_FLAGS[key]}: {text!r} is not an integer") from None
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{_BUDGET_FLAGS[key]}: {text!r} is not a number") from None


def _budget_value(item: Any, key: str) -> int | float:
    """One value of a budget list: a positive integer (``n_inject``) or a share in (0, 1]
    (``ratio_edge_mod``)."""
    value = _number(item, key)
    if key == "n_inject" and value < 1:
        raise ConfigError(f"{_BUDGET_FLAGS[key]}: {item!r} is not a positive integer")
    if key == "ratio_edge_mod" and not 0.0 < value <= 1.0:  # also rejects nan
        raise ConfigError(f"{_BUDGET_FLAGS[key]}: {item!r} is not a number in (0, 1]")
    return value


def budget_values(value: Any, key: str) -> tuple[int | float, ...] | None:
    """The values of a budget override ``key`` (``n_inject`` or ``ratio_edge_mod``).

    A single value (a number, or a string holding one) is kept as it was before lists
    existed: parsed, then checked by the job's validation. A comma-separated string or a
    sequence of several values gives each value checked (positive integers for
    ``n_inject``, shares in (0, 1] for ``ratio_edge_mod``), at most :data:`MAX_BUDGETS` of
    them, none twice.
    """
    if value is None:
        return None
    if isinstance(value, str):
        items: tuple[Any, ...] = tuple(v.strip() for v in value.split(","))
    elif isinstance(value, (list, tuple)):
        items = tuple(value)
    else:
        return (value,)
    flag = _BUDGET_FLAGS[key]
    if not items or any(isinstance(v, str) and not v for v in items):
        raise ConfigError(f"{flag}: expected a value or a comma-separated list of values, got {value!r}")
    if len(items) == 1:
        return (_number(items[0], key),)
    if len(items) > MAX_BUDGETS:
        raise ConfigError(f"{flag}: at most {MAX_BUDGETS} values, got {len(items)}")
    values = tuple(_budget_value(v, key) for v in items)
    twice = [v for i, v in enumerate(values) if v in values[:i]]
    if twice:
        raise ConfigError(f"{flag} lists {twice[0]} twice")
    return values


def budget_label(value: int | float) -> str:
    """How a budget appears in a budget-axis attack name: ``20``, ``0.05``."""
    return str(value) if isinstance(value, int) else repr(float(value))


def _budget_axis(section: dict[str, Any], key: str, values: tuple[int | float, ...]) -> None:
    """Replace every attack of ``section["attacks"]`` by one entry per budget,
    ``<attack>@<value>``, with the attack's parameters and ``key`` set to the value."""
    axis: dict[str, Any] = {}
    for name, entry in section.get("attacks", {}).items():
        base = base_attack_name(name)
        for v in values:
            axis[f"{base}{BUDGET_SEP}{budget_label(v)}"] = {**(entry or {}), key: v}
    section["attacks"] = axis


def apply_overrides(
    spec: JobSpec,
    *,
    dataset: str | None = None,
    scenario: str | None = None,
    attacks: str | tuple[str, ...] | None = None,
    defenses: str | tuple[str, ...] | None = None,
    surrogates: str | tuple[str, ...] | None = None,
    difficulties: str | tuple[str, ...] | None = None,
    repeats: int | None = None,
    seed: int | None = None,
    n_inject: int | str | tuple[int, ...] | None = None,
    edges_per_node: int | None = None,
    steps: int | None = None,
    ratio_edge_mod: float | str | tuple[float, ...] | None = None,
) -> JobSpec:
    """Narrow or override a job (the CLI flags). Lists may be comma-separated strings.

    ``scenario`` picks ``injection``, ``modification`` or ``all``. ``--attacks`` keeps, in
    every scenario swept, the named attacks that scenario knows, with the job's parameters
    (attacks the job does not list run with defaults; ``pgd`` names both scenarios' PGD); a
    name no swept scenario knows is an error. ``n_inject`` / ``edges_per_node`` / ``steps``
    replace the value in the shared attack section and in every ``budgets`` and ``attacks``
    entry (``steps`` in both scenarios); ``ratio_edge_mod`` likewise in ``modification:``.

    ``n_inject`` and ``ratio_edge_mod`` may list several values (``"20,40,60"``; see
    :func:`budget_values`): that scenario's attacks then become a budget axis, one entry
    ``<attack>@<value>`` per attack and value with the attack's parameters and the budget
    replaced (``fgsm@20``, ``prbcd@0.05``), each ranked on its own. One value keeps the
    attack names, and so every cell id.
    """
    data = spec.to_dict()
    if dataset is not None:
        data["dataset"] = str(dataset)
    if scenario is not None:
        data["scenario"] = scenario
        if scenario not in (*SCENARIOS, "all"):
            raise ConfigError(f"unknown scenario {scenario!r}; choose one of: {', '.join((*SCENARIOS, 'all'))}")
    if isinstance(attacks, str):
        attacks = _split(attacks)
    if attacks is not None:
        _select_attacks(spec, data, tuple(normalize_name(a) for a in attacks))
    for key, value in (("defenses", defenses), ("surrogates", surrogates), ("difficulties", difficulties)):
        if isinstance(value, str):
            value = _split(value)
        if value is not None:
            data[key] = list(value)
    if repeats is not None:
        data["repeats"] = repeats
    if seed is not None:
        data["seed"] = seed
    mod = data.setdefault("modification", {})
    n_injects, ratios = budget_values(n_inject, "n_inject"), budget_values(ratio_edge_mod, "ratio_edge_mod")
    n_inject = n_injects[0] if n_injects and len(n_injects) == 1 else None
    ratio_edge_mod = ratios[0] if ratios and len(ratios) == 1 else None
    if n_injects and len(n_injects) > 1:
        _budget_axis(data, "n_inject", n_injects)
    if ratios and len(ratios) > 1:
        _budget_axis(mod, "ratio_edge_mod", ratios)
    for key, value, sections in (("n_inject", n_inject, (data,)), ("edges_per_node", edges_per_node, (data,)),
                                 ("steps", steps, (data, mod)), ("ratio_edge_mod", ratio_edge_mod, (mod,))):
        if value is None:
            continue
        for sec in sections:
            sec.setdefault("attack", {})[key] = value
            for name in ("budgets", "attacks"):
                for entry in sec.get(name, {}).values():
                    if key in entry:
                        entry[key] = value
    return parse_job(data, where="job")


def _select_attacks(spec: JobSpec, data: dict[str, Any], names: tuple[str, ...]) -> None:
    """Narrow every swept scenario's attacks to ``names`` (see :func:`apply_overrides`)."""
    scenarios = SCENARIOS if data.get("scenario") == "all" else (data.get("scenario", spec.scenario),)
    known = set()
    for scenario in scenarios:
        registry = attack_registry(scenario)
        mine = [n for n in names if n in registry]
        known.update(mine)
        own = spec.scenario_attacks(scenario)
        chosen = {registry.canonical(n): dict(own.get(registry.canonical(n), {})) for n in mine}
        listed = [n for n in names if BUDGET_SEP in n and n in own]  # a job's own <attack>@<value> entries
        known.update(listed)
        chosen.update({n: dict(own[n]) for n in listed})
        if scenario == "injection":
            data["attacks"] = chosen
        else:
            data.setdefault("modification", {})["attacks"] = chosen
    unknown = [n for n in names if n not in known]
    if unknown and BUDGET_SEP in unknown[0]:
        raise ConfigError(
            f"--attacks {unknown[0]}: the job has no attack {unknown[0]}; <attack>@<value> entries come from a "
            f"budget list, e.g. --attacks {base_attack_name(unknown[0])} --n-inject 20,40 "
            "(or --ratio-edge-mod 0.01,0.05)"
        )
    if unknown:
        attack_class(unknown[0], scenarios[0])  # the other scenario's attack, or an unknown name
        for scenario in scenarios[1:]:
            attack_class(unknown[0], scenario)


# --------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class ModelTask:
    """Train one model: a defense (``role="target"``) or a surrogate (``role="surrogate"``)."""

    role: Literal["target", "surrogate"]
    name: str
    seed: int
    params: Mapping[str, Any]
    train: Mapping[str, Any]
    at: Mapping[str, Any] | None
    model_id: str

    @property
    def file_stem(self) -> str:
        """``<name>-<seed>``: the state_dict lives at ``models/<name>-<seed>.pt``."""
        return f"{self.name}-{self.seed}"


@dataclass(frozen=True)
class AttackCell:
    """One perturbation: (attack, surrogate, difficulty, repeat)."""

    attack: str
    surrogate: str
    difficulty: str
    repeat: int
    seed: int
    params: Mapping[str, Any]
    surrogate_model: str  # file stem of the surrogate
    perturbation_id: str
    scenario: str = "injection"


@dataclass(frozen=True)
class ScoreCell:
    """One row of ``scores/``: a perturbation (or none) against one defense."""

    cell_id: str
    attack: str
    surrogate: str
    defense: str
    difficulty: str
    repeat: int
    seed: int
    defense_model: str  # file stem of the defense
    perturbation_id: str | None
    scenario: str = "injection"


@dataclass(frozen=True)
class Plan:
    """Everything a sweep computes, with content-hashed ids."""

    spec: JobSpec
    config_hash: str
    targets: tuple[ModelTask, ...]
    surrogates: tuple[ModelTask, ...]
    attacks: tuple[AttackCell, ...]
    scores: tuple[ScoreCell, ...]

    @property
    def models(self) -> tuple[ModelTask, ...]:
        return self.targets + self.surrogates

    def scores_for(self, perturbation_id: str | None, difficulty: str) -> list[ScoreCell]:
        return [c for c in self.scores if c.perturbation_id == perturbation_id and c.difficulty == difficulty]


def _model_task(spec: JobSpec, fingerprint: str, role: str, name: str, seed: int) -> ModelTask:
    params, overrides = resolve_params(name, spec.models)
    train = {**to_dict(spec.train), **overrides}
    at = spec.adversarial_training if MODELS.get(name).adversarial else None
    ident = {
        "dataset": fingerprint, "normalize": spec.normalize, "data_seed": spec.seed,
        "name": name, "seed": seed, "params": params, "train": train, "at": at,
    }
    return ModelTask(role, name, seed, params, train, at, content_hash(ident))  # type: ignore[arg-type]


def plan(spec: JobSpec, fingerprint: str) -> Plan:
    """All model tasks, attack cells and score cells of ``spec`` on the dataset whose content
    fingerprint is ``fingerprint`` (:func:`grb_dist.store.graph_fingerprint` of the loaded
    graph), in a stable order.

    The dataset enters every id by its content, not its name or path: the same path holding
    another graph gives other ids.
    """
    if not isinstance(fingerprint, str) or len(fingerprint) < 16:
        raise ConfigError("plan needs the dataset's content fingerprint (grb_dist.store.graph_fingerprint)")
    targets = tuple(_model_task(spec, fingerprint, "target", d, spec.seed) for d in spec.defenses)
    surrogates = tuple(_model_task(spec, fingerprint, "surrogate", s, spec.seed + SURROGATE_SEED_OFFSET)
                       for s in spec.surrogates)
    attacks: list[AttackCell] = []
    scores: list[ScoreCell] = []
    for scenario in spec.scenarios:
        base = {"dataset": fingerprint, "scenario": scenario, "normalize": spec.normalize, "data_seed": spec.seed}
        for difficulty in spec.difficulties:
            for t in targets:
                ident = {**base, "attack": CLEAN, "difficulty": difficulty, "defense": t.model_id}
                scores.append(ScoreCell(content_hash(ident), CLEAN, CLEAN, t.name, difficulty, 0, spec.seed,
                                        t.file_stem, None, scenario))
        for attack in spec.scenario_attacks(scenario):
            for s in surrogates:
                for difficulty in spec.difficulties:
                    for repeat in range(spec.repeats):
                        seed = spec.attack_seed(repeat)
                        params = spec.attack_params(attack, difficulty, seed, scenario)
                        pid = content_hash({**base, "attack": attack, "params": params, "surrogate": s.model_id,
                                            "difficulty": difficulty, "repeat": repeat})
                        attacks.append(AttackCell(attack, s.name, difficulty, repeat, seed, params, s.file_stem, pid,
                                                  scenario))
                        for t in targets:
                            cid = content_hash({"perturbation": pid, "defense": t.model_id})
                            scores.append(ScoreCell(cid, attack, s.name, t.name, difficulty, repeat, seed, t.file_stem,
                                                    pid, scenario))
    return Plan(spec, spec.config_hash, targets, surrogates, tuple(attacks), tuple(scores))


def run_components(p: Plan) -> dict[str, dict[str, Any]]:
    """What each name of a plan means, for the run manifest: a run directory grows with new
    names (attacks, defenses, surrogates, difficulties, repeats) but a name it already knows
    must keep its meaning, so that (scenario, dataset, difficulty, attack, surrogate,
    defense, repeat) names one cell of the run.

    ``job``: the job seed (it seeds models and attacks); ``models``: per file stem the
    model's id, parameters and training settings; ``attacks``: per ``<attack>/<difficulty>``
    (``modification/<attack>/<difficulty>`` for modification attacks) the attack parameters
    (without the per-repeat seed).
    """
    spec = p.spec
    models = {t.file_stem: {"role": t.role, "name": t.name, "model_id": t.model_id, "params": dict(t.params),
                            "train": dict(t.train), "at": dict(t.at) if t.at is not None else None}
              for t in p.models}
    attacks = {}
    for a in p.attacks:
        key = f"{a.attack}/{a.difficulty}" if a.scenario == "injection" else f"{a.scenario}/{a.attack}/{a.difficulty}"
        attacks[key] = {k: v for k, v in a.params.items() if k != "seed"}
    return json.loads(canonical_json({"job": {"seed": {"seed": spec.seed}}, "models": models, "attacks": attacks}))


def dataset_label(dataset: str) -> str:
    """The name of a dataset in the ``dataset=`` partition of a run: a catalogue name as it
    is, a path by its file name without suffix (made a plain directory name)."""
    from grb_dist.store import safe_label

    p = Path(dataset)
    if p.exists() or len(p.parts) > 1 or p.suffix == ".npz":
        return safe_label(p.stem if p.suffix == ".npz" else (p.resolve().name or p.stem))
    return safe_label(dataset)


# --------------------------------------------------------------------------- validation


def validate_spec(spec: JobSpec) -> None:
    """Check every name and parameter set against the registries (no training, no Ray).

    Raises :class:`ConfigError` (or another :class:`GrbDistError`) naming the first defect.
    """
    if spec.normalize not in NORMALIZATIONS:
        raise ConfigError(f"unknown normalize {spec.normalize!r}; choose one of: {', '.join(NORMALIZATIONS)}")
    _validate_sections(spec)
    for name in (*spec.defenses, *spec.surrogates):
        MODELS.get(name)
        resolve_params(name, spec.models)
    if any(MODELS.get(n).adversarial for n in (*spec.defenses, *spec.surrogates)):
        at_config(spec.adversarial_training)
    for scenario in spec.scenarios:
        for attack in spec.scenario_attacks(scenario):
            attack_class(attack, scenario)
            for difficulty in spec.difficulties:
                try:
                    built = build_attack(attack, spec.attack_params(attack, difficulty, spec.attack_seed(0), scenario),
                                         scenario)
                except GrbDistError:
                    raise
                except (TypeError, ValueError) as exc:
                    raise ConfigError(f"{scenario} attack {attack} ({difficulty}): {exc}") from None
            if getattr(built, "edge_gradients", False):
                for s in spec.surrogates:
                    check_weighted_surrogate(attack, s, resolve_params(s, spec.models)[0])


def check_weighted_surrogate(attack: str, surrogate: str, params: Mapping[str, Any]) -> None:
    """Gradient modification attacks differentiate the surrogate in edge weights: its class
    must declare its program without attention. Checked on a two-node graph, before any work."""
    import torch

    from grb_dist.attacks.modification.weighted import WEIGHTED_MODELS, WeightedSurrogate
    from grb_dist.models.registry import build_model

    try:
        model = build_model(surrogate, 3, 2, {k: v for k, v in params.items() if k != "lp"}).eval()
        WeightedSurrogate(model, torch.zeros(2, 3), torch.tensor([[0, 1], [1, 0]])).check()
    except (ConfigError, TypeError, ValueError, RuntimeError, NotImplementedError):
        raise ConfigError(
            f"modification attack {attack} differentiates its surrogate in edge weights, which surrogate "
            f"{surrogate} does not support; use a surrogate among: {WEIGHTED_MODELS}"
        ) from None


def _validate_sections(spec: JobSpec) -> None:
    """What the registries alone would let through: every section is checked, also the parts
    this run does not use (a ``models:`` entry of a model that is not swept, a budget of a
    difficulty not run, ``adversarial_training`` without ``*_at`` defenses), upper bounds of
    the sizes memory grows with, and the number of cells of the plan."""
    from grb_dist.models.lp import LabelPropagation
    from grb_dist.models.registry import check_name as model_spec
    from grb_dist.models.registry import model_config

    check_budgets({"attack": spec.attack, **{f"budgets.{d}": b for d, b in spec.budgets.items()},
                   **{f"attacks.{a}": p for a, p in spec.attacks.items()},
                   "adversarial_training": spec.adversarial_training})
    for name in dict.fromkeys((*spec.models, *spec.defenses, *spec.surrogates)):
        params, _ = resolve_params(name, spec.models)  # unknown model names and keys raise here
        if model_spec(name).cls is not LabelPropagation:
            check_model_bounds(name, model_config(name, {k: v for k, v in params.items() if k != "lp"}))
    if spec.adversarial_training:
        at_config(spec.adversarial_training)
    for scenario in SCENARIOS:  # both scenarios' sections, also of a scenario this run does not sweep
        budgets = spec.budgets if scenario == "injection" else spec.modification["budgets"]
        for attack in spec.scenario_attacks(scenario):
            attack_class(attack, scenario)
            for difficulty in (*spec.difficulties, *budgets):
                try:
                    build_attack(attack, spec.attack_params(attack, difficulty, spec.attack_seed(0), scenario), scenario)
                except (TypeError, ValueError) as exc:
                    raise ConfigError(f"{scenario} attack {attack} ({difficulty}): {exc}") from None
    d, t, s = len(spec.difficulties), len(spec.defenses), len(spec.surrogates)
    n_attacks = sum(len(spec.scenario_attacks(sc)) for sc in spec.scenarios)
    check_plan_size(len(spec.scenarios) * d * t + n_attacks * s * d * spec.repeats * t)


def with_spec(spec: JobSpec, **changes: Any) -> JobSpec:
    """A copy of ``spec`` with fields replaced (validated again)."""
    return parse_job({**spec.to_dict(), **changes}) if changes else replace(spec)
