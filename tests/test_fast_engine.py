"""The fast engine against the reference engine: identical outputs and statistics (all but host time)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import MODELS, compile_model, run_tool

from ember.backend.dae import Program
from ember.bench.run import VARIANTS, compile_variant
from ember.bench.workloads import suite
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.sim import reference
from ember.sim.fast import build
from ember.sim.fast import engine as fast
from ember.sim.stats import Stats

HOST_TIME = {"host_seconds", "sim_cycles_per_host_second", "lookups_per_host_second"}
# -O1 and -O2 (passes that -O3 also runs, on fewer ops) are checked in `make bench`, to keep `make test` under ten
# minutes: most of its time is the C compiler's, one program per case.
IN_BENCH = ("O1", "O2")
LEVELS = [pytest.param(v, marks=[pytest.mark.slow] if v in IN_BENCH else []) for v in ("O0", "O1", "O2", "O3", "core")]
MACHINE = load_machine("default")
SAMPLES = sorted(p.name for p in MODELS.glob("*.onnx"))


def inputs_of(model: str) -> dict[str, np.ndarray]:
    return dict(np.load(MODELS / f"{model.split('.')[0]}.in.npz"))


def assert_same(want: Stats, got: Stats) -> None:
    assert list(want) == list(got)
    diffs = {k: (want[k], got[k]) for k in want if k not in HOST_TIME and want[k] != got[k]}
    assert not diffs


def both(program: Program, inputs: dict[str, np.ndarray], machine=MACHINE) -> tuple[dict, Stats, dict, Stats]:
    ref_out, ref_st = reference.simulate(program, inputs, machine)
    out, st = fast.simulate(program, inputs, machine, None, False)
    assert not fast.notes, fast.notes  # compiled, not handed to the reference engine
    return ref_out, ref_st, out, st


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("model", SAMPLES)
def test_identical_on_every_sample_model(model: str, level: str) -> None:
    ref_out, ref_st, out, st = both(compile_model(MODELS / model, level), inputs_of(model))
    assert sorted(out) == sorted(ref_out)
    for name in ref_out:
        assert out[name].dtype == ref_out[name].dtype
        np.testing.assert_array_equal(out[name], ref_out[name])
    assert_same(ref_st, st)


# At -O0 the reference engine takes longest (a callback an element); `make test` keeps one workload of each
# kind there, the smallest (GNN's at -O0 is the gcn sample model's), and `make bench` runs the rest; core-only and the
# expert's kernel run on one workload of each kind (docs/testing.md, "What make test runs").
ONE_OF_EACH = ("RM1_L0", "MP_roadNet-CA", "GNN_arxiv", "KG_biokg", "SpAttn_1")
O0_IN_TEST = tuple(n for n in ONE_OF_EACH if n != "GNN_arxiv")


def in_bench(name: str, variant: str, scale: str) -> bool:
    if scale != "tiny":
        return variant in IN_BENCH
    return (variant in IN_BENCH or (variant == "O0" and name not in O0_IN_TEST)
            or (variant in ("core", "hand") and name not in ONE_OF_EACH))


def workload_cases(scale: str) -> list[object]:
    return [pytest.param(w.name, v, marks=[pytest.mark.slow] if in_bench(w.name, v, scale) else [])
            for w in suite(scale) for v in VARIANTS]


def check_workload(scale: str, name: str, variant: str) -> None:
    w = suite(scale, [name])[0]
    program = compile_variant(w, variant)
    for n, s in enumerate(program.symbols):
        if s.kind == "param":
            program.data[n] = w.table(0)
    ref_out, ref_st, out, st = both(program, w.inputs(0))
    for k in ref_out:
        np.testing.assert_array_equal(out[k], ref_out[k])
    assert_same(ref_st, st)
    assert st["lookups"] == w.lookups // w.tables or w.kind == "gather"


@pytest.mark.parametrize(("name", "variant"), workload_cases("tiny"))
def test_identical_on_every_tiny_workload(name: str, variant: str) -> None:
    check_workload("tiny", name, variant)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "variant"), workload_cases("quick"))
def test_identical_on_every_quick_workload(name: str, variant: str) -> None:
    check_workload("quick", name, variant)


@pytest.mark.parametrize("overrides", [("dram.device=ideal", "dram.bytes_per_cycle=2"),
                                       ("dram.device=ideal", "dram.channels=3", "dram.bytes_per_cycle=6"),
                                       ("dram.device=ideal", "dram.channels=80", "dram.bytes_per_cycle=7"),  # 64*80/7
                                       ("dram.channels=1", "dram.address_map=row-bank-rank-column"),
                                       ("dram.device=hbm3", "dram.channels=3", "clock_ghz=0.2"),  # refresh every 780
                                       ("access.outstanding=2", "access.lanes=1"),
                                       ("caches.l1.size_bytes=768", "caches.l1.ways=3", "caches.l2.size_bytes=2048",
                                        "caches.l2.ways=2", "caches.llc.size_bytes=4096", "caches.llc.ways=4"),
                                       ("execute.rob_entries=3", "execute.store_buffer=2", "execute.miss_slots=1",
                                        "execute.issue_width=1", "access.lanes=3"),
                                       ("execute.store_buffer=5", "execute.prefetch_lines=3", "execute.fp_throughput=3",
                                        "execute.load_throughput=0.25", "execute.mispredict_penalty=0")])
def test_identical_on_other_machines(overrides: tuple[str, ...]) -> None:
    """Tight queues, few outstanding requests, tiny odd-sized caches (dirty lines written back through every
    level), a saturated DRAM, one of three channels, a tiny reorder buffer, store buffer and fill-buffer pool,
    unpipelined FP."""
    machine = MACHINE.with_overrides(overrides)
    for model, level in (("dlrm.dynamo.onnx", "O3"), ("bag_mean.ts.onnx", "O0"), ("mp_sum.ts.onnx", "O2")):
        _, ref_st, _, st = both(compile_model(MODELS / model, level), inputs_of(model), machine)
        assert_same(ref_st, st)


def test_timing_only_needs_no_table_data_and_times_the_same() -> None:
    w = suite("tiny", ["RM2_L1"])[0]
    program = compile_variant(w, "O3")
    params = [n for n, s in enumerate(program.symbols) if s.kind == "param"]
    for n in params:
        program.data[n] = w.table(0)
    _, full = fast.simulate(program, w.inputs(0), MACHINE, None, False)
    for n in params:
        del program.data[n]
    _, timed = fast.simulate(program, w.inputs(0), MACHINE, None, True)
    assert_same(full, timed)
    with pytest.raises(EmberError, match="has no data"):
        fast.simulate(program, w.inputs(0), MACHINE, None, False)


def bad_index_program() -> tuple[Program, dict[str, np.ndarray]]:
    program = compile_model(MODELS / "bag_sum.ts.onnx", "O3")
    inputs = inputs_of("bag_sum.ts.onnx")
    inputs["indices"] = inputs["indices"].copy()
    inputs["indices"][3] = 10_000
    return program, inputs


def test_errors_are_worded_as_the_reference_words_them() -> None:
    program, inputs = bad_index_program()
    with pytest.raises(EmberError) as want:
        reference.simulate(program, inputs, MACHINE)
    with pytest.raises(EmberError) as got:
        fast.simulate(program, inputs, MACHINE, None, False)
    assert str(got.value) == str(want.value)
    assert "indices" in str(got.value)


def test_max_cycles_stops_the_run() -> None:
    program = compile_model(MODELS / "bag_sum.ts.onnx", "O0")
    with pytest.raises(EmberError, match="exceeded --max-cycles=100"):
        fast.simulate(program, inputs_of("bag_sum.ts.onnx"), MACHINE, 100, False)


def test_without_a_c_compiler_the_reference_engine_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    program = compile_model(MODELS / "embedding.ts.onnx", "O1")
    monkeypatch.setattr(build, "compiler", lambda: None)
    monkeypatch.setattr(build, "_loaded", {})
    monkeypatch.setenv("EMBER_CACHE_DIR", str(Path("/nonexistent-dir-for-ember")))
    out, st = fast.simulate(program, inputs_of("embedding.ts.onnx"), MACHINE, None, False)
    assert fast.notes and "C compiler" in fast.notes[0]
    want_out, want = reference.simulate(program, inputs_of("embedding.ts.onnx"), MACHINE)
    assert_same(want, st)


def test_cli_engines_agree_and_timing_only_writes_no_outputs(tmp_path: Path) -> None:
    program = compile_model(MODELS / "dlrm.dynamo.onnx", "O2")
    from ember.backend.binary import assemble

    binary = tmp_path / "m.bin"
    binary.write_bytes(assemble(program))
    stats = {}
    for engine in ("reference", "fast"):
        out = tmp_path / f"{engine}.json"
        r = run_tool("sim", str(binary), "--inputs", str(MODELS / "dlrm.in.npz"), "--engine", engine,
                     "--stats", str(out), "-q")
        assert r.returncode == 0, r.stderr.decode()
        stats[engine] = json.loads(out.read_text())
    assert {k: v for k, v in stats["fast"].items() if k not in HOST_TIME} == \
        {k: v for k, v in stats["reference"].items() if k not in HOST_TIME}
    r = run_tool("sim", str(binary), "--inputs", str(MODELS / "dlrm.in.npz"), "--timing-only",
                 "--outputs", str(tmp_path / "o.npz"))
    assert r.returncode == 1 and b"--timing-only" in r.stderr and not (tmp_path / "o.npz").exists()
    r = run_tool("sim", str(binary), "--inputs", str(MODELS / "dlrm.in.npz"), "--timing-only", "--engine",
                 "reference")
    assert r.returncode == 1 and b"fast engine" in r.stderr


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("mode", ["sum", "mean", "max", "weighted"])
@pytest.mark.parametrize("elem", ["f16", "bf16"])
def test_identical_on_16_bit_tables(elem: str, mode: str, level: str) -> None:
    """f16/bf16 elements are carried as bits and rounded as numpy / ml_dtypes round."""
    from test_bag_variants import DIM, ROWS, TEXT

    from ember.ir.parser import parse_module
    from ember.ir.types import ScalarType
    from ember.passes import PRESETS, parse_pipeline, run_passes

    dtype = ScalarType(elem).numpy()
    rng = np.random.default_rng(5)
    table = (rng.standard_normal((ROWS, DIM)) * 300).astype(dtype)  # sums that round in 16 bits
    idx = rng.integers(0, ROWS, size=23).astype(np.int32)
    off = np.array([0, 5, 5, 12, 23], dtype=np.int64)
    w = rng.standard_normal(23).astype(dtype) if mode == "weighted" else None
    text = TEXT.format(r=ROWS, d=DIM, t=elem, mode="sum" if w is not None else mode,
                       wdecl=f", %w: tensor<?x{elem}>" if w is not None else "", warg=", %w" if w is not None else "")
    passes = parse_pipeline(PRESETS[level])
    run_passes(parse_module(text, "half.eir"), passes)
    program = passes[-1].program  # type: ignore[attr-defined]
    program.data[next(n for n, s in enumerate(program.symbols) if s.kind == "param")] = table
    feeds = {"indices": idx, "offsets": off} | ({"w": w} if w is not None else {})
    ref_out, ref_st, out, st = both(program, feeds)
    assert out["output0" if "output0" in out else next(iter(out))].dtype == dtype
    for k in ref_out:
        np.testing.assert_array_equal(out[k].view(np.uint16), ref_out[k].view(np.uint16))
    assert_same(ref_st, st)


ROUND_TRIP = """.dae 2
.sym @0 output "w" f64 [3]
.code
  alloc @0, [3]
  li f0, 3e+38
  li f5, {x}
  li r9, 0
  vsplat.f64 v0, f0, 3
  vsplat.f64 v1, f0, 3
  vsplat.f64 v4, f5, 3
