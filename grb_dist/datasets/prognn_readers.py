"""Reading the files of Pro-GNN's layout: splits, attacked-node lists and perturbed adjacencies.

What is in these files decides a poisoning run: a split which nodes are scored, an
attacked-node list which are targeted, a perturbed adjacency the graph every defense is trained
on. Each is read once, bounded by the graph's size before a byte is parsed (:func:`json_limit`,
:func:`matrix_limit`), and returned with the SHA-256 of the very bytes parsed
(:func:`file_digest`): what a run records of it.

- JSON (:func:`load_json`): an object of flat lists, its nesting and numbers ones Python
  reads; a node list (:func:`read_node_list`) holds distinct integer ids inside the graph.
- A perturbed adjacency (:func:`load_published`): a ``scipy.sparse.save_npz`` file, its
  ``.npz`` headers and shape checked first (N x N for the graph's N, members consistent, at
  most N(N-1) entries; :mod:`grb_dist.datasets.members`), then each entry once, 0/1, no
  self-loop, symmetric.

Each defect is one line naming the file. Where the files are found or downloaded, and the
graph they belong to, is :mod:`grb_dist.datasets.prognn`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from grb_dist.core.errors import DatasetError
from grb_dist.datasets.members import check_allocation, open_npz, read_bounded
from grb_dist.datasets.npz import _shape_array, read_sparse, sparse_headers

#: The largest split or attacked-node JSON read (Pro-GNN's largest, pubmed's split, is 127 kB).
MAX_JSON_BYTES = 64 << 20


def json_limit(num_nodes: int) -> int:
    """The most bytes a split or node-list file of a ``num_nodes``-node graph is read with: room
    for every node in each of a few lists, however indented (Pro-GNN's are 6-7 bytes a node),
    at most :data:`MAX_JSON_BYTES`."""
    return min(MAX_JSON_BYTES, (1 << 20) + 64 * max(int(num_nodes), 0))


def file_digest(data: bytes) -> str:
    """The SHA-256 of a file's bytes (hex): what a run records of a file it read."""
    return hashlib.sha256(data).hexdigest()


def load_json(path: Path, limit: int = MAX_JSON_BYTES) -> tuple[str, dict]:
    """``(sha256 of its bytes, object)`` of a JSON object file of at most ``limit`` bytes,
    its size checked before it is read. Malformed text, numbers Python does not read and
    nesting deeper than the parser's limit are one line naming the file."""
    data = read_bounded(path, limit, "a split or node list")
    try:
        value = json.loads(data)
    except RecursionError:
        raise DatasetError(f"{path} nests its JSON deeper than a node list does (an object of flat lists); the file is "
                           "damaged: fetch it again") from None
    except (ValueError, OverflowError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise DatasetError(f"{path} is not valid JSON ({type(exc).__name__}); fetch the file again") from None
    if not isinstance(value, dict):
        raise DatasetError(f"{path} holds a JSON {type(value).__name__}, not an object of node lists")
    return file_digest(data), value


def read_json(path: Path, limit: int = MAX_JSON_BYTES) -> dict:
    """A JSON object of at most ``limit`` bytes (:func:`load_json`)."""
    return load_json(path, limit)[1]


def read_node_list(data: dict, key: str, path: Path, num_nodes: int) -> np.ndarray:
    """``data[key]``: distinct integer node ids in ``[0, num_nodes)``, as int64 in file order.
    Each defect is one line naming it: a missing key, more ids than the graph has nodes, an
    entry that is not an integer, an id outside the graph (any size: 2**64 is named as it
    is), an id listed twice."""
    if key not in data:
        raise DatasetError(f"{path}: missing {key!r} (found {', '.join(sorted(map(str, data)))[:200]})")
    values = data[key]
    if not isinstance(values, list):
        raise DatasetError(f"{path}: {key!r} must be a list of integer node ids, found a JSON "
                           f"{type(values).__name__}")
    if len(values) > num_nodes:
        raise DatasetError(f"{path}: {key!r} lists {len(values):,} nodes, more than the graph's {num_nodes:,}: ids "
                           "repeat or the file belongs to another graph")
    kinds = {bool: "a boolean", type(None): "null", str: "a string", list: "a list", dict: "an object"}
    for v in values:
        if type(v) is not int:
            found = repr(v) if type(v) is float else kinds.get(type(v), type(v).__name__)
            raise DatasetError(f"{path}: {key!r} must be a list of integer node ids, found {found}")
    if values and (min(values) < 0 or max(values) >= num_nodes):
        out = max(values) if max(values) >= num_nodes else min(values)
        shown = str(out) if len(str(out)) <= 30 else f"{str(out)[:12]}... ({len(str(out))} digits)"
        raise DatasetError(f"{path}: {key!r} names node {shown}, outside the graph's {num_nodes:,} nodes; the file "
                           "belongs to another graph")
    ids = np.asarray(values, dtype=np.int64)
    ordered = np.sort(ids)
    twice = ordered[1:][ordered[1:] == ordered[:-1]]
    if twice.size:
        raise DatasetError(f"{path}: {key!r} lists node {int(twice[0])} twice ({np.unique(twice).size:,} nodes more "
                           "than once); the file is damaged")
    return ids


def read_split(path: Path, num_nodes: int) -> dict[str, np.ndarray]:
    """Pro-GNN's split file: ``train``, ``val``, ``test`` node ids (sorted int64)."""
    data = read_json(path, json_limit(num_nodes))
    return {k: np.sort(read_node_list(data, f"idx_{k}", path, num_nodes)) for k in ("train", "val", "test")}


def load_attacked_nodes(path: Path, num_nodes: int) -> tuple[str, np.ndarray]:
    """``(sha256 of the file, the nodes)`` of a published Nettack set's attacked nodes
    (``attacked_test_nodes``, sorted int64)."""
    digest, data = load_json(path, json_limit(num_nodes))
    return digest, np.sort(read_node_list(data, "attacked_test_nodes", path, num_nodes))


def read_attacked_nodes(path: Path, num_nodes: int) -> np.ndarray:
    """The nodes a published Nettack set attacked (``attacked_test_nodes``), sorted int64."""
    return load_attacked_nodes(path, num_nodes)[1]


def matrix_limit(num_nodes: int) -> int:
    """The most bytes a perturbed adjacency file of a ``num_nodes``-node graph is read with:
    every pair of distinct nodes stored, 8-byte values and indices (a file cannot need more),
    and at most half of this machine's memory."""
    from grb_dist.core.resources import machine_memory

    n = max(int(num_nodes), 0)
    return min(16 * n * max(n - 1, 0) + 8 * (n + 1) + (1 << 16), machine_memory() // 2)


def published_bytes(path: Path, num_nodes: int) -> bytes:
    """The bytes of a perturbed adjacency file for a ``num_nodes``-node graph, bounded by
    :func:`matrix_limit` before anything is read."""
    return read_bounded(path, matrix_limit(num_nodes), f"a perturbed adjacency of a {num_nodes:,}-node graph")


def load_published(path: Path, num_nodes: int, data: bytes | None = None) -> tuple[str, np.ndarray]:
    """``(sha256 of the file, edge keys)`` of a published perturbed adjacency: the keys
    ``u * N + v`` (u < v) of its edges, sorted. The file is read once (bounded:
    :func:`matrix_limit`; ``data``: its bytes, already read) and parsed from the bytes hashed.

    The matrix must be N x N for the graph's N, its members' headers consistent and at most
    the N(N-1) entries of a graph without self-loops (all read before any array), hold each
    entry once, only entries of 1, no self-loop, and be symmetric; each defect is one line
    naming it."""
    data = published_bytes(path, num_nodes) if data is None else data
    with open_npz(path, data) as npz:
        if "shape" not in npz.files or "indptr" not in npz.files:
            raise DatasetError(f"{path} is not a scipy.sparse.save_npz matrix (found {', '.join(sorted(npz.files))}); "
                               "save the perturbed adjacency with scipy.sparse.save_npz")
        rows, cols = _shape_array(npz, "shape", path)
        if (rows, cols) != (num_nodes, num_nodes):
            raise DatasetError(
                f"{path} holds a {rows:,} x {cols:,} adjacency but the graph has {num_nodes:,} nodes ({num_nodes:,} x "
                f"{num_nodes:,}); published perturbations belong to their dataset's largest connected component: "
                "attack the matching prognn-<name> graph, or point name/root at this graph's files")
        declared = sparse_headers(npz, "", path, "the perturbed adjacency")
        pairs = num_nodes * max(num_nodes - 1, 0)
        if declared.entries > pairs:
            raise DatasetError(f"{path}: the perturbed adjacency declares {declared.entries:,} entries, more than the "
                               f"{pairs:,} pairs of {num_nodes:,} nodes without self-loops; the file is damaged: fetch "
                               "it again")
        check_allocation(path, "the perturbed adjacency", 32 * declared.entries + 8 * (rows + 1))
        adj = read_sparse(npz, "", "", path, adjacency=True)
    coo = adj.tocoo()
    row, col = coo.row.astype(np.int64), coo.col.astype(np.int64)
    keys = np.sort(row * num_nodes + col)
    twice = keys[1:][keys[1:] == keys[:-1]]
    if twice.size:
        u, v = divmod(int(twice[0]), num_nodes)
        raise DatasetError(f"{path}: the perturbed adjacency stores the entry ({u}, {v}) more than once "
                           f"({np.unique(twice).size:,} entries stored twice or more); the file is damaged: store each "
                           "entry once (sum_duplicates() before scipy.sparse.save_npz)")
    if coo.nnz and bool((coo.data != 1).any()):
        raise DatasetError(f"{path}: the perturbed adjacency stores weights other than 1 (e.g. "
                           f"{float(coo.data[coo.data != 1][0])!r}); a published perturbation is a 0/1 matrix")
    loops = int((row == col).sum())
    if loops:
        raise DatasetError(f"{path}: the perturbed adjacency has {loops:,} self-loops; a published perturbation is a "
                           "symmetric 0/1 matrix without self-loops")
    upper = np.sort(row[row < col] * num_nodes + col[row < col])
    lower = np.sort(col[row > col] * num_nodes + row[row > col])
    if not np.array_equal(upper, lower):
        missing = np.setxor1d(upper, lower).size
        raise DatasetError(f"{path}: the perturbed adjacency is not symmetric ({missing:,} entries lack their mirror); "
                           "store both directions of every edge (A + A.T)")
    return file_digest(data), upper


def read_published(path: Path, num_nodes: int) -> np.ndarray:
    """The edges of a published perturbed adjacency as sorted keys ``u * N + v`` (u < v)
    (:func:`load_published`)."""
    return load_published(path, num_nodes)[1]


__all__ = [
    "MAX_JSON_BYTES", "file_digest", "json_limit", "load_attacked_nodes", "load_json", "load_published",
    "matrix_limit", "published_bytes", "read_attacked_nodes", "read_json", "read_node_list", "read_published",
    "read_split",
]
