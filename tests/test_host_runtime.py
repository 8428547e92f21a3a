"""Host operators run as ONNX models by onnxruntime or onnx.reference (ember.host), and ember-import
refuses a model with one that neither can run.

Results are compared with numpy and with onnxruntime on the whole original model; the two runtimes
must agree with each other and charge the same cycles (the cost model does not depend on them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import MODELS, compile_model
from onnx import TensorProto, helper, numpy_helper

from ember.frontends import import_model
from ember.host import HostNode, check_node, run_nodes, set_runtime
from ember.host import executors as ex
from ember.host import run as host_run
from ember.host.check import check_module
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.sim import host as sim_host
from ember.sim.engines import simulate

F32, I64 = np.dtype(np.float32), np.dtype(np.int64)


@pytest.fixture(autouse=True)
def _default_runtime() -> object:
    """Each test chooses its runtime; none leaks into the next."""
    yield
    set_runtime(None)


def _gelu(x: np.ndarray) -> np.ndarray:
    from math import erf

    return (0.5 * x * (1.0 + np.vectorize(erf)(x / np.sqrt(2.0)))).astype(x.dtype)


def _layer_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * scale + bias


def _runtimes() -> list[str]:
    return ["reference", "onnxruntime"] if ex.onnxruntime_installed() else ["reference"]


# ---------------------------------------------------------------------------------------------
# The runtime on its own


@pytest.mark.parametrize("runtime", ["reference", "onnxruntime", "auto"])
def test_function_operators_and_long_gathers_run_as_one_model(runtime: str) -> None:
    """Gelu-20 (a context-dependent function in ONNX), LayerNormalization and a GatherElements along
    an axis of 200 with negative indices (onnx.reference's own fails beyond 64) in one run."""
    if runtime == "onnxruntime":
        pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 200)).astype(np.float32)
    scale, bias = rng.standard_normal(200).astype(np.float32), rng.standard_normal(200).astype(np.float32)
    idx = rng.integers(-200, 200, size=(2, 7))
    nodes = [HostNode.of("LayerNormalization", ["x", "scale", "bias"], ["ln"], {"axis": -1, "epsilon": 1e-5}),
             HostNode.of("Gelu", ["ln"], ["g"], {}),
             HostNode.of("GatherElements", ["g", "idx"], ["out"], {"axis": 1})]
    feeds = {"x": x, "scale": scale, "bias": bias, "idx": idx}
    types = {k: (v.dtype, v.shape) for k, v in feeds.items()}
    got = run_nodes(nodes, feeds, types, {"ln": F32, "g": F32, "out": F32}, 20, runtime)
    ln = _layer_norm(x.astype(np.float64), scale, bias)
    np.testing.assert_allclose(got["ln"], ln, rtol=1e-4, atol=1e-5)
    g = _gelu(ln)
    np.testing.assert_allclose(got["g"], g, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got["out"], np.take_along_axis(g[:2], idx % 200, axis=1), rtol=1e-4, atol=1e-5)


def test_auto_sends_each_operator_to_an_executor_that_runs_it() -> None:
    """onnxruntime has no Relu kernel for int64 (valid ONNX since opset 14): under auto that node goes
    to onnx.reference and its neighbours stay on onnxruntime."""
    pytest.importorskip("onnxruntime")
    node = HostNode.of("Relu", ["x"], ["y"], {})
    assert check_node(node, {"x": (I64, (None,))}, 17, "onnxruntime") is not None
    assert check_node(node, {"x": (I64, (None,))}, 17, "auto") is None
    x = np.array([-2.5, 0.5, 3.5, -7.0], dtype=np.float32)
    nodes = [HostNode.of("Cast", ["x"], ["i"], {"to": TensorProto.INT64}), HostNode.of("Relu", ["i"], ["r"], {}),
             HostNode.of("Cast", ["r"], ["f"], {"to": TensorProto.FLOAT}), HostNode.of("Mul", ["f", "x"], ["y"], {})]
    got = run_nodes(nodes, {"x": x}, {"x": (F32, (4,))}, {"i": I64, "r": I64, "f": F32, "y": F32}, 17, "auto")
    np.testing.assert_array_equal(got["y"], np.maximum(x.astype(np.int64), 0) * x)
    plan = list(host_run._PLANS.values())[-1]  # the split this run was given
    assert [(s.executor, s.nodes) for s in plan] == [("onnxruntime", (0,)), ("reference", (1,)),
                                                      ("onnxruntime", (2, 3))]


