"""Runs in object storage, against a real S3-compatible server: moto's server mode, started
here on a free port. The client path is pyarrow's S3 file system, as a user's would be
(credentials and endpoint from the ``AWS_*`` environment); nothing in it is mocked."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
import uuid

import pandas as pd
import pyarrow.fs as pafs
import pytest
from typer.testing import CliRunner

from grb_dist.cli import app
from grb_dist.core.errors import StoreError
from grb_dist.store import remote
from grb_dist.store.remote import Lease, Mirror, is_remote
from helpers import free_port, pausing_sweep, wait_for

runner = CliRunner()
TINY = ["--attacks", "rnd,fgsm", "--defenses", "gcn,mlp", "--difficulties", "full", "--repeats", "1", "--steps", "3",
        "--n-inject", "5", "--edges-per-node", "3", "--no-dashboard"]


def start_server(port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the S3 server did not start")


@pytest.fixture(scope="module")
def server():
    port = free_port()
    proc = start_server(port)
    yield {"port": port, "proc": proc}
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def s3(server, monkeypatch, tmp_path):
    """A fresh bucket on the server, the client's environment pointing at it, and a cache
    directory of this test's own (the staging copies)."""
    endpoint = f"http://127.0.0.1:{server['port']}"
    for key, value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
                       "AWS_ENDPOINT_URL": endpoint, "XDG_CACHE_HOME": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(key, value)
    bucket = f"grb-{uuid.uuid4().hex[:12]}"
    pafs.S3FileSystem(endpoint_override=endpoint, allow_bucket_creation=True).create_dir(bucket)
    return f"s3://{bucket}"


def objects(uri: str) -> dict[str, int]:
    fs, base = pafs.FileSystem.from_uri(uri)
    infos = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    return {i.path[len(base) + 1:]: i.size for i in infos if i.type == pafs.FileType.File}


def test_which_outs_are_remote():
    assert is_remote("s3://b/p") and is_remote("gs://b/p") and is_remote("hdfs://h/p")
    assert not is_remote("results/x") and not is_remote("file:///tmp/x") and not is_remote(None)


def test_a_sweep_into_s3_is_read_while_written_and_resumed(ray_local, s3, monkeypatch):
    """The sweep's files reach the bucket while it runs (pandas reads complete files only, each
    cell once), all of them when it ends (the manifest among them, never the local lock), and
    the same command again finds every cell there."""
    monkeypatch.setattr(remote, "PUSH_SECONDS", 0.5)
    monkeypatch.setattr("grb_dist.cluster.ray_edge.dashboard_available", lambda: False)
    out = f"{s3}/runs/one"
    reads: list[int] = []
    failed: list[BaseException] = []
    done = threading.Event()

    def reader() -> None:
        while not done.wait(0.3):
            if not any(k.startswith("scores/") and k.endswith(".parquet") and "/." not in k for k in objects(out)):
                continue  # no score file uploaded yet
            try:
                ids = pd.read_parquet(f"{out}/scores", columns=["cell_id"])["cell_id"]
                assert ids.is_unique
                reads.append(len(ids))
            except BaseException as exc:  # noqa: BLE001 - said by the test, not lost in the thread
                failed.append(exc)
                return

    watcher = threading.Thread(target=reader)
    watcher.start()
    try:
        r = runner.invoke(app, ["sweep", *TINY, "--flush-rows", "1", "--out", out])  # a file per score row
    finally:
        done.set()
        watcher.join()
    assert r.exit_code == 0, r.output
    assert f"results in {out}" in r.output
    scores = pd.read_parquet(f"{out}/scores")
    assert len(scores) == 6 and scores["cell_id"].is_unique
    assert not failed, failed
    assert reads == sorted(reads) and all(n <= 6 for n in reads)  # how many reads fall inside the sweep varies
    keys = objects(out)
    assert "manifest.json" in keys and not any(k.endswith(".lock") or ".tmp-" in k or k.startswith("_lease")
                                               for k in keys)
    r = runner.invoke(app, ["sweep", *TINY, "--out", out])
    assert r.exit_code == 0 and "nothing to do: all 6 cells of this job are already in " + out in r.output, r.output
    r = runner.invoke(app, ["leaderboard", out, "--format", "csv"])
    assert r.exit_code == 0 and "gcn" in r.output and "mlp" in r.output, r.output
    assert objects(out) == keys  # reading wrote nothing


