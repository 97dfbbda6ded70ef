"""The training-path kernels of grb_dist.models: the CSR product with a kept transpose and
the CPU dropout with a one-byte mask."""

import pytest
import torch
from torch_geometric.nn import APPNP, GCNConv
from torch_geometric.utils import to_torch_csr_tensor

from grb_dist.models import propagation
from grb_dist.models.dropout import dropout, keep_mask
from grb_dist.models.gcn import normalized_adjacency_t
from grb_dist.models.grammar import build_model
from grb_dist.models.tensors import graph_tensors

from helpers import tiny_csbm


@pytest.fixture(scope="module")
def tiny():
    return tiny_csbm(n=400, classes=3, features=16, K=2.0)


def _csr(edge_index, values, n):
    return to_torch_csr_tensor(edge_index, values, size=(n, n))


def _random_edges(n, m, seed):
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, m), generator=g)
    return torch.unique(ei, dim=1)


@pytest.mark.parametrize("symmetric", [True, False])
def test_propagate_equals_torch_sparse_mm_in_both_directions_bit_for_bit(symmetric):
    n = 300
    ei = _random_edges(n, 2000, 0)
    if symmetric:
        ei = torch.unique(torch.cat([ei, ei.flip(0)], 1), dim=1)
        adj = normalized_adjacency_t(ei, n)
    else:
        adj = _csr(ei, torch.rand(ei.shape[1], generator=torch.Generator().manual_seed(1)), n)
    h = torch.randn(n, 16, requires_grad=True)
    grad = torch.randn(n, 16)
    expected = torch.sparse.mm(adj, h)
    (expected_grad,) = torch.autograd.grad(expected, h, grad)
    for _ in range(2):  # the second call uses the kept transpose
        out = propagation.propagate(adj, h)
        (out_grad,) = torch.autograd.grad(out, h, grad)
        assert torch.equal(out, expected) and torch.equal(out_grad, expected_grad)
    kept = propagation.transpose(adj)
    assert (kept is adj) == symmetric  # a symmetric matrix is its own transpose: no copy
    assert torch.equal(kept.to_dense(), adj.to_dense().t())


def test_transpose_is_computed_once_per_matrix(monkeypatch):
    n = 50
    ei = _random_edges(n, 300, 2)
    adj = _csr(ei, torch.rand(ei.shape[1]), n)
    calls = []
    real = torch.Tensor.to_sparse_csr
    monkeypatch.setattr(torch.Tensor, "to_sparse_csr", lambda self, *a, **k: (calls.append(1), real(self, *a, **k))[1])
    h = torch.randn(n, 4, requires_grad=True)
    for _ in range(3):
        propagation.propagate(adj, h).sum().backward()
    assert len(calls) == 1


def test_gcn_conv_and_appnp_equal_the_torch_geometric_layers_bit_for_bit(tiny):
    t = graph_tensors(tiny)
    adj = normalized_adjacency_t(t.edge_index, tiny.num_nodes)
    torch.manual_seed(0)
    conv = GCNConv(tiny.num_features, 8, normalize=False)
    prop = APPNP(K=3, alpha=0.1, normalize=False)
    x = t.x.clone().requires_grad_()
    for ours, theirs in (
        (lambda h: propagation.gcn_conv(conv, h, adj), lambda h: conv(h, adj)),
        (lambda h: propagation.appnp(prop, h, adj), lambda h: prop(h, adj)),
    ):
        a, b = ours(x), theirs(x)
        assert torch.equal(a, b)
        assert torch.equal(torch.autograd.grad(a.square().sum(), x)[0], torch.autograd.grad(b.square().sum(), x)[0])
    # any other graph argument, or a layer that normalises, goes to the layer itself
    assert torch.equal(propagation.gcn_conv(conv, t.x, t.edge_index), conv(t.x, t.edge_index))
    normalising = APPNP(K=2, alpha=0.1)
    assert torch.equal(propagation.appnp(normalising, t.x, adj), normalising(t.x, adj))


def test_dropout_keeps_with_probability_one_minus_p_and_scales_the_rest():
    x = torch.ones(400, 500)
    for p in (0.1, 0.5, 0.9):
        out = dropout(x, p, training=True)
        kept = out != 0
        # 200,000 draws: the kept fraction is within 5 standard deviations of 1 - p
        sd = (p * (1 - p) / x.numel()) ** 0.5
        assert abs(float(kept.float().mean()) - (1 - p)) < 5 * sd
        assert torch.equal(out[kept], torch.full_like(out[kept], 1.0).div_(1 - p))
    assert dropout(x, 0.5, training=False) is x
    assert dropout(x, 0.0, training=True) is x


def test_dropout_is_seeded_by_torch_and_its_gradient_is_the_mask():
    x = torch.randn(64, 32, requires_grad=True)
    torch.manual_seed(5)
    a = dropout(x, 0.3, training=True)
    torch.manual_seed(5)
    b = dropout(x, 0.3, training=True)
    c = dropout(x, 0.3, training=True)
    assert torch.equal(a, b) and not torch.equal(b, c)
    (grad,) = torch.autograd.grad(a.sum(), x)
    keep = a != 0
    assert torch.equal(grad, keep.to(x.dtype) / 0.7)


def test_dropout_keeps_a_one_byte_mask_for_the_backward_pass():
    x = torch.randn(256, 64, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (saved.append(t), t)[1], lambda t: t):
        dropout(x, 0.5, training=True)
    assert [(t.dtype, tuple(t.shape)) for t in saved] == [(torch.bool, (256, 64))]


def test_keep_mask_of_an_odd_size():
    torch.manual_seed(0)
    mask = keep_mask((3, 7, 5), 0.25)
    assert mask.shape == (3, 7, 5) and mask.dtype == torch.bool


@pytest.mark.parametrize("name", ["gcn", "sgc", "appnp", "rgcn", "gcnsvd_sparse"])
def test_models_on_the_kept_transpose_path_equal_the_plain_products(tiny, name, monkeypatch):
    """Every model that propagates with :func:`propagation.propagate` gives the values and
    gradients of ``torch.sparse.mm`` (autograd's own backward pass) bit for bit."""
    t = graph_tensors(tiny)

    def run():
        torch.manual_seed(0)
        model = build_model(name, tiny.num_features, tiny.num_classes, {}).eval()
        x = t.x.clone().requires_grad_()
        out = model(x, t.edge_index)
        return out, torch.autograd.grad(out.square().sum(), [x, *model.parameters()])

    ours = run()
    import grb_dist.models.robust.rgcn as rgcn

    # gcn_conv and appnp look propagate up in their module; R-GCN imported it
    monkeypatch.setattr(propagation, "propagate", lambda adj, h: torch.sparse.mm(adj, h))
    monkeypatch.setattr(rgcn, "propagate_csr", propagation.propagate)
    plain = run()
    assert torch.equal(ours[0], plain[0])
    assert all(torch.equal(a, b) for a, b in zip(ours[1], plain[1]))
