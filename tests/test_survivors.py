"""Tests written to kill the mutants a hand-picked mutation campaign left alive (issue 13, point 7).

Each test names the mutant it kills.  Every one was checked by applying the mutant to a copy of the
tree and watching the test fail; docs/testing.md lists them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import MODELS, compile_model, run_here, run_tool
from test_fast_engine import assert_same, both

from ember.backend.binary import assemble, disassemble
from ember.backend.dae import Program
from ember.ir.parser import parse_module
from ember.passes import PRESETS, parse_pipeline, run_passes


def compile_text(text: str, pipeline: str) -> Program:
    """An `.eir` text (without params) through `pipeline` and the binary, as ember-opt | ember-asm would."""
    passes = parse_pipeline(pipeline)
    run_passes(parse_module(text, "t.eir"), passes)
    return disassemble(assemble(passes[-1].program), "t.bin")  # type: ignore[attr-defined]


def on_both_engines(program: Program, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs of the reference engine, after checking the fast engine gives the same outputs and stats."""
    ref_out, ref_st, out, st = both(program, feeds)
    assert sorted(out) == sorted(ref_out)
    for k in ref_out:
        np.testing.assert_array_equal(out[k], ref_out[k], err_msg=k)
    assert_same(ref_st, st)
    return ref_out


# ---------------------------------------------------------------------------------------------------------
# The fast engine's scalar fmin computed as fmax: min/max scatters and max bags on both engines.

SCATTER = """module {{
  func @main(%data: tensor<?x{d}xf32>, %idx: tensor<?xi64>, %upd: tensor<?x{d}xf32>) -> (tensor<?x{d}xf32>) {{
    %y = emb.scatter_rows %data, %idx, %upd {{reduction = "{r}"}} : tensor<?x{d}xf32>
    return %y
  }}
}}
"""


def scatter_reference(data: np.ndarray, idx: np.ndarray, upd: np.ndarray, reduction: str) -> np.ndarray:
    want = data.copy()
    {"min": np.minimum, "max": np.maximum, "add": np.add, "mul": np.multiply}[reduction].at(want, idx, upd)
    return want


@pytest.mark.parametrize("level", ["O0", "O1", "O3", "core"])
@pytest.mark.parametrize("reduction", ["min", "max", "add", "mul"])
def test_min_max_scatter_is_identical_on_both_engines(reduction: str, level: str) -> None:
    """Kills fmin-as-fmax (and fmax-as-fmin, vfmin/vfmax swapped) in either engine: rows hit several times,
    updates on both sides of the row they meet; add and mul too (lower-emb's table of combining ops)."""
    rng = np.random.default_rng(11)
    d = 8
    data = rng.standard_normal((6, d)).astype(np.float32)
    idx = np.array([0, 3, 3, 5, 0, 3, 1], dtype=np.int64)
    upd = rng.standard_normal((len(idx), d)).astype(np.float32)
    got = on_both_engines(compile_text(SCATTER.format(d=d, r=reduction), PRESETS[level]),
                          {"data": data, "idx": idx, "upd": upd})
    want = scatter_reference(data, idx, upd, reduction)
    other = {"min": "max", "max": "min", "add": "mul", "mul": "add"}[reduction]
    assert not np.array_equal(want, scatter_reference(data, idx, upd, other))
    np.testing.assert_array_equal(next(iter(got.values())), want)


GATHER_WRAP = """module {
  func @main(%t: tensor<?x4xf32>, %i: tensor<?xi64>) -> (tensor<?x4xf32>) {
    %y = emb.gather %t, %i {negative = "wrap"} : tensor<?x4xf32>
    return %y
  }
}
"""


@pytest.mark.parametrize("level", ["O0", "O3"])
def test_gather_wraps_negative_indices_by_a_table_size_known_at_run_time(level: str) -> None:
    """lower-emb's wrap of negative indices reads the row count of a table given as an input (a dynamic
    extent), not a constant."""
    t = np.arange(28, dtype=np.float32).reshape(7, 4)
    i = np.array([0, -1, 3, -7, 6, -2], dtype=np.int64)
    got = on_both_engines(compile_text(GATHER_WRAP, PRESETS[level]), {"t": t, "i": i})
    np.testing.assert_array_equal(next(iter(got.values())), t[i])


