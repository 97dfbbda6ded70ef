"""Bad input through the CLI: one ``error:`` line, exit code 2, nothing written, and Ray never
started. Read-only places are made with ``chmod``; when the tests run as root (whom ``chmod``
does not stop), the command runs in a forked child that drops to the ``nobody`` user."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import grb_dist.cluster.ray_edge
import grb_dist.sweep.session  # noqa: F401 - imported before any fork (see invoke_unprivileged)
from grb_dist.cli import app
from grb_dist.core.errors import ConfigError
from grb_dist.sweep.job import jobs_dir

runner = CliRunner()
NOBODY = 65534


def tree(path: Path) -> dict[str, int]:
    """Every path under ``path`` with its modification time (ns)."""
    return {str(p.relative_to(path)): p.stat().st_mtime_ns for p in sorted(path.rglob("*"))}


def one_error_line(result, word: str) -> str:
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    assert word in lines[0], lines[0]
    return lines[0]


class Result:
    def __init__(self, exit_code: int, output: str):
        self.exit_code, self.output, self.exception = exit_code, output, None


def invoke_unprivileged(args: list[str]) -> Result:
    """Run the CLI as a user that file permissions apply to (see the module docstring)."""
    if os.geteuid() != 0:
        r = runner.invoke(app, args)
        return Result(r.exit_code, r.output)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop root, run, report, exit without running any cleanup
        code, out = 99, ""
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            r = runner.invoke(app, args)
            code, out = r.exit_code, r.output
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            out = f"child failed: {exc!r}"
        finally:
            with os.fdopen(write, "w") as fh:
                fh.write(json.dumps([code, out]))
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    code, out = json.loads(data)
    return Result(code, out)


@pytest.fixture
def workdir(monkeypatch):
    """A working directory every user can enter (pytest's tmp_path is private to root)."""
    d = Path(tempfile.mkdtemp(prefix="grb-input-"))
    d.chmod(0o755)
    monkeypatch.chdir(d)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    job = (jobs_dir() / "csbm.yaml").read_text()
    (d / "job.yaml").write_text(job)
    (d / "fast.yaml").write_text(job.replace("epochs: 200", "epochs: 20"))
    (d / "epochs.yaml").write_text(job.replace("epochs: 200", "epochs: -5"))
    (d / "lr.yaml").write_text(job.replace("lr: 0.01", "lr: -1", 1))
    (d / "unused.yaml").write_text(job.replace("adversarial_training:", "adversarial_training:\n  stepz: 3", 1))
    (d / "laughs.yaml").write_text(
        "dataset: csbm\nattacks: {rnd: {}}\nadversarial_training:\n"
        "  a: &a [xxxxxxxx, xxxxxxxx, xxxxxxxx, xxxxxxxx, xxxxxxxx, xxxxxxxx, xxxxxxxx, xxxxxxxx]\n"
        + "".join(f"  {k}: &{k} [{', '.join([f'*{p}'] * 10)}]\n" for p, k in zip("abcde", "bcdef")))
    (d / "a-file").write_text("not a directory\n")
    yield d
    for p in [d, *d.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
    shutil.rmtree(d)


@pytest.fixture
def no_ray(monkeypatch):
    """Fail loudly if a command tries to start or join Ray."""
    def refuse(*args, **kwargs):
        raise AssertionError("Ray was started although the input is bad")

    monkeypatch.setattr(grb_dist.cluster.ray_edge, "connect", refuse)


SMALL = ["--attacks", "rnd", "--defenses", "gcn,mlp", "--difficulties", "full", "--repeats", "1",
         "--n-inject", "5", "--edges-per-node", "3"]

BAD = [
    (["--job", "epochs.yaml"], "train.epochs"),
    (["--job", "lr.yaml"], "train.lr"),
    (["--job", "unused.yaml"], "stepz"),
    (["--job", "laughs.yaml"], "expands"),
    (["--seed", str(2**64)], "seed"),
    (["--seed", str(2**63 - 1)], "seed"),
    (["--n-inject", "1000000000"], "n_inject"),
    (["--n-inject", str(10**30)], "n_inject"),
    (["--n-inject", "5000"], "exceeds the 2,000 nodes"),
    (["--steps", str(10**9)], "steps"),
    (["--repeats", str(10**7)], "repeats"),
    (["--dataset", ".."], "does not end in a name"),
    (["--dataset", "../cluster"], "no dataset at ../cluster"),
    (["--address", "host:notaport"], "host:port"),
    (["--out", "a-file/run"], "not a directory"),
]


@pytest.mark.parametrize("args, word", BAD, ids=[" ".join(a)[:40] for a, _ in BAD])
def test_sweep_bad_input_before_ray_and_before_the_run_directory(workdir, no_ray, args, word):
    before = tree(workdir)
    out = [] if "--out" in args else ["--out", "run"]
    # a --dataset given as such picks its job the way users do (grb_dist/jobs/<name>.yaml or the default job)
    job = [] if "--job" in args or "--dataset" in args else ["--job", "job.yaml"]
    dataset = []
    r = runner.invoke(app, ["sweep", *job, *dataset, *SMALL, *args, *out])
    one_error_line(r, word)
    assert tree(workdir) == before


def test_largest_task_must_fit_the_machine(workdir, no_ray, monkeypatch):
    monkeypatch.setattr("grb_dist.sweep.preflight.machine_memory", lambda: 1 << 20)  # a 1 MiB machine
    before = tree(workdir)
    r = runner.invoke(app, ["sweep", "--job", "job.yaml", *SMALL, "--out", "run"])
    line = one_error_line(r, "needs at least")
    assert "this machine has 1.0 MiB" in line
    assert tree(workdir) == before


def test_train_bad_values(workdir):
    for args, word in ((["--seed", str(2**64)], "--seed"), (["--hidden", "100000"], "hidden size"),
                       (["--dataset", ".."], "does not end in a name"), (["--epochs", "0"], "epochs")):
        r = runner.invoke(app, ["train", "--model", "gcn", *args])
        one_error_line(r, word)


def test_read_only_out_is_an_error_not_a_traceback(workdir, no_ray):
    ro = workdir / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    before = tree(workdir)
    r = invoke_unprivileged(["sweep", "--job", "job.yaml", *SMALL, "--out", "ro/run"])
    one_error_line(r, "not writable")
    assert tree(workdir) == before


def test_run_directory_errors(workdir, monkeypatch):
    """One real tiny sweep, then: leaderboard --output into a missing directory, onto a
    directory, into a read-only directory; leaderboard of a read-only run; a resumed sweep
    with a tampered or foreign state_dict."""
    # the sweep starts (and stops) its own local Ray with address="local", never a stray cluster
    args = ["sweep", "--job", "fast.yaml", *SMALL, "--steps", "2", "--num-cpus", "1", "--no-dashboard", "--out", "run"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    run = workdir / "run"
    r = runner.invoke(app, ["leaderboard", "run"])  # as root first: every module the command needs is imported
    assert r.exit_code == 0, r.output

    before = tree(workdir)
    one_error_line(runner.invoke(app, ["leaderboard", "run", "--output", "missing/board.md"]), "does not exist")
    one_error_line(runner.invoke(app, ["leaderboard", "run", "--output", "run"]), "is a directory")
    ro = workdir / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    before = tree(workdir)
    one_error_line(invoke_unprivileged(["leaderboard", "run", "--output", "ro/board.md"]), "not writable")
    assert tree(workdir) == before

    # a read-only run is read as any other (leaderboard never writes into a run), not a traceback
    for p in [run, *run.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    before = tree(workdir)
    r = invoke_unprivileged(["leaderboard", "run"])
    assert r.exit_code == 0, r.output
    assert "rnd" in r.output and "Traceback" not in r.output
    assert tree(workdir) == before
    for p in [run, *run.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)

    # a tampered state_dict: one line before Ray starts, whatever the unpickler raises
    monkeypatch.setattr(grb_dist.cluster.ray_edge, "connect", lambda *a, **k: pytest.fail("Ray started"))
    model = next((run / "models").glob("gcn-*.pt"))
    good = model.read_bytes()
    grow = [*args[:-2], "--repeats", "2", "--out", "run"]  # a grown run reuses the stored models
    for tampered, word in ((b"\x80\x04garbage", "damaged"), (good[: len(good) // 2], "damaged"),
                           (b"", "damaged")):
        model.write_bytes(tampered)
        before = tree(workdir)
        one_error_line(runner.invoke(app, grow), word)
        assert tree(workdir) == before
    torch.save({"weight": torch.ones(3)}, model)
    one_error_line(runner.invoke(app, grow), "does not fit")
    model.write_bytes(good)


def test_train_memory_checked_before_training(workdir, monkeypatch):
    monkeypatch.setattr("grb_dist.sweep.preflight.machine_memory", lambda: 1 << 20)
    one_error_line(runner.invoke(app, ["train", "--model", "gcn", "--epochs", "1"]), "needs at least")


def test_cluster_memory_checked_once_joined(workdir, monkeypatch):
    import ray

    from grb_dist.cluster.settings import RaySettings
    from grb_dist.core.errors import ConfigError
    from grb_dist.sweep.placement import check_placement
    from grb_dist.sweep.session import pending_work, prepare, resolve_job
    from grb_dist.sweep.sizing import Sizes

    spec = resolve_job("csbm", None, {"attacks": "rnd", "defenses": "gcn", "difficulties": "full", "repeats": 1,
                                      "n_inject": 5, "edges_per_node": 3})
    prepared = prepare(spec, out=workdir / "run")
    work = pending_work(prepared)
    sizes = Sizes(prepared.cells, prepared.graph)
    small_node = {"Alive": True, "Resources": {"CPU": 2, "memory": 1 << 20, "object_store_memory": 1 << 17}}
    dead_big_node = {"Alive": False, "Resources": {"CPU": 2, "memory": 1 << 40}}
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 4, "memory": (1 << 40) + (1 << 20)})
    monkeypatch.setattr(ray, "nodes", lambda: [small_node, dead_big_node])
    with pytest.raises(ConfigError, match="largest node has 1.0 MiB"):
        check_placement(sizes, work, work.scored_defenses, RaySettings())
    monkeypatch.setattr(ray, "nodes", lambda: [small_node, {**dead_big_node, "Alive": True}])
    check_placement(sizes, work, work.scored_defenses, RaySettings())
    assert not (workdir / "run").exists()


# ------------------------------------------------------------------- one reading of a dataset name


def test_a_name_that_is_both_a_catalogue_dataset_and_a_folder_here_is_refused(tmp_path, monkeypatch):
    """``--dataset grb-cora`` from a directory holding a ``grb-cora/`` folder could mean
    either: every command refuses it in one line that says how to name each, before anything
    is written; ``./grb-cora`` is the folder, and from elsewhere the name is the catalogue's."""
    from grb_dist.datasets import dataset_ref, load_dataset
    from grb_dist.sweep.job import dataset_job

    monkeypatch.chdir(tmp_path)
    (tmp_path / "grb-cora").mkdir()
    before = tree(tmp_path)
    for command in (["sweep", "--dataset", "grb-cora", "--out", "run"], ["plan", "--dataset", "grb-cora"],
                    ["train", "--dataset", "grb-cora", "--model", "gcn"]):
        line = one_error_line(runner.invoke(app, command), "./grb-cora")
        assert "catalogue" in line, line
    assert tree(tmp_path) == before
    with pytest.raises(ConfigError, match="write ./grb-cora for the folder"):
        load_dataset("grb-cora")
    assert dataset_ref("./grb-cora").path == Path("grb-cora") and dataset_job("./grb-cora").note is None
    assert dataset_ref("grb-cora.npz").is_path and dataset_ref("mine").catalogue is None  # neither: a name
    monkeypatch.chdir(tmp_path / "grb-cora")
    assert dataset_ref("grb-cora").catalogue == "grb-cora" and dataset_job("grb-cora").path.name == "grb-cora.yaml"
