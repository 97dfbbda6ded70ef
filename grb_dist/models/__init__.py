"""Node classifiers on torch_geometric layers, their table (:mod:`grb_dist.models.registry`),
the defense-name grammar (:mod:`grb_dist.models.grammar`), torch views of graphs
(:mod:`grb_dist.models.tensors`) and the inductive trainer."""

from grb_dist.models.base import GraphModel, ModelConfig
from grb_dist.models.grammar import ModelSpec, build_model, check_name, model_config
from grb_dist.models.lp import LabelPropagation, LabelPropagationOn, LPConfig
from grb_dist.models.registry import (
    ARCHITECTURES,
    MODELS,
    ROBUST_MODELS,
    model_names,
    register_defense,
    register_model,
    split_suffixes,
)
from grb_dist.models.robust.gnnguard import GATGuard, GATGuardConfig, GNNGuard, GNNGuardConfig
from grb_dist.models.robust.rgcn import RGCN, RGCNConfig
from grb_dist.models.robust.svd import GCNSVD, GCNSVDConfig, SparseGCNSVD, SparseGCNSVDConfig

__all__ = [
    "ARCHITECTURES", "MODELS", "ROBUST_MODELS", "GraphModel", "ModelConfig", "ModelSpec",
    "build_model", "check_name", "model_config", "model_names", "register_defense", "register_model", "split_suffixes",
    "RGCN", "RGCNConfig", "GNNGuard", "GNNGuardConfig", "GATGuard", "GATGuardConfig",
    "GCNSVD", "GCNSVDConfig", "SparseGCNSVD", "SparseGCNSVDConfig", "LabelPropagation", "LabelPropagationOn", "LPConfig",
]
