"""Run storage: Arrow schemas, the run directory (hive-partitioned Parquet written in
batches by temp file + atomic rename), the writer's lock and dataset fingerprints."""

from grb_dist.store import schema
from grb_dist.store.fingerprint import fingerprint_parts, graph_fingerprint
from grb_dist.store.lock import RunLock, RunLockedError
from grb_dist.store.parquet import (
    RunStore,
    Scan,
    ScoreWriter,
    read_dir,
    safe_label,
    write_table,
)

__all__ = ["RunLock", "RunLockedError", "RunStore", "Scan", "ScoreWriter", "fingerprint_parts",
           "graph_fingerprint", "read_dir", "safe_label", "schema", "write_table"]