@pytest.mark.parametrize("level", ["O0", "O2", "O3"])
@pytest.mark.parametrize("model", ["bag_max.pt2", "bag_pad_max.pt2", "bag_max.traced.pt"])
def test_torch_max_models_are_identical_on_both_engines(model: str, level: str) -> None:
    """The torch-frontend max models, simulated on the fast engine too, against PyTorch's outputs."""
    stem = model.split(".")[0]
    got = on_both_engines(compile_model(MODELS / model, level), dict(np.load(MODELS / f"{stem}.in.npz")))
    want = np.load(MODELS / f"{stem}.torch.out.npz")["output"]
    np.testing.assert_allclose(got["output"], want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("reduce", ["amin", "amax"])
def test_torch_min_max_scatter_graph_is_identical_on_both_engines(tmp_path: Path, reduce: str) -> None:
    """A torch.export scatter_reduce(amin / amax) graph (no torch needed), compiled and run on both engines."""
    from test_frontend_torch import I, T, write_pt2  # noqa: E741

    rng = np.random.default_rng(8)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    src = np.array([0, 4, 2, 2, 1, 3, 0], dtype=np.int64)
    dst = np.array([1, 1, 4, 0, 1, 4, 2], dtype=np.int64)
    a = "torch.ops.aten."
    nodes = [(a + "index_select.default", {"self": T("x"), "dim": I(0), "index": T("src")}, ["msg"]),
             (a + "unsqueeze.default", {"self": T("dst"), "dim": I(1)}, ["col"]),
             (a + "expand.default", {"self": T("col"), "size": {"as_ints": [-1, 3]}}, ["idx"]),
             (a + "scatter_reduce.two", {"self": T("x"), "dim": I(0), "index": T("idx"), "src": T("msg"),
                                         "reduce": {"as_string": reduce}, "include_self": {"as_bool": True}},
              ["output"])]
    feeds = {"x": x, "src": src, "dst": dst}
    path = write_pt2(tmp_path / "s.pt2", feeds, {}, nodes, "output")
    want = scatter_reference(x, dst, x[src], reduce[1:])
    for level in ("O0", "O3"):
        program = compile_model(path, level)
        ops = ("fmin", "vfmin") if reduce == "amin" else ("fmax", "vfmax")
        assert any(getattr(i, "base", "") in ops for i in program.code)
        np.testing.assert_array_equal(on_both_engines(program, feeds)["output"], want)


# ---------------------------------------------------------------------------------------------------------
# Decline checks: inputs a pass must leave alone, whose output would be wrong if it did not.


def run_loop(text: str, pipeline: str, feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, list[str]]:
    """A loop-level program through `pipeline`, run on both engines: (its output, every pass's remarks)."""
    passes = parse_pipeline(pipeline)
    run_passes(parse_module(text, "d.eir"), passes)
    program = disassemble(assemble(passes[-1].program), "d.bin")  # type: ignore[attr-defined]
    out = on_both_engines(program, feeds)
    return next(iter(out.values())), [r for p in passes for r in getattr(p, "remarks", [])]


def declined(remarks: list[str], what: str) -> bool:
    return any(what in r for r in remarks)


PROLOGUE = """    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %n = loop.dim %x {axis = 0} : index
"""

# out[j] = x[j] + out[0] for j in order: lane j > 0 must see out[0] as iteration 0 left it.
READS_WHAT_IT_WRITES = """module {
  func @main(%x: memref<?xf32>, %o: memref<1xi64>) -> (memref<?xf32>) {
""" + PROLOGUE + """    %out = loop.alloc %n : memref<?xf32>
    %one = loop.const {value = 1.0} : f32
    loop.for %c0, %n, %c1 (%i: index) {
      loop.store %one, %out, %i
    }
    loop.for %c0, %c1, %c1 (%b: index) {
      %z = loop.load %o, %b : i64
      loop.for %c0, %n, %c1 (%j: index) {
        %v = loop.load %x, %j : f32
        %p = loop.load %out, %c0 : f32
        %s = loop.addf %v, %p : f32
        loop.store %s, %out, %j
      }
    }
    return %out
  }
}
"""


def test_vectorize_declines_lanes_that_read_what_the_callback_writes() -> None:
    """Kills the removal of vectorize's aliasing check ('lanes would read or write the same element')."""
    x = np.arange(1, 21, dtype=np.float32)
    got, remarks = run_loop(READS_WHAT_IT_WRITES, "decouple,vectorize{vl=8},to-dlc,codegen",
                            {"x": x, "o": np.zeros(1, np.int64)})
    want = np.ones(20, np.float32)
    for j in range(20):
        want[j] = x[j] + want[0]
    np.testing.assert_array_equal(got, want)
    assert declined(remarks, "vectorize: loop not vectorized: lanes would read or write the same element")


DOUBLE_INDEX = """module {
  func @main(%x: memref<?x?xf32>, %o: memref<1xi64>) -> (memref<?x?xf32>) {
""" + PROLOGUE + """    %out = loop.alloc %n, %n : memref<?x?xf32>
    %zero = loop.const {value = 0.0} : f32
    loop.for %c0, %n, %c1 (%i: index) {
      loop.for %c0, %n, %c1 (%k: index) {
        loop.store %zero, %out, %i, %k
      }
    }
    loop.for %c0, %c1, %c1 (%b: index) {
      %z = loop.load %o, %b : i64
      loop.for %c0, %n, %c1 (%j: index) {
        %v = loop.load %x, {load} : f32
        loop.store %v, %out, {store}
      }
    }
    return %out
  }
}
"""


@pytest.mark.parametrize(("load", "store", "why"), [
    ("%j, %j", "%c0, %j", "'slc.mem' uses the induction variable other than as the last index"),
    ("%c0, %j", "%j, %j", "an index other than the last depends on the induction variable"),
])
def test_vectorize_declines_an_index_used_twice(load: str, store: str, why: str) -> None:
    """Kills the removal of vectorize's double-index checks: the diagonal x[j, j] on the access side, and a
    store to out[j, j] in the callback, are not vectors of consecutive elements."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((9, 9)).astype(np.float32)
    got, remarks = run_loop(DOUBLE_INDEX.replace("{load}", load).replace("{store}", store),
                            "decouple,vectorize{vl=4},to-dlc,codegen", {"x": x, "o": np.zeros(1, np.int64)})
    want = np.zeros((9, 9), np.float32)
    for j in range(9):
        src = x[j, j] if load == "%j, %j" else x[0, j]
        want[(j, j) if store == "%j, %j" else (0, j)] = src
    np.testing.assert_array_equal(got, want)
    assert declined(remarks, f"vectorize: loop not vectorized: {why}")


# A ragged copy out[j] = 2 x[j] over [lb, ub) of each bag: bounds the access unit loads (streams).
RAGGED = """module {
  func @main(%x: memref<?xf32>, %off: memref<?xi64>) -> (memref<?xf32>) {
""" + PROLOGUE + """    %out = loop.alloc %n : memref<?xf32>
    %zero = loop.const {value = 0.0} : f32
    %two = loop.const {value = 2.0} : f32
    loop.for %c0, %n, %c1 (%i: index) {
      loop.store %zero, %out, %i
    }
    %m = loop.dim %off {axis = 0} : index
    %nb = loop.subi %m, %c1 : index
    loop.for %c0, %nb, %c1 (%b: index) {
      %s = loop.load %off, %b : i64
      %b1 = loop.addi %b, %c1 : index
      %e = loop.load %off, %b1 : i64
      loop.for LB, UB, %c1 (%j: index) {
        %v = loop.load %x, %j : f32
        %w = loop.mulf %v, %two : f32
        %p = loop.load %out, %j : f32
        %q = loop.addf %p, %w : f32
        loop.store %q, %out, %j
      }
    }
    return %out
  }
}
"""


@pytest.mark.parametrize(("lb", "ub"), [("%s", "%e"), ("%c0", "%e"), ("%s", "%n")])
def test_bufferize_declines_bounds_from_streams(lb: str, ub: str) -> None:
    """Kills the removal (or narrowing to one bound) of bufferize's check that the core knows the loop's
    bounds: either bound a stream, the loop must stay unbuffered, and still add up as numpy does."""
    x = np.arange(1, 31, dtype=np.float32)
    off = np.array([0, 3, 3, 17, 30], dtype=np.int64)
    got, remarks = run_loop(RAGGED.replace("LB", lb).replace("UB", ub),
                            "decouple,vectorize{vl=8},bufferize,to-dlc,codegen", {"x": x, "off": off})
    want = np.zeros(30, np.float32)
    for b in range(4):
        lo, hi = (off[b] if lb == "%s" else 0), (off[b + 1] if ub == "%e" else 30)
        want[lo:hi] += 2 * x[lo:hi]
    np.testing.assert_array_equal(got, want)
    assert declined(remarks, "bufferize: loop not bufferized: its bounds come from streams")


def test_init_ahead_declines_an_update_of_another_row() -> None:
    """Kills the removal of init-ahead's off-row check: iteration i adds to row off[i] (5 here), which the
    moved initialisation would reset when it reaches row 5 two iterations ahead, losing earlier updates."""
    from test_optimizations import SCALAR_UPDATE, SLC_LEVEL

    text = SLC_LEVEL.format(cols="x1", zero=", %c0", start="loop.subi %c0, %c1 : index",
                            update=SCALAR_UPDATE.replace("%row", "%h"))
    off = np.full(9, 5, np.int64)
    got, remarks = run_loop(text, "init-ahead{rows=2},to-dlc,codegen", {"off": off})
    want = np.full(9, 1.5, np.float32)
    want[5] += 9
    np.testing.assert_array_equal(got[:, 0], want)
    assert declined(remarks, "init-ahead: rows of '") and declined(remarks, "updates a row other than its own")


# Per bag: a scale computed before the inner loop (in the ite callback) and used after it (at its end).
ACROSS_CALLBACKS = """module {
  func @main(%x: memref<?xf32>, %off: memref<?xi64>) -> (memref<?xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %m = loop.dim %off {axis = 0} : index
    %nb = loop.subi %m, %c1 : index
    %out = loop.alloc %nb : memref<?xf32>
    %zero = loop.const {value = 0.0} : f32
    %half = loop.const {value = 0.5} : f32
    loop.for %c0, %nb, %c1 (%b: index) {
      %s = loop.load %off, %b : i64
      %b1 = loop.addi %b, %c1 : index
      %e = loop.load %off, %b1 : i64
      %w = loop.load %x, %b : f32
      SCALE
      loop.store %zero, %out, %b
      loop.for %s, %e, %c1 (%j: index) {
        %v = loop.load %x, %j : f32
        %p = loop.load %out, %b : f32
        %q = loop.addf %p, %v : f32
        loop.store %q, %out, %b
      }
      %t = loop.load %out, %b : f32
      %r = loop.mulf %t, USE : f32
      loop.store %r, %out, %b
    }
    return %out
  }
}
"""


@pytest.mark.parametrize("across", [False, True])
def test_decouple_groups_ops_after_an_inner_loop_at_its_end(across: bool) -> None:
    """Kills decouple's end-callback grouping mutants: the scaling after the inner loop must run at its end
    (not with the zeroing before it), and a core value used by both callbacks keeps the nest on the core."""
    text = ACROSS_CALLBACKS.replace("SCALE", "%k = loop.mulf %w, %half : f32" if across else "")
    text = text.replace("USE", "%k" if across else "%half")
    x = np.arange(1, 13, dtype=np.float32)
    off = np.array([0, 4, 4, 9, 12], dtype=np.int64)
    got, remarks = run_loop(text, "decouple,to-dlc,codegen", {"x": x, "off": off})
    want = np.array([x[off[b]:off[b + 1]].sum() * (x[b] * 0.5 if across else 0.5) for b in range(4)], np.float32)
    np.testing.assert_array_equal(got, want)
    kept = declined(remarks, "decouple: nest kept on the core: value %k is computed in one callback and used in")
    assert kept == across


# ---------------------------------------------------------------------------------------------------------
# align-queues in pipelines a user can write (not only the presets), through the command-line tools.

ALIGNED = ["lower-emb,decouple,align-queues,to-dlc,codegen",
           "lower-emb,decouple,vectorize{vl=7},align-queues,to-dlc,codegen",
           "lower-emb,decouple,vectorize,bufferize,align-queues,to-dlc,codegen",
           "lower-emb,decouple,vectorize,unroll,hoist,simplify-mem,promote-accumulators,align-queues,to-dlc,codegen"]
ALIGN_MODELS = ("bag_sum.ts", "bag_mean.dynamo", "mp_sum.ts")


def aligned_case(model: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Feeds for a sample model (bags with empty ones among them, edges into repeated nodes) and numpy's result."""
    from ember.frontends import load_weights_any

    if model.startswith("mp_sum"):
        rng = np.random.default_rng(3)
        x = rng.standard_normal((12, 8)).astype(np.float32)
        src, dst = rng.integers(0, 12, 30), rng.integers(0, 5, 30)
        want = np.zeros_like(x)
        np.add.at(want, dst, x[src])
        return {"x": x, "src": src, "dst": dst}, want
    table = load_weights_any(str(MODELS / f"{model}.onnx"))["bag.weight"]
    idx = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9], dtype=np.int64)
    off = np.array([0, 0, 4, 4, 9, 12], dtype=np.int64)  # bags 0 and 3 are empty
    want = np.zeros((len(off), table.shape[1]), np.float32)
    for b, (s, e) in enumerate(zip(off, np.append(off[1:], len(idx)))):
        if e > s:
            want[b] = table[idx[s:e]].sum(axis=0) / (e - s if "mean" in model else 1)
    return {"indices": idx, "offsets": off}, want


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for model in ALIGN_MODELS:
        path = tmp_path_factory.mktemp("imp") / f"{model}.eir"
        r = run_tool("import", str(MODELS / f"{model}.onnx"), "-o", str(path))
        assert r.returncode == 0, r.stderr.decode()
        out[model] = path
    return out


