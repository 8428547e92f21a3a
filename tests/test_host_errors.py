"""Host operators that cannot run: refused at import when the model says so, errors at simulation
that name the operator by the program's values and keep the executor's reason.

Each defect has both sides: the bad case refused or an error, a good neighbour still running and
matching numpy or onnxruntime.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import compile_model
from onnx import TensorProto, helper, numpy_helper

from ember.frontends import import_model
from ember.host import HostNode, check_node, run_nodes, set_runtime
from ember.host import executors as ex
from ember.host.check import check_module
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.sim.engines import simulate

F32, I32, I64 = np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64)
T = TensorProto
_vi = helper.make_tensor_value_info


@pytest.fixture(autouse=True)
def _default_runtime() -> object:
    yield
    set_runtime(None)


def _runtimes() -> list[str]:
    return ["auto", "reference", "onnxruntime"] if ex.onnxruntime_installed() else ["auto", "reference"]


def _save(tmp_path: Path, name: str, nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
          outputs: list[onnx.ValueInfoProto], inits: list[onnx.TensorProto],
          value_info: list[onnx.ValueInfoProto] | None = None) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits, value_info=value_info or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    path = tmp_path / name
    onnx.save(model, path)
    return path


TABLE = np.arange(40, dtype=np.float32).reshape(10, 4) / 7


def _lookup_then(tmp_path: Path, name: str, node: onnx.NodeProto, out_type: int = T.FLOAT,
                 value_info: list[onnx.ValueInfoProto] | None = None, extra: list[onnx.TensorProto] | None = None
                 ) -> Path:
    """A row lookup `g` followed by `node` (which writes `y`)."""
    return _save(tmp_path, name, [helper.make_node("Gather", ["W", "idx"], ["g"], name="lookup"), node],
                 [_vi("idx", T.INT64, [3])],
                 [_vi("y", out_type, [3, 4])],
                 [numpy_helper.from_array(TABLE, "W"), *(extra or [])], value_info)


# ---------------------------------------------------------------------------------------------
# D1: a node that breaks its operator's schema is refused, even when onnx.reference would "run" it


@pytest.mark.parametrize("runtime", ["auto", "reference"])
@pytest.mark.parametrize(("op", "types", "attrs"), [
    ("BitShift", {"a": (F32, (3, 4)), "b": (F32, (3, 4))}, {"direction": "LEFT"}),
    ("CumSum", {"a": (F32, (3, 4))}, {}),
    ("Sqrt", {"a": (I32, (3,))}, {}),
])
def test_a_node_of_the_wrong_types_or_arity_is_refused(runtime: str, op: str, types: dict[str, object],
                                                       attrs: dict[str, object]) -> None:
    node = HostNode.of(op, list(types), ["y"], attrs)
    reasons = check_node(node, types, 18, runtime)  # type: ignore[arg-type]
    assert reasons is not None and reasons.get("reference")  # onnx.reference alone would have taken it
    assert ("onnxruntime" in reasons) == (runtime == "auto" and ex.onnxruntime_installed())


@pytest.mark.parametrize("runtime", ["auto", "reference"])
def test_a_well_typed_node_passes(runtime: str) -> None:
    assert check_node(HostNode.of("Sqrt", ["a"], ["y"], {}), {"a": (F32, (None,))}, 18, runtime) is None
    assert check_node(HostNode.of("CumSum", ["a", "k"], ["y"], {}), {"a": (F32, (3, 4)), "k": (I64, ())}, 18,
                      runtime) is None


def test_import_refuses_a_node_of_the_wrong_types(tmp_path: Path, run: object) -> None:
    bad = _lookup_then(tmp_path, "bs.onnx", helper.make_node("BitShift", ["g", "g"], ["y"], name="shift",
                                                             direction="LEFT"))
    out = tmp_path / "bs.eir"
    r = run("import", str(bad), "-o", str(out))  # type: ignore[operator]
    err = r.stderr.decode()
    assert r.returncode == 1 and not out.exists(), err
    assert "node 'shift' (BitShift): no host executor can run it" in err and "tensor(float)" in err
    assert "Traceback" not in err and "(x0)" not in err
    # Sqrt's schema takes floats only: on the lookup's rows it runs, on the indices it is refused
    good = _lookup_then(tmp_path, "sqrt.onnx", helper.make_node("Sqrt", ["g"], ["y"]))
    idx = np.array([1, 2, 9])
    outputs, _ = simulate(compile_model(good, "O0"), {"idx": idx}, load_machine("default"))
    np.testing.assert_allclose(outputs["y"], np.sqrt(TABLE[idx]), rtol=1e-6)
    bad = _save(tmp_path, "sqrt_int.onnx", [helper.make_node("Sqrt", ["idx"], ["s"], name="root"),
                                            helper.make_node("Gather", ["W", "s"], ["y"])],
                [_vi("idx", T.INT64, [3])], [_vi("y", T.FLOAT, [3, 4])],
                [numpy_helper.from_array(TABLE, "W")])
    r = run("import", str(bad), "-o", str(tmp_path / "sq.eir"))  # type: ignore[operator]
    assert r.returncode == 1 and "node 'root' (Sqrt): no host executor can run it" in r.stderr.decode()


# ---------------------------------------------------------------------------------------------
# D4: a result declared with another element type than its operator produces


def test_a_wrong_value_info_type_is_refused(tmp_path: Path) -> None:
    mul = helper.make_node("Mul", ["g", "c"], ["m"], name="scale")
    nodes_tail = [numpy_helper.from_array(np.array(1.7, np.float32), "c")]
    bad = _save(tmp_path, "vi.onnx", [helper.make_node("Gather", ["W", "idx"], ["g"]), mul,
                                       helper.make_node("Relu", ["m"], ["y"])],
                [_vi("idx", T.INT64, [3])], [_vi("y", T.FLOAT, [3, 4])],
                [numpy_helper.from_array(TABLE, "W"), *nodes_tail], [_vi("m", T.INT32, [3, 4])])
    with pytest.raises(EmberError, match=r"node 'scale' \(Mul\): its result 'm' is declared int32, but the operator "
                                         r"produces float32"):
        check_module(import_model(str(bad), "m"), str(bad))
    good = _save(tmp_path, "vi_ok.onnx", [helper.make_node("Gather", ["W", "idx"], ["g"]), mul,
                                          helper.make_node("Relu", ["m"], ["y"])],
                 [_vi("idx", T.INT64, [3])],
                 [_vi("y", T.FLOAT, [3, 4])], [numpy_helper.from_array(TABLE, "W"), *nodes_tail],
                 [_vi("m", T.FLOAT, [3, 4])])
    check_module(import_model(str(good), "m"), str(good))
    idx = np.array([1, 2, 9])
    outputs, _ = simulate(compile_model(good, "O0"), {"idx": idx}, load_machine("default"))
    np.testing.assert_allclose(outputs["y"], np.maximum(TABLE[idx] * np.float32(1.7), 0), rtol=1e-6)


def test_a_cast_whose_output_is_declared_another_type_is_refused(tmp_path: Path, run: object) -> None:
    bad = _lookup_then(tmp_path, "cast.onnx", helper.make_node("Cast", ["g"], ["y"], name="to_int", to=T.INT32))
    r = run("import", str(bad), "-o", str(tmp_path / "cast.eir"))  # type: ignore[operator]
    assert r.returncode == 1
    assert "node 'to_int' (Cast): its result 'y' is declared float32, but the operator produces int32" in \
        r.stderr.decode()
    good = _lookup_then(tmp_path, "cast_ok.onnx", helper.make_node("Cast", ["g"], ["y"], to=T.INT32), T.INT32)
    idx = np.array([0, 5, 9])
    outputs, _ = simulate(compile_model(good, "O0"), {"idx": idx}, load_machine("default"))
    np.testing.assert_array_equal(outputs["y"], TABLE[idx].astype(np.int32))


# ---------------------------------------------------------------------------------------------
# D2: a run-time failure is the error, never a fallback to another executor's result


@pytest.mark.parametrize("op", ["Div", "Mod"])
def test_integer_division_by_zero_is_an_error(op: str) -> None:
    pytest.importorskip("onnxruntime")
    node = HostNode.of(op, ["a", "b"], ["q"], {})
    types = {"a": (I64, (3,)), "b": (I64, (3,))}
    with pytest.raises(EmberError, match=rf"host operation {op} failed: onnxruntime: .*by zero"):
        run_nodes([node], {"a": np.array([8, 6, 9]), "b": np.array([2, 0, 3])}, types, {}, 18, "auto")
    got = run_nodes([node], {"a": np.array([8, 6, 9]), "b": np.array([2, 4, 3])}, types, {}, 18, "auto")
    want = np.array([8, 6, 9]) // np.array([2, 4, 3]) if op == "Div" else np.array([8, 6, 9]) % np.array([2, 4, 3])
    np.testing.assert_array_equal(got["q"], want)


def test_a_case_onnxruntime_does_not_implement_still_falls_back() -> None:
    """onnxruntime's ReduceMax says at run time it has no empty bool case; onnx.reference has it."""
    node = HostNode.of("ReduceMax", ["x", "a"], ["y"], {"keepdims": 1})
    x = np.zeros((2, 0, 4), bool)
    got = run_nodes([node], {"x": x, "a": np.array([1])}, {"x": (np.dtype(bool), (2, 0, 4)), "a": (I64, (1,))},
                    {}, 20, "auto")
    np.testing.assert_array_equal(got["y"], np.zeros((2, 1, 4), bool))  # the empty set's maximum is False


