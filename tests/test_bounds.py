"""Speed-of-light bounds: independent of the code, never above the run they bound, and sane in each part."""

from __future__ import annotations

import copy
import dataclasses
import re

import numpy as np
import pytest

from ember.backend.dae import Instr
from ember.bench.run import VARIANTS, compile_variant, run
from ember.bench.workloads import Workload, suite
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.sim.engines import simulate
from ember.sim.stats import Stats

MACHINES = {"default": load_machine("default"),
            "dram1": load_machine("default").with_overrides(["dram.device=ideal", "dram.bytes_per_cycle=1"])}


# One workload of each class in `make test`, the rest of the tiny suite in `make bench`: a case compiles six programs.
IN_MAKE_TEST = ("RM1_L0", "RM3_L0", "MP_wiki-Talk", "GNN_arxiv", "KG_biokg", "SpAttn_2")
SOL_WORKLOADS = [pytest.param(w.name, marks=[] if w.name in IN_MAKE_TEST else [pytest.mark.slow])
                 for w in suite("tiny")]


@pytest.mark.parametrize("machine", sorted(MACHINES))
@pytest.mark.parametrize("workload", SOL_WORKLOADS)
def test_sol_is_the_same_for_every_variant_and_below_every_run(workload: str, machine: str) -> None:
    """sol.* depend on the operation and its data only: every variant (O0..O3, core-only, hand-written) gets the
    same bounds; and no run beats them."""
    w = suite("tiny", [workload])[0]
    m = MACHINES[machine]
    stats = {v: run(w, v, m).stats for v in VARIANTS}
    for v, s in stats.items():
        assert 0 < s["sol_fraction"] <= 1.0, (v, s["sol_fraction"])
        assert s["sol.bound_cycles"] == max(s["sol.dram_cycles"], s["sol.execute_cycles"])
        assert "sol.access_cycles" not in s  # no stream element is one every program must issue (sim/bounds.py)
        assert s["roofline_fraction"] <= 1.0 + 1e-12, (v, s["roofline_fraction"])
        assert s["sol.dram_cycles"] == stats["O0"]["sol.dram_cycles"]
        assert s["sol.execute_cycles"] == stats["O0"]["sol.execute_cycles"]


def test_sol_parts_follow_from_the_workload() -> None:
    """For a sum bag on the default machine: DRAM = distinct rows + indices + offsets + output bytes over the peak
    of four DDR5-4800 sub-channels (64 bytes a burst of 8 clocks of 0.416 ns, at 2 GHz); execute = the largest of
    the adds (a bag's k distinct rows: k - 1 a chunk of 16 lanes, two a cycle), the reads of each distinct row
    (two a cycle) and the output's stores (one a cycle), computed here from the workload's inputs with numpy."""
    w = suite("tiny", ["RM2_L1"])[0]
    m = MACHINES["default"]
    s = run(w, "O3", m).stats
    x = w.inputs(0)
    distinct = len(np.unique(x["indices"]))
    compulsory = distinct * w.dim * 4 + x["indices"].nbytes + x["offsets"].nbytes + w.bags * w.dim * 4
    assert s["sol.dram_cycles"] == pytest.approx(compulsory / (4 * 64 / (8 * 0.416 * 2.0)), rel=1e-12)
    off, chunks = x["offsets"], w.dim // 16
    adds = sum(max(len(np.unique(x["indices"][off[b]:off[b + 1]])) - 1, 0) for b in range(w.bags))
    assert s["sol.execute_cycles"] == max(adds * chunks * 0.5, distinct * chunks * 0.5, w.bags * chunks * 1.0)


def test_a_program_doing_twice_the_work_keeps_its_roofline_but_not_its_sol() -> None:
    """The roofline judges a program by its own work, so code that runs its access program twice covers its
    roofline as well as the original does; the speed of light does not move, so its share falls by the whole
    extra time (less than half: the second pass finds the rows in the caches)."""
    w = suite("tiny", ["RM3_L0"])[0]
    m = MACHINES["default"]
    program = compile_variant(w, "paper-O3")
    x = w.inputs(0)
    program.data[next(n for n, s in enumerate(program.symbols) if s.kind == "param")] = w.table(0, x["indices"])
    _, once = simulate(program, x, m)
    at = next(i for i, ins in enumerate(program.code) if isinstance(ins, Instr) and ins.op == "run")
    assert program.code[at - 1].op == "sub"  # the bag counter starts again: `sub rB, r0, r1` (-1), then `run`
    program.code[at + 1:at + 1] = copy.deepcopy(program.code[at - 1:at + 1])
    _, twice = simulate(program, x, m)
    assert twice["access.elements"] == 2 * once["access.elements"]
    assert twice["sol.bound_cycles"] == once["sol.bound_cycles"]
    assert twice["roofline_fraction"] > 0.8 * once["roofline_fraction"]
    assert twice["cycles"] > 1.4 * once["cycles"]
    assert twice["sol_fraction"] < 0.7 * once["sol_fraction"]


def test_multicore_sol_is_the_whole_machines_only() -> None:
    """A core's own speed of light would count the rows another core already brought into the shared LLC, so
    only the totals carry sol.*; they stay below the run."""
    w = suite("tiny", ["RM3_L0"])[0]
    s = run(w, "O3", MACHINES["default"].with_overrides(["cores=2", "dram.channels=1"])).stats
    assert 0 < s["sol_fraction"] <= 1.0
    st = simulate_cores_stats(w)
    assert "sol_fraction" in st and not any(k.startswith("core0.sol") for k in st)


