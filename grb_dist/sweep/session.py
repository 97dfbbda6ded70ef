"""Preparing and finishing a sweep without Ray: resolve the job, validate everything, load the
dataset and fingerprint its content, check the run directory (all before anything is written
or Ray starts), lock it, find the missing cells, and reduce the scores into leaderboards
(:func:`grb_dist.leaderboard.reduce.reduce_run`). A run with no cell missing is read without
the lock (:func:`finished`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from grb_dist.core.errors import GrbDistError
from grb_dist.core.resources import reservable_memory
from grb_dist.core.graph import Graph
from grb_dist.core.text import plural
from grb_dist.leaderboard.reduce import reduce_run
from grb_dist.store import RunLock, RunStore, fingerprint_parts
from grb_dist.store.fingerprint import combine
from grb_dist.sweep.job import JobSpec, dataset_job, dataset_label, load_job
from grb_dist.sweep.overrides import apply_overrides
from grb_dist.sweep.cells import Cells, ScoreCell, run_cells, run_components
from grb_dist.sweep.preflight import attack_inputs, check_attack_inputs, check_sweep
from grb_dist.sweep.resolve import ResolvedJob, resolve, transfer_only

log = logging.getLogger(__name__)

#: Default parent of run directories: ``results/<dataset>``.
RESULTS_DIR = Path("results")


@dataclass(frozen=True)
class Prepared:
    """A validated sweep, ready to run: nothing has been written yet."""

    spec: JobSpec
    resolved: ResolvedJob
    cells: Cells
    graph: Graph
    run_dir: Path
    resume: bool  # the run directory already holds a run (it resumes or grows)
    dataset: dict[str, Any]  # identity of the loaded dataset (fingerprint and its parts)
    components: dict[str, Any]  # what each name of the job means (see cells.run_components)
    missing: tuple[ScoreCell, ...] | None = None  # the cells to compute, read under the run's lock
    location: str | None = None  # the run as the user named it, when run_dir is its staging copy (s3://...)

    @property
    def fingerprint(self) -> str:
        return self.dataset["fingerprint"]

    @property
    def where(self) -> str:
        """The run as the user named it: a remote run's URI, else the run directory."""
        return self.location or str(self.run_dir)


def resolve_job(dataset: str | None, job: str | Path | None, overrides: Mapping[str, Any], *,
                allow_import: bool = False, on_note: Callable[[str], None] | None = None) -> JobSpec:
    """The job of a ``grb-dist sweep`` call: ``--job`` or the dataset's job
    (:func:`~grb_dist.sweep.job.dataset_job`: its shipped job; a catalogue dataset without
    one runs the job of its kind, said in one line through ``on_note``; a path or unknown
    name the default job), with the CLI overrides applied; ``module:Class`` specs in the job
    file need ``allow_import``."""
    if job is not None:
        spec = load_job(Path(job), allow_import=allow_import, on_note=on_note)
    else:
        chosen = dataset_job(dataset)
        spec = chosen.load(allow_import=allow_import, on_note=on_note)
        if chosen.note and on_note is not None:
            on_note(chosen.note)
    return apply_overrides(spec, dataset=dataset, **{k: v for k, v in overrides.items() if v is not None})


def default_run_dir(spec: JobSpec) -> Path:
    return RESULTS_DIR / dataset_label(spec.dataset)


def dataset_identity(spec: JobSpec, graph: Graph) -> dict[str, Any]:
    """The dataset as the run manifest records it: its content fingerprint (and the hash of
    each part: features, edges, labels, split, normalisation), where it came from, its size."""
    parts = fingerprint_parts(graph, spec.normalize)
    return {
        "label": dataset_label(spec.dataset), "source": str(spec.dataset), "fingerprint": combine(parts),
        "parts": parts, "normalize": spec.normalize, "data_seed": spec.seed, "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges, "num_features": graph.num_features, "num_classes": int(graph.num_classes),
    }


