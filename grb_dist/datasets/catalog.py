"""The dataset catalogue: the five official GRB datasets and their synthetic CSBM twins."""

from __future__ import annotations

from dataclasses import dataclass, field

from grb_dist.datasets.csbm import CSBMConfig
from grb_dist.registry import Registry

_TSINGHUA = "https://cloud.tsinghua.edu.cn/f/{}/?dl=1"


def _urls(adj: str, features: str, labels: str, index: str) -> dict[str, str]:
    return {
        "adj.npz": _TSINGHUA.format(adj),
        "features.npz": _TSINGHUA.format(features),
        "labels.npz": _TSINGHUA.format(labels),
        "index.npz": _TSINGHUA.format(index),
    }


@dataclass(frozen=True)
class DatasetInfo:
    """One catalogue entry.

    Attributes:
        name: registry name.
        nodes, edges, features, classes: published sizes (edges undirected).
        source: ``grb`` (official download) or ``csbm`` (generated here).
        urls: official download address of each GRB file (empty when none is known).
        csbm: generator parameters for ``csbm`` sources.
        feature_range: feature range after arctan normalisation (seed 001, Table 5/12).
        checksums: file name -> ``(size in bytes, sha256)`` of the official files. Downloads
            and cached copies are compared with them (``--no-verify`` skips the comparison);
            a file without an entry is verified by parsing only (the ``.npz`` keys, shapes,
            labels and split), plus the published sizes above.
    """

    name: str
    nodes: int
    edges: int
    features: int
    classes: int
    source: str
    urls: dict[str, str] = field(default_factory=dict)
    csbm: CSBMConfig | None = None
    feature_range: tuple[float, float] | None = None
    checksums: dict[str, tuple[int, str]] = field(default_factory=dict)


# Checksums of the official GRB files. None of the five official downloads is reachable from
# the machines this code was written on, so no size or SHA-256 is recorded for them: their
# verification falls back to the parse checks and the published sizes (nodes, features,
# classes) until someone records them from the official files (``grb_dist.datasets.grb.
# file_sha256`` and the file size of each of adj.npz, features.npz, labels.npz, index.npz).
# The early GRB release of Cora that the test-suite reads (2,708 nodes, 1,433 features) is not
# the official grb-cora download (2,680 nodes, 302 features): its checksums would reject the
# real file, so they are not recorded here as grb-cora's.
GRB_DATASETS = (
    DatasetInfo("grb-cora", 2680, 5148, 302, 7, "grb",
                _urls("2e522f282e884907a39f", "46fd09a8c1d04f11afbb", "88fccac46ee94161b48f", "d8488cbf78a34a8c9c5b"),
                feature_range=(-0.94, 0.94)),
    # No official address of grb-citeseer is published in the GRB code; place its files by hand.
    DatasetInfo("grb-citeseer", 3191, 4172, 768, 6, "grb", {}, feature_range=(-0.96, 0.89)),
    DatasetInfo("grb-flickr", 89250, 449878, 500, 7, "grb",
                _urls("90a513e35f0a4f3896eb", "54b2f1d7ee7c4d5bbcd4", "43e9ec09458e4d30b528", "8239dc6a729e489da44f"),
                feature_range=(-0.47, 1.00)),
    DatasetInfo("grb-reddit", 232965, 11606919, 602, 41, "grb",
                _urls("22e91d7f34494784a670", "000dc5cd8dd643dcbfc6", "3e228140ede64b7886b2", "24310393f5394e3a8b73"),
                feature_range=(-0.98, 0.99)),
    DatasetInfo("grb-aminer", 659574, 2878577, 100, 18, "grb",
                _urls("dca1075cd8cc408bb4c0", "e93ba93dbdd94673bce3", "0ddbca54864245f3b4e1", "3444a2e87ef745e89828"),
                feature_range=(-0.93, 0.93)),
)

#: Share of a node's expected neighbours that are of its own class in the CSBM twins.
TWIN_HOMOPHILY = 0.8
#: Class-mean separation (in sigma units) of the CSBM twins: hard regime, structure matters.
TWIN_K = 1.5


def _twin(info: DatasetInfo) -> DatasetInfo:
    mean_degree = 2 * info.edges / info.nodes
    cfg = CSBMConfig(
        num_nodes=info.nodes,
        num_classes=info.classes,
        num_features=info.features,
        K=TWIN_K,
        deg_same=TWIN_HOMOPHILY * mean_degree,
        deg_diff=(1 - TWIN_HOMOPHILY) * mean_degree,
    )
    return DatasetInfo(f"csbm-{info.name}", info.nodes, info.edges, info.features, info.classes, "csbm", csbm=cfg)


#: The small embedded default: trains and sweeps in minutes on a laptop CPU.
CSBM_DEFAULT = DatasetInfo(
    "csbm", 2000, 5000, 32, 4, "csbm",
    csbm=CSBMConfig(num_nodes=2000, num_classes=4, num_features=32, K=1.5, deg_same=4.0, deg_diff=1.0),
)

CATALOG: Registry[DatasetInfo] = Registry(
    "dataset",
    {d.name: d for d in (CSBM_DEFAULT, *GRB_DATASETS, *(_twin(d) for d in GRB_DATASETS))},
)
