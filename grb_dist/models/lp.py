"""Label propagation: label spreading (Zhou et al., 2004), alone or on a model's predictions.

Label spreading iterates ``F_t = alpha * D^-1/2 A D^-1/2 F_{t-1} + (1 - alpha) * Y`` from
``F_0 = Y`` (Gosch et al. 2023, section 2), where ``Y`` holds one-hot rows for the known labels and
zero rows elsewhere. Combined with a GNN (``<model>_lp``), the zero rows of ``Y`` are
replaced with the GNN's soft predictions (Huang et al., 2021).

Inductive protocol: the known labels are the *training* labels only, stored as buffers
(``train_index``, ``train_labels``) when the module is built from the graph's split;
validation and test labels are never used. At inference the input graph may hold more
nodes than the training graph (the test nodes and any injected nodes, appended after the
originals), which all start from zero rows (alone) or from the model's predictions.

The output is log-probabilities: the rows of ``F`` normalised to sum 1 (rows with no mass,
nodes that no label reaches, become uniform).

Edge weights (adaptive modification attacks, ``weighted_forward``): ``S = D^-1/2 W D^-1/2``
with the weighted adjacency ``W`` and weighted degrees; label spreading is differentiable in
``S``, so this is exact (equal to ``forward`` when every weight is 1). ``<model>_lp`` also
evaluates the wrapped model with the edge weights (its own ``weighted_forward`` or its
declared program, :func:`grb_dist.models.weighted.weighted_logits`). Label propagation alone
reads no node features (``reads_features = False``): injection attacks get no gradient
through it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import nn
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.utils import remove_self_loops

from grb_dist.core.errors import ConfigError
from grb_dist.models.base import ModelConfig
from grb_dist.models.weighted import propagate, weighted_logits, without_self_loops


@dataclass(frozen=True)
class LPConfig(ModelConfig):
    """Label spreading hyper-parameters.

    Attributes:
        alpha: weight of the propagated term, in [0, 1) (Gosch et al. 2023: label spreading).
        iterations: number of spreading steps.

    ``hidden_sizes``, ``dropout`` and ``layer_norm`` are inherited from :class:`ModelConfig`
    but LP has no layers: they must stay empty / 0 / false.
    """

    hidden_sizes: tuple[int, ...] = ()
    dropout: float = 0.0
    alpha: float = 0.9
    iterations: int = 50

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.alpha < 1.0:
            raise ConfigError(f"label propagation alpha must be in [0, 1), got {self.alpha}")
        if self.iterations < 1:
            raise ConfigError(f"label propagation needs iterations >= 1, got {self.iterations}")
        if self.hidden_sizes or self.dropout or self.layer_norm:
            raise ConfigError("label propagation has no layers: hidden_sizes, dropout and layer_norm do not apply")


def label_spreading(
    y0: torch.Tensor, edge_index: torch.Tensor, alpha: float, iterations: int
) -> torch.Tensor:
    """``iterations`` steps of ``F <- alpha S F + (1 - alpha) Y`` with ``S = D^-1/2 A D^-1/2``.

    Args:
        y0: N x C initial matrix ``Y`` (one-hot rows, soft predictions or zeros).
        edge_index: 2 x E edges (both directions); self-loops are ignored.
    """
    n = y0.size(0)
    ei, _ = remove_self_loops(edge_index)
    ei, w = gcn_norm(ei, torch.ones(ei.size(1), dtype=y0.dtype, device=ei.device), n, add_self_loops=False)
    # S as one CSR matrix (row = target): each step is a single sparse product, faster than
    # gathering and scattering the E x C messages (duplicate edges add up in both forms);
    # differentiable in y0.
    with warnings.catch_warnings():  # torch flags sparse CSR as beta on every construction
        warnings.simplefilter("ignore", UserWarning)
        s = torch.sparse_coo_tensor(ei.flip(0), w.to(y0.dtype), (n, n)).coalesce().to_sparse_csr()
    base = (1 - alpha) * y0
    f = y0
    for _ in range(iterations):
        f = alpha * (s @ f) + base
    return f


def weighted_label_spreading(
    y0: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor, alpha: float, iterations: int
) -> torch.Tensor:
    """:func:`label_spreading` on a weighted graph, ``S = D^-1/2 W D^-1/2`` with weighted
    degrees; differentiable in ``y0`` and ``edge_weight``."""
    n = y0.size(0)
    ei, w = without_self_loops(edge_index, edge_weight.to(y0.dtype))
    ei, w = gcn_norm(ei, w, n, add_self_loops=False)
    base = (1 - alpha) * y0
    f = y0
    for _ in range(iterations):
        f = alpha * propagate(f, ei, w, n) + base
    return f


def _log_normalise(f: torch.Tensor) -> torch.Tensor:
    total = f.sum(1, keepdim=True)
    c = f.size(1)
    probs = torch.where(total > 0, f / total.clamp_min(1e-12), torch.full_like(f, 1.0 / c))
    return torch.log(probs.clamp_min(1e-12))


class _KnownLabels(nn.Module):
    def __init__(self, train_index: torch.Tensor, train_labels: torch.Tensor, num_classes: int):
        super().__init__()
        self.num_classes = num_classes
        self.register_buffer("train_index", torch.as_tensor(train_index, dtype=torch.long).clone())
        self.register_buffer("train_labels", torch.as_tensor(train_labels, dtype=torch.long).clone())

    def clamp_known(self, y: torch.Tensor) -> torch.Tensor:
        """``y`` with the training rows replaced by their one-hot labels."""
        one_hot = torch.nn.functional.one_hot(self.train_labels, self.num_classes).to(y.dtype)
        return y.index_copy(0, self.train_index, one_hot)


class LabelPropagation(_KnownLabels):
    """Label spreading alone: ``forward(x, edge_index) -> log-probabilities`` (N' x C).

    Args:
        train_index: global ids of the training nodes (int64).
        train_labels: their labels.
        num_classes: C.
        config: :class:`LPConfig`.
    """

    Config = LPConfig
    uses_graph = True
    #: Nothing to train; built from the graph's training labels (no ``_ln``/``_at``/``_lp``).
    trainable = False
    uses_train_labels = True
    #: The output does not depend on ``x`` (injected features get no gradient).
    reads_features = False
    #: How adaptive-evaluation messages name it.
    display_name = "label propagation"

    def __init__(self, train_index, train_labels, num_classes: int, config: LPConfig | None = None):
        super().__init__(train_index, train_labels, num_classes)
        self.config = config or LPConfig()

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        y0 = self.clamp_known(torch.zeros(x.size(0), self.num_classes, device=x.device, dtype=x.dtype))
        return _log_normalise(label_spreading(y0, edge_index, self.config.alpha, self.config.iterations))

    def weighted_forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor) -> torch.Tensor:
        """Log-probabilities with edge weights (exact: weighted degrees in ``S``)."""
        y0 = self.clamp_known(torch.zeros(x.size(0), self.num_classes, device=x.device, dtype=x.dtype))
        c = self.config
        return _log_normalise(weighted_label_spreading(y0, edge_index, edge_weight, c.alpha, c.iterations))


class LabelPropagationOn(_KnownLabels):
    """A model followed by label spreading on its soft predictions (``<model>_lp``).

    ``forward(x, edge_index) -> log-probabilities`` (N' x C); the wrapped model is
    ``self.model`` (its state_dict keys are prefixed ``model.``). Differentiable in ``x``;
    differentiable in edge weights (``weighted_forward``) when the wrapped model is.
    """

    Config = LPConfig
    uses_graph = True
    trainable = True
    #: ``self.model`` is the wrapped model: adaptive attacks need its weighted path too.
    wraps_model = True

    def __init__(self, model: nn.Module, train_index, train_labels, num_classes: int, config: LPConfig | None = None):
        super().__init__(train_index, train_labels, num_classes)
        self.model = model
        self.config = config or LPConfig()

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        soft = torch.softmax(self.model(x, edge_index), dim=1)
        y0 = self.clamp_known(soft)
        return _log_normalise(label_spreading(y0, edge_index, self.config.alpha, self.config.iterations))

    def weighted_forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor) -> torch.Tensor:
        """Log-probabilities with edge weights: the wrapped model's weighted logits
        (:func:`~grb_dist.models.weighted.weighted_logits`; :class:`ConfigError` when it has no
        weighted path) and weighted label spreading."""
        soft = torch.softmax(weighted_logits(self.model, x, edge_index, edge_weight), dim=1)
        c = self.config
        return _log_normalise(weighted_label_spreading(self.clamp_known(soft), edge_index, edge_weight, c.alpha,
                                                       c.iterations))
