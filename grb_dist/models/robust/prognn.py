"""Pro-GNN (Jin et al., KDD 2020, "Graph Structure Learning for Robust Graph Neural
Networks"): a GCN trained jointly with a learned dense structure ``S``.

Pro-GNN starts from the (possibly poisoned) adjacency ``A`` and learns ``S`` that stays
close to ``A`` while having the properties of clean graphs that attacks destroy (sparsity,
low rank, smooth features), by minimising

    ||S - A||_F + alpha ||S||_1 + beta ||S||_* + gamma L_GCN(theta, S) + lambda tr(X^T L_S X)

(the paper writes the first term squared; the authors' code, whose figures the paper
reports, takes the norm itself, whose gradient ``(S - A) / ||S - A||_F`` has unit size
whatever the distance: ``fro_squared=True`` is the paper's form), where ``L_S = R (D - S) R`` is the normalised Laplacian of ``S`` (``D`` its degrees,
``R = (D + 1e-3)^-1/2`` as in the paper's code) and ``L_GCN`` the cross-entropy of a
two-layer GCN on ``D~^-1/2 (S + I) D~^-1/2`` at the training nodes. The optimisation
alternates, every epoch (:meth:`ProGNN.train_on`):

- ``outer_steps`` steps on ``S``: an SGD step with momentum 0.9 (learning rate ``lr_adj``)
  on the smooth part ``||S - A|| + gamma L_GCN + lambda tr(X^T L_S X)`` (its gradient
  symmetrised: the step stays within the symmetric matrices ``S`` is projected onto), then
  the proximal operators of the non-smooth terms: :func:`prox_nuclear` (threshold
  ``lr_adj * beta``, singular value soft-thresholding; through an eigendecomposition, as
  ``S`` is symmetric), :func:`prox_l1` (``lr_adj * alpha``, entry-wise soft-thresholding)
  and :func:`project` (onto symmetric matrices with entries in [0, 1]);
- ``inner_steps`` Adam steps on the GCN weights with ``S`` fixed (the trainer's ``lr`` and
  ``weight_decay``).

The last epoch whose validation loss or validation accuracy was the best so far is kept
(weights and ``S``), as in the authors' code, with the trainer's ``epochs`` and
``patience`` counted from it: on a poisoned graph the learned structure sheds the
adversarial edges late, after the validation loss has stopped falling, and the lowest loss
alone (every other model's rule here) keeps an epoch from before.

**Two names.** ``prognn`` (:class:`ProGNN`) is the published method: the nuclear-norm step
on, the coefficients of the authors' Metattack script for the graph's dataset
(:data:`AUTHORS_SETTINGS`, read when the model is built for a graph or trained on it: a
graph named ``<dataset>`` or ``prognn-<dataset>`` takes that dataset's row, any other
graph cora's) and their optimisation of the GCN (:data:`PAPER_TRAINING`: Adam at lr 5e-4,
weight decay 5e-4, 1000 epochs, no early stopping), which is the model's own
``train_defaults``: it replaces a job's shared ``train:`` section for this model, while a
``train:`` in the model's own entry, or a command's ``--epochs``/``--lr``, still overrides
it. Every script also sets hidden 16, dropout 0.5, ``gamma`` 1, ``lr_adj`` 0.01, one step on
``S`` and two on the GCN per epoch: this config's defaults. It needs the epochs: on
Metattack's graphs the nuclear-norm step first shrinks added and clean edges alike, and only
after hundreds of epochs are the added ones gone while the low-rank graph keeps the rest
(figures: docs/performance.md, section "Fidelity on Pro-GNN's published Metattack graphs").
Its cost is the nuclear norm's full O(N^3) eigendecomposition per step on ``S``, which
dominates an epoch by far on a CPU (figures: docs/performance.md, section "Defenses'
training cost"). Cora-ML has no script of the authors (it takes cora's row); Pubmed's script
trains on a schedule of its own (lr 0.01, 100 epochs, 30 GCN steps per epoch) on a graph
beyond the default ``max_dense_gb``, and is not in the table.

``prognn_lite`` (:class:`ProGNNLite`) is the cheaper variant, not the paper's method: the
same objective without the nuclear-norm term (``nuclear`` off, and refused on: that is
``prognn``) and no schedule of its own, so the trainer's (a job's ``train:``, e.g. 200
epochs at lr 0.01) with the same selection rule, ``patience`` counted from the kept epoch.
On Metattack's graphs it is no more robust than a GCN. ``lam=0`` on either is the paper's
"Pro-GNN-fs" ablation (no feature smoothness).

**The learned structure is state.** ``S`` is the buffer ``learned_adj`` (N x N, float32)
and the graph it was learned on is the buffer ``learned_edges`` (its sorted edge keys):
``state_dict()`` holds both, and loading a state_dict into a freshly built module resizes
them, so a reloaded model computes the same logits. A stored Pro-GNN model is N^2 floats
(29 MB at Cora's size).

**Other graphs (evasion).** ``S`` is a matrix over the nodes of one graph and cannot be
reused on another. ``forward(x, edge_index)`` uses ``S`` when the input graph has the same
nodes and edges as the graph ``S`` was learned on (the poisoning case: training and test
on the same perturbed graph); on any other graph (the inductive validation graph, a test
graph with injected nodes or flipped edges) it first runs ``purify_steps`` steps of the
unsupervised part of the objective on that graph, starting from its adjacency
(``||S' - A'||_F + lambda tr(X'^T L_S' X')`` by the same SGD with momentum, then the
proximal operators of ``alpha`` and, when ``nuclear``, ``beta``, and the projection), and
runs the trained GCN on the result. That part does not involve the GCN, so the purified
structure is computed without gradient, once per input graph (kept while the features and
edges are the same tensors); attacks see through the GCN only.

**Where it stops scaling.** ``S`` is dense: ``S``, its gradient and momentum, the
features' Gram matrix (for the smoothness term, whose value and gradient are computed from
it in closed form, :class:`Smoothness`), the best epoch's copy and a few temporaries of a
step, about :data:`DENSE_COPIES` N x N float32 matrices at the peak (more with the nuclear
norm's decomposition); ``A`` is kept as its edge list and the GCN propagates with ``S``
itself (:class:`Structure`). A graph whose estimate exceeds ``max_dense_gb`` (16 GB: about
15,400 nodes for ``prognn``, whose nuclear norm adds :data:`NUCLEAR_COPIES`, and 17,500 for
``prognn_lite``) is refused with a one-line :class:`ConfigError` before anything is allocated,
when the model is built for it (:meth:`ProGNN.check_graph`), when training starts and for
any larger graph given to ``forward``. Time is O(N^2 h) per step, plus O(N^3) with the
nuclear norm.

Adversarial training (``prognn_at``, ``prognn_lite_at``) is refused: Pro-GNN has its own training procedure,
and perturbing its training graph every epoch would change the matrix ``S`` is learned on.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Mapping, NamedTuple

import torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv

from grb_dist.core import allocator
from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph
from grb_dist.core.names import normalize_name
from grb_dist.models.base import GraphModel, ModelConfig
from grb_dist.models.tensors import check_logits
from grb_dist.models.views import TrainResult, training_views

#: N x N float32 matrices to budget for while training: about 8 alive at the peak of a step
#: on S (S, its gradient and momentum, the Gram matrix, the best epoch's copy, temporaries),
#: plus the allocator's slack of freed blocks kept for reuse.
DENSE_COPIES = 14
#: Extra N x N matrices of the nuclear norm's decomposition (eigenvectors and workspace).
NUCLEAR_COPIES = 4
_GB = 1 << 30

#: The coefficients of the authors' Metattack scripts (their repository's
#: ``scripts/meta/<dataset>_meta.sh``; its README: the same for a dataset at every
#: perturbation rate). Each script also sets ``gamma`` 1 and trains as :data:`PAPER_TRAINING`.
AUTHORS_SETTINGS: Mapping[str, Mapping[str, float]] = MappingProxyType({
    "cora": MappingProxyType({"alpha": 5e-4, "beta": 1.5, "lam": 1e-3}),
    "citeseer": MappingProxyType({"alpha": 5e-4, "beta": 1.5, "lam": 1e-4}),
    "polblogs": MappingProxyType({"alpha": 1e-4, "beta": 5.0, "lam": 0.0}),
})
#: The row of :data:`AUTHORS_SETTINGS` of a graph the authors did not tune for.
REFERENCE_DATASET = "cora"
#: The authors' optimisation of the GCN in those scripts (``--lr 5e-4 --epoch 1000``, their
#: default weight decay 5e-4, every epoch run): ``prognn``'s own training settings.
PAPER_TRAINING: Mapping[str, Any] = MappingProxyType({"lr": 5e-4, "weight_decay": 5e-4, "epochs": 1000,
                                                      "patience": 1000})
#: The coefficients a dataset's row sets (``None`` in a config: taken from the row).
DATASET_KEYS = ("alpha", "beta", "lam")


def authors_dataset(graph_name: str | None) -> str:
    """The row of :data:`AUTHORS_SETTINGS` for a graph named ``graph_name``: its dataset
    (``cora``, ``prognn-cora`` -> ``cora``) when the table has it, else cora's."""
    key = (graph_name or "").strip().lower().replace("-", "_")
    key = key.removeprefix("prognn_")
    return key if key in AUTHORS_SETTINGS else REFERENCE_DATASET