def test_a_run_comes_back_from_the_bucket_alone(s3, tmp_path):
    """A second machine (another staging copy) reads what the first uploaded; what one
    removes (a compaction) the other loses; files never uploaded survive a pull."""
    first = Mirror(f"{s3}/r", staging=tmp_path / "a")
    first.pull()
    (first.run_dir / "scores").mkdir()
    (first.run_dir / "scores" / "part-1.parquet").write_bytes(b"one")
    (first.run_dir / "manifest.json").write_text("{}")
    assert first.push() == 2
    second = Mirror(f"{s3}/r", staging=tmp_path / "b")
    assert second.pull() == 2 and (second.run_dir / "scores" / "part-1.parquet").read_bytes() == b"one"
    (second.run_dir / "scores" / "part-1.parquet").unlink()
    (second.run_dir / "scores" / "part-2.parquet").write_bytes(b"two")
    second.push()
    assert sorted(objects(f"{s3}/r")) == ["manifest.json", "scores/part-2.parquet"]
    (first.run_dir / "scores" / "never-uploaded.parquet").write_bytes(b"mine")
    assert first.pull() == 1  # part-2 down; part-1 removed (in sync once, gone remotely); mine kept
    assert sorted(p.name for p in (first.run_dir / "scores").iterdir()) == ["never-uploaded.parquet", "part-2.parquet"]
    first.push()
    assert "scores/never-uploaded.parquet" in objects(f"{s3}/r")


def test_two_writers_never_both_hold_a_run(s3, tmp_path):
    one = Mirror(f"{s3}/r", staging=tmp_path / "a")
    two = Mirror(f"{s3}/r", staging=tmp_path / "b")
    held = Lease(one).acquire()
    with pytest.raises(StoreError) as info:
        Lease(two).acquire()
    assert "being written by another sweep" in str(info.value) and "\n" not in str(info.value)
    held.release()
    # writers arriving together: a lease object the other has already created makes this one give way
    other = Lease(one)
    other._write()
    with pytest.raises(StoreError, match="another sweep"):
        Lease(two).acquire()
    assert not any(k.startswith("_lease/") and k.endswith(Lease(two).name) for k in objects(f"{s3}/r"))
    other.release()
    # a lease of a writer that stopped renewing it expires
    Lease(one, seconds=0.0).acquire()
    Lease(two).acquire().release()


def test_a_server_gone_mid_sweep_fails_the_upload_cleanly_and_a_restart_completes_it(tmp_path, monkeypatch):
    """The server stops before the files are uploaded: the upload fails with one line and the
    staging copy keeps everything; once the server is back, the next push uploads it all and
    another machine reads the whole run."""
    port = free_port()
    proc = start_server(port)
    endpoint = f"http://127.0.0.1:{port}"
    for key, value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
                       "AWS_ENDPOINT_URL": endpoint}.items():
        monkeypatch.setenv(key, value)
    pafs.S3FileSystem(endpoint_override=endpoint, allow_bucket_creation=True).create_dir("grb-runs")
    mirror = Mirror("s3://grb-runs/r", staging=tmp_path / "a")
    mirror.pull()
    (mirror.run_dir / "manifest.json").write_text("{}")
    (mirror.run_dir / "part-1.parquet").write_bytes(b"one")
    proc.terminate()
    proc.wait(10)
    try:
        with pytest.raises(StoreError) as info:
            mirror.push()
        assert "cannot upload" in str(info.value) and "\n" not in str(info.value)
        proc = start_server(port)  # back, empty: nothing of the run had reached it
        pafs.S3FileSystem(endpoint_override=endpoint, allow_bucket_creation=True).create_dir("grb-runs")
        assert mirror.push() == 2
        other = Mirror("s3://grb-runs/r", staging=tmp_path / "b")
        assert other.pull() == 2 and (other.run_dir / "part-1.parquet").read_bytes() == b"one"
    finally:
        proc.terminate()
        proc.wait(10)


def test_bad_locations_are_one_line_and_write_nothing(s3, tmp_path, monkeypatch):
    bucket = s3.removeprefix("s3://")
    for out, says in ((f"s3://no-such-{bucket}/x", "does not exist"), (s3, "not the bucket itself")):
        r = runner.invoke(app, ["sweep", *TINY, "--out", out])
        assert r.exit_code == 2 and says in r.output and len(r.output.strip().splitlines()) == 1, r.output
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    r = runner.invoke(app, ["leaderboard", f"{s3}/x"])
    assert r.exit_code == 2 and "cannot be reached" in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert not (tmp_path / "cache" / "grb-dist" / "runs").exists() or not any(
        (tmp_path / "cache" / "grb-dist" / "runs").rglob("manifest.json"))


def test_a_second_sweep_on_a_held_prefix_is_refused_and_writes_nothing(s3, tmp_path):
    held = Lease(Mirror(f"{s3}/busy", staging=tmp_path / "other")).acquire()
    try:
        r = runner.invoke(app, ["sweep", *TINY, "--out", f"{s3}/busy"])
        assert r.exit_code == 2 and "being written by another sweep" in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1
        assert [k for k in objects(f"{s3}/busy") if not k.startswith("_lease/")] == []  # the holder's lease only
    finally:
        held.release()


