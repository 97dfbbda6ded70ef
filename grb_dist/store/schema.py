"""Arrow schemas of the run tables, each defined once.

Tables under a run directory (``RUN_DIR``):

* ``scores/scenario=<s>/dataset=<d>/difficulty=<x>/part-<uuid>.parquet`` -- :data:`SCORES`,
  one row per (attack or ``none``, surrogate, defense, difficulty, repeat), many rows per
  file. The partition columns (:data:`PARTITION`) live in the directory names (hive
  layout), not in the files: :data:`SCORE_FILE` is the schema of one file.
* ``perturbations/scenario=<s>/dataset=<d>/difficulty=<x>/<perturbation_id>.parquet`` --
  :data:`PERTURBATIONS`, one row (and file) per perturbation, with the feature limits the
  attack used. An injection (``scenario=injection``): features of the injected nodes
  flattened row-major (``n_inject * num_features`` float32) and the injected edges as two
  int64 lists (``edge_src`` holds injected node ids in ``[num_original, num_original +
  n_inject)``, ``edge_dst`` the other endpoint); ``node_ids`` and ``removed_*`` empty. A
  modification (``scenario=modification``, ``n_inject`` 0): ``edge_src``/``edge_dst`` the
  added pairs, ``removed_src``/``removed_dst`` the removed edges (smaller id first, sorted),
  ``node_ids`` the nodes whose features change and ``features`` their new rows.
* ``models/<name>-<seed>.pt`` (state_dicts) and ``training/<name>-<seed>.parquet`` --
  :data:`MODELS`, one row of training metadata per trained model.
* ``leaderboard/<scenario>/attacks-<difficulty>.parquet`` / ``defenses-<difficulty>.parquet``
  -- :data:`ATTACK_BOARD` / :data:`DEFENSE_BOARD`, one board per scenario and difficulty;
  ``robustness-<difficulty>.parquet`` / ``transfer-<difficulty>.parquet`` --
  :data:`ROBUSTNESS_BOARD` / :data:`TRANSFER_BOARD`, only for a scenario with adaptive
  (white-box) rows (the transfer matrix also for one with several surrogates).

The rows the sweep writes are built here too (:func:`score_row`, :func:`perturbation_meta`,
:func:`model_meta`), and every row and the manifest get the writer's version from
:func:`stamped`, the one place it is written.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Mapping

import pyarrow as pa

from grb_dist.core.config import canonical_json
from grb_dist.core.version import __version__

#: Hive partition columns of ``scores/`` and ``perturbations/``, outermost first.
PARTITION = ("scenario", "dataset", "difficulty")


def added_column(name: str, default: str) -> pa.Field:
    """A string column added after runs were first written: files without it read as
    ``default`` (:func:`grb_dist.store.parquet.read_partitioned_file`)."""
    return pa.field(name, pa.string(), nullable=False, metadata={b"default": default.encode()})


def added_list_column(name: str, item: pa.DataType) -> pa.Field:
    """A list column added after runs were first written: files without it read as empty
    lists."""
    return pa.field(name, pa.list_(item), nullable=False, metadata={b"default": b"[]"})


#: ``transfer`` (a surrogate the attacker trained itself) or ``adaptive`` (the defense
#: itself); rows and perturbations written before adaptive cells existed are transfer.
THREAT = added_column("threat", "transfer")
#: A per-target scenario's score row, per target (the same order): its node id, the
#: defense's prediction there and its margin (``logit[label] - max other logit``, negative
#: when misclassified); empty in the other scenarios' rows.
TARGET_COLUMNS = (added_list_column("target_nodes", pa.int64()), added_list_column("target_predictions", pa.int64()),
                  added_list_column("target_margins", pa.float64()))
#: A per-target scenario's perturbation: its targets (empty in the other scenarios').
TARGETS = added_list_column("targets", pa.int64())
#: An influencer attack's perturbation: the target of each removed and added pair (empty for
#: a direct one, whose pairs start at their target, and in the other scenarios').
PAIR_TARGETS = (added_list_column("removed_by", pa.int64()), added_list_column("added_by", pa.int64()))
#: The added columns' defaults, for rows written without them.
ADDED_DEFAULTS: dict[str, Any] = {THREAT.name: "transfer", TARGETS.name: [], **{f.name: [] for f in TARGET_COLUMNS},
                                  **{f.name: [] for f in PAIR_TARGETS}}

SCORES = pa.schema([
    pa.field("cell_id", pa.string(), nullable=False),
    pa.field("config_hash", pa.string(), nullable=False),
    pa.field("perturbation_id", pa.string()),  # null for clean rows
    pa.field("dataset", pa.string(), nullable=False),
    pa.field("dataset_fingerprint", pa.string(), nullable=False),
    pa.field("scenario", pa.string(), nullable=False),
    pa.field("difficulty", pa.string(), nullable=False),
    pa.field("attack", pa.string(), nullable=False),
    pa.field("surrogate", pa.string(), nullable=False),  # adaptive rows: the defense itself
    pa.field("defense", pa.string(), nullable=False),
    THREAT,
    pa.field("repeat", pa.int32(), nullable=False),
    pa.field("seed", pa.int64(), nullable=False),  # attack seed (the job seed for clean rows)
    pa.field("defense_seed", pa.int64(), nullable=False),
    pa.field("accuracy", pa.float64(), nullable=False),
    pa.field("n_targets", pa.int64(), nullable=False),
    pa.field("n_injected", pa.int64(), nullable=False),
    pa.field("n_injected_edges", pa.int64(), nullable=False),
    pa.field("n_edges_added", pa.int64(), nullable=False),  # injected edges, or pairs a modification connects
    pa.field("n_edges_removed", pa.int64(), nullable=False),  # modification only
    pa.field("n_nodes_modified", pa.int64(), nullable=False),  # nodes whose features a modification changes
    pa.field("attack_seconds", pa.float64(), nullable=False),  # 0 for clean rows
    pa.field("score_seconds", pa.float64(), nullable=False),
    pa.field("defense_train_seconds", pa.float64(), nullable=False),
    pa.field("version", pa.string(), nullable=False),
    pa.field("created_at", pa.timestamp("ms", tz="UTC"), nullable=False),
    *TARGET_COLUMNS,
])

PERTURBATIONS = pa.schema([
    pa.field("perturbation_id", pa.string(), nullable=False),
    pa.field("config_hash", pa.string(), nullable=False),
    pa.field("scenario", pa.string(), nullable=False),
    pa.field("dataset", pa.string(), nullable=False),
    pa.field("dataset_fingerprint", pa.string(), nullable=False),
    pa.field("difficulty", pa.string(), nullable=False),
    pa.field("attack", pa.string(), nullable=False),
    pa.field("surrogate", pa.string(), nullable=False),
    THREAT,
    pa.field("repeat", pa.int32(), nullable=False),
    pa.field("seed", pa.int64(), nullable=False),
    pa.field("params_json", pa.string(), nullable=False),
    pa.field("feat_lim_min", pa.float64(), nullable=False),  # the resolved limits the attack used
    pa.field("feat_lim_max", pa.float64(), nullable=False),
    pa.field("num_original", pa.int64(), nullable=False),
    pa.field("n_inject", pa.int64(), nullable=False),
    pa.field("num_features", pa.int64(), nullable=False),
    pa.field("features", pa.list_(pa.float32()), nullable=False),
    pa.field("edge_src", pa.list_(pa.int64()), nullable=False),
    pa.field("edge_dst", pa.list_(pa.int64()), nullable=False),
    pa.field("node_ids", pa.list_(pa.int64()), nullable=False),  # modification: nodes of the feature rows
    pa.field("removed_src", pa.list_(pa.int64()), nullable=False),  # modification: removed edges
    pa.field("removed_dst", pa.list_(pa.int64()), nullable=False),
    pa.field("attack_seconds", pa.float64(), nullable=False),
    pa.field("version", pa.string(), nullable=False),
    TARGETS,
    *PAIR_TARGETS,
])

def without_partition(table_schema: pa.Schema) -> pa.Schema:
    """The schema of one file of a hive-partitioned table (the partition columns removed)."""
    return pa.schema([f for f in table_schema if f.name not in PARTITION])


SCORE_FILE = without_partition(SCORES)
PERTURBATION_FILE = without_partition(PERTURBATIONS)

#: One row per task of a sweep invocation, written by the driver when the invocation ends
#: (``timeline/<invocation>.parquet``): ``finished`` is when the driver collected the
#: result, ``started`` that minus the seconds the worker measured (queueing in Ray is not
#: counted). ``stage``: train, attack or score; ``task``: what it computed, in words;
#: ``worker``: the actor that ran it (``device:<i>``, a GPU cluster's device worker, or
#: ``scorer:<i>``), null for a Ray task (and in timelines written before it was recorded).
#: Memory, in bytes (null where it was not measured, and in timelines written before it
#: was): ``peak_memory``, the largest resident set of the process that ran the task while
#: it ran (a Ray worker's or actor's: its imports and the graph included; Linux), and
#: ``peak_gpu_memory`` the most GPU memory torch reserved in it meanwhile;
#: ``reserved_memory`` and ``reserved_gpu_memory``, what the task reserved of Ray (a call
#: of a device worker or a Scorer: what its actor reserves).
TIMELINE = pa.schema([
    pa.field("invocation", pa.string(), nullable=False),
    pa.field("stage", pa.string(), nullable=False),
    pa.field("task", pa.string(), nullable=False),
    pa.field("started", pa.timestamp("ms", tz="UTC"), nullable=False),
    pa.field("finished", pa.timestamp("ms", tz="UTC"), nullable=False),
    pa.field("worker", pa.string(), nullable=True),
    pa.field("peak_memory", pa.int64(), nullable=True),
    pa.field("peak_gpu_memory", pa.int64(), nullable=True),
    pa.field("reserved_memory", pa.int64(), nullable=True),
    pa.field("reserved_gpu_memory", pa.int64(), nullable=True),
])

MODELS = pa.schema([
    pa.field("model_id", pa.string(), nullable=False),
    pa.field("role", pa.string(), nullable=False),  # target | surrogate | poisoned
    pa.field("name", pa.string(), nullable=False),
    pa.field("seed", pa.int64(), nullable=False),
    pa.field("params_json", pa.string(), nullable=False),
    pa.field("train_json", pa.string(), nullable=False),
    pa.field("best_epoch", pa.int64(), nullable=False),
    pa.field("best_val_accuracy", pa.float64(), nullable=False),
    pa.field("train_seconds", pa.float64(), nullable=False),
    pa.field("version", pa.string(), nullable=False),
    # how the training ended (null in runs made before they were recorded): the epochs it
    # ran and why it stopped: "patience" (early stopping), "epochs" (its last epoch) or
    # "untrained" (nothing to train: label propagation, a module scored as given)
    pa.field("epochs_run", pa.int64()),
    pa.field("stop_reason", pa.string()),
])

_STATS = [
    pa.field("rank", pa.int64(), nullable=False),
    pa.field("average_mean", pa.float64(), nullable=False),
    pa.field("average_std", pa.float64(), nullable=False),
]

ATTACK_BOARD = pa.schema([
    pa.field("scenario", pa.string(), nullable=False),
    pa.field("difficulty", pa.string(), nullable=False),
    pa.field("attack", pa.string(), nullable=False),
    pa.field("surrogate", pa.string(), nullable=False),
    *_STATS,
    pa.field("avg_3_max_mean", pa.float64(), nullable=False),
    pa.field("avg_3_max_std", pa.float64(), nullable=False),
    pa.field("weighted_mean", pa.float64(), nullable=False),
    pa.field("weighted_std", pa.float64(), nullable=False),
    pa.field("n_defenses", pa.int64(), nullable=False),
    pa.field("n_repeats", pa.int64(), nullable=False),
])

DEFENSE_BOARD = pa.schema([
    pa.field("scenario", pa.string(), nullable=False),
    pa.field("difficulty", pa.string(), nullable=False),
    pa.field("defense", pa.string(), nullable=False),
    *_STATS,
    pa.field("avg_3_min_mean", pa.float64(), nullable=False),
    pa.field("avg_3_min_std", pa.float64(), nullable=False),
    pa.field("weighted_mean", pa.float64(), nullable=False),
    pa.field("weighted_std", pa.float64(), nullable=False),
    pa.field("clean_accuracy", pa.float64()),
    pa.field("n_attacks", pa.int64(), nullable=False),
    pa.field("n_repeats", pa.int64(), nullable=False),
])


#: Transfer vs adaptive, one row per defense (``grb_dist.leaderboard.rank.robustness_board``):
#: worst cases over the transfer (attack, surrogate) pairs and over the defense's adaptive
#: attacks, each a mean over repeats; a missing side is null.
ROBUSTNESS_BOARD = pa.schema([
    pa.field("scenario", pa.string(), nullable=False),
    pa.field("difficulty", pa.string(), nullable=False),
    pa.field("defense", pa.string(), nullable=False),
    pa.field("rank", pa.int64(), nullable=False),
    pa.field("clean_accuracy", pa.float64()),
    pa.field("transfer_accuracy", pa.float64()),
    pa.field("transfer_attack", pa.string()),  # "pgd from gcn"
    pa.field("adaptive_accuracy", pa.float64()),
    pa.field("adaptive_attack", pa.string()),
    pa.field("gap", pa.float64()),  # transfer_accuracy - adaptive_accuracy
    pa.field("robust_accuracy", pa.float64()),  # min(transfer_accuracy, adaptive_accuracy)
    pa.field("n_transfer", pa.int64(), nullable=False),  # (attack, surrogate) pairs
    pa.field("n_adaptive", pa.int64(), nullable=False),  # attacks with adaptive rows
    pa.field("note", pa.string(), nullable=False),
])

#: The transfer matrix in long form (``grb_dist.leaderboard.rank.transfer_board``): per
#: surrogate (and the row ``adaptive``: each defense attacked through itself) and defense,
#: the mean accuracy over that surrogate's attacks (each a mean over repeats).
#: A per-target scenario's board: per (attack, surrogate, defense) on one difficulty, the
#: accuracy on the targets and the attack's success rate (of the targets the defense
#: classifies correctly on the clean graph, the share it misclassifies after the attack:
#: margin above 0 before, at most 0 after), the mean margin after the attack, the clean
#: accuracy on the same targets.
TARGET_BOARD = pa.schema([
    pa.field("scenario", pa.string(), nullable=False),
    pa.field("difficulty", pa.string(), nullable=False),
    pa.field("attack", pa.string(), nullable=False),
    pa.field("surrogate", pa.string(), nullable=False),
    pa.field("defense", pa.string(), nullable=False),
    pa.field("rank", pa.int64(), nullable=False),
    pa.field("clean_accuracy", pa.float64()),
    pa.field("accuracy_mean", pa.float64(), nullable=False),
    pa.field("accuracy_std", pa.float64(), nullable=False),
    pa.field("success_mean", pa.float64()),
    pa.field("success_std", pa.float64()),
    pa.field("margin_mean", pa.float64()),
    pa.field("n_targets", pa.int64(), nullable=False),
    pa.field("n_repeats", pa.int64(), nullable=False),
])

TRANSFER_BOARD = pa.schema([
    pa.field("scenario", pa.string(), nullable=False),
    pa.field("difficulty", pa.string(), nullable=False),
    pa.field("surrogate", pa.string(), nullable=False),
    pa.field("defense", pa.string(), nullable=False),
    pa.field("accuracy_mean", pa.float64(), nullable=False),
    pa.field("n_attacks", pa.int64(), nullable=False),
])


# --------------------------------------------------------------------------- rows


def stamped(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with the ``version`` of grb-dist that writes it."""
    return {**row, "version": __version__}


