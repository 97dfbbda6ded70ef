"""Metattack: global structure poisoning by meta-gradients (Zügner & Günnemann, ICLR 2019,
"Adversarial Attacks on Graph Neural Networks via Meta Learning").

The attacker treats the adjacency matrix as a hyper-parameter of the defender's training.
Each greedy step trains the paper's surrogate, a linearised two-layer GCN
``Â (Â X W1) W2`` (``Â = D^-1/2 (A + I) D^-1/2``, no nonlinearity), for ``train_iters``
steps of gradient descent with momentum from a fresh seeded initialisation on the current
perturbed graph, takes the gradient of the attacker's loss *through that training* with
respect to every entry of ``A`` (the meta-gradient), scores each node pair by
``grad * (1 - 2 A)`` (the loss change of flipping it), drops pairs whose flip would leave a
node without edges (and, with ``ll_constraint``, pairs whose flip makes the degree
distribution implausible, the power-law likelihood-ratio test of Zügner et al., KDD 2018),
and flips the best one. The attacker's loss is ``lambda_ * L_train + (1 - lambda_) * L_self``:
the cross-entropy on the training nodes (Meta-Train, ``lambda_=1``) and on the unlabelled
nodes against self-training labels (Meta-Self, ``lambda_=0``, the default; the labels are
:func:`~grb_dist.attacks.poisoning.base.self_training_labels`). ``approximate=True`` is the
paper's A-Meta-Self as the authors' code computes it: the surrogate trained by Adam
(``approx_lr``, 0.01), and the sum over its ``train_iters`` steps of the attacker loss's
gradient at each step's weights before the update (weights held fixed: nothing is
differentiated through the training). The budget of ``ratio_edge_mod`` is rounded down, and
the degree test's log-likelihood is the authors' (:func:`_powerlaw_ll`), so that a rate
allows what Pro-GNN's published perturbations were made with.

The meta-gradient is exact; what makes it cheap is the algebra of the linear surrogate:

- logits are ``F W1 W2`` with ``F = Â² X``, so the training depends on the graph only
  through the training rows ``F_L`` of ``F``. Every gradient of ``W1`` is ``F_L^T`` times
  something, hence ``W1_t = W1_0 + F_L^T Q_t``: training runs on the ``n_L x n_L`` kernel
  ``F_L F_L^T`` (``n_L`` training nodes) instead of the ``n_L x D`` features, and nothing
  in the inner loop is N x N;
- the reverse pass through the training (the adjoint of gradient descent with momentum) is
  written out, so it costs a few small products per step and no autograd graph;
- the gradient with respect to ``Â`` is a sum of low-rank and row-sparse products
  (:func:`lowrank_pair_matrix`): one N x N buffer per greedy step, written by one rank-4C
  product and a few row / column updates, then chained through the normalisation (the
  degree terms need ``Â``'s entries only).

Memory is dominated by the N x N buffers (the pair gradient, and at most two more: the
rows next to the training nodes and their transpose, or A-Meta-Self's dense chain); the
estimate (:func:`state_bytes`) is checked against :data:`MEMORY_FRACTION` of the machine's
memory before anything is allocated. Everything computes on the attack's device (a GPU's
memory bounds it there); only the sparse ``Â[train] Â X`` of the CPU path goes through scipy. The block-sparse alternative for larger graphs is
``meta_prbcd`` (:mod:`grb_dist.attacks.poisoning.prbcd`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from grb_dist.attacks.shared.flips import ModContext
from grb_dist.attacks.poisoning.base import MEMORY_FRACTION, PoisoningAttack, ModificationConfig, self_training_labels
from grb_dist.core.bounds import check_int
from grb_dist.core.resources import format_bytes, machine_memory
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph, Modification

#: Smallest degree the power-law fit of the likelihood-ratio test counts (Zügner et al.).
LL_DMIN = 2
#: Elements of one row block of the likelihood-ratio test (float64 temporaries).
LL_BLOCK = 1 << 22
#: Features with at most this share of non-zeros are multiplied as sparse matrices.
SPARSE_FEATURES = 0.1


@dataclass(frozen=True)
class MetattackConfig(ModificationConfig):
    """Attributes (``steps`` of the base config is unused: the attack takes one greedy step
    per ``flips_per_step`` flips until the budget is spent):
        lambda_: weight of the training-node loss; ``0`` = Meta-Self, ``1`` = Meta-Train.
        train_iters: inner training steps of the surrogate per greedy step.
        lr / momentum: Meta-Self's inner gradient descent (the paper's 0.1 and 0.9).
        approx_lr: A-Meta-Self's inner Adam step size (the authors' 0.01).
        hidden: the surrogate's hidden width.
        approximate: A-Meta-Self (gradient summed along the trajectory, not through it).
        flips_per_step: pairs flipped per greedy step (the best ones that stay valid); 1 is
            the paper's algorithm, more trade strength for speed.
        ll_constraint: keep the degree distribution plausible (likelihood-ratio test).
        ll_cutoff: the test's threshold (chi-square, Zügner et al.'s 0.004).
    """

    lambda_: float = 0.0
    train_iters: int = 100
    lr: float = 0.1
    momentum: float = 0.9
    approx_lr: float = 0.01
    hidden: int = 16
    approximate: bool = False
    flips_per_step: int = 1
    ll_constraint: bool = False
    ll_cutoff: float = 0.004

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.lambda_, (int, float)) and 0 <= self.lambda_ <= 1):
            raise ConfigError(f"metattack: lambda_ must be in [0, 1] (0 = Meta-Self, 1 = Meta-Train), got {self.lambda_}")
        check_int(self.train_iters, "metattack: train_iters", 1, 100_000)
        check_int(self.hidden, "metattack: hidden", 1, 16_384)
        check_int(self.flips_per_step, "metattack: flips_per_step", 1, 1_000_000)
        for name in ("lr", "approx_lr"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ConfigError(f"metattack: {name} must be a positive finite number, got {value}")
        if not (isinstance(self.momentum, (int, float)) and 0 <= self.momentum < 1):
            raise ConfigError(f"metattack: momentum must be in [0, 1), got {self.momentum}")
        if not (isinstance(self.ll_cutoff, (int, float)) and math.isfinite(self.ll_cutoff) and self.ll_cutoff > 0):
            raise ConfigError(f"metattack: ll_cutoff must be a positive finite number, got {self.ll_cutoff}")


def state_bytes(n: int, d: int, n_train: int, classes: int, hidden: int, iters: int, *,
                approximate: bool = False, ll_constraint: bool = False, itemsize: int = 4) -> int:
    """Estimated peak memory of one Metattack run, in bytes: three N x N buffers (the pair
    gradient and, at worst, the rows next to the training nodes and their transpose; the
    dense chain of A-Meta-Self), features and their propagation, the trajectory, the kernel
    and the row-sparse pieces of the gradient."""
    dense = 3 * n * n * itemsize
    features = 2 * n * d * itemsize + n_train * d * itemsize * 3
    trajectory = iters * n_train * (7 * hidden + 2 * classes) * itemsize + 3 * n_train * n_train * itemsize
    pieces = 4 * n * n_train * itemsize + (n * d * itemsize if approximate else 0)
    ll = 8 * 8 * min(n * n, LL_BLOCK) if ll_constraint else 0
    return int(dense + features + trajectory + pieces + ll)


def check_state_memory(name: str, graph: Graph, cfg: MetattackConfig) -> None:
    """Refuse (one line, before any allocation) a graph whose dense state exceeds
    :data:`MEMORY_FRACTION` of this machine's memory."""
    n_train = int(graph.split["train"].size) if "train" in graph.split else graph.num_nodes
    need = state_bytes(graph.num_nodes, graph.num_features, n_train, max(int(graph.num_classes), 2), cfg.hidden,
                       cfg.train_iters, approximate=cfg.approximate, ll_constraint=cfg.ll_constraint)
    total = machine_memory()
    if need > MEMORY_FRACTION * total:
        raise ConfigError(
            f"{name}: its dense N x N state on {graph.name!r} ({graph.num_nodes:,} nodes) needs about "
            f"{format_bytes(need)}, more than {MEMORY_FRACTION:.0%} of this machine's {format_bytes(total)}; "
            "use meta_prbcd (block-sparse) for a graph this large, or a machine with more memory"
        )


