"""The shape of the package (docs/architecture.md), measured from its source.

``lint-imports`` (run by ``.ci/run``, configured in pyproject.toml) checks that imports point
down the floors; these tests check what it cannot: no circle among modules at all (also
within a floor, imports inside functions included), Ray in exactly one module, no module
over 600 lines, and package ``__init__`` files that stay light.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "grb_dist"
MAX_LINES = 600


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def _imports(module: str, path: Path, is_pkg: bool, modules: dict) -> tuple[set[str], set[str]]:
    """(grb_dist modules, top-level external packages) that ``module`` imports anywhere."""
    tree = ast.parse(path.read_text())
    skip = _type_checking_nodes(tree)
    internal, external = set(), set()
    for node in ast.walk(tree):
        if id(node) in skip or not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            if node.level:
                base = module.split(".")[: None if is_pkg else -1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            # ``from pkg import sub`` runs ``pkg/__init__`` too: count the package as well
            targets = [source] + [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in modules]
        for target in targets:
            if target.split(".")[0] != "grb_dist":
                external.add(target.split(".")[0])
                continue
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != module:
                internal.add(target)
    return internal, external


@pytest.fixture(scope="module")
def graph():
    modules = _modules()
    return modules, {m: _imports(m, p, pkg, modules) for m, (p, pkg) in modules.items()}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_no_import_circle(graph):
    _, imports = graph
    assert _cycles({m: internal for m, (internal, _) in imports.items()}) == []


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_ray_is_imported_by_one_module(graph):
    _, imports = graph
    assert sorted(m for m, (_, external) in imports.items() if "ray" in external) == ["grb_dist.cluster.ray_edge"]


def test_no_module_is_over_600_lines(graph):
    modules, _ = graph
    long = {m: n for m, (p, _) in modules.items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_core_imports_nothing_above_it(graph):
    _, imports = graph
    for module, (internal, external) in imports.items():
        if module.startswith("grb_dist.core"):
            assert all(t.startswith("grb_dist.core") for t in internal), (module, internal)
            assert not external & {"torch", "torch_geometric", "ray", "pandas", "pyarrow"}, (module, external)


@pytest.mark.parametrize("module", ["grb_dist", "grb_dist.core.registry", "grb_dist.leaderboard",
                                    "grb_dist.store", "grb_dist.report", "grb_dist.cluster.settings",
                                    "grb_dist.datasets.catalog", "grb_dist.cli"])
def test_light_modules_load_no_torch_or_ray(module):
    code = (f"import sys, {module}; heavy = [m for m in ('torch', 'torch_geometric', 'ray') if m in sys.modules]; "
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "", f"{module} loads {out.stdout.strip()}"


def _where_things_are() -> list[str]:
    """Every path the 'Where things are' table of docs/architecture.md names: a backticked
    token with a '/' (relative to the package, or to the repository for ``bench/``), or a
    file name that follows one in the same cell (``datasets/catalog.py``, ``grb.py``)."""
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    section = text.split("## Where things are", 1)[1].split("\n## ", 1)[0]
    paths = []
    for row in section.splitlines():
        if not row.startswith("| ") or row.startswith("| looking for"):
            continue
        for cell in row.split(" | ")[1:]:
            folder = None
            for token in re.findall(r"`([^`]+)`", cell):
                if "<" in token or " " in token or "(" in token:
                    continue
                if "/" in token:
                    paths.append(token)
                    folder = token.rsplit("/", 1)[0] if token.endswith(".py") else token.rstrip("/")
                elif token.endswith(".py") and folder:
                    paths.append(f"{folder}/{token}")
    return paths


def test_the_where_things_are_table_matches_the_tree():
    paths = _where_things_are()
    assert len(paths) > 30, "the table of docs/architecture.md was not found or is nearly empty"
    missing = [p for p in paths if not ((PACKAGE.parent if p.startswith("bench/") else PACKAGE) / p).exists()]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"
