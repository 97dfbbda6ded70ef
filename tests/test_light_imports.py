"""The read-only commands (``leaderboard``, ``report`` of a run, ``datasets``) and the help and
version screens never import torch, torch_geometric, Ray or the sweep: each is run by
``grb_dist.cli.main`` in a fresh interpreter, which then lists what it loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_leaderboard import make_run, synthetic_scores

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "torch_geometric", "ray", "grb_dist.sweep")
COMMANDS = ("datasets", "train", "sweep", "leaderboard", "report", "compact", "study", "study-tune", "study-plot")

# Runs ``grb-dist ARGV`` for every ARGV of the JSON list in argv[1], one after another, then
# prints (last line) the exit codes and the heavy modules in sys.modules.
CODE = """
import json, sys
from grb_dist.cli import main
argvs, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
codes = []
for argv in argvs:
    sys.argv = ["grb-dist", *argv]
    try:
        main()
        codes.append(0)
    except SystemExit as exc:
        codes.append(exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1))
loaded = sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy))
print(json.dumps({"codes": codes, "loaded": loaded}))
"""


def loaded_by(*argvs: list[str], cwd: Path = ROOT) -> tuple[list[int], list[str]]:
    """Exit codes of the commands ``argvs`` run in one fresh interpreter (this tree's
    grb_dist), and the modules of :data:`HEAVY` they loaded."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", CODE, json.dumps(list(argvs)), json.dumps(HEAVY)], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result["codes"], result["loaded"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("light") / "run"
    make_run(root, synthetic_scores(difficulties=("easy", "full")))
    return root


def test_leaderboard_of_a_run_is_light(run):
    codes, loaded = loaded_by(["leaderboard", str(run)], ["leaderboard", str(run), "--format", "csv", "--output",
                                                         str(run.parent / "boards")])
    assert codes == [0, 0] and loaded == []
    assert not list((run / "leaderboard").rglob("*"))  # read only: nothing written into the run
    assert len(list((run.parent / "boards").glob("*.csv"))) == 8


def test_report_of_a_run_is_light(run):
    codes, loaded = loaded_by(["report", str(run), "--output", str(run.parent / "report")])
    assert codes == [0] and loaded == []
    assert (run.parent / "report" / "index.html").is_file()


@pytest.mark.parametrize("argv", [["datasets"], ["--version"], ["--help"], ["-h"], []])
def test_listing_help_and_version_are_light(argv):
    codes, loaded = loaded_by(argv)
    assert codes == [2 if not argv else 0] and loaded == []  # no arguments: the help, exit code 2


def test_every_command_help_is_light():
    codes, loaded = loaded_by(*([c, "--help"] for c in COMMANDS))
    assert codes == [0] * len(COMMANDS) and loaded == []


def test_the_check_sees_a_heavy_command(run):
    """The check itself: ``train`` with a bad value fails after importing torch and the sweep
    (its job comes from grb_dist.sweep.job), and they are reported."""
    codes, loaded = loaded_by(["train", "--threads", "0"])
    assert codes == [2] and "torch" in loaded and "grb_dist.sweep" in loaded
