"""The conditional branches' gshare predictor (ember/predictor.py): micro-kernels whose misprediction counts are
known, run on both engines, which must agree on every statistic; and its definition worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
from test_fast_engine import assert_same

from ember.backend.dae_text import parse_dae
from ember.machine import load_machine
from ember.predictor import BranchPredictor
from ember.sim import reference
from ember.sim.fast import engine as fast
from ember.sim.stats import Stats

MACHINE = load_machine("default")

# n iterations of a loop whose exit test is a conditional branch; inside, a branch on the data x[i] (taken when
# x[i] >= 1), and one on i % 3 (taken when it is 0): `skip` leaves out the branches the kernel does not want.
KERNEL = """.dae 2
.sym @0 input "x" i64 [{n}]
.sym @1 output "y" i64 [1]
.code
  alloc @1, [1]
  li r0, 0
  li r1, {n}
  li r4, 0
L0:
  bge r0, r1, L9
  {data}
  {period}
  add r0, r0, 1
  jmp L0
L9:
  st r4, @1[0]
  halt
.end
"""
DATA = "ld r2, @0[r0]\n  blt r2, 1, L1\n  add r4, r4, 1\nL1:"
PERIOD = "rem r3, r0, 3\n  beq r3, 0, L2\n  add r4, r4, 2\nL2:"


def run(text: str, inputs: dict[str, np.ndarray]) -> Stats:
    """Both engines; they must agree on every statistic."""
    p = parse_dae(text, "branches.dae")
    _, want = reference.simulate(p, inputs, MACHINE)
    _, got = fast.simulate(p, inputs, MACHINE, None, False)
    assert not fast.notes, fast.notes
    assert_same(want, got)
    return want


def kernel(n: int, data: bool = False, period: bool = False, seed: int = 0) -> Stats:
    x = np.random.default_rng(seed).integers(0, 2, n)
    text = KERNEL.format(n=n, data=DATA if data else "", period=PERIOD if period else "")
    return run(text, {"x": x})


def test_a_loop_exit_is_mispredicted_once() -> None:
    st = kernel(1000)
    assert st["execute.branch_mispredicts"] == 1
    assert st["execute.mispredict_cycles"] > 0


def test_a_random_branch_is_mispredicted_about_half_the_time() -> None:
    st = kernel(4000, data=True)
    assert 0.4 * 4000 < st["execute.branch_mispredicts"] < 0.6 * 4000
    quiet = kernel(4000)
    assert st["cycles"] > quiet["cycles"] + 0.4 * 4000 * MACHINE.execute.mispredict_penalty  # each miss is paid


def test_a_short_periodic_pattern_is_learned() -> None:
    st = kernel(3000, period=True)  # taken, not, not, taken, ...: the history tells them apart
    assert st["execute.branch_mispredicts"] < 20


def test_the_definition_worked_out_by_hand() -> None:
    b = BranchPredictor(8, 2)  # 8 counters, 2 bits of history; every counter starts at 1 (weakly not taken)
    # pc 5, history 00: counter 5 = 1 predicts not taken; taken is a miss, counter 5 -> 2, history 01
    assert b.miss(5, True) and b.counters[5] == 2 and b.history == 1
    # pc 5, history 01: counter 4 = 1, not taken is right; counter 4 -> 0, history 10
    assert not b.miss(5, False) and b.counters[4] == 0 and b.history == 2
    # pc 5, history 10: counter 7 = 1 predicts not taken, taken is a miss; history 01 (two bits kept)
    assert b.miss(5, True) and b.counters[7] == 2 and b.history == 1
    # pc 4, history 01: counter 5 = 2 predicts taken, and it is: counter 5 -> 3 (saturates at 3 next time)
    assert not b.miss(4, True) and b.counters[5] == 3
    assert not b.miss(6, True) and b.counters[5] == 3  # pc 6, history 11: counter 5 again, stays at 3


@pytest.mark.parametrize("setting, value", [("execute.branch_entries", "3"), ("execute.branch_history", "31")])
def test_predictor_sizes_are_checked(setting: str, value: str) -> None:
    from ember.ir.diagnostics import EmberError

    with pytest.raises(EmberError, match=setting.replace(".", r"\.")):
        MACHINE.set(setting, value)
