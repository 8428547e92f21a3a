"""hoist: masks and other loop invariants are computed once, before the access nest.

- A vector access loop that is one head (constant bounds, `ub - lb` <= vl, as `unroll` leaves a row)
  has the same index vector and lane mask every time: `iota(lb)` and `tailmask(lb, ub)`.  Its
  callbacks read them from registers computed once, instead of popping them from the queue every
  row, and the mask stream goes (nothing marshals it any more).  Declined, with a remark, when the
  loop's bounds are not constants.
- An op in a callback that reads nothing the nest defines and has no effect (a constant, a splat, an
  iota, a mask, integer or float arithmetic) moves before the nest, so it runs once.
Both are what an expert writes: the all-true mask of a D-wide row is built once, outside the loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir.core import Op, new_op
from ..ir.rewrite import RewritePattern, const_value, defined_in, insert_before, replace_uses, top_level, users
from ..ir.types import ShapedType, StreamType
from .base import Decline, PatternPass

PURE = ("loop.const", "loop.splat", "loop.iota", "loop.tailmask", "loop.addi", "loop.subi", "loop.muli",
        "loop.mini", "loop.maxi", "loop.addf", "loop.subf", "loop.mulf", "loop.maxf", "loop.minf", "loop.fmaf",
        "loop.cast")


@dataclass
class Hoist(PatternPass):
    name = "hoist"
    summary = "compute a one-head loop's index and mask, and callback invariants, once before the access nest"
    declined: ClassVar[str] = "index and mask still marshaled"

    def patterns(self) -> list[RewritePattern]:
        return [OneHeadIndices(), HoistInvariant()]


def in_callback(op: Op) -> bool:
    p = op.parent_op()
    while p is not None and p.name != "func":
        if p.name == "slc.callback":
            return True
        p = p.parent_op()
    return False


class OneHeadIndices(RewritePattern):
    def match_and_rewrite(self, loop: Op) -> bool:
        if loop.name != "slc.for" or "vl" not in loop.attrs:
            return False
        lb, ub = loop.operands[:2]
        lo, hi = const_value(lb), const_value(ub)
        if not isinstance(lo, int) or not isinstance(hi, int):
            raise Decline("the loop's bounds are not constants")
        if hi - lo > loop.attrs["vl"]:
            return False  # several heads: the index and mask change
        iv = loop.body.args[0]
        masks = [o for o in loop.body.ops if o.name == "slc.mask" and o.operands[0] is iv]
        heads = [o for o in loop.walk() if o.name == "slc.head" and o.operands[0] in {iv, *(m.result for m in masks)}]
        if not heads:
            return False
        root = top_level(loop)
        made: dict[str, Op] = {}
        for h in heads:
            kind = "loop.iota" if h.operands[0] is iv else "loop.tailmask"
            if kind not in made:
                made[kind] = insert_before(root, new_op(kind, [lb] if kind == "loop.iota" else [lb, ub],
                                                        [h.result.type], loc=loop.loc))
            replace_uses(root, h.result, made[kind].result)
            h.parent.ops.remove(h)  # type: ignore[union-attr]
        for m in masks:
            if not users(root, m.result):
                loop.body.ops.remove(m)
        return True


class HoistInvariant(RewritePattern):
    def match_and_rewrite(self, op: Op) -> bool:
        if op.name not in PURE or not in_callback(op):
            return False
        root = top_level(op)
        if any(v in defined_in(root) or isinstance(v.type, StreamType) for v in op.operands):
            return False
        if op.results and isinstance(op.result.type, ShapedType) and op.result.type.kind != "vector":
            return False
        op.parent.ops.remove(op)  # type: ignore[union-attr]
        insert_before(root, op)
        return True
