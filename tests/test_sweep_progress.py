"""Per-stage progress of a sweep (models trained, perturbations generated, cells scored):
the counts a real sweep reports, the plain lines written when stdout is not a terminal, and
the names of the Ray tasks and actors."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from grb_dist.sweep.progress import PlainProgress, Stage, progress_line, stage_detail
from grb_dist.sweep.job import parse_job
from grb_dist.sweep.cells import AttackCell
from grb_dist.sweep.resolve import resolve

#: A plain progress line: time, then the three stages with their counts.
LINE = re.compile(r"^\d\d:\d\d:\d\d train \d+/\d+ models \(.*\), attack \d+/\d+ perturbations \(.*\), "
                  r"score \d+/\d+ cells \(.*\)$")

JOB = {
    "dataset": "csbm", "seed": 0, "repeats": 1, "difficulties": ["easy", "full"],
    "train": {"epochs": 20, "patience": 10},
    "models": {"gcn": {"hidden_sizes": [16]}, "mlp": {"hidden_sizes": [16]}},
    "defenses": ["gcn", "mlp"], "surrogates": ["gcn"],
    "attack": {"n_inject": 5, "edges_per_node": 3, "steps": 3},
    "attacks": {"rnd": {}, "fgsm": {}},
}


class _Progress:
    """A stand-in for ``SweepProgress`` with the fields the displays read."""

    def __init__(self, elapsed: float, train: Stage, attack: Stage, score: Stage):
        self.elapsed, self.train, self.attack, self.score = elapsed, train, attack, score


def test_stage_rate_eta_and_text():
    s = Stage(done=13, total=40, skipped=3, started=2.0)
    assert s.rate(7.0) == pytest.approx(2.0)  # (13 - 3 stored) / (7 - 2) s
    assert s.eta(7.0) == pytest.approx(13.5)
    assert stage_detail(s, 7.0) == "2.0/s, eta 13.5 s"
    assert stage_detail(Stage(total=8), 1.0) == "waiting"
    assert stage_detail(Stage(total=8, started=1.0), 2.0) == "running"
    assert stage_detail(Stage(done=8, total=8, skipped=8), 2.0) == "stored"
    assert stage_detail(Stage(done=7, total=8, failed=1, started=1.0, finished=43.0), 50.0) == "done in 42.0 s, 1 failed"
    assert stage_detail(Stage(done=1, total=1000, started=0.0), 100.0) == "0.6/min, eta 1 d 03 h"  # 99,900 s


def test_plain_progress_one_line_per_stage_change_else_every_few_seconds():
    import datetime as dt

    now = [0.0]
    lines: list[str] = []
    plain = PlainProgress(lines.append, every=5.0, clock=lambda: now[0])
    train, attack, score = Stage(total=3), Stage(total=4), Stage(total=20)

    def step(t: float) -> None:
        now[0] = t
        plain(_Progress(t, Stage(**vars(train)), Stage(**vars(attack)), Stage(**vars(score))))

    step(0.0)  # first report: a line
    train.started = 0.1
    step(0.1)  # train starts: a line
    step(1.0)  # nothing changed: no line
    train.done = 1
    step(2.0)  # counts changed, status did not, 2 s after the last line: no line
    step(5.2)  # 5 s since the last line: a line
    attack.started = score.started = 5.3
    step(5.3)  # attack and score start: a line
    attack.done, score.done = 4, 9
    step(6.0)  # attack done: a line
    score.done = 10
    step(6.5)  # no line yet ...
    assert len(lines) == 5 and all(LINE.match(line) for line in lines), lines
    plain.close()  # ... the last state when the sweep ends
    assert len(lines) == 6 and "score 10/20 cells" in lines[-1]
    plain.close()
    assert len(lines) == 6
    line = progress_line(_Progress(10.0, Stage(3, 8, started=0.0), Stage(10, 40, started=5.0), Stage(0, 528)),
                         now=dt.datetime(2026, 1, 1, 12, 1, 5))
    assert line == ("12:01:05 train 3/8 models (0.3/s, eta 16.7 s), attack 10/40 perturbations (2.0/s, eta 15.0 s), "
                    "score 0/528 cells (waiting)")


def test_task_and_actor_names():
    from grb_dist.sweep.runner import attack_task_name, scorer_name, train_task_name
    from grb_dist.sweep.cells import ModelTask

    t = ModelTask("target", "gcn_ln", 0, {}, {}, None, "0" * 16)
    assert train_task_name(t) == "train:gcn_ln/s0"
    cells = [AttackCell("fgsm", "gcn", "hard", r, 1000 * (r + 1), {}, "gcn-1", f"p{r}", "injection") for r in range(3)]
    assert attack_task_name(cells[:1]) == "attack:injection/fgsm/gcn/hard/r0"
    assert attack_task_name(cells) == "attack:injection/fgsm/gcn/hard/r0+2"
    assert scorer_name(2) == "scorer:2"


class _Recorder:
    """Wraps a Ray remote function and records the names it is submitted with."""

    def __init__(self, fn, names: list[str]):
        self.fn, self.names = fn, names

    def options(self, **kwargs):
        self.names.append(kwargs.get("name"))
        return self.fn.options(**kwargs)


def test_sweep_reports_consistent_stage_counts_and_names_its_work(ray_local, tmp_path, monkeypatch, capfd):
    from grb_dist.datasets import load_dataset
    from grb_dist.store import RunLock, RunStore, graph_fingerprint
    from grb_dist.sweep import runner
    from grb_dist.sweep.session import dataset_identity
    from grb_dist.sweep.cells import run_cells, run_components

    spec = parse_job(JOB)
    resolve(spec)
    graph = load_dataset(spec.dataset, normalize=spec.normalize, seed=spec.seed)
    p = run_cells(spec, graph_fingerprint(graph, spec.normalize))
    names: list[str] = []
    from grb_dist.cluster import ray_edge
    from grb_dist.cluster.settings import RaySettings

    monkeypatch.setattr(ray_edge, "_task", _Recorder(ray_edge._task, names))  # every task of the sweep
    seen, actors = [], []

    def on_progress(pr) -> None:
        seen.append(pr)
        if pr.scorers and not actors:  # the Scorer is a named actor (with a suffix while an
            # earlier sweep's Scorer of this driver still holds the name)
            named = [n for n in ray_local.util.list_named_actors() if re.fullmatch(r"scorer:0(-[0-9a-f]{6})?", n)]
            actors.append(any(ray_local.get_actor(n)._actor_id == pr.scorers[0]._actor_id for n in named))

    with RunLock(tmp_path / "run") as lock:
        store = RunStore.open(tmp_path / "run", dataset=dataset_identity(spec, graph), components=run_components(p),
                              config=spec.to_dict(), config_hash=spec.config_hash, lock=lock)
        summary = runner.run_sweep(p, graph, store, RaySettings(), on_progress=on_progress)
    assert summary.failures == 0 and summary.computed == len(p.scores)
    for pr in seen:
        for stage in (pr.train, pr.attack, pr.score):
            assert 0 <= stage.skipped <= stage.done and stage.done + stage.failed <= stage.total
        assert (pr.done, pr.total, pr.failures) == (pr.score.done, pr.score.total, pr.score.failed)
    for attr in ("train", "attack", "score"):  # counts never go back
        counts = [getattr(pr, attr).done for pr in seen]
        assert counts == sorted(counts), attr
    last = seen[-1]
    assert (last.train.done, last.train.total) == (len(p.surrogates) + len(p.targets),) * 2
    assert (last.attack.done, last.attack.total) == (len(p.attacks),) * 2
    assert (last.score.done, last.score.total) == (len(p.scores),) * 2
    assert all(s.finished is not None and s.started is not None for s in (last.train, last.attack, last.score))
    assert {n for n in names if n.startswith("train:")} == {"train:gcn/s1", "train:gcn/s0", "train:mlp/s0"}
    attack_names = [n for n in names if n.startswith("attack:")]
    assert attack_names and all(re.fullmatch(r"attack:injection/(rnd|fgsm)/gcn/(easy|full)/r0(\+\d)?", n)
                                for n in attack_names), attack_names
    assert actors == [True]
    # the Scorer's constructor takes no object refs: Ray has nothing to warn about
    assert "constructor arguments in the object store" not in capfd.readouterr().err


def test_cli_without_terminal_prints_timestamped_stage_lines(ray_local, tmp_path, monkeypatch):
    from grb_dist.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    r = CliRunner().invoke(app, ["sweep", "--attacks", "rnd", "--defenses", "gcn,mlp", "--difficulties", "easy,full",
                                 "--repeats", "1", "--steps", "3", "--n-inject", "5", "--edges-per-node", "3",
                                 "--out", "run"])
    assert r.exit_code == 0, r.output
    lines = [line for line in r.output.splitlines() if LINE.match(line)]
    assert len(lines) >= 2, r.output
    assert "train 3/3 models (done" in lines[-1] and "attack 2/2 perturbations (done" in lines[-1]
    assert "score 8/8 cells (done" in lines[-1]
    assert "8/8 cells (8 computed" in r.output


def test_rich_progress_three_rows_on_a_terminal():
    import io

    from rich.console import Console

    from grb_dist.sweep.progress import RichProgress

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    with RichProgress(console) as rows:
        rows(_Progress(1.0, Stage(0, 3), Stage(0, 4), Stage(0, 20)))
        rows(_Progress(9.0, Stage(3, 3, started=0.0, finished=8.0), Stage(2, 4, started=4.0), Stage(5, 20, started=5.0)))
    text = " ".join(out.getvalue().split())  # MofN pads its counts
    assert "3/3 models" in text and "done in 8.0 s" in text
    assert "2/4 perturbations" in text and "0.4/s, eta 5.0 s" in text
    assert "5/20 cells" in text and "1.2/s, eta 12.0 s" in text


def test_rich_rows_show_known_totals_before_the_first_report():
    """While Ray starts, the rows show the stages' totals (never ``0/0``)."""
    import io

    from rich.console import Console

    from grb_dist.sweep.progress import RichProgress

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    with RichProgress(console, {"train": 3, "attack": 4, "score": 20}):
        pass
    text = " ".join(out.getvalue().split())
    assert "0/3 models" in text and "0/4 perturbations" in text and "0/20 cells" in text
    assert "0/0" not in text and "starting" in text


