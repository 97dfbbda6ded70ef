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
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from grb_dist.core.errors import DatasetError

if TYPE_CHECKING:
    from grb_dist.core.graph import Graph

log = logging.getLogger(__name__)


#: The first bytes of every ``.npz`` (a zip archive).
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


def open_npz(path: Path) -> "np.lib.npyio.NpzFile":
    """``np.load`` with pickle disabled and file errors turned into :class:`DatasetError`.

    A file that is not a zip archive is refused before numpy sees it (numpy would try to
    unpickle it and suggest ``allow_pickle``, which a dataset never needs).
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"missing file {path}; check the path or download the dataset again")
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc.strerror or exc}") from None
    if head not in ZIP_MAGIC:
        what = "empty" if not head else "an HTML page" if head.lstrip()[:1] == b"<" else "not an .npz (zip) archive"
        raise DatasetError(f"{path} is {what}; it is not a dataset file: delete it and fetch it again")
    try:
        return np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        reason = type(exc).__name__ if "pickle" in str(exc) else str(exc)
        raise DatasetError(f"cannot read {path} ({reason}); the file is truncated or damaged: delete it and fetch it again") from None


def read_array(npz, key: str, path: Path) -> np.ndarray:
    if key not in npz.files:
        raise DatasetError(f"{path}: missing array {key!r} (found {', '.join(sorted(npz.files))})")
    check_member(npz, key, path)
    try:
        return npz[key]
    except ValueError as exc:
        reason = "it needs pickle" if "pickle" in str(exc) else str(exc)
        raise DatasetError(f"{path}: array {key!r} cannot be read ({reason}); fetch the file again") from None
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise DatasetError(f"{path}: array {key!r} is truncated ({exc}); fetch the file again") from None


def check_member(npz, key: str, path: Path) -> None:
    """Read the ``.npy`` header of one member before its data: object arrays are refused and
    the shape it declares must fit in the bytes the member holds (a damaged or forged header
    would otherwise make numpy allocate whatever it declares)."""
    archive = getattr(npz, "zip", None)
    if archive is None:
        return
    name = f"{key}.npy" if f"{key}.npy" in archive.namelist() else key
    try:
        info = archive.getinfo(name)
        with archive.open(name) as fh:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
            else:
                return  # numpy checks other versions itself
    except (KeyError, ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise DatasetError(f"{path}: array {key!r} has a damaged header ({type(exc).__name__}); fetch the file again") from None
    if dtype.hasobject:
        raise DatasetError(f"{path}: array {key!r} is an object array; datasets must hold numeric arrays")
    declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if declared > info.file_size:
        raise DatasetError(
            f"{path}: array {key!r} declares shape {tuple(shape)} ({declared:,} bytes) but holds {info.file_size:,}; "
            "the file is damaged: fetch it again"
        )


def read_sparse(npz, prefix: str, sep: str, path: Path) -> sp.csr_matrix:
    """A CSR matrix stored as ``{prefix}{sep}data/indices/indptr/shape``."""
    parts = {k: read_array(npz, f"{prefix}{sep}{k}", path) for k in ("data", "indices", "indptr", "shape")}
    fmt_key = f"{prefix}{sep}format"
    fmt = read_array(npz, fmt_key, path).item() if fmt_key in npz.files else b"csr"
    fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
    if fmt not in ("csr", "csc"):
        raise DatasetError(f"{path}: sparse format {fmt!r} is not supported; save the matrix as CSR")
    kind = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
    check_compressed(parts, fmt, prefix or "adjacency", path)
    try:
        return kind((parts["data"], parts["indices"], parts["indptr"]), shape=tuple(int(s) for s in parts["shape"])).tocsr()
    except ValueError as exc:
        raise DatasetError(f"{path}: malformed sparse matrix {prefix!r} ({exc})") from None


def check_compressed(parts: dict, fmt: str, what: str, path: Path) -> None:
    """The arrays of a CSR/CSC matrix are consistent: a 2-vector shape, ``indptr`` of length
    rows + 1 (CSR) starting at 0 and non-decreasing up to ``len(indices)``, every index inside
    the matrix (a column id >= N is a damaged file, not a graph)."""
    shape, indices, indptr, data = parts["shape"], parts["indices"], parts["indptr"], parts["data"]
    shape = np.asarray(shape).ravel()
    if shape.size != 2 or not np.issubdtype(shape.dtype, np.integer) or (shape < 0).any():
        raise DatasetError(f"{path}: {what} has an invalid shape {shape.tolist()}")
    rows, cols = (int(shape[0]), int(shape[1])) if fmt == "csr" else (int(shape[1]), int(shape[0]))
    for name, arr in (("indices", indices), ("indptr", indptr)):
        if np.asarray(arr).ndim != 1 or not np.issubdtype(np.asarray(arr).dtype, np.integer):
            raise DatasetError(f"{path}: {what} {name} must be a 1-D integer array")
    if np.asarray(data).ndim != 1 or len(data) != len(indices):
        raise DatasetError(f"{path}: {what} has {len(data)} values but {len(indices)} indices")
    if len(indptr) != rows + 1 or (len(indptr) and (indptr[0] != 0 or indptr[-1] != len(indices))):
        raise DatasetError(f"{path}: {what} indptr does not match its shape {rows} x {cols} and {len(indices)} entries")
    if len(indptr) > 1 and (np.diff(indptr) < 0).any():
        raise DatasetError(f"{path}: {what} indptr decreases; the file is damaged")
    if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= cols):
        bad = int(indices.max()) if int(indices.max()) >= cols else int(indices.min())
        axis = "column" if fmt == "csr" else "row"
        raise DatasetError(
            f"{path}: {what} has a {axis} index {bad} outside [0, {cols}) for a {int(shape[0])} x {int(shape[1])} "
            "matrix; the file is damaged or does not belong to this dataset"
        )


def edge_report(src: np.ndarray, dst: np.ndarray, n: int) -> dict[str, int]:
    """What making a stored (possibly directed) edge list canonical does, counted exactly:

    ``directed_entries`` = ``self_loops_removed`` + ``duplicate_entries_removed`` + the
    distinct directed pairs; ``2 * undirected_edges`` = the distinct directed pairs +
    ``reverse_edges_added`` (pairs stored in one direction only get their reverse).
    Every count is >= 0.
    """
    from grb_dist.core.graph import sorted_unique

    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    keep = src != dst
    pairs = sorted_unique(src[keep] * n + dst[keep])
    reverse = (pairs % n) * n + pairs // n
    pos = np.minimum(np.searchsorted(pairs, reverse), max(pairs.size - 1, 0))
    one_way = int((pairs[pos] != reverse).sum()) if pairs.size else 0
    return {
        "directed_entries": int(src.size),
        "duplicate_entries_removed": int(keep.sum()) - int(pairs.size),
        "reverse_edges_added": one_way,
    }


def load_npz_graph(path: str | Path, name: str | None = None) -> tuple[Graph, dict]:
    """Load a graph in either ``.npz`` convention.

    Returns ``(graph, report)``; ``report`` counts what was removed while making the graph
    canonical (symmetrised, no self-loops, no duplicates). The graph has no split yet.
    Graphs without attributes (polblogs) get identity features, as is customary.
    """
    from grb_dist.core.graph import Graph, canonical_edges

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
            features = read_sparse(npz, attr_prefix, sep, path).astype(np.float32).toarray()
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
    report.update(edge_report(coo.row, coo.col, n))
    graph = Graph(features=features, edge_index=edge_index, labels=labels, name=name)
    graph.validate()
    return graph, report
