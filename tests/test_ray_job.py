"""A sweep as cluster users run one: submitted with ``ray job submit`` to a Ray head (started
here, on free ports, with its dashboard: the Jobs API), stopped with ``ray job stop`` (the
SIGTERM of an interrupted sweep: its rows written), resubmitted, every cell exactly once; and
its own metrics read from the head's Prometheus export while it runs."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pandas as pd
import psutil
import pytest
from helpers import free_port, pausing_sweep

RAY = str(Path(sys.executable).with_name("ray"))
SWEEP = [sys.executable, "-m", "grb_dist.cli", "sweep", "--attacks", "rnd,fgsm,tdgia", "--defenses", "gcn,mlp,sage",
         "--difficulties", "full,easy", "--repeats", "2", "--steps", "3", "--n-inject", "5", "--edges-per-node", "3",
         "--flush-rows", "1"]
CELLS = 3 * 3 * 2 * 2 + 3 * 2  # attack x defense x difficulty x repeat, and a clean row per defense and difficulty


@pytest.fixture(scope="module")
def head():
    """A Ray head with its dashboard, in a process of its own (``--block``), its files in a
    directory of its own: ended by killing what runs from there (``ray stop`` would stop
    every Ray of the machine, the other tests' too)."""
    temp = tempfile.mkdtemp(prefix="rj-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    # metrics exported every half second (Ray's default: 10 s), so that a short sweep shows them
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_metrics_report_interval_ms": "500"}
    env.pop("RAY_ADDRESS", None)
    dashboard, metrics = free_port(), free_port()
    proc = subprocess.Popen([RAY, "start", "--head", "--block", "--port", str(free_port()), "--dashboard-port",
                             str(dashboard), "--include-dashboard", "true", "--num-cpus", "2", "--temp-dir", temp,
                             "--metrics-export-port", str(metrics),
                             # the agents on ports of their own: another Ray of this machine (the
                             # suite's own local Ray) holds the defaults, and a head whose job agent
                             # cannot bind answers every submit with "No available agent"
                             "--dashboard-agent-listen-port", str(free_port()),
                             "--dashboard-agent-grpc-port", str(free_port()),
                             "--runtime-env-agent-port", str(free_port())],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    address = f"http://127.0.0.1:{dashboard}"
    try:
        deadline = time.time() + 120
        while subprocess.run([RAY, "job", "list", "--address", address], env=env, capture_output=True).returncode:
            assert proc.poll() is None and time.time() < deadline, "the Ray head did not start"
            time.sleep(1)
        yield address, {**env, "metrics": str(metrics)}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        for p in psutil.process_iter(["cmdline"]):
            if any(temp in arg for arg in (p.info["cmdline"] or [])):
                p.kill()
        shutil.rmtree(temp, ignore_errors=True)


def job(head, *args: str) -> str:
    """``ray job <args>`` against the head; a head whose job agent is not up yet (a loaded
    machine: the dashboard answers before the agent registers) is asked again."""
    address, env = head
    env = {k: v for k, v in env.items() if k != "metrics"}
    deadline = time.time() + 120
    while True:
        done = subprocess.run([RAY, "job", args[0], "--address", address, *args[1:]], env=env, capture_output=True,
                              text=True, timeout=600)
        said = done.stdout + done.stderr
        if "No available agent" not in said or time.time() > deadline:
            return said
        time.sleep(2)


def submitted(output: str) -> str:
    found = re.search(r"raysubmit_[A-Za-z0-9]+", output)
    assert found, output[-3000:]
    return found.group(0)


def test_ray_job_submit_stop_and_resubmit_computes_every_cell_once(head, tmp_path):
    run, marker = tmp_path / "run", tmp_path / "paused"
    # the first submission pauses once it has scored (and written) its first cells: the stop
    # lands mid-sweep however fast the machine is
    first = submitted(job(head, "submit", "--no-wait", "--", *pausing_sweep(marker, 1), *SWEEP[3:], "--out", str(run)))
    deadline = time.time() + 300
    while not marker.exists():
        assert time.time() < deadline and "FAILED" not in job(head, "status", first), job(head, "logs", first)
        time.sleep(1)
    job(head, "stop", first)
    logs = job(head, "logs", first)
    assert "interrupted: finished cells are kept" in logs, logs[-3000:]
    stopped = pd.read_parquet(run / "scores")
    assert 0 < len(stopped) < CELLS and stopped["cell_id"].is_unique
    # the resubmission joins the same cluster (not a Ray of its own) and computes the rest only
    logs = " ".join(job(head, "submit", "--", *SWEEP, "--out", str(run)).split())  # lines wrap at 80 columns
    assert f"{CELLS - len(stopped)} to compute" in logs and "Ray: 2 CPUs" in logs, logs[-3000:]
    assert f"{CELLS}/{CELLS} cells ({CELLS - len(stopped)} computed, {len(stopped)} already done, 0 failed)" in logs
    scores = pd.read_parquet(run / "scores")
    assert len(scores) == CELLS and scores["cell_id"].is_unique


def exported(port: str, run: str) -> tuple[dict[str, float], set[str], dict[str, float]]:
    """The sweep's series of ``run`` on the head's Prometheus export: its scored cells
    (``grb_dist_items`` of ``stage="score"``, summed over the scenarios) by state, the
    scenarios they are tagged with, and the attack steps per second by attack."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return {}, set(), {}
    scored: dict[str, float] = {}
    scenarios, steps = set(), {}
    for line in text.splitlines():
        if f'run="{run}"' not in line:
            continue
        value = float(line.rsplit(" ", 1)[1])
        if line.startswith("ray_grb_dist_items{") and 'stage="score"' in line:
            state = re.search(r'state="(\w+)"', line).group(1)
            scored[state] = scored.get(state, 0.0) + value
            scenarios.add(re.search(r'scenario="(\w+)"', line).group(1))
        elif line.startswith("ray_grb_dist_attack_steps_per_second{"):
            steps[re.search(r'attack="(\w+)"', line).group(1)] = value
    return scored, scenarios, steps


def test_the_sweep_reports_its_cells_on_the_metrics_export(head, tmp_path):
    """Read every 0.1 s while the submitted sweep runs: its scored cells rise and end at the
    job's cell count, none failed, none left (the driver waits for the last export)."""
    run = tmp_path / "metered"
    port = head[1]["metrics"]
    seen: list[dict[str, float]] = []
    scenarios, steps = set(), {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.1):
            now, tagged, rates = exported(port, str(run))
            scenarios.update(tagged)
            steps.update(rates)
            if now and (not seen or now != seen[-1]):
                seen.append(now)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        logs = job(head, "submit", "--", *SWEEP, "--out", str(run))  # returns when the job ends
    finally:
        stop.set()
        watcher.join()
    assert seen, logs[-3000:]
    done = [s.get("done", 0) for s in seen]
    assert done == sorted(done) and done[-1] == CELLS, seen  # it rises, and ends at the cell count
    assert done[0] < CELLS and seen[-1].get("left") == 0 and seen[-1].get("failed") == 0, seen
    assert scenarios == {"injection"}, scenarios  # the job's one scenario
    # the attacks that take steps (rnd takes none) report their speed
    assert set(steps) == {"fgsm", "tdgia"} and min(steps.values()) > 0, steps
