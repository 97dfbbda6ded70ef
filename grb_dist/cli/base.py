"""What every command of ``grb-dist`` shares: the Typer app and its command group, the
global options (``-v/--verbose``, ``--version``), the consoles, the error handling (a
:class:`~grb_dist.core.errors.GrbDistError` is one line on stderr and exit code 2) and the
options and checks of several commands.

Light on purpose (typer, rich and the core only): ``grb-dist --help`` and ``--version`` load
nothing else. Commands read :data:`console` and :data:`err_console` from this module when
they run (``base.console``), so that one replacement here (tests) reaches them all.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
import sys
import threading
from pathlib import Path
from typing import Callable, Iterator, Optional

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperCommand, TyperGroup

try:  # newer typer carries its own copy of click; its exceptions are those raised
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - typer that uses the click package
    from click import exceptions as click_errors

from grb_dist.core.errors import GrbDistError
from grb_dist.core.version import __version__

VERBOSE_FLAGS = ("-v", "--verbose")


def _flags_without_value(params: list) -> list:
    """``params`` with every flag (``--wait``, ``--ray/--no-ray``, ``--help``) shown without a
    value in the help: typer's rich help prints the type of every option, so a flag read
    ``--wait <bool>`` as if it took one. A flag's metavar is what the help shows in its place;
    it is set empty (flags never show a metavar elsewhere)."""
    for param in params:
        if getattr(param, "param_type_name", "") == "option" and (param.is_flag or param.count) and param.metavar is None:
            param.metavar = ""
    return params


class _Command(TyperCommand):
    """A command of ``grb-dist``: its flags are shown without a value (:func:`_flags_without_value`)."""

    def get_params(self, ctx) -> list:
        return _flags_without_value(super().get_params(ctx))


class _App(typer.Typer):
    """The Typer app of ``grb-dist``: every command is a :class:`_Command` unless it names its class."""

    def command(self, name: Optional[str] = None, *, cls=None, **kwargs):
        return super().command(name, cls=cls or _Command, **kwargs)


class _Group(TyperGroup):
    """The command group of ``grb-dist``: ``-v/--verbose`` is accepted after the sub-command
    too (``grb-dist train -v`` == ``grb-dist -v train``); it is moved in front of the
    sub-command before parsing, unless it is the value of one of its options or comes
    after ``--``."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        args = list(args)
        for i, token in enumerate(args):
            if token == "--" or not token.startswith("-") and token not in self.commands:
                break
            if token in self.commands:
                rest, moved, takes_value = args[i + 1:], [], _value_options(self.commands[token])
                j = 0
                while j < len(rest):
                    if rest[j] == "--":
                        break
                    if rest[j] in VERBOSE_FLAGS and rest[j] not in takes_value:
                        moved.append(rest.pop(j))
                        continue
                    j += 2 if rest[j] in takes_value else 1
                if moved:
                    args = args[:i] + ["--verbose", token] + rest
                break
        return super().parse_args(ctx, args)

    def get_params(self, ctx) -> list:
        return _flags_without_value(super().get_params(ctx))

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Usage mistakes (an unknown flag, a malformed number, a missing argument) end like
        every other mistake: ``error: ...`` on one line, then where to look, exit code 2."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click_errors.NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click_errors.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx is not None else "grb-dist"
            err_console.print(error_line(exc.format_message()), soft_wrap=True)
            err_console.print(f"try '{command} --help'", highlight=False, soft_wrap=True, markup=False)
            sys.exit(2)
        except click_errors.ClickException as exc:
            err_console.print(error_line(exc.format_message()), soft_wrap=True)
            sys.exit(exc.exit_code)
        except OSError as exc:  # the machine's, not grb-dist's: a full device, a closed pipe, a lost disk
            _machine_error(exc)
        except typer.Abort:
            err_console.print("aborted", highlight=False)
            sys.exit(1)
        try:  # what was printed reaches its file (a full device fails here, not silently at exit)
            sys.stdout.flush()
        except OSError as exc:
            _machine_error(exc)
        sys.exit(code if isinstance(code, int) else 0)


