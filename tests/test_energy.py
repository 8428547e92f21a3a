"""The energy model (sim/energy.py): every run reports energy, its leaves sum to the total, each event is
priced as docs/architecture.md says, and the totals follow the machine's numbers."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import compile_model
from test_fast_engine import both
from test_multicore import programs_for

from ember.backend.binary import assemble, disassemble
from ember.backend.dae_text import parse_dae
from ember.bench.run import compile_variant, run
from ember.bench.workloads import suite
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.sim import reference
from ember.sim.energy import peak_power_w, scaled
from ember.sim.multicore import simulate_cores, split_bags
from ember.sim.stats import Stats

MODELS = Path(__file__).parent.parent / "samples" / "models"
SMALL = load_machine("small")


def leaves(st: Stats) -> dict[str, float]:
    return {n: float(s.value) for n, s in st.items() if n.startswith("energy.") and n.endswith("_j")}


def dlrm() -> tuple[object, dict[str, np.ndarray]]:
    data = np.load(MODELS / "dlrm.in.npz")
    return compile_model(MODELS / "dlrm.dynamo.onnx", "O3"), {k: data[k] for k in data.files}


def test_the_leaves_sum_to_the_total_and_power_is_energy_over_time() -> None:
    program, inputs = dlrm()
    ref_out, ref_st, out, st = both(program, inputs, SMALL)  # both engines, and they agree (both() checks)
    for s in (ref_st, st):
        parts = leaves(s)
        assert {"energy.core_j", "energy.access_j", "energy.queue_j", "energy.l1_j", "energy.l2_j", "energy.dram_j",
                "energy.host_j", "energy.static.core_j", "energy.static.dram_j"} <= set(parts)
        assert all(v > 0 for v in parts.values()), parts  # this model uses every block
        assert math.isclose(sum(parts.values()), s["energy_j"], rel_tol=1e-12)
        assert math.isclose(s["power_w"], s["energy_j"] / s["sim_seconds"], rel_tol=1e-12)


STRAIGHT = """.dae 2
.sym @0 output "y" i64 [?]
.code
  alloc @0, [1]
  li r1, 3
  add r2, r1, r1
  add r2, r2, r1
  mul r3, r2, r2
  st r3, @0[0]
  halt
.end
"""


def test_a_straight_line_program_costs_what_its_instructions_and_time_cost() -> None:
    """Counted by hand: six uops; alloc, li and two adds on the integer ALUs, one multiply, one store.  The
    store misses L1 and the next-line prefetcher fetches the line after it: two lookups, two line fills."""
    program = disassemble(assemble(parse_dae(STRAIGHT, "straight.dae")), "straight.bin")
    m = SMALL
    for key, value in (("energy.uop_pj", "100"), ("energy.int_op_pj", "7"), ("energy.int_mul_pj", "30"),
                       ("energy.cache_pj_8kib", "64"), ("energy.cache_size_exponent", "0.5"),
                       ("energy.core_static_w", "1"), ("energy.access_static_w", "0.5"),
                       ("energy.cache_static_w_per_mib", "2"), ("energy.dram_channel_static_w", "3")):
        m = m.set(key, value)
    out, st = reference.simulate(program, {}, m)
    assert out["y"][0] == 81
    assert (st["execute.uops"], st["execute.pipe.int_alu"], st["execute.pipe.int_mul"]) == (6, 4, 1)
    assert math.isclose(st["energy.core_j"], (6 * 100 + 4 * 7 + 30) * 1e-12, rel_tol=1e-12)
    assert (st["cache.l1.misses"], st["cache.l1.bytes"], st["execute.prefetches"]) == (2, 128, 1)
    l1_pj = 4 * 64 * (1024 / 8192) ** 0.5  # 1 KiB: sqrt(1/8) of the 8 KiB figure
    assert math.isclose(st["energy.l1_j"], l1_pj * 1e-12, rel_tol=1e-12)
    assert st["energy.access_j"] == 0 and st["energy.queue_j"] == 0 and st["energy.host_j"] == 0
    mib = (1024 + 4096) / (1 << 20)  # small has two levels: L1 private, L2 the shared last one
    watts = 1 + 0.5 + 2 * mib + 3
    static = sum(v for n, v in leaves(st).items() if n.startswith("energy.static."))
    assert math.isclose(static, watts * st["cycles"] / (m.clock_ghz * 1e9), rel_tol=1e-12)


LOOP = """.dae 2
.sym @0 output "y" i64 [1]
.code
  alloc @0, [1]
  li r0, 0