@dataclass(frozen=True)
class ProGNNConfig(ModelConfig):
    """Pro-GNN hyper-parameters (module docstring; the GCN's ``lr``, ``weight_decay``,
    ``epochs`` and ``patience`` are the trainer's, ``prognn``'s own by default:
    :data:`PAPER_TRAINING`).

    Attributes:
        alpha: weight of ``||S||_1``; ``None``: the authors' value for the graph's dataset
            (:data:`AUTHORS_SETTINGS`; cora 5e-4).
        beta: weight of the nuclear norm ``||S||_*``, used when ``nuclear``; ``None``: the
            authors' (cora 1.5).
        gamma: weight of the GCN loss in the steps on ``S`` (1, every script's).
        lam: weight ``lambda`` of the feature smoothness ``tr(X^T L_S X)``; ``None``: the
            authors' (cora 1e-3); 0 is the paper's Pro-GNN-fs.
        lr_adj: learning rate of the steps on ``S`` (0.01).
        momentum: momentum of the SGD on ``S`` (0.9).
        nuclear: apply the nuclear-norm proximal step (on: the paper's; O(N^3) per step).
        fro_squared: the paper's ``||S - A||_F^2`` instead of the code's ``||S - A||_F``.
        outer_steps: steps on ``S`` per epoch (1).
        inner_steps: GCN steps per epoch (2).
        purify_steps: steps of the unsupervised objective on a graph other than the
            training graph (module docstring).
        max_dense_gb: the largest estimated memory of the dense matrices accepted (16).
    """

    hidden_sizes: tuple[int, ...] = (16,)
    dropout: float = 0.5
    alpha: float | None = None
    beta: float | None = None
    gamma: float = 1.0
    lam: float | None = None
    lr_adj: float = 0.01
    momentum: float = 0.9
    nuclear: bool = True
    fro_squared: bool = False
    outer_steps: int = 1
    inner_steps: int = 2
    purify_steps: int = 100
    max_dense_gb: float = 16.0

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in ("alpha", "beta", "gamma", "lam"):
            value = getattr(self, key)
            if value is not None and not value >= 0:
                raise ConfigError(f"Pro-GNN {key} must be >= 0, got {value}")
        if not self.lr_adj > 0 or not 0 <= self.momentum < 1:
            raise ConfigError(f"Pro-GNN needs lr_adj > 0 and momentum in [0, 1), got {self.lr_adj}, {self.momentum}")
        if self.outer_steps < 1 or self.inner_steps < 1 or self.purify_steps < 0:
            raise ConfigError("Pro-GNN needs outer_steps >= 1, inner_steps >= 1 and purify_steps >= 0, got "
                              f"{self.outer_steps}, {self.inner_steps}, {self.purify_steps}")
        if not self.max_dense_gb > 0:
            raise ConfigError(f"Pro-GNN max_dense_gb must be > 0, got {self.max_dense_gb}")

    def for_dataset(self, graph_name: str | None) -> "ProGNNConfig":
        """This config with its unset coefficients (``None``) taken from the authors'
        setting of the graph's dataset (:func:`authors_dataset`); itself when none is."""
        unset = [key for key in DATASET_KEYS if getattr(self, key) is None]
        if not unset:
            return self
        row = AUTHORS_SETTINGS[authors_dataset(graph_name)]
        return dataclasses.replace(self, **{key: row[key] for key in unset})

    def dense_bytes(self, num_nodes: int) -> int:
        """Estimated memory of the dense N x N matrices (float32)."""
        return (DENSE_COPIES + (NUCLEAR_COPIES if self.nuclear else 0)) * num_nodes * num_nodes * 4

    def check_nodes(self, num_nodes: int, what: str) -> None:
        """Refuse ``num_nodes`` when the dense matrices would exceed ``max_dense_gb``."""
        need = self.dense_bytes(num_nodes)
        limit = self.max_dense_gb * _GB
        if need > limit:
            largest = int((limit / self.dense_bytes(1)) ** 0.5)
            raise ConfigError(
                f"{what}: Pro-GNN learns a dense {num_nodes:,} x {num_nodes:,} structure, about {need / _GB:.1f} GB, "
                f"above max_dense_gb={self.max_dense_gb:g} ({largest:,} nodes at most); use a smaller graph "
                "(or its largest component) or raise max_dense_gb")


