"""Hypothesis strategies for `.dae` programs: valid ones in the main, with a few deliberate mistakes.

A generated program has a fixed symbol table (inputs x, k and table; outputs y, z and w; a scratch
buffer; a host-op result; outputs ri, rf and rv with a slot for each register), a prologue that gives
every register it uses a value, then blocks of integer, float and vector code (straight-line, counted
loops, forward branches), optionally one access program (traversal units, memory, ALU, mask and buffer
streams, rules on beg/ite/end) whose callbacks pop what their rule pushes, rarely a host op, and an
epilogue that stores every register in its own slot, so the outputs show the final value of each.
Indices are reduced into range with `rem` (floor modulo), so most programs run to the end; edge values
(0, -1, 2**63 - 1, -2**63, nan, inf, 1e308) come in often.  About one program in twenty-five carries a
mistake the assembler or the engines must report cleanly: a lane count out of range, a float immediate
for an r register, a register no path writes, a divide by zero, an index out of range, or a loop that
never ends (in the main code, a callback or the access unit), which --max-cycles must stop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from ..isa import ALU_OPS, of_kind

INT_EDGES = (0, 1, -1, 2, 3, 7, -8, 63, 64, 2**31 - 1, -2**31, 2**32, 2**62, 2**63 - 1, -2**63, -2**63 + 1)
FLOAT_EDGES = (0.0, -0.0, 1.0, -1.0, 0.5, 1.5, -2.25, 0.1, 65504.0, 3.0e38, 3.5e38, 1e308, -1e308, 5e-324, 1e-45,
               2.0**53 + 1, math.inf, -math.inf, math.nan)
INT_OPS = of_kind("int")  # the instruction table's (ember/isa/table.py), so a new row is generated too
FLOAT_OPS = of_kind("float")
VEC_OPS = of_kind("vfloat")
VSTORES = of_kind("vstore")  # contiguous vector stores: every row of the kind, hints included
FLOAT_TYPES = ("f32", "f64", "f32", "f64", "f16", "bf16")

# registers: r0-r7 values, r8-r10 loop counters, r12/r13 index temporaries, r14 dim results;
# f0-f5 values; v0-v4 float vectors (the program's type), v5 the mask, v6 lane indices (viota), v7 converted,
# v8 the mask of every lane (for the trace)
VALUE_R, VALUE_F, VALUE_V = 8, 6, 5
COUNTERS = (8, 9, 10)
X, K, TABLE, Y, Z, W, BUF, H, RI, RF, RV, TI, TF, TV, BYTES = range(15)  # symbol numbers
TYPED = {"i8": 1, "i16": 2, "i32": 4, "i64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8}  # typed reads: bytes
# ops whose result a trace may record: scalar ones in ti/tf, vector ones in tv (through v8, a mask of every lane)
TRACED = frozenset(INT_OPS + FLOAT_OPS + VEC_OPS + ("ffma", "vfma", "fcvt", "sel", "mov", "ld", "pop", "vsel", "vld",
                                                     "vgather",
                                                     "vsplat"))


@dataclass
class Generated:
    """A generated program and the seed of its inputs (ember.fuzz.inputs builds them from the symbols)."""

    text: str
    input_seed: int
    machine: tuple[str, ...]  # machine overrides, KEY=VALUE

    def describe(self) -> str:
        return f"generated program of {self.text.count(chr(10))} lines"


def fmt_float(v: float) -> str:
    """A float as `.dae` text writes it (repr, with nan and inf spelled as the grammar reads them)."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(float(v))


