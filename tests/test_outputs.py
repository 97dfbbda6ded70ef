"""The output rule of every command that writes where the user says (``leaderboard
--output``, ``report --output``, ``study-tune OUTPUT``): a regular file or a new path is
written by temporary file + rename in its own directory; a symlink to a regular file has its
target written (the link stays a link); a device, FIFO or socket, and a symlink to one, is
refused with one line and left as it was; a write that fails (a full disk, a read-only file
system, no permission) is one line with the old file unchanged and no temporary file left.

Device nodes are made with ``mknod`` inside the test's own directory, never the machine's
``/dev``; the cases that need one are skipped where ``mknod`` is not allowed (not root). A
full disk is simulated by making the flush of the written file fail with ``ENOSPC``, and
with a real full device (a node of ``/dev/full``'s numbers) where one can be made.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grb_dist.cli import app
from grb_dist.core import fileio
from grb_dist.core.paths import check_output_file, output_target
from grb_dist.core.errors import ConfigError
from test_leaderboard import make_run, synthetic_scores

runner = CliRunner()


def mknod(path: Path, major: int, minor: int) -> Path:
    """A character device node at ``path``; skips the test where making one is not allowed."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(major, minor))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here ({exc.strerror}); mknod needs root")
    return path


def state(path: Path) -> tuple:
    """What must not change: the node's kind, identity, device numbers, size and time."""
    st = os.lstat(path)
    return st.st_mode, st.st_ino, st.st_rdev, st.st_size, st.st_mtime_ns


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def one_error_line(result, *words: str) -> str:
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_run(tmp_path / "run", synthetic_scores(scenarios=("injection",), difficulties=("full",)))
    return tmp_path / "run"


# ----------------------------------------------------------------------------- links to files


def test_output_at_a_symlink_to_a_regular_file_writes_the_target_and_keeps_the_link(run, tmp_path):
    (tmp_path / "boards").mkdir()
    target = tmp_path / "boards" / "board.md"
    target.write_text("old\n")
    link = tmp_path / "board.md"
    link.symlink_to(Path("boards") / "board.md")  # relative, as ln -s makes them
    r = runner.invoke(app, ["leaderboard", "run", "--output", "board.md"])
    assert r.exit_code == 0, r.output
    assert link.is_symlink() and os.readlink(link) == str(Path("boards") / "board.md")
    assert "Defenses over attacks" in target.read_text()  # the target was written, through the link
    assert listing(tmp_path / "boards") == ["board.md"]  # renamed in the target's own directory
    assert not [n for n in listing(tmp_path) if n.startswith(".")]  # no temporary left anywhere


def test_study_tune_output_and_report_files_follow_the_same_rule(run, tmp_path):
    # study-tune: a FIFO and a link to one are refused before any work
    os.mkfifo(tmp_path / "tuned.fifo")
    (tmp_path / "tuned.yaml").symlink_to(tmp_path / "tuned.fifo")
    for name in ("tuned.fifo", "tuned.yaml"):
        before = state(tmp_path / "tuned.fifo")
        one_error_line(runner.invoke(app, ["study-tune", name, "--no-ray"]), "OUTPUT", "FIFO", "not a regular file")
        assert state(tmp_path / "tuned.fifo") == before
    # report: a page that is a FIFO is refused before the report is built; a page that is a
    # link to a regular file is rewritten through the link
    site = tmp_path / "site"
    site.mkdir()
    os.mkfifo(site / "index.html")
    before = listing(site)
    one_error_line(runner.invoke(app, ["report", "run", "--output", "site"]), "index.html", "FIFO")
    assert listing(site) == before and stat.S_ISFIFO(os.lstat(site / "index.html").st_mode)
    (site / "index.html").unlink()
    (tmp_path / "page.html").write_text("old")
    (site / "index.html").symlink_to(tmp_path / "page.html")
    r = runner.invoke(app, ["report", "run", "--output", "site"])
    assert r.exit_code == 0, r.output
    assert (site / "index.html").is_symlink() and "<html" in (tmp_path / "page.html").read_text()


def test_output_dash_prints(run, tmp_path):
    r = runner.invoke(app, ["leaderboard", "run", "--format", "csv", "--output", "-"])
    assert r.exit_code == 0 and r.output.startswith("scenario,board,difficulty"), r.output
    assert not (tmp_path / "-").exists()


# ----------------------------------------------------------------------------- special files


def _fifo(tmp_path: Path) -> Path:
    os.mkfifo(tmp_path / "node")
    return tmp_path / "node"


def _null(tmp_path: Path) -> Path:
    return mknod(tmp_path / "node", 1, 3)  # /dev/null's numbers, in the test's own directory


