"""``grb-dist sweep --plan``: the cost model, the schedule it replays, the calibration cache,
and the command (nothing of the run computed or written)."""

from __future__ import annotations

import json
import re
import time

import pytest
import yaml
from typer.testing import CliRunner

from grb_dist.cli import app
from grb_dist.core.errors import ConfigError
from grb_dist.sweep.cost.calibrate import Calibration, Rate, Startup, cache_path, code_hash, gpu_machine
from grb_dist.sweep.cost.forecast import Cluster, expected_epochs, forecast, task_figures
from grb_dist.sweep.job import parse_job
from grb_dist.sweep.cells import needed_work, run_cells
from helpers import small

runner = CliRunner()
FINGERPRINT = "f" * 64
NO_STARTUP = Startup(0.0, 0.0, 0.0, 0.0, 100)


def _plan(**changes):
    p = run_cells(parse_job(small(**changes)), FINGERPRINT)
    return p, needed_work(p, set(), lambda _: False)


def _calibration(p, work, *, train, attack, score=0.0) -> Calibration:
    return Calibration({"device": "cpu"}, {t.file_stem: Rate(0.0, train[t.name], 10) for t in work.models},
                       {a.perturbation_id: Rate(attack[0], attack[1], 20, attack[2]) for a in work.attacks_to_run},
                       {c.defense: Rate(score, 0.0, 30) for c in work.todo}, NO_STARTUP)


def test_expected_epochs_follow_the_surrogates_best_epoch_or_else_halfway():
    assert expected_epochs({"epochs": 200, "patience": 50}) == 50 + 1 + 75
    assert expected_epochs({"epochs": 100, "patience": 0}) == 100  # no early stopping
    assert expected_epochs({"epochs": 10, "patience": 50}) == 10  # patience never ends it
    # the best epoch measured on the surrogate: patience epochs after it, at most all of them
    assert expected_epochs({"epochs": 200, "patience": 50}, best_epoch=30) == 30 + 50 + 1
    assert expected_epochs({"epochs": 200, "patience": 50}, best_epoch=190) == 200


def test_the_schedule_replays_the_runners_order_on_one_cpu():
    # one surrogate (gcn, 10 s) and one other defense (mlp, 20 s); the 4 cells of fgsm on the
    # full difficulty... one difficulty, two repeats: one attack task of both cells
    p, work = _plan(difficulties=["full"], train={"epochs": 10, "patience": 10}, defenses=["mlp"])
    cal = _calibration(p, work, train={"gcn": 1.0, "mlp": 2.0}, attack=(1.0, 0.5, 2.0))
    fc = forecast(p, work, cal, Cluster(cpus=1))
    s = fc.stages
    assert (s["train"].count, s["attack"].count, s["score"].count) == (2, 2, 3)
    # surrogate 0-10, then training and attacks alternate: mlp 10-30, the batch (clean 2 +
    # 2 x (1 + 2 x 0.5)) 30-36, with scoring calls sharing the one core
    assert s["train"].start == 0 and s["train"].end == pytest.approx(30)
    assert s["attack"].task_seconds == pytest.approx(2 + 2 * (1 + 2 * 0.5))
    assert s["attack"].start == pytest.approx(30)
    assert fc.schedule == pytest.approx(36 + 3 * 0.005, abs=0.02)
    assert fc.total == pytest.approx(fc.schedule + 1.0)  # no start-up measured, REDUCE_S at the end


def test_two_cpus_run_training_and_attacks_side_by_side():
    p, work = _plan(difficulties=["full"], train={"epochs": 10, "patience": 10}, defenses=["mlp"])
    cal = _calibration(p, work, train={"gcn": 1.0, "mlp": 2.0}, attack=(1.0, 0.5, 2.0))
    one, two = (forecast(p, work, cal, Cluster(cpus=c)) for c in (1, 2))
    assert two.schedule < one.schedule
    # gcn 0-10 and mlp 0-20 side by side; the attack batch (8 s) starts when gcn ends
    assert two.stages["attack"].start == pytest.approx(10)
    assert two.stages["attack"].end == pytest.approx(18)
    assert two.schedule == pytest.approx(20, abs=0.05)


