"""Build and train any registered model or defense by name (the sweep's entry points).

- :func:`resolve_params`: a name's hyper-parameters from a job's ``models:`` section;
- :func:`build_defense`: the untrained module with its full structure (so that a saved
  state_dict loads into it);
- :func:`train_defense`: seeded inductive training, adversarial for ``*_at`` names.

Names are resolved by :func:`grb_dist.models.grammar.check_name`: the built-ins, user
models and defenses registered with :func:`grb_dist.register_defense`, entry points of installed
packages and ``module:Class`` specs. A user defense is trained by the same inductive trainer
unless its module declares ``trainable = False`` (nothing to train: it is used as built).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Mapping

import numpy as np
import torch
from torch import nn

from grb_dist.core.config import from_dict
from grb_dist.defenses.at import at_config, training_attack
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph
from grb_dist.models.lp import LabelPropagationOn, LPConfig
from grb_dist.models.grammar import ModelSpec, check_name, model_config
from grb_dist.models.registry import split_suffixes
from grb_dist.models.train import TrainConfig, seed_everything, train_model
from grb_dist.models.views import TrainResult, induced, training_views
from grb_dist.core.names import normalize_name

#: Key of the label propagation settings inside a ``*_lp`` model's parameters.
LP_KEY = "lp"
#: Key of the training overrides inside a ``models:`` entry.
TRAIN_KEY = "train"


def resolve_params(name: str, models_section: Mapping[str, Any] | None) -> tuple[dict, dict]:
    """``(model params, train-config overrides)`` of model ``name`` from a job's ``models:``.

    The entry named exactly ``name`` is used when present, else the entry of its base name
    with the ``_ln``/``_at``/``_lp`` suffixes stripped, else nothing (defaults). The nested
    ``train:`` mapping (e.g. ``{lr: 0.001}``) is split out as the overrides, on top of the
    model's own training settings (:func:`train_defaults`: Pro-GNN's schedule), which so
    replace a job's shared ``train:`` section for that model. Unknown keys of the model
    config, of ``lp:`` or of ``train:`` raise :class:`ConfigError`.
    """
    spec = check_name(name)
    section = {normalize_name(k): v for k, v in (models_section or {}).items()}
    key = normalize_name(name)
    entry = section.get(key)
    if entry is None:
        entry = section.get(split_suffixes(key)[0])
    if entry is not None and not isinstance(entry, Mapping):
        raise ConfigError(f"models.{key}: expected a mapping of hyper-parameters, got {entry!r}")
    entry = dict(entry or {})
    overrides = entry.pop(TRAIN_KEY, None) or {}
    if not isinstance(overrides, Mapping):
        raise ConfigError(f"models.{key}.train: expected a mapping of training options, got {overrides!r}")
    overrides = {**train_defaults(name), **overrides}
    from_dict(TrainConfig, overrides, where=f"models.{key}.train")
    _configs(name, spec, entry)  # validates every key
    return entry, overrides


def train_defaults(name: str) -> dict[str, Any]:
    """The training settings of model ``name``'s published method (its class's
    ``train_defaults``; ``{}`` for a model without a schedule of its own)."""
    return dict(getattr(check_name(name).cls, "train_defaults", None) or {})


def _configs(name: str, spec: ModelSpec, params: Mapping[str, Any]):
    """(model config or None, LP config or None) of ``name``, strictly validated."""
    params = dict(params or {})
    if spec.uses_train_labels:
        return None, from_dict(spec.config_class, params, where=f"model {name}")
    lp = None
    if LP_KEY in params:
        lp_params = params.pop(LP_KEY)
        if not spec.label_propagation:
            raise ConfigError(f"model {name}: key {LP_KEY!r} only applies to label propagation variants (<model>_lp)")
        lp = from_dict(LPConfig, lp_params, where=f"model {name}.{LP_KEY}")
    elif spec.label_propagation:
        lp = LPConfig()
    return model_config(name, params), lp


def _train_labels(graph: Graph) -> tuple[torch.Tensor, torch.Tensor]:
    if "train" not in graph.split or graph.split["train"].size == 0:
        raise ConfigError(f"graph {graph.name!r} has no training split; apply grb_split first")
    idx = np.sort(np.asarray(graph.split["train"], dtype=np.int64))
    return torch.as_tensor(idx), torch.as_tensor(np.asarray(graph.labels)[idx], dtype=torch.long)


def check_fit(name: str, graph: Graph, params: Mapping[str, Any] | None = None):
    """The checks of model/defense ``name`` that need ``graph``, without building it (the
    training split of label propagation, :meth:`GraphModel.check_graph` such as GCN-SVD's
    rank); returns ``(spec, model config, label propagation config)``, the model config as
    :meth:`GraphModel.config_for` settles it for ``graph``."""
    spec = check_name(name)
    config, lp = _configs(name, spec, params or {})
    if spec.uses_train_labels or spec.label_propagation:
        _train_labels(graph)
    check_graph = getattr(spec.cls, "check_graph", None)
    if check_graph is not None and config is not None:
        check_graph(name, config, graph)
    config_for = getattr(spec.cls, "config_for", None)
    if config_for is not None and config is not None:
        config = config_for(config, graph)
    return spec, config, lp


def build_defense(name: str, graph: Graph, params: Mapping[str, Any] | None = None) -> nn.Module:
    """The untrained module of model/defense ``name`` for ``graph`` (seed torch first).

    Args:
        name: a registry name (``gcn``, ``gcn_ln``, ``rgcn_at``, ``gnnguard``, ``gcnsvd``,
            ``lp``, ``gcn_lp`` ...).
        graph: the dataset (with its GRB split); gives the widths and, for label
            propagation, the training labels (stored as buffers).
        params: the model's hyper-parameters (from :func:`resolve_params`); ``*_lp``
            names take label propagation settings under ``lp`` (``alpha``, ``iterations``).

    Returns:
        A module with ``forward(x, edge_index) -> logits or log-probabilities`` (N' x C)
        on a possibly injected graph (N' >= N, injected nodes after the originals).

    Raises:
        ConfigError: unknown name (the message lists the valid names), incompatible
            combination, or invalid hyper-parameters (e.g. GCN-SVD rank k >= the number
            of training nodes, GNNGuard threshold outside [0, 1]).
    """
    spec, config, lp = check_fit(name, graph, params)
    if spec.uses_train_labels:  # built from the training labels (label propagation alone)
        idx, labels = _train_labels(graph)
        return spec.cls(idx, labels, graph.num_classes, lp)
    model = spec.build(graph.num_features, graph.num_classes, config)
    if spec.label_propagation:
        idx, labels = _train_labels(graph)
        return LabelPropagationOn(model, idx, labels, graph.num_classes, lp)
    return model


def train_defense(
    name: str,
    graph: Graph,
    params: Mapping[str, Any] | None,
    train_config: TrainConfig | None = None,
    *,
    at_config: Mapping[str, Any] | None = None,
    device: str | torch.device = "cpu",
    transductive: bool = False,
) -> TrainResult:
    """Build model/defense ``name`` (seeded by ``train_config.seed``) and train it
    inductively, or on the whole graph with ``transductive`` (the poisoning scenario: the
    graph is then the perturbed one; :func:`grb_dist.models.train.train_model`).

    ``*_at`` names train with adversarial training (injection, or edge flips with
    ``scenario: modification``) using ``at_config`` (a job's
    ``adversarial_training:`` section; required for them, ignored otherwise). ``*_lp`` names
    train the underlying model, then wrap it with label propagation (the result's
    validation figures are the underlying model's). ``lp`` alone has nothing to train: the
    result reports its validation loss/accuracy on the train+val subgraph, 0 epochs.

    ``train_config`` ``None``: the trainer's defaults under the model's own training settings
    (:func:`train_defaults`).

    Returns:
        :class:`TrainResult` whose ``model`` is the full module (as :func:`build_defense`
        makes it) with the best weights, in eval mode.
    """
    if train_config is None:
        train_config = TrainConfig(**train_defaults(name))
    spec = check_name(name)
    _configs(name, spec, params or {})
    augment = training_attack(at_config_or_error(name, at_config)) if spec.adversarial else None
    seed_everything(train_config.seed)
    module = build_defense(name, graph, params)
    if spec.uses_train_labels:
        return _evaluate_lp(module, graph, device, transductive)
    inner = module.model if isinstance(module, LabelPropagationOn) else module
    if getattr(inner, "trainable", True) is False:  # a user defense with nothing to train
        return _evaluate_untrained(module, graph, device, transductive)
    train_on = getattr(inner, "train_on", None)  # a defense with a training procedure of its own (Pro-GNN)
    if callable(train_on):
        result = train_on(graph, train_config, device=device, augment=augment, transductive=transductive)
    else:
        result = train_model(inner, graph, train_config, device=device, augment=augment, transductive=transductive)
    module = module.to(device).eval()
    return dataclasses.replace(result, model=module)


def at_config_or_error(name: str, params):
    if params is None:
        raise ConfigError(f"model {name} uses adversarial training: pass at_config (the job's adversarial_training section)")
    return at_config(params)


def _evaluate_lp(module: nn.Module, graph: Graph, device, transductive: bool = False) -> TrainResult:
    start = time.perf_counter()
    split = graph.split
    nodes = np.arange(graph.num_nodes) if transductive else np.sort(np.concatenate([split["train"], split["val"]]))
    view = induced(graph, nodes, split["val"], device)
    # The same label propagation on the train+val subgraph (local ids), for validation.
    local = torch.as_tensor(np.searchsorted(nodes, module.train_index.cpu().numpy()), device=device)
    probe = type(module)(local, module.train_labels, module.num_classes, module.config).to(device)
    with torch.no_grad():
        out = probe(view.x, view.edge_index)[view.mask_idx]
        y = view.y[view.mask_idx]
        loss = float(torch.nn.functional.nll_loss(out, y))
        acc = float((out.argmax(1) == y).float().mean())
    module = module.to(device).eval()
    return TrainResult(module, 0, loss, acc, 0, time.perf_counter() - start, [])


def _evaluate_untrained(module: nn.Module, graph: Graph, device, transductive: bool = False) -> TrainResult:
    """The validation loss and accuracy of a module used as built (0 epochs)."""
    start = time.perf_counter()
    view = training_views(graph, device, transductive)[1]
    module = module.to(device).eval()
    with torch.no_grad():
        out = module(view.x, view.edge_index)[view.mask_idx]
        y = view.y[view.mask_idx]
        loss = float(torch.nn.functional.cross_entropy(out, y))
        acc = float((out.argmax(1) == y).float().mean())
    return TrainResult(module, 0, loss, acc, 0, time.perf_counter() - start, [])
