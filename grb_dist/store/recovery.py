"""Start-up of a run directory under its lock: what an interrupted writer left behind.

:func:`recover` finishes or undoes an interrupted compaction
(:func:`grb_dist.store.scores.recover_compaction`), removes the temporary files of writers
that are provably gone (:func:`remove_temporaries`) and moves unreadable, torn or foreign
table files to ``quarantine/`` (:func:`quarantine_bad_files`), so that every table file
left is one grb-dist wrote completely. Call these only while holding the run's lock.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

from grb_dist.core.fileio import HOST_TAG, temporary_owner
import grb_dist.store.schema as schema
from grb_dist.store.lock import pid_alive
from grb_dist.store.parquet import check_magic, partition_of, read_partitioned_file, table_entries
from grb_dist.store.scores import Scores, checksum_path, recover_compaction

log = logging.getLogger(__name__)

QUARANTINE = "quarantine"


def recover(root: str | Path) -> dict[str, int]:
    """Finish or undo an interrupted compaction, remove stale temporaries, quarantine bad
    table files of the run ``root``; returns how many of each."""
    counts = {"compaction": recover_compaction(root), "temporaries": remove_temporaries(root)}
    counts["quarantined"] = quarantine_bad_files(root)
    return counts


def remove_temporaries(root: str | Path) -> int:
    """Remove temporary files of writers that are provably gone: this process's own, or
    those of a PID on this host that no longer exists. Temporaries of live processes
    (and of other hosts) are left alone."""
    n = 0
    for p in Path(root).rglob(".*.tmp-*"):
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


def quarantine_bad_files(root: str | Path) -> int:
    """Move what grb-dist cannot trust out of ``scores/`` and ``perturbations/`` (and what
    is not a regular file out of ``models/`` and ``training/``) into ``quarantine/``,
    keeping its relative path; the cells of those files are recomputed. Afterwards
    ``pandas.read_parquet(RUN/"scores")`` reads exactly the rows grb-dist counts.

    Quarantined: symlinks (moved, never followed), FIFOs and other files pandas would read;
    score files that are unreadable, not in the layout, not ours, changed since written
    (checksum) or a copy of rows other files hold; perturbation files that fail the cheap
    check (layout and Parquet magic at both ends; one damaged otherwise is reported when it
    is read and recomputed then). Then the run's score files are checksummed if they were
    not (:meth:`~grb_dist.store.scores.Scores.adopt`).
    """
    root = Path(root)
    bad = untrusted_files(root)
    for path, reason in bad:
        dest = root / QUARANTINE / path.relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.exists() or dest.is_symlink():
            dest = dest.with_name(f"{dest.name}.{uuid.uuid4().hex[:8]}")  # an earlier quarantine's: kept
        os.replace(path, dest)
        if checksum_path(path).is_file():
            os.replace(checksum_path(path), checksum_path(dest))
        log.warning("moved %s to %s: %s", path.relative_to(root), dest.relative_to(root), reason)
    Scores(root).adopt()
    return len(bad)


def untrusted_files(root: str | Path) -> list[tuple[Path, str]]:
    """What :func:`quarantine_bad_files` would move, with the reason, found without moving
    or writing anything (a read-only run is reported with it)."""
    root = Path(root)
    scores = Scores(root)
    bad: list[tuple[Path, str]] = []
    for sub in ("scores", "perturbations"):
        base = root / sub
        files, foreign = table_entries(base)
        bad.extend(foreign)
        seen: set[str] = set()
        for path in files:
            try:
                if sub == "scores":
                    reason = scores.verify(path)
                    if reason:
                        raise ValueError(reason)
                    ids = read_partitioned_file(base, path, schema.SCORE_FILE, schema.SCORES,
                                                columns=["cell_id"]).column("cell_id").to_pylist()
                    if ids and seen.issuperset(ids):
                        raise ValueError("every row is also in another file (a copy)")
                    seen.update(ids)
                else:
                    partition_of(base, path)
                    check_magic(path)
            except Exception as exc:  # noqa: BLE001
                bad.append((path, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
    for sub in ("models", "training"):
        base = root / sub
        if base.is_dir() and not base.is_symlink():
            bad.extend((p, "not a regular file") for p in base.iterdir()
                       if not p.name.startswith(".") and (p.is_symlink() or not p.is_file()))
    return bad


__all__ = ["QUARANTINE", "quarantine_bad_files", "recover", "remove_temporaries", "untrusted_files"]
