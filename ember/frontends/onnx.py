"""ONNX frontend: import an exported PyTorch model as an `emb`-level module.

PyTorch has no ONNX operator for EmbeddingBag, so both exporters spell it as a `Loop` (see
notes/ecosystem.md §1).  This importer recognises those loops by their structure (op types and how
values flow, never node names) and raises them back to `emb.bag`; a `Gather` on a float weight becomes
`emb.gather`.  Everything else without a subgraph stays a `host.onnx` op.  A loop that only *looks*
like a bag is an error rather than a guess: a silently wrong op is worse than a refusal.

Weights are not copied into the IR: each initializer or top-level `Constant` becomes a `param` naming
it, and `load_weights` reads the same names back from the ONNX file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto, TypeProto, numpy_helper

from ..dialects import builtin, emb  # noqa: F401  (registers the ops this frontend produces)
from ..ir.core import Block, Op, Value, new_op, unique_name, verify
from ..ir.diagnostics import EmberError
from ..ir.printer import DenseAttr
from ..ir.types import ShapedType, tensor

__all__ = ["import_onnx", "load_weights"]

RECOGNISED = ("Ember recognises nn.Embedding (Gather on an initializer), nn.EmbeddingBag "
              "sum/mean/max/weighted loops from the TorchScript (opset <= 17) and dynamo (opset >= 18) "
              "exporters (dynamo's also with padding_idx), row gathers and scatter-reduces of message passing "
              "(Gather/GatherND, "
              "ScatterElements/ScatterND with add, mul, max, min), and ONNX operators without subgraphs as host ops")

_ELEM = {
    TensorProto.FLOAT: "f32", TensorProto.DOUBLE: "f64", TensorProto.FLOAT16: "f16",
    TensorProto.BFLOAT16: "bf16", TensorProto.INT8: "i8", TensorProto.INT16: "i16",
    TensorProto.INT32: "i32", TensorProto.INT64: "i64", TensorProto.BOOL: "i1",
}
_REDUCE = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max"}
_TO_END = 2**31 - 1  # a Slice end at least this large means "to the end" (exporters write INT64_MAX)

Form = tuple[str | None, int]
"""A symbolic length: `len(base) + delta`, or the constant `delta` when base is None."""


class _Mismatch(Exception):
    """A pattern did not fit; the message says which part, for the user-facing error."""


def _need(cond: bool, why: str) -> None:
    if not cond:
        raise _Mismatch(why)


# ---------------------------------------------------------------------------------------------
# Loading


def _load(path: str) -> ModelProto:
    """Read and check a model, so later stages can trust its structure."""
    try:
        model = onnx.load(path)
    except OSError as e:
        raise EmberError(f"cannot read the file: {e.strerror or e}", path) from None
    except Exception as e:  # protobuf decode errors have no common public base class
        raise EmberError(f"not a valid ONNX model ({type(e).__name__}: {e})", path) from None
    try:
        try:
            onnx.checker.check_model(model)
        except ValueError:  # over 2 GB in memory: the checker can still read it from the file
            onnx.checker.check_model(path)
    except (onnx.checker.ValidationError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise EmberError(f"not a valid ONNX model: {first}", path) from None
    return model


def _sparse_to_array(sp: onnx.SparseTensorProto) -> np.ndarray:
    """Densify a sparse constant: the IR only has dense weights."""
    values = numpy_helper.to_array(sp.values)
    idx = numpy_helper.to_array(sp.indices).astype(np.int64)
    dense = np.zeros(tuple(sp.dims), dtype=values.dtype)
    if idx.ndim == 1:
        dense.reshape(-1)[idx] = values
    else:
        dense[tuple(idx.T)] = values
    return dense


def _constant_value(node: NodeProto) -> np.ndarray:
    """The value of a `Constant` node, whichever of its attribute spellings it uses."""
    a = node.attribute[0]
    if a.name == "value":
        return numpy_helper.to_array(a.t)
    if a.name == "sparse_value":
        return _sparse_to_array(a.sparse_tensor)
    if a.name == "value_float":
        return np.array(a.f, dtype=np.float32)
    if a.name == "value_floats":
        return np.array(list(a.floats), dtype=np.float32)
    if a.name == "value_int":
        return np.array(a.i, dtype=np.int64)
    if a.name == "value_ints":
        return np.array(list(a.ints), dtype=np.int64)
    if a.name == "value_string":
        return np.array(a.s.decode("utf-8", "replace"), dtype=object)
    if a.name == "value_strings":
        return np.array([s.decode("utf-8", "replace") for s in a.strings], dtype=object)
    raise EmberError(f"Constant node '{node.name}' has an unknown attribute '{a.name}'")


def _is_constant_node(node: NodeProto) -> bool:
    return node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.attribute) == 1


def load_weights(path: str) -> dict[str, np.ndarray]:
    """Every initializer and top-level Constant value by name: what the `param` ops of an import refer to."""
    graph = _load(path).graph
    out: dict[str, np.ndarray] = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for sp in graph.sparse_initializer:
        out[sp.values.name] = _sparse_to_array(sp)
    for node in graph.node:
        if _is_constant_node(node):
            out[node.output[0]] = _constant_value(node)
    return out


# ---------------------------------------------------------------------------------------------
# Scopes: name lookup through nested graphs (ONNX subgraphs may read enclosing values)


class _Scope:
    """Producers and constants of one graph, chained to the enclosing graph's scope."""

    def __init__(self, graph: GraphProto, parent: _Scope | None = None):
        self.graph = graph
        self.parent = parent
        self.producers = {o: n for n in graph.node for o in n.output if o}
        self.inits = {t.name: t for t in graph.initializer}
        self.sparse = {t.values.name: t for t in graph.sparse_initializer}
        self.inputs = {i.name for i in graph.input}
        self._consts: dict[str, np.ndarray] = {}

    def where(self, name: str) -> _Scope | None:
        s: _Scope | None = self
        while s is not None:
            if name in s.producers or name in s.inits or name in s.inputs or name in s.sparse:
                return s
            s = s.parent
        return None

    def node(self, name: str) -> NodeProto | None:
        s = self.where(name)
        return s.producers.get(name) if s else None

    def weight(self, name: str) -> np.ndarray | None:
        """An initializer (even one a caller may override) or a Constant output: what becomes a `param`."""
        s = self.where(name)
        if s is None:
            return None
        if name not in s._consts:
            if name in s.inits:
                s._consts[name] = numpy_helper.to_array(s.inits[name])
            elif name in s.sparse:
                s._consts[name] = _sparse_to_array(s.sparse[name])
            elif name in s.producers and _is_constant_node(s.producers[name]):
                s._consts[name] = _constant_value(s.producers[name])
            else:
                return None
        return s._consts[name]

    def const(self, name: str) -> np.ndarray | None:
        """A value fixed at export time; an initializer that is also a graph input can be overridden."""
        s = self.where(name)
        if s is None or name in s.inputs:
            return None
        return self.weight(name)


def _attr(node: NodeProto, name: str, default: Any = None) -> Any:
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _label(node: NodeProto) -> str:
    name = node.name or next((o for o in node.output if o), "?")
    return f"node '{name}' ({node.op_type})"


