"""The run directory: its manifest, and :class:`RunStore`, the one object that reads and
writes a run (a facade over the parts in :mod:`~grb_dist.store.artifacts`,
:mod:`~grb_dist.store.scores` and :mod:`~grb_dist.store.recovery`).

Layout::

    RUN_DIR/.lock                            the writer's lock (grb_dist.store.lock)
    RUN_DIR/manifest.json                    dataset identity, what each name means, jobs run
    RUN_DIR/models/<name>-<seed>.pt          state_dict (bytes of grb_dist.models.io: torch.save; load weights_only=True)
    RUN_DIR/training/<name>-<seed>.parquet   training metadata (schema.MODELS)
    RUN_DIR/perturbations/scenario=<s>/dataset=<d>/difficulty=<x>/<perturbation_id>.parquet
    RUN_DIR/scores/scenario=<s>/dataset=<d>/difficulty=<x>/part-<uuid>.parquet
    RUN_DIR/quarantine/...                   unreadable or foreign files moved out of the tables
    RUN_DIR/leaderboard/<scenario>/{attacks,defenses}-<difficulty>.{parquet,md}

Writes: every file is written atomically (:mod:`grb_dist.core.fileio`: a hidden temporary
file in its final directory, fsync'd, moved into place with ``os.replace``), so a reader
sees either no file or a complete one. Score rows are buffered by the driver
(:class:`~grb_dist.store.scores.ScoreWriter`) and written many rows per file.

Reads: ``scores/`` and ``perturbations/`` are hive-partitioned datasets that
``pandas.read_parquet``, ``pyarrow.dataset`` and DuckDB read in one call. grb-dist's own
reader (:mod:`grb_dist.store.parquet`) opens file by file: a torn, truncated or foreign file
is reported and skipped (its cells count as not done and are recomputed), never counted.
Whether a cell is done comes from the cell ids of the rows that were read.

Only the holder of the run's lock writes (:class:`grb_dist.store.lock.RunLock`);
:meth:`RunStore.open` requires it and, under it, finishes or undoes an interrupted
compaction, removes temporaries of dead writers and moves bad files to ``quarantine/``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import stat
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

import pandas as pd
import pyarrow as pa

from grb_dist.core.errors import StoreError
from grb_dist.core.fileio import write_bytes
from grb_dist.core.graph import Injection, Modification
import grb_dist.store.recovery as recovery
import grb_dist.store.schema as schema
from grb_dist.store.artifacts import Models, Perturbations, write_board
from grb_dist.store.lock import RunLock
from grb_dist.store.scores import Scores, ScoreWriter

T = TypeVar("T")

MANIFEST = "manifest.json"
#: Version of the directory layout; runs of another format are refused, not mixed.
STORE_FORMAT = 3
SUBDIRS = ("models", "training", "perturbations", "scores", "leaderboard", "timeline")


# --------------------------------------------------------------------------- manifest


def check_tree(root: str | Path) -> None:
    """The run's own entries are what they must be before anything is read or written:
    ``manifest.json`` a regular file, ``scores/``, ``models/`` and the other directories
    real directories. A symlink among them is refused, never followed (a link could make a
    writer write, move or remove files outside the run), as is a file where a directory
    must be (``scores`` as a file: not an intact run)."""
    root = Path(root)
    for name, directory in ((MANIFEST, False), *((d, True) for d in (*SUBDIRS, recovery.QUARANTINE))):
        path = root / name
        try:
            mode = os.lstat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):  # no such entry (or no run at all: said elsewhere)
            continue
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from None
        kind = "directory" if directory else "file"
        if stat.S_ISLNK(mode):
            raise StoreError(f"{path} is a symlink; grb-dist never follows a link out of a run directory: replace it "
                             f"with the real {kind}")
        if not (stat.S_ISDIR(mode) if directory else stat.S_ISREG(mode)):
            raise StoreError(f"{path} is not a {'directory' if directory else 'regular file'}, so {root} is not an intact "
                             "run directory; move it away or choose another run")



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
                return (_changed_inputs(name, old, value)
                        or f"{kind} {name} has other settings there ({_diff_keys(old, value)})")
    return None


#: The fix a refusal over a changed input file ends with (:func:`compatibility_error`).
INPUT_FIX = "restore the file the run read, or choose another --out to start a fresh run"


def _changed_inputs(name: str, old: Any, new: Any) -> str | None:
    """Why attack ``name`` no longer means what the run holds when a file it reads beside the
    graph (``inputs``: ``{file: sha256}``, a published set's) differs from the run's record;
    None when its files are the same."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping) or old.get("inputs") == new.get("inputs"):
        return None
    was, now = old.get("inputs"), new.get("inputs") or {}
    if not isinstance(was, Mapping):
        return (f"attack {name} reads {', '.join(sorted(now))}, which the run did not record by content (it was made "
                "before such files were), so its stored cells cannot be matched to the file as it is now; "
                "choose another --out to start a fresh run")
    changed = sorted(f for f in set(was) | set(now) if was.get(f) != now.get(f))
    first = changed[0]
    more = f"; {len(changed) - 1} more of its files changed" if len(changed) > 1 else ""
    there, here = (str(d.get(first, "none"))[:12] for d in (was, now))
    return (f"{first} changed since the run read it for attack {name} (sha256 {there} there, {here} now{more}), so "
            f"the run's cells of {name} were computed from another file; {INPUT_FIX}")


def merged_components(manifest: Mapping[str, Any] | None, components: Mapping[str, Mapping[str, Any]]) -> dict:
    out = {k: dict(v) for k, v in (manifest or {}).get("components", {}).items()}
    for kind, entries in components.items():
        out.setdefault(kind, {}).update(entries)
    return out


# --------------------------------------------------------------------------- the store


class RunStore:
    """Reads and writes one run directory. A writer is created with :meth:`open` (under the
    run's lock); readers use :meth:`existing`.

    The work is done by its parts, each over the same ``root``: :attr:`models`,
    :attr:`perturbations` (:mod:`~grb_dist.store.artifacts`), :attr:`scores`
    (:mod:`~grb_dist.store.scores`) and :func:`~grb_dist.store.recovery.recover`; the
    methods below are the names the rest of grb_dist uses.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.models = Models(self.root)
        self.perturbations = Perturbations(self.root)
        self.scores = Scores(self.root)

    # ---------------------------------------------------------------- manifest

    @staticmethod
    def read_manifest(root: str | Path) -> dict[str, Any] | None:
        """The manifest of ``root`` (None when there is none); StoreError when unreadable,
        damaged (not the object grb-dist writes) or when the run's own entries are not what
        they must be (:func:`check_tree`)."""
        check_tree(root)
        manifest = Path(root) / MANIFEST
        if not manifest.is_file():
            return None
        try:
            data = json.loads(manifest.read_text())
        except (OSError, ValueError, RecursionError):
            raise StoreError(f"{manifest} is unreadable; remove {root} or choose another --out") from None
        # an older layout (no store_format) is named as such by compatibility_error
        current = isinstance(data, dict) and data.get("store_format") == STORE_FORMAT
        dataset = data.get("dataset") if current else None
        if not isinstance(data, dict) or current and (
                not isinstance(dataset, dict) or not isinstance(dataset.get("label"), str)
                or not isinstance(data.get("components", {}), dict)):
            what = f"a JSON {type(data).__name__}" if not isinstance(data, dict) else "no valid dataset entry"
            raise StoreError(f"{manifest} is damaged ({what}, not a grb-dist manifest); restore it from a "
                             f"backup, or remove {root} or choose another --out")
        return data

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
                fix = "" if why.endswith(("another --out to start a fresh run", INPUT_FIX)) else \
                    "; choose another --out or keep the run's settings"
                raise StoreError(f"{root} cannot take this job: {why}{fix}")
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
        if cls.read_manifest(root) is None:
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
        table files (:func:`grb_dist.store.recovery.recover`). Call only while holding the
        run's lock."""
        counts = recovery.recover(self.root)
        self.perturbations.forget()
        return counts

    # ---------------------------------------------------------------- models

    def model_path(self, stem: str) -> Path:
        return self.models.path(stem)

    def has_model(self, stem: str, model_id: str | None = None) -> bool:
        return self.models.has(stem, model_id)

    def write_model(self, stem: str, data: bytes, meta: Mapping[str, Any]) -> None:
        """Store a serialised state_dict and its metadata row (:meth:`Models.write`)."""
        self.models.write(stem, data, meta)

    def read_model(self, stem: str, decode: Callable[[bytes], T]) -> T:
        """The stored model, decoded by ``decode`` (:meth:`Models.read`)."""
        return self.models.read(stem, decode)

    def read_model_meta(self, stem: str) -> dict[str, Any]:
        return self.models.read_meta(stem)

    def read_models(self) -> pd.DataFrame:
        return self.models.table()

    # ---------------------------------------------------------------- timeline

    def write_timeline(self, invocation: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """The tasks of one sweep invocation (``schema.TIMELINE`` rows) as
        ``timeline/<invocation>.parquet``; ``invocation`` is a plain name made by the driver."""
        from grb_dist.store.parquet import safe_label, write_table

        table = pa.Table.from_pylist([{**r, "invocation": invocation} for r in rows], schema=schema.TIMELINE)
        write_table(table, self.root / "timeline" / f"{safe_label(invocation)}.parquet")

    def read_timeline(self) -> pd.DataFrame:
        """Every recorded task of the run's sweep invocations (empty for a run made before
        the timeline was recorded; an unreadable file is left out: the timeline only
        describes the run, the scores do not depend on it)."""
        import pyarrow.parquet as pq

        files = sorted(p for p in (self.root / "timeline").glob("*.parquet")
                       if not p.name.startswith(".") and p.is_file() and not p.is_symlink())
        tables = []
        for f in files:
            try:
                tables.append(pq.read_table(f, schema=schema.TIMELINE))
            except (OSError, pa.ArrowException):
                continue
        return (pa.concat_tables(tables) if tables else schema.TIMELINE.empty_table()).to_pandas()

    # ---------------------------------------------------------------- perturbations

    def perturbation_path(self, perturbation_id: str) -> Path:
        return self.perturbations.path(perturbation_id)

    def has_perturbation(self, perturbation_id: str) -> bool:
        return self.perturbations.has(perturbation_id)

    def write_perturbation(self, perturbation_id: str, perturbation: Injection | Modification,
                           meta: Mapping[str, Any]) -> None:
        """Store one perturbation (:meth:`Perturbations.write`)."""
        self.perturbations.write(perturbation_id, perturbation, meta)

    def read_perturbation(self, perturbation_id: str) -> Injection | Modification:
        """The stored injection or modification (:meth:`Perturbations.read`)."""
        return self.perturbations.read(perturbation_id)

    def perturbation_meta(self, perturbation_id: str) -> dict[str, Any]:
        """The scalar columns of a stored perturbation (:meth:`Perturbations.meta`)."""
        return self.perturbations.meta(perturbation_id)

    def read_perturbations(self) -> pd.DataFrame:
        return self.perturbations.table()

    # ---------------------------------------------------------------- scores

    def done_cells(self) -> set[str]:
        """Ids of the score cells stored in readable files (:meth:`Scores.done_cells`)."""
        return self.scores.done_cells()

    def read_scores(self, on_warning: Callable[[str], None] | None = None, complete: bool = False) -> pd.DataFrame:
        """Every readable score row, each cell once (:meth:`Scores.read`; ``complete``:
        refuse a run whose skipped files hold cells no counted file holds)."""
        return self.scores.read(on_warning, complete=complete)

    def write_scores(self, rows: Sequence[Mapping[str, Any]]) -> list[Path]:
        """Write ``rows`` now, a file per partition (:meth:`Scores.write`)."""
        return self.scores.write(rows)

    def score_writer(self, max_rows: int = 4096, max_seconds: float = 10.0) -> ScoreWriter:
        """A :class:`ScoreWriter` that writes batches of rows here."""
        return ScoreWriter(self, max_rows, max_seconds)

    def compact(self, *, min_rows: int = 100_000) -> dict[str, int]:
        """Merge small score files, under the run's lock (:meth:`Scores.compact`)."""
        return self.scores.compact(min_rows=min_rows)

    # ---------------------------------------------------------------- leaderboards

    def write_leaderboard(self, name: str, table: pa.Table, markdown: str) -> None:
        """Write one board (:func:`grb_dist.store.artifacts.write_board`)."""
        write_board(self.root, name, table, markdown)


__all__ = ["MANIFEST", "STORE_FORMAT", "RunStore", "compatibility_error", "merged_components"]
