"""choose-plan's decisions and remarks, the estimate behind them, and the declines of init-ahead and
promote-accumulators, on small hand-written modules (issue 13, point 7: written against mutation-testing
survivors, each checked to fail on the mutants it targets)."""

from __future__ import annotations

import dataclasses
import math
import re
import signal

import numpy as np
import pytest
from test_survivors import run_loop

import ember.dialects  # noqa: F401
from ember.ir.core import Op, verify
from ember.ir.diagnostics import EmberError
from ember.ir.parser import parse_module
from ember.ir.printer import print_module
from ember.machine import load_machine
from ember.passes import parse_pipeline, run_passes
from ember.passes.choose_plan import PLANS, ChoosePlan, o3_after
from ember.passes.cost import Target, default_target, estimate

# ---------------------------------------------------------------------------------------------------------
# choose-plan: what it says and keeps.


def plan(text: str, pipeline: str = "choose-plan") -> tuple[list[str], Op]:
    """choose-plan's remarks for a loop-level module (run alone, it plans for -O3's passes), and the module."""
    passes = parse_pipeline(pipeline)
    module = parse_module(text, "t.eir")
    run_passes(module, passes)
    return [r for p in passes if isinstance(p, ChoosePlan) for r in p.remarks], module


MODELS = __import__("pathlib").Path(__file__).parent.parent / "samples" / "models"
FOR_O3 = " (for -O3's passes: none decouples after choose-plan in this pipeline)"
KEEPS_O0 = "and to lose at others; with sizes known only at run time -O3 keeps -O0's code (run-time versioning is " \
           "not built)"
DEFAULT = default_target()  # the default machine's numbers
IDEAL = Target.of(load_machine("ideal-dram"))  # its core over ideal DRAM: a full miss is 5 + 11 + 44 + 160 + 2 = 222

# A fill whose length is computed from extents known only at run time: the output is allocated with it, so
# only the loop bound's arithmetic names the inputs whose lengths matter (they are never read).
FILL = """module {
  func @main(%x: memref<?xf32>, %y: memref<?xf32>) -> (memref<?xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %nx = loop.dim %x {axis = 0} : index
    %ny = loop.dim %y {axis = 0} : index
    LENGTH
    %out = loop.alloc %n : memref<?xf32>
    %one = loop.const {value = 1.0} : f32
    loop.for %c0, %n, %c1 (%i: index) {
      loop.store %one, %out, %i
    }
    work %x, %y, %out {op = "emb.gather"}
    return %out
  }
}
"""


SIZES = [2 ** k for k in range(21)]  # one extent: every power of two from 1 to 2**20
# two extents: 14 powers each, 2**round(20 k / 13) for k < 14 (floor(sqrt(200)) = 14)
POWERS_14 = [1, 4, 8, 32, 64, 256, 512, 2048, 4096, 16384, 32768, 131072, 262144, 1048576]


def per_point(text: str, points: list[dict[int, int]], lower: bool = False) -> list[dict[str, float]]:
    """Each plan's estimated cycles with the extent 0 of argument `a` taken as `n` for each {a: n} of `points`,
    from the plans choose-plan compiles (the passes -O3 runs after it)."""
    module = parse_module(text, "t.eir")
    if lower:
        run_passes(module, parse_pipeline("lower-emb"))
    args = module.body.ops[0].body.args
    trials = {p: ChoosePlan().trial(module, p, o3_after()) for p in PLANS}
    return [{p: estimate(nests[0], sizes={(vmap[args[a]], 0): n for a, n in point.items()}).cycles
             for p, (nests, vmap) in trials.items()} for point in points]


def wins(e: dict[str, float], margin: float) -> list[str]:
    """The plans that beat -O0's at one size by choose-plan's rule: `margin` percent cheaper, the core also by
    one miss more."""
    slack = {"optimized": 0.0, "core": DEFAULT.miss}
    return [p for p in ("optimized", "core") if e[p] <= e["decoupled"] * (1 - margin / 100) - slack[p]]


WINNERS = {"optimized": "optimizing", "core": "the core"}


def test_a_length_known_only_at_run_time_is_tried_at_21_sizes() -> None:
    """n = len(x): one extent, tried at 2**0 .. 2**20.  Optimizing the fill wins at some sizes and loses at
    others, so -O0's plan is kept; the remark counts the wins and names the extent by the input it measures."""
    text = FILL.replace("LENGTH", "%n = loop.addi %nx, %c0 : index")
    won = [n for n, e in zip(SIZES, per_point(text, [{0: n} for n in SIZES])) if wins(e, 10)]
    assert 0 < len(won) < len(SIZES)
    remarks, module = plan(text)
    assert remarks == ["t.eir:13:5: remark: choose-plan: emb.gather kept decoupled as at -O0, not optimized: "
                       f"optimizing is estimated to win at {len(won)} of 21 sizes of x[0] from 1 to 2**20 (the "
                       f"smallest: x[0] = {min(won):,}) {KEEPS_O0}{FOR_O3}"]
    assert [o.attrs.get("plan") for o in module.walk() if o.name == "loop.for"] == ["decoupled"]


def test_two_lengths_are_tried_at_14_sizes_each_and_the_smallest_win_is_the_fewest_elements() -> None:
    """n = len(x)**2 * len(y): two extents, 14 sizes each, 196 points.  The smallest win reported is the one
    with the fewest elements (the product of the sizes): here a larger x reaches a winning n with a much
    smaller y, so it is not the first win in the order the points are tried."""
    text = FILL.replace("LENGTH", "%xx = loop.muli %nx, %nx : index\n    %n = loop.muli %xx, %ny : index")
    points = [(x, y) for x in POWERS_14 for y in POWERS_14]
    won = [xy for xy, e in zip(points, per_point(text, [{0: x, 1: y} for x, y in points])) if wins(e, 10)]
    smallest = min(won, key=lambda xy: xy[0] * xy[1])
    assert smallest != won[0]
    remarks, _ = plan(text)
    assert remarks == ["t.eir:14:5: remark: choose-plan: emb.gather kept decoupled as at -O0, not optimized: "
                       f"optimizing is estimated to win at {len(won)} of 196 sizes of x[0], y[0] from 1 to 2**20 "
                       f"(the smallest: x[0] = {smallest[0]:,}, y[0] = {smallest[1]:,}) {KEEPS_O0}{FOR_O3}"]


