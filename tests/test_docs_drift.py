"""What the docs and ``--help`` say is what the code does: drift checks.

* every option of every command's ``--help`` is in docs/cli.md's option reference (generated
  from the commands by ``tools/docs.py options``) and every option docs/cli.md names exists;
* the column tables of docs/sweep.md name exactly the columns of the Arrow schemas
  (``grb_dist/store/schema.py``) and the keys of the manifest the store writes;
* every model and defense the registry knows is listed by ``train --help`` and in the
  tables of the README and docs/defenses.md;
* every sample output in the docs sits in a region that ``tools/docs.py sample NAME``
  regenerates, and names the machine it came from;
* every message the docs quote (``error: ...``, ``warning: ...``, ``note: ...``,
  ``interrupted: ...``, an unknown name's ``did you mean``) is one the code prints.
"""

from __future__ import annotations

import ast
import errno
import importlib.util
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def tool():
    """tools/docs.py as a module."""
    spec = importlib.util.spec_from_file_location("grb_dist_docs_tool", ROOT / "tools" / "docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def click_commands() -> dict:
    """``grb-dist``'s commands as click commands, by name, and the group itself under ``""``."""
    import typer.main

    from grb_dist.cli import app

    group = typer.main.get_command(app)
    return {"": group, **group.commands}


def options_of(command) -> set[str]:
    """Every option spelling of a click command (``--wait``, ``--no-wait``, ``-o`` ...)."""
    out: set[str] = set()
    for param in command.params:
        if param.param_type_name == "option":
            out.update(param.opts)
            out.update(param.secondary_opts)
    return out | {"-h", "--help"}


# ----------------------------------------------------------------------------- cli.md


def test_cli_md_option_reference_is_the_commands_own():
    """docs/cli.md's option reference is what tools/docs.py generates from the commands now:
    every option, its help text and its default (regenerate with python tools/docs.py options)."""
    docs = tool()
    text = (ROOT / "docs" / "cli.md").read_text()
    current = docs.options_section(text)
    assert current is not None, "docs/cli.md has no option reference (python tools/docs.py options writes it)"
    assert current == docs.option_reference(), "docs/cli.md's option reference is stale: python tools/docs.py options"


def test_every_option_of_every_command_is_in_cli_md():
    text = (ROOT / "docs" / "cli.md").read_text()
    missing = {name or "grb-dist": sorted(o for o in options_of(cmd) if o.startswith("--") and f"`{o}" not in text)
               for name, cmd in click_commands().items()}
    missing = {k: v for k, v in missing.items() if v}
    assert not missing, f"options of --help that docs/cli.md does not name: {missing}"


def test_every_option_cli_md_names_exists():
    """Nothing documented is missing from --help: each ``--flag`` docs/cli.md names is an
    option of some command (a documented flag that was renamed or removed fails here)."""
    known = set().union(*(options_of(c) for c in click_commands().values()))
    text = (ROOT / "docs" / "cli.md").read_text()
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))
    assert not sorted(named - known), f"docs/cli.md names options no command has: {sorted(named - known)}"


def test_every_command_has_its_place_in_cli_md():
    text = (ROOT / "docs" / "cli.md").read_text()
    for name in click_commands():
        if name:
            assert f"grb-dist {name}" in text, f"docs/cli.md never shows grb-dist {name}"


# ----------------------------------------------------------------------------- models


def builtin_models() -> list[str]:
    from grb_dist.models.registry import MODELS

    return sorted(n for n in MODELS.names() if MODELS.is_builtin(n))


def test_train_help_lists_every_model_the_registry_knows():
    help_text = next(p.help for p in click_commands()["train"].params if p.name == "model")
    listed = re.search(r"a base model \(([^)]*)\)", help_text)
    assert listed, help_text
    assert sorted(n.strip() for n in listed.group(1).split(",")) == builtin_models()


@pytest.mark.parametrize("doc", ["README.md", "docs/defenses.md"])
def test_the_model_tables_list_every_model_the_registry_knows(doc):
    tables = "\n".join(line for line in (ROOT / doc).read_text().splitlines() if line.startswith("|"))
    missing = [n for n in builtin_models() if f"`{n}`" not in tables]
    assert not missing, f"{doc}'s tables do not list {missing}"


# ----------------------------------------------------------------------------- sweep.md tables


def table_rows(text: str) -> dict[str, str]:
    """The rows of docs/sweep.md's run-table table: path -> its columns cell."""
    start = text.index("### The tables (`RUN_DIR`")
    rows = {}
    for line in text[start:].splitlines()[1:]:
        if line.startswith("### "):
            break
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows[cells[0]] = cells[2]
    return rows


