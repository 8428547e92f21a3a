"""prefetch-outputs{distance=N,line=B}: the access unit touches the output rows the core will store N
iterations ahead, so that their write-allocate reads hit in the access unit's cache level.

A store to a line that is not cached first reads the line (write-allocate), and on the default machine
that read holds one of the core's 12 fill buffers for a whole DRAM latency: a gather, which writes a
fresh output row per lookup, is bound by those reads rather than by bandwidth (4x slower on the paper's
knowledge-graph workloads).  The rows a callback stores are known ahead, since they are the values of
a loop's induction variable, so an expert has the access unit read one element of each line of the
row `distance` iterations ahead and discard it.  The store then finds its line in L2.

Applies to a whole-row `loop.vstore` in a callback whose row is the head of an enclosing access loop's
induction variable (constant positive step) and whose columns are a constant range (run `unroll` first;
before `align-queues`, which replaces the head with a core counter).  It costs two ALU elements and one
load per line of the row per iteration of that loop, and three stream slots and one traversal unit,
which the simulator checks against the machine when the program runs; a nest that already has `tus` loops
(the default machine's traversal units, 8) is left alone, as the prefetch would leave it unable to run there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir.builder import Builder
from ..ir.core import Block, Op
from ..ir.diagnostics import EmberError
from ..ir.rewrite import RewritePattern, const_value, insert_before, lookahead, top_level
from ..ir.types import INDEX, ShapedType, StreamType
from .base import Decline, PatternPass


@dataclass
class PrefetchOutputs(PatternPass):
    name = "prefetch-outputs"
    summary = "the access unit touches output rows `distance` iterations before the core stores them"
    declined: ClassVar[str] = "output rows not prefetched"
    distance: int = 64
    line: int = 64
    tus: int = 8  # traversal units of the machine tuned for (access.traversal_units of the default machine)

    def __post_init__(self) -> None:
        if self.line <= 0:
            raise EmberError(f"pass 'prefetch-outputs': line={self.line} must be a positive number of bytes")

    def patterns(self) -> list[RewritePattern]:
        return [PrefetchRow(self.distance, self.line, self.tus)]


@dataclass
class PrefetchRow(RewritePattern):
    distance: int
    line: int
    tus: int

    def match_and_rewrite(self, st: Op) -> bool:
        if st.name not in ("loop.vstore", "loop.scatter") or st.attrs.get("prefetched") or self.distance <= 0:
            return False
        cb = st.parent_op()
        while cb is not None and cb.name not in ("slc.callback", "func"):
            cb = cb.parent_op()
        if cb is None or cb.name != "slc.callback":
            return False  # a store of the core's own code, not one a callback makes
        value, out = st.operands[:2]
        name = f"'{out.name}'" if out.name else "the output"
        if st.parent_op() is not cb:
            raise Decline(f"{name} is written by '{st.name}' inside a loop of its callback, not as one row "
                          "(run unroll first)")
        if st.name != "loop.vstore":
            raise Decline(f"{name} is written lane by lane ('{st.name}'), not as one row (run unroll and hoist "
                          "first)")
        shape = out.type.shape if isinstance(out.type, ShapedType) else None
        if not shape or len(shape) != 2:  # stored at [row, column]
            raise Decline(f"{name} is a {out.type}, not a 2-D memref of rows")
        row, col = st.operands[2:4]
        head = row.owner
        iv = head.operands[0] if isinstance(head, Op) and head.name == "slc.head" else None
        body = iv.owner if iv is not None else None
        loop = body.parent if isinstance(body, Block) else None
        if loop is None or loop.name != "slc.for" or "vl" in loop.attrs:
            raise Decline(f"the row of {name} this store writes is not an access loop's induction variable")
        step = const_value(loop.operands[2])
        if not isinstance(step, int) or step <= 0:
            raise Decline(f"the loop counting the rows of {name} has no constant positive step")
        lanes = value.type.shape if isinstance(value.type, ShapedType) else None
        c0 = const_value(col)
        if not isinstance(shape[1], int) or not lanes or not isinstance(c0, int):
            raise Decline(f"the columns of {name} this store writes are not a constant range (run unroll first)")
        assert isinstance(out.type, ShapedType)
        stride = max(1, self.line // out.type.elem.bytes)  # elements per line: one touch per line
        hi = min(shape[1], c0 + int(lanes[0]))
        root = top_level(loop)
        loops = sum(1 for o in root.walk() if o.name == "slc.for")
        if loops >= self.tus:
            raise Decline(f"its access nest has {loops} loops already, and the prefetch needs one more traversal unit "
                          f"than the {self.tus} it is tuned for (tus=N)")
        pre = Builder(root.parent, root.parent.ops.index(root), st.loc)  # type: ignore[arg-type]
        ahead = pre.const(self.distance * step)
        at = lookahead(pre, iv, ahead, out, pre.const(1), st.loc)
        lo, end, by = pre.const(c0), pre.const(hi), pre.const(stride)
        first = loop.body.ops[0]
        for o in at:
            insert_before(first, o)
        with Builder(loop.body, loop.body.ops.index(first), st.loc).loop("slc.for", lo, end, by,
                                                                         StreamType(INDEX)) as (c, inner):
            inner.val("slc.mem", [out, at[-1].result, c], StreamType(out.type.elem))
        st.attrs["prefetched"] = True
        return True
