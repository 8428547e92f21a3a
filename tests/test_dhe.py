"""Deep hash embedding bags (emb.dhe): k hashes, a uniform encoding and an MLP, at every level, on both engines.

The reference follows Hetu's `learn_hash_kernel` (src/ops/CompressedEmbedding.cu) with `normal` false: hash i of
x is (x slope_i + bias_i) mod prime_i mod m, encoded as (float)h / (m - 1) * 2 - 1; here in numpy on int64 (Hetu
multiplies in int, which the 64-bit op does not overflow), then nn.Linear layers y = x W^T + b with ReLU between
them, in float64, and the rows pooled.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from conftest import compile_text, op_mode_cases, run_tool
from test_fast_engine import assert_same, both

import ember.dialects  # noqa: F401
from ember.backend.dae import Program
from ember.backend.dae_text import parse_dae, print_dae
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine

MACHINE = load_machine("default")
WIDE = dataclasses.replace(MACHINE, access=dataclasses.replace(MACHINE.access, traversal_units=12))
BUCKETS = 1_000_000


def text(widths: list[int], mode: str = "sum", weighted: bool = False, buckets: int = BUCKETS) -> str:
    """widths: k, then each layer's outputs (the last is D)."""
    k, layers = widths[0], len(widths) - 1
    decl = "".join(f'    %{n} = param {{name = "{n}"}} : tensor<{k}xi64>\n' for n in ("slope", "bias", "prime"))
    for i in range(layers):
        decl += (f'    %w{i} = param {{name = "w{i}"}} : tensor<{widths[i + 1]}x{widths[i]}xf32>\n'
                 f'    %b{i} = param {{name = "b{i}"}} : tensor<{widths[i + 1]}xf32>\n')
    args = ", ".join(["%slope", "%bias", "%prime"] + [f"%w{i}, %b{i}" for i in range(layers)])
    wdecl, warg = (", %w: tensor<?xf32>", ", %w") if weighted else ("", "")
    d = widths[-1]
    head = f"func @main(%indices: tensor<?xi64>, %offsets: tensor<?xi64>{wdecl}) -> (tensor<?x{d}xf32>)"
    op = f'emb.dhe {args}, %indices, %offsets{warg} {{buckets = {buckets}, layers = {layers}, mode = "{mode}"}}'
    return f"module {{\n  {head} {{\n{decl}    %out = {op} : tensor<?x{d}xf32>\n    return %out\n  }}\n}}\n"


