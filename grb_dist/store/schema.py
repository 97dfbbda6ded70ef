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
  -- :data:`ATTACK_BOARD` / :data:`DEFENSE_BOARD`, one board per scenario and difficulty.
"""

from __future__ import annotations

import pyarrow as pa

#: Hive partition columns of ``scores/`` and ``perturbations/``, outermost first.
PARTITION = ("scenario", "dataset", "difficulty")

SCORES = pa.schema([
    pa.field("cell_id", pa.string(), nullable=False),
    pa.field("config_hash", pa.string(), nullable=False),
    pa.field("perturbation_id", pa.string()),  # null for clean rows
    pa.field("dataset", pa.string(), nullable=False),
    pa.field("dataset_fingerprint", pa.string(), nullable=False),
    pa.field("scenario", pa.string(), nullable=False),
    pa.field("difficulty", pa.string(), nullable=False),
    pa.field("attack", pa.string(), nullable=False),
    pa.field("surrogate", pa.string(), nullable=False),
    pa.field("defense", pa.string(), nullable=False),
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
])

def without_partition(table_schema: pa.Schema) -> pa.Schema:
    """The schema of one file of a hive-partitioned table (the partition columns removed)."""
    return pa.schema([f for f in table_schema if f.name not in PARTITION])


SCORE_FILE = without_partition(SCORES)
PERTURBATION_FILE = without_partition(PERTURBATIONS)

MODELS = pa.schema([
    pa.field("model_id", pa.string(), nullable=False),
    pa.field("role", pa.string(), nullable=False),  # target | surrogate
    pa.field("name", pa.string(), nullable=False),
    pa.field("seed", pa.int64(), nullable=False),
    pa.field("params_json", pa.string(), nullable=False),
    pa.field("train_json", pa.string(), nullable=False),
    pa.field("best_epoch", pa.int64(), nullable=False),
    pa.field("best_val_accuracy", pa.float64(), nullable=False),
    pa.field("train_seconds", pa.float64(), nullable=False),
    pa.field("version", pa.string(), nullable=False),
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