def test_split_sizes_that_do_not_add_up_are_an_error() -> None:
    pytest.importorskip("onnxruntime")
    node = HostNode.of("Split", ["x", "s"], ["a", "b"], {"axis": 0})
    types = {"x": (F32, (None,)), "s": (I64, (2,))}
    with pytest.raises(EmberError, match="host operation Split failed: onnxruntime: "):
        run_nodes([node], {"x": np.arange(5, dtype=np.float32), "s": np.array([2, 2])}, types, {}, 18, "auto")
    got = run_nodes([node], {"x": np.arange(5, dtype=np.float32), "s": np.array([2, 3])}, types, {}, 18, "auto")
    np.testing.assert_array_equal(got["b"], [2, 3, 4])


def test_division_by_zero_feeding_a_lookup_stops_the_simulation(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    path = _save(tmp_path, "div0.onnx", [helper.make_node("Div", ["idx", "d"], ["q"]),
                                         helper.make_node("Gather", ["W", "q"], ["y"])],
                 [_vi("idx", T.INT64, [3]), _vi("d", T.INT64, [3])],
                 [_vi("y", T.FLOAT, [3, 4])], [numpy_helper.from_array(TABLE, "W")])
    program = compile_model(path, "O0")
    for engine in ("fast", "reference"):
        with pytest.raises(EmberError, match="host operation Div computing '.+' failed: onnxruntime: Integer "
                                             "division by zero"):
            simulate(program, {"idx": np.array([8, 6, 9]), "d": np.array([2, 0, 3])}, load_machine("default"),
                     engine=engine)
    outputs, _ = simulate(program, {"idx": np.array([8, 6, 9]), "d": np.array([2, 1, 3])}, load_machine("default"))
    np.testing.assert_array_equal(outputs["y"], TABLE[[4, 6, 3]])


# ---------------------------------------------------------------------------------------------
# D3: GatherElements with indices longer than the data off the axis


def test_gather_elements_refuses_indices_longer_than_the_data() -> None:
    node = HostNode.of("GatherElements", ["d", "i"], ["y"], {"axis": 0})
    data = np.arange(3, dtype=np.float32).reshape(3, 1)
    types = {"d": (F32, (None, None)), "i": (I64, (None, None))}
    for runtime in _runtimes():
        with pytest.raises(EmberError, match="host operation GatherElements failed"):
            run_nodes([node], {"d": data, "i": np.zeros((2, 4), np.int64)}, types, {}, 18, runtime)
    wide = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[0, 2], [2, 1]])  # shorter than the data along dimension 1: allowed
    want = np.array([[wide[idx[r, c], c] for c in range(2)] for r in range(2)])
    for runtime in _runtimes():
        got = run_nodes([node], {"d": wide, "i": idx}, types, {}, 18, runtime)
        np.testing.assert_array_equal(got["y"], want)


