"""Pro-GNN's benchmark graphs and published perturbations (Jin et al., KDD 2020).

Pro-GNN ("Graph Structure Learning for Robust Graph Neural Networks") published, for cora,
citeseer, cora_ml and polblogs, the split it evaluated on and the perturbed adjacency
matrices its poisoning experiments trained on, so that defenses are compared on the very
same perturbed graphs rather than on re-runs of a randomised attack:

- ``meta/<name>_meta_adj_<rate>.npz``: Metattack (Meta-Self), global poisoning, ``rate`` x
  the clean graph's edges flipped, rate 0.05 ... 0.25;
- ``nettack/<name>_nettack_adj_<n>.npz``: Nettack, ``n`` = 1.0 ... 5.0 perturbations per
  attacked node; the attacked test nodes are ``attacked_test_nodes`` of
  ``nettack/<name>_nettacked_nodes.json`` (no Nettack set is published for cora_ml);
- ``splits/<name>_prognn_splits.json``: ``idx_train``, ``idx_val``, ``idx_test`` (about 10% /
  10% / 80% of the nodes).

The matrices are scipy ``save_npz`` files, symmetric 0/1 without self-loops, over the
**largest connected component** of the base graph (``npz/<name>.npz``: cora, citeseer and
polblogs of the Nettack release, cora_ml of the Metattack release; the randomised-smoothing
release's cora_ml holds the same graph, labels and attributes): the base graph is
symmetrised and made unweighted, and the component's nodes keep their original order
(ascending original ids), which is the node order of the published matrices. On cora that
is 2,485 nodes and 5,069 edges, and every clean edge is in the 5% Metattack matrix.

The loaded graph (:func:`load_prognn`, or ``load_dataset("prognn-cora")``) carries Pro-GNN's
split and GRB difficulty bands of its test set: ``idx_test`` is ranked by degree in the clean
component (ties broken by a permutation seeded with ``seed``) and cut into three bands of
equal size (sizes differ by at most one, the lower bands taking the remainder): ``easy`` the
lowest-degree third, ``medium``, ``hard`` the highest; ``full`` is all of ``idx_test``. Features
are raw, as published: binary bag-of-words for cora and citeseer, cora_ml's real-valued
attributes in (0, 1], and none for polblogs (identity features of the component's size);
``load_dataset`` then applies the requested normalisation (a job reproducing Pro-GNN sets
``normalize: none``).

Where the files come from, in order: an explicit ``root`` folder, the folder named by
``$GRB_DIST_PROGNN``, or the download cache ``<cache>/prognn`` (``$GRB_DIST_DATA`` or
``~/.cache/grb-dist``). A given folder is read as it is (no download, no checksums: it may
hold perturbations a user made in the same layout); its base graphs may sit in ``npz/``
inside it or in an ``npz/`` folder beside it. The cache is filled on first use from the files'
public addresses (:func:`prognn_url`), each download verified (size and SHA-256 of the
published file, :data:`PROGNN_CHECKSUMS`, and that it parses) before it is moved into place;
cached files are compared with the same checksums unless ``verify=False``.

Every file is checked before anything large is read (:mod:`grb_dist.datasets.prognn_readers`):
regular files only, read once and bounded by the graph's size (``json_limit``,
``matrix_limit``), the ``.npz`` headers and shapes first (the published matrix must be N x N
for the graph's N, its members' lengths consistent, at most N(N-1) entries), JSON nesting and
integers Python reads, and no pickle anywhere (``allow_pickle=False``); each defect is one line
naming the file. A perturbed matrix and an attacked-node list are returned with the SHA-256 of
the bytes parsed (``load_published``, ``load_attacked_nodes``): what a run records of them.
"""

from __future__ import annotations

import logging
import math
import os
import re
import stat
import urllib.error
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import numpy as np
import scipy.sparse as sp

from grb_dist.core.errors import ConfigError, DatasetError
from grb_dist.core.names import is_name, unknown_name_message
from grb_dist.datasets.grb import _fetch, _missing_dirs, _remove_empty, check_checksum, default_cache_dir
from grb_dist.datasets.members import check_regular_file, open_npz
from grb_dist.datasets.npz import declared_graph, load_npz_graph
from grb_dist.datasets.prognn_readers import read_json, read_split