def test_busy_cores_share_their_time():
    # more threads than cores: every task runs at the cluster's share
    p, work = _plan(difficulties=["full"], train={"epochs": 10, "patience": 10}, defenses=["mlp"])
    cal = _calibration(p, work, train={"gcn": 1.0, "mlp": 1.0}, attack=(0.0, 0.0, 0.0))
    one = forecast(p, work, cal, Cluster(cpus=2, threads=1))
    four = forecast(p, work, cal, Cluster(cpus=2, threads=4))
    assert four.schedule == pytest.approx(one.schedule * 4, rel=0.01)


def test_stored_models_are_not_trained_again():
    p, work = _plan(difficulties=["full"], train={"epochs": 10, "patience": 10}, defenses=["mlp"])
    cal = _calibration(p, work, train={"gcn": 1.0, "mlp": 2.0}, attack=(1.0, 0.5, 2.0))
    fc = forecast(p, work, cal, Cluster(cpus=1), stored=frozenset(t.file_stem for t in work.models))
    assert fc.stages["train"].count == 0
    assert fc.schedule == pytest.approx(6, abs=0.05)


def test_peak_memory_per_task_adds_a_worker_and_the_graph():
    p, work = _plan()
    cal = _calibration(p, work, train={"gcn": 1.0, "mlp": 1.0}, attack=(0.0, 0.0, 0.0))
    fc = forecast(p, work, cal, Cluster(cpus=1), graph_bytes=1000)
    assert fc.peak_task("train") == 100 + 1000 + 10
    assert fc.peak_task("attack") == 100 + 1000 + 20


def test_task_figures_list_every_task_with_its_seconds_and_memory():
    """One figure per task to run: a worker, the graph and the task's calibrated peak (the
    table's peak memory per task is their largest), and whether that fits the memory given;
    a stored model is not trained."""
    p, work = _plan()
    cal = _calibration(p, work, train={"gcn": 1.0, "mlp": 2.0}, attack=(0.5, 0.25, 1.0), score=0.125)
    fc = forecast(p, work, cal, Cluster(cpus=1), graph_bytes=1000)
    tasks = task_figures(work, cal, fc, memory=100 + 1000 + 15)
    by_kind = {k: [t for t in tasks if t["kind"] == k] for k in ("train", "attack", "score", "poison")}
    assert [t["model"] for t in by_kind["train"]] == [m.file_stem for m in work.models]
    assert [t["perturbation"] for t in by_kind["attack"]] == [a.perturbation_id for a in work.attacks_to_run]
    assert [t["cell"] for t in by_kind["score"]] == [c.cell_id for c in work.todo] and not by_kind["poison"]
    for kind in ("train", "attack", "score"):
        assert max(t["peak_bytes"] for t in by_kind[kind]) == fc.peak_task(kind)
    assert {(t["kind"], t["fits"]) for t in tasks} == {("train", True), ("attack", False), ("score", False)}
    fgsm = by_kind["attack"][0]
    assert (fgsm["name"], fgsm["surrogate"]) == ("fgsm", "gcn")
    assert fgsm["seconds"] == pytest.approx(1.0 + 0.5 + fgsm["steps"] * 0.25)
    assert by_kind["score"][0]["seconds"] == 0.125
    stored = forecast(p, work, cal, Cluster(cpus=1), stored=frozenset({work.models[0].file_stem}))
    assert work.models[0].file_stem not in {t.get("model") for t in task_figures(work, cal, stored)}


@pytest.mark.parametrize("cpus,gpus", [(0, 0), (1, -1)])
def test_a_cluster_needs_cpus_and_no_negative_gpus(cpus, gpus):
    with pytest.raises(ConfigError):
        Cluster(cpus=cpus, gpus=gpus)


def test_a_gpu_kind_needs_its_calibration_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="no calibration of a 'h100' GPU"):
        gpu_machine("h100", 1)
    machine = {"device": "cuda", "processor": "NVIDIA H100 80GB HBM3", "threads": 1, "version": 1,
               "code": code_hash()}
    path = cache_path(machine)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"machine": machine, "entries": {}}))
    assert gpu_machine("h100", 1) == machine
    with pytest.raises(ConfigError):
        gpu_machine("a100", 1)
    stale = {**machine, "code": "0" * 16}  # measured by other code: not used
    cache_path(stale).write_text(json.dumps({"machine": stale, "entries": {}}))
    path.unlink()
    with pytest.raises(ConfigError):
        gpu_machine("h100", 1)


