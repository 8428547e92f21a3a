"""What the bag matchers know about a graph: scopes through subgraphs, static types and constants,
symbolic lengths, and small structural tests, all stated in terms of the model's own values.

A matcher that finds a shape other than the one it wants raises `Mismatch` with a sentence about the
model ("the bag counter should step by 1; it becomes index + 2"); the importer adds the node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto, TypeProto, numpy_helper

from .load import ELEM, constant_value, is_constant_node, np_elem, sparse_to_array

REDUCE = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max"}
TO_END = 2**31 - 1  # a Slice end at least this large means "to the end" (exporters write INT64_MAX)

Form = tuple[str | None, int]
"""A symbolic length: `len(base) + delta`, or the constant `delta` when base is None."""


class Mismatch(Exception):
    """A pattern did not fit; the message says which part, for the user-facing error."""


def need(cond: bool, why: str) -> None:
    if not cond:
        raise Mismatch(why)


def attr(node: NodeProto, name: str, default: Any = None) -> Any:
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def label(node: NodeProto) -> str:
    name = node.name or next((o for o in node.output if o), "?")
    return f"node '{name}' ({node.op_type})"


def show_form(f: Form) -> str:
    """A length form as the user would write it."""
    if f[0] is None:
        return str(f[1])
    base = f"len({f[0]})"
    return base if f[1] == 0 else f"{base} {'+' if f[1] > 0 else '-'} {abs(f[1])}"


@dataclass
class Bag:
    """A raised EmbeddingBag before it becomes IR; names are ONNX value names."""

    table: str
    indices: str
    offsets: str
    weights: str | None
    mode: str
    empty: str
    out: str
    bags: Form
    pad: int | None = None

    def inputs(self) -> list[str]:
        return [self.table, self.indices, self.offsets] + ([self.weights] if self.weights else [])


class Scope:
    """Producers and constants of one graph, chained to the enclosing graph's scope."""

    def __init__(self, graph: GraphProto, parent: Scope | None = None):
        self.graph = graph
        self.parent = parent
        self.producers = {o: n for n in graph.node for o in n.output if o}
        self.inits = {t.name: t for t in graph.initializer}
        self.sparse = {t.values.name: t for t in graph.sparse_initializer}
        self.inputs = {i.name for i in graph.input}
        self._consts: dict[str, np.ndarray] = {}

    def where(self, name: str) -> Scope | None:
        s: Scope | None = self
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
                s._consts[name] = sparse_to_array(s.sparse[name])
            elif name in s.producers and is_constant_node(s.producers[name]):
                s._consts[name] = constant_value(s.producers[name])
            else:
                return None
        return s._consts[name]

    def const(self, name: str) -> np.ndarray | None:
        """A value fixed at export time; an initializer that is also a graph input can be overridden."""
        s = self.where(name)
        if s is None or name in s.inputs:
            return None
        return self.weight(name)


def subgraph(node: NodeProto, name: str) -> GraphProto:
    for a in node.attribute:
        if a.name == name and a.type == AttributeProto.GRAPH:
            return a.g
    raise Mismatch(f"{node.op_type} has no '{name}' graph")


def references(node: NodeProto) -> list[str]:
    """Names a node reads, including those its subgraphs read from enclosing scopes."""
    names = [i for i in node.input if i]
    for a in node.attribute:
        for g in [a.g] if a.type == AttributeProto.GRAPH else list(a.graphs):
            for inner in g.node:
                names.extend(references(inner))
    return names