if TYPE_CHECKING:
    from grb_dist.core.graph import Graph

log = logging.getLogger(__name__)

#: The environment variable naming a folder in Pro-GNN's layout (read as given, no download).
PROGNN_ENV = "GRB_DIST_PROGNN"
#: Pro-GNN's dataset names (the ``<name>`` of its files) -> the catalogue's names.
PROGNN_DATASETS = {"cora": "prognn-cora", "citeseer": "prognn-citeseer", "cora_ml": "prognn-cora-ml",
                   "polblogs": "prognn-polblogs"}
#: The published perturbation kinds, and the rates of each.
KINDS = ("meta", "nettack")
PUBLISHED_RATES = {"meta": (0.05, 0.1, 0.15, 0.2, 0.25), "nettack": (1.0, 2.0, 3.0, 4.0, 5.0)}
#: The datasets with published Nettack sets.
NETTACK_DATASETS = ("cora", "citeseer", "polblogs")

_PROGNN = "https://raw.githubusercontent.com/ChandlerBang/Pro-GNN/master/"
_BASE = {
    "cora": "https://raw.githubusercontent.com/danielzuegner/nettack/master/data/cora.npz",
    "citeseer": "https://raw.githubusercontent.com/danielzuegner/nettack/master/data/citeseer.npz",
    "polblogs": "https://raw.githubusercontent.com/danielzuegner/nettack/master/data/polblogs.npz",
    "cora_ml": "https://raw.githubusercontent.com/danielzuegner/gnn-meta-attack/master/data/cora_ml.npz",
}

