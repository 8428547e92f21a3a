"""Float arithmetic the ISA defines and numpy lacks: a float32 fused multiply-add, rounded once.

`ffma.f32` and `vfma.f32` compute a * b + c with a single rounding, as x86's vfmadd and C's fmaf do.
Dequantizing a row-wise quantized table needs it to match FBGEMM bit for bit (its kernels accumulate
`fma(scale, q, acc + bias)`).  numpy has no fused multiply-add, and Python's `math.fma` arrived in 3.13,
so the value is built from double arithmetic, which float32 operands allow exactly:

- the product of two float32 values needs at most 48 significant bits, so it is exact in a double;
- s = p + c rounds once, and TwoSum gives the part e that the rounding dropped: p + c = s + e exactly;
- rounding s to float32 is then correct except when s lies exactly halfway between two float32 values
  while p + c does not (e != 0): the true value is on e's side of the tie, and takes that neighbour.

The fast engine's runtime.h (`fma32`) performs the same operations in the same order, so the two engines
agree on every bit, NaNs included.
"""

from __future__ import annotations

import math

import numpy as np

F32_MAX = float(np.finfo(np.float32).max)
F32_OVERFLOW_TIE = 2.0**128 - 2.0**103  # halfway between F32_MAX and 2^128: a tie that rounds to infinity


def fma32(a: np.ndarray | float, b: np.ndarray | float, c: np.ndarray | float) -> np.ndarray:
    """a * b + c for float32 values (scalars or arrays of one shape), rounded once to float32."""
    a64, b64, c64 = (np.asarray(x, np.float32).astype(np.float64) for x in (a, b, c))
    with np.errstate(all="ignore"):
        p = a64 * b64
        s = p + c64
        bp = s - p
        e = (p - (s - bp)) + (c64 - bp)
        r = s.astype(np.float32)
        r64 = r.astype(np.float64)
        toward = np.where(s > r64, np.float32(np.inf), np.float32(-np.inf))
        other = np.nextafter(r, toward)
        tie = (e != 0) & (s != r64) & ((r64 + other.astype(np.float64)) * 0.5 == s)
        pick = np.where(e > 0, np.maximum(r, other), np.minimum(r, other))
        r = np.where(tie, pick, r)
        over = (e != 0) & np.isinf(r) & (np.abs(s) == F32_OVERFLOW_TIE) & ((e > 0) != (s > 0))
        return np.where(over, np.copysign(np.float32(F32_MAX), s).astype(np.float32), r).astype(np.float32)


def fmax(a: float, b: float) -> float:
    """IEEE 754-2019 maximum: NaN if either is (the first NaN), and +0 above -0 (docs/isa.md)."""
    if a != a or b != b:
        return a if a != a else b
    return (b if math.copysign(1.0, a) < 0 else a) if a == b else max(a, b)


def fmin(a: float, b: float) -> float:
    """IEEE 754-2019 minimum: NaN if either is (the first NaN), and -0 below +0 (docs/isa.md)."""
    if a != a or b != b:
        return a if a != a else b
    return (a if math.copysign(1.0, a) < 0 else b) if a == b else min(a, b)


def vmax(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fmax lane by lane (np.maximum alone keeps the second operand's zero of a tie)."""
    return np.where(a == b, np.where(np.signbit(a), b, a), np.where(np.isnan(a), a, np.maximum(a, b)))


def vmin(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fmin lane by lane."""
    return np.where(a == b, np.where(np.signbit(a), a, b), np.where(np.isnan(a), a, np.minimum(a, b)))


def fdiv(a: float, b: float) -> float:
    """a / b with IEEE results where Python raises on a zero divisor: there the host's own division, which is
    what the fast engine's C computes, so that the NaN of 0 / 0 (x86's negative "indefinite") and a NaN
    dividend's payload come out with the same bits on both engines."""
    if b == 0.0:
        with np.errstate(all="ignore"):
            return float(np.float64(a) / np.float64(b))
    return a / b