def test_every_extent_in_a_loop_bound_is_tried() -> None:
    """n = len(x) + len(y): both extents count, so a size is tried for each (only y's would leave x unknown)."""
    remarks, _ = plan(FILL.replace("LENGTH", "%n = loop.addi %nx, %ny : index"))
    assert len(remarks) == 1 and "196 sizes of x[0], y[0] from 1 to 2**20" in remarks[0]


def test_five_lengths_are_tried_at_their_ends_only() -> None:
    """Five extents: floor(200 ** (1/5)) = 2 sizes each (2**5 = 32 <= 200 < 3**5), 1 and 2**20: 32 points."""
    inputs = ", ".join(f"%{v}: memref<?xf32>" for v in "abcde")
    dims = "".join(f"    %n{v} = loop.dim %{v} {{axis = 0}} : index\n" for v in "abcde")
    length = dims + "    %s1 = loop.addi %na, %nb : index\n    %s2 = loop.addi %s1, %nc : index\n" \
        "    %s3 = loop.addi %s2, %nd : index\n    %n = loop.addi %s3, %ne : index"
    text = FILL.replace("%x: memref<?xf32>, %y: memref<?xf32>", inputs).replace(
        "    %nx = loop.dim %x {axis = 0} : index\n    %ny = loop.dim %y {axis = 0} : index\n    LENGTH", length)
    remarks, _ = plan(text.replace("work %x, %y, %out", "work %a, %b, %out"))
    assert len(remarks) == 1 and " 32 sizes of a[0], b[0], c[0], d[0], e[0] from 1 to 2**20" in remarks[0]


# Eight bags over a 40-row table whose number of lookups is known only at run time.
DYNAMIC_BAG = """module {
  func @main(%indices: tensor<?xi64>, %offsets: tensor<9xi64>) -> (tensor<8x@Dxf32>) {
    %table = param {name = "table"} : tensor<40x@Dxf32>
    %output = emb.bag %table, %indices, %offsets {mode = "@M", empty = "zero"} : tensor<8x@Dxf32>
    return %output
  }
}
"""
def test_with_no_margin_a_plan_as_fast_as_o0_at_some_sizes_and_faster_at_others_is_kept() -> None:
    """max-bags of 2-float rows: optimizing is estimated as fast as -O0 at some sizes and faster at the others;
    with margin=0 nothing says it must be faster at every size."""
    text = DYNAMIC_BAG.replace("@D", "2").replace("@M", "max")
    est = per_point(text, [{0: n} for n in SIZES], lower=True)
    assert all(e["optimized"] <= e["decoupled"] for e in est) and any(e["optimized"] == e["decoupled"] for e in est)
    remarks, _ = plan(text, "lower-emb,choose-plan{margin=0}")
    assert remarks == ["t.eir:4:15: remark: choose-plan: emb.bag decoupled and optimized: sizes known only at run "
                       "time (indices[0]); estimated no slower than -O0 at every one of 21 sizes of indices[0] from 1 "
                       f"to 2**20{FOR_O3}"]


def test_the_core_must_win_by_a_miss_at_every_size() -> None:
    """sum-bags of 8-float rows: the core is estimated faster than -O0 at every size, but by less than one
    miss at some, so it is not kept; the remark counts the sizes where some plan wins by the static rule
    (margin 0: optimizing no slower, the core a miss faster) and names the smallest."""
    text = DYNAMIC_BAG.replace("@D", "8").replace("@M", "sum")
    est = per_point(text, [{0: n} for n in SIZES], lower=True)
    assert all(e["core"] <= e["decoupled"] for e in est)
    assert any(e["core"] > e["decoupled"] - DEFAULT.miss for e in est)
    assert not all(e["optimized"] <= e["decoupled"] for e in est)
    won = [n for n, e in zip(SIZES, est) if wins(e, 0)]
    winners = " or ".join(WINNERS[p] for p in ("optimized", "core") if any(p in wins(e, 0) for e in est))
    remarks, _ = plan(text, "lower-emb,choose-plan{margin=0}")
    assert winners == "optimizing or the core"
    assert remarks == ["t.eir:4:15: remark: choose-plan: emb.bag kept decoupled as at -O0, not optimized: "
                       f"{winners} is estimated to win at {len(won)} of 21 sizes of indices[0] from 1 to 2**20 "
                       f"(the smallest: indices[0] = {min(won):,}) {KEEPS_O0}{FOR_O3}"]


# A bag whose inner loop is bounded by offsets and walks only a 2-D table: how many lookups a bag has is known
# only at run time and nothing the estimate can assume (the length of an index array) gives it.
UNBOUNDED = """module {
  func @main(%offsets: memref<?xi64>, %table: memref<100x1xf32>) -> (memref<?x1xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %m = loop.dim %offsets {axis = 0} : index
    %nb = loop.subi %m, %c1 : index
    %out = loop.alloc %nb : memref<?x1xf32>
    %zero = loop.const {value = 0.0} : f32
    loop.for %c0, %nb, %c1 (%i: index) {
      loop.store %zero, %out, %i, %c0
    }
    loop.for %c0, %nb, %c1 (%b: index) {
      %s = loop.load %offsets, %b : i64
      %b1 = loop.addi %b, %c1 : index
      %e = loop.load %offsets, %b1 : i64
      loop.for %s, %e, %c1 (%j: index) {
        %v = loop.load %table, %j, %c0 : f32
        %p = loop.load %out, %b, %c0 : f32
        %q = loop.addf %p, %v : f32
        loop.store %q, %out, %b, %c0
      }
    }
    work %table, %offsets, %offsets, %out {op = "emb.bag", mode = "sum", empty = "zero"}
    return %out
  }
}
"""


def test_trip_counts_the_estimate_cannot_follow_keep_o0() -> None:
    remarks, module = plan(UNBOUNDED)
    assert remarks == ["t.eir:23:5: remark: choose-plan: emb.bag kept decoupled as at -O0, not optimized: its trip "
                       "counts are known only at run time and the estimate cannot follow them, so -O3 keeps -O0's "
                       f"code{FOR_O3}"]
    assert [o.attrs.get("plan") for o in module.body.ops[0].body.ops if o.name == "loop.for"] == ["decoupled"] * 2


BAG = """module {
  func @main(%indices: tensor<64xi64>, %offsets: tensor<9xi64>) -> (tensor<8x16xf32>) {
    %table = param {name = "table"} : tensor<1000x16xf32>
    %output = emb.bag %table, %indices, %offsets {mode = "sum", empty = "zero"} : tensor<8x16xf32>
    return %output
  }
}
"""


