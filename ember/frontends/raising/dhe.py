"""Deep hash embeddings written as plain PyTorch, raised to `emb.dhe`.

DHE (Kang et al., KDD 2021) in the style of Hetu's `learn_hash_kernel` with the uniform encoding, written with
tensor ops and nn.Linear layers:

    h = (x[..., None] * slope + bias) % prime % m    # x: 2-D indices (one bag per row); slope, bias, prime: k
    a = h.float() / (m - 1) * 2 - 1                   # uniform in [-1, 1]
    a = relu(linear_1(a)); ...; a = linear_L(a)       # 1 to 3 layers, ReLU between them
    out = a.sum(dim=1)  (or .mean(dim=1))

imports op by op as host arithmetic, MatMul, Add and Relu.  This module finds that shape after the lowering and
replaces it with one `emb.dhe`.  The hash is matched by meaning (matching.py): linear in the index by its form,
slope and bias read off its values at probe indices.  The encoding must give, bit for bit in float32, what
emb.dhe computes, 2 (h / (m - 1)) - 1, at every h or at 2^22 of them (`_check_encoding`); the layers
must be nn.Linear's: the input times the transpose of an out x in weight (as PyTorch writes it) or times an
in x out weight (as ONNX exporters store it), plus an optional bias.
"""

from __future__ import annotations

import numpy as np

from ...ir.core import Block, Op, Value
from .matching import (
    Const,
    Consts,
    Eval,
    Host,
    constant,
    host_op,
    index_input,
    is_pooling,
    known,
    modulo,
    need,
    param_of,
    pooled_rows,
    raise_each,
    replace_with_bags,
    scalar,
    static_shape,
    upstream,
)

_LAYERS = 3  # emb.dhe takes 1 to 3


def raise_dhe(block: Block, results: list[Value], consts: Consts, const: Const, host: Host) -> list[Value]:
    """Replace each DHE lookup in `block` by an `emb.dhe`; returns `results` with the replaced values mapped."""
    return raise_each(block, is_pooling, _raise_one, results, consts, const, host)


def _raise_one(block: Block, reduce: Op, results: list[Value], consts: Consts, const: Const,
               host: Host) -> list[Value]:
    rows, mode = pooled_rows(block, reduce, results, consts)
    layers, encoded = _layers(rows)
    cast = next((op for op in upstream(encoded) if op.name == "host.onnx" and op.attrs["op"] == "Cast"
                 and op.operands[0].type.elem.name == "i64"), None)  # type: ignore[union-attr]
    need(cast is not None)
    assert cast is not None
    h = cast.operands[0]
    outer = modulo(h)
    buckets = scalar(outer.operands[1], consts)
    need(2 <= buckets < 1 << 31)
    inner = modulo(outer.operands[0])
    x = index_input(block, inner.operands[0])
    slope, bias = Eval(x, consts).affine(inner.operands[0])
    k = len(slope)
    need(static_shape(h) == (*static_shape(x), k))
    prime = constant(inner.operands[1], consts)
    need(prime.dtype.kind in "iu" and prime.ndim <= 3)
    each = np.broadcast_to(prime.astype(np.int64), static_shape(h)).reshape(-1, k)  # one prime per hash, or none
    need((each == each[0]).all() and (each[0] > 0).all())
    prime = each[0]
    _check_encoding(encoded, h, buckets, consts)
    start = len(block.ops)
    operands = [const(np.array(slope)), const(np.array(bias)), const(np.array(prime))]
    for w, b, stored in layers:
        if stored == "in x out":
            w = host("Transpose", [w], static_shape(w)[::-1], "f32", attrs={"perm": [1, 0]}, hint="dhe_weight")
        operands += [w, b if b is not None else const(np.zeros(static_shape(w)[0], np.float32))]
    return replace_with_bags(block, start, reduce, x, results, "emb.dhe", operands,
                             {"buckets": buckets, "layers": len(layers), "mode": mode}, const, host)


