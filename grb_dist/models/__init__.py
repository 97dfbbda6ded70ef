"""Node classifiers on torch_geometric layers, their registry and the inductive trainer."""

from grb_dist.models.base import GraphModel, ModelConfig
from grb_dist.models.registry import ARCHITECTURES, MODELS, ModelSpec, build_model, model_config

__all__ = ["ARCHITECTURES", "MODELS", "GraphModel", "ModelConfig", "ModelSpec", "build_model", "model_config"]
