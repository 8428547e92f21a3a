"""End to end: every sample model, both exporters, import -> opt -O0 -> asm -> sim, outputs vs onnxruntime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import MODELS, run_tool

MODEL_FILES = sorted(p.name for p in MODELS.glob("*.onnx"))
# The chain through the command-line tools, one process a stage: `make test` runs it on one model of each kind
# and exporter, `make bench` on the rest.  Every sample's results at every level are checked against
# onnxruntime in-process too (test_levels_e2e.py).
CHAIN_IN_TEST = ("bag_sum.ts.onnx", "bag_sum.dynamo.onnx", "bag_pad_max.dynamo.onnx", "dlrm.dynamo.onnx",
                 "embedding.ts.onnx", "mp_mean.dynamo.onnx", "kg_transe.ts.onnx", "spattn.dynamo.onnx",
                 "gcn.dynamo.onnx", "spmm.dynamo.onnx")
CHAIN_CASES = [pytest.param(m, marks=[] if m in CHAIN_IN_TEST else [pytest.mark.slow]) for m in MODEL_FILES]


def inputs_of(model: str) -> Path:
    return MODELS / f"{model.split('.')[0]}.in.npz"


def expected_of(model: str) -> Path:
    return MODELS / model.replace(".onnx", ".out.npz")


def check(result: object) -> None:
    assert result.returncode == 0, result.stderr.decode()  # type: ignore[attr-defined]


@pytest.mark.parametrize("model", CHAIN_CASES)
def test_file_chain_matches_onnxruntime(model: str, tmp_path: Path) -> None:
    src = MODELS / model
    eir, dae, binary, out, stats = (tmp_path / f"m.{x}" for x in ("eir", "dae", "bin", "npz", "json"))
    check(run_tool("import", str(src), "-o", str(eir)))
    check(run_tool("opt", "-O0", str(eir), "-o", str(dae)))
    check(run_tool("asm", str(dae), "-o", str(binary)))
    check(run_tool("sim", str(binary), "--inputs", str(inputs_of(model)), "--outputs", str(out),
                   "--stats", str(stats), "-q"))
    got, want = np.load(out), np.load(expected_of(model))
    assert sorted(got.files) == sorted(want.files)
    for name in want.files:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
    s = json.loads(stats.read_text())
    for key in ("cycles", "tokens", "operands", "dram_bytes", "queue_max_occupancy", "dram_bandwidth_fraction",
                "roofline_fraction"):
        assert key in s
    assert s["cycles"] > 0 and 0 < s["roofline_fraction"] <= 1.0
    assert s["tokens"] > 0 and s["operands"] >= s["tokens"]


@pytest.mark.parametrize("model", ["bag_weighted.ts.onnx", "dlrm.dynamo.onnx", "bag_max.ts.onnx"])
def test_stdin_stdout_pipeline_matches(model: str, tmp_path: Path) -> None:
    src = MODELS / model
    r = run_tool("import", str(src))
    check(r)
    r = run_tool("opt", "-O0", stdin=r.stdout)
    check(r)
    r = run_tool("asm", "-o", "-", stdin=r.stdout, cwd=Path.cwd())
    check(r)
    out = tmp_path / "out.npz"
    r = run_tool("sim", "-", "--inputs", str(inputs_of(model)), "--outputs", str(out), "-q", stdin=r.stdout)
    check(r)
    got, want = np.load(out), np.load(expected_of(model))
    for name in want.files:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_disasm_reproduces_canonical_dae(tmp_path: Path) -> None:
    src = MODELS / "dlrm.ts.onnx"
    eir, dae, binary, back = (tmp_path / f"m.{x}" for x in ("eir", "dae", "bin", "back.dae"))
    check(run_tool("import", str(src), "-o", str(eir)))
    check(run_tool("opt", "-O0", str(eir), "-o", str(dae)))
    check(run_tool("asm", str(dae), "-o", str(binary)))
    check(run_tool("disasm", str(binary), "-o", str(back)))
    assert back.read_text() == dae.read_text()


def test_outputs_are_all_or_none_when_stats_cannot_be_written(tmp_path: Path) -> None:
    """ember-sim writes --outputs and --stats together: an unwritable --stats leaves no --outputs behind,
    and a writable one leaves both."""
    model = "bag_sum.ts.onnx"
    eir, dae, binary, out = (tmp_path / f"m.{x}" for x in ("eir", "dae", "bin", "npz"))
    check(run_tool("import", str(MODELS / model), "-o", str(eir)))
    check(run_tool("opt", "-O0", str(eir), "-o", str(dae)))
    check(run_tool("asm", str(dae), "-o", str(binary)))
    r = run_tool("sim", str(binary), "--inputs", str(inputs_of(model)), "--outputs", str(out),
                 "--stats", str(tmp_path / "missing" / "s.txt"), "-q")
    assert r.returncode == 1 and "cannot write" in r.stderr.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.bin", "m.dae", "m.eir"]
    check(run_tool("sim", str(binary), "--inputs", str(inputs_of(model)), "--outputs", str(out),
                   "--stats", str(tmp_path / "s.txt"), "-q"))
    text = (tmp_path / "s.txt").read_text()
    assert sorted(np.load(out).files) == ["output"] and "Begin Simulation Statistics" in text and "\ncycles " in text


def test_a_copied_level_points_back_at_its_weights(tmp_path: Path) -> None:
    """A sample .dae names its weights relative to itself (../models/...): copied elsewhere, ember-asm says so and
    how to point it back, and --weights gives the same binary as assembling it in place."""
    level = MODELS.parent / "levels" / "bag_mean.dynamo.dae"
    copy = tmp_path / level.name
    copy.write_bytes(level.read_bytes())
    r = run_tool("asm", str(copy), "-o", str(tmp_path / "x.bin"))
    assert r.returncode == 1 and "--weights FILE" in r.stderr.decode() and not (tmp_path / "x.bin").exists()
    check(run_tool("asm", str(copy), "--weights", str(MODELS / "bag_mean.dynamo.onnx"), "-o", str(tmp_path / "a.bin")))
    check(run_tool("asm", str(level), "-o", str(tmp_path / "b.bin")))
    assert (tmp_path / "a.bin").read_bytes() == (tmp_path / "b.bin").read_bytes()
