"""Memory-aware scheduling and GPU-resident device workers, on real local Rays.

Each scenario runs in a process of its own (a local Ray of its own: declared GPUs it does
not have, or a small reservable memory), so the session's shared Ray is left alone. A
declared GPU that torch cannot see runs the GPU path (device workers, shares of a card
sized by memory) on the CPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from grb_dist.core.errors import ConfigError
from grb_dist.core.resources import peak_memory
from grb_dist.sweep.sizing import (CUDA_CONTEXT_BYTES, MIN_SHARE, WORKER_BYTES, TaskSize, check_fits, device_layout,
                                   gpu_share, memory_held)

GIB = 2**30


def test_a_gpu_share_is_sized_by_memory():
    assert gpu_share(14 * GIB, 140 * GIB) == 0.1
    assert gpu_share(15 * GIB, 140 * GIB) == 0.11  # rounded up: never less than it takes
    assert gpu_share(1, 140 * GIB) == MIN_SHARE and gpu_share(500 * GIB, 140 * GIB) == 1.0


def test_device_layout_fits_the_workers_beside_the_scorers():
    # a 139 GiB card, a 20 GiB task, a 3 GiB Scorer: four workers (the default cap), each a share that fits
    big = device_layout(20 * GIB, 3 * GIB, gpu_memory=139 * GIB, gpus=1, cpus=16, scorers=1)
    assert big.workers == 4 and big.workers * big.worker_share + big.scorer_share <= 1
    assert big.worker_share * 139 * GIB >= 20 * GIB + CUDA_CONTEXT_BYTES
    # a 40 GiB task on an 80 GiB card: one worker, never two side by side
    assert device_layout(40 * GIB, 3 * GIB, gpu_memory=80 * GIB, gpus=1, cpus=16, scorers=1).workers == 1
    # CPUs bound the workers (each reserves one); several GPUs multiply them
    assert device_layout(GIB, GIB, gpu_memory=80 * GIB, gpus=1, cpus=2, scorers=1).workers == 2
    assert device_layout(GIB, GIB, gpu_memory=80 * GIB, gpus=2, cpus=16, scorers=2, cap=3).workers == 6


def test_a_task_that_fits_no_node_is_refused_in_one_line():
    sizes = [TaskSize("training gat_at (seed 0)", 29 * GIB, "plan"), TaskSize("attack fgsm", GIB, "estimate")]
    with pytest.raises(ConfigError) as exc:
        check_fits(sizes, host=16 * GIB)
    msg = str(exc.value)
    assert "\n" not in msg and "training gat_at" in msg and "29.5 GiB" in msg and "16.0 GiB" in msg
    assert "measured by --plan" in msg
    with pytest.raises(ConfigError, match="GPU memory .* one GPU"):
        check_fits(sizes, host=0, gpu=24 * GIB, where="one GPU of the cluster")
    check_fits(sizes, host=31 * GIB)  # fits: nothing raised
    check_fits(sizes, host=0)  # a cluster that does not say: nothing to check


def test_a_tasks_peak_is_the_high_water_mark_of_its_own_block():
    big = 256 * 2**20
    with peak_memory() as first:
        block = np.ones(big // 8)  # every page written
        del block
    with peak_memory() as second:  # the mark is reset: the first block's spike is not in it
        pass
    assert first.host is not None and second.host is not None  # Linux
    assert first.host >= second.host + 0.9 * big
    assert second.host - second.host_start < 0.1 * big  # an empty block held nothing above its start
    assert first.gpu is None and second.gpu is None  # CUDA does not run here


def test_the_sweep_names_the_task_that_held_the_most_and_warns_of_tasks_over_their_reservation():
    def row(task, peak, reserved, gpu=None, gpu_reserved=None):
        return {"stage": "train", "task": task, "peak_memory": peak, "reserved_memory": reserved,
                "peak_gpu_memory": gpu, "reserved_gpu_memory": gpu_reserved}

    within = [row("gcn", 3 * GIB, 3 * GIB), row("gat", 5 * GIB, 4.5 * GIB), row("sgc", GIB, None)]
    line, warnings = memory_held(within)
    assert line == "the most a task held: memory 5.0 GiB (train: gat; it reserved 4.5 GiB)" and warnings == []
    over = within + [row("rgcn", 4 * GIB, 2 * GIB, gpu=3 * GIB, gpu_reserved=GIB), row("tagcn", 2.6 * GIB, 2 * GIB)]
    line, warnings = memory_held(over)
    assert line.endswith("; GPU memory 3.0 GiB (train: rgcn; it reserved 1.0 GiB)")
    assert len(warnings) == 2 and "\n" not in "".join(warnings)
    assert warnings[0].startswith("2 of 5 tasks held more memory than 1.25x what they reserved (the most: train: rgcn, "
                                  "4.0 GiB against 2.0 GiB)")
    assert warnings[1].startswith("1 of 1 tasks held more GPU memory") and "grb-dist plan" in warnings[1]
    assert memory_held([row("gcn", None, GIB)]) == (None, [])  # nothing measured (off Linux): nothing said


SCRIPT = """
import json, os, sys, time
os.environ["RAY_AUTH_MODE"] = "disabled"
from grb_dist.cluster.ray_edge import connect, disconnect
from grb_dist.cluster.settings import Connection, RaySettings
from grb_dist.datasets import load_dataset
from grb_dist.store import RunLock, RunStore, graph_fingerprint
from grb_dist.sweep.cells import run_cells, run_components
from grb_dist.sweep.job import parse_job
from grb_dist.sweep.resolve import resolve
from grb_dist.sweep.runner import run_sweep
from grb_dist.sweep.session import dataset_identity
from grb_dist.sweep.sizing import Sizes, plan_key

