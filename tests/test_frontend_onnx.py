"""ONNX frontend: every sample imports, round-trips, and computes what onnxruntime computed.

The evaluator below is deliberately independent of Ember's simulator: emb ops follow the emb.py
docstring in numpy, and every host op runs alone in onnx's ReferenceEvaluator, so a wrong raising
(wrong operands, mode, empty-bag value) shows up as a numeric mismatch against the exporter's graph.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from ember.frontends.onnx import import_onnx, load_weights
from ember.ir.core import Op, verify
from ember.ir.diagnostics import EmberError
from ember.ir.parser import parse_module
from ember.ir.printer import DenseAttr, print_module
from ember.ir.types import ShapedType

MODELS = Path(__file__).resolve().parent.parent / "samples" / "models"
SAMPLES = sorted(MODELS.glob("*.onnx"), key=lambda p: p.name)


def _ids(paths: list[Path]) -> list[str]:
    return [p.name.removesuffix(".onnx") for p in paths]


# ---------------------------------------------------------------------------------------------
# A tiny reference evaluator for imported modules


def _bag(table: np.ndarray, indices: np.ndarray, offsets: np.ndarray, weights: np.ndarray | None,
         mode: str, empty: str, pad: int | None = None) -> np.ndarray:
    """emb.bag per its docstring: bag b is indices[offsets[b]:offsets[b+1]], without lookups of row `pad`."""
    rows = []
    for b in range(len(offsets) - 1):
        lo, hi = int(offsets[b]), int(offsets[b + 1])
        keep = np.arange(lo, hi)
        keep = keep[indices[lo:hi] != pad] if pad is not None else keep
        r = table[indices[keep]]
        if weights is not None:
            r = r * weights[keep, None]
        if len(keep) == 0:
            fill = -np.inf if (mode == "max" and empty == "identity") else 0.0
            rows.append(np.full(table.shape[1], fill, dtype=table.dtype))
        else:
            rows.append({"sum": np.sum, "mean": np.mean, "max": np.max}[mode](r, axis=0).astype(table.dtype))
    return np.stack(rows) if rows else np.zeros((0, table.shape[1]), table.dtype)


def _onnx_attr(v: Any) -> Any:
    if isinstance(v, DenseAttr):
        return numpy_helper.from_array(v.array())
    if isinstance(v, list) and v and isinstance(v[0], DenseAttr):
        return [numpy_helper.from_array(x.array()) for x in v]
    return v


def _host(op: Op, args: list[np.ndarray], opset: int) -> list[np.ndarray]:
    """Run one host.onnx op alone, rebuilding its ONNX node (absent inputs as "")."""
    absent = set(op.attrs.get("absent", []))
    names, feeds, it = [], {}, iter(enumerate(args))
    for k in range(len(args) + len(absent)):
        if k in absent:
            names.append("")
        else:
            j, a = next(it)
            names.append(f"in{j}")
            feeds[f"in{j}"] = a
    outs = [f"out{k}" for k in range(len(op.results))]
    attrs = {k: _onnx_attr(v) for k, v in op.attrs.items() if k not in ("op", "absent", "absent_results")}
    node = helper.make_node(op.attrs["op"], names, outs, **attrs)
    return list(ReferenceEvaluator(node, opsets={"": opset}).run(None, feeds))


def _check_type(op: Op, i: int, value: np.ndarray) -> None:
    """The IR's static type must describe the value actually computed."""
    t = op.results[i].type
    assert isinstance(t, ShapedType)
    if t.elem.name != "bf16":
        assert value.dtype == t.elem.numpy(), (op.name, op.attrs, t, value.dtype)
    if t.shape is not None:
        assert len(t.shape) == value.ndim, (op.name, op.attrs.get("op"), t, value.shape)
        assert all(d is None or d == s for d, s in zip(t.shape, value.shape, strict=True)), (
            op.name, op.attrs.get("op"), t, value.shape)


