"""Progress of a sweep, per stage: models trained, perturbations generated, cells scored.

:class:`Stage` holds the counts of one stage (the runner reports them in every
``SweepProgress``); the rest shows them: :class:`PlainProgress` writes timestamped lines
(when stdout is not a terminal: CI, ``nohup``, ``tee``), :class:`RichProgress` three live
progress rows on a terminal. Both compute rate and ETA the same way
(:func:`stage_text`). This module does not import Ray.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol

from grb_dist.core.text import duration

#: The stages in the order a sweep runs them: attribute of ``SweepProgress``, label, unit.
STAGES: tuple[tuple[str, str, str], ...] = (
    ("train", "train", "models"),
    ("attack", "attack", "perturbations"),
    ("score", "score", "cells"),
)

#: Without a terminal, a progress line at most this often (besides one per stage change).
PLAIN_EVERY = 5.0


@dataclass
class Stage:
    """The counts of one stage of a sweep.

    Attributes:
        done: items finished, including those found stored when the sweep started.
        total: items the sweep needs (stored ones included).
        failed: items that failed (counted apart from ``done``).
        skipped: items already stored at the start (part of ``done``; not in the rate).
        started: seconds after the sweep's start when its first work was submitted.
        finished: seconds after the sweep's start when its last item ended.
    """

    done: int = 0
    total: int = 0
    failed: int = 0
    skipped: int = 0
    started: float | None = None
    finished: float | None = None

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.done - self.failed)

    @property
    def complete(self) -> bool:
        return self.remaining == 0

    def status(self) -> str:
        """``waiting`` (nothing submitted yet), ``running`` or ``done``."""
        if self.complete:
            return "done"
        return "waiting" if self.started is None else "running"

    def rate(self, elapsed: float) -> float | None:
        """Items per second since the stage's first submission (stored items left out);
        ``None`` before its first item ends."""
        if self.started is None:
            return None
        n = self.done + self.failed - self.skipped
        span = (self.finished if self.finished is not None else elapsed) - self.started
        return n / span if n > 0 and span > 0 else None

    def eta(self, elapsed: float) -> float | None:
        """Seconds left at the current rate (``None`` without a rate)."""
        rate = self.rate(elapsed)
        if self.complete:
            return 0.0
        return self.remaining / rate if rate else None


@dataclass
class Tally:
    """What the sweep's metrics show beyond the stages' totals: the attack and score
    stages' items per scenario, and each attack's optimisation steps per second of its
    own computing (the steps of its perturbations over their attack seconds).

    Attributes:
        counts: ``(stage, scenario, state)`` -> items (state: ``done`` or ``failed``).
        totals: ``(stage, scenario)`` -> items the sweep needs (stored ones included).
        steps, seconds: attack -> steps taken and seconds spent by this invocation.
    """

    counts: Counter = field(default_factory=Counter)
    totals: Counter = field(default_factory=Counter)
    steps: Counter = field(default_factory=Counter)
    seconds: Counter = field(default_factory=Counter)

    def add(self, stage: str, items: Iterable[Any], state: str) -> None:
        """Count ``items`` (cells or perturbations: anything with a ``scenario``)."""
        for item in items:
            self.counts[stage, item.scenario, state] += 1

    def by_scenario(self, stage: str) -> dict[str, tuple[int, int, int]]:
        """``{scenario: (done, failed, total)}`` of one stage."""
        return {scenario: (self.counts[stage, scenario, "done"], self.counts[stage, scenario, "failed"], total)
                for (name, scenario), total in sorted(self.totals.items()) if name == stage}

    def attacked(self, attack: str, steps: int, seconds: float) -> float | None:
        """Record one perturbation of ``attack``; its steps per second so far (``None`` for
        an attack without steps)."""
        self.steps[attack] += steps
        self.seconds[attack] += seconds
        return self.steps[attack] / self.seconds[attack] if self.steps[attack] and self.seconds[attack] > 0 else None


class HasStages(Protocol):
    """What the displays read of a ``SweepProgress``."""

    elapsed: float
    train: Stage
    attack: Stage
    score: Stage


def rate_text(rate: float) -> str:
    """Items per second, or per minute when below 0.1/s."""
    return f"{rate:.1f}/s" if rate >= 0.1 else f"{rate * 60:.1f}/min"


def stage_detail(stage: Stage, elapsed: float) -> str:
    """What follows a stage's counts: ``2.1/s, eta 15.0 s``, ``waiting``, ``done in 42.0 s``, failures."""
    status = stage.status()
    if status == "waiting":
        text = "waiting"
    elif status == "done":
        if stage.done == stage.skipped and not stage.failed:
            text = "stored" if stage.total else "none needed"
        else:
            took = (stage.finished if stage.finished is not None else elapsed) - (stage.started or 0.0)
            text = f"done in {duration(took)}"
    else:
        rate = stage.rate(elapsed)
        eta = stage.eta(elapsed)
        text = "running" if rate is None else f"{rate_text(rate)}, eta {duration(eta or 0.0)}"
    if stage.failed:
        text += f", {stage.failed} failed"
    return text


