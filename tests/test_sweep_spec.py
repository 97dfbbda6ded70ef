"""Job spec parsing, overrides, validation and content-hashed cell ids (no Ray)."""

from __future__ import annotations

from pathlib import Path
import yaml

import pytest

from grb_dist.core.errors import ConfigError, GrbDistError
from grb_dist.core.names import CLEAN
from grb_dist.store import graph_fingerprint
from grb_dist.sweep.job import SECTION_KEYS, JobSpec, content_hash, default_job_path, jobs_dir, load_job, parse_job
from grb_dist.sweep.overrides import apply_overrides
from grb_dist.sweep.cells import run_cells
from grb_dist.sweep.resolve import resolve

from helpers import small, tiny_csbm

JOBS = sorted(jobs_dir().glob("*.yaml"))
#: A dataset fingerprint (run_cells() takes the loaded graph's; see grb_dist.store.graph_fingerprint).
FP = "f" * 64


@pytest.mark.parametrize("path", JOBS, ids=[p.name for p in JOBS])
def test_shipped_jobs_parse_and_plan(path):
    spec = load_job(path)
    p = run_cells(spec, FP)
    assert len(p.scores) == len(set(c.cell_id for c in p.scores))
    assert len(p.attacks) == len(spec.scenario_attacks("injection")) * len(spec.surrogates) * len(spec.difficulties) * spec.repeats


def test_default_job_paths():
    assert default_job_path(None).name == "csbm.yaml"
    assert default_job_path("grb-cora").name == "grb-cora.yaml"
    assert default_job_path("CSBM_GRB_Aminer").name == "csbm-grb-aminer.yaml"
    assert default_job_path(str(Path(__file__))).name == "csbm.yaml"  # a path uses the default job


@pytest.mark.parametrize("bad, word", [
    ({"datset": "x"}, "datset"),
    ({"train": {"epochs": 10, "lrr": 0.1}}, "lrr"),
    ({"repeats": 0}, "repeats"),
    ({"repeats": "two"}, "integer"),
    ({"difficulties": ["easy", "extreme"]}, "extreme"),
    ({"defenses": ["gcn", "GCN"]}, "twice"),
    ({"budgets": {"huge": {"n_inject": 3}}}, "huge"),
    ({"attacks": {}}, "attack"),
    ({"attacks": ["fgsm"]}, "mapping"),
    ({"scenario": "modification"}, "scenario"),
])
def test_unknown_or_malformed_keys_rejected(bad, word):
    with pytest.raises(ConfigError, match=word):
        parse_job(small(**bad))


