"""Sizes read from data in torch.export archives: `item`, arithmetic and guards on the sizes it gives,
`split_with_sizes` by them, `scalar_tensor`, and FBGEMM's `asynchronous_complete_cumsum` (what
TorchRec's KeyedJaggedTensor exports to).

The TorchRec archives of the corpus compute the offsets with FBGEMM but only use the lengths, so the
import prunes that op; here the graph's intermediate values are made outputs and checked with numpy.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, compile_model

import ember.dialects  # noqa: F401
from ember.frontends.aten import AtenLowering, Unsupported
from ember.frontends.aten.values import SymBool, SymInt
from ember.ir.core import Block
from ember.ir.types import tensor
from ember.machine import load_machine
from ember.sim.reference import simulate

TORCHREC = ROOT / "samples" / "corpus" / "torchrec_ebc"


def _with_outputs(src: Path, dst: Path, names: list[str]) -> Path:
    """A copy of a .pt2 archive whose graph returns the named intermediate tensors instead."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("models/model.json"):
                model = json.loads(data)
                gm = model["graph_module"]
                gm["signature"]["output_specs"] = [
                    {"user_output": {"arg": {"as_tensor": {"name": n}}}} for n in names]
                gm["graph"]["outputs"] = [{"as_tensor": {"name": n}} for n in names]
                data = json.dumps(model).encode()
            zout.writestr(info, data)
    return dst


@pytest.mark.parametrize("archive", ["exported.pt2", "exported.dynamic.pt2"])
def test_keyed_jagged_tensor_intermediates(tmp_path: Path, archive: str) -> None:
    feeds = dict(np.load(TORCHREC / "in.npz"))
    names = ["asynchronous_complete_cumsum", "getitem_5", "getitem_6", "scalar_tensor_1"]
    path = _with_outputs(TORCHREC / archive, tmp_path / "kjt.pt2", names)
    got, _ = simulate(compile_model(path, "O0"), feeds, load_machine("default"))
    per_key = feeds["lengths"].reshape(2, 4).sum(axis=1)
    n0 = int(per_key[0])
    want = [np.concatenate([[0], np.cumsum(per_key)]), feeds["values"][:n0], feeds["values"][n0:], per_key[1]]
    assert sorted(got) == [f"output{i}" for i in range(len(want))]
    for i, expected in enumerate(want):  # the stacked lengths are int32 (scalar_tensor's dtype), values int64
        value = got[f"output{i}"]
        assert value.dtype == (np.int32 if i in (0, 3) else np.int64), names[i]
        np.testing.assert_array_equal(value, expected, err_msg=names[i])


def _lowering() -> tuple[AtenLowering, SymInt]:
    low = AtenLowering(Block())
    x = low.input("x", tensor((1,), "i32"))
    size = low.lower("item", [x], {})
    assert isinstance(size, SymInt)
    return low, size


def test_size_arithmetic_folds_known_sizes_and_computes_the_others() -> None:
    low, n = _lowering()
    assert low.lower("_operator.add", [2, 3], {}) == 5
    assert low.lower("_operator.floordiv", [], {"a": 7, "b": 2}) == 3
    assert low.lower("_operator.le", [4, 3], {}) is False
    assert low.lower("_operator.add", [0, n], {}) is n and low.lower("_operator.mul", [n, 1], {}) is n
    total = low.lower("_operator.sub", [6, n], {})
    assert isinstance(total, SymInt) and total.value.owner.attrs["op"] == "Sub"
    assert isinstance(low.lower("_operator.ne", [n, 6], {}), SymBool)


def test_assertions_on_known_sizes_are_checked() -> None:
    low, n = _lowering()
    assert low.lower("_assert_scalar", [low.lower("_operator.ge", [n, 0], {}), "u0 >= 0"], {}) is None
    with pytest.raises(Unsupported, match="u0 <= 3"):
        low.lower("_assert_scalar", [low.lower("_operator.le", [5, 3], {}), "u0 <= 3"], {})


def test_item_of_a_float_tensor_is_refused() -> None:
    low = AtenLowering(Block())
    x = low.input("x", tensor((1,), "f32"))
    with pytest.raises(Unsupported, match="only for integers"):
        low.lower("item", [x], {})


def test_unknown_namespaced_operator_is_named() -> None:
    with pytest.raises(Unsupported, match="fbgemm::jagged_to_padded_dense is not one of"):
        AtenLowering(Block()).lower("fbgemm.jagged_to_padded_dense", [], {})


@pytest.mark.parametrize("dynamic", [False, True])
def test_split_by_a_size_read_from_data_matches_torch(tmp_path: Path, dynamic: bool) -> None:
    torch = pytest.importorskip("torch")

    class Split(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.bag = torch.nn.EmbeddingBag(20, 4, mode="sum")

        def forward(self, values: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, ...]:
            n = lengths[0].item()
            torch._check(n >= 0)
            torch._check(n <= values.shape[0])
            head, tail = values.split([n, values.shape[0] - n])
            offsets = torch.tensor([0])
            return self.bag(head, offsets), self.bag(tail, offsets), torch.scalar_tensor(n * 3 - 1, dtype=torch.int64)

    model = Split().eval()
    example = (torch.tensor([1, 2, 3, 4, 5, 6]), torch.tensor([2, 4]))
    shapes = ({0: torch.export.Dim("n")}, None) if dynamic else None
    path = tmp_path / "split.pt2"
    torch.export.save(torch.export.export(model, example, dynamic_shapes=shapes), str(path))
    feeds = {"values": np.array([7, 3, 19, 0, 5, 5, 11, 2], dtype=np.int64) if dynamic else example[0].numpy(),
             "lengths": np.array([5, 3] if dynamic else [4, 2], dtype=np.int64)}
    with torch.no_grad():
        want = model(*(torch.from_numpy(v) for v in feeds.values()))
    for level in ("O0", "O3"):
        got, _ = simulate(compile_model(path, level), feeds, load_machine("default"))
        assert sorted(got) == [f"output{i}" for i in range(len(want))]
        for i, expected in enumerate(want):
            np.testing.assert_allclose(got[f"output{i}"], expected.numpy(), rtol=1e-5, atol=1e-6)
