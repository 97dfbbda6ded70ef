"""The cluster files next to ``cluster.yaml`` say what the code does: the KubeRay RayJob runs
a sweep into object storage, and the Grafana dashboard queries only the series and labels
that the sweep exports (:class:`grb_dist.cluster.ray_edge.SweepMetrics`)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def exported() -> dict[str, set[str]]:
    """``{series: tag keys}`` of the gauges SweepMetrics creates, read from its source."""
    tree = ast.parse((ROOT / "grb_dist" / "cluster" / "ray_edge.py").read_text())
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Gauge":
            keys = next(kw.value for kw in node.keywords if kw.arg == "tag_keys")
            found[f"ray_{node.args[0].value}"] = {k.value for k in keys.elts}
    return found


def test_the_rayjob_runs_a_sweep_into_object_storage():
    job = yaml.safe_load((ROOT / "rayjob.yaml").read_text())
    assert job["apiVersion"] == "ray.io/v1" and job["kind"] == "RayJob"
    entry = job["spec"]["entrypoint"].split()
    assert entry[:2] == ["grb-dist", "sweep"] and entry[entry.index("--out") + 1].startswith("s3://")
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]
    assert "metrics-export-port" in head["rayStartParams"]


def test_the_grafana_dashboard_queries_what_the_sweep_exports():
    series = exported()
    assert set(series) == {"ray_grb_dist_items", "ray_grb_dist_items_per_minute", "ray_grb_dist_score_rows",
                           "ray_grb_dist_attack_steps_per_second"}
    assert "scenario" in series["ray_grb_dist_items"]
    dash = json.loads((ROOT / "grafana-grb-dist.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert {name for expr in exprs for name in re.findall(r"ray_grb_dist_\w+", expr)} == set(series)  # each shown
    for expr in exprs:
        for name, labels in re.findall(r"(ray_grb_dist_\w+)\{([^}]*)\}", expr):
            assert name in series, expr
            assert {lab.split("=")[0].strip().rstrip("!~") for lab in labels.split(",")} <= series[name], expr
        for by in re.findall(r"by \(([^)]*)\)", expr):
            assert {b.strip() for b in by.split(",")} <= set.union(*series.values()), expr
