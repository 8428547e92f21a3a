"""EmbeddingBag variants: f16 and bf16 tables (summed in f32, rounded once), padding_idx."""

from __future__ import annotations

import numpy as np
import pytest

import ember.dialects  # noqa: F401
from ember.backend.binary import assemble, disassemble
from ember.ir.parser import parse_module
from ember.ir.types import ScalarType
from ember.machine import load_machine
from ember.passes import PRESETS, parse_pipeline, run_passes
from ember.sim.reference import simulate

ROWS, DIM = 30, 40  # 40 is not a multiple of the 32 16-bit lanes of a 512-bit vector

TEXT = """module {{
  func @main(%indices: tensor<?xi32>, %offsets: tensor<?xi64>{wdecl}) -> (tensor<?x{d}x{t}>) {{
    %table = param {{name = "table"}} : tensor<{r}x{d}x{t}>
    %out = emb.bag %table, %indices, %offsets{warg} {{mode = "{mode}", empty = "zero"}} : tensor<?x{d}x{t}>
    return %out
  }}
}}
"""


def reference(table: np.ndarray, idx: np.ndarray, off: np.ndarray, mode: str, w: np.ndarray | None) -> np.ndarray:
    """In f32 (to be rounded to the table's type by the caller)."""
    out = np.zeros((len(off) - 1, table.shape[1]), dtype=np.float32)
    for b in range(len(off) - 1):
        rows = table[idx[off[b]:off[b + 1]]].astype(np.float32)
        if w is not None:
            rows = rows * w[off[b]:off[b + 1], None].astype(np.float32)
        if len(rows):
            out[b] = rows.max(axis=0) if mode == "max" else rows.sum(axis=0) / (len(rows) if mode == "mean" else 1)
    return out


@pytest.mark.parametrize("level", ["O0", "O1", "O2", "O3", "core"])
@pytest.mark.parametrize("mode", ["sum", "mean", "max", "weighted"])
@pytest.mark.parametrize("elem", ["f16", "bf16"])
def test_narrow_bag_accumulates_in_f32(elem: str, mode: str, level: str) -> None:
    dtype = ScalarType(elem).numpy()
    rng = np.random.default_rng(3)
    table = rng.standard_normal((ROWS, DIM)).astype(dtype)
    idx = rng.integers(0, ROWS, size=23).astype(np.int32)
    off = np.array([0, 5, 5, 12, 23], dtype=np.int64)
    w = rng.standard_normal(23).astype(dtype) if mode == "weighted" else None
    text = TEXT.format(r=ROWS, d=DIM, t=elem, mode="sum" if w is not None else mode,
                       wdecl=f", %w: tensor<?x{elem}>" if w is not None else "", warg=", %w" if w is not None else "")
    module = parse_module(text, "half.eir")
    passes = parse_pipeline(PRESETS[level])
    run_passes(module, passes)
    program = passes[-1].program  # type: ignore[attr-defined]
    program.data[next(n for n, s in enumerate(program.symbols) if s.kind == "param")] = table
    program = disassemble(assemble(program), "half.bin")  # the .bin carries the narrow table
    feeds = {"indices": idx, "offsets": off} | ({"w": w} if w is not None else {})
    got, _ = simulate(program, feeds, load_machine("default"))
    out = next(iter(got.values()))
    assert out.dtype == dtype
    want = reference(table, idx, off, "sum" if w is not None else mode, w).astype(dtype).astype(np.float32)
    np.testing.assert_allclose(out.astype(np.float32), want, rtol=1e-2, atol=2e-2)


PAD_TEXT = """module {{
  func @main(%indices: tensor<?xi64>, %offsets: tensor<?xi64>) -> (tensor<?x24xf32>) {{
    %table = param {{name = "table"}} : tensor<30x24xf32>
    %out = emb.bag %table, %indices, %offsets {{mode = "{m}", empty = "zero", padding_idx = 2}} : tensor<?x24xf32>
    return %out
  }}
}}
"""


@pytest.mark.parametrize("level", ["O0", "O1", "O2", "O3", "core"])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_padding_idx_leaves_padding_rows_out(mode: str, level: str) -> None:
    rng = np.random.default_rng(1)
    table = rng.standard_normal((30, 24)).astype(np.float32)
    idx = np.array([2, 5, 2, 7, 2, 2, 9, 1, 2, 3], dtype=np.int64)
    off = np.array([0, 3, 4, 6, 6, 10], dtype=np.int64)  # bag 2 is padding only, bag 3 empty
    want = np.zeros((5, 24), np.float32)
    for b in range(5):
        rows = table[[i for i in idx[off[b]:off[b + 1]] if i != 2]]
        if len(rows):
            want[b] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
    module = parse_module(PAD_TEXT.format(m=mode), "pad.eir")
    passes = parse_pipeline(PRESETS[level])
    run_passes(module, passes)
    program = passes[-1].program  # type: ignore[attr-defined]
    program.data[next(n for n, s in enumerate(program.symbols) if s.kind == "param")] = table
    got, _ = simulate(program, {"indices": idx, "offsets": off}, load_machine("default"))
    np.testing.assert_allclose(next(iter(got.values())), want, rtol=1e-5, atol=1e-6)