class _Gen:
    """Draws one program, line by line; `draw` is hypothesis's."""

    def __init__(self, draw: Any):
        self.draw = draw
        self.lines: list[str] = []
        self.labels = 0
        self.traces = [0, 0, 0]  # slots of ti, tf and tv used
        self.ty = self.pick(FLOAT_TYPES)
        self.n = self.pick(range(1, 13))  # length of x, k, y, z
        self.rows = self.pick(range(1, 7))
        self.cols = self.pick(range(1, 13))
        self.row_bytes = self.pick(range(8, 24))  # the byte tensor: rows x row_bytes, read by typed reads
        self.lanes = self.pick((1, 2, 3, 4, 8, 8, 16, 5, 13, 32))
        self.other_ty = self.pick([t for t in ("f32", "f64", "f16", "bf16") if t != self.ty])

    # --- small pieces -----------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append("  " + line)
        op, _, rest = line.partition(" ")
        dst = rest.split(",")[0]
        if op.split(".")[0] in TRACED and dst[:1] in "rfv" and int(dst[1:]) < VALUE_R and self.chance(0.4):
            # the value in a slot of its own, so an op whose result is overwritten later is still seen
            k = "rfv".index(dst[0])
            if k == 2 and int(dst[1:]) >= VALUE_V:
                return
            self.lines.append(f"  st {dst}, @{TI}[{self.traces[0]}]" if k == 0 else
                              f"  st {dst}, @{TF}[{self.traces[1]}]" if k == 1 else
                              f"  vst {dst}, @{TV}[{self.traces[2]}, 0], v8")
            self.traces[k] += 1

    def label(self) -> str:
        self.labels += 1
        return f"L{self.labels - 1}"

    def pick(self, options: tuple | list | range) -> Any:
        """One of `options`, about uniformly (hypothesis's own sampled_from favours the first few)."""
        return options[self.draw(st.integers(0, 2**16 - 1)) % len(options)]

    def variant(self, options: tuple[str, ...]) -> str:
        """One opcode of a kind: no draw while the table has one, so a seed draws the same programs until a
        row is added."""
        return options[0] if len(options) == 1 else self.pick(options)

    def chance(self, p: float) -> bool:
        """True with probability about p.  Hypothesis favours the ends of a range, so the window sits in its
        middle; shrinking moves towards 0, outside it, so a shrunk program drops what chance() added."""
        lo = 5000 - p * 5000
        return lo <= self.draw(st.integers(0, 9999)) < lo + p * 10000

    def int_imm(self) -> int:
        return self.draw(st.one_of(st.sampled_from(INT_EDGES), st.integers(-100, 100), st.integers(-2**63, 2**63 - 1)))

    def float_imm(self) -> float:
        return self.draw(st.one_of(st.sampled_from(FLOAT_EDGES), st.floats(-1e6, 1e6, allow_nan=False),
                                   st.floats(allow_nan=True, allow_infinity=True)))

    def r(self) -> str:
        return f"r{self.pick(range(VALUE_R))}"

    def f(self) -> str:
        return f"f{self.pick(range(VALUE_F))}"

    def v(self) -> str:
        return f"v{self.pick(range(VALUE_V))}"

    def int_operand(self) -> str:
        return self.r() if self.chance(0.7) else str(self.int_imm())

    def index_into(self, extent: int, reg: str = "r12") -> str:
        """`reg` = some value reduced into [0, extent) (rare: left as it is, so it may be out of range)."""
        if self.chance(0.003):
            return self.r()
        self.emit(f"rem {reg}, {self.r()}, {extent}")
        return reg

    # --- instructions -----------------------------------------------------------------
    def int_op(self) -> None:
        op = self.pick(INT_OPS)
        a = self.int_operand()
        same = 0.35 if op in ("slt", "sle", "seq", "sne", "min", "max") else 0.1
        b = a if self.chance(same) else self.int_operand()  # equal operands: where slt and sle differ
        if op in ("div", "rem") and not self.chance(0.03):  # a zero divisor is rare: it ends the run
            b = str(self.pick((1, -1, 2, 3, -7, 64, 2**63 - 1, -2**63)))
        self.emit(f"{op} {self.r()}, {a}, {b}")

    def float_op(self) -> None:
        if self.chance(0.15):
            self.emit(f"ffma.f32 {self.f()}, {self.f()}, {self.f()}, {self.f()}")
            return
        op = self.pick(FLOAT_OPS)
        ty = self.pick((self.ty, self.ty, "f64", "f32"))
        self.emit(f"{op}.{ty} {self.f()}, {self.f()}, {self.f()}")

    def scalar_op(self) -> None:
        kind = self.pick(range(14))
        if kind <= 3:
            self.int_op()
        elif kind <= 6:
            self.float_op()
        elif kind == 7:
            self.emit(f"li {self.r()}, {self.int_imm()}")
        elif kind == 8:
            self.emit(f"li {self.f()}, {fmt_float(self.float_imm())}")
        elif kind == 9:
            src = self.r() if self.chance(0.5) else self.f()
            self.emit(f"fcvt.{self.pick((self.ty, 'f32', 'f64'))} {self.f()}, {src}")
        elif kind == 10:
            if self.chance(0.5):
                self.emit(f"sel {self.r()}, {self.r()}, {self.r()}, {self.r()}")
            else:
                self.emit(f"sel {self.f()}, {self.r()}, {self.f()}, {self.f()}")
        elif kind == 11:
            self.emit(f"mov {self.r()}, {self.r()}" if self.chance(0.5) else f"mov {self.f()}, {self.f()}")
        elif kind == 12:
            self.memory_op()
        else:
            self.emit(f"dim r14, @{self.pick((X, TABLE, W))}, 0")
            self.emit(f"add {self.r()}, {self.r()}, r14")

    def memory_op(self) -> None:
        kind = self.pick(range(7))
        if kind == 0:
            i = self.index_into(self.n)
            self.emit(f"ld {self.f()}, @{X}[{i}]")
        elif kind == 1:
            i = self.index_into(self.n)
            self.emit(f"ld {self.r()}, @{K}[{i}]")
        elif kind == 2:
            i = self.index_into(self.rows)
            j = self.index_into(self.cols, "r13")
            self.emit(f"ld {self.f()}, @{TABLE}[{i}, {j}]")
        elif kind == 3:
            i = self.index_into(self.n)
            self.emit(f"st {self.f()}, @{Y}[{i}]")
        elif kind == 4:
            i = self.index_into(self.n)
            self.emit(f"st {self.r()}, @{Z}[{i}]")
        elif kind == 6:  # a typed read of the byte tensor (or a plain byte)
            ty = self.pick(list(TYPED) + [""])
            i = self.index_into(self.rows)
            j = self.index_into(self.row_bytes - TYPED.get(ty, 1) + 1, "r13")
            dst = self.f() if ty[:1] in ("f", "b") else self.r()
            self.emit(f"ld{'.' + ty if ty else ''} {dst}, @{BYTES}[{i}, {j}]")
        else:
            i = self.index_into(self.rows)
            j = self.index_into(self.cols, "r13")
            self.emit(f"st {self.f()}, @{W}[{i}, {j}]")

    def vector_op(self) -> None:
        kind = self.pick(range(10))
        ty, lanes = self.ty, self.lanes
        if kind <= 2:
            if self.chance(0.2 if ty == "f32" else 0.03):  # float32 only: other types leave it to the reference
                self.emit(f"vfma.f32 {self.v()}, {self.v()}, {self.v()}, {self.v()}")
                return
            op = self.pick(VEC_OPS)
            self.emit(f"{op}.{ty} {self.v()}, {self.v()}, {self.v()}")
        elif kind == 3:
            self.emit(f"vsplat.{ty} {self.v()}, {self.f()}, {lanes}")
        elif kind == 4:  # contiguous load or store along x/y or a table row
            if self.chance(0.5):
                i = self.index_into(self.n)
                self.emit(f"vmask v5, {i}, {self.n}, {lanes}")
                sym = X if self.chance(0.5) else Y
                op = "vld" if sym == X or self.chance(0.5) else self.variant(VSTORES)
                self.emit(f"{op} {self.v()}, @{sym}[{i}], v5")
            else:
                i = self.index_into(self.rows)
                j = self.index_into(self.cols, "r13")
                self.emit(f"vmask v5, {j}, {self.cols}, {lanes}")
                sym = self.pick((TABLE, W))
                self.emit(f"{'vld' if sym == TABLE else self.variant(VSTORES)} {self.v()}, @{sym}[{i}, {j}], v5")
        elif kind == 5:  # gather or scatter through lane indices
            if self.chance(0.5):
                i = self.index_into(self.n)
                self.emit(f"viota v6, {i}, {lanes}")
                self.emit(f"vmask v5, {i}, {self.n}, {lanes}")
                op = self.pick(("vgather", "vscatter"))
                self.emit(f"{op} {self.v()}, @{X if op == 'vgather' else Y}[v6], v5")
            else:
                i = self.index_into(self.rows)
                j = self.index_into(self.cols, "r13")
                self.emit(f"viota v6, {j}, {lanes}")
                self.emit(f"vmask v5, {j}, {self.cols}, {lanes}")
                op = self.pick(("vgather", "vscatter"))
                self.emit(f"{op} {self.v()}, @{TABLE if op == 'vgather' else W}[{i}, v6], v5")
        elif kind == 6:
            cond = "v5" if self.chance(0.5) else self.r()
            self.emit(f"vsel {self.v()}, {cond}, {self.v()}, {self.v()}")
        elif kind == 7:
            self.emit(f"vcvt.{self.other_ty} v7, {self.v()}")
            self.emit(f"vcvt.{ty} {self.v()}, v7")
        elif kind == 8:
            self.emit(f"vmask v5, {self.int_operand()}, {self.int_operand()}, {lanes}")
        else:
            self.emit(f"viota v6, {self.r()}, {lanes}")

    def straight(self, count: int) -> None:
        for _ in range(count):
            if self.chance(0.3):
                self.vector_op()
            else:
                self.scalar_op()

    def block(self, depth: int) -> None:
        """Straight-line code, a counted loop (nesting up to three) or a forward branch around code."""
        kind = self.pick(range(6))
        if kind <= 2 or depth >= len(COUNTERS):
            self.straight(self.draw(st.integers(1, 6)))
        elif kind <= 4:
            counter = f"r{COUNTERS[depth]}"
            top = self.label()
            self.emit(f"li {counter}, {self.draw(st.integers(-2, 1))}")
            self.lines.append(f"{top}:")
            for _ in range(self.draw(st.integers(1, 3))):
                self.block(depth + 1)
            self.emit(f"add {counter}, {counter}, 1")
            self.emit(f"blt {counter}, {self.draw(st.integers(1, 5))}, {top}")
        else:
            skip = self.label()
            op = self.pick(("blt", "bge", "beq"))
            self.emit(f"{op} {self.int_operand()}, {self.int_operand()}, {skip}")
            self.block(depth + 1)
            self.lines.append(f"{skip}:")

    # --- the program --------------------------------------------------------------------
    def header(self, host: bool) -> list[str]:
        ty, n = self.ty, self.n
        return [".dae 2",
                f'.sym @{X} input "x" {ty} [{n}]',
                f'.sym @{K} input "k" i64 [{n}]',
                f'.sym @{TABLE} input "table" {ty} [{self.rows}, {self.cols}]',
                f'.sym @{Y} output "y" {ty} [{n}]',
                f'.sym @{Z} output "z" i64 [{n}]',
                f'.sym @{W} output "w" {ty} [{self.rows}, {self.cols}]',
                f'.sym @{BUF} temp "buf" {ty} [?]',
                f'.sym @{H} {"output" if host else "temp"} "h" {ty} [{n}]',
                f'.sym @{RI} output "ri" i64 [{VALUE_R}]',  # every register's final value, one slot each
                f'.sym @{RF} output "rf" f64 [{VALUE_F}]',
                f'.sym @{RV} output "rv" {ty} [{VALUE_V}, {self.lanes}]',
                f'.sym @{TI} output "ti" i64 [{self.traces[0] + 1}]',
                f'.sym @{TF} output "tf" f64 [{self.traces[1] + 1}]',
                f'.sym @{TV} output "tv" {ty} [{self.traces[2] + 1}, {self.lanes}]',
                f'.sym @{BYTES} input "bytes" u8 [{self.rows}, {self.row_bytes}]',
                f".work gather table=@{TABLE} indices=@{K} output=@{W}"]  # so k's values are rows of the table

    def prologue(self) -> None:
        self.emit(f"alloc @{Y}, [{self.n}]")
        self.emit(f"alloc @{Z}, [{self.n}]")
        self.emit(f"alloc @{W}, [{self.rows}, {self.cols}]")
        self.emit(f"alloc @{RI}, [{VALUE_R}]")
        self.emit(f"alloc @{RF}, [{VALUE_F}]")
        self.emit(f"alloc @{RV}, [{VALUE_V}, {self.lanes}]")
        self.emit(f"alloc @{TI}, [TRACE_I]")  # sizes known at the end (program() fills them in)
        self.emit(f"alloc @{TF}, [TRACE_F]")
        self.emit(f"alloc @{TV}, [TRACE_V, {self.lanes}]")
        self.emit(f"vmask v8, 0, {self.lanes}, {self.lanes}")
        for k in range(VALUE_R):
            self.emit(f"li r{k}, {self.int_imm()}")
        for k in (12, 13, 14):
            self.emit(f"li r{k}, 0")
        for k in range(VALUE_F):
            self.emit(f"li f{k}, {fmt_float(self.float_imm())}")
        for k in range(VALUE_V):
            self.emit(f"vsplat.{self.ty} v{k}, {self.f()}, {self.lanes}")
        self.emit(f"vmask v5, 0, {self.draw(st.integers(0, self.lanes))}, {self.lanes}")
        self.emit(f"viota v6, 0, {self.lanes}")
        self.emit(f"vcvt.{self.other_ty} v7, v0")

    def epilogue(self) -> None:
        for k in range(VALUE_F):
            self.emit(f"st f{k}, @{RF}[{k}]")
        for k in range(VALUE_R):
            self.emit(f"st r{k}, @{RI}[{k}]")
        self.emit(f"vmask v5, 0, {self.lanes}, {self.lanes}")
        for k in range(VALUE_V):
            self.emit(f"vst v{k}, @{RV}[{k}, 0], v5")

    def host_op(self) -> None:
        op = self.pick(("Add", "Mul", "Relu", "Neg", "Abs"))
        srcs = f"[@{X}, @{X}]" if op in ("Add", "Mul") else f"[@{X}]"
        self.emit(f'host "{op}", {srcs}, [@{H}], {{}}')
        i = self.index_into(self.n)
        self.emit(f"ld {self.f()}, @{H}[{i}]")

    def mistake(self) -> None:
        """One deliberate error, for the clean-error paths: the assembler's checks and the engines' traps."""
        kind = self.pick(range(8))
        if kind == 0:
            self.emit(f"vsplat.{self.ty} v0, f0, {self.pick((0, -3, 4097, 10**11, 3_000_000))}")
        elif kind == 1:
            self.emit(f"li r0, {fmt_float(self.pick((1.5, math.nan, 1e308)))}")
        elif kind == 2:
            self.emit(f"add r0, r0, r{self.draw(st.integers(20, 30))}")  # a register no path writes
        elif kind == 3:
            self.emit(f"div r0, r0, {self.pick(('0', 'r12'))}")
        elif kind == 4:
            self.emit(f"ld f0, @{X}[{self.pick((-1, self.n, 2**63 - 1, -2**63))}]")
        elif kind == 5:
            self.emit(f"vsplat.{self.ty} v0, f0, r0")
        elif kind == 6:
            self.emit(f"li r0, {self.pick((2**63, -2**63 - 1, 2**64))}")
        else:  # a loop that never ends: --max-cycles must stop it, at the same cycle on both engines
            top = self.label()
            self.lines.append(f"{top}:")
            self.straight(self.draw(st.integers(0, 2)))
            self.emit(f"jmp {top}")

    def program(self) -> str:
        access = self.chance(0.45)
        host = self.ty in ("f32", "f64") and self.chance(0.05)
        self.prologue()
        blocks = self.draw(st.integers(1, 4))
        run_at = self.draw(st.integers(0, blocks)) if access else -1
        acc: _Access | None = None
        for b in range(blocks + 1):
            if b == run_at:
                acc = _Access(self)
                acc.run()
            if b < blocks:
                self.block(0)
        if host:
            self.host_op()
        if self.chance(0.04):
            self.mistake()
        self.epilogue()
        self.emit("halt")
        body = self.lines
        self.lines = []
        if acc is not None:
            acc.callbacks()
        callbacks = self.lines
        lines = self.header(host) + (acc.text if acc is not None else []) + [".code"] + body + callbacks + [".end"]
        text = "\n".join(lines) + "\n"
        for k, name in enumerate(("TRACE_I", "TRACE_F", "TRACE_V")):
            text = text.replace(name, str(self.traces[k] + 1))
        return text


