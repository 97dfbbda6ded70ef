"""The model and defense table: one entry per architecture, and registering more.

:data:`MODELS` holds one entry per architecture: the GNNs, MLP, the robust models
(``rgcn``, ``gnnguard``, ``gatguard``, ``gcnsvd``, ``jaccard``, ``softmedian``, ``prognn``
and its cheaper variant ``prognn_lite``), label propagation alone (``lp``), and what users
add (:func:`register_model`, :func:`register_defense`, entry points of installed packages,
``module:Class`` specs). An entry says which wrappers its names may take
(:meth:`ModelEntry.suffixes`), in this order:

- ``_ln``: GRB layer normalisation (a config value, ``layer_norm=True``; for architectures
  whose config has a ``layer_norm`` field);
- ``_at``: adversarial training (a training procedure, :mod:`grb_dist.defenses.at`);
- ``_lp``: label propagation on the model's soft predictions
  (:class:`grb_dist.models.lp.LabelPropagationOn`).

What a name may take, and how it is built and trained, follows from class flags of the
architecture, not from its identity: ``trainable`` (``False``: nothing to train, no
``_ln``/``_at``), ``uses_train_labels`` (built from the graph's training labels, like
``lp``; no ``_lp`` on top), and :meth:`GraphModel.check_graph` (a check against the graph,
such as GCN-SVD's rank). A name is parsed into an architecture and its wrappers by
:mod:`grb_dist.models.grammar`; a registered name may not end in a wrapper suffix.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from torch import nn

from grb_dist.core.errors import ConfigError, ExtensionTypeError
from grb_dist.core.names import normalize_name
from grb_dist.core.scenario import find_scenario
from grb_dist.core.registry import Registry, describe, plain_name
from grb_dist.models.appnp import APPNP
from grb_dist.models.base import GraphModel, ModelConfig
from grb_dist.models.gat import GAT
from grb_dist.models.gatv2 import GATv2
from grb_dist.models.gcn import GCN
from grb_dist.models.gin import GIN
from grb_dist.models.lp import LabelPropagation
from grb_dist.models.mlp import MLP
from grb_dist.models.robust.gnnguard import GATGuard, GNNGuard
from grb_dist.models.robust.jaccard import GCNJaccard
from grb_dist.models.robust.prognn import ProGNN, ProGNNLite
from grb_dist.models.robust.rgcn import RGCN
from grb_dist.models.robust.softmedian import SoftMedianGDC
from grb_dist.models.robust.svd import GCNSVD, SparseGCNSVD
from grb_dist.models.sage import GraphSAGE
from grb_dist.models.sgc import SGC
from grb_dist.models.tagcn import TAGCN

#: Defense suffixes in the order they appear in a name.
SUFFIXES = ("_ln", "_at", "_lp")
#: Entry-point groups of installed packages that provide models and defenses.
GROUPS = ("grb_dist.defenses", "grb_dist.models")


@dataclass(frozen=True)
class NoParams:
    """The config of a user defense registered without a config class: no keys."""


@dataclass(frozen=True)
class ModelEntry:
    """An architecture of the table: its class, and for a user defense what builds it.

    Attributes:
        cls: the module class (a :class:`GraphModel` subclass for built-ins and user models).
        factory: for a user defense, ``factory(in_features, num_classes)``, or
            ``factory(in_features, num_classes, config)`` when it has a config class;
            ``None`` for classes built as ``cls(in_features, num_classes, config)``.
        config_cls: the typed config of a user defense (``None``: no parameters).
    """

    cls: type[nn.Module]
    factory: Callable[..., nn.Module] | None = None
    config_cls: type | None = None

    @property
    def config_class(self) -> type:
        """The dataclass that the architecture's parameters are checked against."""
        if self.factory is not None:
            return self.config_cls or NoParams
        return self.cls.Config  # type: ignore[attr-defined]

    @property
    def trainable(self) -> bool:
        return bool(getattr(self.cls, "trainable", True)) and bool(getattr(self.factory, "trainable", True))

    @property
    def uses_train_labels(self) -> bool:
        return bool(getattr(self.cls, "uses_train_labels", False))

    @property
    def takes_layer_norm(self) -> bool:
        fields = getattr(self.config_class, "__dataclass_fields__", {})
        return self.trainable and "layer_norm" in fields

    def suffixes(self) -> list[str]:
        """Every suffix combination this architecture takes (``""`` first)."""
        if self.uses_train_labels:
            return [""]
        out = []
        for ln in ("", "_ln") if self.takes_layer_norm else ("",):
            for at in ("", "_at"):
                for lp in ("", "_lp"):
                    out.append(ln + at + lp)
        return out


