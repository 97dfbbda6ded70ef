"""Running a study (Gosch et al. 2023): :func:`run_study`.

The pending units (:func:`pending_units`: those whose rows are not written yet) run as Ray
tasks (a local Ray by default, a cluster with ``address``) or one after another in this
process, each unit's rows written atomically to ``<out>/<study>/nodes/<unit id>.parquet``;
unit ids hash the study's settings and the unit (:meth:`~grb_dist.semantics.spec.Unit.unit_id`),
so a re-run only does the missing units. The study's settings go to ``study.json`` and the
reduced tables next to the rows (:func:`grb_dist.semantics.tables.write_tables`).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import pandas as pd

from grb_dist.core.errors import ConfigError
from grb_dist.core.text import duration, plural
from grb_dist.semantics.cache import UnitCache, worker_cache
from grb_dist.semantics.kernel import run_unit
from grb_dist.semantics.spec import StudySpec, Unit, check_spec, units
from grb_dist.semantics.tables import stored_spec, write_tables


def study_dir(out: str | Path, spec: StudySpec) -> Path:
    """Where the study writes: ``<out>/<study>``."""
    return Path(out) / spec.study


def pending_units(spec: StudySpec, out: str | Path) -> list[tuple[Unit, Path]]:
    """Units whose Parquet file is not written yet, with their target paths."""
    nodes = study_dir(out, spec) / "nodes"
    todo = []
    for unit in units(spec):
        path = nodes / f"{unit.unit_id(spec)}.parquet"
        if not path.exists():
            todo.append((unit, path))
    return todo


def _write_rows(frame: pd.DataFrame, path: Path) -> None:
    import pyarrow as pa

    from grb_dist.store.parquet import write_table

    path.parent.mkdir(parents=True, exist_ok=True)
    write_table(pa.Table.from_pandas(frame, preserve_index=False), path)


def _unit_task(spec_dict: dict, unit_dict: dict) -> pd.DataFrame:
    """A unit as a Ray task: the units a worker process runs share its cache."""
    spec = StudySpec(**spec_dict)
    return run_unit(spec, Unit(**unit_dict), worker_cache())


def run_study(
    spec: StudySpec,
    out: str | Path,
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    use_ray: bool = True,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Run the pending units (Ray tasks, or in this process with ``use_ray=False``, sharing
    one :class:`~grb_dist.semantics.cache.UnitCache`), write each unit's rows atomically,
    then the reduced tables; returns the study directory."""
    check_spec(spec)
    directory = study_dir(out, spec)
    _check_same_settings(spec, directory)
    todo = pending_units(spec, out)
    say = progress or (lambda _msg: None)
    total = len(units(spec))
    say(f"study {spec.study}: {plural(total, 'unit')}, {total - len(todo):,} done, {len(todo):,} to run")
    directory.mkdir(parents=True, exist_ok=True)
    _write_spec(spec, directory)
    start = time.perf_counter()

    def done(count: int, unit: Unit) -> None:
        elapsed = time.perf_counter() - start
        left = elapsed / count * (len(todo) - count)
        say(f"[{count}/{len(todo)}] K={unit.K:g} graph={unit.graph_seed} {unit.model} {unit.attack} "
            f"({duration(elapsed)}, about {duration(left)} left)")

    if todo and not use_ray:
        cache = UnitCache()
        for i, (unit, path) in enumerate(todo, 1):
            _write_rows(run_unit(spec, unit, cache), path)
            done(i, unit)
    elif todo:
        from grb_dist.cluster.settings import Connection, RaySettings
        from grb_dist.cluster.ray_edge import run_units

        spec_dict = asdict(spec)
        finished = [0]

        def on_result(i: int, frame: pd.DataFrame) -> None:
            unit, path = todo[i]
            _write_rows(frame, path)
            finished[0] += 1
            done(finished[0], unit)

        run_units(_unit_task, [(f"study {u.model} {u.attack} K={u.K:g}", (spec_dict, asdict(u))) for u, _ in todo],
                  on_result,
                  settings=RaySettings(Connection(address=address, num_cpus=num_cpus, include_dashboard=False)),
                  job_name=f"grb-dist study {spec.study}")
    write_tables(directory, spec.budgets)
    return directory


def _check_same_settings(spec: StudySpec, directory: Path) -> None:
    """A study directory holds units of one set of shared settings: a run whose settings
    differ (nodes, graph, training ...) would mix its rows with the old ones."""
    old = stored_spec(directory)
    if old is None:
        return
    before, now = old.shared(), spec.shared()
    changed = sorted(k for k in set(before) | set(now)
                     if json.dumps(before.get(k), sort_keys=True, default=str) != json.dumps(now.get(k), sort_keys=True, default=str))
    if changed:
        raise ConfigError(f"{directory} holds study {spec.study!r} run with other settings ({', '.join(changed)}); "
                          "give another --out or another study name")


def _write_spec(spec: StudySpec, directory: Path) -> None:
    from grb_dist.core.fileio import write_bytes

    write_bytes(json.dumps(asdict(spec), indent=2, sort_keys=True, default=str).encode(), directory / "study.json")


__all__ = ["pending_units", "run_study", "study_dir"]
