"""Feature normalisations used by GRB.

- ``arctan`` (default): one global standardisation ``(x - mean) / std`` over all entries,
  then ``(2 / pi) * arctan``; values land in (-1, 1).
- ``tanh``: the same global standardisation, then ``tanh``.
- ``standardize``: per-feature (column) standardisation.
- ``none``: features unchanged.
"""

from __future__ import annotations

import numpy as np

from grb_dist.core.arrays import mean_std, row_blocks
from grb_dist.core.errors import ConfigError
from grb_dist.core.names import unknown_name_message

NORMALIZATIONS = ("arctan", "tanh", "standardize", "none")


def normalize_features(features: np.ndarray, method: str = "arctan") -> np.ndarray:
    """Return normalised float32 features (the input is not modified).

    The statistics are accumulated in float64 and the output written block of rows by block
    (:mod:`grb_dist.core.arrays`): the only full-size allocation is the float32 result, so
    loading a graph holds its stored features and one normalised copy, as
    :attr:`grb_dist.datasets.npz.DeclaredGraph.nbytes` counts."""
    method = method.lower()
    if method not in NORMALIZATIONS:
        raise ConfigError(unknown_name_message("feature normalisation", method, NORMALIZATIONS))
    if method == "none":
        return np.ascontiguousarray(features, dtype=np.float32)
    x = np.asarray(features)
    mean, std = mean_std(x, axis=0 if method == "standardize" else None)
    std = np.where(std > 0, std, 1.0)
    out = np.empty(x.shape, dtype=np.float32)
    for b in row_blocks(x):
        z = (np.asarray(x[b], dtype=np.float64) - mean) / std
        if method == "arctan":
            out[b] = (2.0 / np.pi) * np.arctan(z)
        elif method == "tanh":
            out[b] = np.tanh(z)
        else:
            out[b] = z
    return out
