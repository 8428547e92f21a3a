"""The registers a program needs at each instruction, against the machine's register files (docs/isa.md,
*Register file*).

A DAE program names as many registers as it likes; a real core has a fixed file, and a kernel that keeps more
values live than it has registers is not one a real core could run at the simulated speed.  Three files:

- general: the `r` registers, one each;
- vector: the `f` registers (a scalar float lives in a vector register on x86) and the vectors that are not
  masks, each as many machine registers as its lanes x element bits span of `simd_bits`;
- mask: boolean vectors (AVX-512's k registers), one per 64 lanes.

A vector only `vsplat` writes holds one machine register however wide (its pieces are one broadcast, as the
timing model counts it), and a mask only an all-true `vmask` writes holds none (what it predicates is unmasked).
A DAE vector wider than the machine's stands for several machine instructions.  Inside one basic block, a
compiler runs a chain of them piece by piece (strip-mining: every instruction is lane-wise), so a vector that is
written and last read in the same block needs one machine register at a time.  A vector live into or out of its
block (an accumulator, a value carried round a loop or between callbacks) holds all of its pieces.

Liveness is solved backwards over regflow's graph, so a value carried from one callback to the next is live
through the dispatch.  A vector whose lane count cannot be known before the run (none the compiler or the
experts write) counts as one register.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from .. import isa
from ..ir.diagnostics import EmberError
from ..ir.types import ScalarType
from .dae import MAX_LANES, Access, Instr, Label, Program, Reg
from .dae_text import format_instr
from .regflow import BRANCHES, flow

MASK_LANES = 64  # lane bits one AVX-512 mask register holds
ENDS_BLOCK = (*BRANCHES, "jmp", "ret", "halt", "run")
FILES = {"general": "general_registers", "vector": "vector_registers", "mask": "mask_registers"}


class Limits(Protocol):
    """The register files of a core: the machine's execute unit, or the compiler's target (cost.Target)."""

    simd_bits: int
    general_registers: int
    vector_registers: int
    mask_registers: int


@dataclass(frozen=True)
class VShape:
    """A vector register's element type and lane count."""

    dtype: str
    lanes: int


@dataclass
class Need:
    """The registers of each file live at one instruction: (register, machine registers it holds)."""

    index: int
    files: dict[str, list[tuple[Reg, int]]] = field(default_factory=dict)

    def count(self, file: str) -> int:
        return sum(k for _, k in self.files.get(file, []))


def vector_shape(ins: Instr, known: dict[int, VShape], symbols: list) -> VShape | None:
    """The shape of the vector `ins` writes, from its operands' (None where they are not yet known or it
    writes none); a pop's comes from the rule that pushes it (popped_shapes)."""
    a, kind = ins.args, isa.OPS[ins.base].kind
    suffix = ins.op.split(".", 1)[1] if "." in ins.op else None

    def of(r: object) -> VShape | None:
        return known.get(r.n) if isinstance(r, Reg) and r.cls == "v" else None

    if kind in ("vload", "gather"):
        m = of(a[2])
        return VShape(symbols[a[1].sym].dtype, m.lanes) if m else None
    if kind == "splat":
        return VShape(suffix or "f32", a[2])
    if kind == "iota":
        return VShape("i64", a[2])
    if kind == "mask":
        return VShape("bool", a[3])
    if kind == "vfloat":
        x = of(a[1])
        return VShape(suffix or x.dtype, x.lanes) if x else None
    if kind == "vfma":
        x = of(a[1])
        return VShape("f32", x.lanes) if x else None
    if kind == "vselect":  # a scalar condition picks either whole vector: the wider
        x, y = of(a[2]), of(a[3])
        return x if y is None or (x is not None and _bits(x) >= _bits(y)) else y
    if kind == "vconvert":
        x = of(a[1])
        return VShape(suffix, x.lanes) if x and suffix else None
    return None


def _widest_pushed(acc: Access, symbols: list) -> dict[int, VShape]:
    """Each token's widest vector operand over every rule that pushes it: a callback's pops may take any of
    them (its pops can sit behind branches, and two rules may push one token).  A buffer popped into a register
    is as wide as a vector may be (MAX_LANES): its length is known only at run time."""
    vl = {i.args[0].n: i.args[3] for i in acc.body if i.base == "vtu"}
    streams: dict[int, VShape] = {}
    for i in acc.body:
        a = i.args
        if i.base == "mask":
            streams[a[0].n] = VShape("bool", vl.get(a[1].n, 0))
        elif i.base == "mem":
            last = a[1].index[-1] if a[1].index else None
            lanes = vl.get(last.n, 0) if isinstance(last, Reg) and last.cls == "t" else 0
            if lanes:
                streams[a[0].n] = VShape(symbols[a[1].sym].dtype, lanes)
        elif i.base == "buf" and a[1].n in streams:
            streams[a[0].n] = VShape(streams[a[1].n].dtype, MAX_LANES)
    out: dict[int, VShape] = {}
    for i in acc.body:
        if i.base == "on" and len(i.args) > 3:
            for r in i.args[2]:
                vs = VShape("i64", vl[r.n]) if isinstance(r, Reg) and r.cls == "t" and r.n in vl else \
                    streams.get(r.n) if isinstance(r, Reg) and r.cls == "s" else None
                token = i.args[3]
                if vs is not None and (token not in out or _bits(vs) > _bits(out[token])):
                    out[token] = vs
    return out


