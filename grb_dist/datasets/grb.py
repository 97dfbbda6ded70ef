"""The official GRB on-disk layout, with download and cache.

A GRB dataset directory holds four files:

- ``adj.npz``: a ``scipy.sparse.save_npz`` CSR adjacency, symmetric, N x N;
- ``features.npz``: key ``data``, dense N x D;
- ``labels.npz``: key ``data``, N;
- ``index.npz``: keys ``index_train``, ``index_val``, ``index_test``, ``index_test_easy``,
  ``index_test_medium``, ``index_test_hard``.

Downloads go to ``<cache>/<name>/``: each file is fetched into a ``.part`` file (resumed
with an HTTP range request when a previous attempt left one), verified (size and SHA-256
when the catalogue knows them, always that it parses as the expected ``.npz`` with its
keys), then renamed into place atomically. A failed download leaves no file under its final
name, and a download that fetched nothing leaves no (empty) cache directory behind.
``verify=False`` (the CLI's ``--no-verify``) skips the size and SHA-256 comparison.
"""

from __future__ import annotations

import logging
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import numpy as np

from grb_dist.datasets.members import check_regular_file, open_npz, read_array
from grb_dist.datasets.npz import check_declared, check_features, declared_graph, read_index, read_labels, read_sparse
from grb_dist.core.errors import DatasetError
from grb_dist.core.fileio import file_sha256

if TYPE_CHECKING:
    from grb_dist.core.graph import Graph

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
    from grb_dist.core.graph import Graph, canonical_edges

    path = Path(path)
    name = name or path.name
    missing = [f for f in GRB_FILES if not os.path.lexists(path / f)]
    if missing:
        raise DatasetError(
            f"{path} is not a GRB dataset directory: missing {', '.join(missing)}; "
            f"it needs {', '.join(GRB_FILES)}"
        )
    for f in GRB_FILES:  # a FIFO or a device is refused before anything is read
        check_regular_file(path / f)
    check_declared(path, declared_graph(path))  # from the headers, before any array is unpacked
    with open_npz(path / "adj.npz") as npz:
        adj = read_sparse(npz, "", "", path / "adj.npz", adjacency=True)
    with open_npz(path / "features.npz") as npz:
        features = read_array(npz, "data", path / "features.npz")
    check_features(features, features.shape, path / "features.npz")
    with open_npz(path / "labels.npz") as npz:
        labels = read_labels(read_array(npz, "data", path / "labels.npz"), path / "labels.npz")
    with open_npz(path / "index.npz") as npz:
        split = {k: read_index(read_array(npz, v, path / "index.npz"), v, path / "index.npz")
                 for k, v in INDEX_KEYS.items()}
    n = features.shape[0]
    if adj.shape != (n, n):
        raise DatasetError(f"{path / 'adj.npz'}: adjacency is {adj.shape} but features have {n} rows; the files do not belong together")
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


def check_checksum(path: Path, expected: tuple[int, str] | None, label: str) -> None:
    """Compare a file with the catalogue's ``(size in bytes, sha256)``; ``None`` = unknown."""
    if expected is None:
        return
    size, sha = expected
    actual = path.stat().st_size
    if actual != size:
        raise DatasetError(
            f"{label}: {path} has {actual:,} bytes but the catalogue's file has {size:,}; it is not the official "
            "file (truncated, replaced or tampered): delete it and download again, or pass --no-verify to use it anyway"
        )
    got = file_sha256(path)
    if got != sha:
        raise DatasetError(
            f"{label}: {path} has SHA-256 {got[:16]}... but the catalogue's file has {sha[:16]}...; it is not the "
            "official file (replaced or tampered): delete it and download again, or pass --no-verify to use it anyway"
        )


def verify_file(path: Path, fname: str, expected: tuple[int, str] | None = None) -> None:
    """Raise :class:`DatasetError` unless ``path`` is a readable GRB ``fname`` (and has the
    ``(size, sha256)`` the catalogue gives, when it gives one)."""
    check_checksum(path, expected, fname)
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
    checksums: Mapping[str, tuple[int, str]] | None = None,
    verify: bool = True,
    timeout: float = 30.0,
) -> Path:
    """Fetch the four files of dataset ``name`` into ``cache_dir/name`` and return that directory.

    Args:
        checksums: file name -> ``(size in bytes, sha256)`` of the official files (the
            catalogue's ``DatasetInfo.checksums``); files without one are verified by parsing.
        verify: compare sizes and SHA-256 (``False``: parse checks only).

    Files already present are kept. Unreachable sources raise a :class:`DatasetError` that
    says where to put the files by hand; directories this call created are removed again
    when they are left empty.
    """
    target = Path(cache_dir) / name
    created = _missing_dirs(target)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _remove_empty(created)
        raise DatasetError(
            f"cannot create the dataset cache {target} ({exc.strerror or exc}); choose a writable --data-dir "
            "(or GRB_DIST_DATA)"
        ) from None
    if not os.access(target, os.W_OK | os.X_OK):
        raise DatasetError(f"the dataset cache {target} is not writable; choose a writable --data-dir (or GRB_DIST_DATA)")
    try:
        _download_files(name, urls, target, checksums or {}, verify, timeout)
    except BaseException:
        _remove_empty(created)
        raise
    return target


def _missing_dirs(path: Path) -> list[Path]:
    """``path`` and those of its ancestors that do not exist yet, deepest first."""
    out = []
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        out.append(p)
        p = p.parent
    return out


def _remove_empty(dirs: list[Path]) -> None:
    for d in dirs:  # deepest first
        try:
            d.rmdir()  # only succeeds when empty
        except OSError:
            return


def _download_files(name: str, urls: Mapping[str, str], target: Path, checksums: Mapping[str, tuple[int, str]],
                    verify: bool, timeout: float) -> None:
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
            verify_file(part, fname, checksums.get(fname) if verify else None)
        except DatasetError as exc:
            part.unlink(missing_ok=True)
            raise DatasetError(f"download of {name}/{fname} from {url} rejected: {exc}") from None
        os.replace(part, final)


def verify_dataset_dir(path: Path, checksums: Mapping[str, tuple[int, str]], name: str) -> None:
    """Compare the files of a cached dataset with the catalogue's sizes and SHA-256."""
    for fname in GRB_FILES:
        if fname in checksums and (path / fname).is_file():
            check_checksum(path / fname, checksums[fname], f"{name}/{fname}")
