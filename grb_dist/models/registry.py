"""The model and defense table, and defense names parsed into a :class:`ModelSpec`.

:data:`MODELS` holds one entry per architecture: the GNNs, MLP, the robust models
(``rgcn``, ``gnnguard``, ``gatguard``, ``gcnsvd``), label propagation alone (``lp``), and
what users add (:func:`register_model`, :func:`register_defense`, entry points of installed
packages, ``module:Class`` specs). A defense name is an architecture followed by wrappers,
parsed by :func:`check_name`, in this order:

- ``_ln``: GRB layer normalisation (a config value, ``layer_norm=True``; for architectures
  whose config has a ``layer_norm`` field);
- ``_at``: adversarial training (a training procedure, :mod:`grb_dist.defenses.at`);
- ``_lp``: label propagation on the model's soft predictions
  (:class:`grb_dist.models.lp.LabelPropagationOn`).

What a name may take, and how it is built and trained, follows from class flags of the
architecture, not from its identity: ``trainable`` (``False``: nothing to train, no
``_ln``/``_at``), ``uses_train_labels`` (built from the graph's training labels, like
``lp``; no ``_lp`` on top), and :meth:`GraphModel.check_graph` (a check against the graph,
such as GCN-SVD's rank).
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from torch import nn

from grb_dist.core.config import from_dict
from grb_dist.core.errors import ConfigError, ExtensionTypeError, UnknownNameError
from grb_dist.core.names import SCENARIOS, alias_spec, normalize_name, spec_of, unknown_name_message
from grb_dist.core.registry import Registry, describe, plain_name
from grb_dist.models.appnp import APPNP
from grb_dist.models.base import GraphModel, ModelConfig
from grb_dist.models.gat import GAT
from grb_dist.models.gatv2 import GATv2
from grb_dist.models.gcn import GCN
from grb_dist.models.gin import GIN
from grb_dist.models.gnnguard import GATGuard, GNNGuard
from grb_dist.models.jaccard import GCNJaccard
from grb_dist.models.lp import LabelPropagation
from grb_dist.models.mlp import MLP
from grb_dist.models.prognn import ProGNN
from grb_dist.models.rgcn import RGCN
from grb_dist.models.sage import GraphSAGE
from grb_dist.models.sgc import SGC
from grb_dist.models.softmedian import SoftMedianGDC
from grb_dist.models.svd import GCNSVD
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


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model or defense name: an architecture and its wrappers.

    Attributes:
        name: the canonical name (``gcn_ln_at``).
        base: the architecture's name (``gcn``).
        entry: the architecture's table entry.
        layer_norm, adversarial, label_propagation: the ``_ln``, ``_at`` and ``_lp``
            wrappers (``label_propagation`` is also true for ``lp`` alone).
    """

    name: str
    base: str
    entry: ModelEntry
    layer_norm: bool = False
    adversarial: bool = False
    label_propagation: bool = False

    @property
    def cls(self) -> type[nn.Module]:
        return self.entry.cls

    @property
    def factory(self) -> Callable[..., nn.Module] | None:
        return self.entry.factory

    @property
    def config_cls(self) -> type | None:
        return self.entry.config_cls

    @property
    def config_class(self) -> type:
        return self.entry.config_class

    @property
    def implied(self) -> Mapping[str, Any]:
        """Config values fixed by the name (``layer_norm=True`` for ``*_ln``)."""
        return {"layer_norm": True} if self.layer_norm else {}

    @property
    def trainable(self) -> bool:
        """False for architectures with nothing to train (label propagation alone)."""
        return self.entry.trainable

    @property
    def uses_train_labels(self) -> bool:
        """True when the module itself is built from the graph's training labels (``lp``)."""
        return self.entry.uses_train_labels

    def build(self, in_features: int, num_classes: int, config: Any) -> nn.Module:
        """The untrained architecture (without label propagation on top)."""
        entry = self.entry
        if entry.factory is None:
            return entry.cls(in_features, num_classes, config)  # type: ignore[call-arg]
        module = entry.factory(in_features, num_classes) if entry.config_cls is None else \
            entry.factory(in_features, num_classes, config)
        if not isinstance(module, nn.Module):
            raise ConfigError(f"defense {self.base!r}: its factory returned {type(module).__name__}, not a torch.nn.Module")
        return module


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
    "jaccard": GCNJaccard,
    "softmedian": SoftMedianGDC,
    "prognn": ProGNN,
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
        scenario = getattr(obj, "scenario", None)
        if isinstance(scenario, str) and scenario in SCENARIOS:
            raise ConfigError(f"{where} is an {scenario} attack ({obj.__name__}), not a model or defense; "
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
                                 "in GivenModule to score it as given")
    elif not callable(obj):
        raise ExtensionTypeError(f"{where}: expected a torch.nn.Module subclass or a factory "
                                 f"(in_features, num_classes) -> module, got {type(obj).__name__}")
    else:
        cls = nn.Module
    if config_cls is not None and not (inspect.isclass(config_cls) and dataclasses.is_dataclass(config_cls)):
        raise ExtensionTypeError(f"{where}: config_cls must be a dataclass, got {config_cls!r}")
    return ModelEntry(cls, obj, config_cls)


