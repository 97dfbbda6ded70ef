"""The GPU suite's CPU fallback runs every stage on the built-in csbm graph, so the script
that measures the first GPU cannot rot while no GPU is at hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("env", "attacks", "prbcd", "meta", "precision", "sweep-default", "sweep-default-2cpu", "sweep-aminer",
          "sweep-poisoning", "main-plan", "main-job")


def test_the_cpu_fallback_runs_every_stage(tmp_path):
    out = tmp_path / "suite"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_suite.py"), "--out", str(out), "--tiny",
                           "--main-out", str(tmp_path / "main")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:]
    table = done.stdout[done.stdout.index("| stage | status |"):]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in table.splitlines() if line.startswith("| ") and "---" not in line}
    assert set(STAGES) <= set(rows)
    for stage in STAGES:
        status, _, figures = rows[stage]
        assert status == "ok", (stage, rows[stage])
        assert figures, f"{stage} reports no figure"
    assert "s/step" in rows["attacks"][2] and "fgsm" in rows["attacks"][2] and "tdgia" in rows["attacks"][2]
    assert "flips" in rows["prbcd"][2] and "bf16" in rows["precision"][2]
    assert "metattack cpu" in rows["meta"][2] and "meta_prbcd cpu" in rows["meta"][2]
    assert "0 failed" in rows["sweep-default"][2] and "0 failed" in rows["sweep-poisoning"][2]
    assert "0 failed" in rows["sweep-default-2cpu"][2]
    assert "predicted wall time" in rows["main-plan"][2]
    assert "cells stored" in rows["main-job"][2] and "score:" in rows["main-job"][2]
    assert "a task held at most" in rows["main-job"][2] and "GiB host" in rows["main-job"][2]
    assert all((out / f"{stage}.log").is_file() for stage in STAGES[1:])


def test_out_is_required():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_suite.py"), "--tiny"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert done.returncode == 2 and "--out is required" in done.stdout