def run_module(module: Op, feeds: dict[str, np.ndarray],
               weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    func = module.body.ops[0]
    opset = module.attrs["opset"]
    env: dict[int, np.ndarray] = {}
    for name, arg in zip(module.attrs["inputs"], func.body.args, strict=True):
        env[id(arg)] = feeds[name]
    for op in func.body.ops:
        args = [env[id(v)] for v in op.operands]
        if op.name == "return":
            return dict(zip(module.attrs["outputs"], args, strict=True))
        if op.name == "param":
            out = [weights[op.attrs["name"]]]
        elif op.name == "emb.gather":
            out = [args[0][args[1]]]
        elif op.name == "emb.bag":
            w = args[3] if len(args) == 4 else None
            out = [_bag(args[0], args[1], args[2], w, op.attrs["mode"], op.attrs["empty"], op.attrs.get("padding_idx"))]
        elif op.name == "emb.scatter_rows":  # numpy's unbuffered ufunc.at applies repeated rows in turn
            ufunc = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[op.attrs["reduction"]]
            y = args[0].copy()
            ufunc.at(y, args[1], args[2])
            out = [y]
        else:
            assert op.name == "host.onnx", op.name
            out = _host(op, args, opset)
        for i, (r, v) in enumerate(zip(op.results, out, strict=True)):
            _check_type(op, i, v)
            env[id(r)] = v
    raise AssertionError("no return")


def _counts(module: Op) -> Counter[str]:
    return Counter(op.name for op in module.walk())


# ---------------------------------------------------------------------------------------------
# Samples


@pytest.mark.parametrize("path", SAMPLES, ids=_ids(SAMPLES))
def test_sample_imports_and_round_trips(path: Path) -> None:
    module = import_onnx(str(path), path.name)
    verify(module)
    text = print_module(module)
    again = parse_module(text, path.name)
    verify(again)
    assert print_module(again) == text
    assert module.attrs["weights"] == path.name
    model = onnx.load(str(path))
    assert module.attrs["opset"] == next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    assert module.attrs["outputs"] == [o.name for o in model.graph.output]
    inits = {t.name for t in model.graph.initializer}
    assert module.attrs["inputs"] == [i.name for i in model.graph.input if i.name not in inits]


@pytest.mark.parametrize("path", SAMPLES, ids=_ids(SAMPLES))
def test_sample_raises_embedding_ops(path: Path) -> None:
    counts = _counts(import_onnx(str(path), path.name))
    name = path.name.split(".")[0]
    if name == "dlrm":  # the TorchScript export's interaction z[:, li, lj] is a Gather of a computed tensor
        assert counts["emb.bag"] == 3 and counts["emb.gather"] == (1 if ".ts." in path.name else 0)
    elif name.startswith("bag_pad_"):  # padding_idx: the dynamo exporter's nested filtering loop
        assert counts["emb.bag"] == 1 and counts["emb.gather"] == 0 and counts["host.onnx"] == 2  # offsets, Cast
    elif name.startswith("bag_"):
        assert counts["emb.bag"] == 1 and counts["emb.gather"] == 0
    elif name in ("mp_sum", "spmm"):  # one row gather, one row scatter-add
        assert counts["emb.gather"] == 1 and counts["emb.scatter_rows"] == 1 and counts["emb.bag"] == 0
    elif name == "gcn":  # the SpMM's gather and scatter-add; the dense transform and Relu stay host ops
        assert counts["emb.gather"] == 1 and counts["emb.scatter_rows"] == 1 and counts["emb.bag"] == 0
        assert counts["host.onnx"] == 4  # Unsqueeze and Mul of the edge values, MatMul, Relu
    elif name == "mp_mean":  # messages and counts are both scattered
        assert counts["emb.gather"] == 1 and counts["emb.scatter_rows"] == 2
    elif name == "kg_transe":  # head, relation and tail rows
        assert counts["emb.gather"] == 3 and counts["emb.bag"] == 0
    elif name == "spattn":  # key and value blocks
        assert counts["emb.gather"] == 2 and counts["emb.bag"] == 0
    else:
        assert name == "embedding"
        assert counts["emb.gather"] == 1 and counts["emb.bag"] == 0
    leftovers = ("Loop", "If", "SequenceEmpty", "ConcatFromSequence")
    assert not any(op.name == "host.onnx" and op.attrs["op"] in leftovers
                   for op in import_onnx(str(path), path.name).walk())


@pytest.mark.parametrize("path", SAMPLES, ids=_ids(SAMPLES))
def test_sample_computes_onnxruntime_outputs(path: Path) -> None:
    name, exporter = path.name.split(".")[:2]
    feeds = dict(np.load(MODELS / f"{name}.in.npz"))
    want = dict(np.load(MODELS / f"{name}.{exporter}.out.npz"))
    module = import_onnx(str(path), path.name)
    got = run_module(parse_module(print_module(module)), feeds, load_weights(str(path)))
    assert set(got) == set(want)
    for k, v in want.items():
        np.testing.assert_allclose(got[k], v, rtol=1e-5, atol=1e-6, err_msg=f"{path.name}: output {k}")


@pytest.mark.parametrize("path", SAMPLES, ids=_ids(SAMPLES))
def test_params_match_weights(path: Path) -> None:
    weights = load_weights(str(path))
    module = import_onnx(str(path), path.name)
    names = [op.attrs["name"] for op in module.walk() if op.name == "param"]
    assert len(names) == len(set(names)), "each weight is emitted once"
    for op in module.walk():
        if op.name == "param":
            w = weights[op.attrs["name"]]
            assert op.result.type.shape == w.shape and op.result.type.elem.numpy() == w.dtype


def test_bag_attributes_follow_the_exporter() -> None:
    def bag(name: str) -> Op:
        return next(op for op in import_onnx(str(MODELS / name), name).walk() if op.name == "emb.bag")

    assert bag("bag_max.ts.onnx").attrs == {"mode": "max", "empty": "identity"}
    assert bag("bag_max.dynamo.onnx").attrs == {"mode": "max", "empty": "zero"}
    assert bag("bag_mean.dynamo.onnx").attrs["mode"] == "mean"
    for exporter in ("ts", "dynamo"):
        weighted = bag(f"bag_weighted.{exporter}.onnx")
        assert len(weighted.operands) == 4 and weighted.operands[3].name == "weights"
        assert len(bag(f"bag_sum.{exporter}.onnx").operands) == 3
    # include_last_offset: the graph input is already the offsets emb.bag wants.
    assert bag("bag_last.ts.onnx").operands[2].name == "offsets"
    assert bag("bag_last.dynamo.onnx").operands[2].name == "offsets"


def test_load_weights_covers_constants() -> None:
    w = load_weights(str(MODELS / "dlrm.ts.onnx"))
    assert w["bags.0.weight"].shape == (60, 8)
    assert w["/Constant_6_output_0"].tolist() == [1, 2, 2, 3, 3, 3]


# ---------------------------------------------------------------------------------------------
# Hand-built models


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
           inits: list[TensorProto] | None = None, opset: int = 18, extra: list[tuple[str, int]] | None = None
           ) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits or [])
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra or []]
    model = helper.make_model(graph, opset_imports=ops)
    onnx.checker.check_model(model)
    return model


