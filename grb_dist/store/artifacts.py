"""What a run computes besides its scores: trained models, perturbations, leaderboards.

* ``models/<name>-<seed>.pt`` -- a state_dict as bytes (the store never unpickles: the
  caller serialises, see :mod:`grb_dist.models.io`), and ``training/<name>-<seed>.parquet``,
  its row of :data:`schema.MODELS`, written last.
* ``perturbations/scenario=<s>/dataset=<d>/difficulty=<x>/<perturbation_id>.parquet`` -- one
  row of :data:`schema.PERTURBATIONS` per file.
* ``leaderboard/<scenario>/{attacks,defenses}-<difficulty>.{parquet,md}``.

Every file is written atomically (:mod:`grb_dist.core.fileio`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from grb_dist.core.errors import StoreError
from grb_dist.core.fileio import write_bytes
from grb_dist.core.targeted import TargetedModification
from grb_dist.core.graph import Injection, Modification
from grb_dist.core.scenario import DEFAULT, find_scenario
from grb_dist.core.scenario import scenario as scenario_of
import grb_dist.store.schema as schema
from grb_dist.store.parquet import (
    partition_path,
    read_dir,
    read_partitioned_file,
    safe_label,
    scan_partitioned,
    visible_files,
    write_table,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

#: List columns of a perturbation (the rest are its scalar metadata).
_PERTURBATION_ARRAYS = ("features", "edge_src", "edge_dst", "node_ids", "removed_src", "removed_dst", "targets",
                        "removed_by", "added_by")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class Models:
    """The trained models of the run directory ``root``, by file stem (``<name>-<seed>``)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def path(self, stem: str) -> Path:
        return self.root / "models" / f"{stem}.pt"

    def meta_path(self, stem: str) -> Path:
        return self.root / "training" / f"{stem}.parquet"

    def has(self, stem: str, model_id: str | None = None) -> bool:
        """Whether both files of ``stem`` are stored (and, given ``model_id``, its
        metadata names that model)."""
        if not (self.path(stem).is_file() and self.meta_path(stem).is_file()):
            return False
        if model_id is None:
            return True
        try:
            return self.read_meta(stem)["model_id"] == model_id
        except Exception:  # noqa: BLE001 - an unreadable record is retrained
            return False

    def write(self, stem: str, data: bytes, meta: Mapping[str, Any]) -> None:
        """Save a model's serialised state_dict (:func:`grb_dist.models.io.state_dict_to_bytes`)
        and its metadata row; the metadata goes last, so a model counts as stored only when
        both files are complete."""
        write_bytes(data, self.path(stem))
        write_table(pa.Table.from_pylist([schema.stamped(meta)], schema=schema.MODELS), self.meta_path(stem))

    def read(self, stem: str, decode: Callable[[bytes], T]) -> T:
        """The stored model ``stem``, decoded by ``decode`` (e.g.
        :func:`grb_dist.models.io.state_dict_from_bytes`); a file that cannot be read or
        decoded is a one-line :class:`StoreError`."""
        try:
            return decode(self.path(stem).read_bytes())
        except Exception as exc:  # noqa: BLE001 - a damaged file is a one-line error
            raise StoreError(f"cannot load model {self.path(stem)}: {_first_line(exc)}; remove it to retrain") from None

    def read_meta(self, stem: str) -> dict[str, Any]:
        return pq.read_table(self.meta_path(stem), schema=schema.MODELS).to_pylist()[0]

    def table(self) -> pd.DataFrame:
        """Every model's metadata row."""
        return read_dir(self.root / "training", schema.MODELS)


