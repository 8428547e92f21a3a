"""The instruction table: one record per DAE opcode, read by every tool that needs to know an instruction.

As LLVM describes each instruction once in TableGen for its scheduler, assembler and `llvm-mca`, a row here is
the only place that says what an opcode takes (its operand signature, which the text parser, the assembler's
checker and the printer read), which register it writes first (register flow, both engines' scoreboards), how
it is timed (its uops: a latency field of the machine's execute unit and a pipe group each), what value it
computes (`py`, the reference engine's, and beside it `c`, the C the fast engine emits) and when it is an error
(`fault`).  Instructions whose effect reaches memory, the queue, the host or the access unit name their `kind`;
each engine carries out a kind once, so a new opcode of an existing kind is one row.  docs/architecture.md says
how to add one.

Operand signatures use these letters:
  R int register, F float register, D r or f register, W vector register (v), G r, f or v register,
  Y r or v register, V value (register or number), I integer or register, P access value (stream s, TU t,
  parameter p, or integer), S symbol, M memory reference, L label, A access-program name, T TU, N stream,
  E event, U alu opcode, Q string, X attribute dict, *K a list of kind K (printed [a, b]), K... trailing
  variadic, K? optional trailing.

C templates name the operands read, in order, `{a}`, `{b}`, `{c}` (the written register is not among them); a
lane-wise template is per lane `l`, with `{d}` the suffix runtime.h gives its double-precision helpers.  The
helpers the templates call (wadd, floordiv, fmax_py, fma32, ...) are the fast engine's runtime.h.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir.diagnostics import EmberError
from . import floats, integers


@dataclass(frozen=True)
class Uop:
    """One micro-operation: the execute unit's latency field that times it and the pipe group it issues to."""

    latency: str
    pipe: str


@dataclass(frozen=True)
class Fault:
    """When an instruction is an error rather than a value: the test in Python and in C over the operands it
    reads, and the message (an engine adds where it happened)."""

    py: Callable[..., bool]
    c: str
    message: str


@dataclass(frozen=True)
class Opcode:
    """One opcode.  `kind` is how an engine carries it out:
      int, float:   a scalar value `py(a, b)` (`c`), a float one rounded to the suffix type;
      vfloat:       lane by lane `py(a, b)` on arrays (`c` per lane), in the vectors' element type;
      branch:       taken when `py(a, b)` (`c`); jump: always taken;
      fma, vfma:    a * b + c of float32 values, rounded once (floats.fma32), scalar or per lane;
      iota, mask:   a vector made from integers, `py(a, lanes)` / `py(a, b, lanes)` (`c` per lane);
      and one kind per opcode whose effect each engine writes out (move, select, convert, splat, vselect,
      vconvert, load, store, vload, vstore, gather, scatter, pop, popb, dim, alloc, host, run, end, access).
    `span` names the operand whose vector sets how many machine vectors the instruction takes (`pieces`):
    "a" or "b" (the first or second operand read), "" for a scalar; splat, iota and mask have rules of their own.
    """

    name: str
    operands: str
    summary: str
    kind: str
    unit: str = "execute"  # "execute" or "access"
    writes: bool = False  # its first operand is the register it writes
    uops: tuple[Uop, ...] = ()  # fixed-latency uops, in order; () where the memory system or queue times it
    pipe: str = ""  # the pipe group of an instruction the memory system times (load, store)
    py: Callable[..., Any] | None = None
    c: str = ""
    fault: Fault | None = None
    lanes: int | None = None  # the operand that is a lane count
    span: str = ""
    nontemporal: bool = False  # a store that bypasses the caches through a write-combining buffer
    alu: bool = False  # an access-unit ALU stream may compute it (`alu` names it)

    def value(self, *operands: Any, where: str) -> Any:
        """`py` of the operands, or the error of the fault they meet (`where` names the instruction or stream):
        the reference engine's one evaluation of a value row, in the core and in the access unit's ALU streams."""
        if self.fault is not None and self.fault.py(*operands):
            raise EmberError(f"{self.fault.message} in {where}")
        return self.py(*operands)  # type: ignore[misc]

    def c_lines(self, dst: str, fail: str, **operands: str) -> list[str]:
        """The fast engine's C for `dst = value`: the fault's test stopping the run with `fail`, then the value."""
        check = [f"if ({self.fault.c.format(**operands)}) {fail}"] if self.fault is not None else []
        return [*check, f"{dst} = {self.c.format(**operands)};"]


