"""ember-gpu-bench: its logic on the CPU (a scripted backend, and PyTorch's CPU device), its output read back
by ember-bench --vs-gpu, and its one-line refusal without a GPU."""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import MODELS, run_tool

from ember.bench.gpu import Case, ModelCase, TorchBackend, cases, measure, with_copy_share
from ember.bench.published import load_gpu_baseline
from ember.bench.vs_gpu import twin
from ember.bench.workloads import Workload, suite
from ember.ir.diagnostics import EmberError

SMALL_BAG = Case("embedding_bag", Workload("bag", "bag_sum", 1, 3_000, 32, 20, 64, 0.8))
SMALL_GRAPH = Case("spmm", Workload("g", "bag_sum", 1, 2_000, 16, 2, 2_000, 0.9, graph="wiki-Talk"))


class Scripted:
    """Runs the kernel with numpy; times and power are scripted, so the medians are known."""

    def __init__(self, times: list[float], power: float | None):
        self.scripted, self.power, self.ran = times, power, 0

    def available(self) -> str | None:
        return None

    def describe(self) -> dict[str, str]:
        return {"device": "Scripted GPU", "driver": "1.0", "torch": "none", "cuda": "0"}

    def prepare(self, case: Case, inputs: dict[str, np.ndarray], table: np.ndarray) -> Callable[[], Any]:
        def run() -> np.ndarray:
            self.ran += 1
            return case.workload.reference(0, table, inputs)
        return run

    def prepare_model(self, case: ModelCase) -> Callable[[], Any]:
        return lambda: None

    def times(self, fn: Callable[[], Any], reps: int) -> list[float]:
        fn()
        return self.scripted[:reps]

    def power_w(self, fn: Callable[[], Any], seconds: float) -> tuple[float | None, float | None]:
        return self.power, None if self.power is None else 60.0

    def copy_gbps(self) -> float:
        return 2000.0


def test_measure_reports_medians_power_and_useful_bandwidth() -> None:
    backend = Scripted([3e-5, 1e-5, 2e-5], 400.0)
    doc = with_copy_share(measure(backend, [SMALL_BAG, SMALL_GRAPH], reps=3))
    assert doc["device"] == "Scripted GPU" and doc["tool"] == "ember-gpu-bench" and doc["date"]
    bag, graph = doc["rows"]
    assert bag["time_s"] == 2e-5 and bag["times_s"] == [3e-5, 1e-5, 2e-5]
    assert bag["power_w"] == 400.0 and bag["idle_power_w"] == 60.0
    inputs = SMALL_BAG.workload.inputs(0)
    unique = len(np.unique(inputs["indices"]))
    useful = unique * 32 * 4 + inputs["indices"].nbytes + inputs["offsets"].nbytes + 64 * 32 * 4
    assert bag["lookups"] == 64 * 20 and bag["unique_rows"] == unique
    assert bag["GBps"] == pytest.approx(useful / 2e-5 / 1e9)
    assert bag["frac_copy_bw"] == pytest.approx(bag["GBps"] / 2000)
    g = SMALL_GRAPH.workload.inputs(0)
    assert graph["nnz"] == len(g["indices"]) and graph["nodes"] == 2_000 and graph["F"] == 16
    assert graph["edges_per_s"] == pytest.approx(len(g["indices"]) / 2e-5)
    assert backend.ran >= 2


@pytest.mark.slow  # docs/testing.md: what moved to make bench
def test_the_output_feeds_vs_gpu_with_measured_power(tmp_path: Path) -> None:
    """A measured row with power: the comparison uses power x time for the GPU's energy, not the 700 W bound."""
    w = Workload("RM1_L0@gpu", "bag_sum", 1, 4_000_000, 32, 20, 4_096, 0.0)
    doc = with_copy_share(measure(Scripted([4e-5] * 3, 300.0), [Case("embedding_bag", w)], reps=3))
    f = tmp_path / "mine.json"
    f.write_text(json.dumps(doc))
    gpu = load_gpu_baseline(str(f))
    row = gpu.match_time(suite("quick", ["RM1_L0"])[0])
    assert row is not None and row.time_s == 4e-5 and row.power_w == 300.0 and row.lookups == 4_096 * 20
    out = tmp_path / "vs.json"
    res = run_tool("bench", "--suite", "quick", "--only", "RM1_L0", "--vs-gpu", "--timing-only", "--gpu-data",
                   str(f), "--json", str(out), "--quiet")
    assert res.returncode == 0, res.stderr.decode()
    for r in json.loads(out.read_text())["rows"]:
        assert r["gpu_energy_j"] == pytest.approx(300.0 * 4e-5) and r["gpu_energy_bound_j"] is None
        assert r["perf_per_watt_ratio"] == pytest.approx(r["gpu_energy_j"] / r["dae_energy_j"])


