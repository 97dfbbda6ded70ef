"""The benchmark suite stays findable: bench/README.md indexes every script, and the scripts
find data and measure through the one shared module (bench/common.py) rather than their own
copies of it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def scripts() -> list[Path]:
    return sorted(p for p in BENCH.rglob("*") if p.suffix in (".py", ".sh") and p.name != "common.py")


def test_readme_indexes_every_script():
    readme = (BENCH / "README.md").read_text()
    indexed = set(re.findall(r"^\| `([^`]+)` \|", readme, re.M))
    missing = [str(p.relative_to(BENCH)) for p in scripts() if str(p.relative_to(BENCH)) not in indexed]
    assert not missing, f"bench/README.md does not index {missing}"
    gone = [name for name in indexed if "/" in name or name.endswith((".py", ".sh"))
            if not (BENCH / name).exists()]
    assert not gone, f"bench/README.md indexes scripts that do not exist: {gone}"


def test_scripts_use_the_shared_helpers():
    """No script hard-codes where the data is, or reads its peak memory or its clock itself."""
    own = {
        "a data folder": re.compile(r"""["']shared["']\s*/\s*["']datasets["']"""),
        "peak memory": re.compile(r"ru_maxrss\s*/"),
        "a timer": re.compile(r"^def (timed|median_seconds|interleaved|run_child|data_folders)\(", re.M),
    }
    found = [f"{p.relative_to(BENCH)}: {what}" for p in scripts() if p.suffix == ".py"
             for what, pattern in own.items() if pattern.search(p.read_text())]
    assert not found, f"use bench/common.py instead: {found}"
