"""Run storage, on grb_dist.core only (no torch): the run directory and its manifest
(:mod:`~grb_dist.store.run`), trained models, perturbations and leaderboards
(:mod:`~grb_dist.store.artifacts`), batched score files and their compaction
(:mod:`~grb_dist.store.scores`), start-up recovery (:mod:`~grb_dist.store.recovery`),
hive-partitioned Parquet (:mod:`~grb_dist.store.parquet`), Arrow schemas and row builders
(:mod:`~grb_dist.store.schema`), the writer's lock and dataset fingerprints."""

from grb_dist.store import schema
from grb_dist.store.fingerprint import fingerprint_parts, graph_fingerprint
from grb_dist.store.lock import RunLock, RunLockedError
from grb_dist.store.parquet import Scan, read_dir, safe_label, write_table
from grb_dist.store.run import RunStore
from grb_dist.store.scores import ScoreWriter

__all__ = ["RunLock", "RunLockedError", "RunStore", "Scan", "ScoreWriter", "fingerprint_parts",
           "graph_fingerprint", "read_dir", "safe_label", "schema", "write_table"]
