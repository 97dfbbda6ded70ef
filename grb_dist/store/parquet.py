"""The run directory: a manifest, one Parquet file per cell, state_dicts, leaderboards.

Every file is written to a hidden temporary file in its final directory, flushed, and moved
into place with ``os.replace`` (atomic on POSIX), so a reader sees either no file or a
complete one; a re-run overwrites a cell's file with identical content, never adding a row.
Readers ignore hidden files; :meth:`RunStore.open` removes temporaries left by a crash.

Layout::

    RUN_DIR/manifest.json                    job config, its hash, package version
    RUN_DIR/models/<name>-<seed>.pt          state_dict (torch.save; load weights_only=True)
    RUN_DIR/training/<name>-<seed>.parquet   training metadata (schema.MODELS)
    RUN_DIR/perturbations/<id>.parquet       one injected graph (schema.PERTURBATIONS)
    RUN_DIR/scores/<cell_id>.parquet         one score row (schema.SCORES)
    RUN_DIR/leaderboard/{attacks,defenses}-<difficulty>.{parquet,md}
"""

from __future__ import annotations

import io
import json
import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import grb_dist
from grb_dist.errors import StoreError
from grb_dist.graph import Injection
from grb_dist.store import schema

MANIFEST = "manifest.json"
SUBDIRS = ("models", "training", "perturbations", "scores", "leaderboard")


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success fsync and rename it to ``path``.

    On an exception the temporary file is removed and ``path`` is left untouched.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_table(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def write_bytes(data: bytes, path: Path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def read_dir(directory: Path, table_schema: pa.Schema) -> pd.DataFrame:
    """All visible ``*.parquet`` files of ``directory`` as one DataFrame (empty with the
    schema's columns when there are none)."""
    files = sorted(p for p in Path(directory).glob("*.parquet") if not p.name.startswith("."))
    if not files:
        return table_schema.empty_table().to_pandas()
    tables = [pq.read_table(f, schema=table_schema) for f in files]
    return pa.concat_tables(tables).to_pandas()


def scores_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=schema.SCORES)


class RunStore:
    """Reads and writes one run directory. Create it with :meth:`open` (checks the manifest)
    or :meth:`existing` (read-only use by the leaderboard)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    # ---------------------------------------------------------------- manifest

    @staticmethod
    def check(root: str | Path, config: Mapping[str, Any], config_hash: str) -> bool:
        """Whether ``root`` may hold this run; True when it already does (resume).

        Raises :class:`StoreError` when it holds another configuration's run or is a
        non-empty directory that is not a run. Writes nothing.
        """
        root = Path(root)
        manifest = root / MANIFEST
        if manifest.is_file():
            try:
                data = json.loads(manifest.read_text())
            except (OSError, ValueError):
                raise StoreError(f"{manifest} is unreadable; remove {root} or choose another --out") from None
            if data.get("config_hash") != config_hash:
                raise StoreError(
                    f"{root} holds a run of a different configuration (hash {data.get('config_hash')}, "
                    f"this job {config_hash}); choose another --out or remove it"
                )
            return True
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise StoreError(f"{root} exists and is not a grb-dist run directory; choose another --out")
        return False

    @classmethod
    def open(cls, root: str | Path, config: Mapping[str, Any], config_hash: str) -> "RunStore":
        """Create (or resume) the run directory of ``config``; writes the manifest."""
        resumed = cls.check(root, config, config_hash)
        store = cls(root)
        for sub in SUBDIRS:
            (store.root / sub).mkdir(parents=True, exist_ok=True)
        store.remove_temporaries()
        if not resumed:
            manifest = {"config_hash": config_hash, "version": grb_dist.__version__, "config": dict(config)}
            write_bytes(json.dumps(manifest, indent=2, sort_keys=True).encode(), store.root / MANIFEST)
        return store

    @classmethod
    def existing(cls, root: str | Path) -> "RunStore":
        store = cls(root)
        if not (store.root / MANIFEST).is_file():
            raise StoreError(f"{root} is not a grb-dist run directory (no {MANIFEST})")
        return store

    def manifest(self) -> dict[str, Any]:
        return json.loads((self.root / MANIFEST).read_text())

    def remove_temporaries(self) -> int:
        n = 0
        for sub in SUBDIRS:
            for p in (self.root / sub).glob(".*.tmp-*"):
                p.unlink(missing_ok=True)
                n += 1
        return n

    # ---------------------------------------------------------------- models

    def model_path(self, stem: str) -> Path:
        return self.root / "models" / f"{stem}.pt"

    def has_model(self, stem: str) -> bool:
        return self.model_path(stem).is_file() and self.meta_path(stem).is_file()

    def write_model(self, stem: str, state_dict: Mapping[str, Any], meta: Mapping[str, Any]) -> None:
        """Save a state_dict (torch.save) and its metadata row; the metadata goes last, so a
        model counts as stored only when both files are complete."""
        import torch

        buf = io.BytesIO()
        torch.save(dict(state_dict), buf)
        write_bytes(buf.getvalue(), self.model_path(stem))
        row = {**meta, "version": grb_dist.__version__}
        write_table(pa.Table.from_pylist([row], schema=schema.MODELS), self.meta_path(stem))

    def read_state_dict(self, stem: str) -> dict[str, Any]:
        import torch

        try:
            return torch.load(self.model_path(stem), map_location="cpu", weights_only=True)
        except (OSError, RuntimeError) as exc:
            raise StoreError(f"cannot load model {self.model_path(stem)}: {exc}") from None

    def read_model_meta(self, stem: str) -> dict[str, Any]:
        return pq.read_table(self.meta_path(stem), schema=schema.MODELS).to_pylist()[0]

    def meta_path(self, stem: str) -> Path:
        return self.root / "training" / f"{stem}.parquet"

    def read_models(self) -> pd.DataFrame:
        return read_dir(self.root / "training", schema.MODELS)

    # ---------------------------------------------------------------- perturbations

    def perturbation_path(self, perturbation_id: str) -> Path:
        return self.root / "perturbations" / f"{perturbation_id}.parquet"

    def has_perturbation(self, perturbation_id: str) -> bool:
        return self.perturbation_path(perturbation_id).is_file()

    def write_perturbation(self, perturbation_id: str, injection: Injection, meta: Mapping[str, Any]) -> None:
        feats = np.ascontiguousarray(injection.features, dtype=np.float32)
        edges = np.asarray(injection.edges, dtype=np.int64).reshape(2, -1)
        row = {
            **meta,
            "perturbation_id": perturbation_id,
            "num_original": int(injection.num_original),
            "n_inject": int(feats.shape[0]),
            "num_features": int(feats.shape[1]) if feats.ndim == 2 else 0,
            "version": grb_dist.__version__,
        }
        cols = {k: [v] for k, v in row.items()}
        cols["features"] = pa.array([feats.ravel()], type=pa.list_(pa.float32()))
        cols["edge_src"] = pa.array([edges[0]], type=pa.list_(pa.int64()))
        cols["edge_dst"] = pa.array([edges[1]], type=pa.list_(pa.int64()))
        table = pa.Table.from_pydict({f.name: cols[f.name] for f in schema.PERTURBATIONS}, schema=schema.PERTURBATIONS)
        write_table(table, self.perturbation_path(perturbation_id))

    def read_perturbation(self, perturbation_id: str) -> Injection:
        """The stored :class:`Injection` of ``perturbation_id``."""
        path = self.perturbation_path(perturbation_id)
        if not path.is_file():
            raise StoreError(f"no perturbation {perturbation_id} in {self.root}")
        t = pq.read_table(path, schema=schema.PERTURBATIONS)
        n, d = t["n_inject"][0].as_py(), t["num_features"][0].as_py()
        feats = t["features"].combine_chunks().flatten().to_numpy(zero_copy_only=False).astype(np.float32)
        src = t["edge_src"].combine_chunks().flatten().to_numpy(zero_copy_only=False).astype(np.int64)
        dst = t["edge_dst"].combine_chunks().flatten().to_numpy(zero_copy_only=False).astype(np.int64)
        return Injection(feats.reshape(n, d), np.stack([src, dst]), int(t["num_original"][0].as_py()))

    def perturbation_meta(self, perturbation_id: str) -> dict[str, Any]:
        """The scalar columns of a stored perturbation (no features or edges)."""
        cols = [f.name for f in schema.PERTURBATIONS if f.name not in ("features", "edge_src", "edge_dst")]
        return pq.read_table(self.perturbation_path(perturbation_id), columns=cols).to_pylist()[0]

    def read_perturbations(self) -> pd.DataFrame:
        return read_dir(self.root / "perturbations", schema.PERTURBATIONS)

    # ---------------------------------------------------------------- scores

    def score_path(self, cell_id: str) -> Path:
        return self.root / "scores" / f"{cell_id}.parquet"

    def done_cells(self) -> set[str]:
        """Ids of the score cells already written."""
        return {p.stem for p in (self.root / "scores").glob("*.parquet") if not p.name.startswith(".")}

    def write_score(self, row: Mapping[str, Any]) -> None:
        write_table(scores_table([row]), self.score_path(row["cell_id"]))

    def read_scores(self) -> pd.DataFrame:
        return read_dir(self.root / "scores", schema.SCORES)

    # ---------------------------------------------------------------- leaderboards

    def write_leaderboard(self, name: str, table: pa.Table, markdown: str) -> None:
        write_table(table, self.root / "leaderboard" / f"{name}.parquet")
        write_bytes(markdown.encode(), self.root / "leaderboard" / f"{name}.md")
