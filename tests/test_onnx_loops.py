"""The dynamo exporter's EmbeddingBag loops in every form it writes (samples/gen_loop_forms.py): both
orders of the carried values (the exporter picks one by hash seed), static and dynamic shapes, opsets
18, 20 and 21, and the bag variants.  Each must import to one `emb.bag` and compute onnxruntime's
output through the compiler and simulator; loops that only look like bags are refused with a
message about the model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import compile_model
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from ember.frontends.onnx import import_onnx
from ember.ir.core import Op
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.sim.reference import simulate

FORMS_DIR = Path(__file__).resolve().parent.parent / "samples" / "loop_forms"
FORMS = sorted(p.name for p in FORMS_DIR.glob("*.onnx"))
VARIANTS = ("sum", "mean", "max", "weighted", "last", "pad", "2d", "maxnorm")
PAD = 3  # samples/gen_loop_forms.py: PAD


def _group(form: str) -> str:
    variant, _, shapes, _ = form.removesuffix(".onnx").split(".")
    return f"{variant}.{shapes}"


def _data(form: str) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """(inputs, onnxruntime's output, PyTorch's output) for a form."""
    data = np.load(FORMS_DIR / f"{_group(form)}.npz")
    feeds = {k.removeprefix("in."): data[k] for k in data.files if k.startswith("in.")}
    return feeds, data["ort"], data["torch"]


def _bag(module: Op) -> Op:
    bags = [op for op in module.walk() if op.name == "emb.bag"]
    assert len(bags) == 1
    return bags[0]


def test_every_form_is_there() -> None:
    """8 variants x 3 opsets x static/dynamic x both orders, and each file really has its order."""
    assert len(FORMS) == len(VARIANTS) * 3 * 2 * 2
    for form in FORMS:
        model = onnx.load(str(FORMS_DIR / form))
        loop = next(n for n in model.graph.node if n.op_type == "Loop")
        first = next((n for n in model.graph.node if loop.input[2] in n.output), None)
        seq_first = first is not None and first.op_type == "SequenceEmpty"
        assert seq_first == form.endswith(".seq-first.onnx"), form
        assert not loop.input[0], "the exporter's bag loop has no trip count"
        opset = next(o.version for o in model.opset_import if o.domain == "")
        assert f".o{opset}." in form
        dims = [d for i in model.graph.input for d in i.type.tensor_type.shape.dim]
        assert any(d.dim_param for d in dims) == (".dynamic." in form), form


@pytest.mark.parametrize("form", FORMS)
def test_form_imports_to_one_bag(form: str) -> None:
    module = import_onnx(str(FORMS_DIR / form), form)
    bag = _bag(module)
    variant = form.split(".")[0]
    mode = {"mean": "mean", "max": "max", "2d": "mean"}.get(variant, "sum")
    assert bag.attrs["mode"] == mode and bag.attrs["empty"] == "zero"
    assert bag.attrs.get("padding_idx") == (PAD if variant == "pad" else None)
    assert len(bag.operands) == (4 if variant == "weighted" else 3)
    table = bag.operands[0].owner
    # max_norm: the bag reads the table as renormalised by host ops; every other bag reads the weight.
    assert (isinstance(table, Op) and table.name == "param") == (variant != "maxnorm")
    leftovers = {"Loop", "If", "SequenceEmpty", "SequenceInsert", "ConcatFromSequence"}
    assert not any(op.name == "host.onnx" and op.attrs["op"] in leftovers for op in module.walk())
    assert not module.warnings  # type: ignore[attr-defined]


@pytest.mark.parametrize("level", [pytest.param("O0", marks=pytest.mark.slow), "O3"])  # O0: make bench
@pytest.mark.parametrize("form", FORMS)
def test_form_simulates_to_onnxruntime(form: str, level: str) -> None:
    feeds, want, _ = _data(form)
    got, _ = simulate(compile_model(FORMS_DIR / form, level), feeds, load_machine("default"))
    np.testing.assert_allclose(got["output"], want, rtol=1e-5, atol=1e-6, err_msg=f"{form} at {level}")


@pytest.mark.parametrize("shapes", ["static", "dynamic"])
def test_max_norm_follows_pytorch(shapes: str) -> None:
    """Rows looked up are renormalised to max_norm first; the inputs repeat a row, which is renormalised once."""
    form = f"maxnorm.o20.{shapes}.seq-first.onnx"
    feeds, want_ort, want_torch = _data(form)
    np.testing.assert_allclose(want_ort, want_torch, rtol=1e-5, atol=1e-6)
    got, _ = simulate(compile_model(FORMS_DIR / form, "O3"), feeds, load_machine("default"))
    np.testing.assert_allclose(got["output"], want_torch, rtol=1e-5, atol=1e-6)
    table = next(t for t in onnx.load(str(FORMS_DIR / form)).graph.initializer if len(t.dims) == 2)
    norms = np.linalg.norm(numpy_helper.to_array(table)[feeds["indices"]], axis=1)
    assert np.any(norms > 1.0), "some looked-up rows must be long enough to be renormalised"


# ---------------------------------------------------------------------------------------------
# Loops that only look like bags


def _tamper(form: str, edit: Callable[[onnx.GraphProto], None], tmp_path: Path) -> str:
    model = onnx.load(str(FORMS_DIR / form))
    edit(model.graph)
    path = tmp_path / form
    onnx.save(model, str(path))
    return str(path)


def _loop(graph: onnx.GraphProto) -> onnx.NodeProto:
    return next(n for n in graph.node if n.op_type == "Loop")


def _body(graph: onnx.GraphProto) -> onnx.GraphProto:
    return next(a.g for a in _loop(graph).attribute if a.name == "body")


def _counter_update(graph: onnx.GraphProto) -> onnx.NodeProto:
    """The body's Add that steps the bag counter (whichever carried value it is)."""
    body = _body(graph)
    names = [i.name for i in body.input[2:]]
    return next(n for n in body.node if n.op_type == "Add" and n.input[0] in names and n.output[0] in
                [o.name for o in body.output])