INT_ALU = (Uop("int_alu_latency", "int_alu"),)
FP_ALU = (Uop("fp_alu_latency", "fp"),)
FP_MUL = (Uop("fp_mul_latency", "fp"),)  # an FMA has a multiply's latency
BRANCH = (Uop("branch_latency", "branch"),)
SHIFT = INT_ALU  # a multiply, divide or remainder by a power-of-two immediate: shl, sar or and (uops_of)
ZERO_DIVISOR = Fault(lambda a, b: b == 0, "{b} == 0", "integer division by zero")


def _int(name: str, summary: str, py: Callable[[int, int], int], c: str, uops: tuple[Uop, ...] = INT_ALU,
         fault: Fault | None = None, alu: bool = True) -> Opcode:
    return Opcode(name, "R I I", summary, "int", writes=True, uops=uops, py=py, c=c, fault=fault, alu=alu)


def _float(name: str, summary: str, py: Callable[[float, float], float], c: str,
           uops: tuple[Uop, ...] = FP_ALU) -> Opcode:
    return Opcode(name, "F F F", summary, "float", writes=True, uops=uops, py=py, c=c)


def _vfloat(name: str, summary: str, py: Callable[[Any, Any], Any], c: str, uops: tuple[Uop, ...] = FP_ALU) -> Opcode:
    return Opcode(name, "W W W", summary, "vfloat", writes=True, uops=uops, py=py, c=c, span="a")


def _branch(name: str, summary: str, py: Callable[[Any, Any], bool], c: str) -> Opcode:
    return Opcode(name, "I I L", summary, "branch", uops=BRANCH, py=py, c=c)


def _access(name: str, operands: str, summary: str, lanes: int | None = None) -> Opcode:
    return Opcode(name, operands, summary, "access", unit="access", lanes=lanes)


