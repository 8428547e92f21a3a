"""Host operators that would make a tensor over the size cap (EMBER_HOST_MAX_BYTES, 4 GiB) are refused
naming the node: at import when the model fixes the sizes, at run time, before anything is allocated,
when the sizes come from the data.  The same models with legal sizes give onnxruntime's results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from conftest import compile_model, run_tool
from onnx import TensorProto, helper, numpy_helper

from ember.frontends import import_model
from ember.host.check import check_module
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.sim.engines import simulate

MACHINE = load_machine("default")
GiB = 1 << 30


def i64(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def f32(*shape: int) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


def _scalar(v: float, dtype: Any = np.int64) -> np.ndarray:
    return np.array(v, dtype=dtype)


# op, its inputs (name -> a legal value), attributes, the inputs that set the size -> a value over 4 GiB,
# and the rank of the result
CASES: dict[str, tuple[str, dict[str, np.ndarray], dict[str, Any], dict[str, np.ndarray], int]] = {
    "ConstantOfShape": ("ConstantOfShape", {"s": i64(3, 4)}, {}, {"s": i64(100_000, 100_000)}, 2),
    "Expand": ("Expand", {"x": f32(2, 3), "s": i64(4, 1, 3)}, {}, {"s": i64(1_000_000_000, 1, 1)}, 3),
    "Tile": ("Tile", {"x": f32(2, 3), "r": i64(3, 2)}, {}, {"r": i64(100_000, 10_000)}, 2),
    "Range": ("Range", {"a": _scalar(0), "b": _scalar(10), "d": _scalar(3)}, {},
              {"a": _scalar(0), "b": _scalar(1 << 40), "d": _scalar(3)}, 1),
    "Pad": ("Pad", {"x": f32(2, 3), "p": i64(1, 0, 2, 3)}, {}, {"p": i64(0, 0, 40_000, 40_000)}, 2),
    "Resize": ("Resize", {"x": f32(1, 1, 2, 3), "roi": np.zeros(0, np.float32),
                          "sc": np.array([1, 1, 2, 3], np.float32)}, {"mode": "nearest"},
               {"sc": np.array([1, 1, 50_000, 50_000], np.float32)}, 4),
    "OneHot": ("OneHot", {"i": i64(0, 2, 1), "d": i64(4), "v": np.array([0, 1], np.float32)}, {"axis": -1},
               {"d": i64(1 << 31)}, 2),
    "MatMul": ("MatMul", {"a": f32(3, 1), "b": f32(1, 4)}, {}, {"a": f32(1, 1), "b": f32(1, 1)}, 2),
}
"""MatMul's huge case is given by its input shapes (an outer product), set in _huge_matmul."""


def _model(path: Path, op: str, values: dict[str, np.ndarray], attrs: dict[str, Any], rank: int,
           constant: set[str], name: str = "big") -> Path:
    """A one-node model: the inputs in `constant` are initializers, the others graph inputs."""
    inputs = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
              for k, v in values.items() if k not in constant]
    inits = [numpy_helper.from_array(v, k) for k, v in values.items() if k in constant]
    elem = TensorProto.INT64 if op == "Range" else TensorProto.FLOAT
    out = helper.make_tensor_value_info("y", elem, [f"d{k}" for k in range(rank)])
    node = helper.make_node(op, list(values), ["y"], name=name, **attrs)
    graph = helper.make_graph([node], "g", inputs, [out], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _huge(case: str) -> tuple[dict[str, np.ndarray], dict[str, tuple[int, ...]]]:
    """The case's inputs with the size-setting ones over the cap; MatMul's by shape (values never made)."""
    op, legal, _, huge, _ = CASES[case]
    return {**legal, **huge}, ({"a": (100_000, 1), "b": (1, 100_000)} if op == "MatMul" else {})


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_size_fixed_by_the_model_is_refused_at_import(tmp_path: Path, case: str) -> None:
    op, _, attrs, huge, rank = CASES[case]
    values, shapes = _huge(case)
    if shapes:  # graph inputs of the huge shapes: the sizes are the model's, not the data's
        path = tmp_path / "m.onnx"
        inputs = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(s)) for k, s in shapes.items()]
        graph = helper.make_graph([helper.make_node(op, ["a", "b"], ["y"], name="big")], "g", inputs,
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "m"])])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    else:
        path = _model(tmp_path / "m.onnx", op, values, attrs, rank, set(huge))
    with pytest.raises(EmberError) as e:
        check_module(import_model(str(path), str(path)), str(path))
    assert f"node 'big' ({op}): its result 'y' would take" in e.value.message
    assert "over the limit of 4,294,967,296 bytes per tensor (EMBER_HOST_MAX_BYTES)" in e.value.message


