"""The run directory: a manifest, hive-partitioned Parquet tables, state_dicts, leaderboards.

Layout::

    RUN_DIR/.lock                            the writer's lock (grb_dist.store.lock)
    RUN_DIR/manifest.json                    dataset identity, what each name means, jobs run
    RUN_DIR/models/<name>-<seed>.pt          state_dict (bytes of grb_dist.models.io: torch.save; load weights_only=True)
    RUN_DIR/training/<name>-<seed>.parquet   training metadata (schema.MODELS)
    RUN_DIR/perturbations/scenario=<s>/dataset=<d>/difficulty=<x>/<perturbation_id>.parquet
    RUN_DIR/scores/scenario=<s>/dataset=<d>/difficulty=<x>/part-<uuid>.parquet
    RUN_DIR/quarantine/...                   unreadable or foreign files moved out of the tables
    RUN_DIR/leaderboard/<scenario>/{attacks,defenses}-<difficulty>.{parquet,md}

Writes: every file is written to a hidden temporary file in its final directory
(``.<name>.tmp-<host>-<pid>-<uuid>``), fsync'd, and moved into place with ``os.replace``
(atomic on POSIX), so a reader sees either no file or a complete one. Score rows are
buffered by the driver (:class:`ScoreWriter`) and written many rows per file.

Reads: ``scores/`` and ``perturbations/`` are hive-partitioned datasets that
``pandas.read_parquet``, ``pyarrow.dataset`` and DuckDB read in one call. grb-dist's own
reader (:meth:`RunStore.scan_scores`) opens file by file: a torn, truncated or foreign file
is reported and skipped (its cells count as not done and are recomputed), never counted.
Whether a cell is done comes from the cell ids of the rows that were read.

Only the holder of the run's lock writes (:class:`grb_dist.store.lock.RunLock`);
:meth:`RunStore.open` requires it and, under it, finishes or undoes an interrupted
compaction, removes temporaries of dead writers and moves bad files to ``quarantine/``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from grb_dist.core.errors import StoreError
from grb_dist.core.fileio import HOST_TAG, atomic_path, fsync_dir, temporary_owner, write_bytes
from grb_dist.core.graph import Injection, Modification
from grb_dist.store import schema
from grb_dist.store.lock import RunLock, pid_alive

log = logging.getLogger(__name__)
T = TypeVar("T")

MANIFEST = "manifest.json"
#: Version of the directory layout; runs of another format are refused, not mixed.
STORE_FORMAT = 3
SUBDIRS = ("models", "training", "perturbations", "scores", "leaderboard")
QUARANTINE = "quarantine"
JOURNAL = ".compact-journal.json"
#: List columns of a perturbation (the rest are its scalar metadata).
_PERTURBATION_ARRAYS = ("features", "edge_src", "edge_dst", "node_ids", "removed_src", "removed_dst")


# --------------------------------------------------------------------------- Parquet files


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


def _visible_files(base: Path) -> list[Path]:
    """``*.parquet`` files under ``base`` whose path has no hidden or ``_`` component (the
    files that pyarrow.dataset, and so pandas, read)."""
    out = []
    if not base.is_dir():
        return out
    for p in base.rglob("*.parquet"):
        rel = p.relative_to(base).parts
        if any(part.startswith((".", "_")) for part in rel):
            continue
        if p.is_file():
            out.append(p)
    return sorted(out)


def _partition_of(base: Path, path: Path) -> dict[str, str]:
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


def _read_partitioned_file(base: Path, path: Path, file_schema: pa.Schema, full_schema: pa.Schema,
                           columns: Sequence[str] | None = None) -> pa.Table:
    """One file of a partitioned table with its partition columns, in ``full_schema``'s
    column order; raises on a torn file or a schema that is not ours."""
    values = _partition_of(base, path)
    pf = pq.ParquetFile(path)
    have = pf.schema_arrow
    for f in file_schema:
        if f.name not in have.names:
            raise ValueError(f"no column {f.name!r} (not a grb-dist file)")
        if not have.field(f.name).type.equals(f.type):
            raise ValueError(f"column {f.name!r} is {have.field(f.name).type}, expected {f.type}")
    wanted = [f.name for f in file_schema if columns is None or f.name in columns]
    t = pf.read(columns=wanted)
    n = t.num_rows
    arrays, fields = [], []
    for f in full_schema:
        if columns is not None and f.name not in columns:
            continue
        if f.name in values:
            arrays.append(pa.array([values[f.name]] * n, type=f.type))
        else:
            arrays.append(t.column(f.name).cast(f.type))
        fields.append(f)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _check_magic(path: Path) -> None:
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
            out.append(f"{self.duplicates} duplicate rows (an interrupted compaction) counted once")
        return out


def scan_partitioned(base: Path, file_schema: pa.Schema, full_schema: pa.Schema, key: str,
                     columns: Sequence[str] | None = None) -> Scan:
    """Read every visible file of a partitioned table, skipping (and reporting) bad files;
    rows with a repeated ``key`` are kept once."""
    base = Path(base)
    tables, good, bad = [], [], []
    for path in _visible_files(base):
        try:
            tables.append(_read_partitioned_file(base, path, file_schema, full_schema, columns))
            good.append(path)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is reported, never counted
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            bad.append((path, msg[:200]))
    sch = pa.schema([f for f in full_schema if columns is None or f.name in columns])
    table = pa.concat_tables(tables) if tables else sch.empty_table()
    table, dups = _first_of_each(table, key)
    return Scan(table, good, bad, dups)


def _first_of_each(table: pa.Table, key: str) -> tuple[pa.Table, int]:
    """``table`` with only the first row of each ``key`` (a hash count first: the usual
    case, no repeated key, costs no sort)."""
    if not table.num_rows or pc.count_distinct(table.column(key)).as_py() == table.num_rows:
        return table, 0
    keys = table.column(key).to_numpy(zero_copy_only=False)
    _, first = np.unique(keys, return_index=True)
    return table.take(pa.array(np.sort(first))), table.num_rows - first.size


# --------------------------------------------------------------------------- manifest


def _diff_keys(a: Any, b: Any) -> str:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        return ", ".join(f"{k}: {json.dumps(a.get(k))} in the run vs {json.dumps(b.get(k))}" for k in keys[:3])
    return f"{json.dumps(a)} in the run vs {json.dumps(b)}"


def compatibility_error(manifest: Mapping[str, Any], dataset: Mapping[str, Any],
                        components: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Why a run directory with ``manifest`` cannot take cells of this job (None if it can).

    The dataset must be the same by content (fingerprint: features, edges, labels, split,
    normalisation); every name the run already knows (a model, an attack on a difficulty,
    the job seed) must mean the same. New names (attacks, defenses, surrogates,
    difficulties, repeats) are welcome: they add cells.
    """
    if manifest.get("store_format") != STORE_FORMAT:
        return (f"it was written by grb-dist {manifest.get('version', '< 0.2')} in an older layout "
                f"(store format {manifest.get('store_format', 1)}, this is {STORE_FORMAT})")
    have = manifest.get("dataset", {})
    if have.get("fingerprint") != dataset.get("fingerprint"):
        parts = have.get("parts", {})
        diff = [k for k in ("features", "edges", "labels", "split") if parts.get(k) != dataset.get("parts", {}).get(k)]
        what = []
        if have.get("normalize") != dataset.get("normalize"):
            what.append(f"normalisation {have.get('normalize')} vs {dataset.get('normalize')}")
        if diff:
            what.append(f"its {', '.join(diff)} differ")
        return (f"it holds another dataset ({have.get('source')}, fingerprint {str(have.get('fingerprint'))[:12]}; "
                f"this job's {dataset.get('source')} has {str(dataset.get('fingerprint'))[:12]}: "
                f"{'; '.join(what) or 'its content differs'})")
    known = manifest.get("components", {})
    for kind, entries in components.items():
        for name, value in entries.items():
            old = known.get(kind, {}).get(name)
            if old is not None and old != value:
                return f"{kind} {name} has other settings there ({_diff_keys(old, value)})"
    return None


