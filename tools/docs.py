"""Regenerate what the docs show of the command line from the command line itself.

    python tools/docs.py options              # docs/cli.md's option reference, from every command's --help
    python tools/docs.py sample NAME [NAME]   # a sample output in the docs, by running what makes it
    python tools/docs.py sample --list        # the samples and the commands that make them

A sample is a region of a Markdown file between ``<!-- sample NAME -->`` and
``<!-- /sample -->``: this script runs the sample's command on this machine and writes its
output there, with a line naming the command and the machine. tests/test_docs_drift.py
checks that every output block of the docs lies in such a region and that the option
reference is current. Run from the repository root with the project's environment; the
sweeps take a few minutes on two cores.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
CLI_MD = ROOT / "docs" / "cli.md"
OPTIONS_BEGIN = "<!-- options: made by python tools/docs.py options from the commands' --help; edit the help, not this -->"
OPTIONS_END = "<!-- /options -->"


# ----------------------------------------------------------------------------- options


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(param) -> str:
    if param.param_type_name == "argument":
        return "required" if param.required else ""
    if param.secondary_opts:  # --x/--no-x; None: the job's or another component's choice
        return "" if param.default is None else f"`{param.opts[0] if param.default else param.secondary_opts[0]}`"
    if getattr(param, "is_flag", False) or param.default is None or param.default is False:
        return ""
    return f"`{param.default}`"


def option_reference() -> str:
    """The option reference of docs/cli.md: per command, every option and argument of its
    --help, with its default and help text."""
    import typer.main

    from grb_dist.cli import app

    group = typer.main.get_command(app)
    out = []
    for name, command in [("", group), *group.commands.items()]:
        out += ["", f"### `grb-dist{' ' + name if name else ''}`", "", "| option | default | what it does |",
                "|---|---|---|"]
        for param in command.params:
            if param.param_type_name == "argument":
                spelling = f"`{param.name.upper()}` (argument)"
            else:
                spelling = " / ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
            help_text = param.help or ""
            if getattr(param, "envvar", None) and param.param_type_name == "option":
                help_text += f" Also read from ${param.envvar}."
            out.append(f"| {spelling} | {_default(param)} | {_cell(help_text)} |")
        out.append("| `-h` / `--help` | | Show the help and exit. |")
    return "\n".join(out[1:]) + "\n"


def options_section(text: str) -> str | None:
    """The option reference in ``text`` (docs/cli.md), without its markers; None without one."""
    if OPTIONS_BEGIN not in text or OPTIONS_END not in text:
        return None
    return text.split(OPTIONS_BEGIN, 1)[1].split(OPTIONS_END, 1)[0].lstrip("\n")


def write_options() -> None:
    text = CLI_MD.read_text()
    if options_section(text) is None:
        raise SystemExit(f"{CLI_MD.relative_to(ROOT)} has no {OPTIONS_BEGIN} ... {OPTIONS_END} region")
    head, rest = text.split(OPTIONS_BEGIN, 1)
    tail = rest.split(OPTIONS_END, 1)[1]
    CLI_MD.write_text(f"{head}{OPTIONS_BEGIN}\n{option_reference()}{OPTIONS_END}{tail}")
    print(f"wrote the option reference of {CLI_MD.relative_to(ROOT)}")


# ----------------------------------------------------------------------------- samples


def machine() -> str:
    """This machine in words: cores, architecture, processor, GPU."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        gpus = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=20).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        gpus = []
    gpu = f", {len(gpus)} x {gpus[0]}" if gpus else ", no GPU"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    busy = f"; load average {load:.1f} when it started: shared with other work" if load >= 1.0 else ""
    return f"a {os.cpu_count()}-core {platform.machine()} machine ({model}{gpu}{busy})"


def _run(args: list[str], **kwargs) -> str:
    """Run a command as a user would, stdout a pipe; its stdout (stderr shown on failure)."""
    print("running:", " ".join(args), file=sys.stderr, flush=True)
    proc = subprocess.run(args, capture_output=True, text=True, cwd=kwargs.pop("cwd", ROOT), **kwargs)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


GRB_DIST = [sys.executable, "-m", "grb_dist.cli"]
_SWEEP: dict[str, str] = {}


def _default_sweep() -> str:
    """The default job's sweep, piped, in a fresh run directory shown as results/csbm."""
    if "out" not in _SWEEP:
        with tempfile.TemporaryDirectory() as tmp:
            out = _run([*GRB_DIST, "sweep", "-o", f"{tmp}/csbm"])
            _SWEEP["out"] = out.replace(f"{tmp}/csbm", "results/csbm")
    return _SWEEP["out"]


