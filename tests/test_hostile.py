"""Hostile input, one regression test per class: names that would run code, usage mistakes,
path values, numbers out of range, devices, model sizes that explode within per-number
bounds, and model outputs that would score as a plausible accuracy. Every refusal is one
``error:`` line with exit code 2 and nothing written."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from grb_dist.cli import app
from grb_dist.core.checks import load_job_document, named_specs
from grb_dist.core.errors import ConfigError
from grb_dist.models.tensors import check_device, check_logits
from grb_dist.sweep.job import jobs_dir
from grb_dist.sweep.preflight import GraphShape, ModelSize, estimate_memory, model_size

from helpers import tiny_csbm

runner = CliRunner()


def error_line(result, *words: str) -> str:
    """The one ``error:`` line of a refused command (exit code 2)."""
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert lines and lines[0].startswith("error:"), result.output
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def job_with(tmp_path: Path, **changes) -> Path:
    job = yaml.safe_load((jobs_dir() / "csbm.yaml").read_text())
    job.update(changes)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


# ---------------------------------------------------------------- no code runs from names


def test_specs_in_a_job_file_need_allow_import(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    job = job_with(tmp_path, defenses=["gcn", "os:system"], models={"gcn": {}, "mypkg.models:MyGCN": {}})
    assert sorted(spec for _, spec in named_specs(yaml.safe_load(job.read_text()))) == [
        "mypkg.models:MyGCN", "os:system"]
    for command in (["sweep", "--job", str(job)], ["train", "--job", str(job)]):
        line = error_line(runner.invoke(app, command), "--allow-import", "runs its code")
        assert "os:system" in line or "mypkg.models:MyGCN" in line
    # with consent the specs are read, and still only a class may be named: a function is refused
    error_line(runner.invoke(app, ["sweep", "--job", str(job), "--allow-import", "--out", "run"]), "mypkg")
    job = job_with(tmp_path, defenses=["gcn", "os:system"])
    error_line(runner.invoke(app, ["sweep", "--job", str(job), "--allow-import", "--out", "run"]), "not a class")
    # names typed on the command line need no consent, and follow the same rule
    error_line(runner.invoke(app, ["sweep", "--defenses", "builtins:print", "--out", "run"]), "not a class")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml"]
    load_job_document(job, allow_import=True)  # the document itself is fine
    with pytest.raises(ConfigError, match="--allow-import"):
        load_job_document(job)


def test_cuda_device_strings_are_not_specs(tmp_path):
    (tmp_path / "j.yaml").write_text("device: cuda:0\naddress: ray://host:10001\n")
    assert list(named_specs(load_job_document(tmp_path / "j.yaml"))) == []


# ---------------------------------------------------------------- usage mistakes: one line


@pytest.mark.parametrize("args, words", [
    (["sweep", "--bogus"], ["No such option: --bogus"]),
    (["train", "--epochs", "abc"], ["'--epochs'"]),
    (["leaderboard"], ["Missing argument"]),
    (["report", "a", "b"], ["unexpected extra argument"]),
    (["study", "--seed", "x"], ["'--seed'"]),
])
def test_usage_mistakes_are_one_error_line_and_a_hint(args, words):
    result = runner.invoke(app, args, prog_name="grb-dist")
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 2, result.output
    assert lines[0].startswith("error:") and all(w in lines[0] for w in words), lines[0]
    assert lines[1].startswith("try 'grb-dist") and lines[1].endswith("--help'"), lines[1]
    assert "╭" not in result.output  # no boxed panel


def test_help_and_version_are_unchanged():
    assert runner.invoke(app, ["train", "--help"]).exit_code == 0
    assert runner.invoke(app, ["--version"]).output.startswith("grb-dist ")
    assert runner.invoke(app, []).exit_code == 2  # no command: the help, as before


# ---------------------------------------------------------------- path values


@pytest.mark.parametrize("args, words", [
    (["sweep", "--out", ""], ["--out", "non-empty path"]),
    (["sweep", "--out", "x" * 300], ["--out", "300 bytes", "at most 255"]),
    (["leaderboard", ""], ["run_dir", "non-empty path"]),
    (["report", "run", "--output", ""], ["--output", "non-empty path"]),
    (["study", "--out", ""], ["--out", "non-empty path"]),
    (["train", "--job", "a/" * 2100], ["--job", "at most 4,095"]),
])
def test_path_values_are_checked_before_anything_runs(args, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    error_line(runner.invoke(app, args), *words)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- numbers, devices, budgets


@pytest.mark.parametrize("args, words", [
    (["--lr", "inf"], ["train.lr", "finite"]),
    (["--lr", "nan"], ["train.lr", "finite"]),
    (["--lr", "1e9"], ["train.lr", "at most 10"]),
    (["--epochs", "10000000"], ["train.epochs"]),
    (["--hidden", ""], ["--hidden", "comma-separated integers"]),
    (["--hidden", "0"], ["hidden_sizes must be positive"]),
    (["--device", "meta"], ["--device meta"]),
    (["--device", "cuda:99"], ["cuda:99"]),
    (["--device", "bogus"], ["not a torch device"]),
])
def test_train_options_out_of_range_are_refused(args, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    error_line(runner.invoke(app, ["train", *args]), *words)


def test_devices():
    assert check_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA GPU"):
            check_device("cuda")


def test_adversarial_training_budget_is_checked_by_train(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    job = yaml.safe_load((jobs_dir() / "csbm.yaml").read_text())
    job["adversarial_training"]["n_inject"] = 50_000
    (tmp_path / "at.yaml").write_text(yaml.safe_dump(job))
    error_line(runner.invoke(app, ["train", "--job", "at.yaml", "--model", "gcn_at"]), "exceeds", "training nodes")


# ---------------------------------------------------------------- model sizes


def test_model_sizes_grow_with_their_own_knobs():
    assert model_size("gcn", {"hidden_sizes": [64, 64]}) == ModelSize((64, 64))
    assert model_size("gat", {"hidden_sizes": [16], "heads": 8}).widths == (128,)
    assert model_size("tagcn", {"hidden_sizes": [32], "k": 7}).copies == 8
    assert model_size("appnp", {"hidden_sizes": [64], "k": 10}, num_classes=7).per_node == 140
    shape = GraphShape(num_nodes=100_000, num_edges=500_000, num_features=100, num_classes=10, n_train=60_000,
                       n_val=10_000, targets={"full": 30_000})

    def training(size):
        return next(t for t in estimate_memory(shape, [("m", size, None)], []) if t.task.startswith("training"))

    base = training(model_size("tagcn", {"hidden_sizes": [64], "k": 2}))
    huge = training(model_size("tagcn", {"hidden_sizes": [64], "k": 10_000}))
    assert huge.bytes > 1000 * base.bytes / 2 and "hops" in huge.hint
    # per-number bounds pass, the product does not: refused before training
    wide = model_size("gcn", {"hidden_sizes": [16_384] * 16})
    assert training(wide).bytes > 16 * 16_384 ** 2 * 4 * 4


def test_train_refuses_a_model_that_does_not_fit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    hidden = ",".join(["16384"] * 16)
    error_line(runner.invoke(app, ["train", "--hidden", hidden]), "needs at least", "hidden sizes")


# ---------------------------------------------------------------- model outputs


@pytest.mark.parametrize("out, words", [
    (torch.zeros(5, 3), None),
    (torch.zeros(5, 4), "expected (5, 3)"),
    (torch.zeros(4, 3), "expected (5, 3)"),
    (torch.full((5, 3), math.nan), "NaN or infinite"),
    (torch.zeros(5, 3, dtype=torch.long), "floating-point"),
    ((torch.zeros(5, 3),), "not a tensor"),
])
def test_model_outputs_are_checked(out, words):
    if words is None:
        check_logits(out, 5, 3)
        return
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        check_logits(out, 5, 3)


def test_nan_and_too_wide_models_fail_training_and_scoring_in_one_line():
    from grb_dist.evaluation.evaluate import evaluate
    from grb_dist.models.train import TrainConfig, train_model

    g = tiny_csbm(n=120)

    class Wide(torch.nn.Module):
        def __init__(self, extra: int, nan: bool = False):
            super().__init__()
            self.lin, self.nan = torch.nn.Linear(g.num_features, g.num_classes + extra), nan

        def forward(self, x, edge_index):
            out = self.lin(x)
            return out * math.nan if self.nan else out

    for model, words in ((Wide(2), "expected"), (Wide(0, nan=True), "NaN")):
        with pytest.raises(ConfigError, match=words):
            train_model(model, g, TrainConfig(epochs=2))
        with pytest.raises(ConfigError, match=words):
            evaluate(model, g)
    assert set(evaluate(Wide(0), g)) == {"easy", "medium", "hard", "full"}
