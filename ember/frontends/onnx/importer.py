"""The ONNX importer: plan which nodes are raised to `emb` ops, then emit the module.

Each Loop must be one of the exporters' EmbeddingBag loops (`ts_bag.py`, `dynamo_bag.py`); other
nodes are raised one at a time (`rows.py`) or kept as `host.onnx` ops.  Only what feeds a graph
output is emitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto, numpy_helper

from ...dialects import builtin, emb  # noqa: F401  (registers the ops this frontend produces)
from ...ir.core import Block, Op, Value, new_op, unique_name, verify
from ...ir.diagnostics import EmberError
from ...ir.printer import DenseAttr
from ...ir.types import ShapedType, tensor
from ..raising import raise_all
from ..raising.matching import prune
from .dynamo_bag import match_dynamo
from .graph import Bag, Facts, Mismatch, label
from .load import ELEM, is_constant_node, load_model, np_elem
from .rows import classify, reduction_of
from .ts_bag import is_ts_loop, match_ts

RECOGNISED = "docs/operators.md lists the patterns and operators Ember recognises"


@dataclass
class _Item:
    """One op to emit: a host node, a raised gather or scatter, or a raised bag; inputs are ONNX names."""

    kind: str
    inputs: list[str]
    outputs: list[str]
    node: NodeProto | None = None
    bag: Bag | None = None


class _Importer(Facts):
    def __init__(self, path: str, model: ModelProto):
        super().__init__(model)
        self.path = path
        self.warnings: list[str] = []
        self.values: dict[str, Value] = {}
        self.used_names: set[str] = set()

    def fail(self, node: NodeProto, why: str) -> EmberError:
        return EmberError(f"{label(node)}: {why}; {RECOGNISED}", self.path)

    # -- planning ------------------------------------------------------------------------------

    def check_domains(self, graph: GraphProto) -> None:
        for node in graph.node:
            if node.domain not in ("", "ai.onnx"):
                raise self.fail(node, f"unsupported operator domain '{node.domain}'")
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
            if not any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute):
                continue
            if node.op_type != "Loop":
                raise self.fail(node, "unsupported pattern: an operator with subgraphs that is not an "
                                "embedding-bag loop")
            try:
                if is_ts_loop(node):
                    bag = match_ts(self, node)
                    replaced[i] = _Item("bag", bag.inputs(), [bag.out], bag=bag)
                else:
                    bag, cat = match_dynamo(self, node)
                    replaced[position[id(cat)]] = _Item("bag", bag.inputs(), [bag.out], bag=bag)
                    dropped.add(i)
            except Mismatch as e:
                raise self.fail(node, f"unsupported pattern: {e}") from None
        items: list[_Item] = []
        for i, node in enumerate(self.graph.node):
            if i in replaced:
                items.append(replaced[i])
            elif i not in dropped and not is_constant_node(node):
                kind, inputs = classify(self, node, self.path, self.warnings)
                items.append(_Item(kind, inputs, list(node.output), node=node))
        needed = set(self.graph_outputs)
        live: list[_Item] = []
        for item in reversed(items):
            if any(o in needed for o in item.outputs):
                live.append(item)
                needed.update(i for i in item.inputs if i)
        live.reverse()
        return live

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
            if tt.elem_type not in ELEM:
                raise EmberError(f"value '{name}' has unsupported element type "
                                 f"{TensorProto.DataType.Name(tt.elem_type)}", self.path)
            elem = ELEM[tt.elem_type]
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
        elem = np_elem(w)
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
            op = new_op("emb.scatter_rows", [data, idx, upd], [data.type], {"reduction": reduction_of(node)})
        elif item.kind == "gather":
            table, idx = self.use(item.inputs[0], block), self.use(item.inputs[1], block)
            assert isinstance(table.type, ShapedType) and isinstance(idx.type, ShapedType)
            assert table.type.shape is not None and idx.type.shape is not None
            rt = ShapedType("tensor", idx.type.shape + table.type.shape[1:], table.type.elem)
            op = new_op("emb.gather", [table, idx], [rt], {"negative": "wrap"})  # ONNX counts [-n, 0) from the end
        else:
            op = self.host_op(item, node, block)
        for name, r in zip(item.outputs, op.results, strict=True):
            r.name = self.fresh(name)
            self.values[name] = r
        block.add(op)

    def host_op(self, item: _Item, node: NodeProto, block: Block) -> Op:
        """`host.onnx` keeping the node's attributes; absent optional inputs and outputs are recorded."""
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
        item.outputs = [o for o in outs if o]
        return new_op("host.onnx", operands, [self.value_type(o) for o in item.outputs], attrs)

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

    def new_constant(self, a: np.ndarray, block: Block) -> Value:
        """A constant a raising needs (a hash's coefficients, a shape): a host `Constant` holding it, since the
        weights file (the .onnx) has no tensor of its own for it."""
        arr = np.asarray(a)
        elem = np_elem(arr)
        assert elem is not None
        ty = tensor(tuple(arr.shape), elem)
        op = block.add(new_op("host.onnx", [], [ty], {"op": "Constant", "value": DenseAttr.from_array(arr, ty)}))
        op.result.name = self.fresh("raised_constant")
        return op.result

    def new_host(self, block: Block, op_type: str, operands: list[Value], shape: tuple[int, ...], elem: str,
                 attrs: dict[str, Any] | None = None, hint: str | None = None) -> Value:
        op = block.add(new_op("host.onnx", operands, [tensor(shape, elem)], {"op": op_type, **(attrs or {})}))
        op.result.name = self.fresh(hint or op_type.lower())
        return op.result

    def dense(self, node: NodeProto, t: TensorProto) -> DenseAttr:
        if t.data_type not in ELEM:
            kind = TensorProto.DataType.Name(t.data_type)
            raise self.fail(node, f"tensor attribute of type {kind} is not supported")
        arr = numpy_helper.to_array(t)
        elem = ELEM[t.data_type]
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
        results = raise_all(block, [self.use(o, block) for o in outputs], self.top.weight,
                            lambda a: self.new_constant(a, block), lambda *a, **k: self.new_host(block, *a, **k))
        prune(block, results)
        block.add(new_op("return", results))
        func = Op("func", attrs={"sym_name": "main", "results": [r.type for r in results]}, regions=[block])
        attrs = {"weights": weights_ref, "opset": opset, "inputs": inputs, "outputs": outputs}
        module = Op("module", attrs=attrs, regions=[Block()])
        module.body.add(func)
        return module


def import_onnx(path: str, weights_ref: str) -> Op:
    """Import an ONNX model as a verified `module` whose weights are read back from `weights_ref`."""
    model = load_model(path)
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
