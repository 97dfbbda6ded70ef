"""Parquet files of a run directory: atomic table writes and the hive-partitioned tables.

``scores/`` and ``perturbations/`` are hive-partitioned (``scenario=<s>/dataset=<d>/
difficulty=<x>/``, :data:`grb_dist.store.schema.PARTITION`): the partition columns live in
the directory names, not in the files, so ``pandas.read_parquet``, ``pyarrow.dataset`` and
DuckDB read a table in one call. grb-dist's own reader (:func:`scan_partitioned`) opens file
by file: a torn, truncated or foreign file is reported and skipped, never counted.
"""

from __future__ import annotations

import json

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from grb_dist.core.fileio import atomic_path
from grb_dist.core.text import plural
import grb_dist.store.schema as schema


def write_table(table: pa.Table, path: Path, *, sync_dir: bool = False) -> None:
    """Write ``table`` to ``path`` atomically."""
    with atomic_path(path, sync_dir=sync_dir) as tmp:
        pq.write_table(table, tmp)


def read_dir(directory: Path, table_schema: pa.Schema) -> pd.DataFrame:
    """All visible ``*.parquet`` files of a flat ``directory`` as one DataFrame (empty with
    the schema's columns when there are none)."""
    files = sorted(p for p in Path(directory).glob("*.parquet") if not p.name.startswith("."))
    if not files:
        return table_schema.empty_table().to_pandas()
    tables = [pq.read_table(f, schema=table_schema) for f in files]
    return pa.concat_tables(tables).to_pandas()


# --------------------------------------------------------------------------- partitions


def safe_label(value: str) -> str:
    """A partition value that is a plain directory name (letters, digits, ``. _ + -``)."""
    label = re.sub(r"[^A-Za-z0-9._+-]", "_", str(value)).strip("._") or "dataset"
    return label[:100]


def partition_path(base: Path, scenario: str, dataset: str, difficulty: str) -> Path:
    return Path(base) / f"scenario={scenario}" / f"dataset={dataset}" / f"difficulty={difficulty}"


def visible_files(base: Path) -> list[Path]:
    """The regular ``*.parquet`` files under ``base`` whose path has no hidden or ``_``
    component (the files pyarrow.dataset, and so pandas, read), found without following
    symlinks; everything else pandas would read is in :func:`foreign_entries`."""
    return table_entries(base)[0]


def foreign_entries(base: Path) -> list[tuple[Path, str]]:
    """What pandas would read under ``base`` that is not a regular ``.parquet`` file:
    symlinks (to files or directories: never followed), FIFOs and devices, other files;
    with the reason of each."""
    return table_entries(base)[1]


