"""Files and directories a command writes: output files by the output rule
(:func:`output_target`), run directories, and what kind of file a path is.

Checked before anything is written, so that a bad path ends with one
:class:`~grb_dist.core.errors.ConfigError` line and nothing half-made on disk.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from grb_dist.core.errors import ConfigError


def special_file_kind(mode: int) -> str | None:
    """``None`` for the ``stat`` mode of a regular file, else what it is in words (``a
    directory``, ``a FIFO``, ``a device or socket``): a FIFO would block its reader forever
    and a device (``/dev/urandom``) never end, so input files are refused before they are
    opened when this is not ``None``."""
    if stat.S_ISREG(mode):
        return None
    return "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"


def _nearest_existing(path: Path) -> Path:
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_writable_dir(path: str | Path, what: str, flag: str) -> None:
    """A directory that will be created or written: it (or, when it does not exist yet, its
    nearest existing ancestor) must be a writable directory, and an existing run's
    sub-directories writable too."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"{what} {path} exists and is not a directory; choose another {flag}")
        targets = [path] + [p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")]
        for t in targets:
            if not os.access(t, os.W_OK | os.X_OK):
                raise ConfigError(f"{what} {t} is not writable; choose another {flag} or fix its permissions")
        return
    base = _nearest_existing(path)
    if not base.is_dir():
        raise ConfigError(f"cannot create {what} {path}: {base} is not a directory; choose another {flag}")
    if not os.access(base, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot create {what} {path}: {base} is not writable; choose another {flag}")


def output_target(path: str | Path, what: str = "--output", fix: str = "give a file path") -> Path:
    """The file that writing ``path`` replaces: the output rule of every command that writes
    where the user says (``--output``, ``study-tune``'s OUTPUT, the files of a report).

    Outputs are written to a temporary file in the directory of the file written and
    renamed over it, so: a regular file, or a path that does not exist, is itself; a
    symlink is followed when its target is a regular file (the target is rewritten, the
    link kept); anything else is refused with :class:`ConfigError` before it is touched: a
    directory, a device, FIFO or socket (a rename would replace the node), and a symlink to
    one of them, to nothing or in a loop. Reads only."""
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise ConfigError(f"cannot use {what} {path}: {exc.strerror or exc}") from None
    shown, target = str(path), path
    if stat.S_ISLNK(mode):
        try:
            target = path.resolve(strict=True)
            mode = os.stat(target).st_mode
        except (OSError, RuntimeError):  # a dangling link, a loop
            raise ConfigError(f"{what} {path} is a symlink that leads to no file; {fix}") from None
        shown = f"{path} (a symlink to {target})"
    kind = special_file_kind(mode)
    if kind == "a directory" and target is path:
        raise ConfigError(f"{what} {path} is a directory; give a file name")
    if kind:
        # the rename of a new file over it would replace the node (a device became a file)
        raise ConfigError(f"{what} {shown} is {kind}, not a regular file; {fix}")
    return target


def check_output_file(path: str | Path, flag: str = "--output") -> Path:
    """A file about to be written, by the output rule (:func:`output_target`): a regular
    file, a new path or a symlink to a regular file, whose directory exists and is
    writable. Returns ``path``."""
    path = Path(path)
    fix = "give a file path" + (" (to print, give --output - or leave --output out)" if flag == "--output" else "")
    target = output_target(path, flag, fix)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError(f"{flag} {path}: the directory {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise ConfigError(f"{flag} {path}: {parent if not target.exists() else target} is not writable")
    return path


def run_is_writable(run_dir: str | Path) -> bool:
    """Whether a run directory (and its leaderboard directory, if present) can be written."""
    run_dir = Path(run_dir)
    board = run_dir / "leaderboard"
    return os.access(run_dir, os.W_OK | os.X_OK) and (not board.exists() or os.access(board, os.W_OK | os.X_OK))


__all__ = ["check_output_file", "check_writable_dir", "output_target", "run_is_writable", "special_file_kind"]
