"""The scenarios: what each one is, in one object, and the one table that maps names to them.

A :class:`Scenario` says what the sweep, the plan, the store and the boards need to know of
a scenario, so that none of them compares scenario names: what its attacks change (injected
nodes or flipped edges), whether the defender trains on the perturbed graph, the job section
its settings live in, the key of its attacks in a run's record, its board and report texts.
Its attack table lives beside its attacks (:mod:`grb_dist.attacks.registry`), which are
built by torch code; this object is plain data, read on the torch-free floors too.

The built-in scenarios are GRB's two evasion scenarios (graph injection, graph
modification), poisoning, and targeted evasion and poisoning (Nettack's setting: one node at
a time). Adding one is one :class:`Scenario` and one registration
(:func:`grb_dist.api.register_scenario`, which also gives it an attack table).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from grb_dist.core.errors import ConfigError
from grb_dist.core.names import is_plain_name
from grb_dist.core.registry import Registry

#: What a scenario's attacks change: ``nodes`` (injected, with their edges and features) or
#: ``edges`` (flipped between existing nodes).
Perturbs = Literal["nodes", "edges"]
#: The name ``--scenario`` takes for every scenario a job lists.
ALL = "all"


@dataclass(frozen=True)
class Scenario:
    """One scenario of the benchmark.

    Attributes:
        name: its name (``--scenario``, the job section, the ``scenario`` column of every
            table, the first part of a board's key).
        perturbs: what its attacks change: ``nodes`` (an injection) or ``edges`` (flips).
        poisons: the defender trains on the perturbed graph (poisoning): the sweep lays out a
            training per (perturbation, defense), and a perturbation is global (computed once,
            scored on every difficulty) unless the job gives budgets per difficulty.
        threat_model: the protocol in a few words, for the report's subtitle.
        budget_label: the axis of a budget sweep in the report's figures.
        optional: ``--scenario all`` sweeps it only when the job lists attacks for it (the
            others must list some).
        per_target: a targeted scenario: each target node is attacked alone, within a budget of
            its own (a perturbation holds one set of flips per target:
            :class:`~grb_dist.core.targeted.TargetedModification`), and scored alone, at that
            node on the graph with its flips; the job's section chooses the targets
            (``targets``) and every score row carries its targets' predictions and margins.
        legacy_layout: the GRB layout from before there were scenarios (injection alone):
            job files kept its ``attack``, ``budgets`` and ``attacks`` at the document's root
            (such files still load, with a note, and run ids hash that layout), and a run's
            record keys its attacks ``<attack>/<difficulty>``, without the ``<scenario>/``
            prefix of the others.
    """

    name: str
    perturbs: Perturbs
    poisons: bool = False
    threat_model: str = "black-box, inductive, evasion"
    budget_label: str = "budget (share of edges flipped)"
    optional: bool = False
    per_target: bool = False
    legacy_layout: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not is_plain_name(self.name) or self.name == ALL:
            raise ConfigError(f"scenario name {self.name!r}: use lower-case letters, digits, '_' or '-' (not 'all')")
        if self.perturbs not in ("nodes", "edges"):
            raise ConfigError(f"scenario {self.name}: perturbs must be 'nodes' or 'edges', got {self.perturbs!r}")
        if self.per_target and self.perturbs != "edges":
            raise ConfigError(f"scenario {self.name}: a per-target scenario flips edges (perturbs='edges')")

    @property
    def injects(self) -> bool:
        """Its attacks add nodes (an injection), rather than flip edges."""
        return self.perturbs == "nodes"

    @property
    def attack_kind(self) -> str:
        """What its attacks are called in messages: ``attack`` for injection (the GRB
        setting), ``<name> attack`` for the others."""
        return "attack" if self.legacy_layout else f"{self.name} attack"

    @property
    def an(self) -> str:
        """``an injection attack``, ``a modification attack``."""
        return f"{'an' if self.name[0] in 'aeiou' else 'a'} {self.name} attack"

    @property
    def job_section(self) -> str:
        """Where a job lists its attacks."""
        return f"{self.name}.attacks"

    def record_key(self, attack: str, difficulty: str) -> str:
        """The key of an attack's settings in a run's record (``run_components``)."""
        return f"{attack}/{difficulty}" if self.legacy_layout else f"{self.name}/{attack}/{difficulty}"

    def __str__(self) -> str:
        return self.name


INJECTION = Scenario("injection", "nodes", budget_label="injected nodes", legacy_layout=True)
MODIFICATION = Scenario("modification", "edges")
POISONING = Scenario("poisoning", "edges", poisons=True, optional=True,
                     threat_model="black-box, transductive, poisoning")
TARGETED = Scenario("targeted", "edges", optional=True, per_target=True,
                    threat_model="black-box, evasion, each target attacked alone",
                    budget_label="flips per target")
TARGETED_POISONING = Scenario("targeted-poisoning", "edges", poisons=True, optional=True, per_target=True,
                              threat_model="black-box, poisoning, each target attacked alone and the defense "
                                           "trained on its perturbation",
                              budget_label="flips per target")
#: The built-in scenarios, in the order tables and boards list them.
BUILTIN = (INJECTION, MODIFICATION, POISONING, TARGETED, TARGETED_POISONING)
#: The scenario of a table or a board without a scenario (the GRB setting, before scenarios).
DEFAULT = INJECTION


def _admit(name: str, obj: object, where: str) -> Scenario:
    if not isinstance(obj, Scenario):
        raise ConfigError(f"{where} takes a grb_dist.core.scenario.Scenario, got {type(obj).__name__}")
    if obj.legacy_layout:
        raise ConfigError(f"{where}: only injection keeps the layout from before scenarios (legacy_layout)")
    return obj


#: The scenario table (a registry, so that a user's scenarios travel to Ray's workers as any
#: registration does). Scenario names are compared here and nowhere else.
TABLE: Registry[Scenario] = Registry("scenario", {s.name: s for s in BUILTIN}, admit=_admit)


def scenario(name: "str | Scenario") -> Scenario:
    """The scenario called ``name`` (a :class:`Scenario` is returned as it is); an unknown
    name raises :class:`~grb_dist.core.errors.UnknownNameError` naming the known ones."""
    if isinstance(name, Scenario):
        return name
    if not isinstance(name, str):
        raise ConfigError(f"a scenario is a name, got {type(name).__name__}")
    return TABLE.get(name)


def find_scenario(name: object) -> Scenario | None:
    """The scenario called ``name``, or ``None`` (a table read from a run may name a
    scenario this process has not registered)."""
    return TABLE.find(name) if isinstance(name, str) else None


def scenarios() -> tuple[Scenario, ...]:
    """Every scenario: the built-in ones in their order, then the registered ones by name."""
    added = TABLE.added()
    return (*BUILTIN, *(added[k] for k in sorted(added)))


def scenario_names() -> tuple[str, ...]:
    """Every scenario's name, in :func:`scenarios` order."""
    return tuple(s.name for s in scenarios())


def add_scenario(s: Scenario, *, replace: bool = False) -> Scenario:
    """Add ``s`` to the table (a taken name needs ``replace``). Use
    :func:`grb_dist.api.register_scenario`, which also gives it an attack table."""
    admitted = TABLE.admit(str(getattr(s, "name", s)), s, "register_scenario")  # a Scenario, or one line why not
    if TABLE.is_builtin(admitted.name):  # the built-ins' ids and layouts hang on them
        raise ConfigError(f"scenario {admitted.name!r} is a built-in and cannot be replaced; choose another name")
    TABLE.add(admitted.name, admitted, replace=replace)
    return admitted


__all__ = ["ALL", "BUILTIN", "DEFAULT", "INJECTION", "MODIFICATION", "POISONING", "Perturbs", "Scenario", "TABLE", "TARGETED", "TARGETED_POISONING",
           "add_scenario", "find_scenario", "scenario", "scenario_names", "scenarios"]
