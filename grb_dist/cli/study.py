"""The commands of a semantics-aware robustness study (Gosch et al. 2023): ``grb-dist study``,
``study-tune`` and ``study-plot``.

Thin: the options become a checked study (:mod:`grb_dist.semantics.spec`), the work is done
by :mod:`grb_dist.semantics` (imported when a command runs).
"""

from __future__ import annotations

import sys

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

import grb_dist.cli.base as base
from grb_dist.cli.base import AllowImport, app, handle_errors, interruptible, path_value, split_csv


@app.command()
@handle_errors
def study(
    job: Optional[Path] = typer.Option(None, "--job", parser=path_value, help="Study job file (YAML), or a shipped study: over-robustness-csbm (default), over-robustness-cba, over-robustness-cora-ml."),
    out: Path = typer.Option(Path("results"), "--out", parser=path_value, help="Output directory; the study writes OUT/<study>/ (nodes/ Parquet per unit, reduced tables, plots/)."),
    address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address (default: a local Ray started here)."),
    num_cpus: Optional[int] = typer.Option(None, "--num-cpus", help="CPUs of the local Ray (default: all)."),
    graphs: Optional[int] = typer.Option(None, "--graphs", help="Graphs per K (or splits of a real graph)."),
    nodes: Optional[int] = typer.Option(None, "--nodes", help="New (test) nodes attacked per graph."),
    k: Optional[str] = typer.Option(None, "--k", help="K values, comma-separated (CSBM and CBA studies)."),
    models: Optional[str] = typer.Option(None, "--models", help="Models, comma-separated (hyper-parameters from the job where it has them)."),
    attacks: Optional[str] = typer.Option(None, "--attacks", help="Attacks, comma-separated: l2-weak, l2-strong, dice, l2-weak-class, nettack, sga, grbcd."),
    budgets: Optional[str] = typer.Option(None, "--budgets", help="Local budgets, comma-separated: integers >= 1, deg, deg+N, inf."),
    dataset: Optional[Path] = typer.Option(None, "--dataset", parser=path_value, help="The .npz file of a real-graph study (graph kind npz)."),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Most edges an attack adds to a node (cap of the inf budget)."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Maximum training epochs."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Base seed of graphs, splits, nodes and models."),
    ray_on: bool = typer.Option(True, "--ray/--no-ray", help="Run the units as Ray tasks (default) or one after another in this process."),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Write the PNG figures after the run."),
    allow_import: bool = AllowImport,
) -> None:
    """Semantics-aware robustness study (Gosch et al. 2023): R, R_adv, R_over, F1-rob, Tables 1-2,
    figures.

    One unit per (K, graph seed, model, attack); each unit's per-node rows are written
    atomically to OUT/<study>/nodes/<unit id>.parquet and a re-run only does missing units.
    """
    from grb_dist.core.paths import check_writable_dir
    from grb_dist.core.resources import check_ray_address
    from grb_dist.semantics.run import run_study

    job = _study_job(job)
    _check_num_cpus(num_cpus)
    spec = _study_spec(job, k, models, epochs, graphs=graphs, nodes=nodes, max_steps=max_steps, seed=seed,
                       attacks=_listed(attacks, "--attacks"), budgets=_listed(budgets, "--budgets"), dataset=dataset,
                       allow_import=allow_import)
    check_ray_address(address)
    check_writable_dir(out, "output directory", "--out")
    # Ctrl-C and SIGTERM: a unit's rows are written whole or not at all, Ray is stopped
    with interruptible("interrupted: finished units are kept; run the same command again to resume"):
        directory = run_study(spec, out, address=address, num_cpus=num_cpus, use_ray=ray_on,
                              progress=lambda msg: base.err_console.print(msg, highlight=False, markup=False))
    written = [directory / name for name in ("metrics.csv", "table1.csv", "table2.csv", "table2_paper.csv") if (directory / name).exists()]
    if plots:
        from grb_dist.semantics.plots import write_plots

        written += write_plots(directory)
    base.console.print(f"study {spec.study}: {directory}", highlight=False)
    for path in written:
        base.console.print(f"  {path}", highlight=False)


def _listed(value: Optional[str], flag: str) -> Optional[list[str]]:
    """A comma-separated option as a list; None when not given; given but empty is refused
    (``--attacks ''`` would otherwise mean the job's attacks)."""
    from grb_dist.core.errors import ConfigError

    items = split_csv(value)
    if value is not None and not items:
        raise ConfigError(f"{flag} is empty; give comma-separated values, or leave it out for the job's")
    twice = sorted({v for i, v in enumerate(items or ()) if v.lower() in {w.lower() for w in items[:i]}})
    if twice:
        raise ConfigError(f"{flag} lists {', '.join(twice)} twice; give each once")
    return items


def _check_num_cpus(num_cpus: Optional[int]) -> None:
    from grb_dist.core.errors import ConfigError

    if num_cpus is not None and num_cpus < 1:
        raise ConfigError(f"--num-cpus must be >= 1, got {num_cpus}")