def _machine_error(exc: OSError) -> None:
    """An error of the machine while a command reads or writes, as one line; exit code 2."""
    where = f" ({exc.filename})" if exc.filename else ""
    err_console.print(error_line(f"{exc.strerror or exc}{where}; check the disk, device or pipe"), soft_wrap=True)
    sys.exit(2)


def _value_options(command) -> set[str]:
    """The option names of ``command`` that take a value (the token after them is that value);
    a sub-command that defines ``-v`` itself keeps it."""
    names: set[str] = set()
    for param in getattr(command, "params", []):
        opts = list(getattr(param, "opts", [])) + list(getattr(param, "secondary_opts", []))
        if getattr(param, "param_type_name", "") != "option":
            continue
        if not getattr(param, "is_flag", False) and not getattr(param, "count", False):
            names.update(opts)
        elif any(o in VERBOSE_FLAGS for o in opts):
            names.update(o for o in opts if o in VERBOSE_FLAGS)
    return names


app = _App(
    cls=_Group, add_completion=False, no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]},
    help="The Graph Robustness Benchmark, distributed with Ray.",
)
# Wide enough for the tables when output is not a terminal (pipes, CI logs).
# every line prints literally: user text (names, paths, hints such as 'grb-dist[dashboard]')
# is never read as markup; the few styled words are rich Text (:func:`error_line`)
console = Console(width=shutil.get_terminal_size((120, 24)).columns, markup=False, highlight=False)
err_console = Console(stderr=True, width=shutil.get_terminal_size((120, 24)).columns, markup=False, highlight=False)


def error_line(message: str) -> Text:
    """``error: <message>``, the word styled, the message literal."""
    return Text.assemble(("error:", "bold red"), " ", message)

#: The longest file name (one path component, in bytes) and path most file systems take.
NAME_MAX, PATH_MAX = 255, 4095


def out_value(value: str) -> Path | str:
    """A run directory, or a run in object storage (``s3://bucket/prefix``, ``gs://...``:
    kept as text, see :mod:`grb_dist.store.remote`)."""
    from grb_dist.store.remote import is_remote

    return value if isinstance(value, str) and is_remote(value) else path_value(value)


def path_value(value: str) -> Path:
    """A path given on the command line (typer's ``parser`` of every path option): not empty
    (``--out ''`` would mean the working directory), no NUL, names and length a file system
    takes."""
    if isinstance(value, Path):
        return value
    if not value.strip():
        raise typer.BadParameter("must be a non-empty path")
    if "\0" in value:
        raise typer.BadParameter("contains a NUL character")
    if len(os.fsencode(value)) > PATH_MAX:
        raise typer.BadParameter(f"the path is {len(os.fsencode(value)):,} bytes; paths are at most {PATH_MAX:,}")
    for part in Path(value).parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise typer.BadParameter(f"the name {part[:24]}... is {len(os.fsencode(part)):,} bytes; a file name is at "
                                     f"most {NAME_MAX}")
    return Path(value)


DataDir = typer.Option(None, "--data-dir", parser=path_value, envvar="GRB_DIST_DATA", help="Cache directory of downloaded datasets (default: ~/.cache/grb-dist).")
AllowImport = typer.Option(False, "--allow-import", help="Let the job file name module:Class specs (importing a module runs its code; names on the command line need no consent).")
VerifyOption = typer.Option(True, "--verify/--no-verify", help="Check official dataset files against the catalogue's sizes and checksums.")


def handle_errors(fn: Callable) -> Callable:
    """Turn a :class:`GrbDistError` into a one-line message and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except GrbDistError as exc:
            err_console.print(error_line(str(exc)), soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises :class:`KeyboardInterrupt` (see :func:`interruptible`)."""