L0:
  add r0, r0, 1
  blt r0, 3, L0
  st r0, @0[0]
  halt
.end
"""


def test_a_branch_costs_an_integer_operation() -> None:
    """Three trips round a loop: alloc, li and three adds on the integer ALUs, three branches, one store; each
    branch is charged the integer-operation energy, as an ALU op is."""
    m = SMALL.set("energy.uop_pj", "100").set("energy.int_op_pj", "7")
    out, st = reference.simulate(parse_dae(LOOP, "loop.dae"), {}, m)
    assert out["y"][0] == 3
    assert (st["execute.uops"], st["execute.pipe.int_alu"], st["execute.pipe.branch"]) == (9, 5, 3)
    assert math.isclose(st["energy.core_j"], (9 * 100 + (5 + 3) * 7) * 1e-12, rel_tol=1e-12)


@pytest.mark.parametrize("engine", ["reference", "fast"])
def test_a_program_that_takes_no_time_draws_no_power(engine: str) -> None:
    """`halt` alone: no cycles, no energy, and an average power of 0 W rather than a division by zero."""
    from ember.sim.engines import simulate

    _, st = simulate(parse_dae(".dae 2\n.code\n  halt\n.end\n", "h.dae"), {}, SMALL, engine=engine)
    assert (st["cycles"], st["energy_j"], st["power_w"]) == (0, 0, 0)
    # the text statistics (ember-sim --stats F.txt) give each figure its unit
    lines = {line.split()[0]: line for line in st.to_text().splitlines()[1:-1]}
    assert lines["power_w"].endswith("(Watt)") and lines["energy_j"].endswith("(Joule)")
    assert lines["energy.core_j"].endswith("(Joule)") and lines["energy.static.core_j"].endswith("(Joule)")


def test_twice_every_energy_number_is_twice_the_energy() -> None:
    program, inputs = dlrm()
    _, st = reference.simulate(program, inputs, SMALL)
    _, st2 = reference.simulate(program, inputs, scaled(SMALL, 2.0))
    assert st2["cycles"] == st["cycles"]
    assert math.isclose(st2["energy_j"], 2 * st["energy_j"], rel_tol=1e-12)
    assert scaled(SMALL, 2.0).energy.cache_size_exponent == SMALL.energy.cache_size_exponent


def test_more_cores_leak_more_and_their_counters_add_up() -> None:
    """Four cores: static power of four cores over the slowest core's time; the uops, pipe uses and
    energy of the run are those of the four slices together."""
    w = suite("tiny", ["RM2_L1"])[0]
    m = SMALL.set("cores", "4")
    slices = split_bags(w.inputs(0), 4)
    _, st = simulate_cores(programs_for(w, slices, "O3"), slices, m, engine="reference")
    per_core = range(len(slices))
    for name in ("execute.uops", "execute.pipe.load", "execute.pipe.fp", "execute.op.pop"):
        assert st[name] == sum(st[f"core{k}.{name}"] for k in per_core)
    assert not any(n.startswith(("core0.energy", "core0.power")) for n, _ in st.items())
    assert math.isclose(st["energy.static.core_j"], 4 * m.energy.core_static_w * st["sim_seconds"], rel_tol=1e-12)
    assert math.isclose(sum(leaves(st).values()), st["energy_j"], rel_tol=1e-12)


def test_energy_numbers_are_machine_keys() -> None:
    m = load_machine("default")
    assert m.set("energy.dram_byte_pj", "31.76").energy.dram_byte_pj == 31.76
    assert ("energy.uop_pj", "390.0") in [(k, v) for k, v, _ in m.describe()]
    with pytest.raises(EmberError, match="'energy.uop_pj' = -1.0: must be a finite number >= 0"):
        m.set("energy.uop_pj", "-1")
    with pytest.raises(EmberError, match="unknown machine key 'energy.uops_pj'"):
        m.set("energy.uops_pj", "1")


def test_a_machine_file_without_energy_numbers_is_refused_by_name(tmp_path: Path) -> None:
    text = (Path(__file__).parent.parent / "ember" / "machines" / "default.toml").read_text()
    f = tmp_path / "old.toml"
    f.write_text(text[: text.index("[energy]")])
    with pytest.raises(EmberError, match="machine is missing 'energy'"):
        load_machine(str(f))


def test_the_default_uop_energy_is_its_documented_calibration() -> None:
    """default.toml: the Xeon Platinum 8380's 270 W / 40 cores, less 2.25 W of static power, over 5 uops a
    cycle at its 2.3 GHz base clock."""
    m = load_machine("default")
    assert m.energy.uop_pj == pytest.approx((270 / 40 - 2.25) / (m.execute.issue_width * 2.3e9) * 1e12, rel=0.01)


def test_peak_power_counts_every_core_at_full_issue_and_dram_at_full_bandwidth() -> None:
    m = SMALL.set("cores", "3").set("clock_ghz", "1").set("dram.channels", "2")
    for key, value in (("energy.uop_pj", "200"), ("energy.access_element_pj", "10"), ("energy.dram_byte_pj", "50"),
                       ("energy.core_static_w", "1"), ("energy.access_static_w", "0.25"),
                       ("energy.cache_static_w_per_mib", "1024"), ("energy.dram_channel_static_w", "4")):
        m = m.set(key, value)
    per_core = (5 * 200 + 8 * 10) * 1e-12 * 1e9  # issue width 5, 8 access lanes, at 1 GHz
    dram = 8 * 50 * 1e-12 * 1e9  # small's DRAM moves 8 bytes a cycle
    static = 3 * (1 + 0.25) + 1024 * (3 * 1024 + 4096) / 2**20 + 2 * 4  # two DRAM channels
    assert peak_power_w(m) == pytest.approx(3 * per_core + dram + static, rel=1e-12)


def test_the_bench_sums_energy_over_tables_leaf_by_leaf() -> None:
    """Two tables run one after another: each leaf is the sum of the two runs', so static energy covers
    both runs' time and power is the total over the summed time."""
    w = dataclasses.replace(suite("tiny", ["RM1_L0"])[0], tables=2)
    res = run(w, "O3", SMALL)
    per_table = []
    for t in range(2):
        program = compile_variant(w, "O3")
        inputs = w.inputs(t)
        for n, s in enumerate(program.symbols):
            if s.kind == "param":
                program.data[n] = w.table(t, inputs["indices"])
        per_table.append(reference.simulate(program, inputs, SMALL)[1])
    for name in ("energy.core_j", "energy.static.core_j", "energy.dram_j", "energy_j"):
        assert math.isclose(res.stats[name], per_table[0][name] + per_table[1][name], rel_tol=1e-9)
    seconds = sum(st["sim_seconds"] for st in per_table)
    assert math.isclose(res.stats["power_w"], res.stats["energy_j"] / seconds, rel_tol=1e-9)


def test_the_iso_bandwidth_server_has_the_h100s_bandwidth() -> None:
    m = load_machine("dae-server-iso-bw")
    assert m.dram_bytes_per_cycle * m.clock_ghz * 1e9 == pytest.approx(3.35e12, rel=2e-3)  # 131 x 25.6 GB/s
    assert m.cores == 64 and m.cache("llc").size_bytes == 64 * 3 << 19  # 1.5 MiB a core
    assert peak_power_w(m) < 700  # so the iso-power server below has more cores


def test_the_iso_power_server_has_the_most_cores_700_watts_allow() -> None:
    """Re-derived from peak_power_w: with 1.5 MiB of LLC a core, one more core would pass 700 W."""
    m = load_machine("dae-server-iso-power")
    per_core_llc = 3 << 19

    def with_cores(n: int) -> float:
        return peak_power_w(m.set("cores", str(n)).set("caches.llc.size_bytes", str(n * per_core_llc)))

    assert m.cache("llc").size_bytes == m.cores * per_core_llc
    assert with_cores(m.cores) <= 700 < with_cores(m.cores + 1)
    assert m.dram == load_machine("dae-server-iso-bw").dram and m.energy == load_machine("dae-server-iso-bw").energy
