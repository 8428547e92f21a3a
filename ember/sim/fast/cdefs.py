"""What the two halves of the fast engine's generator (c_source.py, access_code.py) share: the C type of each
DAE element type, the generated function's status codes, the instruction counters' names, and how a
pushed operand is described."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...backend.registers import VShape as VType  # a vector register's element type and lanes
from ...isa import TIMED

CTYPE = {"f32": "float", "f64": "double", "i64": "int64_t", "index": "int64_t", "i32": "int32_t", "i16": "int16_t",
         "i8": "int8_t", "u8": "uint8_t", "i1": "uint8_t",
         "bool": "uint8_t",  # "bool": masks (v registers, mask streams)
         "f16": "uint16_t", "bf16": "uint16_t"}  # 16-bit floats as their bits (runtime.h converts)
NPTYPE = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "index": np.int64, "i32": np.int32,
          "i16": np.int16, "i8": np.int8, "u8": np.uint8, "i1": np.bool_, "bool": np.bool_, "f16": np.float16,
          "bf16": np.uint16}
OK, ERROR, MAX_CYCLES, INTERRUPTED = 0, 1, 2, 3  # status codes of the generated function
OP_NAMES = tuple(sorted(set(TIMED) | {"dispatch", "host", "run"}))  # the instruction counters


class Unsupported(Exception):
    """The program uses something the fast engine does not compile; the reason is the message."""


@dataclass
class Push:
    """One operand a rule pushes: how generated code reads it, and what it is."""

    value: str  # C expression of its value (an array name for vectors; the head's first index for "iota")
    ready: str  # C variable holding its ready time
    kind: str  # "int", "float", "vec", "iota" (a vector TU's lane indices), "buf"
    nbytes: str  # C expression of its queue bytes
    vtype: VType | None = None
    stream: str = ""  # the buffer's variable suffix, for kind "buf"
    seq: str = ""  # C variable holding its queue sequence number


def is_float(dtype: str) -> bool:
    return dtype in ("f32", "f64", "f16", "bf16")


def to_double(dtype: str, expr: str) -> str:
    """C expression widening an element of `dtype` to double (exactly)."""
    return {"f16": f"h2d({expr})", "bf16": f"b2d({expr})", "f32": f"f2d({expr})"}.get(dtype, f"(double)({expr})")


def from_double(dtype: str, expr: str) -> str:
    """C expression storing a double (or an int64_t) into `dtype`, as numpy (ml_dtypes for bf16) converts: an
    integer modulo the element's width, a boolean as nonzero."""
    special = {"f16": f"d2h({expr})", "bf16": f"d2b({expr})", "i1": f"(uint8_t)(({expr}) != 0)",
               "bool": f"(uint8_t)(({expr}) != 0)"}
    return special.get(dtype, f"({CTYPE[dtype]})({expr})")


def typed_read(dtype: str, ptr: str) -> str:
    """C expression of the `dtype` value whose bytes start at byte pointer `ptr` (runtime.h's rd_*), as a double
    for a float type and an int64_t for an integer one."""
    raw = f"rd_{CTYPE[dtype]}({ptr})"
    return to_double(dtype, raw) if is_float(dtype) else f"(int64_t){raw}"


def c_int(v: int) -> str:
    """A C literal of an int64 value (INT64_MIN has no literal of its own)."""
    return "INT64_MIN" if v == -(1 << 63) else f"((int64_t){v}LL)"


def elem_bytes(dtype: str) -> int:
    return 2 if dtype in ("f16", "bf16") else np.dtype(NPTYPE[dtype]).itemsize
