"""lower-emb: emb ops -> loop nests over memrefs; every tensor becomes a memref (a buffer).

The nests say exactly what each op computes, element by element, so later passes need to know
nothing about embeddings: they see loads, stores, arithmetic and loops.  What each op was stays in a
`work` op (dialects/builtin.py), which codegen turns into the program's `.work` record.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from ..dialects.emb import QBAG_BITS, qbag_dim
from ..ir.builder import Builder
from ..ir.core import Op, Value, new_op
from ..ir.rewrite import replace_uses
from ..ir.types import I1, INDEX, ScalarType, ShapedType, Type
from .base import Pass


def to_memref(t: Type) -> Type:
    return t.with_kind("memref") if isinstance(t, ShapedType) and t.kind == "tensor" else t


@dataclass
class LowerEmb(Pass):
    name = "lower-emb"
    summary = "lower the emb ops (gather, bags, scatter_rows) to loop nests; tensors become memrefs"

    def run(self, module: Op) -> None:
        for f in module.body.ops:
            for op in list(f.walk()):
                for v in op.results:
                    v.type = to_memref(v.type)
                for b in op.regions:
                    for a in b.args:
                        a.type = to_memref(a.type)
            f.attrs["results"] = [to_memref(t) for t in f.attrs["results"]]
            for op in list(f.body.ops):
                if op.name in LOWERINGS:
                    self.replace(op, LOWERINGS[op.name])

    @staticmethod
    def replace(op: Op, fn: Callable[[Builder, Op], Value]) -> None:
        """Lower `op` in place, and record what it computed in a `work` op just before the function's
        return: after every nest and every tensor it names, where no pass looks for a nest's neighbours."""
        block = op.parent
        assert block is not None
        b = Builder(block, block.ops.index(op), op.loc)
        block.ops.remove(op)
        new = fn(b, op)
        old = op.result
        new.name = old.name
        if block.parent is not None:
            replace_uses(block.parent, old, new)
        record = new_op("work", [*op.operands, new], [], {"op": op.name, **op.attrs}, loc=op.loc)
        record.parent = block
        block.ops.insert(len(block.ops) - 1 if block.ops and block.ops[-1].name == "return" else len(block.ops),
                         record)


def dyn_dims(b: Builder, src: Value, shape: tuple[int | None, ...], first: int = 0) -> list[Value]:
    """The extents of `src` (memref) from axis `first` on as index values, constants where known."""
    out = []
    for axis, d in enumerate(shape):
        if axis >= first:
            out.append(b.const(d) if d is not None else b.val("loop.dim", [src], INDEX, axis=axis))
    return out


def alloc(b: Builder, t: ShapedType, extents: list[Value]) -> Value:
    assert t.shape is not None
    dyn = [e for e, d in zip(extents, t.shape) if d is None]
    return b.val("loop.alloc", dyn, t)


def lower_gather(b: Builder, op: Op) -> Value:
    table, idx = op.operands
    tt, it, rt = table.type, idx.type, op.result.type
    assert isinstance(tt, ShapedType) and isinstance(it, ShapedType) and isinstance(rt, ShapedType)
    assert tt.shape is not None and it.shape is not None
    c0, c1 = b.const(0), b.const(1)
    idx_ext = dyn_dims(b, idx, it.shape)
    row_ext = dyn_dims(b, table, tt.shape, first=1)  # a table that is an argument may leave its width to run time
    out = alloc(b, rt, idx_ext + row_ext)
    wrap = None
    if op.attrs.get("negative") == "wrap":
        wrap = (dyn_dims(b, table, tt.shape[:1])[0], b.const(-1))
    with ExitStack() as nest:  # one loop per index dimension, then one per row dimension
        inner = b
        ivs: list[Value] = []
        for e in idx_ext:
            iv, inner = nest.enter_context(inner.loop("loop.for", c0, e, c1))
            ivs.append(iv)
        row = inner.val("loop.load", [idx, *ivs], it.elem)
        if wrap is not None:  # k in [-rows, 0) -> rows + k, with only the ALU ops streams have
            rows, m1 = wrap
            sign = inner.val("loop.maxi", [inner.val("loop.mini", [row, c0], it.elem), m1], it.elem)  # -1 or 0
            row = inner.val("loop.subi", [row, inner.val("loop.muli", [rows, sign], it.elem)], it.elem)
        cols: list[Value] = []
        for e in row_ext:
            iv, inner = nest.enter_context(inner.loop("loop.for", c0, e, c1))
            cols.append(iv)
        v = inner.val("loop.load", [table, row, *cols], tt.elem)
        inner.op("loop.store", [v, out, *ivs, *cols])
    return out


