"""The ISA's integer arithmetic (docs/isa.md): 64-bit two's complement, as the reference engine computes it.

Python's integers are unbounded, so every result that can leave the int64 range is wrapped here;
the fast engine computes the same in uint64_t (runtime.h's wadd/wsub/wmul/floordiv/floormod).
Division and remainder are floor division and floor modulo (the sign of the divisor), and
INT64_MIN div -1 wraps to INT64_MIN.
"""

from __future__ import annotations

import numpy as np

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_MASK = (1 << 64) - 1


def wrap(x: int) -> int:
    """`x` modulo 2^64, as a signed 64-bit value."""
    if INT64_MIN <= x <= INT64_MAX:
        return x
    return ((x - INT64_MIN) & _MASK) + INT64_MIN


def add(a: int, b: int) -> int:
    return wrap(a + b)


def sub(a: int, b: int) -> int:
    return wrap(a - b)


def mul(a: int, b: int) -> int:
    return wrap(a * b)


def div(a: int, b: int) -> int:
    """Floor division; a zero divisor is the instruction's fault (table.ZERO_DIVISOR), checked before."""
    return wrap(a // b)


def rem(a: int, b: int) -> int:
    """Floor modulo (the divisor's sign); a zero divisor is checked before, as for div."""
    return a % b


def tu_overflows(ub: int, step: int) -> bool:
    """A traversal unit's counter can step past INT64_MAX: its last value (at most ub - 1) plus its step."""
    return ub - 1 + step > INT64_MAX


def tu_last(lb: int, ub: int, step: int) -> int:
    """The last value of lb, lb + step, ... below ub (which must be above lb)."""
    return lb + (ub - lb - 1) // step * step


def to_integer(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Floats converted to an integer type: truncated toward zero; NaN, infinities and values out of the type's
    range give its minimum (for a signed type x86's "integer indefinite"; 0 for u8), where C would have undefined
    behaviour."""
    info = np.iinfo(dtype)
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        ok = (np.trunc(x) >= float(info.min)) & (x < float(info.max) + 1.0)
        return np.where(ok, np.where(ok, x, 0.0).astype(dtype), np.array(info.min, dtype=dtype))


def iota(start: int, lanes: int) -> np.ndarray:
    """The lanes start, start + 1, ... as int64, wrapped like add."""
    return np.arange(lanes, dtype=np.int64) + np.int64(start)
