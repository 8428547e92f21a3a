"""IR types: scalars, shaped types (tensor, memref, vector) and streams.

Types are immutable values so they can be compared and hashed freely; `str(t)` is the textual
form the printer writes and the parser reads back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SCALARS = ("i1", "i8", "u8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "index")

_NUMPY = {
    "i1": np.dtype(np.bool_), "i8": np.dtype(np.int8), "u8": np.dtype(np.uint8), "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32), "i64": np.dtype(np.int64), "index": np.dtype(np.int64),
    "f16": np.dtype(np.float16), "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
}


class Type:
    """Base of all IR types."""


@dataclass(frozen=True)
class ScalarType(Type):
    name: str

    def __post_init__(self) -> None:
        if self.name not in SCALARS:
            raise ValueError(f"unknown scalar type '{self.name}'")

    def __str__(self) -> str:
        return self.name

    @property
    def is_float(self) -> bool:
        return self.name[0] in "fb"

    @property
    def is_int(self) -> bool:
        return not self.is_float

    @property
    def bytes(self) -> int:
        return {"i1": 1, "i8": 1, "u8": 1, "i16": 2, "f16": 2, "bf16": 2, "i32": 4, "f32": 4}.get(self.name, 8)

    def numpy(self) -> np.dtype:
        if self.name == "bf16":  # numpy has none; ml_dtypes (a dependency of onnx) provides it
            import ml_dtypes

            return np.dtype(ml_dtypes.bfloat16)
        return _NUMPY[self.name]


# A byte tensor (u8 elements) may be read as one value of any of these types, from its bytes (a typed
# read: `loop.load` / `slc.mem` / `dlc.mem` with that result type; `ld.T` / `mem.T` in the ISA).
TYPED_READS = ("i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64")


def reads_as(elem: ScalarType, result: object) -> bool:
    """Whether a load of an `elem` memref may give `result`: its own type, or a typed read of a byte tensor."""
    return result == elem or (elem.name == "u8" and isinstance(result, ScalarType) and result.name in TYPED_READS)


Dim = int | None  # None is a dynamic extent, printed '?'


@dataclass(frozen=True)
class ShapedType(Type):
    """`tensor<..>` (value semantics), `memref<..>` (a buffer) or `vector<..>` (a register)."""

    kind: str
    shape: tuple[Dim, ...] | None  # None: unranked
    elem: ScalarType

    def __str__(self) -> str:
        if self.shape is None:
            return f"{self.kind}<*x{self.elem}>"
        dims = "".join(("?" if d is None else str(d)) + "x" for d in self.shape)
        return f"{self.kind}<{dims}{self.elem}>"

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def with_kind(self, kind: str) -> ShapedType:
        return ShapedType(kind, self.shape, self.elem)


@dataclass(frozen=True)
class StreamType(Type):
    """A sequence of values produced by the access unit, read by the core one head at a time."""

    elem: Type

    def __str__(self) -> str:
        return f"stream<{self.elem}>"


INDEX = ScalarType("index")
I1 = ScalarType("i1")
I64 = ScalarType("i64")
F32 = ScalarType("f32")


def scalar(name: str) -> ScalarType:
    return ScalarType(name)


def tensor(shape: tuple[Dim, ...] | None, elem: str | ScalarType) -> ShapedType:
    return ShapedType("tensor", shape, elem if isinstance(elem, ScalarType) else ScalarType(elem))


def memref(shape: tuple[Dim, ...] | None, elem: str | ScalarType) -> ShapedType:
    return ShapedType("memref", shape, elem if isinstance(elem, ScalarType) else ScalarType(elem))


def elem_of(t: Type) -> Type:
    """Element type of a shaped type or stream, or the type itself for scalars."""
    if isinstance(t, ShapedType):
        return t.elem
    if isinstance(t, StreamType):
        return t.elem
    return t
