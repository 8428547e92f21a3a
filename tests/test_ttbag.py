"""Tensor-train bags (emb.ttbag): FBTT-Embedding's layout at every level, on both engines.

The reference is written here from the definition FBTT's `tt_matrix_to_full` implements (cores viewed as
p x R x q x R', the table's row digits and column digits interleaved, then permuted to rows x columns), in
float64 with numpy's einsum; the program contracts in float32, so the comparison allows float32 rounding.
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
from ember.ir.parser import parse_module
from ember.machine import load_machine
from ember.passes import parse_pipeline, run_passes
from ember.sim.work import chain_macs

TRAINS = {  # p, q, interior ranks
    2: ([6, 7], [4, 3], [5]),
    3: ([3, 4, 5], [2, 3, 2], [3, 4]),
    4: ([2, 3, 2, 3], [2, 2, 3, 1], [2, 3, 2]),
}
MACHINE = load_machine("default")
WIDE = dataclasses.replace(MACHINE, access=dataclasses.replace(MACHINE.access, traversal_units=12))


def text(p: list[int], q: list[int], ranks: list[int], rows: int, mode: str = "sum", weighted: bool = False,
         attrs: str = "") -> str:
    r = [1, *ranks, 1]
    n, d = len(p), int(np.prod(q))
    decl = "".join(f'    %g{k} = param {{name = "g{k}"}} : tensor<{p[k]}x{r[k]}x{q[k]}x{r[k + 1]}xf32>\n'
                   for k in range(n))
    cores = ", ".join(f"%g{k}" for k in range(n))
    wdecl, warg = (", %w: tensor<?xf32>", ", %w") if weighted else ("", "")
    op = f'emb.ttbag {cores}, %indices, %offsets{warg} {{cores = {n}, mode = "{mode}", rows = {rows}{attrs}}}'
    head = f"func @main(%indices: tensor<?xi64>, %offsets: tensor<?xi64>{wdecl}) -> (tensor<?x{d}xf32>)"
    return (f"module {{\n  {head} {{\n"
            f"{decl}    %out = {op} : tensor<?x{d}xf32>\n    return %out\n  }}\n}}\n")


def make_cores(p: list[int], q: list[int], ranks: list[int], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    r = [1, *ranks, 1]
    return [rng.standard_normal((p[k], r[k], q[k], r[k + 1])).astype(np.float32) for k in range(len(p))]


def full_table(cores: list[np.ndarray]) -> np.ndarray:
    """FBTT's tt_matrix_to_full: contract the ranks, then order the axes (p_0, p_1, ..., q_0, q_1, ...)."""
    letters = "abcd"
    terms = [f"{letters[k]}{'vwxyz'[k]}{'ijkl'[k]}{'vwxyz'[k + 1]}" for k in range(len(cores))]
    out = letters[:len(cores)] + "ijkl"[:len(cores)]
    full = np.einsum(",".join(terms) + "->" + out, *(c.astype(np.float64) for c in cores))
    rows, dim = int(np.prod([c.shape[0] for c in cores])), int(np.prod([c.shape[2] for c in cores]))
    return full.reshape(rows, dim)


def reference(cores: list[np.ndarray], idx: np.ndarray, off: np.ndarray, mode: str,
              w: np.ndarray | None) -> np.ndarray:
    table = full_table(cores)
    out = np.zeros((len(off) - 1, table.shape[1]))
    for b in range(len(off) - 1):
        for j in range(off[b], off[b + 1]):
            out[b] += table[idx[j]] * (1.0 if w is None else float(w[j]))
        if mode == "mean":
            out[b] /= max(off[b + 1] - off[b], 1)  # the program multiplies by 1 / length: rounding apart, equal
    return out


def compile_tt(source: str, cores: list[np.ndarray], level: str) -> Program:
    return compile_text(source, {f"g{k}": c for k, c in enumerate(cores)}, level, "tt.eir")


# Three cores at -O3 run in `make bench`; `make test` runs two and four cores there and three at every other level.
TT_CASES = op_mode_cases({"2": 2, "3": 3, "4": 4}, ("3",))


