"""Readers for sparse ``.npz`` files, without pickle.

Two conventions of the graph-robustness field are supported:

- ``adj_data`` / ``adj_indices`` / ``adj_indptr`` / ``adj_shape`` (+ ``attr_*``, ``labels``),
  as in the Nettack release (cora, citeseer, polblogs);
- ``adj_matrix.data`` / ``.indices`` / ``.indptr`` / ``.shape`` (+ ``attr_matrix.*``,
  ``labels``), as in the randomised-smoothing release (cora_ml).

Object arrays in these files (node and class names) are never read: every load uses
``allow_pickle=False`` and touches numeric keys only. Before any array is unpacked, the sizes
the files declare (``.npy`` headers and the tiny ``shape`` arrays, :func:`declared_graph`)
are checked against this machine's memory; the GRB layout (:mod:`grb_dist.datasets.grb`) is
read through the same functions. Each member is read the bounded way of
:mod:`grb_dist.datasets.members` (its zip sizes and ``.npy`` header first).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from grb_dist.core.arrays import abs_max, count_nonfinite
from grb_dist.core.errors import DatasetError
from grb_dist.datasets.members import (
    check_allocation, check_header_fits, check_kind, check_regular_file, member_header, open_npz, read_array,
)

if TYPE_CHECKING:
    from grb_dist.core.graph import Graph

log = logging.getLogger(__name__)


#: The largest magnitude a float32 holds (features are float32 in models).
FLOAT32_MAX = float(np.finfo(np.float32).max)


def _check_rows(npz, prefix: str, shape: tuple[int, int], path: Path, what: str) -> None:
    """A stored CSR (CSC) matrix whose ``shape`` declares R rows (C columns) has an ``indptr``
    of R + 1 (C + 1) entries, read from its header: a shape that its arrays cannot hold is a
    damaged file, said before the declared size is judged."""
    key = f"{prefix}indptr"
    header = member_header(npz, key, path) if key in npz.files else None
    if header is None:
        return
    check_header_fits(path, key, header)
    csc = sparse_format(npz, prefix, path) == "csc"
    count, unit = (shape[1], "columns") if csc else (shape[0], "rows")
    if len(header[0]) == 1 and header[0][0] != count + 1:
        raise DatasetError(f"{path}: {what} declares {count:,} {unit} but its indptr holds "
                           f"{max(0, header[0][0] - 1):,}; the file is damaged: fetch it again")


def sparse_format(npz, prefix: str, path: Path) -> str:
    """The stored ``{prefix}format`` of a sparse matrix (``csr`` when absent, as scipy saves it):
    a single short string, its header read first."""
    key = f"{prefix}format"
    if key not in npz.files:
        return "csr"
    header = member_header(npz, key, path)
    if header is not None and (math.prod(header[0]) != 1 or header[1].itemsize > 64):
        raise DatasetError(f"{path}: {key!r} must hold one short string (csr or csc), its header declares "
                           f"{header[0]} of {header[1]}; the file is damaged: fetch it again")
    fmt = read_array(npz, key, path).item()
    return fmt.decode(errors="replace") if isinstance(fmt, bytes) else str(fmt)


@dataclass(frozen=True)
class SparseHeaders:
    """What a stored CSR/CSC matrix declares, read from its members' headers and its two-number
    ``shape`` alone: ``rows`` x ``cols``, ``entries`` stored, ``nbytes`` of its arrays unpacked."""

    rows: int
    cols: int
    entries: int
    nbytes: int


def sparse_headers(npz, prefix: str, path: Path, what: str, fmt: str | None = None) -> SparseHeaders:
    """Check a stored sparse matrix ``{prefix}data/indices/indptr/shape`` before any of its
    arrays is read: every member present, numeric, holding the bytes its header declares
    (:func:`~grb_dist.datasets.members.check_header_fits`), ``data`` and ``indices`` vectors
    of the same length, ``indptr`` one longer than the rows (CSC: columns) ``shape`` declares;
    then the arrays together must fit half of this machine's memory. A member whose length
    disagrees with the others' is a damaged (or forged) file, refused before it is inflated."""
    fmt = fmt or sparse_format(npz, prefix, path)
    headers = {}
    for k in ("data", "indices", "indptr", "shape"):
        key = f"{prefix}{k}"
        if key not in npz.files:
            raise DatasetError(f"{path}: missing array {key!r} (found {', '.join(sorted(npz.files))})")
        header = member_header(npz, key, path)
        if header is None:
            return SparseHeaders(0, 0, 0, 0)  # not a zip archive: read as numpy reads it
        if header[1].hasobject:
            raise DatasetError(f"{path}: array {key!r} is an object array; datasets must hold numeric arrays")
        check_header_fits(path, key, header)
        headers[k] = header
    rows, cols = _shape_array(npz, f"{prefix}shape", path)
    damaged = "the file is damaged: fetch it again"
    for k in ("data", "indices", "indptr"):
        if len(headers[k][0]) != 1:
            raise DatasetError(f"{path}: {what} {k} must be a vector, its header declares shape {headers[k][0]}; "
                               f"{damaged}")
    values, indices, indptr = (headers[k][0][0] for k in ("data", "indices", "indptr"))
    if values != indices:
        raise DatasetError(f"{path}: {what} declares {values:,} values but {indices:,} indices (from their headers: "
                           f"one value per index); {damaged}")
    count, unit = (cols, "columns") if fmt == "csc" else (rows, "rows")
    if indptr != count + 1:
        raise DatasetError(f"{path}: {what} declares {count:,} {unit} but its indptr holds {max(0, indptr - 1):,}; "
                           f"{damaged}")
    nbytes = sum(math.prod(headers[k][0]) * headers[k][1].itemsize for k in ("data", "indices", "indptr"))
    check_allocation(path, f"{what} ({rows:,} x {cols:,}, {indices:,} entries)", nbytes)
    return SparseHeaders(rows, cols, indices, nbytes)