def lower_bag(b: Builder, op: Op) -> Value:
    table, indices, offsets = op.operands[:3]
    weights = op.operands[3] if len(op.operands) == 4 else None
    mode, empty = op.attrs["mode"], op.attrs["empty"]
    pad = op.attrs.get("padding_idx")
    tt, rt = table.type, op.result.type
    assert isinstance(tt, ShapedType) and isinstance(rt, ShapedType) and tt.shape is not None
    table_elem: ScalarType = tt.elem
    narrow = table_elem.bytes < 4  # f16 / bf16 tables accumulate in f32, rounded once at the end
    elem = ScalarType("f32") if narrow else table_elem
    c0, c1 = b.const(0), b.const(1)
    dim = dyn_dims(b, table, tt.shape, first=1)[0]  # a table that is an argument may leave its width to run time
    n_off = b.val("loop.dim", [offsets], INDEX, axis=0)
    nb = b.val("loop.subi", [n_off, c1], INDEX)
    result = alloc(b, rt, [nb, dim])
    out = alloc(b, ShapedType("memref", rt.shape, elem), [nb, dim]) if narrow else result
    init = b.const(float("-inf") if mode == "max" else 0.0, elem)
    with b.loop("loop.for", c0, nb, c1) as (bi, body):  # initialise every output row (core work)
        with body.loop("loop.for", c0, dim, c1) as (d, inner):
            inner.op("loop.store", [init, out, bi, d])
    counts = None
    if pad is not None:  # lookups of the padding row do not count: keep a count per bag
        counts = alloc(b, ShapedType("memref", (None,), INDEX), [nb])
        with b.loop("loop.for", c0, nb, c1) as (bi, body):
            body.op("loop.store", [c0, counts, bi])
        pad_row = b.const(pad, INDEX)
    with b.loop("loop.for", c0, nb, c1) as (bi, bag):
        off_t = offsets.type
        assert isinstance(off_t, ShapedType)
        start = bag.val("loop.load", [offsets, bi], off_t.elem)
        b1 = bag.val("loop.addi", [bi, c1], INDEX)
        end = bag.val("loop.load", [offsets, b1], off_t.elem)
        with bag.loop("loop.for", start, end, c1) as (j, look):
            it = indices.type
            assert isinstance(it, ShapedType)
            row = look.val("loop.load", [indices, j], it.elem)
            w = None
            if weights is not None:
                wt = weights.type
                assert isinstance(wt, ShapedType)
                w = look.val("loop.load", [weights, j], wt.elem)
                if wt.elem != elem:
                    w = look.val("loop.cast", [w], elem)
            if counts is not None:
                real = look.val("loop.cmpi", [row, pad_row], I1, pred="ne")
                n = look.val("loop.load", [counts, bi], INDEX)
                look.op("loop.store", [look.val("loop.select", [real, look.val("loop.addi", [n, c1], INDEX), n],
                                                INDEX), counts, bi])
            with look.loop("loop.for", c0, dim, c1) as (d, inner):
                v = inner.val("loop.load", [table, row, d], table_elem)
                if narrow:
                    v = inner.val("loop.cast", [v], elem)
                if w is not None:
                    v = inner.val("loop.mulf", [v, w], elem)
                if counts is not None:  # a padding lookup adds the reduction's identity
                    real = inner.val("loop.cmpi", [row, pad_row], I1, pred="ne")
                    v = inner.val("loop.select", [real, v, init], elem)
                acc = inner.val("loop.load", [out, bi, d], elem)
                new = inner.val("loop.maxf" if mode == "max" else "loop.addf", [acc, v], elem)
                inner.op("loop.store", [new, out, bi, d])
        if mode == "mean" or (mode == "max" and empty == "zero"):
            with bag.loop("loop.for", c0, dim, c1) as (d, inner):
                acc = inner.val("loop.load", [out, bi, d], elem)
                n = (inner.val("loop.load", [counts, bi], INDEX) if counts is not None
                     else inner.val("loop.subi", [end, start], INDEX))
                if mode == "mean":  # an empty bag divides 0 by 1, giving 0
                    n1 = inner.val("loop.maxi", [n, c1], INDEX)
                    res = inner.val("loop.divf", [acc, inner.val("loop.cast", [n1], elem)], elem)
                else:
                    is_empty = inner.val("loop.cmpi", [n, c0], I1, pred="eq")
                    res = inner.val("loop.select", [is_empty, inner.const(0.0, elem), acc], elem)
                inner.op("loop.store", [res, out, bi, d])
    if narrow:
        with b.loop("loop.for", c0, nb, c1) as (bi, body):  # round the f32 sums to the table's type
            with body.loop("loop.for", c0, dim, c1) as (d, inner):
                v = inner.val("loop.cast", [inner.val("loop.load", [out, bi, d], elem)], table_elem)
                inner.op("loop.store", [v, result, bi, d])
    return result


