"""The out-of-order core and the memory side around it: behaviour each mechanism must show, on both engines."""

from __future__ import annotations

import numpy as np
import pytest

from ember.backend.dae_text import parse_dae
from ember.bench.run import compile_variant
from ember.bench.workloads import suite
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.sim.engines import simulate
from ember.sim.stats import Stats

DEFAULT = load_machine("ideal-dram")  # the default core; its DRAM serves every line alike, so a miss is 222 cycles
ENGINES = ("reference", "fast")
STALLS = ("starved", "pop_stall", "load_stall", "store_stall", "compute_stall", "mispredict")

# n loads, each from its own 4 KiB page (so its own line, cold), then a store to a fresh output line
MISSES = """.dae 2
.sym @0 input "x" f32 [{n}, 1024]
.sym @1 output "y" f32 [1]
.code
  li r0, 0
  li r1, 1
  li r2, {n}
  alloc @1, [1]
L0:
  bge r0, r2, L1
  ld f0, @0[r0, 0]
  add r0, r0, r1
  jmp L0
L1:
  st f0, @1[0]
  halt
.end
"""


def run_misses(n: int, machine: str | tuple[str, ...] = (), engine: str = "fast") -> Stats:
    program = parse_dae(MISSES.format(n=n), "misses.dae")
    m = DEFAULT.with_overrides([machine] if isinstance(machine, str) else machine)
    _, st = simulate(program, {"x": np.ones((n, 1024), np.float32)}, m, engine=engine)
    return st


@pytest.mark.parametrize("engine", ENGINES)
def test_the_window_and_fill_buffers_bound_memory_level_parallelism(engine: str) -> None:
    """64 independent loads that all miss to DRAM (222 cycles each): the default core keeps 12 in flight (its
    fill buffers); one fill buffer, or a 4-entry reorder buffer, serialises them."""
    wide = run_misses(64, engine=engine)["cycles"]
    one_slot = run_misses(64, "execute.miss_slots=1", engine)["cycles"]
    small_rob = run_misses(64, "execute.rob_entries=4", engine)["cycles"]
    assert 64 * 222 / 12 < wide < 64 * 222 / 6
    assert one_slot > 64 * 222 * 0.9 and small_rob > 64 * 222 * 0.5


@pytest.mark.parametrize("engine", ENGINES)
def test_stores_are_drained_before_the_run_ends(engine: str) -> None:
    """The last instruction is a store to a cold line: the run ends only once its line has come from DRAM
    (write-allocate) and the store is written, and the wait is charged to the store buffer."""
    st = run_misses(1, engine=engine)
    assert st["cycles"] >= 2 * 222  # the load's miss, then the store's line
    assert st["execute.store_stall_cycles"] >= 200


@pytest.mark.parametrize("engine", ENGINES)
def test_dispatch_slots_and_stalls_add_up_to_the_cycles(engine: str) -> None:
    for name in ("RM2_L1", "MP_web-Google", "KG_biokg"):
        w = suite("tiny", [name])[0]
        for variant in ("O0", "O3", "core"):
            program = compile_variant(w, variant)
            x = w.inputs(0)
            program.data[next(n for n, s in enumerate(program.symbols) if s.kind == "param")] = w.table(0, x["indices"])
            _, st = simulate(program, x, DEFAULT, engine=engine)
            total = st["execute.busy_cycles"] + sum(st[f"execute.{k}_cycles"] for k in STALLS) + st["host.cycles"]
            assert total == pytest.approx(st["cycles"], rel=1e-9), (name, variant)
            assert st["execute.busy_cycles"] == st["execute.uops"] / DEFAULT.execute.issue_width


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("key", "value", "message"), [
    ("access.traversal_units", "2",
     "access program A0 uses 4 traversal units; the machine has 2 (access.traversal_units)"),
    ("access.stream_slots", "4",
     "access program A0 uses 11 streams; the machine has 4 stream slots (access.stream_slots)"),
])
def test_a_program_needing_more_access_resources_is_refused(engine: str, key: str, value: str, message: str) -> None:
    w = suite("tiny", ["RM1_L0"])[0]
    program = compile_variant(w, "O3")
    with pytest.raises(EmberError, match=message.replace("(", r"\(").replace(")", r"\)")):
        simulate(program, w.inputs(0), DEFAULT.set(key, value), engine=engine)


