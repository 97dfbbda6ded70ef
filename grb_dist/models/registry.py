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

User models and defenses (:mod:`grb_dist.extensions`) are added with :func:`add_model` (a
:class:`GraphModel` subclass: every suffix combination, like the built-ins) and
:func:`add_defense` (any module built by a factory: the ``_at``/``_lp`` combinations, and
``_ln`` when its config has ``layer_norm``). Names that are not registered are looked up
lazily by :mod:`grb_dist.extensions` (entry points, ``module:Class`` specs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from torch import nn

from grb_dist import extensions
from grb_dist.core.config import from_dict
from grb_dist.core.errors import ConfigError
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
from grb_dist.core.registry import Registry
from grb_dist.core.names import normalize_name


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
        factory: for a user defense, what builds the module: ``factory(in_features,
            num_classes)``, or ``factory(in_features, num_classes, config)`` when it has a
            config class; ``None`` for models built as ``cls(in_features, num_classes, config)``.
        config_cls: the typed config of a user defense (``None``: it takes no parameters).
    """

    cls: type[nn.Module]
    implied: Mapping[str, Any] = field(default_factory=dict)
    base: str = ""
    adversarial: bool = False
    label_propagation: bool = False
    factory: Callable[..., nn.Module] | None = None
    config_cls: type | None = None

    @property
    def trainable(self) -> bool:
        """False for label propagation alone (nothing to train)."""
        return self.cls is not LabelPropagation

    @property
    def config_class(self) -> type:
        """The dataclass that a name's parameters are checked against."""
        if self.factory is not None:
            return self.config_cls or NoParams
        return self.cls.Config  # type: ignore[attr-defined]

    def build(self, in_features: int, num_classes: int, config: Any) -> nn.Module:
        """The untrained module (the architecture, without label propagation)."""
        if self.factory is None:
            return self.cls(in_features, num_classes, config)  # type: ignore[call-arg]
        module = self.factory(in_features, num_classes) if self.config_cls is None else \
            self.factory(in_features, num_classes, config)
        if not isinstance(module, nn.Module):
            raise ConfigError(f"defense {self.base!r}: its factory returned {type(module).__name__}, not a torch.nn.Module")
        return module


@dataclass(frozen=True)
class NoParams:
    """The config of a user defense registered without a config class: no keys."""


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
# names that are not registered: entry points of installed packages, module:Class specs
MODELS.set_resolver(extensions.resolve_model, lambda: extensions.available("model"))


def _variants(ln: bool) -> list[tuple[str, bool, bool, bool]]:
    """``(suffix, ln, at, lp)`` of every suffix combination (without ``_ln`` unless ``ln``)."""
    out = []
    for use_ln in (False, True) if ln else (False,):
        for at in (False, True):
            for lp in (False, True):
                out.append((("_ln" if use_ln else "") + ("_at" if at else "") + ("_lp" if lp else ""), use_ln, at, lp))
    return out


def _check_free(key: str, keys: list[str], replace: bool, cls: type, factory: Callable | None) -> None:
    """Refuse names of built-ins, and names registered for another class unless ``replace``."""
    for k in keys:
        if MODELS.is_builtin(k) and not replace:
            raise ConfigError(f"model name {k!r} is a built-in; choose another name (or pass replace=True to "
                              "replace the built-in)")
        old = MODELS.find(k)
        if old is not None and not replace and (old.cls is not cls or old.factory is not factory):
            raise ConfigError(f"model name {k!r} is already registered for {old.cls.__name__}; "
                              "choose another name or pass replace=True")


def add_model(name: str, cls: type[GraphModel], *, replace: bool = False) -> str:
    """Register :class:`GraphModel` subclass ``cls`` under ``name`` with every suffix
    combination (``name_ln``, ``name_at``, ``name_ln_at_lp`` ...); returns the normalised name.

    A name that is a built-in, or that ends in a suffix (``_ln``, ``_at``, ``_lp``), is
    refused; one registered before for another class needs ``replace=True``.
    """
    key = _base_key(name)
    keys = [key + suffix for suffix, *_ in _variants(True)]
    _check_free(key, keys, replace, cls, None)
    remove_model(key)
    for (suffix, ln, at, lp), k in zip(_variants(True), keys):
        MODELS.add(k, ModelSpec(cls, {"layer_norm": True} if ln else {}, key, at, lp), replace=True)
    return key


def add_defense(name: str, factory: Callable[..., nn.Module], cls: type[nn.Module], config_cls: type | None = None,
                *, replace: bool = False) -> str:
    """Register a user defense built by ``factory`` (see :class:`ModelSpec`) under ``name``
    with its ``_at``/``_lp`` combinations (and ``_ln`` ones when ``config_cls`` has a
    ``layer_norm`` field); returns the normalised name."""
    key = _base_key(name)
    ln = config_cls is not None and "layer_norm" in getattr(config_cls, "__dataclass_fields__", {})
    keys = [key + suffix for suffix, *_ in _variants(ln)]
    _check_free(key, keys, replace, cls, factory)
    remove_model(key)
    for (suffix, use_ln, at, lp), k in zip(_variants(ln), keys):
        spec = ModelSpec(cls, {"layer_norm": True} if use_ln else {}, key, at, lp, factory, config_cls)
        MODELS.add(k, spec, replace=True)
    return key


def remove_model(name: str) -> None:
    """Forget a user model or defense and its suffix combinations (not a built-in)."""
    key = normalize_name(name)
    for suffix, *_ in _variants(True):
        spec = MODELS.find(key + suffix)
        if spec is not None and spec.base == key and not MODELS.is_builtin(key + suffix):
            MODELS.remove(key + suffix)


def _base_key(name: str) -> str:
    if not isinstance(name, str):
        raise ConfigError(f"a model name must be a string, got {type(name).__name__}")
    key = normalize_name(name)
    base, suffixes = split_suffixes(key)
    if suffixes:
        raise ConfigError(f"model name {name!r} ends in a defense suffix ({''.join(suffixes)}); "
                          f"register {base!r}: its {'/'.join(SUFFIXES)} variants come with it")
    if key == "lp":
        raise ConfigError("model name 'lp' is a built-in; choose another name")
    return key


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
    if base in MODELS and "_ln" in suffixes and MODELS.get(base).factory is not None and not MODELS.find(base + "_ln"):
        raise ConfigError(f"model {name!r}: layer normalisation (_ln) applies to defenses whose config class has a "
                          f"layer_norm field; {base!r} has none (use {base}, {base}_at or {base}_lp)")
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
    if spec.config_class is NoParams and merged:
        raise ConfigError(f"model {name}: takes no parameters, got {', '.join(sorted(map(str, merged)))} "
                          "(register the defense with a config class to give it some)")
    return from_dict(spec.config_class, merged, where=f"model {name}")


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
    return spec.build(in_features, num_classes, model_config(name, params))