def test_the_gpu_gets_the_inputs_the_dae_twin_gets() -> None:
    """The grid's case for RM3_L1's shape draws the very indices --vs-gpu simulates."""
    w = suite("paper", ["RM3_L1"])[0]
    mine = next(c.workload for c in cases(["embedding_bag"]) if (c.workload.dim, c.workload.pooling,
                                                                 c.workload.zipf) == (128, 80, 0.8))
    dae = twin(w, load_gpu_baseline().match_time(w))
    assert dataclasses.replace(dae, name=mine.name, virtual=False) == mine
    a, b = mine.inputs(0), dae.inputs(0)
    assert all(np.array_equal(a[k], b[k]) for k in ("indices", "offsets"))


def test_pytorch_kernels_compute_the_reference_on_the_cpu() -> None:
    pytest.importorskip("torch")
    backend = TorchBackend("cpu", ["torch"])
    assert backend.available() is None
    for case in (SMALL_BAG, SMALL_GRAPH):
        w = case.workload
        inputs = w.inputs(0)
        table = np.random.default_rng(1).standard_normal((w.rows, w.dim), dtype=np.float32)
        got = backend.prepare(case, inputs, table)().numpy()
        np.testing.assert_allclose(got, w.reference(0, table, inputs), rtol=1e-5, atol=1e-5)
        times = backend.times(backend.prepare(case, inputs, table), 3)
        assert len(times) == 3 and statistics.median(times) > 0
    assert backend.power_w(lambda: None, 0.1) == (None, None)


def test_without_a_gpu_it_says_so_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "gpu.json"
    res = run_tool("gpu_bench", "-o", str(out))
    err = res.stderr.decode()
    assert res.returncode == 1 and err.count("\n") == 1 and not out.exists(), err
    assert "no CUDA device" in err or "pip install 'ember[gpu]'" in err


def test_bad_options_are_one_line_errors(tmp_path: Path) -> None:
    res = run_tool("gpu_bench", "-o", str(tmp_path / "x.json"), "--ops", "conv")
    err = res.stderr.decode()
    assert res.returncode == 1 and err.count("\n") == 1 and "unknown operator 'conv'" in err, err
    res = run_tool("gpu_bench", "-o", str(tmp_path / "x.json"), "--kernels", "torch,cuda")
    err = res.stderr.decode()
    assert res.returncode == 1 and err.count("\n") == 1 and "unknown kernel 'cuda' in --kernels" in err, err


# Run with TRITON_INTERPRET=1 in a process of its own: Triton chooses between compiling and interpreting when it
# is imported.  Bags of every kind the kernel's loop meets: empty, of one index, shorter than a block of indices,
# several blocks with a partial last one, a program's bags of unequal lengths and a last program with fewer bags
# than its block; D neither a power of two nor a multiple of the column block; 64- and 32-bit indices.
TRITON_ON_CPU = """
import numpy as np, torch
from ember.bench.gpu import Case, TorchBackend, measure
from ember.bench.triton_bag import CONFIGS, embedding_bag
from ember.bench.workloads import Workload
rng = np.random.default_rng(7)
for dim, itype in ((200, np.int64), (3, np.int32)):
    table = rng.standard_normal((90, dim), dtype=np.float32)
    idx = rng.integers(0, 90, 150).astype(itype)
    off = np.array([0, 0, 3, 3, 70, 71, 150], dtype=itype)
    bags = [idx[a:b] for a, b in zip(off[:-1], off[1:])]
    want = {"sum": [table[b].sum(0) for b in bags],
            "mean": [table[b].mean(0) if len(b) else np.zeros(dim) for b in bags],
            "max": [table[b].max(0) if len(b) else np.zeros(dim) for b in bags]}
    for mode, rows in want.items():
        for config in CONFIGS if mode == "sum" else (CONFIGS[0], CONFIGS[3]):  # one bag, then 4 bags, a program
            got = embedding_bag(*(torch.from_numpy(a) for a in (table, idx, off)), mode, config).numpy()
            np.testing.assert_allclose(got, np.stack(rows), rtol=1e-5, atol=1e-5, err_msg=f"{mode} {config} {dim}")
w = Workload("bag", "bag_sum", 1, 300, 48, 5, 8, 0.8)
doc = measure(TorchBackend("cpu", ["triton"]), [Case("embedding_bag", w, "triton")], reps=2, power_seconds=0)
row = doc["rows"][0]
assert row["kernel"] == "triton" and row["lookups"] == 40 and row["time_s"] > 0, row
print("ok")
"""


