"""One semantics on both engines (issue 13): 64-bit wrap-around integers, registers that start at 0, wide
vectors, traversal-unit counters that cannot overflow, units with nothing to do, integer constants pushed by
rules, and a cycle limit that stops every kind of endless loop at the same cycle with the same words.

Every program here passes the assembler; each runs on the reference engine and on the compiled fast engine,
which must agree on outputs, statistics and errors.  Expected values are computed independently: numpy
int64 arithmetic, or Python integers reduced to 64 bits by hand.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from conftest import run_tool
from test_fast_engine import assert_same

from ember.backend.dae import Program
from ember.backend.dae_text import parse_dae
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.sim import cycle_limit as limits
from ember.sim import reference
from ember.sim.fast import engine as fast
from ember.sim.stats import Stats

MACHINE = load_machine("default")
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def to_int64(x: int) -> int:
    """A Python integer reduced modulo 2^64 to the signed 64-bit range (independent of the engines' code)."""
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >= 1 << 63 else x


def program(text: str) -> Program:
    return parse_dae(".dae 2\n" + text, "t.dae")


def both(p: Program, max_cycles: float | None = None) -> tuple[dict[str, np.ndarray], Stats]:
    """Run on both engines; they must agree exactly (outputs and every statistic but host time)."""
    want_out, want = reference.simulate(p, {}, MACHINE, max_cycles)
    got_out, got = fast.simulate(p, {}, MACHINE, max_cycles, False)
    assert not fast.notes, fast.notes  # compiled, not handed to the reference engine
    assert sorted(got_out) == sorted(want_out)
    for k in want_out:
        assert got_out[k].dtype == want_out[k].dtype
        np.testing.assert_array_equal(got_out[k], want_out[k])
    assert_same(want, got)
    return want_out, want


def both_fail(p: Program, max_cycles: float | None = None, inputs: dict[str, np.ndarray] | None = None,
              compiled: bool = True) -> str:
    """Run on both engines; both must stop with the same error, which is returned.  `compiled`: the fast engine
    ran the program itself (it may still hand an error to the reference engine to word)."""
    with pytest.raises(EmberError) as want:
        reference.simulate(p, inputs or {}, MACHINE, max_cycles)
    with pytest.raises(EmberError) as got:
        fast.simulate(p, inputs or {}, MACHINE, max_cycles, False)
    assert not fast.notes if compiled else fast.notes
    assert str(got.value) == str(want.value)
    assert "internal error" not in str(want.value) and "\n" not in str(want.value)
    return str(want.value)


# --- 1. integers: 64-bit two's complement -------------------------------------------------------------

def numpy_result(op: str, a: int, b: int) -> int:
    x, y = np.int64(a), np.int64(b)
    with np.errstate(over="ignore"):
        if op in ("add", "sub", "mul"):
            return int({"add": np.add, "sub": np.subtract, "mul": np.multiply}[op](x, y))
    if op == "div":  # numpy's floor_divide of INT64_MIN by -1 is platform-defined: reduce Python's by hand
        return to_int64(a // b)
    return int(np.remainder(x, y)) if b != -1 else 0  # floor modulo, the sign of the divisor


INT_CASES = [("add", I64_MAX, 1), ("add", I64_MIN, -1), ("sub", I64_MIN, 1), ("sub", 0, I64_MIN),
             ("mul", I64_MAX, 2), ("mul", 3037000500, 3037000500), ("mul", I64_MIN, -1), ("div", I64_MIN, -1),
             ("rem", I64_MIN, -1), ("div", -7, 2), ("rem", -7, 2), ("div", 7, -2), ("rem", 7, -2),
             ("div", I64_MIN, 3), ("rem", I64_MAX, -5)]


@pytest.mark.parametrize(("op", "a", "b"), INT_CASES)
def test_integer_arithmetic_wraps_the_same_on_both_engines(op: str, a: int, b: int) -> None:
    """The result, and a branch on its sign (the issue's case: 2^63-1 + 1 then a branch), agree."""
    out, st = both(program(f"""
.sym @0 output "y" i64 [2]
.code
  alloc @0, [2]
  li r0, {a}
  li r1, {b}
  {op} r2, r0, r1
  st r2, @0[0]
  li r3, 0
  bge r2, 0, L1
  li r3, 1
L1:
  st r3, @0[1]
  halt
.end
"""))
    want = numpy_result(op, a, b)
    assert out["y"].tolist() == [want, int(want < 0)]
    assert st["execute.op.bge"] == 1


def test_integer_division_by_zero_traps_alike() -> None:
    err = both_fail(program("""
.sym @0 output "y" i64 [1]
.code
  alloc @0, [1]
  li r0, 5
  li r1, 0
  rem r2, r0, r1
  st r2, @0[0]
  halt
.end
"""))
    assert "integer division by zero" in err


@pytest.mark.parametrize(("op", "a", "b"), [("add", I64_MAX, 1), ("sub", I64_MIN, 3), ("mul", I64_MAX, I64_MAX),
                                            ("div", I64_MIN, -1), ("mul", -(2**40), 2**30)])
def test_access_unit_alu_streams_wrap(op: str, a: int, b: int) -> None:
    """An ALU stream of two parameters, pushed to the core; parameters come from r registers."""
    out, _ = both(program(f"""
.sym @0 output "y" i64 [1]
.access A0 2
  tu t0, 0, 1, 1
  alu s0, {op}, p0, p1
  on t0, ite, [s0], 1
.end
.code
  alloc @0, [1]
  li r0, {a}
  li r1, {b}
  run A0, r0, r1
  halt
A0.1:
  pop r2
  st r2, @0[0]
  ret
.end
"""))
    assert out["y"].tolist() == [numpy_result(op, a, b)]


def test_vector_lane_indices_wrap() -> None:
    """viota's lanes are start + l and vmask's test start + l < bound, both wrapped like add."""
    start = I64_MAX - 1
    out, _ = both(program(f"""
.sym @0 output "y" i64 [4]
.sym @1 output "z" i64 [4]
.code
  alloc @0, [4]
  alloc @1, [4]
  li r0, {start}
  viota v0, r0, 4
  vmask v1, 0, 4, 4
  vst v0, @0[0], v1
  vmask v2, r0, 0, 4
  vst v0, @1[0], v2
  halt
.end
"""))
    with np.errstate(over="ignore"):
        lanes = np.arange(4, dtype=np.int64) + np.int64(start)
    assert out["y"].tolist() == lanes.tolist()
    # lanes the mask leaves off keep alloc's bytes (-1)
    assert out["z"].tolist() == np.where(lanes < 0, lanes, -1).tolist() == [-1, -1, I64_MIN, I64_MIN + 1]


def test_stores_into_narrow_integers_wrap() -> None:
    v = 2**40 + 2**31 + 5
    out, _ = both(program(f"""
.sym @0 output "y" i32 [1]
.sym @1 output "b" i1 [1]
.code
  alloc @0, [1]
  alloc @1, [1]
  li r0, {v}
  st r0, @0[0]
  li r1, 2
  st r1, @1[0]
  halt
.end
"""))
    assert out["y"].tolist() == [int(np.int64(v).astype(np.int32))]
    assert out["b"].tolist() == [True]


@pytest.mark.parametrize("extents", [[2**62, 4], [400_000_000_000]])
def test_an_allocation_too_large_is_one_error_on_both_engines(extents: list[int]) -> None:
    """Element counts past int64 (the generated C multiplied them unchecked) and sizes no host can give."""
    regs = "\n".join(f"  li r{d}, {x}" for d, x in enumerate(extents))
    shape = ", ".join("?" for _ in extents)
    err = both_fail(program(f"""
.sym @0 output "y" f32 [{shape}]
.code
{regs}
  alloc @0, [{", ".join(f"r{d}" for d in range(len(extents)))}]
  halt
.end
"""))
    assert "cannot be allocated" in err and f"{int(np.prod(extents, dtype=object)) * 4:,} bytes" in err


def expected_conversion(x: float, bits: int) -> int:
    """Truncation toward zero; NaN, infinities and values out of range give the type's minimum."""
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1)
    return int(x) if math.isfinite(x) and lo <= math.trunc(x) < hi else lo


@pytest.mark.parametrize("ty", ["i8", "i32", "i64"])
@pytest.mark.parametrize("x", [2.9, -2.9, 127.9, -128.9, 3e9, -2147483648.5, 1e19, -9.3e18, math.inf, math.nan])
def test_vector_float_to_integer_conversion_is_defined(ty: str, x: float) -> None:
    """vcvt of floats out of the target's range or NaN was undefined behaviour in C (the engines disagreed)."""
    bits = int(ty[1:])
    out, _ = both(program(f"""
.sym @0 output "y" {ty} [4]
.code
  alloc @0, [4]
  li f0, {x!r}
  vsplat.f64 v0, f0, 4
  vcvt.{ty} v1, v0
  vmask v2, 0, 4, 4
  vst v1, @0[0], v2
  halt
.end
"""))
    assert out["y"].tolist() == [expected_conversion(x, bits)] * 4


def test_a_float_stream_used_as_an_integer_is_one_error() -> None:
    """A loop bound read from a float tensor: NaN was an internal error, 1e30 a bound past int64."""
    p = program("""
.sym @0 input "x" f32 [1]
.sym @1 output "y" i64 [1]
.access A0 0
  tu t0, 0, 1, 1
  mem s0, @0[t0]
  tu t1, 0, s0, 1, t0
  on t1, ite, [t1], 1
.end
.code
  alloc @1, [1]
  run A0
  halt
A0.1:
  pop r0
  ret
.end
""")
    for x in (2.5, math.nan):
        err = both_fail(p, inputs={"x": np.array([x], dtype=np.float32)}, compiled=False)
        assert "s0 holds a float" in err and "t1" in err


def test_a_gather_with_float_indices_is_one_error() -> None:
    err = both_fail(program("""
.sym @0 input "x" f32 [8]
.sym @1 output "y" f32 [4]
.code
  alloc @1, [4]
  li f0, 2.7
  vsplat.f32 v0, f0, 4
  vmask v2, 0, 4, 4
  vgather v1, @0[v0], v2
  vst v1, @1[0], v2
  halt
.end
"""), inputs={"x": np.arange(8, dtype=np.float32)}, compiled=False)
    assert "indices are integers" in err


# --- 2. registers start at 0 --------------------------------------------------------------------------

def test_registers_start_at_zero() -> None:
    """r0 and f0 are written only on a path not taken, so they are read as their initial 0 and 0.0."""
    out, _ = both(program("""
.sym @0 output "y" i64 [1]
.sym @1 output "z" f64 [1]
.code
  alloc @0, [1]
  alloc @1, [1]
  li r1, 0
  beq r1, 0, L1
  li r0, 5
  li f0, 2.5
L1:
  st r0, @0[0]
  st f0, @1[0]
  halt
.end
"""))
    assert out["y"].tolist() == [0] and out["z"].tolist() == [0.0]


# --- 3. wide vectors are not C stack arrays ------------------------------------------------------------

def test_a_very_wide_vector_does_not_overflow_the_c_stack() -> None:
    """The assembler caps lanes at MAX_LANES, but the fast engine must not rely on it: a 3,000,000-lane
    vector (12 MB, more than a default C stack) built by hand into the Program runs on both engines."""
    p = program("""
.sym @0 output "y" f32 [1]
.code
  alloc @0, [1]
  li f0, 1.5
  vsplat.f32 v0, f0, 4096
  fadd.f32 f1, f0, f0
  st f1, @0[0]
  halt
.end
""")
    splat = next(i for i in p.code if getattr(i, "op", "") == "vsplat.f32")
    splat.args[2] = 3_000_000
    out, _ = both(p)
    assert out["y"].tolist() == [3.0]


# --- 4. traversal-unit counters ------------------------------------------------------------------------

TU_PUSH = """
.sym @0 output "y" i64 [8]
.access A0 3
  {tu} t0, p0, p1, {step}
  on t0, ite, [t0], 1
.end
.code
  alloc @0, [8]
  li r0, {lb}
  li r1, {ub}
  li r2, 0
  li r5, -1
  run A0, r0, r1, r2
  halt
A0.1:
  pop {reg}
  add r5, r5, 1
  {store}
  ret
.end
"""


def test_counter_that_would_overflow_traps_alike() -> None:
    """Bound 2^63-1 with step 2^62 (the fast engine's counter overflowed, then segfaulted); bounds from
    parameters, so the check is at run time."""
    err = both_fail(program(TU_PUSH.format(tu="tu", step=2**62, lb=0, ub=I64_MAX, reg="r3",
                                           store="st r3, @0[r5]")))
    assert "t0" in err and str(I64_MAX) in err and "2^63-1" in err


def test_vector_counter_that_would_overflow_traps_alike() -> None:
    err = both_fail(program(TU_PUSH.format(tu="vtu", step=16, lb=I64_MAX - 40, ub=I64_MAX - 10, reg="v3",
                                           store="")))
    assert "t0" in err and "2^63-1" in err


def test_counter_at_the_overflow_edge_iterates_exactly() -> None:
    """ub - 1 + step == 2^63-1 is allowed: lb = -2^63, step 2^62, ub = 2^62 gives exactly three values."""
    lb, ub, step = I64_MIN, 2**62, 2**62
    assert ub - 1 + step == I64_MAX
    out, st = both(program(TU_PUSH.format(tu="tu", step=step, lb=lb, ub=ub, reg="r3", store="st r3, @0[r5]")))
    want = list(range(lb, ub, step))
    assert out["y"].tolist()[:len(want)] == want and st["callbacks"] == len(want) == 3


# --- 5. traversal units with nothing to do -------------------------------------------------------------

EMPTY_LOOPS = """
.sym @0 output "y" i64 [2]
.access A0 0
  tu t0, 0, {n}, 1
  tu t1, 5, {n}, 7, t0
  tu t2, 0, 2, 1
  on t2, ite, [t2], 1
.end
.code
  alloc @0, [2]
  run A0
  halt
A0.1:
  pop r0
  st r0, @0[r0]
  ret
.end
"""


def test_a_trillion_empty_iterations_finish_at_once_and_cost_nothing() -> None:
    """10^12 x 1.4*10^11 iterations with no stream, rule or token: counters cost no time, so the run takes the
    cycles of the same program with three iterations, on both engines, in well under a second of work."""
    t0 = time.perf_counter()
    _, big = both(program(EMPTY_LOOPS.format(n=10**12)))
    assert time.perf_counter() - t0 < 30
    _, small = both(program(EMPTY_LOOPS.format(n=8)))
    assert big["cycles"] == small["cycles"] and big["callbacks"] == 2


def test_empty_unit_leaves_its_last_value() -> None:
    """A unit with nothing to do runs only its last iteration: its counter ends where iterating would leave it,
    which a later unit's rule can push (a read outside its traversal)."""
    lb, ub, step = 5, 10**12, 7
    out, _ = both(program(f"""
.sym @0 output "y" i64 [1]
.access A0 0
  tu t0, {lb}, {ub}, {step}
  tu t1, 0, 1, 1
  on t1, ite, [t0], 1
.end
.code
  alloc @0, [1]
  run A0
  halt
A0.1:
  pop r0
  st r0, @0[0]
  ret
.end
"""))
    assert out["y"].tolist() == [range(lb, ub, step)[-1]]


@pytest.mark.slow
def test_a_token_far_behind_a_silent_traversal() -> None:
    """1.1 million stream elements, one a cycle, before the first token: the callback's pop issues over 2^20
    cycles past the core's last dispatch.  The fast engine books it beyond its ring of per-cycle port counts
    (which used to grow to the whole gap, two bytes a cycle, and crash when that failed), with the reference's
    timing."""
    p = program("""
.sym @0 output "y" i64 [1]
.access A0 0
  tu t0, 0, 1100000, 1
  alu s0, add, t0, 1
  tu t1, 0, 2, 1
  on t1, ite, [t1], 1
.end
.code
  alloc @0, [1]
  run A0
  halt
A0.1:
  pop r0
  add r1, r1, r0
  st r1, @0[0]
  ret
.end
""")
    machine = MACHINE.with_overrides(("access.lanes=1",))
    want_out, want = reference.simulate(p, {}, machine)
    got_out, got = fast.simulate(p, {}, machine, None, False)
    assert not fast.notes
    assert_same(want, got)
    assert got_out["y"].tolist() == want_out["y"].tolist() == [1] and got["cycles"] > 1_100_000


# --- 6. integer constants pushed by a rule -------------------------------------------------------------

def test_rules_push_integer_constants() -> None:
    out, st = both(program("""
.sym @0 output "y" i64 [3]
.access A0 0
  tu t0, 0, 3, 1
  on t0, ite, [t0, 40, -9223372036854775808], 1
.end
.code
  alloc @0, [3]
  run A0
  halt
A0.1:
  pop r1
  pop r2
  pop r4
  add r3, r1, r2
  add r3, r3, r4
  st r3, @0[r1]
  ret
.end
"""))
    assert out["y"].tolist() == [to_int64(i + 40 + I64_MIN) for i in range(3)]
    assert st["operand_bytes"] == 3 * 3 * 8


# --- 7. the cycle limit --------------------------------------------------------------------------------

def stopped_at(err: str, limit: float) -> float:
    assert err.startswith(f"error: simulation exceeded --max-cycles={limit:g}: stopped at cycle "), err
    cycle = float(err.rsplit(" ", 1)[1])
    assert cycle > limit
    return cycle


MAIN_LOOP = """
.sym @0 output "y" i64 [1]
.code
  alloc @0, [1]
L0:
  jmp L0
  halt
.end
"""


def test_an_endless_main_loop_stops_at_the_same_cycle() -> None:
    err = both_fail(program(MAIN_LOOP), 3000)
    assert stopped_at(err, 3000) < 3001  # checked on every backward jump: a quarter of a cycle each


SCATTER_BACKLOG = """
.sym @0 output "y" f32 [6, 8]
.code
  alloc @0, [6, 8]
  li r2, 8
  li f0, 0.0
  vsplat.f32 v0, f0, 8
  li r5, 0
  li r6, 0
L0:
  viota v1, r6, 8
  vmask v2, r6, r2, 8
  vscatter v0, @0[r5, v1], v2
  add r6, r6, r2
  jmp L0
  halt
.end
"""


@pytest.mark.parametrize("limit", [2e4, pytest.param(2.5e6, marks=pytest.mark.slow)])
def test_an_endless_scatter_loop_stops_at_the_same_cycle(limit: float) -> None:
    """Found by ember-fuzz (a sample with a loop exit dropped): every scatter books the store pipe for all
    its lanes, so the bookings run ever further ahead of the front end.  The fast engine walked that whole
    backlog at each booking and, past its ring's reach (2^20 cycles), moved its far list down at each
    settle: quadratic, 33 s to 1e5 cycles.  The slow case reaches past the ring on both engines."""
    err = both_fail(program(SCATTER_BACKLOG), limit)
    assert limit < stopped_at(err, limit) < limit + 2


def test_an_endless_loop_in_a_callback_stops_at_the_same_cycle() -> None:
    """The loop counter is changed and changed back inside the callback: only the limit ends it."""
    err = both_fail(program("""
.sym @0 output "y" i64 [1]
.access A0 0
  tu t0, 0, 3, 1
  on t0, ite, [], 1
.end
.code
  alloc @0, [1]
  run A0
  halt
A0.1:
  li r0, 0
L1:
  add r0, r0, 1
  sub r0, r0, 1
  blt r0, 5, L1
  ret
.end
"""), 2500)
    assert stopped_at(err, 2500) < 2502


def test_an_endless_access_unit_stops_at_the_same_cycle() -> None:
    """2^63-1 iterations of a stream and no token: the access unit's clock is checked every iteration."""
    err = both_fail(program("""
.sym @0 output "y" i64 [1]
.access A0 0
  tu t0, 0, 9223372036854775807, 1
  alu s0, add, t0, 1
.end
.code
  alloc @0, [1]
  run A0
  halt
.end
"""), 2000)
    assert stopped_at(err, 2000) <= 2000 + 1 / MACHINE.access.lanes + 1e-9


def test_a_run_that_ends_past_the_limit_is_an_error_on_both_engines() -> None:
    """No loop at all: the final cycle count is checked too, so a limit always holds."""
    p = program("""
.sym @0 output "y" f64 [1]
.code
  alloc @0, [1]
  li f0, 3.0
  fdiv.f64 f1, f0, f0
  fdiv.f64 f1, f1, f0
  fdiv.f64 f1, f1, f0
  st f1, @0[0]
  halt
.end
""")
    _, st = both(p)
    err = both_fail(p, st["cycles"] - 1)
    assert stopped_at(err, st["cycles"] - 1) == pytest.approx(st["cycles"], rel=1e-12)  # as the message rounds it
    both(p, st["cycles"])  # exactly at the limit is allowed


def test_the_default_limit_applies_when_none_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "DEFAULT_MAX_CYCLES", 1500.0)
    err = both_fail(program(MAIN_LOOP))
    stopped_at(err, 1500)


