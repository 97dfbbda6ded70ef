"""Readers for sparse ``.npz`` files, without pickle.

Two conventions of the graph-robustness field are supported:

- ``adj_data`` / ``adj_indices`` / ``adj_indptr`` / ``adj_shape`` (+ ``attr_*``, ``labels``),
  as in the Nettack release (cora, citeseer, polblogs);
- ``adj_matrix.data`` / ``.indices`` / ``.indptr`` / ``.shape`` (+ ``attr_matrix.*``,
  ``labels``), as in the randomised-smoothing release (cora_ml).

Object arrays in these files (node and class names) are never read: every load uses
``allow_pickle=False`` and touches numeric keys only.
"""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from grb_dist.errors import DatasetError
from grb_dist.graph import Graph, canonical_edges

log = logging.getLogger(__name__)


def open_npz(path: Path) -> "np.lib.npyio.NpzFile":
    """``np.load`` with pickle disabled and file errors turned into :class:`DatasetError`."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"missing file {path}; check the path or download the dataset again")
    try:
        return np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise DatasetError(f"cannot read {path} ({exc}); the file is truncated or not an .npz, delete it and fetch it again") from None


def read_array(npz, key: str, path: Path) -> np.ndarray:
    if key not in npz.files:
        raise DatasetError(f"{path}: missing array {key!r} (found {', '.join(sorted(npz.files))})")
    try:
        return npz[key]
    except ValueError as exc:  # object arrays refuse to load without pickle
        raise DatasetError(f"{path}: array {key!r} cannot be read without pickle ({exc})") from None
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise DatasetError(f"{path}: array {key!r} is truncated ({exc}); fetch the file again") from None


def read_sparse(npz, prefix: str, sep: str, path: Path) -> sp.csr_matrix:
    """A CSR matrix stored as ``{prefix}{sep}data/indices/indptr/shape``."""
    parts = {k: read_array(npz, f"{prefix}{sep}{k}", path) for k in ("data", "indices", "indptr", "shape")}
    fmt_key = f"{prefix}{sep}format"
    fmt = read_array(npz, fmt_key, path).item() if fmt_key in npz.files else b"csr"
    fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
    if fmt not in ("csr", "csc"):
        raise DatasetError(f"{path}: sparse format {fmt!r} is not supported; save the matrix as CSR")
    kind = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
    try:
        return kind((parts["data"], parts["indices"], parts["indptr"]), shape=tuple(parts["shape"])).tocsr()
    except ValueError as exc:
        raise DatasetError(f"{path}: malformed sparse matrix {prefix!r} ({exc})") from None


def load_npz_graph(path: str | Path, name: str | None = None) -> tuple[Graph, dict]:
    """Load a graph in either ``.npz`` convention.

    Returns ``(graph, report)``; ``report`` counts what was removed while making the graph
    canonical (symmetrised, no self-loops, no duplicates). The graph has no split yet.
    Graphs without attributes (polblogs) get identity features, as is customary.
    """
    path = Path(path)
    name = name or path.stem
    npz = open_npz(path)
    with npz:
        sep = "_" if "adj_data" in npz.files else "." if "adj_matrix.data" in npz.files else None
        if sep is None:
            raise DatasetError(
                f"{path}: no adjacency found; expected keys adj_data/... or adj_matrix.data/..."
            )
        adj_prefix, attr_prefix = ("adj", "attr") if sep == "_" else ("adj_matrix", "attr_matrix")
        adj = read_sparse(npz, adj_prefix, sep, path)
        if f"{attr_prefix}{sep}data" in npz.files:
            # the N x D attribute matrix (models take dense features), never the N x N adjacency
            features = read_sparse(npz, attr_prefix, sep, path).toarray().astype(np.float32)
        else:
            features = None
        labels = read_array(npz, "labels", path).astype(np.int64)
    n = adj.shape[0]
    if adj.shape != (n, n):
        raise DatasetError(f"{path}: adjacency must be square, got {adj.shape}")
    if features is None:
        log.info("%s has no node attributes; using identity features", name)
        features = np.eye(n, dtype=np.float32)
    coo = adj.tocoo()
    edge_index, report = canonical_edges(coo.row, coo.col, n)
    report["directed_entries"] = int(coo.nnz)
    report["duplicates_or_reverse_removed"] = int(coo.nnz - report["self_loops_removed"] - 2 * report["undirected_edges"])
    graph = Graph(features=features, edge_index=edge_index, labels=labels, name=name)
    graph.validate()
    return graph, report