@dataclass(frozen=True)
class ProGNNLiteConfig(ProGNNConfig):
    """``prognn_lite``'s hyper-parameters: Pro-GNN's without the nuclear norm (``nuclear``
    is off and may not be switched on: Pro-GNN with it is ``prognn``)."""

    nuclear: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.nuclear:
            raise ConfigError("prognn_lite is Pro-GNN without the nuclear norm (nuclear: false); for the "
                              "nuclear-norm step use prognn (its train: settings may shorten its schedule)")


# --------------------------------------------------------------------------- operators


def prox_l1(s: torch.Tensor, threshold: float) -> torch.Tensor:
    """The proximal operator of ``threshold * ||.||_1``: entry-wise soft-thresholding,
    ``sign(s) max(|s| - threshold, 0) = s - clip(s, -threshold, threshold)``."""
    return s - s.clamp(-threshold, threshold)


def prox_nuclear(s: torch.Tensor, threshold: float, symmetric: bool = False) -> torch.Tensor:
    """The proximal operator of ``threshold * ||.||_*``: the singular values soft-thresholded,
    ``U max(Sigma - threshold, 0) V^T``. For a symmetric ``s`` (``symmetric``) the same
    from its eigendecomposition, ``Q sign(L) max(|L| - threshold, 0) Q^T`` (the singular
    values of a symmetric matrix are its absolute eigenvalues), several times faster."""
    if symmetric:
        values, vectors = torch.linalg.eigh(s)
        shrunk = torch.sign(values) * (values.abs() - threshold).clamp_min(0)
        return (vectors * shrunk) @ vectors.T
    u, sigma, vh = torch.linalg.svd(s, full_matrices=False)
    return (u * (sigma - threshold).clamp_min(0)) @ vh


