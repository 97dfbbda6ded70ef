"""Preflight checks of a sweep or a training run that need models, attacks or the loaded
graph: budgets against the graph, stored models that load, and a lower bound of the memory
of the largest task against the machine's (or the largest cluster node's). They run after
:func:`grb_dist.sweep.resolve.resolve` and before the run directory is made or Ray starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from grb_dist.core.checks import (
    TaskMemory, check_dataset_ref, check_memory, check_model_bounds, check_seed, check_writable_dir, machine_memory,
)
from grb_dist.core.errors import ConfigError, StoreError
from grb_dist.sweep.resolve import ResolvedJob

_F = 4  # bytes of a float32
_I = 8  # bytes of an int64


@dataclass(frozen=True)
class GraphShape:
    """The sizes of a graph that memory depends on."""

    num_nodes: int
    num_edges: int  # undirected
    num_features: int
    num_classes: int
    n_train: int
    n_val: int
    targets: Mapping[str, int]  # difficulty -> number of target nodes

    @classmethod
    def of(cls, graph: Any) -> "GraphShape":
        split = graph.split
        return cls(graph.num_nodes, graph.num_edges, graph.num_features, int(graph.num_classes),
                   int(split["train"].size) if "train" in split else graph.num_nodes,
                   int(split["val"].size) if "val" in split else 0,
                   {k[5:]: int(v.size) for k, v in split.items() if k.startswith("test_")})


def _graph_bytes(g: GraphShape) -> int:
    # features, both directions of every edge (2 x 2E int64), labels
    return g.num_nodes * g.num_features * _F + 4 * g.num_edges * _I + g.num_nodes * _I


@dataclass(frozen=True)
class ModelSize:
    """What a model's memory grows with: the output widths of its hidden layers (attention
    heads concatenated), the weight matrices and inputs every layer holds (``copies``: k + 1
    for a k-hop polynomial filter) and more floats kept per node (``per_node``); see
    :meth:`grb_dist.models.base.ModelConfig.footprint`."""

    widths: tuple[int, ...]
    copies: int = 1
    per_node: int = 0


def model_size(name: str, params: Mapping[str, Any], num_classes: int = 2) -> ModelSize:
    """The :class:`ModelSize` of model ``name`` built with ``params``; no layers for label
    propagation."""
    from grb_dist.models.registry import check_name as model_spec
    from grb_dist.models.registry import model_config

    if model_spec(name).uses_train_labels:
        return ModelSize(())
    config = model_config(name, {k: v for k, v in dict(params).items() if k != "lp"})
    heads = int(getattr(config, "heads", 1) or 1)
    footprint = getattr(config, "footprint", None)
    copies, per_node = footprint(num_classes) if callable(footprint) else (1, 0)
    return ModelSize(tuple(int(h) * heads for h in getattr(config, "hidden_sizes", ())), int(copies), int(per_node))


def _size(model: "ModelSize | Iterable[int]") -> ModelSize:
    return model if isinstance(model, ModelSize) else ModelSize(tuple(model))


def _weights(m: ModelSize, d: int, c: int) -> int:
    dims = [d, *m.widths, c]
    return m.copies * sum(a * b + b for a, b in zip(dims, dims[1:]))


def _pass(nodes: int, d: int, m: ModelSize, c: int, *, grad: bool) -> int:
    """Activations of one full-batch pass over ``nodes`` nodes: the input, and for every layer
    its output; when ``grad``, two tensors per layer kept for the backward pass, every layer's
    input ``copies`` times and the model's own ``per_node`` floats (without gradients, hops
    are transient)."""
    if grad:
        inputs = (m.copies - 1) * (d + sum(m.widths))
        return nodes * (d + 2 * sum(m.widths) + 2 * c + inputs + m.per_node) * _F
    return nodes * (d + 2 * max([*m.widths, c])) * _F


def estimate_memory(
    g: GraphShape,
    models: Iterable[tuple[str, "ModelSize | list[int]", Mapping[str, Any] | None]],
    attacks: Iterable[tuple[str, str, int, int, "ModelSize | list[int]"]],
    max_n_inject: int = 0,
) -> list[TaskMemory]:
    """Lower bounds of the memory of every kind of task of a sweep, largest first.

    Args:
        g: the graph's sizes.
        models: ``(name, size, adversarial-training budget or None)`` of every model trained
            (defenses and surrogates); ``size``: a :class:`ModelSize` or hidden widths.
        attacks: ``(label, difficulty, n_inject, edges_per_node, surrogate size)`` of every
            attack cell kind.
        max_n_inject: the largest injection any Scorer evaluates.

    A task holds at least the graph's arrays; training keeps every layer's activations of
    the training subgraph and four copies of the weights (weights, gradients, two Adam
    moments); an attack holds its injected features (value, gradient, optimiser state), its
    injected edges and the surrogate's activations on targets + injected nodes; a Scorer runs
    inference on the whole perturbed graph. Sparse propagation structures, PyG's per-edge
    messages, framework overhead and allocator slack come on top, so real peaks are higher
    (measured: about 1.5x for GCN training at the grb-aminer shape).
    """
    d, c = g.num_features, g.num_classes
    graph = _graph_bytes(g)
    out: list[TaskMemory] = []
    sizes = []
    for name, model, at in models:
        m = _size(model)
        sizes.append(m)
        n = g.n_train
        total = graph + _pass(n, d, m, c, grad=True) + 4 * _weights(m, d, c) * _F
        if at:
            k, e = int(at.get("n_inject", 0)), int(at.get("edges_per_node", 0))
            total += k * d * _F * 3 + 4 * k * e * _I + _pass(k, d, m, c, grad=True)
        widest = max(m.widths, default=0)
        knob = f"the hidden sizes of {name}" + (" and its hops (k)" if m.copies > 1 or m.per_node else "")
        out.append(TaskMemory(total, f"training {name} ({n:,} training nodes, widest layer {widest:,})",
                              knob if widest else "the dataset"))
    for label, difficulty, k, e, surrogate in attacks:
        m = _size(surrogate)
        t = g.targets.get(difficulty, 0)
        total = (graph + k * d * _F * 3 + 4 * k * e * _I + _pass(t + k, d, m, c, grad=True)
                 + _weights(m, d, c) * _F)
        out.append(TaskMemory(total, f"attack {label} on {difficulty} ({k:,} injected nodes x {e:,} edges)",
                              "n_inject / edges_per_node"))
    n = g.num_nodes + max_n_inject
    widest = ModelSize((max((w for m in sizes for w in m.widths), default=0),))
    out.append(TaskMemory(graph + _pass(n, d, widest, c, grad=False),
                          f"scoring on the perturbed graph ({n:,} nodes)", "n_inject or the hidden sizes"))
    return sorted(out, key=lambda m: -m.bytes)


def sweep_memory(resolved: ResolvedJob, graph: Any) -> list[TaskMemory]:
    """:func:`estimate_memory` of a resolved job on its loaded graph."""
    spec = resolved.job
    g = GraphShape.of(graph)
    widths = {}
    models = []
    for name in dict.fromkeys((*spec.defenses, *spec.surrogates)):
        model = resolved.models[name]
        widths[name] = model_size(name, model.params, int(graph.num_classes))
        at = spec.adversarial_training if model.spec.adversarial else None
        models.append((name, widths[name], at))
    attacks = []
    max_k = 0
    # modification attacks hold one graph plus a block of pairs: the injection estimate of
    # the same surrogate with nothing injected bounds them from below
    for attack in spec.modification["attacks"] if "modification" in spec.scenarios else ():
        for s in spec.surrogates:
            attacks.append((f"{attack}/{s}", spec.difficulties[-1], 0, 0, widths[s]))
    for attack in spec.attacks if "injection" in spec.scenarios else ():
        for difficulty in spec.difficulties:
            cfg = resolved.attack("injection", attack, difficulty).config
            max_k = max(max_k, cfg.n_inject)
            for s in spec.surrogates:
                attacks.append((f"{attack}/{s}", difficulty, cfg.n_inject, cfg.edges_per_node, widths[s]))
    return estimate_memory(g, models, attacks, max_k)


def check_attack_inputs(resolved: ResolvedJob, graph: Any) -> None:
    """Every attack's budget against the graph's targets of each difficulty (empty or
    impossible budgets, implausible feature limits), before anything runs."""
    for (scenario, attack, difficulty), built in resolved.attacks.items():
        try:
            built.check_inputs(graph, graph.targets(difficulty))
        except ConfigError as exc:
            raise ConfigError(f"{scenario} attack {attack} on {difficulty}: {exc}") from None


def check_injection_sizes(resolved: ResolvedJob, graph: Any) -> None:
    """``n_inject`` at most the graph's node count (the adversarial training's at most its
    training nodes): injecting more nodes than the graph has is no longer a perturbation."""
    spec = resolved.job
    n = graph.num_nodes
    for attack in spec.attacks if "injection" in spec.scenarios else ():
        for difficulty in spec.difficulties:
            k = resolved.attack("injection", attack, difficulty).config.n_inject
            if k > n:
                raise ConfigError(
                    f"attack {attack} on {difficulty}: n_inject={k:,} exceeds the {n:,} nodes of {graph.name!r}; "
                    "lower n_inject (GRB budgets inject about 1-3% of N)"
                )
    if any(resolved.models[m].spec.adversarial for m in (*spec.defenses, *spec.surrogates)):
        check_at_budget(spec.adversarial_training, graph)


def check_at_budget(at: Mapping[str, Any], graph: Any) -> None:
    """Adversarial training injects at most as many nodes as the graph has training nodes."""
    k = int(at.get("n_inject", 0))
    n_train = int(graph.split["train"].size) if "train" in graph.split else graph.num_nodes
    if k > n_train:
        raise ConfigError(
            f"adversarial_training.n_inject={k:,} exceeds the {n_train:,} training nodes of {graph.name!r}; lower it"
        )


# --------------------------------------------------------------------------- stored models


def check_stored_models(run_dir: str | Path, tasks: Iterable[Any], graph: Any) -> None:
    """Every state_dict a resumed sweep will reuse loads (``weights_only``) into its model.

    ``tasks``: the plan's :class:`~grb_dist.sweep.plan.ModelTask` objects. A damaged,
    tampered or foreign ``models/<name>-<seed>.pt`` is a one-line error naming the file,
    before Ray starts (instead of an unpickling traceback in the middle of the sweep).
    """
    import torch

    from grb_dist.defenses import build_defense
    from grb_dist.models.io import state_dict_from_bytes

    models = Path(run_dir) / "models"
    if not models.is_dir():
        return
    for task in tasks:
        path = models / f"{task.file_stem}.pt"
        if not (path.is_file() and (Path(run_dir) / "training" / f"{task.file_stem}.parquet").is_file()):
            continue  # not stored completely: the sweep trains it again
        fix = f"delete it (and training/{task.file_stem}.parquet) to retrain the model"
        try:
            state = state_dict_from_bytes(path.read_bytes())
        except Exception as exc:  # noqa: BLE001 - any failure of an untrusted file is reported the same way
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
            raise StoreError(f"stored model {path} is damaged or not a state_dict ({type(exc).__name__}: {first}); {fix}") from None
        if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise StoreError(f"stored model {path} is not a state_dict of tensors; {fix}")
        expected = build_defense(task.name, graph, dict(task.params)).state_dict()
        if set(state) != set(expected) or any(tuple(state[k].shape) != tuple(v.shape) for k, v in expected.items()):
            raise StoreError(f"stored model {path} does not fit model {task.name} on this dataset; {fix}")


# --------------------------------------------------------------------------- commands


def check_sweep(prepared: Any, *, local: bool) -> None:
    """The checks of ``grb-dist sweep`` that need the loaded dataset, after
    :func:`grb_dist.sweep.session.prepare` and before the run directory is locked (made) or
    Ray starts: the run directory can be written, ``n_inject`` fits the graph, stored models
    load, and (for a local Ray, ``local``) the largest task fits this machine's memory."""
    check_writable_dir(prepared.run_dir, "run directory", "--out")
    check_injection_sizes(prepared.resolved, prepared.graph)
    check_stored_models(prepared.run_dir, prepared.plan.models, prepared.graph)
    if local:
        check_memory(sweep_memory(prepared.resolved, prepared.graph), machine_memory(), "this machine")


