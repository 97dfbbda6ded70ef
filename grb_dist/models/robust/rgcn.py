"""R-GCN, "Robust Graph Convolutional Networks Against Adversarial Attacks" (Zhu et al., 2019).

Every node's hidden representation is a Gaussian with a mean and a (diagonal) variance.
A Gaussian graph convolution layer maps both through their own linear map (ELU on the mean,
ReLU on the variance), then aggregates them with variance-based attention
``att = exp(-gamma * var)``::

    mean' = D^-1/2 (A + I) D^-1/2 (mean * att)
    var'  = D^-1   (A + I) D^-1   (var * att * att)

so that high-variance (likely perturbed) neighbours count less. The output is the mean of
the last layer's Gaussian plus, in training only, ``eps * sqrt(var)`` (a reparameterised
sample). At evaluation the output is the mean: deterministic (the original GRB code sampled
at evaluation time, which made scores non-deterministic).

Edge weights (adaptive modification attacks, :meth:`RGCN.weighted_forward`): both
propagation matrices are built from the weighted adjacency ``W + I`` with weighted degrees
``d_i = 1 + sum_j w_ij``: ``w_ij d_i^-1/2 d_j^-1/2`` and ``w_ij / (d_i d_j)``. This is
the exact relaxation (R-GCN is differentiable in the normalisation), equal to ``forward``
when every weight is 1; weight 0 is an absent edge.

The KL regulariser of the first layer's Gaussian against N(0, I) is optional
(``kl_weight``, 0 = off as in GRB); when on, :meth:`RGCN.regularization` returns it for
the trainer to add to the loss.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.utils import add_remaining_self_loops, degree, remove_self_loops, to_torch_csr_tensor

from grb_dist.core.errors import ConfigError
from grb_dist.models.base import GraphModel, ModelConfig
from grb_dist.models.dropout import dropout
from grb_dist.models.propagation import propagate as propagate_csr
from grb_dist.models.weighted import plain_kernels_on, propagate, weighted_degree, with_self_loops, without_self_loops


@dataclass(frozen=True)
class RGCNConfig(ModelConfig):
    """R-GCN hyper-parameters.

    Attributes:
        gamma: attention temperature, ``att = exp(-gamma * var)`` (paper: 1).
        kl_weight: weight of the KL(N(mean, var) || N(0, I)) regulariser of the first
            layer (paper: 5e-4; 0 disables it, the GRB default).
        sample: add ``eps * sqrt(var)`` to the output during training (never at evaluation).
    """

    hidden_sizes: tuple[int, ...] = (64, 64, 64)
    gamma: float = 1.0
    kl_weight: float = 0.0
    sample: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.gamma < 0 or self.kl_weight < 0:
            raise ConfigError(f"R-GCN needs gamma >= 0 and kl_weight >= 0, got {self.gamma}, {self.kl_weight}")


def gaussian_norms(edge_index: torch.Tensor, num_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The two propagation matrices of R-GCN as sparse CSR tensors (transposed, row =
    target): ``D^-1/2 (A + I) D^-1/2`` for the mean and ``D^-1 (A + I) D^-1`` for the variance."""
    ei, _ = remove_self_loops(edge_index)
    ei, _ = add_remaining_self_loops(ei, num_nodes=num_nodes)
    deg = degree(ei[1], num_nodes, dtype=torch.get_default_dtype())  # the model dtype (see GraphModel)
    src, dst = ei
    w_mean = deg[src].rsqrt() * deg[dst].rsqrt()
    w_var = deg[src].reciprocal() * deg[dst].reciprocal()
    size = (num_nodes, num_nodes)
    with warnings.catch_warnings():  # torch flags sparse CSR as beta on every construction
        warnings.simplefilter("ignore", UserWarning)
        return to_torch_csr_tensor(ei.flip(0), w_mean, size=size), to_torch_csr_tensor(ei.flip(0), w_var, size=size)


