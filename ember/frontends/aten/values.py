"""Values and shapes shared by the aten lowering and the two torch frontends.

What an operator's arguments can be once a frontend has decoded them (`Weight`, `TorchDType`,
numbers, lists), the element types Ember holds, and the shape arithmetic PyTorch's operators
follow (broadcasting, matrix products, dimension arguments).  Nothing here emits IR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ELEM", "OPSET", "SymBool", "SymInt", "TorchDType", "Unsupported", "Unusable", "Weight", "elem_of", "need",
           "numpy_of"]

OPSET = 17
"""The ONNX operator set of the host ops these frontends emit (axes of Unsqueeze/ReduceSum are inputs,
those of ReduceMean/ReduceMax attributes; no Gelu, which is opset 20: see dense.py)."""

ELEM = {"float32": "f32", "float64": "f64", "float16": "f16", "int64": "i64", "int32": "i32",
        "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "i1"}
"""numpy's name of each element type the IR holds -> the IR's name (uint8: the byte rows of quantized tables)."""
ONNX_TYPE = {"f32": 1, "u8": 2, "i8": 3, "i16": 5, "i32": 6, "i64": 7, "i1": 9, "f16": 10, "f64": 11}
FLOATS = ("f16", "f32", "f64")
INTS = ("i8", "i16", "i32", "i64")
BIG = 2**62  # a slice end at least this large means "to the end" (TorchScript writes INT64_MAX)
MAX_DEPTH = 64  # nested module calls; deeper means a self-calling (malformed or malicious) archive

C10_DTYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64",
              8: "complex32", 9: "complex64", 10: "complex128", 11: "bool", 15: "bfloat16"}
"""c10::ScalarType, the numbering of `dtype=6` in TorchScript source."""

Shape = tuple[int | None, ...]
Schema = tuple[str | tuple[str, Any], ...]
"""aten's argument names in order; `(name, default)` for the optional ones."""


class Unsupported(Exception):
    """A construct the lowering cannot translate; the frontend adds where it was and what to do instead."""


def need(cond: bool, why: str) -> None:
    if not cond:
        raise Unsupported(why)


@dataclass(eq=False)
class Weight:
    """A stored tensor (parameter, buffer or constant); it becomes a `param` op when first used.

    The lowering makes some too (`/constant_<n>`): index tables such as `arange` and `tril_indices`
    give, which it can still compute on while they are known."""

    name: str
    array: np.ndarray


@dataclass(eq=False)
class SymInt:
    """A size torch.export left symbolic (an export with dynamic shapes): known at run time only, as the
    0-d int64 IR value `value` the lowering computed from a tensor's Shape."""

    value: Any  # ir.core.Value


@dataclass(eq=False)
class SymBool:
    """A comparison of sizes at least one of which is symbolic (`u0 >= 0`): the 0-d bool IR value
    `value`.  torch.export only passes these to `_assert_scalar`."""

    value: Any  # ir.core.Value


@dataclass(frozen=True)
class TorchDType:
    """A `dtype=` argument as the `.pt2` JSON gives it (TorchScript source writes c10's number instead)."""

    name: str  # numpy's name, or PyTorch's for the types numpy lacks (bfloat16, complex32, ...)


@dataclass(frozen=True)
class Unusable:
    """An operator result Ember does not compute (embedding_bag's bookkeeping outputs)."""

    what: str


def elem_of(dtype: np.dtype, what: str) -> str:
    """The IR element type of a numpy dtype, or an error naming the tensor."""
    name = ELEM.get(np.dtype(dtype).name)
    if name is None:
        raise Unsupported(f"{what} has element type {np.dtype(dtype).name}, which Ember does not support")
    return name


def numpy_of(elem: str) -> np.dtype:
    return np.dtype({v: k for k, v in ELEM.items()}[elem])


def is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def broadcast(a: Shape, b: Shape) -> Shape:
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out: list[int | None] = []
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        elif x is None or y is None:
            out.append(x if y is None else y)
        else:
            raise Unsupported(f"shapes {list(a)} and {list(b)} do not broadcast")
    return tuple(out)


def matmul_shape(a: Shape, b: Shape) -> Shape:
    need(len(a) >= 1 and len(b) >= 1, "matrix products need operands of rank >= 1")
    aa = (1, *a) if len(a) == 1 else a
    bb = (*b, 1) if len(b) == 1 else b
    need(aa[-1] is None or bb[-2] is None or aa[-1] == bb[-2],
         f"matrix product of shapes {list(a)} and {list(b)}: inner dimensions differ")
    out = [*broadcast(aa[:-2], bb[:-2]), aa[-2], bb[-1]]
    if len(b) == 1:
        out.pop(-1)
    if len(a) == 1:
        out.pop(-2 if len(b) > 1 else -1)
    return tuple(out)


def dim(d: Any, rank: int, what: str = "dim") -> int:
    """A dimension argument in [-rank, rank) as a non-negative index."""
    need(isinstance(d, int) and not isinstance(d, bool), f"{what} must be an integer, got {d!r}")
    need(-rank <= d < rank, f"{what} {d} is out of range for rank {rank}")
    return d + rank if d < 0 else d


def integer(v: Any, what: str) -> int:
    need(isinstance(v, int) and not isinstance(v, bool), f"{what} must be an integer, got {v!r}")
    return int(v)


def ints(v: Any, what: str) -> list[int]:
    if isinstance(v, int) and not isinstance(v, bool):
        return [v]
    need(isinstance(v, list | tuple) and all(isinstance(x, int) and not isinstance(x, bool) for x in v),
         f"{what} must be a list of integers, got {v!r}")
    return [int(x) for x in v]


def sizes(v: Any, what: str) -> list[int | SymInt]:
    """A size list whose entries may be symbolic."""
    if isinstance(v, SymInt):
        return [v]
    if isinstance(v, list | tuple) and any(isinstance(x, SymInt) for x in v):
        need(all(isinstance(x, SymInt) or (isinstance(x, int) and not isinstance(x, bool)) for x in v),
             f"{what} must be a list of sizes, got {v!r}")
        return list(v)
    return list(ints(v, what))


def static(dims: list[Any]) -> Shape:
    """The extents a size list gives the IR: symbolic (and unknown) entries are unknown."""
    return tuple(None if isinstance(d, SymInt) else d for d in dims)


def prod(dims: Shape) -> int | None:
    n = 1
    for d in dims:
        if d is None:
            return None
        n *= d
    return n