def test_cli_documents_the_default_and_reports_the_stop(tmp_path) -> None:  # type: ignore[no-untyped-def]
    r = run_tool("sim", "--help")
    assert r.returncode == 0 and f"{limits.DEFAULT_MAX_CYCLES:g}" in r.stdout.decode().replace("\n", " ")
    from ember.backend.binary import assemble

    binary = tmp_path / "loop.bin"
    binary.write_bytes(assemble(program(MAIN_LOOP)))
    inputs = tmp_path / "none.npz"
    np.savez(inputs)
    for engine in ("fast", "reference"):
        r = run_tool("sim", str(binary), "--inputs", str(inputs), "--max-cycles", "500", "--engine", engine, "-q")
        err = r.stderr.decode().strip()
        assert r.returncode == 1 and err.count("\n") == 0
        stopped_at(err[len("ember-sim: "):] if err.startswith("ember-sim: ") else err, 500)
    r = run_tool("sim", str(binary), "--inputs", str(inputs), "--max-cycles", "0", "-q")
    assert r.returncode == 1 and "positive" in r.stderr.decode()


POP_KINDS = """
.sym @0 input "x" f32 [8]
.sym @1 output "y" f32 [8]
.access A0 0
  tu t0, 0, 1, 1
  vtu t1, 0, 8, 4, t0
  mem s1, @0[t1]
  tu t2, 0, 1, 1, t0
  mem s2, @0[t2]
  on t1, ite, [{push}], 1
.end
.code
  alloc @1, [8]
  run A0
  halt
A0.1:
  pop {dst}
  ret
.end
"""


