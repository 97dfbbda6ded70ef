"""GAT's memory-lean attention (grb_dist.models.attention) against torch_geometric's GATConv:
the same outputs and gradients, the same trained weights, the same values whatever the
backward pass's chunk size, and no per-edge feature tensor kept for the backward pass."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.nn import GATConv

from grb_dist.models.attention import (
    AttentionGraph, aggregate, gat_conv, lean_attention, pyg_attention, sddmm_heads,
)
from grb_dist.models.robust.gnnguard import EdgePattern, GuardGATConv, guard_edges
from grb_dist.models.train import TrainConfig, train
from grb_dist.models.weighted import csr_structure, plain_kernels

from helpers import tiny_csbm

N, LINKED, F_IN, C = 40, 30, 6, 5  # nodes LINKED.. N have no edges


def _graph(seed: int, loops: bool, edges: int = 120) -> torch.Tensor:
    """A random directed graph without duplicate edges among the first LINKED nodes (the
    others isolated), shuffled, with some self-loops when ``loops``."""
    gen = torch.Generator().manual_seed(seed)
    ei = torch.unique(torch.randint(0, LINKED, (2, edges), generator=gen), dim=1)
    ei = ei[:, ei[0] != ei[1]]
    if loops:
        some = torch.tensor([0, 3, 7, 35])
        ei = torch.cat([ei, torch.stack([some, some])], dim=1)
    return ei[:, torch.randperm(ei.shape[1], generator=gen)]


def _grads(out: torch.Tensor, x: torch.Tensor, layer: torch.nn.Module) -> list[torch.Tensor]:
    weight = torch.linspace(-1.0, 1.0, out.numel()).view_as(out)  # every output counts differently
    loss = (out * weight).sum() + out.pow(2).sum()
    return list(torch.autograd.grad(loss, [x, *layer.parameters()], retain_graph=True))


def _close(a, b, tol=1e-5):
    torch.testing.assert_close(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("loops", [False, True])
@pytest.mark.parametrize("heads,concat", [(1, True), (2, True), (2, False)])
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_gat_conv_equals_gatconv_outputs_and_gradients(heads, concat, loops, mode):
    torch.manual_seed(heads + 2 * concat)
    layer = GATConv(F_IN, C, heads=heads, concat=concat, negative_slope=0.15)
    torch.nn.init.normal_(layer.bias)  # PyG starts it at zero
    layer.train(mode == "train")
    ei = _graph(heads, loops)
    x = torch.randn(N, F_IN, requires_grad=True)
    ref = layer(x, ei)
    out = gat_conv(layer, x, AttentionGraph.of(ei, N))
    assert out.shape == ref.shape == (N, heads * C if concat else C)
    _close(out, ref)
    for got, want in zip(_grads(out, x, layer), _grads(ref, x, layer)):
        _close(got, want)


def test_attention_dropout_draws_gatconvs_mask():
    """The coefficients are computed in GATConv's edge order, so the same random state
    drops the same coefficients."""
    layer = GATConv(F_IN, C, heads=2, dropout=0.5).train()
    ei, x = _graph(0, True), torch.randn(N, F_IN)
    torch.manual_seed(5)
    ref = layer(x, ei)
    torch.manual_seed(5)
    out = gat_conv(layer, x, AttentionGraph.of(ei, N))
    _close(out, ref)
    torch.manual_seed(6)
    assert not torch.allclose(gat_conv(layer, x, AttentionGraph.of(ei, N)), ref, atol=1e-3)


def _guard_case(seed: int, self_weight: bool, threshold: float):
    torch.manual_seed(seed)
    ei = _graph(seed, False, edges=200)
    ei = torch.cat([ei, ei.flip(0)], dim=1).unique(dim=1)  # undirected, as a graph's edges
    pattern = EdgePattern.of(ei, N)
    h = torch.randn(N, F_IN, requires_grad=True)
    keep, kept, w = guard_edges(h, pattern, threshold, self_weight)
    graph = AttentionGraph(pattern.edge_index, pattern.by_dst, pattern.by_src).derived(keep, self_weight)
    return h, keep, kept, w, graph


@pytest.mark.parametrize("self_weight,threshold", [(True, 0.1), (False, 0.1), (False, 1.0)])
def test_guard_gat_conv_equals_its_message_passing(self_weight, threshold):
    h, keep, kept, w, graph = _guard_case(1, self_weight, threshold)
    assert torch.equal(graph.edge_index, kept)
    if threshold == 1.0:
        assert kept.shape[1] == 0  # nothing kept, no self-loops: an empty graph
    layer = GuardGATConv(F_IN, C, heads=2, concat=True, add_self_loops=False)
    torch.nn.init.normal_(layer.bias)
    ref = layer(h, kept, edge_attr=w)
    out = gat_conv(layer, h, graph, torch.log(w.clamp_min(1e-12)))
    _close(out, ref)
    for got, want in zip(_grads(out, h, layer), _grads(ref, h, layer)):
        _close(got, want)


@pytest.mark.parametrize("self_weight", [True, False])
def test_derived_structures_equal_sorting_the_edges_again(self_weight):
    _, _, kept, _, graph = _guard_case(2, self_weight, 0.1)
    src, dst = kept
    for got, want in ((graph.by_dst, csr_structure(dst, src, N)), (graph.by_src, csr_structure(src, dst, N))):
        for a, b in zip(got, want):
            assert torch.equal(a, b)
    plain = AttentionGraph.of(_graph(3, True), N)  # GATConv's self-loops, derived without sorting
    src, dst = plain.edge_index
    assert torch.equal(plain.edge_index[:, -N:], torch.arange(N).expand(2, N))
    assert all(torch.equal(a, b) for a, b in zip(plain.by_dst, csr_structure(dst, src, N)))


def test_chunked_backward_is_identical_for_every_chunk_size():
    torch.manual_seed(0)
    graph = AttentionGraph.of(_graph(4, True), N)
    e = graph.edge_index.shape[1]
    xl = torch.randn(N, 2, C, requires_grad=True)
    alpha = torch.rand(e, 2, requires_grad=True)
    g = torch.randn(N, 2, C)
    want = sddmm_heads(graph.by_dst, g, xl.detach(), chunk=10 * e)
    src, dst = graph.edge_index
    _close(want, (g[dst] * xl.detach()[src]).sum(-1))  # the definition, every edge gathered
    grads = []
    for chunk in (1, 2, 7, e // 3, e - 1, e, 10 * e):
        assert torch.equal(sddmm_heads(graph.by_dst, g, xl.detach(), chunk=chunk), want), chunk
        out = aggregate(xl, alpha, graph, chunk=chunk)
        grads.append(torch.autograd.grad((out * g).sum(), [xl, alpha]))
    assert all(torch.equal(a, b) for gs in grads[1:] for a, b in zip(gs, grads[0]))


def _saved_sizes(fn) -> list[tuple[int, ...]]:
    shapes: list[tuple[int, ...]] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: shapes.append(tuple(t.shape)) or t, lambda t: t):
        fn()
    return shapes


def test_the_backward_pass_keeps_no_per_edge_feature_tensor():
    torch.manual_seed(0)
    heads = 2
    layer = GATConv(F_IN, C, heads=heads).train()
    ei, x = _graph(5, False), torch.randn(N, F_IN, requires_grad=True)
    e = ei.shape[1] + N  # with the self-loops
    per_edge = [s for s in _saved_sizes(lambda: layer(x, ei)) if s[0] == e and len(s) == 3]
    assert per_edge, "GATConv keeps its gathered features (the check sees them)"
    lean = _saved_sizes(lambda: gat_conv(layer, x, AttentionGraph.of(ei, N)))
    assert not [s for s in lean if s[0] == e and len(s) == 3], lean
    assert max(s[0] * (s[1] if len(s) > 1 else 1) for s in lean if s) < e * heads * C


def test_the_models_use_pyg_attention_where_they_must():
    layer, x = GATConv(F_IN, C), torch.randn(3, F_IN)
    assert lean_attention(layer, x)
    with pyg_attention():
        assert not lean_attention(layer, x)
    with plain_kernels():  # a gradient of a gradient: GATConv's own (twice differentiable) forward
        assert not lean_attention(layer, x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not lean_attention(layer, x)
    assert not lean_attention(GATConv(F_IN, C, edge_dim=3), x)
    assert lean_attention(layer, x)


@pytest.fixture(scope="module")
def tiny():
    return tiny_csbm(n=300, classes=3, features=12, K=2.0)


@pytest.mark.parametrize("name,params", [
    ("gat", {"hidden_sizes": [8, 8], "heads": 2}),
    ("gat_ln", {"hidden_sizes": [8], "heads": 2}),
    ("gatguard", {"hidden_sizes": [8], "heads": 2}),
])
def test_training_reaches_gatconvs_weights(tiny, name, params):
    cfg = TrainConfig(epochs=15, patience=100, seed=3)
    lean = train(name, tiny, params, cfg)
    with pyg_attention():
        ref = train(name, tiny, params, cfg)
    want = ref.model.state_dict()
    got = lean.model.state_dict()
    assert got.keys() == want.keys()
    for k, v in got.items():
        torch.testing.assert_close(v, want[k], rtol=1e-4, atol=1e-5, msg=k)
    assert lean.best_epoch == ref.best_epoch


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gat_conv_equals_gatconv_on_cuda():
    torch.manual_seed(0)
    layer = GATConv(F_IN, C, heads=2).cuda()
    ei, x = _graph(6, True).cuda(), torch.randn(N, F_IN, device="cuda", requires_grad=True)
    ref = layer(x, ei)
    out = gat_conv(layer, x, AttentionGraph.of(ei, N), chunk=7)
    _close(out, ref)
    for got, want in zip(_grads(out, x, layer), _grads(ref, x, layer)):
        _close(got, want)