def test_needed_work_counts_only_what_a_resumed_run_lacks(tmp_path):
    """The totals read before Ray starts are the runner's: a plan's models, perturbations and
    cells for a new run; for a run holding some cells, only what the missing ones need."""
    from grb_dist.sweep.cells import needed_work, run_cells
    from grb_dist.sweep.job import parse_job

    spec = parse_job({"dataset": "csbm", "attacks": {"rnd": {}, "fgsm": {}}, "defenses": ["gcn", "mlp"],
                      "difficulties": ["easy", "full"], "repeats": 1})
    p = run_cells(spec, "f" * 16)
    new = needed_work(p, set(), lambda _: False)
    assert new.totals() == {"train": len(p.models), "attack": len(p.attacks)}
    # every cell of mlp stored: mlp is not trained again, the attacks still run for gcn
    done = {c.cell_id for c in p.scores if c.defense == "mlp"}
    grown = needed_work(p, done, lambda _: False)
    assert {m.name for m in grown.models if m.role == "target"} == {"gcn"}
    assert len(grown.attacks_needed) == len(p.attacks) and len(grown.todo) == len(p.scores) - len(done)
    # every perturbation stored: no surrogate is needed
    stored = needed_work(p, done, lambda _: True)
    assert not stored.attacks_to_run and all(m.role == "target" for m in stored.models)


