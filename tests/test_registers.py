"""The register files (issue 33, point 4): what a program needs at each instruction, the refusal of one that needs
more than the machine has (on both engines, through `simulate`), and the compiler fitting its code into them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ember.backend.dae import Program
from ember.backend.dae_text import parse_dae
from ember.backend.regalloc import fit_registers
from ember.backend.registers import needs, over
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.sim.engines import ENGINES, simulate

MACHINE = load_machine("default")
HANDWRITTEN = sorted((Path(__file__).resolve().parent.parent / "ember" / "bench" / "handwritten").glob("*.dae"))


def program(text: str) -> Program:
    return parse_dae(".dae 2\n" + text, "t.dae")


def accumulators(k: int, lanes: int = 128) -> Program:
    """k vectors of `lanes` float32 lanes, each carried round a loop of 3 trips (k accumulators), then stored."""
    inits = "\n".join(f"  vsplat.f32 v{10 + j}, f0, {lanes}" for j in range(k))
    adds = "\n".join(f"  vfadd.f32 v{10 + j}, v{10 + j}, v1" for j in range(k))
    stores = "\n".join(f"  vst v{10 + j}, @1[{j}, 0], v0" for j in range(k))
    return program(f""".sym @0 input "x" f32 [{lanes}]
.sym @1 output "y" f32 [{k}, {lanes}]
.code
  alloc @1, [{k}, {lanes}]
  li f0, 0.0
  li r1, 0
  vmask v0, 0, {lanes}, {lanes}
  vsplat.f32 v9, f0, {lanes}
{inits}
L0:
  bge r1, 3, L1
  vld v1, @0[0], v0
  vfadd.f32 v1, v1, v9
{adds}
  add r1, r1, 1
  jmp L0
L1:
{stores}
  halt
.end
""")


def run_both(p: Program, inputs: dict[str, np.ndarray], machine=MACHINE) -> list[dict[str, np.ndarray]]:
    return [simulate(p, inputs, machine, engine=e)[0] for e in ENGINES]


def test_accumulators_count_every_piece_and_too_many_are_refused_on_both_engines() -> None:
    """An accumulator of 128 float32 lanes is 8 of the 32 zmm registers; three fit, four (32 + the loop's
    temporary) do not, and both engines refuse them naming the registers and the limit."""
    x = {"x": np.arange(128, dtype=np.float32)}
    fits = accumulators(3)
    assert over(fits, MACHINE.execute) is None
    for out in run_both(fits, x):
        np.testing.assert_array_equal(out["y"], np.tile(3 * x["x"], (3, 1)))
    too_many = accumulators(4)
    found = over(too_many, MACHINE.execute)
    assert found is not None and found[1:] == ("vector", 32)
    messages = set()
    for e in ENGINES:
        with pytest.raises(EmberError) as err:
            simulate(too_many, x, MACHINE, engine=e)
        messages.add(str(err.value))
    (message,) = messages
    assert "vector registers are live here (v10 (8), v11 (8), v12 (8), v13 (8)" in message
    assert message.endswith("the machine has 32 (execute.vector_registers)")
    roomy = MACHINE.with_overrides(["execute.vector_registers=40"])
    for out in run_both(too_many, x, roomy):
        np.testing.assert_array_equal(out["y"], np.tile(3 * x["x"], (4, 1)))


def chain(between: str = "") -> Program:
    """Six 1024-lane vectors loaded, then summed into the last (`between` goes between the loads and the sums)."""
    body = "\n".join(f"  vld v{20 + j}, @0[0], v0" for j in range(6))
    sums = "\n".join(f"  vfadd.f32 v{20 + j + 1}, v{20 + j}, v{20 + j + 1}" for j in range(5))
    return program(f""".sym @0 input "x" f32 [1024]
.sym @1 output "y" f32 [1024]
.code
  alloc @1, [1024]
  vmask v0, 0, 1024, 1024
{body}
{between}{sums}
  vst v25, @1[0], v0
  halt
.end
""")


def test_a_vector_used_within_its_block_is_one_register_at_a_time() -> None:
    """Strip-mining: vectors written and last read in one block need one machine register each, however wide;
    the same vectors carried round the loop need all their pieces."""
    p = chain()
    worst = max(n.count("vector") for n in needs(p, 512))
    assert worst == 6  # six 64-piece vectors live at once, strip-mined: one register each
    x = {"x": np.arange(1024, dtype=np.float32)}
    for out in run_both(p, x):
        np.testing.assert_array_equal(out["y"], 6 * x["x"])


def test_splats_hold_one_register_and_all_true_masks_none() -> None:
    """A vsplat's pieces are one broadcast, an all-true vmask predicates nothing: 30 splats of 128 lanes carried
    round a loop fit in 32 registers; a mask whose bound is a register is a real mask (two of 64 lanes each)."""
    p = accumulators(1)
    need = max(needs(p, 512), key=lambda n: n.count("vector"))
    held = {str(r): k for r, k in need.files["vector"]}
    assert held["v9"] == 1 and held["v10"] == 8  # the splat constant, the accumulator
    assert all(k == 0 for _, k in need.files.get("mask", []))
    masked = program(""".sym @0 output "y" f32 [128]
.code
  alloc @0, [128]
  li r1, 100
  li f0, 1.0
  vsplat.f32 v1, f0, 128
  vmask v0, 0, r1, 128
L0:
  bge r1, 103, L1
  vst v1, @0[0], v0
  add r1, r1, 1
  jmp L0
L1:
  halt