class GivenModule:
    """A factory of copies of one trained module: a defense scored with the weights it was
    given, never trained (``grb_dist.benchmark(trained_module, ...)``).

    The module is copied once, on the CPU and in eval mode, when this is made (later changes
    to the caller's module do not reach the run); every call returns a fresh copy marked
    ``trainable = False``, which the training step takes as "nothing to train" (0 epochs,
    its validation figures recorded as given). ``in_features`` and ``num_classes`` are not
    used: the module has its own widths, checked against the graph before a run starts.
    """

    trainable = False

    def __init__(self, module: nn.Module):
        import copy

        self.module = copy.deepcopy(module).cpu().eval()
        self.__name__ = type(module).__name__

    def __call__(self, in_features: int, num_classes: int) -> nn.Module:
        import copy

        module = copy.deepcopy(self.module)
        module.trainable = False
        return module


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


# --------------------------------------------------------------------------- parsing names


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


def _find_base(key: str) -> tuple[str, list[str], ModelEntry | None]:
    """The architecture of ``key``: the whole name when the table has (or can resolve) it,
    else the name without its suffixes."""
    if MODELS.find(key) is not None:
        return key, [], MODELS.find(key)
    base, suffixes = split_suffixes(key)
    spec = spec_of(key)
    if suffixes and spec is not None and spec_of(base) is None:  # mypkg:MyGCN_ln: MyGCN with _ln
        alias_spec(base, spec[0], spec[1][: len(spec[1]) - len("".join(suffixes))])
    if not suffixes:
        return key, [], MODELS.get(key) if key in MODELS else None
    return base, suffixes, MODELS.get(base) if base in MODELS else None


def check_name(name: str) -> ModelSpec:
    """The parsed :class:`ModelSpec` of ``name``; unknown or invalid names raise
    :class:`ConfigError` with the reason (``lp_at``: label propagation has nothing to train)
    or the valid names."""
    key = normalize_name(name)
    base, suffixes, entry = _find_base(key)
    if entry is None:
        raise _unknown(name)
    if entry.uses_train_labels and suffixes:
        what = {"_ln": "layer normalisation (it has no layers)",
                "_at": "adversarial training (it has no parameters to train)",
                "_lp": "label propagation on top of itself"}
        reasons = "; ".join(what[s] for s in dict.fromkeys(suffixes))
        raise ConfigError(f"model {name!r} is not a valid combination: label propagation {base!r} cannot take "
                          f"{reasons}; use {base!r} or '<model>_lp'")
    if "_ln" in suffixes and not entry.takes_layer_norm:
        raise ConfigError(f"model {name!r}: layer normalisation (_ln) applies to defenses whose config class has a "
                          f"layer_norm field; {base!r} has none (use {base}, {base}_at or {base}_lp)")
    if "".join(suffixes) not in entry.suffixes():
        raise ConfigError(
            f"model {name!r}: suffixes must appear at most once each and in the order "
            f"{''.join(SUFFIXES)} (e.g. {base}_ln_at_lp)"
        )
    return ModelSpec(key, base, entry, "_ln" in suffixes, "_at" in suffixes,
                     "_lp" in suffixes or entry.uses_train_labels)


def _unknown(name: str) -> ConfigError:
    return UnknownNameError(unknown_name_message("model", name, MODELS.choices()))


def is_model_name(name: Any) -> bool:
    """Whether ``name`` parses as a model or defense name."""
    if not isinstance(name, str):
        return False
    try:
        check_name(name)
    except ConfigError:
        return False
    return True


def model_names() -> list[str]:
    """Every valid model and defense name of the table (sorted)."""
    return sorted(_variants(MODELS.names()))


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


def build_model(name: str, in_features: int, num_classes: int, params: Mapping[str, Any] | None = None) -> nn.Module:
    """Instantiate the architecture of model ``name`` with ``params``.

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


__all__ = ["ARCHITECTURES", "GROUPS", "GivenModule", "MODELS", "ModelEntry", "ModelSpec", "NoParams", "ROBUST_MODELS", "SUFFIXES",
           "build_model", "check_name", "defense_entry", "is_model_name", "model_config", "model_entry",
           "model_names", "register_defense", "register_model", "split_suffixes"]