def test_after_decouple_the_refusal_points_at_the_operation() -> None:
    """choose-plan run on a decoupled module refuses at the emb op's position, as every error reaches the user."""
    with pytest.raises(EmberError) as e:
        plan(BAG, "lower-emb,decouple,choose-plan")
    assert str(e.value) == ("t.eir:4:15: error: pass 'choose-plan' must run before 'decouple' (right after lower-emb, "
                            "as in -O3): this module is already decoupled, so there are no loop nests left to plan")


def test_static_sizes_name_each_plans_estimate_and_bound() -> None:
    """With every size known the remark lists the three estimates, in the order the plans are tried."""
    remarks, _ = plan(BAG, "lower-emb,choose-plan")
    bound = r"\((?:execute|access|dram)[.a-z]*\)"
    assert len(remarks) == 1
    assert re.fullmatch(rf"t\.eir:4:15: remark: choose-plan: emb\.bag [a-z -]+: decoupled [\d,]+ {bound}, optimized "
                        rf"[\d,]+ {bound}, on the core [\d,]+ {bound} estimated cycles(?:; [^;]+)*{re.escape(FOR_O3)}",
                        remarks[0]), remarks[0]


# ---------------------------------------------------------------------------------------------------------
# The estimate (cost.py) on core nests small enough to follow by hand.


def estimate_of(text: str, sizes: dict[tuple[int, int], int] | None = None,
                target: Target = DEFAULT) -> tuple[float, str, float]:
    """(cycles, bound, the bound's cycles) of the module's top-level loop nests (core or access), which must
    verify; `sizes` maps (argument number, axis) to an extent assumed for it."""
    module = parse_module(text, "c.eir")
    verify(module)
    func = module.body.ops[0]
    given = {(func.body.args[a], axis): n for (a, axis), n in (sizes or {}).items()}
    est = estimate([o for o in func.body.ops if o.name in ("loop.for", "slc.for")], target, given)
    return est.cycles, est.bound, est.parts[est.bound]


# out[j, k] += 1 for i < N, j < J, k < K: each element is read, incremented and written back N times, and the
# J * K elements interleave, so the chain is N updates of (fp add + L1 hit) = 9 cycles: 9 N, whatever J and K.
RECURRENCE = """module {
  func @main(%out: memref<2x2xf32>) -> (memref<2x2xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %cn = loop.const {value = 1000} : index
    %cj = loop.const {value = J} : index
    %ck = loop.const {value = K} : index
    %one = loop.const {value = 1.0} : f32
    loop.for %c0, %cn, %c1 (%i: index) {
      loop.for %c0, %cj, %c1 (%j: index) {
        loop.for %c0, %ck, %c1 (%k: index) {
          %p = loop.load %out, %j, %k : f32
          %q = loop.addf %p, %one : f32
          loop.store %q, %out, %j, %k
        }
      }
    }
    return %out
  }
}
"""


@pytest.mark.parametrize(("j", "k"), [(2, 2), (2, 1), (1, 2)])
def test_an_accumulator_chain_is_spread_over_the_elements_that_interleave(j: int, k: int) -> None:
    add = DEFAULT.fp_alu_latency + DEFAULT.latencies[0]
    _, bound, cycles = estimate_of(RECURRENCE.replace("J", str(j)).replace("K", str(k)))
    assert (bound, cycles) == ("execute.recurrence", 1000 * add)


# out[i, k] += 1 + 1 + 1 + 1 under a loop.if that always holds: each element is updated once, so there is no
# chain across iterations (the guard does not hide that the element depends on i).
GUARDED = """module {
  func @main(%out: memref<1000x2xf32>) -> (memref<1000x2xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %c2 = loop.const {value = 2} : index
    %cn = loop.const {value = 1000} : index
    %one = loop.const {value = 1.0} : f32
    loop.for %c0, %cn, %c1 (%i: index) {
      loop.if %i, %cn {pred = "lt"} () {
        loop.for %c0, %c2, %c1 (%k: index) {
          %p = loop.load %out, %i, %k : f32
          %q1 = loop.addf %p, %one : f32
          %q2 = loop.addf %q1, %one : f32
          %q3 = loop.addf %q2, %one : f32
          %q4 = loop.addf %q3, %one : f32
          loop.store %q4, %out, %i, %k
        }
      }
    }
    return %out
  }
}
"""


def test_an_element_updated_once_per_outer_iteration_has_no_chain_even_under_a_guard() -> None:
    _, bound, _ = estimate_of(GUARDED)
    assert bound != "execute.recurrence"


# out[j + 0 + ... + 0, 0] += 1 + 1 for i < 1000, j < 2, the index computed through 17 additions.
CHAIN = """module {
  func @main(%out: memref<2x1xf32>) -> (memref<2x1xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %c2 = loop.const {value = 2} : index
    %cn = loop.const {value = 1000} : index
    %one = loop.const {value = 1.0} : f32
    loop.for %c0, %cn, %c1 (%i: index) {
      loop.for %c0, %c2, %c1 (%j: index) {
        %a0 = loop.addi %j, %c0 : index
ADDS        %p = loop.load %out, %a16, %c0 : f32
        %q0 = loop.addf %p, %one : f32
        %q = loop.addf %q0, %one : f32
        loop.store %q, %out, %a16, %c0
      }
    }
    return %out
  }
}
"""


def test_an_index_computed_through_17_additions_still_names_its_loop() -> None:
    """The two elements interleave as in the chain test above, however the index is computed: the chain is
    1000 updates of (2 fp adds + L1 hit) = 13 cycles."""
    adds = "".join(f"        %a{k} = loop.addi %a{k - 1}, %c0 : index\n" for k in range(1, 17))
    _, bound, cycles = estimate_of(CHAIN.replace("ADDS", adds))
    assert (bound, cycles) == ("execute.recurrence", 1000 * (2 * DEFAULT.fp_alu_latency + DEFAULT.latencies[0]))


