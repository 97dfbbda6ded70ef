"""A sweep across a real multi-node Ray cluster on one machine, with a worker node killed
mid-sweep; and no Ray process of a local sweep outliving ``grb-dist sweep`` after Ctrl-C,
a SIGTERM or a SIGKILL of the driver.

The cluster is ``ray.cluster_utils.Cluster``: a head node without CPUs (the driver's node)
and two worker nodes with one CPU and a custom resource each (``node_a``, ``node_b``), as
``ray start --head`` plus two ``ray start --address`` would make. The sweep is a separate
``grb-dist sweep --address <head>`` process.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
from helpers import default_signals

JOB = """
dataset: csbm
seed: 0
repeats: 2
difficulties: [easy, full]
train: {epochs: 25, patience: 10}
models: {gcn: {hidden_sizes: [16]}, mlp: {hidden_sizes: [16]}}
defenses: [gcn, mlp]
surrogates: [gcn]
attack: {n_inject: 6, edges_per_node: 3, steps: 20}
attacks: {rnd: {}, fgsm: {}}
"""
CELLS = 2 * 2 + 2 * 2 * 2 * 2


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen" + (f"; driver log:\n{log.read_text()[-3000:]}" if log else ""))


@pytest.fixture
def cluster():
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False,
        # notice a dead node within about two seconds
        "_system_config": {"health_check_initial_delay_ms": 0, "health_check_period_ms": 500,
                           "health_check_failure_threshold": 4},
    })
    a = c.add_node(num_cpus=1, resources={"node_a": 1})
    b = c.add_node(num_cpus=1, resources={"node_b": 1})
    c.wait_for_nodes()
    yield c, a, b
    c.shutdown()


def test_sweep_survives_a_worker_node_killed_mid_sweep(cluster, tmp_path):
    c, node_a, _ = cluster
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    out, log = tmp_path / "run", tmp_path / "driver.log"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    p = subprocess.Popen([sys.executable, "-m", "grb_dist.cli", "sweep", "--job", str(job), "--out", str(out),
                          "--address", c.address, "--flush-rows", "1", "--flush-seconds", "0.1"],
                         stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)
    try:
        # mid-sweep: the first score rows are stored, most cells are not
        wait_for(lambda: any((out / "scores").rglob("*.parquet")) if (out / "scores").is_dir() else False,
                 240, "the first score file", p, log)
        c.remove_node(node_a, allow_graceful=False)  # SIGKILL of the node's raylet, workers and store
        rc = p.wait(300)
    finally:
        if p.poll() is None:
            p.kill()
    text = log.read_text()
    assert rc == 0, text[-3000:]
    assert "Ray: 2 CPUs" in text and f"{CELLS}/{CELLS} cells" in text and "0 failed" in text, text[-3000:]
    rows = pd.read_parquet(out / "scores")
    assert len(rows) == CELLS and rows["cell_id"].is_unique
    assert rows["accuracy"].between(0, 1).all()


def _ray_processes(marker: str) -> list[psutil.Process]:
    out = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in part for part in proc.info["cmdline"] or []):
                out.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["ctrl-c", "sigterm", "sigkill"])
def test_no_ray_process_outlives_the_sweep(tmp_path, sig):
    job = tmp_path / "job.yaml"
    job.write_text(JOB.replace("steps: 20", "steps: 200"))
    out, log = tmp_path / "run", tmp_path / "driver.log"
    ray_tmp = tempfile.mkdtemp(prefix="grbr", dir="/tmp")  # Ray's socket paths must stay short
    started: list[psutil.Process] = []
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, "RAY_TMPDIR": ray_tmp}
    # a Ctrl-C must reach the driver even when this test runs in the background, where the
    # shell starts it with SIGINT ignored (and Python then installs no KeyboardInterrupt)
    p = subprocess.Popen([sys.executable, "-m", "grb_dist.cli", "sweep", "--job", str(job), "--out", str(out),
                          "--num-cpus", "1"], stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env,
                         preexec_fn=default_signals)
    try:
        wait_for(lambda: "Ray: " in log.read_text(), 240, "the local Ray start", p, log)
        time.sleep(1.0)
        driver = psutil.Process(p.pid)
        started = driver.children(recursive=True) + _ray_processes(ray_tmp)
        assert len(started) >= 2, "no Ray processes found under the sweep"
        p.send_signal(sig)
        rc = p.wait(120)
        if sig != signal.SIGKILL:  # SIGTERM as Ctrl-C: the message, Ray shut down by the driver
            assert rc == {signal.SIGINT: 130, signal.SIGTERM: 143}[sig], log.read_text()[-3000:]
            assert "interrupted" in log.read_text() and "Traceback" not in log.read_text(), log.read_text()[-3000:]
        else:
            assert rc == -signal.SIGKILL

        def alive(q: psutil.Process) -> bool:
            try:
                return q.is_running() and q.status() != psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:  # it ended between the two questions
                return False

        def gone() -> bool:
            return not [q for q in started if alive(q)] and not _ray_processes(ray_tmp)

        # a bound on how long Ray's own shutdown may take on a loaded 2-core machine, not a benchmark
        wait_for(gone, 60, "the exit of every Ray process of the sweep")
    finally:
        if p.poll() is None:
            p.kill()
        for q in _ray_processes(ray_tmp) + started:  # leave nothing behind, even when failing
            try:
                if q.is_running():
                    q.kill()
            except psutil.Error:
                pass
        shutil.rmtree(ray_tmp, ignore_errors=True)
