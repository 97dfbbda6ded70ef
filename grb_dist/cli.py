"""The ``grb-dist`` command line: argument parsing and dispatch only.

Errors of grb_dist (bad input) are printed as one line on stderr with exit code 2.
"""

from __future__ import annotations

import functools
import logging
import shutil
from pathlib import Path
from typing import Callable, Optional

import typer
from rich.console import Console
from rich.table import Table

from grb_dist.errors import GrbDistError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="The Graph Robustness Benchmark, distributed with Ray.")
# Wide enough for the tables when output is not a terminal (pipes, CI logs).
console = Console(width=shutil.get_terminal_size((120, 24)).columns)
err_console = Console(stderr=True, width=shutil.get_terminal_size((120, 24)).columns)

DataDir = typer.Option(None, "--data-dir", envvar="GRB_DIST_DATA", help="Cache directory of downloaded datasets [default: ~/.cache/grb-dist].")


def handle_errors(fn: Callable) -> Callable:
    """Turn a :class:`GrbDistError` into a one-line message and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except GrbDistError as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper


@app.callback()
def _main(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress of the library.")) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


@app.command()
@handle_errors
def datasets(data_dir: Optional[Path] = DataDir) -> None:
    """List the dataset catalogue and whether each dataset is available locally."""
    from grb_dist.datasets import CATALOG, is_available

    table = Table(title="grb-dist datasets")
    for col in ("name", "nodes", "edges", "features", "classes", "source", "local"):
        table.add_column(col, justify="right" if col in ("nodes", "edges", "features", "classes") else "left", no_wrap=True)
    for name in CATALOG:
        info = CATALOG.get(name)
        local = "generated" if info.source == "csbm" else ("yes" if is_available(info, data_dir) else "no")
        table.add_row(info.name, f"{info.nodes:,}", f"{info.edges:,}", str(info.features), str(info.classes), info.source, local)
    console.print(table)


@app.command()
@handle_errors
def train(
    dataset: str = typer.Option("csbm", "--dataset", "-d", help="Catalogue name, GRB directory or .npz file."),
    model: str = typer.Option("gcn", "--model", "-m", help="Registered model name (gcn, gat, gcn_ln, ...)."),
    seed: int = typer.Option(0, help="Seed of the model (and of generated graphs / splits)."),
    epochs: int = typer.Option(400, help="Maximum training epochs."),
    lr: float = typer.Option(0.01, help="Adam learning rate."),
    hidden: Optional[str] = typer.Option(None, help="Hidden sizes, comma-separated (e.g. 64,64,64)."),
    normalize: str = typer.Option("arctan", help="Feature normalisation: arctan, tanh, standardize, none."),
    device: str = typer.Option("cpu", help="Torch device (cpu, cuda, cuda:1)."),
    data_dir: Optional[Path] = DataDir,
    download: bool = typer.Option(True, help="Download missing official datasets."),
) -> None:
    """Train a model inductively and print its accuracy on each difficulty."""
    from grb_dist.datasets import load_dataset
    from grb_dist.errors import ConfigError
    from grb_dist.evaluation import evaluate
    from grb_dist.models import MODELS
    from grb_dist.models.train import TrainConfig, train as train_fn

    MODELS.get(model)  # unknown names fail before any loading
    params = {}
    if hidden:
        try:
            params["hidden_sizes"] = [int(h) for h in hidden.split(",")]
        except ValueError:
            raise ConfigError(f"--hidden must be comma-separated integers, got {hidden!r}") from None
    graph = load_dataset(dataset, data_dir=data_dir, normalize=normalize, seed=seed, download=download)
    result = train_fn(model, graph, params, TrainConfig(lr=lr, epochs=epochs, seed=seed), device=device)
    acc = evaluate(result.model, graph, device=device)
    table = Table(title=f"{model} on {graph.name} (best epoch {result.best_epoch}, {result.seconds:.1f}s)")
    for col in ("difficulty", "targets", "accuracy"):
        table.add_column(col)
    for d, a in acc.items():
        table.add_row(d, str(graph.targets(d).size), f"{a:.4f}")
    console.print(table)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