def prepare(spec: JobSpec, *, out: str | Path | None = None, data_dir: str | Path | None = None,
            download: bool = True, verify: bool = True, graph: Graph | None = None,
            location: str | None = None) -> Prepared:
    """Resolve the job (once: every later step reuses it), load the dataset, check the
    budgets and the models against it, list the cells and check the run directory.
    ``graph``: a graph already in memory (a PyG ``Data`` read by
    :func:`grb_dist.datasets.pyg.from_pyg`) used instead of loading ``spec.dataset``, which
    then only names it; the run records its content fingerprint as for any dataset.
    ``location``: the remote run (``s3://...``) whose staging copy ``out`` is
    (:func:`grb_dist.store.remote.staged`)."""
    from grb_dist.datasets import load_dataset
    from grb_dist.defenses import check_fit

    resolved = resolve(spec)
    graph = load_dataset(spec.dataset if graph is None else graph, data_dir=data_dir, normalize=spec.normalize,
                         seed=spec.seed, download=download, verify=verify)
    for d in spec.difficulties:
        graph.targets(d)
    if any(s is not None and s.needs_margins for s in map(spec.target_selection, spec.scenarios)):
        from grb_dist.attacks.targeted.protocol import pin  # a model's margins choose them: once, here

        spec = spec.with_targets(lambda s: pin(graph, s, spec.difficulties))
        resolved = dataclasses.replace(resolved, job=spec)
    check_attack_inputs(resolved, graph)
    identity = dataset_identity(spec, graph)
    p = run_cells(resolved, identity["fingerprint"], transfer_only(resolved, graph), attack_inputs(resolved, graph))
    for task in p.models:  # parameters that depend on the graph (e.g. GCN-SVD rank)
        check_fit(task.name, graph, dict(task.params))
    run_dir = Path(out) if out is not None else default_run_dir(spec)
    components = run_components(p)
    resume = RunStore.check(run_dir, identity, components)
    return Prepared(spec, resolved, p, graph, run_dir, resume, identity, components, location=location)


def lock_run(prepared: Prepared, *, wait: bool = False, on_wait=None) -> tuple[RunLock, Prepared]:
    """Take the run directory's lock (creating the directory if needed) and check it again
    under the lock (another sweep may have changed it meanwhile). Release the lock with
    ``lock.release()``; it removes a directory this call created when nothing was written."""
    lock = RunLock(prepared.run_dir).acquire(wait=wait, on_wait=on_wait)
    try:
        resume = RunStore.check(prepared.run_dir, prepared.dataset, prepared.components)
        locked = dataclasses.replace(prepared, resume=resume, missing=None)
        locked = dataclasses.replace(locked, missing=tuple(missing_cells(locked)))
    except BaseException:
        lock.release()
        raise
    return lock, locked


def missing_cells(prepared: Prepared) -> list[ScoreCell]:
    """The score cells of the job that the run directory does not hold (all of them for a
    new run): read once, under the lock (:func:`lock_run`), and kept. Reads only; unreadable
    files count as not holding their cells."""
    if prepared.missing is not None:
        return list(prepared.missing)
    if not prepared.resume:
        return list(prepared.cells.scores)
    done = RunStore.existing(prepared.run_dir).done_cells()
    return [c for c in prepared.cells.scores if c.cell_id not in done]


def stage_totals(prepared: Prepared) -> dict[str, int]:
    """The totals of the progress stages (``train`` models, ``attack`` perturbations,
    ``score`` cells) of a locked run, read before Ray starts so that a display shows them
    from its first frame (the runner computes the same with :func:`needed_work`)."""
    return {**pending_work(prepared).totals(), "score": len(prepared.cells.scores)}


def pending_work(prepared: Prepared) -> Any:
    """The :class:`~grb_dist.sweep.cells.Work` of a prepared run: its missing cells and the
    perturbations and models they need (reads the run directory only)."""
    from grb_dist.sweep.cells import needed_work

    missing = {c.cell_id for c in missing_cells(prepared)}
    done = {c.cell_id for c in prepared.cells.scores if c.cell_id not in missing}
    stored = RunStore.existing(prepared.run_dir).has_perturbation if prepared.resume else (lambda _: False)
    return needed_work(prepared.cells, done, stored)