@pytest.mark.parametrize("push,dst,words", [
    ("t1", "r1", "found a vector operand: a pop into an r register takes an integer"),
    ("s1", "r1", "found a vector operand: a pop into an r register takes an integer"),
    ("s1", "f1", "found a vector operand: a pop into an f register takes a scalar"),
    ("s2", "r1", "found a float operand: a pop into an r register takes an integer"),
    ("t0", "v1", "found a scalar operand: a pop into a v register takes a vector"),
])
def test_a_pop_into_a_register_of_the_wrong_kind_is_one_error(push: str, dst: str, words: str) -> None:
    """The assembler cannot pair pops with the rules' pushes; a vector popped into r1 was an internal error."""
    p = program(POP_KINDS.format(push=push, dst=dst))
    err = both_fail(p, inputs={"x": np.arange(8, dtype=np.float32)}, compiled=False)
    assert err == f"error: 'pop {dst}' {words}"


SIGNED_ZEROS = """
.sym @0 output "y" {ty} [8]
.code
  alloc @0, [8]
  li f0, {a}
  li f1, {b}
  {op}.{ty} f2, f0, f1
  li r0, 0
  st f2, @0[r0]
  vsplat.{ty} v0, f0, 4
  vsplat.{ty} v1, f1, 4
  v{op}.{ty} v2, v0, v1
  vmask v3, 0, 4, 4
  vst v2, @0[4], v3
  halt
.end
"""


