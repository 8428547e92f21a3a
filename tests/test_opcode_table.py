"""The instruction table, opcode by opcode: the value each row's Python form computes (the reference engine's)
against the value of its C form (what the fast engine emits), bit for bit, on edge values.

The cases are generated from the table: every row with a value (`py` and `c`) is compiled into one C function
over arrays of edge operands: ±0, NaN, ±inf, subnormals, the largest and smallest normals of float32 and float64,
int64's extremes, zero divisors (each side must report the row's fault on exactly the same operands), and vectors
of 19 lanes, which no machine vector divides.  A row whose effect each engine writes out itself (memory, the
queue, control) is compared on both engines by a program of its own in test_isa_identity.py; the last test here
checks that every execute-unit row is covered one way or the other, so a new row cannot go untested.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import subprocess
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from test_isa_identity import CASES, HEADER, PROLOGUE, K, X, program_of

from ember.backend.dae import Instr
from ember.backend.dae_text import parse_dae
from ember.ir.diagnostics import EmberError
from ember.isa import ROWS, Opcode, floats
from ember.machine import load_machine
from ember.sim.engines import simulate
from ember.sim.fast.build import CFLAGS, compiler

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")

INTS = np.array([0, 1, -1, 2, 3, 7, -8, 63, 64, 2**31 - 1, -2**31, 2**32, 2**62, 2**63 - 1, -2**63, -2**63 + 1],
                np.int64)
F32 = np.finfo(np.float32)
F64 = np.finfo(np.float64)
FLOATS = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 1.5, -2.25, 0.1, 3.0, 65504.0, 2.0**53 + 1, math.inf, -math.inf,
                   math.nan, -math.nan, float(F32.max), 3.5e38, float(F32.tiny), float(F32.smallest_subnormal),
                   -float(F32.smallest_subnormal), float(F64.max), -float(F64.max), float(F64.tiny), 5e-324,
                   -5e-324, 2.0**128 - 2.0**103], np.float64)
LANES = 19  # not a multiple of any machine vector's lanes


class Case(ctypes.Structure):
    """One call of a generated kernel: n operand tuples, and where the results go."""

    _fields_ = [("n", ctypes.c_int64), ("a", ctypes.c_void_p), ("b", ctypes.c_void_p), ("c", ctypes.c_void_p),
                ("out", ctypes.c_void_p), ("fault", ctypes.c_void_p)]


def _pairs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = zip(*itertools.product(values, repeat=2))
    return np.array(a, values.dtype), np.array(b, values.dtype)


def _kernel(row: Opcode, suffix: str) -> str:
    """The C function `k_<name><suffix>` applying the row's C form to every operand tuple of a Case."""
    kind, name = row.kind, f"k_{row.name}{suffix}"
    ops = {"a": "A[i]", "b": "B[i]", "c": "C[i]"}
    if kind in ("int", "branch"):
        head = "const int64_t *A = x->a, *B = x->b; int64_t *O = x->out; uint8_t *Z = x->fault;"
        fault = f"if ({row.fault.c.format(**ops)}) {{ Z[i] = 1; O[i] = 0; continue; }}" if row.fault else ""
        body = f"{fault} O[i] = (int64_t)({row.c.format(**ops)});"
    elif kind in ("float", "fma"):
        head = "const double *A = x->a, *B = x->b, *C = x->c; double *O = x->out;"
        body = f"O[i] = {row.c.format(**ops)};"
    elif kind in ("vfloat", "vfma"):
        t = "float" if suffix == "_f32" else "double"
        head = f"const {t} *A = x->a, *B = x->b, *C = x->c; {t} *O = x->out;"
        body = f"O[i] = {row.c.format(**ops, d='' if t == 'float' else 'd')};"
    elif kind in ("iota", "mask"):
        t = "int64_t" if kind == "iota" else "uint8_t"
        head = f"const int64_t *A = x->a, *B = x->b; {t} *O = x->out;"
        body = f"for (int64_t l = 0; l < {LANES}; l++) O[i * {LANES} + l] = {row.c.format(**ops)};"
    else:
        raise AssertionError(f"no kernel for kind {kind}")
    return f"void {name}(const Case *x) {{ {head} for (int64_t i = 0; i < x->n; i++) {{ {body} }} }}"