#: Exit code of a command stopped by a signal: 128 + the signal's number (SIGINT 130, SIGTERM 143).
SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


@contextlib.contextmanager
def interruptible(message: str) -> Iterator[None]:
    """Run a long command (``sweep``, ``study``) so that SIGTERM (``kill``, ``timeout``,
    Slurm, Kubernetes, ``ray job stop``) stops it as Ctrl-C does: the signal raises
    :class:`Terminated`, a :class:`KeyboardInterrupt`, so the same clean-up runs on the way
    out (buffered rows written, work cancelled, a local Ray shut down, the lock released);
    then ``message`` is printed and the command exits with 130 (SIGINT) or 143 (SIGTERM).
    A second SIGINT or SIGTERM while that clean-up runs exits at once. SIGINT stays ignored
    when the command was started with it ignored (a background job). Outside the main
    thread (no signal handlers there) only Ctrl-C's own ``KeyboardInterrupt`` is turned
    into the message."""
    received: list[int] = []

    def on_signal(signum: int, frame) -> None:
        if received:  # the second one: no more clean-up
            os.write(2, b"interrupted again: exiting now\n")
            os._exit(SIGNAL_EXIT.get(signum, 128 + signum))
        received.append(signum)
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    installed: dict[int, object] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in SIGNAL_EXIT:
            before = signal.getsignal(signum)
            if signum == signal.SIGINT and before is not signal.default_int_handler:
                continue  # ignored (nohup, a background job) or the embedding program's own
            installed[signum] = signal.signal(signum, on_signal)
    try:
        yield
    except KeyboardInterrupt as exc:
        signum = received[0] if received else signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT
        err_console.print(message, highlight=False, soft_wrap=True)
        raise typer.Exit(SIGNAL_EXIT[signum]) from None
    finally:
        for signum, before in installed.items():
            signal.signal(signum, before)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"grb-dist {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress of the library (also accepted after the command)."),
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """The Graph Robustness Benchmark, distributed with Ray. Every command takes -h/--help."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if verbose:  # also when logging was configured before (an embedding program, the tests)
        logging.getLogger().setLevel(logging.INFO)



def print_boards(boards) -> None:
    """Leaderboards on stdout: rich tables on a terminal, Markdown otherwise (a pipe, a
    file, CI), each with its legend; the GRB boards first, then the robustness and transfer
    boards of adaptive evaluation (names are never read as rich markup)."""
    from grb_dist.leaderboard.rank import GRB_KINDS, parse_name
    from grb_dist.leaderboard.render import render, rich_tables

    boards = {n: boards[n] for n in sorted(boards, key=lambda n: parse_name(n)[1] not in GRB_KINDS)}
    if console.is_terminal:
        for table in rich_tables(boards):
            console.print(table)
            console.print()
    else:
        typer.echo(render(boards, "md"), nl=False)


def warn(message: str) -> None:
    """A warning of the library (e.g. a skipped unreadable file), one line on stderr."""
    err_console.print(f"warning: {message}", highlight=False, soft_wrap=True, markup=False)


def note(line: str) -> None:
    """A line of the library that starts with ``note:`` (e.g. the job a dataset without one
    of its own runs), as it is, on stderr."""
    err_console.print(line, highlight=False, soft_wrap=True, markup=False)


def split_csv(value: Optional[str]) -> Optional[list[str]]:
    """A comma-separated option value as a list (empty items dropped); ``None`` if not given."""
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def check_threads(threads: Optional[int]) -> None:
    """``--threads`` is in 1..1024 (or not given), and the allocator policy of the
    environment (:mod:`grb_dist.core.allocator`) is known: checked by the commands that
    compute, before they start anything."""
    from grb_dist.core import allocator

    if threads is not None and not 1 <= threads <= 1024:
        from grb_dist.core.errors import ConfigError

        raise ConfigError(f"--threads must be in 1..1024, got {threads}")
    allocator.mode()