class Facts:
    """Static facts of the top-level graph (types, shapes, users) and the tests matchers share."""

    def __init__(self, model: ModelProto):
        self.graph = model.graph
        self.top = Scope(self.graph)
        self.types: dict[str, TypeProto] = {}
        for vi in [*self.graph.input, *self.graph.value_info, *self.graph.output]:
            self.types[vi.name] = vi.type
        self.users: dict[str, list[NodeProto]] = {}
        for n in self.graph.node:
            for i in dict.fromkeys(references(n)):
                self.users.setdefault(i, []).append(n)
        self.graph_outputs = {o.name for o in self.graph.output}

    # -- types ---------------------------------------------------------------------------------

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
            return np_elem(w)
        tp = self.types.get(name)
        if tp is None or tp.WhichOneof("value") != "tensor_type":
            return None
        return ELEM.get(tp.tensor_type.elem_type)

    def rank(self, name: str) -> int | None:
        sh = self.shape(name)
        return None if sh is None else len(sh)

    def is_top(self, name: str) -> bool:
        return self.top.where(name) is self.top

    # -- constants -----------------------------------------------------------------------------

    def one_int(self, scope: Scope, name: str) -> int | None:
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

    def ints(self, scope: Scope, name: str) -> list[int] | None:
        c = scope.const(name)
        if c is None or c.dtype.kind not in "iu" or c.ndim > 1:
            return None
        return [int(x) for x in c.reshape(-1)]

    def is_true(self, scope: Scope, name: str) -> bool:
        c = scope.const(name)
        return c is not None and c.size == 1 and bool(c.reshape(-1)[0])

    # -- symbolic integers: enough to prove "trip count = number of bags" without knowing shapes ----

    def len_form(self, scope: Scope, name: str) -> Form | None:
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
        if op == "Concat" and attr(node, "axis") == 0:
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
                if base is not None and start is not None and start >= 0 and end is not None and end >= TO_END:
                    return (base[0], base[1] - start)
        return (name, 0)

    def int_form(self, scope: Scope, name: str) -> Form | None:
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
        if op == "Shape" and attr(node, "start", 0) == 0 and (
                attr(node, "end") == 1 or (attr(node, "end") is None and self.rank(node.input[0]) == 1)):
            return self.len_form(scope, node.input[0])
        if op == "Gather" and attr(node, "axis", 0) == 0 and self.one_int(scope, node.input[1]) == 0:
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

    # -- small structural tests ----------------------------------------------------------------

    def producer(self, scope: Scope, name: str, ops: tuple[str, ...], what: str) -> NodeProto:
        node = scope.node(name)
        need(node is not None and node.op_type in ops,
             f"{what} should come from {' or '.join(ops)}, found "
             f"{node.op_type if node is not None else 'no node'} for '{name}'")
        assert node is not None
        need(node.domain in ("", "ai.onnx"), f"{what} comes from a non-standard domain")
        return node

    def axes(self, scope: Scope, node: NodeProto) -> list[int] | None:
        """Axes of Unsqueeze/Reduce*: an attribute before opset 13/18, an input after."""
        a = attr(node, "axes")
        if a is not None:
            return [int(x) for x in a]
        if len(node.input) > 1 and node.input[1]:
            return self.ints(scope, node.input[1])
        return None

    def unsqueezed(self, scope: Scope, name: str, axis: int, what: str) -> str:
        node = self.producer(scope, name, ("Unsqueeze",), what)
        need(self.axes(scope, node) == [axis], f"{what} should unsqueeze axis {axis}")
        return node.input[0]

    def slice_parts(self, scope: Scope, node: NodeProto) -> tuple[str, str, str] | None:
        """(data, starts, ends) of a Slice along axis 0 with step 1, or None for any other Slice."""
        ins = list(node.input) + [""] * (5 - len(node.input))
        if len(node.input) < 3 or node.attribute:
            return None
        if ins[3] and self.ints(scope, ins[3]) != [0]:
            return None
        if ins[4] and self.ints(scope, ins[4]) != [1]:
            return None
        return ins[0], ins[1], ins[2]

    def slice0(self, scope: Scope, name: str, what: str) -> tuple[str, str, str]:
        node = self.producer(scope, name, ("Slice",), what)
        parts = self.slice_parts(scope, node)
        need(parts is not None, f"{what} should slice axis 0 with step 1")
        assert parts is not None
        return parts

    def step(self, scope: Scope, name: str, base: str) -> int | None:
        """n when `name` is the value `base + n` (the constant possibly cast to base's type), else None."""
        if name == base:
            return 0
        node = scope.node(name)
        if node is None or node.op_type != "Add" or len(node.input) != 2:
            return None
        a, b = node.input
        if a == base:
            return self.one_int(scope, b)
        return self.one_int(scope, a) if b == base else None

    def plus(self, scope: Scope, name: str, base: str, n: int) -> bool:
        """Is `name` the value `base + n`?"""
        return self.step(scope, name, base) == n

    def reduce_mode(self, scope: Scope, node: NodeProto, keepdims: int, what: str) -> str:
        need(node.op_type in REDUCE, f"{what} should be ReduceSum, ReduceMean or ReduceMax, found {node.op_type}")
        need(self.axes(scope, node) == [0], f"{what} should reduce over axis 0 only")
        need(attr(node, "keepdims", 1) == keepdims, f"{what} should have keepdims={keepdims}")
        return REDUCE[node.op_type]

    def float_table(self, name: str, what: str) -> tuple[int | None, int]:
        """(rows, width) of a 2-D float table: a weight, or a table the model computes (renormalised by
        max_norm) whose width is known."""
        need(self.is_top(name), f"{what} '{name}' is computed inside the loop")
        w = self.top.weight(name)
        if w is not None:
            need(w.dtype.kind == "f" or w.dtype.name == "bfloat16", f"{what} '{name}' does not hold floats")
            need(w.ndim == 2, f"{what} '{name}' should be a 2-D table, has shape {list(w.shape)}")
            return int(w.shape[0]), int(w.shape[1])
        shape = self.shape(name)
        need(self.elem(name) in ("f16", "bf16", "f32", "f64"), f"{what} '{name}' does not hold floats")
        need(shape is not None and len(shape) == 2 and shape[1] is not None,
             f"{what} '{name}' should be a 2-D table of known width, has shape "
             f"{'unknown' if shape is None else ['?' if d is None else d for d in shape]}")
        assert shape is not None and shape[1] is not None
        return shape[0], shape[1]

    def index_vector(self, name: str, what: str) -> None:
        need(self.is_top(name), f"{what} '{name}' is computed inside the loop")
        need(self.rank(name) == 1, f"{what} '{name}' should be 1-D")
        need(self.elem(name) in ("i32", "i64"), f"{what} '{name}' should hold int32 or int64")

    def float_vector(self, name: str, what: str) -> None:
        need(self.is_top(name), f"{what} '{name}' is computed inside the loop")
        need(self.rank(name) == 1, f"{what} '{name}' should be 1-D")
        need(self.elem(name) in ("f16", "bf16", "f32", "f64"), f"{what} '{name}' should hold floats")

    def keeps_going(self, scope: Scope, name: str, cond_in: str) -> bool:
        """Is a loop body's condition output always true (or the condition it was given)?"""
        if name == cond_in or self.is_true(scope, name):
            return True
        node = scope.node(name)
        if node is None or not node.input:
            return False
        if node.op_type == "Identity" or (node.op_type == "Cast" and attr(node, "to") == TensorProto.BOOL):
            return self.keeps_going(scope, node.input[0], cond_in)
        return False

    def describe(self, scope: Scope, name: str) -> str:
        """A value in the model's terms, for messages: a constant, an input, or the op computing it."""
        c = scope.const(name)
        if c is not None:
            if c.size <= 4:
                shown = c.reshape(-1).tolist()
                return f"the constant {shown[0] if c.ndim == 0 or c.size == 1 else shown}"
            return f"a constant of shape {list(c.shape)}"
        s = scope.where(name)
        if s is None:
            return f"'{name}' (undefined)"
        if name in s.inputs:
            return f"{'input' if s is self.top else 'loop-body input'} '{name}'"
        node = s.producers[name]
        return f"'{name}' ({node.op_type})"
