"""How figures measured on samples of a large graph scale to the whole graph, and how a
calibration that ran out of its budget prices what it did not measure (plain Python).

A graph above :data:`SAMPLE_ABOVE` nodes is calibrated on two samples
(:func:`sample_sizes`, :func:`grb_dist.datasets.sample.sample_graph`); each figure is
extrapolated linearly in the share of the nodes (:func:`extrapolate`), its growth beyond the
samples scaled by what a measurement on the whole graph says (:func:`check_scale`): an
epoch for the models' work (one per architecture that weighs in the job), one attack for
the attacks'. Figures left
unmeasured when the budget ran out take the median measured figure of their kind, with the
fastest and the slowest as bounds (:func:`fill`). :class:`Progress` counts the figures and
says the time left.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from grb_dist.core.errors import ConfigError
from grb_dist.core.text import duration


@dataclass(frozen=True)
class Rate:
    """The measured cost of one kind of work: ``fixed + n * unit`` seconds (``n`` epochs or
    steps), plus ``clean`` seconds shared per attack task; ``peak``: the bytes its work
    held above the process's own, at most."""

    fixed: float
    unit: float
    peak: int
    clean: float = 0.0

    def seconds(self, n: int) -> float:
        return self.fixed + n * self.unit

    def scaled(self, factor: float) -> "Rate":
        return Rate(self.fixed * factor, self.unit * factor, self.peak, self.clean * factor)


#: A graph with more nodes than this is calibrated on samples (``sample="auto"``).
SAMPLE_ABOVE = 60_000
#: Nodes of the two samples a large graph is calibrated on (:func:`sample_sizes`).
SAMPLE_NODES = (5_000, 20_000)
SAMPLING = ("auto", "sampled", "full")


def sample_sizes(num_nodes: int, sample: str = "auto") -> tuple[int, ...]:
    """Nodes of the samples a graph of ``num_nodes`` is calibrated on: none (the full graph)
    with ``full``, or with ``auto`` up to :data:`SAMPLE_ABOVE` nodes; else
    :data:`SAMPLE_NODES` (at most half the graph's nodes each)."""
    if sample not in SAMPLING:
        raise ConfigError(f"unknown calibration {sample!r}; use one of: {', '.join(SAMPLING)}")
    if sample == "full" or (sample == "auto" and num_nodes <= SAMPLE_ABOVE):
        return ()
    sizes = tuple(sorted({max(1, min(k, num_nodes // 2 >> i)) for i, k in enumerate(reversed(SAMPLE_NODES))}))
    return sizes if len(sizes) == 2 else ()


#: The fastest growth between two samples that is taken as measured: work that grows with
#: the graph costs at most (ratio of the samples' nodes) ** this on the larger sample. A
#: larger sample measured slower than that was slowed by the machine's other work (on a
#: machine shared with other jobs, by far more than this), and is taken at this bound.
MAX_GROWTH = 1.5


def extrapolate(points: list[tuple[float, Rate]], scale: float = 1.0) -> Rate:
    """The rate on the full graph (share 1) from rates measured on samples of the shares
    given: linear in the share through the two largest (a slope below 0, which noise can
    give, counts as 0; each part of the larger sample's rate at most its growth bound,
    :data:`MAX_GROWTH`), the increment beyond the largest sample times ``scale`` (what the
    full-size check found, :func:`check_scale`); the one rate itself when there is one."""
    if len(points) == 1:
        return points[0][1]
    (x1, r1), (x2, r2) = sorted(points, key=lambda p: p[0])[-2:]
    bound = (x2 / x1) ** MAX_GROWTH

    def up(a: float, b: float, by: float = scale) -> float:
        b = min(b, a * bound) if a > 0 else b
        return b + by * max(0.0, (b - a) / (x2 - x1)) * (1.0 - x2)

    return Rate(up(r1.fixed, r2.fixed), up(r1.unit, r2.unit), int(up(r1.peak, r2.peak, 1.0)), up(r1.clean, r2.clean))


#: The range :func:`check_scale` keeps to (one noisy epoch does not scale every figure 10x).
CHECK_SCALE = (0.5, 4.0)


def check_scale(points: list[tuple[float, Rate]], measured: float,
                cost: Callable[[Rate], float] = lambda r: r.seconds(1)) -> float:
    """The factor on the extrapolated increment that makes the ``cost`` of the rate
    extrapolated from ``points`` (default: one epoch or step) ``measured`` seconds on the
    full graph (within :data:`CHECK_SCALE`): sparse work on a graph many times the size of a
    processor's caches runs slower per edge than on a sample that fits them, an injection
    attack's step reaches a smaller share of a larger graph, and one measurement on the full
    graph says by how much."""
    largest = cost(max(points, key=lambda p: p[0])[1])
    increment = cost(extrapolate(points)) - largest
    if increment <= 0:
        return 1.0
    return min(CHECK_SCALE[1], max(CHECK_SCALE[0], (measured - largest) / increment))


class Progress:
    """Counts figures, says what is measured with the time left, and keeps the budget."""

    def __init__(self, total: int, budget: float | None, on_step: Callable[[str], None]) -> None:
        self.total, self.budget, self.on_step = total, budget, on_step
        self.start = time.perf_counter()
        self.done = 0

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def over(self) -> bool:
        return self.budget is not None and self.elapsed() >= self.budget

    def left(self) -> float | None:
        """Seconds left by the mean pace so far (``None`` before the first figure)."""
        if not self.done:
            return None
        left = self.elapsed() / self.done * (self.total - self.done)
        return min(left, max(0.0, self.budget - self.elapsed())) if self.budget is not None else left

    def step(self, what: str) -> None:
        left = self.left()
        eta = f", about {duration(left)} left" if left is not None and self.total > self.done else ""
        self.on_step(f"[{self.done + 1}/{self.total}{eta}] {what}")


def fill(rates: dict[str, dict[str, Rate]], figures: Iterable[tuple[str, str]]) -> dict[str, dict[str, tuple[Rate, Rate]]]:
    """Give every figure ``(kind, name)`` left unmeasured (the budget ran out) the median
    measured figure of its kind, in place; returns, for those, the fastest and the slowest
    measured figure of their kind (the bounds)."""
    estimated: dict[str, dict[str, tuple[Rate, Rate]]] = {}
    for kind, name in figures:
        of_kind = rates[kind]
        if name in of_kind:
            continue
        known = sorted((r for n, r in of_kind.items() if n not in estimated.get(kind, {})),
                       key=lambda r: r.seconds(10) + r.clean)
        estimated.setdefault(kind, {})[name] = (known[0], known[-1])
        of_kind[name] = known[len(known) // 2]
    return estimated


def interleaved(figures: list[Any]) -> list[Any]:
    """``figures`` (each with a ``kind``) taken from each kind in turn (each kind in its own
    order): a budget that runs out leaves measured figures of every kind in proportion, not
    every training and one attack."""
    by_kind: dict[str, list[Any]] = {}
    for f in figures:
        by_kind.setdefault(f.kind, []).append(f)
    order: list[Any] = []
    for i in range(max((len(v) for v in by_kind.values()), default=0)):
        order += [of_kind[i] for of_kind in by_kind.values() if i < len(of_kind)]
    return order


__all__ = ["CHECK_SCALE", "MAX_GROWTH", "Progress", "Rate", "SAMPLE_ABOVE", "SAMPLE_NODES", "SAMPLING", "check_scale", "extrapolate",
           "fill", "interleaved", "sample_sizes"]
