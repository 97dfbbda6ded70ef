from typer.testing import CliRunner

from grb_dist.cli import app

from helpers import CORA_LEGACY

runner = CliRunner()


def test_datasets_lists_catalogue():
    r = runner.invoke(app, ["datasets"])
    assert r.exit_code == 0, r.output
    for name in ("csbm", "grb-aminer", "csbm-grb-aminer", "659,574"):
        assert name in r.output


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
