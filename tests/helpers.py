"""Shared helpers of the test-suite: tiny graphs, where the real datasets are found, and the
subprocesses that tests interrupt (their signal dispositions, a sweep that pauses mid-run)."""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path

import numpy as np

from grb_dist.datasets.csbm import CSBMConfig, sample_csbm
from grb_dist.datasets.split import grb_split
from grb_dist.core.graph import Graph, canonical_edges

#: The environment variable naming a folder of real test graphs (layout below).
DATA_ENV = "GRB_DIST_TEST_DATA"
#: The real graphs the tests read, relative to a data folder: Cora in the GRB layout (an early
#: GRB release: 2,708 nodes, 1,433 features), graphs in the ``.npz`` convention of the field, and
#: Pro-GNN's published perturbations (``meta/``, ``nettack/``, ``splits/``; their base graphs are
#: the ``npz/`` folder beside it).
CORA_LEGACY = "grb-format/cora-legacy"
NPZ = "npz"
PROGNN = "prognn"


def data_folders() -> list[Path]:
    """Where real test graphs are looked for, in order: ``$GRB_DIST_TEST_DATA``, a
    ``shared/datasets`` folder beside the repository, then ``test-data/`` in the download
    cache (``$GRB_DIST_DATA`` or ``~/.cache/grb-dist``)."""
    from grb_dist.datasets.grb import default_cache_dir

    folders = [Path(os.environ[DATA_ENV]).expanduser()] if os.environ.get(DATA_ENV) else []
    folders.append(Path(__file__).resolve().parents[2] / "shared" / "datasets")
    folders.append(default_cache_dir() / "test-data")
    return folders


def find_data(relative: str) -> Path | None:
    """The first folder of :func:`data_folders` that has ``relative``, else None."""
    return next((folder / relative for folder in data_folders() if (folder / relative).exists()), None)


def tiny_csbm(n: int = 300, classes: int = 3, features: int = 16, seed: int = 0, K: float = 3.0) -> Graph:
    """A small, well separated CSBM graph with a GRB split."""
    cfg = CSBMConfig(num_nodes=n, num_classes=classes, num_features=features, K=K, deg_same=4.0, deg_diff=0.5)
    g, _ = sample_csbm(cfg, seed=seed, name="tiny")
    return g.with_split(grb_split(g.degrees(), seed=seed))


def path_graph(n: int = 30) -> Graph:
    """A path 0-1-...-(n-1) with 2 classes and one-hot-ish features, split by the GRB scheme."""
    src = np.arange(n - 1)
    ei, _ = canonical_edges(src, src + 1, n)
    x = np.zeros((n, 4), dtype=np.float32)
    y = (np.arange(n) >= n // 2).astype(np.int64)
    x[np.arange(n), y] = 1.0
    g = Graph(features=x, edge_index=ei, labels=y, name="path")
    return g.with_split(grb_split(g.degrees(), seed=0))


def small(**changes) -> dict:
    """A small sweep job (as a dict) with ``changes`` applied at the top level."""
    base = {
        "dataset": "csbm", "seed": 0, "repeats": 2, "difficulties": ["easy", "full"],
        "train": {"epochs": 20}, "models": {"gcn": {"hidden_sizes": [8]}},
        "defenses": ["gcn", "mlp"], "surrogates": ["gcn"],
        "attack": {"n_inject": 5, "edges_per_node": 3, "steps": 2},
        "budgets": {"full": {"n_inject": 8}}, "attacks": {"fgsm": {}},
    }
    base.update(changes)
    return base


def default_signals() -> None:
    """Run in a driver's child before it starts: SIGINT and SIGTERM at their defaults. A
    background job of a non-interactive shell (``nohup bash .ci/run &``, some CI runners)
    starts with SIGINT ignored, which a child inherits and a CLI rightly leaves alone; the
    tests that send it must not depend on how the suite was started."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


#: A ``grb-dist sweep`` whose progress display, once ``after`` cells are scored in this run,
#: writes a marker file (the count) and waits until the test removes it (at most 300 s): a
#: test's signal or fault then lands mid-sweep, with cells left to compute however fast the
#: machine is (a sweep interrupted when its first rows appear may already have scored every
#: cell on a quick machine). Rows are buffered or written as ``--flush-rows`` says.
PAUSING_DRIVER = """
import sys, time
from pathlib import Path
import grb_dist.sweep.progress as progress
marker, after = Path(sys.argv[1]), int(sys.argv[2])
shown = progress.PlainProgress.__call__
paused = []
def pause(self, p):
    shown(self, p)
    if p.computed >= after and not paused:
        paused.append(p.computed)
        marker.write_text(str(p.computed))
        deadline = time.monotonic() + 300
        while marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
progress.PlainProgress.__call__ = pause
from grb_dist.cli import app
app(sys.argv[3:], prog_name="grb-dist")
"""


def pausing_sweep(marker: Path, after: int) -> list[str]:
    """The command line, up to the sweep's own arguments, of a sweep that pauses once
    ``after`` cells are scored, ``marker`` then holding the count, until ``marker`` is
    removed (:data:`PAUSING_DRIVER`)."""
    script = marker.with_suffix(".py")
    script.write_text(PAUSING_DRIVER)
    return [sys.executable, str(script), str(marker), str(after)]


def wait_for(marker: Path, proc, describe, timeout: float = 300) -> None:
    """Until ``marker`` exists; fails (with ``describe()``) if ``proc`` ends or time runs out."""
    import time

    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, describe()
        time.sleep(0.1)


def whole_graph_outcomes(graph: Graph, model, mod) -> tuple[np.ndarray, np.ndarray]:
    """Each target of ``mod`` (a targeted modification): ``model``'s prediction and margin
    there with its own flips applied to the whole graph, the reference the per-target
    scorer's local evaluations are held to."""
    import torch

    from grb_dist.models.tensors import apply_modification, graph_tensors

    clean = graph_tensors(graph)
    preds, margs = [], []
    with torch.no_grad():
        for t in mod.targets.tolist():
            pg = apply_modification(clean, mod.of(t))
            z = model(pg.x, pg.edge_index)[t].double().numpy()
            y = int(graph.labels[t])
            preds.append(int(z.argmax()))
            margs.append(z[y] - np.delete(z, y).max())
    return np.array(preds), np.array(margs)


def free_port() -> int:
    """A TCP port free on this machine now (for a server a test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
