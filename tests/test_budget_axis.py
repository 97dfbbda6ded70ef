"""Budget lists (``--n-inject 20,40,60``, ``--ratio-edge-mod 0.01,0.05``) as a budget axis:
one attack entry ``<attack>@<value>`` per value, planned, ranked and drawn per budget (no Ray)."""

from __future__ import annotations

import pandas as pd
import pytest
from typer.testing import CliRunner

from grb_dist.attacks import attack_class, build_attack
from grb_dist.cli import app
from grb_dist.core.errors import ConfigError
from grb_dist.leaderboard.rank import attack_board
from grb_dist.report import build_report
from grb_dist.report.tables import budget_curves, has_budget_sweep
from grb_dist.sweep.job import parse_job
from grb_dist.sweep.overrides import MAX_BUDGETS, apply_overrides
from grb_dist.sweep.cells import run_cells, run_components
from grb_dist.sweep.resolve import resolve

from helpers import small
from test_leaderboard import synthetic_scores
from test_report import ENV, MANIFEST, NOW, dom
from test_sweep_cli import tree, workdir  # noqa: F401 (fixture)

FP = "f" * 64
runner = CliRunner()


def both_scenarios() -> dict:
    return small(scenario="all", modification={"attacks": {"dice": {}}})


def test_a_list_plans_one_attack_per_budget():
    spec = apply_overrides(parse_job(both_scenarios()), n_inject="20,40,60", ratio_edge_mod="0.01,0.05")
    resolve(spec)
    assert list(spec.scenario_attacks("injection")) == ["fgsm@20", "fgsm@40", "fgsm@60"]
    assert list(spec.scenario_attacks("modification")) == ["dice@0.01", "dice@0.05"]
    p = run_cells(spec, FP)
    per_attack = {}
    for cell in p.attacks:
        per_attack.setdefault((cell.scenario, cell.attack), []).append(cell)
    # every budget has the full set of cells of one attack: surrogates x difficulties x repeats
    want = len(spec.surrogates) * len(spec.difficulties) * spec.repeats
    assert {k: len(v) for k, v in per_attack.items()} == {
        ("injection", "fgsm@20"): want, ("injection", "fgsm@40"): want, ("injection", "fgsm@60"): want,
        ("modification", "dice@0.01"): want, ("modification", "dice@0.05"): want}
    # the budget replaces the job's (also the per-difficulty one: budgets.full.n_inject is 8)
    assert {c.params["n_inject"] for c in per_attack[("injection", "fgsm@40")]} == {40}
    assert {c.params["ratio_edge_mod"] for c in per_attack[("modification", "dice@0.05")]} == {0.05}
    assert len({c.perturbation_id for c in p.attacks}) == len(p.attacks)
    assert "fgsm@20/full" in run_components(p)["attacks"]
    # the names resolve to the base attack's class, with the budget applied
    assert attack_class("fgsm@20") is attack_class("fgsm")
    assert build_attack("fgsm@40", spec.attack_params("fgsm@40", "full", 1)).config.n_inject == 40
    assert attack_class("dice@0.05", "modification") is attack_class("dice", "modification")


def test_one_value_keeps_names_and_ids():
    spec = parse_job(small())
    as_int = run_cells(apply_overrides(spec, n_inject=20), FP)
    for one in ("20", " 20 ", (20,)):
        same = run_cells(apply_overrides(spec, n_inject=one), FP)
        assert [c.cell_id for c in same.scores] == [c.cell_id for c in as_int.scores]
        assert [c.perturbation_id for c in same.attacks] == [c.perturbation_id for c in as_int.attacks]
        assert {c.attack for c in same.attacks} == {"fgsm"}
    # and the ids of a plain job do not move either
    assert [c.cell_id for c in run_cells(apply_overrides(spec), FP).scores] == [c.cell_id for c in run_cells(spec, FP).scores]


def test_each_budget_is_ranked_on_its_own():
    scores = synthetic_scores(scenarios=("injection",), difficulties=("full",))
    scores = scores[scores["attack"] != "tdgia"]
    attacked = scores["attack"] == "fgsm"
    stronger = scores[attacked].assign(attack="fgsm@40", accuracy=scores.loc[attacked, "accuracy"] / 2)
    scores.loc[attacked, "attack"] = "fgsm@20"
    board = attack_board(pd.concat([scores, stronger], ignore_index=True), "full", "injection")
    assert list(board["attack"]) == ["fgsm@40", "fgsm@20"]  # one row per budget, never averaged together


