"""ROBE written as a plain PyTorch module, imported from `.pt2`, `.pt` and `.onnx` as one emb.robe
(frontends/raising/robe.py).

The modules follow Hetu's kernels with tensor ops: where = (B x + C (e // Z) + D + e % Z) % P % S, an optional
sign 2 ((B' x + C' e + D') % P % 2) - 1, rows = array[where] * sign, pooled over the second axis of 2-D indices.
torch's own output is the reference, on both engines at -O0 and -O3.  Modules that compute something else (a
modulus that is not the array's size, a term that is not linear in the index) import op by op as before, and
still equal torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import compile_model
from test_fast_engine import assert_same, both
from test_quantized_import import save

from ember.frontends import import_model
from ember.ir.printer import print_module

torch = pytest.importorskip("torch")

P = 2038074743
SIZE, DIM = 1000, 16


class RobeBag(torch.nn.Module):
    """Hetu-style ROBE: the block and offset of each element as buffers, or computed in forward with arange."""

    def __init__(self, block: int, mode: str = "sum", signed: bool = True, inline: bool = False,
                 outer: int = SIZE, square: bool = False, wrap: bool = False, other: str = "") -> None:
        super().__init__()
        self.array = torch.nn.Parameter(torch.from_numpy(
            np.random.default_rng(block).standard_normal(SIZE).astype(np.float32)))
        e = torch.arange(DIM)
        self.register_buffer("c", e // block)
        self.register_buffer("o", e % block)
        self.block, self.mode, self.signed, self.inline, self.outer, self.square, self.wrap, self.other = \
            block, mode, signed, inline, outer, square, wrap, other

    def forward(self, indices: Any) -> Any:
        x = indices.unsqueeze(-1)
        if self.wrap:  # linear on every probe below 2^40, not beyond: refused by its form
            x = x % (1 << 40)
        if self.other == "mix":  # element e of a lookup hashes another lookup's index: probes of one value hide it
            bags, length = indices.shape
            x = indices.reshape(1, -1).expand(DIM, -1).reshape(bags, length, DIM)
        if self.inline:
            e = torch.arange(DIM)
            pre = 1103515245 * x + 12345 * torch.div(e, self.block, rounding_mode="floor") + 616361018 + e % self.block
        else:
            pre = x * 1103515245 + self.c * 12345 + (self.o + 616361018)
        if self.square:
            pre = pre + x * x
        rows = self.array[pre % P % self.outer]
        if self.signed:
            sign = (214013 * x + 2531011 * torch.arange(DIM) + 69069) % P % 2 * 2 - 1
            if self.other == "double":  # a second sign, +1 at every index the matcher probes but not in general
                sign = sign * ((104252792 * x + 180421577) % P % 2 * 2 - 1)
            rows = rows * sign
        return rows.sum(dim=1) if self.mode == "sum" else rows.mean(dim=1)


def indices(shape: tuple[int, int] | None = None) -> dict[str, np.ndarray]:
    return {"indices": np.random.default_rng(4).integers(0, 10**7, size=shape or (6, 5)).astype(np.int64)}


def run(module: Any, path: Path, level: str, shape: tuple[int, int] | None = None,
        feeds: dict[str, np.ndarray] | None = None) -> str:
    """Import the saved module, simulate it on both engines and compare with torch, on `feeds` or on random
    indices below 10^7; returns the imported IR."""
    feeds = feeds or indices(shape)
    save(module, feeds, path)
    ir = print_module(import_model(str(path), path.name))
    want = module(torch.from_numpy(feeds["indices"])).detach().numpy()
    ref_out, ref_st, out, st = both(compile_model(path, level), feeds)
    (name,) = ref_out
    np.testing.assert_array_equal(out[name], ref_out[name])
    assert_same(ref_st, st)
    np.testing.assert_allclose(ref_out[name], want, rtol=1e-5, atol=1e-6)
    return ir


@pytest.mark.parametrize(("suffix", "level"), [(".pt2", "O0"), (".pt2", "O3"), (".pt", "O3"), (".onnx", "O3"),
                                               (".ts.onnx", "O3")])
@pytest.mark.parametrize(("block", "mode", "signed", "inline"), [
    (4, "sum", True, False), (16, "mean", True, True), (1, "sum", False, False)])
def test_a_robe_module_imports_as_one_emb_robe(tmp_path: Path, suffix: str, level: str, block: int, mode: str,
                                               signed: bool, inline: bool) -> None:
    ir = run(RobeBag(block, mode, signed, inline), tmp_path / f"robe{suffix}", level)
    assert ir.count("emb.robe") == 1 and "emb.gather" not in ir and '{op = "Mod"' not in ir, ir
    sign = "sign = [214013, 2531011, 69069]" if signed else "sign = [0, 0, 1]"
    z, c = (16, 0) if block == 16 else (block, 12345)  # one block of 16 has no second block for C to move
    assert (f'block = {z}, mode = "{mode}", prime = {P}, hash = [1103515245, {c}, 616361018], {sign}') in ir, ir


@pytest.mark.parametrize("variant", [{"outer": SIZE - 1}, {"square": True}, {"wrap": True}, {"other": "mix"},
                                     {"other": "double"}])
def test_other_arithmetic_stays_as_imported_and_still_equals_torch(tmp_path: Path, variant: dict[str, Any]) -> None:
    ir = run(RobeBag(4, **variant), tmp_path / "other.pt2", "O0")
    assert "emb.robe" not in ir and "emb.gather" in ir, ir


@pytest.mark.parametrize("dtype", ["int64", "float32"])
def test_remainder_and_rounded_division_are_pythons(tmp_path: Path, dtype: str) -> None:
    """aten::remainder takes the sign of the divisor (ONNX Mod with fmod = 0 for integers; x - floor(x / y) y for
    floats), unlike C's %; // rounds down and rounding_mode="trunc" toward zero, on operands of either sign."""

    class Rem(torch.nn.Module):
        def forward(self, a: Any, b: Any) -> Any:
            return torch.remainder(a, b) + a % 7 + 100 * (a // b) + 10_000 * torch.div(a, b, rounding_mode="trunc")

    rng = np.random.default_rng(5)
    feeds = {"a": rng.integers(-50, 50, size=12).astype(dtype), "b": rng.choice([-7, -3, 4, 9], size=12).astype(dtype)}
    path = tmp_path / "rem.pt2"
    save(Rem(), feeds, path)
    want = Rem()(*(torch.from_numpy(v) for v in feeds.values())).numpy()
    ref_out, _, out, _ = both(compile_model(path, "O0"), feeds)
    (name,) = ref_out
    np.testing.assert_array_equal(ref_out[name], out[name])
    np.testing.assert_allclose(ref_out[name], want, rtol=1e-6)
    assert (want < 0).any()  # the operands' signs matter here

