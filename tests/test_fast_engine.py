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
from ember.sim import engine as reference
from ember.sim.fast import engine as fast
from ember.sim.machine import load_machine
from ember.sim.stats import Stats

HOST_TIME = {"host_seconds", "sim_cycles_per_host_second", "lookups_per_host_second"}
LEVELS = ("O0", "O1", "O2", "O3", "core")
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


def workload_cases(scale: str) -> list[tuple[str, str]]:
    return [(w.name, v) for w in suite(scale) for v in VARIANTS]


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


@pytest.mark.parametrize("overrides", [("dram.bytes_per_cycle=2",), ("access.outstanding=2", "access.lanes=1"),
                                       ("caches.l1.size_bytes=768", "caches.l1.ways=3"),
                                       ("execute.hidden_load_latency=0", "access.issue_per_cycle=3")])
def test_identical_on_other_machines(overrides: tuple[str, ...]) -> None:
    """Tight queues, few outstanding requests, tiny odd-sized caches, a saturated DRAM."""
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
    monkeypatch.setattr(fast, "compiler", lambda: None)
    monkeypatch.setattr(fast, "_loaded", {})
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
