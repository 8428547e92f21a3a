"""padding_idx from the frontends: the dynamo ONNX export's filtering loop, and `.pt` / `.pt2` archives.

Every sample bag model holds bags with the padding index, one bag of padding only and one empty bag;
its padding row is nonzero, so a frontend that dropped `padding_idx` would give other numbers.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from conftest import compile_model

from ember.frontends import import_model
from ember.frontends.aten import AtenLowering, Unsupported
from ember.frontends.onnx import import_onnx
from ember.ir.core import Op
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.sim.reference import simulate

MODELS = Path(__file__).resolve().parent.parent / "samples" / "models"
MODES = ("sum", "mean", "max")
PAD = 3  # samples/gen_models.py: PAD
LEVELS = ("O0", "O3", "core")
SAMPLES = [f"bag_pad_{m}.{kind}" for m in MODES for kind in ("dynamo.onnx", "traced.pt", "pt2")]


def _want(sample: str) -> dict[str, np.ndarray]:
    name = sample.split(".")[0]
    ref = "dynamo.out" if sample.endswith(".onnx") else "torch.out"
    return dict(np.load(MODELS / f"{name}.{ref}.npz"))


def _bags(module: Op) -> list[Op]:
    return [op for op in module.walk() if op.name == "emb.bag"]


@pytest.mark.parametrize("sample", SAMPLES)
def test_sample_imports_to_one_padded_bag(sample: str) -> None:
    module = import_model(str(MODELS / sample), sample)
    (bag,) = _bags(module)
    mode = sample.split(".")[0].removeprefix("bag_pad_")
    assert bag.attrs == {"mode": mode, "empty": "zero", "padding_idx": PAD}
    assert len(bag.operands) == 3
    assert not any(op.name == "emb.gather" for op in module.walk())


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("sample", SAMPLES)
def test_sample_simulates_to_reference(sample: str, level: str) -> None:
    feeds = dict(np.load(MODELS / f"{sample.split('.')[0]}.in.npz"))
    got, _ = simulate(compile_model(MODELS / sample, level), feeds, load_machine("default"))
    want = _want(sample)
    assert set(got) == set(want)
    for k, v in want.items():
        np.testing.assert_allclose(got[k], v, rtol=1e-5, atol=1e-6, err_msg=f"{sample} at {level}: {k}")


def test_samples_exercise_padding() -> None:
    """The inputs hold padding in mixed bags and in a padding-only bag; the padding row is not zero."""
    feeds = np.load(MODELS / "bag_pad_sum.in.npz")
    ind, off = feeds["indices"], feeds["offsets"]
    ends = np.append(off, len(ind))
    bags = [ind[ends[b]:ends[b + 1]] for b in range(len(off))]
    assert any(len(b) and np.all(b == PAD) for b in bags)
    assert any(np.any(b == PAD) and np.any(b != PAD) for b in bags)
    weights = onnx.load(str(MODELS / "bag_pad_sum.dynamo.onnx")).graph.initializer
    table = next(onnx.numpy_helper.to_array(t) for t in weights if len(t.dims) == 2)
    assert np.any(table[PAD] != 0)


# ---------------------------------------------------------------------------------------------
# The ONNX matcher refuses what only looks like a padded bag


def _tamper(edit: Callable[[onnx.GraphProto], None], tmp_path: Path, base: str = "bag_pad_sum") -> Path:
    model = onnx.load(str(MODELS / f"{base}.dynamo.onnx"))
    edit(model.graph)
    path = tmp_path / "tampered.onnx"
    onnx.save(model, str(path))
    return path


def _walk(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    out = []
    for node in graph.node:
        out.append(node)
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out.extend(_walk(a.g))
    return out


def _outer_loop(graph: onnx.GraphProto) -> onnx.NodeProto:
    return next(n for n in graph.node if n.op_type == "Loop")


def test_padding_test_with_another_comparison_is_refused(tmp_path: Path) -> None:
    def edit(g: onnx.GraphProto) -> None:
        next(n for n in _walk(g) if n.op_type == "Equal" and any(
            m.op_type == "Not" and m.input[0] == n.output[0] for m in _walk(g))).op_type = "Greater"

    loop = _outer_loop(onnx.load(str(MODELS / "bag_pad_sum.dynamo.onnx")).graph)
    with pytest.raises(EmberError, match=rf"node '{loop.name}' \(Loop\).*padding test"):
        import_onnx(str(_tamper(edit, tmp_path)), "m")


def test_filter_that_keeps_padding_is_refused(tmp_path: Path) -> None:
    def edit(g: onnx.GraphProto) -> None:
        node = next(n for n in _walk(g) if n.op_type == "Not")
        node.op_type, node.input[:] = "Identity", list(node.input)

    with pytest.raises(EmberError, match="padding test should come from Not"):
        import_onnx(str(_tamper(edit, tmp_path)), "m")


def test_filter_starting_elsewhere_is_refused(tmp_path: Path) -> None:
    def edit(g: onnx.GraphProto) -> None:
        inner = next(n for n in _walk(g) if n.op_type == "Loop" and n is not _outer_loop(g))
        less = next(n for n in _walk(g) if n.op_type == "Less" and n.output[0] == inner.input[1])
        less.input[0], less.input[1] = less.input[1], less.input[0]

    with pytest.raises(EmberError, match="padding filter should start at the bag start"):
        import_onnx(str(_tamper(edit, tmp_path)), "m")


def test_padding_index_outside_the_table_is_refused(tmp_path: Path) -> None:
    def edit(g: onnx.GraphProto) -> None:
        rows = next(t.dims[0] for t in g.initializer if len(t.dims) == 2)
        for t in g.initializer:
            if not t.dims and t.data_type == onnx.TensorProto.INT64 and onnx.numpy_helper.to_array(t) == PAD:
                t.CopyFrom(onnx.numpy_helper.from_array(np.array(rows + 1, dtype=np.int64), t.name))

    with pytest.raises(EmberError, match="not a row of the table"):
        import_onnx(str(_tamper(edit, tmp_path)), "m")


def test_rows_reduced_without_the_filter_are_refused(tmp_path: Path) -> None:
    def edit(g: onnx.GraphProto) -> None:
        inner = next(n for n in _walk(g) if n.op_type == "Loop" and n is not _outer_loop(g))
        kept = next(o for o in inner.output if any(
            m.op_type == "Size" and m.input[0] == o for m in _walk(g)))
        gather = next(n for n in _walk(g) if n.op_type == "Gather" and len(n.input) == 2 and n.input[1] == kept)
        gather.input[1] = next(o for o in inner.output if o != kept)

    with pytest.raises(EmberError, match=r"rows\[kept\]"):
        import_onnx(str(_tamper(edit, tmp_path)), "m")


# ---------------------------------------------------------------------------------------------
# aten: padding_idx as PyTorch reads it


@pytest.mark.parametrize(("op", "pad", "want"), [
    ("embedding_bag", None, None), ("embedding_bag", 0, 0), ("embedding_bag", 7, 7), ("embedding_bag", -1, 9),
    ("embedding_bag", -10, 0), ("_embedding_bag", -1, None), ("_embedding_bag", -5, None),
    ("_embedding_bag", 4, 4), ("_embedding_bag", 10, None), ("_embedding_bag_forward_only", 2, 2),
])
def test_aten_padding_idx(op: str, pad: int | None, want: int | None) -> None:
    """embedding_bag wraps a negative padding_idx; the private ops read anything outside the table as none."""
    assert AtenLowering._padding_row(pad, 10, op != "embedding_bag") == want


@pytest.mark.parametrize("pad", [10, -11, True])
def test_aten_padding_idx_pytorch_refuses_is_refused(pad: int) -> None:
    with pytest.raises(Unsupported, match="padding_idx"):
        AtenLowering._padding_row(pad, 10, False)


def _rewrite(src: Path, dst: Path, suffix: str, old: str, new: str) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith(suffix):
                assert old.encode() in data
                data = data.replace(old.encode(), new.encode())
            zout.writestr(info, data)
    return dst


@pytest.mark.parametrize(("pad", "want"), [("-1", 39), ("0", 0), ("None", None)])
def test_torchscript_padding_idx_is_wrapped(tmp_path: Path, pad: str, want: int | None) -> None:
    """aten::embedding_bag in a .pt: a negative padding_idx counts from the end of the 40-row table."""
    path = _rewrite(MODELS / "bag_pad_sum.traced.pt", tmp_path / "pad.pt", "sparse.py",
                    f"False, None, False, {PAD})", f"False, None, False, {pad})")
    (bag,) = _bags(import_model(str(path), "w"))
    assert bag.attrs.get("padding_idx") == want


def test_torchscript_padding_idx_outside_the_table_is_refused(tmp_path: Path) -> None:
    path = _rewrite(MODELS / "bag_pad_sum.traced.pt", tmp_path / "pad.pt", "sparse.py",
                    f"False, None, False, {PAD})", "False, None, False, -41)")
    with pytest.raises(EmberError, match="padding_idx must be within"):
        import_model(str(path), "w")