def test_the_access_units_lanes_bound_its_issue_rate() -> None:
    """Half the lanes, twice the access-unit time for the same stream elements."""
    w = suite("tiny", ["RM3_L0"])[0]
    program = compile_variant(w, "O3")
    x = w.inputs(0)
    program.data[next(n for n, s in enumerate(program.symbols) if s.kind == "param")] = w.table(0, x["indices"])
    _, eight = simulate(program, x, DEFAULT)
    _, four = simulate(program, x, DEFAULT.set("access.lanes", "4"))
    assert four["access.elements"] == eight["access.elements"]
    assert four["roofline.access_cycles"] == 2 * eight["roofline.access_cycles"]
    assert four["access.busy_cycles"] > 1.9 * eight["access.busy_cycles"]


WIDE = """.dae 2
.sym @0 output "y" f32 [1]
.code
  li f0, 1.0
  vsplat.f32 v0, f0, {lanes}
  vfadd.f32 v1, v0, v0
  alloc @0, [1]
  halt
.end
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_a_vector_wider_than_the_machines_is_issued_as_several(engine: str) -> None:
    """A 512-bit core's vector holds 16 f32 lanes: an add of 512 lanes is 32 machine vectors, 32 uops on the
    two FP ports (two a cycle), not one instruction; the splat it reads is one broadcast (its pieces are
    copies of one register)."""
    _, narrow = simulate(parse_dae(WIDE.format(lanes=16), "w.dae"), {}, DEFAULT, engine=engine)
    _, wide = simulate(parse_dae(WIDE.format(lanes=512), "w.dae"), {}, DEFAULT, engine=engine)
    assert wide["execute.uops"] == narrow["execute.uops"] + 31
    assert wide["cycles"] >= narrow["cycles"] + 15


DIVIDES = """.dae 2
.sym @0 output "y" f32 [1]
.code
  li f0, 1.0
{body}  alloc @0, [1]
  halt
.end
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_roofline_stays_below_one_when_a_held_pipe_outlasts_its_latency(engine: str) -> None:
    """A divider held 16 cycles whose result is ready after 1: the busiest-pipe bound counts the last divide
    from its issue, not to the end of its hold."""
    loop = DIVIDES.format(body="  fdiv.f32 f1, f0, f0\n" * 8)
    m = DEFAULT.with_overrides(["execute.fp_div_latency=1", "execute.fp_div_throughput=16"])
    _, st = simulate(parse_dae(loop, "d.dae"), {}, m, engine=engine)
    assert st["roofline.execute_cycles"] == 7 * 16 and st["roofline_fraction"] <= 1.0


@pytest.mark.parametrize("per_cycle,hold", [(1, 1), (2, 1), (4, 1), (1, 3), (1, 8)])
def test_port_booking_equals_the_first_cycle_with_room(per_cycle: int, hold: int) -> None:
    """Ports.book skips full cycles it has seen before; its answers must be the definition's: the first
    whole cycle k >= floor(t) where cycles k .. k+hold-1 each have fewer than per_cycle bookings."""
    from ember.sim.pipeline import Ports

    rng = np.random.default_rng(per_cycle * 10 + hold)
    ports, used = Ports(per_cycle, hold), {}
    ports.prune_at = 256  # so that pruning runs often in a short test
    front = 0.0
    for step, ahead in zip(rng.choice([0.0, 0.5, 2.0], 2000), rng.choice([0.0, 0.5, 3.0, 40.0], 2000)):
        front += step * hold / per_cycle  # a little slower than the pipes on average: the backlog stays bounded
        t = front + ahead  # ready now, soon or much later: bookings interleave
        k = int(t)
        while any(used.get(k + j, 0) >= per_cycle for j in range(hold)):
            k += 1
        for j in range(hold):
            used[k + j] = used.get(k + j, 0) + 1
        assert ports.book(float(t), int(front)) == (t if k == int(t) else float(k))
