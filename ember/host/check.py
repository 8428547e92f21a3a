"""The import-time check: every host op of a module must be runnable by an executor the runtime allows.

Each host op is tried as a one-node model with its operands' types (unknown extents left symbolic),
which is where onnxruntime and onnx.reference refuse what they cannot run.  Its results must also have
the element types ONNX's type inference gives them: the simulator converts each result to its declared
type, so a wrong declaration would otherwise truncate or convert values silently.  And no result may be
larger than the size cap (sizes.py).  A model is refused at import, naming the node, rather than at
simulation.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from onnx import helper

from ..ir.core import Op, unique_name
from ..ir.diagnostics import EmberError
from ..ir.types import ShapedType
from .executors import describe
from .graph import HostNode, Shape, build_model, strict_types
from .run import check_node
from .sizes import VALUE_ELEMENTS, inferred, nbytes, over_cap


def _types(op: Op) -> dict[str, tuple[object, Shape]]:
    types = {}
    for k, v in enumerate(op.operands):
        t = v.type
        assert isinstance(t, ShapedType)  # the host.onnx verifier guarantees it
        types[f"x{k}"] = (t.elem.numpy(), t.shape)
    return types


def _node(op: Op) -> HostNode:
    attrs = {k: v for k, v in op.attrs.items() if k != "op"}
    return HostNode.of(op.attrs["op"], [f"x{k}" for k in range(len(op.operands))],
                       [f"y{k}" for k in range(len(op.results))], attrs)


def _type_name(code: int) -> str:
    return str(helper.tensor_dtype_to_np_dtype(code)) if code else "?"


def mistyped(op: Op, opset: int) -> str | None:
    """How a result of host op `op` is declared with an element type other than the one its operator
    produces, or None (also when inference cannot tell: unrunnable() words what does not type-check)."""
    node = _node(op)
    try:
        got = strict_types(build_model([node], _types(op), node.produced, opset))
    except Exception:  # onnx's checker and inference errors share no base class
        return None
    for name, result in zip(node.produced, op.results):
        t = result.type
        code = got.get(name, 0)
        if not code or not isinstance(t, ShapedType):
            continue
        try:
            declared = helper.np_dtype_to_tensor_dtype(t.elem.numpy())
        except (KeyError, TypeError, ValueError):
            continue
        if declared != code:
            return (f"its result '{result.name or '?'}' is declared {_type_name(declared)}, but the operator "
                    f"produces {_type_name(code)} (a wrong type in the model's value_info or outputs?)")
    return None


def oversized(op: Op, opset: int, constants: Mapping[str, np.ndarray]) -> str | None:
    """Why a result of host op `op` would exceed the size cap, from its declared type or, where that
    leaves extents unknown, ONNX's inference from its operands' types and the values of those that are
    small weights (`constants`, by param name); None if neither says so."""
    node = _node(op)
    declared = {name: (r.type.shape, r.type.elem.numpy()) if isinstance(r.type, ShapedType) else (None, None)
                for name, r in zip(node.produced, op.results)}
    sizes: dict[str, tuple[Shape, np.dtype | None]] = {}
    if any(nbytes(*d) is None for d in declared.values()):  # inference only for what the types leave open
        values = {}
        for k, v in enumerate(op.operands):
            owner = v.owner
            if isinstance(owner, Op) and owner.name == "param" and owner.attrs.get("name") in constants:
                values[f"x{k}"] = constants[owner.attrs["name"]]
        sizes = inferred([node], _types(op), values, opset)
    for name, result in zip(node.produced, op.results):
        for shape, dtype in (declared[name], sizes.get(name, (None, None))):
            why = over_cap(result.name or name, shape, declared[name][1] if declared[name][1] is not None else dtype)
            if why:
                return why
    return None


def small_weights(module: Op, model: str) -> dict[str, np.ndarray]:
    """The initializers of an ONNX model with at most VALUE_ELEMENTS elements (shapes, repeats, pads,
    range bounds), read only when a host op's result has extents its declared type leaves unknown."""
    if Path(model).suffix.lower() != ".onnx" or not any(
            op.name == "host.onnx" and any(isinstance(r.type, ShapedType) and nbytes(r.type.shape, None) is None
                                           for r in op.results) for op in module.walk()):
        return {}
    import onnx
    from onnx import numpy_helper

    try:
        inits = onnx.load(model, load_external_data=False).graph.initializer
        return {t.name: numpy_helper.to_array(t) for t in inits
                if t.data_location != onnx.TensorProto.EXTERNAL and math.prod(t.dims) <= VALUE_ELEMENTS}
    except Exception:  # the frontend has read it already; the run-time check covers what this misses
        return {}


def unrunnable(module: Op, choice: str | None = None) -> list[tuple[Op, dict[str, str]]]:
    """The host ops of `module` no executor of the runtime choice can run, each with every executor's reason."""
    opset = int(module.attrs.get("opset", 0) or 0)
    failed = []
    for op in module.walk():
        if op.name != "host.onnx":
            continue
        node = _node(op)
        reasons = check_node(node, _types(op), opset, choice)  # type: ignore[arg-type]
        if reasons is not None:
            failed.append((op, reasons))
    return failed


def node_label(op: Op, model: str) -> str:
    """`node 'NAME' (OP)`: NAME is the ONNX node's name when the model is an ONNX file (the frontend
    names a result after the node's output, made a valid IR name and unique), else the result's name."""
    value = (op.results[0].name or "?") if op.results else "?"
    name = value
    if Path(model).suffix.lower() == ".onnx":
        import onnx

        try:
            nodes = list(onnx.load(model, load_external_data=False).graph.node)
        except Exception:  # the frontend has read it already; a name is all this is for
            nodes = []
        for node in nodes:
            outs = [unique_name(o, set()) for o in node.output if o]
            if node.op_type == op.attrs["op"] and any(value == o or (value.startswith(o + "_") and
                                                                      value[len(o) + 1:].isdigit()) for o in outs):
                name = node.name or next(o for o in node.output if o)
                break
    return f"node '{name}' ({op.attrs['op']})"


def check_module(module: Op, model: str, choice: str | None = None) -> None:
    """Raise an EmberError naming the first host op of `module` that cannot run (and how many more), or
    the first whose result is declared with a type its operator does not produce."""
    failed = unrunnable(module, choice)
    if not failed:
        opset = int(module.attrs.get("opset", 0) or 0)
        constants = small_weights(module, model)
        for op in module.walk():
            why = (mistyped(op, opset) or oversized(op, opset, constants)) if op.name == "host.onnx" else None
            if why:
                raise EmberError(f"{node_label(op, model)}: {why}", model)
    if failed:
        op, reasons = failed[0]
        more = f" ({len(failed) - 1} more host ops cannot run either)" if len(failed) > 1 else ""
        why = re.sub(r"\(x(\d+)\)", r"(input \1)", describe(reasons))  # the one-node model's input names
        raise EmberError(f"{node_label(op, model)}: no host executor can run it: {why}{more}", model)