.end
""")
    assert max(n.count("mask") for n in needs(masked, 512)) == 2


def test_general_registers_live_round_a_loop_are_counted_and_limited() -> None:
    """Fifteen integers carried round a loop fit x86-64's 15 usable general registers; sixteen do not."""
    def loop(k: int) -> Program:
        inits = "\n".join(f"  ld r{10 + j}, @0[{j}]" for j in range(k))
        adds = "\n".join(f"  add r{10 + j}, r{10 + j}, r{10 + j}" for j in range(k))
        stores = "\n".join(f"  st r{10 + j}, @1[{j}]" for j in range(k))
        return program(f""".sym @0 input "x" i64 [20]
.sym @1 output "y" i64 [20]
.code
  alloc @1, [20]
{inits}
  li r1, 0
L0:
  bge r1, 2, L1
{adds}
  add r1, r1, 1
  jmp L0
L1:
{stores}
  halt
.end
""")
    assert over(loop(14), MACHINE.execute) is None  # 14 values and the loop counter
    found = over(loop(15), MACHINE.execute)
    assert found is not None and found[1:] == ("general", 15) and found[0].count("general") == 16


def test_the_allocator_folds_constants_and_remakes_masks_and_keeps_the_results() -> None:
    """Codegen names a register per constant: 20 constants read in a loop need 22 general registers; as
    immediates they need none.  Eight masks of 64 lanes with a register bound need 8 of the 7 mask registers;
    made again before each use they need one at a time.  Both programs compute what they computed before."""
    consts = "\n".join(f"  li r{20 + j}, {j + 1}" for j in range(20))
    adds = "\n".join(f"  add r2, r2, r{20 + j}" for j in range(20))
    masks = "\n".join(f"  vmask v{10 + j}, 0, r3, 64" for j in range(8))
    stores = "\n".join(f"  vst v1, @1[{64 * j}], v{10 + j}" for j in range(8))
    p = program(f""".sym @0 input "n" i64 [1]
.sym @1 output "y" f32 [512]
.sym @2 output "s" i64 [1]
.code
  alloc @1, [512]
  alloc @2, [1]
  ld r3, @0[0]
{consts}
  li f0, 2.0
  vsplat.f32 v1, f0, 64
{masks}
  li r1, 0
  li r2, 0
L0:
  bge r1, 2, L1
{adds}
{stores}
  add r1, r1, 1
  jmp L0
L1:
  st r2, @2[0]
  halt
.end
""")
    limits = MACHINE.execute
    before = max(needs(p, 512), key=lambda n: n.count("general"))
    assert before.count("general") >= 22 and over(p, limits) is not None
    fitted = fit_registers(p, limits)
    assert over(fitted, limits) is None
    assert max(n.count("general") for n in needs(fitted, 512)) <= 4
    assert max(n.count("mask") for n in needs(fitted, 512)) == 1
    inputs = {"n": np.array([40])}
    roomy = MACHINE.with_overrides(["execute.general_registers=64", "execute.mask_registers=16"])
    want = simulate(p, inputs, roomy, engine="reference")[0]
    assert want["s"][0] == 2 * sum(range(1, 21))
    for out in run_both(fitted, inputs):
        for k in want:
            np.testing.assert_array_equal(out[k], want[k])


def test_a_program_that_already_fits_is_left_alone() -> None:
    p = accumulators(2)
    assert fit_registers(p, MACHINE.execute) is p


@pytest.mark.parametrize("path", HANDWRITTEN, ids=lambda p: p.name)
def test_every_expert_fits_the_default_core(path: Path) -> None:
    """The experts keep within the registers an AVX-512 core has (every -O level is checked by each run, as
    `simulate` refuses a program that does not fit)."""
    assert over(parse_dae(path.read_text(), path.name), MACHINE.execute) is None


def test_a_scalar_condition_selects_the_wider_vector() -> None:
    """vsel with an r condition picks one whole vector: the result may be the 1024-lane one (64 registers)."""
    p = program(""".sym @0 output "y" f32 [1024]
.code
  alloc @0, [1024]
  li r0, 0
  li f0, 1.0
  vsplat.f32 v8, f0, 1
  vmask v1, 0, 1024, 1024
  vld v9, @0[0], v1
  vsel v10, r0, v8, v9
L0:
  vst v10, @0[0], v1
  bge r0, 0, L1
  jmp L0
L1:
  halt
.end
""")
    held = {str(r): k for n in needs(p, 512) for r, k in n.files.get("vector", [])}
    assert held["v10"] == 64


def test_a_pop_behind_a_branch_takes_the_widest_vector_its_token_brings() -> None:
    """Two rules push token 1, one a 16-lane head and one a 1024-lane head; the callback pops after a branch.
    The pop may receive either: the vector made from it and kept past the run is counted at 1024 lanes."""
    p = program(""".sym @0 input "x" f32 [1024]
.sym @1 output "y" f32 [1024]
.access A0 0
  tu t0, 0, 2, 1
  vtu t1, 0, 16, 16, t0
  vtu t2, 0, 1024, 1024, t0
  mem s1, @0[t1]
  mem s2, @0[t2]
  on t1, ite, [s1], 1
  on t2, ite, [s2], 1
.end
.code
  li r1, 0
  li f0, 0.0
  vsplat.f32 v9, f0, 1
  run A0
  vmask v1, 0, 1024, 1024
  vst v9, @1[0], v1
  halt
A0.1:
  bge r1, 5, L0
  add r1, r1, 1
L0:
  pop v3
  vfadd.f32 v9, v3, v3
  ret
.end
""")
    found = over(p, MACHINE.execute)
    assert found is not None and found[1] == "vector"
    assert dict((str(r), k) for r, k in found[0].files["vector"])["v9"] == 64


def test_a_label_nothing_enters_does_not_end_a_block() -> None:
    """Strip-mining holds across a label no branch, jump or rule names: the chain stays one register a vector."""
    assert max(n.count("vector") for n in needs(chain("unused:\n"), 512)) == 6
