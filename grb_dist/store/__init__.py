"""Run storage: Arrow schemas and atomic per-cell Parquet files."""

from grb_dist.store import schema
from grb_dist.store.parquet import RunStore, atomic_path, read_dir, write_table

__all__ = ["RunStore", "atomic_path", "read_dir", "schema", "write_table"]