#: ``(size in bytes, sha256)`` of every published file, by its path in the layout.
PROGNN_CHECKSUMS: dict[str, tuple[int, str]] = {
    "npz/cora.npz": (711224, "398a5c8f949a4f2a3c8fb248f777d2756c654de714762d6a18c04eaa19a96271"),
    "npz/citeseer.npz": (1418528, "36e9a5bbe84eaa0c3c6b226f8b27450bb79246a5df22c375b3bacddb856efa8e"),
    "npz/polblogs.npz": (171030, "cd0983c2b1caa3bbe2703a4e316f97bb1dccd33f98800d3d8e4bbe51cc86941b"),
    "npz/cora_ml.npz": (1620832, "ffbe4e64857dc6bf38f1877e4312559a064df84b59d0f32f938717de5d5af0fd"),
    "splits/cora_prognn_splits.json": (13836, "40a3e7e4025c349095d425c597a9db53b2ddd2437f0d5ccf7b46417d912f1db0"),
    "splits/citeseer_prognn_splits.json": (11587, "12ab5787371b8826691d0c6f33ba7c250dff2754a0f571578bc83920594bb9a3"),
    "splits/cora_ml_prognn_splits.json": (15792, "0ac1ce174624eb1143d0ddfe72dd11ebbb5562b1e60dc69e427c570cafd71e09"),
    "splits/polblogs_prognn_splits.json": (6264, "06e04855543c9b35fc5d172d1488d12834c8f8d75350616930b9b306be4db296"),
    "meta/cora_meta_adj_0.05.npz": (24290, "bfb6ed914acbae726906ff0aa09b5ae70713849dcc637d8f08eeb27c0ef24c1f"),
    "meta/cora_meta_adj_0.1.npz": (25346, "fbb6b1485cdfa93ae23501f950b43f4dc96eb09099f5fec3d67b93a92394dbd7"),
    "meta/cora_meta_adj_0.15.npz": (26307, "f22e02303c239ba236acf3c214e4ff8e2539d68992737e2d909d02a96eabfc88"),
    "meta/cora_meta_adj_0.2.npz": (27291, "adbe44b4014bc183525d8f55f2173c091fad9cc5c97e01a08a423ee6ceea8caa"),
    "meta/cora_meta_adj_0.25.npz": (28158, "2e0e4eb2293a48f9a54c612bb1ac36b7ef4e643626acf4c159792b2cb6b534d8"),
    "meta/citeseer_meta_adj_0.05.npz": (18240, "8d27840b7ead85ed90260d54a6f4ff65740d869e1203017111c7fa9ef355242f"),
    "meta/citeseer_meta_adj_0.1.npz": (18987, "5c333f8c92267ccd6f08ec27c421e9f0a17d9dda58729c93c7c823794c7c23f3"),
    "meta/citeseer_meta_adj_0.15.npz": (19588, "69069c65343fc75c7b508bd97263a1a2d96212f62e72259ce34c4146f6db866d"),
    "meta/citeseer_meta_adj_0.2.npz": (20379, "599e1fb14330bb5451216a5cebe7987840ecfa6a2d41004088f616e8653e9f5a"),
    "meta/citeseer_meta_adj_0.25.npz": (21027, "63ff4f587683c93f36ff9ef987b9efad36260af5407bdf1a4175359dfb25ce91"),
    "meta/cora_ml_meta_adj_0.05.npz": (33644, "b6fa842571104a1460a1cab4c334646a7de25545bddafe6cc76c29e6dfe7ff55"),
    "meta/cora_ml_meta_adj_0.1.npz": (35095, "7079e0297962f04a27711588d267659e5699a48db5b2d3952aebdaa423712125"),
    "meta/cora_ml_meta_adj_0.15.npz": (35934, "7202ff756cf817c6814f76088532488e5465a430119f5815d879c59a2607b8e0"),
    "meta/cora_ml_meta_adj_0.2.npz": (36653, "b63601136d9b2bca3fe3322da0259a5358762eefec5e0996137b0a7024efed7c"),
    "meta/cora_ml_meta_adj_0.25.npz": (37675, "0f471f3b2ed55ab795216cb310bb8bf9f0378bd56c4e5c4c55bf245e4275a5cc"),
    "meta/polblogs_meta_adj_0.05.npz": (46562, "dc707f19ed4d3e5ad18c309de49a84ab5b2eb1491d6054bec900c8ad5bf0662c"),
    "meta/polblogs_meta_adj_0.1.npz": (47858, "ac9b5d6566783a9b5c28b4a9fb30174779c1e1c4c3fc9f4060c68084ef04f40c"),
    "meta/polblogs_meta_adj_0.15.npz": (48442, "db13407a6b283cbc2d428d598019e2dd66e09330589183c4ab34e2203ee43ad0"),
    "meta/polblogs_meta_adj_0.2.npz": (47180, "7b5cb695d7680ffb65f3c5af831513a47453bcdc5b99bb6618be904965497b5b"),
    "meta/polblogs_meta_adj_0.25.npz": (46716, "855b846a97b0b85515ab36cd4c5a6f15b5e9ec91a76a1946d157fee7b2272a78"),
    "nettack/cora_nettack_adj_1.0.npz": (23414, "34bebc2f07bd6d6c26d60aeaa04468188c473d3166461e591f5118b554533a2e"),
    "nettack/cora_nettack_adj_2.0.npz": (23696, "fee90b13ccf0c23b14e0cf087ce41e584bc0c964436853894c01cde48f54fb80"),
    "nettack/cora_nettack_adj_3.0.npz": (24019, "aa333452e7852f75a26c8d77b73b6d905406253cabc46338a1e96f3cafda2557"),
    "nettack/cora_nettack_adj_4.0.npz": (24294, "12782aff23c81c44c2b15fd0e2fb31f953ae32814c4c4b8ab0452481c312150f"),
    "nettack/cora_nettack_adj_5.0.npz": (24545, "f0e64db018d3278ecba60a999091b9f3c1bab0b5a07a3bf3e97995cfaa5e71ef"),
    "nettack/cora_nettacked_nodes.json": (14337, "09ac6e4debd2c0dd4288e1130349da6547bfe971864a82d717e782f2f7953cbf"),
    "nettack/citeseer_nettack_adj_1.0.npz": (17648, "54c2c3aa78ec07665abd60fb24efd8a0eb1ec7ee012cdcea624b344488091c31"),
    "nettack/citeseer_nettack_adj_2.0.npz": (17874, "14f931cda7e2e2851e6370c18df505be1c0c09c16b77e44be98d01fdb44d5e55"),
    "nettack/citeseer_nettack_adj_3.0.npz": (18119, "481b4edf430bcaae435765b33fd9f18779c6764436361c673b1812ea8d7154b9"),
    "nettack/citeseer_nettack_adj_4.0.npz": (18352, "2fd8ae75036a8e9161cc385e04dd175687cb2c5766a7c813566a44aa30fff95f"),
    "nettack/citeseer_nettack_adj_5.0.npz": (18521, "2783e043bd41379e6d67088df56451a27298b390119671a87ddff6e622ab5b10"),
    "nettack/citeseer_nettacked_nodes.json": (11964, "a9911a5de538cfa856322d76d2095384d4c3a32aa3ff828b37365c6c247ed868"),
    "nettack/polblogs_nettack_adj_1.0.npz": (45670, "920dadbee8f98fa95f7691988c2e994b5d7979739c58aad75f36ff99b6102fdb"),
    "nettack/polblogs_nettack_adj_2.0.npz": (47545, "cb087a286d008b15d7c88276cd6c0fd7d4491d7856122b4d83f2210c60dda998"),
    "nettack/polblogs_nettack_adj_3.0.npz": (49106, "120b6ebec230b75149bb9a25611a85d5500acbbeb6f5dea4cb6d4416734f4593"),
    "nettack/polblogs_nettack_adj_4.0.npz": (50534, "248687c06f2dcde5f684c69b49a9ea13b6342d326e3332245134b139675af6d5"),
    "nettack/polblogs_nettack_adj_5.0.npz": (52129, "46acb0c289834327e96ab99e80bb9ed21c3b2c51afac3b67b070c3e87ae96f81"),
    "nettack/polblogs_nettacked_nodes.json": (9051, "a2e654532168348e3f302b09d88cfcd2bada5dd66afb08cb431dbd8fc76ec721"),
}