def _refused(path: str, pattern: str) -> str:
    with pytest.raises(EmberError) as e:
        import_onnx(path, "m")
    msg = str(e.value)
    assert re.search(pattern, msg), msg
    assert "unsupported pattern" in msg and "docs/operators.md" in msg
    return msg


ORDERS = ["seq-first", "counter-first"]


@pytest.mark.parametrize("order", ORDERS)
def test_counter_stepping_by_two_is_refused(order: str, tmp_path: Path) -> None:
    def edit(g: onnx.GraphProto) -> None:
        add = _counter_update(g)
        cast = next(n for n in _body(g).node if n.output[0] == add.input[1])
        cast.input[0] = "int64_2"  # CastLike(2, k): the exporter's own constant 2

    path = _tamper(f"sum.o20.static.{order}.onnx", edit, tmp_path)
    _refused(path, r"node '[^']+' \(Loop\): unsupported pattern: the bag counter '\w+' should step by 1; "
                   r"it is increased by 2 each iteration")


@pytest.mark.parametrize("order", ORDERS)
def test_counter_starting_at_one_is_refused(order: str, tmp_path: Path) -> None:
    def edit(g: onnx.GraphProto) -> None:
        loop = _loop(g)
        k = 2 if order == "counter-first" else 3
        g.initializer.append(numpy_helper.from_array(np.array(1, dtype=np.int64), "one_start"))
        loop.input[k] = "one_start"

    path = _tamper(f"mean.o18.dynamic.{order}.onnx", edit, tmp_path)
    _refused(path, r"the bag counter '\w+' should start at 0; it starts as the constant 1")


@pytest.mark.parametrize("order", ORDERS)
def test_loop_stopping_a_bag_early_is_refused(order: str, tmp_path: Path) -> None:
    def edit(g: onnx.GraphProto) -> None:  # static: the bag count is the constant 3 where there are 4 bags
        less = next(n for n in _body(g).node if n.op_type == "Less")
        t = next(t for t in g.initializer if t.name == less.input[1])
        t.CopyFrom(numpy_helper.from_array(np.array(3, dtype=np.int64), t.name))

    path = _tamper(f"max.o21.static.{order}.onnx", edit, tmp_path)
    _refused(path, r"the loop should run once per bag, 4 times \(one fewer than the 5 entries of the offsets "
                   r"'\w+'\), but its condition stops the counter at 3")