def _save(model: onnx.ModelProto, tmp_path: Path, name: str = "model.onnx") -> str:
    path = tmp_path / name
    onnx.save(model, str(path))
    return str(path)


def _f(name: str, shape: list[Any]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_host_ops_attributes_and_absent_inputs(tmp_path: Path) -> None:
    """Optional inputs left out mid-list, tensor attributes, odd names: all survive and still compute."""
    hi = numpy_helper.from_array(np.array(0.5, dtype=np.float32), "clip:hi")
    nodes = [
        helper.make_node("Clip", ["x/in", "", "clip:hi"], ["clipped"], name="clip"),
        helper.make_node("Shape", ["x/in"], ["shape"]),
        helper.make_node("ConstantOfShape", ["shape"], ["fill"],
                         value=numpy_helper.from_array(np.array([2.5], dtype=np.float32))),
        helper.make_node("Add", ["clipped", "fill"], ["y:out"]),
        helper.make_node("Neg", ["x/in"], ["unused"]),
    ]
    model = _model(nodes, [_f("x/in", [2, 3])], [_f("y:out", [2, 3])], [hi])
    path = _save(model, tmp_path)
    module = import_onnx(path, "model.onnx")
    text = print_module(module)
    assert print_module(parse_module(text)) == text
    assert module.attrs["inputs"] == ["x/in"] and module.attrs["outputs"] == ["y:out"]
    assert "%x_in: tensor<2x3xf32>" in text and "absent = [1]" in text
    assert "dense<[2.5]> : tensor<1xf32>" in text
    assert "Neg" not in text, "dead host ops are dropped"
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    got = run_module(parse_module(text), {"x/in": x}, load_weights(path))
    want = ReferenceEvaluator(model).run(None, {"x/in": x})[0]
    np.testing.assert_allclose(got["y:out"], want, rtol=1e-6)


def test_gather_rules(tmp_path: Path) -> None:
    """Only axis-0 gathers of float weights are embeddings; integer tables and other axes stay host ops."""
    table = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "table")
    ids = numpy_helper.from_array(np.arange(12, dtype=np.int64).reshape(4, 3), "ids")
    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, [2])
    nodes = [helper.make_node("Gather", ["table", "idx"], ["a"]),
             helper.make_node("Gather", ["ids", "idx"], ["b"]),
             helper.make_node("Gather", ["table", "idx"], ["c"], axis=1)]
    outs = [_f("a", [2, 3]), helper.make_tensor_value_info("b", TensorProto.INT64, [2, 3]), _f("c", [4, 2])]
    module = import_onnx(_save(_model(nodes, [idx], outs, [table, ids]), tmp_path), "m")
    kinds = [op.name for op in module.walk() if op.name in ("emb.gather", "host.onnx")]
    assert kinds == ["emb.gather", "host.onnx", "host.onnx"]
    assert [op.attrs["name"] for op in module.walk() if op.name == "param"] == ["table", "ids"]


