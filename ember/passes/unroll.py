"""unroll{max_bits=N}: a vector access loop over a constant row delivers the whole row in one head.

After `vectorize`, an access loop over the D columns of a row fires D/vl heads, each with its own
token and callback.  When D is a constant, the loop is fully unrolled: one head of D lanes, one
callback per row.  A DAE vector wider than the machine's is issued as one machine instruction per
machine vector it spans, so each piece of the wide head, and of every vector the callback computes
from it, is one copy of the unrolled body; the core pops the row straight into registers.  A loop
that already is one head is left as it is.  Declined, with a remark, when the bounds are not
constants known to the compiler or the row's data is wider than `max_bits` (default 32,768: 64 machine
vectors, a 4 KiB f32 row, a quarter of the default machine's output queue).  The loop, or a loop
that is one head already, is marked `unrolled`, so `bufferize` leaves it alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..dialects.slc import vector_iv
from ..ir.core import Op, Value
from ..ir.rewrite import RewritePattern, const_value, defined_in
from ..ir.types import ShapedType, StreamType, Type
from .base import Decline, PatternPass


@dataclass
class Unroll(PatternPass):
    name = "unroll"
    summary = "fully unroll a vector loop over a constant row into one wide head (one callback per row)"
    declined: ClassVar[str] = "loop not unrolled"
    max_bits: int = 32768

    def patterns(self) -> list[RewritePattern]:
        return [UnrollRow(self.max_bits)]


@dataclass
class UnrollRow(RewritePattern):
    max_bits: int

    def match_and_rewrite(self, loop: Op) -> bool:
        if loop.name != "slc.for" or "vl" not in loop.attrs or loop.attrs.get("unrolled"):
            return False
        lb, ub = (const_value(v) for v in loop.operands[:2])
        if not isinstance(lb, int) or not isinstance(ub, int):
            raise Decline("its bounds are not constants")
        vl, trip = loop.attrs["vl"], ub - lb
        if trip <= vl:  # one head already: nothing to widen, but nothing for bufferize to collect either
            loop.attrs["unrolled"] = True
            return True
        bits = max([_elem_bits(v.type) for v in _vector_values(loop, vl) if _is_float(v.type)] or [32]) * trip
        if bits > self.max_bits:
            raise Decline(f"a row of {trip} lanes ({bits} bits) is wider than max_bits={self.max_bits}")
        inside = defined_in(loop)
        for op in loop.walk():
            for v in op.operands:
                if v not in inside and _lanes(v.type) == vl:
                    raise Decline(f"'{op.name}' reads a {vl}-lane vector defined outside the loop")
        for v in _vector_values(loop, vl):
            v.type = _widened(v.type, trip)
        loop.body.args[0].type = vector_iv(trip)
        loop.attrs["vl"] = trip
        loop.attrs["unrolled"] = True
        return True


def _lanes(t: Type) -> int | None:
    """Lanes of a vector or of a stream of vectors, None for anything else."""
    if isinstance(t, StreamType):
        t = t.elem
    return t.shape[0] if isinstance(t, ShapedType) and t.kind == "vector" and t.shape else None


def _elem_bits(t: Type) -> int:
    inner = t.elem if isinstance(t, StreamType) else t
    assert isinstance(inner, ShapedType)
    return inner.elem.bytes * 8


def _is_float(t: Type) -> bool:
    """A vector of row data (the index and mask vectors the row's width is not measured by)."""
    inner = t.elem if isinstance(t, StreamType) else t
    return isinstance(inner, ShapedType) and inner.elem.is_float


def _widened(t: Type, lanes: int) -> Type:
    if isinstance(t, StreamType):
        return StreamType(_widened(t.elem, lanes))
    assert isinstance(t, ShapedType)
    return ShapedType("vector", (lanes,), t.elem)


def _vector_values(loop: Op, vl: int) -> list[Value]:
    """The loop's vector streams and every vl-lane vector its callbacks compute: what widening retypes."""
    out = [a for b in loop.regions for a in b.args]
    for op in loop.walk():
        if op is not loop:
            out += [r for r in op.results if _lanes(r.type) == vl]
    return out