_RATE_LABEL = re.compile(r"[0-9]+\.[0-9]+")


# --------------------------------------------------------------------------- names and places


def base_file(name: str) -> str:
    return f"npz/{name}.npz"


def split_file(name: str) -> str:
    return f"splits/{name}_prognn_splits.json"


def attacked_nodes_file(name: str) -> str:
    return f"nettack/{name}_nettacked_nodes.json"


def rate_label(kind: str, rate: float) -> str:
    """The ``<rate>`` of a published file name (``0.05``, ``1.0``): Python's spelling of the
    float, the spelling of Pro-GNN's files; the rate must lie in the kind's published range."""
    if kind not in KINDS:
        raise ConfigError(f"unknown published perturbation kind {kind!r}; choose one of: {', '.join(KINDS)}")
    rates = PUBLISHED_RATES[kind]
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate) \
            or not rates[0] - 1e-9 <= rate <= rates[-1] + 1e-9:
        what = "a share of the edges" if kind == "meta" else "perturbations per attacked node"
        raise ConfigError(f"{kind} rate {rate!r} is outside {rates[0]}..{rates[-1]} ({what}); Pro-GNN published "
                          f"{', '.join(str(r) for r in rates)}")
    rate = next((r for r in rates if abs(r - rate) < 1e-9), float(rate))
    label = repr(float(rate))
    if not _RATE_LABEL.fullmatch(label):  # never a file name part other than digits and one dot
        raise ConfigError(f"{kind} rate {rate!r} has no plain decimal spelling; use one of {rates}")
    return label


def perturbed_file(name: str, kind: str, rate: float) -> str:
    """``<kind>/<name>_<kind>_adj_<rate>.npz``, from a validated name, kind and rate only."""
    if not is_name(name):
        raise ConfigError(f"published dataset name {name!r} is not a name (letters, digits, . _ + -; no paths); "
                          "give the <name> of the files, e.g. cora")
    return f"{kind}/{name}_{kind}_adj_{rate_label(kind, rate)}.npz"


def prognn_url(relative: str) -> str:
    """The public address of the published file ``relative`` (a path of the layout)."""
    if relative.startswith("npz/"):
        name = relative[4:-4]
        if name not in _BASE:
            raise DatasetError(f"no public address is known for {relative}; place it by hand")
        return _BASE[name]
    return _PROGNN + relative


