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
import os
import stat
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
    check_regular_file(path)
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


def check_regular_file(path: Path) -> None:
    """``path`` exists and is a regular file (a symlink to one is fine): a FIFO would block
    the reader forever, a device (``/dev/urandom``) never end, a directory not be a file."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise DatasetError(f"missing file {path}; check the path or download the dataset again") from None
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
        raise DatasetError(f"{path} is {kind}, not a regular file; a dataset file must be an .npz file")


def check_allocation(path: Path, what: str, nbytes: int) -> None:
    """An array about to be allocated (``nbytes``) fits this machine's memory (half of it:
    the graph is copied on its way to tensors); otherwise one line saying how much it needs."""
    from grb_dist.core.checks import format_bytes, machine_memory

    limit = machine_memory() // 2
    if nbytes > limit:
        raise DatasetError(f"{path}: {what} would take {format_bytes(nbytes)}, more than half of this machine's "
                           f"{format_bytes(2 * limit)}; use a smaller graph or a machine with more memory")


def check_kind(arr: np.ndarray, what: str, path: Path, need: str = "real numbers") -> np.ndarray:
    """``arr`` holds real numbers (booleans, integers or floats); complex numbers, strings
    and dates are refused, saying what was found."""
    if arr.dtype.kind not in "biuf":
        found = {"c": "complex numbers", "U": "strings", "S": "byte strings", "M": "dates", "m": "time spans",
                 "O": "Python objects", "V": "records"}.get(arr.dtype.kind, str(arr.dtype))
        raise DatasetError(f"{path}: {what} must hold {need}, found {found} ({arr.dtype})")
    return arr


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
    # a compressed member holds what it declares but may unpack to far more than its file
    check_allocation(path, f"array {key!r} of shape {tuple(shape)}", declared)


def read_sparse(npz, prefix: str, sep: str, path: Path, *, adjacency: bool = False) -> sp.csr_matrix:
    """A CSR matrix stored as ``{prefix}{sep}data/indices/indptr/shape``; an ``adjacency``
    holds edges (:func:`check_edge_values`)."""
    parts = {k: read_array(npz, f"{prefix}{sep}{k}", path) for k in ("data", "indices", "indptr", "shape")}
    fmt_key = f"{prefix}{sep}format"
    fmt = read_array(npz, fmt_key, path).item() if fmt_key in npz.files else b"csr"
    fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
    if fmt not in ("csr", "csc"):
        raise DatasetError(f"{path}: sparse format {fmt!r} is not supported; save the matrix as CSR")
    kind = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
    check_compressed(parts, fmt, prefix or "adjacency", path)
    check_kind(np.asarray(parts["data"]), f"{prefix or 'adjacency'} values", path)
    if adjacency:
        check_edge_values(np.asarray(parts["data"]), path)
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


def check_edge_values(data: np.ndarray, path: Path) -> None:
    """GRB's graphs are unweighted: every stored entry is an edge. Entries of 1, or whole
    counts of a repeated edge (polblogs stores 2), are edges; NaN, infinite, negative, zero
    or fractional weights would silently become edges of weight 1, so they are refused."""
    bad = ~np.isfinite(data) | (data <= 0) | (data != np.round(data))
    if bad.any():
        first = float(data[bad][0])
        raise DatasetError(
            f"{path}: the adjacency stores {int(bad.sum()):,} entries that are not edges of weight 1 (e.g. {first!r}); "
            "GRB scores unweighted graphs: store 1 for every edge and drop the others"
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


def read_labels(labels: np.ndarray, path: Path) -> np.ndarray:
    """Class ids as int64: integers, or floats that are whole numbers."""
    labels = check_kind(np.asarray(labels).ravel(), "labels", path, "integer class ids")
    if labels.dtype.kind == "f" and (not np.isfinite(labels).all() or not np.all(labels == np.round(labels))):
        raise DatasetError(f"{path}: labels must be integer class ids, found fractional or NaN values")
    return labels.astype(np.int64)


def read_index(arr: np.ndarray, key: str, path: Path) -> np.ndarray:
    """A split's node ids as int64: integers, or floats that are whole numbers (anything else
    is refused as what it is, not as a node listed twice)."""
    arr = check_kind(np.asarray(arr).ravel(), f"split {key!r}", path, "integer node ids")
    if arr.dtype.kind == "f" and (not np.isfinite(arr).all() or not np.all(arr == np.round(arr))):
        raise DatasetError(f"{path}: split {key!r} must hold integer node ids, found fractional or NaN values")
    return arr.astype(np.int64)


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
        adj = read_sparse(npz, adj_prefix, sep, path, adjacency=True)
        n = adj.shape[0]
        if adj.shape != (n, n):
            raise DatasetError(f"{path}: adjacency must be square, got {adj.shape}")
        if f"{attr_prefix}{sep}data" in npz.files:
            # the N x D attribute matrix (models take dense features), never the N x N adjacency
            attr = read_sparse(npz, attr_prefix, sep, path)
            check_allocation(path, f"the dense {attr.shape[0]:,} x {attr.shape[1]:,} attribute matrix",
                             attr.shape[0] * attr.shape[1] * 4)
            features = attr.astype(np.float32).toarray()
        else:
            check_allocation(path, f"identity features for {n:,} nodes without attributes ({n:,} x {n:,})",
                             n * n * 4)
            features = None
        labels = read_labels(read_array(npz, "labels", path), path)
    if features is None:
        log.info("%s has no node attributes; using identity features", name)
        features = np.eye(n, dtype=np.float32)
    coo = adj.tocoo()
    edge_index, report = canonical_edges(coo.row, coo.col, n)
    report.update(edge_report(coo.row, coo.col, n))
    graph = Graph(features=features, edge_index=edge_index, labels=labels, name=name)
    graph.validate()
    return graph, report
