"""The official GRB on-disk layout, with download and cache.

A GRB dataset directory holds four files:

- ``adj.npz``: a ``scipy.sparse.save_npz`` CSR adjacency, symmetric, N x N;
- ``features.npz``: key ``data``, dense N x D;
- ``labels.npz``: key ``data``, N;
- ``index.npz``: keys ``index_train``, ``index_val``, ``index_test``, ``index_test_easy``,
  ``index_test_medium``, ``index_test_hard``.

Downloads go to ``<cache>/<name>/``: each file is fetched into a ``.part`` file (resumed
with an HTTP range request when a previous attempt left one), verified (size and sha256
when the catalogue knows them, always that it parses as the expected ``.npz``), then
renamed into place atomically. A failed download leaves no file under its final name.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

from grb_dist.datasets.npz import open_npz, read_array, read_sparse
from grb_dist.errors import DatasetError
from grb_dist.graph import Graph, canonical_edges

log = logging.getLogger(__name__)

GRB_FILES = ("adj.npz", "features.npz", "labels.npz", "index.npz")
INDEX_KEYS = {
    "train": "index_train",
    "val": "index_val",
    "test_easy": "index_test_easy",
    "test_medium": "index_test_medium",
    "test_hard": "index_test_hard",
    "test_full": "index_test",
}
REQUIRED_KEYS = {
    "adj.npz": ("data", "indices", "indptr", "shape"),
    "features.npz": ("data",),
    "labels.npz": ("data",),
    "index.npz": tuple(INDEX_KEYS.values()),
}


def default_cache_dir() -> Path:
    """``$GRB_DIST_DATA`` if set, else ``~/.cache/grb-dist``."""
    env = os.environ.get("GRB_DIST_DATA")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "grb-dist"


def is_grb_dir(path: Path) -> bool:
    return path.is_dir() and all((path / f).is_file() for f in GRB_FILES)


def load_grb_dir(path: str | Path, name: str | None = None) -> Graph:
    """Load a dataset directory in the official GRB layout, with its official split."""
    path = Path(path)
    name = name or path.name
    missing = [f for f in GRB_FILES if not (path / f).is_file()]
    if missing:
        raise DatasetError(
            f"{path} is not a GRB dataset directory: missing {', '.join(missing)}; "
            f"it needs {', '.join(GRB_FILES)}"
        )
    with open_npz(path / "adj.npz") as npz:
        adj = read_sparse(npz, "", "", path / "adj.npz")
    with open_npz(path / "features.npz") as npz:
        features = read_array(npz, "data", path / "features.npz")
    with open_npz(path / "labels.npz") as npz:
        labels = read_array(npz, "data", path / "labels.npz")
    with open_npz(path / "index.npz") as npz:
        split = {k: read_array(npz, v, path / "index.npz").astype(np.int64).ravel() for k, v in INDEX_KEYS.items()}
    if features.ndim != 2:
        raise DatasetError(f"{path / 'features.npz'}: expected an N x D matrix, got shape {features.shape}")
    n = features.shape[0]
    if adj.shape != (n, n):
        raise DatasetError(f"{path / 'adj.npz'}: adjacency is {adj.shape} but features have {n} rows; the files do not belong together")
    labels = np.asarray(labels).ravel()
    if labels.dtype.kind == "f":
        if not np.isfinite(labels).all() or not np.all(labels == np.round(labels)):
            raise DatasetError(f"{path / 'labels.npz'}: labels must be integer class ids")
    labels = labels.astype(np.int64)
    coo = adj.tocoo()
    edge_index, _ = canonical_edges(coo.row, coo.col, n)
    graph = Graph(
        features=np.ascontiguousarray(features, dtype=np.float32),
        edge_index=edge_index,
        labels=labels,
        split=split,
        name=name,
    )
    return graph.validate()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_file(path: Path, fname: str, sha256: str | None = None) -> None:
    """Raise :class:`DatasetError` unless ``path`` is a readable GRB ``fname`` (and matches ``sha256``)."""
    if sha256 is not None and _sha256(path) != sha256:
        raise DatasetError(f"{path}: checksum mismatch; delete it and download again")
    with open_npz(path) as npz:
        for key in REQUIRED_KEYS[fname]:
            read_array(npz, key, path)


def _fetch(url: str, part: Path, timeout: float) -> None:
    """Download ``url`` into ``part``, resuming from its current size."""
    start = part.stat().st_size if part.exists() else 0
    req = urllib.request.Request(url, headers={"User-Agent": "grb-dist"})
    if start:
        req.add_header("Range", f"bytes={start}-")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        resumed = start and getattr(resp, "status", 200) == 206
        with open(part, "ab" if resumed else "wb") as out:
            shutil.copyfileobj(resp, out, length=1 << 20)


def download_grb(
    name: str,
    urls: dict[str, str],
    cache_dir: Path,
    *,
    sha256: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> Path:
    """Fetch the four files of dataset ``name`` into ``cache_dir/name`` and return that directory.

    Files already present and valid are kept. Unreachable sources raise a
    :class:`DatasetError` that says where to put the files by hand.
    """
    target = Path(cache_dir) / name
    target.mkdir(parents=True, exist_ok=True)
    for fname in GRB_FILES:
        final = target / fname
        if final.is_file():
            continue
        url = urls.get(fname)
        if not url:
            raise DatasetError(
                f"no download source is known for {name}/{fname}; place the GRB files "
                f"({', '.join(GRB_FILES)}) in {target} by hand"
            )
        part = target / (fname + ".part")
        log.info("downloading %s/%s", name, fname)
        try:
            _fetch(url, part, timeout)
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise DatasetError(
                f"cannot download {name}/{fname} ({reason}); the source is unreachable: "
                f"download {', '.join(GRB_FILES)} by hand into {target} (or set GRB_DIST_DATA / --data-dir)"
            ) from None
        try:
            verify_file(part, fname, (sha256 or {}).get(fname))
        except DatasetError:
            part.unlink(missing_ok=True)
            raise
        os.replace(part, final)
    return target