@pytest.mark.parametrize("order", ORDERS)
def test_loop_bounded_by_the_lookups_is_refused(order: str, tmp_path: Path) -> None:
    def edit(g: onnx.GraphProto) -> None:  # dynamic: count bags by len(indices) instead of len(offsets)
        less = next(n for n in _body(g).node if n.op_type == "Less")
        g.node.insert(0, helper.make_node("Size", ["indices"], ["n_lookups"]))
        less.input[1] = "n_lookups"

    path = _tamper(f"weighted.o20.dynamic.{order}.onnx", edit, tmp_path)
    _refused(path, r"once per bag, len\(offsets\) times \(one fewer than the len\(offsets\) \+ 1 entries of the "
                   r"offsets '\w+'\), but its condition stops the counter at len\(indices\)")


@pytest.mark.parametrize("order", ORDERS)
def test_loop_without_a_sequence_names_what_it_carries(order: str, tmp_path: Path) -> None:
    def edit(g: onnx.GraphProto) -> None:  # the rows are no longer appended: the sequence is passed through
        body = _body(g)
        ins = next(n for n in body.node if n.op_type == "SequenceInsert")
        seq_out = ins.output[0]
        ins.output[0] = "dropped"
        body.node.append(helper.make_node("Identity", [ins.input[0]], [seq_out]))

    path = _tamper(f"sum.o18.static.{order}.onnx", edit, tmp_path)
    msg = _refused(path, r"the dynamo exporter's EmbeddingBag loop should carry two values, a counter "
                         r"\(0, 1, 2, \.\.\.\) and a sequence of bag rows \(SequenceEmpty, then SequenceInsert "
                         r"of one row per bag\); found 2 carried values: ")
    # Both carried values are described in the model's terms, in the loop's own order.
    seq = r"'\w+' starting as '\w+' \(SequenceEmpty\), updated by Identity each iteration"
    counter = r"'\w+' starting as the constant 0, increased by 1 each iteration"
    first, second = (seq, counter) if order == "seq-first" else (counter, seq)
    assert re.search(f"1\\. {first}; 2\\. {second}", msg), msg


def _count_by_addition(g: onnx.GraphProto) -> None:
    """Size(offsets) becomes Size(offsets + [len(indices)]) + (-1)."""
    size = next(n for n in g.node if n.op_type == "Size")
    cat = next(n for n in g.node if n.op_type == "Concat")
    g.node.remove(size)
    at = list(g.node).index(cat) + 1
    g.node.insert(at, helper.make_node("Size", [cat.output[0]], ["entries"]))
    g.node.insert(at + 1, helper.make_node("Add", ["entries", "minus_one"], [size.output[0]]))
    g.initializer.append(numpy_helper.from_array(np.array(-1, dtype=np.int64), "minus_one"))


def _offsets_through_identity(g: onnx.GraphProto) -> None:
    """The offsets reach the Concat that appends len(indices) through an Identity."""
    cat = next(n for n in g.node if n.op_type == "Concat")
    cat.input[0] = "offsets_again"
    g.node.insert(list(g.node).index(cat), helper.make_node("Identity", ["offsets"], ["offsets_again"]))


@pytest.mark.parametrize("edit", [_count_by_addition, _offsets_through_identity], ids=["addition", "identity"])
def test_bag_count_written_another_way_is_followed(edit: Callable[[onnx.GraphProto], None], tmp_path: Path) -> None:
    """The number of bags and the offsets' length written another way are still len(offsets): the loop runs
    once per bag and computes what the reference evaluator does."""
    form = "sum.o20.dynamic.seq-first.onnx"
    path = _tamper(form, edit, tmp_path)
    assert len(_bag(import_onnx(path, form)).operands) == 3
    feeds, _, _ = _data(form)
    want = ReferenceEvaluator(path).run(None, feeds)[0]
    got, _ = simulate(compile_model(Path(path), "O0"), feeds, load_machine("default"))
    np.testing.assert_allclose(got["output"], want, rtol=1e-5, atol=1e-6)


