"""Defenses: building and training every registered model or defense by name, adversarial
training, and the robust architectures.

- :mod:`grb_dist.defenses.build`: the factory, :func:`build_defense` and
  :func:`train_defense`, for every name of :data:`grb_dist.models.MODELS` (``gcn``,
  ``gcn_ln``, ``gcn_at``, ``rgcn_at``, ``gnnguard``, ``gatguard``, ``gcnsvd``, ``lp``,
  ``gcn_lp`` ...; names parsed by :mod:`grb_dist.models.grammar`);
- :mod:`grb_dist.defenses.at`: adversarial training, with injection or with flips;
- :mod:`grb_dist.defenses.given`: :class:`GivenModule`, a trained module scored as given;
- the robust architectures (R-GCN, GNNGuard, GATGuard, GCN-SVD, GCN-Jaccard, Soft-Median
  GDC, Pro-GNN and its cheaper variant) live in :mod:`grb_dist.models.robust` and label propagation in
  :mod:`grb_dist.models.lp`, on the models floor where the model table and the attacks'
  surrogates reach them; their classes are re-exported here.
"""

from grb_dist.defenses.at import ATConfig, InjectionAT, ModificationAT, at_config, training_attack
from grb_dist.defenses.build import build_defense, check_fit, resolve_params, train_defense
from grb_dist.defenses.given import GivenModule
from grb_dist.models.lp import LabelPropagation, LabelPropagationOn, LPConfig
from grb_dist.models.robust.gnnguard import GATGuard, GATGuardConfig, GNNGuard, GNNGuardConfig
from grb_dist.models.robust.jaccard import GCNJaccard, JaccardConfig
from grb_dist.models.robust.prognn import ProGNN, ProGNNConfig, ProGNNLite, ProGNNLiteConfig
from grb_dist.models.robust.rgcn import RGCN, RGCNConfig
from grb_dist.models.robust.softmedian import SoftMedianConfig, SoftMedianGDC
from grb_dist.models.robust.svd import GCNSVD, GCNSVDConfig, SparseGCNSVD, SparseGCNSVDConfig

__all__ = [
    "ATConfig", "GivenModule", "InjectionAT", "ModificationAT", "at_config", "training_attack", "build_defense",
    "check_fit", "resolve_params", "train_defense",
    "GATGuard", "GATGuardConfig", "GCNJaccard", "GCNSVD", "GCNSVDConfig", "GNNGuard", "GNNGuardConfig", "JaccardConfig",
    "LabelPropagation", "LabelPropagationOn", "LPConfig", "ProGNN", "ProGNNConfig", "ProGNNLite",
    "ProGNNLiteConfig", "RGCN", "RGCNConfig",
    "SoftMedianConfig", "SoftMedianGDC", "SparseGCNSVD", "SparseGCNSVDConfig",
]