@pytest.mark.parametrize(("n", "mode", "level"), TT_CASES)
def test_tt_bag_matches_the_fbtt_definition_on_both_engines(n: int, mode: str, level: str) -> None:
    """Four cores take 12 loops, more than the default machine's 8 traversal units: decouple keeps that nest on the
    core (below: the remark, and the nest decoupled for a machine with 12)."""
    p, q, ranks = TRAINS[n]
    rows = int(np.prod(p)) - 3  # fewer rows than the train could hold, as FBTT rounds the p up
    cores = make_cores(p, q, ranks, seed=n)
    rng = np.random.default_rng(5)
    feeds = {"indices": rng.integers(0, rows, size=19).astype(np.int64), "offsets": np.array([0, 6, 6, 13, 19])}
    weighted = mode == "weighted"
    if weighted:
        feeds["w"] = rng.standard_normal(19).astype(np.float32)
    program = compile_tt(text(p, q, ranks, rows, "sum" if weighted else mode, weighted), cores, level)
    ref_out, ref_st, out, st = both(program, feeds, MACHINE)
    (name,) = ref_out
    np.testing.assert_array_equal(out[name], ref_out[name])  # one program: the engines agree bit for bit
    assert_same(ref_st, st)
    assert 0 < ref_st["sol_fraction"] <= 1
    want = reference(cores, feeds["indices"], feeds["offsets"], "sum" if weighted else mode, feeds.get("w"))
    np.testing.assert_allclose(ref_out[name], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert not ref_out[name][1].any()  # the empty bag


def test_a_train_deeper_than_the_machine_stays_on_the_core_unless_tuned_for_more_units() -> None:
    """decouple{tus=8} (the default) keeps the 12-loop nest on the core with a remark; decouple{tus=12} decouples
    it, which a machine with 12 traversal units runs and the default machine refuses with a clean error."""
    p, q, ranks = TRAINS[4]
    cores = make_cores(p, q, ranks)
    feeds = {"indices": np.array([3, 4, 29]), "offsets": np.array([0, 2, 3])}
    want = reference(cores, feeds["indices"], feeds["offsets"], "sum", None)
    module = parse_module(text(p, q, ranks, 30), "tt.eir")
    passes = parse_pipeline("lower-emb,decouple")
    run_passes(module, passes)
    [remark] = passes[1].remarks  # type: ignore[attr-defined]
    assert remark.endswith("remark: decouple: nest kept on the core: it has 12 loops, more than the 8 traversal "
                           "units it is tuned for (tus=N)"), remark
    with pytest.raises(EmberError, match="pass 'decouple': tus=0 must be a positive number of traversal units"):
        parse_pipeline("decouple{tus=0}")
    wide = compile_tt(text(p, q, ranks, 30), cores, "lower-emb,decouple{tus=12},to-dlc,codegen")
    with pytest.raises(EmberError, match="uses 12 traversal units; the machine has 8"):
        both(wide, feeds)
    ref_out, ref_st, out, st = both(wide, feeds, WIDE)
    assert_same(ref_st, st)
    assert ref_st["callbacks"] > 0
    (name,) = ref_out
    np.testing.assert_array_equal(out[name], ref_out[name])
    np.testing.assert_allclose(ref_out[name], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_an_index_past_the_train_is_a_clean_error(tmp_path) -> None:
    p, q, ranks = TRAINS[2]
    cores = make_cores(p, q, ranks)
    program = compile_tt(text(p, q, ranks, 42), cores, "O0")
    with pytest.raises(EmberError, match="out of range"):
        both(program, {"indices": np.array([3, 42 + 5]), "offsets": np.array([0, 2])})


@pytest.mark.parametrize(("change", "message"), [
    (lambda s: s.replace("rows = 39", "rows = 43"), "rows must be an integer in \\[1, 42\\]"),
    (lambda s: s.replace("cores = 2", "cores = 3"), "takes 3 cores"),
    (lambda s: s.replace("cores = 2", "cores = 5"), "cores must be 2, 3 or 4"),
    (lambda s: s.replace("7x5x3x1", "7x4x3x1"), "rank R_1 = 4 differs from core 0's R_1 = 5"),
    (lambda s: s.replace("7x5x3x1", "7x5x3x2"), "must end with rank 1"),
    (lambda s: s.replace('mode = "sum"', 'mode = "max"'), "mode must be one of sum, mean"),
    (lambda s: s.replace("tensor<?x12xf32>", "tensor<?x11xf32>"), "result must be tensor<\\?x12xf32>"),
])
def test_bad_tt_bags_are_refused_with_their_position(tmp_path, change, message) -> None:
    src = tmp_path / "bad.eir"
    src.write_text(change(text(*TRAINS[2], rows=39)))
    r = run_tool("opt", str(src), "-O0", "-o", str(tmp_path / "out.dae"))
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err
    assert f"{src}:" in err and "error:" in err
    assert re.search(message, err), err
    assert not (tmp_path / "out.dae").exists()


def test_work_record_round_trips_and_is_checked() -> None:
    p, q, ranks = TRAINS[3]
    program = compile_tt(text(p, q, ranks, 50, "mean"), make_cores(p, q, ranks), "O0")
    (w,) = program.work
    assert (w.kind, w.mode, w.rows) == ("ttbag", "mean", 50) and len(w.cores()) == 3
    again = parse_dae(print_dae(program), "tt.dae")
    assert again.work == program.work
    text_form = print_dae(program)
    for bad, message in [(f"rows={w.rows}", "rows=61"), (f" part2=@{w.part2}", ""),
                         (f"part1=@{w.part1}", f"part1=@{w.part2}")]:
        broken = text_form.replace(bad, message)
        with pytest.raises(EmberError, match="ttbag record|do not chain|core|rows"):
            parse_dae(broken, "tt.dae")


def test_the_bound_counts_the_cheapest_contraction_order() -> None:
    """Worked out by hand: cores 1x4x2, 2x4x8, 8x4x1 (R x q x R').  Left to right costs 1*4*2*4*8 = 256 for the
    first two, then 16*8*4 = 512; right to left 2*4*8*4 = 256, then 4*2*16 = 128."""
    assert chain_macs([1, 2, 8, 1], [4, 4, 4]) == 384
    assert chain_macs([1, 16, 1], [8, 8]) == 1024  # two cores: one way only
    assert chain_macs([1, 1], [64]) == 0  # one core is already the row
