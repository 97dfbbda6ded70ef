"""Incremental evaluation of a frozen surrogate under an injection.

During an attack the surrogate is frozen and, while the attack optimises features, the
injected edges are fixed. Almost everything the surrogate computes is then constant: the
first layer's transform of every original node, the activations of every node the injected
nodes cannot reach, the normalised adjacency. Only the rows the injected nodes can reach,
and only those that can still reach a target, change from step to step.

:class:`IncrementalSurrogate` exploits this in three phases:

1. **Clean pass**, once per (surrogate, local graph): the model's declared program
   (:meth:`grb_dist.models.base.GraphModel.incremental`) runs on the clean graph; the
   intermediate tensors later steps need (the inputs of every propagation) are kept.
2. **Compile**, once per injected edge set (:meth:`IncrementalSurrogate.for_edges`): for every
   operation of the program the *dirty* rows are derived, i.e. rows whose value may differ
   from the clean pass (reachable from the injected nodes, or touched by the changed
   normalisation), intersected with the rows that can still reach a target in the
   remaining hops. For every propagation the perturbed operator is split into the block on
   dirty input rows (kept as a small CSR matrix and its transpose, so forward and backward
   are both plain sparse products, with no conversion per step) and the rest, whose
   product with the constant clean input is computed once.
3. **Step** (:meth:`EdgeSetProgram.__call__`): the program runs again on the dirty rows only;
   autograd sees tensors of those rows and nothing else. No full-graph tensor is copied or
   touched per step.

The results equal the surrogate's ordinary forward on the perturbed graph (up to float
rounding); ``tests/test_incremental.py`` checks it for every built-in architecture.

A model declares its computation with four operations (:class:`Ops`): ``map`` (a row-wise
function of one or more tensors), ``propagate`` (a linear propagation with one of the
sparse operators :data:`KINDS`), and ``attend`` (GAT's attention aggregation). A model that
declares nothing is evaluated with its ordinary forward (always correct, just slower).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch_geometric.utils import softmax as edge_softmax

from grb_dist.models.propagation import product

log = logging.getLogger(__name__)

#: The propagation operators a model may use (all symmetric in structure):
#: ``gcn``  D~^-1/2 (A + I) D~^-1/2 with D~ = D + I (GCN, SGC, APPNP);
#: ``sym``  D^-1/2 A D^-1/2, zero rows for isolated nodes (TAGCN);
#: ``sum``  A (GIN);  ``mean``  D^-1 A (GraphSAGE);  ``att``  the structure of A + I, for
#: :meth:`Ops.attend`.
KINDS = ("gcn", "sym", "sum", "mean", "att")
_SELF_LOOPS = {"gcn": True, "sym": False, "sum": False, "mean": False, "att": True}
#: Operators whose entry (r, c) depends on the degree of c: a degree change at c changes
#: the rows of c's neighbours too.
_COLUMN_NORMALISED = {"gcn", "sym"}


def supports_incremental(model: torch.nn.Module) -> bool:
    """True when ``model``'s own class declares its program (a subclass that inherits a
    declaration but may compute something else falls back to the ordinary forward)."""
    return "incremental_layer" in type(model).__dict__ or "incremental" in type(model).__dict__


def program_depth(model: torch.nn.Module) -> int | None:
    """The most propagations on any path of ``model``'s declared program (its output at a
    node depends on nodes that many hops away at most), or ``None`` when it declares none."""
    if not supports_incremental(model):
        return None
    with torch.no_grad():
        return int(model.incremental(_Count(), _H(0, 0)).depth)


class Ops:
    """The operations a model's program is written in (see :mod:`.incremental`).

    Handles are opaque: the program passes them from one operation to the next and never
    inspects them, so the same program can be counted, run on the clean graph and replayed
    on the dirty rows.
    """

    def map(self, fn: Callable[..., torch.Tensor], *hs: Any) -> Any:
        """Row-wise ``fn`` of one or more handles (rows in the same order)."""
        raise NotImplementedError

    def propagate(self, h: Any, kind: str) -> Any:
        """``P h`` for the operator ``kind`` (one of :data:`KINDS`)."""
        raise NotImplementedError

    def attend(self, xl: Any, a_src: Any, a_dst: Any, negative_slope: float) -> Any:
        """GAT aggregation with self-loops: ``out_i = sum_j softmax_j(leaky(a_src_j + a_dst_i)) xl_j``;
        ``xl`` is rows x heads x C, ``a_src`` / ``a_dst`` rows x heads."""
        raise NotImplementedError


# ------------------------------------------------------------------ graph structure


class _Structure:
    """The local graph (CSR by row) plus an optional injection; row blocks of its operators."""

    def __init__(self, edge_index: torch.Tensor, num_nodes: int, dtype: torch.dtype = torch.float32):
        dev = edge_index.device
        self.dtype = dtype
        row, col = edge_index[0], edge_index[1]
        order = torch.argsort(row * num_nodes + col)
        self.row, self.col = row[order], col[order]
        self.n = num_nodes
        self.deg = torch.bincount(self.row, minlength=num_nodes)
        self.rowptr = torch.zeros(num_nodes + 1, dtype=torch.long, device=dev)
        self.rowptr[1:] = torch.cumsum(self.deg, 0)
        self.device = dev
        self.set_injection(torch.empty(2, 0, dtype=torch.long, device=dev), 0)

    def set_injection(self, inj_edges: torch.Tensor, n_inject: int) -> None:
        """Injected edges (local ids, one direction each; row 0 injected nodes)."""
        self.n_inj = n_inject
        self.n_all = self.n + n_inject
        self.isrc = torch.cat([inj_edges[0], inj_edges[1]])
        self.idst = torch.cat([inj_edges[1], inj_edges[0]])
        self.deg_all = torch.nn.functional.pad(self.deg, (0, n_inject)) + torch.bincount(
            self.isrc, minlength=self.n_all
        )
        touched = torch.zeros(self.n_all, dtype=torch.bool, device=self.device)
        touched[self.isrc] = True
        #: nodes whose degree changed (the attacked targets and the injected nodes)
        self.touched = touched
        self._changed: dict[bool, torch.Tensor] = {}

    def neighbourhood(self, mask: torch.Tensor) -> torch.Tensor:
        """The closed neighbourhood of a node mask (over all N + n_inject nodes)."""
        out = mask.clone()
        n = self.n
        out[: n][self.col[mask[: n][self.row]]] = True
        out[self.idst[mask[self.isrc]]] = True
        return out

    def changed_rows(self, kind: str) -> torch.Tensor:
        """Rows of the operator ``kind`` that differ between the clean and perturbed graph."""
        wide = kind in _COLUMN_NORMALISED
        if wide not in self._changed:
            self._changed[wide] = self.neighbourhood(self.touched) if wide else self.touched
        return self._changed[wide]

    def rows(self, kind: str, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Entries of the perturbed operator ``kind`` in the given rows (sorted node ids).

        Returns ``(row_pos, col, weight)``: positions into ``rows``, column node ids and
        values, sorted by ``row_pos``.
        """
        dev = self.device
        pos = torch.full((self.n_all,), -1, dtype=torch.long, device=dev)
        pos[rows] = torch.arange(rows.numel(), device=dev)
        orig = rows[rows < self.n]
        counts = self.deg[orig]
        total = int(counts.sum())
        starts = torch.repeat_interleave(self.rowptr[orig], counts)
        offsets = torch.arange(total, device=dev) - torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
        cols = [self.col[starts + offsets]]
        rpos = [torch.repeat_interleave(pos[orig], counts)]
        m = pos[self.isrc] >= 0
        cols.append(self.idst[m])
        rpos.append(pos[self.isrc[m]])
        if _SELF_LOOPS[kind]:
            cols.append(rows)
            rpos.append(torch.arange(rows.numel(), device=dev))
        col = torch.cat(cols)
        rp = torch.cat(rpos)
        order = torch.sort(rp, stable=True).indices
        rp, col = rp[order], col[order]
        deg = self.deg_all.to(self.dtype)
        r_node = rows[rp]
        if kind == "gcn":
            dinv = (deg + 1).pow(-0.5)
            w = dinv[r_node] * dinv[col]
        elif kind == "sym":
            dinv = deg.pow(-0.5)
            dinv = torch.where(torch.isinf(dinv), torch.zeros_like(dinv), dinv)
            w = dinv[r_node] * dinv[col]
        elif kind == "mean":
            w = 1.0 / deg[r_node].clamp(min=1)
        else:
            w = torch.ones(col.numel(), dtype=self.dtype, device=dev)
        return rp, col, w


