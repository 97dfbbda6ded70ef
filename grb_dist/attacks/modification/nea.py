"""NEA: the node-embedding attack of Bojchevski & Günnemann, "Adversarial attacks on node
embeddings via graph poisoning" (ICML 2019), as GRB's ``NEA`` modification attack."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grb_dist.attacks.modification.spectral import SpectralAttack, SpectralConfig, sum_of_powers
from grb_dist.core.errors import ConfigError


@dataclass(frozen=True)
class NEAConfig(SpectralConfig):
    """Attributes:
        window: DeepWalk's window size ``T`` (powers 1..T of the eigenvalues), >= 1.
    """

    window: int = 5

    def __post_init__(self) -> None:
        super().__post_init__()
        w = self.window
        if isinstance(w, bool) or not isinstance(w, int) or w < 1:
            raise ConfigError(f"window must be a positive integer, got {w!r}")


class NEA(SpectralAttack):
    """Flip the candidates that change a rank-k estimate of the DeepWalk loss most.

    Algorithm: eigenpairs ``(lambda_p, u_p)`` of ``(A + I) u = lambda (D + I) u``; for each
    candidate ``(i, j)`` with ``w = 1 - 2 A_ij`` the first-order eigenvalues
    ``lambda'_p = lambda_p + w (2 u_pi u_pj - lambda_p (u_pi^2 + u_pj^2))`` (the paper's
    Theorem 1). Bojchevski & Günnemann's loss is ``sqrt(sum_p (sum_{r=1..T} lambda'_p^r)^2)``
    over the ``N - dim`` eigenvalues *outside* the embedding's top ``dim`` (the error of the
    best rank-``dim`` approximation of the DeepWalk matrix), and they flip the candidates of
    highest loss. That needs all N eigenvalues. What is computed here, over the ``k``
    largest-magnitude non-trivial pairs only (a rank-k approximation): ``L(lambda) =
    sqrt(sum_{p<=k} (sum_{r=1..T} lambda_p^r)^2)``, and the score is ``|L(lambda') -
    L(lambda)|``, the flips that change it most first. Candidates as in GRB: the clean edges
    touching a target (removals), optionally plus sampled absent pairs touching a target;
    removals that would isolate a node are skipped unless ``allow_isolate``.

    Differs from GRB, which follows the authors' code: all N generalized eigenpairs with a
    dense ``scipy.linalg.eigh`` (O(N^3) time, O(N^2) memory) and a Python loop over
    candidates; here ARPACK on the sparse normalised matrix (trivial ``lambda = 1`` of each
    component left out, see :mod:`~grb_dist.attacks.modification.spectral`) and the scores
    of all candidates at once (C x k by chunks). Cost: one sparse ``eigsh`` (O(E) per
    Lanczos step) plus O(C k T). ``uses_surrogate`` is False.
    """

    Config = NEAConfig
    name = "nea"

    def score(self, vals: np.ndarray, new_vals: np.ndarray) -> np.ndarray:
        t = self.config.window
        clean = np.linalg.norm(sum_of_powers(vals, t))
        return np.abs(np.linalg.norm(sum_of_powers(new_vals, t), axis=1) - clean)


__all__ = ["NEA", "NEAConfig"]