def test_the_metrics_tally_counts_per_scenario_and_only_gradient_steps():
    """The sweep's metrics split the attack and score stages by scenario, and an attack's
    steps per second count only the steps it takes: RND's ``steps`` setting is none, and
    Metattack's length is its budget's flips."""
    from grb_dist.sweep.cells import run_cells
    from grb_dist.sweep.progress import Tally

    spec = parse_job({"dataset": "csbm", "attacks": {"rnd": {}, "fgsm": {}}, "defenses": ["gcn", "mlp"],
                      "difficulties": ["easy", "full"], "repeats": 1, "attack": {"steps": 4}, "scenario": "all",
                      "modification": {"attacks": {"dice": {}}}, "poisoning": {"attacks": {"metattack": {}, "meta_prbcd": {}}}})
    p = run_cells(spec, "f" * 16)
    tally = Tally()
    tally.totals.update(("score", c.scenario) for c in p.scores)
    by = {s: [c for c in p.scores if c.scenario == s] for s in ("injection", "modification", "poisoning")}
    assert by["injection"] and by["modification"] and by["poisoning"]
    tally.add("score", by["modification"][:1], "done")
    tally.add("score", by["injection"][:2], "failed")
    counts = tally.by_scenario("score")
    assert counts == {"injection": (0, 2, len(by["injection"])), "modification": (1, 0, len(by["modification"])),
                      "poisoning": (0, 0, len(by["poisoning"]))}
    assert tally.by_scenario("attack") == {}
    steps = {a.attack: a.gradient_steps for a in p.attacks}
    assert steps["fgsm"] == 4 and steps["rnd"] == 0 and steps["dice"] == 0
    assert steps["metattack"] == 0  # a greedy step per flip: ``steps`` is not its length
    assert steps["meta_prbcd"] == 100  # the job sets none: its config's default, which it runs
    assert tally.attacked("fgsm", 4, 2.0) == 2.0 and tally.attacked("fgsm", 4, 6.0) == 1.0  # 8 steps in 8 s
    assert tally.attacked("rnd", 0, 1.0) is None