# ---------------------------------------------------------------------------------------------
# The raised ops, before they become IR


@dataclass
class _Bag:
    table: str
    indices: str
    offsets: str
    weights: str | None
    mode: str
    empty: str
    out: str
    bags: Form
    pad: int | None = None


@dataclass
class _Item:
    """One op to emit: a host node, a raised gather, or a raised bag; inputs are ONNX names."""

    kind: str
    inputs: list[str]
    outputs: list[str]
    node: NodeProto | None = None
    bag: _Bag | None = None


@dataclass
class _DynCtx:
    """What the dynamo body match learns on the way down, checked against the loop's bounds at the end."""

    start: str
    end: str
    index: set[str]
    rows: str | None = None
    lasts: list[tuple[_Scope, str]] = field(default_factory=list)
    sizes: list[tuple[_Scope, str]] = field(default_factory=list)


@dataclass
class _Pad:
    """What the dynamo padding_idx body match finds."""

    offsets: str
    mode: str
    rows: str
    row: int
    indices: str
    wrap: int | None


class _Importer:
    def __init__(self, path: str, model: ModelProto):
        self.path = path
        self.warnings: list[str] = []
        self.model = model
        self.graph = model.graph
        self.top = _Scope(self.graph)
        self.types: dict[str, TypeProto] = {}
        for vi in [*self.graph.input, *self.graph.value_info, *self.graph.output]:
            self.types[vi.name] = vi.type
        self.users: dict[str, list[NodeProto]] = {}
        for n in self.graph.node:
            for i in dict.fromkeys(_references(n)):
                self.users.setdefault(i, []).append(n)
        self.graph_outputs = {o.name for o in self.graph.output}
        self.values: dict[str, Value] = {}
        self.used_names: set[str] = set()

    def fail(self, node: NodeProto, why: str) -> EmberError:
        return EmberError(f"{_label(node)}: {why}; {RECOGNISED}", self.path)

    # -- static facts -------------------------------------------------------------------------

    def shape(self, name: str) -> tuple[int | None, ...] | None:
        w = self.top.weight(name) if self.top.where(name) is self.top else None
        if w is not None:
            return tuple(w.shape)
        tp = self.types.get(name)
        if tp is None or tp.WhichOneof("value") != "tensor_type" or not tp.tensor_type.HasField("shape"):
            return None
        return tuple(d.dim_value if d.HasField("dim_value") else None for d in tp.tensor_type.shape.dim)

    def elem(self, name: str) -> str | None:
        w = self.top.weight(name) if self.top.where(name) is self.top else None
        if w is not None:
            return _np_elem(w)
        tp = self.types.get(name)
        if tp is None or tp.WhichOneof("value") != "tensor_type":
            return None
        return _ELEM.get(tp.tensor_type.elem_type)

    def is_top(self, name: str) -> bool:
        return self.top.where(name) is self.top

    # -- symbolic integers: enough to prove "trip count = number of bags" without knowing shapes ----

    def len_form(self, scope: _Scope, name: str) -> Form | None:
        """Extent of dim 0 of `name`, as a constant when known, else relative to some 1-D tensor."""
        c = scope.const(name)
        if c is not None:
            return (None, int(c.shape[0])) if c.ndim >= 1 else None
        if scope.where(name) is self.top:
            sh = self.shape(name)
            if sh is not None and len(sh) >= 1 and sh[0] is not None:
                return (None, sh[0])
        node = scope.node(name)
        if node is None:
            return (name, 0)
        op = node.op_type
        if op == "Identity":
            return self.len_form(scope, node.input[0])
        if op == "Reshape" and self.ints(scope, node.input[1]) == [-1] and self.rank(node.input[0]) == 1:
            return self.len_form(scope, node.input[0])
        if op == "Concat" and _attr(node, "axis") == 0:
            total: Form = (None, 0)
            for i in node.input:
                f = self.len_form(scope, i)
                if f is None or (f[0] is not None and total[0] is not None):
                    return None
                total = (f[0] or total[0], f[1] + total[1])
            return total
        if op == "Slice":
            parts = self.slice_parts(scope, node)
            if parts is not None:
                start, end = self.one_int(scope, parts[1]), self.one_int(scope, parts[2])
                base = self.len_form(scope, parts[0])
                if base is not None and start is not None and start >= 0 and end is not None and (
                        end >= _TO_END):
                    return (base[0], base[1] - start)
        return (name, 0)

    def int_form(self, scope: _Scope, name: str) -> Form | None:
        """A one-element integer (scalar or [n]) as a length form."""
        v = self.one_int(scope, name)
        if v is not None:
            return (None, v)
        node = scope.node(name)
        if node is None:
            return None
        op = node.op_type
        if op in ("Identity", "Squeeze", "Unsqueeze", "Reshape", "Cast", "CastLike"):
            return self.int_form(scope, node.input[0])
        if op == "Size" and self.rank(node.input[0]) == 1:
            return self.len_form(scope, node.input[0])
        if op == "Shape" and _attr(node, "start", 0) == 0 and (
                _attr(node, "end") == 1 or (_attr(node, "end") is None and self.rank(node.input[0]) == 1)):
            return self.len_form(scope, node.input[0])
        if op == "Gather" and _attr(node, "axis", 0) == 0 and self.one_int(scope, node.input[1]) == 0:
            src = scope.node(node.input[0])
            if src is not None and src.op_type == "Shape" and not src.attribute:
                return self.len_form(scope, src.input[0])
        if op in ("Add", "Sub"):
            a, b = self.int_form(scope, node.input[0]), self.int_form(scope, node.input[1])
            if a is None or b is None:
                return None
            if op == "Add" and (a[0] is None or b[0] is None):
                return (a[0] or b[0], a[1] + b[1])
            if op == "Sub" and b[0] is None:
                return (a[0], a[1] - b[1])
        return None

    def rank(self, name: str) -> int | None:
        sh = self.shape(name)
        return None if sh is None else len(sh)

    def one_int(self, scope: _Scope, name: str) -> int | None:
        """The integer in a one-element constant, looking through casts of it."""
        c = scope.const(name)
        if c is None:
            node = scope.node(name)
            if node is not None and node.op_type in ("Cast", "CastLike"):
                return self.one_int(scope, node.input[0])
            return None
        if c.size != 1 or c.dtype.kind not in "iu":
            return None
        return int(c.reshape(-1)[0])

    def ints(self, scope: _Scope, name: str) -> list[int] | None:
        c = scope.const(name)
        if c is None or c.dtype.kind not in "iu" or c.ndim > 1:
            return None
        return [int(x) for x in c.reshape(-1)]

    def is_true(self, scope: _Scope, name: str) -> bool:
        c = scope.const(name)
        return c is not None and c.size == 1 and bool(c.reshape(-1)[0])

    # -- small structural helpers -------------------------------------------------------------

    def producer(self, scope: _Scope, name: str, ops: tuple[str, ...], what: str) -> NodeProto:
        node = scope.node(name)
        _need(node is not None and node.op_type in ops,
              f"{what} should come from {' or '.join(ops)}, found "
              f"{node.op_type if node is not None else 'no node'} for '{name}'")
        assert node is not None
        _need(node.domain in ("", "ai.onnx"), f"{what} comes from a non-standard domain")
        return node

    def axes(self, scope: _Scope, node: NodeProto) -> list[int] | None:
        """Axes of Unsqueeze/Reduce*: an attribute before opset 13/18, an input after."""
        a = _attr(node, "axes")
        if a is not None:
            return [int(x) for x in a]
        if len(node.input) > 1 and node.input[1]:
            return self.ints(scope, node.input[1])
        return None

    def unsqueezed(self, scope: _Scope, name: str, axis: int, what: str) -> str:
        node = self.producer(scope, name, ("Unsqueeze",), what)
        _need(self.axes(scope, node) == [axis], f"{what} should unsqueeze axis {axis}")
        return node.input[0]

    def slice_parts(self, scope: _Scope, node: NodeProto) -> tuple[str, str, str] | None:
        """(data, starts, ends) of a Slice along axis 0 with step 1, or None for any other Slice."""
        ins = list(node.input) + [""] * (5 - len(node.input))
        if len(node.input) < 3 or node.attribute:
            return None
        if ins[3] and self.ints(scope, ins[3]) != [0]:
            return None
        if ins[4] and self.ints(scope, ins[4]) != [1]:
            return None
        return ins[0], ins[1], ins[2]

    def slice0(self, scope: _Scope, name: str, what: str) -> tuple[str, str, str]:
        node = self.producer(scope, name, ("Slice",), what)
        parts = self.slice_parts(scope, node)
        _need(parts is not None, f"{what} should slice axis 0 with step 1")
        assert parts is not None
        return parts

    def plus(self, scope: _Scope, name: str, base: str, n: int) -> bool:
        """Is `name` the value `base + n` (the constant possibly CastLike'd to base's type)?"""
        if n == 0 and name == base:
            return True
        node = scope.node(name)
        if node is None or node.op_type != "Add" or len(node.input) != 2:
            return False
        a, b = node.input
        return (a == base and self.one_int(scope, b) == n) or (b == base and self.one_int(scope, a) == n)

    def reduce_mode(self, scope: _Scope, node: NodeProto, keepdims: int, what: str) -> str:
        _need(node.op_type in _REDUCE,
              f"{what} should be ReduceSum, ReduceMean or ReduceMax, found {node.op_type}")
        _need(self.axes(scope, node) == [0], f"{what} should reduce over axis 0 only")
        _need(_attr(node, "keepdims", 1) == keepdims, f"{what} should have keepdims={keepdims}")
        return _REDUCE[node.op_type]

    def float_table(self, name: str, what: str) -> np.ndarray:
        w = self.top.weight(name) if self.is_top(name) else None
        _need(w is not None, f"{what} '{name}' is not an initializer or a top-level Constant")
        assert w is not None
        _need(w.dtype.kind == "f" or w.dtype.name == "bfloat16", f"{what} '{name}' does not hold floats")
        _need(w.ndim == 2, f"{what} '{name}' should be a 2-D table, has shape {list(w.shape)}")
        return w

    def index_vector(self, name: str, what: str) -> None:
        _need(self.is_top(name), f"{what} '{name}' is computed inside the loop")
        _need(self.rank(name) == 1, f"{what} '{name}' should be 1-D")
        _need(self.elem(name) in ("i32", "i64"), f"{what} '{name}' should hold int32 or int64")

    def float_vector(self, name: str, what: str) -> None:
        _need(self.is_top(name), f"{what} '{name}' is computed inside the loop")
        _need(self.rank(name) == 1, f"{what} '{name}' should be 1-D")
        _need(self.elem(name) in ("f16", "bf16", "f32", "f64"), f"{what} '{name}' should hold floats")

    def subgraph(self, node: NodeProto, name: str) -> GraphProto:
        for a in node.attribute:
            if a.name == name and a.type == AttributeProto.GRAPH:
                return a.g
        raise _Mismatch(f"{node.op_type} has no '{name}' graph")

    # -- the TorchScript exporter's bag loop --------------------------------------------------

    def match_ts(self, loop: NodeProto) -> _Bag:
        """Loop(n_bags) whose scan output is Reduce(Gather(table, Slice(indices, A[i], B[i]))), B = A[1:]."""
        body = self.subgraph(loop, "body")
        _need(len(loop.input) == 2 and len(loop.output) == 1 and len(body.input) == 2
              and len(body.output) == 2,
              "expected a Loop with a trip count, a condition, no loop-carried values and one scan output")
        bs = _Scope(body, self.top)
        it, cond_in = body.input[0].name, body.input[1].name
        _need(not loop.input[1] or self.is_true(self.top, loop.input[1]),
              "the initial condition is not constant true")
        _need(self.keeps_going(bs, body.output[0].name, cond_in),
              "the body's condition output is not constant true")
        red = self.producer(bs, body.output[1].name, tuple(_REDUCE), "the scan output")
        mode = self.reduce_mode(bs, red, 0, "the bag reduction")
        rows, scale = red.input[0], None
        mul = bs.node(rows)
        if mul is not None and mul.op_type == "Mul":
            a, b = mul.input
            an = bs.node(a)
            rows, scale = (a, b) if an is not None and an.op_type == "Gather" else (b, a)
        gather = self.producer(bs, rows, ("Gather",), "the bag rows")
        _need(_attr(gather, "axis", 0) == 0, "the row Gather should use axis 0")
        table = gather.input[0]
        self.float_table(table, "the gathered table")
        indices, us, ue = self.slice0(bs, gather.input[1], "the bag's indices")
        self.index_vector(indices, "the indices")
        s = self.producer(bs, self.unsqueezed(bs, us, 0, "the bag start"), ("Gather",), "the bag start")
        e = self.producer(bs, self.unsqueezed(bs, ue, 0, "the bag end"), ("Gather",), "the bag end")
        _need(s.input[1] == it and e.input[1] == it and _attr(s, "axis", 0) == 0 and _attr(e, "axis", 0) == 0,
              "the bag bounds should be read at the iteration number")
        offsets, ends = s.input[0], e.input[0]
        self.index_vector(offsets, "the offsets")
        data, st, en = self.slice0(self.top, ends, "the bag ends")
        end = self.one_int(self.top, en)
        _need(data == offsets and self.one_int(self.top, st) == 1 and end is not None and end >= _TO_END,
              "the bag ends should be the offsets without their first entry (Slice(offsets, 1, <large>))")
        weights = None
        if scale is not None:
            ws = self.unsqueezed(bs, scale, 1, "the per-sample weights")
            weights, wst, wen = self.slice0(bs, ws, "the per-sample weights")
            _need(wst == us and wen == ue, "the weights should be sliced with the same bounds as the indices")
            self.float_vector(weights, "the per-sample weights")
            _need(mode == "sum", "per-sample weights need mode sum")
        bags = self.len_form(self.top, offsets)
        _need(bags is not None, "cannot tell the number of bags")
        assert bags is not None
        bags = (bags[0], bags[1] - 1)
        _need(loop.input[0] != "" and self.int_form(self.top, loop.input[0]) == bags,
              "the trip count is not provably len(offsets) - 1")
        return _Bag(table, indices, offsets, weights, mode, "identity", loop.output[0], bags)

    def keeps_going(self, scope: _Scope, name: str, cond_in: str) -> bool:
        if name == cond_in or self.is_true(scope, name):
            return True
        node = scope.node(name)
        if node is None or not node.input:
            return False
        if node.op_type == "Identity" or (node.op_type == "Cast" and _attr(node, "to") == TensorProto.BOOL):
            return self.keeps_going(scope, node.input[0], cond_in)
        return False

    # -- the dynamo exporter's bag loop -------------------------------------------------------

    def match_dynamo(self, loop: NodeProto) -> tuple[_Bag, NodeProto]:
        """Loop carrying (k, seq) that inserts If(start == end, zeros, Reduce(rows[start:end])) per bag."""
        body = self.subgraph(loop, "body")
        _need(len(loop.input) == 4 and len(loop.output) == 2 and len(body.input) == 4
              and len(body.output) == 3, "expected a Loop carrying a counter and a sequence")
        bs = _Scope(body, self.top)
        it, _, k_in, seq_in = (i.name for i in body.input)
        cond_out, k_next, seq_next = (o.name for o in body.output)
        m, cond0, k0, seq0 = loop.input
        _need(self.one_int(self.top, k0) == 0, "the loop counter should start at 0")
        self.producer(self.top, seq0, ("SequenceEmpty",), "the initial sequence")
        _need(self.plus(bs, k_next, k_in, 1), "the loop counter should step by 1")
        less = self.producer(bs, cond_out, ("Less",), "the loop condition")
        _need(less.input[0] == k_next, "the loop condition should compare the next counter")
        nbags = self.int_form(bs, less.input[1])
        _need(nbags is not None, "cannot tell the number of bags the loop runs for")
        assert nbags is not None
        ins = self.producer(bs, seq_next, ("SequenceInsert",), "the sequence update")
        _need(len(ins.input) == 2 and ins.input[0] == seq_in, "each bag should be appended to the sequence")
        pick = self.producer(bs, ins.input[1], ("If",), "the bag row")
        eq = self.producer(bs, pick.input[0], ("Equal",), "the empty-bag test")
        index = {it, k_in}
        zero = self.zero_row(self.subgraph(pick, "then_branch"), bs)
        els = self.subgraph(pick, "else_branch")
        _need(len(els.output) == 1, "the non-empty branch should produce one row")
        es = _Scope(els, bs)
        pad: _Pad | None = None
        if any((n := bs.node(x)) is not None and n.op_type == "Size" for x in eq.input):
            pad = self.dyn_padded(bs, eq, es, els.output[0].name, index)
            offsets, mode, rows = pad.offsets, pad.mode, pad.rows
            ctx = _DynCtx("", "", index)
        else:
            fits = [f for f in (self.bounds(bs, eq.input[0], eq.input[1], index),
                                self.bounds(bs, eq.input[1], eq.input[0], index)) if f is not None]
            _need(bool(fits), "the empty-bag test should compare offsets[k:k+1] with offsets[k+1:k+2]")
            start, end, offsets = fits[0]
            ctx = _DynCtx(start, end, index)
            mode = self.dyn_result(es, els.output[0].name, ctx)
            assert ctx.rows is not None
            rows = ctx.rows
        self.index_vector(offsets, "the offsets")
        table, indices, weights = self.rows_source(rows)
        tab = self.float_table(table, "the gathered table")
        _need(zero == (1, tab.shape[1]), f"the empty-bag row should have shape [1, {tab.shape[1]}]")
        if pad is not None:
            _need(pad.indices == indices, "the padding test reads other indices than the bag gathers")
            _need(0 <= pad.row < tab.shape[0], f"the padding index {pad.row} is not a row of the table")
            _need(pad.wrap is None or pad.wrap == tab.shape[0],
                  "negative indices are wrapped by a count other than the table's rows")
        _need(weights is None or mode == "sum", "per-sample weights need mode sum")
        # The loop must run once per bag: len(offsets) - 1 times.
        olen = self.len_form(self.top, offsets)
        _need(olen is not None and nbags == (olen[0], olen[1] - 1),
              "the loop bound is not provably len(offsets) - 1")
        if self.is_true(self.top, cond0):
            _need(nbags[0] is None and nbags[1] >= 1, "a loop entered unconditionally needs at least one bag")
        else:
            first = self.producer(self.top, cond0, ("Less",), "the initial loop condition")
            _need(self.one_int(self.top, first.input[0]) == 0
                  and self.int_form(self.top, first.input[1]) == nbags,
                  "the initial loop condition should be 0 < number of bags")
        if m:
            trip = self.one_int(self.top, m)
            _need(trip is not None and nbags[0] is None and trip >= nbags[1],
                  "the trip count may cut the loop short")
        for scope, last in ctx.lasts:
            _need(self.int_form(scope, last) == (nbags[0], nbags[1] - 1),
                  "the last-bag special case does not test for the last bag")
        ilen = self.len_form(self.top, indices)
        for scope, size in ctx.sizes:
            _need(ilen is not None and self.int_form(scope, size) == ilen,
                  "the last-bag special case does not end at len(indices)")
        # The sequence must only be concatenated, and the counter must not be used.
        _need(not self.users.get(loop.output[0]) and loop.output[0] not in self.graph_outputs,
              "the final loop counter is used")
        users = self.users.get(loop.output[1], [])
        _need(len(users) == 1 and users[0].op_type == "ConcatFromSequence"
              and loop.output[1] not in self.graph_outputs,
              "the bag sequence should be used once, by ConcatFromSequence")
        cat = users[0]
        _need(_attr(cat, "axis") == 0 and _attr(cat, "new_axis", 0) == 0,
              "the bag rows should be concatenated along axis 0")
        return _Bag(table, indices, offsets, weights, mode, "zero", cat.output[0], nbags,
                    None if pad is None else pad.row), cat

    def dyn_padded(self, bs: _Scope, eq: NodeProto, es: _Scope, row: str, index: set[str]) -> _Pad:
        """padding_idx: If(Size(kept) == 0, zeros, Reduce(Gather(rows, kept))), where an inner Loop
        collects the positions j in [start, end) whose index is not the padding row."""
        sizes = [x for x in eq.input if (n := bs.node(x)) is not None and n.op_type == "Size"]
        _need(len(sizes) == 1, "the empty-bag test should compare one Size with 0")
        other = eq.input[1] if eq.input[0] == sizes[0] else eq.input[0]
        _need(self.one_int(bs, other) == 0, "the empty-bag test should compare the number of kept lookups with 0")
        kept = self.producer(bs, sizes[0], ("Size",), "the number of kept lookups").input[0]
        red = self.producer(es, row, tuple(_REDUCE), "the bag reduction")
        mode = self.reduce_mode(es, red, 1, "the bag reduction")
        g = self.producer(es, red.input[0], ("Gather",), "the bag's rows")
        _need(_attr(g, "axis", 0) == 0 and g.input[1] == kept, "the bag's rows should be rows[kept]")
        _need(self.is_top(g.input[0]), "the bag's rows should be gathered before the loop")
        loop = self.producer(bs, kept, ("Loop",), "the kept lookups")
        body = self.subgraph(loop, "body")
        _need(len(loop.input) == 4 and len(loop.output) == 2 and len(body.input) == 4 and len(body.output) == 3
              and not loop.input[0], "the padding filter should be a Loop without a trip count carrying two values")
        p = list(loop.output).index(kept)
        q = 1 - p
        ls = _Scope(body, bs)
        kept_in, j_in = body.input[2 + p].name, body.input[2 + q].name
        kept_out, j_out, cond_out = body.output[1 + p].name, body.output[1 + q].name, body.output[0].name
        first = bs.const(loop.input[2 + p])
        _need(first is not None and first.shape == (0,) and first.dtype.kind in "iu",
              "the kept lookups should start as an empty integer list")
        start = loop.input[2 + q]
        less = self.producer(bs, loop.input[1], ("Less",), "the padding filter's first condition")
        _need(less.input[0] == start, "the padding filter should start at the bag start")
        end = less.input[1]
        s, e = (self.producer(bs, x, ("Gather",), "the bag bounds") for x in (start, end))
        _need(_attr(s, "axis", 0) == 0 and _attr(e, "axis", 0) == 0 and s.input[0] == e.input[0]
              and s.input[1] in index and self.plus(bs, e.input[1], s.input[1], 1),
              "the bag bounds should be offsets[k] and offsets[k + 1], k the loop counter")
        _need(self.plus(ls, j_out, j_in, 1), "the padding filter should step by 1")
        step = self.producer(ls, cond_out, ("Less",), "the padding filter's condition")
        _need(step.input[0] == j_out and step.input[1] == end, "the padding filter should run while j < end")
        keep = self.producer(ls, kept_out, ("If",), "the kept lookups")
        neg = self.producer(ls, keep.input[0], ("Not",), "the padding test")
        same = self.producer(ls, neg.input[0], ("Equal",), "the padding test")
        tb, eb = self.subgraph(keep, "then_branch"), self.subgraph(keep, "else_branch")
        _need(len(tb.output) == 1 and len(eb.output) == 1, "the padding test should produce one list")
        ts, fs = _Scope(tb, ls), _Scope(eb, ls)
        _need(self.producer(fs, eb.output[0].name, ("Identity",), "a padding lookup's list").input[0] == kept_in,
              "a padding lookup should leave the list as it is")
        cat = self.producer(ts, tb.output[0].name, ("Concat",), "a kept lookup's list")
        _need(_attr(cat, "axis") == 0 and len(cat.input) == 2 and cat.input[0] == kept_in,
              "a kept lookup should be appended to the list")
        pos = self.producer(ts, cat.input[1], ("Reshape", "Unsqueeze"), "a kept lookup")
        _need(pos.input[0] == j_in and ((pos.op_type == "Reshape" and self.ints(ts, pos.input[1]) == [-1])
                                        or (pos.op_type == "Unsqueeze" and self.axes(ts, pos) == [0])),
              "a kept lookup should append its position j")
        for idx, k in ((same.input[0], same.input[1]), (same.input[1], same.input[0])):
            row = self.one_int(ls, k)
            if row is not None:
                indices, wrap = self.looked_up(ls, idx, j_in)
                return _Pad(s.input[0], mode, g.input[0], row, indices, wrap)
        raise _Mismatch("the padding test should compare the index with a constant")

    def looked_up(self, ls: _Scope, name: str, j: str) -> tuple[str, int | None]:
        """indices[j], possibly wrapped as If(x < 0, x + n, x): returns (indices, n or None)."""
        wrap = None
        node = self.producer(ls, name, ("Gather", "If"), "the tested index")
        if node.op_type == "If":
            neg = self.producer(ls, node.input[0], ("Less",), "the negative-index test")
            x = neg.input[0]
            _need(self.one_int(ls, neg.input[1]) == 0, "the negative-index test should compare with 0")
            tb, eb = self.subgraph(node, "then_branch"), self.subgraph(node, "else_branch")
            _need(len(tb.output) == 1 and len(eb.output) == 1, "the negative-index test should produce one index")
            add = self.producer(_Scope(tb, ls), tb.output[0].name, ("Add",), "a negative index")
            ident = self.producer(_Scope(eb, ls), eb.output[0].name, ("Identity",), "a non-negative index")
            _need(ident.input[0] == x and x in add.input, "the negative-index test should wrap the index")
            wrap = self.one_int(ls, add.input[1] if add.input[0] == x else add.input[0])
            _need(wrap is not None, "a negative index should be wrapped by a constant")
            node = self.producer(ls, x, ("Gather",), "the tested index")
        _need(_attr(node, "axis", 0) == 0 and node.input[1] == j, "the tested index should be indices[j]")
        _need(self.is_top(node.input[0]), "the tested indices are computed inside the loop")
        return node.input[0], wrap

    def bounds(self, scope: _Scope, start: str, end: str, index: set[str]) -> tuple[str, str, str] | None:
        """(start, end, offsets) if start = offsets[k:k+1] and end = offsets[k+1:k+2], k the counter."""
        try:
            o1, k, k1 = self.slice0(scope, start, "the bag start")
            o2, k1b, k2 = self.slice0(scope, end, "the bag end")
        except _Mismatch:
            return None
        kn = scope.node(k)
        if kn is None or kn.input[0] not in index or o1 != o2:
            return None
        if not ((kn.op_type == "Reshape" and self.ints(scope, kn.input[1]) == [-1])
                or (kn.op_type == "Unsqueeze" and self.axes(scope, kn) == [0])):
            return None
        if not (self.plus(scope, k1, k, 1) and self.plus(scope, k1b, k, 1) and self.plus(scope, k2, k, 2)):
            return None
        return start, end, o1

    def zero_row(self, then: GraphProto, parent: _Scope) -> tuple[int, ...]:
        """The empty-bag branch must yield a constant all-zero float row; returns its shape."""
        _need(len(then.output) == 1, "the empty-bag branch should produce one row")
        z = _Scope(then, parent).const(then.output[0].name)
        _need(z is not None and z.dtype.kind == "f" and not np.any(z),
              "the empty-bag branch should give zeros")
        assert z is not None
        return tuple(z.shape)

    def dyn_result(self, scope: _Scope, name: str, ctx: _DynCtx) -> str:
        """Mode of the non-empty branch: Reduce(rows), or the mean's last-bag special case."""
        node = self.producer(scope, name, (*_REDUCE, "If"), "the bag reduction")
        if node.op_type != "If":
            mode = self.reduce_mode(scope, node, 1, "the bag reduction")
            self.dyn_rows(scope, node.input[0], ctx)
            return mode
        # mean: the last bag is sum / (len(indices) - start) when that is positive.
        self.last_test(scope, node.input[0], ctx)
        other = self.subgraph(node, "else_branch")
        last = self.subgraph(node, "then_branch")
        _need(len(other.output) == 1 and len(last.output) == 1, "the last-bag test should produce one row")
        os_, ls = _Scope(other, scope), _Scope(last, scope)
        mean = self.producer(os_, other.output[0].name, ("ReduceMean",), "the bag reduction")
        self.reduce_mode(os_, mean, 1, "the bag reduction")
        rows = mean.input[0]
        self.dyn_rows(os_, rows, ctx)
        div_if = self.producer(ls, last.output[0].name, ("If",), "the last bag's mean")
        gt = self.producer(ls, div_if.input[0], ("Greater",), "the last bag's count test")
        _need(self.one_int(ls, gt.input[1]) == 0, "the last bag's count should be tested against 0")
        sub = self.producer(ls, gt.input[0], ("Sub",), "the last bag's count")
        _need(sub.input[1] == ctx.start, "the last bag's count should be len(indices) - start")
        ctx.sizes.append((ls, sub.input[0]))
        dt, de = self.subgraph(div_if, "then_branch"), self.subgraph(div_if, "else_branch")
        _need(len(dt.output) == 1 and len(de.output) == 1, "the last bag's mean should produce one row")
        ds, ss = _Scope(dt, ls), _Scope(de, ls)
        div = self.producer(ds, dt.output[0].name, ("Div",), "the last bag's mean")
        cast = self.producer(ds, div.input[1], ("Cast",), "the last bag's count")
        _need(cast.input[0] == gt.input[0], "the last bag's mean should divide by its count")
        ident = self.producer(ss, de.output[0].name, ("Identity",), "the last bag's fallback")
        _need(ident.input[0] == div.input[0], "the last bag's fallback should be its sum")
        total = self.producer(ls, div.input[0], ("ReduceSum",), "the last bag's sum")
        self.reduce_mode(ls, total, 1, "the last bag's sum")
        _need(total.input[0] == rows, "the last bag's sum should reduce the same rows")
        return "mean"

    def last_test(self, scope: _Scope, name: str, ctx: _DynCtx) -> None:
        eq = self.producer(scope, name, ("Equal",), "the last-bag test")
        a, b = eq.input
        _need(a in ctx.index or b in ctx.index, "the last-bag test should compare the loop counter")
        ctx.lasts.append((scope, b if a in ctx.index else a))

    def dyn_rows(self, scope: _Scope, name: str, ctx: _DynCtx) -> None:
        """rows[start:end], or If(last bag, rows[start:len(indices)], rows[start:end]).

        The two are equal whenever offsets end at len(indices), which PyTorch requires of its inputs.
        """
        node = self.producer(scope, name, ("Slice", "If"), "the bag's rows")
        if node.op_type == "If":
            self.last_test(scope, node.input[0], ctx)
            t, e = self.subgraph(node, "then_branch"), self.subgraph(node, "else_branch")
            _need(len(t.output) == 1 and len(e.output) == 1, "the last-bag test should produce one value")
            ts = _Scope(t, scope)
            data, lo, hi = self.slice0(ts, t.output[0].name, "the last bag's rows")
            _need(lo == ctx.start, "the last bag's rows should start at the bag start")
            ctx.sizes.append((ts, hi))
            self.note_rows(data, ctx)
            self.dyn_rows(_Scope(e, scope), e.output[0].name, ctx)
            return
        data, lo, hi = self.slice0(scope, name, "the bag's rows")
        _need(lo == ctx.start and hi == ctx.end, "the bag's rows should be rows[start:end]")
        self.note_rows(data, ctx)

    def note_rows(self, data: str, ctx: _DynCtx) -> None:
        _need(self.is_top(data), "the bag's rows should be gathered before the loop")
        _need(ctx.rows in (None, data), "the bag's rows come from two different tensors")
        ctx.rows = data

    def rows_source(self, rows: str) -> tuple[str, str, str | None]:
        """rows = [Cast](Gather(table, indices) * weights): returns (table, indices, weights or None)."""
        node = self.producer(self.top, rows, ("Cast", "Mul", "Gather"), "the gathered rows")
        cast_to = None
        if node.op_type == "Cast":
            cast_to = _attr(node, "to")
            node = self.producer(self.top, node.input[0], ("Mul", "Gather"), "the gathered rows")
        scale = None
        if node.op_type == "Mul":
            a, b = node.input
            an = self.top.node(a)
            g, scale = (a, b) if an is not None and an.op_type == "Gather" else (b, a)
            node = self.producer(self.top, g, ("Gather",), "the gathered rows")
        _need(_attr(node, "axis", 0) == 0, "the row Gather should use axis 0")
        table, indices = node.input
        tab = self.float_table(table, "the gathered table")
        if cast_to is not None:
            _need(_np_elem(tab) == _ELEM.get(cast_to), "the rows are cast to another type")
        self.index_vector(indices, "the indices")
        weights = None if scale is None else self.scale_weights(scale, tab, indices)
        return table, indices, weights

    def scale_weights(self, name: str, tab: np.ndarray, indices: str) -> str | None:
        """The per-row factor: all ones (an unweighted bag, None) or unsqueezed 1-D weights."""
        c = self.top.const(name)
        if c is not None:
            _need(c.dtype.kind == "f" and bool(np.all(c == 1)),
                  "the rows are scaled by a constant other than 1")
            n = self.len_form(self.top, indices)
            rows_shape = (n[1] if n is not None and n[0] is None else -1, tab.shape[1])
            fits = c.ndim <= 2 and all(d in (1, want) for d, want in zip(
                reversed(c.shape), reversed(rows_shape[2 - c.ndim:]), strict=True))
            _need(fits, "the all-ones scale would broadcast the rows")
            return None
        node = self.producer(self.top, name, ("Unsqueeze", "Reshape"), "the per-sample weights")
        if node.op_type == "Unsqueeze":
            _need(self.axes(self.top, node) == [1], "the per-sample weights should be unsqueezed at axis 1")
        else:
            _need(self.ints(self.top, node.input[1]) == [-1, 1],
                  "the per-sample weights should be reshaped to [-1, 1]")
        w = node.input[0]
        expand = self.top.node(w)
        if expand is not None and expand.op_type == "Expand":
            ones = self.top.const(expand.input[0])
            _need(ones is not None and ones.size == 1 and ones.dtype.kind == "f" and bool(np.all(ones == 1)),
                  "the rows are scaled by an expanded value other than 1")
            return None
        self.float_vector(w, "the per-sample weights")
        return w

    # -- whole graph ---------------------------------------------------------------------------

    def check_domains(self, graph: GraphProto) -> None:
        for node in graph.node:
            if node.domain not in ("", "ai.onnx"):
                raise EmberError(f"{_label(node)}: unsupported operator domain '{node.domain}'; {RECOGNISED}",
                                 self.path)
            for a in node.attribute:
                if a.type == AttributeProto.GRAPH:
                    self.check_domains(a.g)
                for g in a.graphs:
                    self.check_domains(g)

    def plan(self) -> list[_Item]:
        """Raise what matches, turn the rest into host items, and keep only what feeds an output."""
        self.check_domains(self.graph)
        replaced: dict[int, _Item] = {}
        dropped: set[int] = set()
        position = {id(n): i for i, n in enumerate(self.graph.node)}
        for i, node in enumerate(self.graph.node):
            has_graph = any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute)
            if not has_graph:
                continue
            if node.op_type != "Loop":
                raise self.fail(node, "unsupported pattern: an operator with subgraphs that is not an "
                                "embedding-bag loop")
            try:
                if len(node.input) == 2:
                    bag = self.match_ts(node)
                    replaced[i] = _Item("bag", _bag_inputs(bag), [bag.out], bag=bag)
                else:
                    bag, cat = self.match_dynamo(node)
                    replaced[position[id(cat)]] = _Item("bag", _bag_inputs(bag), [bag.out], bag=bag)
                    dropped.add(i)
            except _Mismatch as e:
                raise self.fail(node, f"unsupported pattern: {e}") from None
        items: list[_Item] = []
        for i, node in enumerate(self.graph.node):
            if i in replaced:
                items.append(replaced[i])
            elif i not in dropped and not _is_constant_node(node):
                items.append(self.raise_node(node))
        needed = set(self.graph_outputs)
        live: list[_Item] = []
        for item in reversed(items):
            if any(o in needed for o in item.outputs):
                live.append(item)
                needed.update(i for i in item.inputs if i)
        live.reverse()
        return live

    def raise_node(self, node: NodeProto) -> _Item:
        """A node without subgraphs: a raised gather or row scatter when it is one, else a host op."""
        if node.op_type == "Gather" and (self.is_embedding(node) or self.is_row_gather(node)):
            return _Item("gather", [node.input[0], node.input[1]], list(node.output), node=node)
        if node.op_type == "GatherND" and _attr(node, "batch_dims", 0) == 0 and self.rank(node.input[0]) == 2:
            idx = self.row_index(node.input[1])
            if idx is not None and self.is_row_gather(node, idx):
                return _Item("gather", [node.input[0], idx], list(node.output), node=node)
        if node.op_type in ("ScatterElements", "ScatterND"):
            reduction = _attr(node, "reduction", b"none")
            reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
            shape = self.shape(node.input[1])
            single = shape is not None and None not in shape and int(np.prod(shape, dtype=np.int64)) <= 1
            if reduction == "none" and not single:  # one index cannot repeat
                self.warnings.append(f"{self.path}: warning: {_label(node)}: reduction 'none' with indices "
                                     f"that may repeat: ONNX leaves the result undefined and runtimes differ "
                                     f"(the dynamo exporter writes this for scatter_reduce(mean))")
            idx = self.scatter_rows_index(node)
            if idx is not None and reduction in ("add", "mul", "max", "min"):
                return _Item("scatter", [node.input[0], idx, node.input[2]], list(node.output), node=node)
        return _Item("host", list(node.input), list(node.output), node=node)

    def row_index(self, name: str) -> str | None:
        """`name` = Unsqueeze(idx, -1 or 1) of a 1-D integer index: the index, else None."""
        node = self.top.node(name)
        if node is None or node.op_type != "Unsqueeze" or self.axes(self.top, node) not in ([-1], [1]):
            return None
        idx = node.input[0]
        return idx if self.rank(idx) == 1 and self.elem(idx) in ("i32", "i64") else None

    def scatter_rows_index(self, node: NodeProto) -> str | None:
        """The 1-D row index of a scatter that moves whole rows of 2-D data, else None.

        ScatterElements(axis 0) qualifies when its indices are Expand(Unsqueeze(idx)) to the shape of
        the updates (so every column of update e goes to row idx[e]); ScatterND when its indices are
        Unsqueeze(idx) (one row coordinate per update row)."""
        data, indices, updates = node.input[0], node.input[1], node.input[2]
        if self.rank(data) != 2 or self.rank(updates) != 2 or self.elem(data) not in ("f16", "f32", "f64"):
            return None
        if node.op_type == "ScatterND":
            return self.row_index(indices)
        if _attr(node, "axis", 0) != 0:
            return None
        upd_shape = self.shape(updates)
        if upd_shape is not None and upd_shape[1] == 1 and self.row_index(indices) is not None:
            return self.row_index(indices)  # one column: Unsqueeze(idx) already names every row
        expand = self.top.node(indices)
        if expand is None or expand.op_type != "Expand":
            return None
        target = expand.input[1]
        shape_of = self.top.node(target)
        same = (shape_of is not None and shape_of.op_type == "Shape" and shape_of.input[0] == updates
                and not shape_of.attribute)
        if not same:
            want = self.shape(updates)
            same = want is not None and None not in want and self.ints(self.top, target) == list(want)
        return self.row_index(expand.input[0]) if same else None

    def is_row_gather(self, node: NodeProto, idx: str | None = None) -> bool:
        """Gather(axis 0) / GatherND of rows of a float tensor computed by the model (features, blocks);
        the trailing extents must be known, the number of rows need not be."""
        if node.op_type not in ("Gather", "GatherND") or (node.op_type == "Gather" and _attr(node, "axis", 0) != 0):
            return False
        shape = self.shape(node.input[0])
        index = idx or node.input[1]
        return (shape is not None and len(shape) >= 2 and None not in shape[1:]
                and self.elem(node.input[0]) in ("f16", "f32", "f64")
                and self.elem(index) in ("i32", "i64") and self.shape(index) is not None)

    def is_embedding(self, node: NodeProto) -> bool:
        """Gather(axis 0) of a float weight by integer indices of known rank: nn.Embedding."""
        if node.op_type != "Gather" or _attr(node, "axis", 0) != 0 or not self.is_top(node.input[0]):
            return False
        w = self.top.weight(node.input[0])
        return (w is not None and (w.dtype.kind == "f" or w.dtype.name == "bfloat16") and w.ndim >= 1
                and self.elem(node.input[1]) in ("i32", "i64") and self.shape(node.input[1]) is not None)

    # -- emission ------------------------------------------------------------------------------

    def fresh(self, onnx_name: str) -> str:
        return unique_name(onnx_name, self.used_names)

    def value_type(self, name: str) -> ShapedType:
        tp = self.types.get(name)
        if tp is None:
            return tensor(None, "f32")
        which = tp.WhichOneof("value")
        if which is None:
            return tensor(None, "f32")
        if which != "tensor_type":
            kind = which.replace("_type", "")
            raise EmberError(f"value '{name}' has a {kind} type; only tensors are supported", self.path)
        tt = tp.tensor_type
        elem = "f32"
        if tt.elem_type:
            if tt.elem_type not in _ELEM:
                raise EmberError(f"value '{name}' has unsupported element type "
                                 f"{TensorProto.DataType.Name(tt.elem_type)}", self.path)
            elem = _ELEM[tt.elem_type]
        if not tt.HasField("shape"):
            return tensor(None, elem)
        return tensor(tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim), elem)

    def use(self, name: str, block: Block) -> Value:
        """The IR value for an ONNX name, emitting its `param` the first time a weight is used."""
        if name in self.values:
            return self.values[name]
        w = self.top.weight(name) if self.is_top(name) else None
        if w is None:
            raise EmberError(f"value '{name}' is used but never defined", self.path)
        elem = _np_elem(w)
        if elem is None:
            raise EmberError(f"weight '{name}' has unsupported element type {w.dtype}", self.path)
        op = new_op("param", [], [tensor(tuple(int(d) for d in w.shape), elem)], {"name": name})
        op.result.name = self.fresh(name)
        block.add(op)
        self.values[name] = op.result
        return op.result

    def emit(self, item: _Item, block: Block) -> None:
        if item.kind == "bag":
            self.emit_bag(item, block)
            return
        node = item.node
        assert node is not None
        if item.kind == "scatter":
            data, idx, upd = (self.use(n, block) for n in item.inputs)
            reduction = _attr(node, "reduction", b"none")
            reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
            op = new_op("emb.scatter_rows", [data, idx, upd], [data.type], {"reduction": reduction})
        elif item.kind == "gather":
            table, idx = self.use(item.inputs[0], block), self.use(item.inputs[1], block)
            assert isinstance(table.type, ShapedType) and isinstance(idx.type, ShapedType)
            assert table.type.shape is not None and idx.type.shape is not None
            rt = ShapedType("tensor", idx.type.shape + table.type.shape[1:], table.type.elem)
            op = new_op("emb.gather", [table, idx], [rt], {"negative": "wrap"})  # ONNX counts [-n, 0) from the end
        else:
            operands, absent = [], []
            ins = list(node.input)
            while ins and not ins[-1]:
                ins.pop()
            for k, name in enumerate(ins):
                if name:
                    operands.append(self.use(name, block))
                else:
                    absent.append(k)
            attrs: dict[str, Any] = {"op": node.op_type}
            for a in node.attribute:
                if a.name in ("op", "absent", "absent_results"):
                    raise self.fail(node, f"attribute name '{a.name}' clashes with Ember's own")
                attrs[a.name] = self.attr_value(node, a)
            outs = list(node.output)
            while outs and not outs[-1]:
                outs.pop()
            gone = [k for k, o in enumerate(outs) if not o]
            if absent:
                attrs["absent"] = absent
            if gone:
                attrs["absent_results"] = gone
            op = new_op("host.onnx", operands, [self.value_type(o) for o in outs if o], attrs)
            item.outputs = [o for o in outs if o]
        for name, r in zip(item.outputs, op.results, strict=True):
            r.name = self.fresh(name)
            self.values[name] = r
        block.add(op)

    def emit_bag(self, item: _Item, block: Block) -> None:
        bag = item.bag
        assert bag is not None
        operands = [self.use(bag.table, block), self.use(bag.indices, block), self.use(bag.offsets, block)]
        if bag.weights is not None:
            operands.append(self.use(bag.weights, block))
        tt = operands[0].type
        assert isinstance(tt, ShapedType) and tt.shape is not None
        n = bag.bags[1] if bag.bags[0] is None else None
        attrs: dict[str, Any] = {"mode": bag.mode, "empty": bag.empty}
        if bag.pad is not None:
            attrs["padding_idx"] = bag.pad
        op = new_op("emb.bag", operands, [ShapedType("tensor", (n, tt.shape[1]), tt.elem)], attrs)
        op.result.name = self.fresh(bag.out)
        self.values[bag.out] = op.result
        block.add(op)

    def attr_value(self, node: NodeProto, a: AttributeProto) -> Any:
        """ONNX attribute → IR attribute; only the kinds the printer can spell exactly."""
        if a.ref_attr_name:
            raise self.fail(node, f"attribute '{a.name}' refers to a function attribute")
        t = a.type
        if t == AttributeProto.FLOAT:
            return float(a.f)
        if t == AttributeProto.INT:
            return int(a.i)
        if t == AttributeProto.STRING:
            return a.s.decode("utf-8")
        if t == AttributeProto.TENSOR:
            return self.dense(node, a.t)
        if t == AttributeProto.FLOATS:
            return [float(x) for x in a.floats]
        if t == AttributeProto.INTS:
            return [int(x) for x in a.ints]
        if t == AttributeProto.STRINGS:
            return [s.decode("utf-8") for s in a.strings]
        if t == AttributeProto.TENSORS:
            return [self.dense(node, x) for x in a.tensors]
        kind = AttributeProto.AttributeType.Name(t)
        raise self.fail(node, f"attribute '{a.name}' of type {kind} is not supported")

    def dense(self, node: NodeProto, t: TensorProto) -> DenseAttr:
        if t.data_type not in _ELEM:
            kind = TensorProto.DataType.Name(t.data_type)
            raise self.fail(node, f"tensor attribute of type {kind} is not supported")
        arr = numpy_helper.to_array(t)
        elem = _ELEM[t.data_type]
        ty = tensor(tuple(int(d) for d in arr.shape), elem)
        return DenseAttr.from_array(np.asarray(arr, dtype=np.float64) if elem == "bf16" else arr, ty)

    def build(self, weights_ref: str, opset: int) -> Op:
        items = self.plan()
        init_names = set(self.top.inits) | set(self.top.sparse)
        inputs = [i.name for i in self.graph.input if i.name not in init_names]
        block = Block()
        for name in inputs:
            v = Value(self.value_type(name), self.fresh(name), block)
            block.args.append(v)
            self.values[name] = v
        for item in items:
            self.emit(item, block)
        outputs = [o.name for o in self.graph.output]
        results = [self.use(o, block) for o in outputs]
        block.add(new_op("return", results))
        func = Op("func", attrs={"sym_name": "main", "results": [r.type for r in results]}, regions=[block])
        attrs = {"weights": weights_ref, "opset": opset, "inputs": inputs, "outputs": outputs}
        module = Op("module", attrs=attrs, regions=[Block()])
        module.body.add(func)
        return module


