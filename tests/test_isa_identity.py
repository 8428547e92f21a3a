"""Every instruction of the ISA on both engines: the same outputs and statistics, and numpy's values.

Each case is a small `.dae` program with operands chosen so that a wrong instruction shows: operand
order (sub, div, fsub, fdiv), min against max, NaN propagation of fmax/fmin, signed compares and
branches, floor division and modulo of negatives, masked-off lanes left alone, rounding to the
suffix type.  `test_every_opcode_has_a_case` fails when an opcode is added to the instruction table
(ember.isa.OPS) without one.
Integer overflow is left to the fuzzer's tests (docs/isa.md fixes wrap-around).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from test_fast_engine import assert_same, both

from ember import isa
from ember.backend.binary import assemble, disassemble
from ember.backend.dae import Instr, Program
from ember.backend.dae_text import parse_dae
from ember.isa import OPS

HEADER = """.dae 2
.opset 17
.sym @0 input "x" f32 [?]
.sym @1 input "k" i64 [?]
.sym @2 output "f" f32 [?]
.sym @3 output "i" i64 [?]
.sym @4 output "g" f64 [?]
.sym @5 temp "t" f32 [?]
.sym @6 temp "buf" f32 [?]
.sym @7 input "y" f32 [?]
.sym @8 input "q" u8 [?, ?]
"""
PROLOGUE = """  alloc @2, [32]
  alloc @3, [64]
  alloc @4, [32]
