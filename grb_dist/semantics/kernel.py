"""One unit of a study (Gosch et al. 2023): :func:`run_unit`, a plain function (no Ray).

A unit is a (K, graph seed, model, attack) (:class:`~grb_dist.semantics.spec.Unit`): the
model is trained inductively on 80% of the known nodes of the unit's graph
(:mod:`grb_dist.semantics.data`), validated on the other 20% (removed from the graph while
training), then each new node is classified when added alone to the known graph and
attacked with the unit's local-budget structure attack (:mod:`grb_dist.semantics.attacks`).
The unit's rows (:data:`~grb_dist.semantics.spec.ROW_COLUMNS`) hold, per (new node[, target
class]), its degree, label, f's clean decision and the flip counts of f and of the Bayes
reference g along the attack's order (:mod:`grb_dist.semantics.flips`);
:mod:`grb_dist.semantics.metrics` turns them into robustness at every budget.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import numpy as np
import pandas as pd

from grb_dist.semantics.attacks import (
    ADAPTIVE_ATTACKS,
    SURROGATE_ATTACKS,
    attack_order,
    grbcd_order,
    nettack_order,
    sga_order,
)
from grb_dist.semantics.cache import UnitCache
from grb_dist.semantics.data import Prepared, prepare
from grb_dist.semantics.flips import f_flips, g_flips, node_graphs
from grb_dist.semantics.metrics import budget_values
from grb_dist.semantics.spec import ROW_COLUMNS, StudySpec, Unit

#: The linearised 2-layer GCN surrogate of Nettack (appendix H): ``A_hat^2 X W``.
NETTACK_SURROGATE = {"hidden_sizes": [], "k": 2, "dropout": 0.0}


def train_study_model(spec: StudySpec, prepared: Prepared, name: str, seed: int, graph_key: str = "",
                      K: float = float("nan"), cache: UnitCache | None = None):
    """The model ``name`` (its settings at ``K``) trained inductively on the known graph;
    returns (module, val acc).

    With a ``graph_key`` (the graph's identity) and a ``cache``, the trained underlying
    network is kept in the cache and reused by the ``_lp`` variant with the same settings
    (seeded training: the weights are those a fresh training would give)."""
    from grb_dist.core.config import from_dict
    from grb_dist.defenses.build import build_defense, resolve_params, train_defense
    from grb_dist.models.lp import LabelPropagationOn
    from grb_dist.models.grammar import check_name
    from grb_dist.models.train import TrainConfig, seed_everything

    params, overrides = resolve_params(name, spec.models_at(K))
    train = from_dict(TrainConfig, {**dict(spec.train), **overrides, "seed": seed}, where="train")
    ms = check_name(name)
    inner_params = {k: v for k, v in params.items() if k != "lp"}
    key = json.dumps([graph_key, ms.cls.__qualname__, dict(ms.implied), ms.base, ms.adversarial,
                      inner_params, asdict(train)], sort_keys=True, default=str)
    shareable = cache is not None and bool(graph_key) and ms.trainable and not ms.adversarial and ms.factory is None
    hit = cache.lookup("networks", key) if shareable else None
    if hit is not None:
        state, val_acc = hit
        seed_everything(seed)
        module = build_defense(name, prepared.graph, params)
        inner = module.model if isinstance(module, LabelPropagationOn) else module
        inner.load_state_dict(state)
        return module.eval(), val_acc
    result = train_defense(name, prepared.graph, params, train)
    module = result.model.eval()
    if shareable:
        inner = module.model if isinstance(module, LabelPropagationOn) else module
        cache.get("networks", key, lambda: ({k: v.detach().clone() for k, v in inner.state_dict().items()},
                                            float(result.best_val_accuracy)))
    return module, float(result.best_val_accuracy)


def _surrogate(spec: StudySpec, prepared: Prepared, seed: int):
    """Nettack's and SGA's surrogate (:data:`NETTACK_SURROGATE`) trained on the known graph."""
    from grb_dist.core.config import from_dict
    from grb_dist.defenses.build import train_defense
    from grb_dist.models.train import TrainConfig

    train = {**dict(spec.train), "seed": seed}
    result = train_defense("sgc", prepared.graph, dict(NETTACK_SURROGATE), from_dict(TrainConfig, train, where="train"))
    return result.model.eval()


def node_steps(spec: StudySpec, degree: np.ndarray) -> np.ndarray:
    """Per node, the most edges any budget of the study allows (capped by ``max_steps``)."""
    most = np.zeros(degree.shape)
    for b in spec.budgets:
        most = np.maximum(most, budget_values(b, degree))
    return np.minimum(most, spec.max_steps).astype(np.int64)


def _graph_key(spec: StudySpec, unit: Unit) -> str:
    return json.dumps([spec.shared(), unit.K, unit.graph_seed], sort_keys=True, default=str)


def _trained(spec: StudySpec, unit: Unit, cache: UnitCache) -> tuple:
    """``(prepared graph, model, validation accuracy)`` of ``unit``'s (K, graph, model)."""
    key = json.dumps([asdict(spec), unit.K, unit.graph_seed, unit.model], sort_keys=True, default=str)

    def train() -> tuple:
        prepared = prepare(spec, unit.K, unit.graph_seed, cache)
        return (prepared, *train_study_model(spec, prepared, unit.model, unit.graph_seed, _graph_key(spec, unit),
                                             unit.K, cache=cache))

    return cache.get("trained", key, train)


def surrogate_orders(spec: StudySpec, unit: Unit, prepared: Prepared, S: int,
                     cache: UnitCache | None = None) -> np.ndarray:
    """T x S edge orders of ``unit.attack`` (Nettack or SGA) on its seeded surrogate (with a
    ``cache``, computed once per graph, attack and S)."""
    import torch

    def compute() -> np.ndarray:
        surrogate = _surrogate(spec, prepared, unit.graph_seed)
        surrogate_order = nettack_order if unit.attack == "nettack" else sga_order
        n = prepared.graph.num_nodes
        order = np.full((prepared.y_new.size, S), -1, dtype=np.int64)
        for i, x, edges, nbs in node_graphs(prepared):
            cand = np.setdiff1d(np.arange(n), nbs)
            with torch.enable_grad():
                order[i] = surrogate_order(surrogate, x, edges(np.empty(0, np.int64)), n,
                                           int(prepared.y_new[i]), cand, S)
        return order

    if cache is None:
        return compute()
    return cache.get("orders", json.dumps([_graph_key(spec, unit), unit.attack, S]), compute)


def run_unit(spec: StudySpec, unit: Unit, cache: UnitCache | None = None) -> pd.DataFrame:
    """The rows of one unit (see :data:`~grb_dist.semantics.spec.ROW_COLUMNS`); a plain
    function (no Ray). Units run with the same ``cache`` share their graphs, trainings and
    surrogate orders (none: a fresh cache, this unit alone)."""
    import torch

    torch.set_num_threads(1)
    cache = cache if cache is not None else UnitCache()
    prepared, model, val_acc = _trained(spec, unit, cache)
    degree = prepared.degree
    steps = node_steps(spec, degree)
    S = int(steps.max()) if steps.size else 0
    graph = prepared.graph
    target_classes: list[np.ndarray | None] = [None]
    if unit.attack == "l2-weak-class":
        target_classes = [np.full(prepared.y_new.size, c) for c in range(graph.num_classes)]
    frames = []
    for target in target_classes:
        rows_mask = np.ones(prepared.y_new.size, dtype=bool) if target is None else prepared.y_new != target
        adaptive = None
        if unit.attack in ADAPTIVE_ATTACKS:
            order = np.full((prepared.y_new.size, S), -1, dtype=np.int64)

            def adaptive(i, x, clean, nbs):
                cand = np.setdiff1d(np.arange(graph.num_nodes), nbs)
                return grbcd_order(model, x, clean, graph.num_nodes, cand, S)
        elif unit.attack in SURROGATE_ATTACKS:
            order = surrogate_orders(spec, unit, prepared, S, cache)
        else:
            # rows whose label is the target class are dropped below; give them another class
            tc = None if target is None else np.where(rows_mask, target, (target + 1) % graph.num_classes)
            order = attack_order(unit.attack, graph.features, graph.labels, prepared.x_new, prepared.y_new,
                                 prepared.nb_node, prepared.nb_base, S, seed=unit.graph_seed, target_class=tc)
        f0, ff, order = f_flips(model, prepared, order, steps, adaptive)
        g0, gf = g_flips(prepared, order)
        valid = (order >= 0).sum(1)
        frame = pd.DataFrame({
            "study": spec.study, "K": float(unit.K), "graph_seed": int(unit.graph_seed), "model": unit.model,
            "attack": unit.attack, "node": np.arange(prepared.y_new.size, dtype=np.int64),
            "target_class": -1 if target is None else int(target[0]),
            "degree": degree.astype(np.int64), "label": prepared.y_new.astype(np.int64),
            "f_clean": f0, "g_clean": g0,
            "g_features": prepared.g_features if prepared.g_features is not None else np.full(f0.size, -1),
            "f_flip": ff, "g_flip": np.where(gf <= np.minimum(steps, valid), gf, np.inf),
            "steps": np.minimum(steps, valid).astype(np.int64), "val_accuracy": val_acc,
        })
        frames.append(frame[rows_mask])
    out = pd.concat(frames, ignore_index=True)
    return out[list(ROW_COLUMNS)]


__all__ = ["NETTACK_SURROGATE", "node_steps", "run_unit", "surrogate_orders", "train_study_model"]
