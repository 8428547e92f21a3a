"""Host operators as ONNX models: one `HostNode` per host op, a ModelProto for a list of them.

A host op carries its ONNX operator type and attributes as Ember stores them (plain Python values,
`DenseAttr` for tensors, and `absent` / `absent_results` for the positions of inputs and outputs the
model left empty).  Executors want a real model: typed graph inputs, the opset imported, every
value the caller needs as a graph output.  Outputs are declared by name only, so each executor
reports the type the operator really produces and the caller decides what to do with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import AttributeProto, ModelProto, ValueInfoProto, defs, helper, shape_inference

from ..ir.printer import DenseAttr

DEFAULT_OPSET = 17
"""The opset of a program that names none (Ember's own host ops are written against it)."""

Shape = tuple[int | None, ...] | None
"""A declared shape: None for an unknown rank, None in a dimension for an unknown extent."""


@dataclass(frozen=True)
class HostNode:
    """One host operator: `inputs` and `outputs` are value names, '' where the model left one out."""

    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any]

    @staticmethod
    def of(op_type: str, inputs: Sequence[str], outputs: Sequence[str], attrs: Mapping[str, Any]) -> HostNode:
        """A node from Ember's form: `inputs`/`outputs` name the present values in order, and the
        `absent` / `absent_results` attributes say which positions between them were empty."""
        return HostNode(op_type, _spread(inputs, attrs.get("absent", ())),
                        _spread(outputs, attrs.get("absent_results", ())),
                        {k: v for k, v in attrs.items() if k not in ("absent", "absent_results")})

    @property
    def produced(self) -> tuple[str, ...]:
        return tuple(o for o in self.outputs if o)

    def key(self) -> tuple[object, ...]:
        """What the node's model depends on, hashable (cheaper to compare than the model's bytes)."""
        return self.op_type, self.inputs, self.outputs, tuple(sorted((k, _freeze(v)) for k, v in self.attrs.items()))


def _freeze(v: Any) -> object:
    if isinstance(v, DenseAttr):
        return "dense", str(v.type), _freeze(v.values)
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return type(v).__name__, v


def _spread(names: Sequence[str], gaps: Sequence[int]) -> tuple[str, ...]:
    """`names` with '' inserted at the positions in `gaps`."""
    holes, it, out = set(gaps), iter(names), []
    for k in range(len(names) + len(holes)):
        out.append("" if k in holes else next(it))
    return tuple(out)


def _attribute(name: str, value: Any, kind: int | None) -> AttributeProto:
    """An ONNX attribute; `kind` (from the operator's schema) types the values Python cannot tell
    apart, such as an empty list."""
    if isinstance(value, DenseAttr):
        value = _tensor(value)
    elif isinstance(value, list) and value and all(isinstance(v, DenseAttr) for v in value):
        value = [_tensor(v) for v in value]
    if kind is None or kind == AttributeProto.UNDEFINED:
        return helper.make_attribute(name, value)
    if kind == AttributeProto.FLOATS:
        value = [float(v) for v in value]
    elif kind == AttributeProto.FLOAT:
        value = float(value)
    return helper.make_attribute(name, value, attr_type=kind)


def _tensor(d: DenseAttr) -> Any:
    a = d.array()
    return helper.make_tensor("value", helper.np_dtype_to_tensor_dtype(a.dtype), a.shape, a.reshape(-1).tolist())


def _attribute_kinds(op_type: str, opset: int) -> dict[str, int]:
    try:
        # the newest schema up to `opset`: past the newest onnx knows that is the newest (and a larger number
        # would not fit get_schema's C int)
        schema = defs.get_schema(op_type, min(opset, defs.onnx_opset_version()), "")
    except defs.SchemaError:
        return {}
    return {name: int(a.type) for name, a in schema.attributes.items()}


def value_info(name: str, dtype: np.dtype, shape: Shape) -> ValueInfoProto:
    """A typed graph input; unknown extents get their own symbolic names, so no two are tied together."""
    dims = None if shape is None else [f"{name}_d{k}" if d is None else int(d) for k, d in enumerate(shape)]
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), dims)


def build_model(nodes: Sequence[HostNode], inputs: Mapping[str, tuple[np.dtype, Shape]], outputs: Sequence[str],
                opset: int) -> ModelProto:
    """A model computing `outputs` from `inputs` (name -> (dtype, declared shape)) with `nodes` in order.
    Raises ValueError or TypeError when an attribute cannot be written as ONNX."""
    opset = opset or DEFAULT_OPSET
    protos = []
    for k, n in enumerate(nodes):
        kinds = _attribute_kinds(n.op_type, opset)
        node = helper.make_node(n.op_type, list(n.inputs), list(n.outputs), name=f"{n.op_type}_{k}")
        node.attribute.extend(_attribute(a, v, kinds.get(a)) for a, v in n.attrs.items())
        protos.append(node)
    graph = helper.make_graph(protos, "host", [value_info(name, *t) for name, t in inputs.items()],
                              [ValueInfoProto(name=o) for o in outputs])
    imports = [helper.make_opsetid("", opset)]
    # the oldest IR version that knows the opset, so an older onnxruntime accepts what it can run
    return helper.make_model(graph, opset_imports=imports, ir_version=helper.find_min_ir_version_for(imports, True))


def strict_types(model: ModelProto) -> dict[str, int]:
    """Graph output -> the element type ONNX's strict type and shape inference gives it (0: unknown).

    Raises when a node breaks its operator's schema (input types or count, attributes).  onnxruntime
    checks this when it builds a session; onnx.reference does not, so its kernels would run such a
    node on whatever numpy makes of it."""
    inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    return {o.name: o.type.tensor_type.elem_type for o in inferred.graph.output}