def _references(node: NodeProto) -> list[str]:
    """Names a node reads, including those its subgraphs read from enclosing scopes."""
    names = [i for i in node.input if i]
    for a in node.attribute:
        for g in [a.g] if a.type == AttributeProto.GRAPH else list(a.graphs):
            for inner in g.node:
                names.extend(_references(inner))
    return names


def _bag_inputs(bag: _Bag) -> list[str]:
    return [bag.table, bag.indices, bag.offsets] + ([bag.weights] if bag.weights else [])


def _np_elem(a: np.ndarray) -> str | None:
    if a.dtype.name == "bfloat16":
        return "bf16"
    try:
        return _ELEM.get(onnx.helper.np_dtype_to_tensor_dtype(a.dtype))
    except (KeyError, TypeError, ValueError):
        return None


def import_onnx(path: str, weights_ref: str) -> Op:
    """Import an ONNX model as a verified `module` whose weights are read back from `weights_ref`."""
    model = _load(path)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        raise EmberError("the model does not import the default ONNX operator set", path)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # inference is only a source of types; without it values are unranked
        inferred = model
    importer = _Importer(path, inferred)
    module = importer.build(weights_ref, int(opset))
    module.warnings = importer.warnings  # type: ignore[attr-defined]  (printed by ember-import)
    try:
        verify(module)
    except EmberError as e:
        raise EmberError(f"imported IR does not verify: {e.message}", path) from None
    return module