def test_an_index_of_deep_shared_arithmetic_is_estimated_promptly() -> None:
    """out[i + i, then doubled 39 times more] in a loop over j: the index is a chain of 40 additions of a
    value to itself, 2**40 paths back to i, none to j; looking for j along every path would not end.  Both j
    iterations update the same element, so the chain is 2000 updates of (2 fp adds + L1 hit) = 13 cycles."""
    adds = "".join(f"        %a{k} = loop.addi %a{k - 1}, %a{k - 1} : index\n" for k in range(1, 40))
    text = CHAIN.replace("%a16", "%a39").replace("%a0 = loop.addi %j, %c0", "%a0 = loop.addi %i, %i").replace(
        "ADDS", adds)

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError("the estimate did not finish in 20 s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(20)
    try:
        _, bound, cycles = estimate_of(text)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert (bound, cycles) == ("execute.recurrence", 2000 * (2 * DEFAULT.fp_alu_latency + DEFAULT.latencies[0]))


# out[0] = table[idx[i]] for 4096 indices: a random whole row (COLS floats: 16 fill one line) a lookup.
GATHER = """module {
  func @main(%idx: memref<4096xi64>, %table: memref<ROWSxCOLSxf32>) -> (memref<1xCOLSxf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %cw = loop.const {value = COLS} : index
    %n = loop.const {value = 4096} : index
    %out = loop.alloc : memref<1xCOLSxf32>
    loop.for %c0, %n, %c1 (%i: index) {
      %r = loop.load %idx, %i : i64
      %m = loop.tailmask %c0, %cw : vector<COLSxi1>
      %v = loop.vload %table, %r, %c0, %m : vector<COLSxf32>
      loop.vstore %v, %out, %c0, %c0, %m
    }
    return %out
  }
}
"""


@pytest.mark.parametrize(("rows", "given", "cols"), [("1000", None, 16), ("1000000", None, 16), ("?", 1000, 16),
                                                     ("?", None, 16), ("1000", None, 4), ("1000000", None, 4)])
def test_a_random_row_fetches_the_next_line_for_nothing_unless_the_rows_cover_the_table(
        rows: str, given: int | None, cols: int) -> None:
    """The core's misses, as cost.py's docstring describes them: each window of 352 uops holding a miss waits one
    miss, or the fill buffers (12) take every line's fill in turn, less the first miss the latency counts.
    idx is read in order (512 lines, the prefetcher bringing every other one); the table's rows are picked at
    random, L distinct lines of its T (rows of 4 floats: 4 to a line), and each miss also fetches the line after
    its row, wasted unless the rows cover the table: (1 - L / T) lines more.  A table of unknown length (and none
    assumed) is never covered, and every pick is a new line."""
    t = DEFAULT
    total = int(rows) if rows != "?" else given
    table = math.ceil(total * cols * 4 / t.line_bytes) if total else 0  # T
    lines = table * (1 - (1 - 1 / table) ** 4096) if table else 4096.0  # distinct lines among 4096 uniform picks
    wasted = 1 - lines / table if table else 1.0
    windows = 4096 * (3 + 2 + 4 + 2 + 1) / t.rob_entries  # loop, idx load, tailmask, vload, vstore uops
    waits = 512 / 2 + lines
    fills = 512 / 2 * t.miss + lines * t.miss * (1 + wasted)
    want = max(windows * min(1.0, waits / windows) * t.miss, fills / t.miss_slots) - t.miss
    _, bound, cycles = estimate_of(GATHER.replace("ROWS", rows).replace("COLS", str(cols)),
                                   {(1, 0): given} if given else None)
    assert bound == "execute.misses" and cycles == pytest.approx(want, rel=1e-9)


# 32 rows of x: the outer loop's callback pops the row number (and makes 8 lane numbers from it), then the
# inner loop streams the row's 64 floats as two 32-lane vectors, each popped by its own callback and doubled.
TOKENS = """module {
  func @main(%x: memref<32x64xf32>) -> (memref<32x64xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %c32 = loop.const {value = 32} : index
    %c64 = loop.const {value = 64} : index
    slc.for %c0, %c32, %c1 (%b: stream<index>) {
      slc.callback {on = "ite"} () {
        %h = slc.head %b : index
        %l = loop.iota %h : vector<8xindex>
        loop.setvar %l {var = 1}
      }
      slc.for %c0, %c64, %c1 {vl = 32} (%j: stream<vector<32xindex>>) {
        %v = slc.mem %x, %b, %j : stream<vector<32xf32>>
        slc.callback {on = "ite"} () {
          %w = slc.head %v : vector<32xf32>
          %d = loop.addf %w, %w : vector<32xf32>
          loop.setvar %d {var = 2}
        }
      }
    }
    return %x
  }
}
"""


def test_the_jumps_to_callbacks_mispredict_where_the_token_changes() -> None:
    """The tokens run A B B, A B B, ... (A: the row's callback, B: the vectors').  Predicted from the token
    before, the first A, B and B miss, then each later row's A (after a B) and its first B after B (after an
    A): 3 + 31 * 2 = 65 misses of (L2 token read 16 + ALU 1 + branch 1 + restart 14) = 32 cycles.  The uops:
    A 32 times (4 to read, test and jump, 1 pop, 2 for the iota); B 64 times (4, a pop of 1024 bits: two
    512-bit machine vectors of 2 uops each, and an add of two machine vectors).  Issue: (32 * 7 + 64 * 10) / 5
    + 65 * 32 = 2252.8, above DRAM (128 lines, 256 cycles).  Latency: the first vector's DRAM miss (222) and pop (16).
    Kills B's token never generated (`_iteration` mutant 9), a vector pop counted as one machine vector
    (`_Nest.cost` mutant 41), the add's machine vectors divided instead of multiplied (mutant 157) and an iota
    taken for 3 uops (mutant 152)."""
    t = IDEAL
    assert t.mispredict == 32 and t.miss == 222 and t.hit == 16  # the numbers the docstring uses
    issue = (32 * 7 + 64 * 10) / t.issue_width + 65 * t.mispredict
    assert estimate_of(TOKENS, target=t) == (pytest.approx(t.miss + t.hit + issue), "execute.issue",
                                             pytest.approx(issue))


# FIRST (x[0..4096) streamed by the access unit, or read by the core), then the core writes zeros over x a 16-float
# line at a time.
REWRITTEN = """module {
  func @main(%x: memref<4096xf32>) -> (memref<4096xf32>) {
    %c0 = loop.const {value = 0} : index
    %c16 = loop.const {value = 16} : index
    %n = loop.const {value = 4096} : index
    %zero = loop.const {value = 0.0} : f32
    %zeros = loop.splat %zero : vector<16xf32>
    %all = loop.tailmask %c0, %c16 : vector<16xi1>
    FIRST
    loop.for %c0, %n, %c16 (%i: index) {
      loop.vstore %zeros, %x, %i, %all
    }
    return %x
  }
}
"""


STREAMED = """slc.for %c0, %n, %c16 {vl = 16} (%j: stream<vector<16xindex>>) {
      %v = slc.mem %x, %j : stream<vector<16xf32>>
    }"""
READ = """loop.for %c0, %n, %c16 (%k: index) {
      %r = loop.vload %x, %k, %all : vector<16xf32>
    }"""


@pytest.mark.parametrize(("first", "second"), [
    # the lines are in the access unit's level (L2): 256 hits of 16 cycles through 12 fill buffers, less the
    # one the latency counts, bound the nest (its 256 stores take 256 cycles, its 1024 uops 204.8)
    (STREAMED, 256 * DEFAULT.hit / DEFAULT.miss_slots - DEFAULT.hit),
    (READ, 256 * DEFAULT.store_throughput),  # read by the core: in L1, no miss at all; the store port bounds it
])
def test_lines_an_earlier_nest_brought_in_are_hits_for_the_core_after_it(first: str, second: float) -> None:
    """What the core's second pass of 256 write-allocates over x adds to the estimate of the first nest.  Kills
    the L2 hits counted as `min(before)` (`_charge` mutant 53, a TypeError) and L1 lines counted as L2 hits
    (mutant 50)."""
    both = estimate_of(REWRITTEN.replace("FIRST", first))[0]
    alone = estimate_of(REWRITTEN.replace("FIRST", first).split("    loop.for %c0, %n, %c16 (%i")[0]
                        + "    return %x\n  }\n}\n")[0]
    assert both - alone == pytest.approx(second)


# The core stores each of 64 output rows (one line each) in the access loop's callback, while the access unit
# touches the row K iterations ahead, `min(b + K, 63)`, every 32 bytes, as prefetch-outputs{line=32} makes it.
AHEAD = """module {
  func @main(%out: memref<64x16xf32>) -> (memref<64x16xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %c8 = loop.const {value = 8} : index
    %c16 = loop.const {value = 16} : index
    %n = loop.const {value = 64} : index
    %last = loop.const {value = 63} : index
    %ahead = loop.const {value = K} : index
    %zero = loop.const {value = 0.0} : f32
    %zeros = loop.splat %zero : vector<16xf32>
    %all = loop.tailmask %c0, %c16 : vector<16xi1>
    slc.for %c0, %n, %c1 (%b: stream<index>) {
      %a = slc.alu %b, %ahead {op = "add"} : stream<index>
      %r = slc.alu %a, %last {op = "min"} : stream<index>
      slc.for %c0, %c16, %c8 (%c: stream<index>) {
        %t = slc.mem %out, %r, %c : stream<f32>
      }
      slc.callback {on = "ite"} () {
        %h = slc.head %b : index
        loop.vstore %zeros, %out, %h, %c0, %all
      }
    }
    return %out
  }
}
"""


@pytest.mark.parametrize("k", [1, 16])
def test_a_prefetch_k_rows_ahead_leaves_the_first_rows_to_miss(k: int) -> None:
    """Issue bounds the nest: 64 callbacks of (4 uops to dispatch, a pop, a store) / 5, and the one token's
    2 misses in the first 32 rows, scaled to 64: 4 of 32 cycles; 76.8 + 128 = 204.8.  The latency is the row's
    pop (16), then the last write-allocate: the prefetch covers every line but the first k - 1 rows' (1 - (k - 1)
    / 64 of them), and the work after the last missed line hides that much of its miss: 222 - 204.8 * covered, at
    least an L2 hit (the only cost when every line is covered).  The rows are the 64 iterations of the row loop,
    not the 128 touches.  Kills the prefetch not seen (`_lookahead` mutant 13: every line covered at k = 16 too)
    and the touches taken for the rows (`_Nest.touch` mutant 37)."""
    t = DEFAULT
    issue = 64 * 6 / t.issue_width + 4 * t.mispredict
    covered = 1 - (k - 1) / 64
    tail = t.hit if k == 1 else max(t.hit, t.miss - issue * covered)  # k = 1: every line covered, an L2 hit
    assert estimate_of(AHEAD.replace("K", str(k))) == (pytest.approx(t.hit + tail + issue), "execute.issue",
                                                        pytest.approx(issue))


# Each of 4096 indices, read by the access unit, picks which of out's 2 elements the core adds 1 to.
SCATTER_ADD = """module {
  func @main(%idx: memref<4096xi64>, %out: memref<2xf32>) -> (memref<2xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %n = loop.const {value = 4096} : index
    %one = loop.const {value = 1.0} : f32
    slc.for %c0, %n, %c1 (%j: stream<index>) {
      %i = slc.mem %idx, %j : stream<i64>
      slc.callback {on = "ite"} () {
        %h = slc.head %i : i64
        %p = loop.load %out, %h : f32
        %q = loop.addf %p, %one : f32
        loop.store %q, %out, %h
      }
    }
    return %out
  }
}
"""


def test_an_accumulator_picked_by_popped_data_chains_through_repeated_elements() -> None:
    """The element is the head of a stream read from memory, so updates chain only when they pick the same
    element: 4096 updates of (fp add 4 + L1 hit 5) over 2 elements.  Kills the popped value not counted as
    read from memory (`_Nest.cost` mutant 56: the chain would be spread over the 4096 iterations)."""
    _, bound, cycles = estimate_of(SCATTER_ADD)
    assert (bound, cycles) == ("execute.recurrence", 4096 * (DEFAULT.fp_alu_latency + DEFAULT.latencies[0]) / 2)


# out[i, 0] = 1 and out[i, 1] = 2 for 4096 rows: two stores an iteration.
PAIRS = """module {
  func @main(%out: memref<4096x2xf32>) -> (memref<4096x2xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %n = loop.const {value = 4096} : index
    %one = loop.const {value = 1.0} : f32
    %two = loop.const {value = 2.0} : f32
    loop.for %c0, %n, %c1 (%i: index) {
      loop.store %one, %out, %i, %c0
      loop.store %two, %out, %i, %c1
    }
    return %out
  }
}
"""


def test_every_store_takes_the_store_port() -> None:
    """8192 stores of 1 cycle each on the one store port bound the nest, above the write-allocates (256 lines:
    256 * 222 / 12 - 222 = 4514) and issue (4096 * 5 uops / 5).  Kills a nest's stores counted as its last
    store's only (`_Nest.cost` mutant 99)."""
    _, bound, cycles = estimate_of(PAIRS)
    assert (bound, cycles) == ("execute.stores", 2 * 4096 * DEFAULT.store_throughput)


def test_a_narrow_request_window_bounds_a_stream() -> None:
    """With 8 requests in flight (the default machine has 128), the access unit's 256 cold lines of x take
    256 * 222 / 8 cycles, less the first miss the latency counts.  Kills the bound's name mangled
    (`_charge` mutant 166)."""
    t = dataclasses.replace(DEFAULT, outstanding=8)
    _, bound, cycles = estimate_of(REWRITTEN.replace("FIRST", STREAMED).split("    loop.for")[0]
                                   + "    return %x\n  }\n}\n", target=t)
    assert (bound, cycles) == ("access.requests", 256 * t.miss / 8 - t.miss)


def test_a_line_read_then_written_misses_once() -> None:
    """x *= 2 in place, a line an iteration: the loads miss 256 lines read in order (the prefetcher brings
    every other one), 128 * 222 cycles of fills over 12 buffers, less the first miss; the stores find the lines
    the loads brought.  Kills the stores' lines missed again (`_charge` mutant 29: 256 * 222 / 12 - 222)."""
    scale = REWRITTEN.replace("FIRST", "").replace("loop.vstore %zeros, %x, %i, %all", (
        "%v = loop.vload %x, %i, %all : vector<16xf32>\n      %w = loop.addf %v, %v : vector<16xf32>\n"
        "      loop.vstore %w, %x, %i, %all"))
    _, bound, cycles = estimate_of(scale)
    assert (bound, cycles) == ("execute.misses", pytest.approx(128 * DEFAULT.miss / DEFAULT.miss_slots - DEFAULT.miss))


def test_an_accumulator_in_a_core_variable_chains_its_updates() -> None:
    """A vector kept in core variable 1, doubled each of 4096 iterations: 4096 fp adds of 4 cycles, one after
    the other (issue would take 4096 * 4 uops / 5).  Kills the variable's chain not looked for
    (`_Nest.recurrences` mutant 67)."""
    text = REWRITTEN.replace("FIRST", "%c1 = loop.const {value = 1} : index").replace(
        "%c16 (%i: index)", "%c1 (%i: index)").replace(
        "loop.vstore %zeros, %x, %i, %all", "%a = loop.getvar {var = 1} : vector<16xf32>\n"
        "      %s = loop.addf %a, %a : vector<16xf32>\n      loop.setvar %s {var = 1}")
    _, bound, cycles = estimate_of(text)
    assert (bound, cycles) == ("execute.recurrence", 4096 * DEFAULT.fp_alu_latency)


def test_a_work_record_inside_a_nest_costs_nothing() -> None:
    """A `work` record compiles to no code (codegen only lists it), wherever it is written: the estimate is the
    nest's without it (it was charged a uop an iteration)."""
    record = "loop.setvar %l {var = 1}\n        work %x, %x, %x {op = \"emb.gather\"}"
    assert estimate_of(TOKENS.replace("loop.setvar %l {var = 1}", record)) == estimate_of(TOKENS)


# ---------------------------------------------------------------------------------------------------------
# init-ahead: which counter it trusts and which nests it moves.


def init_ahead(text: str, n: int) -> tuple[np.ndarray, list[str], str]:
    """The output of an slc-level program after init-ahead{rows=2} (run on both engines), the pass's remarks,
    and the module right after the pass."""
    passes = parse_pipeline("init-ahead{rows=2}")
    module = parse_module(text, "d.eir")  # the name run_loop gives it
    run_passes(module, passes)
    got, remarks = run_loop(text, "init-ahead{rows=2},to-dlc,codegen", {"off": np.zeros(n, np.int64)})
    assert remarks == passes[0].remarks  # type: ignore[attr-defined]
    return got, remarks, print_module(module)


def slc_level(**kw: str) -> str:
    from test_optimizations import SCALAR_UPDATE, SLC_LEVEL

    args = {"cols": "x1", "zero": ", %c0", "start": "loop.subi %c0, %c1 : index",
            "update": SCALAR_UPDATE.replace("%row", "%now")} | kw
    return SLC_LEVEL.format(**args)


MOVED = "loop.if"  # the initialisation a few rows ahead, in the ite callback


@pytest.mark.parametrize("cols", ["x1", ""])
def test_init_ahead_moves_the_initialisation_of_rows_updated_by_scalars(cols: str) -> None:
    """Rows updated one element at a time at the counted row (a 2-D or a 1-D output): each row is 1.5 then
    gets 1 added, as numpy says, with the initialisation moved into the callback."""
    update = "%x = loop.load %acc, %now ZERO: f32\n        %y = loop.addf %x, %one : f32\n" \
             "        loop.store %y, %acc, %now ZERO".replace("ZERO", ", %c0 " if cols else "")
    got, remarks, after = init_ahead(slc_level(cols=cols, zero=", %c0" if cols else "", update=update), 9)
    np.testing.assert_array_equal(got.reshape(9), np.full(9, 2.5, np.float32))
    assert remarks == [] and MOVED in after
    # issued as soon as the row is counted, before this iteration's update, whose work then overlaps its fill
    assert after.index(MOVED) < after.index("%x = loop.load")


def test_init_ahead_keeps_an_output_the_loop_uses_other_than_by_its_row() -> None:
    """The callback also reads the output's length: a use init-ahead cannot place at a row."""
    update = "%d = loop.dim %acc {axis = 0} : index\n        " + slc_level().split("loop.setvar %now {var = 0}")[1]
    text = slc_level().split("loop.setvar %now {var = 0}")[0] + "loop.setvar %now {var = 0}\n        " + update
    got, remarks, after = init_ahead(text, 9)
    np.testing.assert_array_equal(got[:, 0], np.full(9, 2.5, np.float32))
    assert remarks == ["d.eir:14:5: remark: init-ahead: rows of 'acc' initialised up front: the loop updates a row "
                       "other than its own"] and MOVED not in after


def test_init_ahead_compares_bounds_by_value() -> None:
    """The initialisation nest's bounds are other constants with the loop's values: still the loop's rows."""
    text = slc_level().replace("loop.for %c0, %n, %c1 (%i: index)", "loop.for %z, %n, %u (%i: index)").replace(
        "%init = loop.const", "%z = loop.const {value = 0} : index\n    %u = loop.const {value = 1} : index\n"
        "    %init = loop.const")
    got, remarks, after = init_ahead(text, 9)
    np.testing.assert_array_equal(got[:, 0], np.full(9, 2.5, np.float32))
    assert remarks == [] and MOVED in after


def test_init_ahead_leaves_a_nest_over_other_rows_alone() -> None:
    """The loop counts rows 1.. while the nest before it initialises rows 0..: shrunk to the loop's first two
    rows it would initialise rows 0 and 1 up front, and the callback rows 3.., never row 2."""
    text = slc_level(start="loop.subi %c1, %c1 : index").replace("slc.for %c0, %n", "slc.for %c1, %n")
    got, remarks, after = init_ahead(text, 9)
    want = np.full(9, 2.5, np.float32)
    want[0] = 1.5  # the loop starts at row 1
    np.testing.assert_array_equal(got[:, 0], want)
    assert MOVED not in after


# Variables the ite callback sets before align-queues' counter (var 0), each like it but for one thing:
DECOYS = """%g = loop.getvar {var = 0} : index
        loop.setvar %c0 {var = 3}
        %g4 = loop.getvar {var = 4} : index
        %n5 = loop.addi %g4, %c1 : index
        loop.setvar %n5 {var = 5}
        %g6 = loop.getvar {var = 6} : index
        %n6 = loop.addi %g6, %c1 : index
        loop.setvar %n6 {var = 6}
        loop.setvar %c0 {var = 6}
        %g8 = loop.getvar {var = 8} : index
        %n8 = loop.addi %g8, %c1 : index
        loop.setvar %n8 {var = 8}
        %g9 = loop.getvar {var = 9} : index
        %n9 = loop.addi %g9, %c1 : index
        loop.setvar %n9 {var = 9}"""
# ... and how they start: lb - step, but var 5 counts var 4's value, var 6 is set twice in the loop, var 8 is
# not set before it, and var 9 starts at lb + step.
STARTS = """loop.subi %c0, %c1 : index
    loop.setvar %start {var = 4}
    loop.setvar %start {var = 5}
    loop.setvar %start {var = 6}
    %s9 = loop.addi %c0, %c1 : index
    loop.setvar %s9 {var = 9}
    loop.setvar %c0 {var = 3}"""


def test_init_ahead_finds_align_queues_counter_among_other_variables() -> None:
    """Only var 0 is counted as align-queues counts: the pass must pass over the others to find it."""
    text = slc_level(start=STARTS).replace('%g = loop.getvar {var = 0} : index', DECOYS)
    got, remarks, after = init_ahead(text, 9)
    np.testing.assert_array_equal(got[:, 0], np.full(9, 2.5, np.float32))
    assert remarks == [] and MOVED in after


# ---------------------------------------------------------------------------------------------------------
# promote-accumulators: which initialisation it trusts to be the rows' start.

# A sum of 4 bags of 16-float rows as -O3 leaves it before promote-accumulators, with the rows initialised by
# INIT (by default: 1.5 into each whole row, a column loop of one vector).
BAG_SLC = """module {
  func @main(%table: memref<10x16xf32>, %indices: memref<12xi64>, %offsets: memref<5xi64>) -> (memref<5x16xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %c16 = loop.const {value = 16} : index
    %c4 = loop.const {value = 4} : index
    %c5 = loop.const {value = 5} : index
    %output = loop.alloc : memref<5x16xf32>
    %zero = loop.const {value = 0.0} : f32
    %zeros = loop.splat %zero : vector<16xf32>
    %init = loop.const {value = 1.5} : f32
    %inits = loop.splat %init : vector<16xf32>
    %mask = loop.tailmask %c0, %c16 : vector<16xi1>
    loop.for %c0, %c5, %c1 (%r: index) {
      loop.vstore %zeros, %output, %r, %c0, %mask
    }
    INIT
    slc.for %c0, %c4, %c1 (%b: stream<index>) {
      %s = slc.mem %offsets, %b : stream<i64>
      %b1 = slc.alu %b, %c1 {op = "add"} : stream<index>
      %e = slc.mem %offsets, %b1 : stream<i64>
      slc.for %s, %e, %c1 (%j: stream<index>) {
        %i = slc.mem %indices, %j : stream<i64>
        slc.for %c0, %c16, %c1 {vl = 16, unrolled = true} (%k: stream<vector<16xindex>>) {
          %row = slc.mem %table, %i, %k : stream<vector<16xf32>>
          slc.callback {on = "ite"} () {
            %h = slc.head %b : index
            %v = slc.head %row : vector<16xf32>
            %p = loop.vload %output, %h, %c0, %mask : vector<16xf32>
            %q = loop.addf %p, %v : vector<16xf32>
            loop.vstore %q, %output, %h, %c0, %mask
          }
        }
      }
    }
    return %output
  }
}
"""
COLUMNS = """loop.for %c0, %c4, %c1 (%r2: index) {
      loop.for %c0, %c16, %c16 (%col: index) {
        %m2 = loop.tailmask %col, %c16 : vector<16xi1>
        loop.vstore %inits, %output, %r2, %col, %m2
      }
    }"""
ROWS_KEPT = "promote-accumulators: output row kept in memory: "
NOT_THE_START = "the output's rows do not start as one constant stored over the rows the loop counts"


TABLE = np.random.default_rng(7).standard_normal((10, 16)).astype(np.float32)


def bags(init: str, start: np.ndarray, next_row: bool = False, columns: int = 16) -> list[str]:
    """Runs BAG_SLC with `init` through promote-accumulators (both engines), checks its output against numpy's
    sums of the bags added in order to `start` (the rows as the nests before the loop leave them), and returns
    the remarks.  With `next_row`, bag b is added to row b + 1; with fewer `columns`, only to those (the
    callback's mask is `tailmask 0, columns`)."""
    indices = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8], np.int64)
    offsets = np.array([0, 3, 3, 8, 12], np.int64)
    text = BAG_SLC.replace("INIT", init)
    if next_row:
        text = text.replace("%h = slc.head %b : index", "%h = slc.head %b1 : index")
    if columns < 16:
        text = text.replace("%output, %h, %c0, %mask", "%output, %h, %c0, %some").replace(
            "    slc.for", f"    %cm = loop.const {{value = {columns}}} : index\n"
            "    %some = loop.tailmask %c0, %cm : vector<16xi1>\n    slc.for", 1)
    got, remarks = run_loop(text, "promote-accumulators,to-dlc,codegen",
                            {"table": TABLE, "indices": indices, "offsets": offsets})
    want = start.copy()
    for b in range(4):
        for i in indices[offsets[b]:offsets[b + 1]]:
            want[b + next_row, :columns] += TABLE[i, :columns]
    np.testing.assert_array_equal(got, want)
    return remarks


