"""Which registers the execute-unit program has written before each read (docs/isa.md, *Registers*).

r and f registers start at 0, yet a read of one that no path from the start of the program writes is
almost surely a mistake, so the assembler refuses it ("may be written").  A v register has no initial
value at all, not even a lane count, so it must be written on every path to its read ("must be
written").  Both are forward dataflow problems over one control-flow graph of the whole `.code`:

- an item flows into the next one; a branch also into its label, `jmp` only into its label, `halt`
  and `ret` nowhere by themselves;
- `run A` flows into A's dispatcher, which flows into every case label `A.k` that A's rules name and,
  through A's return point, back to the code after each `run A` (a run may push no token at all);
- a `ret` flows back into the dispatcher of every access program whose case labels reach it without
  passing a `ret`, so the next callback may be any of A's, or none.

One dispatcher and one return point per access program keep the graph linear in the program's size.
Register sets are Python ints used as bit sets, and a worklist visits items in code order, so a
solution takes a few passes over the code for ordinary loop nests.
"""

from __future__ import annotations

from dataclasses import dataclass
from heapq import heappop, heappush

from ..isa import WRITES_FIRST
from .dae import Instr, Label, Mem, Program, Reg

BRANCHES = ("blt", "bge", "beq")


def _reads(ins: Instr) -> list[tuple[int, Reg]]:
    """(operand index, register) of every r, f or v register the instruction reads, in operand order."""
    out = []
    first = 1 if ins.base in WRITES_FIRST else 0
    for j, a in enumerate(ins.args[first:], first):
        items = a.index if isinstance(a, Mem) else a if isinstance(a, list) else (a,)
        out.extend((j, r) for r in items if isinstance(r, Reg) and r.cls in "rfv")
    return out


def _solve(succ: list[list[int]], gen: list[int], sources: list[int], every_path: bool) -> list[int | None]:
    """The set reaching each node from `sources` (None where nothing reaches): the union over paths, or with
    `every_path` the intersection; a node adds its `gen` bits."""
    into: list[int | None] = [None] * len(succ)
    queued = bytearray(len(succ))
    heap: list[int] = []
    for s in sources:
        into[s] = 0
        queued[s] = 1
        heappush(heap, s)
    while heap:
        i = heappop(heap)
        queued[i] = 0
        out = gen[i] | (into[i] or 0)  # a queued node has a set
        for j in succ[i]:
            old = into[j]
            new = out if old is None else old & out if every_path else old | out
            if new != old:
                into[j] = new
                if not queued[j]:
                    queued[j] = 1
                    heappush(heap, j)
    return into


@dataclass
class Flow:
    """The execute unit's control-flow graph over the whole `.code` (the module docstring): node i < len(code) is
    code item i, then a dispatcher and a return point per access program; each node's successors, the registers
    it reads (operand index, register) and the one it writes first, as a bit of `bit`."""

    succ: list[list[int]]
    reads: list[list[tuple[int, Reg]]]
    gen: list[int]
    bit: dict[Reg, int]


def flow(p: Program) -> Flow:
    """The graph of `p`, which must otherwise be valid (labels defined, every case label a rule names present)."""
    code = p.code
    n = len(code)
    labels = {item.name: i for i, item in enumerate(code) if isinstance(item, Label)}
    acc = {a.name: k for k, a in enumerate(p.access)}
    dispatcher = [n + 2 * k for k in range(len(p.access))]  # virtual nodes after the code items
    back = [n + 2 * k + 1 for k in range(len(p.access))]
    succ: list[list[int]] = [[] for _ in range(n + 2 * len(p.access))]
    within: list[list[int]] = [[] for _ in range(n)]  # edges inside one callback or the main code
    cases: list[list[int]] = []
    for k, a in enumerate(p.access):
        tokens = {ins.args[3] for ins in a.body if ins.op == "on" and len(ins.args) > 3}
        cases.append(sorted(labels[f"{a.name}.{t}"] for t in tokens))
        succ[dispatcher[k]] = cases[k] + [back[k]]
    bit: dict[Reg, int] = {}
    gen = [0] * len(succ)
    reads: list[list[tuple[int, Reg]]] = [[] for _ in range(len(succ))]
    for i, item in enumerate(code):
        nxt = [i + 1] if i + 1 < n else []
        if isinstance(item, Label):
            within[i] = succ[i] = nxt
            continue
        base = item.base
        if base == "jmp":
            within[i] = [labels[item.args[0].name]]
        elif base in BRANCHES:
            within[i] = nxt + [labels[item.args[2].name]]
        elif base == "run":
            k = acc[item.args[0]]
            within[i] = nxt
            succ[i] = [dispatcher[k]]
            succ[back[k]].extend(nxt)
        elif base not in ("halt", "ret"):
            within[i] = nxt
        if base != "run":
            succ[i] = list(within[i])
        reads[i] = _reads(item)
        for _, r in reads[i]:
            bit.setdefault(r, len(bit))
        if base in WRITES_FIRST and isinstance(item.args[0], Reg):
            gen[i] = 1 << bit.setdefault(item.args[0], len(bit))
    # which access programs' callbacks each ret ends: the case labels that reach it from within
    owners_gen = [0] * n
    for k, labs in enumerate(cases):
        for i in labs:
            owners_gen[i] |= 1 << k
    owners = _solve(within, owners_gen, sorted({i for labs in cases for i in labs}), False)
    for i, item in enumerate(code):
        own = owners[i] if isinstance(item, Instr) and item.base == "ret" else None
        while own:
            k = (own & -own).bit_length() - 1
            succ[i].append(dispatcher[k])
            own &= own - 1
    return Flow(succ, reads, gen, bit)


def unwritten_read(p: Program) -> tuple[int, int, Reg, bool] | None:
    """The first read, in code order, of a register the rule refuses: (code index, operand index, register,
    whether it is a v register written on some paths but not all); None when every read is fine.
    `p` must otherwise be valid (labels defined, every case label a rule names present)."""
    n = len(p.code)
    if n == 0:
        return None
    f = flow(p)
    succ, gen, reads, bit = f.succ, f.gen, f.reads, f.bit
    may = _solve(succ, gen, [0], False)
    must = _solve(succ, gen, [0], True)
    for i in range(n):
        some, every = may[i], must[i]
        if some is None or every is None:
            continue  # no path reaches it: it never runs
        for j, r in reads[i]:
            b = 1 << bit[r]
            if not some & b:
                return i, j, r, False
            if r.cls == "v" and not every & b:
                return i, j, r, True
    return None
