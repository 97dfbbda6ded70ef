"""Strict construction of frozen dataclass configs from plain dicts (YAML, CLI flags), and
their canonical JSON.

Unknown keys are rejected with the list of valid keys; values are coerced to the field's
declared type where that is unambiguous (int -> float, list -> tuple).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, TypeVar

from grb_dist.core.bounds import check_int, check_positive_number
from grb_dist.core.errors import ConfigError

C = TypeVar("C")


def _coerce(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin is typing.Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, where)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{where}: invalid value {value!r}")
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            value = [value]
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0], where) for v in value)
        if len(args) != len(value):
            raise ConfigError(f"{where}: expected {len(args)} values, got {len(value)}")
        return tuple(_coerce(v, a, where) for v, a in zip(value, args))
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(repr, args))}")
        return value
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, where=where)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not (
            isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        ):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return int(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    return value


def from_dict(cls: type[C], data: Mapping[str, Any] | None, *, where: str = "") -> C:
    """Build the frozen dataclass ``cls`` from ``data``, rejecting unknown keys.

    Args:
        cls: a dataclass type.
        data: mapping of field name -> value (``None`` means all defaults).
        where: prefix for error messages (e.g. the job file and section).
    """
    data = {} if data is None else data
    label = where or cls.__name__
    if not isinstance(data, Mapping):
        raise ConfigError(f"{label}: expected a mapping of options, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{label}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"valid keys are: {', '.join(sorted(fields))}"
        )
    kwargs = {k: _coerce(v, hints[k], f"{label}.{k}") for k, v in data.items()}
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{label}: {exc}") from None


def to_dict(config: Any) -> dict[str, Any]:
    """Plain-dict form of a dataclass config (tuples become lists), for hashing and YAML."""

    def conv(v: Any) -> Any:
        if isinstance(v, tuple):
            return [conv(x) for x in v]
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v

    return {k: conv(v) for k, v in dataclasses.asdict(config).items()}


#: The most training epochs (and patience) a job may ask for.
MAX_EPOCHS = 100_000


@dataclass(frozen=True)
class TrainSection:
    """Optimisation hyper-parameters: a job's ``train:`` section (a model's ``train:`` entry
    overrides it); :class:`grb_dist.models.train.TrainConfig` adds the seed.

    Attributes:
        lr: Adam learning rate.
        weight_decay: Adam weight decay.
        epochs: maximum number of epochs.
        patience: stop after this many epochs without a lower validation loss.
    """

    lr: float = 0.01
    weight_decay: float = 5e-4
    epochs: int = 400
    patience: int = 50

    def __post_init__(self) -> None:
        check_positive_number(self.lr, "train.lr", maximum=10)
        check_positive_number(self.weight_decay, "train.weight_decay", allow_zero=True, maximum=10)
        for key in ("epochs", "patience"):
            check_int(getattr(self, key), f"train.{key}", 1, MAX_EPOCHS)
def canonical_json(obj: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, tuples as lists (content hashes and
    cell ids are hashes of it)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_json_default)


def _json_default(o: Any) -> Any:
    if isinstance(o, tuple):
        return list(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")