ROWS: tuple[Opcode, ...] = (
    # --- execute unit: scalar values ---
    Opcode("li", "D V", "load an immediate", "move", writes=True, uops=INT_ALU),
    Opcode("mov", "D D", "copy a register", "move", writes=True, uops=INT_ALU),
    _int("add", "integer add", integers.add, "wadd({a}, {b})"),
    _int("sub", "integer subtract", integers.sub, "wsub({a}, {b})"),
    _int("mul", "integer multiply", integers.mul, "wmul({a}, {b})", uops=(Uop("int_mul_latency", "int_mul"),)),
    _int("div", "integer divide (floor)", integers.div, "floordiv({a}, {b})",
         uops=(Uop("int_div_latency", "int_div"),), fault=ZERO_DIVISOR),
    _int("rem", "integer remainder", integers.rem, "floormod({a}, {b})",
         uops=(Uop("int_div_latency", "int_div"),), fault=ZERO_DIVISOR),
    _int("min", "integer minimum", min, "mini({a}, {b})"),
    _int("max", "integer maximum", max, "maxi({a}, {b})"),
    _int("slt", "set if less", lambda a, b: int(a < b), "(int64_t)({a} < {b})", alu=False),
    _int("sle", "set if less or equal", lambda a, b: int(a <= b), "(int64_t)({a} <= {b})", alu=False),
    _int("seq", "set if equal", lambda a, b: int(a == b), "(int64_t)({a} == {b})", alu=False),
    _int("sne", "set if not equal", lambda a, b: int(a != b), "(int64_t)({a} != {b})", alu=False),
    Opcode("sel", "D R D D", "select: d = c ? a : b", "select", writes=True, uops=INT_ALU),
    _float("fadd", "float add", lambda a, b: a + b, "({a} + {b})"),
    _float("fsub", "float subtract", lambda a, b: a - b, "({a} - {b})"),
    _float("fmul", "float multiply", lambda a, b: a * b, "({a} * {b})", uops=FP_MUL),
    _float("fdiv", "float divide", floats.fdiv, "({a} / {b})", uops=(Uop("fp_div_latency", "fp_div"),)),
    _float("fmax", "float maximum (NaN-propagating)", floats.fmax, "fmax_py({a}, {b})"),
    _float("fmin", "float minimum", floats.fmin, "fmin_py({a}, {b})"),
    Opcode("ffma", "F F F F", "fused multiply-add: d = a * b + c of float32 values, rounded once (.f32)", "fma",
           writes=True, uops=FP_MUL, py=lambda a, b, c: float(floats.fma32(a, b, c)),
           c="(double)fma32((float){a}, (float){b}, (float){c})"),
    Opcode("fcvt", "F D", "integer or float to the float type of the suffix", "convert", writes=True, uops=FP_ALU),
    # --- execute unit: memory, control, the queue, the host ---
    Opcode("ld", "D M", "load an element (ld.T of a byte tensor: the bytes of one T value)", "load", writes=True,
           pipe="load"),
    Opcode("st", "D M", "store an element", "store", pipe="store"),
    Opcode("dim", "R S I", "extent of a symbol's dimension", "dim", writes=True, uops=INT_ALU),
    Opcode("alloc", "S *I", "give a temporary or output symbol its runtime shape; its contents are undefined "
           "(UNDEFINED_BYTE)", "alloc", uops=INT_ALU),
    _branch("blt", "branch if less", lambda a, b: a < b, "{a} < {b}"),
    _branch("bge", "branch if greater or equal", lambda a, b: a >= b, "{a} >= {b}"),
    _branch("beq", "branch if equal", lambda a, b: a == b, "{a} == {b}"),
    Opcode("jmp", "L", "jump", "jump", uops=BRANCH),
    Opcode("run", "A I...", "start an access program and dispatch its tokens until it is done", "run"),
    Opcode("pop", "G", "pop the next operand (scalar or vector) from the queue", "pop", writes=True, pipe="load"),
    Opcode("popb", "S", "pop a buffer operand into a scratch symbol (reused, so it stays in the caches)", "popb",
           pipe="load"),
    Opcode("ret", "", "end of a callback: back to the dispatcher", "end"),
    Opcode("halt", "", "end of the program", "end"),
    Opcode("host", "Q *S *S X", "run an ONNX operator on whole tensors (roofline cost)", "host"),
    # --- execute unit, vectors (v registers; masks are v registers of booleans) ---
    Opcode("vld", "W M W", "masked load of consecutive elements from [..., start] along the last axis", "vload",
           writes=True, pipe="load"),
    Opcode("vst", "W M W", "masked store of consecutive elements to [..., start]", "vstore", pipe="store"),
    # x86's vmovntps: LLVM 14's icelake-server model gives it vmovups's cost (2 uops, latency 1, one a cycle)
    Opcode("vstnt", "W M W", "masked non-temporal store of consecutive elements to [..., start]: no write-allocate, "
           "the lines go to DRAM around the caches through write-combining buffers", "vstore", pipe="store",
           nontemporal=True),
    Opcode("vgather", "W M W", "masked gather: the last index is a vector of indices", "gather", writes=True,
           pipe="load"),
    Opcode("vscatter", "W M W", "masked scatter: the last index is a vector of indices", "scatter", pipe="store"),
    Opcode("vsplat", "W D I", "a vector of `lanes` copies of a scalar", "splat", writes=True,
           uops=(Uop("vec_alu_latency", "shuffle"),), lanes=2),
    # vpbroadcastq of start, vpaddq 0..15 (ember/bench/kernels/)
    Opcode("viota", "W I I", "the vector start, start+1, ... of `lanes` lanes", "iota", writes=True,
           uops=(Uop("vec_alu_latency", "shuffle"), Uop("int_alu_latency", "fp")), lanes=2,
           py=lambda a, lanes: integers.iota(a, lanes), c="wadd({a}, l)"),
    # mov and sub (bound - start), vpbroadcastd, vpcmpgtd with 0..15
    Opcode("vmask", "W I I I", "the mask of `lanes` lanes where start + k < bound", "mask", writes=True,
           uops=(*INT_ALU, *INT_ALU, Uop("vec_alu_latency", "shuffle"), Uop("vec_alu_latency", "shuffle")), lanes=3,
           py=lambda a, b, lanes: integers.iota(a, lanes) < b, c="wadd(l, {a}) < {b}"),
    _vfloat("vfadd", "vector float add", lambda a, b: a + b, "{a} + {b}"),
    _vfloat("vfsub", "vector float subtract", lambda a, b: a - b, "{a} - {b}"),
    _vfloat("vfmul", "vector float multiply", lambda a, b: a * b, "{a} * {b}", uops=FP_MUL),
    _vfloat("vfdiv", "vector float divide", lambda a, b: a / b, "{a} / {b}",
            uops=(Uop("vfp_div_latency", "vfp_div"),)),
    _vfloat("vfmax", "vector float maximum", floats.vmax, "vmax_np{d}({a}, {b})"),
    _vfloat("vfmin", "vector float minimum", floats.vmin, "vmin_np{d}({a}, {b})"),
    Opcode("vfma", "W W W W", "vector fused multiply-add of float32 lanes, each rounded once (.f32)", "vfma",
           writes=True, uops=FP_MUL, span="a", py=floats.fma32, c="fma32({a}, {b}, {c})"),
    Opcode("vsel", "W Y W W", "select whole vectors (r condition) or lanes (mask)", "vselect", writes=True,
           uops=(Uop("int_alu_latency", "fp"),), span="b"),
    Opcode("vcvt", "W W", "convert every lane to the element type of the suffix", "vconvert", writes=True,
           uops=FP_ALU, span="a"),
    # --- access unit (inside .access) ---
    _access("tu", "T P P P T?", "traversal unit over [lb, ub) by step, nested in an optional parent TU"),
    _access("mem", "N M", "memory stream: one load per iteration of its TU (mem.T of a byte tensor: one T value)"),
    _access("alu", "N U P P", "integer ALU stream"),
    _access("vtu", "T P P I T?", "vector traversal unit: heads of `lanes` consecutive values in [lb, ub)", lanes=3),
    _access("mask", "N T", "stream of a vector TU's lane mask"),
    _access("buf", "N N", "every head of a vector stream over one traversal of its TU, as one buffer"),
    _access("on", "T E *P I?", "on a TU event (beg/ite/end) push operands, then an optional control token"),
)

