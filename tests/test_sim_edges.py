"""Edges of the simulator that the model and engine tests pass by (issue 13, mutation testing of ember/sim).

Each test states a behaviour a user can see: an output or statistic checked against numpy or a value derived
in a comment, the exact words of an error, what the compile cache does with a file, or the statistics of a
multi-core run.  Programs are small hand-written DAE texts run on both engines, which must agree.
"""

from __future__ import annotations

import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import MODELS, compile_model
from test_engine_semantics import MACHINE, both_fail, program
from test_fast_engine import HOST_TIME, assert_same, both

from ember import machine as machine_mod
from ember.backend.binary import assemble
from ember.backend.dae import Program
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.sim import host as sim_host
from ember.sim.engines import simulate
from ember.sim.fast import build
from ember.sim.fast import engine as fast
from ember.sim.multicore import simulate_cores
from ember.sim.stats import Histogram, Stats


def agree(p: Program, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], Stats]:
    """Run on both engines (the fast one compiling the program itself); outputs and statistics must agree."""
    want_out, want, got_out, got = both(p, inputs)
    assert sorted(got_out) == sorted(want_out)
    for k, a in want_out.items():
        assert got_out[k].dtype == a.dtype
        np.testing.assert_array_equal(got_out[k], a)
    assert_same(want, got)
    return want_out, want


# --- the execute unit ----------------------------------------------------------------------------------

FDIV = """
.sym @0 input "x" f64 [2]
.sym @1 output "y" f64 [1]
.code
  alloc @1, [1]
  ld f0, @0[0]
  ld f1, @0[1]
  fdiv.f64 f2, f0, f1
  st f2, @1[0]
  halt
.end
"""


@pytest.mark.parametrize(("a", "b"), [(0.5, 0.0), (0.5, -0.0), (-0.5, 0.0), (-0.5, -0.0), (3.0, 0.0),
                                      (1.0, -0.0), (0.0, 0.0), (np.nan, 0.0), (np.inf, -0.0)])
def test_division_by_a_zero_is_ieee(a: float, b: float) -> None:
    """A signed infinity whose sign is the product of the operands' signs, NaN for 0/0 and NaN/0, as numpy
    divides; the sign must not depend on the dividend's size (0.5 / 0 is +inf, as 3 / 0 is)."""
    x = np.array([a, b])
    out, _ = agree(program(FDIV), {"x": x})
    with np.errstate(all="ignore"):
        want = np.float64(a) / np.float64(b)
    np.testing.assert_array_equal(out["y"], [want])


def test_an_allocation_with_a_zero_extent_is_empty() -> None:
    """alloc refuses negative extents only: a zero-length output (an empty batch) is legal."""
    out, _ = agree(program("""
.sym @0 output "y" f32 [?, 3]
.code
  li r0, 0
  alloc @0, [r0, 3]
  halt
.end
"""), {})
    assert out["y"].shape == (0, 3) and out["y"].dtype == np.float32


def test_a_vector_load_with_every_lane_off_gives_zeros_of_the_tensors_type() -> None:
    """A vld whose mask is all off still yields a vector of the tensor's element type: here an i64 vector of
    zeros that a gather uses as indices (every lane reads x[0])."""
    x = np.arange(10, 18, dtype=np.float32)
    out, _ = agree(program("""
.sym @0 input "k" i64 [4]
.sym @1 input "x" f32 [8]
.sym @2 output "y" f32 [4]
.code
  alloc @2, [4]
  vmask v0, 0, 0, 4
  vld v1, @0[0], v0
  vmask v2, 0, 4, 4
  vgather v3, @1[v1], v2
  vst v3, @2[0], v2
  halt
.end
"""), {"k": np.array([5, 6, 7, 1]), "x": x})
    np.testing.assert_array_equal(out["y"], np.full(4, x[0]))


def test_a_vector_store_with_every_lane_off_writes_nothing_and_retires() -> None:
    """A vst whose mask is all off leaves memory as it was and still takes its cycle on both engines; the
    program goes on (here: a store of lane 0 afterwards, whose mask has the one lane k with 1 + k < 2)."""
    out, st = agree(program("""
.sym @0 output "y" f32 [4]
.code
  alloc @0, [4]
  li f0, 7.0
  vsplat.f32 v0, f0, 4
  vmask v1, 0, 0, 4
  vst v0, @0[0], v1
  vmask v2, 1, 2, 4
  vst v0, @0[0], v2
  halt
.end
"""), {})
    np.testing.assert_array_equal(out["y"], np.array([7, np.nan, np.nan, np.nan], np.float32))  # alloc's bytes
    assert st["cycles"] > 0