JOB = {"dataset": "csbm", "seed": 0, "repeats": 1, "difficulties": ["full"],
       "train": {"epochs": 20, "patience": 10},
       "models": {"gcn": {"hidden_sizes": [16]}, "mlp": {"hidden_sizes": [16]}, "sgc": {"hidden_sizes": [16]}},
       "defenses": ["gcn", "mlp", "sgc"], "surrogates": ["gcn"],
       "attack": {"n_inject": 8, "edges_per_node": 4, "steps": 40, "step_size": 0.01},
       "attacks": {"rnd": {}, "fgsm": {}}}
spec = parse_job(JOB); resolve(spec)
graph = load_dataset(spec.dataset, normalize=spec.normalize, seed=spec.seed)

def sweep(run_dir, settings, each):
    cells = run_cells(spec, graph_fingerprint(graph, spec.normalize))
    plan = {plan_key("train", t.file_stem): each for t in cells.models}
    plan.update({plan_key("attack", a.perturbation_id): each for a in cells.attacks})
    ctx = connect(settings)
    try:
        with RunLock(run_dir) as lock:
            store = RunStore.open(run_dir, dataset=dataset_identity(spec, graph), components=run_components(cells),
                                  config=spec.to_dict(), config_hash=spec.config_hash, lock=lock)
            summary = run_sweep(cells, graph, store, settings, sizes=Sizes(cells, graph, plan))
        rows = store.read_timeline()
    finally:
        disconnect(ctx)
    rows = rows[rows["stage"].isin(["train", "attack"])]
    memory = rows[["peak_memory", "peak_gpu_memory", "reserved_memory", "reserved_gpu_memory"]]
    return {"failures": summary.failures, "computed": summary.computed, "total": summary.total,
            "tasks": [[r.stage, r.worker, r.started.timestamp(), r.finished.timestamp()] for r in rows.itertuples()],
            "memory": memory.astype(object).where(memory.notna(), None).to_dict("list"), "held": summary.memory}

