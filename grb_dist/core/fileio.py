"""Atomic file writing: the one place grb_dist writes a file so that a reader sees either no
file or a complete one.

A file is written to a hidden temporary file in its final directory
(``.<name>.tmp-<host>-<pid>-<uuid>``), fsync'd, and moved into place with ``os.replace``
(atomic on POSIX). The temporary name carries a tag of this host and the writer's PID, so a
later process can tell a temporary file of a writer that is provably gone (this host, a PID
that no longer exists) from one still being written (:func:`temporary_owner`).
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from grb_dist.core.errors import ConfigError, StoreError

#: Tag of this host in temporary names (the first 8 hex digits of the sha1 of its name).
HOST_TAG = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]
#: A temporary name; ``host`` is absent in the names of older versions (PID only).
_TEMPORARY = re.compile(r"^\..+\.tmp-(?:(?P<host>[0-9a-f]{8})-)?(?P<pid>\d+)-[0-9a-f]+$")


def inside(root: Path, relative: str, what: str) -> Path:
    """``root / relative`` when it stays inside ``root``: a relative path without ``..``,
    that no symlink on the way leads out of ``root``. Anything else (an absolute path, a
    path that climbs out, a symlink pointing elsewhere) raises :class:`StoreError` naming
    ``what`` named it; nothing is touched."""
    rel = Path(str(relative))
    root = Path(root)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise StoreError(f"{what} names {str(relative)!r}, a path outside the run directory {root}; "
                         "nothing was changed: remove that file if you did not write it")
    path = root / rel
    real_root = root.resolve()
    if not path.resolve().is_relative_to(real_root) or any(p.is_symlink() for p in [path, *path.parents]
                                                           if p.is_relative_to(root) and p != root):
        raise StoreError(f"{what} names {str(relative)!r}, which a symlink leads outside the run directory "
                         f"{root}; nothing was changed: remove the symlink")
    return path


def temporary_path(path: Path) -> Path:
    """A fresh temporary path next to ``path``, named after this host and process."""
    return path.with_name(f".{path.name}.tmp-{HOST_TAG}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def temporary_owner(name: str) -> tuple[str | None, int] | None:
    """``(host tag, pid)`` of the writer of a temporary file called ``name`` (host tag None
    for names without one); None when ``name`` is not a temporary name."""
    m = _TEMPORARY.match(name)
    if not m:
        return None
    return m.group("host"), int(m.group("pid"))


def fsync_dir(directory: Path) -> None:
    """Flush ``directory``'s entries (a rename in it) to disk; best effort."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: Path, *, sync_dir: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success fsync and rename it to ``path``
    (and, with ``sync_dir``, flush the directory).

    On an exception the temporary file is removed and ``path`` is left untouched.
    """
    path = Path(path)
    tmp = temporary_path(path)
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        if sync_dir:
            fsync_dir(path.parent)
    finally:
        try:
            tmp.unlink()
        except OSError:  # renamed into place, never made (a read-only file system): keep the first error
            pass


def file_sha256(path: Path) -> str:
    """SHA-256 (hex) of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_bytes(data: bytes, path: Path) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_output(data: bytes, path: Path, what: str = "--output", fix: str = "give a file path") -> Path:
    """Write ``data`` where the user said (``--output``, ``study-tune``'s OUTPUT, a
    report's files), by the output rule of :func:`grb_dist.core.paths.output_target`: a
    regular file or new path is written atomically in its own directory, a symlink's
    regular-file target likewise (the link is kept), anything else is refused before it is
    touched. A write that fails (a full disk, a read-only file system, no permission) is a
    :class:`ConfigError` naming it, with the temporary file removed and the old file, if
    any, unchanged. Returns the file written."""
    from grb_dist.core.paths import output_target

    target = output_target(path, what, fix)
    try:
        write_bytes(data, target)
    except OSError as exc:
        raise ConfigError(f"cannot write {what} {path}: {exc.strerror or exc}; nothing was written") from None
    return target


__all__ = ["HOST_TAG", "atomic_path", "file_sha256", "fsync_dir", "temporary_owner", "temporary_path", "write_bytes",
           "write_output"]
