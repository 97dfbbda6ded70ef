"""Adversarial attacks: injection attacks, their registry, configs and the threat-model audit."""

from __future__ import annotations

from typing import Any, Mapping

from grb_dist.attacks.audit import RULES as AUDIT_RULES
from grb_dist.attacks.audit import audit_injection
from grb_dist.attacks.base import AttackConfig, InjectionAttack, resolve_feature_limits
from grb_dist.attacks.injection.common import SurrogateCache
from grb_dist.attacks.injection.fgsm import FGSM, FGSMConfig, fgsm_inject
from grb_dist.attacks.injection.pgd import PGD, PGDConfig
from grb_dist.attacks.injection.rnd import RND, RNDConfig
from grb_dist.attacks.injection.speit import SPEIT, SPEITConfig
from grb_dist.attacks.injection.tdgia import TDGIA, TDGIAConfig
from grb_dist.attacks.modification import MODIFICATION_ATTACKS, ModificationAttack, ModificationConfig
from grb_dist import extensions
from grb_dist.core.config import from_dict
from grb_dist.core.errors import ConfigError
from grb_dist.core.names import SCENARIOS
from grb_dist.core.registry import Registry

#: Registered attacks: name -> class (names are the paper acronyms).
ATTACKS: Registry[type[InjectionAttack]] = Registry(
    "attack", {"rnd": RND, "fgsm": FGSM, "pgd": PGD, "speit": SPEIT, "tdgia": TDGIA}
)


#: The scenarios of the benchmark and their attack registries.
REGISTRIES = {"injection": ATTACKS, "modification": MODIFICATION_ATTACKS}
# Names that are not registered (user attacks are added with grb_dist.register_attack):
# entry points of installed packages (group grb_dist.attacks) and module:Class specs.
for _scenario, _registry in REGISTRIES.items():
    _registry.set_resolver(extensions.attack_resolver(_scenario), lambda: extensions.available("attacks"))
#: Where a job lists the attacks of each scenario.
JOB_SECTION = {"injection": "attacks", "modification": "modification.attacks"}
#: Separator of a budget-axis entry's name, ``<attack>@<budget>`` (``fgsm@20``, ``prbcd@0.05``):
#: one attack of a sweep over several budgets, built by the class of ``<attack>``.
BUDGET_SEP = "@"


def base_attack_name(name: str) -> str:
    """The attack that entry ``name`` runs: the part before ``@`` of ``<attack>@<budget>``,
    ``name`` itself otherwise."""
    return name.partition(BUDGET_SEP)[0] if isinstance(name, str) else name


def attack_registry(scenario: str) -> Registry:
    """The attack registry of ``scenario`` (``injection`` or ``modification``)."""
    if scenario not in REGISTRIES:
        raise ConfigError(f"unknown scenario {scenario!r}; choose one of: {', '.join(SCENARIOS)}")
    return REGISTRIES[scenario]


def attack_class(name: str, scenario: str = "injection") -> type:
    """The registered class of attack ``name`` in ``scenario``; an attack of the other
    scenario gets an error that says where it belongs. ``<attack>@<budget>`` (an entry of a
    budget axis) resolves to the class of ``<attack>``."""
    name = base_attack_name(name)
    registry = attack_registry(scenario)
    if name not in registry:
        for other, reg in REGISTRIES.items():
            if other != scenario and name in reg:
                a_other, a_scenario = ("an" if s == "injection" else "a" for s in (other, scenario))
                raise ConfigError(
                    f"{name} is {a_other} {other} attack, not {a_scenario} {scenario} attack; list it under "
                    f"{JOB_SECTION[other]} in the job (and run --scenario {other} or all)"
                )
    return registry.get(name)


def build_attack(name: str, params: Mapping[str, Any], scenario: str = "injection") -> InjectionAttack | ModificationAttack:
    """Build registered attack ``name`` of ``scenario`` from ``params``.

    ``params`` is the merge of a job's shared attack section, the difficulty's budget and
    the attack's own entry. Unknown keys and invalid values raise
    :class:`~grb_dist.core.errors.ConfigError` before any work; an unknown name raises
    :class:`~grb_dist.core.errors.UnknownNameError` listing the valid names. ``<attack>@<budget>``
    (an entry of a budget axis) builds ``<attack>``.
    """
    cls = attack_class(name, scenario)
    registry = attack_registry(scenario)
    base, sep, budget = name.partition(BUDGET_SEP)
    config = from_dict(cls.Config, params, where=f"{scenario} attack {registry.canonical(base)}{sep}{budget}")
    return cls(config)


__all__ = [
    "ATTACKS", "BUDGET_SEP", "MODIFICATION_ATTACKS", "ModificationAttack", "ModificationConfig", "SCENARIOS",
    "attack_class", "attack_registry", "AUDIT_RULES", "AttackConfig", "FGSM", "FGSMConfig", "InjectionAttack", "PGD",
    "PGDConfig", "RND", "RNDConfig", "SPEIT", "SPEITConfig", "SurrogateCache", "TDGIA", "TDGIAConfig",
    "audit_injection", "base_attack_name", "build_attack", "fgsm_inject", "resolve_feature_limits",
]