def _layers(v: Value) -> tuple[list[tuple[Value, Value | None, str]], Value]:
    """nn.Linear layers, ReLU between them, from the last back: their (weight, bias, how the weight is stored) in
    order, and the encoding they start from."""
    layers: list[tuple[Value, Value | None, str]] = []
    while True:
        need(len(layers) < _LAYERS)
        op = host_op(v, "Add", "MatMul")
        bias = None
        if op.attrs["op"] == "Add":
            matmul = next((a for a in op.operands if _is_op(a, "MatMul")), None)
            need(matmul is not None)
            assert matmul is not None
            bias = op.operands[1] if op.operands[0] is matmul else op.operands[0]
            param_of(bias)
            op = host_op(matmul, "MatMul")
        weight, stored = op.operands[1], "in x out"  # as ONNX exporters store nn.Linear's weight: transposed
        if _is_op(weight, "Transpose"):  # as PyTorch's linear reads it: the out x in weight, transposed
            transpose = host_op(weight, "Transpose")
            need(transpose.attrs.get("perm") == [1, 0])
            weight, stored = transpose.operands[0], "out x in"
        param_of(weight)
        need(weight.type.elem.name == "f32" and len(static_shape(weight)) == 2)  # type: ignore[union-attr]
        out = static_shape(weight)[0 if stored == "out x in" else 1]
        need(bias is None or (static_shape(bias) == (out,) and bias.type.elem.name == "f32"))  # type: ignore[union-attr]
        layers.insert(0, (weight, bias, stored))
        below = op.operands[0]
        if not _is_op(below, "Relu"):
            return layers, below
        v = host_op(below, "Relu").operands[0]


def _is_op(v: Value, name: str) -> bool:
    return isinstance(v.owner, Op) and v.owner.name == "host.onnx" and v.owner.attrs["op"] == name


_EVERY = 1 << 22  # every h is tried when there are at most this many buckets; this many of them otherwise


def _check_encoding(encoded: Value, h: Value, buckets: int, consts: Consts) -> None:
    """The float32 arithmetic from h to the first layer's input equals 2 (h / (m - 1)) - 1, bit for bit, at every
    h in [0, m) or, for more buckets, at 2^22 of them (the ends, the middle and the rest at random).  The
    arithmetic is elementwise with constants (`_float` takes nothing else), so it is evaluated on a probe of
    (values, k), whatever h's own shape."""
    k = static_shape(h)[-1]
    if buckets <= _EVERY:
        values = np.arange(buckets, dtype=np.int64)
    else:
        values = np.random.default_rng(0).integers(0, buckets, size=_EVERY, dtype=np.int64)
        values[:5] = [0, 1, buckets // 2, buckets - 2, buckets - 1]
    step = max(1, _EVERY // k)
    for start in range(0, len(values), step):  # every value in every lane: per-lane constants are all tried
        probe = np.repeat(values[start:start + step, None], k, axis=1)
        got = _float(encoded, h, probe, consts, {})
        want = probe.astype(np.float32) / np.float32(buckets - 1) * np.float32(2) - np.float32(1)
        need(got.dtype == np.float32 and got.size == want.size
             and (got.reshape(want.shape).view(np.uint32) == want.view(np.uint32)).all())


def _float(v: Value, h: Value, probe: np.ndarray, consts: Consts, memo: dict[Value, np.ndarray]) -> np.ndarray:
    """v evaluated in float32 from h = probe: casts of h and elementwise float arithmetic with constants."""
    if v is h:
        return probe
    if v in memo:
        return memo[v]
    op = v.owner
    need(isinstance(op, Op))
    assert isinstance(op, Op)
    data = known(v, consts)
    if data is not None:
        need(data.dtype == np.float32)
        out = data
    else:
        kind = op.attrs.get("op")
        need(op.name == "host.onnx" and kind in ("Cast", "Add", "Sub", "Mul", "Div", "Neg")
             and v.type.elem.name == "f32")  # type: ignore[union-attr]
        args = [_float(a, h, probe, consts, memo) for a in op.operands]
        with np.errstate(all="ignore"):
            out = {"Cast": lambda: args[0].astype(np.float32), "Neg": lambda: -args[0],
                   "Add": lambda: args[0] + args[1], "Sub": lambda: args[0] - args[1],
                   "Mul": lambda: args[0] * args[1], "Div": lambda: args[0] / args[1]}[kind]()
        need(out.dtype == np.float32)
    memo[v] = out
    return out