def project(s: torch.Tensor) -> torch.Tensor:
    """The projection onto symmetric matrices with entries in [0, 1]: each pair ``(i, j)``
    becomes ``clip((s_ij + s_ji) / 2, 0, 1)`` (the closest such matrix in Frobenius norm)."""
    return (s + s.T).div_(2).clamp_(0, 1)


def dense_adjacency(edge_index: torch.Tensor, num_nodes: int, dtype: torch.dtype) -> torch.Tensor:
    """The binary symmetric N x N adjacency of ``edge_index`` without self-loops."""
    a = torch.zeros(num_nodes, num_nodes, dtype=dtype, device=edge_index.device)
    a[edge_index[0], edge_index[1]] = 1
    a[edge_index[1], edge_index[0]] = 1
    a.fill_diagonal_(0)
    return a


class Structure(NamedTuple):
    """The GCN's propagation matrix ``D~^-1/2 (S + I) D~^-1/2`` (``D~`` the row sums of
    ``S + I``), kept as ``S`` and ``inv = diag(D~)^-1/2``: :meth:`propagate` computes
    ``inv * (S (inv * h) + inv * h)`` without forming another N x N matrix (differentiable
    in ``S`` when ``S`` requires a gradient)."""

    s: torch.Tensor
    inv: torch.Tensor

    @classmethod
    def of(cls, s: torch.Tensor) -> "Structure":
        return cls(s, (s.sum(1) + 1).rsqrt())

    def propagate(self, h: torch.Tensor) -> torch.Tensor:
        scaled = self.inv.unsqueeze(1) * h
        return self.inv.unsqueeze(1) * (self.s @ scaled + scaled)


