"""Reading an ONNX file: the checked model, constant values, and the weights `param` ops name."""

from __future__ import annotations

import contextlib
import os

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, TensorProto, numpy_helper

from ...files import too_large
from ...ir.diagnostics import EmberError
from ...limits import INPUT_BYTES

ELEM = {
    TensorProto.FLOAT: "f32", TensorProto.DOUBLE: "f64", TensorProto.FLOAT16: "f16",
    TensorProto.BFLOAT16: "bf16", TensorProto.INT8: "i8", TensorProto.INT16: "i16",
    TensorProto.INT32: "i32", TensorProto.INT64: "i64", TensorProto.BOOL: "i1",
}
"""ONNX element types the IR has, by their IR spelling."""


def load_model(path: str) -> ModelProto:
    """Read and check a model, so later stages can trust its structure."""
    with contextlib.suppress(OSError):  # a file that cannot be read is onnx.load's error below
        if os.stat(path).st_size > INPUT_BYTES.get():  # onnx.load reads it whole
            raise too_large(path, INPUT_BYTES)
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


def sparse_to_array(sp: onnx.SparseTensorProto) -> np.ndarray:
    """Densify a sparse constant: the IR only has dense weights."""
    values = numpy_helper.to_array(sp.values)
    idx = numpy_helper.to_array(sp.indices).astype(np.int64)
    dense = np.zeros(tuple(sp.dims), dtype=values.dtype)
    if idx.ndim == 1:
        dense.reshape(-1)[idx] = values
    else:
        dense[tuple(idx.T)] = values
    return dense


def constant_value(node: NodeProto) -> np.ndarray:
    """The value of a `Constant` node, whichever of its attribute spellings it uses."""
    a = node.attribute[0]
    if a.name == "value":
        return numpy_helper.to_array(a.t)
    if a.name == "sparse_value":
        return sparse_to_array(a.sparse_tensor)
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


def is_constant_node(node: NodeProto) -> bool:
    return node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.attribute) == 1


def np_elem(a: np.ndarray) -> str | None:
    """The IR element type of a numpy array, None when the IR has none."""
    if a.dtype.name == "bfloat16":
        return "bf16"
    try:
        return ELEM.get(onnx.helper.np_dtype_to_tensor_dtype(a.dtype))
    except (KeyError, TypeError, ValueError):
        return None


def load_weights(path: str) -> dict[str, np.ndarray]:
    """Every initializer and top-level Constant value by name: what the `param` ops of an import refer to."""
    graph = load_model(path).graph
    out: dict[str, np.ndarray] = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for sp in graph.sparse_initializer:
        out[sp.values.name] = sparse_to_array(sp)
    for node in graph.node:
        if is_constant_node(node):
            out[node.output[0]] = constant_value(node)
    return out