def test_a_timing_only_run_that_stops_on_an_error_says_how_to_see_it() -> None:
    """Without the tables' data the fast engine cannot word an error (the reference engine would need the data
    to run to it), so it says how to see it."""
    p = program("""
.sym @0 param "t" f32 [4, 2]
.sym @1 input "k" i64 [2]
.sym @2 output "y" f32 [2]
.code
  alloc @2, [2]
  ld r0, @1[1]
  ld f0, @0[r0, 0]
  st f0, @2[0]
  halt
.end
""")
    with pytest.raises(EmberError) as info:
        simulate(p, {"k": np.array([0, 9])}, MACHINE, engine="fast", timing_only=True)
    assert str(info.value) == ("error: --timing-only: the simulation stopped on an error; run it with data (without "
                               "--timing-only) to see which")


@pytest.mark.parametrize(("shape", "index", "words"), [
    ("[4]", "5", "index 5 is out of range for dimension 0 of input 'x' (size 4) at [5]"),
    ("[4]", "-1", "index -1 is out of range for dimension 0 of input 'x' (size 4) at [-1]"),
    ("[2, 3]", "2, 1", "index 2 is out of range for dimension 0 of input 'x' (size 2) at [2, 1]"),
])
def test_an_index_out_of_range_is_shown_as_given(shape: str, index: str, words: str) -> None:
    """Only a gather that counts negative indices from the end shows its index shifted back; a plain load
    shows the index the program computed."""
    regs = index.split(", ")
    text = "\n".join(f"  li r{k}, {v}" for k, v in enumerate(regs))
    p = program(f"""
.sym @0 input "x" f32 {shape}
.sym @1 output "y" f32 [1]
.code
  alloc @1, [1]
{text}
  ld f0, @0[{", ".join(f"r{k}" for k in range(len(regs)))}]
  st f0, @1[0]
  halt
.end
""")
    dims = [int(d) for d in shape.strip("[]").split(", ")]
    err = both_fail(p, inputs={"x": np.zeros(dims, np.float32)})
    assert words in err


# --- host operations -----------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["MatMul", "Gemm"])
def test_a_matrix_product_on_the_host_counts_two_flops_per_multiply_add(op: str) -> None:
    """[2, 3] x [3, 4]: 8 outputs, each 3 multiply-adds, so 2 * 8 * 3 = 48 flops, at the matrix rate."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    out, st = agree(program(f"""
.sym @0 input "a" f32 [2, 3]
.sym @1 input "b" f32 [3, 4]
.sym @2 output "y" f32 [2, 4]
.code
  host "{op}", [@0, @1], [@2], {{}}
  halt
.end
"""), {"a": a, "b": b})
    np.testing.assert_allclose(out["y"], a @ b, rtol=1e-6)
    assert st["host.flops"] == 48
    ex = MACHINE.execute
    moved = (6 + 12 + 8) * 4  # bytes of a, b and y
    rate = ex.matrix_flops_per_cycle or ex.host_flops_per_cycle
    assert st["host.cycles"] == max(48 / rate, moved / MACHINE.dram_bytes_per_cycle)


HOST_RUN = """
.sym @0 input "x" f32 [4]
.sym @1 input "z" f32 [4]
.sym @2 temp "d" f32 [4]
.sym @3 output "y" f32 [4]
.code
  host "Sub", [@0, @1], [@2], {}
  host "Mul", [@2, @0], [@3], {}
  halt
.end
"""


def test_consecutive_host_ops_run_as_one_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """ember/sim/host.py: a run of host instructions is one model, executed once when its first instruction is
    reached (not once per instruction); each instruction still gets its own result."""
    calls: list[int] = []
    real = sim_host.run_nodes

    def counting(nodes, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(len(nodes))
        return real(nodes, *args, **kwargs)

    monkeypatch.setattr(sim_host, "run_nodes", counting)
    x, z = np.array([1.5, -2, 3, 4], np.float32), np.array([0.5, 1, -1, 2], np.float32)
    out, _ = agree(program(HOST_RUN), {"x": x, "z": z})
    np.testing.assert_array_equal(out["y"], (x - z) * x)
    assert calls == [2, 2]  # one two-node model a run, on each engine


def test_a_host_result_of_the_wrong_shape_names_the_op() -> None:
    p = program("""
