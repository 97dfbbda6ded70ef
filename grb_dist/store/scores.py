"""The score table of a run: ``scores/scenario=<s>/dataset=<d>/difficulty=<x>/part-<uuid>.parquet``.

Rows are buffered by the driver (:class:`ScoreWriter`) and written many rows per file, one
new file per partition and batch. Whether a cell is done comes from the cell ids of the rows
that could be read (:meth:`Scores.done_cells`); a torn or foreign file is skipped, so its
cells are recomputed. :meth:`Scores.compact` merges small files under a journal
(``scores/.compact-journal.json``) that :func:`recover_compaction` finishes after a crash.

Every score file has its SHA-256 next to it (``.<name>.sha256``, hidden, so pandas does not
read it), written before the file is renamed into place. A run that records checksums
(``scores/.checksums``, made when a run is opened for writing) verifies each file as it is
read: a file whose bytes changed, or one without a checksum (a copy, a file grb-dist did
not write), is skipped with a warning and moved to ``quarantine/`` on the next write. The
files of a run from before checksums are adopted (checksummed as they are) when it is next
opened for writing.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from grb_dist.core.errors import StoreError
from grb_dist.core.fileio import atomic_path, file_sha256, fsync_dir, inside, write_bytes
import grb_dist.store.schema as schema
from grb_dist.store.parquet import (
    Scan,
    first_of_each,
    partition_path,
    read_partitioned_file,
    scan_partitioned,
    visible_files,
)

log = logging.getLogger(__name__)

SCORES = "scores"
JOURNAL = ".compact-journal.json"
#: In ``scores/``: present when every score file of the run carries its checksum.
CHECKSUMS = ".checksums"


def checksum_path(path: Path) -> Path:
    """Where the SHA-256 of score file ``path`` is kept."""
    return path.with_name(f".{path.name}.sha256")


def write_checksummed(table: pa.Table, path: Path, **kwargs: Any) -> None:
    """Write score ``table`` to ``path`` atomically, its checksum first (a crash in between
    leaves a checksum without a file, which is harmless, never a file without one)."""
    with atomic_path(path, sync_dir=True) as tmp:
        pq.write_table(table, tmp, **kwargs)
        write_bytes(file_sha256(tmp).encode(), checksum_path(path))


class Scores:
    """Reads and writes the score table of the run directory ``root``."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.base = self.root / SCORES

    @property
    def checksummed(self) -> bool:
        """Whether every score file of this run must carry its checksum."""
        return (self.base / CHECKSUMS).is_file()

    def verify(self, path: Path) -> str | None:
        """Why score file ``path`` cannot be trusted (None when it can): its bytes no longer
        match its checksum, or it has none in a run that records them."""
        recorded = checksum_path(path)
        if recorded.is_symlink() or not recorded.is_file():
            return "no checksum: not a file grb-dist wrote (a copy?)" if self.checksummed else None
        try:
            if recorded.read_text().strip() == file_sha256(path):
                return None
        except OSError as exc:
            return f"unreadable: {exc.strerror or exc}"
        return "its content changed after grb-dist wrote it (checksum mismatch)"

    def adopt(self) -> int:
        """Record the checksum of every readable score file that has none, then mark the run
        as checksummed (a run from before checksums, opened for writing). Under the lock."""
        if self.checksummed or not self.base.is_dir():
            return 0
        n = 0
        for path in visible_files(self.base):
            if not checksum_path(path).exists():
                write_bytes(file_sha256(path).encode(), checksum_path(path))
                n += 1
        write_bytes(b"every score file has its sha256 in .<name>.sha256\n", self.base / CHECKSUMS)
        return n

    def scan(self, columns: Sequence[str] | None = None) -> Scan:
        """Every readable, verified score row (each cell once) and the files that were
        skipped."""
        if columns is not None and "cell_id" not in columns:
            columns = ["cell_id", *columns]
        return scan_partitioned(self.base, schema.SCORE_FILE, schema.SCORES, "cell_id", columns, verify=self.verify)

    def done_cells(self) -> set[str]:
        """Ids of the score cells stored in readable files."""
        scan = self.scan(columns=["cell_id"])
        return set(scan.table.column("cell_id").to_pylist())

    def uncounted(self, scan: Scan) -> tuple[set[str], list[tuple[Path, str]], list[tuple[Path, str]]]:
        """Of the Parquet files ``scan`` skipped (changed, copied, foreign, torn) and those
        moved to ``quarantine/scores/`` earlier: the cell ids they hold that no counted file
        holds (and the files holding them), and the skipped files whose cells cannot be read
        at all (a torn file in quarantine/ is not: its cells were recomputed or are counted
        as missing when it was skipped). Either means boards made from the counted rows miss
        cells until a sweep recomputes them."""
        counted = set(scan.table.column("cell_id").to_pylist())
        required = {f.name for f in schema.SCORE_FILE if not (f.metadata and b"default" in f.metadata)}
        missing: set[str] = set()
        holding: list[tuple[Path, str]] = []  # the files that hold them
        unknown: list[tuple[Path, str]] = []
        moved = self.root / "quarantine" / "scores"
        quarantined = [(p, "moved to quarantine/ earlier") for p in sorted(moved.rglob("*.parquet"))
                       if not p.name.startswith(".")] if moved.is_dir() and not moved.is_symlink() else []
        for path, reason in [*scan.bad, *quarantined]:
            if path.is_symlink() or not path.is_file() or path.suffix != ".parquet":
                continue
            try:
                if not required <= set(pq.read_schema(path).names):
                    continue  # not a score file (another table's columns): it holds no cell of this run
                ids = pq.read_table(path, columns=["cell_id"]).column("cell_id").to_pylist()
            except Exception:  # noqa: BLE001 - torn or not Parquet: its cells are unknown
                if path.is_relative_to(self.base):
                    unknown.append((path, reason))
                continue
            lost = {str(i) for i in ids if i not in counted}
            if lost:
                missing.update(lost)
                holding.append((path, reason))
        return missing, holding, unknown

    def read(self, on_warning: Callable[[str], None] | None = None, *, complete: bool = False) -> pd.DataFrame:
        """All readable score rows as a DataFrame with the columns of :data:`schema.SCORES`
        (skipped files are passed to ``on_warning``, or logged, with a line saying that
        pandas reads them too).

        ``complete`` (boards, reports): a :class:`StoreError` line instead when a skipped file
        holds cells no counted file holds, or cells that cannot be read (:meth:`uncounted`):
        boards over the remaining rows would look whole and miss those cells."""
        scan = self.scan()
        if complete:
            cells, holding, unknown = self.uncounted(scan)
            if cells or unknown:
                first, why = unknown[0] if unknown else holding[0]
                more = len(unknown) + len(holding) - 1
                raise StoreError(
                    f"{self.root}: {f'{len(cells):,} cells' if cells else 'cells'} are held only in score files "
                    f"grb-dist does not count ({first.relative_to(self.root)}: {why}"
                    + (f"; and {more} more" if more else "") + "), so boards would leave them out: run the run's "
                    "sweep again with --out on it (it moves such files to quarantine/ and recomputes their cells)")
        warn = on_warning or log.warning
        for w in scan.warnings(self.root):
            warn(w)
        if scan.bad:
            warn(f"pandas.read_parquet({self.base}) also reads the {len(scan.bad)} skipped entries (their rows would "
                 "count twice); a sweep on the run, with write access, moves them to quarantine/")
        return scan.table.to_pandas()

    def write(self, rows: Sequence[Mapping[str, Any]]) -> list[Path]:
        """Write ``rows`` now: one new file per partition present in them."""
        groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
        for r in rows:
            groups.setdefault(tuple(r[k] for k in schema.PARTITION), []).append({**schema.ADDED_DEFAULTS, **r})  # type: ignore[arg-type]
        written = []
        for key, group in groups.items():
            directory = partition_path(self.base, *key)
            directory.mkdir(parents=True, exist_ok=True)
            table = pa.Table.from_pylist(group, schema=schema.SCORE_FILE)  # takes the file's columns only
            path = directory / f"part-{uuid.uuid4().hex}.parquet"
            write_checksummed(table, path)
            written.append(path)
        return written

    # ---------------------------------------------------------------- compaction

    def compact(self, *, min_rows: int = 100_000) -> dict[str, int]:
        """Merge the small files (fewer than ``min_rows`` rows) of each score partition into
        one file, without changing any row. Call only while holding the run's lock.

        Per partition: the merged file is written to a temporary file, a journal naming
        it and its sources is written, the merged file is renamed into place, the sources
        are removed, then the journal. A crash at any point leaves either the old files or
        the merged one (:func:`recover_compaction` finishes the job from the journal); in
        the instant between the rename and the removal, readers other than grb-dist's may
        see a row twice.
        """
        recover_compaction(self.root)
        by_dir: dict[Path, list[Path]] = {}
        for p in visible_files(self.base):
            by_dir.setdefault(p.parent, []).append(p)
        stats = {"partitions": 0, "files_before": 0, "files_after": 0, "rows": 0, "skipped": 0}
        for directory, files in sorted(by_dir.items()):
            small, tables = [], []
            for p in files:
                try:
                    if self.verify(p):
                        raise ValueError("not verified")
                    pf = pq.ParquetFile(p)
                    if pf.metadata.num_rows >= min_rows:
                        continue
                    t = read_partitioned_file(self.base, p, schema.SCORE_FILE, schema.SCORES)
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
            merged, _ = first_of_each(pa.concat_tables(tables), "cell_id")
            target = directory / f"part-{uuid.uuid4().hex}.parquet"
            journal = self.base / JOURNAL
            with atomic_path(target) as tmp:
                pq.write_table(merged, tmp, row_group_size=256 * 1024)
                write_bytes(file_sha256(tmp).encode(), checksum_path(target))
                write_bytes(json.dumps({"target": str(target.relative_to(self.root)),
                                        "sources": [str(p.relative_to(self.root)) for p in small]}).encode(), journal)
            fsync_dir(directory)
            for p in small:
                p.unlink()
                checksum_path(p).unlink(missing_ok=True)
            fsync_dir(directory)
            journal.unlink()
            stats["partitions"] += 1
            stats["rows"] += merged.num_rows
            stats["files_after"] += len(files) - len(small) + 1
        return stats