def test_the_triton_kernel_computes_numpys_bags_in_the_interpreter() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    import os
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", TRITON_ON_CPU], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TRITON_INTERPRET": "1"})
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-3000:]


def test_the_triton_kernel_compiles_for_the_h100() -> None:
    """Compiled (not interpreted) for sm_90 down to a cubin, which needs no GPU: what the interpreter cannot
    check, types and block shapes the compiler accepts, is checked here for every mode."""
    pytest.importorskip("triton")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from ember.bench.triton_bag import CONFIGS, MODES, bag

    signature = {"table": "*fp32", "indices": "*i64", "offsets": "*i64", "out": "*fp32", "bags": "i32", "dim": "i32",
                 "BLOCK_B": "constexpr", "BLOCK_N": "constexpr", "BLOCK_D": "constexpr", "MODE": "constexpr"}
    for mode in MODES.values():
        for block_b, block_n, block_d, warps, stages in CONFIGS if mode == MODES["sum"] else CONFIGS[:1]:
            src = ASTSource(bag, signature, constexprs={"BLOCK_B": block_b, "BLOCK_N": block_n, "BLOCK_D": block_d,
                                                         "MODE": mode})
            kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                                    options={"num_warps": warps, "num_stages": stages})
            assert kernel.asm["cubin"] and ".target sm_90" in kernel.asm["ptx"]


def test_vs_gpu_keeps_the_faster_kernel_of_each_case(tmp_path: Path) -> None:
    """Two kernels timed on one shape: the comparison is made against the faster, whichever it is."""
    w = Workload("RM1_L0@gpu", "bag_sum", 1, 3_000, 32, 20, 64, 0.0)  # RM1_L0's D, pooling and Zipf
    for slow, fast in (("torch", "triton"), ("triton", "torch")):
        doc = with_copy_share(measure(Scripted([4e-5] * 3, None), [Case("embedding_bag", w, slow)], reps=3))
        quick = with_copy_share(measure(Scripted([1e-5] * 3, None), [Case("embedding_bag", w, fast)], reps=3))
        doc["rows"] += quick["rows"]
        f = tmp_path / f"{fast}.json"  # a file name of its own: load_gpu_baseline caches by path
        f.write_text(json.dumps(doc))
        row = load_gpu_baseline(str(f)).match_time(suite("quick", ["RM1_L0"])[0])
        assert row is not None and row.kernel == fast and row.time_s == 1e-5


def test_an_exported_model_is_timed_whole_on_its_inputs() -> None:
    """PyTorch on the CPU runs the sample DLRM's torch.export archive on its inputs: the very function timed
    gives torch's own saved outputs, and its row has the model's name and a median time."""
    pytest.importorskip("torch")
    feeds = dict(np.load(MODELS / "dlrm.in.npz"))
    case = ModelCase("dlrm", str(MODELS / "dlrm.pt2"), feeds)
    backend = TorchBackend("cpu", [])
    want = np.load(MODELS / "dlrm.torch.out.npz")
    got = backend.prepare_model(case)()
    np.testing.assert_allclose(got.detach().numpy(), want[want.files[0]], rtol=1e-5, atol=1e-6)
    doc = with_copy_share(measure(backend, [case], reps=3, power_seconds=0))
    (row,) = doc["rows"]
    assert row["op"] == "model" and row["model"] == "dlrm" and row["time_s"] == statistics.median(row["times_s"])
    assert load_gpu_baseline().match_model("dlrm") is None  # the shipped file times no model
    assert row["inputs"] == {k: list(v.shape) for k, v in feeds.items()}
    short = ModelCase("dlrm", case.file, {k: v for k, v in feeds.items() if k != "idx1"})
    with pytest.raises(EmberError, match="the inputs have no array 'idx1'"):
        backend.prepare_model(short)
    floats = ModelCase("dlrm", case.file, {k: v.astype(np.float32) for k, v in feeds.items()})
    with pytest.raises(EmberError, match="the model does not run on its inputs"):
        backend.prepare_model(floats)