@pytest.mark.parametrize("runtime", _runtimes())
def test_a_value_reaches_its_consumer_in_the_declared_type(runtime: str) -> None:
    """A value whose operator gives another type than the program declares is converted before the next
    node reads it, as when host ops ran one at a time (Mul then sees int64 [1, 2], not float [1.5, 2.5])."""
    x = np.array([1.5, 2.5], dtype=np.float32)
    nodes = [HostNode.of("Identity", ["x"], ["a"], {}), HostNode.of("Mul", ["a", "a"], ["b"], {})]
    got = run_nodes(nodes, {"x": x}, {"x": (F32, (2,))}, {"a": I64, "b": I64}, 17, runtime)
    assert got["b"].dtype == np.int64
    np.testing.assert_array_equal(got["b"], [1, 4])


def test_a_failing_operator_is_named_with_the_reason_of_the_executor_that_ran_it() -> None:
    """A run-time failure is the error: under auto, onnx.reference is not tried after onnxruntime."""
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    nodes = [HostNode.of("Relu", ["x"], ["r"], {}), HostNode.of("Gather", ["r", "i"], ["g"], {"axis": 0}),
             HostNode.of("Neg", ["g"], ["y"], {})]
    feeds = {"x": x, "i": np.array([0, 7])}
    types = {k: (v.dtype, v.shape) for k, v in feeds.items()}
    with pytest.raises(EmberError, match=r"host operation Gather failed: ") as e:
        run_nodes(nodes, feeds, types, {"r": F32, "g": F32, "y": F32}, 17, "auto")
    assert ("onnxruntime: " in str(e.value)) == ex.onnxruntime_installed()
    assert ("onnx.reference: " in str(e.value)) != ex.onnxruntime_installed()


def test_runtime_choice_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ex.ENV, "reference")
    assert ex.executors_of() == ("reference",)
    monkeypatch.setenv(ex.ENV, "fastest")
    with pytest.raises(EmberError, match="EMBER_HOST_RUNTIME: unknown host runtime 'fastest'"):
        ex.executors_of()
    set_runtime("auto")  # the command-line option wins over the variable
    assert ex.executors_of()[-1] == "reference"


def test_without_onnxruntime_auto_is_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ex, "onnxruntime_installed", lambda: False)
    assert ex.executors_of("auto") == ("reference",)
    with pytest.raises(EmberError, match="onnxruntime is not installed"):
        ex.executors_of("onnxruntime")


# ---------------------------------------------------------------------------------------------
# The import check


def _save(tmp_path: Path, name: str, nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
          outputs: list[onnx.ValueInfoProto], opset: int, inits: list[onnx.TensorProto] | None = None) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits or [])
    path = tmp_path / name
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def _scatter10(tmp_path: Path) -> Path:
    """The deprecated Scatter at opset 10: onnxruntime still has a kernel, onnx.reference none."""
    return _save(tmp_path, "scatter.onnx", [helper.make_node("Scatter", ["x", "i", "u"], ["y"], name="the_scatter")],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3]),
                  helper.make_tensor_value_info("i", TensorProto.INT64, [2, 3]),
                  helper.make_tensor_value_info("u", TensorProto.FLOAT, [2, 3])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])], 10)


def _clip5(tmp_path: Path) -> Path:
    """Clip at opset 5 (min/max attributes): a valid model neither executor has a kernel for."""
    return _save(tmp_path, "clip.onnx", [helper.make_node("Relu", ["x"], ["r"], name="first"),
                                         helper.make_node("Clip", ["r"], ["y"], name="clamp", min=0.0, max=1.0)],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 8])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 8])], 5)