def test_gathernd_of_a_weight_by_an_index_unsqueezed_last_is_a_gather(tmp_path: Path) -> None:
    """torch.export's ONNX exporter writes `weight[idx]`, for an index of any shape, as GatherND(weight,
    Unsqueeze(idx, -1)): the rows of the weight, so an emb.gather, negative indices counted from the end as
    ONNX's GatherND does.  An integer weight stays a host op."""
    table = numpy_helper.from_array(np.arange(15, dtype=np.float32).reshape(5, 3), "table")
    flat = numpy_helper.from_array(np.arange(5, dtype=np.float32) * 10, "flat")
    ids = numpy_helper.from_array(np.arange(5, dtype=np.int64), "ids")
    last = numpy_helper.from_array(np.array([-1], np.int64), "last")
    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, [2, 4])
    nodes = [helper.make_node("Unsqueeze", ["idx", "last"], ["u"]),
             helper.make_node("GatherND", ["table", "u"], ["rows"]),
             helper.make_node("GatherND", ["flat", "u"], ["elems"]),
             helper.make_node("GatherND", ["ids", "u"], ["ints"])]
    outs = [_f("rows", [2, 4, 3]), _f("elems", [2, 4]),
            helper.make_tensor_value_info("ints", TensorProto.INT64, [2, 4])]
    model = _model(nodes, [idx], outs, [table, flat, ids, last])
    path = _save(model, tmp_path)
    module = import_onnx(path, "m")
    gathers = [op for op in module.walk() if op.name == "emb.gather"]
    assert [str(op.result.type) for op in gathers] == ["tensor<2x4x3xf32>", "tensor<2x4xf32>"]
    assert sum(1 for op in module.walk() if op.name == "host.onnx" and op.attrs["op"] == "GatherND") == 1
    x = {"idx": np.array([[0, 4, -1, 2], [-5, 1, 3, 3]], np.int64)}
    got = run_module(module, x, load_weights(path))
    want = ReferenceEvaluator(model).run(None, x)
    for name, w in zip(["rows", "elems", "ints"], want):
        np.testing.assert_array_equal(got[name], w)


def test_unknown_loop_is_an_error_naming_the_node(tmp_path: Path) -> None:
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Relu", ["x"], ["row"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), _f("row", [3])])
    inits = [numpy_helper.from_array(np.array(2, dtype=np.int64), "n"),
             numpy_helper.from_array(np.array(True), "t")]
    loop = helper.make_node("Loop", ["n", "t"], ["y"], name="weird_loop", body=body)
    path = _save(_model([loop], [_f("x", [3])], [_f("y", [2, 3])], inits), tmp_path)
    with pytest.raises(EmberError) as e:
        import_onnx(path, "model.onnx")
    msg = str(e.value)
    assert msg.startswith(f"{path}: error: node 'weird_loop' (Loop): unsupported pattern: ")
    assert "ReduceSum" in msg and msg.endswith("; docs/operators.md lists the patterns and operators Ember recognises")