@pytest.mark.parametrize("ty", ["f32", "f64"])
@pytest.mark.parametrize("op", ["fmin", "fmax"])
@pytest.mark.parametrize("a,b", [("-0.0", "0.0"), ("0.0", "-0.0"), ("-0.0", "-0.0"), ("nan", "-0.0"), ("0.0", "nan")])
def test_min_and_max_order_signed_zeros_and_propagate_nan(ty: str, op: str, a: str, b: str) -> None:
    """IEEE 754-2019 minimum/maximum: -0 < +0 whatever the operands' order (the engines' vector forms returned
    different zeros: found by ember-fuzz), NaN if either operand is NaN."""
    out, _ = both(program(SIGNED_ZEROS.format(ty=ty, op=op, a=a, b=b)))
    x, y = float(a), float(b)
    if math.isnan(x) or math.isnan(y):
        assert np.isnan(out["y"][[0, 4, 5, 6, 7]]).all()
        return
    want = (x if math.copysign(1, x) < 0 else y) if op == "fmin" else (y if math.copysign(1, x) < 0 else x)
    got = out["y"][[0, 4, 5, 6, 7]]
    assert (got == 0).all() and (np.signbit(got) == (math.copysign(1, want) < 0)).all()


@pytest.mark.parametrize("op", ["vfadd.f32 v2, v1, v1", "vfmul v2, v1, v1", "vfma.f32 v2, v1, v1, v1"])
def test_vector_arithmetic_refuses_integer_vectors(op: str) -> None:
    """The ISA has no vector integer arithmetic: an add of u8 vectors wrapped modulo 256 and an fma converted
    them for free, which let a kernel skip the vcvt it needs on x86."""
    p = program(f""".sym @0 input "x" u8 [16]
.sym @1 output "y" f32 [16]
.code
  alloc @1, [16]
  vmask v0, 0, 16, 16
  vld v1, @0[0], v0
  {op}
  vst v2, @1[0], v0
  halt
.end
""")
    message = both_fail(p, inputs={"x": np.arange(200, 216, dtype=np.uint8)}, compiled=False)
    assert message.endswith(f"'{op.split()[0]}' reads v1, a vector of u8: vector arithmetic takes float vectors "
                            "(convert it with vcvt first)")