def merged_components(manifest: Mapping[str, Any] | None, components: Mapping[str, Mapping[str, Any]]) -> dict:
    out = {k: dict(v) for k, v in (manifest or {}).get("components", {}).items()}
    for kind, entries in components.items():
        out.setdefault(kind, {}).update(entries)
    return out


# --------------------------------------------------------------------------- the store


class RunStore:
    """Reads and writes one run directory. A writer is created with :meth:`open` (under the
    run's lock); readers use :meth:`existing`."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._pert_index: dict[str, Path] | None = None

    # ---------------------------------------------------------------- manifest

    @staticmethod
    def read_manifest(root: str | Path) -> dict[str, Any] | None:
        """The manifest of ``root`` (None when there is none); StoreError when unreadable."""
        manifest = Path(root) / MANIFEST
        if not manifest.is_file():
            return None
        try:
            return json.loads(manifest.read_text())
        except (OSError, ValueError):
            raise StoreError(f"{manifest} is unreadable; remove {root} or choose another --out") from None

    @classmethod
    def check(cls, root: str | Path, dataset: Mapping[str, Any],
              components: Mapping[str, Mapping[str, Any]]) -> bool:
        """Whether ``root`` may hold cells of this job; True when it already holds a run
        (it grows or resumes), False when it is new. Writes nothing.

        Raises :class:`StoreError` with the reason when the run there is incompatible, or
        when ``root`` is a non-empty directory that is not a run.
        """
        root = Path(root)
        data = cls.read_manifest(root)
        if data is not None:
            why = compatibility_error(data, dataset, components)
            if why:
                raise StoreError(f"{root} cannot take this job: {why}; choose another --out or keep the run's settings")
            return True
        if root.exists() and (not root.is_dir() or any(p.name != ".lock" for p in root.iterdir())):
            raise StoreError(f"{root} exists and is not a grb-dist run directory; choose another --out")
        return False

    @classmethod
    def open(cls, root: str | Path, *, dataset: Mapping[str, Any], components: Mapping[str, Mapping[str, Any]],
             config: Mapping[str, Any], config_hash: str, lock: RunLock) -> "RunStore":
        """Create or grow the run directory of a job, under ``lock`` (held by the caller).

        Checks compatibility, finishes an interrupted compaction, removes stale temporaries,
        quarantines unreadable files and records the job in the manifest.
        """
        if not lock.held or Path(lock.root).resolve() != Path(root).resolve():
            raise StoreError(f"internal: opening {root} for writing needs its lock")
        cls.check(root, dataset, components)
        store = cls(root)
        old = cls.read_manifest(root)
        try:
            for sub in SUBDIRS:
                (store.root / sub).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot write to {root}: {exc.strerror or exc}; choose a writable --out") from None
        store.recover()
        now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        jobs = list((old or {}).get("jobs", []))
        if config_hash not in [j.get("config_hash") for j in jobs]:
            jobs.append({"config_hash": config_hash, "first_run": now})
        manifest = schema.stamped({
            "store_format": STORE_FORMAT,
            "created_at": (old or {}).get("created_at", now),
            "dataset": dict((old or {}).get("dataset") or dataset),
            "components": merged_components(old, components),
            "config_hash": config_hash,
            "config": dict(config),
            "jobs": jobs,
        })
        if manifest != old:
            write_bytes(json.dumps(manifest, indent=2, sort_keys=True).encode(), store.root / MANIFEST)
        return store

    @classmethod
    def existing(cls, root: str | Path) -> "RunStore":
        store = cls(root)
        if not (store.root / MANIFEST).is_file():
            raise StoreError(f"{root} is not a grb-dist run directory (no {MANIFEST})")
        return store

    def manifest(self) -> dict[str, Any]:
        data = self.read_manifest(self.root)
        if data is None:
            raise StoreError(f"{self.root} is not a grb-dist run directory (no {MANIFEST})")
        return data

    @property
    def dataset_label(self) -> str:
        return self.manifest()["dataset"]["label"]

    # ---------------------------------------------------------------- start-up (under the lock)

    def recover(self) -> dict[str, int]:
        """Finish or undo an interrupted compaction, remove stale temporaries, quarantine bad
        table files. Call only while holding the run's lock."""
        counts = {"compaction": self._recover_compaction(), "temporaries": self.remove_temporaries()}
        counts["quarantined"] = self.quarantine_bad_files()
        return counts

    def remove_temporaries(self) -> int:
        """Remove temporary files of writers that are provably gone: this process's own, or
        those of a PID on this host that no longer exists. Temporaries of live processes
        (and of other hosts) are left alone."""
        n = 0
        for p in self.root.rglob(".*.tmp-*"):
            owner = temporary_owner(p.name)
            if owner is None or not p.is_file():
                continue
            host, pid = owner
            if host not in (None, HOST_TAG):
                continue
            if pid == os.getpid() or not pid_alive(pid):
                p.unlink(missing_ok=True)
                n += 1
        return n

    def quarantine_bad_files(self) -> int:
        """Move unreadable, torn or foreign files out of ``scores/`` and ``perturbations/``
        into ``quarantine/`` (keeping their relative path); their cells are recomputed.

        Score files (few, many rows each) are opened and their schema checked; perturbation
        files (one per injected graph, possibly many thousands) get the cheap check only
        (layout and Parquet magic at both ends, which a truncated file fails); one that is
        damaged otherwise is reported when it is read and recomputed then.
        """
        n = 0
        for sub in ("scores", "perturbations"):
            base = self.root / sub
            for path in _visible_files(base):
                try:
                    if sub == "scores":
                        _read_partitioned_file(base, path, schema.SCORE_FILE, schema.SCORES, columns=["cell_id"])
                    else:
                        _partition_of(base, path)
                        _check_magic(path)
                except Exception as exc:  # noqa: BLE001
                    dest = self.root / QUARANTINE / sub / path.relative_to(base)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(path, dest)
                    log.warning("moved %s to %s: %s", path, dest, str(exc).splitlines()[0] if str(exc) else exc)
                    n += 1
        self._pert_index = None
        return n

    # ---------------------------------------------------------------- models

    def model_path(self, stem: str) -> Path:
        return self.root / "models" / f"{stem}.pt"

    def has_model(self, stem: str, model_id: str | None = None) -> bool:
        if not (self.model_path(stem).is_file() and self.meta_path(stem).is_file()):
            return False
        if model_id is None:
            return True
        try:
            return self.read_model_meta(stem)["model_id"] == model_id
        except Exception:  # noqa: BLE001 - an unreadable record is retrained
            return False

    def write_model(self, stem: str, data: bytes, meta: Mapping[str, Any]) -> None:
        """Save a model's serialised state_dict (:func:`grb_dist.models.io.state_dict_to_bytes`)
        and its metadata row; the metadata goes last, so a model counts as stored only when
        both files are complete."""
        write_bytes(data, self.model_path(stem))
        write_table(pa.Table.from_pylist([schema.stamped(meta)], schema=schema.MODELS), self.meta_path(stem))

    def read_model(self, stem: str, decode: Callable[[bytes], T]) -> T:
        """The stored model ``stem``, decoded by ``decode`` (e.g.
        :func:`grb_dist.models.io.state_dict_from_bytes`); a file that cannot be read or
        decoded is a one-line :class:`StoreError`."""
        try:
            return decode(self.model_path(stem).read_bytes())
        except Exception as exc:  # noqa: BLE001 - a damaged file is a one-line error
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(f"cannot load model {self.model_path(stem)}: {msg}; remove it to retrain") from None

    def read_model_meta(self, stem: str) -> dict[str, Any]:
        return pq.read_table(self.meta_path(stem), schema=schema.MODELS).to_pylist()[0]

    def meta_path(self, stem: str) -> Path:
        return self.root / "training" / f"{stem}.parquet"

    def read_models(self) -> pd.DataFrame:
        return read_dir(self.root / "training", schema.MODELS)

    # ---------------------------------------------------------------- perturbations

    def _perturbations(self) -> dict[str, Path]:
        if self._pert_index is None:
            base = self.root / "perturbations"
            self._pert_index = {p.stem: p for p in _visible_files(base)}
        return self._pert_index

    def perturbation_path(self, perturbation_id: str) -> Path:
        path = self._perturbations().get(perturbation_id)
        if path is None:
            raise StoreError(f"no perturbation {perturbation_id} in {self.root}")
        return path

    def has_perturbation(self, perturbation_id: str) -> bool:
        return perturbation_id in self._perturbations()

    def write_perturbation(self, perturbation_id: str, perturbation: Injection | Modification,
                           meta: Mapping[str, Any]) -> None:
        """Store one perturbation (an injection or a modification); ``meta`` holds the
        scalar columns of :data:`schema.PERTURBATIONS` (partition columns included)."""
        empty = np.zeros(0, dtype=np.int64)
        if isinstance(perturbation, Modification):
            feats = np.ascontiguousarray(perturbation.features, dtype=np.float32)
            added, removed, nodes, n_inject = perturbation.added, perturbation.removed, perturbation.nodes, 0
        else:
            feats = np.ascontiguousarray(perturbation.features, dtype=np.float32)
            added = np.asarray(perturbation.edges, dtype=np.int64).reshape(2, -1)
            removed, nodes, n_inject = np.zeros((2, 0), np.int64), empty, int(feats.shape[0])
        row = schema.stamped({
            **meta,
            "perturbation_id": perturbation_id,
            "num_original": int(perturbation.num_original),
            "n_inject": n_inject,
            "num_features": int(feats.shape[1]) if feats.ndim == 2 else 0,
        })
        cols = {k: [v] for k, v in row.items()}
        cols["features"] = pa.array([feats.ravel()], type=pa.list_(pa.float32()))
        for name, values in (("edge_src", added[0]), ("edge_dst", added[1]), ("node_ids", nodes),
                             ("removed_src", removed[0]), ("removed_dst", removed[1])):
            cols[name] = pa.array([np.asarray(values, dtype=np.int64)], type=pa.list_(pa.int64()))
        table = pa.Table.from_pydict({f.name: cols[f.name] for f in schema.PERTURBATION_FILE},
                                     schema=schema.PERTURBATION_FILE)
        path = partition_path(self.root / "perturbations", row["scenario"], row["dataset"], row["difficulty"])
        path.mkdir(parents=True, exist_ok=True)
        path = path / f"{perturbation_id}.parquet"
        write_table(table, path)
        self._perturbations()[perturbation_id] = path

    def _read_perturbation_table(self, perturbation_id: str, columns: Sequence[str] | None = None) -> pa.Table:
        path = self.perturbation_path(perturbation_id)
        base = self.root / "perturbations"
        try:
            t = _read_partitioned_file(base, path, schema.PERTURBATION_FILE, schema.PERTURBATIONS, columns)
        except Exception as exc:  # noqa: BLE001
            raise StoreError(f"perturbation file {path} is unreadable ({str(exc).splitlines()[0] if str(exc) else exc}); "
                             "remove it to recompute it") from None
        if t.num_rows != 1 or t["perturbation_id"][0].as_py() != perturbation_id:
            raise StoreError(f"perturbation file {path} does not hold {perturbation_id}; remove it to recompute it")
        return t

    def read_perturbation(self, perturbation_id: str) -> Injection | Modification:
        """The stored :class:`Injection` or :class:`Modification` of ``perturbation_id``."""
        t = self._read_perturbation_table(perturbation_id)

        def ints(name: str) -> np.ndarray:
            return t[name].combine_chunks().flatten().to_numpy(zero_copy_only=False).astype(np.int64)

        n, d = t["n_inject"][0].as_py(), t["num_features"][0].as_py()
        feats = t["features"].combine_chunks().flatten().to_numpy(zero_copy_only=False).astype(np.float32)
        added = np.stack([ints("edge_src"), ints("edge_dst")])
        num_original = int(t["num_original"][0].as_py())
        if t["scenario"][0].as_py() == "modification":
            nodes = ints("node_ids")
            return Modification(np.stack([ints("removed_src"), ints("removed_dst")]), added, nodes,
                                feats.reshape(nodes.size, d), num_original)
        return Injection(feats.reshape(n, d), added, num_original)

    def perturbation_meta(self, perturbation_id: str) -> dict[str, Any]:
        """The scalar columns of a stored perturbation (no features or edges)."""
        cols = [f.name for f in schema.PERTURBATIONS if f.name not in _PERTURBATION_ARRAYS]
        return self._read_perturbation_table(perturbation_id, cols).to_pylist()[0]

    def read_perturbations(self) -> pd.DataFrame:
        scan = scan_partitioned(self.root / "perturbations", schema.PERTURBATION_FILE, schema.PERTURBATIONS,
                                "perturbation_id")
        for w in scan.warnings(self.root):
            log.warning(w)
        return scan.table.to_pandas()

    # ---------------------------------------------------------------- scores

    def scan_scores(self, columns: Sequence[str] | None = None) -> Scan:
        """Every readable score row (each cell once) and the files that were skipped."""
        if columns is not None and "cell_id" not in columns:
            columns = ["cell_id", *columns]
        return scan_partitioned(self.root / "scores", schema.SCORE_FILE, schema.SCORES, "cell_id", columns)

    def done_cells(self) -> set[str]:
        """Ids of the score cells stored in readable files."""
        scan = self.scan_scores(columns=["cell_id"])
        return set(scan.table.column("cell_id").to_pylist())

    def read_scores(self, on_warning: Callable[[str], None] | None = None) -> pd.DataFrame:
        """All readable score rows as a DataFrame with the columns of :data:`schema.SCORES`
        (skipped files are passed to ``on_warning``, or logged)."""
        scan = self.scan_scores()
        for w in scan.warnings(self.root):
            (on_warning or log.warning)(w)
        return scan.table.to_pandas()

    def write_scores(self, rows: Sequence[Mapping[str, Any]]) -> list[Path]:
        """Write ``rows`` now: one new file per partition present in them."""
        groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
        for r in rows:
            groups.setdefault(tuple(r[k] for k in schema.PARTITION), []).append(r)  # type: ignore[arg-type]
        written = []
        for key, group in groups.items():
            directory = partition_path(self.root / "scores", *key)
            directory.mkdir(parents=True, exist_ok=True)
            table = pa.Table.from_pylist(group, schema=schema.SCORE_FILE)  # takes the file's columns only
            path = directory / f"part-{uuid.uuid4().hex}.parquet"
            write_table(table, path, sync_dir=True)
            written.append(path)
        return written

    def write_score(self, row: Mapping[str, Any]) -> None:
        """Write one row (prefer :class:`ScoreWriter`, which batches)."""
        self.write_scores([row])

    def score_writer(self, max_rows: int = 4096, max_seconds: float = 10.0) -> "ScoreWriter":
        return ScoreWriter(self, max_rows, max_seconds)

    # ---------------------------------------------------------------- compaction

    def compact(self, *, min_rows: int = 100_000) -> dict[str, int]:
        """Merge the small files (fewer than ``min_rows`` rows) of each score partition into
        one file, without changing any row. Call only while holding the run's lock.

        Per partition: the merged file is written to a temporary file, a journal naming
        it and its sources is written, the merged file is renamed into place, the sources
        are removed, then the journal. A crash at any point leaves either the old files or
        the merged one (:meth:`recover` finishes the job from the journal); in the instant
        between the rename and the removal, readers other than grb-dist's may see a row
        twice.
        """
        self._recover_compaction()
        base = self.root / "scores"
        by_dir: dict[Path, list[Path]] = {}
        for p in _visible_files(base):
            by_dir.setdefault(p.parent, []).append(p)
        stats = {"partitions": 0, "files_before": 0, "files_after": 0, "rows": 0, "skipped": 0}
        for directory, files in sorted(by_dir.items()):
            small, tables = [], []
            for p in files:
                try:
                    pf = pq.ParquetFile(p)
                    if pf.metadata.num_rows >= min_rows:
                        continue
                    t = _read_partitioned_file(base, p, schema.SCORE_FILE, schema.SCORES)
                except Exception:  # noqa: BLE001 - bad files are not merged (quarantined on open)
                    stats["skipped"] += 1
                    continue
                small.append(p)
                tables.append(t.select(schema.SCORE_FILE.names))
            stats["files_before"] += len(files)
            if len(small) < 2:
                stats["files_after"] += len(files)
                continue
            # duplicates (of an earlier interrupted compaction) are kept once
            merged, _ = _first_of_each(pa.concat_tables(tables), "cell_id")
            target = directory / f"part-{uuid.uuid4().hex}.parquet"
            journal = self.root / "scores" / JOURNAL
            with atomic_path(target) as tmp:
                pq.write_table(merged, tmp, row_group_size=256 * 1024)
                write_bytes(json.dumps({"target": str(target.relative_to(self.root)),
                                        "sources": [str(p.relative_to(self.root)) for p in small]}).encode(), journal)
            fsync_dir(directory)
            for p in small:
                p.unlink()
            fsync_dir(directory)
            journal.unlink()
            stats["partitions"] += 1
            stats["rows"] += merged.num_rows
            stats["files_after"] += len(files) - len(small) + 1
        return stats

    def _recover_compaction(self) -> int:
        journal = self.root / "scores" / JOURNAL
        if not journal.is_file():
            return 0
        try:
            data = json.loads(journal.read_text())
            target = self.root / data["target"]
            sources = [self.root / s for s in data["sources"]]
        except (OSError, ValueError, KeyError, TypeError):
            journal.unlink(missing_ok=True)  # written atomically: unreadable means foreign
            return 0
        if target.is_file():  # the merged file is in place: finish removing its sources
            for s in sources:
                s.unlink(missing_ok=True)
        journal.unlink(missing_ok=True)
        return 1

    # ---------------------------------------------------------------- leaderboards

    def write_leaderboard(self, name: str, table: pa.Table, markdown: str) -> None:
        """Write one board as ``leaderboard/<scenario>/<kind>-<difficulty>.{parquet,md}``
        (``name`` is the board's key, ``<scenario>/<kind>-<difficulty>``), each file
        atomically. The flat file of the same board written before boards were per
        scenario (``leaderboard/<kind>-<difficulty>.*``, always injection) is stale then,
        and is removed."""
        parts = [safe_label(part) for part in name.split("/")]
        path = self.root.joinpath("leaderboard", *parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_table(table, path.with_name(f"{path.name}.parquet"))
        write_bytes(markdown.encode(), path.with_name(f"{path.name}.md"))
        if len(parts) == 2 and parts[0] == "injection":
            for suffix in (".parquet", ".md"):
                (self.root / "leaderboard" / f"{parts[1]}{suffix}").unlink(missing_ok=True)


class ScoreWriter:
    """Buffers score rows in the driver and writes them in batches.

    :meth:`add` takes the rows of one scoring result (one perturbation's rows for a group
    of defenses) and writes the buffer when it holds ``max_rows`` rows or its oldest row is
    ``max_seconds`` old, whichever comes first; :meth:`flush` writes whatever is buffered
    (the runner calls it on every exit path, Ctrl-C included). A SIGKILL loses at most the
    buffered rows, which the next run recomputes (their cells are not done).
    """

    def __init__(self, store: RunStore, max_rows: int = 4096, max_seconds: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        if max_rows < 1 or max_seconds < 0:
            raise StoreError("flush thresholds must be positive")
        self.store = store
        self.max_rows = max_rows
        self.max_seconds = max_seconds
        self.clock = clock
        self._rows: list[Mapping[str, Any]] = []
        self._since: float | None = None
        self.files_written = 0
        self.rows_written = 0

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, rows: Sequence[Mapping[str, Any]]) -> int:
        """Buffer ``rows``; flush when due. Returns the number of rows written now."""
        if rows and self._since is None:
            self._since = self.clock()
        self._rows.extend(rows)
        return self.flush() if self.due() else 0

    def due(self) -> bool:
        return bool(self._rows) and (len(self._rows) >= self.max_rows or self.seconds_until_due() == 0)

    def seconds_until_due(self) -> float | None:
        """Seconds until the time threshold makes a flush due (None with an empty buffer)."""
        if self._since is None:
            return None
        return max(0.0, self.max_seconds - (self.clock() - self._since))

    def flush(self) -> int:
        # take the rows first: an interruption during the write loses them (they are
        # recomputed) but can never write them twice
        rows, self._rows, self._since = self._rows, [], None
        if not rows:
            return 0
        files = self.store.write_scores(rows)
        self.files_written += len(files)
        self.rows_written += len(rows)
        return len(rows)


__all__ = ["RunStore", "Scan", "ScoreWriter", "STORE_FORMAT", "compatibility_error", "partition_path",
           "read_dir", "safe_label", "scan_partitioned", "write_table"]