def score_row(cell: Any, *, config_hash: str, dataset: str, dataset_fingerprint: str, defense_seed: int,
              result: Mapping[str, Any], sizes: Mapping[str, int], attack_seconds: float,
              created_at: dt.datetime | None = None) -> dict[str, Any]:
    """One row of :data:`SCORES`: ``cell`` scored, with ``result`` (the scorer's
    ``accuracy``, ``n_targets``, ``score_seconds``, ``defense_train_seconds``) and the
    perturbation's ``sizes`` (``n_injected`` ... ``n_nodes_modified``); ``created_at``
    defaults to now (UTC)."""
    return stamped({
        "cell_id": cell.cell_id, "config_hash": config_hash, "perturbation_id": cell.perturbation_id,
        "dataset": dataset, "dataset_fingerprint": dataset_fingerprint, "scenario": cell.scenario,
        "difficulty": cell.difficulty, "attack": cell.attack, "surrogate": cell.surrogate, "defense": cell.defense,
        "threat": cell.threat, "repeat": cell.repeat, "seed": cell.seed,
        "defense_seed": defense_seed, "accuracy": float(result["accuracy"]), "n_targets": int(result["n_targets"]),
        **sizes, "attack_seconds": float(attack_seconds),
        "score_seconds": float(result["score_seconds"]), "defense_train_seconds": float(result["defense_train_seconds"]),
        "created_at": created_at or dt.datetime.now(dt.timezone.utc),
        **{f.name: list(result.get(f.name, ())) for f in TARGET_COLUMNS},
    })