def test_top_level_if_is_an_error(tmp_path: Path) -> None:
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["r"])], "b", [], [_f("r", [3])])
    node = helper.make_node("If", ["c"], ["y"], name="choose", then_branch=branch, else_branch=branch)
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    path = _save(_model([node], [c, _f("x", [3])], [_f("y", [3])]), tmp_path)
    with pytest.raises(EmberError, match=r"node 'choose' \(If\): unsupported pattern"):
        import_onnx(path, "m")


def test_custom_domain_is_an_error(tmp_path: Path) -> None:
    node = helper.make_node("Frobnicate", ["x"], ["y"], name="frob", domain="com.example")
    path = _save(_model([node], [_f("x", [3])], [_f("y", [3])], extra=[("com.example", 1)]), tmp_path)
    want = r"node 'frob' \(Frobnicate\): unsupported operator domain 'com\.example'"
    with pytest.raises(EmberError, match=want):
        import_onnx(path, "m")


def test_not_an_onnx_file(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_text("module {\n}\n")
    with pytest.raises(EmberError) as e:
        import_onnx(str(path), "m")
    assert str(e.value).startswith(f"{path}: error: not a valid ONNX model")
    with pytest.raises(EmberError, match="cannot read"):
        import_onnx(str(tmp_path / "missing.onnx"), "m")


def _tamper(name: str, edit: Any, tmp_path: Path) -> str:
    model = onnx.load(str(MODELS / name))
    edit(model.graph)
    return _save(model, tmp_path, name)


def _loop(graph: onnx.GraphProto) -> onnx.NodeProto:
    return next(n for n in graph.node if n.op_type == "Loop")


def _body(graph: onnx.GraphProto) -> onnx.GraphProto:
    return next(a.g for a in _loop(graph).attribute if a.name == "body")


def test_ts_bag_reducing_the_wrong_axis_is_refused(tmp_path: Path) -> None:
    def edit(g: onnx.GraphProto) -> None:
        red = next(n for n in _body(g).node if n.op_type == "ReduceMax")
        next(a for a in red.attribute if a.name == "axes").ints[:] = [1]

    with pytest.raises(EmberError, match=r"node '/bag/Loop' \(Loop\): unsupported pattern: .*axis 0"):
        import_onnx(_tamper("bag_max.ts.onnx", edit, tmp_path), "m")


def test_ts_bag_with_other_ends_is_refused(tmp_path: Path) -> None:
    def edit(g: onnx.GraphProto) -> None:  # B = Slice(A, 1, ...) becomes Slice(A, 0, ...): not offsets[1:]
        sl = next(n for n in g.node if n.op_type == "Slice")
        sl.input[1] = sl.input[3]

    with pytest.raises(EmberError, match="Slice\\(offsets, 1, <large>\\)"):
        import_onnx(_tamper("bag_sum.ts.onnx", edit, tmp_path), "m")


def test_ts_bag_with_dynamic_shapes_imports_and_computes(tmp_path: Path) -> None:
    """With the numbers of lookups and bags left symbolic, the trip count Gather(Shape(Slice(offsets +
    [n], 1, <large>)), 0) is still proven len(offsets) - 1; the bag computes what the reference evaluator does."""
    def edit(g: onnx.GraphProto) -> None:
        for value in g.input:
            value.type.tensor_type.shape.dim[0].dim_param = f"{value.name}_count"
        del g.value_info[:]

    path = _tamper("bag_sum.ts.onnx", edit, tmp_path)
    module = import_onnx(path, "m")
    assert _counts(module)["emb.bag"] == 1
    feeds = dict(np.load(MODELS / "bag_sum.in.npz"))
    got = run_module(module, feeds, load_weights(path))
    np.testing.assert_allclose(got["output"], ReferenceEvaluator(path).run(None, feeds)[0], rtol=1e-5, atol=1e-6)


def _weighted_mean(g: onnx.GraphProto) -> None:
    red = next(n for n in _body(g).node if n.op_type == "ReduceSum")
    axes = next(n for n in _body(g).node if n.output[0] == red.input[1])
    red.op_type = "ReduceMean"  # opset 17: ReduceMean takes its axes as an attribute
    del red.input[1]
    red.attribute.remove(next(a for a in red.attribute if a.name == "noop_with_empty_axes"))
    red.attribute.append(helper.make_attribute("axes", list(numpy_helper.to_array(axes.attribute[0].t))))


def _end_from_max(g: onnx.GraphProto) -> None:
    end = next(n for n in _body(g).node if n.op_type == "Gather" and n.input[0] == "/bag/Slice_output_0")
    end.op_type = "Max"
    del end.attribute[:]


@pytest.mark.parametrize(("edit", "message"), [
    (_weighted_mean, "per-sample weights need mode sum"),
    (_end_from_max, "the bag end should come from Gather, found Max for '/bag/Gather_3_output_0'"),
], ids=["weighted-mean", "end-from-max"])
def test_ts_bag_that_is_not_one_is_refused(edit: Any, message: str, tmp_path: Path) -> None:
    """TorchScript bag loops changed in one place each: the message names that place."""
    with pytest.raises(EmberError) as e:
        import_onnx(_tamper("bag_weighted.ts.onnx", edit, tmp_path), "m")
    assert str(e.value).endswith(f"node '/bag/Loop' (Loop): unsupported pattern: {message}; docs/operators.md "
                                "lists the patterns and operators Ember recognises")


def test_dynamo_bag_with_nonzero_empty_rows_is_refused(tmp_path: Path) -> None:
    def edit(g: onnx.GraphProto) -> None:
        pick = next(n for n in _body(g).node if n.op_type == "If")
        then = next(a.g for a in pick.attribute if a.name == "then_branch")
        z = then.initializer[0]
        then.initializer[0].CopyFrom(numpy_helper.from_array(np.ones((1, 8), np.float32), z.name))

    with pytest.raises(EmberError, match="unsupported pattern: the empty-bag branch should give zeros"):
        import_onnx(_tamper("bag_sum.dynamo.onnx", edit, tmp_path), "m")


def test_dynamo_bag_with_wrong_bag_count_is_refused(tmp_path: Path) -> None:
    def edit(g: onnx.GraphProto) -> None:  # stop one bag early
        t = next(t for t in g.initializer if t.name == "num_bag_6")
        t.CopyFrom(numpy_helper.from_array(np.array(5, dtype=np.int64), t.name))

    with pytest.raises(EmberError, match=r"once per bag, 6 times \(one fewer than the 7 entries of the offsets "
                                         r"'offsets_7'\), but its condition stops the counter at 5"):
        import_onnx(_tamper("bag_sum.dynamo.onnx", edit, tmp_path), "m")


def test_dynamo_bag_with_used_rows_keeps_them(tmp_path: Path) -> None:
    """Raising removes the loop, but gathered rows still feeding an output stay (as emb.gather)."""
    def edit(g: onnx.GraphProto) -> None:
        g.output.append(helper.make_tensor_value_info("new_weight", TensorProto.FLOAT, [13, 8]))

    path = _tamper("bag_sum.dynamo.onnx", edit, tmp_path)
    module = import_onnx(path, "m")
    counts = _counts(module)
    assert counts["emb.bag"] == 1 and counts["emb.gather"] == 1
    feeds = dict(np.load(MODELS / "bag_sum.in.npz"))
    got = run_module(module, feeds, load_weights(path))
    want = ReferenceEvaluator(onnx.load(path)).run(None, feeds)
    np.testing.assert_allclose(got["output"], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["new_weight"], want[1], rtol=1e-6)


def test_gather_of_a_1d_weight_is_an_embedding(tmp_path: Path) -> None:
    """Gather (axis left at its default 0) of a 1-D float weight is a lookup of scalars: nn.Embedding's
    shape with rows of one element.  It becomes emb.gather, negative indices wrapped as ONNX does."""
    table = np.random.default_rng(4).standard_normal(10).astype(np.float32)
    graph = helper.make_graph([helper.make_node("Gather", ["table", "idx"], ["y"])], "g",
                              [helper.make_tensor_value_info("idx", TensorProto.INT64, [5])], [_f("y", [5])],
                              [numpy_helper.from_array(table, "table")])
    path = _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), tmp_path)
    module = import_onnx(path, "m")
    assert _counts(module)["emb.gather"] == 1 and _counts(module)["host.onnx"] == 0
    idx = np.array([3, 0, -1, 3, 9], dtype=np.int64)
    np.testing.assert_array_equal(run_module(module, {"idx": idx}, load_weights(path))["y"], table[idx])
