"""The GRB degree-based splitting scheme.

Nodes are ranked by degree (ties broken by a seeded permutation). The lowest and the highest
5% are excluded from test candidacy, the remaining ranking is cut into three equal bands,
and 10% of N is sampled without replacement from each band: easy (low degree), medium,
hard (high degree); full is their union. Of the remaining nodes, 60% of N are training
nodes and the rest (about 10% of N) validation nodes. Sizes are truncated as GRB's code
truncates them (``int(N * ratio)``): on Cora's 2,708 nodes, 270 per band and 1,624 training
nodes, the sizes of GRB's official cora split.
"""

from __future__ import annotations

import numpy as np

from grb_dist.core.errors import DatasetError

MIN_NODES = 20


def grb_split(
    degrees: np.ndarray,
    seed: int = 0,
    *,
    drop_ratio: float = 0.05,
    test_ratio: float = 0.1,
    train_ratio: float = 0.6,
) -> dict[str, np.ndarray]:
    """Split nodes by the GRB scheme; deterministic given ``seed``.

    Args:
        degrees: int array (N,), node degrees.
        seed: seed of the tie-breaking and sampling.
        drop_ratio: fraction of lowest- and of highest-degree nodes excluded from test sets.
        test_ratio: fraction of N sampled from each of the three degree bands.
        train_ratio: fraction of N used for training; the rest of the non-test nodes validate.

    Returns:
        dict with sorted int64 index arrays ``train``, ``val``, ``test_easy``,
        ``test_medium``, ``test_hard``, ``test_full``.
    """
    degrees = np.asarray(degrees)
    n = int(degrees.shape[0])
    if n < MIN_NODES:
        raise DatasetError(f"graph has {n} nodes; the GRB split needs at least {MIN_NODES}")
    if not (0 <= drop_ratio < 0.5 and 0 < test_ratio and 0 < train_ratio):
        raise DatasetError("split ratios out of range; use 0 <= drop < 0.5 and positive test/train ratios")
    band = (n - 2 * int(n * drop_ratio)) // 3
    n_test = int(n * test_ratio)  # truncated, as GRB's code does
    if n_test > band or n_test == 0:
        raise DatasetError(
            f"test_ratio {test_ratio} needs {n_test} nodes per band but a band holds {band}; lower it"
        )
    n_train = int(n * train_ratio)
    if n_train + 3 * n_test >= n:
        raise DatasetError("train_ratio + 3 * test_ratio leaves no validation nodes; lower them")
    rng = np.random.default_rng(seed)
    # Rank by degree; a random permutation first makes ties random but reproducible.
    perm = rng.permutation(n)
    order = perm[np.argsort(degrees[perm], kind="stable")]
    lo = int(n * drop_ratio)
    bands = [order[lo + i * band : lo + (i + 1) * band] for i in range(3)]
    tests = [np.sort(rng.choice(b, size=n_test, replace=False)) for b in bands]
    is_test = np.zeros(n, dtype=bool)
    for t in tests:
        is_test[t] = True
    rest = rng.permutation(np.flatnonzero(~is_test))
    return {
        "train": np.sort(rest[:n_train]).astype(np.int64),
        "val": np.sort(rest[n_train:]).astype(np.int64),
        "test_easy": tests[0].astype(np.int64),
        "test_medium": tests[1].astype(np.int64),
        "test_hard": tests[2].astype(np.int64),
        "test_full": np.sort(np.concatenate(tests)).astype(np.int64),
    }