def plan_figures(prepared: Prepared) -> dict[str, int]:
    """The peak memory of each task the last ``sweep --plan`` of this job on this dataset
    measured (:func:`~grb_dist.sweep.cost.machine.read_plan_figures`); empty without one."""
    from grb_dist.sweep.cost.machine import read_plan_figures

    return read_plan_figures(prepared.spec.config_hash, prepared.fingerprint)[0]


def open_store(prepared: Prepared, lock: RunLock) -> RunStore:
    """Create or grow the run directory (under ``lock``): manifest, recovery, quarantine."""
    return RunStore.open(prepared.run_dir, dataset=prepared.dataset, components=prepared.components,
                         config=prepared.spec.to_dict(), config_hash=prepared.spec.config_hash, lock=lock)


@dataclass
class Outcome:
    """What :func:`execute` did: the run's store, the sweep's summary (``None`` when no cell
    was missing and Ray was not started), and the run's leaderboards."""

    store: RunStore
    summary: Any
    boards: dict[str, pd.DataFrame]


def finished(prepared: Prepared, *, on_warning=None) -> Outcome | None:
    """The outcome of a run that already holds every cell of the job (no summary, its
    leaderboards reduced from the store), or ``None`` when a cell is missing. Needs no write
    access: no lock is taken and nothing is written (a read-only run resumes to "nothing
    to do"); a sweep that is growing the run meanwhile is not waited for."""
    if not prepared.resume or missing_cells(prepared):
        return None
    if clean_untrusted(prepared.run_dir, on_warning):  # quarantined: their cells may be missing now
        prepared = dataclasses.replace(prepared, missing=None)
        if missing_cells(prepared):
            return None
    store = RunStore.existing(prepared.run_dir)
    return Outcome(store, None, reduce_run(store, save=False, on_warning=on_warning))


def clean_untrusted(run_dir: Path, on_warning=None) -> int:
    """Move the files of a finished run that pandas would read but grb-dist does not count
    (foreign files, copies, tampered or torn score files) to ``quarantine/``, as opening the
    run for writing does, so that ``pandas.read_parquet(RUN/"scores")`` agrees with grb-dist
    after a re-run with nothing to do. Only where the run can be written and its lock taken
    at once (a sweep growing it cleans it anyway); a read-only run is left as it is (its
    boards say what it holds). Returns how many files were moved."""
    from grb_dist.store.recovery import quarantine_bad_files, untrusted_files

    if not untrusted_files(run_dir) or not all(os.access(p, os.W_OK) for p in (run_dir, run_dir / "scores")):
        return 0
    try:
        lock = RunLock(run_dir).acquire(wait=False)
    except GrbDistError:
        return 0
    try:
        moved = quarantine_bad_files(run_dir)
    except OSError:  # a read-only file system that os.access did not see
        return 0
    finally:
        lock.release()
    if moved:
        (on_warning or log.warning)(f"moved {plural(moved, 'file')} that grb-dist does not count (foreign, copied, "
                                    f"changed or damaged) from {run_dir} to {run_dir / 'quarantine'}")
    return moved


def execute(prepared: Prepared, settings: Any, lock: RunLock, *, on_connect=None, on_progress=None,
            flush_rows: int = 4096, flush_seconds: float = 10.0, on_warning=None,
            job_name: str | None = None, plan: Mapping[str, int] | None = None) -> Outcome:
    """Compute the missing cells of a locked run and reduce it (the sweep after
    :func:`lock_run`, without output): joins the cluster of ``settings``
    (:class:`grb_dist.cluster.settings.RaySettings`) or starts an embedded local Ray, stopped
    afterwards when this call started it; no Ray when nothing is missing.
    ``on_connect(context, store)`` is called once Ray is up and the run directory is open;
    ``on_progress`` as in :func:`grb_dist.sweep.runner.run_sweep`; ``job_name`` names the Ray
    job of a local Ray started here (default: after the run directory); ``plan``: the peak
    memory of the tasks ``sweep --plan`` measured (:class:`~grb_dist.sweep.sizing.Sizes`),
    which they reserve of Ray; a task that fits no node of the cluster is refused before
    the run directory is opened."""
    from grb_dist.cluster.ray_edge import connect, disconnect
    from grb_dist.sweep.placement import check_placement
    from grb_dist.sweep.runner import run_sweep
    from grb_dist.sweep.sizing import Sizes

    summary = None
    if missing_cells(prepared):
        ctx = connect(settings, job_name=job_name or f"grb-dist {prepared.spec.dataset} -> {prepared.where}")
        try:
            sizes, work = Sizes(prepared.cells, prepared.graph, plan), pending_work(prepared)
            # a task that fits no node of the cluster: refused before the run directory is made
            settings = check_placement(sizes, work, work.scored_defenses, settings)
            store = open_store(prepared, lock)
            if on_connect is not None:
                on_connect(ctx, store)
            summary = run_sweep(prepared.cells, prepared.graph, store, settings, on_progress=on_progress,
                                flush_rows=flush_rows, flush_seconds=flush_seconds, sizes=sizes, name=prepared.where)
        finally:
            disconnect(ctx)
        boards = reduce_run(store, on_warning=on_warning)
    else:
        store = RunStore.existing(prepared.run_dir)
        boards = reduce_run(store, save=False, on_warning=on_warning)
    return Outcome(store, summary, boards)