L1:
  vfmin.f64 v1, v0, v1
  vcvt.f32 v7, v4
  vcvt.f64 v0, v7
  vfmin.f64 v4, v4, v0
  add r9, r9, 1
  blt r9, 3, L1
  vmask v5, 0, 3, 3
  vst v1, @0[0], v5
  halt
.end
"""


@pytest.mark.parametrize("x", ["5e-324", "548837.7523607607", "-1e-40"])
def test_a_round_trip_through_float32_rounds_every_lane(x: str) -> None:
    """The fuzzer's find: GCC 12.2 vectorized these lane loops so that lanes 0 and 1 kept the double (5e-324,
    or 548837.7523... for 548837.75) where float32 rounds it; build.CFLAGS turns its vectorizer off.  numpy's
    float32 gives the value each lane must hold after the loop."""
    from ember.backend.binary import assemble, disassemble
    from ember.backend.dae_text import parse_dae

    program = disassemble(assemble(parse_dae(ROUND_TRIP.format(x=x), "t.dae")), "t.bin")
    ref_out, ref_st, out, st = both(program, {})
    v0, v1, v4 = 3e38, 3e38, float(x)
    for _ in range(3):
        v1 = min(v0, v1)
        v0 = float(np.float32(v4))
        v4 = min(v4, v0)
    np.testing.assert_array_equal(out["w"], [v1] * 3)
    np.testing.assert_array_equal(ref_out["w"], out["w"])
    assert_same(ref_st, st)


def test_16_bit_conversions_round_as_numpy(tmp_path: Path) -> None:
    """runtime.h's d2h/d2b/h2d/b2d against numpy and ml_dtypes on edge cases and random doubles."""
    import ctypes
    import subprocess
    from importlib import resources

    from ember.ir.types import ScalarType

    cc = build.compiler()
    if cc is None:
        pytest.skip("no C compiler")
    src = resources.files("ember.sim.fast").joinpath("runtime.h").read_text() + """
void conv(const double *x, int64_t n, uint16_t *h, uint16_t *b, double *hd, double *bd) {
    for (int64_t i = 0; i < n; i++) { h[i] = d2h(x[i]); b[i] = d2b(x[i]); hd[i] = h2d(h[i]); bd[i] = b2d(b[i]); }
}
"""
    (tmp_path / "c.c").write_text(src)
    subprocess.run([cc, *build.CFLAGS, str(tmp_path / "c.c"), "-o", str(tmp_path / "c.so")], check=True)
    lib = ctypes.CDLL(str(tmp_path / "c.so"))
    rng = np.random.default_rng(0)
    edges = [0.0, -0.0, 65504.0, 65519.99, 65520.0, -65520.0, 1e10, 2.0 ** -24, 2.0 ** -25, 2.0 ** -25 + 2.0 ** -40,
             6.1e-5, 6.103515625e-05, 1 + 2.0 ** -11, 1 + 2.0 ** -11 + 2.0 ** -40, 1.00390625 + 2.0 ** -40,
             3.4e38, np.inf, -np.inf, np.nan, 1e-45]
    x = np.concatenate([edges, rng.standard_normal(20_000) * 10.0 ** rng.integers(-9, 6, 20_000),
                        rng.standard_normal(2_000).astype(np.float32).astype(np.float64)])
    n = len(x)
    h, b = np.zeros(n, dtype=np.uint16), np.zeros(n, dtype=np.uint16)
    hd, bd = np.zeros(n), np.zeros(n)
    lib.conv(*(a.ctypes.data_as(ctypes.c_void_p) for a in (x,)), ctypes.c_int64(n),
             *(a.ctypes.data_as(ctypes.c_void_p) for a in (h, b, hd, bd)))
    with np.errstate(all="ignore"):
        want_h = x.astype(np.float16)
        want_b = x.astype(ScalarType("bf16").numpy())
    np.testing.assert_array_equal(h, want_h.view(np.uint16))
    np.testing.assert_array_equal(b[~np.isnan(x)], want_b.view(np.uint16)[~np.isnan(x)])
    np.testing.assert_array_equal(hd, want_h.astype(np.float64))
    np.testing.assert_array_equal(bd[~np.isnan(x)], want_b.astype(np.float64)[~np.isnan(x)])


def test_a_message_larger_than_the_queue_is_named() -> None:
    """A row buffer as large as the queue leaves no room for its token: a clear error, not 'deadlock'."""
    program = compile_model(MODELS / "bag_sum.ts.onnx", "O2")  # bag index 8 + a 32-byte row buffer + token 8
    machine = MACHINE.with_overrides(["access.lanes=1", "access.queue_bytes=32"])
    for engine in (lambda: reference.simulate(program, inputs_of("bag_sum.ts.onnx"), machine),
                   lambda: fast.simulate(program, inputs_of("bag_sum.ts.onnx"), machine, None, False)):
        with pytest.raises(EmberError, match=r"one message of 48 bytes \(operands and token\) does not fit in the 32"):
            engine()
