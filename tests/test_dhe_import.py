"""DHE written as a plain PyTorch module, imported from `.pt2`, `.pt` and `.onnx` as one emb.dhe
(frontends/raising/dhe.py).

The modules follow Hetu's learn_hash kernel with tensor ops: h = (x slope + bias) % prime % m, encoded as
h.float() / (m - 1) * 2 - 1, then nn.Linear layers with ReLU between them, pooled over the second axis of 2-D
indices.  torch's own output is the reference, on both engines.  Modules that compute something else (another
encoding, another activation) import op by op as before, and still equal torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_quantized_import import save
from test_robe_import import run

torch = pytest.importorskip("torch")

BUCKETS = 1_000_000


class DheBag(torch.nn.Module):
    def __init__(self, widths: tuple[int, ...], mode: str = "sum", bias: bool = True, one_prime: bool = False,
                 scale: float = BUCKETS - 1, act: Any = torch.relu, other: str = "") -> None:
        super().__init__()
        rng = np.random.default_rng(len(widths))
        k = widths[0]
        self.register_buffer("slope", torch.from_numpy(rng.integers(1, 2**31 - 1, k)))
        self.register_buffer("shift", torch.from_numpy(rng.integers(0, 2**31 - 1, k)))
        self.register_buffer("prime", torch.tensor(2038074743) if one_prime else
                             torch.from_numpy(rng.choice(np.array([2038074743, 1000000007, 998244353]), k)))
        if other == "per-position":  # a prime per lookup of the bag (shape L x 1), not per hash
            self.prime = torch.tensor([[2038074743], [1000000007], [998244353], [7]][:k])
        self.layers = torch.nn.ModuleList(torch.nn.Linear(a, b, bias=bias) for a, b in zip(widths, widths[1:]))
        self.mode, self.scale, self.act, self.other = mode, scale, act, other

    def forward(self, indices: Any) -> Any:
        x = indices.unsqueeze(-1)
        if self.other == "mix":  # hash j of a lookup reads another lookup's index
            bags, length = indices.shape
            x = indices.reshape(1, -1).expand(len(self.slope), -1).reshape(bags, length, len(self.slope))
        h = (x * self.slope + self.shift) % self.prime % BUCKETS
        a = h.float() / self.scale * 2 - 1
        if self.other == "square":  # right at h = 0 and 1, which is all a 1 x 1 x 2 h would show at one probe
            a = h.float() * h.float() / self.scale * 2 - 1
        for i, layer in enumerate(self.layers):
            a = layer(a)
            if i < len(self.layers) - 1:
                a = self.act(a)
        return a.sum(dim=1) if self.mode == "sum" else a.mean(dim=1)


@pytest.mark.parametrize(("suffix", "level"), [(".pt2", "O0"), (".pt2", "O3"), (".pt", "O3"), (".onnx", "O3"),
                                               (".ts.onnx", "O3")])
@pytest.mark.parametrize(("widths", "mode", "bias", "one_prime"), [
    ((8, 16, 4), "sum", True, False), ((6, 8), "mean", False, True), ((4, 8, 8, 4), "sum", True, False)])
def test_a_dhe_module_imports_as_one_emb_dhe(tmp_path: Path, suffix: str, level: str, widths: tuple[int, ...],
                                             mode: str, bias: bool, one_prime: bool) -> None:
    module = DheBag(widths, mode, bias, one_prime)
    ir = run(module, tmp_path / f"dhe{suffix}", level)
    assert ir.count("emb.dhe") == 1 and 'op = "MatMul"' not in ir and '"Mod"' not in ir, ir
    assert f'{{buckets = {BUCKETS}, layers = {len(widths) - 1}, mode = "{mode}"}}' in ir, ir


def test_the_hashes_are_read_off_the_model(tmp_path: Path) -> None:
    """The op's slope, bias and prime are the module's buffers (one prime broadcast to k), as the linker gives
    them: compiled with the weights the file holds, the program's constants are those arrays."""
    from conftest import compile_model

    module = DheBag((6, 8), one_prime=True)
    save(module, {"indices": np.zeros((2, 3), np.int64)}, tmp_path / "d.pt2")
    program = compile_model(tmp_path / "d.pt2", "O0")
    arrays = [a for a in program.data.values() if a.dtype == np.int64 and a.shape == (6,)]
    assert [list(a) for a in arrays] == [list(module.slope.numpy()), list(module.shift.numpy()), [2038074743] * 6]


@pytest.mark.parametrize(("widths", "variant", "shape"), [
    ((8, 16, 4), {"scale": float(BUCKETS)}, None), ((8, 16, 4), {"act": torch.tanh}, None),
    ((4, 8), {"other": "per-position"}, (2, 4)), ((3, 8), {"other": "mix"}, None),
    ((2, 4), {"other": "square"}, (1, 1))])
def test_other_models_stay_as_imported_and_still_equal_torch(tmp_path: Path, widths: tuple[int, ...],
                                                             variant: dict[str, Any], shape: Any) -> None:
    ir = run(DheBag(widths, **variant), tmp_path / "other.pt2", "O0", shape)
    assert "emb.dhe" not in ir and "MatMul" in ir, ir