@contextmanager
def bags(b: Builder, offsets: Value, rt: Type, dim: Value) -> Iterator[tuple[Value, Value, Value, Value, Builder]]:
    """How every bag over a compressed table starts: a float32 output row per bag, set to 0 (core work), then the
    loop over the bags; yields the output, the bag's number, its lookups' start and end, and the loop's body."""
    off_t = offsets.type
    assert isinstance(off_t, ShapedType) and isinstance(rt, ShapedType)
    c0, c1 = b.const(0), b.const(1)
    nb = b.val("loop.subi", [b.val("loop.dim", [offsets], INDEX, axis=0), c1], INDEX)
    out = alloc(b, rt, [nb, dim])
    zero = b.const(0.0, ScalarType("f32"))
    with b.loop("loop.for", c0, nb, c1) as (bi, body):
        with body.loop("loop.for", c0, dim, c1) as (d, inner):
            inner.op("loop.store", [zero, out, bi, d])
    with b.loop("loop.for", c0, nb, c1) as (bi, bag):
        start = bag.val("loop.load", [offsets, bi], off_t.elem)
        end = bag.val("loop.load", [offsets, bag.val("loop.addi", [bi, c1], INDEX)], off_t.elem)
        yield out, bi, start, end, bag


def inverse_length(b: Builder, start: Value, end: Value, c1: Value, one: Value) -> Value:
    """1 / max(end - start, 1) in float32: what a mean multiplies each row by, as FBGEMM's means do (the constants
    come from outside the loops, where decouple gives them to the access unit)."""
    count = b.val("loop.maxi", [b.val("loop.subi", [end, start], INDEX), c1], INDEX)
    return b.val("loop.divf", [one, b.val("loop.cast", [count], one.type)], one.type)