def _study_spec(job: Path, k: Optional[str], models: Optional[str], epochs: Optional[int],
                dataset: Optional[Path] = None, allow_import: bool = False, **overrides):
    """The checked study of ``job`` with the command line's overrides (``--k`` and
    ``--models`` narrow its per_K and search sections too)."""
    from grb_dist.core.errors import ConfigError
    from grb_dist.semantics.spec import load_spec

    if k is not None:
        try:
            overrides["K"] = [float(v) for v in _listed(k, "--k")]
        except ValueError:
            raise ConfigError(f"--k must be comma-separated numbers, got {k!r}") from None
    spec = load_spec(job, check=False, allow_import=allow_import)
    if models is not None:
        overrides["models"] = {m: dict(spec.models.get(m, {}) or {}) for m in _listed(models, "--models")}
    if dataset is not None:
        if spec.synthetic:
            raise ConfigError(f"--dataset is for a study of a real graph (graph kind npz); study {spec.study!r} samples "
                              f"its graphs ({spec.kind}): leave --dataset out, or give a job with graph kind npz")
        overrides["graph"] = {**dict(spec.graph), "path": str(dataset)}
    if epochs is not None:
        overrides["train"] = {**dict(spec.train), "epochs": epochs}
    return load_spec(job, allow_import=allow_import, **overrides)


def _study_job(job: Optional[Path]) -> Path:
    """``job``, or the shipped study it names (default: over-robustness-csbm)."""
    import importlib.resources

    from grb_dist.core.errors import ConfigError

    shipped = importlib.resources.files("grb_dist") / "jobs" / "studies"
    studies = sorted(p.name[: -len(".yaml")] for p in shipped.iterdir() if p.name.endswith(".yaml"))
    job = job if job is not None else Path("over-robustness-csbm")
    if not job.exists() and str(job) in studies:  # a shipped study by name
        return Path(str(shipped / f"{job}.yaml"))
    if not job.exists():
        raise ConfigError(f"job file {job} does not exist; give a YAML file or a shipped study ({', '.join(studies)})")
    return job


@app.command("study-tune")
@handle_errors
def study_tune(
    output: Path = typer.Argument(..., parser=path_value, help="Where to write the tuned job (YAML): the job with its per_K section filled; - prints it to standard output (a symlink to a regular file writes its target; a device, FIFO or socket is refused)."),
    job: Optional[Path] = typer.Option(None, "--job", parser=path_value, help="Study job file with a search: section, or a shipped study (default: over-robustness-csbm)."),
    graphs: int = typer.Option(3, "--graphs", help="Graphs per K each setting is trained on (the paper: 10)."),
    k: Optional[str] = typer.Option(None, "--k", help="K values to tune, comma-separated (default: the job's)."),
    models: Optional[str] = typer.Option(None, "--models", help="Models to tune, comma-separated (default: every model of search:)."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Maximum training epochs."),
    address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address (default: a local Ray started here)."),
    num_cpus: Optional[int] = typer.Option(None, "--num-cpus", help="CPUs of the local Ray (default: all)."),
    ray_on: bool = typer.Option(True, "--ray/--no-ray", help="Train as Ray tasks (default) or one after another here."),
    allow_import: bool = AllowImport,
) -> None:
    """Per-K hyper-parameter search (Gosch et al. 2023, appendix H): the best validation accuracy
    per K.

    Every setting of the job's search: grid is trained on the study's first GRAPHS graphs of
    each K; the best per (K, model), and for <model>_lp the best of the model and of lp, go
    into per_K of a copy of the job written to OUTPUT (run it with grb-dist study --job OUTPUT).
    """
    from grb_dist.core.jobfile import load_job_document
    from grb_dist.core.paths import check_output_file
    from grb_dist.core.resources import check_ray_address
    from grb_dist.core.errors import ConfigError
    from grb_dist.semantics.tune import check_tune, tune, tuned_job
    from grb_dist.core.fileio import write_output

    job = _study_job(job)
    to_stdout = str(output) == "-"
    if not to_stdout:
        check_output_file(output, "OUTPUT")
    _check_num_cpus(num_cpus)
    data = load_job_document(job, allow_import=allow_import) or {}
    spec = _study_spec(job, k, None, epochs, allow_import=allow_import)
    search = dict(spec.search)
    if models is not None:
        names = _listed(models, "--models")
        unknown = [m for m in names if m not in search]
        if unknown:
            raise ConfigError(f"--models: {', '.join(unknown)} not in the job's search: ({', '.join(search)})")
        search = {m: search[m] for m in names}
    check_tune(spec, search, graphs)
    check_ray_address(address)
    with interruptible("interrupted: nothing was written (the tuned job is written once every setting is trained)"):
        table = tune(spec, search, graphs=graphs, address=address, num_cpus=num_cpus, use_ray=ray_on,
                     progress=lambda msg: base.err_console.print(msg, highlight=False, markup=False))
    text = tuned_job(data, spec, table, graphs)
    view = Table("K", "model", "best setting", "val accuracy")
    for row in table[table["best"]].itertuples():
        view.add_row(f"{row.K:g}", row.model, ", ".join(f"{a}={b}" for a, b in row.setting.items()), f"{row.val_accuracy:.3f}")
    if to_stdout:  # standard output is the job alone, so that it can be redirected
        base.err_console.print(view)
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_output(text.encode(), output, "OUTPUT")
        base.console.print(view)
        base.console.print(f"wrote {output}", highlight=False)


@app.command("study-plot")
@handle_errors
def study_plot(
    study_dir: Path = typer.Argument(..., parser=path_value, help="A study directory (OUT/<study>) with nodes/*.parquet."),
) -> None:
    """Re-reduce a study's rows into its tables and write its figures (PNG) under plots/."""
    from grb_dist.core.errors import ConfigError
    from grb_dist.semantics.plots import write_plots
    from grb_dist.semantics.tables import study_budgets, write_tables

    if not (study_dir / "nodes").is_dir():
        raise ConfigError(f"{study_dir} is not a study directory (no nodes/ inside)")
    written = list(write_tables(study_dir, study_budgets(study_dir)).values()) + write_plots(study_dir)
    for path in written:
        base.console.print(str(path), highlight=False)
