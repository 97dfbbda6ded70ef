"""A watchdog that ends the local Ray of a driver that died without stopping it.

``grb-dist sweep`` without ``--address`` starts a local Ray whose processes (GCS, raylet,
dashboard and its agents, workers) are the driver's descendants. Ctrl-C and errors stop
them through ``ray.shutdown()``; a driver killed with SIGKILL cannot, and Ray's agents then
linger for about a minute. :func:`start` launches this module as a separate process in its
own session, connected to the driver by a pipe. It records the driver's descendants every
half second; when the pipe closes (the driver ended, however it ended) it sends SIGTERM to
the recorded processes that still run, and SIGKILL two seconds later to those that did not
stop. Processes are identified by PID and start time, so a reused PID is never signalled.

Run as ``python -m grb_dist.cluster.reaper DRIVER_PID`` with the pipe on stdin; only psutil is
imported (no torch, no Ray).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

INTERVAL = 0.5
GRACE = 2.0


def _descendants(driver) -> dict[tuple[int, float], object]:
    import psutil

    out = {}
    try:
        for p in driver.children(recursive=True):
            if p.pid == os.getpid():
                continue
            try:
                out[(p.pid, p.create_time())] = p
            except psutil.Error:
                pass
    except psutil.Error:
        pass
    return out


def _alive(procs) -> list:
    import psutil

    alive = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.Error:
            pass
    return alive


def watch(driver_pid: int, pipe) -> int:
    """Record the driver's descendants until ``pipe`` closes, then end those still running.
    Returns the number of processes it had to signal."""
    import psutil

    try:
        driver = psutil.Process(driver_pid)
    except psutil.Error:
        return 0
    seen: dict = {}
    while True:
        seen.update(_descendants(driver))
        ready, _, _ = select.select([pipe], [], [], INTERVAL)
        if ready and not os.read(pipe.fileno(), 4096):
            break  # EOF: the driver closed the pipe or died
    # what ray.shutdown() (or nobody) left behind, with what those spawned since the last
    # look (a worker the raylet started in the last interval)
    for p in _alive(list(seen.values())):
        seen.update(_descendants(p))
    left = _alive(seen.values())
    for p in left:
        try:
            p.send_signal(signal.SIGTERM)
        except psutil.Error:
            pass
    deadline = time.monotonic() + GRACE
    while _alive(left) and time.monotonic() < deadline:
        time.sleep(0.1)
    for p in _alive(left):
        try:
            p.kill()
        except psutil.Error:
            pass
    return len(left)


class Reaper:
    """The driver's side: :meth:`stop` closes the pipe and waits for the watchdog to finish."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass


def start() -> Reaper | None:
    """Start the watchdog of this process (None when psutil is missing)."""
    try:
        import psutil  # noqa: F401
    except ImportError:
        return None
    proc = subprocess.Popen([sys.executable, "-m", "grb_dist.cluster.reaper", str(os.getpid())], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    return Reaper(proc)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch(int(sys.argv[1]), sys.stdin)
