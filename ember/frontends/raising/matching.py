"""What the raisings (robe.py, dhe.py, tt.py) share: reading the imported block and evaluating its index
arithmetic.

A model that writes ROBE, DHE or a tensor train with tensor ops imports op by op as host arithmetic and gathers;
a raising finds such a lookup after the import and replaces it with one `emb` op.  It matches by meaning rather
than by the exporter's exact operators: the arithmetic between the indices and a hash is evaluated in numpy on
probe indices, with the constants and buffers the model file holds, and accepted only when its form also guarantees
what the probes show (`Eval.linear`).  Anything that does not match stays as it was imported.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np
from onnx import TensorProto

from ...ir.core import Block, Op, Value, new_op
from ...ir.printer import DenseAttr
from ...ir.rewrite import insert_before
from ...ir.types import ShapedType, tensor

PROBES = (0, 1, 2, 3, 977, 65_537, 1_000_003, 123_456_789)  # the indices the arithmetic is evaluated at
MAX_ELEMENTS = 1 << 24  # a larger value (128 MB of int64) is not evaluated: the model is left as imported
Consts = Callable[[str], np.ndarray | None]  # a param's data by name, None when it is not known at import
Const = Callable[[np.ndarray], Value]  # the frontend's: a constant, appended to the block
Host = Callable[..., Value]  # the frontend's: a host op, appended to the block


class NoMatch(Exception):
    pass


def need(cond: object) -> None:
    if not cond:
        raise NoMatch


def host_op(v: Value, *names: str) -> Op:
    """The host op, one of `names`, that defines `v`."""
    op = v.owner
    need(isinstance(op, Op) and op.name == "host.onnx" and op.attrs["op"] in names)
    assert isinstance(op, Op)
    return op


def modulo(v: Value) -> Op:
    """The Mod with Python's (floor) semantics, fmod = 0, that defines `v`."""
    op = host_op(v, "Mod")
    need(op.attrs.get("fmod", 0) == 0)
    return op


def param_of(v: Value) -> Op:
    op = v.owner
    need(isinstance(op, Op) and op.name == "param")
    assert isinstance(op, Op)
    return op


def users(block: Block, v: Value) -> list[Op]:
    return [op for op in block.ops if v in op.operands]


def static_shape(v: Value) -> tuple[int, ...]:
    t = v.type
    need(isinstance(t, ShapedType) and t.shape is not None and all(isinstance(d, int) for d in t.shape))
    assert isinstance(t, ShapedType) and t.shape is not None
    return tuple(int(d) for d in t.shape)  # type: ignore[arg-type]


def known(v: Value, consts: Consts) -> np.ndarray | None:
    """The data of a constant: a param the model file holds, or an ONNX `Constant` node's value; else None."""
    op = v.owner
    if not isinstance(op, Op):
        return None
    if op.name == "param":
        return consts(op.attrs["name"])
    if op.name == "host.onnx" and op.attrs["op"] == "Constant":
        if isinstance(op.attrs.get("value"), DenseAttr):
            return op.attrs["value"].array()  # type: ignore[no-any-return]
        for key, dtype in (("value_int", np.int64), ("value_ints", np.int64), ("value_float", np.float32),
                           ("value_floats", np.float32)):
            if key in op.attrs:
                return np.array(op.attrs[key], dtype)
    return None


def constant(v: Value, consts: Consts) -> np.ndarray:
    data = known(v, consts)
    need(data is not None)
    assert data is not None
    return data


def scalar(v: Value, consts: Consts) -> int:
    """The value of a one-element integer constant."""
    data = constant(v, consts)
    need(data.size == 1 and data.dtype.kind in "iu")
    return int(data.ravel()[0])


def upstream(v: Value) -> list[Op]:
    """The ops `v` is computed from, nearest first."""
    seen: dict[Op, None] = {}  # ordered, and a set for the membership test (a large model's graph is long)
    todo = deque([v])
    while todo:
        op = todo.popleft().owner
        if isinstance(op, Op) and op not in seen:
            seen[op] = None
            todo.extend(op.operands)
    return list(seen)


def index_input(block: Block, v: Value) -> Value:
    """The one model input `v` is computed from: 2-D int64 indices, one bag per row."""
    args = [a for op in upstream(v) for a in op.operands if a in block.args]
    need(args and all(a is args[0] for a in args))
    x = args[0]
    need(x.type.elem.name == "i64" and len(static_shape(x)) == 2)  # type: ignore[union-attr]
    return x


