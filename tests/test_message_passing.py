"""Message passing and SpMM: row gathers and scatter-reduces raise to emb ops, unsafe scatters warn."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from conftest import run_tool
from onnx import TensorProto, helper

from ember.frontends.onnx import import_onnx


def scatter_model(path: Path, reduction: str) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])
    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, [5, 3])
    upd = helper.make_tensor_value_info("upd", TensorProto.FLOAT, [5, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])
    node = helper.make_node("ScatterElements", ["x", "idx", "upd"], ["y"], name="scatter_mean_half",
                            axis=0, reduction=reduction)
    graph = helper.make_graph([node], "g", [x, idx, upd], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))


def test_scatter_without_reduction_warns_naming_the_node(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    scatter_model(path, "none")
    module = import_onnx(str(path), "m.onnx")
    warnings = module.warnings  # type: ignore[attr-defined]
    assert len(warnings) == 1 and "scatter_mean_half" in warnings[0] and "may repeat" in warnings[0]
    r = run_tool("import", str(path), "-o", str(tmp_path / "m.eir"))
    assert r.returncode == 0 and b"warning: node 'scatter_mean_half'" in r.stderr


def test_general_scatter_stays_a_host_op_with_no_warning(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    scatter_model(path, "add")  # indices are a full 2-D tensor: not a row scatter, still exact as a host op
    module = import_onnx(str(path), "m.onnx")
    ops = [o.name for o in module.walk()]
    assert "emb.scatter_rows" not in ops and "host.onnx" in ops and not module.warnings  # type: ignore[attr-defined]


def test_scatter_rows_repeated_rows_accumulate(tmp_path: Path) -> None:
    """Many edges into one node: every message must land (the lowering applies them in order)."""
    from conftest import compile_model

    from ember.machine import load_machine
    from ember.sim.reference import simulate

    model = Path(__file__).resolve().parent.parent / "samples" / "models" / "mp_sum.dynamo.onnx"
    feeds = dict(np.load(model.parent / "mp_sum.in.npz"))
    feeds["dst"] = np.zeros_like(feeds["dst"])  # every edge into node 0
    want = np.zeros_like(feeds["x"])
    want[0] = feeds["x"][feeds["src"]].sum(axis=0)
    for level in ("O0", "O3"):
        got, _ = simulate(compile_model(model, level), feeds, load_machine("default"))
        np.testing.assert_allclose(got["output"], want, rtol=1e-5, atol=1e-5)


def _unsqueezed_model(path: Path, inputs: list[onnx.ValueInfoProto], nodes: list[onnx.NodeProto],
                      output: onnx.ValueInfoProto) -> None:
    """A graph whose row index is `col` = Unsqueeze(idx, [1]), as the exporters write GatherND/ScatterND rows."""
    axis = helper.make_tensor("axis", TensorProto.INT64, [1], [1])
    unsqueeze = helper.make_node("Unsqueeze", ["idx", "axis"], ["col"])
    graph = helper.make_graph([unsqueeze, *nodes], "g", inputs, [output], [axis])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))


def test_gather_nd_of_rows_by_int32_indices_is_a_row_gather(tmp_path: Path) -> None:
    """GatherND(x, Unsqueeze(idx)) reads whole rows whether idx holds int32 or int64 (ONNX itself types
    GatherND's indices int64; emb.gather takes both): one emb.gather, negative indices wrapped."""
    from conftest import compile_model

    from ember.machine import load_machine
    from ember.sim.reference import simulate

    path = tmp_path / "m.onnx"
    _unsqueezed_model(path, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 3]),
                             helper.make_tensor_value_info("idx", TensorProto.INT32, [5])],
                      [helper.make_node("GatherND", ["x", "col"], ["y"])],
                      helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 3]))
    assert [op.name for op in import_onnx(str(path), "m").walk()][-2:] == ["emb.gather", "return"]
    x = np.random.default_rng(2).standard_normal((6, 3)).astype(np.float32)
    idx = np.array([5, 0, -1, 3, 1], dtype=np.int32)
    got, _ = simulate(compile_model(path, "O3"), {"x": x, "idx": idx}, load_machine("default"))
    np.testing.assert_array_equal(got["y"], x[idx])


def test_scatter_nd_into_data_of_unknown_rank_stays_a_host_op(tmp_path: Path) -> None:
    """ScatterND(data, Unsqueeze(idx), updates) with 2-D updates but data of a rank shape inference
    cannot tell (a Reshape to a runtime shape) may not scatter rows: it stays a host ScatterND."""
    path = tmp_path / "m.onnx"
    _unsqueezed_model(path, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [12]),
                             helper.make_tensor_value_info("shape", TensorProto.INT64, ["k"]),
                             helper.make_tensor_value_info("idx", TensorProto.INT64, [5]),
                             helper.make_tensor_value_info("upd", TensorProto.FLOAT, [5, 3])],
                      [helper.make_node("Reshape", ["x", "shape"], ["data"]),
                       helper.make_node("ScatterND", ["data", "col", "upd"], ["y"], reduction="add")],
                      helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3]))
    ops = [op.attrs.get("op", op.name) for op in import_onnx(str(path), "m").walk()]
    assert "ScatterND" in ops and "emb.scatter_rows" not in ops