class Smoothness:
    """The feature smoothness ``tr(X^T L_S X)``, ``L_S = R (D - S~) R`` with ``S~ = (S +
    S^T) / 2``, ``D`` its row sums and ``R = (D + 1e-3)^-1/2``, from the features' Gram
    matrix ``G = X X^T`` (computed once per graph):

        value    = sum_i r_i^2 d_i G_ii - sum_ij r_i r_j S~_ij G_ij
        gradient = (g_i + g_j) / 2 - r_i r_j G_ij,  g_i = 1e-3 r_i^4 G_ii + r_i^3 sum_j r_j S~_ij G_ij

    O(N^2) per evaluation instead of O(N^2 D), and the gradient in closed form (no
    autograd buffers of N x N temporaries)."""

    EPS = 1e-3

    def __init__(self, x: torch.Tensor):
        x = x.detach()
        self.gram = x @ x.T
        self.sq = self.gram.diagonal().clone()

    def __call__(self, s: torch.Tensor) -> torch.Tensor:
        sym = (s + s.T) / 2
        d = sym.sum(1)
        r = (d + self.EPS).rsqrt()
        return (r * r * d * self.sq).sum() - (r.unsqueeze(1) * sym * r.unsqueeze(0) * self.gram).sum()

    def gradient(self, s: torch.Tensor) -> torch.Tensor:
        sym = (s + s.T).div_(2)
        r = (sym.sum(1) + self.EPS).rsqrt()
        m = sym.mul_(self.gram) @ r
        g = self.EPS * r.pow(4) * self.sq + r.pow(3) * m
        out = torch.mul(self.gram, r.unsqueeze(1), out=sym).mul_(r.unsqueeze(0)).neg_()
        return out.add_(g.unsqueeze(1), alpha=0.5).add_(g.unsqueeze(0), alpha=0.5)


class StructureSteps:
    """Proximal gradient steps on ``S`` (module docstring): the gradient of ``||S - A||_F +
    lambda tr(X^T L_S X)`` (closed forms) plus an optional extra gradient (the GCN loss),
    symmetrised, an SGD step with momentum (``torch.optim.SGD``'s rule), then
    :func:`proximal_steps_`. ``S`` starts at ``A`` and is updated in place."""

    def __init__(self, edge_index: torch.Tensor, x: torch.Tensor, config: ProGNNConfig):
        n = x.shape[0]
        config = self.config = config.for_dataset(None)  # a config never settled for a graph: cora's
        self.s = dense_adjacency(edge_index, n, x.dtype)
        keys = _edge_keys(edge_index, n)
        self.rows, self.cols = keys // n, keys % n  # the entries of A (ones)
        self.smooth = Smoothness(x) if config.lam > 0 else None
        self.buf: torch.Tensor | None = None

    @torch.no_grad()
    def step(self, extra: torch.Tensor | None = None) -> None:
        c, s = self.config, self.s
        grad = s.clone().index_put_((self.rows, self.cols), s.new_tensor(-1.0), accumulate=True)  # S - A
        if c.fro_squared:
            grad.mul_(2)
        else:  # the gradient of ||S - A||_F, (S - A) / ||S - A||_F, and 0 at S = A (as torch.norm's)
            norm = float(torch.linalg.vector_norm(grad))
            grad.div_(norm) if norm > 0 else grad.zero_()
        if extra is not None:
            grad.add_(extra)
        if self.smooth is not None:
            grad.add_(self.smooth.gradient(s), alpha=c.lam)
        grad = (grad + grad.T).div_(2)  # the gradient within symmetric matrices
        if self.buf is None:
            self.buf = grad
        else:
            self.buf.mul_(c.momentum).add_(grad)
        s.sub_(self.buf, alpha=c.lr_adj)
        proximal_steps_(s, c)


