"""Tensor-train bags written as a plain PyTorch module, imported from `.pt2` and `.pt` as one emb.ttbag
(frontends/raising/tt.py).

The modules keep FBTT-Embedding's cores ([p_k, R_k q_k R_k+1] parameters), take each index's digits with // and
%, gather the cores' slices by them and contract the chain with bmm or matmul, in either order, pooled over the
second axis of 2-D indices.  torch's own output is the reference, on both engines.  Modules that compute
something else (digits in another order than the chain, a scale inside the chain) import op by op as before,
and still equal torch.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_quantized_import import save
from test_robe_import import run

from ember.frontends import import_model
from ember.ir.printer import print_module

torch = pytest.importorskip("torch")


class TTBag(torch.nn.Module):
    """A TT-Rec lookup in FBTT's layout; `other` makes it compute something emb.ttbag does not."""

    def __init__(self, p: list[int], q: list[int], ranks: list[int], mode: str = "sum", right: bool = False,
                 other: str = "") -> None:
        super().__init__()
        rng = np.random.default_rng(len(p))
        self.p, self.q, self.r = p, q, [1, *ranks, 1]
        self.cores = torch.nn.ParameterList(torch.nn.Parameter(torch.from_numpy(
            rng.standard_normal((p[k], self.r[k] * q[k] * self.r[k + 1])).astype(np.float32)))
            for k in range(len(p)))
        self.mode, self.right, self.other = mode, right, other

    def forward(self, indices: Any) -> Any:
        bags, length = indices.shape
        x = indices.reshape(-1)
        p, q, r, n = self.p, self.q, self.r, len(self.p)
        strides = [math.prod(p[k + 1:]) for k in range(n)]
        if self.other == "reversed":  # the first core takes the least significant digit
            strides = [math.prod(p[:k]) for k in range(n)]
        digits = [x // s % pk if k or self.other else x // s for k, (s, pk) in enumerate(zip(strides, p))]
        g = [self.cores[k][d].view(-1, r[k], q[k] * r[k + 1]) for k, d in enumerate(digits)]
        if self.right:  # from the last core back: G_k (R_k, q_k R_k+1) times the tail (R_k+1, rest)
            t = g[-1].reshape(-1, r[n - 1], q[n - 1])
            for k in range(n - 2, -1, -1):
                t = torch.matmul(g[k].reshape(-1, r[k] * q[k], r[k + 1]), t).reshape(-1, r[k], q[k] * t.shape[-1])
        else:
            t = g[0].reshape(-1, q[0], r[1])
            for k in range(1, n):
                t = torch.bmm(t, g[k]).reshape(-1, t.shape[1] * q[k], r[k + 1])
        if self.other == "scaled":
            t = t * 0.5
        rows = t.reshape(bags, length, -1)
        return rows.sum(dim=1) if self.mode == "sum" else rows.mean(dim=1)


def indices(p: list[int], shape: tuple[int, int] = (5, 4), negative: bool = False) -> dict[str, np.ndarray]:
    n = math.prod(p)
    return {"indices": np.random.default_rng(3).integers(-n if negative else 0, n, size=shape).astype(np.int64)}


@pytest.mark.parametrize(("suffix", "level"), [(".pt2", "O0"), (".pt2", "O3"), (".pt", "O3"), (".onnx", "O3")])
@pytest.mark.parametrize(("p", "q", "ranks", "mode", "right"), [
    ([5, 4, 3], [2, 2, 2], [3, 4], "sum", False),
    ([7, 6], [4, 2], [3], "mean", True),
    ([3, 2, 4, 2], [2, 1, 2, 2], [2, 3, 2], "sum", True)])
def test_a_tt_module_imports_as_one_emb_ttbag(tmp_path: Path, suffix: str, level: str, p: list[int], q: list[int],
                                             ranks: list[int], mode: str, right: bool) -> None:
    ir = run(TTBag(p, q, ranks, mode, right), tmp_path / f"tt{suffix}", level, feeds=indices(p))
    assert ir.count("emb.ttbag") == 1 and "emb.gather" not in ir and "MatMul" not in ir, ir
    assert f'{{cores = {len(p)}, mode = "{mode}", rows = {math.prod(p)}}}' in ir, ir
    for k, (pk, qk) in enumerate(zip(p, q)):
        assert f"tensor<{pk}x{([1, *ranks])[k]}x{qk}x{([*ranks, 1])[k]}xf32>" in ir, ir


@pytest.mark.parametrize("name", ["neg.pt2", "neg.onnx"])
def test_a_negative_index_reads_the_row_pytorch_does(tmp_path: Path, name: str) -> None:
    """x // s of a negative x is negative, and PyTorch counts it from the end of the first core: the row x + N.
    torch.export's ONNX exporter writes the floor as ONNX's truncating Div corrected where the signs differ."""
    p = [5, 4, 3]
    feeds = indices(p, negative=True)
    assert (feeds["indices"] < 0).any()
    ir = run(TTBag(p, [2, 2, 2], [3, 4]), tmp_path / name, "O3", feeds=feeds)
    assert "emb.ttbag" in ir


@pytest.mark.parametrize(("other", "name"), [("reversed", "other.pt2"), ("scaled", "other.pt2"),
                                             ("reversed", "other.onnx"), ("", "tt.ts.onnx")])
def test_other_arithmetic_stays_as_imported_and_still_equals_torch(tmp_path: Path, other: str, name: str) -> None:
    """Other chains, and TT from TorchScript's ONNX exporter: it writes x // s as ONNX's Div alone, which truncates,
    so a negative index reads another row than PyTorch's x + N, and emb.ttbag has no such row order."""
    p = [5, 4, 3]
    ir = run(TTBag(p, [2, 2, 2], [3, 4], other=other), tmp_path / name, "O0", feeds=indices(p))
    assert "emb.ttbag" not in ir and ir.count("emb.gather") == 3, ir


def test_the_cores_are_the_modules_parameters(tmp_path: Path) -> None:
    """The bag reads the state_dict's cores through a reshape, not copies made at import: a model whose cores are
    retrained imports to the same program."""
    module = TTBag([5, 4, 3], [2, 2, 2], [3, 4])
    save(module, indices([5, 4, 3]), tmp_path / "t.pt2")
    ir = print_module(import_model(str(tmp_path / "t.pt2"), "t.pt2"))
    for k in range(3):
        assert f'param {{name = "cores.{k}"}}' in ir, ir


@pytest.mark.parametrize("flag", [[], ["--no-raise"]])
def test_the_tools_take_a_raised_or_a_kept_model_through(tmp_path: Path, flag: list[str]) -> None:
    """ember-import raises the train by default and keeps the ops with --no-raise; either .eir goes through
    ember-opt, ember-asm (which links the cores, or the constants the raising made) and ember-sim to torch's
    result."""
    from conftest import run_tool

    p = [5, 4, 3]
    module, feeds = TTBag(p, [2, 2, 2], [3, 4]), indices(p)
    save(module, feeds, tmp_path / "tt.pt2")
    np.savez(tmp_path / "in.npz", **feeds)
    steps = [("import", str(tmp_path / "tt.pt2"), *flag, "-o", str(tmp_path / "m.eir")),
             ("opt", "-O3", str(tmp_path / "m.eir"), "-o", str(tmp_path / "m.dae")),
             ("asm", str(tmp_path / "m.dae"), "-o", str(tmp_path / "m.bin")),
             ("sim", str(tmp_path / "m.bin"), "--inputs", str(tmp_path / "in.npz"), "--outputs",
              str(tmp_path / "out.npz"))]
    for name, *args in steps:
        r = run_tool(name, *args)
        assert r.returncode == 0, (name, r.stderr.decode())
    eir = (tmp_path / "m.eir").read_text()
    assert ("emb.ttbag" in eir) == (not flag) and ("emb.gather" in eir) == bool(flag), eir
    (got,) = np.load(tmp_path / "out.npz").values()
    np.testing.assert_allclose(got, module(torch.from_numpy(feeds["indices"])).detach().numpy(), rtol=1e-5,
                               atol=1e-5)