class _Access:
    """One access program A0 over x, k and the table, and the callbacks its rules need."""

    def __init__(self, g: _Gen):
        self.g = g
        draw = g.draw
        n, cols = g.n, g.cols
        self.text = [".access A0 1"]
        self.rules: list[tuple[int, list[str]]] = []  # token, operand kinds (r, f, v, m, i, b)
        lb = draw(st.integers(0, 2))
        step = draw(st.integers(1, 3))
        ub = "p0" if g.chance(0.6) else str(draw(st.integers(0, n)))
        if g.chance(0.02):  # a counter that could overflow: the assembler must refuse it
            lb, ub, step = 0, str(2**63 - 1), 2**62
        self.body(f"tu t0, {lb}, {ub}, {step}")
        level0: list[tuple[str, str]] = [("t0", "r")]  # operands a rule of t0 or below may push, with kinds
        self.body(f"mem s0, @{K}[t0]")
        self.body(f"mem s1, @{X}[t0]")
        level0 += [("s0", "r"), ("s1", "f")]
        if g.chance(0.6):
            op = g.pick(ALU_OPS)
            other = g.pick(("p0", "t0", "s0", str(g.int_imm()) if g.chance(0.3) else "1"))
            if op in ("div", "rem") and other not in ("p0",) and not g.chance(0.1):
                other = str(g.pick((1, 2, -3, 2**63 - 1)))
            self.body(f"alu s2, {op}, s0, {other}")
            level0.append(("s2", "r"))
        if g.chance(0.3):  # a typed read of row k[t0] of the byte tensor
            ty = g.pick(list(TYPED))
            col = draw(st.integers(0, g.row_bytes - TYPED[ty] + (1 if g.chance(0.97) else 3)))  # rarely past the end
            self.body(f"mem.{ty} s8, @{BYTES}[s0, {col}]")
            level0.append(("s8", "f" if ty[:1] in ("f", "b") else "r"))
        if g.chance(0.15):
            level0.append(("p0", "r"))
        if g.chance(0.05):
            level0.append((str(g.pick((0, 7, -1, 2**63 - 1))), "r"))  # a constant push
        self.token = 0
        self.rule("t0", "ite", level0)
        if g.chance(0.4):
            self.rule("t0", g.pick(("beg", "end")), [("p0", "r")] + ([("t0", "r")] if g.chance(0.3)
                                                                                  else []))
        if g.chance(0.01):  # a long walk that pushes nothing: --max-cycles must stop the access unit too
            self.body("tu t7, 0, 1000000000000, 1, t0")
            self.body("alu s9, add, t7, 1")
        kind = g.pick(range(3))
        if kind == 1:  # a scalar row walk: one table element per iteration
            self.body(f"tu t1, 0, {draw(st.integers(0, cols))}, {draw(st.integers(1, 2))}, t0")
            self.body(f"mem s3, @{TABLE}[s0, t1]")
            self.rule("t1", "ite", level0[:2] + [("s3", "f"), ("t1", "r")])
            if g.chance(0.5):
                self.rule("t1", "end", [("s1", "f")])
        elif kind == 2:  # a vector row walk: heads of `lanes` columns, their mask, the row as one buffer
            self.body(f"vtu t2, 0, {cols}, {g.lanes}, t0")
            self.body(f"mem s4, @{TABLE}[s0, t2]")
            ops = [("s4", "v")]
            if g.chance(0.5):
                self.body("mask s5, t2")
                ops.append(("s5", "m"))
            if g.chance(0.3):
                ops.append(("t2", "i"))
            self.rule("t2", "ite", [o for o in ops if g.chance(0.8)] or ops[:1])
            if g.chance(0.5):
                self.body("buf s6, s4")
                self.rule("t2", "end", [("t0", "r"), ("s6", "b")])
        self.text.append(".end")

    def body(self, line: str) -> None:
        self.text.append("  " + line)

    def rule(self, tu: str, event: str, operands: list[tuple[str, str]]) -> None:
        g = self.g
        chosen = [o for o in operands if g.chance(0.6)]
        if g.chance(0.03):  # no token: the operands must still be popped, by the next callback
            self.body(f"on {tu}, {event}, [{', '.join(o for o, _ in chosen)}]")
            self.rules.append((-1, [k for _, k in chosen]))
            return
        self.token += 1
        self.body(f"on {tu}, {event}, [{', '.join(o for o, _ in chosen)}], {self.token}")
        self.rules.append((self.token, [k for _, k in chosen]))

    def run(self) -> None:
        g = self.g
        arg = g.pick((str(g.n), "r0", f"{g.n}"))
        if arg == "r0":
            g.emit(f"rem r12, r0, {g.n + 1}")
            arg = "r12"
        g.emit(f"run A0, {arg}")

    def callbacks(self) -> None:
        g = self.g
        pending: list[str] = []
        for token, kinds in self.rules:
            pending += kinds
            if token < 0:
                continue
            g.lines.append(f"A0.{token}:")
            for kind in pending:
                self.pop(kind)
            pending = []
            g.straight(g.draw(st.integers(0, 4)))
            if g.chance(0.005):  # a callback that never returns
                top = g.label()
                g.lines.append(f"{top}:")
                g.emit(f"jmp {top}")
            g.emit("ret")

    def pop(self, kind: str) -> None:
        g = self.g
        if kind == "r":
            dst = g.r()
            g.emit(f"pop {dst}")
            if g.chance(0.5):
                g.emit(f"rem r12, {dst}, {g.n}")
                g.emit(f"st {g.f()}, @{Y}[r12]")
        elif kind == "f":
            dst = g.f()
            g.emit(f"pop {dst}")
            if g.chance(0.5):
                g.emit(f"fadd.{g.ty} {g.f()}, {dst}, {g.f()}")
        elif kind == "v":
            dst = g.v()
            g.emit(f"pop {dst}")
            if g.chance(0.5):
                g.emit(f"vfadd.{g.ty} {g.v()}, {g.v()}, {dst}")
        elif kind == "m":
            g.emit("pop v5")
        elif kind == "i":
            g.emit("pop v6")
        else:
            g.emit(f"popb @{BUF}")
            g.emit(f"dim r14, @{BUF}, 0")
            g.emit(f"vmask v5, 0, r14, {g.lanes}")
            g.emit(f"vld {g.v()}, @{BUF}[0], v5")