def proximal_steps_(s: torch.Tensor, config: ProGNNConfig) -> torch.Tensor:
    """The non-smooth part of one step on ``S``, in place: nuclear norm (when on), L1
    (:func:`prox_l1` written as ``s - clip(s, -t, t)``), projection (:func:`project`)."""
    if config.nuclear and config.beta > 0:
        s.copy_(prox_nuclear(s, config.lr_adj * config.beta, symmetric=torch.equal(s, s.T)))
    if config.alpha > 0:
        threshold = config.lr_adj * config.alpha
        s.sub_(s.clamp(-threshold, threshold))
    return s.copy_(project(s))


def purify(edge_index: torch.Tensor, x: torch.Tensor, config: ProGNNConfig) -> torch.Tensor:
    """``purify_steps`` steps of the unsupervised objective from the adjacency of
    ``edge_index`` (module docstring); returns the structure ``S``."""
    steps = StructureSteps(edge_index, x.detach(), config)
    for _ in range(config.purify_steps):
        steps.step()
    return steps.s


def trackable(*tensors: torch.Tensor) -> bool:
    """Whether what is computed from ``tensors`` may be kept for later calls: not under
    ``inference_mode`` (its results cannot serve autograd later) and no inference tensor
    among them (they have no version counter)."""
    return not torch.is_inference_mode_enabled() and not any(t.is_inference() for t in tensors)


