"""The model registry: names -> :class:`ModelSpec`, and :func:`build_model`.

Every architecture (the seven GNNs, MLP, and the robust models ``rgcn``, ``gnnguard``
(GCN + GNNGuard), ``gatguard`` (GAT + GNNGuard), ``gcnsvd`` (GNN-SVD with a GCN)) is
registered under its name and with every combination of the defense suffixes, in this order:

- ``_ln``: GRB layer normalisation (a config value, ``layer_norm=True``);
- ``_at``: adversarial training with injection (a training procedure, see
  :mod:`grb_dist.defenses.at`);
- ``_lp``: label propagation on top of the model's soft predictions
  (:class:`grb_dist.models.lp.LabelPropagationOn`).

``lp`` is label propagation alone; it has no parameters, so ``lp_ln``/``lp_at``/``lp_lp``
are rejected with an explicit message (:func:`check_name`). Models that need the graph
(anything with label propagation) are built by :func:`grb_dist.defenses.build_defense`;
:func:`build_model` builds the architecture of every other name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from torch import nn

from grb_dist.config import from_dict
from grb_dist.errors import ConfigError
from grb_dist.models.appnp import APPNP
from grb_dist.models.base import GraphModel
from grb_dist.models.gat import GAT
from grb_dist.models.gcn import GCN
from grb_dist.models.gin import GIN
from grb_dist.models.gnnguard import GATGuard, GNNGuard
from grb_dist.models.lp import LabelPropagation
from grb_dist.models.mlp import MLP
from grb_dist.models.sage import GraphSAGE
from grb_dist.models.rgcn import RGCN
from grb_dist.models.sgc import SGC
from grb_dist.models.svd import GCNSVD
from grb_dist.models.tagcn import TAGCN
from grb_dist.registry import Registry, normalize_name


@dataclass(frozen=True)
class ModelSpec:
    """A registered model: its class and the config values the name implies.

    Attributes:
        cls: the :class:`GraphModel` subclass (or :class:`LabelPropagation` for ``lp``).
        implied: config values fixed by the name (``layer_norm=True`` for ``*_ln``).
        base: the architecture's name without defense suffixes (``gcn`` for ``gcn_ln_at``).
        adversarial: trained with injection adversarial training (``*_at``).
        label_propagation: label spreading on the model's predictions (``*_lp``), or label
            propagation alone (``lp``).
    """

    cls: type[nn.Module]
    implied: Mapping[str, Any] = field(default_factory=dict)
    base: str = ""
    adversarial: bool = False
    label_propagation: bool = False

    @property
    def trainable(self) -> bool:
        """False for label propagation alone (nothing to train)."""
        return self.cls is not LabelPropagation


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

#: Robust architectures (seed 001 section 3.4); registered with the same suffixes.
ROBUST_MODELS: dict[str, type[GraphModel]] = {
    "rgcn": RGCN,
    "gnnguard": GNNGuard,
    "gatguard": GATGuard,
    "gcnsvd": GCNSVD,
}

#: Defense suffixes in the order they appear in a name.
SUFFIXES = ("_ln", "_at", "_lp")


def _entries() -> dict[str, ModelSpec]:
    out: dict[str, ModelSpec] = {}
    for name, cls in {**ARCHITECTURES, **ROBUST_MODELS}.items():
        for ln in (False, True):
            for at in (False, True):
                for lp in (False, True):
                    key = name + ("_ln" if ln else "") + ("_at" if at else "") + ("_lp" if lp else "")
                    out[key] = ModelSpec(cls, {"layer_norm": True} if ln else {}, name, at, lp)
    out["lp"] = ModelSpec(LabelPropagation, {}, "lp", False, True)
    return out


MODELS: Registry[ModelSpec] = Registry("model", _entries())


def split_suffixes(name: str) -> tuple[str, list[str]]:
    """``(base, suffixes)`` of a name: ``gcn_ln_at`` -> ``("gcn", ["_ln", "_at"])``."""
    key = normalize_name(name)
    found: list[str] = []
    stripped = True
    while stripped:
        stripped = False
        for suffix in SUFFIXES:
            if key.endswith(suffix) and len(key) > len(suffix):
                key = key[: -len(suffix)]
                found.insert(0, suffix)
                stripped = True
    return key, found


def check_name(name: str) -> ModelSpec:
    """The spec of ``name``; unknown or incompatible names raise :class:`ConfigError` with
    the reason (``lp_at``: label propagation has nothing to train) or the valid names."""
    if name in MODELS:
        return MODELS.get(name)
    base, suffixes = split_suffixes(name)
    if base == "lp" and suffixes:
        what = {"_ln": "layer normalisation (it has no layers)",
                "_at": "adversarial training (it has no parameters to train)",
                "_lp": "label propagation on top of itself"}
        reasons = "; ".join(what[s] for s in dict.fromkeys(suffixes))
        raise ConfigError(f"model {name!r} is not a valid combination: label propagation 'lp' cannot take {reasons}; use 'lp' or '<model>_lp'")
    if base in MODELS and suffixes:
        raise ConfigError(
            f"model {name!r}: suffixes must appear at most once each and in the order "
            f"{''.join(SUFFIXES)} (e.g. {base}_ln_at_lp)"
        )
    return MODELS.get(name)  # raises UnknownNameError listing the valid names


def model_config(name: str, params: Mapping[str, Any] | None = None):
    """The typed config of model ``name`` from ``params`` (unknown keys rejected).

    For ``*_lp`` names this is the underlying model's config (label propagation settings
    are given to :func:`grb_dist.defenses.build_defense` under the ``lp`` key).
    """
    spec = check_name(name)
    merged = {**(params or {}), **spec.implied}
    return from_dict(spec.cls.Config, merged, where=f"model {name}")


def build_model(name: str, in_features: int, num_classes: int, params: Mapping[str, Any] | None = None) -> GraphModel:
    """Instantiate the architecture of registered model ``name`` with ``params``.

    ``*_at`` names give the plain architecture (adversarial training is a training
    procedure). Names with label propagation need the graph's training labels: build them
    with :func:`grb_dist.defenses.build_defense`.
    """
    spec = check_name(name)
    if spec.label_propagation:
        raise ConfigError(
            f"model {name!r} uses label propagation, which needs the graph's training labels; "
            "build it with grb_dist.defenses.build_defense(name, graph, params)"
        )
    return spec.cls(in_features, num_classes, model_config(name, params))
