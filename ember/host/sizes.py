"""How large a host operator's results will be, known before it runs, and the cap on it.

Many ONNX operators make results far larger than their inputs: a two-element shape makes
ConstantOfShape, Expand, Tile, Range, Resize, Pad or OneHot fill gigabytes, and broadcasting, MatMul
and Gather multiply extents.  A model (or a run's input data) that asks for more than HOST_MAX_BYTES
in one tensor is refused, naming the node, before any executor allocates it:

- at import, from the result types the frontend declared and, where those leave extents open, ONNX's
  type inference of the node from its operands' types and the values of small initializers;
- at run time, from ONNX's inference of the nodes about to run, given the actual input shapes and, for
  small inputs (shapes, repeats, pads, scales, range bounds), their values, with data propagation, so
  that sizes computed from data are known too.  A run in which a size depends on a value computed
  inside it, and inference cannot tell it in advance, is run one operator at a time, each checked
  once its own inputs exist.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np
from onnx import helper, numpy_helper, shape_inference

from ..ir.diagnostics import EmberError
from ..limits import HOST_MAX_BYTES
from .graph import HostNode, Shape, build_model

__all__ = ["VALUE_ELEMENTS", "TooLarge", "check_run", "inferred", "nbytes", "over_cap"]

VALUE_ELEMENTS = 64
"""Inputs with at most this many elements are handed to inference as values (shapes and sizes are small)."""

Sizes = dict[str, tuple[Shape, np.dtype | None]]


def _dtype(code: int) -> np.dtype | None:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(code)) if code else None
    except (KeyError, TypeError, ValueError):
        return None


def inferred(nodes: Sequence[HostNode], types: Mapping[str, tuple[np.dtype, Shape]],
             values: Mapping[str, np.ndarray], opset: int) -> Sizes:
    """Shape and element type of each value `nodes` produce, as far as ONNX's inference can tell from
    the inputs' `types` and the `values` of some of them; {} when it cannot run at all."""
    produced = [o for n in nodes for o in n.produced]
    try:
        model = build_model(nodes, {k: t for k, t in types.items() if k not in values}, produced, opset)
        model.graph.initializer.extend(numpy_helper.from_array(np.asarray(v), k) for k, v in values.items())
        graph = shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True).graph
    except Exception:  # a node ONNX rejects: the executors word the reason when they refuse it
        return {}
    sizes: Sizes = {}
    for info in [*graph.value_info, *graph.output]:
        if info.name in produced and info.type.HasField("tensor_type"):
            t = info.type.tensor_type
            shape = None if not t.HasField("shape") else tuple(
                d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
            sizes[info.name] = (shape, _dtype(t.elem_type))
    return sizes


def nbytes(shape: Shape, dtype: np.dtype | None) -> int | None:
    """Bytes of a tensor of this shape, None when an extent is unknown.  An unknown element type counts
    as one byte: the cap is about extents, and no type is smaller."""
    if shape is None or any(d is None or d < 0 for d in shape):
        return None
    item = dtype.itemsize if dtype is not None and dtype != np.dtype(object) else 1
    return math.prod(shape) * max(item, 1)  # type: ignore[arg-type]


def over_cap(name: str, shape: Shape, dtype: np.dtype | None) -> str | None:
    """Why a result `name` of this shape and type may not be made, or None."""
    size, cap = nbytes(shape, dtype), HOST_MAX_BYTES.get()
    if size is None or size <= cap:
        return None
    kind = f" {dtype}" if dtype is not None else ""
    return (f"its result '{name}' would take {size:,} bytes (shape {list(shape or ())}{kind}), over the limit of "
            f"{cap:,} bytes per tensor ({HOST_MAX_BYTES.env})")


class TooLarge(EmberError):
    """A host operator whose result would exceed the cap: refused before it runs."""

    def __init__(self, node: HostNode, value: str, shape: Shape, dtype: np.dtype | None):
        self.node, self.value, self.shape, self.dtype = node, value, shape, dtype
        super().__init__(f"host operation {node.op_type}: {over_cap(value, shape, dtype)}")

    def named(self, names: Mapping[str, str]) -> EmberError:
        """The error with the caller's name for the result."""
        why = over_cap(names.get(self.value, self.value), self.shape, self.dtype)
        return EmberError(f"host operation {self.node.op_type}: {why}")


_SEEN: OrderedDict[tuple[object, ...], Sizes] = OrderedDict()


def check_run(nodes: Sequence[HostNode], feeds: Mapping[str, np.ndarray], dtypes: Mapping[str, np.dtype],
              opset: int) -> bool:
    """Raise TooLarge for the first of `nodes` (about to run on `feeds`) whose result inference shows to
    be over the cap.  Returns False when a node reading what an earlier one computes has a result of
    unknown size: run the nodes one at a time then, and check each again once its inputs exist."""
    small = {k: v for k, v in feeds.items() if v.size <= VALUE_ELEMENTS}
    key = (opset, tuple(n.key() for n in nodes), tuple((k, v.dtype.str, v.shape) for k, v in sorted(feeds.items())),
           tuple((k, v.tobytes()) for k, v in sorted(small.items())))
    sizes = _SEEN.get(key)
    if sizes is None:
        sizes = inferred(nodes, {k: (v.dtype, v.shape) for k, v in feeds.items()}, small, opset)
        _SEEN[key] = sizes
        if len(_SEEN) > 1024:
            _SEEN.popitem(last=False)
    else:
        _SEEN.move_to_end(key)
    known, made = True, set()
    for node in nodes:
        for o in node.produced:
            shape, dtype = sizes.get(o, (None, None))
            dtype = dtypes.get(o) if dtype is None else dtype
            if over_cap(o, shape, dtype):
                raise TooLarge(node, o, shape, dtype)
            # unknown from the run's own inputs stays unknown when the node runs alone: no use waiting
            if nbytes(shape, dtype) is None and any(i in made for i in node.inputs):
                known = False
        made.update(node.produced)
    return known
