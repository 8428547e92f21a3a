"""init-ahead: a reduction's output rows are initialised a few iterations before they are updated.

Lowering zeroes (or fills with -inf, ...) every output row in one nest before the access loop runs,
so at paper scale a row has long left the caches when its first update arrives, and the in-order
core waits for each of its lines in turn.  After align-queues the core counts the outer loop in
the loop's `ite` callback; this pass shrinks the up-front nest to the first `rows` rows and lets
that callback, once it has counted i, initialise row i + rows * step (guarded by `loop.if`).
Stores do not stall the core, so the row's lines fill in the background.  The distance must cover
a DRAM fill when iterations are short (a message-passing node has 1-6 lookups of ~25 cycles) and
stay cached when they are long (an RM3 bag streams 640 table lines): 16 rows does both on the
default machine.  Results are unchanged: a row is first read in its own iteration, which the
access unit fires after the one that initialised it.

Applies when, for an output `m` the outer loop's callbacks update:
  - the nearest nest before the loop that touches `m` only stores to `m[iv, ...]`, reads no
    memory and has the loop's own bounds and a constant positive step;
  - nothing between that nest and the loop touches `m`;
  - every access to `m` inside the loop is at row `getvar` of the loop's counter, and no vector
    access runs along the rows (a 1-D output);
  - the counter is align-queues' own: set to lb - step before the loop and advanced by step only
    in its ite callback.
Declines with a remark otherwise, e.g. when the index is not counted on the core (run align-queues
first).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..dialects.loop import LOADS, STORES
from ..ir.builder import Builder
from ..ir.core import Block, Op, Value
from ..ir.diagnostics import EmberError
from ..ir.rewrite import clone, const_value
from ..ir.types import INDEX, ShapedType
from .base import Pass, kept

PURE = {"loop.const", "loop.splat", "loop.tailmask", "loop.iota", "loop.cast", "loop.select", "loop.cmpi",
        "loop.for", "loop.addi", "loop.subi", "loop.muli", "loop.divi", "loop.remi", "loop.mini", "loop.maxi",
        "loop.addf", "loop.subf", "loop.mulf", "loop.divf", "loop.maxf", "loop.minf", "loop.fmaf"}


def accessed(op: Op) -> tuple[Value, Value] | None:
    """(memref, first index) of a load or store, else None."""
    at = 0 if op.name in LOADS else 1 if op.name in STORES else None
    if at is None or len(op.operands) < at + 2:
        return None
    return op.operands[at], op.operands[at + 1]


def same(a: Value, b: Value) -> bool:
    """Two index values known equal: the same value or equal constants."""
    return a is b or (const_value(a) is not None and const_value(a) == const_value(b))


def rank(m: Value) -> int:
    return (m.type.rank or 0) if isinstance(m.type, ShapedType) else 0


@dataclass
class InitAhead(Pass):
    name = "init-ahead"
    summary = "initialise a reduction's output rows a few iterations ahead of their updates (keeps them cached)"
    rows: int = 16
    remarks: list[str] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if self.rows < 1:
            raise EmberError(f"pass 'init-ahead': option 'rows' must be at least 1, got {self.rows}")

    def run(self, module: Op) -> None:
        for f in module.body.ops:
            for root in [o for o in f.body.ops if o.name == "slc.for" and not kept(o)]:
                self.ahead(f, root)

    def ahead(self, f: Op, root: Op) -> None:
        updated = {id(a[0]): a[0] for o in root.walk() if (a := accessed(o)) is not None}
        nests = {k: n for k, m in updated.items() if (n := self.init_nest(f, root, m)) is not None}
        if not nests:
            return
        counted = self.counter(f, root)
        if counted is None:
            self.remarks.append(f"{root.loc}: remark: init-ahead: output rows still initialised up front: "
                                f"the loop's index is not counted on the core as align-queues counts it (run it first)")
            return
        ite, at, var, now = counted
        for k, nest in nests.items():
            if not self.rows_of(root, updated[k], var, now):
                self.remarks.append(f"{root.loc}: remark: init-ahead: rows of '{updated[k].name}' initialised "
                                    f"up front: the loop updates a row other than its own")
                continue
            lb, ub, step = nest.operands
            # Up front: only the first `rows` rows.
            b = Builder(f.body, f.body.ops.index(nest), nest.loc)
            stride = const_value(step)
            assert isinstance(stride, int)  # init_nest checked it
            ahead = b.const(self.rows * stride)
            nest.operands = [lb, b.val("loop.mini", [b.val("loop.addi", [lb, ahead], INDEX), ub], INDEX), step]
            # In iteration i's ite callback, after counting: row i + rows * step, if there is one.
            b = Builder(ite.body, at, nest.loc)
            nxt = b.val("loop.addi", [now, ahead], INDEX)
            inner = Builder(Block(), loc=nest.loc)
            vmap: dict[Value, Value] = {nest.body.args[0]: nxt}
            for op in nest.body.ops:
                inner.insert(clone(op, vmap))
            b.op("loop.if", [nxt, ub], [], {"pred": "lt"}, [inner.block])
            at = b.index

    @staticmethod
    def init_nest(f: Op, root: Op, m: Value) -> Op | None:
        """The nest before `root` that initialises rows of `m`, if it fits (see the module docstring)."""
        ops = f.body.ops
        for op in reversed(ops[:ops.index(root)]):
            touches = [o for o in op.walk() if m in o.operands]
            if not touches:
                continue
            if op.name != "loop.for" or not same(op.operands[0], root.operands[0]) \
                    or not same(op.operands[1], root.operands[1]) or not same(op.operands[2], root.operands[2]):
                return None
            step = const_value(op.operands[2])
            if not isinstance(step, int) or step <= 0:
                return None
            iv = op.body.args[0]
            for o in op.walk():
                if o is not op and o.name not in PURE and o.name not in STORES:
                    return None
                if o.name in STORES and (accessed(o) != (m, iv) or (o.name != "loop.store" and rank(m) < 2)):
                    return None
            if any(o.name in STORES and o.operands[0] is m for o in op.walk()):
                return None  # m itself stored as a value
            return op
        return None

    @staticmethod
    def counter(f: Op, root: Op) -> tuple[Op, int, int, Value] | None:
        """The loop's ite callback, the position after its count, the variable and the counted value:
        align-queues' form only, a variable set to lb - step just before the loop and, inside it, only
        by `setvar (getvar + step)` in the ite callback, so that it holds row i from that point on."""
        ite = next((o for o in root.body.ops if o.name == "slc.callback" and o.attrs["on"] == "ite"), None)
        if ite is None:
            return None
        lb, step = root.operands[0], root.operands[2]
        for i, op in enumerate(ite.body.ops):
            if op.name != "loop.setvar":
                continue
            now, var = op.operands[0], op.attrs["var"]
            add = now.owner
            if not (isinstance(add, Op) and add.name == "loop.addi" and same(add.operands[1], step)):
                continue
            get = add.operands[0].owner
            if not (isinstance(get, Op) and get.name == "loop.getvar" and get.attrs["var"] == var):
                continue
            if any(o.name == "loop.setvar" and o.attrs["var"] == var and o is not op for o in root.walk()):
                continue
            ops = f.body.ops
            start = next((o for o in reversed(ops[:ops.index(root)])
                          if any(x.name == "loop.setvar" and x.attrs["var"] == var for x in o.walk())), None)
            init = start.operands[0].owner if start is not None and start.name == "loop.setvar" else None
            if isinstance(init, Op) and init.name == "loop.subi" and same(init.operands[0], lb) \
                    and same(init.operands[1], step):
                return ite, i + 1, var, now
        return None

    @staticmethod
    def rows_of(root: Op, m: Value, var: int, now: Value) -> bool:
        """Every access to `m` in the loop is inside a callback, at the row the counter holds."""
        for o in root.walk():
            if m not in o.operands:
                continue
            a = accessed(o)
            if a is None or a[0] is not m or (o.name not in ("loop.load", "loop.store") and rank(m) < 2):
                return False  # (a vector access of a 1-D output runs along the rows: it reaches rows ahead)
            row = a[1].owner
            if not (a[1] is now or (isinstance(row, Op) and row.name == "loop.getvar" and row.attrs["var"] == var)):
                return False
        return True