# ---------------------------------------------------------------------------------------------
# D5 and D6: the reason kept, the program's names used, in every engine mode


def _reshape(tmp_path: Path) -> Path:
    return _save(tmp_path, "reshape.onnx", [helper.make_node("Gather", ["W", "idx"], ["g"]),
                                            helper.make_node("Reshape", ["g", "shp"], ["y"], name="fold")],
                 [_vi("idx", T.INT64, [3]), _vi("shp", T.INT64, [2])],
                 [_vi("y", T.FLOAT, [None, None])], [numpy_helper.from_array(TABLE, "W")])


@pytest.mark.parametrize("runtime", _runtimes())
def test_a_run_time_failure_keeps_its_reason_and_names_the_result(tmp_path: Path, runtime: str) -> None:
    program = compile_model(_reshape(tmp_path), "O0")
    machine = load_machine("default")
    set_runtime(runtime)
    bad = {"idx": np.array([1, 2, 9]), "shp": np.array([5, 5])}
    for engine, timing_only in (("fast", False), ("fast", True), ("reference", False)):
        with pytest.raises(EmberError, match=r"host operation Reshape computing 'y' failed: ") as e:
            simulate(program, bad, machine, engine=engine, timing_only=timing_only)
        text = str(e.value)
        if runtime != "reference":
            assert "The input tensor cannot be reshaped to the requested shape. Input shape:{3,4}, requested " \
                   "shape:{5,5}" in text
        for internal in ("Reshape_0", "reshape_helper", "ReshapeHelper(", "'in", "'s"):
            assert internal not in text, text
    outputs, _ = simulate(program, {"idx": np.array([1, 2, 9]), "shp": np.array([2, 6])}, machine)
    np.testing.assert_array_equal(outputs["y"], TABLE[[1, 2, 9]].reshape(2, 6))


