"""Preparing and finishing a sweep without Ray: resolve the job, validate everything, load the
dataset, check the run directory (all before anything is written or Ray starts), and reduce
the finished scores into leaderboards.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from grb_dist.errors import ConfigError, GrbDistError
from grb_dist.graph import Graph
from grb_dist.leaderboard import leaderboards, render, to_arrow
from grb_dist.leaderboard.render import to_markdown
from grb_dist.store import RunStore
from grb_dist.sweep.spec import JobSpec, Plan, apply_overrides, default_job_path, load_job, plan, validate_spec

log = logging.getLogger(__name__)

#: Default parent of run directories: ``results/<dataset>``.
RESULTS_DIR = Path("results")


@dataclass(frozen=True)
class Prepared:
    """A validated sweep, ready to run: nothing has been written yet."""

    spec: JobSpec
    plan: Plan
    graph: Graph
    run_dir: Path
    resume: bool


def resolve_job(dataset: str | None, job: str | Path | None, overrides: Mapping[str, Any]) -> JobSpec:
    """The job of a ``grb-dist sweep`` call: ``--job`` or the dataset's shipped job (a path
    or unknown name uses the default job), with the CLI overrides applied."""
    path = Path(job) if job is not None else default_job_path(dataset)
    spec = load_job(path)
    return apply_overrides(spec, dataset=dataset, **{k: v for k, v in overrides.items() if v is not None})


def default_run_dir(spec: JobSpec) -> Path:
    name = Path(spec.dataset).stem if Path(spec.dataset).exists() else spec.dataset
    return RESULTS_DIR / name


def _check_attack_inputs(spec: JobSpec, graph: Graph) -> None:
    from grb_dist.attacks import build_attack

    for attack in spec.attacks:
        for d in spec.difficulties:
            a = build_attack(attack, spec.attack_params(attack, d, spec.attack_seed(0)))
            check = getattr(a, "check_inputs", None)
            if check is not None:
                try:
                    check(graph, graph.targets(d))
                except ConfigError as exc:
                    raise ConfigError(f"attack {attack} on {d}: {exc}") from None


def prepare(spec: JobSpec, *, out: str | Path | None = None, data_dir: str | Path | None = None,
            download: bool = True) -> Prepared:
    """Validate names and parameters, load the dataset, check the run directory."""
    from grb_dist.datasets import load_dataset

    validate_spec(spec)
    graph = load_dataset(spec.dataset, data_dir=data_dir, normalize=spec.normalize, seed=spec.seed, download=download)
    for d in spec.difficulties:
        graph.targets(d)
    _check_attack_inputs(spec, graph)
    p = plan(spec)
    from grb_dist.defenses import build_defense

    for task in p.models:  # parameters that depend on the graph (e.g. GCN-SVD rank)
        build_defense(task.name, graph, dict(task.params))
    run_dir = Path(out) if out is not None else default_run_dir(spec)
    resume = RunStore.check(run_dir, spec.to_dict(), spec.config_hash)
    return Prepared(spec, p, graph, run_dir, resume)


def open_store(prepared: Prepared) -> RunStore:
    return RunStore.open(prepared.run_dir, prepared.spec.to_dict(), prepared.spec.config_hash)


def reduce_run(store: RunStore, difficulties: list[str] | None = None, *, save: bool = True) -> dict[str, pd.DataFrame]:
    """Leaderboards of a (finished or partial) run; saved under ``leaderboard/`` as Parquet
    and Markdown when ``save``."""
    scores = store.read_scores()
    if scores.empty:
        raise GrbDistError(f"{store.root} has no scores yet; run the sweep first")
    boards = leaderboards(scores, difficulties)
    if save:
        for name, board in boards.items():
            store.write_leaderboard(name, to_arrow(name, board), to_markdown(board, name))
    return boards


__all__ = ["Prepared", "RESULTS_DIR", "default_run_dir", "open_store", "prepare", "reduce_run", "render", "resolve_job"]