.sym @0 input "x" f32 [4]
.sym @1 output "y" f32 [3]
.code
  host "Neg", [@0], [@1], {}
  halt
.end
""")
    err = both_fail(p, inputs={"x": np.zeros(4, np.float32)})
    assert "result of host Neg (output 'y') has shape [4], expected [3]" in err


# --- the fast engine -------------------------------------------------------------------------------------

def test_the_fast_engine_says_why_it_left_a_float_op_on_integers_to_the_reference() -> None:
    p = program("""
.sym @0 output "y" f32 [4]
.code
  alloc @0, [4]
  li r0, 3
  vsplat.i64 v0, r0, 4
  vfadd.f32 v1, v0, v0
  vmask v2, 0, 4, 4
  vst v1, @0[0], v2
  halt
.end
""")
    with pytest.raises(EmberError, match="'vfadd.f32' reads v0, a vector of i64: vector arithmetic takes float"):
        fast.simulate(p, {}, MACHINE, None, False)  # the ISA has no vector integer arithmetic
    assert fast.notes == ["the fast engine does not handle 'vfadd.f32' on vectors of different or non-float types; "
                          "the reference engine ran it"]


def test_the_reference_engine_compiles_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """--engine reference runs without a C compiler and writes nothing to the compile cache."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("EMBER_CACHE_DIR", str(cache))
    monkeypatch.setattr(build, "_loaded", {})
    p = program(FDIV)
    x = {"x": np.array([1.0, 4.0])}
    out, _ = simulate(p, x, MACHINE, engine="reference")
    assert out["y"].tolist() == [0.25] and not cache.exists()
    simulate(p, x, MACHINE, engine="fast")
    assert len(list(cache.glob("ember_*.so"))) == 1  # the check above can fail: the fast engine does fill it


# --- the compile cache -----------------------------------------------------------------------------------

def elf(wide: bool, little: bool, segment_end: int, size: int) -> bytes:
    """A minimal ELF header and one PT_LOAD program header (no sections) whose segment ends at `segment_end`,
    padded to `size` bytes; the layouts are the System V gABI's (ELF32: 52-byte header, 32-byte entries)."""
    o = "<" if little else ">"
    ident = b"\x7fELF" + bytes([2 if wide else 1, 1 if little else 2, 1]) + bytes(9)
    if wide:
        head = ident + struct.pack(o + "HHIQQQIHHHHHH", 3, 62, 1, 0, 64, 0, 0, 64, 56, 1, 64, 0, 0)
        ph = struct.pack(o + "IIQQQQQQ", 1, 5, 0, 0, 0, segment_end, segment_end, 4096)
    else:
        head = ident + struct.pack(o + "HHIIIIIHHHHHH", 3, 3, 1, 0, 52, 0, 0, 52, 32, 1, 40, 0, 0)
        ph = struct.pack(o + "IIIIIIII", 1, 0, 0, 0, segment_end, segment_end, 5, 4096)
    data = head + ph
    return data + bytes(size - len(data))


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("little", [True, False])
def test_elf_headers_are_checked_against_the_length_for_both_classes(wide: bool, little: bool) -> None:
    """32- and 64-bit, either byte order: a library whose loadable segment lies within the file passes the check,
    one cut short of its segment is refused before dlopen could map the missing pages."""
    build._check_elf(elf(wide, little, 200, 200), Path("x.so"))
    with pytest.raises(OSError, match=r"x.so: not a whole shared library \(it ends before its headers say\)"):
        build._check_elf(elf(wide, little, 201, 200), Path("x.so"))