def documented_columns(cell: str) -> list[str]:
    """The column names a columns cell lists: the leading backticked name of each item of the
    comma-separated list at the top level (text in parentheses describes, and is skipped);
    ``x_mean/std`` is ``x_mean`` and ``x_std``."""
    items, depth, cur = [], 0, ""
    for ch in cell:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    names = []
    for item in items:
        m = re.match(r"\s*`([a-z_][a-z0-9_]*(?:/std)?)`", item)
        assert m, f"a column item that does not start with a `name`: {item.strip()!r}"
        name = m.group(1)
        # x_mean/std: x_mean and x_std
        names += [name[:-len("/std")], name[:-len("_mean/std")] + "_std"] if name.endswith("_mean/std") else [name]
    return names


def manifest_keys(tmp_path) -> set[str]:
    from grb_dist.store import RunLock, RunStore

    lock = RunLock(tmp_path / "run").acquire()
    try:
        store = RunStore.open(tmp_path / "run", dataset={"label": "x", "fingerprint": "f"}, components={},
                              config={}, config_hash="h", lock=lock)
    finally:
        lock.release()
    return set(store.manifest())


def test_sweep_md_column_tables_are_the_schemas(tmp_path):
    from grb_dist.store import schema

    rows = table_rows((ROOT / "docs" / "sweep.md").read_text())
    tables = {
        "`scores/": schema.SCORES, "`perturbations/": schema.PERTURBATIONS, "`training/": schema.MODELS,
        "`leaderboard/<scenario>/attacks-": schema.ATTACK_BOARD, "`leaderboard/<scenario>/defenses-": schema.DEFENSE_BOARD,
        "`leaderboard/<scenario>/robustness-": schema.ROBUSTNESS_BOARD,
        "`leaderboard/<scenario>/transfer-": schema.TRANSFER_BOARD, "`timeline/": schema.TIMELINE,
        "`leaderboard/<scenario>/targets-": schema.TARGET_BOARD,
    }
    expected = {prefix: list(sch.names) for prefix, sch in tables.items()}
    expected["`manifest.json`"] = sorted(manifest_keys(tmp_path))
    for prefix, names in expected.items():
        found = [cell for path, cell in rows.items() if path.startswith(prefix)]
        assert len(found) == 1, f"docs/sweep.md has {len(found)} table rows for {prefix}"
        documented = documented_columns(found[0])
        assert sorted(documented) == sorted(names), (
            f"{prefix}: documented but not in the schema {sorted(set(documented) - set(names))}; "
            f"in the schema but not documented {sorted(set(names) - set(documented))}")


def test_the_roles_of_a_trained_model_are_documented():
    """training/'s ``role`` is target, surrogate or poisoned (schema.MODELS), and the doc says so."""
    cell = next(c for p, c in table_rows((ROOT / "docs" / "sweep.md").read_text()).items() if p.startswith("`training/"))
    source = (ROOT / "grb_dist" / "store" / "schema.py").read_text()
    roles = re.search(r'pa\.field\("role".*#\s*(.*)', source).group(1).split(" | ")
    for role in roles:
        assert role.strip() in cell, f"docs/sweep.md's training/ row does not name the role {role.strip()}"


# ----------------------------------------------------------------------------- sample outputs


def fenced_blocks(text: str):
    """``(language, start line, end line)`` of each fenced block of a Markdown text."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            lang, j = lines[i][3:].strip(), i + 1
            while not lines[j].startswith("```"):
                j += 1
            out.append((lang, i, j))
            i = j
        i += 1
    return out


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_sample_output_comes_from_a_script_and_names_its_machine(path):
    """An output block (a fence without a language, or ``text``) lies in a sample region
    ``<!-- sample NAME -->`` ... ``<!-- /sample -->`` that ``tools/docs.py sample NAME``
    regenerates; the region says which command made it and on which machine."""
    docs = tool()
    text = path.read_text()
    lines = text.splitlines()
    regions = [(m.group(1), text[: m.start()].count("\n"), text[: m.end()].count("\n"))
               for m in re.finditer(r"<!-- sample ([\w-]+) -->.*?<!-- /sample -->", text, re.S)]
    for lang, start, end in fenced_blocks(text):
        if lang not in ("", "text"):
            continue
        inside = [name for name, a, b in regions if a < start and end < b]
        assert inside, f"{path.name}:{start + 1}: an output block outside a sample region: {lines[start + 1][:80]!r}"
    for name, a, b in regions:
        assert name in docs.SAMPLES, f"{path.name}: sample {name} is not one tools/docs.py makes"
        region = "\n".join(lines[a:b + 1])
        assert re.search(rf"`python tools/docs\.py sample {name}` on [^`\n]{{8,}}", region), (
            f"{path.name}: sample {name} does not say the command and the machine that made it")


def test_the_sample_tool_rewrites_only_its_region(tmp_path):
    """tools/docs.py's replacement keeps everything outside the region and the markers."""
    docs = tool()
    text = "before\n<!-- sample x -->\nold\n<!-- /sample -->\nafter\n"
    assert docs.replace_region(text, "x", "new\n") == "before\n<!-- sample x -->\nnew\n<!-- /sample -->\nafter\n"
    with pytest.raises(SystemExit):
        docs.replace_region(text, "y", "new\n")


# ----------------------------------------------------------------------------- quoted messages