def dataset_urls(name: str) -> dict[str, str]:
    """The addresses of the two files a Pro-GNN graph is loaded from (base graph, split)."""
    return {f: prognn_url(f) for f in (base_file(name), split_file(name))}


@dataclass(frozen=True)
class ProGNNFolder:
    """Where Pro-GNN's files are read: ``path``; ``cache``: the download cache (missing files
    are downloaded and checksummed) rather than a folder given as it is; ``origin``: how it
    was named, for messages."""

    path: Path
    cache: bool
    origin: str


def check_folder(path: Path, what: str) -> Path:
    """``path`` is an existing directory; otherwise one line naming what it is instead."""
    from grb_dist.core.paths import special_file_kind

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise DatasetError(f"{what} {path} does not exist; give the folder that holds Pro-GNN's meta/, nettack/ and "
                           "splits/, or leave it unset to download them into the cache") from None
    except OSError as exc:
        raise DatasetError(f"cannot read {what} {path} ({exc.strerror or exc}); give a readable folder") from None
    if not stat.S_ISDIR(mode):
        kind = special_file_kind(mode) or "a file"
        raise DatasetError(f"{what} {path} is {kind}, not a folder; give the folder that holds Pro-GNN's meta/, "
                           "nettack/ and splits/")
    return path


def prognn_folder(root: str | Path | None = None, data_dir: str | Path | None = None) -> ProGNNFolder:
    """The folder Pro-GNN's files are read from: ``root``, else ``$GRB_DIST_PROGNN``, else the
    download cache ``<data_dir or default cache>/prognn``. A given folder must exist."""
    if root is not None:
        path = Path(root).expanduser()
        return ProGNNFolder(check_folder(path, "the Pro-GNN folder"), False, "the Pro-GNN folder")
    env = os.environ.get(PROGNN_ENV)
    if env is not None and not env.strip():
        raise DatasetError(f"${PROGNN_ENV} is set but empty; set it to the folder that holds Pro-GNN's meta/, nettack/ "
                           "and splits/, or unset it to download the files into the cache")
    if env:
        path = Path(env).expanduser()
        return ProGNNFolder(check_folder(path, f"${PROGNN_ENV}"), False, f"${PROGNN_ENV}")
    cache = Path(data_dir).expanduser() if data_dir else default_cache_dir()
    return ProGNNFolder(cache / "prognn", True, "the Pro-GNN cache")


def _locate(folder: ProGNNFolder, relative: str) -> Path | None:
    candidates = [folder.path / relative]
    if relative.startswith("npz/") and not folder.cache:  # base graphs may sit in an npz/ folder beside
        candidates.append(folder.path.parent / relative)
    return next((p for p in candidates if os.path.lexists(p)), None)


def prognn_file(folder: ProGNNFolder, relative: str, *, download: bool = True, verify: bool = True,
                url: str | None = None, timeout: float = 30.0) -> Path:
    """The path of published file ``relative`` in ``folder``: found, or downloaded into the
    cache (``url``: another address than :func:`prognn_url`). Cached files are compared with
    :data:`PROGNN_CHECKSUMS` (``verify``); a given folder is read as it is."""
    path = _locate(folder, relative)
    if path is not None:
        check_regular_file(path)
        if folder.cache and verify:
            check_checksum(path, PROGNN_CHECKSUMS.get(relative), relative)
        return path
    if not folder.cache and url is None and relative not in PROGNN_CHECKSUMS:
        raise DatasetError(f"{folder.origin} {folder.path} has no {relative}, and {never_published(relative)}; pick one "
                           "that was published, or place your own file there")
    source = url or prognn_url(relative)
    if not folder.cache:
        raise DatasetError(f"{folder.origin} {folder.path} has no {relative}; place that file there (published at "
                           f"{source}), or leave the folder unset to download into the cache")
    if not download:
        raise DatasetError(f"{relative} is not in the Pro-GNN cache {folder.path}; run without --no-download or place "
                           f"it there (published at {source})")
    return download_prognn_file(relative, folder.path, url=source, verify=verify, timeout=timeout)