VALUE_ROWS = [r for r in ROWS if r.py is not None and r.c]
SUFFIXES = {"vfloat": ("_f32", "_f64"), "vfma": ("_f32",)}


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    """Every value row's kernels, compiled with the fast engine's runtime and flags."""
    runtime = resources.files("ember.sim.fast").joinpath("runtime.h").read_text()
    case = "typedef struct { int64_t n; const void *a, *b, *c; void *out; uint8_t *fault; } Case;"
    kernels = [_kernel(r, s) for r in VALUE_ROWS for s in SUFFIXES.get(r.kind, ("",))]
    d: Path = tmp_path_factory.mktemp("opcodes")
    (d / "k.c").write_text("\n".join([runtime, case, *kernels, ""]))
    cc = compiler()
    assert cc is not None
    subprocess.run([cc, *CFLAGS, str(d / "k.c"), "-o", str(d / "k.so"), "-lm"], check=True)
    return ctypes.CDLL(str(d / "k.so"))


def _call(lib: ctypes.CDLL, name: str, n: int, *arrays: np.ndarray | None) -> None:
    ptr = [a.ctypes.data if a is not None else None for a in arrays]
    getattr(lib, name)(ctypes.byref(Case(n, *ptr)))


def _same_bits(got: np.ndarray, want: np.ndarray, what: str, loose: np.ndarray | None = None) -> None:
    """Equal as bit patterns (so -0 differs from 0, and one NaN's payload from another's); where `loose`, both NaN
    is enough (docs/isa.md: which of two NaN operands comes out is not defined)."""
    view = {8: np.uint64, 4: np.uint32, 2: np.uint16, 1: np.uint8}[got.dtype.itemsize]
    want = want.astype(got.dtype)
    differ = got.view(view) != want.view(view)
    if loose is not None:
        differ &= ~(loose & np.isnan(got) & np.isnan(want))
    bad = np.flatnonzero(differ)
    assert not len(bad), f"{what}: C gives {got[bad[:5]]}, Python {want[bad[:5]]} at cases {bad[:5]}"


@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in VALUE_ROWS if r.kind in ("int", "branch")])
def test_integer_rows_agree(lib: ctypes.CDLL, row: Opcode) -> None:
    a, b = _pairs(INTS)
    out, fault = np.zeros(len(a), np.int64), np.zeros(len(a), np.uint8)
    _call(lib, f"k_{row.name}", len(a), a, b, None, out, fault)
    want, faults = [], []
    for x, y in zip(a.tolist(), b.tolist()):
        hit = row.fault is not None and row.fault.py(x, y)
        faults.append(int(hit))
        want.append(0 if hit else int(row.py(x, y)))
    assert fault.tolist() == faults, f"{row.name}: the two forms fault on different operands"
    _same_bits(out, np.array(want, np.int64), row.name)
    if row.fault is not None:
        assert any(faults), f"{row.name}: the edge values never reach its fault"


@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in VALUE_ROWS if r.kind == "float"])
def test_scalar_float_rows_agree(lib: ctypes.CDLL, row: Opcode) -> None:
    a, b = _pairs(FLOATS)
    out = np.zeros(len(a), np.float64)
    _call(lib, f"k_{row.name}", len(a), a, b, None, out, None)
    want = np.array([row.py(x, y) for x, y in zip(a.tolist(), b.tolist())], np.float64)
    _same_bits(out, want, row.name)


def _f32_triples() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with np.errstate(over="ignore"):
        v = FLOATS.astype(np.float32)
    a, b, c = zip(*itertools.product(v, repeat=3))
    return np.array(a, np.float32), np.array(b, np.float32), np.array(c, np.float32)