def _edge_keys(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """The sorted unique keys ``i * N + j`` of an undirected graph's pairs, no self-loops."""
    ei = edge_index[:, edge_index[0] != edge_index[1]]
    keys = torch.cat([ei[0] * num_nodes + ei[1], ei[1] * num_nodes + ei[0]])
    return torch.unique(keys)


def _split(name: str) -> tuple[str, set[str]]:
    """``(base name, its wrapper suffixes)``: ``prognn_lite_ln_lp`` -> ``prognn_lite``, ``{_ln, _lp}``."""
    key, found = normalize_name(name), set()
    while any(key.endswith(s) and len(key) > len(s) for s in ("_ln", "_at", "_lp")):
        found.add(key[-3:])
        key = key[:-3]
    return key, found


# --------------------------------------------------------------------------- the model


class ProGNN(GraphModel):
    """Pro-GNN (``prognn``), the published method: a GCN on a structure learned jointly,
    with the nuclear norm, the authors' coefficients for the graph's dataset and their
    training schedule (module docstring)."""

    Config = ProGNNConfig
    #: The authors' optimisation of the GCN, in place of a job's shared ``train:`` section.
    train_defaults: ClassVar[Mapping[str, Any]] = PAPER_TRAINING

    @classmethod
    def check_graph(cls, name: str, config: ProGNNConfig, graph: Graph) -> None:
        base, suffixes = _split(name)
        if "_at" in suffixes:
            raise ConfigError(f"model {name!r}: Pro-GNN trains with its own alternating procedure and takes no "
                              f"adversarial training (_at); use {base}, {base}_ln or {base}_lp")
        config.check_nodes(graph.num_nodes, f"model {name} on {graph.name!r}")

    @classmethod
    def config_for(cls, config: ProGNNConfig, graph: Graph) -> ProGNNConfig:
        """``config`` with the authors' coefficients of ``graph``'s dataset where unset."""
        return config.for_dataset(graph.name)

    def __init__(self, in_features: int, num_classes: int, config: ProGNNConfig | None = None):
        super().__init__(in_features, num_classes, config)
        self.register_buffer("learned_adj", torch.zeros(0, 0))
        self.register_buffer("learned_edges", torch.zeros(0, dtype=torch.long))
        self._forget_graphs()

    def _forget_graphs(self) -> None:
        """Drop what was kept about input graphs (the learned graph changed)."""
        self._match_cache: list[tuple] = []
        self._learned: tuple | None = None
        self._purified: list[tuple] = []

    def make_layer(self, index, in_width, out_width, last):
        return GCNConv(in_width, out_width, normalize=False), out_width

    def call_layer(self, i, layer, h, edge_index):
        out = edge_index.propagate(layer.lin(h))  # edge_index: the dense Structure
        return out if layer.bias is None else out + layer.bias

    def logits(self, x: torch.Tensor, structure: Structure) -> torch.Tensor:
        """The GCN on a dense :class:`Structure`."""
        return self.output(self.run_layers(x, lambda i, layer, h: self.call_layer(i, layer, h, structure)), structure)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # The learned structure's size is the training graph's: take the stored shapes.
        for name in ("learned_adj", "learned_edges"):
            stored = state_dict.get(prefix + name)
            if isinstance(stored, torch.Tensor) and stored.shape != getattr(self, name).shape:
                setattr(self, name, torch.empty(stored.shape, dtype=stored.dtype, device=getattr(self, name).device))
        self._match_cache, self._learned = [], None
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def is_learned_graph(self, edge_index: torch.Tensor, num_nodes: int) -> bool:
        """Whether the graph is the one ``S`` was learned on (same nodes, same edges)."""
        for ei, version, n, answer in self._match_cache:
            if ei is edge_index and version == edge_index._version and n == num_nodes:
                return answer
        answer = (self.learned_adj.shape[0] == num_nodes > 0
                  and torch.equal(_edge_keys(edge_index, num_nodes), self.learned_edges.to(edge_index.device)))
        if trackable(edge_index):
            self._match_cache = [*self._match_cache, (edge_index, edge_index._version, num_nodes, answer)][-4:]
        return answer

    def structure(self, x: torch.Tensor, edge_index: torch.Tensor) -> Structure:
        """The structure the GCN runs on for this input graph: ``S`` on the graph it was
        learned on, else the purified structure of the input graph (kept while its
        features and edges are the same tensors)."""
        n = x.shape[0]
        if self.is_learned_graph(edge_index, n):
            s = self.learned_adj
            kept = self._learned
            if kept is not None and kept[0] is s and kept[1] == s._version and kept[2].s.dtype == x.dtype:
                return kept[2]
            value = Structure.of(s.to(x.dtype))
            if trackable(s):
                self._learned = (s, s._version, value)
            return value
        for ei, ei_v, xx, x_v, value in self._purified:
            if ei is edge_index and xx is x and ei_v == edge_index._version and x_v == x._version:
                return value
        self.config.check_nodes(n, f"Pro-GNN on a graph of {n:,} nodes")
        with torch.no_grad():  # a module never built for a graph nor trained: cora's coefficients
            value = Structure.of(purify(edge_index, x, self.config.for_dataset(None)))
        if trackable(edge_index, x):
            self._purified = [*self._purified, (edge_index, edge_index._version, x, x._version, value)]
            self._purified = self._purified[-self.GRAPH_CACHE_SIZE :]
        return value

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.logits(x, self.structure(x, edge_index))

    # ----------------------------------------------------------------------- training

    def train_on(self, graph: Graph, train_config, *, device="cpu", augment=None,
                 transductive: bool = False) -> TrainResult:
        """Pro-GNN's alternating training (module docstring) on ``graph``: inductively, or on
        the whole graph with ``transductive`` (the poisoning setting); the trainer's
        ``lr``, ``weight_decay``, ``epochs`` and ``patience`` drive the GCN steps. Unset
        coefficients become those of the graph's dataset (:meth:`ProGNNConfig.for_dataset`)."""
        if augment is not None:
            raise ConfigError("Pro-GNN takes no adversarial training (_at): it trains with its own alternating "
                              "procedure; use prognn, prognn_ln or prognn_lp")
        c = self.config = self.config.for_dataset(graph.name)
        train_view, val_view = training_views(graph, device, transductive)
        n = train_view.x.shape[0]
        c.check_nodes(max(n, val_view.x.shape[0]), f"Pro-GNN on {graph.name!r}")
        self.to(device)
        x, y, idx = train_view.x, train_view.y, train_view.mask_idx
        steps = StructureSteps(train_view.edge_index, x, c)
        self.learned_edges = _edge_keys(train_view.edge_index, n)
        self._forget_graphs()
        opt = torch.optim.Adam(self.parameters(), lr=train_config.lr, weight_decay=train_config.weight_decay)
        best, best_loss, best_acc = (float("inf"), 0.0, -1), float("inf"), -1.0
        best_state = None
        history: list[dict[str, float]] = []
        start = time.perf_counter()
        epoch, stopped_early = 0, False
        with allocator.training_heap():
            for epoch in range(train_config.epochs):
                self.train()
                for _ in range(c.outer_steps):
                    extra = None
                    if c.gamma > 0:  # the GCN loss's gradient in S (the weights get none here)
                        s = steps.s.requires_grad_()
                        out = self.logits(x, Structure.of(s))
                        (extra,) = torch.autograd.grad(c.gamma * F.cross_entropy(out[idx], y[idx]), [s])
                        s.requires_grad_(False)
                    steps.step(extra)
                structure = Structure.of(steps.s)
                for _ in range(c.inner_steps):
                    opt.zero_grad(set_to_none=True)
                    out = self.logits(x, structure)
                    if epoch == 0:
                        check_logits(out, n, int(graph.num_classes))
                    loss = F.cross_entropy(out[idx], y[idx])
                    loss.backward()
                    opt.step()
                self.learned_adj = steps.s  # the current S (updated in place; the best one is copied)
                self.eval()
                with torch.no_grad():
                    logits = self(val_view.x, val_view.edge_index)[val_view.mask_idx]
                    yv = val_view.y[val_view.mask_idx]
                    val_loss = float(F.cross_entropy(logits, yv))
                    val_acc = float((logits.argmax(1) == yv).float().mean())
                history.append({"epoch": epoch, "train_loss": loss.item(), "val_loss": val_loss,
                                "val_accuracy": val_acc})
                # the authors' rule: keep the epoch when either the validation loss or the
                # validation accuracy is the best so far (the structure cleans up late, after
                # the loss has stopped falling; module docstring)
                if val_loss < best_loss or val_acc > best_acc:
                    best_loss, best_acc = min(val_loss, best_loss), max(val_acc, best_acc)
                    best = (val_loss, val_acc, epoch)
                    best_state = copy.deepcopy(self.state_dict())
                elif epoch - best[2] >= train_config.patience:
                    stopped_early = epoch + 1 < train_config.epochs
                    break
        self.learned_adj = steps.s.detach().clone() if best_state is None else torch.empty_like(steps.s)
        del steps
        if best_state is not None:
            self.load_state_dict(best_state)
        self.eval()
        return TrainResult(self, best[2], best[0], best[1], epoch + 1, time.perf_counter() - start, history,
                                 stopped_early)


class ProGNNLite(ProGNN):
    """``prognn_lite``: Pro-GNN without the nuclear norm and without a schedule of its own
    (the trainer's, a job's ``train:``); the cheaper variant, not the paper's method
    (module docstring)."""

    Config = ProGNNLiteConfig
    train_defaults: ClassVar[Mapping[str, Any]] = MappingProxyType({})
