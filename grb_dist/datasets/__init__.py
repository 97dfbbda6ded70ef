"""Datasets: the catalogue, the official GRB layout, ``.npz`` files, CSBM graphs, splits, and
Pro-GNN's graphs with published perturbations.

Importing this package does not import torch (``grb-dist datasets`` lists the catalogue and
what is cached without it): a loaded graph is a numpy-only :class:`grb_dist.core.graph.Graph`;
the torch views that models train on come from :mod:`grb_dist.models.tensors`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from grb_dist.datasets.catalog import CATALOG, DatasetInfo
from grb_dist.datasets.ref import DatasetRef, dataset_ref
from grb_dist.datasets.csbm import CBAConfig, CSBMConfig, bayes_predict, sample_cba, sample_csbm, sample_inductive_nodes
from grb_dist.datasets.grb import default_cache_dir, download_grb, is_grb_dir, load_grb_dir, verify_dataset_dir
from grb_dist.datasets.normalize import NORMALIZATIONS, normalize_features
from grb_dist.datasets.members import check_regular_file
from grb_dist.datasets.npz import DeclaredGraph, declared_graph, load_npz_graph
from grb_dist.datasets.prognn import PROGNN_DATASETS, is_prognn_available, load_prognn, prognn_folder
from grb_dist.datasets.split import grb_split
from grb_dist.core.errors import DatasetError
from grb_dist.core.graph import Graph

log = logging.getLogger(__name__)

__all__ = [
    "CATALOG", "DatasetInfo", "DatasetRef", "dataset_ref", "CSBMConfig", "CBAConfig", "DeclaredGraph", "NORMALIZATIONS", "Graph",
    "bayes_predict", "declared_graph", "default_cache_dir", "download_grb", "grb_split", "is_grb_dir",
    "load_dataset", "load_grb_dir", "load_npz_graph", "normalize_features", "sample_cba",
    "sample_csbm", "sample_inductive_nodes", "is_available", "load_prognn", "prognn_name",
]


def check_published_sizes(graph: Graph, info: DatasetInfo, where: Path) -> None:
    """The files of an official dataset hold a graph of its published size (nodes, features,
    classes): files of another dataset or release under its name are refused."""
    got = (graph.num_nodes, graph.num_features, int(graph.num_classes))
    want = (info.nodes, info.features, info.classes)
    if got != want:
        raise DatasetError(
            f"the files in {where} hold {got[0]:,} nodes, {got[1]:,} features and {got[2]} classes, but {info.name} has "
            f"{want[0]:,}, {want[1]:,} and {want[2]}: they are not the official {info.name} files; delete them and "
            "download again, or pass --no-verify to use them anyway"
        )


def prognn_name(catalogue_name: str) -> str:
    """Pro-GNN's name of a ``prognn-*`` catalogue entry (``prognn-cora-ml`` -> ``cora_ml``)."""
    return next(k for k, v in PROGNN_DATASETS.items() if v == catalogue_name)


def is_available(info: DatasetInfo, data_dir: str | Path | None = None) -> bool:
    """Whether a catalogue dataset can be loaded without a download."""
    if info.source == "csbm":
        return True
    if info.source == "prognn":
        return is_prognn_available(prognn_name(info.name), data_dir)
    return is_grb_dir(Path(data_dir or default_cache_dir()) / info.name)


def load_dataset(
    name: "str | Path | Graph",
    *,
    data_dir: str | Path | None = None,
    normalize: str = "arctan",
    seed: int = 0,
    download: bool = True,
    verify: bool = True,
) -> Graph:
    """Load a dataset by catalogue name or path, split and with normalised features.

    Args:
        name: a catalogue name (``csbm``, ``grb-cora``, ``csbm-grb-aminer``, ``prognn-cora``
            ...), a directory in the GRB layout, an ``.npz`` file in the field's sparse
            convention, or a :class:`Graph` already in memory (e.g.
            :func:`grb_dist.datasets.pyg.from_pyg`'s), split (when it has no split) and
            normalised like a loaded one.
        data_dir: cache directory of downloaded datasets (default ``$GRB_DIST_DATA`` or
            ``~/.cache/grb-dist``); Pro-GNN's files are read from ``$GRB_DIST_PROGNN`` when
            it is set, else cached in ``<data_dir>/prognn``.
        normalize: feature normalisation (``arctan``, ``tanh``, ``standardize``, ``none``).
        seed: seed of generated graphs, of the GRB split of graphs without one and of the
            tie-breaking of the difficulty bands of Pro-GNN's test sets.
        download: fetch missing official datasets.
        verify: compare official files with the catalogue's sizes and SHA-256 (where it
            records them) and the loaded graph with the published node, feature and class
            counts; ``False`` (``--no-verify``) keeps only the parse checks.
    """
    if normalize not in NORMALIZATIONS:
        normalize_features(None, normalize)  # raises the standard error
    ref = None if isinstance(name, Graph) else dataset_ref(name)  # catalogue name or path: one rule
    if isinstance(name, Graph):
        graph = name
    elif ref.catalogue is not None:
        info = CATALOG.get(ref.catalogue)
        if info.source == "csbm":
            graph, _ = sample_csbm(info.csbm, seed=seed, name=info.name)
        elif info.source == "prognn":
            graph = load_prognn(prognn_name(info.name), data_dir=data_dir, download=download, verify=verify, seed=seed)
            if verify:
                check_published_sizes(graph, info, prognn_folder(None, data_dir).path)
        else:
            cache = Path(data_dir) if data_dir else default_cache_dir()
            target = cache / info.name
            if not is_grb_dir(target):
                if not download:
                    raise DatasetError(f"{info.name} is not in {cache}; run without --no-download or place its files in {target}")
                download_grb(info.name, info.urls, cache, checksums=info.checksums, verify=verify)
            elif verify:
                verify_dataset_dir(target, info.checksums, info.name)
            graph = load_grb_dir(target, info.name)
            if verify:
                check_published_sizes(graph, info, target)
    elif (path := ref.path or Path(ref.given)).is_dir():
        graph = load_grb_dir(path)
    elif os.path.lexists(path) and path.suffix == ".npz":  # a FIFO, a device or a link loop: refused as such
        graph, report = load_npz_graph(path)
        log.info("loaded %s: %s", path, report)
    elif os.path.lexists(path):
        check_regular_file(path)
        raise DatasetError(f"{path} is neither a GRB dataset directory nor an .npz file")
    elif path.suffix == ".npz" or len(path.parts) > 1:
        raise DatasetError(f"no dataset at {path}: the path does not exist; check it, or use a catalogue name")
    else:
        CATALOG.get(str(name))  # raises UnknownNameError listing the catalogue
        raise AssertionError("unreachable")
    if not graph.split:
        graph = graph.with_split(grb_split(graph.degrees(), seed=seed))
    graph = graph.with_features(normalize_features(graph.features, normalize))
    return graph.validate()
