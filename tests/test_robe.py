"""ROBE bags (emb.robe): one shared array read in hashed blocks, at every level, on both engines.

The reference follows Hetu's CUDA kernels (src/ops/CompressedEmbedding.cu, `robe_hash_kernel` and
`robe_sign_kernel`, without the slot coefficient): element e = c Z + o of token x reads
M[(B x + D + o + C c) mod P mod |M|], times the sign 2 ((B' x + D' + C' e) mod P mod 2) - 1.  It is written here
in numpy on int64 arrays, element by element as those kernels index their output, then pooled in float64.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import OP_MODES, compile_text, run_tool
from test_fast_engine import assert_same, both

import ember.dialects  # noqa: F401
from ember.backend.dae import Program
from ember.backend.dae_text import parse_dae, print_dae
from ember.ir.diagnostics import EmberError

P = 2038074743  # the prime of Hetu's second version
HASH, SIGN = [1103515245, 12345, 2654435761 % P], [214013, 2531011, 69069]


def text(size: int, dim: int, block: int, mode: str = "sum", weighted: bool = False, extra: str = "") -> str:
    wdecl, warg = (", %w: tensor<?xf32>", ", %w") if weighted else ("", "")
    attrs = f'block = {block}, mode = "{mode}", prime = {P}, hash = {HASH}, sign = {SIGN}{extra}'
    head = f"func @main(%indices: tensor<?xi64>, %offsets: tensor<?xi64>{wdecl}) -> (tensor<?x{dim}xf32>)"
    return (f'module {{\n  {head} {{\n    %m = param {{name = "m"}} : tensor<{size}xf32>\n'
            f"    %out = emb.robe %m, %indices, %offsets{warg} {{{attrs}}} : tensor<?x{dim}xf32>\n"
            "    return %out\n  }\n}\n")


def hetu_rows(array: np.ndarray, x: np.ndarray, dim: int, block: int) -> np.ndarray:
    """Hetu's kernels: one thread per output element `ind` of a (len(x), dim) result."""
    ind = np.arange(len(x) * dim, dtype=np.int64)
    token, e = x.astype(np.int64)[ind // dim], ind % dim
    where = (HASH[0] * token + HASH[2] + e % block + HASH[1] * (e // block)) % P % len(array)
    sign = (SIGN[0] * token + SIGN[2] + SIGN[1] * e) % P % 2 * 2 - 1
    return (array[where].astype(np.float64) * sign).reshape(len(x), dim)


def reference(array: np.ndarray, idx: np.ndarray, off: np.ndarray, dim: int, block: int, mode: str,
              w: np.ndarray | None) -> np.ndarray:
    rows = hetu_rows(array, idx, dim, block)
    if w is not None:
        rows = rows * w.astype(np.float64)[:, None]
    out = np.zeros((len(off) - 1, dim))
    for b in range(len(off) - 1):
        out[b] = rows[off[b]:off[b + 1]].sum(axis=0)
        if mode == "mean":
            out[b] /= max(off[b + 1] - off[b], 1)
    return out


def compile_robe(source: str, array: np.ndarray, level: str) -> Program:
    return compile_text(source, {"m": array}, level, "robe.eir")


@pytest.mark.parametrize(("mode", "level"), OP_MODES)
@pytest.mark.parametrize(("size", "dim", "block"), [(97, 16, 4), (10, 12, 12)])  # a block longer than the array
def test_robe_bag_matches_hetus_kernels_on_both_engines(size: int, dim: int, block: int, mode: str,
                                                        level: str) -> None:
    rng = np.random.default_rng(size)
    array = rng.standard_normal(size).astype(np.float32)
    feeds = {"indices": rng.integers(0, 2**31 - 1, size=15).astype(np.int64), "offsets": np.array([0, 4, 4, 9, 15])}
    weighted = mode == "weighted"
    if weighted:
        feeds["w"] = rng.standard_normal(15).astype(np.float32)
    program = compile_robe(text(size, dim, block, "sum" if weighted else mode, weighted), array, level)
    ref_out, ref_st, out, st = both(program, feeds)
    (name,) = ref_out
    np.testing.assert_array_equal(out[name], ref_out[name])
    assert_same(ref_st, st)
    assert 0 < ref_st["sol_fraction"] <= 1
    want = reference(array, feeds["indices"], feeds["offsets"], dim, block, "sum" if weighted else mode,
                     feeds.get("w"))
    np.testing.assert_allclose(ref_out[name], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert not ref_out[name][1].any()


def test_blocks_are_contiguous_and_wrap_around_the_array() -> None:
    """The reference itself: a block's elements are consecutive array elements, mod |M| (the property ROBE's
    cache behaviour rests on), except where the hash crosses a multiple of P."""
    array = np.arange(13, dtype=np.float32)
    rows = np.abs(hetu_rows(array, np.array([5, 77, 2**30]), 8, 8))
    assert all(((np.diff(r) % 13) == 1).all() for r in rows)


@pytest.mark.parametrize(("change", "message"), [
    (lambda s: s.replace("block = 4", "block = 3"), "block must be a positive integer that divides the row width 16"),
    (lambda s: s.replace(f"prime = {P}", "prime = 4294967311"), "prime must be an integer in \\[2, 2\\*\\*31\\)"),
    (lambda s: s.replace(str(HASH), "[1, 2]"), "hash must be three integers"),
    (lambda s: s.replace(str(SIGN), "[1, -2, 3]"), "sign must be three integers"),
    (lambda s: s.replace('mode = "sum"', 'mode = "max"'), "mode must be one of sum, mean"),
    (lambda s: s.replace("tensor<97xf32>", "tensor<97xf16>"), "must be a non-empty tensor<Sxf32>"),
])
def test_bad_robe_bags_are_refused_with_their_position(tmp_path, change, message) -> None:
    src = tmp_path / "bad.eir"
    src.write_text(change(text(97, 16, 4)))
    r = run_tool("opt", str(src), "-O0", "-o", str(tmp_path / "out.dae"))
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err
    assert f"{src}:" in err and re.search(message, err), err
    assert not (tmp_path / "out.dae").exists()


def test_robe_work_record_round_trips_and_is_checked() -> None:
    program = compile_robe(text(97, 16, 4, "mean"), np.zeros(97, np.float32), "O0")
    (w,) = program.work
    assert (w.kind, w.mode, w.block) == ("robe", "mean", 4)
    assert parse_dae(print_dae(program), "r.dae").work == program.work
    with pytest.raises(EmberError, match="a robe record needs block=Z, a positive divisor of the output's width 16"):
        parse_dae(print_dae(program).replace("block=4", "block=5"), "r.dae")