PREFIXES = ("error:", "warning:", "note:", "interrupted:")
ERRNOS = (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.ENOENT)


def quoted_messages() -> list[tuple[str, str]]:
    """``(doc, message)`` for each message the docs quote: a backticked span or a line of an
    output block that starts with one of :data:`PREFIXES`, and a backticked unknown-name
    message (``did you mean``)."""
    out = []
    for path in DOCS:
        text = path.read_text()
        lines = text.splitlines()
        prose = list(lines)
        spans = []
        for lang, start, end in fenced_blocks(text):
            if lang in ("", "text"):
                spans += lines[start + 1:end]
            prose[start:end + 1] = [""] * (end + 1 - start)
        # a quoted message may run over lines of the prose
        spans += [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", "\n".join(prose))]
        for span in spans:
            if span.startswith(PREFIXES) or "did you mean" in span:
                out.append((path.name, span))
    return out


def code_templates() -> list[str]:
    """Every string the package can print, as a template: the constant parts of each string
    literal and f-string (implicit concatenation joined), ``\\0`` for each formatted value."""
    out = []
    for source in (ROOT / "grb_dist").rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.JoinedStr):
                out.append("".join(v.value if isinstance(v, ast.Constant) else "\0" for v in node.values))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.append(node.value)
    return out


#: What a quoted message leaves to the reader: ``...``, CAPITALISED placeholders (RUN_DIR,
#: FILE, N), numbers with their unit, quoted names, paths, what is in parentheses, and the
#: system's error texts.
PLACEHOLDER = re.compile("|".join([r"\.\.\.", r"\([^()]*\)", r"\b[A-Z][A-Z_]*[A-Z]\b", r"\bN\b", r"\d[\d.,:]*(?:\s?(?:GiB|s)\b)?",
                                   r"'[^']*'", r"\S*/\S*", *(re.escape(os.strerror(e)) for e in ERRNOS)]))


def fragments(message: str) -> list[str]:
    """The literal pieces of a quoted message between its placeholders (the prefix dropped)."""
    body = message.split(":", 1)[1] if message.startswith(PREFIXES) else message
    pieces = [p.strip(" ;,.()?") for p in PLACEHOLDER.split(body)]
    return [p for p in pieces if len(p) >= 4]


def _ends(part: str, suffix: bool) -> str:
    """A regex of every suffix (or prefix) of ``part``, the empty one included."""
    cuts = [part[i:] if suffix else part[:i] for i in range(len(part) + 1)]
    return "(?:" + "|".join(re.escape(c) for c in sorted(set(cuts), key=len, reverse=True)) + ")"


def occurs(piece: str, template: str) -> bool:
    """Whether ``piece`` is part of some text the template prints (a ``\\0``: :data:`HOLE`)."""
    if piece in template:
        return True
    if "\0" not in template or not any(w in template for w in re.findall(r"[a-z]{3,}", piece)):
        return False
    parts = template.split("\0")
    for a in range(len(parts)):
        for b in range(a + 1, len(parts)):
            # a formatted value is a few words of the message (a name, a number, a path, a place),
            # and the template's own text must hold a word of the piece
            middle = "".join(HOLE + re.escape(parts[k]) for k in range(a + 1, b))
            m = re.fullmatch(_ends(parts[a], True) + middle + HOLE + _ends(parts[b], False), piece)
            if m and re.search(r"[a-z]{3,}", "".join(piece[i:j] for i, j in _between(m, len(piece)))):
                return True
    return False


#: A formatted value in a quoted message: up to four words, without the punctuation that
#: separates a message's parts.
HOLE = r"((?:[^\s;:,()]+\s?){0,4}?)"


def _between(match, size: int) -> list[tuple[int, int]]:
    """The spans of a match that are not its groups (the template's own text)."""
    spans, at = [], 0
    for g in range(1, (match.lastindex or 0) + 1):
        spans.append((at, match.start(g)))
        at = match.end(g)
    return spans + [(at, size)]


def test_quoted_messages_are_the_codes():
    templates = code_templates()
    assert quoted_messages(), "no quoted message found: the scan is broken"
    unknown = []
    for doc, message in quoted_messages():
        missing = [piece for piece in fragments(message) if not any(occurs(piece, t) for t in templates)]
        if missing:
            unknown.append(f"{doc}: {message} (not printed: {missing})")
    assert not unknown, "messages the docs quote that the code does not print:\n" + "\n".join(unknown)


def test_the_message_check_finds_a_reworded_message():
    templates = ["unknown \0 \0; did you mean \0?", "cannot write --output \0: \0; nothing was written"]
    assert all(any(occurs(p, t) for t in templates) for p in fragments("unknown model 'gcm'; did you mean 'gcn'?"))
    assert all(any(occurs(p, t) for t in templates)
               for p in fragments("error: cannot write --output FILE: No space left on device; nothing was written"))
    assert not all(any(occurs(p, t) for t in templates) for p in fragments("error: could not write FILE; nothing written"))
