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
from grb_dist.config import from_dict
from grb_dist.registry import Registry

#: Registered attacks: name -> class (names are the paper acronyms).
ATTACKS: Registry[type[InjectionAttack]] = Registry(
    "attack", {"rnd": RND, "fgsm": FGSM, "pgd": PGD, "speit": SPEIT, "tdgia": TDGIA}
)


def build_attack(name: str, params: Mapping[str, Any]) -> InjectionAttack:
    """Build registered attack ``name`` from ``params``.

    ``params`` is the merge of a job's shared ``attack:`` section, the difficulty's budget
    and the attack's own entry. Unknown keys and invalid values raise
    :class:`~grb_dist.errors.ConfigError` before any work; an unknown name raises
    :class:`~grb_dist.errors.UnknownNameError` listing the valid names.
    """
    cls = ATTACKS.get(name)
    config = from_dict(cls.Config, params, where=f"attack {ATTACKS.canonical(name)}")
    return cls(config)


__all__ = [
    "ATTACKS", "AUDIT_RULES", "AttackConfig", "FGSM", "FGSMConfig", "InjectionAttack", "PGD",
    "PGDConfig", "RND", "RNDConfig", "SPEIT", "SPEITConfig", "SurrogateCache", "TDGIA", "TDGIAConfig",
    "audit_injection", "build_attack", "fgsm_inject", "resolve_feature_limits",
]