def _csr(row: torch.Tensor, col: torch.Tensor, val: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """A CSR matrix from COO entries (any order)."""
    key = row * shape[1] + col
    order = torch.argsort(key)
    row, col, val = row[order], col[order], val[order]
    rowptr = torch.zeros(shape[0] + 1, dtype=torch.long, device=row.device)
    rowptr[1:] = torch.cumsum(torch.bincount(row, minlength=shape[0]), 0)
    with warnings.catch_warnings():  # torch flags sparse CSR as beta on every construction
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(rowptr, col, val, size=shape, check_invariants=False)


def _sparse_mm(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``a @ x`` in ``a``'s dtype, outside any autocast (sparse products stay float32)."""
    with torch.autocast(a.device.type, enabled=False):
        return product(a, x.to(a.dtype))


class _SpMM(torch.autograd.Function):
    """``a @ x`` for a constant sparse ``a`` whose transpose ``at`` is given: the backward
    is another plain sparse product (no per-step transposition or format conversion)."""

    @staticmethod
    def forward(ctx, a, at, x):  # noqa: D401
        ctx.at = at
        ctx.dtype = x.dtype
        return _sparse_mm(a, x)  # propagations stay in the operator's dtype

    @staticmethod
    def backward(ctx, grad):
        return None, None, _sparse_mm(ctx.at, grad.contiguous()).to(ctx.dtype)


def _spmm(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Sparse ``a`` (CSR) times dense ``x`` with any trailing shape."""
    return _sparse_mm(a, x.reshape(x.shape[0], -1)).reshape(a.shape[0], *x.shape[1:])


# ------------------------------------------------------------------ the three phases


@dataclass
class _H:
    """Handle of the counting and clean phases."""

    id: int
    depth: int
    value: torch.Tensor | None = None


class _Count(Ops):
    """Counts the depth (propagations on the way) and records which handles later
    operations read in full (inputs of propagations, attentions and multi-input maps)."""

    def __init__(self) -> None:
        self.n = 1
        self.keep: set[int] = set()

    def _new(self, depth: int) -> _H:
        self.n += 1
        return _H(self.n - 1, depth)

    def map(self, fn, *hs):
        if len(hs) > 1:
            self.keep.update(h.id for h in hs)
        return self._new(max(h.depth for h in hs))

    def propagate(self, h, kind):
        if kind not in KINDS:
            raise ValueError(f"unknown propagation {kind!r}; use one of {KINDS}")
        self.keep.add(h.id)
        return self._new(h.depth + 1)

    def attend(self, xl, a_src, a_dst, negative_slope):
        if not xl.depth == a_src.depth == a_dst.depth:
            raise ValueError("attend: xl, a_src and a_dst must come from the same layer input")
        self.keep.update((xl.id, a_src.id, a_dst.id))
        return self._new(xl.depth + 1)


class _Clean(Ops):
    """Runs the program on the whole clean graph; keeps the tensors named by ``keep``."""

    def __init__(self, structure: _Structure, keep: set[int]):
        self.s = structure
        self.keep = keep
        self.kept: dict[int, torch.Tensor] = {}
        self.n = 1
        self._ops: dict[str, tuple] = {}

    def _new(self, value: torch.Tensor, depth: int) -> _H:
        h = _H(self.n, depth, value)
        if self.n in self.keep:
            self.kept[self.n] = value
        self.n += 1
        return h

    def _operator(self, kind: str) -> tuple:
        """``(row, col, weight, csr)`` of the clean operator over all nodes, built once."""
        if kind not in self._ops:
            rp, col, w = self.s.rows(kind, torch.arange(self.s.n, device=self.s.device))
            self._ops[kind] = (rp, col, w, _csr(rp, col, w, (self.s.n, self.s.n)))
        return self._ops[kind]

    def map(self, fn, *hs):
        return self._new(fn(*(h.value for h in hs)), max(h.depth for h in hs))

    def propagate(self, h, kind):
        return self._new(_spmm(self._operator(kind)[3], h.value), h.depth + 1)

    def attend(self, xl, a_src, a_dst, negative_slope):
        rp, col, _, _ = self._operator("att")
        out = _attention(xl.value, a_src.value, a_dst.value, col, rp, rp, self.s.n, negative_slope)
        return self._new(out, xl.depth + 1)


def _attention(xl_tab, asrc_tab, adst_rows, src_idx, dst_idx, row_pos, n_rows, negative_slope):
    """GAT aggregation for ``n_rows`` rows over the edges ``(src_idx -> row_pos)``."""
    e = F.leaky_relu(asrc_tab[src_idx] + adst_rows[dst_idx], negative_slope)
    alpha = edge_softmax(e, row_pos, num_nodes=n_rows)
    msg = xl_tab[src_idx] * alpha.unsqueeze(-1)
    out = torch.zeros((n_rows, *xl_tab.shape[1:]), dtype=msg.dtype, device=msg.device)
    return out.index_add(0, row_pos, msg)


@dataclass
class _P:
    """Handle of the planning phase.

    ``mask`` / ``rows``: the *variable* rows (they depend on the injected features);
    ``cmask`` / ``crows`` / ``cvals``: rows that differ from the clean pass but not with the
    injected features (the changed normalisation around attacked targets), with their
    values, computed once per edge set. Every other row has its clean value. All sets are
    restricted to the rows that can still reach a target.
    """

    id: int
    depth: int
    mask: torch.Tensor
    rows: torch.Tensor
    cmask: torch.Tensor
    crows: torch.Tensor
    cvals: torch.Tensor | None = None


def _rows_of(mask: torch.Tensor) -> torch.Tensor:
    return torch.nonzero(mask).squeeze(1)


class _Compiler(Ops):
    """Derives the variable and changed-constant rows of every operation for one injected
    edge set and computes each operation's constant parts; the records are replayed by
    :class:`EdgeSetProgram`."""

    def __init__(self, inc: "IncrementalSurrogate", need: list[torch.Tensor]):
        self.inc = inc
        self.s = inc.structure
        self.need = need
        self.records: list[tuple] = []
        self.n = 1

    def _new(self, mask: torch.Tensor, cmask: torch.Tensor, depth: int) -> _P:
        mask = mask & self.need[depth]
        cmask = cmask & self.need[depth] & ~mask
        h = _P(self.n, depth, mask, _rows_of(mask), cmask, _rows_of(cmask))
        self.n += 1
        return h

    def _positions(self, rows: torch.Tensor) -> torch.Tensor:
        pos = torch.full((self.s.n_all,), -1, dtype=torch.long, device=self.s.device)
        pos[rows] = torch.arange(rows.numel(), device=self.s.device)
        return pos

    def _const(self, h: _P, rows: torch.Tensor) -> torch.Tensor:
        """``h``'s constant values on ``rows`` (none of them variable): the compiled value
        where the row changed, the clean pass's elsewhere."""
        cpos = self._positions(h.crows)[rows]
        changed = cpos >= 0
        if rows.numel() and bool(changed.all()):
            return h.cvals[cpos]
        if h.id not in self.inc.kept:
            raise RuntimeError("incremental program: a clean value was not kept")
        if bool((rows[~changed] >= self.s.n).any()):  # an injected node has no clean value
            raise RuntimeError("incremental program: an injected row is missing from a variable set")
        out = self.inc.kept[h.id][rows.clamp(max=self.s.n - 1)].clone()
        if bool(changed.any()):
            out[changed] = h.cvals[cpos[changed]]
        return out

    def _gather(self, h: _P, rows: torch.Tensor, mask: torch.Tensor):
        """How to get ``h``'s values on ``rows`` from its variable rows: ``None`` when they
        are the same rows, else ``(index, constant rows)`` into ``cat([variable, constant])``."""
        if torch.equal(h.mask, mask):
            return None
        idx = self._positions(h.rows)[rows]
        const_rows = rows[idx < 0]
        if const_rows.numel() == 0:
            return (idx, None)
        idx = idx.clone()
        idx[idx < 0] = h.rows.numel() + torch.arange(const_rows.numel(), device=idx.device)
        return (idx, self._const(h, const_rows))

    def map(self, fn, *hs):
        depth = max(h.depth for h in hs)
        mask, cmask = hs[0].mask.clone(), hs[0].cmask.clone()
        for h in hs[1:]:
            mask |= h.mask
            cmask |= h.cmask
        out = self._new(mask, cmask, depth)
        self.records.append(("map", [self._gather(h, out.rows, out.mask) for h in hs]))
        if out.crows.numel():
            out.cvals = fn(*(self._const(h, out.crows) for h in hs))
        return out

    def _out(self, h: _P, kind: str) -> _P:
        nb = self.s.neighbourhood
        return self._new(nb(h.mask), self.s.changed_rows(kind) | nb(h.cmask), h.depth + 1)

    def _entries(self, h: _P, rows: torch.Tensor, kind: str):
        """Entries of the perturbed operator in ``rows``, with each column's position among
        ``h``'s variable rows (-1) and among its changed-constant rows (-1)."""
        rp, col, w = self.s.rows(kind, rows)
        return rp, col, w, self._positions(h.rows)[col], self._positions(h.crows)[col]

    def _const_product(self, h: _P, n_rows: int, rp, col, w, vpos, cpos) -> torch.Tensor:
        """The operator's entries on constant columns times ``h``'s constant values."""
        clean = (vpos < 0) & (cpos < 0)
        if bool((col[clean] >= self.s.n).any()):
            raise RuntimeError("incremental program: an injected column is missing from a variable set")
        out = _spmm(_csr(rp[clean], col[clean], w[clean], (n_rows, self.s.n)), self.inc.kept[h.id])
        changed = cpos >= 0
        if bool(changed.any()):
            out = out + _spmm(_csr(rp[changed], cpos[changed], w[changed], (n_rows, h.crows.numel())), h.cvals)
        return out

    def propagate(self, h, kind):
        out = self._out(h, kind)
        rp, col, w, vpos, cpos = self._entries(h, out.rows, kind)
        n_out, n_in = out.rows.numel(), h.rows.numel()
        base = self._const_product(h, n_out, rp, col, w, vpos, cpos)
        var = vpos >= 0
        b = _csr(rp[var], vpos[var], w[var], (n_out, n_in))
        bt = _csr(vpos[var], rp[var], w[var], (n_in, n_out))
        self.records.append(("propagate", base, b, bt))
        if out.crows.numel():
            crp, ccol, cw, cvpos, ccpos = self._entries(h, out.crows, kind)
            out.cvals = self._const_product(h, out.crows.numel(), crp, ccol, cw, cvpos, ccpos)
        return out

    def _attention_inputs(self, xl: _P, a_src: _P, a_dst: _P, rows: torch.Tensor, mask: torch.Tensor):
        """Edges into ``rows`` and the tables their sources and destinations index."""
        rp, col, _, vpos, _ = self._entries(xl, rows, "att")
        var = vpos >= 0
        const_src, inverse = torch.unique(col[~var], return_inverse=True)
        src_idx = vpos.clone()
        src_idx[~var] = xl.rows.numel() + inverse
        dst = self._gather(a_dst, rows, mask) or (torch.arange(rows.numel(), device=rp.device), None)
        return rp, src_idx, dst[0][rp], self._const(xl, const_src), self._const(a_src, const_src), dst[1]

    def attend(self, xl, a_src, a_dst, negative_slope):
        if not (torch.equal(a_src.mask, xl.mask) and torch.equal(a_dst.mask, xl.mask)):
            raise RuntimeError("attend: a_src and a_dst must be row-wise functions of xl")
        out = self._out(xl, "att")
        rp, src_idx, dst_idx, xl_c, asrc_c, adst_c = self._attention_inputs(xl, a_src, a_dst, out.rows, out.mask)
        self.records.append(("attend", src_idx, rp, dst_idx, xl_c, asrc_c, adst_c, out.rows.numel(), negative_slope))
        if out.crows.numel():
            crp, csrc, cdst, cxl, casrc, cadst = self._attention_inputs(xl, a_src, a_dst, out.crows, out.cmask)
            nv = xl.rows.numel()  # no variable source feeds a changed-constant row
            out.cvals = _attention(cxl, casrc, cadst, csrc - nv, cdst - nv, crp, out.crows.numel(), negative_slope)
        return out


class EdgeSetProgram(Ops):
    """The surrogate on one injected edge set: ``program(inj_x)`` gives the targets' logits.

    Replays the planned records on the dirty rows; the operations' constant parts were
    computed when the program was compiled.
    """

    def __init__(self, inc: "IncrementalSurrogate", records: list[tuple], out_gather, n_variable: int,
                 const_logits: torch.Tensor):
        self.inc = inc
        self._records = records
        self._out_gather = out_gather
        self._i = 0
        #: how many output rows depend on the injected features (0: the logits are constant)
        self.n_variable = n_variable
        self.const_logits = const_logits

    def _next(self, kind: str) -> tuple:
        rec = self._records[self._i]
        self._i += 1
        assert rec[0] == kind, f"program diverged from its compilation ({rec[0]} vs {kind})"
        return rec

    @staticmethod
    def _take(value: torch.Tensor, gather) -> torch.Tensor:
        if gather is None:
            return value
        idx, const = gather
        table = value if const is None else torch.cat([value, const.to(value.dtype)])
        return table[idx]

    def map(self, fn, *hs):
        _, gathers = self._next("map")
        return fn(*(self._take(h, g) for h, g in zip(hs, gathers)))

    def propagate(self, h, kind):
        _, base, b, bt = self._next("propagate")
        flat = h.reshape(h.shape[0], -1)
        out = base.reshape(base.shape[0], -1).to(flat.dtype) + _SpMM.apply(b, bt, flat)
        return out.reshape(base.shape[0], *h.shape[1:])

    def attend(self, xl, a_src, a_dst, negative_slope):
        _, src_idx, rp, dst_idx, xl_const, asrc_const, adst_const, n_rows, slope = self._next("attend")
        xl_tab = torch.cat([xl, xl_const])
        asrc_tab = torch.cat([a_src, asrc_const])
        adst = a_dst if adst_const is None else torch.cat([a_dst, adst_const])
        return _attention(xl_tab, asrc_tab, adst, src_idx, dst_idx, rp, n_rows, slope)

    def __call__(self, inj_x: torch.Tensor) -> torch.Tensor:
        """Logits of the targets (T x C) with injected features ``inj_x`` (n_inject x D)."""
        if self.n_variable == 0:  # no target is reachable: the logits are constant
            return self.const_logits
        self._i = 0
        out = self.inc.model.incremental(self, inj_x)
        assert self._i == len(self._records)
        return self._take(out, self._out_gather)


class IncrementalSurrogate:
    """A frozen surrogate's clean pass on a local graph, and plans for injected edge sets.

    Args:
        model: a model whose class declares its program (:func:`supports_incremental`),
            in eval mode for as long as this object is used.
        x: clean local features (N x D).
        edge_index: clean local edges (2 x E, both directions).
        targets: local ids of the targets whose logits the attack reads.
    """

    def __init__(self, model: torch.nn.Module, x: torch.Tensor, edge_index: torch.Tensor, targets: torch.Tensor):
        if not supports_incremental(model):
            raise TypeError(f"{type(model).__name__} does not declare an incremental program")
        self.model = model
        self.targets = targets
        self.structure = _Structure(edge_index, x.shape[0], x.dtype)
        count = _Count()
        with torch.no_grad():
            out = model.incremental(count, _H(0, 0))
            self.depth = out.depth
            clean = _Clean(self.structure, count.keep)
            if 0 in count.keep:
                clean.kept[0] = x
            logits = model.incremental(clean, _H(0, 0, x)).value
        self.kept = clean.kept
        self.clean_logits = logits[targets]

    def for_edges(self, inj_edges: torch.Tensor, n_inject: int) -> EdgeSetProgram:
        """Prepare the evaluation for injected edges ``inj_edges`` (local ids, 2 x M)."""
        s = self.structure
        s.set_injection(inj_edges, n_inject)
        dev = s.device
        need = [torch.zeros(s.n_all, dtype=torch.bool, device=dev)]
        need[0][self.targets] = True
        for _ in range(self.depth):
            need.insert(0, s.neighbourhood(need[0]))
        x_mask = torch.zeros(s.n_all, dtype=torch.bool, device=dev)
        x_mask[s.n:] = True
        compiler = _Compiler(self, need)
        empty = torch.zeros_like(x_mask)
        with torch.no_grad():
            x_handle = _P(0, 0, x_mask & need[0], _rows_of(x_mask & need[0]), empty, _rows_of(empty))
            out = self.model.incremental(compiler, x_handle)
            if out.depth != self.depth:
                raise RuntimeError("the model's program changed depth between passes")
            # the targets' logits: the clean ones, changed where the program says so, and the
            # variable rows in front (index = position in out.rows, or |rows| + target no.)
            t = self.targets.numel()
            const_logits = self.clean_logits.clone()
            cpos = compiler._positions(out.crows)[self.targets]
            changed = cpos >= 0
            if bool(changed.any()):
                const_logits[changed] = out.cvals[cpos[changed]]
            idx = compiler._positions(out.rows)[self.targets]
            fixed = idx < 0
            idx[fixed] = out.rows.numel() + torch.arange(t, device=dev)[fixed]
            gather = (idx, const_logits)
        log.debug(
            "incremental program: %d injected; variable rows per propagation %s",
            n_inject, [int(r[1].shape[0]) for r in compiler.records if r[0] == "propagate"],
        )
        return EdgeSetProgram(self, compiler.records, gather, out.rows.numel(), const_logits)


__all__ = ["EdgeSetProgram", "IncrementalSurrogate", "KINDS", "Ops", "supports_incremental"]