@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in VALUE_ROWS if r.kind in ("fma", "vfma")])
def test_fused_multiply_add_rows_agree(lib: ctypes.CDLL, row: Opcode) -> None:
    a, b, c = _f32_triples()
    if row.kind == "fma":  # scalar: f registers hold doubles, the row rounds its operands to float32
        args = [x.astype(np.float64) for x in (a, b, c)]
        out = np.zeros(len(a), np.float64)
        want = np.array([row.py(x, y, z) for x, y, z in zip(*(t.tolist() for t in args))], np.float64)
    else:
        args, out = [a, b, c], np.zeros(len(a), np.float32)
        want = row.py(a, b, c)
    suffix = "_f32" if row.kind == "vfma" else ""
    _call(lib, f"k_{row.name}{suffix}", len(a), *args, out, None)
    _same_bits(out, want, row.name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in VALUE_ROWS if r.kind == "vfloat"])
def test_vector_float_rows_agree(lib: ctypes.CDLL, row: Opcode, dtype: type) -> None:
    with np.errstate(over="ignore"):
        a, b = _pairs(FLOATS.astype(dtype))
    out = np.zeros(len(a), dtype)
    _call(lib, f"k_{row.name}_{'f32' if dtype is np.float32 else 'f64'}", len(a), a, b, None, out, None)
    for start in range(0, len(a), LANES):  # as the reference engine computes a vector of LANES lanes
        with np.errstate(all="ignore"):
            want = row.py(a[start:start + LANES], b[start:start + LANES]).astype(dtype, copy=False)
        both_nan = np.isnan(a[start:start + LANES]) & np.isnan(b[start:start + LANES])
        if row.py in (floats.vmax, floats.vmin):  # these define which NaN comes out
            both_nan[:] = False
        _same_bits(out[start:start + LANES], want, f"{row.name} ({np.dtype(dtype)})", both_nan)


@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in VALUE_ROWS if r.kind in ("iota", "mask")])
def test_lane_rows_agree(lib: ctypes.CDLL, row: Opcode) -> None:
    a, b = _pairs(INTS)
    out = np.zeros(len(a) * LANES, np.int64 if row.kind == "iota" else np.uint8)
    _call(lib, f"k_{row.name}", len(a), a, b, None, out, None)
    for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
        want = row.py(x, LANES) if row.kind == "iota" else row.py(x, y, LANES)
        _same_bits(out[i * LANES:(i + 1) * LANES], np.asarray(want).astype(out.dtype), f"{row.name}({x}, {y})")


def test_every_row_is_compared_on_both_forms() -> None:
    """A row has a value both forms compute here, or a program run on both engines in test_isa_identity.py (whose
    own test requires a program for every row; this one requires the value forms to come in pairs)."""
    used: set[str] = set()
    for name in CASES:
        program, _ = program_of(name)
        used |= {i.base for i in program.code if isinstance(i, Instr)} | {i.base for a in program.access
                                                                          for i in a.body}
    for row in ROWS:
        assert bool(row.py) == bool(row.c), f"'{row.name}' has a value in one language only"
        assert (row.py is not None and row.c) or row.name in used, f"'{row.name}' is compared nowhere"
    assert len(VALUE_ROWS) >= 29


def test_a_fault_is_an_error_on_both_engines() -> None:
    """A row's fault stops a run with an error naming the instruction, whichever engine runs it."""
    text = HEADER + ".code\n" + PROLOGUE + "  li r1, 7\n  li r2, 0\n  div r3, r1, r2\n  halt\n.end\n"
    program = parse_dae(text, "fault.dae")
    inputs = {"x": X, "k": K, "y": X, "q": np.zeros((1, 1), np.uint8)}
    for engine in ("reference", "fast"):
        with pytest.raises(EmberError, match="integer division by zero in 'div'"):
            simulate(program, inputs, load_machine("default"), engine=engine)
