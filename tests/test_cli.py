import subprocess
import sys

from typer.testing import CliRunner

from grb_dist.cli import app


runner = CliRunner()


def test_datasets_lists_catalogue():
    r = runner.invoke(app, ["datasets"])
    assert r.exit_code == 0, r.output
    for name in ("csbm", "grb-aminer", "csbm-grb-aminer", "659,574"):
        assert name in r.output


def test_datasets_does_not_import_torch():
    """``grb-dist datasets`` lists the catalogue and the local copies without importing torch
    (which takes seconds): checked in a fresh interpreter."""
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from grb_dist.cli import app\n"
        "r = CliRunner().invoke(app, ['datasets'])\n"
        "assert r.exit_code == 0, r.output\n"
        "assert 'grb-aminer' in r.output, r.output\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_train_prints_difficulties(cora_legacy):
    r = runner.invoke(app, ["train", "--dataset", str(cora_legacy), "--model", "gcn", "--epochs", "60"])
    assert r.exit_code == 0, r.output
    for d in ("easy", "medium", "hard", "full"):
        assert d in r.output


def test_bad_input_is_one_line_and_nonzero(tmp_path):
    cases = [
        ["train", "--model", "nope"],
        ["train", "--dataset", "grb-nope"],
        ["train", "--dataset", str(tmp_path)],
        ["train", "--hidden", "a,b"],
        ["train", "--normalize", "l3"],
        ["train", "--dataset", "grb-flickr", "--data-dir", str(tmp_path), "--no-download"],
    ]
    for args in cases:
        r = runner.invoke(app, args)
        assert r.exit_code == 2, (args, r.output)
        lines = [l for l in r.output.strip().splitlines() if l.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:"), (args, r.output)


def test_version_and_short_help():
    import grb_dist

    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.strip() == f"grb-dist {grb_dist.__version__}", r.output
    for args in (["-h"], ["datasets", "-h"], ["train", "-h"], ["sweep", "-h"], ["leaderboard", "-h"]):
        r = runner.invoke(app, args)
        assert r.exit_code == 0 and "Usage:" in r.output, (args, r.output)
    r = runner.invoke(app, ["train", "-h"])
    assert "--split-seed" in r.output and "--threads" in r.output


def test_verbose_before_or_after_the_command(monkeypatch):
    import logging

    root = logging.getLogger()
    monkeypatch.setattr(root, "level", root.level)  # restored after the test
    for args, level in ((["datasets"], logging.WARNING), (["-v", "datasets"], logging.INFO),
                        (["datasets", "-v"], logging.INFO), (["datasets", "--verbose"], logging.INFO)):
        root.setLevel(logging.WARNING)
        r = runner.invoke(app, args)
        assert r.exit_code == 0, (args, r.output)
        assert root.level == level, args
    # a -v that is the value of an option stays that value
    root.setLevel(logging.WARNING)
    r = runner.invoke(app, ["datasets", "--data-dir", "-v"])
    assert r.exit_code == 0 and root.level == logging.WARNING


def test_threads_out_of_range_is_one_line():
    for args in (["train", "--threads", "0"], ["train", "--threads", "1025"], ["sweep", "--threads", "0"]):
        r = runner.invoke(app, args)
        lines = [l for l in r.output.strip().splitlines() if l.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and "--threads must be in 1..1024" in lines[0], (args, r.output)


def test_ray_settings_threads_reach_the_workers(monkeypatch):
    import pytest
    import torch

    from grb_dist.core.errors import ConfigError
    from grb_dist.cluster import ray_edge
    from grb_dist.cluster.settings import RaySettings, Scaling

    with pytest.raises(ConfigError, match="1..1024"):
        Scaling(threads=0)
    for kind in ("train", "attack", "scorer", "device"):
        assert "runtime_env" not in ray_edge.options(RaySettings(), kind)
        opts = ray_edge.options(RaySettings(scaling=Scaling(threads=3)), kind)
        assert opts["runtime_env"] == {"env_vars": {ray_edge.THREADS_ENV: "3"}}
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv(ray_edge.THREADS_ENV, "1")
        ray_edge._set_threads()  # what every task and Scorer does first
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_train_seed_is_the_model_seed_and_progress_is_shown(monkeypatch):
    """--seed changes the model only; the graph and split follow --split-seed (default: the
    job's seed). Progress lines are printed while training (no terminal here)."""
    import grb_dist.datasets
    import grb_dist.defenses

    seen: list[tuple[int, int]] = []
    load, train_defense = grb_dist.datasets.load_dataset, grb_dist.defenses.train_defense

    def recording_load(*args, **kwargs):
        seen.append(("split", kwargs["seed"]))
        return load(*args, **kwargs)

    def recording_train(name, graph, params, config, **kwargs):
        seen.append(("model", config.seed))
        return train_defense(name, graph, params, config, **kwargs)

    monkeypatch.setattr(grb_dist.datasets, "load_dataset", recording_load)
    monkeypatch.setattr(grb_dist.defenses, "train_defense", recording_train)
    for args, expected in ((["--seed", "5"], [("split", 0), ("model", 5)]),
                           (["--seed", "5", "--split-seed", "3"], [("split", 3), ("model", 5)]),
                           ([], [("split", 0), ("model", 0)])):
        seen.clear()
        r = runner.invoke(app, ["train", "--epochs", "12", "--hidden", "8", *args])
        assert r.exit_code == 0, r.output
        assert seen == expected, (args, seen)
    assert "training gcn on csbm: epoch 1/12, val loss" in r.output
    assert "; best val loss " in r.output and " at epoch " in r.output
    assert "epoch 10/12" in r.output and "epoch 2/12" not in r.output
    r = runner.invoke(app, ["train", "--split-seed", "-1"])
    assert r.exit_code == 2 and "--split-seed" in r.output


COMMANDS = ("datasets", "train", "sweep", "leaderboard", "report", "compact", "study", "study-tune", "study-plot")


def test_flags_are_shown_without_a_value():
    """A flag (--wait, --allow-import, --ray/--no-ray, --help) shows no value in any help:
    typer's rich help printed ``--wait <bool>``, and ``--wait true`` then failed."""
    for args in ([], *([c] for c in COMMANDS)):
        r = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "160"})
        assert r.exit_code == 0, (args, r.output)
        assert "<bool>" not in r.output, (args, r.output)
    r = runner.invoke(app, ["sweep", "--help"], env={"COLUMNS": "160"})
    assert "--no-wait" in r.output and "--allow-import" in r.output
    assert "<int>" in r.output and "<Path>" in r.output  # options that take a value still say which


