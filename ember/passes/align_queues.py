"""align-queues: induction variables the core can count are no longer marshaled.

A callback that reads the head of loop L's induction variable gets it from a core variable
instead.  The variable starts at lb - step (set before the nest, or by a `beg` callback of L when L
is nested) and L's per-iteration callback adds step first thing (or, when the only reader is the end
callback of L's only inner loop, that callback does), so every callback of iteration i
(in L or nested in it) sees lb + i*step — exactly the value the queue would have carried, because
callbacks run in the order the access unit fires them.  Declined, with a remark, when lb or step
come from streams (the core does not know them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.builder import Builder
from ..ir.core import Block, Op, new_op
from ..ir.rewrite import const_value, free_var, replace_uses
from ..ir.types import INDEX, StreamType
from .base import Pass, kept


@dataclass
class AlignQueues(Pass):
    name = "align-queues"
    summary = "count loop indices on the core instead of marshaling them through the queue"
    remarks: list[str] = field(default_factory=list, repr=False)

    def run(self, module: Op) -> None:
        self.next_var = free_var(module)
        for f in module.body.ops:
            for root in [o for o in f.body.ops if o.name == "slc.for" and not kept(o)]:
                for loop in [o for o in root.walk() if o.name == "slc.for" and "vl" not in o.attrs]:
                    self.align(f, root, loop)

    def align(self, f: Op, root: Op, loop: Op) -> None:
        iv = loop.body.args[0]
        heads = [o for o in loop.walk() if o.name == "slc.head" and o.operands[0] is iv]
        if not heads:
            return
        lb, step = loop.operands[0], loop.operands[2]
        if isinstance(lb.type, StreamType) or isinstance(step.type, StreamType):
            self.remarks.append(f"{loop.loc}: remark: align-queues: index still marshaled: "
                                f"the loop's start or step comes from a stream")
            return
        var = self.next_var
        self.next_var += 1
        # Start value lb - step: before the nest for a top-level loop, else on the loop's beg event.
        if loop is root:
            b = Builder(f.body, f.body.ops.index(root), loop.loc)
        else:
            cb = new_op("slc.callback", attrs={"on": "beg"}, regions=[Block()], loc=loop.loc)
            self.insert_callback(loop, cb, first=True)
            b = Builder(cb.body, loc=loop.loc)
        b.op("loop.setvar", [b.val("loop.subi", [lb, step], INDEX)], [], {"var": var})
        # The per-iteration callback counts first, then everything reads the count.
        ite = next((o for o in loop.body.ops if o.name == "slc.callback" and o.attrs["on"] == "ite"), None)
        if ite is None:
            ite = self.once_per_iteration(loop, heads)
        if ite is None:
            ite = new_op("slc.callback", attrs={"on": "ite"}, regions=[Block()], loc=loop.loc)
            self.insert_callback(loop, ite, first=False)
        n_heads = sum(1 for o in ite.body.ops if o.name == "slc.head")
        b = Builder(ite.body, n_heads, loop.loc)
        now = b.val("loop.addi", [b.val("loop.getvar", [], INDEX, var=var), step], INDEX)
        b.op("loop.setvar", [now], [], {"var": var})
        for h in heads:
            block = h.parent
            assert block is not None
            if block is ite.body:
                value = now
            else:
                get = new_op("loop.getvar", [], [INDEX], {"var": var}, loc=h.loc)
                block.ops.insert(block.ops.index(h), get)
                get.parent = block
                value = get.result
            value.name = value.name or h.result.name
            block.ops.remove(h)
            replace_uses(f, h.result, value)

    @staticmethod
    def once_per_iteration(loop: Op, heads: list[Op]) -> Op | None:
        """A callback that already fires exactly once per iteration of `loop` and is the only reader of
        its index: the end callback of its only inner loop with callbacks (a traversal ends once, even
        when empty), or the per-iteration callback of such a loop that is one vector head (a whole row,
        as `unroll` leaves it).  Counting there saves a token per iteration; any other reader would see
        the count too late."""
        inner = [o for o in loop.body.ops  # loops that fire no callback (a prefetch) send no tokens
                 if o.name == "slc.for" and any(c.name == "slc.callback" for c in o.walk())]
        holders = {id(h.parent.parent): h.parent.parent for h in heads if h.parent and h.parent.parent}
        if len(inner) != 1 or len(holders) != 1:
            return None
        cb = next(iter(holders.values()))
        if cb.name != "slc.callback" or cb.parent is not inner[0].body:
            return None
        lb, ub = (const_value(v) for v in inner[0].operands[:2])
        vl = inner[0].attrs.get("vl")
        one_head = isinstance(lb, int) and isinstance(ub, int) and isinstance(vl, int) and ub - lb <= vl
        return cb if cb.attrs["on"] == "end" or (cb.attrs["on"] == "ite" and one_head) else None

    @staticmethod
    def insert_callback(loop: Op, cb: Op, first: bool) -> None:
        """beg callbacks go first; an ite callback goes after the streams, before inner loops."""
        ops = loop.body.ops
        at = 0 if first else next((i for i, o in enumerate(ops) if o.name in ("slc.for", "slc.callback")
                                   and not (o.name == "slc.callback" and o.attrs["on"] == "beg")), len(ops))
        ops.insert(at, cb)
        cb.parent = loop.body
