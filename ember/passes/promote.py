"""promote-accumulators{registers=N}: a bag's output row lives in registers across its lookups.

Scalar replacement, as compilers do for a reduction into memory across a loop, here across
callbacks: when every access to an output memref inside an access nest is a whole-row `vload` and
`vstore` at the row the outer loop counts (one callback's read-modify-write of `out[i, 0:D]`), the
row becomes a vector core variable (a register, kept between callbacks):

- it starts as the rows' initial value (the constant that lower-emb's initialisation nest stores,
  0 for sums, -inf for max), set once before the nest;
- the per-lookup callback adds into it (no load and store of the row);
- an `end` callback of the outer loop's only inner loop, which fires once per row after all of its
  lookups (an empty bag included), stores it once and resets it;
- the initialisation nest goes, since every row is stored exactly once.

`align-queues` then counts the row in that `end` callback, so a bag costs one token.  Declined,
with a remark, when the output is not a 2-D memref of rows or is read or written anywhere else in
the nest, the row is not one vector (run `unroll` and `hoist` first), its initial value is not a
constant stored by a nest over the same rows, or the accumulator needs more machine vector
registers than `registers` (default 16, half of the 32 an AVX-512 core has; refused if it is more
than `MAX_REGISTERS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir.builder import Builder
from ..ir.core import Block, Op, Value, new_op
from ..ir.diagnostics import EmberError
from ..ir.rewrite import RewritePattern, const_value, defined_in, free_var, insert_before, replace_uses, users
from ..ir.types import ShapedType
from .base import Decline, PatternPass
from .vectorize import SIMD_BITS

MAX_REGISTERS = 32  # vector registers of an AVX-512 core (zmm0-zmm31): the default machine's execute.vector_registers


@dataclass
class PromoteAccumulators(PatternPass):
    name = "promote-accumulators"
    summary = "keep a bag's output row in vector registers across its lookups; store it once per bag"
    declined: ClassVar[str] = "output row kept in memory"
    registers: int = 16

    def __post_init__(self) -> None:
        if not 1 <= self.registers <= MAX_REGISTERS:
            raise EmberError(f"pass 'promote-accumulators': registers={self.registers} is not between 1 and the "
                             f"{MAX_REGISTERS} vector registers the machine has (execute.vector_registers)")

    def patterns(self) -> list[RewritePattern]:
        return [PromoteRow(self.registers)]


@dataclass
class PromoteRow(RewritePattern):
    registers: int

    def match_and_rewrite(self, nest: Op) -> bool:
        if nest.name != "slc.for" or (nest.parent_op() or nest).name != "func":
            return False
        inside = defined_in(nest)
        # in program order (a set of Values would iterate by address, and which output is tried first decides
        # what is promoted: -O3's code changed from run to run)
        written = dict.fromkeys(o.operands[1] for o in nest.walk() if o.name in ("loop.vstore", "loop.scatter",
                                                                                  "loop.store"))
        done = False
        for out in written:
            if out in inside:
                continue
            self.promote(nest, out, inside)
            done = True
        return done

    def promote(self, nest: Op, out: Value, inside: set[Value]) -> None:
        name = f"'{out.name}'" if out.name else "the output"
        if not (isinstance(out.type, ShapedType) and out.type.rank == 2):  # accessed at [row, column]
            raise Decline(f"{name} is a {out.type}, not a 2-D memref of rows")
        accesses = [o for o in nest.walk() if out in o.operands]
        if any(o.name not in ("loop.vload", "loop.vstore") for o in accesses):
            bad = next(o for o in accesses if o.name not in ("loop.vload", "loop.vstore"))
            raise Decline(f"{name} is accessed by '{bad.name}' (a whole-row vload and vstore are needed)")
        cbs = {id(o.parent_op()): o.parent_op() for o in accesses}
        if len(cbs) != 1:
            raise Decline(f"{name} is accessed outside one callback's top level")
        cb = next(iter(cbs.values()))
        assert cb is not None
        if cb.name != "slc.callback":
            raise Decline(f"{name} is accessed inside a branch or loop of its callback")
        iv = nest.body.args[0]
        loads = [o for o in accesses if o.name == "loop.vload"]
        stores = [o for o in accesses if o.name == "loop.vstore"]
        if len(loads) != 1 or len(stores) != 1 or cb.body.ops.index(loads[0]) > cb.body.ops.index(stores[0]):
            raise Decline(f"{name} is not read once and then written once per lookup")
        ld, st = loads[0], stores[0]
        row, col, mask = ld.operands[1:]  # a vload of a 2-D memref has exactly these (the verifier's count)
        if st.operands[2:] != [row, col, mask]:
            raise Decline(f"{name} is read and written at different places")
        h = row.owner
        if not (isinstance(h, Op) and h.name == "slc.head" and h.operands[0] is iv):
            raise Decline(f"{name}'s row is not the one the outer loop counts")
        acc = ld.result.type
        assert isinstance(acc, ShapedType) and acc.shape
        full = out.type.shape[-1] if isinstance(out.type, ShapedType) and out.type.shape else None
        m = mask.owner
        whole = (const_value(col) == 0 and isinstance(m, Op) and m.name == "loop.tailmask"
                 and const_value(m.operands[0]) == 0 and const_value(m.operands[1]) == full
                 and acc.shape[0] >= (full or 0))
        if full is None or not whole or mask in inside:
            raise Decline(f"{name}'s row is not one vector with a constant all-true mask "
                          "(run unroll and hoist first)")
        regs = -(-acc.shape[0] * acc.elem.bytes * 8 // SIMD_BITS)
        if regs > self.registers:
            raise Decline(f"a row of {name} takes {regs} vector registers, more than registers={self.registers}")
        inner = [o for o in nest.body.ops if o.name == "slc.for"]
        if len(inner) != 1 or not _contains(inner[0], cb):
            raise Decline("the outer loop does not have exactly one inner loop around the lookups")
        lookups = inner[0]
        if any(o.name == "slc.callback" and o.attrs["on"] == "end" for o in lookups.body.ops):
            raise Decline("the lookups loop already has an end callback")
        init, splat = _init_nest(nest, out)
        value = splat.operands[0]
        # Rewrite: the variable starts at the initial value, the lookups accumulate into it, the row's
        # end stores it and starts the next row.
        func = nest.parent_op()
        assert func is not None
        var = free_var(func)
        b = Builder(nest.parent, nest.parent.ops.index(nest), nest.loc)  # type: ignore[arg-type]
        if value in defined_in(init):  # the constant goes with the initialisation nest: make it again here
            value = b.const(const_value(value), value.type)  # type: ignore[arg-type]
        b.op("loop.setvar", [b.val("loop.splat", [value], acc)], [], {"var": var})
        get = new_op("loop.getvar", [], [acc], {"var": var}, loc=ld.loc)
        insert_before(ld, get)
        replace_uses(nest, ld.result, get.result)
        cb.body.ops.remove(ld)
        insert_before(st, new_op("loop.setvar", [st.operands[0]], [], {"var": var}, loc=st.loc))
        cb.body.ops.remove(st)
        if not users(nest, row):
            cb.body.ops.remove(h)
        end = new_op("slc.callback", attrs={"on": "end"}, regions=[Block()], loc=lookups.loc)
        lookups.body.ops.append(end)
        end.parent = lookups.body
        e = Builder(end.body, loc=lookups.loc)
        here = e.val("slc.head", [iv], row.type)
        e.op("loop.vstore", [e.val("loop.getvar", [], acc, var=var), out, here, col, mask])
        e.op("loop.setvar", [e.val("loop.splat", [value], acc)], [], {"var": var})
        init.parent.ops.remove(init)  # type: ignore[union-attr]
        if not users(func, splat.result):  # the initialisation's splat, now unread
            splat.parent.ops.remove(splat)  # type: ignore[union-attr]


def _contains(outer: Op, op: Op) -> bool:
    return any(o is op for o in outer.walk())


def _init_nest(nest: Op, out: Value) -> tuple[Op, Op]:
    """The nest before `nest` that stores one constant to every row `nest` counts, and the splat of that
    constant it stores; nothing between them may touch `out`."""
    block = nest.parent
    assert block is not None
    before = block.ops[:block.ops.index(nest)]
    for k in range(len(before) - 1, -1, -1):
        op = before[k]
        if not any(out in o.operands for o in op.walk()):
            continue
        if op.name == "loop.for" and op.operands[:2] == nest.operands[:2] and const_value(op.operands[2]) == 1:
            stores = [o for o in op.walk() if out in o.operands]
            splat = _stored_splat(op, stores)
            if splat is not None:
                return op, splat
        break
    raise Decline("the output's rows do not start as one constant stored over the rows the loop counts")


def _stored_splat(init: Op, stores: list[Op]) -> Op | None:
    """The splat of a constant that `init` stores into every column of its row, or None."""
    if len(stores) != 1 or stores[0].name != "loop.vstore":
        return None
    st = stores[0]
    src = st.operands[0].owner
    if not (isinstance(src, Op) and src.name == "loop.splat" and const_value(src.operands[0]) is not None):
        return None
    if st.operands[2] is not init.body.args[0]:
        return None
    cols = st.parent_op()
    full = st.operands[1].type.shape[-1] if isinstance(st.operands[1].type, ShapedType) else None
    if cols is init:  # the row in one store
        ok = const_value(st.operands[3]) == 0
    else:
        ok = (cols is not None and cols.name == "loop.for" and cols.parent_op() is init
              and st.operands[3] is cols.body.args[0] and const_value(cols.operands[0]) == 0
              and const_value(cols.operands[1]) == full)
    return src if ok else None