def _socket(tmp_path: Path) -> Path:
    path = tmp_path / "node"
    if len(os.fsencode(path)) >= 100:
        pytest.skip("the temporary directory's path is too long for a Unix socket")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()
    return path


@pytest.mark.parametrize("make, kind", [(_fifo, "a FIFO"), (_null, "a device"), (_socket, "a socket")],
                         ids=["fifo", "device", "socket"])
@pytest.mark.parametrize("through_link", [False, True], ids=["direct", "symlink"])
def test_output_at_a_device_fifo_or_socket_is_refused_and_left_alone(run, tmp_path, make, kind, through_link):
    node = make(tmp_path)
    name = "node"
    if through_link:
        (tmp_path / "link.md").symlink_to(node)
        name = "link.md"
    before, files = state(node), listing(tmp_path)
    line = one_error_line(runner.invoke(app, ["leaderboard", "run", "--output", name]), "not a regular file",
                          "--output -")
    assert kind.split()[1] in line and ("a symlink to" in line) == through_link
    assert state(node) == before and listing(tmp_path) == files  # not replaced, no temporary
    if through_link:
        assert (tmp_path / "link.md").is_symlink()


def test_dangling_and_looping_links_and_directories_are_refused(tmp_path):
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "dir").mkdir()
    (tmp_path / "to-dir").symlink_to(tmp_path / "dir")
    for name, word in (("dangling", "leads to no file"), ("loop", "leads to no file"), ("dir", "is a directory"),
                       ("to-dir", "is a directory")):
        with pytest.raises(ConfigError, match=word):
            check_output_file(tmp_path / name)
        with pytest.raises(ConfigError, match=word):
            fileio.write_output(b"x", tmp_path / name)
    assert not (tmp_path / "nowhere").exists()
    assert output_target(tmp_path / "new.md") == tmp_path / "new.md"


def test_write_output_checks_again_when_it_writes(tmp_path):
    """A path that became a FIFO after the command's first check is still not replaced."""
    path = tmp_path / "out.md"
    check_output_file(path)
    os.mkfifo(path)
    with pytest.raises(ConfigError, match="FIFO"):
        fileio.write_output(b"x", path)
    assert stat.S_ISFIFO(os.lstat(path).st_mode) and listing(tmp_path) == ["out.md"]


# ----------------------------------------------------------------------------- failed writes


def failing_writes(monkeypatch, code: int) -> None:
    """Make the writes of user-named outputs fail with ``code`` half-way: part of the data is
    in the temporary file when the error comes (as a full disk does). The run's own files
    are not touched (leaderboard never writes into the run)."""
    real = fileio.atomic_path

    def write_bytes(data, path):
        with real(path) as tmp:
            tmp.write_bytes(data[: len(data) // 2])
            raise OSError(code, os.strerror(code))

    monkeypatch.setattr(fileio, "write_bytes", write_bytes)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_a_failed_write_is_one_line_and_leaves_the_old_file(run, tmp_path, monkeypatch, code):
    out = tmp_path / "board.md"
    out.write_text("old\n")
    files = listing(tmp_path)
    failing_writes(monkeypatch, code)
    line = one_error_line(runner.invoke(app, ["leaderboard", "run", "--output", "board.md"]),
                          "cannot write --output board.md", os.strerror(code), "nothing was written")
    assert out.read_text() == "old\n" and listing(tmp_path) == files, line  # old file, no temporary


def test_a_failed_write_through_a_link_leaves_link_and_target(run, tmp_path, monkeypatch):
    target = tmp_path / "target.md"
    target.write_text("old\n")
    (tmp_path / "link.md").symlink_to(target)
    files = listing(tmp_path)
    failing_writes(monkeypatch, errno.ENOSPC)
    one_error_line(runner.invoke(app, ["leaderboard", "run", "--output", "link.md"]), "No space left on device")
    assert (tmp_path / "link.md").is_symlink() and target.read_text() == "old\n" and listing(tmp_path) == files


def test_a_real_full_device_as_stdout_is_one_line(run, tmp_path):
    """Printing to a full device (a node with ``/dev/full``'s numbers, made here)."""
    full = mknod(tmp_path / "full", 1, 7)
    try:
        fh = open(full, "w")
    except OSError as exc:
        pytest.skip(f"the device node cannot be opened here ({exc.strerror})")
    with fh:
        p = subprocess.run([sys.executable, "-m", "grb_dist.cli", "leaderboard", str(run)], stdout=fh,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: No space left on device"), p.stderr
    assert stat.S_ISCHR(os.lstat(full).st_mode)
