"""Negative indices: ONNX Gather/GatherND and PyTorch's x[idx] count [-n, 0) from the end
(`emb.gather {negative = "wrap"}`), nn.Embedding and index_select do not, and anything else out of
range is refused by the simulator rather than read from a wrong row.  Checked against numpy, which
indexes like ONNX and x[idx]."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import compile_model
from onnx import TensorProto, helper, numpy_helper
from test_frontend_torch import I, T, write_pt2  # noqa: E741

from ember.frontends import import_model
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.passes import PRESETS
from ember.sim.engines import simulate as simulate_with
from ember.sim.reference import simulate

MACHINE = load_machine("default")
RNG = np.random.default_rng(21)
TABLE = RNG.standard_normal((6, 3)).astype(np.float32)
IDX = np.array([[0, -1, 5], [-6, 2, -3]], dtype=np.int64)  # every row, from both ends


def _gather_model(path: Path, table_as_input: bool) -> Path:
    """Gather(axis 0) of a weight table, or of a graph input with an unknown number of rows."""
    inputs = [helper.make_tensor_value_info("idx", TensorProto.INT64, [2, 3])]
    inits = []
    if table_as_input:
        inputs.insert(0, helper.make_tensor_value_info("table", TensorProto.FLOAT, ["n", 3]))
    else:
        inits.append(numpy_helper.from_array(TABLE, "table"))
    nodes = [helper.make_node("Gather", ["table", "idx"], ["y"])]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 3])
    graph = helper.make_graph(nodes, "g", inputs, [out], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _run(path: Path, level: str, feeds: dict[str, np.ndarray]) -> np.ndarray:
    return simulate(compile_model(path, level), feeds, MACHINE)[0]["y" if path.suffix == ".onnx" else "output"]


@pytest.mark.parametrize("level", sorted(PRESETS))
@pytest.mark.parametrize("table_as_input", [False, True], ids=["weight", "input"])
def test_onnx_gather_counts_negative_indices_from_the_end(tmp_path: Path, level: str, table_as_input: bool) -> None:
    path = _gather_model(tmp_path / "g.onnx", table_as_input)
    gathers = [op for op in import_model(str(path), "w").walk() if op.name == "emb.gather"]
    assert len(gathers) == 1 and gathers[0].attrs == {"negative": "wrap"}
    feeds = {"idx": IDX, **({"table": TABLE} if table_as_input else {})}
    np.testing.assert_array_equal(_run(path, level, feeds), TABLE[IDX])


@pytest.mark.parametrize("level", ["O0", "O3", "core"])
@pytest.mark.parametrize("bad", [-7, 6])
def test_indices_outside_minus_n_to_n_are_refused(tmp_path: Path, level: str, bad: int) -> None:
    path = _gather_model(tmp_path / "g.onnx", False)
    idx = IDX.copy()
    idx[1, 1] = bad
    with pytest.raises(EmberError, match=f"index {bad} is out of range .* 'table'"):
        _run(path, level, {"idx": idx})  # -7 is refused as -7, not as the -1 it becomes once wrapped


@pytest.mark.parametrize("engine", ["reference", "fast"])
@pytest.mark.parametrize("level", ["O0", "O3", "core"])
def test_an_index_below_minus_n_is_reported_as_the_user_gave_it(tmp_path: Path, level: str, engine: str) -> None:
    """-41 on a 40-row table: the program adds 40 to a negative index, and once said "index -1"."""
    rows = 40
    inputs = [helper.make_tensor_value_info("idx", TensorProto.INT64, [3])]
    table = numpy_helper.from_array(np.arange(rows * 2, dtype=np.float32).reshape(rows, 2), "table")
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])
    graph = helper.make_graph([helper.make_node("Gather", ["table", "idx"], ["y"])], "g", inputs, [out],
                              initializer=[table])
    path = tmp_path / "g40.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    program = compile_model(path, level)
    good = np.array([-40, 39, -1], dtype=np.int64)
    np.testing.assert_array_equal(simulate_with(program, {"idx": good}, MACHINE, engine=engine)[0]["y"],
                                  numpy_helper.to_array(table)[good])
    with pytest.raises(EmberError) as e:
        simulate_with(program, {"idx": np.array([3, -41, 0], dtype=np.int64)}, MACHINE, engine=engine)
    assert "index -41 is out of range for dimension 0 of param 'table' (size 40)" in e.value.message
    assert "index -1 " not in e.value.message


def test_torch_indexing_wraps_where_pytorch_does(tmp_path: Path) -> None:
    """x[idx] counts from the end as PyTorch does; index_select (like nn.Embedding) refuses a negative
    index in PyTorch, and Ember leaves it out of range rather than guess."""
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    idx = np.array([-1, 0, -5, 3], dtype=np.int64)
    a = "torch.ops.aten."
    indexed = write_pt2(tmp_path / "index.pt2", {"x": x, "idx": idx}, {},
                        [(a + "index.Tensor", {"self": T("x"), "indices": {"as_tensors": [{"name": "idx"}]}},
                          ["output"])], "output")
    gathers = [op for op in import_model(str(indexed), "w").walk() if op.name == "emb.gather"]
    assert [g.attrs for g in gathers] == [{"negative": "wrap"}]
    for level in ("O0", "O3"):
        np.testing.assert_array_equal(_run(indexed, level, {"x": x, "idx": idx}), x[idx])
    selected = write_pt2(tmp_path / "select.pt2", {"x": x, "idx": idx}, {},
                         [(a + "index_select.default", {"self": T("x"), "dim": I(0), "index": T("idx")},
                           ["output"])], "output")
    assert [op.attrs for op in import_model(str(selected), "w").walk() if op.name == "emb.gather"] == [{}]
    with pytest.raises(EmberError, match="-1 is out of range"):
        _run(selected, "O0", {"x": x, "idx": idx})
    np.testing.assert_array_equal(_run(selected, "O3", {"x": x, "idx": idx % 5}), x[idx % 5])