def test_the_import_refusal_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    op, values, attrs, huge, rank = CASES["ConstantOfShape"]
    path = _model(tmp_path / "m.onnx", op, {**values, **huge}, attrs, rank, set(huge))
    r = run_tool("import", str(path), "-o", str(tmp_path / "m.eir"))
    assert r.returncode == 1 and not (tmp_path / "m.eir").exists()
    assert r.stderr.decode().count("\n") == 1
    assert "node 'big' (ConstantOfShape): its result 'y' would take 40,000,000,000 bytes" in r.stderr.decode()


@pytest.mark.parametrize("engine", ["reference", "fast"])
@pytest.mark.parametrize("case", sorted(c for c in CASES if c != "MatMul"))
def test_a_size_from_the_data_is_refused_before_running_and_legal_sizes_match_onnxruntime(
        tmp_path: Path, case: str, engine: str) -> None:
    ort = pytest.importorskip("onnxruntime")
    op, legal, attrs, huge, rank = CASES[case]
    path = _model(tmp_path / "m.onnx", op, legal, attrs, rank, set())  # every input is data
    program = compile_model(path, "O3")
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, legal)[0]
    got = simulate(program, legal, MACHINE, engine=engine)[0]["y"]
    np.testing.assert_array_equal(got, want)
    with pytest.raises(EmberError) as e:
        simulate(program, {**legal, **huge}, MACHINE, engine=engine)
    assert f"host operation {op}: its result 'y' would take" in e.value.message
    assert "(EMBER_HOST_MAX_BYTES)" in e.value.message and "\n" not in e.value.message


def _chain(path: Path) -> Path:
    """Range(0, ReduceMax(x), 1) then Tile of it: a size ONNX's inference cannot know before ReduceMax runs."""
    nodes = [helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0, name="max"),
             helper.make_node("Range", ["zero", "m", "one"], ["r"], name="range"),
             helper.make_node("Tile", ["r", "reps"], ["y"], name="tile")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.INT64, [3]),
                                           helper.make_tensor_value_info("reps", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, ["n"])],
                              initializer=[numpy_helper.from_array(_scalar(0), "zero"),
                                           numpy_helper.from_array(_scalar(1), "one")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("engine", ["reference", "fast"])
def test_a_size_computed_by_an_earlier_operator_is_checked_once_it_is_known(tmp_path: Path, engine: str) -> None:
    ort = pytest.importorskip("onnxruntime")
    path = _chain(tmp_path / "chain.onnx")
    program = compile_model(path, "O3")
    legal = {"x": i64(2, 7, 5), "reps": i64(3)}
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, legal)[0]
    np.testing.assert_array_equal(simulate(program, legal, MACHINE, engine=engine)[0]["y"], want)
    with pytest.raises(EmberError, match="host operation Range: its result '.*' would take 80,000,000,000 bytes"):
        simulate(program, {"x": i64(2, 10_000_000_000, 5), "reps": i64(1)}, MACHINE, engine=engine)
    with pytest.raises(EmberError, match="host operation Tile: its result 'y' would take 8,000,000,000 bytes"):
        simulate(program, {"x": i64(2, 1000, 5), "reps": i64(1_000_000)}, MACHINE, engine=engine)


def test_the_cap_can_be_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    op, legal, attrs, _, rank = CASES["Expand"]  # 4 x 2 x 3 float32: 96 bytes
    path = _model(tmp_path / "m.onnx", op, legal, attrs, rank, set())
    program = compile_model(path, "O3")
    monkeypatch.setenv("EMBER_HOST_MAX_BYTES", "95")
    with pytest.raises(EmberError, match="would take 96 bytes .* over the limit of 95 bytes"):
        simulate(program, legal, MACHINE, engine="reference")
    monkeypatch.setenv("EMBER_HOST_MAX_BYTES", "96")
    assert simulate(program, legal, MACHINE, engine="reference")[0]["y"].shape == (4, 2, 3)
    monkeypatch.setenv("EMBER_HOST_MAX_BYTES", "-1")
    with pytest.raises(EmberError, match="EMBER_HOST_MAX_BYTES must be a positive integer, not '-1'"):
        simulate(program, legal, MACHINE, engine="reference")
    big = _model(tmp_path / "big.onnx", op, {**legal, "s": i64(1_000_000_000, 1, 1)}, attrs, rank, {"s"})
    monkeypatch.setenv("EMBER_HOST_MAX_BYTES", str(64 * GiB))
    check_module(import_model(str(big), str(big)), str(big))  # 24 GB: under the raised cap, so imported