def table_entries(base: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """``(parquet files, foreign entries)`` under ``base`` (see :func:`visible_files`)."""
    files: list[Path] = []
    foreign: list[tuple[Path, str]] = []
    base = Path(base)
    if base.is_symlink() or not base.is_dir():
        return files, foreign
    for directory, dirs, names in os.walk(base, followlinks=False):
        here = Path(directory)
        for d in list(dirs):
            if d.startswith((".", "_")):
                dirs.remove(d)
            elif (here / d).is_symlink():
                dirs.remove(d)
                foreign.append((here / d, "a symlink to a directory (never followed)"))
        for name in names:
            if name.startswith((".", "_")):
                continue
            p = here / name
            mode = os.lstat(p).st_mode
            if stat.S_ISLNK(mode):
                foreign.append((p, "a symlink (never followed)"))
            elif not stat.S_ISREG(mode):
                foreign.append((p, "not a regular file"))
            elif not name.endswith(".parquet"):
                foreign.append((p, "not a Parquet file"))
            else:
                files.append(p)
    return sorted(files), sorted(foreign)


def partition_of(base: Path, path: Path) -> dict[str, str]:
    """The partition values of ``path`` (raises ValueError when it is not in the layout)."""
    parts = path.relative_to(base).parts
    if len(parts) != len(schema.PARTITION) + 1:
        raise ValueError(f"not in the {'/'.join(k + '=...' for k in schema.PARTITION)}/ layout")
    values = {}
    for key, part in zip(schema.PARTITION, parts[:-1]):
        k, sep, v = part.partition("=")
        if k != key or not sep or not v:
            raise ValueError(f"directory {part!r} is not {key}=<value>")
        values[key] = v
    return values


def read_partitioned_file(base: Path, path: Path, file_schema: pa.Schema, full_schema: pa.Schema,
                           columns: Sequence[str] | None = None) -> pa.Table:
    """One file of a partitioned table with its partition columns, in ``full_schema``'s
    column order; raises on a torn file or a schema that is not ours."""
    values = partition_of(base, path)
    pf = pq.ParquetFile(path)
    have = pf.schema_arrow
    added = {}  # columns added after the file was written: their default
    for f in file_schema:
        if f.name not in have.names:
            if f.metadata and b"default" in f.metadata:
                default = f.metadata[b"default"].decode()
                added[f.name] = json.loads(default) if pa.types.is_list(f.type) else default
                continue
            raise ValueError(f"no column {f.name!r} (not a grb-dist file)")
        if not have.field(f.name).type.equals(f.type):
            raise ValueError(f"column {f.name!r} is {have.field(f.name).type}, expected {f.type}")
    wanted = [f.name for f in file_schema if (columns is None or f.name in columns) and f.name not in added]
    t = pf.read(columns=wanted)
    n = t.num_rows
    arrays, fields = [], []
    for f in full_schema:
        if columns is not None and f.name not in columns:
            continue
        if f.name in values or f.name in added:
            arrays.append(pa.array([values.get(f.name, added.get(f.name))] * n, type=f.type))
        else:
            arrays.append(t.column(f.name).cast(f.type))
        fields.append(f)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def check_magic(path: Path) -> None:
    """Raise ValueError unless ``path`` starts and ends with the Parquet magic ``PAR1``."""
    with open(path, "rb") as fh:
        head = fh.read(4)
        fh.seek(0, os.SEEK_END)
        if fh.tell() < 12:
            raise ValueError("too short for a Parquet file (truncated)")
        fh.seek(-4, os.SEEK_END)
        tail = fh.read(4)
    if head != b"PAR1" or tail != b"PAR1":
        raise ValueError("no Parquet magic at both ends (truncated or not Parquet)")


@dataclass
class Scan:
    """The readable rows of a partitioned table and the files that could not be read."""

    table: pa.Table
    files: list[Path]
    bad: list[tuple[Path, str]] = field(default_factory=list)
    duplicates: int = 0

    def warnings(self, root: Path) -> list[str]:
        out = [f"skipped {p.relative_to(root) if p.is_relative_to(root) else p}: {reason}" for p, reason in self.bad]
        if self.duplicates:
            out.append(f"{plural(self.duplicates, 'duplicate row')} (an interrupted compaction) counted once")
        return out


def scan_partitioned(base: Path, file_schema: pa.Schema, full_schema: pa.Schema, key: str,
                     columns: Sequence[str] | None = None, verify: Callable[[Path], str | None] | None = None) -> Scan:
    """Read every visible file of a partitioned table, skipping (and reporting) bad files
    and those ``verify`` has a reason against (a checksum that no longer matches); rows
    with a repeated ``key`` are kept once."""
    base = Path(base)
    tables, good, bad = [], [], []
    files, foreign = table_entries(base)
    bad.extend(foreign)
    for path in files:
        reason = verify(path) if verify is not None else None
        if reason:
            bad.append((path, reason))
            continue
        try:
            tables.append(read_partitioned_file(base, path, file_schema, full_schema, columns))
            good.append(path)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is reported, never counted
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            bad.append((path, msg[:200]))
    sch = pa.schema([f for f in full_schema if columns is None or f.name in columns])
    table = pa.concat_tables(tables) if tables else sch.empty_table()
    table, dups = first_of_each(table, key)
    return Scan(table, good, bad, dups)


def first_of_each(table: pa.Table, key: str) -> tuple[pa.Table, int]:
    """``table`` with only the first row of each ``key`` (a hash count first: the usual
    case, no repeated key, costs no sort)."""
    if not table.num_rows or pc.count_distinct(table.column(key)).as_py() == table.num_rows:
        return table, 0
    keys = table.column(key).to_numpy(zero_copy_only=False)
    _, first = np.unique(keys, return_index=True)
    return table.take(pa.array(np.sort(first))), table.num_rows - first.size


__all__ = ["Scan", "check_magic", "first_of_each", "partition_of", "partition_path", "read_dir",
           "foreign_entries", "read_partitioned_file", "safe_label", "scan_partitioned", "table_entries", "visible_files",
           "write_table"]