def stage_text(label: str, unit: str, stage: Stage, elapsed: float) -> str:
    """One stage: ``attack 10/40 perturbations (2.1/s, eta 15.0 s)``."""
    return f"{label} {stage.done}/{stage.total} {unit} ({stage_detail(stage, elapsed)})"


def progress_line(progress: HasStages, now: dt.datetime | None = None) -> str:
    """The plain progress line: ``12:01:05 train 3/8 models (...), attack ..., score ...``."""
    now = now or dt.datetime.now()
    parts = [stage_text(label, unit, getattr(progress, attr), progress.elapsed) for attr, label, unit in STAGES]
    return f"{now:%H:%M:%S} " + ", ".join(parts)


class PlainProgress:
    """Timestamped progress lines for output that is not a terminal.

    A line is written when any stage changes status (starts or ends) and otherwise at most
    every ``every`` seconds; :meth:`close` writes the last state once more if it was not
    written yet.

    Args:
        write: writes one line (without its newline).
        every: seconds between lines while no stage changes.
        clock: monotonic clock (tests pass their own).
    """

    def __init__(self, write: Callable[[str], None], every: float = PLAIN_EVERY,
                 clock: Callable[[], float] = time.monotonic):
        self.write = write
        self.every = every
        self.clock = clock
        self._last_at: float | None = None
        self._last_status: tuple[str, ...] | None = None
        self._last: HasStages | None = None
        self._written = True

    def __call__(self, progress: HasStages) -> None:
        status = tuple(getattr(progress, attr).status() for attr, _, _ in STAGES)
        now = self.clock()
        self._last = progress
        if status != self._last_status or self._last_at is None or now - self._last_at >= self.every:
            self.write(progress_line(progress))
            self._last_at, self._last_status, self._written = now, status, True
        else:
            self._written = False

    def stop(self) -> None:
        """Write the last reported state when it has not been written."""
        if self._last is not None and not self._written:
            self.write(progress_line(self._last))
            self._written = True

    close = stop

    def __enter__(self) -> "PlainProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class RichProgress:
    """Three live rows (train, attack, score) on a terminal, each with its bar, counts,
    rate and ETA; a context manager around :class:`rich.progress.Progress`. ``totals``
    (stage -> items, e.g. :func:`grb_dist.sweep.session.stage_totals`) are shown from the
    first frame, while Ray starts; without them a stage shows ``?`` until its first report."""

    def __init__(self, console: Any, totals: Mapping[str, int] | None = None):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        columns = [TextColumn("{task.description:<6}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[unit]:<13} {task.fields[detail]}")]
        self.bar = Progress(*columns, console=console, transient=False)
        totals = totals or {}
        self.tasks = {attr: self.bar.add_task(label, total=totals.get(attr), start=False, unit=unit,
                                              detail="starting" if attr in totals else "waiting")
                      for attr, label, unit in STAGES}

    def __enter__(self) -> "RichProgress":
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.__exit__(*exc)

    def stop(self) -> None:
        """Stop the live display (its last state stays on the terminal)."""
        self.bar.stop()

    def __call__(self, progress: HasStages) -> None:
        for attr, _, _ in STAGES:
            stage: Stage = getattr(progress, attr)
            task = self.tasks[attr]
            if stage.started is not None or stage.complete:
                self.bar.start_task(task)
            if stage.complete:
                self.bar.stop_task(task)
            self.bar.update(task, completed=stage.done, total=stage.total,
                            detail=stage_detail(stage, progress.elapsed))


@dataclass
class SweepProgress:
    """Reported at the start, after every trained model, generated perturbation and scored
    cell, and every few seconds while nothing ends.

    ``done`` / ``total`` / ``failures`` count score cells (``score`` has the same counts);
    ``train``, ``attack`` and ``score`` are the stages' counts (models, perturbations,
    cells; see :class:`grb_dist.sweep.progress.Stage`); ``phase`` is the first stage not
    finished (``plan``, ``train``, ``attack``, ``score``).
    """

    done: int
    total: int
    failures: int
    elapsed: float
    phase: str
    computed: int = 0  # cells written by this invocation
    scorers: tuple = ()  # Scorer actor handles (tests kill them to check fault tolerance)
    train: Stage = field(default_factory=Stage)
    attack: Stage = field(default_factory=Stage)
    score: Stage = field(default_factory=Stage)


@dataclass
class SweepSummary:
    """What a sweep did: its cells, its failures (``errors``), and the memory its tasks held
    against what they reserved (``memory``: a line, ``None`` when none was measured;
    ``memory_warnings``: :func:`~grb_dist.sweep.sizing.memory_held`)."""

    total: int
    done: int
    computed: int
    skipped: int
    failures: int
    seconds: float
    errors: list[str] = field(default_factory=list)
    memory: str | None = None
    memory_warnings: list[str] = field(default_factory=list)


__all__ = ["PLAIN_EVERY", "PlainProgress", "RichProgress", "STAGES", "Stage", "SweepProgress", "SweepSummary", "progress_line",
           "stage_detail", "stage_text"]