def rows(value: float, count: int = 4, first_column: int = 0) -> np.ndarray:
    """The output's rows initialised: zeros, then `value` in the first `count` rows from `first_column` on."""
    start = np.zeros((5, 16), np.float32)
    start[:count, first_column:] = value
    return start


def test_promote_starts_the_rows_at_the_constant_a_column_loop_stores() -> None:
    assert bags(COLUMNS, rows(1.5)) == []  # the fifth row is in no bag: the first nest's zeros


def test_promote_starts_the_rows_at_the_constant_one_store_writes() -> None:
    init = "loop.for %c0, %c4, %c1 (%r2: index) {\n      loop.vstore %inits, %output, %r2, %c0, %mask\n    }"
    assert bags(init, rows(1.5)) == []


@pytest.mark.parametrize(("init", "start"), [
    (COLUMNS.replace("%c0, %c4, %c1 (%r2", "%c0, %c5, %c1 (%r2"), rows(1.5, 5)),  # also a row no bag has
    (COLUMNS.replace("%c0, %c16, %c16 (%col", "%c1, %c16, %c16 (%col"), rows(1.5, 4, 1)),  # from column 1
    (COLUMNS.replace("loop.vstore %inits", "loop.vstore %zeros, %output, %r2, %col, %m2\n        loop.vstore %inits"),
     rows(1.5)),  # two stores
    (COLUMNS.replace("loop.vstore %inits, %output", "%t = loop.vload %table, %r2, %col, %m2 : vector<16xf32>\n"
                     "        loop.vstore %t, %output"), np.concatenate([TABLE[:4], rows(0.0)[4:]])),  # not constant
    (COLUMNS.replace("loop.vstore %inits, %output", "%yes = loop.const {value = 1} : i1\n"
                     "        %t = loop.select %yes, %inits, %zeros : vector<16xf32>\n"
                     "        loop.vstore %t, %output"), rows(1.5)),  # a constant's choice, not its splat
])
def test_promote_keeps_rows_whose_start_it_cannot_see_as_one_constant(init: str, start: np.ndarray) -> None:
    remarks = bags(init, start)
    assert len(remarks) == 1 and remarks[0].endswith(ROWS_KEPT + NOT_THE_START)


