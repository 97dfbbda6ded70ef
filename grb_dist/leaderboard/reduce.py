"""The leaderboards of a run directory: its scores reduced per scenario and difficulty, saved
under ``RUN_DIR/leaderboard/`` and written out in one of the formats of :mod:`.render`.

Reads a run's store only (no torch, no Ray): a sweep calls :func:`reduce_run` when it
finishes, ``grb-dist leaderboard`` calls it on any run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

import pandas as pd

from grb_dist.core.errors import GrbDistError
from grb_dist.leaderboard.rank import leaderboards, scenarios_of, to_arrow
from grb_dist.leaderboard.render import file_stem, render, to_csv, to_markdown
from grb_dist.store import RunStore
from grb_dist.core.fileio import write_output


def reduce_run(store: RunStore, difficulties: list[str] | None = None, *, save: bool = True,
               on_warning: Callable[[str], None] | None = None,
               scenarios: list[str] | None = None) -> dict[str, pd.DataFrame]:
    """Leaderboards of every cell of a (finished, partial or grown) run, per scenario and
    difficulty, keyed ``<scenario>/<kind>-<difficulty>``; saved under
    ``leaderboard/<scenario>/`` as Parquet and Markdown when ``save``. ``scenarios``
    (default: every scenario in the run) must be present in the run. Unreadable score files
    are skipped and reported through ``on_warning`` (default: the log)."""
    scores = store.read_scores(on_warning=on_warning, complete=True)
    if scores.empty:
        raise GrbDistError(f"{store.root} has no scores yet; run the sweep first")
    present = scenarios_of(scores)
    absent = [s for s in scenarios or [] if s not in present]
    if absent:
        raise GrbDistError(f"{store.root} has no scores of scenario {', '.join(absent)}; "
                           f"it holds: {', '.join(present)}")
    held = sorted(set(scores["difficulty"]), key=str)
    missing = [d for d in difficulties or [] if d not in held]
    if missing:  # empty boards (and empty files) would look like a run without results
        raise GrbDistError(f"{store.root} has no scores of difficulty {', '.join(missing)}; "
                           f"it holds: {', '.join(held)}")
    boards = leaderboards(scores, difficulties, scenarios)
    if save:
        for name, board in boards.items():
            store.write_leaderboard(name, to_arrow(name, board), to_markdown(board, name))
    return boards


def is_csv_dir(output: Path, fmt: str | None) -> bool:
    """Whether CSV output goes to a directory (one file per board) rather than to one long
    table: ``output`` is a directory, or its name does not end in ``.csv``."""
    return fmt == "csv" and (output.is_dir() or output.suffix.lower() != ".csv")


def write_boards(boards: Mapping[str, pd.DataFrame], output: Path, fmt: str) -> None:
    """Write ``boards`` to ``output``, each file atomically: one file in format ``fmt``, or
    one CSV per board (``<scenario>-<kind>-<difficulty>.csv``) into the directory ``output``
    (created if missing) when :func:`is_csv_dir`. Every file is written by the output rule
    (:func:`~grb_dist.core.fileio.write_output`: a device, FIFO or socket is refused, a
    symlink's regular-file target written); a failed write is a :class:`ConfigError`, a
    directory that cannot be made an :class:`OSError`."""
    if is_csv_dir(output, fmt):
        output.mkdir(exist_ok=True)
        for name, board in boards.items():
            path = output / f"{file_stem(name)}.csv"
            write_output(to_csv(board).encode(), path, "--output file", "remove it or choose another --output")
    else:
        write_output(render(boards, fmt).encode(), output)


__all__ = ["is_csv_dir", "reduce_run", "write_boards"]