def test_import_refuses_an_operator_no_executor_runs(tmp_path: Path, run: object) -> None:
    out = tmp_path / "clip.eir"
    r = run("import", str(_clip5(tmp_path)), "-o", str(out))  # type: ignore[operator]
    err = r.stderr.decode()
    assert r.returncode == 1 and not out.exists(), err
    assert "Traceback" not in err
    assert "clip.onnx: error: node 'clamp' (Clip): no host executor can run it: " in err
    assert "onnx.reference: No implementation for operator 'Clip'" in err
    assert ("onnxruntime: Could not find an implementation for Clip(1)" in err) == ex.onnxruntime_installed()


def test_import_checks_against_the_chosen_runtime(tmp_path: Path, run: object) -> None:
    model = _scatter10(tmp_path)
    out = tmp_path / "s.eir"
    r = run("import", str(model), "-o", str(out), "--host-runtime", "reference")  # type: ignore[operator]
    assert r.returncode == 1 and not out.exists()
    assert ("scatter.onnx: error: node 'the_scatter' (Scatter): no host executor can run it: onnx.reference: "
            "No registered implementation for operator 'Scatter'") in r.stderr.decode()
    if ex.onnxruntime_installed():
        check_module(import_model(str(model), "m"), str(model), "auto")  # onnxruntime runs it


def test_import_without_onnxruntime_says_so(tmp_path: Path, run: object) -> None:
    """A stand-in package that cannot be imported plays an installation without onnxruntime."""
    stand_in = tmp_path / "site" / "onnxruntime"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text("raise ImportError('not installed here')\n")
    r = run("import", str(_scatter10(tmp_path)), "-o", str(tmp_path / "s.eir"), path=[tmp_path / "site"])  # type: ignore[operator]
    assert r.returncode == 1
    assert "no host executor can run it: onnxruntime: not installed; onnx.reference: " in r.stderr.decode()
    r = run("import", str(_scatter10(tmp_path)), "-o", str(tmp_path / "s.eir"), "--host-runtime",  # type: ignore[operator]
            "onnxruntime", path=[tmp_path / "site"])
    assert r.returncode == 1 and "onnxruntime is not installed" in r.stderr.decode()


# ---------------------------------------------------------------------------------------------
# Simulation: both engines, both runtimes