def sweep_paused(args: list[str], env: dict, marker) -> subprocess.Popen:
    """A sweep of ``args`` started, returned once it has scored its first cells (their rows
    flushed: ``--flush-rows 1``) and waits until ``marker`` is removed."""
    proc = subprocess.Popen([*pausing_sweep(marker, 1), *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    wait_for(marker, proc, lambda: proc.stdout.read()[-3000:])
    return proc


def test_ctrl_c_then_the_same_command_completes_the_run_in_s3(s3, tmp_path):
    """A sweep into s3:// interrupted once its first score rows are written: what it wrote
    reaches the bucket on the way out; the same command computes the rest, every cell once."""
    import os
    import signal

    out = f"{s3}/cut"
    args = ["sweep", *TINY, "--flush-rows", "1", "--out", out]
    cmd = [sys.executable, "-m", "grb_dist.cli", *args]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = sweep_paused(args, env, tmp_path / "paused")
    proc.send_signal(signal.SIGINT)
    said = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130 and "interrupted: finished cells are kept" in said, said[-3000:]
    first = pd.read_parquet(f"{out}/scores")
    assert 0 < len(first) < 6 and first["cell_id"].is_unique
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert done.returncode == 0 and f"{6 - len(first)} to compute" in " ".join(done.stdout.split()), done.stdout[-3000:]
    scores = pd.read_parquet(f"{out}/scores")
    assert len(scores) == 6 and scores["cell_id"].is_unique
    assert set(first["cell_id"]) <= set(scores["cell_id"])


class Proxy:
    """A TCP relay to the S3 server that can be cut and restored on the same port: the
    endpoint gone (a network cut, a server restart) while the server keeps its objects."""

    def __init__(self, upstream: int):
        self.upstream, self.port = upstream, free_port()
        self.conns: list[socket.socket] = []
        self.listener: socket.socket | None = None
        self.up()

    def up(self) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", self.port))
        self.listener.listen(64)
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def down(self) -> None:
        self.listener.close()
        for c in self.conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()
        self.conns.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            self.conns += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def test_an_endpoint_gone_mid_sweep_fails_in_one_line_and_the_same_command_completes(server, s3, tmp_path):
    """The endpoint goes away once the sweep has begun writing: the sweep finishes its cells
    into the staging copy and fails its last upload in one line; with the endpoint back,
    the same command (its lease left behind by an ended process of this machine bars
    nothing) uploads the run: every cell exactly once, the rows the first run computed."""
    import os

    proxy = Proxy(server["port"])
    out = f"{s3}/cut-off"
    args = ["sweep", *TINY, "--flush-rows", "1", "--out", out]
    cmd = [sys.executable, "-m", "grb_dist.cli", *args]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{proxy.port}"}
    staging = tmp_path / "cache" / "grb-dist" / "runs"
    marker = tmp_path / "paused"
    proc = sweep_paused(args, env, marker)
    proxy.down()
    marker.unlink()  # the sweep goes on, the endpoint gone
    said = proc.communicate(timeout=600)[0]
    last = said.strip().splitlines()[-1]
    assert proc.returncode == 2 and "cannot upload" in last and "Traceback" not in said, said[-3000:]
    computed = pd.read_parquet(next(staging.glob("*/run")) / "scores")
    assert len(computed) == 6 and computed["cell_id"].is_unique
    uploaded = [k for k in objects(out) if k.startswith("scores/") and k.endswith(".parquet")]
    assert len(uploaded) < len(list(staging.rglob("scores/**/part-*.parquet")))  # the cut kept the rest back
    proxy.up()
    again = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert again.returncode == 0 and "being written by another sweep" not in again.stdout, again.stdout[-3000:]
    scores = pd.read_parquet(f"{out}/scores")
    assert len(scores) == 6 and scores["cell_id"].is_unique
    key = ["cell_id", "accuracy"]
    pd.testing.assert_frame_equal(scores[key].sort_values("cell_id", ignore_index=True),
                                  computed[key].sort_values("cell_id", ignore_index=True))
    proxy.down()


def test_a_lease_of_an_ended_process_of_this_machine_bars_nothing(s3, tmp_path):
    """A lease whose writer ran here and has ended is stale at once; another machine's (or a
    live process's) is not."""
    import json
    import os

    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(ended.stdout)
    mirror = Mirror(f"{s3}/stale", staging=tmp_path / "a")
    fs, base = pafs.FileSystem.from_uri(f"{s3}/stale")
    for name, host, who in (("a.json", socket.gethostname(), pid), ("b.json", "elsewhere", pid)):
        with fs.open_output_stream(f"{base}/_lease/{name}") as f:
            f.write(json.dumps({"host": host, "pid": who, "expires": time.time() + 300}).encode())
    with pytest.raises(StoreError, match="host elsewhere"):
        Lease(mirror).acquire()
    fs.delete_file(f"{base}/_lease/b.json")
    with fs.open_output_stream(f"{base}/_lease/c.json") as f:  # a live process of this machine
        f.write(json.dumps({"host": socket.gethostname(), "pid": os.getppid(), "expires": time.time() + 300}).encode())
    with pytest.raises(StoreError, match=f"pid {os.getppid()}"):
        Lease(mirror).acquire()
    fs.delete_file(f"{base}/_lease/c.json")
    Lease(mirror).acquire().release()