class Perturbations:
    """The perturbations of the run directory ``root``, by id (found by an index of the
    file names, built on first use)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.base = self.root / "perturbations"
        self._index: dict[str, Path] | None = None

    def forget(self) -> None:
        """Drop the index (after files were moved out of the table)."""
        self._index = None

    def _files(self) -> dict[str, Path]:
        if self._index is None:
            self._index = {p.stem: p for p in visible_files(self.base)}
        return self._index

    def path(self, perturbation_id: str) -> Path:
        path = self._files().get(perturbation_id)
        if path is None:
            raise StoreError(f"no perturbation {perturbation_id} in {self.root}")
        return path

    def has(self, perturbation_id: str) -> bool:
        return perturbation_id in self._files()

    def write(self, perturbation_id: str, perturbation: Injection | Modification | TargetedModification,
              meta: Mapping[str, Any]) -> None:
        """Store one perturbation (an injection, a modification or a targeted one: its pairs
        as they are, target first, and its ``targets``; an influencer one's pairs with the
        target of each, ``removed_by`` / ``added_by``); ``meta`` holds the
        attack's scalar columns of :data:`schema.PERTURBATIONS` (partition columns included,
        see :func:`schema.perturbation_meta`); the perturbation's own are added here."""
        empty = np.zeros(0, dtype=np.int64)
        feats = np.ascontiguousarray(perturbation.features, dtype=np.float32)
        targets = getattr(perturbation, "targets", empty)
        direct = getattr(perturbation, "direct", True)
        removed_by = empty if direct else perturbation.removed_by
        added_by = empty if direct else perturbation.added_by
        if isinstance(perturbation, (Modification, TargetedModification)):
            added, removed, nodes, n_inject = perturbation.added, perturbation.removed, perturbation.nodes, 0
        else:
            added = np.asarray(perturbation.edges, dtype=np.int64).reshape(2, -1)
            removed, nodes, n_inject = np.zeros((2, 0), np.int64), empty, int(feats.shape[0])
        row = schema.stamped({
            **schema.ADDED_DEFAULTS,
            **meta,
            "perturbation_id": perturbation_id,
            "num_original": int(perturbation.num_original),
            "n_inject": n_inject,
            "num_features": int(feats.shape[1]) if feats.ndim == 2 else 0,
        })
        cols = {k: [v] for k, v in row.items()}
        cols["features"] = pa.array([feats.ravel()], type=pa.list_(pa.float32()))
        for name, values in (("edge_src", added[0]), ("edge_dst", added[1]), ("node_ids", nodes),
                             ("removed_src", removed[0]), ("removed_dst", removed[1]), ("targets", targets),
                             ("removed_by", removed_by), ("added_by", added_by)):
            cols[name] = pa.array([np.asarray(values, dtype=np.int64)], type=pa.list_(pa.int64()))
        table = pa.Table.from_pydict({f.name: cols[f.name] for f in schema.PERTURBATION_FILE},
                                     schema=schema.PERTURBATION_FILE)
        path = partition_path(self.base, row["scenario"], row["dataset"], row["difficulty"])
        path.mkdir(parents=True, exist_ok=True)
        path = path / f"{perturbation_id}.parquet"
        write_table(table, path)
        self._files()[perturbation_id] = path

    def _read_table(self, perturbation_id: str, columns: Sequence[str] | None = None) -> pa.Table:
        path = self.path(perturbation_id)
        try:
            t = read_partitioned_file(self.base, path, schema.PERTURBATION_FILE, schema.PERTURBATIONS, columns)
        except Exception as exc:  # noqa: BLE001
            raise StoreError(f"perturbation file {path} is unreadable ({str(exc).splitlines()[0] if str(exc) else exc}); "
                             "remove it to recompute it") from None
        if t.num_rows != 1 or t["perturbation_id"][0].as_py() != perturbation_id:
            raise StoreError(f"perturbation file {path} does not hold {perturbation_id}; remove it to recompute it")
        return t

    def read(self, perturbation_id: str) -> Injection | Modification | TargetedModification:
        """The stored :class:`Injection`, :class:`Modification` or
        :class:`~grb_dist.core.targeted.TargetedModification` of ``perturbation_id``."""
        t = self._read_table(perturbation_id)

        def ints(name: str) -> np.ndarray:
            return t[name].combine_chunks().flatten().to_numpy(zero_copy_only=False).astype(np.int64)

        n, d = t["n_inject"][0].as_py(), t["num_features"][0].as_py()
        feats = t["features"].combine_chunks().flatten().to_numpy(zero_copy_only=False).astype(np.float32)
        added = np.stack([ints("edge_src"), ints("edge_dst")])
        num_original = int(t["num_original"][0].as_py())
        scenario = scenario_of(t["scenario"][0].as_py())
        if not scenario.injects:  # a modification (evasion, poisoning or targeted)
            nodes = ints("node_ids")
            removed = np.stack([ints("removed_src"), ints("removed_dst")])
            if scenario.per_target:
                removed_by, added_by = ints("removed_by"), ints("added_by")
                influencer = removed_by.size + added_by.size > 0
                return TargetedModification(ints("targets"), removed, added, nodes, feats.reshape(nodes.size, d),
                                            num_original, removed_by=removed_by if influencer else None,
                                            added_by=added_by if influencer else None)
            return Modification(removed, added, nodes, feats.reshape(nodes.size, d), num_original)
        return Injection(feats.reshape(n, d), added, num_original)

    def meta(self, perturbation_id: str) -> dict[str, Any]:
        """The scalar columns of a stored perturbation (no features or edges)."""
        cols = [f.name for f in schema.PERTURBATIONS if f.name not in _PERTURBATION_ARRAYS]
        return self._read_table(perturbation_id, cols).to_pylist()[0]

    def table(self) -> pd.DataFrame:
        """Every readable perturbation (files that cannot be read are logged and skipped)."""
        scan = scan_partitioned(self.base, schema.PERTURBATION_FILE, schema.PERTURBATIONS, "perturbation_id")
        for w in scan.warnings(self.root):
            log.warning(w)
        return scan.table.to_pandas()


def write_board(root: str | Path, name: str, table: pa.Table, markdown: str) -> None:
    """Write one board as ``leaderboard/<scenario>/<kind>-<difficulty>.{parquet,md}`` under
    the run ``root`` (``name`` is the board's key, ``<scenario>/<kind>-<difficulty>``), each
    file atomically. The flat file of the same board written before boards were per
    scenario (``leaderboard/<kind>-<difficulty>.*``, always injection) is stale then, and is
    removed."""
    parts = [safe_label(part) for part in name.split("/")]
    path = Path(root).joinpath("leaderboard", *parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_table(table, path.with_name(f"{path.name}.parquet"))
    write_bytes(markdown.encode(), path.with_name(f"{path.name}.md"))
    if len(parts) == 2 and find_scenario(parts[0]) is DEFAULT:
        for suffix in (".parquet", ".md"):
            (Path(root) / "leaderboard" / f"{parts[1]}{suffix}").unlink(missing_ok=True)


__all__ = ["Models", "Perturbations", "write_board"]