class Eval:
    """Integer tensor expressions over the indices x, evaluated in numpy in int64 (which wraps, as PyTorch does),
    with the comparisons and logic of booleans among them (how torch.onnx.export writes `//` as ONNX's truncating
    Div corrected to a floor)."""

    OPS = ("Add", "Sub", "Mul", "Neg", "Div", "Mod", "Unsqueeze", "Reshape", "Expand", "Cast",
           "Less", "Greater", "Equal", "And", "Or", "Xor", "Not", "Where")

    def __init__(self, x: Value, consts: Consts):
        self.x, self.consts = x, consts
        self._depends: dict[Value, bool] = {}

    def linear(self, v: Value) -> bool:
        """Whether `v` depends on x at most linearly, by its form: x reaches it only through sums, negations,
        products with one factor free of x, casts and reshapes (so a few probes find the coefficients exactly)."""
        op = v.owner
        if v is self.x or not isinstance(op, Op) or not self.depends(v):
            return True
        kind = op.attrs.get("op")
        bound = [a for a in op.operands if self.depends(a)]
        if kind in ("Mod", "Div", "Not", "Where", *_LOGIC) or (kind == "Mul" and len(bound) > 1) or \
                (kind == "Cast" and op.attrs.get("to") != _INT64):
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
        return self._eval(v, np.full(static_shape(self.x), probe, np.int64), {})

    def on(self, v: Value, x: np.ndarray) -> np.ndarray:
        """`v` at the indices `x` (of the indices' shape)."""
        return self._eval(v, x, {})

    def affine(self, v: Value) -> tuple[np.ndarray, np.ndarray]:
        """(slope, g), each indexed by v's last axis, with v = slope x + g at every position of x."""
        need(self.linear(v))
        zero = self.at(v, 0)
        lanes = zero.shape[-1]
        need(zero.shape == (*static_shape(self.x), lanes))
        g = zero.reshape(-1, lanes)[0]
        slope = self.at(v, 1).reshape(-1, lanes)[0] - g
        mixed = np.random.default_rng(0).integers(-(1 << 62), 1 << 62, size=static_shape(self.x), dtype=np.int64)
        mixed.ravel()[:len(PROBES)] = PROBES[:mixed.size]
        with np.errstate(over="ignore"):
            for p in PROBES:
                need((self.at(v, p) == slope * np.int64(p) + g).all())
            # a different index at every position: lane j of position i must read the index at i, not another
            need((self._eval(v, mixed, {}) == slope * mixed[..., None] + g).all())
        return slope, g

    def _eval(self, v: Value, x: np.ndarray, memo: dict[Value, np.ndarray]) -> np.ndarray:
        if v is self.x:
            return x
        if v in memo:
            return memo[v]
        op = v.owner
        elem = getattr(v.type, "elem", None)
        need(isinstance(op, Op) and elem is not None and elem.name in ("i64", "i1"))
        assert isinstance(op, Op)
        data = known(v, self.consts)
        if data is not None:
            need(data.dtype.kind in ("b" if elem.name == "i1" else "iu"))
            out = data.astype(bool if elem.name == "i1" else np.int64)
        else:
            need(op.name == "host.onnx" and op.attrs["op"] in self.OPS)
            args = [self._eval(a, x, memo) for a in op.operands]
            try:
                out = _apply(op, args)
            except (ValueError, IndexError, TypeError):  # shapes that do not fit: not a hash this can read
                raise NoMatch from None
            need(out.size <= MAX_ELEMENTS)
        memo[v] = out
        return out


_LOGIC = {"Less": np.less, "Greater": np.greater, "Equal": np.equal, "And": np.logical_and, "Or": np.logical_or,
          "Xor": np.logical_xor}
_ARITHMETIC = ("Add", "Sub", "Mul", "Neg", "Div", "Mod")
_BOOL, _INT64 = TensorProto.BOOL, TensorProto.INT64


def _apply(op: Op, args: list[np.ndarray]) -> np.ndarray:
    kind = op.attrs["op"]
    if kind in _ARITHMETIC:
        need(all(a.dtype == np.int64 for a in args))  # booleans take part only through Cast and Where
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
            need(not (args[1] == 0).any())
            if kind == "Div":  # ONNX's integer Div truncates toward zero (its spec, onnxruntime, onnx.reference)
                q = args[0] // args[1]
                return q + ((np.remainder(args[0], args[1]) != 0) & ((args[0] < 0) != (args[1] < 0)))
            return np.fmod(args[0], args[1]) if op.attrs.get("fmod", 0) else np.remainder(args[0], args[1])
    if kind in _LOGIC:
        need(args[0].dtype == args[1].dtype and (kind in ("Less", "Greater", "Equal") or args[0].dtype == bool))
        return _LOGIC[kind](args[0], args[1])  # type: ignore[no-any-return]
    if kind == "Not":
        need(args[0].dtype == bool)
        return ~args[0]
    if kind == "Where":
        need(args[0].dtype == bool and args[1].dtype == args[2].dtype)
        return np.where(args[0], args[1], args[2])
    if kind == "Cast":  # between int64 and bool, the only element types evaluated
        to = op.attrs.get("to")
        need(to in (_BOOL, _INT64))
        return args[0] != 0 if to == _BOOL else args[0].astype(np.int64)
    if kind == "Unsqueeze":
        out = args[0]
        for axis in sorted(int(a) % (out.ndim + len(args[1])) for a in args[1].ravel()):
            out = np.expand_dims(out, axis)
        return out
    if kind == "Reshape":
        return args[0].reshape([int(d) for d in args[1].ravel()])
    return np.broadcast_to(args[0], np.broadcast_shapes(args[0].shape, tuple(int(d) for d in args[1].ravel())))