def _callback(p: Program, succ: list[list[int]], start: int) -> Iterator[Instr]:
    """The instructions a callback that starts at code item `start` can run before its `ret`, over regflow's graph
    (a `ret`'s successors are dispatchers, past the code, and are not followed)."""
    seen, todo = {start}, [start]
    while todo:
        i = todo.pop()
        item = p.code[i]
        if isinstance(item, Instr):
            yield item
        for j in succ[i]:
            if j < len(p.code) and j not in seen:
                seen.add(j)
                todo.append(j)


def vector_shapes(p: Program, succ: list[list[int]]) -> dict[int, VShape]:
    """Every v register's shape, the widest of its writes (a register reused for two shapes holds the larger);
    `succ` is regflow's graph of `p`."""
    known: dict[int, VShape] = {}

    def note(n: int, vs: VShape | None) -> bool:
        if vs is None or not vs.lanes:
            return False
        old = known.get(n)
        if old is None or _bits(vs) > _bits(old):
            known[n] = vs
            return True
        return False

    labels = {item.name: i for i, item in enumerate(p.code) if isinstance(item, Label)}
    for acc in p.access:  # a vector a callback pops is as wide as the widest its token brings
        for token, vs in _widest_pushed(acc, p.symbols).items():
            if f"{acc.name}.{token}" in labels:
                for item in _callback(p, succ, labels[f"{acc.name}.{token}"]):
                    if item.base == "pop" and isinstance(item.args[0], Reg) and item.args[0].cls == "v":
                        note(item.args[0].n, vs)
    for _ in range(len(p.code) + 1):  # to a fixed point: an operand may be written further down the code
        changed = False
        for item in p.code:
            if isinstance(item, Instr) and item.args and isinstance(item.args[0], Reg) and item.args[0].cls == "v" \
                    and item.base in isa.WRITES_FIRST:
                changed |= note(item.args[0].n, vector_shape(item, known, p.symbols))
        if not changed:
            break
    return known


def _bits(vs: VShape) -> int:
    """The vector's width in bits: a mask's lane is one bit."""
    return vs.lanes * (1 if _is_mask(vs) else 8 * ScalarType(vs.dtype).bytes)


def _is_mask(vs: VShape) -> bool:
    return vs.dtype in ("bool", "i1")


def _all_true(ins: Instr) -> bool:
    """A vmask whose every lane is on whatever the run: no register, as the instructions it predicates are
    unmasked."""
    _, start, bound, lanes = ins.args
    return isinstance(start, int) and isinstance(bound, int) and bound - start >= lanes


def _cheap(p: Program) -> dict[int, int]:
    """v registers that hold fewer machine registers than their width: those only a `vsplat` writes hold one
    (every piece is the same broadcast, as the timing model counts it), those only an all-true `vmask` writes
    none."""
    writes: dict[int, set[int]] = {}
    for item in p.code:
        if isinstance(item, Instr) and item.base in isa.WRITES_FIRST and item.args:
            r = item.args[0]
            if isinstance(r, Reg) and r.cls == "v":
                kind = isa.OPS[item.base].kind
                writes.setdefault(r.n, set()).add(1 if kind == "splat" else 0 if kind == "mask" and _all_true(item)
                                                  else -1)
    return {n: ks.pop() for n, ks in writes.items() if len(ks) == 1 and -1 not in ks}


def _file_and_size(r: Reg, shapes: dict[int, VShape], cheap: dict[int, int], simd_bits: int) -> tuple[str, int]:
    """Which file register r lives in and how many of its registers r holds whole."""
    if r.cls == "r":
        return "general", 1
    if r.cls == "f":
        return "vector", 1
    vs = shapes.get(r.n)
    file = "mask" if vs is not None and _is_mask(vs) else "vector"
    if r.n in cheap:
        return file, cheap[r.n]
    if vs is None:
        return file, 1
    if _is_mask(vs):
        return file, max(1, math.ceil(vs.lanes / MASK_LANES))
    return file, max(1, math.ceil(_bits(vs) / simd_bits))