def read_sparse(npz, prefix: str, sep: str, path: Path, *, adjacency: bool = False) -> sp.csr_matrix:
    """A CSR matrix stored as ``{prefix}{sep}data/indices/indptr/shape``; an ``adjacency``
    holds edges (:func:`check_edge_values`). Its headers are checked against each other
    (:func:`sparse_headers`) before any array is read."""
    fmt = sparse_format(npz, f"{prefix}{sep}", path)
    if fmt not in ("csr", "csc"):
        raise DatasetError(f"{path}: sparse format {fmt!r} is not supported; save the matrix as CSR")
    sparse_headers(npz, f"{prefix}{sep}", path, prefix or "adjacency", fmt)
    parts = {k: read_array(npz, f"{prefix}{sep}{k}", path) for k in ("data", "indices", "indptr", "shape")}
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


def read_ids(arr: np.ndarray, what: str, path: Path, need: str) -> np.ndarray:
    """Integer ids as int64 from a vector (N, N x 1 or 1 x N): integers, or floats that are
    whole numbers. Fractions, NaN and values beyond 64-bit integers are refused as what they
    are (a cast would turn 1e30 into a negative id and blame the id)."""
    arr = check_kind(np.asarray(arr), what, path, need)
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.ravel()
    if arr.ndim != 1:
        raise DatasetError(f"{path}: {what} must be a vector of {need}, got shape {arr.shape}"
                           + ("; one-hot rows? store labels.argmax(1)" if what == "labels" and arr.ndim == 2 else ""))
    if arr.dtype.kind == "f" and (not np.isfinite(arr).all() or not np.all(arr == np.round(arr))):
        raise DatasetError(f"{path}: {what} must hold {need}, found fractional or NaN values")
    if arr.size and arr.dtype.kind in "fu" and float(np.abs(arr).max()) >= 2**63:
        raise DatasetError(f"{path}: {what} must hold {need}, found {float(np.abs(arr).max()):.3g} (beyond 64-bit "
                           "integers)")
    return arr.astype(np.int64)


def read_labels(labels: np.ndarray, path: Path) -> np.ndarray:
    """Class ids as int64 (:func:`read_ids`; booleans are the classes 0 and 1)."""
    return read_ids(labels, "labels", path, "integer class ids")


def read_index(arr: np.ndarray, key: str, path: Path) -> np.ndarray:
    """A split's node ids as int64 (:func:`read_ids`); a boolean mask is refused as a mask
    (cast to ids it would list nodes 0 and 1 many times)."""
    if np.asarray(arr).dtype.kind == "b":
        raise DatasetError(f"{path}: split {key!r} is a boolean mask, not node ids; store the ids of its nodes "
                           "(numpy.flatnonzero(mask))")
    return read_ids(arr, f"split {key!r}", path, "integer node ids")


