"""The attack tables, one per scenario, and building an attack by name.

A built-in attack is one module and one line in :data:`INJECTION` or :data:`MODIFICATION`;
a user attack is one :func:`register_attack` call (or an entry point of group
``grb_dist.attacks``, or a ``module:Class`` spec in a job). Every attack class derives from
its scenario's base, and its typed ``Config`` from the scenario's base config: both are
checked when it is added.
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
from grb_dist.core.config import from_dict
from grb_dist.core.errors import ConfigError, ExtensionTypeError
from grb_dist.core.names import SCENARIOS
from grb_dist.core.registry import Registry, describe, plain_name

#: Entry-point group of installed packages that provide attacks.
GROUP = "grb_dist.attacks"
#: The base class and base config of each scenario's attacks (a poisoning perturbation is a
#: modification made before training: the same types).
BASES = {"injection": (InjectionAttack, AttackConfig), "modification": (ModificationAttack, ModificationConfig),
         "poisoning": (ModificationAttack, ModificationConfig)}
#: Where a job lists the attacks of each scenario.
JOB_SECTION = {"injection": "attacks", "modification": "modification.attacks", "poisoning": "poisoning.attacks"}
#: Separator of a budget-axis entry's name, ``<attack>@<budget>`` (``fgsm@20``, ``prbcd@0.05``):
#: one attack of a sweep over several budgets, built by the class of ``<attack>``.
BUDGET_SEP = "@"


def _article(scenario: str) -> str:
    return "an" if scenario == "injection" else "a"


def attack_entry(scenario: str, cls: Any, where: str, *, registering: bool = False) -> type:
    """``cls`` when it is an attack class of ``scenario`` with a typed ``Config`` derived
    from the scenario's base config; else :class:`ConfigError` saying what it is (found in a
    job: where it belongs; given to :func:`register_attack`: which ``scenario`` to pass)."""
    base, config = BASES[scenario]
    if inspect.isclass(cls) and issubclass(cls, base) and scenario not in getattr(cls, "scenarios", (scenario,)):
        home = cls.scenarios[0]
        raise ConfigError(f"{where} is {_article(home)} {home} attack ({cls.__name__}), not "
                          f"{_article(scenario)} {scenario} attack; list it under {JOB_SECTION[home]} in the job "
                          f"(and run --scenario {home} or all)")
    if not (inspect.isclass(cls) and issubclass(cls, base)):
        other = next((s for s, (b, _) in BASES.items() if s != scenario and inspect.isclass(cls) and issubclass(cls, b)),
                     None)
        if other is not None and not registering:
            raise ConfigError(f"{where} is {_article(other)} {other} attack ({cls.__name__}), not "
                              f"{_article(scenario)} {scenario} attack; list it under {JOB_SECTION[other]} in the job "
                              f"(and run --scenario {other} or all)")
        hint = f"; it is {_article(other)} {other} attack: pass scenario={other!r}" if other else ""
        raise ExtensionTypeError(f"{where}: {describe(cls)} is not a subclass of {base.__name__}{hint}")
    cfg = getattr(cls, "Config", None)
    if not (inspect.isclass(cfg) and dataclasses.is_dataclass(cfg) and issubclass(cfg, config)):
        raise ExtensionTypeError(f"{where}: {cls.__name__}.Config must be a dataclass derived from {config.__name__}")
    return cls


def _table(scenario: str, kind: str, entries: Mapping[str, type]) -> Registry[type]:
    return Registry(kind, entries, admit=lambda name, obj, where: attack_entry(scenario, obj, where), groups=(GROUP,))


#: Injection attacks: name -> class (names are the paper acronyms).
INJECTION: Registry[type[InjectionAttack]] = _table("injection", "attack", {
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
MODIFICATION: Registry[type[ModificationAttack]] = _table("modification", "modification attack", _MODIFICATION_ATTACKS)

#: Poisoning attacks: every modification attack (its perturbation computed on the surrogate
#: against the unlabelled nodes, then trained on) and the attacks made for poisoning.
POISONING: Registry[type[ModificationAttack]] = _table("poisoning", "poisoning attack", {
    **_MODIFICATION_ATTACKS,
    "metattack": metattack.Metattack,
    "meta_prbcd": meta_prbcd.MetaPRBCD,
})

REGISTRIES = {"injection": INJECTION, "modification": MODIFICATION, "poisoning": POISONING}


def register_attack(name: str, cls: type, scenario: str = "injection", *, replace: bool = False) -> str:
    """Register attack class ``cls`` for ``scenario`` (``injection``: an
    :class:`InjectionAttack` subclass; ``modification`` or ``poisoning``: a
    :class:`ModificationAttack` subclass), its ``Config`` checked like the built-ins'.
    Returns the registered name."""
    table = attack_registry(scenario)
    key = plain_name(name, f"{scenario} attack")
    return table.add(key, attack_entry(scenario, cls, f"{scenario} attack {key!r}", registering=True), replace=replace)


def base_attack_name(name: str) -> str:
    """The attack that entry ``name`` runs: the part before ``@`` of ``<attack>@<budget>``,
    ``name`` itself otherwise."""
    return name.partition(BUDGET_SEP)[0] if isinstance(name, str) else name


def attack_registry(scenario: str) -> Registry:
    """The attack table of ``scenario`` (``injection``, ``modification`` or ``poisoning``)."""
    if scenario not in REGISTRIES:
        raise ConfigError(f"unknown scenario {scenario!r}; choose one of: {', '.join(SCENARIOS)}")
    return REGISTRIES[scenario]


def attack_class(name: str, scenario: str = "injection") -> type:
    """The class of attack ``name`` in ``scenario``; an attack of the other scenario gets an
    error that says where it belongs. ``<attack>@<budget>`` (an entry of a budget axis)
    resolves to the class of ``<attack>``."""
    name = base_attack_name(name)
    registry = attack_registry(scenario)
    if name not in registry:
        for other, reg in REGISTRIES.items():
            if other != scenario and reg.find(name) is not None:
                raise ConfigError(
                    f"{name} is {_article(other)} {other} attack, not {_article(scenario)} {scenario} attack; list it "
                    f"under {JOB_SECTION[other]} in the job (and run --scenario {other} or all)"
                )
    return registry.get(name)


def build_attack(name: str, params: Mapping[str, Any], scenario: str = "injection") -> InjectionAttack | ModificationAttack:
    """Build attack ``name`` of ``scenario`` from ``params``.

    ``params`` is the merge of a job's shared attack section, the difficulty's budget and
    the attack's own entry. Unknown keys and invalid values raise
    :class:`~grb_dist.core.errors.ConfigError` before any work; an unknown name raises
    :class:`~grb_dist.core.errors.UnknownNameError` listing the valid names.
    """
    cls = attack_class(name, scenario)
    base, sep, budget = name.partition(BUDGET_SEP)
    config = from_dict(cls.Config, params, where=f"{scenario} attack {attack_registry(scenario).canonical(base)}{sep}{budget}")
    return cls(config)


__all__ = ["BASES", "BUDGET_SEP", "GROUP", "INJECTION", "JOB_SECTION", "MODIFICATION", "POISONING", "REGISTRIES", "attack_class",
           "attack_entry", "attack_registry", "base_attack_name", "build_attack", "register_attack"]