OPS: dict[str, Opcode] = {row.name: row for row in ROWS}
ALU_OPS = tuple(row.name for row in ROWS if row.alu)  # what an access-unit `alu` stream computes
EVENTS = ("beg", "ite", "end")
TIMED = tuple(row.name for row in ROWS if row.uops or row.pipe)  # what the execute unit times and counts
WRITES_FIRST = frozenset(row.name for row in ROWS if row.writes)
LANES_OPERAND = {row.name: row.lanes for row in ROWS if row.lanes is not None}
UNDEFINED_BYTE = 0xFF  # every byte `alloc` gives (a boolean: 1): NaN floats, -1 and all-ones integers
POWER_OF_TWO_SHIFTS = ("mul", "div", "rem")  # by a power-of-two immediate: one shift or mask uop (uops_of)


def of_kind(*kinds: str) -> tuple[str, ...]:
    """The opcodes of the given kinds, in table order (the fuzzer picks from them)."""
    return tuple(row.name for row in ROWS if row.kind in kinds)


def power_of_two(v: object) -> bool:
    """A positive power-of-two integer: a multiply, divide or remainder by one is a shift or a mask on the
    core (shl, sar, and), and is timed as one (uops_of)."""
    return isinstance(v, int) and not isinstance(v, bool) and v > 0 and v & (v - 1) == 0


def undefined(shape: tuple[int, ...], dtype: Any) -> Any:
    """The array `alloc` gives: memory the host allocated and nobody wrote, which on a real machine holds what was
    there before.  Zeros would be free work no core does; a fixed pattern that is NaN as a float keeps a program
    that reads before it writes visibly wrong, and the same on both engines."""
    out = np.empty(shape, dtype=dtype)
    out.reshape(-1).view(np.uint8).fill(1 if out.dtype == np.bool_ else UNDEFINED_BYTE)  # a 0-d array too
    return out


def uops_of(row: Opcode, args: list[Any]) -> tuple[Uop, ...]:
    """The uops of a fixed-latency instruction of opcode `row`.  A multiply, floor division or floor remainder by a
    power-of-two immediate is what an x86 compiler emits as shl, sar or and (the same values, as docs/isa.md defines
    div and rem): one integer-ALU uop, not the multiplier or the divider."""
    op = row.name
    if op in POWER_OF_TWO_SHIFTS and (power_of_two(args[2]) or (op == "mul" and power_of_two(args[1]))):
        return SHIFT
    return row.uops
