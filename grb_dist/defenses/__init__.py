"""Defenses: building and training every registered model/defense by name.

Names come from :data:`grb_dist.models.MODELS` (``gcn``, ``gcn_ln``, ``gcn_at``,
``rgcn_at``, ``gnnguard``, ``gatguard``, ``gcnsvd``, ``lp``, ``gcn_lp`` ...);
:mod:`grb_dist.defenses.at` holds injection adversarial training.
"""

from grb_dist.defenses.at import ATConfig, InjectionAT, ModificationAT, at_config, training_attack
from grb_dist.defenses.build import build_defense, check_fit, resolve_params, train_defense

__all__ = ["ATConfig", "InjectionAT", "ModificationAT", "at_config", "training_attack", "build_defense", "check_fit", "resolve_params", "train_defense"]
