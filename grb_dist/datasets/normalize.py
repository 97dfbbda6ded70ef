"""Feature normalisations used by GRB.

- ``arctan`` (default): one global standardisation ``(x - mean) / std`` over all entries,
  then ``(2 / pi) * arctan``; values land in (-1, 1).
- ``tanh``: the same global standardisation, then ``tanh``.
- ``standardize``: per-feature (column) standardisation.
- ``none``: features unchanged.
"""

from __future__ import annotations

import numpy as np

from grb_dist.core.errors import ConfigError
from grb_dist.core.names import unknown_name_message

NORMALIZATIONS = ("arctan", "tanh", "standardize", "none")


def normalize_features(features: np.ndarray, method: str = "arctan") -> np.ndarray:
    """Return normalised float32 features (the input is not modified)."""
    method = method.lower()
    x = np.asarray(features, dtype=np.float64)
    if method == "none":
        return np.ascontiguousarray(features, dtype=np.float32)
    if method in ("arctan", "tanh"):
        std = x.std()
        z = (x - x.mean()) / (std if std > 0 else 1.0)
        out = (2.0 / np.pi) * np.arctan(z) if method == "arctan" else np.tanh(z)
    elif method == "standardize":
        std = x.std(axis=0)
        out = (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)
    else:
        raise ConfigError(unknown_name_message("feature normalisation", method, NORMALIZATIONS))
    return np.ascontiguousarray(out, dtype=np.float32)