def _csr(crow: torch.Tensor, col: torch.Tensor, val: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    with warnings.catch_warnings():  # torch flags sparse CSR as beta on every construction
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, val, size=shape, check_invariants=False)


def csr_of(rows: torch.Tensor, cols: torch.Tensor, vals: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """A CSR tensor from COO entries (no duplicates), on their device."""
    order = torch.argsort(rows * shape[1] + cols)
    crow = torch.zeros(shape[0] + 1, dtype=torch.long, device=rows.device)
    crow[1:] = torch.cumsum(torch.bincount(rows, minlength=shape[0]), 0)
    return _csr(crow, cols[order], vals[order], shape)


class Adjacency:
    """A symmetric weighted adjacency without self-loops, given by canonical pairs
    ``(u < v)`` and weights, and its GCN normalisation ``Â = D^-1/2 (A + I) D^-1/2``
    (``D = 1 + `` weighted degree) as CSR. ``row, col, w`` list ``A + I``'s entries (both
    directions and the diagonal, weight 1 there). Everything lives on ``pairs``' device."""

    def __init__(self, n: int, pairs: torch.Tensor, weights: torch.Tensor):
        self.n = n
        self.pairs = pairs
        ones = torch.ones(n, dtype=weights.dtype, device=pairs.device)
        loop = torch.arange(n, device=pairs.device)
        self.row = torch.cat([pairs[0], pairs[1], loop])
        self.col = torch.cat([pairs[1], pairs[0], loop])
        self.w = torch.cat([weights, weights, ones])
        self.deg = ones.clone().index_add_(0, pairs[0], weights).index_add_(0, pairs[1], weights)
        self.s = self.deg.rsqrt()
        self.val = self.w * self.s[self.row] * self.s[self.col]
        self.csr = csr_of(self.row, self.col, self.val, (n, n))

    @classmethod
    def unweighted(cls, n: int, keys: np.ndarray, dtype: torch.dtype = torch.float32,
                   device: torch.device | str = "cpu") -> "Adjacency":
        """From sorted canonical keys ``u * n + v`` of the edges."""
        k = torch.as_tensor(keys, dtype=torch.long, device=device)
        return cls(n, torch.stack([k // n, k % n]), torch.ones(k.numel(), dtype=dtype, device=device))

    def prop(self, h: torch.Tensor) -> torch.Tensor:
        """``Â @ h``."""
        return self.csr @ h

    def columns(self, sel: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(nb, Â[nb][:, sel])``: the rows where ``Â[:, sel]`` is non-zero and that block
        as CSR (``Â`` is symmetric: the entries of rows ``sel``, transposed)."""
        pos = torch.full((self.n,), -1, dtype=torch.long, device=sel.device)
        pos[sel] = torch.arange(sel.numel(), device=sel.device)
        keep = pos[self.row] >= 0
        j, i, v = pos[self.row[keep]], self.col[keep], self.val[keep]
        nb, local = torch.unique(i, return_inverse=True)
        return nb, csr_of(local, j, v, (nb.numel(), sel.numel()))


def lowrank_pair_matrix(adj: Adjacency, sel: torch.Tensor, phi: torch.Tensor, delta: torch.Tensor,
                        p: torch.Tensor) -> torch.Tensor:
    """``s_i s_j (gÂ + gÂ^T)_ij`` as a dense N x N matrix (``s = diag(D^-1/2)``) for
    ``gÂ = U (Â V)^T + (Â U) V^T`` with ``U = [E_sel^T | delta]``, ``V = [phi | p]``
    (``E_sel^T``: the N x m selector of nodes ``sel``). This is the gradient of a loss with
    respect to ``Â`` when ``F = Â² X`` has gradient ``E_sel^T Fbar + delta W^T``
    (``phi = X Fbar^T``, ``p = X W``): one rank-4C product plus row / column updates on the
    m selected rows and the rows next to them."""
    s = adj.s[:, None]
    a_delta, a_p, a_phi = adj.prop(delta), adj.prop(p), adj.prop(phi)
    out = (torch.cat([delta, a_delta, a_p, p], 1) * s) @ (torch.cat([a_p, p, delta, a_delta], 1) * s).T
    part = a_phi * s * adj.s[sel][None, :]  # (k, j): s_k (Â phi)_kj s_sel_j
    out.index_add_(0, sel, part.T.contiguous())
    out.index_add_(1, sel, part)
    nb, block = adj.columns(sel)
    if nb.numel():
        near = (block @ phi.T.contiguous()) * adj.s[nb][:, None] * adj.s[None, :]
        out.index_add_(0, nb, near)
        out.index_add_(1, nb, near.T)
    return out


def add_degree_terms(adj: Adjacency, scaled: torch.Tensor) -> torch.Tensor:
    """The pair gradient from ``scaled`` (:func:`lowrank_pair_matrix`), in place: the
    normalisation's degree terms ``h_i + h_j`` with ``h_i = dL/dD_ii = -(1 / 2 D_ii)
    sum_k w_ik scaled_ik`` over ``A + I``'s entries (``Â_ik = w_ik s_i s_k``)."""
    vals = scaled[adj.row, adj.col] * adj.w
    h = -torch.zeros(adj.n, dtype=scaled.dtype, device=scaled.device).index_add_(0, adj.row, vals) / (2 * adj.deg)
    ones = torch.ones_like(h)
    return scaled.addmm_(torch.stack([h, ones], 1), torch.stack([ones, h], 0))


@dataclass
class _Trajectory:
    """What the reverse pass needs of one training run."""

    f: torch.Tensor
    kern: torch.Tensor
    w1_0: torch.Tensor
    q: torch.Tensor
    w1: torch.Tensor
    w2: torch.Tensor
    saved: list


class LinearizedGCN:
    """Metattack's surrogate ``Â (Â X W1) W2`` with its training and attacker loss on fixed
    features and labels; every method takes the current graph as an :class:`Adjacency`.

    ``labels``: a class per node (true labels on ``train``, self-training labels elsewhere);
    ``unlabelled``: the nodes of the self-training loss; ``lambda_``: weight of the
    training-node loss; ``lr`` / ``momentum``: Meta-Self's inner gradient descent;
    ``approx_lr``: A-Meta-Self's inner Adam. Every tensor lives on ``device``."""

    def __init__(self, features: np.ndarray, train: np.ndarray, labels: np.ndarray, unlabelled: np.ndarray,
                 num_classes: int, *, lambda_: float = 0.0, hidden: int = 16, iters: int = 100, lr: float = 0.1,
                 momentum: float = 0.9, approx_lr: float = 0.01, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu"):
        x = torch.as_tensor(np.asarray(features), dtype=dtype, device=device)
        self.x, self.device = x, torch.device(device)
        nz = x.nonzero().T
        if nz.shape[1] <= SPARSE_FEATURES * x.numel():  # bag-of-words: sparse products
            self.xs = csr_of(nz[0], nz[1], x[nz[0], nz[1]], tuple(x.shape))
            self.xs_t = csr_of(nz[1], nz[0], x[nz[0], nz[1]], (x.shape[1], x.shape[0]))
        else:
            self.xs, self.xs_t = x, x.T.contiguous()
        on_cpu = self.device.type == "cpu"
        self.x_scipy = (sp.csr_matrix(x.numpy()) if self.xs is not x else x.numpy()) if on_cpu else None
        self.train = torch.as_tensor(np.asarray(train), dtype=torch.long, device=device)
        self.c, self.hidden, self.iters, self.lr, self.momentum = num_classes, hidden, iters, lr, momentum
        self.approx_lr, self.dtype = approx_lr, dtype
        y = torch.as_tensor(np.asarray(labels), dtype=torch.long, device=device)
        self.onehot = torch.nn.functional.one_hot(y, num_classes).to(dtype)
        self.y_train, self.train_labels = self.onehot[self.train], y[self.train]
        weight = torch.zeros(x.shape[0], dtype=dtype, device=device)
        unl = torch.as_tensor(np.asarray(unlabelled), dtype=torch.long, device=device)
        if lambda_ < 1 and unl.numel():
            weight[unl] = (1 - lambda_) / unl.numel()
        if lambda_ > 0:
            weight[self.train] = lambda_ / self.train.numel()
        self.node_weight = weight

    def init_weights(self, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Glorot-uniform ``W1`` (D x h) and ``W2`` (h x C) drawn from ``gen``."""
        def glorot(a: int, b: int) -> torch.Tensor:
            bound = math.sqrt(6.0 / (a + b))
            return (torch.rand(a, b, generator=gen, dtype=torch.float64) * 2 - 1).mul_(bound).to(self.x)
        return glorot(self.x.shape[1], self.hidden), glorot(self.hidden, self.c)

    def train_features(self, adj: Adjacency) -> torch.Tensor:
        """``F_L = (Â² X)[train]``: on the CPU the sparse product ``Â[train] Â X`` (binary
        bag-of-words features are about 1% dense: five times faster than two dense
        propagations), elsewhere two propagations of ``X``."""
        if self.x_scipy is None:
            return adj.prop(adj.prop(self.x))[self.train]
        a = sp.csr_matrix((adj.val.numpy(), (adj.row.numpy(), adj.col.numpy())), shape=(adj.n, adj.n))
        f = (a[self.train.numpy()] @ a) @ self.x_scipy  # scipy: torch's CSR @ CSR leaks memory (2.13)
        return torch.as_tensor(f.toarray() if sp.issparse(f) else np.asarray(f), dtype=self.dtype)

    # ------------------------------------------------------------------ training

    def fit(self, f: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, keep: bool = True) -> _Trajectory:
        """Train ``W1 = w1 + f^T Q`` and ``W2`` by gradient descent with momentum on the
        cross-entropy of the training rows ``f`` (Meta-Self's inner training). (``e`` is
        ``softmax - onehot``; the mean's ``1 / n`` rides on the products.)"""
        n, lr, mom = f.shape[0], self.lr, self.momentum
        p0, kern = f @ w1, f @ f.T
        q = torch.zeros(n, self.hidden, dtype=f.dtype, device=f.device)
        vq, v2, saved = torch.zeros_like(q), torch.zeros_like(w2), []
        for _ in range(self.iters):
            hid = torch.addmm(p0, kern, q)
            prob = torch.softmax(hid @ w2, 1)
            e = prob - self.y_train
            if keep:
                saved.append((q, w2, hid, prob, e))
            vq = torch.addmm(vq, e, w2.T, beta=mom, alpha=1 / n)
            v2 = torch.addmm(v2, hid.T, e, beta=mom, alpha=1 / n)
            q, w2 = q.add(vq, alpha=-lr), w2.add(v2, alpha=-lr)
        return _Trajectory(f, kern, w1, q, torch.addmm(w1, f.T, q), w2, saved)

    def _adjoint(self, run: _Trajectory, w1bar: torch.Tensor, w2bar: torch.Tensor) -> torch.Tensor:
        """``dL/dF_L`` through the whole training, given ``dL/dW1_T`` and ``dL/dW2_T`` (the
        reverse pass of :meth:`fit`, written out; ``hbar`` and ``zbar`` are kept times ``n``)."""
        f, kern, lr, mom = run.f, run.kern, self.lr, self.momentum
        n = f.shape[0]
        qbar = f @ w1bar
        vq_t, v2_t = torch.zeros_like(qbar), torch.zeros_like(w2bar)
        hbars, qs = [], []
        for q, w2, hid, prob, e in reversed(run.saved):
            vq_t = torch.add(vq_t.mul_(mom), qbar, alpha=-lr)  # adjoint of V_{t+1}
            v2_t = torch.add(v2_t.mul_(mom), w2bar, alpha=-lr)  # adjoint of v2_{t+1}
            ebar = torch.addmm(vq_t @ w2, hid, v2_t)
            zbar = prob * (ebar - (ebar * prob).sum(1, keepdim=True))
            hbar = torch.addmm(e @ v2_t.T, zbar, w2.T)
            w2bar = torch.addmm(torch.addmm(w2bar, vq_t.T, e, alpha=1 / n), hid.T, zbar, alpha=1 / n)
            qbar = torch.addmm(qbar, kern, hbar, alpha=1 / n)
            hbars.append(hbar)
            qs.append(q)
        kbar = (torch.cat(hbars, 1) @ torch.cat(qs, 1).T).div_(n)
        p0bar = torch.stack(hbars).sum(0).div_(n)
        return run.q @ w1bar.T + p0bar @ run.w1_0.T + (kbar + kbar.T) @ f

    # ------------------------------------------------------------------ attacker loss

    def evaluate(self, adj: Adjacency, w1: torch.Tensor, w2: torch.Tensor):
        """``(loss, delta, xw1, hid)``: the attacker loss of weights ``(w1, w2)`` on
        ``adj``, its gradient ``delta`` w.r.t. the logits (N x C), ``X W1`` and ``Â² X W1``."""
        xw1 = self.xs @ w1
        hid = adj.prop(adj.prop(xw1))
        logp = torch.log_softmax(hid @ w2, 1)
        loss = -(self.node_weight * (logp * self.onehot).sum(1)).sum()
        delta = self.node_weight[:, None] * (logp.exp() - self.onehot)
        return loss, delta, xw1, hid

    def loss(self, adj: Adjacency, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
        """The attacker loss after training from ``(w1, w2)`` on ``adj``."""
        run = self.fit(self.train_features(adj), w1, w2, keep=False)
        return self.evaluate(adj, run.w1, run.w2)[0]

    def meta_gradient(self, adj: Adjacency, w1: torch.Tensor, w2: torch.Tensor) -> tuple[float, torch.Tensor]:
        """``(loss, G)``: the attacker loss after training from ``(w1, w2)`` and its exact
        meta-gradient ``G_ij = dL / dA_ij`` for the symmetric pair ``{i, j}`` (N x N, the
        diagonal meaningless)."""
        run = self.fit(self.train_features(adj), w1, w2)
        loss, delta, xw1, hid = self.evaluate(adj, run.w1, run.w2)
        w2bar = hid.T @ delta
        w1bar = self.xs_t @ adj.prop(adj.prop(delta @ run.w2.T))
        fbar = self._adjoint(run, w1bar, w2bar)
        phi = self.xs @ fbar.T.contiguous()
        scaled = lowrank_pair_matrix(adj, self.train, phi, delta, xw1 @ run.w2)
        return float(loss), add_degree_terms(adj, scaled)

    def approx_gradient(self, adj: Adjacency, w1: torch.Tensor, w2: torch.Tensor) -> tuple[float, torch.Tensor]:
        """``(loss, G)`` of A-Meta-Self: ``G = sum_t dL(W_t) / dA`` over the ``iters`` weights
        of the inner training, each taken *before* its update and held fixed (N x N, as
        :meth:`meta_gradient`). The inner training is Adam at ``approx_lr`` on the
        training-node cross-entropy, as in the authors' ``GNNMetaApprox`` and DeepRobust's
        ``MetaApprox``; nothing is differentiated through it."""
        f = self.train_features(adj)
        w1, w2 = w1.clone().requires_grad_(True), w2.clone().requires_grad_(True)
        adam = torch.optim.Adam([w1, w2], lr=self.approx_lr)
        grad_f = torch.zeros_like(self.x)
        loss = torch.zeros(())
        for _ in range(self.iters):
            with torch.no_grad():
                loss, delta, _, _ = self.evaluate(adj, w1, w2)
                grad_f.addmm_(delta, (w1 @ w2).T)  # dL/dF = delta W^T at this step's weights
            adam.zero_grad()
            with torch.enable_grad():
                torch.nn.functional.cross_entropy(f @ w1 @ w2, self.train_labels).backward()
            adam.step()
        # F = Â (Â X): dL/dÂ = K Â + Â K with K = grad_f X^T; symmetrised and scaled
        kt = self.xs @ grad_f.T.contiguous()
        t = adj.prop(kt + kt.T)
        scaled = (t + t.T).mul_(adj.s[:, None]).mul_(adj.s[None, :])
        return float(loss), add_degree_terms(adj, scaled)


# ---------------------------------------------------------------------- degree likelihood


def _powerlaw_ll(count: torch.Tensor, logsum: torch.Tensor) -> torch.Tensor:
    """The "log-likelihood" of the degrees >= :data:`LL_DMIN` under their fitted power law
    (``count`` of them, ``logsum`` of their logs), as the authors' code computes it:
    ``n log(alpha) + n alpha log(d_min) + (alpha + 1) sum(log d)``. The paper prints the
    last term with a minus (the true power-law log-likelihood); the authors' Metattack code
    (and an early revision of their Nettack), and DeepRobust's Metattack after them, add it,
    and that sum decides which flips their published perturbations allowed, so it is the one
    kept here. (Nettack, :mod:`grb_dist.attacks.targeted.plausibility`, has the paper's minus,
    as the authors' current Nettack and DeepRobust's do.)"""
    alpha = 1 + count / (logsum - count * math.log(LL_DMIN - 0.5))
    return count * torch.log(alpha) + count * alpha * math.log(LL_DMIN) + (alpha + 1) * logsum


def _degree_stats(deg: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    d = deg.to(torch.float64)
    keep = d >= LL_DMIN
    return keep.sum().to(torch.float64), torch.where(keep, torch.log(d.clamp(min=1)), torch.zeros_like(d)).sum()


class DegreeTest:
    """The likelihood-ratio test of the degree distribution (Zügner et al., KDD 2018, as
    used by Metattack): a flip is allowed when ``-2 l(D0 + D') + 2 (l(D0) + l(D')) <
    cutoff``, ``D0`` the clean degrees, ``D'`` the degrees after the flip."""

    def __init__(self, clean_degree: np.ndarray, cutoff: float):
        self.count0, self.logsum0 = _degree_stats(torch.as_tensor(clean_degree))
        self.ll0 = _powerlaw_ll(self.count0, self.logsum0)
        self.cutoff = cutoff

    def _statistic(self, count: torch.Tensor, logsum: torch.Tensor) -> torch.Tensor:
        comb = _powerlaw_ll(self.count0 + count, self.logsum0 + logsum)
        return -2 * comb + 2 * (self.ll0 + _powerlaw_ll(count, logsum))

    @staticmethod
    def _node_deltas(deg: torch.Tensor, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Per node: the change of the count and of the log-sum of counted degrees when its
        degree moves by ``step``."""
        def counted(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            keep = x >= LL_DMIN
            return keep.to(torch.float64), torch.where(keep, torch.log(x.clamp(min=1)), torch.zeros_like(x))

        (c0, l0), (c1, l1) = counted(deg.to(torch.float64)), counted(deg.to(torch.float64) + step)
        return c1 - c0, l1 - l0

    def mask(self, score: torch.Tensor, deg: np.ndarray, edges: tuple[torch.Tensor, torch.Tensor]) -> None:
        """Set ``score`` to -inf at every pair whose flip fails the test (current degrees
        ``deg``, current edges ``edges`` in both directions), in row blocks."""
        d = torch.as_tensor(deg, device=score.device)
        count, logsum = _degree_stats(d)
        add, rem = self._node_deltas(d, 1), self._node_deltas(d, -1)
        n = score.shape[0]
        rows = max(1, LL_BLOCK // n)
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            is_edge = torch.zeros(r1 - r0, n, dtype=torch.bool, device=score.device)
            inside = (edges[0] >= r0) & (edges[0] < r1)
            is_edge[edges[0][inside] - r0, edges[1][inside]] = True
            c = torch.where(is_edge, rem[0][r0:r1, None] + rem[0][None, :], add[0][r0:r1, None] + add[0][None, :])
            lg = torch.where(is_edge, rem[1][r0:r1, None] + rem[1][None, :], add[1][r0:r1, None] + add[1][None, :])
            bad = self._statistic(count + c, logsum + lg) >= self.cutoff
            score[r0:r1].masked_fill_(bad, -math.inf)

    def allows(self, deg: np.ndarray, u: int, v: int, step: int) -> bool:
        """Whether flipping ``(u, v)`` (``step`` +1 adds, -1 removes) passes, at degrees ``deg``."""
        d = torch.as_tensor(deg).clone()
        d[[u, v]] += step
        return bool(self._statistic(*_degree_stats(d)) < self.cutoff)


# ---------------------------------------------------------------------- the attack


class Metattack(PoisoningAttack):
    """Greedy meta-gradient structure poisoning (Meta-Self, Meta-Train, A-Meta-Self)."""

    Config = MetattackConfig
    name = "metattack"
    trains = True
    runs_steps = False  # one greedy step per flip of its budget: ``steps`` is unused

    def edge_budget(self, graph: Graph) -> int:
        """``int(ratio_edge_mod * edges)``, rounded down as Pro-GNN's and DeepRobust's
        Metattack scripts do (so a rate names the same number of flips as their
        published graphs)."""
        return max(1, int(self.config.ratio_edge_mod * graph.num_edges))

    def check_inputs(self, graph: Graph, targets: np.ndarray):
        targets, budget = super().check_inputs(graph, targets)
        check_state_memory(self.name, graph, self.config)
        return targets, budget

    def generate(self, ctx: ModContext, gen: torch.Generator) -> Modification:
        cfg, graph, n = self.config, ctx.graph, ctx.n
        budget = ctx.budget.n_edge_mod
        model = LinearizedGCN(graph.features, graph.split["train"], self_training_labels(ctx), ctx.targets,
                              int(graph.num_classes), lambda_=cfg.lambda_, hidden=cfg.hidden, iters=cfg.train_iters,
                              lr=cfg.lr, momentum=cfg.momentum, approx_lr=cfg.approx_lr, device=ctx.device)
        clean = ctx.edge_keys
        deg = graph.degrees().astype(np.int64).copy()
        test = DegreeTest(deg, cfg.ll_cutoff) if cfg.ll_constraint else None
        flipped: list[int] = []
        while len(flipped) < budget:
            keys = np.setxor1d(clean, np.asarray(flipped, dtype=np.int64))
            adj = Adjacency.unweighted(n, keys, device=ctx.device)
            w1, w2 = model.init_weights(gen)
            _, score = (model.approx_gradient if cfg.approximate else model.meta_gradient)(adj, w1, w2)
            picks = self._select(score, adj, keys, deg, flipped, test, min(cfg.flips_per_step, budget - len(flipped)))
            if not picks:
                break
            flipped.extend(picks)
        flips = np.asarray(flipped, dtype=np.int64)
        return ctx.result(np.stack([flips // n, flips % n]))

    @staticmethod
    def _select(score: torch.Tensor, adj: Adjacency, keys: np.ndarray, deg: np.ndarray, flipped: list[int],
                test: DegreeTest | None, k: int) -> list[int]:
        """The ``k`` best valid flips (keys ``u * n + v``) of the pair gradient ``score`` on
        the graph of edge keys ``keys``, ``deg`` updated in place: the score is
        ``G * (1 - 2 A)``; no self-pairs, no pair flipped before, no removal that leaves a
        node without edges, and (``test``) a plausible degree distribution."""
        n = adj.n
        u, v = adj.pairs
        score[u, v] = -score[u, v]
        score[v, u] = -score[v, u]
        score.diagonal().fill_(-math.inf)
        if flipped:
            f = torch.as_tensor(flipped, device=score.device)
            score[f // n, f % n] = -math.inf
            score[f % n, f // n] = -math.inf
        lonely = torch.as_tensor((deg[u.cpu().numpy()] <= 1) | (deg[v.cpu().numpy()] <= 1), device=score.device)
        score[u[lonely], v[lonely]] = -math.inf
        score[v[lonely], u[lonely]] = -math.inf
        if test is not None:
            test.mask(score, deg, (torch.cat([u, v]), torch.cat([v, u])))
        flat = score.view(-1)
        if k == 1:
            best = torch.max(flat, 0)
            values, index = [float(best.values)], [int(best.indices)]
        else:  # each pair twice (both directions): 2k + 2 entries hold k + 1 pairs
            top = torch.topk(flat, min(flat.numel(), 2 * k + 2))
            values, index = top.values.tolist(), top.indices.tolist()
        picks: list[int] = []
        for val, idx in zip(values, index):
            if len(picks) == k or val == -math.inf:
                break
            a, b = sorted(divmod(idx, n))
            key = a * n + b
            if key in picks:
                continue
            pos = int(np.searchsorted(keys, key))
            step = -1 if pos < keys.size and keys[pos] == key else 1
            if step < 0 and (deg[a] <= 1 or deg[b] <= 1):  # an earlier pick of this step took an edge
                continue
            if test is not None and picks and not test.allows(deg, a, b, step):
                continue
            deg[a] += step
            deg[b] += step
            picks.append(key)
        return picks


__all__ = ["Adjacency", "DegreeTest", "LinearizedGCN", "MEMORY_FRACTION", "Metattack", "MetattackConfig",
           "add_degree_terms", "check_state_memory", "lowrank_pair_matrix", "state_bytes"]
