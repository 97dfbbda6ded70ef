"""Published: a perturbation someone published, replayed as an attack.

Pro-GNN (Jin et al., KDD 2020) published the perturbed adjacency matrices its defenses were
compared on (Metattack at 5-25% of the edges, Nettack at 1-5 perturbations per attacked
node; :mod:`grb_dist.datasets.prognn`). Replaying those exact graphs, rather than re-running
a randomised attack, is what makes a defense's number comparable with the published tables.
This attack reads such a matrix and returns its difference from the clean graph as a
:class:`~grb_dist.core.graph.Modification`, audited like any other; it evaluates no model.

Config (``published`` in a job's ``poisoning:`` or ``modification:`` attacks)::

    poisoning:
      attacks:
        published@0.05: {kind: meta, rate: 0.05}
        published@0.25: {kind: meta, rate: 0.25}

(``<attack>@<value>`` entries are a budget axis, each ranked on its own; a job sweeping the
Nettack sets lists ``published@1.0: {kind: nettack, rate: 1.0}`` and so on.)

- ``kind``: ``meta`` or ``nettack``;
- ``rate``: meta, the share of edges (0.05 ... 0.25); nettack, perturbations per attacked
  node (1.0 ... 5.0). Unset, a meta set takes ``ratio_edge_mod`` (so a ``--ratio-edge-mod
  0.05,0.1,0.25`` budget axis sweeps the published sets) and a nettack set 1.0;
- ``root``: a folder in Pro-GNN's layout (``meta/``, ``nettack/``: perturbations a user made
  the same way work too); unset, ``$GRB_DIST_PROGNN`` or the download cache;
- ``name``: the ``<name>`` of the files; unset, the graph's name without ``prognn-``
  (``prognn-cora-ml`` -> ``cora_ml``).

The file is ``<root>/<kind>/<name>_<kind>_adj_<rate>.npz``, its name built from validated
parts only (a name never holds a path separator or ``..``; the rate is spelled in digits), so
it never leads outside ``root``. The matrix must be N x N for the attacked graph's N (checked
from its header before anything is read), symmetric, 0/1 and without self-loops.

Budget: the published set is its own budget. :meth:`Published.budget` counts the set's
flips (the pairs where the published matrix and the clean graph differ), so ``n_edge_mod``
is that count; an explicit ``n_edge_mod`` below it is an error, ``ratio_edge_mod`` is not
used as a budget.

Content: the files are inputs of a run like the dataset is. :meth:`Published.input_digests`
gives the SHA-256 of each file read (the matrix; a Nettack set's attacked-node list too),
read and validated before a sweep starts; the sweep puts them in the perturbation's id and
the run's record, and pins them (:meth:`Published.pin_inputs`): a file changed in between is
one line, never read as the old one.

Scoring: a Metattack set is global and scored like any poisoning attack, on the test nodes.
A Nettack set was made against a few target nodes (``attacked_test_nodes``, Pro-GNN's test
nodes of degree above 10) and its numbers are accuracies on those nodes only:
:meth:`Published.scored_nodes` gives them (None for Metattack) for the scoring to restrict to.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np
import torch

from grb_dist.attacks.base import Budget, resolve_feature_limits
from grb_dist.attacks.shared.flips import ModContext, ModificationAttack, ModificationConfig
from grb_dist.core.errors import ConfigError, DatasetError
from grb_dist.core.graph import Graph, Modification, undirected_keys
from grb_dist.core.names import is_name
from grb_dist.core.scenario import MODIFICATION, POISONING
from grb_dist.datasets.prognn import (
    KINDS, NETTACK_DATASETS, PROGNN_DATASETS, PUBLISHED_RATES, ProGNNFolder, attacked_nodes_file, perturbed_file,
    prognn_file, prognn_folder, rate_label,
)
from grb_dist.datasets.prognn_readers import file_digest, load_attacked_nodes, load_published, published_bytes

#: Graph names of Pro-GNN's catalogue entries start with this.
PREFIX = "prognn-"


@dataclass(frozen=True)
class PublishedConfig(ModificationConfig):
    """Which published perturbation to replay (module docstring).

    Attributes:
        kind: ``meta`` (Metattack) or ``nettack``.
        rate: meta: share of the edges, 0.05 ... 0.25; nettack: perturbations per attacked
            node, 1.0 ... 5.0; ``None``: ``ratio_edge_mod`` for meta, 1.0 for nettack.
        root: a folder in Pro-GNN's layout; ``None``: ``$GRB_DIST_PROGNN`` or the cache.
        name: the ``<name>`` of the files; ``None``: from the graph's name.
    """

    kind: str = "meta"
    rate: float | None = None
    root: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.kind not in KINDS:
            raise ConfigError(f"unknown published perturbation kind {self.kind!r}; choose one of: {', '.join(KINDS)}")
        try:
            rate_label(self.kind, self.resolved_rate)
        except ConfigError as exc:
            hint = "; set rate: (unset, a meta set takes ratio_edge_mod)" if self.rate is None else ""
            raise ConfigError(f"{exc}{hint}") from None
        if self.name is not None and not is_name(self.name):
            raise ConfigError(f"published: name {self.name!r} is not a name (letters, digits, . _ + -; no paths); "
                              "give the <name> of the files, e.g. cora")
        if self.root is not None and (not isinstance(self.root, str) or not self.root.strip()):
            raise ConfigError(f"published: root {self.root!r} is not a folder path; give the folder that holds meta/ "
                              "and nettack/, or leave it unset")

    @property
    def resolved_rate(self) -> float:
        """The rate of the file: ``rate``, else ``ratio_edge_mod`` (meta) or 1.0 (nettack)."""
        if self.rate is not None:
            return self.rate
        return self.ratio_edge_mod if self.kind == "meta" else 1.0


#: Parsed matrices by (sha256 of the file's bytes, graph size), the last few: a file is read
#: and hashed on every use and parsed once per content, so a swapped file is never served
#: from here.
_PARSED: collections.OrderedDict[tuple[str, int], np.ndarray] = collections.OrderedDict()


def _published_keys(path: Path, num_nodes: int) -> tuple[str, np.ndarray]:
    """``(sha256, edge keys)`` of the published matrix at ``path`` as it is now."""
    data = published_bytes(path, num_nodes)
    key = (file_digest(data), num_nodes)
    if key not in _PARSED:
        keys = load_published(path, num_nodes, data)[1]
        keys.setflags(write=False)
        _PARSED[key] = keys
        while len(_PARSED) > 8:
            _PARSED.popitem(last=False)
    _PARSED.move_to_end(key)
    return key[0], _PARSED[key]


class Published(ModificationAttack):
    """Replays a published perturbed adjacency (module docstring): the flips are every pair
    where the published matrix and the clean graph differ, removed where the clean graph has
    an edge, added elsewhere. Global (any pair may be flipped), no surrogate, deterministic
    (the seed is unused).

    Scales as O(E log E) in the edges of the two graphs; the matrix is read and hashed on every
    use and parsed once per content and graph size (a small cache), the clean graph's keys
    every call.
    """

    Config = PublishedConfig
    name = "published"
    uses_surrogate = False
    targetable = False
    global_pairs = True
    scenarios = (MODIFICATION.name, POISONING.name)

    # ------------------------------------------------------------------ files

    def dataset_name(self, graph: Graph) -> str:
        """The ``<name>`` of the files: ``name``, else ``graph``'s name without ``prognn-``
        (``-`` read as ``_``)."""
        if self.config.name is not None:
            return self.config.name
        if not graph.name.startswith(PREFIX) or not is_name(graph.name[len(PREFIX):]):
            raise ConfigError(f"published: graph {graph.name!r} is not one of Pro-GNN's (prognn-*); set name: to the "
                              "<name> of the published files (e.g. cora) and root: to their folder")
        return graph.name[len(PREFIX):].replace("-", "_")

    def folder(self) -> ProGNNFolder:
        """Where the files are read: ``root``, ``$GRB_DIST_PROGNN`` or the download cache."""
        return prognn_folder(self.config.root)

    def _check_published(self, folder: ProGNNFolder, name: str) -> None:
        """The cache only holds what Pro-GNN published: its datasets and rates."""
        cfg = self.config
        if not folder.cache:
            return
        if name not in PROGNN_DATASETS or (cfg.kind == "nettack" and name not in NETTACK_DATASETS):
            have = NETTACK_DATASETS if cfg.kind == "nettack" else tuple(PROGNN_DATASETS)
            raise ConfigError(f"published: Pro-GNN published no {cfg.kind} set of {name!r} (only of "
                              f"{', '.join(have)}); give root: a folder holding your own files in its layout")
        if not any(abs(r - cfg.resolved_rate) < 1e-9 for r in PUBLISHED_RATES[cfg.kind]):
            raise ConfigError(f"published: Pro-GNN published no {cfg.kind} set at rate {cfg.resolved_rate} (only "
                              f"{', '.join(map(str, PUBLISHED_RATES[cfg.kind]))}); pick one, or give root: a folder "
                              "holding your own files")

    def published_path(self, graph: Graph) -> Path:
        """The published matrix for ``graph`` (downloaded into the cache when missing there)."""
        cfg = self.config
        folder, name = self.folder(), self.dataset_name(graph)
        self._check_published(folder, name)
        return prognn_file(folder, perturbed_file(name, cfg.kind, cfg.resolved_rate))

    def nodes_path(self, graph: Graph) -> Path | None:
        """The attacked-node list of a Nettack set for ``graph``; ``None`` for a Metattack set."""
        if self.config.kind != "nettack":
            return None
        folder, name = self.folder(), self.dataset_name(graph)
        self._check_published(folder, name)
        return prognn_file(folder, attacked_nodes_file(name))

    def _read_matrix(self, graph: Graph) -> tuple[str, str, np.ndarray]:
        """``(file, sha256, edge keys)`` of the published matrix as it is now (checked against
        a pinned digest: :meth:`pin_inputs`)."""
        cfg = self.config
        relative = perturbed_file(self.dataset_name(graph), cfg.kind, cfg.resolved_rate)
        path = self.published_path(graph)
        digest, keys = _published_keys(path, graph.num_nodes)
        self._check_pinned(relative, path, digest)
        return relative, digest, keys

    def _read_nodes(self, graph: Graph) -> tuple[str, str, np.ndarray] | None:
        """``(file, sha256, nodes)`` of a Nettack set's attacked-node list (None for Metattack)."""
        path = self.nodes_path(graph)
        if path is None:
            return None
        relative = attacked_nodes_file(self.dataset_name(graph))
        digest, nodes = load_attacked_nodes(path, graph.num_nodes)
        self._check_pinned(relative, path, digest)
        return relative, digest, nodes

    def input_digests(self, graph: Graph) -> dict[str, str]:
        """The files this set is read from, by content: ``{path in the layout: sha256 of its
        bytes}`` (the matrix; a Nettack set's attacked-node list too), each read and validated
        now. A sweep puts them in the perturbation's id and the run's record, so a changed file
        is a new perturbation, never a stored one reused."""
        out = {}
        for read in (self._read_matrix, self._read_nodes):
            got = read(graph)
            if got is not None:
                out[got[0]] = got[1]
        return out

    def pin_inputs(self, digests: Mapping[str, str]) -> None:
        """Read only the files' contents given (``{path in the layout: sha256}``, what a sweep
        checked before it started): a file found changed since is one line, never used."""
        self._pinned = dict(digests)

    def _check_pinned(self, relative: str, path: Path, digest: str) -> None:
        pinned = getattr(self, "_pinned", None)
        if pinned and relative in pinned and pinned[relative] != digest:
            raise DatasetError(f"{path} changed since this sweep checked it (sha256 {pinned[relative][:12]} then, "
                               f"{digest[:12]} now); its cells would mix two files: restore it, or run the sweep again "
                               "to compute the changed file as a new perturbation")

    def published_flips(self, graph: Graph) -> np.ndarray:
        """The canonical pairs (2 x M, u < v, sorted) where the published matrix and ``graph``
        differ."""
        n = graph.num_nodes
        published = self._read_matrix(graph)[2]
        keys = np.setxor1d(published, undirected_keys(graph), assume_unique=True)
        return np.stack([keys // n, keys % n])

    def scored_nodes(self, graph: Graph) -> np.ndarray | None:
        """The nodes a Nettack set attacked (sorted int64, from
        ``nettack/<name>_nettacked_nodes.json``), on which its accuracy is reported; ``None``
        for a Metattack set (scored on the whole test set)."""
        got = self._read_nodes(graph)
        return None if got is None else got[2]

    def check_inputs(self, graph: Graph, targets: np.ndarray) -> tuple[np.ndarray, Budget]:
        """The targets and the budget (the matrix read and validated), and a Nettack set's
        attacked-node list read and validated too: every file before any work."""
        checked = super().check_inputs(graph, targets)
        self.scored_nodes(graph)
        return checked

    # ------------------------------------------------------------------ attack

    def budget(self, graph: Graph, num_targets: int) -> Budget:
        """The published set's own size: ``n_edge_mod`` = its flips on ``graph``; an explicit
        ``n_edge_mod`` below that raises :class:`ConfigError`."""
        flips = int(self.published_flips(graph).shape[1])
        cfg = self.config
        if cfg.n_edge_mod is not None and flips > cfg.n_edge_mod:
            raise ConfigError(f"published: the {cfg.kind} set at rate {cfg.resolved_rate} flips {flips:,} edges of "
                              f"{graph.name!r}, more than n_edge_mod={cfg.n_edge_mod:,}; leave n_edge_mod unset (the "
                              "published set is its own budget) or raise it")
        lo, hi = resolve_feature_limits(cfg, graph)  # type: ignore[arg-type]
        return Budget(lo, hi, n_edge_mod=flips, n_node_mod=0)

    def generate(self, ctx: ModContext, gen: torch.Generator) -> Modification:
        return ctx.result(self.published_flips(ctx.graph))


__all__ = ["Published", "PublishedConfig"]