"""
X = np.array([1.5, -2.25, np.nan, 3.0, 0.1, -7.0, np.inf, 0.2, 5.5, -0.5, 2.0, 9.0, -1.0, 4.25, 0.3, 8.0], np.float32)
K = np.array([7, -3, 5, -8, 0, 2, 3, 1, 16777217, 4, 6, -11, 10, 12, 13, 15], np.int64)
Y = np.array([0.5, 4.0, 1.0, -3.0, 0.2, 7.0, 1.0, 0.1, 2.5, -0.5, 3.0, 1.0, -1.0, 0.25, 0.7, 2.0], np.float32)
F32 = np.float32

INT_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
           "div": lambda a, b: a // b, "rem": lambda a, b: a % b, "min": min, "max": max,
           "slt": lambda a, b: int(a < b), "sle": lambda a, b: int(a <= b), "seq": lambda a, b: int(a == b),
           "sne": lambda a, b: int(a != b)}


def _nan_max(a: float, b: float) -> float:
    return np.nan if np.isnan(a) or np.isnan(b) else max(a, b)


def _nan_min(a: float, b: float) -> float:
    return np.nan if np.isnan(a) or np.isnan(b) else min(a, b)


FLOAT_OPS = {"fadd": lambda a, b: a + b, "fsub": lambda a, b: a - b, "fmul": lambda a, b: a * b,
             "fdiv": lambda a, b: a / b, "fmax": _nan_max, "fmin": _nan_min}


def out(f: dict[int, float] | None = None, i: dict[int, int] | None = None,
        g: dict[int, float] | None = None) -> dict[str, np.ndarray]:
    """The three outputs: what alloc leaves (isa.undefined) except at the given positions."""
    res = {"f": isa.undefined((32,), np.float32), "i": isa.undefined((64,), np.int64),
           "g": isa.undefined((32,), np.float64)}
    for name, vals in (("f", f), ("i", i), ("g", g)):
        for n, v in (vals or {}).items():
            res[name][n] = v
    return res


def int_case() -> tuple[str, dict[str, np.ndarray]]:
    """Every integer op both ways round on 7 and -3 (floor division, signed compares), and with 7 twice."""
    lines, want = ["  ld r1, @1[0]", "  ld r2, @1[1]"], {}
    for n, (op, fn) in enumerate(INT_OPS.items()):
        lines += [f"  {op} r3, r1, r2", f"  st r3, @3[{3 * n}]", f"  {op} r3, r2, r1", f"  st r3, @3[{3 * n + 1}]",
                  f"  {op} r3, r1, 7", f"  st r3, @3[{3 * n + 2}]"]
        want |= {3 * n: fn(7, -3), 3 * n + 1: fn(-3, 7), 3 * n + 2: fn(7, 7)}
    return "\n".join(lines), out(i=want)


def float_case(suffix: str) -> tuple[str, dict[str, np.ndarray]]:
    """Every float op both ways round on 1.5 and -2.25, on 0.1 and 0.2 (which round differently in f32 and
    f64), and with a NaN on either side; results rounded to the suffix type."""
    pairs = [(0, 1), (4, 7), (0, 2), (2, 0)]  # positions in x
    dtype = np.float32 if suffix == "f32" else np.float64
    dest, sym = ("f", 2) if suffix == "f32" else ("g", 4)
    lines: list[str] = []
    want: dict[int, float] = {}
    slot = 0
    for a, b in pairs:
        lines += [f"  ld f1, @0[{a}]", f"  ld f2, @0[{b}]"]
        for op, fn in FLOAT_OPS.items():
            if (op in ("fadd", "fsub", "fmul", "fdiv")) and 2 in (a, b):
                continue  # NaN pairs only for the ops whose NaN handling is their own definition
            lines += [f"  {op}.{suffix} f3, f1, f2", f"  st f3, @{sym}[{slot}]",
                      f"  {op}.{suffix} f3, f2, f1", f"  st f3, @{sym}[{slot + 1}]"]
            x, y = float(X[a]), float(X[b])
            want[slot] = dtype(fn(x, y))
            want[slot + 1] = dtype(fn(y, x))
            slot += 2
    return "\n".join(lines), out(**{dest: want})


def li_mov_sel_case() -> tuple[str, dict[str, np.ndarray]]:
    body = """  li r1, -5
  li f1, 2.5
  li f9, 3
  mov r2, r1
  mov f2, f1
  li r6, 9
  ld r4, @1[4]
  sel r5, r4, r1, r6
  sel r7, r1, r1, r6
  li f4, -1.25
  sel f3, r1, f1, f4
  sel f5, r4, f1, f4
  st r2, @3[0]
  st r5, @3[1]
  st r7, @3[2]
  st f2, @2[0]
  st f3, @2[1]
  st f5, @2[2]
  st f9, @2[3]"""
    return body, out(f={0: 2.5, 1: 2.5, 2: -1.25, 3: 3.0}, i={0: -5, 1: 9, 2: -5})


def fcvt_case() -> tuple[str, dict[str, np.ndarray]]:
    """fcvt of 2^24 + 1 (not a float32) and of 1/3 to every float type."""
    body = """  ld r1, @1[8]
  fcvt.f32 f1, r1
  fcvt.f64 f2, r1
  st f1, @4[0]
  st f2, @4[1]
  li f3, 1.0
  li f4, 3.0
  fdiv.f64 f5, f3, f4
  fcvt.f16 f6, f5
  fcvt.bf16 f7, f5
  fcvt.f32 f8, f5
  st f6, @4[2]
  st f7, @4[3]
  st f8, @4[4]
  st f5, @4[5]"""
    third = 1.0 / 3.0
    from ember.ir.types import ScalarType

    bf16 = ScalarType("bf16").numpy()
    return body, out(g={0: float(np.float32(16777217)), 1: 16777217.0, 2: float(np.float16(third)),
                        3: float(np.array(third).astype(bf16)), 4: float(np.float32(third)), 5: third})


def branch_case() -> tuple[str, dict[str, np.ndarray]]:
    """A loop over k: sums its negative and its other entries apart (blt signed), counts the 5s (beq),
    stops at its length (dim, bge), with jmp back."""
    body = """  dim r3, @1, 0
  li r2, 0
L0:
  bge r2, r3, L1
  ld r4, @1[r2]
  blt r4, 0, L2
  add r1, r1, r4
  jmp L3
L2:
  sub r5, r5, r4
L3:
  beq r4, 5, L4
  jmp L5
L4:
  add r6, r6, 1
L5:
  add r2, r2, 1
  jmp L0
L1:
  st r1, @3[0]
  st r5, @3[1]
  st r6, @3[2]
  st r3, @3[3]"""
    return body, out(i={0: int(K[K >= 0].sum()), 1: int(-K[K < 0].sum()), 2: int((K == 5).sum()), 3: len(K)})


ACCESS = """.access A0 1
  tu t0, 0, p0, 1
  mem s0, @1[t0]
  alu s1, sub, s0, t0
  alu s2, div, s0, 2
  alu s3, min, s0, t0
  alu s4, max, s0, t0
  alu s5, mul, s0, -2
  alu s6, add, s0, 100
  alu s7, rem, s0, -3
  on t0, beg, [], 3
  on t0, ite, [s0, s1, s2, s3, s4, s5, s6, s7, 7], 1
  on t0, end, [t0], 2