def test_promote_keeps_a_row_other_than_the_one_the_outer_loop_counts() -> None:
    """Bag b adds into row b + 1 (the head of `b + 1`, not of the loop's index): the row's end callback, which
    stores the loop's own row, would put the sum in the wrong row.  Kills the check weakened to `... or the
    head's operand is the index` (promote mutant 74)."""
    assert bags(COLUMNS, rows(1.5), next_row=True) == [
        "d.eir:23:5: remark: promote-accumulators: output row kept in memory: 'output''s row is not the one the "
        "outer loop counts"]


def test_promote_keeps_a_row_the_callback_updates_in_part() -> None:
    """The callback's mask covers columns 0..7 of 16: a variable holding the row would start every column at
    1.5 and end by storing only 0..7, while the initialisation nest it replaces set all 16.  Kills the
    whole-row test weakened to `col 0 and a tailmask, or a tailmask from 0 to the row's width` (promote
    mutant 94)."""
    assert bags(COLUMNS, rows(1.5), columns=8) == [
        "d.eir:25:5: remark: promote-accumulators: output row kept in memory: 'output''s row is not one vector with "
        "a constant all-true mask (run unroll and hoist first)"]


def test_promote_keeps_the_start_the_initialisation_defines_inside_itself() -> None:
    """The constant and its splat are made inside the initialisation nest, which promote removes: the rows must
    still start at 1.5 (it used to leave the accumulator reading a value no longer defined)."""
    inner = COLUMNS.replace("(%r2: index) {", "(%r2: index) {\n      %z = loop.const {value = 1.5} : f32\n"
                            "      %zs = loop.splat %z : vector<16xf32>")
    inner = inner.replace("loop.vstore %inits", "loop.vstore %zs")
    assert bags(inner, rows(1.5)) == []