def readme_board() -> tuple[str, str]:
    """An excerpt of the default sweep's defense board and its last line."""
    lines = _default_sweep().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("### Defenses over attacks (full; injection"))
    rows = []
    for line in lines[start + 4:]:
        if not line.startswith("| "):
            break
        rows.append(line)
    excerpt = lines[start:start + 4] + (rows[:3] + ["..."] + rows[-2:] if len(rows) > 6 else rows)
    return "grb-dist sweep", "\n".join(excerpt + ["", *_ending(lines)])


def _ending(lines: list[str]) -> list[str]:
    """A sweep's last lines: what it did, and what its tasks held."""
    return lines[max(i for i, line in enumerate(lines) if re.match(r"\d+/[\d,]+ cells? \(", line)):]


def sweep_progress() -> tuple[str, str]:
    """The default sweep's progress lines, piped: the opening lines, the first and last
    progress lines, and the last line."""
    lines = _default_sweep().splitlines()
    opening = [line for line in lines[:6] if line.startswith(("sweep ", "Ray:", "memory:"))]
    stamped = [line for line in lines if re.match(r"\d\d:\d\d:\d\d ", line)]
    shown = stamped if len(stamped) <= 8 else stamped[:3] + ["..."] + stamped[-4:]
    return "grb-dist sweep | cat", "\n".join(opening + shown + ["...", *_ending(lines)])


def train_summary() -> tuple[str, str]:
    """The line grb-dist train ends with (the default dataset and model)."""
    return "grb-dist train", _run([*GRB_DIST, "train"]).strip().splitlines()[-1]


def plan() -> tuple[str, str]:
    """The plan of the grb-cora twin's shipped job on this machine (nothing computed or written)."""
    command = ["sweep", "--dataset", "csbm-grb-cora", "--plan"]
    return "grb-dist " + " ".join(command), _run([*GRB_DIST, *command]).rstrip()


def from_pyg() -> tuple[str, str]:
    """docs/examples/from_pyg.py on Cora's .npz (the test data: $GRB_DIST_TEST_DATA/npz/cora.npz)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import NPZ, find_data  # the test-suite's data folders

    cora = find_data(f"{NPZ}/cora.npz")
    if cora is None:
        raise SystemExit("from-pyg needs npz/cora.npz of the test data (set GRB_DIST_TEST_DATA)")
    with tempfile.TemporaryDirectory() as tmp:
        out = _run([sys.executable, "docs/examples/from_pyg.py", str(cora), f"{tmp}/run"])
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["row", "difficulty"])
    return "python docs/examples/from_pyg.py cora.npz", "\n".join(lines[start:])


#: name -> what makes it: a function returning (the command shown, its output).
SAMPLES: dict[str, Callable[[], tuple[str, str]]] = {
    "readme-board": readme_board,
    "sweep-progress": sweep_progress,
    "train-summary": train_summary,
    "plan": plan,
    "from-pyg": from_pyg,
}


def replace_region(text: str, name: str, body: str) -> str:
    """``text`` with the region of sample ``name`` holding ``body`` (markers kept)."""
    pattern = re.compile(rf"(<!-- sample {re.escape(name)} -->\n).*?(<!-- /sample -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"no region of sample {name}")
    return pattern.sub(lambda m: m.group(1) + body + m.group(2), text)


def write_sample(name: str, where: str) -> list[Path]:
    command, output = SAMPLES[name]()
    made = dt.date.today().isoformat()
    body = (f"```text\n{output}\n```\n\n(`{command}`; made by `python tools/docs.py sample {name}` on {where}, "
            f"{made})\n")
    written = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        if f"<!-- sample {name} -->" in text:
            path.write_text(replace_region(text, name, body))
            written.append(path)
    if not written:
        raise SystemExit(f"no document has a region of sample {name}")
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("options", help="docs/cli.md's option reference")
    samples = sub.add_parser("sample", help="sample outputs of the docs")
    samples.add_argument("names", nargs="*", help=f"of: {', '.join(SAMPLES)} (default: all)")
    samples.add_argument("--list", action="store_true", help="list the samples")
    args = parser.parse_args(argv)
    if args.what == "options":
        write_options()
        return
    if args.list:
        for name, make in SAMPLES.items():
            print(f"{name}: {(make.__doc__ or '').splitlines()[0]}")
        return
    unknown = [n for n in args.names if n not in SAMPLES]
    if unknown:
        raise SystemExit(f"unknown sample {', '.join(unknown)}; choose from {', '.join(SAMPLES)}")
    where = machine()
    for name in args.names or list(SAMPLES):
        for path in write_sample(name, where):
            print(f"wrote sample {name} in {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
