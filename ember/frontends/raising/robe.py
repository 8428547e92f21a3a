"""ROBE lookups written as plain PyTorch, raised to `emb.robe`.

A ROBE embedding (Desai et al., MLSys 2022) in the style of Hetu's kernels, written with tensor ops:

    where = (B * x[..., None] + C * c + D + o) % P % S        # c = e // Z, o = e % Z: buffers or arange
    sign  = (B' * x[..., None] + C' * e + D') % P % 2 * 2 - 1  # optional
    rows  = array[where] * sign                               # array: a 1-D float32 parameter of S elements
    out   = rows.sum(dim=1)  (or .mean(dim=1))                # x: 2-D indices, one bag per row

imports, op by op, as an `emb.gather` of the array and host arithmetic around it.  This module finds that
shape after the lowering and replaces it with one `emb.robe`, so that the hashing becomes access-unit work.

It matches by meaning (matching.py): the index arithmetic may use any mix of Add, Sub, Mul, Neg, exact Div,
Mod, Unsqueeze, Reshape, Expand and casts over the indices and constant tensors, and is accepted only when it
is B x + g(e) before the two moduli, with g(e) = C (e // Z) + D + e % Z for a block Z that divides the row, and
(for the sign) B' x + C' e + D' before `% P % 2`, then times 2 minus 1.  Every coefficient must be in
[0, 2^31), as emb.robe requires.  Constants are read from the model file at import time, so coefficients kept
as buffers or frozen parameters become the op's attributes.
"""

from __future__ import annotations

import numpy as np

from ...ir.core import Block, Op, Value
from ...ir.types import ShapedType
from .matching import (
    Const,
    Consts,
    Eval,
    Host,
    NoMatch,
    host_op,
    index_input,
    modulo,
    need,
    param_of,
    pooled_over_lookups,
    raise_each,
    replace_with_bags,
    scalar,
    static_shape,
    upstream,
    users,
)

_LIMIT = 1 << 31  # emb.robe's coefficients and prime are below this


def raise_robe(block: Block, results: list[Value], consts: Consts, const: Const, host: Host) -> list[Value]:
    """Replace each ROBE lookup in `block` by an `emb.robe`; returns `results` with the replaced values mapped."""
    return raise_each(block, lambda op: op.name == "emb.gather", _raise_one, results, consts, const, host)


def _raise_one(block: Block, gather: Op, results: list[Value], consts: Consts, const: Const,
               host: Host) -> list[Value]:
    array, where = gather.operands
    param_of(array)
    need(isinstance(array.type, ShapedType) and array.type.rank == 1 and array.type.elem.name == "f32")
    outer = modulo(where)
    need(scalar(outer.operands[1], consts) == static_shape(array)[0])
    inner = modulo(outer.operands[0])
    prime = scalar(inner.operands[1], consts)
    need(2 <= prime < _LIMIT)
    x = index_input(block, inner.operands[0])
    ev = Eval(x, consts)
    slope, g = ev.affine(inner.operands[0])
    need((slope == slope[0]).all())
    need(static_shape(gather.results[0]) == (*static_shape(x), len(g)))
    z, c, d = _blocks(g)
    hash_ = _coefficients(int(slope[0]), c, d)
    mul, sign = _sign(ev, gather.results[0], block, prime, consts)
    reduce, mode = pooled_over_lookups(block, (mul or gather).results[0], results, consts)
    return replace_with_bags(block, len(block.ops), reduce, x, results, "emb.robe", [array],
                             {"block": z, "mode": mode, "prime": prime, "hash": hash_, "sign": sign}, const, host)


def _blocks(g: np.ndarray) -> tuple[int, int, int]:
    """(Z, C, D) with g(e) = C (e // Z) + D + e % Z, the largest such Z that divides the row."""
    dim = len(g)
    e = np.arange(dim, dtype=np.int64)
    for z in sorted((z for z in range(1, dim + 1) if dim % z == 0), reverse=True):
        c = int(g[z] - g[0]) if z < dim else 0
        if (g == c * (e // z) + g[0] + e % z).all():
            return z, c, int(g[0])
    raise NoMatch


def _coefficients(*values: int) -> list[int]:
    need(all(0 <= v < _LIMIT for v in values))
    return list(values)


def _sign(ev: Eval, rows: Value, block: Block, prime: int, consts: Consts) -> tuple[Op | None, list[int]]:
    """The Mul of the gathered rows by a ROBE sign, and its coefficients; (None, [0, 0, 1]) when the rows are
    not multiplied (the sign 2 ((0 x + 0 e + 1) mod P mod 2) - 1 is always 1)."""
    found = users(block, rows)
    need(len(found) == 1)
    mul = found[0]
    if not (mul.name == "host.onnx" and mul.attrs["op"] == "Mul"):
        return None, [0, 0, 1]
    other = mul.operands[1] if mul.operands[0] is rows else mul.operands[0]
    signed = host_op(other, "Cast").operands[0]
    parity = next((op for op in upstream(signed) if op.name == "host.onnx" and op.attrs["op"] == "Mod"
                   and _is(op.operands[1], 2, consts)), None)  # Mod(Mod(E', P), 2) under the sign's arithmetic
    need(parity is not None and parity.attrs.get("fmod", 0) == 0)
    assert parity is not None
    inner = modulo(parity.operands[0])
    need(scalar(inner.operands[1], consts) == prime)
    slope, g = ev.affine(inner.operands[0])
    need((slope == slope[0]).all())
    c = int(g[1] - g[0]) if len(g) > 1 else 0
    need((g == c * np.arange(len(g), dtype=np.int64) + g[0]).all())
    # the sign is 2 t - 1 of that parity t: linear in t by its form (so nothing else of the index enters), and -1
    # and +1 at t = 0 and 1
    on_parity = Eval(parity.results[0], consts)
    need(on_parity.linear(signed))
    need((on_parity.at(signed, 0) == -1).all() and (on_parity.at(signed, 1) == 1).all())
    return mul, _coefficients(int(slope[0]), c, int(g[0]))


def _is(v: Value, n: int, consts: Consts) -> bool:
    try:
        return scalar(v, consts) == n
    except NoMatch:
        return False