#: The built-in GNN architectures.
ARCHITECTURES: dict[str, type[GraphModel]] = {
    "gcn": GCN,
    "gat": GAT,
    "gatv2": GATv2,
    "gin": GIN,
    "appnp": APPNP,
    "tagcn": TAGCN,
    "sage": GraphSAGE,
    "sgc": SGC,
    "mlp": MLP,
}

#: Robust architectures (GRB, Zheng et al. 2021, section 3.4).
ROBUST_MODELS: dict[str, type[GraphModel]] = {
    "rgcn": RGCN,
    "gnnguard": GNNGuard,
    "gatguard": GATGuard,
    "gcnsvd": GCNSVD,
    "gcnsvd_sparse": SparseGCNSVD,
    "jaccard": GCNJaccard,
    "softmedian": SoftMedianGDC,
    "prognn": ProGNN,
    "prognn_lite": ProGNNLite,
}


def _admit(name: str, obj: Any, where: str) -> ModelEntry:
    """The table entry of ``obj`` found for ``name``: a GraphModel subclass (a model), any
    other ``torch.nn.Module`` subclass or a factory (a defense)."""
    return defense_entry(obj, None, where)


def model_entry(cls: Any, where: str) -> ModelEntry:
    """The entry of :class:`GraphModel` subclass ``cls`` (its ``Config`` checked)."""
    if not (inspect.isclass(cls) and issubclass(cls, GraphModel)):
        raise ExtensionTypeError(f"{where}: {describe(cls)} is not a subclass of GraphModel "
                                 "(register any other torch.nn.Module with register_defense)")
    cfg = getattr(cls, "Config", None)
    if not (inspect.isclass(cfg) and dataclasses.is_dataclass(cfg) and issubclass(cfg, ModelConfig)):
        raise ExtensionTypeError(f"{where}: {cls.__name__}.Config must be a dataclass derived from ModelConfig")
    return ModelEntry(cls)


def defense_entry(obj: Any, config_cls: type | None, where: str) -> ModelEntry:
    """The entry of a defense: a GraphModel subclass becomes a model; any other
    ``torch.nn.Module`` subclass or factory ``(in_features, num_classes[, config])`` is
    built by it (with ``config_cls``, or the class's dataclass ``Config``)."""
    if inspect.isclass(obj):
        scenario = find_scenario(getattr(obj, "scenario", None))
        if scenario is not None:
            raise ConfigError(f"{where} is {scenario.an} ({obj.__name__}), not a model or defense; "
                              "list it among the attacks")
        if issubclass(obj, GraphModel):
            if config_cls is not None:
                raise ExtensionTypeError(f"{describe(obj)} is a GraphModel: its config is its Config attribute, "
                                         "do not pass config_cls")
            return model_entry(obj, where)
        if not issubclass(obj, nn.Module):
            raise ExtensionTypeError(f"{where}: {describe(obj)} is not a torch.nn.Module subclass "
                                     "(a defense maps (x, edge_index) to logits)")
        if config_cls is None:
            own = getattr(obj, "Config", None)
            config_cls = own if inspect.isclass(own) and dataclasses.is_dataclass(own) else None
        cls = obj
    elif isinstance(obj, nn.Module):
        raise ExtensionTypeError(f"{where}: got a module instance; register its class or a factory "
                                 "(grb-dist builds and trains a fresh module per seed), or wrap a trained module "
                                 "in grb_dist.defenses.GivenModule to score it as given")
    elif not callable(obj):
        raise ExtensionTypeError(f"{where}: expected a torch.nn.Module subclass or a factory "
                                 f"(in_features, num_classes) -> module, got {type(obj).__name__}")
    else:
        cls = nn.Module
    if config_cls is not None and not (inspect.isclass(config_cls) and dataclasses.is_dataclass(config_cls)):
        raise ExtensionTypeError(f"{where}: config_cls must be a dataclass, got {config_cls!r}")
    return ModelEntry(cls, obj, config_cls)


