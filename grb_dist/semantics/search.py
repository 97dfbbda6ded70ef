"""The ``search:`` section of a study job: per-model grids of hyper-parameters (Gosch et al. 2023,
appendix H), searched per K by ``grb-dist study-tune`` (:mod:`grb_dist.semantics.tune`)::

    search:
      gcn: {dropout: [0.0, 0.3, 0.5], lr: [0.01, 0.001]}
      lp: {alpha: [0.5, 0.7, 0.9]}

Keys are the model's hyper-parameters, plus ``lr`` and ``weight_decay`` (training settings,
put under the model entry's ``train:``). :func:`check_search` is part of a job's checks.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Mapping, Sequence

from grb_dist.core.bounds import MAX_HIDDEN, check_int, check_model_bounds
from grb_dist.core.errors import ConfigError

#: Search keys that are training settings (put under the model entry's ``train:``).
TRAIN_KEYS = ("lr", "weight_decay")
#: The most settings one model's grid may hold (the paper's grids hold a few dozen).
MAX_SETTINGS = 10_000


def grid(options: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of ``options`` (key -> candidate values), in a stable order."""
    keys = sorted(options)
    return [dict(zip(keys, values)) for values in itertools.product(*(options[k] for k in keys))]


def model_entry(base: Mapping[str, Any], setting: Mapping[str, Any]) -> dict[str, Any]:
    """A model entry: ``base`` with ``setting`` merged (training keys under ``train:``)."""
    entry = dict(base)
    train = dict(entry.get("train", {}) or {})
    for key, value in setting.items():
        if key in TRAIN_KEYS:
            train[key] = value
        else:
            entry[key] = value
    if train:
        entry["train"] = train
    return entry


def check_model(name: str, models: Mapping[str, Any]) -> dict[str, Any]:
    """Model ``name``'s parameters in ``models`` (a ``models:`` section), checked as the
    sweep checks a job's models: every key known (:func:`resolve_params`), hidden widths,
    layers, heads and hops within the sweep's bounds; returns the parameters."""
    from grb_dist.defenses.build import resolve_params
    from grb_dist.models.grammar import check_name, model_config

    params, _ = resolve_params(name, models)
    hidden = params.get("hidden_sizes", ())
    for h in hidden if isinstance(hidden, (list, tuple)) else ():
        check_int(h, f"models.{name}.hidden_sizes", 1, MAX_HIDDEN, hint="weights are allocated when the model is built")
    if not check_name(name).uses_train_labels:
        check_model_bounds(name, model_config(name, {k: v for k, v in params.items() if k != "lp"}))
    return params


def check_search(spec, search: Mapping[str, Any]) -> None:
    """Errors before any work: a model not in the study (``spec``, a
    :class:`~grb_dist.semantics.spec.StudySpec`), an ``_lp`` variant (they take their
    parts' settings), empty or non-list options, more than :data:`MAX_SETTINGS` settings,
    settings the model rejects or that pass the sweep's model bounds."""
    if not spec.synthetic:
        raise ConfigError("study-tune searches per K: it needs a CSBM or CBA study")
    if not search:
        raise ConfigError("the job has no search: section (model -> parameter -> list of values)")
    for name, options in search.items():
        if str(name) not in {str(m) for m in spec.models}:
            raise ConfigError(f"search: model {name!r} is not in the study's models")
        if str(name).endswith("_lp"):
            raise ConfigError(f"search: {name} takes the best settings of its model and of lp; search those instead")
        if not isinstance(options, Mapping) or not options or not all(
                isinstance(v, (list, tuple)) and len(v) > 0 for v in options.values()):
            raise ConfigError(f"search.{name}: expected parameter -> non-empty list of values")
        settings = math.prod(len(v) for v in options.values())
        if settings > MAX_SETTINGS:  # counted before the grid is made
            raise ConfigError(f"search.{name} has {settings:,} settings (the product of its lists' lengths), more than "
                              f"{MAX_SETTINGS:,}; search fewer values per parameter")
        for setting in grid(options):
            check_model(str(name), {str(name): model_entry(spec.models_at(spec.K[0]).get(str(name), {}), setting)})


__all__ = ["MAX_SETTINGS", "TRAIN_KEYS", "check_model", "check_search", "grid", "model_entry"]
