"""TorchScript (.pt) and torch.export (.pt2) frontends, without torch.

Every committed archive imports, verifies, round-trips through the text form, and — compiled at
every optimization level, assembled and simulated — reproduces PyTorch's eager outputs.  Hostile
and damaged files fail with an EmberError and run nothing.  Hand-built `.pt2` graphs (plain JSON)
cover the aten operators the sample models do not use.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import compile_model

import ember.dialects  # noqa: F401
from ember.frontends import import_model, load_weights_any
from ember.frontends.pt2 import import_pt2, load_weights_pt2
from ember.frontends.torchscript import import_torchscript, load_weights_torchscript
from ember.ir.core import Op, verify
from ember.ir.diagnostics import EmberError
from ember.ir.parser import parse_module
from ember.ir.printer import print_module
from ember.machine import load_machine
from ember.passes import PRESETS
from ember.sim.reference import simulate

MODELS = Path(__file__).resolve().parent.parent / "samples" / "models"
BAGS = ["embedding", "bag_sum", "bag_mean", "bag_max", "bag_last", "bag_weighted", "dlrm"]
GRAPHS = ["mp_sum", "mp_mean", "spmm", "kg_transe", "spattn", "mp_sum_inplace", "mp_mean_inplace"]
NAMES = BAGS + GRAPHS
ARCHIVES = [f"{n}.traced.pt" for n in NAMES] + [f"{n}.pt2" for n in NAMES]


def _stem(archive: str) -> str:
    return archive.split(".")[0]


def _import(path: Path, ref: str | None = None) -> Op:
    return import_model(str(path), ref if ref is not None else path.name)


def run_compiled(path: Path, level: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Import, lower with a preset, fill params from the archive, go through the binary, simulate."""
    got, _ = simulate(compile_model(path, level), feeds, load_machine("default"))
    return got


# ---------------------------------------------------------------------------------------------
# The committed archives


@pytest.mark.parametrize("archive", ARCHIVES)
def test_archive_imports_verifies_and_round_trips(archive: str) -> None:
    module = _import(MODELS / archive)
    verify(module)
    text = print_module(module)
    again = parse_module(text, archive)
    verify(again)
    assert print_module(again) == text
    feeds = np.load(MODELS / f"{_stem(archive)}.in.npz")
    want = np.load(MODELS / f"{_stem(archive)}.torch.out.npz")
    assert module.attrs["weights"] == archive
    assert module.attrs["opset"] == 17
    assert module.attrs["inputs"] == list(feeds.files)
    assert module.attrs["outputs"] == list(want.files) == ["output"]


@pytest.mark.parametrize("level", sorted(PRESETS))
@pytest.mark.parametrize("archive", ARCHIVES)
def test_archive_simulates_to_pytorch_outputs(archive: str, level: str) -> None:
    feeds = dict(np.load(MODELS / f"{_stem(archive)}.in.npz"))
    want = np.load(MODELS / f"{_stem(archive)}.torch.out.npz")
    got = run_compiled(MODELS / archive, level, feeds)
    for k in want.files:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6, err_msg=f"{archive} at {level}: {k}")


@pytest.mark.parametrize("name", NAMES)
def test_both_archives_import_to_the_same_ir(name: str) -> None:
    traced = print_module(import_torchscript(str(MODELS / f"{name}.traced.pt"), "w"))
    exported = print_module(import_pt2(str(MODELS / f"{name}.pt2"), "w"))
    assert traced == exported


def _ops(module: Op) -> Counter[str]:
    return Counter(op.attrs["op"] if op.name == "host.onnx" else op.name for op in module.walk())


@pytest.mark.parametrize("suffix", [".traced.pt", ".pt2"])
def test_embedding_ops_are_raised_with_pytorch_semantics(suffix: str) -> None:
    def bag(name: str) -> Op:
        return next(op for op in _import(MODELS / f"{name}{suffix}").walk() if op.name == "emb.bag")

    assert _ops(_import(MODELS / f"embedding{suffix}"))["emb.gather"] == 1
    for name, mode in (("bag_sum", "sum"), ("bag_mean", "mean"), ("bag_max", "max"), ("bag_last", "sum")):
        assert bag(name).attrs == {"mode": mode, "empty": "zero"}  # PyTorch: an empty bag is 0, even for max
    assert len(bag("bag_weighted").operands) == 4
    last = _ops(_import(MODELS / f"bag_last{suffix}"))
    assert last["Concat"] == 0 and last["Shape"] == 0  # offsets already end with len(indices)
    summed = _ops(_import(MODELS / f"bag_sum{suffix}"))
    assert summed["Concat"] == 1 and summed["Shape"] == 1
    dlrm = _import(MODELS / f"dlrm{suffix}")
    ops = _ops(dlrm)
    assert ops["emb.bag"] == 3 and ops["Gemm"] == 4 and ops["MatMul"] == 1 and ops["GatherND"] == 1
    assert all(op.attrs.get("transB") == 1 for op in dlrm.walk() if op.attrs.get("op") == "Gemm")


@pytest.mark.parametrize("suffix", [".traced.pt", ".pt2"])
def test_graph_ops_are_raised(suffix: str) -> None:
    """Row gathers and row scatters become emb ops (they stream); the index plumbing around them goes."""
    want = {
        "mp_sum": {"emb.gather": 1, "emb.scatter_rows": 1},
        "mp_sum_inplace": {"emb.gather": 1, "emb.scatter_rows": 1},
        "mp_mean": {"emb.gather": 1, "emb.scatter_rows": 2, "Max": 1, "Div": 1},  # counts are 1-wide rows
        "mp_mean_inplace": {"emb.gather": 1, "emb.scatter_rows": 1, "ScatterND": 1, "Max": 1},  # 1-D counts
        "spmm": {"emb.gather": 1, "emb.scatter_rows": 1, "Mul": 1},
        "kg_transe": {"emb.gather": 3, "ReduceSum": 1},
        "spattn": {"emb.gather": 2, "Softmax": 1, "MatMul": 2},
    }
    for name, counts in want.items():
        ops = _ops(_import(MODELS / f"{name}{suffix}"))
        assert {k: ops[k] for k in counts} == counts, name
        # the index of a row scatter is used as is: no Unsqueeze/Expand of it survives, no host scatter
        assert ops["ScatterElements"] == 0 and ops["Gather"] == 0 and ops["Expand"] <= 3, name
    scatter = next(op for op in _import(MODELS / f"mp_sum{suffix}").walk() if op.name == "emb.scatter_rows")
    assert scatter.attrs == {"reduction": "add"} and scatter.operands[1].name == "dst"
    # values are named after the operator computing them, so ember-import's IR reads like the model
    assert [scatter.operands[2].name, scatter.result.name] == ["index_select", "scatter"]