.end
"""


def access_case() -> tuple[str, dict[str, np.ndarray]]:
    """tu / mem / alu (each ALU op, operand order, floor division and modulo of negatives, signed min and max) / on at
    beg, ite and end / run / pop / ret: each iteration's operands stored by its callback."""
    body = """  li r10, -1
  li r2, 6
  run A0, r2
  st r11, @3[60]
  st r12, @3[61]
  st r13, @3[62]
  halt
A0.1:
  add r10, r10, 1
  mul r9, r10, 9
  pop r1
  pop r2
  pop r3
  pop r4
  pop r5
  pop r6
  pop r7
  pop r8
  pop r14
  st r1, @3[r9]
  add r9, r9, 1
  st r2, @3[r9]
  add r9, r9, 1
  st r3, @3[r9]
  add r9, r9, 1
  st r4, @3[r9]
  add r9, r9, 1
  st r5, @3[r9]
  add r9, r9, 1
  st r6, @3[r9]
  add r9, r9, 1
  st r7, @3[r9]
  add r9, r9, 1
  st r8, @3[r9]
  add r9, r9, 1
  st r14, @3[r9]
  ret
A0.2:
  pop r12
  add r11, r11, 1
  ret
A0.3:
  add r13, r13, 5
  ret"""
    want = {}
    for t in range(6):
        s = int(K[t])
        vals = [s, s - t, s // 2, min(s, t), max(s, t), s * -2, s + 100, s % -3, 7]
        want |= {9 * t + j: v for j, v in enumerate(vals)}
    # beg and end fire once each; at its end the TU still holds its last value
    want |= {60: 1, 61: 5, 62: 5}
    return body, out(i=want)


VECTOR_ACCESS = """.access A0 1
  tu t0, 0, p0, 1
  vtu t1, 0, 10, 4, t0
  mem s1, @0[t1]
  mask s2, t1
  buf s3, s1
  on t1, ite, [s2, s1, t1], 1
  on t1, end, [s3], 2
.end
"""


def vector_access_case() -> tuple[str, dict[str, np.ndarray]]:
    """vtu (10 elements by 4 lanes: a tail of 2, whose lane indices are pushed too), mask, buf and popb: lanes
    past the end stay off."""
    body = """  li r2, 1
  run A0, r2
  halt
A0.1:
  pop v1
  pop v2
  pop v3
  vscatter v2, @2[v3], v1
  ret
A0.2:
  popb @6
  viota v13, 0, 16
  vmask v14, 0, 10, 16
  vgather v15, @6[v13], v14
  vst v15, @2[16], v14
  ret"""
    f = {n: X[n] for n in range(10)} | {16 + n: X[n] for n in range(10)}
    return body, out(f=f)


def vector_case() -> tuple[str, dict[str, np.ndarray]]:
    """vsplat / viota / vmask / vld / vst / vgather / vscatter / vector float ops both ways round / vsel by
    lane and whole / vcvt, with the store mask off for lanes 5..7 (their destinations keep what alloc left)."""
    body = """  ld f1, @0[0]
  li r5, 5
  vsplat.f32 v0, f1, 8
  viota v1, 3, 8
  vmask v2, 0, r5, 8
  vmask v11, 3, r5, 8
  vld v3, @0[0], v2
  vld v9, @7[0], v2
  vfadd.f32 v4, v3, v9
  vst v4, @2[0], v2
  vfsub.f32 v4, v9, v3
  vst v4, @2[8], v2
  vfdiv.f32 v4, v3, v9
  vst v4, @2[16], v2
  vfmul.f32 v4, v3, v9
  vst v4, @2[24], v2
  vfmax.f32 v5, v3, v0
  vfmin.f32 v6, v0, v3
  vsel v7, v11, v5, v6
  vcvt.f64 v8, v7
  vst v8, @4[0], v2
  vfmin.f32 v6, v3, v0
  vsel v7, r5, v6, v5
  vcvt.f64 v8, v7
  vst v8, @4[8], v2
  vcvt.f64 v13, v9
  vfdiv.f64 v12, v8, v13
  vfsub.f64 v14, v13, v8
  vst v12, @4[16], v2
  vst v14, @4[24], v2
  vgather v10, @7[v1], v2
  vscatter v10, @2[v1], v2
  vst v1, @3[8], v2"""
    x, y = X[:5], Y[:5]
    f = isa.undefined((32,), np.float32)
    f[0:5], f[8:13], f[16:21], f[24:29] = x + y, y - x, x / y, x * y
    f[3:8] = Y[3:8]  # the scatter of y[3 + l] to f[3 + l] for lanes l = 0..4, after the vst to f[0..4]
    splat = np.full(5, X[0], np.float32)
    nan = np.isnan(x)
    mx, mn = np.where(nan, np.nan, np.maximum(x, splat)), np.where(nan, np.nan, np.minimum(splat, x))
    g = isa.undefined((32,), np.float64)
    g[0:5] = np.where(np.arange(5) < 2, mx, mn)  # vmask 3, 5: lanes 0 and 1 on
    g[8:13] = mn  # a nonzero r register selects the first vector whole
    g[16:21] = mn.astype(np.float64) / y.astype(np.float64)  # in f64: not rounded to f32
    g[24:29] = y.astype(np.float64) - mn.astype(np.float64)
    i = isa.undefined((64,), np.int64)
    i[8:13] = np.arange(3, 8)
    return body, {"f": f, "i": i, "g": g}


def nontemporal_case() -> tuple[str, dict[str, np.ndarray]]:
    """vstnt: a whole line written around the caches over a line a vst had just cached, a partial unaligned one,
    and the line read back (forwarded from the store buffer or read from DRAM)."""
    body = """  vmask v2, 0, 16, 16
  vmask v5, 0, 5, 16
  vld v3, @0[0], v2
  vst v3, @2[0], v2
  vfadd.f32 v4, v3, v3
  vstnt v4, @2[0], v2
  vstnt v3, @2[17], v5
  vld v6, @2[0], v2
  vcvt.f64 v8, v6
  vst v8, @4[0], v2"""
    f = isa.undefined((32,), np.float32)
    f[0:16], f[17:22] = X + X, X[:5]
    g = isa.undefined((32,), np.float64)
    g[0:16] = (X + X).astype(np.float64)
    return body, {"f": f, "i": isa.undefined((64,), np.int64), "g": g}


def exact_fma32(a: float, b: float, c: float) -> np.float32:
    """a * b + c in exact rational arithmetic, rounded to the nearest float32 (ties to even): independent of the
    engines' double-based construction."""
    x = Fraction(a) * Fraction(b) + Fraction(c)
    near = np.float32(float(x))
    options = [np.nextafter(near, F32(-np.inf)), near, np.nextafter(near, F32(np.inf))]
    return min(options, key=lambda y: (abs(Fraction(float(y)) - x), int(y.view(np.uint32)) & 1))


FMA = [(1 + 2**-12, 1 + 2**-12, 2.0**-60), (1 + 2**-12, 1 + 2**-12, -(2.0**-60)), (1.5, -2.25, 0.1),
       (0.1, 0.2, -0.02)]


def fma_case() -> tuple[str, dict[str, np.ndarray]]:
    """ffma and vfma round once: (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 lies halfway between two float32 values, so
    a tiny addend decides the rounding, which a multiply then an add (or a double result rounded again) loses;
    operands in order (a * b + c, not a * c + b)."""
    lines = []
    for n, (a, b, c) in enumerate(FMA):
        lines += [f"  li f1, {a!r}", f"  li f2, {b!r}", f"  li f3, {c!r}", "  ffma.f32 f4, f1, f2, f3",
                  f"  st f4, @2[{n}]", "  vsplat.f32 v1, f1, 3", "  vsplat.f32 v2, f2, 3", "  vsplat.f32 v3, f3, 3",
                  "  vfma.f32 v4, v1, v2, v3", "  vmask v5, 0, 3, 3", f"  vst v4, @2[{8 + 3 * n}], v5"]
    f = {}
    for n, (a, b, c) in enumerate(FMA):
        a, b, c = (float(F32(v)) for v in (a, b, c))  # the operands as float32 registers hold them
        f |= {n: exact_fma32(a, b, c)} | {8 + 3 * n + k: exact_fma32(a, b, c) for k in range(3)}
    return "\n".join(lines), out(f=f)


# byte tensor q: row r holds, from byte 0, an f32, an i16, an f16 and an f64, then a byte
Q_VALUES = [(1.5, -300, 0.25, 1e300, 250), (-2.0**-149, 32767, -65504.0, -0.1, 7), (3.0e38, -32768, 2.0**-24, 2.5, 0)]


def q_bytes() -> np.ndarray:
    rows = []
    for f32, i16, f16, f64, byte in Q_VALUES:
        raw = (np.array([f32], "<f4").tobytes() + np.array([i16], "<i2").tobytes() + np.array([f16], "<f2").tobytes()
               + np.array([f64], "<f8").tobytes() + bytes([byte]))
        rows.append(np.frombuffer(raw, np.uint8))
    return np.stack(rows)


TYPED_ACCESS = """.access A0 0
  tu t0, 0, 3, 1
  mem.f64 s0, @8[t0, 8]
  mem.i16 s1, @8[t0, 4]
  mem s2, @8[t0, 16]
  on t0, ite, [t0, s0, s1, s2], 1
.end
"""


def typed_read_case() -> tuple[str, dict[str, np.ndarray]]:
    """ld.T and mem.T read the bytes of one T value from a byte tensor, at any byte (the f64 at byte 8 of a
    17-byte row is unaligned); a plain ld or mem of it reads one unsigned byte."""
    lines = []
    for r in range(3):
        lines += [f"  ld.f32 f1, @8[{r}, 0]", f"  st f1, @2[{r}]", f"  ld.f16 f1, @8[{r}, 6]", f"  st f1, @2[{4 + r}]",
                  f"  ld.i16 r1, @8[{r}, 4]", f"  st r1, @3[{r}]", f"  ld r1, @8[{r}, 16]", f"  st r1, @3[{4 + r}]"]
    lines += ["  run A0", "  halt", "A0.1:", "  pop r1", "  pop f1", "  pop r2", "  pop r3", "  st f1, @4[r1]",
              "  add r4, r1, 8", "  st r2, @3[r4]", "  add r4, r1, 12", "  st r3, @3[r4]", "  ret"]
    f, i, g = {}, {}, {}
    for r, (f32, i16, f16, f64, byte) in enumerate(Q_VALUES):
        f |= {r: F32(f32), 4 + r: F32(np.float16(f16))}
        i |= {r: i16, 4 + r: byte, 8 + r: i16, 12 + r: byte}
        g |= {r: f64}
    return "\n".join(lines), out(f=f, i=i, g=g)


def host_case() -> tuple[str, dict[str, np.ndarray]]:
    """A host op with operands in order (x - y, not y - x)."""
    body = """  host "Sub", [@0, @7], [@5], {}
  ld f1, @5[3]
  st f1, @2[0]
  ld f1, @5[1]
  st f1, @2[1]"""
    return body, out(f={0: X[3] - Y[3], 1: X[1] - Y[1]})


CASES = {"int": (int_case, ""), "f32": (lambda: float_case("f32"), ""), "f64": (lambda: float_case("f64"), ""),
         "li_mov_sel": (li_mov_sel_case, ""), "fcvt": (fcvt_case, ""), "branches": (branch_case, ""),
         "access": (access_case, ACCESS), "vector_access": (vector_access_case, VECTOR_ACCESS),
         "vectors": (vector_case, ""), "host": (host_case, ""), "fma": (fma_case, ""),
         "nontemporal": (nontemporal_case, ""),
         "typed_reads": (typed_read_case, TYPED_ACCESS)}


def program_of(name: str) -> tuple[Program, dict[str, np.ndarray]]:
    build, access = CASES[name]
    body, want = build()
    tail = "" if "halt" in body else "\n  halt"
    text = HEADER + access + ".code\n" + PROLOGUE + body + tail + "\n.end\n"
    return disassemble(assemble(parse_dae(text, f"{name}.dae")), f"{name}.bin"), want


@pytest.mark.parametrize("name", sorted(CASES))
def test_instruction_is_identical_on_both_engines_and_right(name: str) -> None:
    program, want = program_of(name)
    ref_out, ref_st, got, st = both(program, {"x": X, "k": K, "y": Y, "q": q_bytes()})
    for k in ("f", "i", "g"):
        assert got[k].dtype == ref_out[k].dtype
        np.testing.assert_array_equal(got[k], ref_out[k], err_msg=f"{name}: {k} differs between the engines")
        np.testing.assert_array_equal(ref_out[k], want[k], err_msg=f"{name}: {k} differs from numpy")
    assert_same(ref_st, st)


def test_every_opcode_has_a_case() -> None:
    """A new opcode without a case here fails; so does a float op tested in one type only."""
    used: set[str] = set()
    for name in CASES:
        program, _ = program_of(name)
        items = [i for i in program.code if isinstance(i, Instr)] + [i for a in program.access for i in a.body]
        used |= {i.op for i in items} | {i.base for i in items}
    assert set(OPS) <= used, f"opcodes without a case: {sorted(set(OPS) - used)}"
    for op in ("fadd", "fsub", "fmul", "fdiv", "fmax", "fmin"):
        assert {f"{op}.f32", f"{op}.f64"} <= used, op
    assert {"fcvt.f16", "fcvt.bf16", "fcvt.f32", "fcvt.f64", "vfdiv.f32", "vfdiv.f64", "vcvt.f64"} <= used