def _bert_like(tmp_path: Path) -> Path:
    """What BERT's embeddings do: row lookups, a token-type GatherElements over a 100-long buffer (with
    negative positions), LayerNormalization and exact Gelu (opset 20)."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal((50, 16)).astype(np.float32), "table"),
             numpy_helper.from_array(rng.standard_normal((3, 16)).astype(np.float32), "types"),
             numpy_helper.from_array(rng.integers(0, 3, size=(1, 100)), "buffer"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "scale"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "bias")]
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], name="words"),
             helper.make_node("GatherElements", ["buffer", "pos"], ["tt"], name="token_types", axis=1),
             helper.make_node("Gather", ["types", "tt"], ["te"], name="type_rows"),
             helper.make_node("Add", ["e", "te"], ["s"], name="sum"),
             helper.make_node("LayerNormalization", ["s", "scale", "bias"], ["ln"], name="norm", axis=-1),
             helper.make_node("Gelu", ["ln"], ["y"], name="act")]
    return _save(tmp_path, "bert_like.onnx", nodes,
                 [helper.make_tensor_value_info("ids", TensorProto.INT64, [4, 6]),
                  helper.make_tensor_value_info("pos", TensorProto.INT64, [1, 6])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 6, 16])], 20, inits)


def test_a_bert_like_model_simulates_alike_on_both_runtimes(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    path = _bert_like(tmp_path)
    feeds = {"ids": np.random.default_rng(2).integers(0, 50, size=(4, 6)), "pos": np.array([[0, 5, -1, 99, -100, 7]])}
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    check_module(import_model(str(path), "m"), str(path), "reference")  # every host op runs on either
    check_module(import_model(str(path), "m"), str(path), "onnxruntime")
    program = compile_model(path, "O3")
    machine = load_machine("default")
    got = {}
    for engine in ("fast", "reference"):
        for runtime in ("reference", "onnxruntime"):
            set_runtime(runtime)
            outputs, stats = simulate(program, feeds, machine, engine=engine)
            np.testing.assert_allclose(outputs["y"], want, rtol=1e-5, atol=1e-5)
            got[engine, runtime] = outputs["y"], stats.get("cycles").value, stats.get("host.cycles").value
    (y0, cycles, host), *rest = got.values()
    assert host > 0
    for y, c, h in rest:
        np.testing.assert_allclose(y, y0, rtol=1e-5, atol=1e-6)
        assert (c, h) == (cycles, host)


def test_runs_charge_what_single_operators_charged(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same statistics whether the DLRM sample's host ops run as runs or one at a time."""
    models = Path(__file__).resolve().parent.parent / "samples" / "models"
    program = compile_model(models / "dlrm.dynamo.onnx", "O3")
    feeds = dict(np.load(models / "dlrm.in.npz"))
    machine = load_machine("default")
    runs = sim_host.host_runs(program)
    assert max(len(r) for r in runs.values()) > 5  # the MLP and the interaction are one run each
    whole = simulate(program, feeds, machine)
    monkeypatch.setattr(sim_host, "host_runs", lambda p: {i: [i] for i in runs})
    alone = simulate(program, feeds, machine)
    np.testing.assert_array_equal(whole[0]["output"], alone[0]["output"])
    for name in ("cycles", "host.cycles", "host.flops", "dram_bytes"):
        assert whole[1].get(name).value == alone[1].get(name).value, name
    want = np.load(models / "dlrm.dynamo.out.npz")["output"]
    np.testing.assert_allclose(whole[0]["output"], want, rtol=1e-5, atol=1e-6)


def test_gemms_are_charged_at_the_matrix_rate_and_other_ops_at_the_simd_rate() -> None:
    """Worked by hand: a 256x1024 by 1024x512 MatMul is 2*256*512*1024 = 268,435,456 flops and moves
    (256*1024 + 1024*512 + 256*512) * 4 = 3,670,016 bytes."""
    host_cost = sim_host.host_cost
    a, b, c = (np.zeros(s, np.float32) for s in ((256, 1024), (1024, 512), (256, 512)))
    assert host_cost("MatMul", [a, b], [c], 64.0, 32.0) == (268_435_456 / 64, 268_435_456, 3_670_016)
    assert host_cost("MatMul", [a, b], [c], 64.0, 32.0, 1024.0)[0] == 268_435_456 / 1024  # still compute-bound
    assert host_cost("MatMul", [a, b], [c], 64.0, 32.0, 1e6)[0] == 3_670_016 / 32  # now DRAM-bound
    relu = (max(c.size / 64, 2 * c.nbytes / 32), c.size, 2 * c.nbytes)  # one flop an element, not the matrix rate
    assert host_cost("Relu", [c], [c], 64.0, 32.0, 1024.0) == relu


def test_a_matrix_unit_shortens_the_dense_layers_of_a_model() -> None:
    program = compile_model(MODELS / "dlrm.dynamo.onnx", "O3")
    inputs = dict(np.load(MODELS / "dlrm.in.npz"))
    m = load_machine("default").set("dram.device", "ideal")
    m = m.set("dram.bytes_per_cycle", "4096")  # the sample's small GEMMs compute-bound
    _, simd = simulate(program, inputs, m)
    _, amx = simulate(program, inputs, m.set("execute.matrix_flops_per_cycle", "1024"))
    assert amx["host.flops"] == simd["host.flops"] and amx["host.cycles"] < simd["host.cycles"]
    assert amx["cycles"] < simd["cycles"]
