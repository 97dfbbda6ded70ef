"""Adversarial attacks of every scenario: injection (``attacks/injection/``), modification
(``attacks/modification/``) and poisoning (``attacks/poisoning/``), siblings under the one
interface of :mod:`grb_dist.attacks.base`, on what they share (:mod:`grb_dist.attacks.shared`);
their tables (:mod:`grb_dist.attacks.registry`) and the threat-model audit
(:mod:`grb_dist.attacks.audit`)."""

from __future__ import annotations

from grb_dist.attacks.audit import RULES as AUDIT_RULES
from grb_dist.attacks.audit import audit_injection
from grb_dist.attacks.base import resolve_feature_limits
from grb_dist.attacks.injection.base import AttackConfig, InjectionAttack
from grb_dist.attacks.shared.surrogate import SurrogateCache
from grb_dist.attacks.injection.fgsm import fgsm_inject
from grb_dist.attacks.shared.flips import ModificationAttack, ModificationConfig
from grb_dist.attacks.registry import (
    BUDGET_SEP,
    INJECTION,
    MODIFICATION,
    POISONING,
    attack_class,
    attack_registry,
    base_attack_name,
    build_attack,
    register_attack,
)

__all__ = [
    "AUDIT_RULES", "AttackConfig", "BUDGET_SEP", "INJECTION", "InjectionAttack", "MODIFICATION", "ModificationAttack", "POISONING",
    "ModificationConfig", "SurrogateCache", "attack_class", "attack_registry", "audit_injection", "base_attack_name",
    "build_attack", "fgsm_inject", "register_attack", "resolve_feature_limits",
]