def pooled_over_lookups(block: Block, rows: Value, results: list[Value], consts: Consts) -> tuple[Op, str]:
    """The ReduceSum or ReduceMean over axis 1 (the lookups of each bag) that alone reads `rows`, and its mode."""
    found = users(block, rows)
    need(len(found) == 1 and rows not in results)
    reduce = host_op(found[0].results[0], "ReduceSum", "ReduceMean")
    axes = (np.asarray(reduce.attrs.get("axes", [])) if len(reduce.operands) == 1  # ReduceMean's: an attribute
            else constant(reduce.operands[1], consts))
    need(reduce.attrs.get("keepdims", 1) == 0 and [int(a) % 3 for a in axes.ravel()] == [1])
    return reduce, "sum" if reduce.attrs["op"] == "ReduceSum" else "mean"


def pooled_rows(block: Block, reduce: Op, results: list[Value], consts: Consts) -> tuple[Value, str]:
    """The rows that `reduce` pools over the lookups, and the mode, when it is such a pooling (`pooled_over_lookups`
    from its side: what a raising that starts at the pooling reads)."""
    rows = reduce.operands[0]
    found, mode = pooled_over_lookups(block, rows, results, consts)
    need(found is reduce)
    return rows, mode


RaiseOne = Callable[[Block, Op, list[Value], Consts, Const, Host], list[Value]]


def raise_each(block: Block, picks: Callable[[Op], bool], raise_one: RaiseOne, results: list[Value], consts: Consts,
               const: Const, host: Host) -> list[Value]:
    """`raise_one` from each op of `block` that `picks` accepts (as the block was before any of them); an op that
    does not match, or whose shapes numpy cannot fit, is left as it is."""
    for op in [op for op in block.ops if picks(op)]:
        try:
            results = raise_one(block, op, results, consts, const, host)
        except (NoMatch, ValueError, IndexError):
            continue
    return results


def is_pooling(op: Op) -> bool:
    """A ReduceSum or ReduceMean host op: where a bag's rows are pooled."""
    return op.name == "host.onnx" and op.attrs["op"] in ("ReduceSum", "ReduceMean")


def prune(block: Block, results: list[Value]) -> None:
    """Drop ops whose results nothing uses (what a raising replaced, or the Unsqueeze/Expand of an index a row
    scatter consumed): every op a frontend emits is pure, and a dead host op would still be charged."""
    live = set(results)
    kept: list[Op] = []
    for op in reversed(block.ops):
        if any(r in live for r in op.results):
            kept.append(op)
            live.update(op.operands)
    block.ops = kept[::-1]


def replace_with_bags(block: Block, start: int, reduce: Op, x: Value, results: list[Value], name: str,
                      operands: list[Value], attrs: dict[str, object], const: Const, host: Host) -> list[Value]:
    """Put the bag op `name` over `operands`, then x flattened and one bag per row of x, in place of `reduce`;
    returns `results` with the reduction's value replaced.  What the lowering's helpers appended to the block
    since `start` moves before the reduction, with any param it reads that stands later (a constant is made
    once and reused); the arithmetic left unused is pruned later."""
    bags, length = static_shape(x)
    flat = host("Reshape", [x, const(np.array([-1], np.int64))], (bags * length,), "i64",
                hint=f"{name.split('.')[1]}_indices")
    made = [*operands, flat, const(np.arange(bags + 1, dtype=np.int64) * length)]
    moved = block.ops[start:]
    del block.ops[start:]
    here = block.ops.index(reduce)
    later = [op for op in block.ops[here:] if op.name == "param" and any(op.result in m.operands for m in moved)]
    later += [v.owner for v in made if isinstance(v.owner, Op) and v.owner.name == "param"
              and v.owner in block.ops[here:] and v.owner not in later]
    for op in later:
        block.ops.remove(op)
    for op in [*later, *moved]:
        insert_before(reduce, op)
    bag = insert_before(reduce, new_op(name, made, [tensor(static_shape(reduce.results[0]), "f32")], attrs))
    bag.result.name = reduce.result.name
    old = reduce.result
    for op in block.ops:
        op.operands = [bag.result if v is old else v for v in op.operands]
    return [bag.result if v is old else v for v in results]