# ------------------------------------------------------------------------------ the command


@pytest.fixture
def tiny_job(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(small()))
    return job


def test_an_interrupted_plan_says_what_it_kept(tiny_job, tmp_path, monkeypatch):
    """SIGTERM while --plan calibrates: exit 143, no run directory, and a message about the
    plan (no cells, the calibration cache kept), not the sweep's "finished cells are kept"."""
    import os
    import signal

    import grb_dist.sweep.cost.predict as predict

    def terminated(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)

    monkeypatch.setattr(predict, "predict_cost", terminated)
    r = runner.invoke(app, ["sweep", "--job", str(tiny_job), "--out", str(tmp_path / "run"), "--no-dashboard",
                            "--plan"])
    assert r.exit_code == 143, r.output
    assert "interrupted: the plan wrote no run and computed no cells" in r.output
    assert str(tmp_path / "cache" / "grb-dist" / "calibration") in r.output and "finished cells" not in r.output
    assert not (tmp_path / "run").exists()


def test_plan_calibrates_once_prints_the_forecast_and_writes_nothing_of_the_run(tiny_job, tmp_path):
    """``grb-dist plan`` measures; its alias ``sweep --plan`` then finds every figure cached."""
    args = ["--job", str(tiny_job), "--out", str(tmp_path / "run"), "--no-dashboard"]
    first = runner.invoke(app, ["plan", *args])
    assert first.exit_code == 0, first.output
    assert not (tmp_path / "run").exists()
    out = first.output
    # the surrogate and two defenses; fgsm x 2 difficulties x 2 repeats; 2 defenses x (2 clean + 4)
    assert "| train | 3 models |" in out and "| attack | 4 perturbations |" in out and "| score | 12 cells |" in out
    assert "predicted wall time:" in out
    cached = list((tmp_path / "cache" / "grb-dist" / "calibration").glob("*.json"))
    assert len(cached) == 1
    entries = json.loads(cached[0].read_text())["entries"]
    # the start-up, 2 models, 2 attack shapes (one per difficulty), 2 defenses' forward pass,
    # assembling an injected graph, the best epoch of each model's full training (all cheap here)
    assert sum(k.startswith("startup:") for k in entries) == 1
    assert sum(k.startswith("forward:") for k in entries) == 2
    assert sum(k.startswith("perturb:") for k in entries) == 1
    best = [v["fixed"] for k, v in entries.items() if k.startswith("best:")]
    assert len(best) == 2
    assert len(entries) == 1 + 2 + 2 + 2 + 1 + 2
    median = int((best[0] + best[1]) / 2)
    predicted = next(line for line in out.splitlines() if line.startswith("predicted wall time:"))
    assert f"early stopping where it ended trainings in full (median best epoch {median})" in out \
        or "at most" not in predicted  # the note comes with the upper figure
    second = runner.invoke(app, ["sweep", *args, "--plan"])
    assert second.exit_code == 0, second.output
    assert "every figure from the cache" in second.output
    assert "| train | 3 models |" in second.output and "| score | 12 cells |" in second.output  # the same job
    assert not (tmp_path / "run").exists()