def check_features(values: np.ndarray, shape: tuple[int, ...], path: Path, what: str = "features") -> None:
    """Node features are an N x D matrix (D >= 1) of finite real numbers within float32's
    range (models compute in float32: 1e300 would become inf). ``values``: the dense matrix,
    or the stored values of a sparse one."""
    check_kind(values, what, path)
    if len(shape) != 2:
        raise DatasetError(f"{path}: {what} must be an N x D matrix, got shape {tuple(shape)}")
    if shape[1] == 0:
        raise DatasetError(f"{path}: {what} have no columns (shape {tuple(shape)}); every node needs at least one "
                           "feature" + (" (leave the attributes out for identity features)" if what == "attributes" else ""))
    if values.dtype.kind != "f" or not values.size:
        return
    bad = count_nonfinite(values)  # block by block: no temporary of the matrix's size
    if bad:
        raise DatasetError(f"{path}: {what} hold {bad:,} NaN or infinite values; clean or impute them first")
    top = abs_max(values)
    if top > FLOAT32_MAX:
        raise DatasetError(f"{path}: {what} hold values up to {top:.3g}, beyond float32's range ({FLOAT32_MAX:.3g}) "
                           "that models compute in; rescale them")


# --------------------------------------------------------------------------- declared sizes


@dataclass(frozen=True)
class DeclaredGraph:
    """The sizes a dataset's files declare, read without unpacking any array.

    Attributes:
        nodes: N, the adjacency's rows.
        features: D, feature columns (N for a graph without attributes: identity features).
        entries: stored adjacency entries (one or both directions of each edge).
        identity: the graph has no attributes and gets N x N identity features.
    """

    nodes: int
    features: int
    entries: int
    identity: bool = False
    #: bytes of a dense feature array as stored (0: sparse attributes or identity features)
    stored_bytes: int = 0
    #: the stored dense features are float32 (the loaded graph uses them without a copy)
    stored_float32: bool = False

    @property
    def nbytes(self) -> int:
        """The memory loading the graph holds at its peak (a lower bound): the features as
        stored (a dense array, unpacked), their float32 copy (unless stored as float32; a
        sparse or identity matrix is made dense), the normalised copy
        (:func:`~grb_dist.datasets.normalize.normalize_features` allocates nothing else of
        their size), int64 ``edge_index`` (2 x at least the stored entries) and labels. A
        sweep then puts the normalised graph in Ray's object store: by then the stored
        features are freed, so the driver's copy and the store's (2 x the float32 features)
        stay within the same count."""
        dense = 4 * self.nodes * self.features
        copies = self.stored_bytes + (0 if self.stored_float32 else dense) + dense
        return copies + 16 * self.entries + 8 * self.nodes

    def describe(self) -> str:
        edges = f"{self.entries:,} adjacency entries"
        held = ("the stored features and their normalised copy" if self.stored_float32 else
                "the stored features, their float32 copy and the normalised copy" if self.stored_bytes else
                "the dense float32 features and their normalised copy")
        if self.identity:
            return (f"identity features for {self.nodes:,} nodes without attributes ({self.nodes:,} x "
                    f"{self.nodes:,}) and {edges} (loading holds {held})")
        return (f"{self.nodes:,} nodes with a dense {self.nodes:,} x {self.features:,} attribute matrix and {edges} "
                f"(loading holds {held})")


def _shape_array(npz, key: str, path: Path) -> tuple[int, int]:
    """A sparse matrix's stored ``shape``: two non-negative integers (its header is read first)."""
    header = member_header(npz, key, path)
    if header is not None and math.prod(header[0]) != 2:
        raise DatasetError(f"{path}: {key!r} must hold the two numbers of a matrix shape, got an array of shape "
                           f"{header[0]}; the file is damaged")
    shape = np.asarray(read_array(npz, key, path)).ravel()
    if shape.size != 2 or not np.issubdtype(shape.dtype, np.integer) or (shape < 0).any():
        raise DatasetError(f"{path}: {key!r} holds an invalid matrix shape {shape.tolist()}")
    return int(shape[0]), int(shape[1])


def _entries(npz, key: str, path: Path) -> int:
    """The length ``key``'s header declares (0 when not a vector), which its member must hold."""
    header = member_header(npz, key, path)
    if header is not None:
        check_header_fits(path, key, header)
    return int(header[0][0]) if header is not None and len(header[0]) == 1 else 0


def npz_convention(npz, path: Path) -> tuple[str, str, str]:
    """``(separator, adjacency prefix, attribute prefix)`` of a single-file ``.npz``."""
    if "adj_data" in npz.files:
        return "_", "adj", "attr"
    if "adj_matrix.data" in npz.files:
        return ".", "adj_matrix", "attr_matrix"
    raise DatasetError(f"{path}: no adjacency found; expected keys adj_data/... or adj_matrix.data/...")


