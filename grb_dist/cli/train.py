"""``grb-dist train``: train one model or defense and print its accuracy per difficulty.

torch, the datasets and the models are imported when the command runs.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable, Iterator, Mapping, Optional

import typer
from rich.table import Table

import grb_dist.cli.base as base
from grb_dist.cli.base import AllowImport, DataDir, VerifyOption, app, check_threads, handle_errors, path_value


@app.command()
@handle_errors
def train(
    dataset: str = typer.Option("csbm", "--dataset", "-d", help="Catalogue name, GRB directory or .npz file."),
    model: str = typer.Option("gcn", "--model", "-m", help="Registered model or defense: a base model (appnp, gat, gatguard, gatv2, gcn, gcnsvd, gcnsvd_sparse, gin, gnnguard, jaccard, lp, mlp, prognn, prognn_lite, rgcn, sage, sgc, softmedian, tagcn) with optional suffixes _ln (layer norm), _at (adversarial training), _lp (label propagation on top), e.g. gcn_ln_at; a name registered by a package's entry points or a module:Class spec."),
    seed: Optional[int] = typer.Option(None, help="Seed of the model only: initialisation, dropout, adversarial training (default: the job's seed). The graph and split stay fixed when it changes (see --split-seed)."),
    split_seed: Optional[int] = typer.Option(None, "--split-seed", help="Seed of generated graphs (csbm, twins) and of the GRB split of graphs without one (default: the job's seed, as in a sweep)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="torch intra-op threads (1..1024; default: torch's choice)."),
    epochs: Optional[int] = typer.Option(None, help="Maximum training epochs (default: the job's)."),
    lr: Optional[float] = typer.Option(None, help="Adam learning rate (default: the job's, per model)."),
    hidden: Optional[str] = typer.Option(None, help="Hidden sizes, comma-separated (e.g. 64,64,64; default: the job's)."),
    job: Optional[Path] = typer.Option(None, "--job", parser=path_value, help="Job file with the hyper-parameters (default: the dataset's shipped job, grb_dist/jobs/<dataset>.yaml; a catalogue dataset without one: its kind's, e.g. Pro-GNN's graphs prognn-cora.yaml, said in a note; a path: the default job)."),
    allow_import: bool = AllowImport,
    normalize: str = typer.Option("arctan", help="Feature normalisation: arctan, tanh, standardize, none."),
    device: str = typer.Option("cpu", help="Torch device (cpu, cuda, cuda:1)."),
    data_dir: Optional[Path] = DataDir,
    download: bool = typer.Option(True, help="Download missing official datasets."),
    verify: bool = VerifyOption,
) -> None:
    """Train a model or defense inductively and print its accuracy on each difficulty.

    Hyper-parameters come from the dataset's job file (GRB, Zheng et al. 2021, Tables 5-10),
    flags override them.
    --seed changes the model only; --split-seed changes the generated graph and the split.
    """
    from grb_dist.core.config import to_dict
    from grb_dist.datasets import load_dataset
    from grb_dist.defenses import resolve_params, train_defense
    from grb_dist.core.errors import ConfigError
    from grb_dist.evaluation.evaluate import evaluate
    from grb_dist.models.grammar import check_name
    from grb_dist.models.tensors import check_device
    from grb_dist.models.train import TrainConfig, report_epochs
    from grb_dist.core.bounds import check_seed
    from grb_dist.sweep.job import dataset_job, load_job
    from grb_dist.sweep.preflight import check_train_inputs, check_train_memory

    check_threads(threads)
    device = str(check_device(device))
    if job is not None:
        spec = load_job(job, allow_import=allow_import, on_note=base.note)
    else:  # the dataset's job; a catalogue dataset without one runs its kind's, said in one line
        chosen = dataset_job(dataset)
        spec = chosen.load(allow_import=allow_import, on_note=base.note)
        if chosen.note:
            base.note(chosen.note)
    seed = spec.seed if seed is None else seed
    split_seed = spec.seed if split_seed is None else check_seed(split_seed, "--split-seed")
    params, overrides = resolve_params(model, spec.models)  # unknown names fail before any loading
    if hidden is not None:
        try:
            params["hidden_sizes"] = [int(h) for h in hidden.split(",")]
        except ValueError:
            raise ConfigError(f"--hidden must be comma-separated integers (e.g. 64,64), got {hidden!r}") from None
    flags = {k: v for k, v in {"epochs": epochs, "lr": lr}.items() if v is not None}
    check_train_inputs(dataset, model, params, seed)
    config = TrainConfig(**{**to_dict(spec.train), **overrides, **flags, "seed": seed})
    at = spec.adversarial_training if check_name(model).adversarial else None
    graph = load_dataset(dataset, data_dir=data_dir, normalize=normalize, seed=split_seed, download=download, verify=verify)
    check_train_memory(graph, model, params, at)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    with _epoch_progress(f"{model} on {graph.name}") as on_epoch, report_epochs(on_epoch):
        result = train_defense(model, graph, params, config, at_config=at, device=device)
    acc = evaluate(result.model, graph, device=device)
    table = Table(title=f"{model} on {graph.name}: test accuracy")
    for col in ("difficulty", "targets", "accuracy"):
        table.add_column(col)
    for d, a in acc.items():
        table.add_row(d, str(graph.targets(d).size), f"{a:.4f}")
    base.console.print(table)
    base.console.print(training_summary(result, config), highlight=False, soft_wrap=True)


def training_summary(result, config) -> str:
    """How training went, by the metric early stopping selects on (the lowest validation
    loss), and when and why it ended: ``best val loss 0.4100 at epoch 20 (val acc 0.8723);
    stopped early at epoch 50: val loss did not improve for 30 epochs (patience); 1.2 s``."""
    from grb_dist.core.text import duration, plural

    best = f"val loss {result.best_val_loss:.4f}"
    if result.epochs_run == 0:  # label propagation, a defense used as built
        return f"{best} (val acc {result.best_val_accuracy:.4f}); no training epochs; {duration(result.seconds)}"
    if result.stopped_early:
        end = (f"stopped early at epoch {result.epochs_run} of {config.epochs}: val loss did not improve for "
               f"{plural(result.epochs_run - result.best_epoch - 1, 'epoch')} (patience)")
    else:
        end = f"ran all {plural(result.epochs_run, 'epoch')}"
    return (f"best {best} at epoch {result.best_epoch + 1} (val acc {result.best_val_accuracy:.4f}); {end}; "
            f"{duration(result.seconds)}")


#: Without a terminal, ``train`` prints its progress every this many epochs.
PROGRESS_EVERY = 10


@contextlib.contextmanager
def _epoch_progress(what: str) -> Iterator[Callable[[Mapping[str, float]], None]]:
    """An ``on_epoch`` callback that shows training progress on stderr: a status line that
    is rewritten every epoch on a terminal, else one line every :data:`PROGRESS_EVERY`
    epochs (and the first)."""

    def line(row: Mapping[str, float]) -> str:
        return (f"training {what}: epoch {int(row['epoch']) + 1}/{int(row['epochs'])}, val loss {row['val_loss']:.4f}, "
                f"val acc {row['val_accuracy']:.4f}; best val loss {row['best_val_loss']:.4f} at epoch "
                f"{int(row['best_epoch']) + 1} (val acc {row['best_val_accuracy']:.4f})")

    if base.err_console.is_terminal:
        with base.err_console.status(f"training {what} ...") as status:
            yield lambda row: status.update(line(row))
    else:
        def every(row: Mapping[str, float]) -> None:
            epoch = int(row["epoch"]) + 1
            if epoch == 1 or epoch % PROGRESS_EVERY == 0:
                base.err_console.print(line(row), highlight=False, soft_wrap=True)

        yield every