def recover_compaction(root: str | Path) -> int:
    """Finish a compaction of the run ``root`` that was interrupted after its merged file
    was renamed into place (remove the sources its journal names), or forget one that
    was interrupted before (the old files are all there). Returns 1 when there was a
    journal, else 0. Call only while holding the run's lock."""
    root = Path(root)
    journal = root / SCORES / JOURNAL
    if journal.is_symlink():
        raise StoreError(f"{journal} is a symlink; a run's compaction journal is a file grb-dist writes itself: "
                         "remove it")
    if not journal.is_file():
        return 0
    try:
        data = json.loads(journal.read_text())
        names = [data["target"], *data["sources"]]
        if not all(isinstance(n, str) for n in names):
            raise TypeError
    except (OSError, ValueError, KeyError, TypeError):
        journal.unlink(missing_ok=True)  # written atomically: unreadable means foreign
        return 0
    # every path it names must lie inside the run's scores/ (checked before anything moves)
    target, *sources = [inside(root, n, f"the compaction journal {journal}") for n in names]
    scores = (root / SCORES).resolve()
    outside = [p for p in (target, *sources) if not p.resolve().is_relative_to(scores)]
    if outside:
        raise StoreError(f"the compaction journal {journal} names {outside[0]}, outside the run's scores/; "
                         "nothing was changed: remove the journal if you did not write it")
    if target.is_file():  # the merged file is in place: finish removing its sources
        for s in sources:
            s.unlink(missing_ok=True)
            checksum_path(s).unlink(missing_ok=True)
    journal.unlink(missing_ok=True)
    return 1


class ScoreSink(Protocol):
    """Where a :class:`ScoreWriter` writes (a :class:`~grb_dist.store.RunStore`)."""

    def write_scores(self, rows: Sequence[Mapping[str, Any]]) -> list[Path]: ...


class ScoreWriter:
    """Buffers score rows in the driver and writes them in batches.

    :meth:`add` takes the rows of one scoring result (one perturbation's rows for a group
    of defenses) and writes the buffer when it holds ``max_rows`` rows or its oldest row is
    ``max_seconds`` old, whichever comes first; :meth:`flush` writes whatever is buffered
    (the runner calls it on every exit path, Ctrl-C included). A SIGKILL loses at most the
    buffered rows, which the next run recomputes (their cells are not done).
    """

    def __init__(self, store: ScoreSink, max_rows: int = 4096, max_seconds: float = 10.0,
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


__all__ = ["JOURNAL", "ScoreSink", "ScoreWriter", "Scores", "recover_compaction"]
