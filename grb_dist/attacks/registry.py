"""The attack tables, one per scenario, and building an attack by name.

A built-in attack is one module and one line in :data:`INJECTION`, :data:`MODIFICATION` or
:data:`POISONING`; a user attack is one :func:`register_attack` call (or an entry point of
group ``grb_dist.attacks``, or a ``module:Class`` spec in a job); a user scenario is one
:func:`register_scenario` call, which gives it a table of its own. Every attack class derives
from the base of what its scenario perturbs (:data:`BASES`), and its typed ``Config`` from
that base's config: both are checked when it is added. An attack class may name the
scenarios it belongs to (``scenarios``); one of another scenario gets an error saying where
it belongs.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Mapping

from grb_dist.attacks.injection.base import AttackConfig, InjectionAttack
from grb_dist.attacks.injection.fgsm import FGSM
from grb_dist.attacks.injection.pgd import PGD
from grb_dist.attacks.injection.rnd import RND
from grb_dist.attacks.injection.speit import SPEIT
from grb_dist.attacks.injection.tdgia import TDGIA
from grb_dist.attacks.modification import dice, fga, flip, grbcd, nea, pgd, prbcd, rnd, stack
from grb_dist.attacks.shared.flips import ModificationAttack, ModificationConfig
from grb_dist.attacks.poisoning import metattack
from grb_dist.attacks.poisoning import prbcd as meta_prbcd
from grb_dist.attacks.poisoning.published import Published
from grb_dist.attacks.targeted import dice as targeted_dice
from grb_dist.attacks.targeted import fga as targeted_fga
from grb_dist.attacks.targeted import nettack as targeted_nettack
from grb_dist.attacks.targeted import prbcd as targeted_prbcd
from grb_dist.attacks.targeted import rnd as targeted_rnd
from grb_dist.attacks.targeted.base import TargetedAttack, TargetedConfig
from grb_dist.core import scenario as sc
from grb_dist.core.config import from_dict
from grb_dist.core.errors import ConfigError, ExtensionTypeError
from grb_dist.core.registry import Registry, describe, plain_name

#: Entry-point group of installed packages that provide attacks.
GROUP = "grb_dist.attacks"
#: The base class and base config of the attacks of a scenario, by what it perturbs (a
#: poisoning perturbation is a modification made before training: the same types).
BASES = {"nodes": (InjectionAttack, AttackConfig), "edges": (ModificationAttack, ModificationConfig)}
#: The base class and config of a per-target scenario's attacks (each target attacked alone).
PER_TARGET = (TargetedAttack, TargetedConfig)
#: Separator of a budget-axis entry's name, ``<attack>@<budget>`` (``fgsm@20``, ``prbcd@0.05``):
#: one attack of a sweep over several budgets, built by the class of ``<attack>``.
BUDGET_SEP = "@"


def bases(scenario: sc.Scenario) -> tuple[type, type]:
    """The base class and base config of ``scenario``'s attacks."""
    return PER_TARGET if scenario.per_target else BASES[scenario.perturbs]


def _belongs(where: str, cls: type, home: sc.Scenario, scenario: sc.Scenario) -> ConfigError:
    return ConfigError(f"{where} is {home.an} ({cls.__name__}), not {scenario.an}; list it under "
                       f"{home.job_section} in the job (and run --scenario {home.name} or all)")


def attack_entry(scenario: str | sc.Scenario, cls: Any, where: str, *, registering: bool = False) -> type:
    """``cls`` when it is an attack class of ``scenario`` with a typed ``Config`` derived
    from the scenario's base config; else :class:`ConfigError` saying what it is (found in a
    job: where it belongs; given to :func:`register_attack`: which ``scenario`` to pass)."""
    s = sc.scenario(scenario)
    base, config = bases(s)
    if inspect.isclass(cls) and issubclass(cls, base) and s.name not in getattr(cls, "scenarios", (s.name,)):
        raise _belongs(where, cls, sc.scenario(cls.scenarios[0]), s)
    if not (inspect.isclass(cls) and issubclass(cls, base)):
        other = next((o for o in sc.scenarios() if bases(o) != bases(s) and inspect.isclass(cls)
                      and issubclass(cls, bases(o)[0])), None)
        if other is not None and not registering:
            raise _belongs(where, cls, other, s)
        hint = f"; it is {other.an}: pass scenario={other.name!r}" if other else ""
        raise ExtensionTypeError(f"{where}: {describe(cls)} is not a subclass of {base.__name__}{hint}")
    cfg = getattr(cls, "Config", None)
    if not (inspect.isclass(cfg) and dataclasses.is_dataclass(cfg) and issubclass(cfg, config)):
        raise ExtensionTypeError(f"{where}: {cls.__name__}.Config must be a dataclass derived from {config.__name__}")
    return cls


def _table(scenario: sc.Scenario, entries: Mapping[str, type]) -> Registry[type]:
    table: Registry[type] = Registry(scenario.attack_kind, entries,
                                     admit=lambda name, obj, where: attack_entry(scenario, obj, where), groups=(GROUP,))
    REGISTRIES[scenario.name] = table
    return table


#: Each scenario's attack table, by the scenario's name.
REGISTRIES: dict[str, Registry] = {}


#: Injection attacks: name -> class (names are the paper acronyms).
INJECTION: Registry[type[InjectionAttack]] = _table(sc.INJECTION, {
    "rnd": RND,
    "fgsm": FGSM,
    "pgd": PGD,
    "speit": SPEIT,
    "tdgia": TDGIA,
})