@pytest.mark.parametrize(("model", "pipeline"), [(m, p) for m in ALIGN_MODELS for p in ALIGNED
                                                 if m != "bag_mean.dynamo" or p == ALIGNED[0]])  # mean: once
def test_align_queues_in_user_pipelines_matches_numpy(imported: dict[str, Path], tmp_path: Path, model: str,
                                                      pipeline: str) -> None:
    """Kills align-queues counting in the wrong callback (a new ite callback, the end callback of the inner
    loop, or a one-head ite callback, and where in it): ember-opt with the pass in a non-preset pipeline,
    ember-asm and ember-sim, against numpy."""
    feeds, want = aligned_case(model)
    np.savez(tmp_path / "in.npz", **feeds)
    dae, binary, outs = tmp_path / "m.dae", tmp_path / "m.bin", tmp_path / "out.npz"
    for tool, args in (("opt", [f"--pass={pipeline}", str(imported[model]), "-o", str(dae)]),
                       ("asm", [str(dae), "-o", str(binary)]),
                       ("sim", [str(binary), "--inputs", str(tmp_path / "in.npz"), "--outputs", str(outs)])):
        r = run_here(tool, *args)  # the commands themselves, without three interpreter starts
        assert r.returncode == 0, r.stderr.decode()
    np.testing.assert_allclose(np.load(outs)["output"], want, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------------------------------------
# The bench report's geomean rows (a geomean over n dividing by n + 1 survived).


def test_bench_geomean_rows_are_the_geometric_mean_of_the_rows_above() -> None:
    """Every 'geomean' row of the speedup, hand and core tables, against statistics.geometric_mean of the
    per-workload ratios computed here from the cycles."""
    import statistics

    from ember.bench.report import ResultIndex, core_table, hand_table, speedup_table
    from ember.bench.run import Result

    rng = np.random.default_rng(4)
    names = ["w_a", "w_b", "w_c"]
    span = {"O0": (60_000, 90_000), "core": (30_000, 50_000), "O1": (9_000, 20_000), "O3": (3_000, 6_000),
            "hand": (1_000, 2_500)}  # ratios well away from 1, where a wrong mean shows
    cycles = {(w, v): float(rng.integers(*span[v])) for w in names for v in span}
    idx = ResultIndex([Result(w, v, {"cycles": c, "sol_fraction": 0.5}) for (w, v), c in cycles.items()])

    def last_row(table: object, column: str) -> str:
        col = next(c for c in table.columns if c.header == column)  # type: ignore[attr-defined]
        cells = list(col._cells)
        assert len(cells) == len(names) + 1
        return str(cells[-1])

    def number(cell: str) -> float:
        return float(cell.split()[0].rstrip("×%"))

    want = {"O0/O1": statistics.geometric_mean([cycles[w, "O0"] / cycles[w, "O1"] for w in names]),
            "O0/O3": statistics.geometric_mean([cycles[w, "O0"] / cycles[w, "O3"] for w in names])}
    for column, value in want.items():
        assert number(last_row(speedup_table(idx), column)) == pytest.approx(value, abs=0.006)
    hand = statistics.geometric_mean([100 * cycles[w, "hand"] / cycles[w, "O3"] for w in names])
    assert number(last_row(hand_table(idx), "O3 % of hand: ours (published)")) == pytest.approx(hand, abs=0.06)
    core = statistics.geometric_mean([cycles[w, "core"] / cycles[w, "O3"] for w in names])
    assert number(last_row(core_table(idx), "speedup")) == pytest.approx(core, abs=0.006)


# ---------------------------------------------------------------------------------------------------------
# Guards: inputs that must be refused, each with the message that says why.


def test_bag_verifier_refuses_weights_with_mean_or_max() -> None:
    """Kills the removal of emb.bag's check that per-sample weights come with mode sum."""
    from test_bag_variants import TEXT

    from ember.ir.core import verify
    from ember.ir.diagnostics import EmberError

    for mode in ("mean", "max"):
        text = TEXT.format(r=10, d=4, t="f32", mode=mode, wdecl=", %w: tensor<?xf32>", warg=", %w")
        with pytest.raises(EmberError, match='per-sample weights need mode "sum"'):
            verify(parse_module(text, "w.eir"))
    verify(parse_module(TEXT.format(r=10, d=4, t="f32", mode="sum", wdecl=", %w: tensor<?xf32>", warg=", %w"), "w"))


NESTED = """module {
  func @main(%x: memref<?xf32>) -> (memref<?xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %n = loop.dim %x {axis = 0} : index
    loop.for %c0, %n, %c1 (%i: index) {
      %c1 = loop.const {value = 2} : index
      %v = loop.load %x, %i : f32
    }
    return %x
  }
}
"""


def test_parser_refuses_a_name_redefined_in_a_nested_region() -> None:
    """Kills a parser that looks for an earlier definition in the innermost scope only."""
    from ember.ir.diagnostics import EmberError

    with pytest.raises(EmberError, match=r"n.eir:7:7: error: value %c1 is defined twice"):
        parse_module(NESTED, "n.eir")
    arg = NESTED.replace("      %c1 = loop.const {value = 2} : index\n", "").replace("%i", "%n")
    with pytest.raises(EmberError, match=r"n.eir:6:28: error: value %n is defined twice"):  # a block argument
        parse_module(arg, "n.eir")


def test_parser_refuses_a_repeated_attribute_key() -> None:
    """Kills the removal of the parser's repeated-key check (the second value would silently win)."""
    from ember.ir.diagnostics import EmberError

    text = NESTED.replace("%c1 = loop.const {value = 2}", "%c2 = loop.const {value = 2, value = 3}")
    with pytest.raises(EmberError, match=r"n.eir:7:36: error: attribute 'value' given twice"):
        parse_module(text, "n.eir")


def _tampered(tmp_path: Path, form: Path, edit: object) -> str:
    import onnx

    model = onnx.load(str(form))
    edit(model.graph)  # type: ignore[operator]
    path = tmp_path / form.name
    onnx.save(model, str(path))
    return str(path)


def _set_int(graph: object, name: str, value: int) -> None:
    """Give the integer constant `name` (an initializer or a Constant node, in any subgraph) a new value."""
    import onnx
    from onnx import numpy_helper

    def visit(g: onnx.GraphProto) -> bool:
        for i, t in enumerate(g.initializer):
            if t.name == name:
                old = numpy_helper.to_array(t)
                g.initializer[i].CopyFrom(numpy_helper.from_array(np.full(old.shape, value, old.dtype), name))
                return True
        for node in g.node:
            if node.op_type == "Constant" and node.output[0] == name:
                a = node.attribute[0]
                old = numpy_helper.to_array(a.t)
                a.t.CopyFrom(numpy_helper.from_array(np.full(old.shape, value, old.dtype)))
                return True
            if any(visit(a.g) for a in node.attribute if a.type == onnx.AttributeProto.GRAPH):
                return True
        return False

    assert visit(graph), name  # type: ignore[arg-type]


def test_onnx_bag_whose_ends_stop_short_is_refused(tmp_path: Path) -> None:
    """Kills the removal of the TorchScript bag's check that the bag ends run to the end of the offsets:
    Slice(offsets, 1, 3) would leave the later bags without an end."""
    from test_onnx_loops import _refused

    def edit(g: object) -> None:
        loop_ends = next(n for n in g.node if n.op_type == "Slice")  # type: ignore[attr-defined]
        _set_int(g, loop_ends.input[2], 3)

    _refused(_tampered(tmp_path, MODELS / "bag_sum.ts.onnx", edit), r"the bag ends should be the offsets without")


def test_onnx_bag_loop_over_zero_bags_is_refused(tmp_path: Path) -> None:
    """Kills the zero-bag guard: a loop entered unconditionally runs its body once even when there is no bag."""
    from test_onnx_loops import FORMS_DIR, _refused

    def edit(g: object) -> None:
        g.input[1].type.tensor_type.shape.dim[0].dim_value = 0  # type: ignore[attr-defined]
        for v in g.value_info:  # type: ignore[attr-defined]
            if v.name == "offsets_6":
                v.type.tensor_type.shape.dim[0].dim_value = 1
        _set_int(g, "num_bag_7", 0)

    _refused(_tampered(tmp_path, FORMS_DIR / "sum.o20.static.seq-first.onnx", edit),
             "a loop entered unconditionally needs at least one bag")


@pytest.mark.parametrize("shift", [0, 1])
def test_onnx_padding_index_past_the_table_is_refused(tmp_path: Path, shift: int) -> None:
    """Kills an off-by-one in the padding guard: padding_idx = rows (and rows + 1) is not a row of the table."""
    import onnx
    from test_onnx_loops import FORMS_DIR, PAD, _refused

    form = FORMS_DIR / "pad.o20.static.seq-first.onnx"
    rows = next(t.dims[0] for t in onnx.load(str(form)).graph.initializer if len(t.dims) == 2)

    def edit(g: object) -> None:
        def consts(graph: onnx.GraphProto) -> list[str]:
            found = []
            for node in graph.node:
                if node.op_type == "Equal":
                    found += list(node.input)
                for a in node.attribute:
                    if a.type == onnx.AttributeProto.GRAPH:
                        found += consts(a.g)
            return found

        values = {t.name: t for t in g.initializer}  # type: ignore[attr-defined]
        pad = [n for n in consts(g) if n in values and onnx.numpy_helper.to_array(values[n]).size == 1
               and int(onnx.numpy_helper.to_array(values[n])) == PAD]
        assert len(pad) == 1
        _set_int(g, pad[0], rows + shift)

    _refused(_tampered(tmp_path, form, edit), f"the padding index {rows + shift} is not a row of the table")


# ---------------------------------------------------------------------------------------------------------
# DRAM bookings that exactly abut (dram.py's Calendar.book and runtime.h's book).

# (request time, start) for transfers of xfer = 4 cycles, worked out by hand from the definition in
# ember/sim/dram.py (the earliest [start, start + 4) at or after the request overlapping no booking):
ABUTTING = [(10, 10),  # [10, 14)
            (2, 2),    # [2, 6): ends 4 cycles before [10, 14)
            (6, 6),    # [6, 10) fits exactly between [2, 6) and [10, 14), abutting both
            (0, 14),   # [2, 14) is full: after it
            (18, 18),  # abuts [.., 18) from the right
            (30, 30),
            (26, 26),  # [26, 30) ends exactly where [30, 34) starts
            (22, 22),  # [22, 26) fills the last gap exactly
            (21, 34)]  # [21, 25) would overlap: everything from 2 to 34 is booked


def test_dram_booking_that_abuts_the_next_is_taken_in_the_python_model() -> None:
    from ember.machine import load_machine
    from ember.sim.cache import MemorySystem

    machine = load_machine("default").with_overrides(["dram.device=ideal", "dram.channels=1",
                                                      "dram.bytes_per_cycle=16"])
    mem = MemorySystem.from_machine(machine)
    assert mem.xfer == 64 / 16 == 4
    bus = mem.dram.buses[0]
    assert [bus.book(float(now), mem.xfer) for now, _ in ABUTTING] == [float(s) for _, s in ABUTTING]
    assert list(zip(bus.starts, bus.ends)) == [(2.0, 38.0)]  # merged: no gap left, no overlap


def test_dram_booking_that_abuts_the_next_is_taken_in_the_fast_engine(tmp_path: Path) -> None:
    import ctypes
    import subprocess
    from importlib import resources

    from ember.sim.fast import build

    cc = build.compiler()
    if cc is None:
        pytest.skip("no C compiler")
    src = resources.files("ember.sim.fast").joinpath("runtime.h").read_text() + """
void book_all(const double *now, int64_t n, double x, double *out) {
    double ds[64], de[64];
    Channel c = {ds, de, 0, 64, 0};
    Mem m;
    memset(&m, 0, sizeof m);
    m.ch = &c; m.nch = 1; m.line_time = x; m.line_share = x;
    for (int64_t i = 0; i < n; i++) out[i] = book(&m, 0, now[i]);
}
"""
    (tmp_path / "b.c").write_text(src)
    subprocess.run([cc, *build.CFLAGS, str(tmp_path / "b.c"), "-o", str(tmp_path / "b.so")], check=True)
    lib = ctypes.CDLL(str(tmp_path / "b.so"))
    now = np.array([t for t, _ in ABUTTING], dtype=np.float64)
    out = np.zeros_like(now)
    lib.book_all(now.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(len(now)), ctypes.c_double(4.0),
                 out.ctypes.data_as(ctypes.c_void_p))
    np.testing.assert_array_equal(out, [s for _, s in ABUTTING])


def test_align_queues_counts_in_a_callback_the_loop_already_has() -> None:
    """Kills align-queues mutants that still compute right but count in a new callback (one more token per
    iteration): where the only reader is the end callback of the inner loop (bags) or a one-head ite callback
    (message rows), the pass must drop the index operands and add no token."""
    from ember.frontends import import_model, load_weights_any

    pipeline = "lower-emb,decouple,vectorize,unroll,hoist,simplify-mem,promote-accumulators,{}to-dlc,codegen"
    for model, dropped in (("bag_sum.ts", 6), ("mp_sum.ts", None)):
        feeds = dict(np.load(MODELS / f"{model.split('.')[0]}.in.npz"))
        weights = load_weights_any(str(MODELS / f"{model}.onnx"))
        st = {}
        for aq in ("", "align-queues,"):
            module = import_model(str(MODELS / f"{model}.onnx"), "m")
            passes = parse_pipeline(pipeline.format(aq))
            run_passes(module, passes)
            program = passes[-1].program  # type: ignore[attr-defined]
            for n, s in enumerate(program.symbols):
                if s.kind == "param":
                    program.data[n] = weights[s.name]
            _, _, _, st[aq] = both(program, feeds)
        assert st["align-queues,"]["tokens"] == st[""]["tokens"], model
        drop = st[""]["operands"] - st["align-queues,"]["operands"]
        assert drop == dropped if dropped is not None else drop > 0, model


# ---------------------------------------------------------------------------------------------------------
# The reference engine's pop waits for its operand (execute.Core.pop_entry's `e.ready`): inert whenever operands
# travel with their token (the dispatch has already waited for the token, ready only once its operands are), so
# only operands pushed without a token reach it.

TOKENLESS = """.dae 2
.sym @0 input "x" f32 [?]
.sym @1 output "y" f32 [?]
.access A0 1
  tu t0, 0, p0, 64
  mem s0, @0[t0]
  on t0, ite, [s0]
  on t0, end, [], 1
.end
.code
  dim r1, @0, 0
  alloc @1, [1]
  run A0, r1
  halt
A0.1:
  li r3, 64
L0:
  bge r2, r1, L1
  pop f1
  fadd.f32 f2, f2, f1
  add r2, r2, r3
  jmp L0
L1:
  st f2, @1[0]
  ret
.end
"""


def test_a_pop_waits_for_an_operand_pushed_without_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """Operands of one element per line of x (each a DRAM miss), read by the callback of a later token that is
    ready at once: every pop must issue no earlier than its operand arrived."""
    from ember.backend.dae_text import parse_dae
    from ember.machine import load_machine
    from ember.sim import execute, reference

    popped = []
    pop_entry = execute.Core.pop_entry

    def spy(self: execute.Core, ins: object) -> object:
        e = pop_entry(self, ins)  # type: ignore[arg-type]
        popped.append(e)
        return e

    monkeypatch.setattr(execute.Core, "pop_entry", spy)
    x = np.arange(64 * 64, dtype=np.float32)
    out, _ = reference.simulate(parse_dae(TOKENLESS, "t.dae"), {"x": x}, load_machine("default"))
    assert out["y"][0] == x[::64].sum()
    assert len(popped) == 64 and all(e.pop >= e.ready for e in popped)
    assert any(e.ready > popped[0].ready for e in popped)  # the operands did arrive at different times


# ---------------------------------------------------------------------------------------------------------
# The IR parser's errors, in process (mutmut maps tests to functions by what runs in the test's own process, so
# the command-line tests of test_bad_input do not count for ember/ir).

FUNC = "module {{\n  func @main() -> () {{\n{body}"


@pytest.mark.parametrize(("text", "want"), [
    (FUNC.format(body="    return ]\n  }\n}\n"),
     "s.eir:3:12: error: unexpected ']' (expected COLON, LBRACE, LPAR, VALUE)\n    return ]\n           ^"),
    (FUNC.format(body="    return $\n  }\n}\n"), "s.eir:3:12: error: unexpected character '$'\n    return $\n"),
    (FUNC.format(body=""), "s.eir:2:23: error: unexpected end of input"),
])
def test_ir_syntax_errors_name_the_position_and_what_was_expected(text: str, want: str) -> None:
    from ember.ir.diagnostics import EmberError

    with pytest.raises(EmberError) as e:
        parse_module(text, "s.eir")
    assert str(e.value).startswith(want)


@pytest.mark.parametrize(("value", "col", "got"), [
    ("inf", 28, "inf"), ("-1", 28, "-1"), ('"17"', 28, '"17"'), ("9223372036854775808", 28, "9223372036854775808"),
    ("true", 20, "true"), ("[1]", 29, "a list")])
def test_ir_opset_must_be_an_int64_version(value: str, col: int, got: str) -> None:
    from ember.ir.diagnostics import EmberError

    text = f"module attributes {{opset = {value}}} {{\n}}\n"
    with pytest.raises(EmberError) as e:
        parse_module(text, "s.eir")
    assert str(e.value) == (f"s.eir:1:{col}: error: module attribute 'opset' must be an ONNX opset version (an "
                            f"integer from 0 to 2^63 - 1), got {got}\n{text.splitlines()[0]}\n{' ' * (col - 1)}^")
    for ok in (0, 17, (1 << 63) - 1):
        assert parse_module(f"module attributes {{opset = {ok}}} {{\n}}\n", "s.eir").attrs["opset"] == ok


def test_ember_error_renders_its_position_and_survives_pickling() -> None:
    """How every error reaches the user (file:line:col, a caret under the column) and crosses a process
    boundary (the fuzzer's workers, the sweep's scheduler): a pickled error keeps its message."""
    import pickle

    from ember.ir.diagnostics import EmberError, Loc

    assert str(EmberError("no position")) == "error: no position"
    assert str(EmberError("bad member", "m.pt")) == "m.pt: error: bad member"
    assert str(EmberError("bad", Loc("f.eir", 2, 5), "  x = y  \n")) == "f.eir:2:5: error: bad\n  x = y\n    ^"
    assert str(EmberError("bad", "f.eir", "text")) == "f.eir: error: bad"  # a caret needs a Loc
    again = pickle.loads(pickle.dumps(EmberError("lost?")))
    assert isinstance(again, EmberError) and str(again) == "error: lost?" and again.args == ("lost?",)


# A row copy per bag, and an inner loop that only loads (a prefetch): it fires no callback.
NO_CALLBACK = """module {
  func @main(%x: memref<?xf32>) -> (memref<?xf32>) {
""" + PROLOGUE + """    %out = loop.alloc %n : memref<?xf32>
    loop.for %c0, %n, %c1 (%b: index) {
      %w = loop.load %x, %b : f32
      loop.store %w, %out, %b
      loop.for %c0, %n, %c1 (%j: index) {
        %v = loop.load %x, %j : f32
      }
    }
    return %out
  }
}
"""


def test_bufferize_says_why_a_loop_without_callback_is_left_alone() -> None:
    x = np.arange(1, 10, dtype=np.float32)
    got, remarks = run_loop(NO_CALLBACK, "decouple,vectorize{vl=4},bufferize,to-dlc,codegen", {"x": x})
    np.testing.assert_array_equal(got, x)
    assert declined(remarks, "bufferize: loop not bufferized: it has no per-iteration callback")


def test_init_ahead_declines_a_counter_set_again_in_the_loop() -> None:
    """Kills the removal of init-ahead's check that nothing else sets the counter: here the callback puts it
    back, so every iteration updates row 0; moving the initialisation would leave rows 3.. uninitialised."""
    from test_optimizations import SCALAR_UPDATE, SLC_LEVEL

    update = SCALAR_UPDATE.replace("%row", "%now") + "\n        loop.setvar %g {var = 0}"
    text = SLC_LEVEL.format(cols="x1", zero=", %c0", start="loop.subi %c0, %c1 : index", update=update)
    got, remarks = run_loop(text, "init-ahead{rows=2},to-dlc,codegen", {"off": np.zeros(9, np.int64)})
    want = np.full(9, 1.5, np.float32)
    want[0] += 9
    np.testing.assert_array_equal(got[:, 0], want)
    assert declined(remarks, "init-ahead: output rows still initialised up front")
