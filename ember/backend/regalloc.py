"""Fit a program into the machine's register files (registers.py says what each instruction needs).

Code generation names a fresh register for every value, so a kernel with many constants or a wide mask can
need more registers than the core has.  What a register allocator for x86 would do, in the order it costs
least, each step taken only while the program does not fit:

1. constants become immediates: an `r` register written once, by an `li` of a value x86 can encode as a 32-bit
   immediate, at the top of the program, is replaced by that value wherever the operand may be an immediate
   (a `mov` from it becomes an `li`), and its `li` goes when nothing reads it any more;
2. masks are recomputed where they are used: a mask written once, by a `vmask` whose operands are immediates or
   registers nothing else writes, is made again (one `vmask` into a fresh register) before each instruction
   that reads it, so it is live only there.

What still does not fit is an error naming the registers (registers.check_registers): spilling a vector
accumulator to memory is a change of algorithm the compiler's passes make (bufferize), not a register
allocator's.
"""

from __future__ import annotations

import copy
from typing import Any

from ..isa import WRITES_FIRST
from .dae import Instr, Label, Mem, Program, Reg, slots_for
from .registers import ENDS_BLOCK, Limits, over

IMM32 = (-(1 << 31), (1 << 31) - 1)
IMMEDIATE_SLOTS = ("I", "V", "P")


def fit_registers(p: Program, limits: Limits) -> Program:
    """`p`, or a copy of it that needs fewer registers, when it needs more than `limits` give."""
    if over(p, limits) is None:
        return p
    q = copy.deepcopy(p)
    _fold_constants(q)
    if over(q, limits) is not None:
        _remake_masks(q)
    return q


def _writes(p: Program) -> dict[Reg, list[int]]:
    out: dict[Reg, list[int]] = {}
    for i, item in enumerate(p.code):
        if isinstance(item, Instr) and item.args and isinstance(item.args[0], Reg) and item.base in WRITES_FIRST:
            out.setdefault(item.args[0], []).append(i)
    return out


def _entry(p: Program) -> int:
    """Items before the first label or control transfer: code every run executes once, first."""
    for i, item in enumerate(p.code):
        if isinstance(item, Label) or item.base in ENDS_BLOCK:
            return i
    return len(p.code)


def _fold_constants(p: Program) -> None:
    writes, entry = _writes(p), _entry(p)
    consts: dict[Reg, int] = {}
    for r, at in writes.items():
        ins = p.code[at[0]]
        if r.cls == "r" and len(at) == 1 and at[0] < entry and ins.base == "li" and isinstance(ins.args[1], int) \
                and IMM32[0] <= ins.args[1] <= IMM32[1]:
            consts[r] = ins.args[1]
    if not consts:
        return
    still_read: set[Reg] = set()
    for item in p.code:
        if not isinstance(item, Instr):
            continue
        if item.base == "mov" and item.args[1] in consts:
            item.op, item.args = "li", [item.args[0], consts[item.args[1]]]
            continue
        first = 1 if item.base in WRITES_FIRST else 0
        slots = slots_for(item.base, len(item.args))
        for j in range(first, len(item.args)):
            item.args[j] = _fold(item.args[j], slots[j].kind, consts, still_read)
    p.code = [item for item in p.code if not (isinstance(item, Instr) and item.base == "li"
                                              and item.args[0] in consts and item.args[0] not in still_read)]


def _fold(a: Any, kind: str, consts: dict[Reg, int], still_read: set[Reg]) -> Any:
    """Operand `a` of slot kind `kind` with the constants it may take as immediates put in."""
    if isinstance(a, Mem):
        return Mem(a.sym, tuple(consts.get(r, r) if isinstance(r, Reg) else r for r in a.index))  # type: ignore[arg-type]
    if isinstance(a, list):
        return [_fold(x, kind, consts, still_read) for x in a]
    if isinstance(a, Reg) and a in consts:
        if kind in IMMEDIATE_SLOTS:
            return consts[a]
        still_read.add(a)
    return a


def _remake_masks(p: Program) -> None:
    writes = _writes(p)
    fresh = 1 + max((r.n for r in writes if r.cls == "v"), default=-1)
    for r in [r for r in writes if r.cls == "v"]:
        at = writes[r]
        ins = p.code[at[0]]
        if len(at) != 1 or not isinstance(ins, Instr) or ins.base != "vmask":
            continue
        operands = [a for a in ins.args[1:3] if isinstance(a, Reg)]
        if any(len(writes.get(a, [])) > 1 for a in operands):
            continue  # an operand changes: the mask made later would differ
        out: list[Any] = []
        for i, item in enumerate(p.code):
            if isinstance(item, Instr) and i != at[0] and _reads(item, r):
                new = Reg("v", fresh)
                fresh += 1
                out.append(Instr("vmask", [new, *ins.args[1:]]))
                item.args = [_rename(a, r, new) for a in item.args]
            if i != at[0]:  # the mask made once is read nowhere now
                out.append(item)
        p.code = out
        writes = _writes(p)


def _reads(ins: Instr, r: Reg) -> bool:
    first = 1 if ins.base in WRITES_FIRST else 0
    return any(_rename(a, r, None) is not a for a in ins.args[first:])


def _rename(a: Any, old: Reg, new: Reg | None) -> Any:
    """`a` with register `old` renamed `new` (a new object where it occurs, `a` itself where not)."""
    if a == old:
        return new
    if isinstance(a, list) and old in a:
        return [new if x == old else x for x in a]
    if isinstance(a, Mem) and old in a.index:
        return Mem(a.sym, tuple(new if x == old else x for x in a.index))  # type: ignore[misc]
    return a
