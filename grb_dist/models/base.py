"""Base class and configs shared by every model.

Every model maps ``(x, edge_index)`` to logits: ``x`` is N x D float32, ``edge_index`` is
2 x E int64 (both directions), the output N x C. Models are stacks of layers; with
``layer_norm=True`` (the GRB "LN" defense) a LayerNorm is applied to the input features and
after every graph layer except the last.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Mapping

import torch
from torch import nn
from torch_geometric.utils import to_torch_csr_tensor

from grb_dist.core.errors import ConfigError
from grb_dist.core.graph import Graph
from grb_dist.models.dropout import dropout


@dataclass(frozen=True)
class ModelConfig:
    """Architecture hyper-parameters common to all models.

    Attributes:
        hidden_sizes: width of each hidden layer; the number of layers is len + 1.
        dropout: dropout probability before every layer but the first.
        layer_norm: GRB layer normalisation (input and after every graph layer but the last).
    """

    hidden_sizes: tuple[int, ...] = (64, 64)
    dropout: float = 0.5
    layer_norm: bool = False

    def __post_init__(self) -> None:
        if any(h < 1 for h in self.hidden_sizes):
            raise ConfigError(f"hidden_sizes must be positive, got {self.hidden_sizes}")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")

    def footprint(self, num_classes: int) -> tuple[int, int]:
        """What the model's size grows with beyond its layer widths, for the memory estimate
        of :mod:`grb_dist.sweep.preflight` (``num_classes``: the output width):
        ``(copies, per_node)``, where every layer holds
        ``copies`` weight matrices and inputs (a polynomial filter of k hops: k + 1), and
        ``per_node`` more floats per node are kept for the backward pass (propagation
        steps after the last layer, a low-rank basis). A model with a size knob of its own
        overrides this."""
        return 1, 0


class GraphModel(nn.Module):
    """A node classifier ``forward(x, edge_index) -> logits``.

    Subclasses set ``Config`` (their typed config) and implement :meth:`make_layer`;
    class-level flags tell callers what the model supports.
    """

    Config: ClassVar[type[ModelConfig]] = ModelConfig
    #: True when the model uses the graph structure (False for MLP).
    uses_graph: ClassVar[bool] = True
    #: True when every layer is a graph layer that receives edge_index.
    graph_layers: ClassVar[bool] = True
    #: True when the layers accept a sparse CSR adjacency instead of edge_index: the base
    #: class then builds it (:meth:`propagation_graph`) once per graph and every layer
    #: propagates with sparse matrix products, several times faster on large graphs than
    #: gathering E x F messages.
    sparse_propagation: ClassVar[bool] = False
    #: False when the edge-weighted evaluation (``weighted_forward``) uses kernels whose
    #: backward pass is not differentiable itself, so no meta-gradient (a gradient through
    #: training, adaptive poisoning) runs through the model. The built-in models' fused
    #: kernels switch to plain operators inside :func:`grb_dist.models.weighted.plain_kernels`,
    #: which the meta-gradient enters.
    twice_differentiable: ClassVar[bool] = True
    #: Graphs whose propagation structure is kept (training + validation graph, or an
    #: attack's fixed perturbed graph, are then built once instead of every forward).
    GRAPH_CACHE_SIZE: ClassVar[int] = 2
    #: Training settings of the model's published method (``lr``, ``epochs`` ...), when it
    #: has a schedule of its own (Pro-GNN's): they replace a job's shared ``train:`` section
    #: for this model; a ``train:`` in its own entry, or a command's flags, override them
    #: (:func:`grb_dist.defenses.resolve_params`).
    train_defaults: ClassVar[Mapping[str, Any]] = MappingProxyType({})

    @classmethod
    def check_graph(cls, name: str, config: ModelConfig, graph: Graph) -> None:
        """Raise :class:`ConfigError` when ``config`` cannot fit ``graph`` (checked before
        building; GCN-SVD's rank must be below the number of training nodes)."""

    @classmethod
    def config_for(cls, config: ModelConfig, graph: Graph) -> ModelConfig:
        """The config the model is built with for ``graph``: ``config`` itself, or with what
        its published setting takes from the dataset filled in (Pro-GNN's coefficients)."""
        return config

    def __init__(self, in_features: int, num_classes: int, config: ModelConfig | None = None):
        super().__init__()
        config = config or self.Config()
        if not isinstance(config, self.Config):
            raise ConfigError(f"{type(self).__name__} needs a {self.Config.__name__}, got {type(config).__name__}")
        self.config = config
        self.in_features = in_features
        self.num_classes = num_classes
        widths = [*self.layer_widths(config), num_classes]
        self.layers = nn.ModuleList()
        self.norms = nn.ModuleList()
        width = in_features
        for i, target in enumerate(widths):
            last = i == len(widths) - 1
            layer, width = self.make_layer(i, width, target, last)
            self.layers.append(layer)
            if config.layer_norm and not last:
                self.norms.append(nn.LayerNorm(width))
        self.input_norm = nn.LayerNorm(in_features) if config.layer_norm else None
        self._graph_cache: list[tuple] = []

    def layer_widths(self, config: ModelConfig) -> tuple[int, ...]:
        return config.hidden_sizes

    def make_layer(self, index: int, in_width: int, out_width: int, last: bool) -> tuple[nn.Module, int]:
        """Build layer ``index``; return it and its actual output width."""
        raise NotImplementedError

    def call_layer(self, i: int, layer: nn.Module, h: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return layer(h, edge_index)

    def reset_parameters(self) -> None:
        for m in self.modules():
            if m is not self and hasattr(m, "reset_parameters"):
                m.reset_parameters()

    def propagation_graph(self, edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
        """The structure the layers propagate on (default: the plain transposed adjacency)."""
        return adjacency_t(edge_index, num_nodes)

    def _cached_propagation_graph(
        self, edge_index: torch.Tensor, num_nodes: int, dtype: torch.dtype = torch.float32
    ) -> torch.Tensor:
        # Keyed by the identity of the edge_index tensor (held, so its memory cannot be
        # reused by another tensor), its in-place version counter and the value dtype.
        for ei, version, n, dt, adj in self._graph_cache:
            if ei is edge_index and version == edge_index._version and n == num_nodes and dt == dtype:
                return adj
        if dtype == torch.get_default_dtype():
            adj = self.propagation_graph(edge_index, num_nodes)
        else:  # e.g. a float64 model: the structure's values are built (and normalised) in it
            previous = torch.get_default_dtype()
            torch.set_default_dtype(dtype)
            try:
                adj = self.propagation_graph(edge_index, num_nodes)
            finally:
                torch.set_default_dtype(previous)
        entry = (edge_index, edge_index._version, num_nodes, dtype, adj)
        self._graph_cache = [*self._graph_cache, entry][-self.GRAPH_CACHE_SIZE :]
        return adj

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        if self.sparse_propagation and self.uses_graph:
            edge_index = self._cached_propagation_graph(edge_index, x.shape[0], x.dtype)
        h = self.run_layers(x, lambda i, layer, h: self.call_layer(i, layer, h, edge_index))
        return self.output(h, edge_index)

    def run_layers(self, x: torch.Tensor, call) -> torch.Tensor:
        """The layer stack of :meth:`forward` (input norm, dropout, ``call(i, layer, h)``,
        norm and ReLU between layers), without :meth:`output`; ``weighted_forward``
        implementations reuse it with a weighted ``call``."""
        h = self.input_norm(x) if self.input_norm is not None else x
        n_layers = len(self.layers)
        for i, layer in enumerate(self.layers):
            if i > 0:
                h = dropout(h, self.config.dropout, self.training)
            h = call(i, layer, h)
            if i < n_layers - 1:
                if self.norms:
                    h = self.norms[i](h)
                h = torch.relu(h)
        return h

    def output(self, h: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Hook applied to the last layer's output (APPNP propagates here)."""
        return h

    # The same computation as :meth:`forward` in eval mode, declared with the operations
    # of :class:`grb_dist.attacks.shared.incremental.Ops`, so that an attack can
    # re-evaluate a frozen model on the rows an injection touches only. A class declares
    # it by defining ``incremental_layer`` (and ``incremental_output`` when it overrides
    # ``output``); classes that do not fall back to the ordinary forward.
    #
    # Gradient modification attacks replay the same program with edge weights when it uses
    # only weighted operators; a class whose program cannot be (attention) or that declares
    # none may define ``weighted_forward(x, edge_index, edge_weight) -> logits`` instead
    # (see :mod:`grb_dist.models.weighted`).

    def incremental(self, ops, x):
        """The eval-mode forward written with ``ops`` (``x`` is a handle of the features)."""
        h = ops.map(self.input_norm, x) if self.input_norm is not None else x
        n_layers = len(self.layers)
        for i, layer in enumerate(self.layers):
            h = self.incremental_layer(ops, i, layer, h)
            if i < n_layers - 1:
                norm = self.norms[i] if self.norms else None
                h = ops.map(lambda t, norm=norm: torch.relu(norm(t) if norm is not None else t), h)
        return self.incremental_output(ops, h)

    def incremental_layer(self, ops, i: int, layer: nn.Module, h):
        """Layer ``i`` written with ``ops`` (see :meth:`incremental`)."""
        raise NotImplementedError(f"{type(self).__name__} declares no incremental program")

    def incremental_output(self, ops, h):
        """:meth:`output` written with ``ops``."""
        return h


def adjacency_t(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Transposed adjacency ``A^T`` (row = target, column = source) as a sparse CSR tensor,
    the form torch_geometric layers propagate with ``spmm``."""
    with warnings.catch_warnings():  # torch flags sparse CSR as beta on every construction
        warnings.simplefilter("ignore", UserWarning)
        return to_torch_csr_tensor(edge_index.flip(0), size=(num_nodes, num_nodes))
