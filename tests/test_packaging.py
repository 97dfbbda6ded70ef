"""The packaged CLI works outside the checkout: a wheel built from this tree, installed into
a fresh virtual environment, runs ``grb-dist`` from a temporary directory.

The fresh environment gets the wheel's ``grb_dist`` (and its ``grb-dist`` script) in its own
site-packages; the dependencies (torch, Ray, ...) come from the test interpreter's
site-packages through a ``.pth`` line added after the install, so nothing is downloaded and
the checkout (and its editable install, whose ``.pth`` files are not processed there) is
never importable. The tests check that ``grb_dist`` is loaded from the wheel.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Build inputs only: no virtual environments, results, caches or earlier builds.
IGNORE = shutil.ignore_patterns(".venv", ".git", "build", "dist", "results", "__pycache__", "*.egg-info",
                                ".pytest_cache", "tests", "bench", "docs", "*.pyc")


class Installed:
    """A fresh virtual environment holding the wheel, and a working directory outside the checkout."""

    def __init__(self, venv: Path, cwd: Path):
        self.venv, self.cwd = venv, cwd
        self.python = venv / "bin" / "python"
        self.script = venv / "bin" / "grb-dist"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "GRB_DIST_JOBS", "RAY_ADDRESS", "VIRTUAL_ENV", "PYTHONHOME")}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["GRB_DIST_DATA"] = str(self.cwd / "cache")  # never the user's cache
        return env

    def run(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.script), *args], cwd=self.cwd, env=self.env(), capture_output=True,
                              text=True, timeout=timeout)


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert out.returncode == 0, (cmd, out.stdout[-2000:], out.stderr[-2000:])
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    pytest.importorskip("setuptools", reason="building the wheel needs setuptools (pip install -e .[test])")
    base = tmp_path_factory.mktemp("packaging")
    src, wheels, venv, cwd = base / "src", base / "wheels", base / "venv", base / "work"
    # build from a copy: the build writes build/ and *.egg-info, never into the checkout
    shutil.copytree(ROOT, src, ignore=IGNORE, symlinks=True)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
          "-w", str(wheels), str(src)])
    (wheel,) = wheels.glob("grb_dist-*.whl")
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    fresh = Installed(venv, cwd)
    # install before the dependencies become visible, so pip sees (and touches) nothing else
    _run([sys.executable, "-m", "pip", "--python", str(fresh.python), "install", "--no-deps", "--no-index", "-q",
          "--disable-pip-version-check", str(wheel)])
    site = _run([str(fresh.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    (Path(site) / "_grb_dist_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    cwd.mkdir()
    return fresh


def test_wheel_ships_the_jobs_and_installs_apart_from_the_checkout(installed):
    probe = ("import grb_dist, sys; from grb_dist.sweep.job import jobs_dir; "
             "print(grb_dist.__file__); print(jobs_dir()); print(sorted(p.name for p in jobs_dir().glob('*.yaml')))")
    out = subprocess.run([str(installed.python), "-c", probe], cwd=installed.cwd, env=installed.env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    module, jobs, names = out.stdout.strip().splitlines()
    assert Path(module).is_relative_to(installed.venv) and not Path(module).is_relative_to(ROOT), module
    assert Path(jobs).is_relative_to(installed.venv), jobs
    assert ast.literal_eval(names) == sorted(p.name for p in (ROOT / "grb_dist" / "jobs").glob("*.yaml"))


def test_installed_cli_runs_from_another_directory(installed):
    import grb_dist

    r = installed.run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"grb-dist {grb_dist.__version__}", (r.stdout, r.stderr)
    meta = subprocess.run([str(installed.python), "-c", "import importlib.metadata as m; print(m.version('grb-dist'))"],
                          cwd=installed.cwd, env=installed.env(), capture_output=True, text=True, timeout=60)
    assert meta.stdout.strip() == grb_dist.__version__, (meta.stdout, meta.stderr)
    r = installed.run("datasets")
    assert r.returncode == 0 and "csbm-grb-aminer" in r.stdout, (r.stdout, r.stderr)
    r = installed.run("train", "-h")
    assert r.returncode == 0 and "--split-seed" in r.stdout, (r.stdout, r.stderr)
    r = installed.run("train", "--epochs", "2", "-v")  # the shipped csbm job, found in the wheel
    assert r.returncode == 0 and "full" in r.stdout, (r.stdout, r.stderr)
    assert not list(installed.cwd.glob("results")), "train writes nothing"


def test_installed_cli_runs_a_tiny_sweep(installed):
    out = installed.cwd / "tiny"
    r = installed.run("sweep", "--attacks", "rnd", "--defenses", "gcn", "--surrogates", "gcn", "--difficulties", "easy",
                      "--repeats", "1", "--steps", "1", "--n-inject", "5", "--edges-per-node", "3", "--num-cpus", "1",
                      "--threads", "1", "--no-dashboard", "-o", str(out))
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert "2/2 cells (2 computed" in r.stdout, r.stdout
    assert (out / "manifest.json").is_file()
