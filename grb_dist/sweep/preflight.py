"""Preflight checks of a sweep or a training run that need models, attacks or the loaded
graph: budgets against the graph, stored models that load, and a lower bound of the memory
of the largest task against the machine's (or the largest cluster node's). They run after
:func:`grb_dist.sweep.resolve.resolve` and before the run directory is made or Ray starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from grb_dist.core.bounds import check_dataset_ref, check_model_bounds, check_seed
from grb_dist.core.paths import check_writable_dir
from grb_dist.core.resources import TaskMemory, check_memory, machine_memory
from grb_dist.core.errors import ConfigError, StoreError
from grb_dist.core.scenario import scenario as scenario_of
from grb_dist.core.targeted import check_listed, select_targets
from grb_dist.models.memory import GraphShape, estimate_memory, model_size
from grb_dist.sweep.resolve import ResolvedJob

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
    for scenario in map(scenario_of, spec.scenarios):
        for attack in spec.scenario_attacks(scenario):
            if not scenario.injects:
                if not scenario.poisons:  # poisoning's tasks are priced by the plan, on the whole graph
                    attacks.extend((f"{attack}/{s}", spec.difficulties[-1], 0, 0, widths[s]) for s in spec.surrogates)
                continue
            for difficulty in spec.difficulties:
                cfg = resolved.attack(scenario.name, attack, difficulty).config
                max_k = max(max_k, cfg.n_inject)
                for s in spec.surrogates:
                    attacks.append((f"{attack}/{s}", difficulty, cfg.n_inject, cfg.edges_per_node, widths[s]))
    return estimate_memory(g, models, attacks, max_k)


def check_attack_inputs(resolved: ResolvedJob, graph: Any) -> None:
    """Every attack's budget against the graph's targets of each difficulty (empty or
    impossible budgets, implausible feature limits), before anything runs."""
    spec = resolved.job
    for scenario in spec.scenarios:  # a per-target scenario's targets: listed ones exist, none is empty
        selection = spec.target_selection(scenario)
        if selection is not None:
            check_listed(graph, spec.difficulties, selection)
            for d in spec.difficulties:
                if not select_targets(graph, d, selection).size:
                    raise ConfigError(f"{scenario}.targets chooses no target on {d} (none of its test nodes "
                                      f"qualifies); lower min_degree, list nodes of it, or drop {d}")
    for (scenario, attack, difficulty), built in resolved.attacks.items():
        selection = spec.target_selection(scenario)
        targets = graph.targets(difficulty) if selection is None else select_targets(graph, difficulty, selection)
        try:
            built.check_inputs(graph, targets)
        except ConfigError as exc:
            raise ConfigError(f"{scenario} attack {attack} on {difficulty}: {exc}") from None


def attack_inputs(resolved: ResolvedJob, graph: Any) -> dict[tuple[str, str, str], dict[str, str]]:
    """``(scenario, attack, difficulty) -> {file: sha256}`` of the attacks that read files
    beside the graph (``input_digests``: a published set's matrix and attacked-node list),
    each file read and validated now, before the run directory is made or Ray starts. The
    contents enter the perturbations' ids and the run's record
    (:func:`~grb_dist.sweep.cells.run_cells`)."""
    out = {}
    for key, built in resolved.attacks.items():
        digests = getattr(built, "input_digests", None)
        if callable(digests):
            try:
                files = digests(graph)
            except ConfigError as exc:
                raise ConfigError(f"{key[0]} attack {key[1]}: {exc}") from None
            if files:
                out[key] = dict(files)
    return out


def check_injection_sizes(resolved: ResolvedJob, graph: Any) -> None:
    """``n_inject`` at most the graph's node count (the adversarial training's at most its
    training nodes): injecting more nodes than the graph has is no longer a perturbation."""
    spec = resolved.job
    n = graph.num_nodes
    for scenario in (s for s in map(scenario_of, spec.scenarios) if s.injects):
        for attack in spec.scenario_attacks(scenario):
            for difficulty in spec.difficulties:
                k = resolved.attack(scenario.name, attack, difficulty).config.n_inject
                if k > n:
                    raise ConfigError(
                        f"{scenario.attack_kind} {attack} on {difficulty}: n_inject={k:,} exceeds the {n:,} nodes of "
                        f"{graph.name!r}; lower n_inject (GRB budgets inject about 1-3% of N)"
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

    ``tasks``: the run's :class:`~grb_dist.sweep.cells.ModelTask` objects. A damaged,
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


def check_user_forwards(resolved: ResolvedJob, graph: Any) -> None:
    """Every user defense that is a plain ``torch.nn.Module`` (or a factory of one) takes
    ``forward(x, edge_index)`` and returns a row per node: probed on a two-node graph of the
    dataset's first two nodes' features, so a forward with another signature fails here, in
    one line, and not in its first training task after Ray has started. A probe that fails
    otherwise (a graph of two nodes may be too small for a module) is left to the run.
    (Built-in models and :class:`~grb_dist.models.base.GraphModel` subclasses declare their
    interface.)"""
    import torch

    from grb_dist.defenses import build_defense

    job = resolved.job
    x = torch.as_tensor(graph.features[:2], dtype=torch.float32)
    edge_index = torch.tensor([[0, 1], [1, 0]])
    for name in dict.fromkeys((*job.defenses, *job.surrogates)):
        spec = resolved.models[name].spec
        if spec.factory is None or spec.label_propagation:
            continue
        module = build_defense(name, graph, dict(resolved.models[name].params)).eval()
        try:
            with torch.no_grad():
                out = module(x, edge_index)
        except TypeError as exc:  # the call itself does not fit
            raise ConfigError(f"defense {name!r}: forward(x, edge_index) fails: TypeError: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''}; a defense's forward must take the node "
                              "features and the 2 x E edge index and return N x C logits") from None
        except Exception:  # noqa: BLE001 - a graph of two nodes may be too small for it: the run will tell
            continue
        if isinstance(out, torch.Tensor) and tuple(out.shape) != (2, int(graph.num_classes)):
            raise ConfigError(f"defense {name!r} returned shape {tuple(out.shape)} on a two-node graph, expected "
                              f"(2, {int(graph.num_classes)}): one row of class scores per node, one column per class")


# --------------------------------------------------------------------------- commands


def check_sweep(prepared: Any, *, local: bool) -> None:
    """The checks of ``grb-dist sweep`` that need the loaded dataset, after
    :func:`grb_dist.sweep.session.prepare` and before the run directory is locked (made) or
    Ray starts: the run directory can be written, ``n_inject`` fits the graph, stored models
    load, user defenses take ``forward(x, edge_index)``, and (for a local Ray, ``local``) the
    largest task fits this machine's memory."""
    check_writable_dir(prepared.run_dir, "run directory", "--out")
    check_user_forwards(prepared.resolved, prepared.graph)
    check_injection_sizes(prepared.resolved, prepared.graph)
    check_stored_models(prepared.run_dir, prepared.cells.models, prepared.graph)
    if local:
        check_memory(sweep_memory(prepared.resolved, prepared.graph), machine_memory(), "this machine")


def check_train_inputs(dataset: str, model: str, params: Mapping[str, Any], seed: Any) -> None:
    """``grb-dist train``'s values before the dataset is loaded: the dataset reference, the
    seed and the model's sizes (``--hidden``)."""
    from grb_dist.models.grammar import check_name as model_spec
    from grb_dist.models.grammar import model_config

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


__all__ = ["check_at_budget", "check_attack_inputs", "check_injection_sizes", "check_stored_models", "check_sweep",
           "check_train_inputs", "check_train_memory", "check_user_forwards", "sweep_memory"]
