import subprocess
import sys

from typer.testing import CliRunner

from grb_dist.cli import app

from helpers import CORA_LEGACY

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


def test_train_prints_difficulties():
    r = runner.invoke(app, ["train", "--dataset", str(CORA_LEGACY), "--model", "gcn", "--epochs", "60"])
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