@pytest.mark.parametrize("archive", ARCHIVES)
def test_params_match_loaded_weights(archive: str) -> None:
    module = _import(MODELS / archive)
    weights = load_weights_any(str(MODELS / archive))
    names = [op.attrs["name"] for op in module.walk() if op.name == "param"]
    assert len(names) == len(set(names))
    for op in module.walk():
        if op.name == "param":
            w = weights[op.attrs["name"]]
            assert op.result.type.shape == w.shape and op.result.type.elem.numpy() == w.dtype


def test_weights_are_named_like_the_state_dict() -> None:
    for load, suffix in ((load_weights_torchscript, ".traced.pt"), (load_weights_pt2, ".pt2")):
        w = load(str(MODELS / f"dlrm{suffix}"))
        assert {"bot.0.weight", "bags.2.weight", "top.2.bias", "li", "lj"} <= set(w)
        np.testing.assert_array_equal(w["li"], [1, 2, 2, 3, 3, 3])  # li and lj share one storage
        np.testing.assert_array_equal(w["lj"], [0, 0, 1, 0, 1, 2])
    a, b = load_weights_torchscript(str(MODELS / "dlrm.traced.pt")), load_weights_pt2(str(MODELS / "dlrm.pt2"))
    for k in ("bot.0.weight", "bags.0.weight", "top.0.bias"):
        np.testing.assert_array_equal(a[k], b[k])


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_weights_match_torch() -> None:
    torch = pytest.importorskip("torch")
    for name in NAMES:
        state = torch.jit.load(str(MODELS / f"{name}.traced.pt")).state_dict()
        mine = load_weights_torchscript(str(MODELS / f"{name}.traced.pt"))
        for k, v in state.items():
            np.testing.assert_array_equal(mine[k], v.detach().numpy(), err_msg=f"{name}.traced.pt: {k}")
        ep = torch.export.load(str(MODELS / f"{name}.pt2"))
        mine = load_weights_pt2(str(MODELS / f"{name}.pt2"))
        for k, v in {**ep.state_dict, **ep.constants}.items():
            np.testing.assert_array_equal(mine[k], v.detach().numpy(), err_msg=f"{name}.pt2: {k}")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("given, error", [
    (("indices", "offsets"), "forward needs weights"),
    (("indices", "offsets", "weights", "scale"), "forward has no parameter scale"),
])
def test_scripted_example_inputs_must_match_forward(tmp_path: Path, given: tuple[str, ...], error: str) -> None:
    """A scripted module is exported with torch on example inputs, one per parameter of its forward:
    a missing or an unknown one is refused naming it, before torch traces anything."""
    pytest.importorskip("torch")
    from ember.frontends import NeedsTorch
    from ember.frontends.scripted import export_scripted

    path = str(MODELS / "bag_weighted.scripted.pt")
    with pytest.raises(NeedsTorch) as need:
        import_model(path, "w")
    feeds = {k: np.zeros(2, np.int64) for k in given}
    with pytest.raises(EmberError, match=rf"do not match forward\(indices, offsets, weights\): {error}$"):
        export_scripted(path, need.value, feeds, str(tmp_path / "w.pt2"))
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------------------------------
# The dispatcher


def test_dispatch_by_suffix(tmp_path: Path) -> None:
    assert _ops(_import(MODELS / "bag_sum.ts.onnx"))["emb.bag"] == 1
    assert "bag.weight" in load_weights_any(str(MODELS / "bag_sum.ts.onnx"))
    for bad in ("model.onnx.gz", "model", "model.pth"):
        (tmp_path / bad).write_bytes(b"x")  # exists, so only the suffix is wrong
        with pytest.raises(EmberError, match=r"\.onnx.*\.pt.*\.pt2"):
            import_model(str(tmp_path / bad), "w")
        with pytest.raises(EmberError, match="model format"):
            load_weights_any(str(tmp_path / bad))
    with pytest.raises(EmberError, match="No such file"):
        import_model(str(tmp_path / "missing.pt2"), "w")


# ---------------------------------------------------------------------------------------------
# Hostile and damaged files

_STOP, _MARK, _TUPLE, _REDUCE, _BUILD, _NEWOBJ = b".", b"(", b"t", b"R", b"b", b"\x81"