def lower_qbag(b: Builder, op: Op) -> Value:
    """A bag over a quantized table, in FBGEMM's order of rounding (dialects/emb.py): each lookup reads its row's
    scale and bias (typed reads of the byte row), then every element does acc = fma(scale, q, acc + bias)."""
    table, indices, offsets = op.operands[:3]
    weights = op.operands[3] if len(op.operands) == 4 else None
    bits, mode = op.attrs["bits"], op.attrs["mode"]
    tt, rt = table.type, op.result.type
    assert isinstance(tt, ShapedType) and isinstance(rt, ShapedType) and tt.shape is not None
    assert isinstance(tt.shape[1], int)
    sb_type, sb_bytes = QBAG_BITS[bits]
    codes = tt.shape[1] - sb_bytes  # the scale starts after the codes, the bias half-way through the rest
    f32, byte = ScalarType("f32"), ScalarType("u8")
    c0, c1 = b.const(0), b.const(1)
    dim = b.const(qbag_dim(bits, tt.shape[1]))
    at_scale, at_bias = b.const(codes), b.const(codes + sb_bytes // 2)  # constants outside the loops, which
    # decouple gives the access unit; each made only where it is used, as dead ones would cost a register
    two, sixteen = (b.const(2), b.const(16)) if bits == 4 else (None, None)
    one = b.const(1.0, f32) if mode == "mean" else None
    trips = at_scale if bits == 4 else dim  # a 4-bit row's code bytes end where its scale starts
    it = indices.type
    assert isinstance(it, ShapedType)
    with bags(b, offsets, rt, dim) as (out, bi, start, end, bag):
        with bag.loop("loop.for", start, end, c1) as (j, look):
            row = look.val("loop.load", [indices, j], it.elem)
            sb = [look.val("loop.load", [table, row, at], ScalarType(sb_type)) for at in (at_scale, at_bias)]
            w = None
            if weights is not None:
                wt = weights.type
                assert isinstance(wt, ShapedType)
                w = look.val("loop.load", [weights, j], wt.elem)
            # one trip per code byte: 8 bits hold element k; 4 bits elements 2k (low nibble) and 2k + 1 (high)
            with look.loop("loop.for", c0, trips, c1) as (k, inner):
                # widened and weighted in the element loop, as lower_bag weights its rows: a value the core
                # computed per lookup could not reach the element loop's callback (decouple); vectorize splats
                # these once a chunk, and an f32 table's scale and bias need neither step without weights
                scale, bias = (inner.val("loop.cast", [v], f32) if sb_type != "f32" else v for v in sb)
                if w is not None:
                    scale, bias = (inner.val("loop.mulf", [w, v], f32) for v in (scale, bias))
                packed = inner.val("loop.load", [table, row, k], byte)
                if bits == 8:
                    codes_at = [(packed, k)]
                else:
                    assert two is not None and sixteen is not None
                    low = inner.val("loop.muli", [k, two], INDEX)
                    high = inner.val("loop.addi", [low, c1], INDEX)
                    codes_at = [(inner.val("loop.remi", [packed, sixteen], INDEX), low),
                                (inner.val("loop.divi", [packed, sixteen], INDEX), high)]
                for q, d in codes_at:
                    acc = inner.val("loop.load", [out, bi, d], f32)
                    summed = inner.val("loop.addf", [acc, bias], f32)
                    new = inner.val("loop.fmaf", [scale, inner.val("loop.cast", [q], f32), summed], f32)
                    inner.op("loop.store", [new, out, bi, d])
        if mode == "mean":  # FBGEMM multiplies by 1 / length, rounded to float32 (an empty bag stays 0)
            n = bag.val("loop.maxi", [bag.val("loop.subi", [end, start], INDEX), c1], INDEX)
            assert one is not None
            with bag.loop("loop.for", c0, dim, c1) as (d, inner):
                recip = inner.val("loop.divf", [one, inner.val("loop.cast", [n], f32)], f32)
                scaled = inner.val("loop.mulf", [inner.val("loop.load", [out, bi, d], f32), recip], f32)
                inner.op("loop.store", [scaled, out, bi, d])
    return out


def lower_ttbag(b: Builder, op: Op) -> Value:
    """A bag over a tensor train, as FBTT's kernels compute it: per lookup, the index's digits (divide and remainder,
    which decouple gives the access unit's ALU streams) pick one slice of each core, and the chain is contracted left
    to right with one fused multiply-add per term, the last stage adding straight into the bag's output row.
    Every stage is an outer product (axpy): its innermost loop runs over the next rank (or, last, over q), so
    consecutive multiply-adds update different elements instead of waiting on one another, and a stage's inputs
    are read in the loop around it.  A stage's product lives in a scratch buffer that the next stage sets back to
    0 as it finishes each element (the callback at the end of that element's loop), so no loop of its own clears
    it; one nest before the bags clears the buffers once.  A 3-core train takes 8 loops, which the default
    machine's 8 traversal units hold (2 cores 5; 4 cores 12, which decouple keeps on the core unless tuned for
    more units)."""
    n, mode = op.attrs["cores"], op.attrs["mode"]
    cores, indices, offsets = op.operands[:n], op.operands[n], op.operands[n + 1]
    weights = op.operands[n + 2] if len(op.operands) == n + 3 else None
    shapes = [c.type.shape for c in cores]  # type: ignore[union-attr]
    p, q, ranks = [s[0] for s in shapes], [s[2] for s in shapes], [s[1] for s in shapes] + [1]
    rt, it = op.result.type, indices.type
    assert isinstance(rt, ShapedType) and isinstance(it, ShapedType)
    f32 = ScalarType("f32")
    consts: dict[int, Value] = {}

    def const(v: int) -> Value:
        """Every constant before the nests, where decouple gives it to the access unit; each made once."""
        if v not in consts:
            consts[v] = b.const(v)
        return consts[v]

    c0, c1 = const(0), const(1)
    dim = const(math.prod(q))
    zero = b.const(0.0, f32)
    one = b.const(1.0, f32) if mode == "mean" else None
    # stage k < n - 1 makes the product of cores 0..k: (q_0 ... q_k) x R_k+1
    scratch = {k: alloc(b, ShapedType("memref", (math.prod(q[:k + 1]), ranks[k + 1]), f32), [])
               for k in range(1, n - 1)}
    divisors = [const(math.prod(p[k + 1:])) for k in range(n - 1)]
    moduli = [const(p[k]) for k in range(n)]
    extents = {v: const(v) for k in range(n) for v in (math.prod(q[:k + 1]), ranks[k], ranks[k + 1], q[k])}
    for k, buf in scratch.items():  # once: the next stage clears each element it has used
        with b.loop("loop.for", c0, extents[math.prod(q[:k + 1])], c1) as (m, body):
            with body.loop("loop.for", c0, extents[ranks[k + 1]], c1) as (r2, inner):
                inner.op("loop.store", [zero, buf, m, r2])
    with bags(b, offsets, rt, dim) as (out, bi, start, end, bag):
        with bag.loop("loop.for", start, end, c1) as (j, look):
            row = look.val("loop.load", [indices, j], it.elem)
            digits = []
            for k in range(n):  # i_k = (row / (p_k+1 ... p_n-1)) % p_k; the first is not reduced, the last not divided
                v = row if k == n - 1 else look.val("loop.divi", [row, divisors[k]], it.elem)
                digits.append(v if k == 0 else look.val("loop.remi", [v, moduli[k]], it.elem))
            w = look.val("loop.load", [weights, j], f32) if weights is not None else None
            for k in range(1, n):
                last = k == n - 1
                with ExitStack() as nest:
                    if k == 1 and not last:  # m = (a, j_1) in one loop: its rows of core 0 are read directly
                        m, at = nest.enter_context(look.loop("loop.for", c0, extents[math.prod(q[:2])], c1))
                        a, jk = at.val("loop.divi", [m, extents[q[1]]], INDEX), at.val("loop.remi", [m, extents[q[1]]],
                                                                                        INDEX)
                    else:
                        a, at = nest.enter_context(look.loop("loop.for", c0, extents[math.prod(q[:k])], c1))
                    r, at_r = nest.enter_context(at.loop("loop.for", c0, extents[ranks[k]], c1))
                    left = at_r.val("loop.load", [cores[0], digits[0], c0, a, r], f32) if k == 1 else None
                    if not (k == 1 and not last):
                        jk, inner = nest.enter_context(at_r.loop("loop.for", c0, extents[q[k]], c1))
                        m = inner.val("loop.addi", [inner.val("loop.muli", [a, extents[q[k]]], INDEX), jk], INDEX)
                    else:
                        inner = at_r
                    if last:
                        target = [out, bi, m]
                        r2 = c0
                    else:
                        r2, inner = nest.enter_context(inner.loop("loop.for", c0, extents[ranks[k + 1]], c1))
                        target = [scratch[k], m, r2]
                    if left is None:  # the previous stage's product, which the core wrote
                        left = inner.val("loop.load", [scratch[k - 1], a, r], f32)
                    if last and mode == "mean":  # times 1 / length in float32, as FBGEMM's means
                        left = inner.val("loop.mulf", [left, inverse_length(inner, start, end, c1, one)], f32)
                    elif last and w is not None:
                        left = inner.val("loop.mulf", [left, w], f32)
                    g = inner.val("loop.load", [cores[k], digits[k], r, jk, r2], f32)
                    acc = inner.val("loop.load", target, f32)
                    inner.op("loop.store", [inner.val("loop.fmaf", [left, g, acc], f32), *target])
                    if k > 1:  # the previous product's element (a, r) is used up: clear it for the next lookup
                        at_r.op("loop.store", [zero, scratch[k - 1], a, r])
    return out


def lower_robe(b: Builder, op: Op) -> Value:
    """A bag over ROBE's shared array: the addresses and signs are integer arithmetic on the index and the loop
    counters, which decouple gives the access unit's ALU streams (a per-lookup hash, then a multiply, add and
    two remainders per element); the core only multiplies each element by its sign (and weight) and adds it."""
    array, indices, offsets = op.operands[:3]
    weights = op.operands[3] if len(op.operands) == 4 else None
    block, mode, prime = op.attrs["block"], op.attrs["mode"], op.attrs["prime"]
    (hx, hc, hd), (sx, se, sd) = op.attrs["hash"], op.attrs["sign"]
    at, rt, it, off_t = array.type, op.result.type, indices.type, offsets.type
    assert isinstance(at, ShapedType) and isinstance(rt, ShapedType) and at.shape is not None
    assert isinstance(it, ShapedType) and isinstance(off_t, ShapedType) and rt.shape is not None
    dim_n = rt.shape[1]
    assert isinstance(dim_n, int)
    f32, i64 = ScalarType("f32"), ScalarType("i64")
    consts: dict[int, Value] = {}

    def const(v: int) -> Value:
        """Every constant before the nests, where decouple gives it to the access unit; each made once."""
        if v not in consts:
            consts[v] = b.const(v, i64)
        return consts[v]

    c0, c1 = b.const(0), b.const(1)
    dim, n_blocks, z = b.const(dim_n), b.const(dim_n // block), b.const(block)
    k = {name: const(v) for name, v in (("hx", hx), ("hc", hc), ("hd", hd), ("sx", sx), ("se", se), ("sd", sd),
                                         ("p", prime), ("size", at.shape[0]), ("two", 2))}
    with bags(b, offsets, rt, dim) as (out, bi, start, end, bag):
        with bag.loop("loop.for", start, end, c1) as (j, look):
            x = look.val("loop.load", [indices, j], it.elem)
            at_x = look.val("loop.addi", [look.val("loop.muli", [k["hx"], x], i64), k["hd"]], i64)  # B x + D
            sign_x = look.val("loop.addi", [look.val("loop.muli", [k["sx"], x], i64), k["sd"]], i64)  # B' x + D'
            w = look.val("loop.load", [weights, j], f32) if weights is not None else None
            with look.loop("loop.for", c0, n_blocks, c1) as (c, blk):
                at_c = blk.val("loop.addi", [at_x, blk.val("loop.muli", [k["hc"], c], i64)], i64)
                first = blk.val("loop.muli", [c, z], INDEX)
                with blk.loop("loop.for", c0, z, c1) as (o, inner):
                    where = inner.val("loop.addi", [at_c, o], i64)
                    where = inner.val("loop.remi", [inner.val("loop.remi", [where, k["p"]], i64), k["size"]], i64)
                    e = inner.val("loop.addi", [first, o], INDEX)
                    s = inner.val("loop.addi", [sign_x, inner.val("loop.muli", [k["se"], e], i64)], i64)
                    s = inner.val("loop.remi", [inner.val("loop.remi", [s, k["p"]], i64), k["two"]], i64)
                    s = inner.val("loop.subi", [inner.val("loop.muli", [s, k["two"]], i64), c1], i64)  # -1 or 1
                    v = inner.val("loop.mulf", [inner.val("loop.load", [array, where], f32),
                                                inner.val("loop.cast", [s], f32)], f32)
                    if w is not None:
                        v = inner.val("loop.mulf", [v, w], f32)
                    acc = inner.val("loop.load", [out, bi, e], f32)
                    inner.op("loop.store", [inner.val("loop.addf", [acc, v], f32), out, bi, e])
        if mode == "mean":  # as emb.bag: an empty bag divides 0 by 1
            with bag.loop("loop.for", c0, dim, c1) as (d, inner):
                count = inner.val("loop.maxi", [inner.val("loop.subi", [end, start], INDEX), c1], INDEX)
                acc = inner.val("loop.load", [out, bi, d], f32)
                inner.op("loop.store", [inner.val("loop.divf", [acc, inner.val("loop.cast", [count], f32)], f32),
                                        out, bi, d])
    return out


def lower_dhe(b: Builder, op: Op) -> Value:
    """A bag over deep hash embeddings: per lookup, k hashes of the index in the access unit's ALU streams (the
    slopes, biases and primes streamed beside them), made uniform in [-1, 1] by the core; then each layer's
    outputs, an output set to its bias in the callback of its loop and summed over the inputs in the loop inside
    with fused multiply-adds, ReLU at the sum's end; the last layer's outputs are the row's elements, which the
    end of their sums pools.  Each layer's weights are streamed once a lookup, as a kernel that does not batch
    lookups reads them.  L layers take 3 + 2 L loops (the default machine's 8 traversal units hold 2)."""
    layers, buckets, mode = op.attrs["layers"], op.attrs["buckets"], op.attrs["mode"]
    n = 3 + 2 * layers
    slope, bias, prime = op.operands[:3]
    params = [(op.operands[3 + 2 * i], op.operands[4 + 2 * i]) for i in range(layers)]
    indices, offsets = op.operands[n], op.operands[n + 1]
    weights = op.operands[n + 2] if len(op.operands) == n + 3 else None
    rt, it = op.result.type, indices.type
    assert isinstance(rt, ShapedType) and isinstance(it, ShapedType)
    f32, i64 = ScalarType("f32"), ScalarType("i64")
    widths = [slope.type.shape[0]] + [w.type.shape[0] for w, _ in params]  # type: ignore[union-attr]
    c0, c1 = b.const(0), b.const(1)
    sizes = [b.const(v) for v in widths]
    m = b.const(buckets, i64)
    last_bucket, two, one = b.const(float(buckets - 1), f32), b.const(2.0, f32), b.const(1.0, f32)
    zero = b.const(0.0, f32)
    # the codes, each hidden layer's outputs, then one cell for the last layer's sum
    acts = [alloc(b, ShapedType("memref", (v,), f32), []) for v in [*widths[:-1], 1]]
    with bags(b, offsets, rt, sizes[-1]) as (out, bi, start, end, bag):
        with bag.loop("loop.for", start, end, c1) as (j, look):
            x = look.val("loop.load", [indices, j], it.elem)
            w = look.val("loop.load", [weights, j], f32) if weights is not None else None
            with look.loop("loop.for", c0, sizes[0], c1) as (i, inner):  # hash i, as Hetu's learn_hash does
                lin = inner.val("loop.addi", [inner.val("loop.muli", [inner.val("loop.load", [slope, i], i64), x], i64),
                                              inner.val("loop.load", [bias, i], i64)], i64)
                h = inner.val("loop.remi", [inner.val("loop.remi", [lin, inner.val("loop.load", [prime, i], i64)],
                                                      i64), m], i64)
                u = inner.val("loop.divf", [inner.val("loop.cast", [h], f32), last_bucket], f32)
                code = inner.val("loop.subf", [inner.val("loop.mulf", [u, two], f32), one], f32)
                inner.op("loop.store", [code, acts[0], i])
            for layer, (wl, bl) in enumerate(params):
                last = layer == layers - 1
                with look.loop("loop.for", c0, sizes[layer + 1], c1) as (o, at_o):
                    cell = [acts[layer + 1], c0 if last else o]  # the last layer's sums, one at a time
                    at_o.op("loop.store", [at_o.val("loop.load", [bl, o], f32), *cell])  # a sum starts at the bias
                    with at_o.loop("loop.for", c0, sizes[layer], c1) as (i, inner):
                        term = [inner.val("loop.load", [wl, o, i], f32), inner.val("loop.load", [acts[layer], i], f32)]
                        inner.op("loop.store", [inner.val("loop.fmaf", [*term, inner.val("loop.load", cell, f32)], f32),
                                                *cell])
                    v = at_o.val("loop.load", cell, f32)
                    if not last:
                        at_o.op("loop.store", [at_o.val("loop.maxf", [v, zero], f32), *cell])
                        continue
                    scale = w
                    if mode == "mean":  # times 1 / length in float32, as FBGEMM's means (a nest fewer)
                        scale = inverse_length(at_o, start, end, c1, one)
                    if scale is not None:
                        v = at_o.val("loop.mulf", [v, scale], f32)
                    pooled = at_o.val("loop.addf", [at_o.val("loop.load", [out, bi, o], f32), v], f32)
                    at_o.op("loop.store", [pooled, out, bi, o])
    return out


def lower_scatter_rows(b: Builder, op: Op) -> Value:
    """out = data; then for each e, out[index[e], :] op= updates[e, :] (in order, so repeats add up)."""
    data, index, updates = op.operands
    dt, it, ut = data.type, index.type, updates.type
    assert isinstance(dt, ShapedType) and isinstance(it, ShapedType) and isinstance(ut, ShapedType)
    assert dt.shape is not None and ut.shape is not None
    c0, c1 = b.const(0), b.const(1)
    rows, width = dyn_dims(b, data, dt.shape)
    out = alloc(b, op.result.type, [rows, width])  # type: ignore[arg-type]
    with b.loop("loop.for", c0, rows, c1) as (r, body):  # copy the data (core work)
        with body.loop("loop.for", c0, width, c1) as (f, inner):
            inner.op("loop.store", [inner.val("loop.load", [data, r, f], dt.elem), out, r, f])
    n = dyn_dims(b, updates, ut.shape[:1])[0]
    combine = {"add": "loop.addf", "mul": "loop.mulf", "max": "loop.maxf", "min": "loop.minf"}[op.attrs["reduction"]]
    with b.loop("loop.for", c0, n, c1) as (e, body):
        row = body.val("loop.load", [index, e], it.elem)
        with body.loop("loop.for", c0, width, c1) as (f, inner):
            v = inner.val("loop.load", [updates, e, f], ut.elem)
            acc = inner.val("loop.load", [out, row, f], dt.elem)
            inner.op("loop.store", [inner.val(combine, [acc, v], dt.elem), out, row, f])
    return out


LOWERINGS: dict[str, Callable[[Builder, Op], Value]] = {
    "emb.gather": lower_gather, "emb.bag": lower_bag, "emb.qbag": lower_qbag, "emb.ttbag": lower_ttbag,
    "emb.robe": lower_robe, "emb.dhe": lower_dhe, "emb.scatter_rows": lower_scatter_rows}