def test_a_plan_on_samples_within_a_budget_gives_bounds(tiny_job, tmp_path):
    """--calibration sampled measures on two samples and extrapolates; a budget that runs
    out at once still measures the first figure of each kind and prices the others between
    the fastest and the slowest of their kind."""
    args = ["plan", "--job", str(tiny_job), "--out", str(tmp_path / "run"), "--no-dashboard",
            "--calibration", "sampled", "--budget", "0.001"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "on samples of" in r.output
    # the extrapolation checked against one epoch on the whole graph, and that figure cached
    assert "extrapolation checked on the whole graph: an epoch of gcn took" in r.output
    # and the attacks' against the costliest attack measured on the whole graph
    assert re.search(r"attacks checked on the whole graph: \w+ on gcn, \w+, \d+ steps would take", r.output), r.output
    cached = next((tmp_path / "cache" / "grb-dist" / "calibration").glob("*.json"))
    assert sum(k.startswith("check-epoch:") for k in json.loads(cached.read_text())["entries"]) == 1
    found = re.search(r"the measuring budget ran out: (\d+) figures not measured", r.output)
    # 3 models, 2 attack shapes, 2 defenses' forward pass, 1 perturbed graph: one of each kind measured
    assert found and int(found.group(1)) == (3 + 2 + 2 + 1) - 4, r.output
    low, high = re.search(r"between (.*?) and (.*?) with the estimated figures", r.output).groups()
    total = re.search(r"predicted wall time: (.*?)(?: \(|;)", r.output).group(1)
    assert _seconds(low) <= _seconds(total) <= _seconds(high)
    assert not (tmp_path / "run").exists()


def test_a_check_beyond_its_limit_is_left_out_and_the_plan_says_so(tiny_job, tmp_path, monkeypatch):
    """A full-size check that would take longer than the budget allows it is not measured
    (on the aminer twin an epoch's check takes about 40 s): the plan says its figures grow
    as the samples say, and that a longer budget buys the check; the limit grows with the
    budget beyond the default three-minute plan's."""
    import grb_dist.sweep.cost.checks as checks
    from grb_dist.sweep.cost.checks import ARCHITECTURE_CHECK_S, CHECK_S, check_limit

    assert check_limit(None) == CHECK_S and check_limit(120.0) == CHECK_S  # the default plan's budget
    assert check_limit(600.0) == 60.0 and check_limit(600.0, ARCHITECTURE_CHECK_S) == 60.0
    assert check_limit(100.0, ARCHITECTURE_CHECK_S) == ARCHITECTURE_CHECK_S
    limits = []
    monkeypatch.setattr(checks, "check_limit", lambda budget, least=CHECK_S: limits.append(budget) or 0.0)
    args = ["plan", "--job", str(tiny_job), "--out", str(tmp_path / "run"), "--no-dashboard",
            "--calibration", "sampled", "--budget", "0.001"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "extrapolation checked on the whole graph" not in r.output
    assert "attacks checked on the whole graph" not in r.output
    needed = re.search(r"extrapolation not checked on the whole graph .*a budget of ([\d,]+) s buys the check", r.output)
    assert needed and int(needed.group(1).replace(",", "")) > 0, r.output
    assert limits and set(limits) == {0.001}  # every check asked for its limit under the budget given
    cached = next((tmp_path / "cache" / "grb-dist" / "calibration").glob("*.json"))
    assert not any(k.startswith("check-epoch:") for k in json.loads(cached.read_text())["entries"])
    doc = json.loads(runner.invoke(app, [*args, "--json"]).stdout)  # the same figures, from the cache
    assert doc["calibration"]["check_budget"] == pytest.approx(float(needed.group(1).replace(",", "")), abs=1.0)


def _seconds(text: str) -> float:
    units = {"s": 1, "min": 60, "h": 3600, "d": 86400}
    return sum(float(n) * units[u] for n, u in re.findall(r"([\d.]+) (s|min|h|d)\b", text))


@pytest.mark.parametrize("flags,message", [
    (["--cpus", "4"], "--cpus is an option of a plan: use grb-dist plan (or add --plan)"),
    (["--plan", "--gpu-kind", "h100"], "give --gpus"),
    (["--plan", "--cpus", "0"], "--cpus must be"),
    (["--plan", "--gpus", "-1"], "--gpus must be"),
    (["--plan", "--gpus", "1", "--gpu-kind", "../x"], "--gpu-kind must be"),
    (["--plan", "--gpus", "2", "--gpu-kind", "h100"], "no calibration of a 'h100' GPU"),
    (["--plan-budget", "10"], "add --plan"),
    (["--calibration", "full"], "add --plan"),
    (["--plan", "--plan-budget", "0"], "--plan-budget must be"),
    (["--plan", "--calibration", "half"], "--calibration must be one of auto, sampled, full"),
    (["--json"], "--json is an option of a plan"),
    # grb-dist plan itself
    (["PLAN", "--gpu-kind", "h100"], "give --gpus"),
    (["PLAN", "--cpus", "0"], "--cpus must be"),
    (["PLAN", "--budget", "0"], "--budget must be"),
    (["PLAN", "--calibration", "half"], "--calibration must be one of auto, sampled, full"),
])
def test_plan_options_are_checked_before_any_work(tiny_job, tmp_path, flags, message):
    command = ["plan", *flags[1:]] if flags[0] == "PLAN" else ["sweep", *flags]
    result = runner.invoke(app, [command[0], "--job", str(tiny_job), "--out", str(tmp_path / "run"), *command[1:]])
    assert result.exit_code != 0
    assert message in result.output
    assert not (tmp_path / "run").exists()
    assert not (tmp_path / "cache").exists()


def test_json_without_plan_is_a_one_line_error(tiny_job, tmp_path):
    result = runner.invoke(app, ["sweep", "--job", str(tiny_job), "--out", str(tmp_path / "run"), "--json"])
    assert result.exit_code == 2
    assert result.stdout == "" and result.stderr.strip().splitlines()[0].startswith("error: --json is an option of a plan")


def test_plan_for_gpus_without_a_gpu_here_asks_for_the_gpu_kind(tiny_job, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: it calibrates on it")
    result = runner.invoke(app, ["sweep", "--job", str(tiny_job), "--plan", "--cpus", "8", "--gpus", "2"])
    assert result.exit_code != 0
    assert "no GPU to calibrate" in result.output


def test_ray_start_is_timed_before_any_figure_is_measured(monkeypatch, tmp_path):
    """The start-up probe (a local Ray and its workers, on every core) runs beside the
    sampling of the graph and is waited for before the first measurement: beside one, it
    slowed the figures it overlapped."""
    import grb_dist.sweep.cost.calibrate as cal
    from grb_dist.datasets import load_dataset

    events = []

    class Probe:
        def __init__(self, cpus, dashboard):
            events.append("probe started")

        def result(self):
            events.append("probe done")
            return Startup(1.0, 1.0, 1.0, 1.0, 1)

        def cancel(self):
            pass

    train = cal._Calibrator._train
    monkeypatch.setattr(cal, "StartupProbe", Probe)
    monkeypatch.setattr(cal._Calibrator, "_train", lambda self, t, n: events.append("measured") or train(self, t, n))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    job = parse_job(small())
    graph = load_dataset(job.dataset, normalize=job.normalize, seed=job.seed)
    cells = run_cells(job, FINGERPRINT)
    work = needed_work(cells, set(), lambda pid: False)
    result = cal.calibrate(cells, work, graph, FINGERPRINT, sample="sampled", budget=0.001)
    assert result.startup.ray_start == 1.0 and result.samples
    assert events[:2] == ["probe started", "probe done"] and "measured" in events[2:]


def test_a_training_rate_is_read_inside_its_runs(monkeypatch, tmp_path):
    """On a large graph a training's rate is read off one 2-epoch training (its second epoch
    timed inside it); on a small one the 2-epoch run is the warm-up and the rate is the
    median epoch of a longer run after its first, the rest of that run its fixed part."""
    import statistics

    import grb_dist.sweep.cost.calibrate as cal
    from grb_dist.datasets import load_dataset
    from grb_dist.sweep.cost.timing import MAX_RUN

    job = parse_job(small())
    graph = load_dataset(job.dataset, normalize=job.normalize, seed=job.seed)
    cells = run_cells(job, FINGERPRINT)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the figures measured are cached there
    c = cal._Calibrator(cells, graph, "cpu", 1, FINGERPRINT, None)
    task = cells.targets[0]
    calls, runs, train = [], [], c._train
    monkeypatch.setattr(c, "_train", lambda t, n: calls.append(n) or runs.append(train(t, n)) or runs[-1])
    monkeypatch.setattr(cal, "LARGE_S", 0.0)  # every graph counts as large
    rate = c.train_rate(task)
    ends = c.epoch_ends
    assert calls == [2] and len(ends) == 2 and 0 < ends[0] < ends[1]
    assert rate.unit == pytest.approx(ends[1] - ends[0])
    assert rate.fixed + 2 * rate.unit == pytest.approx(runs[0][0])
    monkeypatch.setattr(cal, "LARGE_S", 1e9)
    c.cache.clear()
    rate = c.train_rate(task)
    n, ends = calls[-1], c.epoch_ends
    assert calls[1:] == [2, n] and 3 <= n <= MAX_RUN and len(ends) == n
    assert rate.unit == pytest.approx(statistics.median(b - a for a, b in zip(ends, ends[1:])))
    assert rate.fixed + n * rate.unit == pytest.approx(runs[-1][0])
    assert rate.peak == max(p for _, p in runs[1:])


# ---------------------------------------------- every scenario, poisoning's trainings, --json

#: A small job of every scenario: poisoning trains each defense on the clean graph
#: (``<defense>-<seed>-clean``) and on each poisoned graph, trainings of their own.
EVERY_SCENARIO = small(scenario="all", repeats=1, train={"epochs": 10, "patience": 5},
                       modification={"attacks": {"dice": {}}},
                       poisoning={"attack": {"ratio_edge_mod": 0.05}, "attacks": {"dice": {}}})


class _NoRay:
    """Ray's start-up, not timed: these tests plan, they do not measure a local Ray's start."""

    def __init__(self, cpus, dashboard):
        pass

    def result(self):
        return Startup(1.0, 1.0, 1.0, 1.0, 100 * 2**20)

    def cancel(self):
        pass


@pytest.fixture(scope="module")
def plan_cache(tmp_path_factory):
    """One calibration cache for the module's plans of :data:`EVERY_SCENARIO`: a figure one
    test measured, the next reuses."""
    return tmp_path_factory.mktemp("plan-cache")


@pytest.fixture
def every_scenario(tmp_path, monkeypatch, plan_cache):
    import grb_dist.sweep.cost.calibrate as cal

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(plan_cache))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(cal, "StartupProbe", _NoRay)
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(EVERY_SCENARIO))
    return job


@pytest.mark.parametrize("calibration", ["full", "sampled"])
def test_a_plan_prices_poisonings_trainings_on_the_graph_and_on_samples(every_scenario, tmp_path, calibration):
    """Regression: the calibration looked a training figure's model up among the job's
    models, which poisoning's trainings are not (``KeyError: 'gcn-0-clean'``); they are
    priced like any training, on the whole graph and on samples."""
    r = runner.invoke(app, ["sweep", "--job", str(every_scenario), "--out", str(tmp_path / "run"), "--no-dashboard",
                            "--plan", "--scenario", "poisoning", "--calibration", calibration])
    assert r.exit_code == 0, r.output
    # the attacker's surrogate (trained on the whole graph), and per defense (gcn, mlp) a
    # training on the clean graph and one on dice's; 2 x 2 x 2 difficulties cells
    assert "| train | 5 models |" in r.stdout and "| attack | 1 perturbation |" in r.stdout, r.stdout
    assert "| score | 8 cells |" in r.stdout and "predicted wall time:" in r.stdout
    assert ("on samples of" in r.stdout) == (calibration == "sampled")
    assert "warning:" not in r.stdout and not (tmp_path / "run").exists()


def test_an_attack_whose_length_steps_do_not_set_is_timed_as_a_whole_run(every_scenario, tmp_path, monkeypatch):
    """Metattack takes a greedy step per flip of its budget and ignores ``steps``: timing it
    at two step counts ran the whole attack four or five times (cora: 20 minutes of a full
    plan). It is timed twice (the cold run with the surrogate's clean pass, and a warm one)."""
    import grb_dist.sweep.worker as worker

    job = yaml.safe_load(every_scenario.read_text())
    job["poisoning"] = {"attack": {"ratio_edge_mod": 0.002}, "attacks": {"metattack": {"train_iters": 5}}}
    every_scenario.write_text(yaml.safe_dump(job))
    runs: list[str] = []
    attack_task = worker.attack_task
    monkeypatch.setattr(worker, "attack_task", lambda graph, cell, *a, **k: runs.append(cell.attack)
                        or attack_task(graph, cell, *a, **k))
    r = runner.invoke(app, ["sweep", "--job", str(every_scenario), "--out", str(tmp_path / "run"), "--no-dashboard",
                            "--plan", "--scenario", "poisoning", "--calibration", "full"])
    assert r.exit_code == 0, r.output
    assert runs == ["metattack", "metattack"] and "| attack | 1 perturbation |" in r.stdout, (runs, r.stdout)


def test_plan_json_lists_every_pending_task(every_scenario, tmp_path):
    """``--plan --json``: one JSON document on stdout (progress on stderr) with the
    cluster, the totals, the stages and every task of the pending work."""
    from grb_dist.sweep.session import pending_work, prepare

    r = runner.invoke(app, ["plan", "--job", str(every_scenario), "--out", str(tmp_path / "run"), "--no-dashboard",
                            "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert "calibrating" in r.stderr and not (tmp_path / "run").exists()
    work = pending_work(prepare(parse_job(EVERY_SCENARIO), out=tmp_path / "run"))
    tasks = doc["tasks"]
    listed = {k: sorted(t[field] for t in tasks if t["kind"] == k)
              for k, field in (("train", "model"), ("attack", "perturbation"), ("poison", "model"), ("score", "cell"))}
    assert listed == {"train": sorted(m.file_stem for m in work.models),
                      "attack": sorted(a.perturbation_id for a in work.attacks_to_run),
                      "poison": sorted(pt.model.file_stem for pt in work.poisoned),
                      "score": sorted(c.cell_id for c in work.todo if c.scenario != "poisoning")}
    assert any(t["model"].endswith("-clean") for t in tasks if t["kind"] == "poison")
    for t in tasks:
        assert t["name"] and t["seconds"] >= 0 and isinstance(t["peak_bytes"], int) and t["peak_bytes"] > 0, t
        assert t["fits"] is True
    assert all(t["surrogate"] and t["difficulty"] for t in tasks if t["kind"] == "attack")
    stages = doc["stages"]
    assert stages["train"]["count"] == len(listed["train"]) + len(listed["poison"])
    assert (stages["attack"]["count"], stages["score"]["count"]) == (len(listed["attack"]), len(work.todo))
    assert max(t["peak_bytes"] for t in tasks if t["kind"] in ("train", "poison")) == stages["train"]["peak_bytes"]
    assert doc["totals"]["seconds"] > 0 and doc["cluster"]["memory_of"] == "this machine"
    assert doc["scenarios"] == ["injection", "modification", "poisoning"] and doc["to_compute"] == len(work.todo)


def test_plan_warns_of_a_task_larger_than_the_machine(every_scenario, tmp_path, monkeypatch):
    """A task whose peak memory exceeds this machine's: one line after the table names the
    largest and its figure; in --json no task fits."""
    import grb_dist.sweep.cost.forecast as fc

    monkeypatch.setattr(fc, "reservable_memory", lambda: 2**20)  # 1 MiB: no task fits
    args = ["sweep", "--job", str(every_scenario), "--out", str(tmp_path / "run"), "--no-dashboard", "--plan",
            "--scenario", "poisoning"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    warning = [line for line in r.stdout.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1, r.stdout
    assert re.match(r"warning: training \w+.* \(\d+\.\d MiB\) does not fit this machine \(1\.0 MiB\); "
                    r"\d+ other tasks do not either", warning[0]), warning[0]
    doc = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert doc["tasks"] and not any(t["fits"] for t in doc["tasks"])


def test_the_default_budget_keeps_the_whole_plan_within_three_minutes(monkeypatch):
    import time as clock

    import grb_dist.cli.plan as cli_sweep

    entered = clock.perf_counter() - 40.0  # the command loaded its graph for 40 s
    monkeypatch.setattr(cli_sweep, "_process_age", lambda fallback: fallback + 2.0)  # a fresh process
    fresh = cli_sweep._default_budget(entered)
    assert 180 - 2 - 40 - 60 - 1 <= fresh <= 180 - 2 - 40 - 60
    monkeypatch.setattr(cli_sweep, "_process_age", lambda fallback: fallback + 3600.0)  # a long-lived one
    assert 180 - 15 - 40 - 60 - 1 <= cli_sweep._default_budget(entered) <= 180 - 15 - 40 - 60
    assert cli_sweep._default_budget(clock.perf_counter() - 500.0) == 10.0  # late: the first figures still