class GaussianConv(nn.Module):
    """One Gaussian graph convolution: ``(mean, var) -> (mean', var')``.

    Args:
        in_width, out_width: feature widths.
        gamma: attention temperature.
        activate: apply ELU (mean) / ReLU (var) after the linear maps; the last layer uses
            no ELU on the mean and keeps ReLU on the variance (a variance is non-negative).
    """

    def __init__(self, in_width: int, out_width: int, gamma: float, activate: bool = True):
        super().__init__()
        self.lin_mean = nn.Linear(in_width, out_width)
        self.lin_var = nn.Linear(in_width, out_width)
        self.gamma = gamma
        self.activate = activate

    def reset_parameters(self) -> None:
        self.lin_mean.reset_parameters()
        self.lin_var.reset_parameters()

    def forward(self, mean, var, norms):
        adj_mean, adj_var = norms
        mean, var = self.messages(mean, var)
        return propagate_csr(adj_mean, mean), propagate_csr(adj_var, var)

    def messages(self, mean, var):
        """What is propagated: ``(mean * att, var * att * att)`` of the linear maps.

        Computed by :class:`_GaussianMessages`, which keeps only the layer's inputs for the
        backward pass; under autocast (bf16) and inside
        :func:`~grb_dist.models.weighted.plain_kernels` by the plain operators."""
        if torch.is_autocast_enabled(mean.device.type) or plain_kernels_on():
            a = self.lin_mean(mean)
            r = F.relu(self.lin_var(var))
            att = torch.exp(-self.gamma * r)
            return (F.elu(a) if self.activate else a) * att, r * att * att
        return _GaussianMessages.apply(mean, var, self.lin_mean.weight, self.lin_mean.bias, self.lin_var.weight,
                                       self.lin_var.bias, self.gamma, self.activate)


#: Rows of a block of :class:`_GaussianMessages` (8 MiB a tensor at width 128).
BLOCK_ROWS = 16384


def _row_blocks(n: int):
    """Slices of :data:`BLOCK_ROWS` rows covering ``n`` rows."""
    return (slice(start, start + BLOCK_ROWS) for start in range(0, n, BLOCK_ROWS))


class _GaussianMessages(torch.autograd.Function):
    """``(mean, var) -> (m, v)`` of :meth:`GaussianConv.messages`: ``a = mean W_m^T + b_m``,
    ``r = relu(var W_v^T + b_v)``, ``att = exp(-gamma r)``, ``m = elu(a) att`` (``a att``
    without activation), ``v = r att^2``.

    Autograd would keep about six N x F intermediates per layer (the activations, the
    attention and the products); this keeps the two inputs and recomputes ``a`` and ``r``
    (two GEMMs) in the backward pass. Rows are independent, so both passes run over blocks
    of :data:`BLOCK_ROWS` rows: only the outputs (forward) and the input gradients
    (backward) are full N x F tensors. That is what holds R-GCN's training near a GCN's
    memory at 660k nodes."""

    @staticmethod
    def forward(ctx, mean, var, w_mean, b_mean, w_var, b_var, gamma, activate):
        m = mean.new_empty(mean.shape[0], w_mean.shape[0])
        v = var.new_empty(var.shape[0], w_var.shape[0])
        for rows in _row_blocks(mean.shape[0]):
            a, r, att = _GaussianMessages._pre(mean[rows], var[rows], w_mean, b_mean, w_var, b_var, gamma)
            torch.mul(F.elu(a, inplace=True) if activate else a, att, out=m[rows])
            torch.mul(r.mul_(att), att, out=v[rows])
        ctx.save_for_backward(mean, var, w_mean, b_mean, w_var, b_var)
        ctx.gamma, ctx.activate = gamma, activate
        return m, v

    @staticmethod
    def _pre(mean, var, w_mean, b_mean, w_var, b_var, gamma):
        a = torch.addmm(b_mean, mean, w_mean.t())
        r = torch.addmm(b_var, var, w_var.t()).relu_()
        return a, r, torch.exp(r * -gamma)

    @staticmethod
    def backward(ctx, grad_m, grad_v):
        mean, var, w_mean, b_mean, w_var, b_var = ctx.saved_tensors
        need = ctx.needs_input_grad
        # What the backward pass recomputes (a, r, att and two gradients) is a few blocks of
        # rows at a time, not five N x F tensors; only the input gradients are full size.
        grad_mean = mean.new_empty(mean.shape) if need[0] else None
        grad_var = var.new_empty(var.shape) if need[1] else None
        gw_mean, gb_mean, gw_var, gb_var = (torch.zeros_like(t) if need[i] else None
                                            for i, t in enumerate((w_mean, b_mean, w_var, b_var), 2))
        for rows in _row_blocks(mean.shape[0]):
            m, v = mean[rows], var[rows]
            grad_a, grad_r = _GaussianMessages._local_grads(m, v, grad_m[rows], grad_v[rows], w_mean, b_mean,
                                                            w_var, b_var, ctx.gamma, ctx.activate)
            if grad_mean is not None:
                torch.mm(grad_a, w_mean, out=grad_mean[rows])
            if grad_var is not None:
                torch.mm(grad_r, w_var, out=grad_var[rows])
            if gw_mean is not None:
                gw_mean.addmm_(grad_a.t(), m)
            if gb_mean is not None:
                gb_mean += grad_a.sum(0)
            if gw_var is not None:
                gw_var.addmm_(grad_r.t(), v)
            if gb_var is not None:
                gb_var += grad_r.sum(0)
        return grad_mean, grad_var, gw_mean, gb_mean, gw_var, gb_var, None, None

    @staticmethod
    def _local_grads(mean, var, grad_m, grad_v, w_mean, b_mean, w_var, b_var, gamma, activate):
        """The gradients with respect to ``a`` and ``r`` of a block of rows."""
        a, r, att = _GaussianMessages._pre(mean, var, w_mean, b_mean, w_var, b_var, gamma)
        # dv/dr = att^2 (1 - 2 gamma r); dm/dr = -gamma m; both only where r > 0.
        grad_r = (r * (-2 * gamma)).add_(1).mul_(att).mul_(att).mul_(grad_v)
        grad_a = grad_m * att
        del att
        # elu(a) = a (a > 0), exp(a) - 1 (a <= 0); its derivative is 1 there, exp(a) = elu(a) + 1 here.
        e = F.elu(a) if activate else a
        grad_r.addcmul_(grad_a, e, value=-gamma).masked_fill_(r <= 0, 0)
        if activate:
            grad_a.mul_(e.add_(1).masked_fill_(a > 0, 1))
        return grad_a, grad_r


