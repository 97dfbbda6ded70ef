"""The model registry: names -> :class:`ModelSpec`, and :func:`build_model`.

Every architecture is registered under its name and, with GRB layer normalisation, under
``<name>_ln`` (``gcn``, ``gcn_ln``, ``gat``, ``gat_ln``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from grb_dist.config import from_dict
from grb_dist.models.appnp import APPNP
from grb_dist.models.base import GraphModel
from grb_dist.models.gat import GAT
from grb_dist.models.gcn import GCN
from grb_dist.models.gin import GIN
from grb_dist.models.mlp import MLP
from grb_dist.models.sage import GraphSAGE
from grb_dist.models.sgc import SGC
from grb_dist.models.tagcn import TAGCN
from grb_dist.registry import Registry


@dataclass(frozen=True)
class ModelSpec:
    """A registered model: its class and the config values the name implies.

    Attributes:
        cls: the :class:`GraphModel` subclass.
        implied: config values fixed by the name (``layer_norm=True`` for ``*_ln``).
    """

    cls: type[GraphModel]
    implied: Mapping[str, Any] = field(default_factory=dict)


ARCHITECTURES: dict[str, type[GraphModel]] = {
    "gcn": GCN,
    "gat": GAT,
    "gin": GIN,
    "appnp": APPNP,
    "tagcn": TAGCN,
    "sage": GraphSAGE,
    "sgc": SGC,
    "mlp": MLP,
}


def _entries() -> dict[str, ModelSpec]:
    out: dict[str, ModelSpec] = {}
    for name, cls in ARCHITECTURES.items():
        out[name] = ModelSpec(cls)
        out[f"{name}_ln"] = ModelSpec(cls, {"layer_norm": True})
    return out


MODELS: Registry[ModelSpec] = Registry("model", _entries())


def model_config(name: str, params: Mapping[str, Any] | None = None):
    """The typed config of model ``name`` from ``params`` (unknown keys rejected)."""
    spec = MODELS.get(name)
    merged = {**(params or {}), **spec.implied}
    return from_dict(spec.cls.Config, merged, where=f"model {name}")


def build_model(name: str, in_features: int, num_classes: int, params: Mapping[str, Any] | None = None) -> GraphModel:
    """Instantiate registered model ``name`` with hyper-parameters ``params``."""
    spec = MODELS.get(name)
    return spec.cls(in_features, num_classes, model_config(name, params))
