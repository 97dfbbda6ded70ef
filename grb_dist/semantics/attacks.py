"""Local-budget structure attacks on an inductively added node (Gosch et al. 2023, section 5,
appendix H).

Every attack here only *adds* edges between the attacked node v and nodes of the known
graph, and returns the *order* in which it adds them: row i of the result lists the base
nodes that node i connects to, first edge first, padded with -1. Robustness is then the
first prefix length at which a classifier's decision changes (see
:mod:`grb_dist.semantics.metrics`); a local budget Delta is a prefix of length Delta, so
one order serves every budget.

- ``l2-weak``: the closest different-class nodes in feature space (L2), closest first;
- ``l2-strong``: the most distant different-class nodes, most distant first;
- ``dice``: different-class nodes in random order (DICE with d = 0 removals, b = Delta);
- ``l2-weak-class``: ``l2-weak`` restricted to one class c != y_v given per node (the
  real-graph variant of section 5.2.1: all inserted edges go to the same class);
- ``grbcd``: greedy gradient attack adaptive to the attacked model (GR-BCD restricted to
  additions at v): at each step the non-neighbour whose edge weight most lowers f's
  margin at v is added; for models differentiable in edge weights only;
- ``nettack``: Nettack's structure attack restricted to additions at v, on the linearised
  2-layer GCN surrogate ``A_hat^2 X W`` (an SGC with k = 2 and no hidden layer trained on the
  known graph, appendix H): at each step the non-neighbour whose edge lowers the
  surrogate's margin of v's true class most, scored exactly and in closed form for all
  candidates at once (no degree-distribution test, as in the paper's CSBM experiments);
- ``sga``: SGA restricted to additions at v, on the same surrogate: candidates are the
  nodes the surrogate assigns to the best wrong class of v, and each step adds the one
  whose relaxed edge weight has the most negative gradient of the surrogate's margin of
  v's true class (greedy, through the edge-weighted surrogate).

"Different class" means different from v's true label. Nodes already adjacent to v are
never chosen. The distance-based orders are computed by chunks of attacked nodes against
all base nodes (a chunk x N block at a time, never N x N).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from grb_dist.core.errors import ConfigError

#: Attacks whose order depends on the data only (not on the attacked model).
DATA_ATTACKS = ("l2-weak", "l2-strong", "dice", "l2-weak-class")
#: Attacks on a surrogate trained on the known graph (the same for every attacked model).
SURROGATE_ATTACKS = ("nettack", "sga")
#: Attacks that differentiate the attacked model.
ADAPTIVE_ATTACKS = ("grbcd",)
ATTACKS = DATA_ATTACKS + SURROGATE_ATTACKS + ADAPTIVE_ATTACKS
#: Model names (base architectures) whose logits are differentiable in edge weights.
WEIGHTED_BASES = ("gcn", "sgc", "appnp", "sage", "mlp")

#: Entries of a chunk x N score block kept in memory at once.
_CHUNK_ENTRIES = 1 << 23


def check_attack(attack: str, model: str | None = None) -> None:
    """Raise :class:`ConfigError` for an unknown attack, or an adaptive attack on a model
    that is not differentiable in edge weights (label propagation, attention)."""
    if attack not in ATTACKS:
        from grb_dist.core.names import unknown_name_message

        raise ConfigError(unknown_name_message("semantics attack", attack, ATTACKS))
    if model is not None and attack in ADAPTIVE_ATTACKS:
        name = model.lower()
        if name not in WEIGHTED_BASES:
            raise ConfigError(
                f"attack {attack} needs a model differentiable in edge weights ({', '.join(WEIGHTED_BASES)}); "
                f"{model} is not (label propagation and attention are not)"
            )


def attack_order(
    attack: str,
    base_features: np.ndarray,
    base_labels: np.ndarray,
    x_new: np.ndarray,
    y_new: np.ndarray,
    nb_node: np.ndarray,
    nb_base: np.ndarray,
    steps: int,
    *,
    seed: int = 0,
    target_class: np.ndarray | None = None,
) -> np.ndarray:
    """The order in which a data-driven attack connects each new node to base nodes.

    Args:
        attack: one of :data:`DATA_ATTACKS`.
        base_features: N x D features of the known graph.
        base_labels: its N labels.
        x_new: T x D features of the attacked (new) nodes.
        y_new: their T true labels.
        nb_node, nb_base: the clean edges of the new nodes, as pairs (new node index in
            [0, T), base node id); these are never chosen again.
        steps: the length of each order (the largest budget needed).
        seed: seed of ``dice``.
        target_class: T classes for ``l2-weak-class`` (each must differ from ``y_new``).

    Returns:
        T x steps int64 base node ids, -1 where fewer candidates exist.
    """
    check_attack(attack)
    if attack in ADAPTIVE_ATTACKS or attack in SURROGATE_ATTACKS:
        raise ConfigError(f"attack {attack} needs a model: use grbcd_order / nettack_order")
    if steps < 0:
        raise ConfigError(f"attack steps must be >= 0, got {steps}")
    n = base_labels.shape[0]
    t = y_new.shape[0]
    out = np.full((t, steps), -1, dtype=np.int64)
    if steps == 0 or t == 0 or n == 0:
        return out
    if attack == "l2-weak-class":
        if target_class is None:
            raise ConfigError("attack l2-weak-class needs a target class per node")
        target_class = np.asarray(target_class, dtype=np.int64)
        if np.any(target_class == y_new):
            raise ConfigError("attack l2-weak-class: each target class must differ from the node's label")
    rng = np.random.default_rng(seed)
    xb = np.asarray(base_features, dtype=np.float64)
    sq_b = (xb * xb).sum(1)
    chunk = max(1, min(t, _CHUNK_ENTRIES // max(n, 1)))
    nb_node = np.asarray(nb_node, dtype=np.int64)
    nb_base = np.asarray(nb_base, dtype=np.int64)
    k = min(steps, n)
    for start in range(0, t, chunk):
        stop = min(t, start + chunk)
        xs = np.asarray(x_new[start:stop], dtype=np.float64)
        if attack == "dice":
            score = rng.random((stop - start, n))
        else:
            score = (xs * xs).sum(1)[:, None] - 2.0 * xs @ xb.T + sq_b[None, :]
            if attack == "l2-strong":
                score = -score  # most distant first
        if attack == "l2-weak-class":
            allowed = base_labels[None, :] == target_class[start:stop, None]
        else:
            allowed = base_labels[None, :] != y_new[start:stop, None]
        sel = (nb_node >= start) & (nb_node < stop)
        allowed[nb_node[sel] - start, nb_base[sel]] = False
        score = np.where(allowed, score, np.inf)
        part = np.argpartition(score, k - 1, axis=1)[:, :k] if k < n else np.tile(np.arange(n), (stop - start, 1))
        part_scores = np.take_along_axis(score, part, 1)
        order = np.argsort(part_scores, axis=1, kind="stable")
        picked = np.take_along_axis(part, order, 1)
        picked_scores = np.take_along_axis(part_scores, order, 1)
        out[start:stop, :k] = np.where(np.isfinite(picked_scores), picked, -1)
    return out


def margin(logits: torch.Tensor, node: int, cls: int) -> torch.Tensor:
    """``logits[node, cls] - max_{c != cls} logits[node, c]`` (negative: f changed its mind)."""
    row = logits[node]
    other = torch.cat([row[:cls], row[cls + 1 :]])
    return row[cls] - other.max()


def grbcd_order(
    model: torch.nn.Module,
    x: torch.Tensor,
    edge_index: torch.Tensor,
    node: int,
    candidates: np.ndarray,
    steps: int,
    cls: int | None = None,
) -> np.ndarray:
    """Greedy gradient additions at ``node`` adaptive to ``model`` (GR-BCD, additions only).

    ``x``/``edge_index`` are the graph with ``node`` and its clean edges (both directions);
    ``candidates`` the base nodes that may be connected (not already adjacent). At each step
    the edge weights of all candidate pairs are relaxed, the gradient of f's margin at
    ``node`` (for its clean decision) is taken, and the unchosen candidate with the most
    negative gradient is added (the margin of ``cls``, default f's clean decision).
    Returns ``steps`` base ids (-1 padded).
    """
    from grb_dist.attacks.shared.weighted import WeightedSurrogate

    out = np.full(steps, -1, dtype=np.int64)
    candidates = np.asarray(candidates, dtype=np.int64)
    if steps == 0 or candidates.size == 0:
        return out
    surrogate = WeightedSurrogate(model, x, edge_index)
    pairs = torch.stack([torch.full((candidates.size,), node, dtype=torch.long), torch.as_tensor(candidates)])
    weights = torch.zeros(candidates.size, dtype=x.dtype)
    chosen = torch.zeros(candidates.size, dtype=torch.bool)
    if cls is None:
        with torch.no_grad():
            cls = int(surrogate.logits(pairs, weights)[node].argmax())
    for step in range(min(steps, candidates.size)):
        w = weights.clone().requires_grad_(True)
        loss = margin(surrogate.logits(pairs, w), node, cls)
        (grad,) = torch.autograd.grad(loss, w)
        grad = grad.masked_fill(chosen, float("inf"))
        best = int(grad.argmin())
        chosen[best] = True
        weights[best] = 1.0
        out[step] = candidates[best]
    return out


def linear_gcn_margins(
    h: np.ndarray, adj, node: int, label: int, candidates: np.ndarray
) -> np.ndarray:
    """Margins ``z[label] - max_{c != label} z[c]`` at ``node`` of ``z = A_hat^2 H`` after
    adding the single edge (node, u), for every u in ``candidates`` (non-neighbours of
    ``node``), in closed form.

    ``A_hat = D^-1/2 (A + I) D^-1/2``; ``h`` is N x C (``X W`` with the bias), ``adj`` the
    symmetric scipy CSR adjacency without self-loops. With ``s = (A + I) D^-1/2 H``:
    ``z_v = d_v^-1/2 sum_{k in N[v]} s_k / d_k``; the new edge changes d_v and d_u, adds
    ``d_u'^-1/2 H_u`` to ``s_v`` and ``d_v'^-1/2 H_v`` to ``s_u``, and shifts ``s_k`` of v's
    neighbours by ``(d_v'^-1/2 - d_v^-1/2) H_v`` and of u's neighbours by
    ``(d_u'^-1/2 - d_u^-1/2) H_u``.
    """
    d = np.asarray(adj.sum(1)).ravel() + 1.0
    dinv = d ** -0.5
    s = adj @ (dinv[:, None] * h) + dinv[:, None] * h
    nb = adj.indices[adj.indptr[node]:adj.indptr[node + 1]]
    nb = nb[nb != node]
    base = (s[nb] / d[nb, None]).sum(0)
    s2 = float((1.0 / d[nb]).sum())
    ind = np.zeros(d.size)
    ind[nb] = 1.0 / d[nb]
    common = adj @ ind  # sum over v's neighbours k adjacent to u of 1 / d_k
    u = np.asarray(candidates, dtype=np.int64)
    dv2 = d[node] + 1.0
    alpha_v = dv2 ** -0.5 - dinv[node]
    du2 = d[u] + 1.0
    alpha_u = du2 ** -0.5 - dinv[u]
    hv, hu = h[node], h[u]
    total = (
        base[None, :] + alpha_v * s2 * hv[None, :] + (alpha_u * common[u])[:, None] * hu
        + (s[node] + alpha_v * hv)[None, :] / dv2 + (du2 ** -0.5)[:, None] * hu / dv2
        + (s[u] + alpha_u[:, None] * hu + (dv2 ** -0.5) * hv[None, :]) / du2[:, None]
    )
    z = dv2 ** -0.5 * total
    other = np.delete(z, label, axis=1).max(1)
    return z[:, label] - other


def nettack_order(
    surrogate: torch.nn.Module,
    x: torch.Tensor,
    edge_index: torch.Tensor,
    node: int,
    label: int,
    candidates: np.ndarray,
    steps: int,
) -> np.ndarray:
    """Nettack's greedy edge additions at ``node`` on a linearised 2-layer GCN.

    ``surrogate`` is an SGC with ``k = 2`` and no hidden layer (``A_hat^2 (X W + b)``);
    ``x``/``edge_index`` the graph with ``node`` and its clean edges. Each step adds the
    candidate whose edge gives the lowest surrogate margin of ``label`` at ``node`` (exact,
    :func:`linear_gcn_margins`). Returns ``steps`` base ids (-1 padded).
    """
    import scipy.sparse as sp

    from grb_dist.models.sgc import SGC

    if not isinstance(surrogate, SGC) or surrogate.config.k != 2 or len(surrogate.layers) != 1:
        raise ConfigError("nettack needs a linearised 2-layer GCN surrogate: sgc with k: 2 and hidden_sizes: []")
    out = np.full(steps, -1, dtype=np.int64)
    candidates = np.asarray(candidates, dtype=np.int64)
    with torch.no_grad():
        h = surrogate.layers[0]["lin"](x).double().numpy()
    n = x.shape[0]
    ei = edge_index.numpy()
    adj = sp.csr_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(n, n))
    free = np.ones(candidates.size, dtype=bool)
    for step in range(min(steps, candidates.size)):
        margins = linear_gcn_margins(h, adj, node, label, candidates)
        margins[~free] = np.inf
        best = int(np.argmin(margins))
        free[best] = False
        u = int(candidates[best])
        out[step] = u
        add = sp.csr_matrix((np.ones(2), ([node, u], [u, node])), shape=(n, n))
        adj = (adj + add).tocsr()
    return out


def sga_order(
    surrogate: torch.nn.Module,
    x: torch.Tensor,
    edge_index: torch.Tensor,
    node: int,
    label: int,
    candidates: np.ndarray,
    steps: int,
) -> np.ndarray:
    """SGA's additions at ``node`` on the linearised GCN surrogate: the candidates the
    surrogate assigns to ``node``'s best wrong class, added greedily by gradient."""
    with torch.no_grad():
        logits = surrogate(x, edge_index)
    row = logits[node].clone()
    row[label] = -float("inf")
    target = int(row.argmax())
    candidates = np.asarray(candidates, dtype=np.int64)
    pred = logits.argmax(1).numpy()
    pool = candidates[pred[candidates] == target]
    return grbcd_order(surrogate, x, edge_index, node, pool, steps, cls=label)


__all__: Sequence[str] = [
    "ADAPTIVE_ATTACKS",
    "SURROGATE_ATTACKS",
    "ATTACKS",
    "DATA_ATTACKS",
    "WEIGHTED_BASES",
    "attack_order",
    "check_attack",
    "grbcd_order",
    "linear_gcn_margins",
    "margin",
    "nettack_order",
    "sga_order",
]
