"""Runs in object storage: ``--out s3://bucket/prefix`` (``gs://``, or any URI that
``pyarrow.fs`` knows) as well as a local path.

A run in object storage is the same tree of files as a run directory (:mod:`grb_dist.store.run`),
so ``pd.read_parquet("s3://bucket/prefix/scores")`` reads it as it reads a local run. grb-dist
keeps its guarantees -- one writer, whole files, a resume that reads what is there -- by
working on a local staging copy of the run and mirroring it (:class:`Mirror`):

- before a command reads the run, the staging copy is brought up to date (:meth:`Mirror.pull`):
  files missing or changed remotely are downloaded, files removed remotely are removed, and
  files never uploaded (a sweep cut off before its upload) are kept for the next upload;
- while a sweep writes, every :data:`PUSH_SECONDS` and when it ends, new and changed files
  are uploaded (:meth:`Mirror.push`), ``manifest.json`` last, and files gone from the staging
  copy (compaction, quarantine) are removed remotely after the uploads. An object is written
  whole (one PUT), so a reader sees complete part files only; part files have unique names
  and are never rewritten;
- one writer at a time: a lease (:class:`Lease`). Object stores have no rename and no locks;
  each writer creates an object of its own under ``<prefix>/_lease/``, then lists them, and
  holds the run only when no other live lease is there: two writers cannot both hold it
  (the later of two creates always sees the earlier; both may give way, and say so). A lease
  expires :data:`LEASE_SECONDS` after its last renewal (every upload renews it), so a
  sweep that crashed bars the run for a few minutes, not for ever; the lease of a sweep
  that ran on this machine and has ended bars nothing (its endpoint was gone when it
  ended: the same command resumes at once).

Credentials come from the file system's usual places (for S3: the ``AWS_*`` environment,
``~/.aws``; ``AWS_ENDPOINT_URL`` for an S3-compatible server); grb-dist never prints or writes
them. The staging copy lives in ``$XDG_CACHE_HOME/grb-dist/runs/<sha of the URI>/``
(default ``~/.cache``), one per run, reused by the next command on the same machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import socket
import stat
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator

from grb_dist.core.errors import StoreError
from grb_dist.core.fileio import atomic_path, inside, temporary_owner, write_bytes
from grb_dist.store.lock import LOCK_NAME

#: Seconds between two uploads of a sweep's new files (and renewals of its lease).
PUSH_SECONDS = 15.0
#: Seconds a lease stays live after its last renewal.
LEASE_SECONDS = 300.0
LEASES = "_lease"
MANIFEST = "manifest.json"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
CHUNK = 8 << 20


def is_remote(out: str | os.PathLike | None) -> bool:
    """Whether ``out`` names a run in a remote file system (``scheme://...``, not ``file://``)."""
    return isinstance(out, str) and bool(_SCHEME.match(out)) and not out.lower().startswith("file://")


def staging_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "grb-dist" / "runs"


def _reason(exc: BaseException) -> str:
    """One line of a file system's error, the most useful part first."""
    text = " ".join(str(exc).split())
    for pattern, say in ((r"NO_SUCH_BUCKET|NoSuchBucket|bucket does not exist", "the bucket does not exist"),
                         (r"ACCESS_DENIED|AccessDenied|Forbidden|403|InvalidAccessKeyId|SignatureDoesNotMatch",
                          "permission denied (check the credentials: the AWS_* environment or ~/.aws)"),
                         (r"[Cc]ouldn't connect|curlCode|Connection refused|connect to server|timed out|"
                          r"Could not resolve", "the endpoint cannot be reached")):
        if re.search(pattern, text):
            return say
    return text[:300] or type(exc).__name__


class Mirror:
    """A run at ``uri`` and its local staging copy (:attr:`run_dir`)."""

    def __init__(self, uri: str, *, staging: Path | None = None):
        import pyarrow.fs as pafs

        self.uri = uri.rstrip("/")
        try:
            self.fs, base = pafs.FileSystem.from_uri(self.uri)
        except Exception as exc:  # noqa: BLE001 - an unknown scheme, a malformed URI
            raise StoreError(f"--out {uri}: not a location grb-dist can write ({_reason(exc)}); give a local "
                             "directory or an s3:// / gs:// URI") from None
        self.base = base.rstrip("/")
        if not self.base or "/" not in self.base and type(self.fs).__name__ in ("S3FileSystem", "GcsFileSystem"):
            raise StoreError(f"--out {uri}: give a prefix inside the bucket (s3://bucket/prefix), not the bucket itself")
        home = staging or staging_root() / hashlib.sha256(self.uri.encode()).hexdigest()[:20]
        self.run_dir = home / "run"
        self._state_path = home / "synced.json"
        self.state: dict[str, list[int]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lease: Lease | None = None
        self.errors: list[str] = []

    # ------------------------------------------------------------------ listing

    def _error(self, what: str, exc: BaseException) -> StoreError:
        return StoreError(f"cannot {what} {self.uri}: {_reason(exc)}")

    def remote_files(self) -> dict[str, tuple[int, int]]:
        """``{relative path: (size, mtime in ns)}`` of the run's objects (leases left out)."""
        import pyarrow.fs as pafs

        try:
            infos = self.fs.get_file_info(pafs.FileSelector(self.base, recursive=True, allow_not_found=True))
        except Exception as exc:  # noqa: BLE001
            raise self._error("read", exc) from None
        out = {}
        for info in infos:
            if info.type != pafs.FileType.File:
                continue
            rel = info.path[len(self.base) + 1:]
            if rel.split("/", 1)[0] != LEASES:
                out[rel] = (int(info.size or 0), int(info.mtime_ns or 0))
        return out

    def check(self) -> None:
        """The location can be read (bucket, endpoint, credentials): one line if not."""
        import pyarrow.fs as pafs

        bucket = self.base.split("/", 1)[0]
        try:
            missing = self.fs.get_file_info(bucket).type == pafs.FileType.NotFound
        except Exception as exc:  # noqa: BLE001
            raise self._error("read", exc) from None
        if missing:
            raise StoreError(f"cannot use {self.uri}: the bucket {bucket!r} does not exist (or these credentials do "
                             "not see it); create it first or give another --out")
        self.remote_files()

    # ------------------------------------------------------------------ state

    def _load_state(self) -> None:
        try:
            raw = json.loads(self._state_path.read_text())
            self.state = {str(k): [int(x) for x in v] for k, v in raw.items() if isinstance(v, list) and len(v) == 4}
        except (OSError, ValueError, TypeError):
            self.state = {}

    def _save_state(self) -> None:
        self._state_path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes(json.dumps(self.state, sort_keys=True).encode(), self._state_path)

    def local_files(self) -> dict[str, tuple[int, int]]:
        """``{relative path: (size, mtime in ns)}`` of the staging copy's regular files: not
        the local lock, no temporaries, no symlinks (never followed)."""
        out: dict[str, tuple[int, int]] = {}
        if not self.run_dir.is_dir():
            return out
        for dirpath, dirnames, filenames in os.walk(self.run_dir):
            for name in filenames:
                path = Path(dirpath) / name
                st = os.lstat(path)
                if not stat.S_ISREG(st.st_mode) or temporary_owner(name) is not None:
                    continue
                rel = path.relative_to(self.run_dir).as_posix()
                if rel != LOCK_NAME:
                    out[rel] = (st.st_size, st.st_mtime_ns)
        return out

    # ------------------------------------------------------------------ pull / push

    def pull(self) -> int:
        """Bring the staging copy up to date with the remote run; the number of files
        downloaded. A file that was in sync and is gone remotely is removed; a file that
        never was (not uploaded yet) is kept."""
        self._load_state()
        remote, local = self.remote_files(), self.local_files()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        n = 0
        for rel, (size, mtime) in remote.items():
            known = self.state.get(rel)
            if known is not None and local.get(rel) == (known[0], known[1]) and (known[2], known[3]) == (size, mtime):
                continue
            path = inside(self.run_dir, rel, f"the remote run {self.uri}")
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                with atomic_path(path) as tmp, self.fs.open_input_stream(f"{self.base}/{rel}") as src, \
                        open(tmp, "wb") as dst:
                    while chunk := src.read(CHUNK):
                        dst.write(chunk)
            except StoreError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise self._error(f"download {rel} of", exc) from None
            st = os.lstat(path)
            self.state[rel] = [st.st_size, st.st_mtime_ns, size, mtime]
            n += 1
        for rel in set(local) - set(remote):
            if rel in self.state:  # uploaded once, removed remotely since (a compaction elsewhere)
                (self.run_dir / rel).unlink(missing_ok=True)
                del self.state[rel]
        self._save_state()
        return n

    def push(self) -> int:
        """Upload what changed in the staging copy since it was last in sync (the manifest
        last), then remove remotely what is gone locally; renew the lease. The number of
        files uploaded."""
        local = self.local_files()
        changed = sorted((rel for rel, st in local.items() if tuple(self.state.get(rel, [None, None])[:2]) != st),
                         key=lambda rel: rel == MANIFEST)
        for rel in changed:
            try:
                with open(self.run_dir / rel, "rb") as src, self.fs.open_output_stream(f"{self.base}/{rel}") as dst:
                    while chunk := src.read(CHUNK):
                        dst.write(chunk)
            except FileNotFoundError:  # replaced or removed while uploading: the next push sees it
                continue
            except Exception as exc:  # noqa: BLE001
                raise StoreError(f"cannot upload {rel} to {self.uri}: {_reason(exc)}; what is not uploaded is kept "
                                 f"in {self.run_dir} and the same command again uploads it") from None
            self.state[rel] = [*local[rel], -1, -1]
        gone = [rel for rel in self.state if rel not in local]
        for rel in gone:
            try:
                self.fs.delete_file(f"{self.base}/{rel}")
            except FileNotFoundError:
                pass
            except Exception as exc:  # noqa: BLE001
                raise self._error(f"remove {rel} from", exc) from None
            del self.state[rel]
        if changed:  # what the remote now says of them: a later pull compares with it
            remote = self.remote_files()
            for rel in changed:
                if rel in remote and rel in self.state:
                    self.state[rel][2:] = list(remote[rel])
        self._save_state()
        if self.lease is not None:
            self.lease.renew()
        return len(changed)

    # ------------------------------------------------------------------ while a sweep writes

    def start(self, period: float | None = None, on_warning: Callable[[str], None] | None = None) -> None:
        """Push every ``period`` seconds (default :data:`PUSH_SECONDS`) in a thread until
        :meth:`stop`; an upload that fails is said once (``on_warning``) and tried again at
        the next period."""
        period = PUSH_SECONDS if period is None else period

        def loop() -> None:
            while not self._stop.wait(period):
                try:
                    self.push()
                except StoreError as exc:
                    if str(exc) not in self.errors and on_warning is not None:
                        on_warning(f"{exc}; trying again every {period:.0f} s")
                    self.errors.append(str(exc))

        self._thread = threading.Thread(target=loop, name="grb-dist-upload", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread of :meth:`start` and push what is left."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self.push()


class Lease:
    """The one-writer lease of a remote run (module docstring)."""

    def __init__(self, mirror: Mirror, seconds: float = LEASE_SECONDS):
        self.mirror, self.seconds = mirror, seconds
        self.name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:12]}.json"
        self.path = f"{mirror.base}/{LEASES}/{self.name}"
        self.held = False

    def _write(self) -> None:
        body = {"host": socket.gethostname(), "pid": os.getpid(), "expires": time.time() + self.seconds}
        try:
            with self.mirror.fs.open_output_stream(self.path) as out:
                out.write(json.dumps(body).encode())
        except Exception as exc:  # noqa: BLE001
            raise self.mirror._error("take the lease of", exc) from None

    def _others(self) -> list[dict]:
        """The live leases of other writers; expired ones are removed."""
        import pyarrow.fs as pafs

        fs = self.mirror.fs
        try:
            infos = fs.get_file_info(pafs.FileSelector(f"{self.mirror.base}/{LEASES}", allow_not_found=True))
        except Exception as exc:  # noqa: BLE001
            raise self.mirror._error("read", exc) from None
        live = []
        for info in infos:
            if info.type != pafs.FileType.File or info.path == self.path:
                continue
            try:
                with fs.open_input_stream(info.path) as src:
                    body = json.loads(src.read(4096))
                expires = float(body["expires"])
            except FileNotFoundError:
                continue
            except Exception:  # noqa: BLE001 - unreadable: counts as live until it is old
                body, expires = {}, (info.mtime_ns or 0) / 1e9 + self.seconds
            if expires > time.time() and not self._dead(body):
                live.append(body)
            else:
                with contextlib.suppress(Exception):
                    fs.delete_file(info.path)
        return live

    @staticmethod
    def _dead(body: dict) -> bool:
        """Whether the lease's writer ran on this machine and has ended (a sweep whose last
        upload and lease release failed, the endpoint gone: the same command resumes at once
        instead of waiting for the lease to expire)."""
        pid = body.get("pid")
        if body.get("host") != socket.gethostname() or not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:  # alive, another user's
            return False
        return False

    def _refuse(self, other: dict) -> StoreError:
        who = f" (host {other.get('host', '?')}, pid {other.get('pid', '?')})" if other else ""
        return StoreError(f"{self.mirror.uri} is being written by another sweep{who}; wait for it to finish (a "
                          f"crashed sweep's lease expires within {self.seconds / 60:.0f} minutes), or give another --out")

    def acquire(self) -> "Lease":
        others = self._others()
        if others:
            raise self._refuse(others[0])
        self._write()
        others = self._others()
        if others:  # another writer came at the same time: give way (both may)
            self.release()
            raise self._refuse(others[0])
        self.held = True
        self.mirror.lease = self
        return self

    def renew(self) -> None:
        if self.held:
            self._write()

    def release(self) -> None:
        self.held = False
        if self.mirror.lease is self:
            self.mirror.lease = None
        with contextlib.suppress(Exception):
            self.mirror.fs.delete_file(self.path)


@contextlib.contextmanager
def staged(out: str | os.PathLike | None, *, write: bool,
           on_warning: Callable[[str], None] | None = None) -> Iterator[Path | None]:
    """The run directory to work on for ``out``: ``out`` itself when it is local (``None``
    when it is not given); for a remote run, its staging copy, pulled (and, with ``write``,
    under the run's lease, pushed every :data:`PUSH_SECONDS` and when the block ends, also
    on an error or Ctrl-C)."""
    if not is_remote(out):
        yield None if out is None else Path(out)
        return
    mirror = Mirror(str(out))
    mirror.check()
    lease = Lease(mirror).acquire() if write else None
    try:
        mirror.pull()
        if not write:
            yield mirror.run_dir
            return
        mirror.start(on_warning=on_warning)
        try:
            yield mirror.run_dir
        except BaseException:
            try:
                mirror.stop()  # what was written before the error or Ctrl-C
            except StoreError as exc:  # the first error is the one to raise; this one is said
                if on_warning is not None:
                    on_warning(str(exc))
            raise
        mirror.stop()
    finally:
        if lease is not None:
            lease.release()


__all__ = ["LEASE_SECONDS", "Lease", "Mirror", "PUSH_SECONDS", "is_remote", "staged", "staging_root"]