def _variants(bases: Iterable[str]) -> list[str]:
    """Every valid name of the architectures ``bases`` (for unknown-name messages)."""
    out = []
    for base in bases:
        entry = MODELS.find(base)
        out += [base + s for s in (entry.suffixes() if entry is not None else [""])]
    return out


#: The model and defense table: one entry per architecture.
MODELS: Registry[ModelEntry] = Registry(
    "model",
    {**{k: ModelEntry(v) for k, v in {**ARCHITECTURES, **ROBUST_MODELS}.items()}, "lp": ModelEntry(LabelPropagation)},
    admit=_admit, groups=GROUPS, choices=_variants,
)


# --------------------------------------------------------------------------- registering


def _base_name(name: Any, what: str) -> str:
    key = plain_name(name, what)
    base, suffixes = split_suffixes(key)
    if suffixes:
        raise ConfigError(f"{what} name {name!r} ends in a defense suffix ({''.join(suffixes)}); "
                          f"register {base!r}: its {'/'.join(SUFFIXES)} variants come with it")
    return key


def register_model(name: str, cls: type, *, replace: bool = False) -> str:
    """Register :class:`GraphModel` subclass ``cls`` under ``name`` with its typed
    ``Config``; ``<name>_ln``, ``<name>_at``, ``<name>_lp`` ... work like the built-ins'.
    Returns the registered (normalised) name.

    Raises:
        ExtensionTypeError: ``cls`` is not a GraphModel subclass, or its ``Config`` is not a
            dataclass derived from ModelConfig.
        ConfigError: ``name`` is not a plain name, ends in a defense suffix, or is taken
            (a built-in, or registered for another class) and ``replace`` is false.
    """
    key = _base_name(name, "model")
    return MODELS.add(key, model_entry(cls, f"model {key!r}"), replace=replace)


def register_defense(name: str, factory_or_class: Any, config_cls: type | None = None, *,
                     replace: bool = False) -> str:
    """Register a defense: a ``torch.nn.Module`` subclass, or a factory returning one, whose
    ``forward(x, edge_index)`` returns logits (N x C). Returns the registered name.

    The module is built as ``factory(in_features, num_classes)``, or with a third argument,
    the typed config, when ``config_cls`` is given (or the class has a dataclass ``Config``
    attribute). A :class:`GraphModel` subclass is registered as a model. Raises like
    :func:`register_model`.
    """
    key = _base_name(name, "defense")
    return MODELS.add(key, defense_entry(factory_or_class, config_cls, f"defense {key!r}"), replace=replace)


# --------------------------------------------------------------------------- wrapper suffixes


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


def model_names() -> list[str]:
    """Every valid model and defense name of the table (sorted)."""
    return sorted(_variants(MODELS.names()))


__all__ = ["ARCHITECTURES", "GROUPS", "MODELS", "ModelEntry", "NoParams", "ROBUST_MODELS", "SUFFIXES",
           "defense_entry", "model_entry", "model_names", "register_defense", "register_model", "split_suffixes"]
