"""Operands pushed without a token (`on t, ite, [s]` with no token): they wait in the queue for the callbacks of
later tokens, which pop them first.  How many wait is known only at run time, so the fast engine keeps every
operand of such an access program in a runtime FIFO (`access_code.enqueue`, `codegen.pop_fifo`); here it must give
the reference engine's outputs, statistics and errors."""

from __future__ import annotations

import numpy as np
import pytest
from test_fast_engine import MACHINE, assert_same, both
from test_survivors import TOKENLESS

from ember.backend.dae_text import parse_dae
from ember.ir.diagnostics import EmberError
from ember.sim import reference
from ember.sim.fast import engine as fast

HEAD = """.dae 2
.sym @0 input "x" f32 [?]
.sym @1 output "y" f32 [?]
.access A0 1
  tu t0, 0, p0, 1
  mem s0, @0[t0]
  alu s1, mul, t0, 3
"""

# Each iteration pushes x[i] and 3i without a token, then i with token 1: the callback pops the two waiting
# operands before its own.
INTERLEAVED = HEAD + """  on t0, ite, [s0, s1]
  on t0, ite, [t0], 1
.end
.code
  dim r1, @0, 0
  alloc @1, [r1]
  run A0, r1
  halt
A0.1:
  pop f1
  pop r2
  pop r3
  fcvt.f32 f2, r2
  fadd.f32 f3, f1, f2
  st f3, @1[r3]
  ret
.end
"""

# Each iteration pushes x[i] and i without a token; token 1's callback pops only one operand, so a backlog grows
# and the end's callback pops the other n: y[0] sums the first n operands, y[1] the last n.
BACKLOG = HEAD + """  on t0, ite, [s0, t0]
  on t0, ite, [], 1
  on t0, end, [], 2
.end
.code
  dim r1, @0, 0
  alloc @1, [2]
  run A0, r1
  st f2, @1[0]
  st f3, @1[1]
  halt
A0.1:
  pop f1
  fadd.f32 f2, f2, f1
  ret
A0.2:
  li r4, 0
L0:
  bge r4, r1, L1
  pop f1
  fadd.f32 f3, f3, f1
  add r4, r4, 1
  jmp L0
L1:
  ret
.end
"""


def run_both(text: str, n: int = 64) -> tuple[dict, dict]:
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    ref_out, ref_st, out, st = both(parse_dae(text, "f.dae"), {"x": x})
    np.testing.assert_array_equal(out["y"], ref_out["y"])
    assert_same(ref_st, st)
    return {"x": x}, out


@pytest.mark.parametrize("n", [64, 12_000])  # 36,000 operands pass the FIFO's ring of 32,768 entries
def test_waiting_operands_are_popped_before_the_tokens_own(n: int) -> None:
    inputs, out = run_both(INTERLEAVED, n)
    x = inputs["x"]
    np.testing.assert_array_equal(out["y"], x + 3 * np.arange(len(x), dtype=np.float32))


def test_a_backlog_carries_over_to_later_callbacks() -> None:
    inputs, out = run_both(BACKLOG)
    x = inputs["x"].astype(np.float64)
    ops = np.ravel(np.column_stack([x, np.arange(len(x))]))  # x0, 0, x1, 1, ...
    n = len(x)
    np.testing.assert_allclose(out["y"], [ops[:n].sum(), ops[n:].sum()], rtol=1e-5)


def test_operands_that_arrive_late_stall_the_pops_alike() -> None:
    """The survivors' program: one element per line, each a DRAM miss, read by the callback of the end token."""
    x = np.arange(64 * 64, dtype=np.float32)
    ref_out, ref_st, out, st = both(parse_dae(TOKENLESS, "t.dae"), {"x": x})
    assert out["y"][0] == ref_out["y"][0] == x[::64].sum()
    assert_same(ref_st, st)


@pytest.mark.parametrize(("callback", "want"), [
    ("  ret\n", "64 operands pushed by A0 were never popped"),
    ("  pop r1\n  ret\n", "'pop r1' found a float operand: a pop into an r register takes an integer"),
    ("  pop f1\n  pop f2\n  ret\n", "a callback pops more operands than were pushed"),
])
def test_mistakes_stop_both_engines_with_the_same_line(callback: str, want: str) -> None:
    text = HEAD + "  on t0, ite, [s0]\n  on t0, end, [], 1\n.end\n.code\n  dim r1, @0, 0\n  alloc @1, [1]\n" \
        "  run A0, r1\n  halt\nA0.1:\n" + callback + ".end\n"
    if "pop f1\n  pop f2" in callback:  # one operand waits when the token comes: the second pop finds none
        text = text.replace("tu t0, 0, p0, 1", "tu t0, 0, 1, 1")
    program = parse_dae(text, "f.dae")
    x = {"x": np.ones(64, dtype=np.float32)}
    with pytest.raises(EmberError) as ref:
        reference.simulate(program, x, MACHINE)
    with pytest.raises(EmberError) as got:
        fast.simulate(program, x, MACHINE, None, False)
    assert not fast.notes, fast.notes  # the generated code found the mistake (the reference words it)
    assert want in str(ref.value) and want in str(got.value)


def test_a_vector_operand_leaves_such_a_program_to_the_reference_engine() -> None:
    text = """.dae 2
.sym @0 input "x" f32 [?, 16]
.sym @1 output "y" f32 [?]
.access A0 1
  tu t0, 0, p0, 1
  vtu t1, 0, 16, 16, t0
  mem s0, @0[t0, t1]
  alu s1, add, t0, 0
  on t0, ite, [s1]
  on t1, ite, [s0], 1
.end
.code
  dim r1, @0, 0
  alloc @1, [r1]
  run A0, r1
  halt
A0.1:
  pop r2
  pop v0
  ret
.end
"""
    fast.simulate(parse_dae(text, "v.dae"), {"x": np.ones((3, 16), np.float32)}, MACHINE, None, False)
    assert any("vector operand of an access program that pushes operands without a token" in n for n in fast.notes)