def check_train_inputs(dataset: str, model: str, params: Mapping[str, Any], seed: Any) -> None:
    """``grb-dist train``'s values before the dataset is loaded: the dataset reference, the
    seed and the model's sizes (``--hidden``)."""
    from grb_dist.models.registry import check_name as model_spec
    from grb_dist.models.registry import model_config

    check_dataset_ref(dataset)
    check_seed(seed, "--seed")
    if not model_spec(model).uses_train_labels:
        check_model_bounds(model, model_config(model, {k: v for k, v in params.items() if k != "lp"}))


def check_train_memory(graph: Any, model: str, params: Mapping[str, Any], at: Mapping[str, Any] | None) -> None:
    """Training ``model`` on ``graph`` fits this machine's memory (lower bound), and its
    adversarial training (``at``, for ``_at`` models) fits the graph."""
    if at is not None:
        check_at_budget(at, graph)
    tasks = estimate_memory(GraphShape.of(graph), [(model, model_size(model, params, int(graph.num_classes)), at)], [], 0)
    check_memory([t for t in tasks if t.task.startswith("training")], machine_memory(), "this machine")


__all__ = ["GraphShape", "ModelSize", "check_at_budget", "check_attack_inputs", "check_injection_sizes", "check_stored_models", "check_sweep", "check_train_inputs",
           "check_train_memory", "estimate_memory", "model_size", "sweep_memory"]
