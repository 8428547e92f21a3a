"""prefetch-indices{distance=N}: the access unit fetches index lines N lookups ahead of their use.

A lookup's row address comes from an index stream (`indices[j]`), and the row's request cannot leave
before that index arrives.  Indices are read one after another, so every eighth one (a 64-byte line
of i64) misses to DRAM, and the eight rows behind it wait a whole memory latency for their addresses,
holding the access unit's request window and queue meanwhile.  An expert adds a stream that reads
`indices[min(j + N, n - 1)]` and discards it: the line is in the access unit's cache level by the
time the real index stream reaches it.  Every other one-dimensional stream of the same loop (a
weight per lookup) gets the same, since a message is ready only when all of its operands are.

Applies to a scalar access loop with a one-dimensional stream indexed by its induction variable whose
value addresses another stream (an indirect, gathered access).  It costs three stream elements (two
ALU, one load) a lookup for each stream it covers, and three stream slots, which the simulator checks
against `access.stream_slots` when the program runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir.builder import Builder
from ..ir.core import Op, new_op
from ..ir.rewrite import RewritePattern, insert_before, lookahead, top_level
from ..ir.types import ShapedType
from .base import PatternPass


@dataclass
class PrefetchIndices(PatternPass):
    name = "prefetch-indices"
    summary = "the access unit reads index (and weight) lines `distance` lookups ahead of their use"
    declined: ClassVar[str] = "indices not prefetched"
    distance: int = 64

    def patterns(self) -> list[RewritePattern]:
        return [PrefetchLoop(self.distance)]


@dataclass
class PrefetchLoop(RewritePattern):
    distance: int

    def match_and_rewrite(self, loop: Op) -> bool:
        if loop.name != "slc.for" or "vl" in loop.attrs or loop.attrs.get("prefetched") or self.distance <= 0:
            return False
        iv = loop.body.args[0]
        seq = [o for o in loop.body.ops if o.name == "slc.mem" and o.operands[1:] == [iv]
               and isinstance(o.operands[0].type, ShapedType) and o.operands[0].type.rank == 1]
        streams = {o.result for o in seq}
        indirect = any(o.name == "slc.mem" and any(v in streams for v in o.operands[1:]) for o in loop.walk())
        if not indirect:
            return False
        root = top_level(loop)
        outside = Builder(root.parent, root.parent.ops.index(root), loop.loc)  # type: ignore[arg-type]
        ahead = outside.const(self.distance)
        one = outside.const(1)
        for mem in seq:
            data = mem.operands[0]
            at = lookahead(outside, iv, ahead, data, one, mem.loc)
            for o in (*at, new_op("slc.mem", [data, at[-1].result], [mem.result.type], loc=mem.loc)):
                insert_before(mem, o)
        loop.attrs["prefetched"] = True
        return True