_PERTURBED = re.compile(r"(meta|nettack)/(.+)_(?:meta|nettack)_adj_(.+)\.npz")


def never_published(relative: str) -> str:
    """Why ``relative`` (a path of the layout) has no public address: which of Pro-GNN's sets
    it is not, and the ones that were published."""
    m = _PERTURBED.fullmatch(relative)
    if m is None:
        return f"Pro-GNN published no {relative}"
    kind, name, rate = m.groups()
    have = NETTACK_DATASETS if kind == "nettack" else tuple(PROGNN_DATASETS)
    if name not in have:
        return f"Pro-GNN published no {kind} set of {name!r} (only of {', '.join(have)})"
    return (f"Pro-GNN published no {kind} set at rate {rate} (only {', '.join(map(str, PUBLISHED_RATES[kind]))})")


def download_prognn_file(relative: str, cache: Path, *, url: str | None = None, verify: bool = True,
                         timeout: float = 30.0) -> Path:
    """Fetch ``relative`` into ``cache / relative``: into a ``.part`` file (resumed when an
    earlier attempt left one), compared with :data:`PROGNN_CHECKSUMS` (``verify``), parsed, then
    renamed into place; a rejected download leaves nothing under the final name."""
    url = url or prognn_url(relative)
    final = Path(cache) / relative
    created = _missing_dirs(final.parent)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _remove_empty(created)
        raise DatasetError(f"cannot create the Pro-GNN cache {final.parent} ({exc.strerror or exc}); choose a writable "
                           f"--data-dir (or GRB_DIST_DATA), or set {PROGNN_ENV} to a folder holding the files") from None
    part = final.with_name(final.name + ".part")
    log.info("downloading %s", relative)
    try:
        _fetch(url, part, timeout)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        _remove_empty(created)
        reason = getattr(exc, "reason", exc)
        raise DatasetError(f"cannot download {relative} ({reason}); the source is unreachable: download {url} by hand "
                           f"into {final} (or set {PROGNN_ENV} to a folder holding Pro-GNN's files)") from None
    try:
        check_checksum(part, PROGNN_CHECKSUMS.get(relative) if verify else None, relative)
        _check_parses(part)
    except DatasetError as exc:
        part.unlink(missing_ok=True)
        _remove_empty(created)
        raise DatasetError(f"download of {relative} from {url} rejected: {exc}") from None
    os.replace(part, final)
    return final


def _check_parses(path: Path) -> None:
    """A downloaded file is what its name says: a sparse ``.npz`` or a JSON object."""
    if path.name.endswith(".json.part") or path.suffix == ".json":
        read_json(path)
        return
    with open_npz(path) as npz:
        if not {"indptr", "adj_data", "adj_matrix.data"} & set(npz.files):
            raise DatasetError(f"{path} holds no sparse matrix (found {', '.join(sorted(npz.files))})")


def is_prognn_available(name: str, data_dir: str | Path | None = None) -> bool:
    """Whether Pro-GNN graph ``name`` loads without a download."""
    try:
        folder = prognn_folder(None, data_dir)
    except DatasetError:
        return False
    return all(_locate(folder, f) is not None for f in (base_file(name), split_file(name)))


# --------------------------------------------------------------------------- graphs


def largest_component(edge_index: np.ndarray, num_nodes: int) -> np.ndarray:
    """The nodes of the largest connected component, ascending (of equally large components,
    the one holding the smallest node id)."""
    from scipy.sparse.csgraph import connected_components

    adj = sp.csr_matrix((np.ones(edge_index.shape[1], dtype=np.int8), (edge_index[0], edge_index[1])),
                        shape=(num_nodes, num_nodes))
    _, labels = connected_components(adj, directed=False)
    return np.flatnonzero(labels == int(np.argmax(np.bincount(labels)))).astype(np.int64)


