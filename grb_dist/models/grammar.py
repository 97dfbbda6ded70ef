"""Defense names parsed into a :class:`ModelSpec`: an architecture of the table
(:data:`grb_dist.models.registry.MODELS`) followed by wrappers, in this order:

- ``_ln``: GRB layer normalisation (a config value, ``layer_norm=True``; for architectures
  whose config has a ``layer_norm`` field);
- ``_at``: adversarial training (a training procedure, :mod:`grb_dist.defenses.at`);
- ``_lp``: label propagation on the model's soft predictions
  (:class:`grb_dist.models.lp.LabelPropagationOn`).

:func:`check_name` parses and checks a name (``lp_at`` is refused with the reason, an unknown
name with the valid ones); :func:`model_config` and :func:`build_model` give a name's typed
config and its untrained module. Names are parsed, never enumerated: what a name may take
follows from the class flags of its table entry, and a table entry knows nothing of this
module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from torch import nn

from grb_dist.core.config import from_dict
from grb_dist.core.errors import ConfigError, UnknownNameError
from grb_dist.core.names import alias_spec, normalize_name, spec_of, unknown_name_message
from grb_dist.models.registry import MODELS, SUFFIXES, ModelEntry, NoParams, split_suffixes


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


__all__ = ["SUFFIXES", "ModelSpec", "build_model", "check_name", "is_model_name", "model_config", "split_suffixes"]