def needs(p: Program, simd_bits: int) -> list[Need]:
    """The registers live at each instruction of `.code` that a run can reach (before or after it, whichever
    needs more in each file), with what each holds."""
    n = len(p.code)
    if n == 0:
        return []
    f = flow(p)
    regs = sorted(f.bit, key=f.bit.get)  # type: ignore[arg-type]
    use = [0] * len(f.succ)
    for i, rs in enumerate(f.reads):
        for _, r in rs:
            use[i] |= 1 << f.bit[r]
    pred: list[list[int]] = [[] for _ in f.succ]
    for i, ss in enumerate(f.succ):
        for j in ss:
            pred[j].append(i)
    live_in, live_out = [0] * len(f.succ), [0] * len(f.succ)
    work = list(range(len(f.succ)))
    queued = bytearray(b"\x01" * len(f.succ))
    while work:
        i = work.pop()
        queued[i] = 0
        out = 0
        for j in f.succ[i]:
            out |= live_in[j]
        live_out[i] = out
        new = use[i] | (out & ~f.gen[i])
        if new != live_in[i]:
            live_in[i] = new
            for j in pred[i]:
                if not queued[j]:
                    queued[j] = 1
                    work.append(j)
    reach = _reachable(f.succ)
    shapes, cheap = vector_shapes(p, f.succ), _cheap(p)
    size = [_file_and_size(r, shapes, cheap, simd_bits) for r in regs]
    first, last = _blocks(p)
    out_needs = []
    for i, item in enumerate(p.code):
        if isinstance(item, Label) or i not in reach:
            continue
        whole = live_in[first[i]] | live_out[last[i]]  # live across the block's edge: every piece at once
        best = Need(i)
        for bits in (live_in[i], live_out[i] | f.gen[i]):
            need = Need(i)
            while bits:
                k = (bits & -bits).bit_length() - 1
                bits &= bits - 1
                file, held = size[k]
                need.files.setdefault(file, []).append((regs[k], held if whole >> k & 1 else min(held, 1)))
            for file in FILES:
                if need.count(file) > best.count(file):
                    best.files[file] = need.files[file]
        out_needs.append(best)
    return out_needs


def _blocks(p: Program) -> tuple[list[int], list[int]]:
    """The first and last code item of each item's basic block (a label starts one; a branch, jump, ret, halt or
    run ends one)."""
    n = len(p.code)
    targets = {a.args[-1].name for a in p.code if isinstance(a, Instr) and (a.base in BRANCHES or a.base == "jmp")}
    targets |= {f"{acc.name}.{i.args[3]}" for acc in p.access for i in acc.body if i.base == "on" and len(i.args) > 3}
    entered = [isinstance(item, Label) and item.name in targets for item in p.code]  # a label nothing enters: no edge
    first, last = [0] * n, [0] * n
    start = 0
    for i in range(n):
        if entered[i] or (i > 0 and isinstance(p.code[i - 1], Instr) and p.code[i - 1].base in ENDS_BLOCK):
            start = i
        first[i] = start
    end = n - 1
    for i in range(n - 1, -1, -1):
        item = p.code[i]
        if i + 1 < n and (entered[i + 1] or (isinstance(item, Instr) and item.base in ENDS_BLOCK)):
            end = i
        last[i] = end
    return first, last


def _reachable(succ: list[list[int]]) -> set[int]:
    seen, stack = {0}, [0]
    while stack:
        for j in succ[stack.pop()]:
            if j not in seen:
                seen.add(j)
                stack.append(j)
    return seen


def over(p: Program, limits: Limits) -> tuple[Need, str, int] | None:
    """The first instruction, in code order, that needs more registers of a file than `limits` has:
    (its needs, the file, the limit); None when the program fits."""
    for need in needs(p, limits.simd_bits):
        for file, attr in FILES.items():
            limit = getattr(limits, attr)
            if need.count(file) > limit:
                return need, file, limit
    return None


def check_registers(p: Program, limits: Limits) -> None:
    """Refuse a program that needs more registers than the core has (`limits`: the machine's execute unit),
    naming the registers and the limit."""
    found = over(p, limits)
    if found is None:
        return
    need, file, limit = found
    held = sorted(need.files[file], key=lambda rk: (-rk[1], rk[0].cls, rk[0].n))
    names = ", ".join(f"{r}" + (f" ({k})" if k > 1 else "") for r, k in held[:8]) + (", ..." if len(held) > 8
                                                                                       else "")
    ins = p.code[need.index]
    raise EmberError(f"code item {need.index} ('{format_instr(ins).strip()}'): {need.count(file)} {file} registers "
                     f"are live here ({names}); the machine has {limit} (execute.{FILES[file]})")
