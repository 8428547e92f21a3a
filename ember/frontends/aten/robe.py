"""ROBE lookups written as plain PyTorch, raised to `emb.robe`.

A ROBE embedding (Desai et al., MLSys 2022) in the style of Hetu's kernels, written with tensor ops:

    where = (B * x[..., None] + C * c + D + o) % P % S        # c = e // Z, o = e % Z: buffers or arange
    sign  = (B' * x[..., None] + C' * e + D') % P % 2 * 2 - 1  # optional
    rows  = array[where] * sign                               # array: a 1-D float32 parameter of S elements
    out   = rows.sum(dim=1)  (or .mean(dim=1))                # x: 2-D indices, one bag per row

imports, op by op, as an `emb.gather` of the array and host arithmetic around it.  This module finds that
shape after the lowering and replaces it with one `emb.robe`, so that the hashing becomes access-unit work.

It matches by meaning rather than by the exporter's exact sequence of operators. The index arithmetic may
use any mix of Add, Sub, Mul, Neg, exact Div, Mod, Unsqueeze, Reshape, Expand and integer casts over the
indices and constant tensors.  It is evaluated in numpy on probe indices, and accepted only when it is
B x + g(e) before the two moduli, with g(e) = C (e // Z) + D + e % Z for a block Z that divides the row, and
(for the sign) B' x + C' e + D' before `% P % 2`, then times 2 minus 1.  Every coefficient must be in
[0, 2^31), as emb.robe requires.  Constants are read from the model file at import time, so coefficients kept
as buffers or frozen parameters become the op's attributes.  Anything else is left as it was imported.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...ir.core import Block, Op, Value, new_op
from ...ir.rewrite import insert_before
from ...ir.types import ShapedType, tensor

_LIMIT = 1 << 31  # emb.robe's coefficients and prime are below this
_PROBES = (0, 1, 2, 3, 977, 65_537, 1_000_003, 123_456_789)  # the indices the arithmetic is evaluated at
Consts = Callable[[str], np.ndarray | None]  # a param's data by name, None when it is not known at import


class _NoMatch(Exception):
    pass


def _need(cond: bool) -> None:
    if not cond:
        raise _NoMatch


def _host(v: Value, *names: str) -> Op:
    """The host op of `names` that defines `v`."""
    op = v.owner
    _need(isinstance(op, Op) and op.name == "host.onnx" and op.attrs["op"] in names)
    assert isinstance(op, Op)
    return op


def _users(block: Block, v: Value) -> list[Op]:
    return [op for op in block.ops if v in op.operands]


class _Eval:
    """Integer tensor expressions over the indices, evaluated in numpy (int64 wraps as in PyTorch)."""

    OPS = ("Add", "Sub", "Mul", "Neg", "Div", "Mod", "Unsqueeze", "Reshape", "Expand", "Cast")

    def __init__(self, x: Value, consts: Consts):
        self.x, self.consts = x, consts
        self._depends: dict[Value, bool] = {}

    def linear(self, v: Value) -> bool:
        """Whether `v` depends on x at most linearly, by its form: x reaches it only through sums, negations,
        products with one factor free of x, casts and reshapes (so a few probes find B and g exactly)."""
        op = v.owner
        if v is self.x or not isinstance(op, Op) or not self.depends(v):
            return True
        kind = op.attrs.get("op")
        bound = [a for a in op.operands if self.depends(a)]
        if kind in ("Mod", "Div") or (kind == "Mul" and len(bound) > 1):
            return False
        if kind not in ("Add", "Sub", "Mul") and bound != [op.operands[0]]:
            return False  # a shape operand computed from x
        return all(self.linear(a) for a in bound)

    def depends(self, v: Value) -> bool:
        if v not in self._depends:
            op = v.owner
            self._depends[v] = v is self.x or (isinstance(op, Op) and any(self.depends(a) for a in op.operands))
        return self._depends[v]

    def at(self, v: Value, probe: int) -> np.ndarray:
        return self._eval(v, np.full(_shape(self.x), probe, np.int64), {})

    def _eval(self, v: Value, x: np.ndarray, memo: dict[Value, np.ndarray]) -> np.ndarray:
        if v is self.x:
            return x
        if v in memo:
            return memo[v]
        op = v.owner
        _need(isinstance(op, Op))
        assert isinstance(op, Op)
        if op.name == "param":
            data = self.consts(op.attrs["name"])
            _need(data is not None and data.dtype.kind in "iu")
            assert data is not None
            out = data.astype(np.int64)
        else:
            _need(op.name == "host.onnx" and op.attrs["op"] in self.OPS and v.type.elem.name.startswith("i"))  # type: ignore[union-attr]
            args = [self._eval(a, x, memo) for a in op.operands]
            out = _apply(op.attrs["op"], args, v)
        memo[v] = out
        return out


def _apply(kind: str, args: list[np.ndarray], v: Value) -> np.ndarray:
    with np.errstate(over="ignore"):
        if kind == "Add":
            return args[0] + args[1]
        if kind == "Sub":
            return args[0] - args[1]
        if kind == "Mul":
            return args[0] * args[1]
        if kind == "Neg":
            return -args[0]
        if kind in ("Mod", "Div"):
            _need(not (args[1] == 0).any())
            if kind == "Div":  # only exact quotients: executors may round others either way
                _need(not np.remainder(args[0], args[1]).any())
                return args[0] // args[1]
            return np.fmod(args[0], args[1]) if v.owner.attrs.get("fmod", 0) else np.remainder(args[0], args[1])  # type: ignore[union-attr]
    if kind == "Cast":
        return args[0]  # between integer types only (the result's type was checked); values stay in int64
    if kind == "Unsqueeze":
        out = args[0]
        for axis in sorted(int(a) % (out.ndim + len(args[1])) for a in args[1].ravel()):
            out = np.expand_dims(out, axis)
        return out
    if kind == "Reshape":
        return args[0].reshape([int(d) for d in args[1].ravel()])
    return np.broadcast_to(args[0], np.broadcast_shapes(args[0].shape, tuple(int(d) for d in args[1].ravel())))


def _shape(v: Value) -> tuple[int, ...]:
    t = v.type
    _need(isinstance(t, ShapedType) and t.shape is not None and all(isinstance(d, int) for d in t.shape))
    assert isinstance(t, ShapedType) and t.shape is not None
    return tuple(int(d) for d in t.shape)  # type: ignore[arg-type]


def _scalar(v: Value, consts: Consts) -> int:
    """The value of a one-element integer constant."""
    op = v.owner
    _need(isinstance(op, Op) and op.name == "param")
    data = consts(op.attrs["name"])  # type: ignore[union-attr]
    _need(data is not None and data.size == 1 and data.dtype.kind in "iu")
    assert data is not None
    return int(data.ravel()[0])


def _affine(ev: _Eval, v: Value) -> tuple[int, np.ndarray]:
    """(B, g) with v = B x + g(e) at every position of x: g indexed by the last axis."""
    _need(ev.linear(v))
    zero = ev.at(v, 0)
    lanes = zero.shape[-1]
    _need(zero.shape == (*_shape(ev.x), lanes))
    g = zero.reshape(-1, lanes)[0]
    b = int(ev.at(v, 1).reshape(-1, lanes)[0, 0] - g[0])
    with np.errstate(over="ignore"):
        for p in _PROBES:
            got = ev.at(v, p) if p else zero
            _need(bool((got == np.int64(b) * np.int64(p) + g).all()))
    return b, g


def _blocks(g: np.ndarray) -> tuple[int, int, int]:
    """(Z, C, D) with g(e) = C (e // Z) + D + e % Z, the largest such Z that divides the row."""
    dim = len(g)
    e = np.arange(dim, dtype=np.int64)
    for z in sorted((z for z in range(1, dim + 1) if dim % z == 0), reverse=True):
        c = int(g[z] - g[0]) if z < dim else 0
        if (g == c * (e // z) + g[0] + e % z).all():
            return z, c, int(g[0])
    raise _NoMatch


def _coefficients(*values: int) -> list[int]:
    _need(all(0 <= v < _LIMIT for v in values))
    return list(values)


def _sign(ev: _Eval, rows: Value, block: Block, prime: int, consts: Consts) -> tuple[Op | None, list[int]]:
    """The Mul of the gathered rows by a ROBE sign, and its coefficients; (None, [0, 0, 1]) when the rows are
    not multiplied (the sign 2 ((0 x + 0 e + 1) mod P mod 2) - 1 is always 1)."""
    users = _users(block, rows)
    _need(len(users) == 1)
    mul = users[0]
    if not (mul.name == "host.onnx" and mul.attrs["op"] == "Mul"):
        return None, [0, 0, 1]
    other = mul.operands[1] if mul.operands[0] is rows else mul.operands[0]
    signed = _host(other, "Cast").operands[0]
    # the parity: Mod(Mod(E', P), 2), found under the sign's arithmetic
    parity = next((op for op in _upstream(signed) if op.name == "host.onnx" and op.attrs["op"] == "Mod"
                   and len(op.operands) == 2 and _const_is(op.operands[1], 2, consts)), None)
    _need(parity is not None)
    assert parity is not None
    inner = _host(parity.operands[0], "Mod")
    _need(_scalar(inner.operands[1], consts) == prime)
    b2, g2 = _affine(ev, inner.operands[0])
    lanes = len(g2)
    c2 = int(g2[1] - g2[0]) if lanes > 1 else 0
    _need(bool((g2 == c2 * np.arange(lanes, dtype=np.int64) + g2[0]).all()))
    for p in _PROBES:  # the sign is 2 t - 1 of that parity t
        _need(bool((ev.at(signed, p) == 2 * ev.at(parity.results[0], p) - 1).all()))
    return mul, _coefficients(b2, c2, int(g2[0]))


def _const_is(v: Value, n: int, consts: Consts) -> bool:
    try:
        return _scalar(v, consts) == n
    except _NoMatch:
        return False


def _upstream(v: Value) -> list[Op]:
    """The ops `v` is computed from, nearest first."""
    seen: list[Op] = []
    todo = [v]
    while todo:
        op = todo.pop(0).owner
        if isinstance(op, Op) and op not in seen:
            seen.append(op)
            todo.extend(op.operands)
    return seen


def raise_robe(block: Block, results: list[Value], consts: Consts, const: Callable[[np.ndarray], Value],
               host: Callable[..., Value]) -> list[Value]:
    """Replace each ROBE lookup in `block` by an `emb.robe`; returns `results` with the replaced values mapped.
    `const` and `host` are the lowering's own (they append the op they make to the block)."""
    for gather in [op for op in block.ops if op.name == "emb.gather"]:
        try:
            results = _raise_one(block, gather, results, consts, const, host)
        except _NoMatch:
            continue
    return results


def _raise_one(block: Block, gather: Op, results: list[Value], consts: Consts,
               const: Callable[[np.ndarray], Value], host: Callable[..., Value]) -> list[Value]:
    array, where = gather.operands
    table = array.owner
    _need(isinstance(table, Op) and table.name == "param" and isinstance(array.type, ShapedType)
          and array.type.rank == 1 and array.type.elem.name == "f32")
    size = _shape(array)[0]
    outer = _host(where, "Mod")
    _need(_scalar(outer.operands[1], consts) == size)
    inner = _host(outer.operands[0], "Mod")
    prime = _scalar(inner.operands[1], consts)
    _need(2 <= prime < _LIMIT)
    x = _leaf(block, inner.operands[0])
    _need(x.type.elem.name == "i64" and len(_shape(x)) == 2)  # type: ignore[union-attr]
    bags, length = _shape(x)
    ev = _Eval(x, consts)
    b, g = _affine(ev, inner.operands[0])
    dim = len(g)
    _need(_shape(gather.results[0]) == (bags, length, dim))
    z, c, d = _blocks(g)
    hash_ = _coefficients(b, c, d)
    mul, sign = _sign(ev, gather.results[0], block, prime, consts)
    pooled = (mul or gather).results[0]
    users = _users(block, pooled)
    _need(len(users) == 1 and pooled not in results)
    reduce = _host(users[0].results[0], "ReduceSum", "ReduceMean")
    axes = (np.asarray(reduce.attrs.get("axes", [])) if len(reduce.operands) == 1  # ReduceMean's axes: an attribute
            else consts(reduce.operands[1].owner.attrs["name"]))  # type: ignore[union-attr]
    _need(reduce.attrs.get("keepdims", 1) == 0 and axes is not None and [int(a) % 3 for a in axes.ravel()] == [1])
    mode = "sum" if reduce.attrs["op"] == "ReduceSum" else "mean"
    start = len(block.ops)
    flat = host("Reshape", [x, const(np.array([-1], np.int64))], (bags * length,), "i64", hint="robe_indices")
    offsets = const(np.arange(bags + 1, dtype=np.int64) * length)
    made = block.ops[start:]
    del block.ops[start:]
    for op in made:
        insert_before(reduce, op)
    robe = insert_before(reduce, new_op("emb.robe", [array, flat, offsets], [tensor((bags, dim), "f32")],
                                        {"block": z, "mode": mode, "prime": prime, "hash": hash_, "sign": sign}))
    robe.result.name = reduce.result.name
    old = reduce.result
    for op in block.ops:
        op.operands = [robe.result if v is old else v for v in op.operands]
    return [robe.result if v is old else v for v in results]


def _leaf(block: Block, v: Value) -> Value:
    """The one block argument (an input of the model) that `v` is computed from."""
    args = [a for op in _upstream(v) for a in op.operands if a in block.args]
    _need(bool(args) and all(a is args[0] for a in args))
    return args[0]