@st.composite
def programs(draw: Any) -> Generated:
    """A `.dae` program (text), the seed of its inputs and, one time in five, a machine other than the default."""
    text = _Gen(draw).program()
    machine = draw(st.sampled_from(((),) * 8 + MACHINES))
    return Generated(text, draw(st.integers(0, 2**32 - 1)), machine)


# machine settings that change the timing paths: tight queues, one access lane, few requests, tiny caches, ideal
# DRAM channels behind a small last level (write-backs on every channel), banked DRAM on one channel with the other
# address map and a slow core (a refresh window every few hundred cycles), HBM3 on odd channels
MACHINES: tuple[tuple[str, ...], ...] = (
    ("access.outstanding=1", "access.lanes=1"),
    ("access.queue_bytes=64",),
    ("caches.l1.size_bytes=768", "caches.l1.ways=3", "caches.l2.size_bytes=2048", "caches.l2.ways=2"),
    ("execute.rob_entries=3", "execute.store_buffer=2", "execute.miss_slots=1", "execute.issue_width=1"),
    ("dram.device=ideal", "dram.bytes_per_cycle=2", "execute.mispredict_penalty=0"),
    ("dram.device=ideal", "dram.channels=3", "dram.bytes_per_cycle=6", "caches.llc.size_bytes=4096",
     "caches.llc.ways=4"),
    ("dram.channels=1", "dram.address_map=row-bank-rank-column", "clock_ghz=0.1", "caches.llc.size_bytes=4096",
     "caches.llc.ways=4"),
    ("dram.device=hbm3", "dram.channels=3", "caches.llc.size_bytes=4096", "caches.llc.ways=4"),
)