def declared_graph(path: str | Path) -> DeclaredGraph:
    """The sizes a dataset declares (a directory in the GRB layout or a single ``.npz``),
    from its ``.npy`` headers and the two-number ``shape`` arrays only: nothing large is read,
    so this is safe on a file that would not fit in memory. Files are checked to be regular
    ``.npz`` archives; the loaders check the arrays' consistency."""
    path = Path(path)
    if path.is_dir():
        files = {f: path / f for f in ("adj.npz", "features.npz")}
        for f in files.values():
            check_regular_file(f)
        with open_npz(files["adj.npz"]) as npz:
            adj_shape = _shape_array(npz, "shape", files["adj.npz"])
            nodes = adj_shape[0]
            _check_rows(npz, "", adj_shape, files["adj.npz"], "the adjacency")
            entries = _entries(npz, "indices", files["adj.npz"])
        with open_npz(files["features.npz"]) as npz:
            header = member_header(npz, "data", files["features.npz"])
            stored = check_header_fits(files["features.npz"], "data", header) if header is not None else 0
        shape = header[0] if header is not None else ()
        rows, columns = (shape[0], math.prod(shape[1:])) if len(shape) > 1 else (nodes, 1)
        float32 = header is not None and header[1] == np.float32
        return DeclaredGraph(max(nodes, rows), columns, entries, stored_bytes=stored, stored_float32=float32)
    with open_npz(path) as npz:
        sep, adj, attr = npz_convention(npz, path)
        adj_shape = _shape_array(npz, f"{adj}{sep}shape", path)
        nodes = adj_shape[0]
        _check_rows(npz, f"{adj}{sep}", adj_shape, path, "the adjacency")
        entries = _entries(npz, f"{adj}{sep}indices", path)
        if f"{attr}{sep}data" not in npz.files:
            return DeclaredGraph(nodes, nodes, entries, identity=True)
        attr_shape = _shape_array(npz, f"{attr}{sep}shape", path)
        _check_rows(npz, f"{attr}{sep}", attr_shape, path, "the attribute matrix")
        return DeclaredGraph(nodes, attr_shape[1], entries)


def check_declared(path: Path, size: DeclaredGraph) -> None:
    """The graph a dataset declares can be loaded here: node ids fit the int64 edge keys,
    and its arrays (:attr:`DeclaredGraph.nbytes`) half of this machine's memory. Runs before
    any array of the graph is unpacked."""
    from grb_dist.core.graph import MAX_NODES

    if size.nodes > MAX_NODES:
        raise DatasetError(f"{path} declares {size.nodes:,} nodes, more than the {MAX_NODES:,} whose edges fit 64-bit "
                           "keys (u * N + v); the file is damaged or the graph too large for grb-dist")
    check_allocation(path, size.describe(), size.nbytes)


def load_npz_graph(path: str | Path, name: str | None = None) -> tuple[Graph, dict]:
    """Load a graph in either ``.npz`` convention.

    Returns ``(graph, report)``; ``report`` counts what was removed while making the graph
    canonical (symmetrised, no self-loops, no duplicates). The graph has no split yet.
    Graphs without attributes (polblogs) get identity features, as is customary.
    """
    from grb_dist.core.graph import Graph, canonical_edges

    path = Path(path)
    name = name or path.stem
    check_regular_file(path)
    check_declared(path, declared_graph(path))
    npz = open_npz(path)
    with npz:
        sep, adj_prefix, attr_prefix = npz_convention(npz, path)
        adj = read_sparse(npz, adj_prefix, sep, path, adjacency=True)
        n = adj.shape[0]
        if adj.shape != (n, n):
            raise DatasetError(f"{path}: adjacency must be square, got {adj.shape}")
        if f"{attr_prefix}{sep}data" in npz.files:
            # the N x D attribute matrix (models take dense features), never the N x N adjacency
            attr = read_sparse(npz, attr_prefix, sep, path)
            if attr.shape[0] != n:
                raise DatasetError(f"{path}: the attribute matrix has {attr.shape[0]:,} rows but the adjacency "
                                   f"{n:,} nodes; one row of attributes per node")
            check_features(attr.data, attr.shape, path, "attributes")
            features = attr.astype(np.float32).toarray()
        else:
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
