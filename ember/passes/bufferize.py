"""bufferize: marshal a vector loop's data once per traversal, as a buffer; one callback per loop.

After `vectorize`, an innermost vector loop fires its callback once per vector head (D/vl times
per embedding row).  Here every vector memory stream the callback reads is collected into an
`slc.buffer` (the whole row), the callback fires at the loop's end instead (`on = "end"`, once per row) and
walks the row itself with a core loop over the same bounds: the induction vector becomes
`loop.iota`, the tail mask `loop.tailmask`, and each stream head a `loop.vload` from the buffer.
A loop `unroll` made one head of a whole row is left alone: it has nothing to collect.
Declined (with a remark) when the loop's bounds are not known to the core (computed by the access
unit) or the loop has no callback.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..dialects.loop import is_vector
from ..ir.builder import Builder
from ..ir.core import Block, Op, Value, new_op
from ..ir.types import I1, INDEX, ShapedType, StreamType
from .base import Decline, Pass
from .vectorize import is_const


@dataclass
class Bufferize(Pass):
    name = "bufferize"
    summary = "marshal a whole vector loop's data (an embedding row) once, with one callback per row"
    remarks: list[str] = field(default_factory=list, repr=False)

    def run(self, module: Op) -> None:
        for f in module.body.ops:
            for op in list(f.walk()):
                if op.name == "slc.for" and "vl" in op.attrs and not op.attrs.get("unrolled"):
                    try:
                        _bufferize(op)
                    except Decline as e:
                        self.remarks.append(f"{op.loc}: remark: bufferize: loop not bufferized: {e}")


def _bufferize(loop: Op) -> None:
    cbs = [o for o in loop.body.ops if o.name == "slc.callback" and o.attrs["on"] == "ite"]
    if len(cbs) != 1:
        raise Decline("it has no per-iteration callback" if not cbs else "it has several callbacks")
    lb, ub = loop.operands[0], loop.operands[1]
    if any(isinstance(v.type, StreamType) for v in (lb, ub)):
        raise Decline("its bounds come from streams, so the core cannot walk the buffer")
    cb = cbs[0]
    vl = loop.attrs["vl"]
    iv = loop.body.args[0]
    mask_streams = {o.result for o in loop.body.ops if o.name == "slc.mask"}
    # Buffers for the vector memory streams the callback reads.
    buffers: dict[Value, Value] = {}
    for h in cb.body.ops:
        s = h.operands[0] if h.name == "slc.head" else None
        t = s.type if s is not None else None
        if s is not None and s is not iv and isinstance(t, StreamType) and is_vector(t.elem) and (
                s not in mask_streams and s.owner in loop.body.ops):
            assert isinstance(t.elem, ShapedType)
            buf = new_op("slc.buffer", [s], [StreamType(ShapedType("memref", (None,), t.elem.elem))], loc=h.loc)
            loop.body.ops.insert(loop.body.ops.index(cb), buf)
            buf.parent = loop.body
            buffers[s] = buf.result
    loop.body.ops.remove(cb)
    # The new callback: outer heads and buffer heads first, then a core loop over the row.
    body = Block()
    new_cb = new_op("slc.callback", attrs={"on": "end"}, regions=[body], loc=cb.loc)
    b = Builder(body, loc=cb.loc)
    vmap: dict[Value, Value] = {}
    buf_vals: dict[Value, Value] = {}
    for h in cb.body.ops:
        if h.name != "slc.head" or h.operands[0] is iv or h.operands[0] in mask_streams:
            continue
        s = h.operands[0]
        if s in buffers:
            t = buffers[s].type
            assert isinstance(t, StreamType)
            buf_vals[h.result] = b.op("slc.head", [buffers[s]], [t.elem]).result
        else:
            head = b.op("slc.head", [s], [h.result.type]).result
            head.name = h.result.name
            vmap[h.result] = head
    step = b.const(vl)
    with b.loop("loop.for", lb, ub, step) as (c, inner):
        off = c if is_const(lb, 0) else inner.val("loop.subi", [c, lb], INDEX)  # buffer position
        lanes = inner.val("loop.iota", [c], ShapedType("vector", (vl,), INDEX))
        mask = inner.val("loop.tailmask", [c, ub], ShapedType("vector", (vl,), I1))
        for h in cb.body.ops:
            if h.name == "slc.head":
                s = h.operands[0]
                if s is iv:
                    vmap[h.result] = lanes
                elif s in mask_streams:
                    vmap[h.result] = mask
                elif h.result in buf_vals:
                    vmap[h.result] = inner.val("loop.vload", [buf_vals[h.result], off, mask], h.result.type)
                continue
            new = inner.op(h.name, [vmap.get(v, v) for v in h.operands], [r.type for r in h.results], dict(h.attrs))
            for old, r in zip(h.results, new.results):
                r.name = old.name
                vmap[old] = r
    row_loop = next(o for o in body.ops if o.name == "loop.for")
    inside = {row_loop.body.args[0], *(r for o in row_loop.body.ops for r in o.results)}
    for o in [o for o in row_loop.body.ops if o.name == "loop.splat" and o.operands[0] not in inside]:
        row_loop.body.ops.remove(o)  # a splat of a per-row value (a weight): once, before the row loop
        body.ops.insert(body.ops.index(row_loop), o)
        o.parent = body
    ends = [i for i, o in enumerate(loop.body.ops) if o.name == "slc.callback" and o.attrs["on"] == "end"]
    at = ends[0] if ends else len(loop.body.ops)  # first of the loop's end callbacks: rows come first
    loop.body.ops.insert(at, new_cb)
    new_cb.parent = loop.body
    used = {v for o in loop.walk() for v in o.operands}
    loop.body.ops = [o for o in loop.body.ops if o.name != "slc.mask" or o.result in used]