# The initialisation nest second in the function: its bounds are arguments, its step the constant before it.
EARLY_INIT = """module {
  func @main(%output: memref<5x16xf32>, %lb: index, %ub: index, """ \
    """%table: memref<10x16xf32>, %indices: memref<12xi64>, %offsets: memref<5xi64>) -> (memref<5x16xf32>) {
    %c1 = loop.const {value = 1} : index
    loop.for %lb, %ub, %c1 (%r: index) {
      %z = loop.const {value = 1.5} : f32
      %zs = loop.splat %z : vector<16xf32>
      %k0 = loop.const {value = 0} : index
      %k16 = loop.const {value = 16} : index
      %km = loop.tailmask %k0, %k16 : vector<16xi1>
      loop.vstore %zs, %output, %r, %k0, %km
    }
""" + BAG_SLC.split("    INIT\n")[1].replace("slc.for %c0, %c4, %c1 (%b", "slc.for %lb, %ub, %c1 (%b").replace(
    "    slc.for", "    %c0 = loop.const {value = 0} : index\n    %c16 = loop.const {value = 16} : index\n"
    "    %mask = loop.tailmask %c0, %c16 : vector<16xi1>\n    slc.for", 1)


def test_promote_finds_an_initialisation_nest_at_the_top_of_the_function() -> None:
    """Promoted (no remark, the nest gone, its constant made once before the loop), and the result verifies."""
    passes = parse_pipeline("promote-accumulators")
    module = parse_module(EARLY_INIT, "e.eir")
    run_passes(module, passes)  # verifies the result
    after = print_module(module)
    assert passes[0].remarks == []  # type: ignore[attr-defined]
    assert "loop.for %lb" not in after and after.count("loop.const {value = 1.5} : f32") == 1


def test_a_cheaper_plan_not_taken_says_why() -> None:
    """The demo DLRM's bags: the core plan is estimated cheapest, yet -O0's is kept; the remark gives the rule and
    the bar the core plan missed (10% and one miss below the kept plan's estimate)."""
    from ember.frontends import import_model
    from ember.passes import PRESETS

    module = import_model(str(MODELS / "dlrm.dynamo.onnx"), "w")
    passes = parse_pipeline(PRESETS["O3"])
    p = next(q for q in passes if isinstance(q, ChoosePlan))
    run_passes(module, passes)
    miss = default_target().miss
    for remark in p.remarks:
        numbers = dict(re.findall(r"(decoupled|on the core) ([\d,]+) \(", remark))
        kept, core = (float(numbers[k].replace(",", "")) for k in ("decoupled", "on the core"))
        assert "kept decoupled as at -O0" in remark and core < kept, remark
        said = re.fullmatch(r".*; the core plan is cheaper, but a plan must be estimated 10% and one memory miss "
                            rf"\({miss:,.0f} cycles\) below the one kept \(at most ([\d,]+) here\)", remark)
        assert said, remark
        assert abs(float(said.group(1).replace(",", "")) - (kept * 0.9 - miss)) <= 1  # the estimates print rounded
