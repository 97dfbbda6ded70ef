"""STACK: spectral ranking of edge flips by the change of the eigenvalue norm (GRB's
``STACK`` modification attack)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grb_dist.attacks.modification.spectral import SpectralAttack, SpectralConfig


@dataclass(frozen=True)
class STACKConfig(SpectralConfig):
    """STACK's options are those of :class:`SpectralConfig` (``k``, ``candidates``,
    ``n_candidate_pairs``, ``allow_isolate``, ``tol``)."""


class STACK(SpectralAttack):
    """Flip the candidates whose first-order change of the spectrum is largest.

    Algorithm: eigenpairs ``(lambda_p, u_p)`` of ``(A + I) u = lambda (D + I) u``; for each
    candidate ``(i, j)`` with ``w = 1 - 2 A_ij`` the first-order eigenvalues
    ``lambda'_p = lambda_p + w (2 u_pi u_pj - lambda_p (u_pi^2 + u_pj^2))``
    (Bojchevski & Günnemann 2019); score ``| ||lambda|| - ||lambda'|| |``, highest first.
    Candidates as in GRB: the clean edges touching a target (removals), optionally plus
    sampled absent pairs touching a target; removals that would isolate a node are skipped
    unless ``allow_isolate`` (GRB's sequential rule, vectorised).

    Differs from GRB, which computes all N eigenpairs with a dense ``scipy.linalg.eigh`` on
    the N x N matrices (O(N^3) time, O(N^2) memory) and scores candidates in a Python loop:
    here the norms run over the ``k`` largest-magnitude non-trivial pairs only (ARPACK on
    the sparse normalised matrix, the trivial ``lambda = 1`` of each component left out, see
    :mod:`~grb_dist.attacks.modification.spectral`), a rank-k approximation of GRB's score,
    vectorised over all candidates (C x k by chunks). Cost: one sparse ``eigsh`` (O(E) per
    Lanczos step) plus O(C k). ``uses_surrogate`` is False.
    """

    Config = STACKConfig
    name = "stack"

    def score(self, vals: np.ndarray, new_vals: np.ndarray) -> np.ndarray:
        return np.abs(np.linalg.norm(vals) - np.linalg.norm(new_vals, axis=1))


__all__ = ["STACK", "STACKConfig"]