def simulate_cores_stats(w: Workload) -> Stats:
    """The multi-core statistics of one table of `w` at O3 on two cores."""
    from ember.sim.multicore import simulate_cores, split_bags

    x = w.inputs(0)
    table = w.table(0, x["indices"])
    slices = split_bags(x, 2)
    programs = []
    for part in slices:
        p = compile_variant(dataclasses.replace(w, bags=len(part["offsets"]) - 1), "O3")
        p.data[next(n for n, s in enumerate(p.symbols) if s.kind == "param")] = table
        programs.append(p)
    return simulate_cores(programs, slices, MACHINES["default"].with_overrides(["cores=2"]))[1]


@pytest.mark.parametrize("change, message", [
    ("  st r0, @1[0]\n", "work record 0 reads @1 (offsets), which the code writes"),
    ("  st f0, @2[0, 0]\n", "'st' writes @2, param 'table': params are read-only"),
    ("  alloc @4, [4]\n", "work record 0 reads @4 (indices), which the code writes"),
    (".work bag sum table=@2 indices=@0 offsets=@1 output=@3 empty=zero\n", "work records 0 and 1 have the same "
     "output @3"),
])
def test_a_program_cannot_change_what_its_bound_is_counted_from(change: str, message: str) -> None:
    """The speed of light is counted from the work records' tensors after the run: a program that writes the
    offsets a record counts from (a kernel set every offset to 0, so no bag had a row, and numpy's reference, made
    from the changed inputs, agreed), writes a record's indices or a param, or declares a record twice is refused
    before it runs."""
    from ember.backend.dae_text import parse_dae

    text = """.dae 2
.sym @0 input "indices" i64 [4]
.sym @1 input "offsets" i64 [3]
.sym @2 param "table" f32 [10, 16]
.sym @3 output "output" f32 [2, 16]
.sym @4 temp "t" i64 [4]
.work bag sum table=@2 indices=@0 offsets=@1 output=@3 empty=zero
.code
  li r0, 0
  li f0, 0.0
  alloc @3, [2, 16]
  halt
.end
"""
    assert parse_dae(text, "ok.dae").work  # the unchanged program is fine
    if change.startswith(".work"):
        bad = text.replace(".code\n", change + ".code\n")
    else:
        bad = text.replace("  halt\n", change + "  halt\n")
        if "@4" in change:
            bad = bad.replace("indices=@0", "indices=@4")
    with pytest.raises(EmberError, match=re.escape(message)):
        parse_dae(bad, "bad.dae")


def test_an_einsum_is_charged_its_terms() -> None:
    """A bag computed as a count matrix times the table by a host Einsum: 2 flops a term of the sum (256 x 64 x
    1024 terms), at the matrix rate; charged its output's size alone it beat the speed of light 3.7 times."""
    from ember.sim.host import host_cost

    counts, table = np.zeros((256, 64), np.float32), np.zeros((64, 1024), np.float32)
    out = counts @ table
    cycles, flops, _ = host_cost("Einsum", [counts, table], [out], 64.0, 1e9, 64.0, {"equation": b"bj,jd->bd"})
    assert flops == 2 * 256 * 64 * 1024 and cycles == flops / 64.0
    assert host_cost("Einsum", [counts, table], [out], 64.0, 1e9, 64.0, {})[1] == out.size  # no equation: as before


def test_a_kernel_must_declare_the_work_the_workload_computes() -> None:
    """ember-bench judges a kernel by its own .work records, so it refuses one whose records differ from the
    compiled workload's: here a record over a param of made-up indices (which would raise the kernel's bar)."""
    from pathlib import Path

    from ember.backend.dae_text import parse_dae
    from ember.bench.run import Baseline, same_work

    w = suite("tiny", ["RM1_L0"])[0]
    path = Path(__file__).resolve().parent.parent / "ember" / "bench" / "handwritten" / f"bag_sum.d{w.dim}.dae"
    text = path.read_text()
    same_work(w, Baseline("expert", parse_dae(text, "expert.dae")))  # the expert says what it computes
    fake = text.replace(".work bag sum table=@2 indices=@0", ".sym @4 param \"fake\" i64 [4096]\n"
                        ".work bag sum table=@2 indices=@4")
    assert fake != text
    with pytest.raises(EmberError, match="its .work records must say what it computes"):
        same_work(w, Baseline("fake", parse_dae(fake, "fake.dae")))


@pytest.mark.parametrize("group", ["store", "fp", "load"])
def test_no_run_beats_its_speed_of_light_on_slow_pipes(group: str) -> None:
    """A pipe that takes an operation every 1,024 cycles (the most machine validation allows): the run ends when its
    last store (add, load) has issued, while the pipe is still busy, so outputs x 1,024 was past the run's own
    cycles (sol_fraction 1.03 on both engines; found by the fuzzer's settings at their limits, issue 35)."""
    w = suite("tiny", ["RM1_L0"])[0]
    m = MACHINES["default"].with_overrides([f"execute.{group}_throughput=1024"])
    s = run(w, "O3", m).stats
    assert s["sol_fraction"] <= 1.0, (s["sol.execute_cycles"], s["cycles"])