def weighted_gaussian_norms(edge_index: torch.Tensor, weight: torch.Tensor, num_nodes: int):
    """:func:`gaussian_norms` of a weighted graph as ``(edge_index, mean values, var values)``
    (self-loops of weight 1, weighted degrees), differentiable in ``weight``."""
    ei, w = without_self_loops(edge_index, weight)
    deg = weighted_degree(ei, w, num_nodes) + 1
    ei, w = with_self_loops(ei, w, num_nodes)
    src, dst = ei
    return ei, w * deg[src].rsqrt() * deg[dst].rsqrt(), w / (deg[src] * deg[dst])


class RGCN(GraphModel):
    """R-GCN node classifier; ``forward(x, edge_index) -> logits`` (N x C).

    ``weighted_forward`` is exact: the Gaussian norms from weighted degrees (module docstring)."""

    Config = RGCNConfig

    @property
    def receptive_hops(self) -> int:
        """One hop per layer: a layer's Gaussian norms read the degrees of a node's neighbours, which
        the evaluator's extra hop of ball keeps exact."""
        return len(self.layers)

    def propagation_graph(self, edge_index, num_nodes):
        return gaussian_norms(edge_index, num_nodes)

    def make_layer(self, index, in_width, out_width, last):
        return GaussianConv(in_width, out_width, self.config.gamma, activate=not last), out_width

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        norms = self._cached_propagation_graph(edge_index, x.size(0), x.dtype)
        h = self.input_norm(x) if self.input_norm is not None else x
        mean, var = h, h
        n_layers = len(self.layers)
        kl = None
        for i, layer in enumerate(self.layers):
            if i > 0:
                mean = dropout(mean, self.config.dropout, self.training)
                var = dropout(var, self.config.dropout, self.training)
            mean, var = layer(mean, var, norms)
            if i == 0 and self.training and self.config.kl_weight > 0:
                kl = -0.5 * torch.mean(torch.sum(1 + torch.log(var + 1e-8) - mean.pow(2) - var, dim=1))
            if i < n_layers - 1 and self.norms:
                mean = self.norms[i](mean)
        # A training-only scratch value read by the trainer right after this forward.
        self._kl = kl
        if self.training and self.config.sample:
            noise = torch.randn_like(var)
            return mean + noise * torch.sqrt(var + 1e-8)
        return mean

    def weighted_forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor) -> torch.Tensor:
        """Eval-mode output (the mean) with edge weights: the Gaussian norms from weighted
        degrees (the exact relaxation, module docstring)."""
        n = x.size(0)
        ei, w_mean, w_var = weighted_gaussian_norms(edge_index, edge_weight.to(x.dtype), n)
        h = self.input_norm(x) if self.input_norm is not None else x
        mean, var = h, h
        for i, layer in enumerate(self.layers):
            m, v = layer.messages(mean, var)
            mean, var = propagate(m, ei, w_mean, n), propagate(v, ei, w_var, n)
            if i < len(self.layers) - 1 and self.norms:
                mean = self.norms[i](mean)
        return mean

    def regularization(self) -> torch.Tensor | None:
        """``kl_weight * KL`` of the last training forward pass, or None when off."""
        kl = getattr(self, "_kl", None)
        return None if kl is None else self.config.kl_weight * kl