@pytest.mark.slow  # 7 s: make bench (docs/testing.md)
def test_vs_gpu_runs_a_model_on_one_core_of_each_server(tmp_path: Path) -> None:
    """--model: the model's DAE time is what the tools give for it on one core of the server (ember-import, -O3,
    ember-asm, ember-sim --machine), and with a timed GPU row of the same name the speedup is their ratio."""
    w = Workload("RM1_L0@gpu", "bag_sum", 1, 3_000, 32, 20, 64, 0.0)
    doc = measure(Scripted([4e-5] * 3, None), [Case("embedding_bag", w)], reps=3)
    shapes = {k: list(v.shape) for k, v in np.load(MODELS / "dlrm.in.npz").items()}
    doc["rows"].append({"op": "model", "model": "dlrm", "time_s": 2e-5, "power_w": 350.0, "inputs": shapes})
    kg = {k: [2 * d for d in v.shape] for k, v in np.load(MODELS / "kg_transe.in.npz").items()}
    doc["rows"].append({"op": "model", "model": "kg_transe", "time_s": 2e-5, "inputs": kg})  # other shapes
    f = tmp_path / "gpu.json"
    f.write_text(json.dumps(with_copy_share(doc)))
    out = tmp_path / "vs.json"
    model = MODELS / "dlrm.dynamo.onnx"
    res = run_tool("bench", "--suite", "quick", "--only", "RM1_L0", "--vs-gpu", "--timing-only", "--gpu-data",
                   str(f), "--model", f"{model}:{MODELS / 'dlrm.in.npz'}", "--model", str(MODELS / "kg_transe.pt2"),
                   "--json", str(out), "--quiet")
    assert res.returncode == 0, res.stderr.decode()
    kg_rows = [r for r in json.loads(out.read_text())["rows"] if r["workload"] == "model kg_transe"]
    assert [r["gpu"] for r in kg_rows] == ["not measured"] * 2  # the GPU ran it on inputs of other shapes
    rows = [r for r in json.loads(out.read_text())["rows"] if r["workload"] == "model dlrm"]
    assert [r["basis"] for r in rows] == ["iso-bandwidth", "iso-power"] and all(r["cores"] == 1 for r in rows)
    steps = [("import", str(model), "-o", str(tmp_path / "m.eir")),
             ("opt", "-O3", str(tmp_path / "m.eir"), "-o", str(tmp_path / "m.dae")),
             ("asm", str(tmp_path / "m.dae"), "-o", str(tmp_path / "m.bin"))]
    for name, *args in steps:
        assert run_tool(name, *args).returncode == 0
    for r in rows:
        res = run_tool("sim", str(tmp_path / "m.bin"), "--inputs", str(MODELS / "dlrm.in.npz"), "--machine",
                       r["machine"], "--set", "cores=1", "--stats", str(tmp_path / "st.json"))
        assert res.returncode == 0, res.stderr.decode()
        st = json.loads((tmp_path / "st.json").read_text())
        assert r["dae_time_s"] == pytest.approx(st["sim_seconds"])
        assert r["dae_energy_j"] == pytest.approx(st["energy_j"])
        assert r["gpu"] == "measured" and r["gpu_time_s"] == 2e-5
        assert r["speedup"] == pytest.approx(2e-5 / st["sim_seconds"])
        assert r["perf_per_watt_ratio"] == pytest.approx(350.0 * 2e-5 / st["energy_j"])


def test_model_options_are_checked_before_any_run(tmp_path: Path) -> None:
    res = run_tool("gpu_bench", "-o", str(tmp_path / "x.json"), "--ops", "none")
    assert res.returncode == 1 and "nothing to measure" in res.stderr.decode()
    res = run_tool("gpu_bench", "-o", str(tmp_path / "x.json"), "--model", str(tmp_path / "none.pt2"))
    err = res.stderr.decode()
    assert res.returncode == 1 and err.count("\n") == 1 and "none.pt2: error: no such model file" in err, err
    res = run_tool("bench", "--suite", "tiny", "--only", "RM1_L0", "--model", str(MODELS / "dlrm.pt2"))
    assert res.returncode == 1 and "--model applies to --vs-gpu runs only" in res.stderr.decode()
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    np.savez(tmp_path / "bad.in.npz", x=np.zeros(3))
    res = run_tool("bench", "--suite", "tiny", "--only", "RM1_L0", "--vs-gpu", "--timing-only", "--model", str(bad))
    err = res.stderr.decode()
    assert res.returncode == 1 and err.count("\n") == 1 and "bad.onnx" in err, err  # refused before any run


def test_a_file_that_is_no_export_archive_is_one_line() -> None:
    pytest.importorskip("torch")
    case = ModelCase("dlrm", str(MODELS / "dlrm.dynamo.onnx"), dict(np.load(MODELS / "dlrm.in.npz")))
    with pytest.raises(EmberError, match="not a torch.export archive"):
        TorchBackend("cpu", []).prepare_model(case)

