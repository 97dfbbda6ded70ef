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
from pathlib import Path

from grb_dist.core.fileio import HOST_TAG, temporary_owner
import grb_dist.store.schema as schema
from grb_dist.store.lock import pid_alive
from grb_dist.store.parquet import check_magic, partition_of, read_partitioned_file, visible_files
from grb_dist.store.scores import recover_compaction

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
    """Move unreadable, torn or foreign files out of ``scores/`` and ``perturbations/``
    into ``quarantine/`` (keeping their relative path); their cells are recomputed.

    Score files (few, many rows each) are opened and their schema checked; perturbation
    files (one per injected graph, possibly many thousands) get the cheap check only
    (layout and Parquet magic at both ends, which a truncated file fails); one that is
    damaged otherwise is reported when it is read and recomputed then.
    """
    root = Path(root)
    n = 0
    for sub in ("scores", "perturbations"):
        base = root / sub
        for path in visible_files(base):
            try:
                if sub == "scores":
                    read_partitioned_file(base, path, schema.SCORE_FILE, schema.SCORES, columns=["cell_id"])
                else:
                    partition_of(base, path)
                    check_magic(path)
            except Exception as exc:  # noqa: BLE001
                dest = root / QUARANTINE / sub / path.relative_to(base)
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, dest)
                log.warning("moved %s to %s: %s", path, dest, str(exc).splitlines()[0] if str(exc) else exc)
                n += 1
    return n


__all__ = ["QUARANTINE", "quarantine_bad_files", "recover", "remove_temporaries"]
