"""One writer per run directory: an exclusive ``flock`` on ``RUN_DIR/.lock``.

The lock is held for the driver's whole lifetime. The kernel releases it when the holding
process exits, however it exits (a SIGKILL included), so a lock left by a dead process is
simply free: the next sweep takes it over and writes its own PID into the file. The file
itself is never removed while it may be in use (removing a lock file that others wait on
would let two processes lock two different files); after taking the lock the holder checks
that the path still names the file it locked and retries otherwise.

The file holds one line of JSON: ``{"pid", "host", "since", "command"}``; it is what the
error of a second sweep on the same directory reports. Lock files are advisory and need a
local file system (or one with working ``flock``, which most network file systems emulate).
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any, Callable

from grb_dist.core.errors import StoreError

LOCK_NAME = ".lock"


class RunLockedError(StoreError):
    """Another live process holds the run directory."""


def _describe(holder: dict[str, Any] | None) -> str:
    if not holder or "pid" not in holder:
        return "another process (pid unknown)"
    where = f" on {holder['host']}" if holder.get("host") and holder.get("host") != socket.gethostname() else ""
    since = f", since {holder['since']}" if holder.get("since") else ""
    return f"pid {holder['pid']}{where}{since}"


class RunLock:
    """The exclusive lock of one run directory (a context manager).

    ``acquire`` creates the directory when it does not exist yet; ``release`` removes it
    again when this process created it and nothing but the lock file was written (a sweep
    refused after locking leaves nothing behind).
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.path = self.root / LOCK_NAME
        self._fd: int | None = None
        self._created = False

    @property
    def held(self) -> bool:
        return self._fd is not None

    def holder(self) -> dict[str, Any] | None:
        """The holder recorded in the lock file (None when unreadable or empty)."""
        try:
            text = self.path.read_text().strip()
            return json.loads(text) if text else None
        except (OSError, ValueError):
            return None

    def acquire(self, *, wait: bool = False, on_wait: Callable[[str], None] | None = None) -> "RunLock":
        """Take the lock; raise :class:`RunLockedError` naming the holder when it is taken
        (or block until it is free when ``wait``)."""
        if self._fd is not None:
            return self
        while True:
            self._make_root()
            if self.path.is_symlink() or (self.path.exists() and not self.path.is_file()):
                raise StoreError(f"{self.path} is not a plain file (a symlink, directory or device): a run's lock "
                                 "is a file grb-dist makes itself; remove it, or choose another --out")
            try:  # never through a symlink (one could appear between the check and the open)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise StoreError(f"{self.path} is a symlink: a run's lock is a file grb-dist makes itself; "
                                     "remove it, or choose another --out") from None
                raise StoreError(f"cannot write to the run directory {self.root}: {exc.strerror or exc}; "
                                 "choose a writable --out") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise StoreError(f"cannot lock {self.path}: {exc.strerror or exc}") from None
                holder = self.holder()
                if not wait:
                    os.close(fd)
                    raise RunLockedError(
                        f"{self.root} is in use by another grb-dist sweep ({_describe(holder)}); wait for it to "
                        "finish or stop it, pass --wait to queue behind it, or choose another --out"
                    ) from None
                if on_wait is not None:
                    on_wait(_describe(holder))
                fcntl.flock(fd, fcntl.LOCK_EX)
            # the path must still name the file we locked (it is never removed while in use,
            # but a directory removed and re-created under us would break the lock)
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "since": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "command": " ".join(sys.argv[:3])}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        self._fd = fd
        return self

    def _make_root(self) -> None:
        try:
            if not self.root.exists():
                self.root.mkdir(parents=True)
                self._created = True
            elif not self.root.is_dir():
                raise StoreError(f"{self.root} is not a directory; choose another --out")
        except FileExistsError:
            pass
        except OSError as exc:
            raise StoreError(f"cannot create the run directory {self.root}: {exc.strerror or exc}; "
                             "choose a writable --out") from None

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if self._created and [p.name for p in self.root.iterdir()] == [LOCK_NAME]:
                # nothing was written: leave no run directory behind (still under the lock)
                self.path.unlink(missing_ok=True)
                self.root.rmdir()
            else:
                os.ftruncate(fd, 0)
        except OSError:
            pass
        finally:
            os.close(fd)  # releases the flock

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


__all__ = ["LOCK_NAME", "RunLock", "RunLockedError", "pid_alive"]
