"""The import-time check: every host op of a module must be runnable by an executor the runtime allows.

Each host op is tried as a one-node model with its operands' types (unknown extents left symbolic),
which is where onnxruntime and onnx.reference refuse what they cannot run.  A model is refused at
import, naming the node, rather than at simulation.
"""

from __future__ import annotations

from pathlib import Path

from ..ir.core import Op, unique_name
from ..ir.diagnostics import EmberError
from ..ir.types import ShapedType
from .executors import describe
from .graph import HostNode, Shape
from .run import check_node


def _types(op: Op) -> dict[str, tuple[object, Shape]]:
    types = {}
    for k, v in enumerate(op.operands):
        t = v.type
        assert isinstance(t, ShapedType)  # the host.onnx verifier guarantees it
        types[f"x{k}"] = (t.elem.numpy(), t.shape)
    return types


def unrunnable(module: Op, choice: str | None = None) -> list[tuple[Op, dict[str, str]]]:
    """The host ops of `module` no executor of the runtime choice can run, each with every executor's reason."""
    opset = int(module.attrs.get("opset", 0) or 0)
    failed = []
    for op in module.walk():
        if op.name != "host.onnx":
            continue
        attrs = {k: v for k, v in op.attrs.items() if k != "op"}
        node = HostNode.of(op.attrs["op"], [f"x{k}" for k in range(len(op.operands))],
                           [f"y{k}" for k in range(len(op.results))], attrs)
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
    """Raise an EmberError naming the first host op of `module` that cannot run (and how many more)."""
    failed = unrunnable(module, choice)
    if failed:
        op, reasons = failed[0]
        more = f" ({len(failed) - 1} more host ops cannot run either)" if len(failed) > 1 else ""
        raise EmberError(f"{node_label(op, model)}: no host executor can run it: {describe(reasons)}{more}", model)