#: The modification attacks' classes (of both tables below).
_MODIFICATION_ATTACKS: dict[str, type[ModificationAttack]] = {
    "rnd": rnd.RND,
    "dice": dice.DICE,
    "flip": flip.FLIP,
    "nea": nea.NEA,
    "stack": stack.STACK,
    "fga": fga.FGA,
    "pgd": pgd.PGD,
    "prbcd": prbcd.PRBCD,
    "grbcd": grbcd.GRBCD,
    "published": Published,
}

#: Modification attacks: name -> class.
MODIFICATION: Registry[type[ModificationAttack]] = _table(sc.MODIFICATION, _MODIFICATION_ATTACKS)

#: Poisoning attacks: every modification attack (its perturbation computed on the surrogate
#: against the unlabelled nodes, then trained on) and the attacks made for poisoning.
POISONING: Registry[type[ModificationAttack]] = _table(sc.POISONING, {
    **_MODIFICATION_ATTACKS,
    "metattack": metattack.Metattack,
    "meta_prbcd": meta_prbcd.MetaPRBCD,
})

#: The targeted attacks' classes (of both tables below).
_TARGETED_ATTACKS: dict[str, type[TargetedAttack]] = {
    "nettack": targeted_nettack.Nettack,
    "rnd": targeted_rnd.RND,
    "dice": targeted_dice.DICE,
    "fga": targeted_fga.FGA,
    "prbcd": targeted_prbcd.PRBCD,
}
#: Targeted attacks (each target attacked alone, at test time): name -> class.
TARGETED: Registry[type[TargetedAttack]] = _table(sc.TARGETED, _TARGETED_ATTACKS)
#: The same, each target's perturbation trained on (targeted poisoning).
TARGETED_POISONING: Registry[type[TargetedAttack]] = _table(sc.TARGETED_POISONING, _TARGETED_ATTACKS)



def register_scenario(scenario: sc.Scenario, attacks: Mapping[str, type] | None = None, *,
                      replace: bool = False) -> sc.Scenario:
    """Add ``scenario`` (a :class:`~grb_dist.core.scenario.Scenario`) with a table of its own
    holding ``attacks`` (name -> class, each checked as :func:`register_attack` checks it).
    The sweep, the plan, the store and the boards then treat it as the built-in ones: a
    job's ``<name>:`` section lists its attacks, ``--scenario <name>`` sweeps it."""
    sc.add_scenario(scenario, replace=replace)
    for name, cls in (attacks or {}).items():
        register_attack(name, cls, scenario.name, replace=replace)
    return scenario


def register_attack(name: str, cls: type, scenario: str = sc.DEFAULT.name, *, replace: bool = False) -> str:
    """Register attack class ``cls`` for ``scenario`` (``injection``, or another that injects
    nodes: an :class:`InjectionAttack` subclass; ``modification``, ``poisoning`` or another
    that flips edges: a :class:`ModificationAttack` subclass), its ``Config`` checked like the
    built-ins'. Returns the registered name."""
    table = attack_registry(scenario)
    key = plain_name(name, table.kind)
    return table.add(key, attack_entry(scenario, cls, f"{table.kind} {key!r}", registering=True), replace=replace)


def base_attack_name(name: str) -> str:
    """The attack that entry ``name`` runs: the part before ``@`` of ``<attack>@<budget>``,
    ``name`` itself otherwise."""
    return name.partition(BUDGET_SEP)[0] if isinstance(name, str) else name


def attack_registry(scenario: str | sc.Scenario) -> Registry:
    """The attack table of ``scenario`` (an unknown scenario raises, naming the known ones;
    a registered scenario whose table this process has not made yet, in a Ray worker, gets
    it now, with the attacks registered for it in the driver)."""
    s = sc.scenario(scenario)
    return REGISTRIES.get(s.name) or _table(s, {})


def attack_class(name: str, scenario: str | sc.Scenario = sc.DEFAULT.name) -> type:
    """The class of attack ``name`` in ``scenario``; an attack of another scenario gets an
    error that says where it belongs. ``<attack>@<budget>`` (an entry of a budget axis)
    resolves to the class of ``<attack>``."""
    name = base_attack_name(name)
    registry = attack_registry(scenario)
    if name not in registry:
        mine = sc.scenario(scenario)
        for other in sc.scenarios():
            if other is not mine and attack_registry(other).find(name) is not None:
                raise ConfigError(f"{name} is {other.an}, not {mine.an}; list it under {other.job_section} in the "
                                  f"job (and run --scenario {other.name} or all)")
    return registry.get(name)


def build_attack(name: str, params: Mapping[str, Any],
                 scenario: str | sc.Scenario = sc.DEFAULT.name) -> InjectionAttack | ModificationAttack:
    """Build attack ``name`` of ``scenario`` from ``params``.

    ``params`` is the merge of a job's shared attack section, the difficulty's budget and
    the attack's own entry. Unknown keys and invalid values raise
    :class:`~grb_dist.core.errors.ConfigError` before any work; an unknown name raises
    :class:`~grb_dist.core.errors.UnknownNameError` listing the valid names.
    """
    cls = attack_class(name, scenario)
    base, sep, budget = name.partition(BUDGET_SEP)
    where = f"{sc.scenario(scenario).name} attack {attack_registry(scenario).canonical(base)}{sep}{budget}"
    return cls(from_dict(cls.Config, params, where=where))


__all__ = ["BASES", "BUDGET_SEP", "GROUP", "INJECTION", "MODIFICATION", "PER_TARGET", "POISONING", "REGISTRIES",
           "TARGETED", "TARGETED_POISONING", "bases", "attack_class",
           "attack_entry", "attack_registry", "base_attack_name", "build_attack", "register_attack",
           "register_scenario"]
