"""Lower bounds of the memory of training, attacking and scoring a model on a graph of a
given shape, from sizes alone (nothing is allocated): the sweep's pre-flight check, the
study's and the training command's use them before any work starts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from grb_dist.core.resources import TaskMemory

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
    from grb_dist.models.grammar import check_name as model_spec
    from grb_dist.models.grammar import model_config

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
    (where ``sweep --plan`` measured a task's peak, a sweep reserves that instead).
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


__all__ = ["GraphShape", "ModelSize", "estimate_memory", "model_size"]