def induced_subgraph(graph: Graph, keep: np.ndarray, *, identity: bool, name: str) -> Graph:
    """The subgraph of ``graph`` on the ascending nodes ``keep``, renumbered 0..k-1 in that
    order; ``identity``: k x k identity features instead of the rows of ``graph``'s."""
    from grb_dist.core.graph import Graph

    new = np.full(graph.num_nodes, -1, dtype=np.int64)
    new[keep] = np.arange(keep.size)
    ei = graph.edge_index
    inside = (new[ei[0]] >= 0) & (new[ei[1]] >= 0)
    features = np.eye(keep.size, dtype=np.float32) if identity else np.ascontiguousarray(graph.features[keep])
    return Graph(features=features, edge_index=np.ascontiguousarray(new[ei[:, inside]]),
                 labels=np.ascontiguousarray(graph.labels[keep]), name=name)


def degree_bands(degrees: np.ndarray, test: np.ndarray, seed: int = 0) -> dict[str, np.ndarray]:
    """GRB's difficulty bands of a given test set: ``test`` ranked by degree (ties broken by
    a permutation seeded with ``seed``), cut into three bands of equal size (the lower bands
    take the remainder); ``test_easy`` the lowest degrees, ``test_hard`` the highest,
    ``test_full`` all of them. Sorted int64 arrays."""
    test = np.asarray(test, dtype=np.int64)
    if test.size < 3:
        raise DatasetError(f"the test set has {test.size} node(s); three difficulty bands need at least 3")
    shuffled = test[np.random.default_rng(seed).permutation(test.size)]
    ranked = shuffled[np.argsort(np.asarray(degrees)[shuffled], kind="stable")]
    easy, medium, hard = (np.sort(b) for b in np.array_split(ranked, 3))
    return {"test_easy": easy, "test_medium": medium, "test_hard": hard, "test_full": np.sort(test)}


def load_prognn(name: str, root: str | Path | None = None, *, data_dir: str | Path | None = None,
                download: bool = True, verify: bool = True, seed: int = 0,
                urls: Mapping[str, str] | None = None) -> Graph:
    """Load Pro-GNN's graph ``name`` (``cora``, ``citeseer``, ``cora_ml``, ``polblogs``): the
    largest connected component of the base graph, Pro-GNN's split and GRB difficulty bands of
    its test set (module docstring), raw features. Named ``prognn-<name>`` (``-`` for ``_``).

    Args:
        root: a folder in Pro-GNN's layout, read as it is (default: ``$GRB_DIST_PROGNN``,
            else the download cache under ``data_dir``).
        download: fetch missing files into the cache.
        verify: compare cached files with :data:`PROGNN_CHECKSUMS`.
        seed: seed of the tie-breaking of the difficulty bands.
        urls: other addresses of files (path of the layout -> URL), e.g. a mirror.
    """
    if name not in PROGNN_DATASETS:
        raise DatasetError(unknown_name_message("Pro-GNN dataset", name, PROGNN_DATASETS))
    folder = prognn_folder(root, data_dir)
    urls = urls or {}
    paths = {f: prognn_file(folder, f, download=download, verify=verify, url=urls.get(f))
             for f in (base_file(name), split_file(name))}
    base = paths[base_file(name)]
    full, report = load_npz_graph(base, name=name)
    keep = largest_component(full.edge_index, full.num_nodes)
    graph = induced_subgraph(full, keep, identity=declared_graph(base).identity, name=PROGNN_DATASETS[name])
    split = read_split(paths[split_file(name)], graph.num_nodes)
    bands = degree_bands(graph.degrees(), split["test"], seed)
    log.info("%s: largest component of %s, %d of %d nodes, %d edges (%s)", graph.name, base, graph.num_nodes,
             full.num_nodes, graph.num_edges, report)
    return graph.with_split({"train": split["train"], "val": split["val"], **bands}).validate()


__all__ = [
    "KINDS", "NETTACK_DATASETS", "PROGNN_CHECKSUMS", "PROGNN_DATASETS", "PROGNN_ENV", "PUBLISHED_RATES",
    "ProGNNFolder", "attacked_nodes_file", "base_file", "check_folder", "dataset_urls", "degree_bands",
    "download_prognn_file", "induced_subgraph", "is_prognn_available", "largest_component", "load_prognn",
    "never_published", "perturbed_file", "prognn_file", "prognn_folder", "prognn_url", "rate_label", "split_file",
]