def test_the_onnxruntime_reason_drops_locations_and_signatures() -> None:
    pytest.importorskip("onnxruntime")
    node = HostNode.of("Reshape", ["x", "s"], ["y"], {})
    with pytest.raises(EmberError) as e:
        run_nodes([node], {"x": np.zeros((3, 4), np.float32), "s": np.array([5, 5])},
                  {"x": (F32, (3, 4)), "s": (I64, (2,))}, {}, 18, "onnxruntime", names={"y": "folded"})
    assert str(e.value) == ("error: host operation Reshape computing 'folded' failed: onnxruntime: The input tensor "
                            "cannot be reshaped to the requested shape. Input shape:{3,4}, requested shape:{5,5}")


# ---------------------------------------------------------------------------------------------
# An unknown runtime name


def test_an_unknown_runtime_is_a_one_line_error(tmp_path: Path, run: object, monkeypatch: pytest.MonkeyPatch
                                                ) -> None:
    model = _reshape(tmp_path)
    r = run("import", str(model), "-o", str(tmp_path / "r.eir"), "--host-runtime", "bogus")  # type: ignore[operator]
    assert r.returncode == 1
    assert r.stderr.decode().strip() == ("ember-import: error: --host-runtime: unknown host runtime 'bogus' "
                                         "(valid: auto, onnxruntime, reference)")
    monkeypatch.setenv(ex.ENV, "bogus")
    np.savez(tmp_path / "in.npz", idx=np.array([1, 2, 3]), shp=np.array([3, 4]))
    r = run("sim", str(tmp_path / "nothing.bin"), "--inputs", str(tmp_path / "in.npz"))  # type: ignore[operator]
    assert r.returncode == 1
    assert r.stderr.decode().strip() == ("ember-sim: error: EMBER_HOST_RUNTIME: unknown host runtime 'bogus' "
                                         "(valid: auto, onnxruntime, reference)")


@pytest.mark.parametrize("opset", [10**11, 2**63 - 1])
def test_an_opset_past_what_onnx_knows_runs_with_its_newest_schemas(opset: int) -> None:
    """Found by ember-fuzz: a module's opset past 2^31 (any int64 is valid .eir) reached onnx's schema
    lookup, whose C int refused it with a nine-line signature dump.  The newest schema up to the opset is the
    newest onnx has."""
    node = HostNode.of("Transpose", ["x"], ["y"], {"perm": [1, 0]})
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = run_nodes([node], {"x": x}, {"x": (F32, (2, 3))}, {}, opset, "auto")
    np.testing.assert_array_equal(got["y"], x.T)