out, tmp = {}, __import__("pathlib").Path(".")
""" + "\n"


def run_script(body: str, tmp_path) -> dict:
    code = SCRIPT + textwrap.dedent(body) + "\nprint('RESULT ' + json.dumps(out))\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def overlaps(tasks: list) -> int:
    """How many pairs of tasks ran at the same time (more than a collection delay apart)."""
    spans = sorted((start, end) for _, _, start, end in tasks)
    return sum(1 for i, (_, end) in enumerate(spans) for start, _ in spans[i + 1:] if start < end - 0.05)


def test_declared_gpus_run_the_work_in_device_workers_packed_by_gpu_memory(tmp_path):
    out = run_script("""
        G = 8 * 2**30
        gpu = dict(num_cpus=2, num_gpus=1, gpu_memory=G, include_dashboard=False)
        out["apart"] = sweep(tmp / "apart", RaySettings(Connection(**gpu)), int(0.6 * G))   # two never fit one card
        out["packed"] = sweep(tmp / "packed", RaySettings(Connection(**gpu)), int(0.3 * G))  # two fit side by side
        # the device workers are long-lived: six calls on two actors run in two processes
        from grb_dist.sweep.pool import DevicePool
        from grb_dist.cluster import ray_edge
        ctx = connect(RaySettings(Connection(**gpu)))
        try:
            pool = DevicePool(2, ray_edge.options(RaySettings(), "device", gpu_share=0.4))
            graph_ref, regs, pids = ray_edge.put(graph), ray_edge.put_registrations(), []
            for _ in range(6):
                while not pool.idle():
                    ref = ray_edge.wait(list(pool.of_ref), None)[0]
                    pids.append(ray_edge.get(ref)); pool.done(ref)
                pool.submit(lambda g: os.getpid(), graph_ref, (), regs, "pid")
            for ref in list(pool.of_ref):
                pids.append(ray_edge.get(ref)); pool.done(ref)
            out["pids"], out["info"] = pids, pool.info()
        finally:
            disconnect(ctx)
    """, tmp_path)
    for name in ("apart", "packed"):
        run = out[name]
        assert run["failures"] == 0 and run["computed"] == run["total"] > 0
        assert run["tasks"] and all(worker.startswith("device:") for _, worker, _, _ in run["tasks"]), run["tasks"]
    assert {w for _, w, _, _ in out["apart"]["tasks"]} == {"device:0"}  # one worker: a card fits one task
    assert overlaps(out["apart"]["tasks"]) == 0
    assert {w for _, w, _, _ in out["packed"]["tasks"]} == {"device:0", "device:1"}
    assert len(set(out["pids"])) == 2 and len(out["pids"]) == 6
    assert sum(i["calls"] for i in out["info"]) == 6
    # each call's timeline row: what its worker held (no CUDA ran: no GPU figure) and its actor's share of the card
    memory = out["apart"]["memory"]
    assert all(m > 0 for m in memory["peak_memory"]) and set(memory["peak_gpu_memory"]) == {None}
    assert len(set(memory["reserved_gpu_memory"])) == 1 and memory["reserved_gpu_memory"][0] >= 0.6 * 8 * GIB
    assert out["apart"]["held"].startswith("the most a task held: memory ")
    assert {i["pid"] for i in out["info"]} == set(out["pids"]) and {i["device"] for i in out["info"]} == {"cpu"}


def test_cpu_tasks_reserve_their_memory_and_never_share_a_node_they_do_not_fit(tmp_path):
    out = run_script(f"""
        M = 4 * 2**30
        out["run"] = sweep(tmp / "cpu", RaySettings(Connection(num_cpus=2, memory=M, include_dashboard=False)),
                           int(0.6 * M) - {WORKER_BYTES})
    """, tmp_path)
    run = out["run"]
    assert run["failures"] == 0 and run["computed"] == run["total"] > 0
    assert not any(isinstance(worker, str) for _, worker, _, _ in run["tasks"])  # Ray tasks, not actors
    assert overlaps(run["tasks"]) == 0  # 2 CPUs, but two tasks of 0.6 M never run side by side
    # the timeline has what each task reserved and what its worker held at its peak (its imports and the graph)
    assert set(run["memory"]["reserved_memory"]) == {int(0.6 * 4 * GIB)}
    assert all(100 * 2**20 < m < 4 * GIB for m in run["memory"]["peak_memory"]), run["memory"]
    assert set(run["memory"]["reserved_gpu_memory"]) == {None}


def test_a_task_that_fits_no_node_is_refused_before_anything_is_written(tmp_path):
    out = run_script("""
        from grb_dist.core.errors import ConfigError
        from grb_dist.sweep.session import prepare, run
        from pathlib import Path
        prepared = prepare(spec, out=Path("refused"))
        plan = {plan_key("train", prepared.cells.models[0].file_stem): 3 * 2**30}
        try:
            run(prepared, lambda: RaySettings(Connection(num_cpus=1, memory=2**30, include_dashboard=False)), local=True,
                on_locked=lambda locked: None, plan=plan)
            out["error"] = None
        except ConfigError as exc:
            out["error"] = str(exc)
        out["written"] = Path("refused").exists()
    """, tmp_path)
    assert out["error"] and "\n" not in out["error"] and "training" in out["error"] and "1.0 GiB" in out["error"]
    assert out["written"] is False


def test_the_sweep_reserves_what_the_last_plan_measured(tmp_path, monkeypatch):
    from grb_dist.sweep.cost.machine import plan_path, read_plan_figures, save_plan_figures
    from grb_dist.sweep.session import plan_figures, prepare, resolve_job
    from grb_dist.sweep.sizing import Sizes, plan_key

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    spec = resolve_job("csbm", None, {"attacks": "rnd", "defenses": "gcn", "difficulties": "full", "repeats": 1})
    prepared = prepare(spec, out=tmp_path / "run")
    assert plan_figures(prepared) == {}
    stem = prepared.cells.models[0].file_stem
    save_plan_figures(spec.config_hash, prepared.fingerprint, "cpu", {plan_key("train", stem): 5 * GIB})
    assert plan_figures(prepared) == {plan_key("train", stem): 5 * GIB}
    size = Sizes(prepared.cells, prepared.graph, plan_figures(prepared)).train(prepared.cells.models[0])
    assert size.own == 5 * GIB and size.source == "plan"
    other = Sizes(prepared.cells, prepared.graph, {}).train(prepared.cells.models[0])
    assert other.source == "estimate" and 0 < other.own < GIB
    # a damaged or forged file counts as no plan: the estimates stand
    path = plan_path(spec.config_hash, prepared.fingerprint)
    for text in ("{", '{"device": "cpu", "figures": {"train:x": -1}}', '{"device": "cpu", "figures": {"a": 1.5}}',
                 '{"device": 3, "figures": {}}', "[]"):
        path.write_text(text)
        assert read_plan_figures(spec.config_hash, prepared.fingerprint) == ({}, "")