@pytest.mark.parametrize("kwargs, word", [
    ({"n_inject": "20,0"}, "'0' is not a positive integer"),
    ({"n_inject": "20,-5"}, "positive integer"),
    ({"n_inject": "20,2.5"}, "'2.5' is not an integer"),
    ({"n_inject": "20,abc"}, "'abc'"),
    ({"n_inject": "20,,40"}, "comma-separated"),
    ({"n_inject": "20,40,20"}, "lists 20 twice"),
    ({"n_inject": ",".join(str(i) for i in range(1, MAX_BUDGETS + 2))}, f"at most {MAX_BUDGETS}"),
    ({"ratio_edge_mod": "0.05,0"}, "(0, 1]"),
    ({"ratio_edge_mod": "0.05,1.5"}, "(0, 1]"),
    ({"ratio_edge_mod": "0.05,nan"}, "(0, 1]"),
    ({"ratio_edge_mod": "0.05,x"}, "'x' is not a number"),
    ({"ratio_edge_mod": "0.05,0.050"}, "twice"),
])
def test_bad_lists_rejected(kwargs, word):
    with pytest.raises(ConfigError, match=word.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        apply_overrides(parse_job(both_scenarios()), **kwargs)


@pytest.mark.parametrize("args, word", [
    (["--n-inject", "20,0"], "--n-inject"),
    (["--n-inject", "20,20"], "twice"),
    (["--ratio-edge-mod", "0.01,2"], "--ratio-edge-mod"),
])
def test_sweep_bad_list_one_line_nothing_written(workdir, args, word):  # noqa: F811 (fixture)
    before = tree(workdir)
    r = runner.invoke(app, ["sweep", *args, "--out", "run"])
    lines = r.output.strip().splitlines()
    assert r.exit_code != 0 and len(lines) == 1 and lines[0].startswith("error:") and word in lines[0], r.output
    assert tree(workdir) == before


def budget_axis_scores():
    """Injection scores where fgsm ran as a budget axis (fgsm@20, fgsm@40), tdgia at one budget."""
    scores = synthetic_scores(scenarios=("injection",), difficulties=("easy", "full"))
    attacked = scores["attack"] == "fgsm"
    more = scores[attacked].assign(attack="fgsm@40", n_injected=40, accuracy=scores.loc[attacked, "accuracy"] / 2)
    scores.loc[attacked, "attack"] = "fgsm@20"
    scores.loc[attacked, "n_injected"] = 20
    return pd.concat([scores, more], ignore_index=True)


def test_budget_curve_groups_name_at_value_by_attack():
    scores = budget_axis_scores()
    assert has_budget_sweep(scores)
    curves = budget_curves(scores, "injection")
    assert list(curves) == ["easy", "full"]
    assert list(curves["full"].columns) == ["fgsm"] and list(curves["full"].index) == [20, 40]
    # the n_injected grouping still works alongside
    assert list(budget_curves(synthetic_scores(difficulties=("full",), budgets=(10, 20)), "injection")["full"].index) \
        == [10, 20]
    # modification shares: the value after @ is the x axis
    mod = synthetic_scores(scenarios=("modification",), difficulties=("full",))
    mod = mod[mod["attack"] != "fga"]
    dice = mod["attack"] == "dice"
    mod = pd.concat([mod, mod[dice].assign(attack="dice@0.1")], ignore_index=True)
    mod.loc[mod["attack"] == "dice", "attack"] = "dice@0.05"
    assert list(budget_curves(mod, "modification")["full"].index) == [0.05, 0.1]


def test_report_draws_the_budget_axis():
    rep = build_report(budget_axis_scores(), MANIFEST, env=ENV, generated_at=NOW)
    d = dom(rep.html)
    assert "budget" in d.ids and "fig-budget-injection" in d.ids
    assert rep.figures[-1].name == "budget-injection" and rep.figures[-1].png.startswith(b"\x89PNG")
    assert "fgsm@20" in rep.html and "fgsm@40" in rep.html  # leaderboard rows and heatmap columns per budget


def test_attacks_names_budget_entries_of_the_job():
    swept = apply_overrides(parse_job(small()), n_inject="20,40")
    assert list(apply_overrides(swept, attacks="fgsm@40").scenario_attacks("injection")) == ["fgsm@40"]
    with pytest.raises(ConfigError, match="budget list"):
        apply_overrides(parse_job(small()), attacks="fgsm@40")
