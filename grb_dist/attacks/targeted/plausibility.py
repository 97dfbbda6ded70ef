"""The two unnoticeability tests of Nettack (Zügner, Akbarnejad & Günnemann, KDD 2018,
section 4.1 and 4.2): a structure flip must keep the degree distribution plausible, and a
feature may be added to a node only if it co-occurs with the node's features.

**Degree distribution.** Degrees ``d >= d_min`` (``d_min = 2``) are taken to follow a power
law. Its exponent is estimated as the paper's Eq. 6 gives it,
``alpha = 1 + n / (sum(log d) - n log(d_min - 1/2))`` over the ``n`` counted degrees, and
its log-likelihood is the paper's Eq. 7,
``l(D) = n log(alpha) + n alpha log(d_min) - (alpha + 1) sum(log d)``. The *minus* of the
last term is the paper's and the sign of the authors' released Nettack (and of DeepRobust's
Nettack); an early revision of the authors' code added it, which is the sign grb-dist's
Metattack keeps for Pro-GNN's published perturbations. Which sign is used matters: with
``+`` the test's statistic has another scale and lets other flips through.

The test compares two hypotheses: the clean degrees ``D0`` and the perturbed ``D'`` come
from one power law (``l(H0) = l(D0 + D')``, fitted on both samples pooled) or from two
(``l(H1) = l(D0) + l(D')``). The statistic ``Lambda = -2 l(H0) + 2 l(H1)`` is chi-square
with one degree of freedom under ``H0``; a flip is accepted when ``Lambda < 0.004``, the
cutoff the paper uses (about the 5% quantile of chi-square(1): rejecting as soon as the two
samples differ detectably). A flip changes two degrees by the same ``+-1``, so the counted
``n`` and ``sum(log d)`` of every candidate follow from the current ones by a vector update:
the test of every candidate is a few vector operations (:meth:`DegreeTest.allows`).

**Feature co-occurrence.** The co-occurrence graph ``E`` has an edge between two features
that are both set on some node (of the clean graph); ``d_j`` is feature ``j``'s degree in
it. Feature ``i`` may be added to node ``u`` with features ``S_u`` when
``p(i | S_u) = 1/|S_u| sum_{j in S_u} E_ij / d_j > sigma``, with
``sigma = 1/2 * 1/|S_u| sum_{j in S_u} 1 / d_j`` (a random walk from ``S_u`` on ``E``
reaches ``i`` with more than half the probability it would reach a feature of ``S_u``
itself). ``S_u`` and ``E`` are the clean graph's, fixed for the attack, as in the authors'
code. A node holding a feature that co-occurs with nothing (``d_j = 0``) has an infinite
``sigma``: nothing may be added to it (the authors' code reaches the same through a 1e-8
guard). Removing a feature is never restricted.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

#: Smallest degree the power-law fit counts (the paper's d_min).
LL_DMIN = 2
#: The paper's cutoff of the likelihood-ratio statistic.
LL_CUTOFF = 0.004


def powerlaw_alpha(count: np.ndarray | float, logsum: np.ndarray | float, d_min: int = LL_DMIN) -> np.ndarray:
    """The power law's exponent estimated from ``count`` degrees ``>= d_min`` whose logs sum
    to ``logsum`` (the paper's Eq. 6)."""
    count = np.asarray(count, dtype=np.float64)
    return 1.0 + count / (np.asarray(logsum, dtype=np.float64) - count * math.log(d_min - 0.5))


def powerlaw_ll(count: np.ndarray | float, logsum: np.ndarray | float, d_min: int = LL_DMIN) -> np.ndarray:
    """The log-likelihood of those degrees under their fitted power law (the paper's Eq. 7):
    ``n log(alpha) + n alpha log(d_min) - (alpha + 1) sum(log d)``."""
    count = np.asarray(count, dtype=np.float64)
    alpha = powerlaw_alpha(count, logsum, d_min)
    return count * np.log(alpha) + count * alpha * math.log(d_min) - (alpha + 1.0) * logsum


def degree_stats(degree: np.ndarray, d_min: int = LL_DMIN) -> tuple[float, float]:
    """``(n, sum(log d))`` over the degrees ``>= d_min``."""
    d = np.asarray(degree, dtype=np.float64)
    kept = d[d >= d_min]
    return float(kept.size), float(np.log(kept).sum())


class DegreeTest:
    """The likelihood-ratio test of the degree distribution against the clean degrees.

    Args:
        clean_degree: the clean graph's degrees (no self-loops).
        cutoff: a flip passes when the statistic is below it (the paper's 0.004).
        d_min: the smallest degree counted.
    """

    def __init__(self, clean_degree: np.ndarray, cutoff: float = LL_CUTOFF, d_min: int = LL_DMIN):
        self.d_min = d_min
        self.cutoff = float(cutoff)
        self.count0, self.logsum0 = degree_stats(clean_degree, d_min)
        self.ll0 = powerlaw_ll(self.count0, self.logsum0, d_min)

    def statistic(self, count: np.ndarray | float, logsum: np.ndarray | float) -> np.ndarray:
        """``-2 l(D0 + D') + 2 (l(D0) + l(D'))`` for perturbed degrees with ``count`` counted
        degrees of log-sum ``logsum`` (vectors: one per candidate)."""
        pooled = powerlaw_ll(self.count0 + np.asarray(count), self.logsum0 + np.asarray(logsum), self.d_min)
        return -2.0 * pooled + 2.0 * (self.ll0 + powerlaw_ll(count, logsum, self.d_min))

    def _counted(self, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keep = d >= self.d_min
        return keep.astype(np.float64), np.where(keep, np.log(np.maximum(d, 1.0)), 0.0)

    def after_flips(self, degree: np.ndarray, m: np.ndarray, n: np.ndarray, delta: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        """``(n, sum(log d))`` of the degrees after flipping each pair ``(m[i], n[i])``
        (``m != n``; ``delta[i]`` +1 adds the edge, -1 removes it) from ``degree``."""
        count, logsum = degree_stats(degree, self.d_min)
        d = np.asarray(degree, dtype=np.float64)
        delta = np.asarray(delta, dtype=np.float64)
        for ends in (m, n):
            c_old, l_old = self._counted(d[ends])
            c_new, l_new = self._counted(d[ends] + delta)
            count = count + c_new - c_old
            logsum = logsum + l_new - l_old
        return np.broadcast_to(count, delta.shape), np.broadcast_to(logsum, delta.shape)

    def allows(self, degree: np.ndarray, m: np.ndarray, n: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """Which flips ``(m[i], n[i])`` (``delta`` as in :meth:`after_flips`) pass the test
        at current degrees ``degree``."""
        return self.statistic(*self.after_flips(degree, m, n, delta)) < self.cutoff


def cooccurrence_allowed(features: sp.spmatrix | np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """A ``len(nodes) x D`` boolean matrix: may feature ``j`` be added to node ``nodes[i]``
    (the co-occurrence test of the module docstring, on binary ``features``)? Features the
    node already has are ``False`` here (adding them is no flip)."""
    x = sp.csr_matrix(features, dtype=np.float64)
    x.data[:] = 1.0
    x.eliminate_zeros()
    cooc = (x.T @ x).tocsr()
    cooc.setdiag(0)
    cooc.eliminate_zeros()
    cooc.data[:] = 1.0
    degree = np.asarray(cooc.sum(axis=0)).ravel()
    inv = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
    rows = x[np.asarray(nodes, dtype=np.int64)]
    # sum_{j in S_u} E_ij / d_j: E_ij is zero wherever d_j is, so the finite inverse suffices
    reach = np.asarray((rows @ sp.diags(inv) @ cooc).todense())
    lonely = np.asarray((rows @ (degree == 0).astype(np.float64))).ravel() > 0
    sigma = np.where(lonely, np.inf, 0.5 * np.asarray(rows @ inv).ravel())
    return (reach > sigma[:, None]) & (rows.toarray() == 0)