def make_params(widths: list[int], seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    k = widths[0]
    out = {"slope": rng.integers(1, 2**31 - 1, k), "bias": rng.integers(0, 2**31 - 1, k),
           "prime": rng.choice(np.array([2038074743, 1000000007, 998244353, 2147483647]), k)}
    for i in range(len(widths) - 1):
        out[f"w{i}"] = (rng.standard_normal((widths[i + 1], widths[i])) / np.sqrt(widths[i])).astype(np.float32)
        out[f"b{i}"] = rng.standard_normal(widths[i + 1]).astype(np.float32) * np.float32(0.1)
    return out


def reference(params: dict[str, np.ndarray], idx: np.ndarray, off: np.ndarray, layers: int, mode: str,
              w: np.ndarray | None, buckets: int = BUCKETS) -> np.ndarray:
    x = idx.astype(np.int64)[:, None]
    h = (x * params["slope"] + params["bias"]) % params["prime"] % buckets
    act = (h.astype(np.float32) / np.float32(buckets - 1) * np.float32(2) - np.float32(1)).astype(np.float64)
    for i in range(layers):
        act = act @ params[f"w{i}"].T.astype(np.float64) + params[f"b{i}"]
        if i < layers - 1:
            act = np.maximum(act, 0.0)
    if w is not None:
        act = act * w[:, None]
    out = np.zeros((len(off) - 1, act.shape[1]))
    for b in range(len(off) - 1):
        out[b] = act[off[b]:off[b + 1]].sum(axis=0)
        if mode == "mean":
            out[b] /= max(off[b + 1] - off[b], 1)
    return out


def compile_dhe(source: str, params: dict[str, np.ndarray], level: str) -> Program:
    return compile_text(source, params, level, "dhe.eir")


# One and two layers at -O3 run in `make bench`; `make test` runs three layers there, and every width at every other
# level.
DHE_CASES = op_mode_cases({"widths0": [16, 8], "widths1": [24, 16, 8], "widths2": [12, 10, 6, 4]},
                          ("widths0", "widths1"))


@pytest.mark.parametrize(("widths", "mode", "level"), DHE_CASES)
def test_dhe_bag_matches_hetus_encoding_and_an_mlp_on_both_engines(widths: list[int], mode: str, level: str) -> None:
    """Three layers take 9 loops, more than the default machine's 8 traversal units: decouple keeps that nest on
    the core, and decouple{tus=9} (test_three_layers_decoupled_on_a_machine_with_nine_units) does not."""
    params = make_params(widths, seed=len(widths))
    rng = np.random.default_rng(3)
    feeds = {"indices": rng.integers(0, 2**40, size=13).astype(np.int64), "offsets": np.array([0, 5, 5, 9, 13])}
    weighted = mode == "weighted"
    if weighted:
        feeds["w"] = rng.standard_normal(13).astype(np.float32)
    program = compile_dhe(text(widths, "sum" if weighted else mode, weighted), params, level)
    ref_out, ref_st, out, st = both(program, feeds, MACHINE)
    (name,) = ref_out
    np.testing.assert_array_equal(out[name], ref_out[name])
    assert_same(ref_st, st)
    assert 0 < ref_st["sol_fraction"] <= 1
    want = reference(params, feeds["indices"], feeds["offsets"], len(widths) - 1, "sum" if weighted else mode,
                     feeds.get("w"))
    np.testing.assert_allclose(ref_out[name], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert not ref_out[name][1].any()


def test_three_layers_decoupled_on_a_machine_with_nine_units() -> None:
    widths = [12, 10, 6, 4]
    params = make_params(widths, seed=3)
    feeds = {"indices": np.array([5, 2**40, 7], np.int64), "offsets": np.array([0, 2, 3])}
    program = compile_dhe(text(widths), params, "lower-emb,decouple{tus=9},to-dlc,codegen")
    with pytest.raises(EmberError, match="uses 9 traversal units; the machine has 8"):
        both(program, feeds)
    ref_out, ref_st, out, st = both(program, feeds, WIDE)
    assert_same(ref_st, st)
    assert ref_st["callbacks"] > 0
    (name,) = ref_out
    np.testing.assert_array_equal(out[name], ref_out[name])
    want = reference(params, feeds["indices"], feeds["offsets"], 3, "sum", None)
    np.testing.assert_allclose(ref_out[name], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize(("change", "message"), [
    (lambda s: s.replace("layers = 2", "layers = 4"), "layers must be 1, 2 or 3"),
    (lambda s: s.replace("layers = 2", "layers = 1"), "takes the hashes' slope, bias and prime, 1 weight"),
    (lambda s: s.replace("buckets = 1000000", "buckets = 1"), "buckets must be an integer in \\[2, 2\\*\\*31\\)"),
    (lambda s: s.replace("tensor<16x24xf32>", "tensor<16x23xf32>"), "layer 1's weight must take 24 inputs"),
    (lambda s: s.replace("%b1 = param {name = \"b1\"} : tensor<8xf32>", "%b1 = param {name = \"b1\"} : "
                         "tensor<9xf32>"), "layer 2's bias must have one entry per output \\(8\\)"),
    (lambda s: s.replace("%prime = param {name = \"prime\"} : tensor<24xi64>",
                         "%prime = param {name = \"prime\"} : tensor<24xi32>"), "prime must be a tensor<kxi64>"),
    (lambda s: s.replace('mode = "sum"', 'mode = "max"'), "mode must be one of sum, mean"),
])
def test_bad_dhe_bags_are_refused_with_their_position(tmp_path, change, message) -> None:
    src = tmp_path / "bad.eir"
    src.write_text(change(text([24, 16, 8])))
    r = run_tool("opt", str(src), "-O0", "-o", str(tmp_path / "out.dae"))
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err
    assert f"{src}:" in err and re.search(message, err), err
    assert not (tmp_path / "out.dae").exists()


def test_dhe_work_record_round_trips_and_is_checked() -> None:
    widths = [24, 16, 8]
    program = compile_dhe(text(widths, "mean"), make_params(widths), "O0")
    (w,) = program.work
    assert (w.kind, w.mode) == ("dhe", "mean") and [program.symbols[c].shape for c in w.cores()] == [(16, 24),
                                                                                                     (8, 16)]
    assert parse_dae(print_dae(program), "d.dae").work == program.work
    with pytest.raises(EmberError, match="the layers of a dhe record do not chain"):
        parse_dae(print_dae(program).replace(f"part1=@{w.part1}", f"part1=@{w.table}"), "d.dae")