def test_wait_is_a_flag_with_an_off_form():
    import typer

    group = typer.main.get_command(app)
    for name in ("sweep", "compact"):
        command = group.commands[name]
        args = ["run"] if name == "compact" else []
        for flag, value in ((["--wait"], True), (["--no-wait"], False), ([], False)):
            ctx = command.make_context(name, [*args, *flag])
            assert ctx.params["wait"] is value, (name, flag)


def test_train_says_what_it_selects_on_and_why_it_stopped(tmp_path):
    """``train`` names the metric of its best epoch (the lowest validation loss) with that
    epoch's accuracy, and says whether early stopping ended training (and why) or it ran
    every epoch."""
    import re

    r = runner.invoke(app, ["train", "--epochs", "12", "--hidden", "8"])
    assert r.exit_code == 0, r.output
    assert re.search(r"^best val loss \d\.\d{4} at epoch \d+ \(val acc \d\.\d{4}\); ran all 12 epochs; ", r.output,
                     re.M), r.output
    assert "(best 0." not in r.output  # the old line called an accuracy 'best' at the epoch of the lowest loss
    job = tmp_path / "job.yaml"
    from grb_dist.sweep.job import default_job_path

    shipped = default_job_path("csbm").read_text()
    assert "  epochs: 200\n  patience: 50\n" in shipped
    job.write_text(shipped.replace("  epochs: 200\n  patience: 50\n", "  epochs: 300\n  patience: 3\n"))
    r = runner.invoke(app, ["train", "--hidden", "8", "--job", str(job)])
    assert r.exit_code == 0, r.output
    found = re.search(r"^best val loss \d\.\d{4} at epoch (\d+) \(val acc \d\.\d{4}\); stopped early at epoch (\d+) "
                      r"of 300: val loss did not improve for 3 epochs \(patience\); ", r.output, re.M)
    assert found and int(found[2]) == int(found[1]) + 3, r.output