def perturbation_meta(cell: Any, *, config_hash: str, dataset: str, dataset_fingerprint: str,
                      feat_lim_min: float, feat_lim_max: float, attack_seconds: float) -> dict[str, Any]:
    """The attack's columns of a :data:`PERTURBATIONS` row (the store adds the
    perturbation's own: its id, sizes and the version). ``params_json`` is the canonical
    JSON of the attack's parameters, the form its cell id hashes."""
    return {
        "config_hash": config_hash, "scenario": cell.scenario, "dataset": dataset,
        "dataset_fingerprint": dataset_fingerprint, "difficulty": cell.difficulty,
        "attack": cell.attack, "surrogate": cell.surrogate, "threat": cell.threat, "repeat": cell.repeat,
        "seed": cell.seed, "params_json": canonical_json(cell.params), "feat_lim_min": feat_lim_min, "feat_lim_max": feat_lim_max,
        "attack_seconds": attack_seconds,
    }


def model_meta(task: Any, *, best_epoch: int, best_val_accuracy: float, train_seconds: float,
               epochs_run: int | None = None, stop_reason: str | None = None) -> dict[str, Any]:
    """A :data:`MODELS` row but its version (the store stamps it when it writes the model).
    ``params_json`` and ``train_json`` are canonical JSON, like every ``*_json`` column (rows
    of older runs hold ``json.dumps(sort_keys=True)`` text: the same content, other
    whitespace)."""
    return {
        "model_id": task.model_id, "role": task.role, "name": task.name, "seed": task.seed,
        "params_json": canonical_json(dict(task.params)),
        "train_json": canonical_json(dict(task.train)),
        "best_epoch": int(best_epoch), "best_val_accuracy": float(best_val_accuracy),
        "train_seconds": train_seconds, "epochs_run": epochs_run, "stop_reason": stop_reason,
    }