def test_a_fifo_in_the_cache_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    """An entry replaced by a FIFO must not hang the run (opening a FIFO to read waits for a writer): it is not
    trusted, and the entry is rebuilt."""
    so, _ = build.entry(tmp_path, "k")
    os.mkfifo(so)
    got: list[bytes | None] = []
    reader = threading.Thread(target=lambda: got.append(build.trusted_bytes(tmp_path, "k")), daemon=True)
    reader.start()
    reader.join(3)
    blocked = reader.is_alive()
    if blocked:  # release the reader (a writer that opens and closes at once) before failing
        os.close(os.open(so, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(3)
    assert not blocked and got == [None]
    with pytest.raises(OSError, match="is not a regular file"):
        build._read(so)


# --- machines ----------------------------------------------------------------------------------------

def test_a_negative_cache_latency_names_the_key() -> None:
    with pytest.raises(EmberError) as e:
        load_machine("default").set("caches.l2.latency", "-1")
    assert e.value.message == "machine key 'caches.l2.latency' = -1.0: must be from 0 to 1e+06 cycles"


def test_presets_that_inherit_in_a_cycle_are_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A preset folder where a inherits from b and b from a: the error shows the chain."""
    folder = tmp_path.joinpath(*machine_mod._PRESET_DIR)
    folder.mkdir(parents=True)
    (folder / "a.toml").write_text('base = "b"\n')
    (folder / "b.toml").write_text('base = "a"\n')
    monkeypatch.setattr(machine_mod, "resources", SimpleNamespace(files=lambda package: tmp_path))
    with pytest.raises(EmberError) as e:
        load_machine("a")
    assert e.value.message == "machine presets inherit in a cycle: a -> b -> a"


# --- statistics ---------------------------------------------------------------------------------------

def test_histogram_underflows_accumulate() -> None:
    h = Histogram.linear(0, 10, 5)
    for value, weight in ((-1, 1), (-5, 3), (4, 2), (12, 1)):
        h.add(value, weight)
    assert (h.underflows, h.overflows, h.counts) == (4, 1, [0, 0, 2, 0, 0])


# --- multi-core runs ----------------------------------------------------------------------------------

GATHER = """
.sym @0 param "w" f32 [64]
.sym @1 input "k" i64 [?]
.sym @2 output "y" f32 [?]
.access A0 1
  tu t0, 0, p0, 1
  mem s0, @1[t0]
  mem s1, @0[s0]
  on t0, ite, [s1], 1
.end
.code
  dim r1, @1, 0
  alloc @2, [r1]
  li r2, 0
  run A0, r1
  halt
A0.1:
  pop f0
  st f0, @2[r2]
  add r2, r2, 1
  ret
.end
"""


def two_cores() -> tuple[list, list[dict[str, np.ndarray]], object]:
    """The same gather program on two slices of the indices, with the table given to both."""
    table = np.arange(64, dtype=np.float32) / 4
    slices = [{"k": np.array([3, 60, 3, 7])}, {"k": np.array([9, 3, 41])}]
    programs = []
    for _ in slices:
        p = program(GATHER)
        p.data[0] = table
        programs.append(p)
    return programs, slices, load_machine("default").with_overrides(["cores=2"])


def test_summed_statistics_keep_their_description_and_unit() -> None:
    programs, slices, m = two_cores()
    outs, st = simulate_cores(programs, slices, m, engine="reference")
    for out, part in zip(outs, slices):
        np.testing.assert_array_equal(out["y"], np.arange(64, dtype=np.float32)[part["k"]] / 4)
    summed = [n for n in ("lookups", "tokens", "execute.instructions", "cache.l1.hits") if n in st]
    assert len(summed) == 4
    for name in summed:
        total, one = st.get(name), st.get(f"core0.{name}")
        assert total is not None and one is not None
        assert (total.description, total.unit) == (f"{one.description} (all cores)", one.unit)
        assert total.value == st[f"core0.{name}"] + st[f"core1.{name}"]


def test_a_timing_only_multicore_run_times_as_the_run_with_data() -> None:
    """Timing-only runs the fast engine without table data; every statistic but host time is the same."""
    programs, slices, m = two_cores()
    _, full = simulate_cores(programs, slices, m, engine="fast")
    for p in programs:
        del p.data[0]
    _, timed = simulate_cores(programs, slices, m, engine="fast", timing_only=True)
    same = [k for k in full if not k.endswith(tuple(HOST_TIME))]
    assert list(timed) == list(full) and {k: timed[k] for k in same} == {k: full[k] for k in same}
    with pytest.raises(EmberError, match="--timing-only needs the fast engine"):
        simulate_cores(programs, slices, m, engine="reference", timing_only=True)


# --- byte tensors and typed reads (docs/isa.md) --------------------------------------------------------

STRADDLE = """
.sym @0 input "q" u8 [1, 128]
.sym @1 output "y" f32 [1]
.access A0 0
  tu t0, 0, 1, 1
  mem.f32 s0, @0[0, COL]
  on t0, ite, [s0], 1
.end
.code
  alloc @1, [1]
  run A0
  halt
A0.1:
  pop f0
  st f0, @1[0]
  ret
.end
"""


def test_a_typed_read_across_a_line_fetches_both_lines() -> None:
    """Bytes 60..63 lie in line 0; bytes 62..65 in lines 0 and 1, so that read fetches one line more from DRAM."""
    q = np.arange(128, dtype=np.uint8).reshape(1, 128)
    out, st = {}, {}
    for col in (60, 62):
        out[col], st[col] = agree(program(STRADDLE.replace("COL", str(col))), {"q": q})
        assert out[col]["y"][0] == q[0, col:col + 4].view(np.float32)[0]
    assert st[62]["dram.requests"] == st[60]["dram.requests"] + 1
    assert st[62]["access.requests"] == st[60]["access.requests"] == 1


TYPED_PAST_END = """
.sym @0 input "q" u8 [3, 13]
.sym @1 output "y" f32 [3]
.access A0 0
  tu t0, 0, 3, 1
  mem.f64 s0, @0[t0, COL]
  on t0, ite, [t0, s0], 1
.end
.code
  alloc @1, [3]
  ld.f32 f0, @0[2, LDCOL]
  run A0
  halt
A0.1:
  pop r1
  pop f1
  st f1, @1[r1]
  ret
.end
"""


@pytest.mark.parametrize(("col", "ldcol", "message"), [
    (5, 10, "a read of 4 bytes at index 10 runs past the end of dimension 1 of input 'q' (size 13) at [2, 10]"),
    (6, 9, "a read of 8 bytes at index 6 runs past the end of dimension 1 of input 'q' (size 13) at [0, 6]")])
def test_a_typed_read_past_the_row_stops_both_engines_alike(col: int, ldcol: int, message: str) -> None:
    """The last byte of the read must lie in the row too (9 + 4 = 13 fits, 10 + 4 does not; 5 + 8 fits)."""
    text = TYPED_PAST_END.replace("LDCOL", str(ldcol)).replace("COL", str(col))
    assert both_fail(program(text), inputs={"q": np.zeros((3, 13), np.uint8)}) == f"error: {message}"


@pytest.mark.parametrize(("old", "new", "message"), [
    ("ld.f32 f0, @0[2, LDCOL]", "ld.f32 f0, @1[0]", "'ld.f32' is a typed read, which needs a byte tensor (u8); "
                                                     "@1 holds f32"),
    ("ld.f32 f0, @0[2, LDCOL]", "ld.f32 r0, @0[2, 0]", "'ld.f32' reads a float, so it needs an f register, got r0"),
    ("ld.f32 f0, @0[2, LDCOL]", "ld.i32 f0, @0[2, 0]", "'ld.i32' reads an integer, so it needs an r register, got f0"),
    ("ld.f32 f0, @0[2, LDCOL]", "ld.i1 r0, @0[2, 0]", "a typed read gives one of i8, i16, i32, i64, f16, bf16, f32, "
                                                       "f64, not i1"),
    ("tu t0, 0, 3, 1", "tu.i64 t0, 0, 3, 1", "'tu' takes no type suffix"),
    ("tu t0, 0, 3, 1\n  mem.f64 s0, @0[t0, COL]", "vtu t0, 0, 3, 4\n  mem.f64 s0, @0[0, t0]",
     "'mem.f64' reads one value: its last index cannot be the vector TU t0"),
    ("ld.f32 f0, @0[2, LDCOL]", "ffma.f64 f0, f0, f0, f0", "'ffma' is defined for float32: write 'ffma.f32'"),
    # the fuzzer's long run: a mask of a scalar TU reached both engines and failed there with a KeyError
    ("tu t0, 0, 3, 1\n  mem.f64 s0, @0[t0, COL]", "tu t0, 0, 3, 1\n  mask s0, t0",
     "'mask' streams the lane mask of a vector TU (vtu); t0 is not one")])
def test_typed_reads_and_fma_are_checked_by_the_assembler(old: str, new: str, message: str) -> None:
    text = TYPED_PAST_END.replace(old, new).replace("LDCOL", "0").replace("COL", "0")
    with pytest.raises(EmberError, match="t.dae:[0-9]+:[0-9]+: error: ") as e:
        program(text)
    assert message in str(e.value)


@pytest.mark.parametrize("op", ["vfadd.f32 v2, v0, v1", "vfma.f32 v2, v0, v1, v0", "vsel v2, v4, v0, v1",
                                "vst v1, @0[0], v4"])
def test_vectors_of_different_lane_counts_stop_both_engines_alike(op: str) -> None:
    """A vector's lane count comes from the instruction that made it, so only a run sees two that differ."""
    text = f"""
.sym @0 output "y" f32 [8]
.code
  alloc @0, [8]
  li f0, 1.5
  vsplat.f32 v0, f0, 4
  vsplat.f32 v1, f0, 8
  vmask v4, 0, 4, 4
  {op}
  halt
.end
"""
    message = both_fail(program(text), compiled=False)
    assert message.startswith(f"error: '{op.split()[0]}' combines vectors of different lane counts: ")
    assert "has 4" in message and "has 8" in message


@pytest.mark.parametrize("value", ["200.0", "300.7", "nan", "-1.5", "255.9", "-0.5"])
@pytest.mark.parametrize(("ty", "op"), [("u8", "vcvt.u8 v3, v2"), ("u8", "vsplat.u8 v3, f0, 16"),
                                        ("i8", "vsplat.i8 v3, f0, 16")])
def test_floats_convert_to_narrow_integers_alike(value: str, ty: str, op: str) -> None:
    """Truncated toward zero; NaN and anything out of the type's range give its minimum (0 for u8)."""
    text = f"""
.sym @0 output "y" {ty} [16]
.code
  alloc @0, [16]
  li f0, {value}
  vsplat.f32 v2, f0, 16
  {op}
  vmask v1, 0, 16, 16
  vst v3, @0[0], v1
  halt
.end
"""
    out, _ = agree(program(text), {})
    dtype = np.dtype(np.uint8 if ty == "u8" else np.int8)
    info, x = np.iinfo(dtype), float(value)
    want = int(x) if x == x and info.min <= int(x) <= info.max else info.min
    np.testing.assert_array_equal(out["y"], np.full(16, want, dtype=dtype))


@pytest.mark.parametrize(("ty", "raw", "out", "bits"), [
    ("f32", [1, 0, 0x80, 0x7F], "f32", 0x7FC00001),  # a signalling NaN, quieted by widening, payload kept
    ("f32", [1, 0, 0x80, 0x7F], "f64", 0x7FF8000020000000),
    ("f16", [1, 0x7C], "f64", 0x7FF0040000000000),  # numpy widens a half NaN without quieting it
    ("f64", [1, 0, 0, 0, 0, 0, 0xF0, 0x7F], "f64", 0x7FF0000000000001)])
def test_nans_from_typed_reads_keep_the_same_bits_on_both_engines(ty: str, raw: list[int], out: str, bits: int) -> None:
    text = f"""
.sym @0 input "q" u8 [1, 8]
.sym @1 output "y" {out} [1]
.code
  alloc @1, [1]
  ld.{ty} f0, @0[0, 0]
  st f0, @1[0]
  halt
.end
"""
    q = np.zeros((1, 8), np.uint8)
    q[0, :len(raw)] = raw
    got, _ = agree(program(text), {"q": q})
    assert int(got["y"].view(np.uint32 if out == "f32" else np.uint64)[0]) == bits


def test_a_splat_without_a_type_is_float32() -> None:
    """`vsplat` with no suffix makes float32 lanes, so 0.1 + 0.1 is float32's 0.2 (0.20000000298...), not 0.2."""
    text = """
.sym @0 output "y" f64 [16]
.code
  alloc @0, [16]
  li f0, 0.1
  vsplat v0, f0, 16
  vfadd v1, v0, v0
  vcvt.f64 v2, v1
  vmask v3, 0, 16, 16
  vst v2, @0[0], v3
  halt
.end
"""
    out, _ = agree(program(text), {})
    np.testing.assert_array_equal(out["y"], np.full(16, np.float32(0.1) + np.float32(0.1), dtype=np.float64))


def test_a_half_negative_zero_converts_to_false() -> None:
    """vcvt to booleans reads an f16 lane's value, not its bits: -0.0 (bits 0x8000) is false, NaN is true."""
    text = """
.sym @0 input "x" f16 [4]
.sym @1 output "y" i1 [4]
.code
  alloc @1, [4]
  vmask v9, 0, 4, 4
  vld v0, @0[0], v9
  vcvt.i1 v1, v0
  vst v1, @1[0], v9
  halt
.end
"""
    out, _ = agree(program(text), {"x": np.array([-0.0, 0.0, 1.0, np.nan], np.float16)})
    np.testing.assert_array_equal(out["y"], [False, False, True, True])


# gem5's unit names (base/stats/units.hh), alone or as a quotient: what a statistic's value counts.
UNIT = re.compile(r"(Count|Cycle|Byte|Bit|Second|Joule|Watt|Ratio)(/(Count|Cycle|Byte|Second))?")


def test_every_statistic_of_a_run_says_what_it_counts_and_in_what_unit() -> None:
    """A reader of stats.txt, or a script reading the JSON, cannot tell cycles from bytes without the unit:
    every statistic of a run on either engine, one core or two, has a description and one of gem5's units."""
    programs, slices, m = two_cores()
    _, one = agree(programs[0], slices[0])
    _, two = simulate_cores(programs, slices, m, engine="reference")
    for st in (one, two):
        for name in st:
            s = st.get(name)
            assert s is not None and s.description, name
            assert isinstance(s.unit, str) and UNIT.fullmatch(s.unit), (name, s.unit)
    # the histogram's mean is a value it sampled (bytes held), its buckets count pushes
    assert (one.get("queue_occupancy::mean").unit, one.get("queue_occupancy::samples").unit) == ("Byte", "Count")


# The largest value machine validation allows for each setting that once crashed the fast engine, hung one engine
# or made the engines disagree (issue 35): both engines run it and agree.
@pytest.mark.parametrize("setting", ["execute.fp_throughput=1024", "execute.int_alu_throughput=0.015625",
                                     "execute.miss_slots=4096", "execute.rob_entries=1048576",
                                     "execute.store_buffer=1048576", "execute.prefetch_lines=64",
                                     "execute.int_alu_latency=1e6", "access.outstanding=1048576", "dram.latency=1e6",
                                     "execute.issue_width=1048576"])
def test_the_largest_settings_allowed_run_alike_on_both_engines(setting: str) -> None:
    m = load_machine("default").with_overrides([setting])
    ref_out, ref_st, out, st = both(compile_model(MODELS / "bag_sum.dynamo.onnx", "O3"),
                                    dict(np.load(MODELS / "bag_sum.in.npz")), m)
    np.testing.assert_array_equal(out["output"], ref_out["output"])
    assert_same(ref_st, st)


SPIN = """
.sym @0 output "y" i64 [1]
.code
  alloc @0, [1]
  li r0, 0
L0:
  add r0, r0, 1
  jmp L0
  halt
.end
"""  # a loop that never ends


def test_ctrl_c_stops_a_fast_engine_run_at_once(tmp_path: Path) -> None:
    """SIGINT while the fast engine's compiled code runs (in C, where Python cannot see it) stops the run within a
    check of the cycle limit, as it stops the reference engine: one line, exit status 1 (issue 35)."""
    spin = program(SPIN)
    (tmp_path / "spin.bin").write_bytes(assemble(spin))
    np.savez(tmp_path / "none.npz")
    code = "from ember.cli.sim import main; main()"
    p = subprocess.Popen([sys.executable, "-c", code, "spin.bin", "--inputs", "none.npz", "--max-cycles", "inf",
                          "-q"], cwd=tmp_path, stderr=subprocess.PIPE,
                         env=dict(os.environ, PYTHONPATH=str(Path(__file__).parent.parent)))
    time.sleep(2)  # started, and simulating (the loop never ends)
    assert p.poll() is None
    p.send_signal(signal.SIGINT)
    start = time.monotonic()
    _, err = p.communicate(timeout=60)
    assert time.monotonic() - start < 10
    assert p.returncode == 1 and err.decode() == "ember-sim: interrupted\n", err


MULTICORE_SPIN = """
import sys
import threading
from pathlib import Path
from ember.backend.binary import disassemble
from ember.machine import load_machine
from ember.sim.multicore import simulate_cores
spin = disassemble(Path("spin.bin").read_bytes(), "spin.bin")
try:
    simulate_cores([spin, spin], [{}, {}], load_machine("default").with_overrides(["cores=2"]), float("inf"),
                   sys.argv[1])
except KeyboardInterrupt:  # raised once every core has stopped, not while they still run on freed memory
    sys.exit(7 if threading.active_count() == 1 else 8)
"""


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_ctrl_c_stops_a_multicore_run(tmp_path: Path, engine: str) -> None:
    """SIGINT while the cores of a multi-core run simulate in their threads (Python gives it to the main thread,
    which waits for them): every core stops at its next cycle-limit check, the core that waits for its first turn
    too, and only then is the shared memory released and the interrupt raised (issue 35)."""
    spin = program(SPIN)
    (tmp_path / "spin.bin").write_bytes(assemble(spin))
    p = subprocess.Popen([sys.executable, "-c", MULTICORE_SPIN, engine], cwd=tmp_path, stderr=subprocess.PIPE,
                         env=dict(os.environ, PYTHONPATH=str(Path(__file__).parent.parent)))
    time.sleep(3)  # started, and simulating (core 0 never ends; core 1 waits for its first turn)
    assert p.poll() is None, p.stderr.read().decode() if p.stderr else ""
    p.send_signal(signal.SIGINT)
    start = time.monotonic()
    _, err = p.communicate(timeout=60)
    assert time.monotonic() - start < 10
    assert p.returncode == 7 and not err, err.decode()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="watches the process's libraries in /proc")
def test_ctrl_c_while_the_tool_starts_is_an_interruption(tmp_path: Path) -> None:
    """SIGINT while the console script imports its modules (numpy, onnx) ended it with a KeyboardInterrupt traceback,
    and inside an extension's initialisation with a crash (issue 35); it is now recorded until the command starts,
    which reports it.  The signal is sent once numpy's library is mapped: the imports are under way."""
    script = Path(sys.executable).parent / "ember-sim"
    if not script.exists():
        pytest.skip("needs the installed console script (make install)")
    (tmp_path / "spin.bin").write_bytes(assemble(program(SPIN)))
    np.savez(tmp_path / "none.npz")
    p = subprocess.Popen([str(script), "spin.bin", "--inputs", "none.npz", "--max-cycles", "inf", "-q"],
                         cwd=tmp_path, stderr=subprocess.PIPE)
    maps = Path(f"/proc/{p.pid}/maps")
    deadline = time.monotonic() + 60
    while "_multiarray_umath" not in maps.read_text() and time.monotonic() < deadline:
        time.sleep(0.002)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 1 and err.decode() == "ember-sim: interrupted\n", (p.returncode, err.decode()[-600:])


def test_reads_stop_at_their_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file, or a stream that never ends (stdin, a pipe, /dev/zero), is refused once it passes its limit instead
    of filling the memory (issue 35): binary inputs at EMBER_INPUT_BYTES, text levels at EMBER_TEXT_BYTES."""
    from conftest import run_tool

    monkeypatch.setenv("EMBER_INPUT_BYTES", "1000")
    monkeypatch.setenv("EMBER_TEXT_BYTES", "2000")
    big = tmp_path / "big.bin"
    big.write_bytes(b"\0" * 5000)
    r = run_tool("disasm", str(big))
    assert r.returncode == 1 and r.stderr.decode() == (f"ember-disasm: {big}: error: larger than 1,000 bytes, the most "
                                                       "Ember reads (EMBER_INPUT_BYTES raises it)\n")
    r = run_tool("disasm", "-", stdin=b"\0" * 5000)
    assert r.returncode == 1 and b"<stdin>: error: larger than 1,000 bytes" in r.stderr
    r = run_tool("asm", "-", stdin=b"; a comment\n" * 400)
    assert r.returncode == 1 and b"larger than 2,000 bytes" in r.stderr and b"EMBER_TEXT_BYTES" in r.stderr
    r = run_tool("asm", "-", stdin=b"; a comment\n" * 100)  # under the limit: read, then parsed
    assert b"larger than" not in r.stderr
