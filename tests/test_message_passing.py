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

    from ember.sim.engine import simulate
    from ember.sim.machine import load_machine

    model = Path(__file__).resolve().parent.parent / "samples" / "models" / "mp_sum.dynamo.onnx"
    feeds = dict(np.load(model.parent / "mp_sum.in.npz"))
    feeds["dst"] = np.zeros_like(feeds["dst"])  # every edge into node 0
    want = np.zeros_like(feeds["x"])
    want[0] = feeds["x"][feeds["src"]].sum(axis=0)
    for level in ("O0", "O3"):
        got, _ = simulate(compile_model(model, level), feeds, load_machine("default"))
        np.testing.assert_allclose(got["output"], want, rtol=1e-5, atol=1e-5)