def run(prepared: Prepared, settings: Callable[[], Any], *, local: bool, on_locked: Callable[[Prepared], Any],
        wait: bool = False, on_wait=None, on_warning=None, on_connect=None, flush_rows: int = 4096,
        flush_seconds: float = 10.0, job_name: str | None = None, plan: Mapping[str, int] | None = None) -> Outcome:
    """The steps of a prepared sweep, for ``grb-dist sweep`` and :func:`grb_dist.benchmark`
    alike: a run that holds every cell is answered from the store (:func:`finished`: no
    lock, no write, no Ray); else the run is checked before Ray starts
    (:func:`~grb_dist.sweep.preflight.check_sweep`; ``local``: no cluster is joined),
    ``settings()`` gives its Ray settings, its lock is taken (:func:`lock_run`, ``wait`` and
    ``on_wait`` as there), the missing cells are computed (:func:`execute`) and the lock is
    released.

    ``on_locked(locked)`` is called under the lock with the run as read there, before
    :func:`execute`; it returns the progress display handed to :func:`execute` as
    ``on_progress`` (entered around it when it is a context manager), or ``None``.
    ``on_connect``, ``flush_rows``, ``flush_seconds``, ``on_warning``, ``job_name`` and
    ``plan`` are :func:`execute`'s (``on_warning`` also :func:`finished`'s)."""
    import contextlib

    outcome = finished(prepared, on_warning=on_warning)  # every cell stored: no lock, no Ray, no write
    if outcome is not None:
        return outcome
    check_sweep(prepared, local=local)  # run directory writable, stored models, memory: before Ray
    ray_settings = settings()
    if plan is None:  # the last --plan of this job measured its tasks' memory
        plan = plan_figures(prepared)
    if local:  # a local Ray: every task must fit what it lets a task reserve, known before it starts
        if ray_settings.connection.memory is None:
            ray_settings = dataclasses.replace(
                ray_settings, connection=dataclasses.replace(ray_settings.connection, memory=reservable_memory()))
        from grb_dist.sweep.sizing import Sizes, check_fits

        sizes, work = Sizes(prepared.cells, prepared.graph, plan), pending_work(prepared)
        check_fits(sizes.every(work, work.scored_defenses), host=ray_settings.connection.memory,
                   where="this machine (what a local Ray lets a task reserve)")
    lock, prepared = lock_run(prepared, wait=wait, on_wait=on_wait)
    try:
        display = on_locked(prepared)
        with display if hasattr(display, "__enter__") else contextlib.nullcontext():
            return execute(prepared, ray_settings, lock, on_connect=on_connect, on_progress=display,
                           flush_rows=flush_rows, flush_seconds=flush_seconds, on_warning=on_warning,
                           job_name=job_name, plan=plan)
    finally:
        lock.release()


__all__ = ["Outcome", "Prepared", "RESULTS_DIR", "dataset_identity", "default_run_dir", "execute", "finished",
           "lock_run", "missing_cells", "open_store", "pending_work", "stage_totals",
           "prepare", "resolve_job", "run"]