def test_malformed_yaml(tmp_path):
    f = tmp_path / "job.yaml"
    f.write_text("dataset: csbm\nattacks: [fgsm\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_job(f)
    f.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_job(f)
    with pytest.raises(ConfigError, match="cannot read"):
        load_job(tmp_path / "missing.yaml")


def test_overrides():
    spec = parse_job(small())
    o = apply_overrides(spec, attacks="FGSM", defenses="gcn", difficulties="hard", repeats=3, seed=7,
                        n_inject=4, edges_per_node=2, steps=9)
    assert o.scenario_attacks("injection") == {"fgsm": {}} and o.defenses == ("gcn",) and o.difficulties == ("hard",)
    assert o.repeats == 3 and o.seed == 7
    assert o.attack_params("fgsm", "full", 1) == {**o.section("injection").attack, "n_inject": 4, "seed": 1}
    assert o.section("injection").attack["steps"] == 9 and o.section("injection").attack["edges_per_node"] == 2
    with pytest.raises(ConfigError):
        apply_overrides(spec, defenses=",")


def test_cell_ids_stable_and_distinct():
    a, b = run_cells(parse_job(small()), FP), run_cells(parse_job(small()), FP)
    assert [c.cell_id for c in a.scores] == [c.cell_id for c in b.scores]
    assert a.config_hash == b.config_hash
    ids = [c.cell_id for c in a.scores]
    assert len(ids) == len(set(ids))
    pids = [c.perturbation_id for c in a.attacks]
    assert len(pids) == len(set(pids))
    # 2 defenses x 2 difficulties clean + 1 attack x 1 surrogate x 2 difficulties x 2 repeats x 2 defenses
    assert len(a.scores) == 4 + 8
    clean = [c for c in a.scores if c.attack == CLEAN]
    assert {(c.defense, c.difficulty, c.repeat) for c in clean} == {(d, x, 0) for d in ("gcn", "mlp") for x in ("easy", "full")}
    # surrogates never share a seed (and so a file) with targets
    assert {t.file_stem for t in a.targets}.isdisjoint({s.file_stem for s in a.surrogates})


def test_ids_follow_the_configuration():
    base = run_cells(parse_job(small()), FP)
    more_steps = run_cells(parse_job(small(attack={"n_inject": 5, "edges_per_node": 3, "steps": 3})), FP)
    assert base.config_hash != more_steps.config_hash
    assert {c.cell_id for c in base.scores if c.attack != CLEAN}.isdisjoint(
        {c.cell_id for c in more_steps.scores if c.attack != CLEAN})
    # clean rows do not depend on the attack settings
    assert {c.cell_id for c in base.scores if c.attack == CLEAN} == {
        c.cell_id for c in more_steps.scores if c.attack == CLEAN}
    # narrowing the defenses keeps the ids of the remaining cells
    narrow = run_cells(apply_overrides(parse_job(small()), defenses="gcn"), FP)
    assert {c.cell_id for c in narrow.scores} < {c.cell_id for c in base.scores}
    assert content_hash({"a": 1, "b": [1, 2]}) == content_hash({"b": (1, 2), "a": 1})


def test_ids_follow_the_dataset_content_not_its_name():
    spec = parse_job(small())
    a, b = run_cells(spec, "a" * 64), run_cells(spec, "b" * 64)
    # the same job (same dataset name) on other content: every id differs
    assert {c.cell_id for c in a.scores}.isdisjoint({c.cell_id for c in b.scores})
    assert {t.model_id for t in a.models}.isdisjoint({t.model_id for t in b.models})
    assert {x.perturbation_id for x in a.attacks}.isdisjoint({x.perturbation_id for x in b.attacks})
    with pytest.raises(ConfigError, match="fingerprint"):
        run_cells(spec, None)  # type: ignore[arg-type]


@pytest.mark.parametrize("change, word", [
    ({"defenses": ["gcn", "nodefense"]}, "nodefense"),
    ({"surrogates": ["bogus"]}, "bogus"),
    ({"attacks": {"noattack": {}}}, "noattack"),
    ({"attacks": {"fgsm": {"stepz": 3}}}, "stepz"),
    ({"attack": {"n_inject": -1}}, "n_inject"),
    ({"normalize": "weird"}, "weird"),
])
def test_validate_rejects_bad_names_and_params(change, word):
    with pytest.raises(GrbDistError, match=word):
        resolve(parse_job(small(**change)))


def test_spec_roundtrip():
    spec = parse_job(small())
    assert isinstance(spec, JobSpec)
    assert parse_job(spec.to_dict()).config_hash == spec.config_hash


def test_a_job_file_with_injection_at_its_root_loads_with_a_note_and_the_same_ids(tmp_path):
    """Every scenario has its section now; a job file from before (injection's ``attack``,
    ``budgets`` and ``attacks`` at the top level) still loads, says in one note how to move
    them, and runs the very cells (the same job hash and ids) as the same job with sections."""
    old = small()
    new = {k: v for k, v in old.items() if k not in SECTION_KEYS}
    new["injection"] = {k: old[k] for k in SECTION_KEYS}
    notes: list[str] = []
    for name, doc in (("old.yaml", old), ("new.yaml", new)):
        (tmp_path / name).write_text(yaml.safe_dump(doc))
    was, now = (load_job(tmp_path / n, on_note=notes.append) for n in ("old.yaml", "new.yaml"))
    assert len(notes) == 1 and "old.yaml" in notes[0] and "under an injection: section" in notes[0]
    assert was == now and was.config_hash == now.config_hash
    graph = tiny_csbm(n=120)
    fp = graph_fingerprint(graph, was.normalize)
    assert [c.cell_id for c in run_cells(was, fp).scores] == [c.cell_id for c in run_cells(now, fp).scores]
    with pytest.raises(ConfigError, match="given twice"):
        parse_job({**new, "attacks": {"rnd": {}}})
    with pytest.raises(ConfigError, match="unknown key.*'evasion'.*valid keys are: .*injection"):
        parse_job({**new, "evasion": {}})