def _global(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def _str(s: str) -> bytes:
    raw = s.encode()
    return b"X" + len(raw).to_bytes(4, "little") + raw


def _small(n: int) -> bytes:
    return b"K" + bytes([n])


def _zip(path: Path, members: dict[str, bytes | str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _code(cls: str, body: str) -> str:
    return f"class {cls}(Module):\n  def forward(self: __torch__.m.{cls},\n    x: Tensor) -> Tensor:\n{body}"


@pytest.fixture
def no_system(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record any call to os.system / eval that a loader might make (none may happen)."""
    calls: list[Any] = []
    monkeypatch.setattr(os, "system", lambda *a: calls.append(("os.system", a)) or 0)
    return calls


def _os_system(marker: Path) -> bytes:
    """GLOBAL 'os system' called on a shell command: the classic pickle exploit."""
    return b"\x80\x02" + _global("os", "system") + _MARK + _str(f"touch {marker}") + _TUPLE + _REDUCE + _STOP


def _builtins_eval(marker: Path) -> bytes:
    """The same through protocol 4's STACK_GLOBAL, which also goes through find_class."""
    code = f"open({str(marker)!r}, 'w')"
    return b"\x80\x04" + _str("builtins") + _str("eval") + b"\x93" + _MARK + _str(code) + _TUPLE + _REDUCE + _STOP


def _torch_function(marker: Path) -> bytes:
    """Even torch's own helpers are refused unless the reader knows exactly what they mean."""
    return b"\x80\x02" + _global("torch._utils", "_rebuild_parameter") + _MARK + _TUPLE + _REDUCE + _STOP


@pytest.mark.parametrize("payload, refused", [(_os_system, "os.system"), (_builtins_eval, "builtins.eval"),
                                              (_torch_function, "torch._utils._rebuild_parameter")])
def test_malicious_pickle_is_refused(tmp_path: Path, no_system: list[Any], payload: Any, refused: str) -> None:
    marker = tmp_path / "pwned"
    for member in ("data.pkl", "constants.pkl"):
        good = b"\x80\x02" + _global("__torch__.m", "M") + b")" + _NEWOBJ + b"}" + _BUILD + _STOP
        members = {"evil/data.pkl": good, f"evil/{member}": payload(marker)}
        bad = _zip(tmp_path / "evil.pt", members)
        for load in (lambda p: import_torchscript(p, "w"), load_weights_torchscript, lambda p: import_model(p, "w")):
            with pytest.raises(EmberError) as err:
                load(str(bad))
            msg = str(err.value)
            assert f"'{refused}'" in msg and "refuses" in msg and member in msg
    assert not marker.exists() and no_system == []


def _traced_archive(path: Path, code: str) -> Path:
    """A traced archive of module `__torch__.m.M` with source `code`, traced on one float tensor of 4."""
    pkl = b"\x80\x02" + _global("__torch__.m", "M") + b")" + _NEWOBJ + b"}" + _BUILD + _STOP
    tensor_meta = (_global("torch._utils", "_rebuild_tensor_v2") + _MARK + _MARK + _str("storage")
                   + _global("torch", "FloatStorage") + _str("0") + _str("cpu") + _small(4) + _TUPLE + b"Q"
                   + _small(0) + _MARK + _small(4) + _TUPLE + _MARK + _small(1) + _TUPLE + b"\x89"
                   + _global("collections", "OrderedDict") + b")" + _REDUCE + _TUPLE + _REDUCE)
    meta = b"\x80\x02}" + _MARK + _str("forward") + b"]" + _MARK + tensor_meta + b"e" + b"u" + _STOP
    return _zip(path, {"m/data.pkl": pkl, "m/code/__torch__/m.py": code, "m/traced_inputs.pkl": meta})


def test_code_is_never_executed(tmp_path: Path, no_system: list[Any]) -> None:
    """Source in code/ that would run a command is only parsed, and the unknown call is an error."""
    marker = tmp_path / "pwned"
    body = f"    _0 = __import__('os').system('touch {marker}')\n    return x\n"
    bad = _traced_archive(tmp_path / "code.pt", _code("M", body))
    with pytest.raises(EmberError, match=r"'__import__\(\.\.\.\)' at code/__torch__/m.py:4.*\.pt2"):
        import_torchscript(str(bad), "w")
    assert not marker.exists() and no_system == []


def _chain(n: int) -> str:
    """forward calls f0, which calls f1, ... f{n-1} returns relu(x): calls nested n deep."""
    calls = "".join(f"def f{k}(x: Tensor) -> Tensor:\n  return __torch__.m.f{k + 1}(x)\n" for k in range(n - 1))
    last = f"def f{n - 1}(x: Tensor) -> Tensor:\n  return torch.relu(x)\n"
    return _code("M", "    return __torch__.m.f0(x)\n") + calls + last


def test_traced_calls_nest_up_to_the_limit(tmp_path: Path) -> None:
    """Calls of scripted functions may nest 64 deep (MAX_DEPTH) below forward; one more is refused."""
    x = np.array([-1.5, 0.0, 2.0, -0.25], np.float32)
    got = run_compiled(_traced_archive(tmp_path / "deep.pt", _chain(64)), "O0", {"x": x})
    np.testing.assert_array_equal(got["output"], np.maximum(x, 0))
    too_deep = _traced_archive(tmp_path / "deeper.pt", _chain(65))
    with pytest.raises(EmberError, match=r"deeper\.pt: error: function calls nest more than 64 deep$"):
        import_torchscript(str(too_deep), "w")


def test_traced_code_with_annotations_and_a_discarded_call(tmp_path: Path) -> None:
    """An annotated assignment, and a call whose result (None, from a bare return) is dropped."""
    code = (_code("M", "    __torch__.m.check(x)\n    y: Tensor = torch.relu(x)\n    return y\n")
            + "def check(x: Tensor) -> None:\n  return\n")
    x = np.array([3.0, -2.0, 0.5, -0.5], np.float32)
    got = run_compiled(_traced_archive(tmp_path / "m.pt", code), "O0", {"x": x})
    np.testing.assert_array_equal(got["output"], np.maximum(x, 0))


def test_traced_code_with_tuples(tmp_path: Path) -> None:
    """A tuple unpacked into names, and forward returning a tuple: one output per entry, in order."""
    code = _code("M", "    y, z = (torch.relu(x), torch.neg(x))\n    return (z, y)\n")
    x = np.array([3.0, -2.0, 0.5, -0.5], np.float32)
    got = run_compiled(_traced_archive(tmp_path / "m.pt", code), "O0", {"x": x})
    assert sorted(got) == ["output0", "output1"]
    np.testing.assert_array_equal(got["output0"], -x)
    np.testing.assert_array_equal(got["output1"], np.maximum(x, 0))


@pytest.mark.parametrize("code, error", [
    ("class M(Module):\n  def forward(self, x):\n    return (\n", "code/__torch__/m.py is not valid TorchScript "
     r"source \(SyntaxError\)"),
    ("class M(Module):\n  def forward(self: __torch__.m.M, x: Tensor, y: Tensor) -> Tensor:\n    return x\n",
     "forward takes 2 inputs but the archive records 1 traced inputs"),
    (_code("M", "    return getattr(self, \"w\")\n"),
     r"code/__torch__/m\.py:4: __torch__\.m\.M has no attribute 'w'; Ember reads traced TorchScript modules.*"),
    (_code("M", "    _0 = ops.prim.dtype(3)\n    return x\n"),
     r"'ops\.prim\.dtype\(\.\.\.\)' at code/__torch__/m\.py:4: the operand of dtype\(\) must be a tensor, got "
     r"int 3; Ember reads.*"),
    (_code("M", "    __torch__ = x\n    return __torch__.m.f(x)\n"),  # a local name hides the module root
     r"code/__torch__/m\.py:5: attribute 'm' of a Value is not supported; Ember reads.*"),
    (_code("M", "    return self.helper(x, x)\n") + "  def helper(self: __torch__.m.M, y: Tensor) -> Tensor:\n"
     "    return y\n", r"code/__torch__/m\.py:5: helper takes 2 arguments, got 3; Ember reads.*"),
], ids=["syntax", "inputs", "getattr", "dtype", "shadowed", "method-arguments"])
def test_traced_code_that_cannot_be_read_is_refused(tmp_path: Path, code: str, error: str) -> None:
    bad = _traced_archive(tmp_path / "bad.pt", code)
    with pytest.raises(EmberError) as e:
        import_torchscript(str(bad), "w")
    assert re.fullmatch(f"{re.escape(str(bad))}: error: {error}", str(e.value)), str(e.value)


def test_tensor_outside_its_storage_is_refused(tmp_path: Path) -> None:
    """A crafted size must not make the reader copy memory past the storage bytes."""
    tensor = (_global("torch._utils", "_rebuild_tensor_v2") + _MARK + _MARK + _str("storage")
              + _global("torch", "FloatStorage") + _str("0") + _str("cpu") + _small(4) + _TUPLE + b"Q"
              + _small(0) + _MARK + _small(200) + _TUPLE + _MARK + _small(1) + _TUPLE + b"\x89"
              + _global("collections", "OrderedDict") + b")" + _REDUCE + _TUPLE + _REDUCE)
    pkl = b"\x80\x02" + _global("__torch__.m", "M") + b")" + _NEWOBJ + b"}" + _MARK + _str("w") + tensor + b"u" \
        + _BUILD + _STOP
    bad = _zip(tmp_path / "big.pt", {"m/data.pkl": pkl, "m/data/0": np.zeros(4, np.float32).tobytes()})
    with pytest.raises(EmberError, match="runs past its storage"):
        load_weights_torchscript(str(bad))
    short = _zip(tmp_path / "short.pt", {"m/data.pkl": pkl, "m/data/0": b"\0\0"})
    with pytest.raises(EmberError, match="fewer than 4"):
        load_weights_torchscript(str(short))


@pytest.mark.parametrize("archive", ["bag_sum.traced.pt", "dlrm.pt2"])
def test_damaged_files_fail_cleanly(tmp_path: Path, archive: str) -> None:
    data = (MODELS / archive).read_bytes()
    cases = {"truncated": data[: len(data) // 2], "empty": b"", "text": b"not a model at all\n",
             "header only": data[:64]}
    for what, content in cases.items():
        bad = tmp_path / f"{what.replace(' ', '_')}{Path(archive).suffix}"
        bad.write_bytes(content)
        with pytest.raises(EmberError, match="zip") as err:
            _import(bad)
        assert str(bad) in str(err.value), what
    with pytest.raises(EmberError, match="(?i)no such file"):
        _import(tmp_path / f"missing{Path(archive).suffix}")


def test_zip_without_a_model_is_refused(tmp_path: Path) -> None:
    other = _zip(tmp_path / "other.pt", {"readme.txt": "hello"})
    with pytest.raises(EmberError, match="no data.pkl"):
        import_torchscript(str(other), "w")
    other2 = _zip(tmp_path / "other.pt2", {"readme.txt": "hello"})
    with pytest.raises(EmberError, match="no models/model.json"):
        import_pt2(str(other2), "w")
    saved = b"\x80\x02" + _global("collections", "OrderedDict") + b")" + _REDUCE + _STOP  # torch.save of a dict
    plain = _zip(tmp_path / "state.pt", {"state/data.pkl": saved})
    with pytest.raises(EmberError, match="torch.jit.trace"):
        import_torchscript(str(plain), "w")


def _rewrite(src: Path, dst: Path, edit: dict[str, tuple[str, str]]) -> Path:
    """Copy an archive, replacing text in the members whose names end with a key of `edit`."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            for suffix, (old, new) in edit.items():
                if info.filename.endswith(suffix):
                    assert old.encode() in data
                    data = data.replace(old.encode(), new.encode())
            zout.writestr(info, data)
    return dst


def test_unsupported_call_names_the_call_and_file(tmp_path: Path) -> None:
    bad = _rewrite(MODELS / "embedding.traced.pt", tmp_path / "odd.pt",
                   {"code/__torch__/torch/nn/modules/sparse.py": ("torch.embedding(", "torch.erfinv(")})
    with pytest.raises(EmberError) as err:
        import_torchscript(str(bad), "w")
    msg = str(err.value)
    assert "'torch.erfinv(...)'" in msg and "code/__torch__/torch/nn/modules/sparse.py:" in msg
    assert "aten::erfinv" in msg and "docs/operators.md" in msg and "embedding_bag" not in msg  # no list of names
    assert ".pt2" in msg and ".onnx" in msg and str(bad) in msg
    inplace = _rewrite(MODELS / "dlrm.traced.pt", tmp_path / "inplace.pt",  # nn.ReLU(inplace=True)
                       {"activation.py": ("torch.relu(", "torch.relu_(")})
    assert print_module(import_torchscript(str(inplace), "w")) == print_module(
        import_torchscript(str(MODELS / "dlrm.traced.pt"), "w"))  # each relu_ updates a fresh Linear output
    on_weight = _rewrite(MODELS / "dlrm.traced.pt", tmp_path / "on_weight.pt",
                         {"linear.py": ("torch.linear(dense, weight, bias)", "torch.relu_(weight)")})
    with pytest.raises(EmberError, match=r"torch\.relu_.*in-place operators are supported only"):
        import_torchscript(str(on_weight), "w")
    padded = _rewrite(MODELS / "bag_sum.traced.pt", tmp_path / "padded.pt",
                      {"sparse.py": ("False, None, False, None)", "False, None, False, 40)")})
    with pytest.raises(EmberError, match="padding_idx must be within"):  # 40 rows: PyTorch refuses it too
        import_torchscript(str(padded), "w")


def test_unsupported_pt2_node_names_the_target(tmp_path: Path) -> None:
    bad = _rewrite(MODELS / "dlrm.pt2", tmp_path / "odd.pt2",
                   {"models/model.json": ("torch.ops.aten.bmm.default", "torch.ops.aten.cholesky.default")})
    with pytest.raises(EmberError, match=r"node 'bmm' \(torch\.ops\.aten\.cholesky\.default\): aten::cholesky "
                       r"is not .*docs/operators\.md.*torch\.onnx\.export") as err:
        import_pt2(str(bad), "w")
    assert "embedding_bag" not in str(err.value)
    custom = _rewrite(MODELS / "bag_sum.pt2", tmp_path / "custom.pt2",
                      {"models/model.json": ("torch.ops.aten.embedding_bag.padding_idx", "torch.ops.fbgemm.tbe.x")})
    with pytest.raises(EmberError, match=r"node 'getitem' \(torch\.ops\.fbgemm\.tbe\.x\): fbgemm::tbe is not "
                       r"one of the operators Ember translates"):
        import_pt2(str(custom), "w")
    pickled = _rewrite(MODELS / "bag_sum.pt2", tmp_path / "pickled.pt2",
                       {"model_weights_config.json": ('"use_pickle": false', '"use_pickle": true')})
    with pytest.raises(EmberError, match="'bag.weight' is stored as a pickle"):
        import_pt2(str(pickled), "w")


# ---------------------------------------------------------------------------------------------
# Hand-built .pt2 graphs: the aten operators the samples do not exercise

_CODES = {"float32": 7, "int64": 5}


def T(name: str) -> dict[str, Any]:
    return {"as_tensor": {"name": name}}


def I(n: int) -> dict[str, Any]:  # noqa: E743  (short argument builders keep the graphs readable)
    return {"as_int": n}


def _meta(a: np.ndarray) -> dict[str, Any]:
    strides = [s // a.itemsize for s in a.strides]
    return {"dtype": _CODES[a.dtype.name], "sizes": [{"as_int": d} for d in a.shape], "requires_grad": False,
            "device": {"type": "cpu", "index": None}, "strides": [{"as_int": s} for s in strides],
            "storage_offset": {"as_int": 0}, "layout": 7}


def write_pt2(path: Path, inputs: dict[str, np.ndarray], params: dict[str, np.ndarray],
              nodes: list[tuple[str, dict[str, Any], list[str]]], output: str) -> Path:
    """A minimal torch.export archive in the serialized layout torch 2.13 writes (schema 8)."""
    specs: list[dict[str, Any]] = []
    config: dict[str, Any] = {}
    members: dict[str, bytes | str] = {}
    for i, (fqn, a) in enumerate(params.items()):
        specs.append({"parameter": {"arg": {"name": f"p_{i}"}, "parameter_name": fqn}})
        config[fqn] = {"path_name": f"weight_{i}", "is_param": True, "use_pickle": False, "tensor_meta": _meta(a)}
        members[f"m/data/weights/weight_{i}"] = np.ascontiguousarray(a).tobytes()
    specs += [{"user_input": {"arg": T(n)}} for n in inputs]
    graph = {
        "inputs": [T(f"p_{i}") for i in range(len(params))] + [T(n) for n in inputs],
        "outputs": [T(output)],
        "nodes": [{"target": target, "inputs": [{"name": k, "arg": v, "kind": 1} for k, v in args.items()],
                   "outputs": [T(o) if o else {"as_none": True} for o in outs], "metadata": {}}
                  for target, args, outs in nodes],
        "tensor_values": {n: _meta(a) for n, a in inputs.items()},
        "sym_int_values": {}, "sym_bool_values": {}, "is_single_tensor_return": False, "custom_obj_values": {},
        "sym_float_values": {},
    }
    signature = {"input_specs": specs, "output_specs": [{"user_output": {"arg": T(output)}}]}
    model = {"graph_module": {"graph": graph, "signature": signature,
                              "module_call_graph": [{"fqn": "", "signature": {"forward_arg_names": list(inputs)}}],
                              "metadata": {}},
             "opset_version": {"aten": 10}, "schema_version": {"major": 8, "minor": 20}}
    members["m/models/model.json"] = json.dumps(model)
    members["m/data/weights/model_weights_config.json"] = json.dumps({"config": config})
    members["m/archive_format"] = "pt2"
    return _zip(path, members)


def _check_graph(path: Path, feeds: dict[str, np.ndarray], want: np.ndarray) -> Op:
    module = import_pt2(str(path), path.name)
    verify(module)
    assert print_module(parse_module(print_module(module))) == print_module(module)
    for level in ("O0", "O3"):
        got = run_compiled(path, level, feeds)["output"]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    return module


def test_pt2_dense_operators(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    y = rng.standard_normal((6, 3)).astype(np.float32)
    w = rng.standard_normal((5, 6)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    c = rng.standard_normal(3).astype(np.float32)
    sel = np.array([2, 0], dtype=np.int64)
    a = "torch.ops.aten."
    nodes = [
        (a + "add.Tensor", {"self": T("x"), "other": T("x"), "alpha": I(2)}, ["three_x"]),
        (a + "mul.Tensor", {"self": T("three_x"), "other": {"as_float": 0.5}}, ["m"]),
        (a + "linear.default", {"input": T("m"), "weight": T("p_0"), "bias": T("p_1")}, ["lin"]),
        (a + "tanh.default", {"self": T("lin")}, ["th"]),
        (a + "t.default", {"self": T("th")}, ["tt"]),
        (a + "view.default", {"self": T("tt"), "size": {"as_ints": [20]}}, ["v"]),
        (a + "unsqueeze.default", {"self": T("v"), "dim": I(0)}, ["u"]),
        (a + "squeeze.dim", {"self": T("u"), "dim": I(0)}, ["s"]),
        (a + "reshape.default", {"self": T("s"), "shape": {"as_ints": [2, -1]}}, ["r"]),
        (a + "permute.default", {"self": T("r"), "dims": {"as_ints": [1, 0]}}, ["p"]),
        (a + "slice.Tensor", {"self": T("p"), "dim": I(0), "start": I(1), "end": I(9), "step": I(2)}, ["sl"]),
        (a + "_softmax.default", {"self": T("sl"), "dim": I(1), "half_to_float": {"as_bool": False}}, ["sm"]),
        (a + "mm.default", {"self": T("x"), "mat2": T("y")}, ["mmr"]),
        (a + "addmm.default", {"self": T("p_2"), "mat1": T("x"), "mat2": T("y"), "beta": {"as_float": 0.5},
                               "alpha": I(2)}, ["am"]),
        (a + "sub.Tensor", {"self": T("am"), "other": T("mmr")}, ["d"]),
        (a + "mean.dim", {"self": T("d"), "dim": {"as_ints": [1]}, "keepdim": {"as_bool": True}}, ["mn"]),
        (a + "sum.dim_IntList", {"self": T("d"), "dim": {"as_ints": [-1]}, "keepdim": {"as_bool": True}}, ["sd"]),
        (a + "cat.default", {"tensors": {"as_tensors": [{"name": "sm"}, {"name": "mn"}, {"name": "sd"}]},
                             "dim": I(1)}, ["cat"]),
        (a + "index_select.default", {"self": T("cat"), "dim": I(1), "index": T("p_3")}, ["isel"]),
        (a + "flatten.using_ints", {"self": T("isel"), "start_dim": I(0), "end_dim": I(-1)}, ["fl"]),
        (a + "div.Tensor", {"self": T("fl"), "other": {"as_float": 4.0}}, ["dv"]),
        (a + "sigmoid.default", {"self": T("dv")}, ["output"]),
    ]
    path = write_pt2(tmp_path / "dense.pt2", {"x": x, "y": y}, {"w": w, "b": b, "c": c, "sel": sel}, nodes, "output")
    th = np.tanh((x + 2 * x) * 0.5 @ w.T + b)
    p = th.T.reshape(20).reshape(2, -1).T
    sl = p[1:9:2]
    sm = np.exp(sl - sl.max(1, keepdims=True))
    sm /= sm.sum(1, keepdims=True)
    d = (0.5 * c + 2 * (x @ y)) - x @ y
    cat = np.concatenate([sm, d.mean(1, keepdims=True), d.sum(-1, keepdims=True)], axis=1)
    want = 1 / (1 + np.exp(-(cat[:, sel].reshape(-1) / 4.0)))
    module = _check_graph(path, {"x": x, "y": y}, want.astype(np.float32))
    ops = _ops(module)
    assert ops["Gemm"] == 2 and ops["Slice"] == 1 and ops["ReduceMean"] == 1 and ops["Gather"] == 1
    mean = next(op for op in module.walk() if op.attrs.get("op") == "ReduceMean")
    assert mean.attrs["axes"] == [1] and mean.attrs["keepdims"] == 1  # opset 17: axes is an attribute


def test_pt2_fixed_length_bags_and_runtime_indexing(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    table = rng.standard_normal((10, 4)).astype(np.float32)
    idx = rng.integers(0, 10, size=(3, 2), dtype=np.int64)
    a = "torch.ops.aten."
    bag_args = {"weight": T("p_0"), "indices": T("idx"), "offsets": {"as_none": True},
                "scale_grad_by_freq": {"as_bool": False}, "mode": I(1), "sparse": {"as_bool": False},
                "per_sample_weights": {"as_none": True}, "include_last_offset": {"as_bool": False},
                "padding_idx": {"as_none": True}}
    nodes = [(a + "embedding_bag.padding_idx", bag_args, ["output", "", "bag_size", ""])]
    path = write_pt2(tmp_path / "bags.pt2", {"idx": idx}, {"table": table}, nodes, "output")
    module = _check_graph(path, {"idx": idx}, table[idx].mean(axis=1))
    assert _ops(module)["emb.bag"] == 1

    z = rng.standard_normal((3, 3, 4)).astype(np.float32)
    i = np.array([0, 2, 1, 2, 0], dtype=np.int64)
    j = np.array([3, 0, 1, 1, -1], dtype=np.int64)
    for pattern, want in (([None, "i", "j"], z[:, i, j]), (["i", None, "j"], z[i, :, j])):
        opt = [{"as_none": True} if p is None else {"as_tensor": {"name": p}} for p in pattern]
        nodes = [(a + "index.Tensor", {"self": T("z"), "indices": {"as_optional_tensors": opt}}, ["output"])]
        path = write_pt2(tmp_path / "index.pt2", {"z": z, "i": i, "j": j}, {}, nodes, "output")
        module = _check_graph(path, {"z": z, "i": i, "j": j}, want)
        assert _ops(module)["GatherND"] == 1


@pytest.mark.parametrize("old, new, error", [
    ('"parameter_name": "table"', '"parameter_name": "other"', "the archive has no data for 'other'"),
    ('{"as_int": -1}', '{"as_int": -1, "as_float": -1.0, "as_string": "padding of the table"}',
     r"node 'output' \(torch\.ops\.aten\.embedding\.default\): malformed argument "
     r"\{'as_int': -1, 'as_float': -1\.0, 'as_string': 'padding of th \(schema 8\.20; Ember reads schema 8\)"),
    ('{"user_input": {"arg": {"as_tensor": {"name": "idx"}}}}', '{"user_input": {"arg": {"as_int": 3}}}',
     r"a non-tensor model input \(as_int\) is not supported"),
])
def test_pt2_malformed_archive_is_refused_naming_the_file(tmp_path: Path, old: str, new: str, error: str) -> None:
    """A weight without data, an argument that is not one value (shown cut to its first 60 characters)
    and an input that is not a tensor: one line naming the archive."""
    nodes = [("torch.ops.aten.embedding.default", {"weight": T("p_0"), "indices": T("idx"), "padding_idx": I(-1)},
              ["output"])]
    good = write_pt2(tmp_path / "good.pt2", {"idx": np.arange(3)}, {"table": np.ones((4, 2), np.float32)}, nodes,
                     "output")
    bad = _rewrite(good, tmp_path / "bad.pt2", {"model.json": (old, new)})
    with pytest.raises(EmberError) as e:
        import_pt2(str(bad), "w")
    assert re.fullmatch(f"{re.escape(str(bad))}: error: {error}", str(e.value)), str(e.value)


def test_pt2_type_promotion_follows_pytorch(tmp_path: Path) -> None:
    """An int64 tensor times a float gives float32, as PyTorch's default type; an integer tensor plus
    an integer number stays int64."""
    idx = np.arange(3, dtype=np.int64)
    a = "torch.ops.aten."
    nodes = [(a + "add.Tensor", {"self": T("idx"), "other": I(2)}, ["two"]),
             (a + "mul.Tensor", {"self": T("two"), "other": {"as_float": 0.5}}, ["output"])]
    path = write_pt2(tmp_path / "promote.pt2", {"idx": idx}, {}, nodes, "output")
    module = _check_graph(path, {"idx": idx}, ((idx + 2) * 0.5).astype(np.float32))
    add = next(op for op in module.walk() if op.attrs.get("op") == "Add")
    assert str(add.result.type) == "tensor<3xi64>" and str(module.body.ops[0].attrs["results"][0]) == "tensor<3xf32>"


def test_pt2_symbolic_size_node_is_named_in_its_error(tmp_path: Path) -> None:
    """A node whose output is a symbolic integer is named by that output, as tensor nodes are."""
    nodes = [("torch.ops.aten.sym_size.int", {"self": T("x"), "dim": I(5)}, [""]),
             ("torch.ops.aten.relu.default", {"self": T("x")}, ["output"])]
    path = write_pt2(tmp_path / "m.pt2", {"x": np.ones((2, 4), np.float32)}, {}, nodes, "output")
    path = _rewrite(path, tmp_path / "sym.pt2", {"model.json": (
        '"outputs": [{"as_none": true}]', '"outputs": [{"as_sym_int": {"as_name": "s"}}]')})
    with pytest.raises(EmberError, match=r"sym\.pt2: error: node 's' \(torch\.ops\.aten\.sym_size\.int\): dim 5 is "
                                         "out of range for rank 2; export"):
        import_pt2(str(path), "w")


def test_pt2_expand_keeps_the_dimensions_given_as_minus_one(tmp_path: Path) -> None:
    """expand(-1, 4) keeps dimension 0, whether it is 3 or 1, and stretches the 1 of dimension 1."""
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal((3, 1)).astype(np.float32), rng.standard_normal((1, 1)).astype(np.float32)
    a = "torch.ops.aten."
    nodes = [(a + "expand.default", {"self": T("x"), "size": {"as_ints": [-1, 4]}}, ["ex"]),
             (a + "expand.default", {"self": T("y"), "size": {"as_ints": [-1, 4]}}, ["ey"]),
             (a + "mul.Tensor", {"self": T("ey"), "other": {"as_float": 2.0}}, ["ey2"]),
             (a + "add.Tensor", {"self": T("ex"), "other": T("ey2")}, ["output"])]
    path = write_pt2(tmp_path / "expand.pt2", {"x": x, "y": y}, {}, nodes, "output")
    _check_graph(path, {"x": x, "y": y}, np.broadcast_to(x, (3, 4)) + 2 * np.broadcast_to(y, (1, 4)))


def test_pt2_with_a_symbolic_batch_size(tmp_path: Path) -> None:
    """x of shape [s0, 4], s0 symbolic: ones_like(x) takes its shape from x at run time, and view(y, [s0,
    2, -1]) with s0 from sym_size infers -1 from the known extents; any batch size then computes numpy's."""
    a = "torch.ops.aten."
    nodes = [(a + "sym_size.int", {"self": T("x"), "dim": I(0)}, [""]),
             (a + "ones_like.default", {"self": T("x")}, ["one"]),
             (a + "add.Tensor", {"self": T("x"), "other": T("one")}, ["y"]),
             (a + "view.default", {"self": T("y"), "size": {"as_sym_ints": [{"as_name": "s"}, {"as_int": 2},
                                                                            {"as_int": -1}]}}, ["output"])]
    static = write_pt2(tmp_path / "static.pt2", {"x": np.zeros((3, 4), np.float32)}, {}, nodes, "output")
    symbolic = _rewrite(static, tmp_path / "symbolic.pt2", {"model.json": (
        '"outputs": [{"as_none": true}]', '"outputs": [{"as_sym_int": {"as_name": "s"}}]')})
    symbolic = _rewrite(symbolic, tmp_path / "dynamic.pt2", {"model.json": (
        '"sizes": [{"as_int": 3}, {"as_int": 4}]',
        '"sizes": [{"as_expr": {"expr_str": "Symbol(\'s0\', positive=True, integer=True)", "hint": {"as_int": 3}}}, '
        '{"as_int": 4}]')})
    assert str(import_pt2(str(symbolic), "w").body.ops[0].attrs["results"][0]) == "tensor<?x2x2xf32>"
    for n in (3, 5):
        x = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
        np.testing.assert_array_equal(run_compiled(symbolic, "O0", {"x": x})["output"], (x + 1).reshape(n, 2, 2))


def test_pt2_view_of_a_constant_is_computed_at_import(tmp_path: Path) -> None:
    """arange(6).view(2, 3) is a constant the lowering made: it is reshaped at import, no host op left."""
    a = "torch.ops.aten."
    nodes = [(a + "arange.default", {"end": I(6), "dtype": {"as_scalar_type": 7}}, ["r"]),
             (a + "view.default", {"self": T("r"), "size": {"as_ints": [2, 3]}}, ["v"]),
             (a + "add.Tensor", {"self": T("x"), "other": T("v")}, ["output"])]
    x = np.random.default_rng(6).standard_normal((2, 3)).astype(np.float32)
    path = write_pt2(tmp_path / "view.pt2", {"x": x}, {}, nodes, "output")
    module = _check_graph(path, {"x": x}, x + np.arange(6, dtype=np.float32).reshape(2, 3))
    assert [op.attrs["op"] for op in module.walk() if op.name == "host.onnx"] == ["Add"]


def test_pt2_comparisons_and_logical_operators(tmp_path: Path) -> None:
    """Comparisons with numbers, logical_and and bitwise_or of booleans compute numpy's booleans; each
    result is named after the PyTorch operator, so ember-import's IR reads like the model."""
    x = np.array([-1.0, 0.5, 2.0, 0.25, 0.0], np.float32)
    a = "torch.ops.aten."
    nodes = [(a + "gt.Scalar", {"self": T("x"), "other": {"as_float": 0.0}}, ["pos"]),
             (a + "lt.Scalar", {"self": T("x"), "other": {"as_float": 1.0}}, ["small"]),
             (a + "logical_and.default", {"self": T("pos"), "other": T("small")}, ["both"]),
             (a + "bitwise_or.Tensor", {"self": T("both"), "other": T("pos")}, ["output"])]
    path = write_pt2(tmp_path / "logic.pt2", {"x": x}, {}, nodes, "output")
    got = run_compiled(path, "O0", {"x": x})["output"]
    np.testing.assert_array_equal(got, ((x > 0) & (x < 1)) | (x > 0))
    module = import_pt2(str(path), "w")
    assert [op.result.name for op in module.walk() if op.name == "host.onnx"] == ["gt", "lt", "logical_and",
                                                                                  "bitwise_or"]


def test_pt2_scatters_and_factories(tmp_path: Path) -> None:
    """scatter_reduce of rows, a scatter_add that is not one (host ScatterElements over the index's
    extent), index_add along dimension 1 with alpha, clamp, and the tensor factories."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    y = rng.standard_normal((5, 4)).astype(np.float32)
    src = np.array([0, 4, 4, 1, 2, 3, 0], dtype=np.int64)
    dst = np.array([1, 1, 3, 0, 1, 4, 3], dtype=np.int64)
    cells = np.array([[0, 4], [2, 2], [0, 1], [3, 0]], dtype=np.int64)
    cols = np.array([2, 0, 2, 1], dtype=np.int64)
    a = "torch.ops.aten."
    f32 = {"as_scalar_type": 7}
    nodes = [
        (a + "index_select.default", {"self": T("x"), "dim": I(0), "index": T("src")}, ["msg"]),
        (a + "unsqueeze.default", {"self": T("dst"), "dim": I(1)}, ["col"]),
        (a + "expand.default", {"self": T("col"), "size": {"as_ints": [-1, 3]}}, ["idx"]),
        (a + "full.default", {"size": {"as_ints": [5, 3]}, "fill_value": {"as_float": -100.0}}, ["low"]),
        (a + "scatter_reduce.two", {"self": T("low"), "dim": I(0), "index": T("idx"), "src": T("msg"),
                                    "reduce": {"as_string": "amax"}, "include_self": {"as_bool": True}}, ["mx"]),
        (a + "zeros_like.default", {"self": T("x"), "dtype": f32}, ["z"]),
        (a + "scatter_add.default", {"self": T("z"), "dim": I(0), "index": T("p_0"), "src": T("msg")}, ["sa"]),
        (a + "clamp.default", {"self": T("sa"), "max": {"as_float": 0.5}}, ["cl"]),
        (a + "ones.default", {"size": {"as_ints": [5, 3]}, "dtype": f32}, ["one"]),
        (a + "index_add.default", {"self": T("one"), "dim": I(1), "index": T("p_1"), "source": T("y"),
                                   "alpha": {"as_float": 2.0}}, ["ia"]),
        (a + "add.Tensor", {"self": T("mx"), "other": T("cl")}, ["s1"]),
        (a + "add.Tensor", {"self": T("s1"), "other": T("ia")}, ["output"]),
    ]
    feeds = {"x": x, "y": y, "src": src, "dst": dst}
    path = write_pt2(tmp_path / "scatters.pt2", feeds, {"cells": cells, "cols": cols}, nodes, "output")
    msg = x[src]
    mx = np.full((5, 3), -100.0, np.float32)
    for e, d in enumerate(dst):
        mx[d] = np.maximum(mx[d], msg[e])
    sa = np.zeros((5, 3), np.float32)
    for i in range(cells.shape[0]):
        for j in range(cells.shape[1]):
            sa[cells[i, j], j] += msg[i, j]
    ia = np.ones((5, 3), np.float32)
    for i, c in enumerate(cols):
        ia[:, c] += 2.0 * y[:, i]
    module = _check_graph(path, feeds, mx + np.minimum(sa, 0.5) + ia)
    ops = _ops(module)
    assert ops["emb.scatter_rows"] == 1 and ops["ScatterElements"] == 1 and ops["ScatterND"] == 1
    assert next(op for op in module.walk() if op.name == "emb.scatter_rows").attrs["reduction"] == "max"


def test_pt2_scatter_add_reads_src_over_the_index_extent(tmp_path: Path) -> None:
    """scatter_add with an index of 3 x 3 and src of 5 x 3: only src[:3, :3] takes part (the column
    extents are equal, which is allowed); an index of 6 rows, more than src has, is refused."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    src = rng.standard_normal((5, 3)).astype(np.float32)
    nodes = [("torch.ops.aten.scatter_add.default", {"self": T("x"), "dim": I(0), "index": T("p_0"),
                                                     "src": T("src")}, ["output"])]
    index = np.array([[3, 0, 0], [3, 1, 2], [0, 0, 3]], dtype=np.int64)
    path = write_pt2(tmp_path / "part.pt2", {"x": x, "src": src}, {"index": index}, nodes, "output")
    want = x.copy()
    for i, j in np.ndindex(index.shape):
        want[index[i, j], j] += src[i, j]
    assert _ops(_check_graph(path, {"x": x, "src": src}, want))["ScatterElements"] == 1
    longer = np.zeros((6, 3), dtype=np.int64)
    path = write_pt2(tmp_path / "longer.pt2", {"x": x, "src": src}, {"index": longer}, nodes, "output")
    with pytest.raises(EmberError, match=r"node 'output' \(torch\.ops\.aten\.scatter_add\.default\): index "
                                         r"tensor<6x3xi64> is larger than src tensor<5x3xf32>"):
        import_pt2(str(path), "w")


@pytest.mark.parametrize("node, error", [
    (("expand.default", {"self": T("x"), "size": {"as_ints": [4]}}),
     r"cannot expand tensor<2x4xf32> to fewer dimensions \[4\]"),
    (("expand.default", {"self": T("x"), "size": {"as_ints": [2, 3]}}), r"cannot expand tensor<2x4xf32> to \[2, 3\]"),
    (("_softmax.default", {"self": T("x"), "dim": I(2), "half_to_float": {"as_bool": False}}),
     "dim 2 is out of range for rank 2"),
    (("transpose.int", {"self": T("x"), "dim0": I(0), "dim1": I(-3)}), "dim1 -3 is out of range for rank 2"),
    (("add.Tensor", {"self": T("x"), "other": T("y")}), r"shapes \[2, 4\] and \[1, 3\] do not broadcast"),
    (("bitwise_and.Tensor", {"self": T("i"), "other": T("i")}),
     r"bitwise_and of integers \(ONNX's bitwise operators are opset 18; Ember's host ops are opset 17\)"),
], ids=["expand-fewer", "expand-width", "softmax-dim", "transpose-dim", "broadcast", "bitwise-ints"])
def test_pt2_operator_arguments_out_of_range_are_refused(tmp_path: Path, node: tuple[str, dict[str, Any]],
                                                         error: str) -> None:
    """Arguments PyTorch itself would reject, or that Ember cannot translate: the node and the reason."""
    target, args = node
    feeds = {"x": np.ones((2, 4), np.float32), "y": np.ones(3, np.float32), "i": np.arange(4)}
    path = write_pt2(tmp_path / "m.pt2", feeds, {}, [("torch.ops.aten." + target, args, ["output"])], "output")
    with pytest.raises(EmberError) as e:
        import_pt2(str(path), "w")
    want = rf"node 'output' \(torch\.ops\.aten\.{re.escape(target)}\): {error}; export the model with torch\.onnx"
    assert re.fullmatch(f"{re.escape(str(path))}: error: {want}.*", str(e.value)), str(e.value)


def _in_place_graph(tmp_path: Path, nodes: list[tuple[str, dict[str, Any], list[str]]]) -> tuple[Path, dict]:
    rng = np.random.default_rng(4)
    feeds = {"x": rng.standard_normal((4, 2)).astype(np.float32), "dst": np.array([3, 0, 3], dtype=np.int64),
             "src": np.array([1, 1, 2], dtype=np.int64)}
    a = "torch.ops.aten."
    head = [(a + "index_select.default", {"self": T("x"), "dim": I(0), "index": T("src")}, ["msg"]),
            (a + "new_zeros.default", {"self": T("x"), "size": {"as_ints": [4, 2]}}, ["z"])]
    return write_pt2(tmp_path / "inplace.pt2", feeds, {}, head + nodes, "output"), feeds


def test_pt2_in_place_updates_of_new_tensors(tmp_path: Path) -> None:
    """Two index_add_ in a row on a tensor just allocated: exact, raised to row scatters."""
    a = "torch.ops.aten."
    nodes = [(a + "index_add_.default", {"self": T("z"), "dim": I(0), "index": T("dst"), "source": T("msg")}, ["u"]),
             (a + "index_add_.default", {"self": T("u"), "dim": I(0), "index": T("src"), "source": T("msg")},
              ["output"])]
    path, feeds = _in_place_graph(tmp_path, nodes)
    want = np.zeros((4, 2), np.float32)
    msg = feeds["x"][feeds["src"]]
    np.add.at(want, feeds["dst"], msg)
    np.add.at(want, feeds["src"], msg)
    assert _ops(_check_graph(path, feeds, want))["emb.scatter_rows"] == 2


@pytest.mark.parametrize("nodes, error", [
    ([("index_add_.default", {"self": T("x"), "dim": I(0), "index": T("dst"), "source": T("msg")}, ["output"])],
     r"node 'output' \(torch\.ops\.aten\.index_add_\.default\): in-place operators are supported only on a tensor "
     r"the model computed itself \(not an input"),
    ([("view.default", {"self": T("z"), "size": {"as_ints": [8]}}, ["flat"]),
      ("index_add_.default", {"self": T("z"), "dim": I(0), "index": T("dst"), "source": T("msg")}, ["output"])],
     "did not read before the update"),  # the view would see the update; Ember's values would not
    ([("view.default", {"self": T("z"), "size": {"as_ints": [8]}}, ["flat"]),
      ("add_.Tensor", {"self": T("flat"), "other": {"as_float": 1.0}}, ["output"])],
     "not an input, a weight or a view"),  # updating the view would update z too
    ([("index_add_.default", {"self": T("z"), "dim": I(0), "index": T("dst"), "source": T("msg")}, ["u"]),
      ("add.Tensor", {"self": T("z"), "other": T("u")}, ["output"])],
     r"node 'output' \(torch\.ops\.aten\.add\.Tensor\): the first operand is a tensor an earlier in-place "
     "operator updated"),
])
def test_pt2_in_place_updates_that_could_be_observed_are_refused(tmp_path: Path, nodes: list[Any],
                                                                  error: str) -> None:
    path, _ = _in_place_graph(tmp_path, [("torch.ops.aten." + t, args, outs) for t, args, outs in nodes])
    with pytest.raises(EmberError, match=error):
        import_pt2(str(path), "w")


def test_traced_in_place_updates_that_could_be_observed_are_refused(tmp_path: Path) -> None:
    on_input = _rewrite(MODELS / "mp_sum_inplace.traced.pt", tmp_path / "on_input.pt",
                        {".py": ("torch.scatter_add_(out, 0,", "torch.scatter_add_(x, 0,")})
    with pytest.raises(EmberError, match=r"'torch\.scatter_add_\(\.\.\.\)' at code/__torch__/.*in-place operators"):
        import_torchscript(str(on_input), "w")
    stale = _rewrite(MODELS / "mp_mean_inplace.traced.pt", tmp_path / "stale.pt",
                     {".py": ("return torch.div(out0, _6)", "return torch.div(out, _6)")})
    with pytest.raises(EmberError, match=r"'torch\.div\(\.\.\.\)' at .*in-place operator updated"):
        import_torchscript(str(stale), "w")