def test_counter_that_never_steps_is_described_as_left_unchanged(tmp_path: Path) -> None:
    """A counter increased by 0 is no counter: the loop is refused, and the message says what that
    carried value does."""
    def edit(g: onnx.GraphProto) -> None:
        add = _counter_update(g)
        next(n for n in _body(g).node if n.output[0] == add.input[1]).input[0] = "zero"  # CastLike(0, k)
        g.initializer.append(numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"))

    path = _tamper("sum.o20.static.seq-first.onnx", edit, tmp_path)
    _refused(path, r"found 2 carried values: 1\. '\w+' starting as '\w+' \(SequenceEmpty\), updated by SequenceInsert "
                   r"each iteration; 2\. '\w+' starting as the constant 0, left unchanged each iteration;")


def test_padding_filter_stepping_by_two_is_refused(tmp_path: Path) -> None:
    """The inner loop of padding_idx is also matched by dataflow, in both of its orders."""
    for order in ORDERS:
        model = onnx.load(str(FORMS_DIR / f"pad.o20.static.{order}.onnx"))
        inner_loop = next(n for n in _body(model.graph).node if n.op_type == "Loop")
        inner = next(a.g for a in inner_loop.attribute if a.name == "body")
        add = next(n for n in inner.node if n.op_type == "Add" and n.output[0] in [o.name for o in inner.output])
        next(n for n in inner.node if n.output[0] == add.input[1]).input[0] = "two"  # CastLike(2, j)
        model.graph.initializer.append(numpy_helper.from_array(np.array(2, dtype=np.int64), "two"))
        path = tmp_path / f"pad.{order}.onnx"
        onnx.save(model, str(path))
        _refused(str(path), r"the padding filter's position '\w+' should step by 1; it is increased by 2")


def test_max_norm_scatter_of_unique_rows_does_not_warn(tmp_path: Path) -> None:
    """The renormalised rows go back to the table at Unique(indices): they cannot collide.  The same
    scatter at indices that may repeat is warned about."""
    form = "maxnorm.o20.static.counter-first.onnx"
    assert not import_onnx(str(FORMS_DIR / form), form).warnings  # type: ignore[attr-defined]

    def edit(g: onnx.GraphProto) -> None:
        unique = next(n for n in g.node if n.op_type == "Unique")
        g.node.insert(list(g.node).index(unique) + 1, helper.make_node("Identity", [unique.output[0]], ["again"]))
        unsq = next(n for n in g.node if n.op_type == "Unsqueeze" and n.input[0] == unique.output[0])
        unsq.input[0] = "again"

    warned = import_onnx(_tamper(form, edit, tmp_path), form).warnings  # type: ignore[attr-defined]
    assert len(warned) == 1 and "(ScatterND): reduction 'none' with indices that may repeat" in warned[0]


def _pad_filter(graph: onnx.GraphProto) -> tuple[onnx.NodeProto, onnx.GraphProto]:
    """The padding filter (the bag body's inner Loop) and its body."""
    inner = next(n for n in _body(graph).node if n.op_type == "Loop")
    return inner, next(a.g for a in inner.attribute if a.name == "body")


def _kept_then(graph: onnx.GraphProto) -> onnx.GraphProto:
    """The branch of the padding filter's If that appends a kept position to the list."""
    body = _pad_filter(graph)[1]
    outs = [o.name for o in body.output]
    keep = next(n for n in body.node if n.op_type == "If" and n.output[0] in outs)
    return next(a.g for a in keep.attribute if a.name == "then_branch")


def test_padding_filter_appending_with_unsqueeze_follows_onnx(tmp_path: Path) -> None:
    """A kept position appended as Unsqueeze(j, axes=[0]) is the same one-entry list as the exporter's
    Reshape(j, [-1]); the axes come from a Constant node written with its `value_ints` spelling."""
    form = "pad.o20.static.seq-first.onnx"

    def edit(g: onnx.GraphProto) -> None:
        then = _kept_then(g)
        reshape = next(n for n in then.node if n.op_type == "Reshape")
        reshape.op_type, reshape.input[1] = "Unsqueeze", "axes_0"
        then.node.insert(0, helper.make_node("Constant", [], ["axes_0"], value_ints=[0]))

    path = _tamper(form, edit, tmp_path)
    assert _bag(import_onnx(path, form)).attrs["padding_idx"] == PAD
    feeds, _, _ = _data(form)
    want = ReferenceEvaluator(path).run(None, feeds)[0]
    got, _ = simulate(compile_model(Path(path), "O0"), feeds, load_machine("default"))
    np.testing.assert_allclose(got["output"], want, rtol=1e-5, atol=1e-6)


def _kept_starts_full(g: onnx.GraphProto) -> None:
    loop = _pad_filter(g)[0]
    kept = next(t for t in g.initializer if t.name in loop.input[2:] and t.data_type == TensorProto.INT64
                and list(t.dims) == [0])
    kept.CopyFrom(numpy_helper.from_array(np.array([5], dtype=np.int64), kept.name))


def _filter_runs_to_bag_count(g: onnx.GraphProto) -> None:
    body = _pad_filter(g)[1]
    step = next(n for n in body.node if n.op_type == "Less" and n.output[0] == body.output[0].name)
    step.input[1] = next(t.name for t in g.initializer if t.name.startswith("num_bag"))  # j < num_bag, not j < end


def _kept_list_from_max(g: onnx.GraphProto) -> None:
    cat = next(n for n in _kept_then(g).node if n.op_type == "Concat")
    cat.op_type = "Max"
    del cat.attribute[:]


@pytest.mark.parametrize(("edit", "message"), [
    (_kept_starts_full, "the kept positions should start as an empty integer list; they start as the constant 5"),
    (_filter_runs_to_bag_count, "the padding filter should run while j < end"),
    (_kept_list_from_max, r"a kept lookup's list should come from Concat, found Max for '\w+'"),
], ids=["kept-starts-full", "runs-to-bag-count", "list-from-max"])
def test_padding_filter_that_is_not_one_is_refused(edit: Callable[[onnx.GraphProto], None], message: str,
                                                  tmp_path: Path) -> None:
    """Inner loops that differ from padding_idx's filter in one place each: the message names that place."""
    path = _tamper("pad.o20.static.seq-first.onnx", edit, tmp_path)
    _refused(path, f"unsupported pattern: {message}; docs/operators.md")


def _nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of `graph` and its subgraphs, depth first, in order."""
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _nodes(a.g)


def _rows_gathered_on_axis_1(g: onnx.GraphProto) -> None:
    next(n for n in g.node if n.op_type == "Gather").attribute.append(helper.make_attribute("axis", 1))


def _table_of_ints(g: onnx.GraphProto) -> None:
    t = next(t for t in g.initializer if t.name == "bag.weight")
    t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.int64), t.name))


def _table_of_unknown_width(g: onnx.GraphProto) -> None:
    """The table is an input of shape [rows, width], both symbolic, instead of a weight."""
    g.initializer.remove(next(t for t in g.initializer if t.name == "bag.weight"))
    g.input.append(helper.make_tensor_value_info("bag.weight", TensorProto.FLOAT, ["rows", "width"]))
    del g.value_info[:]


def _rows_from_concat(g: onnx.GraphProto) -> None:
    pick = next(n for n in _body(g).node if n.op_type == "If")
    rows = next(a.g for a in pick.attribute if a.name == "else_branch").node[0]
    assert rows.op_type == "Slice"
    rows.op_type = "Concat"
    rows.attribute.append(helper.make_attribute("axis", 0))


def _last_mean_falls_back_to_neg(g: onnx.GraphProto) -> None:
    next(n for n in _nodes(_body(g)) if n.op_type == "Identity").op_type = "Neg"


def _last_mean_with_two_rows(g: onnx.GraphProto) -> None:
    """The last bag's If(count > 0, sum / count, sum) gives a second, unused row."""
    inner = next(n for n in _nodes(_body(g)) if n.op_type == "If" and any(
        m.op_type == "Div" for a in n.attribute for m in a.g.node))
    for a in inner.attribute:
        a.g.output.append(helper.make_tensor_value_info(a.g.output[0].name, TensorProto.FLOAT, None))
    inner.output.append(inner.output[0] + "_again")


@pytest.mark.parametrize(("form", "edit", "message"), [
    ("sum", _rows_gathered_on_axis_1, "the row Gather should use axis 0"),
    ("sum", _table_of_ints, "the gathered table 'bag.weight' does not hold floats"),
    ("sum", _table_of_unknown_width,
     r"the gathered table 'bag.weight' should be a 2-D table of known width, has shape \['\?', '\?'\]"),
    ("sum", _rows_from_concat, r"the bag's rows should come from Slice or If, found Concat for 'weight_rows'"),
    ("mean", _last_mean_falls_back_to_neg, r"the last bag's fallback should come from Identity, found Neg for '\w+'"),
    ("mean", _last_mean_with_two_rows, "the last bag's mean should produce one row"),
], ids=["gather-axis-1", "int-table", "unknown-width", "rows-from-concat", "fallback-neg", "two-rows"])
def test_bag_loop_that_is_not_one_is_refused(form: str, edit: Callable[[onnx.GraphProto], None], message: str,
                                             tmp_path: Path) -> None:
    """Bag loops that differ from the exporter's in one place each: the message names that place."""
    path = _tamper(f"{form}.o20.static.seq-first.onnx", edit, tmp_path)
    _refused(path, f"unsupported pattern: {message}; docs/operators.md")
