"""What bufferize, unroll, hoist, promote-accumulators, lower-emb, align-queues and prefetch-indices do to loops
written by hand at the level they read, checked against numpy and against the remarks `ember-opt --remarks` prints.

Written to kill mutation-testing survivors (issue 13, point 7): each test names the mutants it kills.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_survivors import compile_text, on_both_engines, run_loop

from ember.ir.core import Op
from ember.ir.parser import parse_module
from ember.ir.printer import print_module
from ember.passes import PRESETS, parse_pipeline, run_passes


def passed(text: str, pipeline: str) -> tuple[Op, list[str]]:
    """`text` through `pipeline` (no codegen needed): the module and every pass's remarks."""
    module = parse_module(text, "h.eir")
    passes = parse_pipeline(pipeline)
    run_passes(module, passes)
    return module, [r for p in passes for r in getattr(p, "remarks", [])]


def ops_named(module: Op, name: str) -> list[Op]:
    return [o for o in module.walk() if o.name == name]


def splat_of(module: Op, value: str) -> Op:
    """The one `loop.splat` of the value named `value`."""
    (splat,) = [o for o in ops_named(module, "loop.splat") if o.operands[0].name == value]
    return splat


# ---------------------------------------------------------------------------------------------------------
# bufferize

# out[b, j] = 2 x[b, j] over the columns j in [2, d) of every row: a loop-level program that decouple and
# vectorize turn into a vector loop starting at 2, which bufferize gives a buffer that starts at 2 too.
FROM_TWO = """module {
  func @main(%x: memref<?x?xf32>) -> (memref<?x?xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %c2 = loop.const {value = 2} : index
    %n = loop.dim %x {axis = 0} : index
    %d = loop.dim %x {axis = 1} : index
    %two = loop.const {value = 2.0} : f32
    %zero = loop.const {value = 0.0} : f32
    %out = loop.alloc %n, %d : memref<?x?xf32>
    loop.for %c0, %n, %c1 (%i: index) {
      loop.for %c0, %d, %c1 (%k: index) {
        loop.store %zero, %out, %i, %k
      }
    }
    loop.for %c0, %n, %c1 (%b: index) {
      loop.for %c2, %d, %c1 (%j: index) {
        %v = loop.load %x, %b, %j : f32
        %w = loop.mulf %v, %two : f32
        loop.store %w, %out, %b, %j
      }
    }
    return %out
  }
}
"""


def test_bufferize_walks_a_row_that_starts_past_zero() -> None:
    """The buffer holds the lanes from lb on, so lane c is at c - lb.  Kills reading it at c
    (`is_const(lb, 0) or True`) and every mangling of that `loop.subi` (bufferize mutants 161, 167-174)."""
    x = np.arange(1, 34, dtype=np.float32).reshape(3, 11)  # 9 lanes per row from 2: two heads of 4 and a tail
    got, remarks = run_loop(FROM_TWO, "decouple,vectorize{vl=4},bufferize,to-dlc,codegen", {"x": x})
    want = np.zeros_like(x)
    want[:, 2:] = 2 * x[:, 2:]
    np.testing.assert_array_equal(got, want)
    assert remarks == []


def test_bufferize_moves_a_splat_of_a_constant_out_of_the_row() -> None:
    """A splat of a value the row loop does not compute (the constant 2) moves out of the loop over the row
    into the callback, and hoist then moves it before the nest.  Kills the splat left in the row loop
    (bufferize mutants 258, 259: the row's loop then splats once per vector) and the moved splat left without a
    parent (269: hoist then does not see it is in a callback, and it runs once per row)."""
    module, _ = passed(FROM_TWO, "decouple,vectorize{vl=4},bufferize")
    splat = splat_of(module, "two")
    assert splat.parent_op() is not None and splat.parent_op().name == "slc.callback"  # type: ignore[union-attr]
    module, _ = passed(FROM_TWO, "decouple,vectorize{vl=4},bufferize,hoist")
    splat = splat_of(module, "two")
    assert splat.parent_op() is not None and splat.parent_op().name == "func"  # type: ignore[union-attr]
    x = np.arange(1, 34, dtype=np.float32).reshape(3, 11)
    got, _ = run_loop(FROM_TWO, "decouple,vectorize{vl=4},bufferize,hoist,to-dlc,codegen", {"x": x})
    np.testing.assert_array_equal(got[:, 2:], 2 * x[:, 2:])


def test_vectorized_ir_printed_by_ember_opt_reads_back() -> None:
    """`ember-opt -p decouple,vectorize` output given back to `ember-opt -p bufferize,...`: the parser must
    make each loop the owner of its index, or slc.mask finds no loop and verification fails."""
    module, _ = passed(FROM_TWO, "decouple,vectorize{vl=4}")
    x = np.arange(1, 34, dtype=np.float32).reshape(3, 11)
    got, remarks = run_loop(print_module(module), "bufferize,to-dlc,codegen", {"x": x})
    np.testing.assert_array_equal(got[:, 2:], 2 * x[:, 2:])
    assert remarks == []


def test_a_remark_on_a_store_bufferize_moved_names_a_line_of_the_program() -> None:
    """decouple gives each callback the position of its first op, which bufferize's row loop inherits, so
    prefetch-outputs can say where the scatter it leaves alone comes from (it said `None:`).  Kills the row
    loop built without a location (bufferize mutants 108, 110)."""
    _, remarks = passed(FROM_TWO, "decouple,vectorize{vl=4},bufferize,prefetch-outputs")
    assert remarks == ["h.eir:19:14: remark: prefetch-outputs: output rows not prefetched: 'out' is written by "
                       "'loop.scatter' inside a loop of its callback, not as one row (run unroll first)"]


# The same row loop written at the SLC level, as vectorize leaves it, with names a reader gave its values;
# {callbacks} is the loop's callbacks.  `first` gets what an end callback reads of each finished row.
SLC_ROWS = """module {{
  func @main(%x: memref<?x?xf32>) -> (memref<?x?xf32>, memref<?xf32>) {{
    %c0 = loop.const {{value = 0}} : index
    %c1 = loop.const {{value = 1}} : index
    %n = loop.dim %x {{axis = 0}} : index
    %d = loop.dim %x {{axis = 1}} : index
    %two = loop.const {{value = 2.0}} : f32
    %zero = loop.const {{value = 0.0}} : f32
    %out = loop.alloc %n, %d : memref<?x?xf32>
    %first = loop.alloc %n : memref<?xf32>
    loop.for %c0, %n, %c1 (%i: index) {{
      loop.store %zero, %first, %i
      loop.for %c0, %d, %c1 (%k: index) {{
        loop.store %zero, %out, %i, %k
      }}
    }}
    slc.for %c0, %n, %c1 (%b: stream<index>) {{
      slc.for %c0, %d, %c1 {{vl = 4}} (%j: stream<vector<4xindex>>) {{
        %v = slc.mem %x, %b, %j : stream<vector<4xf32>>
        %j_mask = slc.mask %j : stream<vector<4xi1>>
{callbacks}
      }}
    }}
    return %out, %first
  }}
}}
"""
TWICE_X = """        slc.callback {on = "ite"} () {
          %m = slc.head %j_mask : vector<4xi1>
          %xv = slc.head %v : vector<4xf32>
          %row = slc.head %b : index
          %lanes = slc.head %j : vector<4xindex>
          %s = loop.splat %two : vector<4xf32>
          %w = loop.mulf %xv, %s : vector<4xf32>
          loop.scatter %w, %out, %row, %lanes, %m
        }"""
FIRST_OF_ROW = """        slc.callback {on = "end"} () {
          %r = slc.head %b : index
          %f = loop.load %out, %r, %c0 : f32
          loop.store %f, %first, %r
        }"""
# A second per-iteration callback: all lanes of each vector scattered to first[b], so the row's last lane stays.
LAST_LANE = """        slc.callback {on = "ite"} () {
          %m2 = slc.head %j_mask : vector<4xi1>
          %xv2 = slc.head %v : vector<4xf32>
          %r2 = slc.head %b : index
          %all = loop.splat %r2 : vector<4xindex>
          loop.scatter %xv2, %first, %all, %m2
        }"""

X = np.arange(1, 31, dtype=np.float32).reshape(3, 10)  # rows of 10: two heads of 4 and a tail of 2


def test_bufferize_keeps_the_names_of_the_values_it_moves() -> None:
    """`ember-opt` prints the bufferized callback with the names the input gave: the row's head `%row` and
    the product `%w`.  Kills the names dropped (bufferize mutants 145, 247: they print as %0, %1, ...)."""
    module, _ = passed(SLC_ROWS.format(callbacks=TWICE_X), "bufferize")
    text = print_module(module)
    assert "%row = slc.head %b : index" in text
    assert "%w = loop.mulf" in text


def test_bufferize_puts_the_row_before_an_end_callback_the_loop_has() -> None:
    """The row's callback fires at the loop's end too, and must come before the loop's own end callback,
    which reads the finished row.  Kills every mutant that appends it after that callback or picks the
    wrong one (bufferize mutants 270, 274-280, 282, 284)."""
    got = on_both_engines(compile_text(SLC_ROWS.format(callbacks=TWICE_X + "\n" + FIRST_OF_ROW),
                                       "bufferize,to-dlc,codegen"), {"x": X})
    out, first = got.values()
    np.testing.assert_array_equal(out, 2 * X)
    np.testing.assert_array_equal(first, 2 * X[:, 0])
    module, remarks = passed(SLC_ROWS.format(callbacks=TWICE_X + "\n" + FIRST_OF_ROW), "bufferize")
    assert remarks == [] and len(ops_named(module, "slc.buffer")) == 1


def test_bufferize_declines_a_loop_with_two_callbacks() -> None:
    """Kills bufferize mutants 15, 19, 20 (the remark for several callbacks)."""
    text = SLC_ROWS.format(callbacks=TWICE_X + "\n" + LAST_LANE)
    module, remarks = passed(text, "bufferize")
    assert remarks == ["h.eir:18:7: remark: bufferize: loop not bufferized: it has several callbacks"]
    assert not ops_named(module, "slc.buffer")
    out, first = on_both_engines(compile_text(text, "bufferize,to-dlc,codegen"), {"x": X}).values()
    np.testing.assert_array_equal(out, 2 * X)
    np.testing.assert_array_equal(first, X[:, -1])  # lanes scatter in order: the row's last one stays


# ---------------------------------------------------------------------------------------------------------
# vectorize

# out[j] = x[j] for j < n, then out[n] = 1 in the loop's end callback ({mark}: attributes of the loop).
WITH_END = """module {{
  func @main(%x: memref<?xf32>, %out: memref<?xf32>) -> (memref<?xf32>) {{
    %c0 = loop.const {{value = 0}} : index
    %c1 = loop.const {{value = 1}} : index
    %n = loop.dim %x {{axis = 0}} : index
    %one = loop.const {{value = 1.0}} : f32
    slc.for %c0, %n, %c1 {mark}(%j: stream<index>) {{
      %v = slc.mem %x, %j : stream<f32>
      slc.callback {{on = "ite"}} () {{
        %xv = slc.head %v : f32
        %at = slc.head %j : index
        loop.store %xv, %out, %at
      }}
      slc.callback {{on = "end"}} () {{
        loop.store %one, %out, %n
      }}
    }}
    return %out
  }}
}}
"""


def test_vectorize_declines_a_loop_with_an_end_callback() -> None:
    """Kills the remark's text mangled (vectorize `_vectorize` mutant 32)."""
    module, remarks = passed(WITH_END.format(mark=""), "vectorize{vl=4}")
    assert remarks == ["h.eir:7:5: remark: vectorize: loop not vectorized: it has callbacks other than one per "
                       "iteration"]
    assert all("vl" not in o.attrs for o in ops_named(module, "slc.for"))


def test_vectorize_goes_on_past_a_nest_kept_as_o0_leaves_it() -> None:
    """Two copies of a row loop, the first marked `plan = "decoupled"` (choose-plan's mark): only the second is
    vectorized.  Kills the walk stopping at the first kept op (`Vectorize.run` mutant 3)."""
    second = "    loop.for %c0, %n, %c1 (%b: index) {"
    text = FROM_TWO.replace(second, "    loop.for %c0, %n, %c1 {plan = \"decoupled\"} (%a: index) {\n"
                            "      loop.for %c2, %d, %c1 (%l: index) {\n        %u = loop.load %x, %a, %l : f32\n"
                            "        loop.store %u, %out, %a, %l\n      }\n    }\n" + second)
    module, _ = passed(text, "decouple,vectorize{vl=4}")
    first, second = [o for o in module.body.ops[0].body.ops if o.name == "slc.for"]
    assert [o.attrs.get("vl") for o in first.walk() if o.name == "slc.for"] == [None, None]
    assert [o.attrs.get("vl") for o in second.walk() if o.name == "slc.for"] == [None, 4]
    x = np.arange(1, 34, dtype=np.float32).reshape(3, 11)
    got, _ = run_loop(text, "decouple,vectorize{vl=4},to-dlc,codegen", {"x": x})
    want = np.zeros_like(x)
    want[:, 2:] = 2 * x[:, 2:]
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------------------
# unroll: how wide a row is

# out[b, j] = 2 f(x[b, j]) for the 20 columns of a row; {elem} is x's element type and {cast} computes f in f32
# (x + 2 for f32, a cast otherwise).
CONST_ROW = """module {{
  func @main(%x: memref<?x20x{elem}>) -> (memref<?x20xf32>) {{
    %c0 = loop.const {{value = 0}} : index
    %c1 = loop.const {{value = 1}} : index
    %c20 = loop.const {{value = 20}} : index
    %n = loop.dim %x {{axis = 0}} : index
    %two = loop.const {{value = 2.0}} : f32
    %out = loop.alloc %n : memref<?x20xf32>
    loop.for %c0, %n, %c1 (%b: index) {{
      loop.for %c0, %c20, %c1 (%j: index) {{
        %v = loop.load %x, %b, %j : {elem}
        {cast}
        %w = loop.mulf %f, %two : f32
        loop.store %w, %out, %b, %j
      }}
    }}
    return %out
  }}
}}
"""
DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64}
AS_F32 = {"f32": "%f = loop.addf %v, %two : f32", "f64": "%f = loop.cast %v : f32",
          "f16": "%f = loop.cast %v : f32"}


@pytest.mark.parametrize(("elem", "bits"), [
    ("f32", 640),  # 20 lanes of f32 (the index vector's 64-bit lanes are not row data)
    ("f64", 1280),  # the stream's f64 lanes are the widest
    ("f16", 640),  # f16 lanes, but the callback computes in f32
])
@pytest.mark.parametrize("room", [0, -1])
def test_unroll_measures_a_row_by_its_widest_float_lanes(elem: str, bits: int, room: int) -> None:
    """A row of exactly max_bits is unrolled, one bit more is declined with the row's width in the remark.
    Kills `_elem_bits` as bytes / 8 or bytes * 9 (unroll mutants 4, 5), `_is_float` seeing no vector
    (mutant 1, 32 bits assumed), only streams (3) or index vectors too (4)."""
    x = np.random.default_rng(3).standard_normal((3, 20)).astype(DTYPES[elem])
    max_bits = bits + room
    got, remarks = run_loop(CONST_ROW.format(elem=elem, cast=AS_F32[elem]),
                            f"decouple,vectorize{{vl=4}},unroll{{max_bits={max_bits}}},to-dlc,codegen", {"x": x})
    f = x.astype(np.float32) + (2 if elem == "f32" else 0)
    np.testing.assert_array_equal(got, 2 * f)
    unrolled = [r for r in remarks if "unroll" in r]
    if room == 0:
        assert unrolled == []
    else:
        assert unrolled == [f"d.eir:10:7: remark: unroll: loop not unrolled: a row of 20 lanes ({bits} bits) is "
                            f"wider than max_bits={max_bits}"]


def test_unroll_counts_a_float_stream_the_callback_does_not_read() -> None:
    """The width is that of every float vector the loop has, its streams included: here an f64 stream no
    callback reads makes a row of 20 lanes 1280 bits wide.  Kills `_is_float` looking past streams
    (unroll mutant 2, which sees only the callback's f32 vectors: 640 bits)."""
    text = """module {
  func @main(%x: memref<?x20xf32>, %y: memref<?x20xf64>) -> (memref<?x20xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %c20 = loop.const {value = 20} : index
    %n = loop.dim %x {axis = 0} : index
    %out = loop.alloc %n : memref<?x20xf32>
    slc.for %c0, %n, %c1 (%b: stream<index>) {
      slc.for %c0, %c20, %c1 {vl = 4} (%j: stream<vector<4xindex>>) {
        %v = slc.mem %x, %b, %j : stream<vector<4xf32>>
        %u = slc.mem %y, %b, %j : stream<vector<4xf64>>
        slc.callback {on = "ite"} () {
          %xv = slc.head %v : vector<4xf32>
          %row = slc.head %b : index
          %lanes = slc.head %j : vector<4xindex>
          %m = loop.tailmask %c0, %c20 : vector<4xi1>
          loop.scatter %xv, %out, %row, %lanes, %m
        }
      }
    }
    return %out
  }
}
"""
    _, remarks = passed(text, "unroll{max_bits=1279}")
    assert remarks == ["h.eir:9:7: remark: unroll: loop not unrolled: a row of 20 lanes (1280 bits) is wider "
                       "than max_bits=1279"]


def test_unroll_marks_a_row_of_one_head_so_bufferize_leaves_it() -> None:
    """A row of 4 lanes is one head of a 4-lane loop: unroll has nothing to widen, and marks it done, so
    bufferize has nothing to collect either (a buffer would copy the one head through memory).  Kills the
    mark written under another key (unroll mutant 29)."""
    text = CONST_ROW.format(elem="f32", cast=AS_F32["f32"]).replace("20", "4")
    module, remarks = passed(text, "decouple,vectorize{vl=4},unroll,bufferize")
    assert remarks == [] and not ops_named(module, "slc.buffer")
    (row,) = [o for o in ops_named(module, "slc.for") if "vl" in o.attrs]
    assert row.attrs == {"vl": 4, "unrolled": True}
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
    got, _ = run_loop(text, "decouple,vectorize{vl=4},unroll,bufferize,to-dlc,codegen", {"x": x})
    np.testing.assert_array_equal(got, 2 * (x + 2))


# ---------------------------------------------------------------------------------------------------------
# hoist

ROW_2_TO_6 = FROM_TWO.replace("memref<?x?xf32>", "memref<?x6xf32>").replace(
    "%d = loop.dim %x {axis = 1} : index", "%d = loop.const {value = 6} : index").replace("loop.alloc %n, %d",
                                                                                          "loop.alloc %n")


def test_hoist_makes_the_lanes_of_a_one_head_row_from_2_once() -> None:
    """Columns 2..5 are one head of a 4-lane loop: their lane numbers and mask are the same every row, so hoist
    computes them once before the nest (`loop.iota %c2`, `loop.tailmask %c2, %d`) instead of popping them.
    Kills the one-head test reading hi + lo (hoist `OneHeadIndices` mutant 20: 8 > 4, left as heads)."""
    module, remarks = passed(ROW_2_TO_6, "decouple,vectorize{vl=4},hoist")
    assert remarks == []
    (cb,) = ops_named(module, "slc.callback")
    assert sorted(h.operands[0].name for h in cb.body.ops if h.name == "slc.head") == ["b", "v"]
    func = module.body.ops[0]
    made = [(o.name, [v.name for v in o.operands]) for o in func.body.ops if o.name in ("loop.iota", "loop.tailmask")]
    assert sorted(made) == [("loop.iota", ["c2"]), ("loop.tailmask", ["c2", "d"])]
    x = np.arange(1, 19, dtype=np.float32).reshape(3, 6)
    got, _ = run_loop(ROW_2_TO_6, "decouple,vectorize{vl=4},hoist,to-dlc,codegen", {"x": x})
    want = np.zeros_like(x)
    want[:, 2:] = 2 * x[:, 2:]
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------------------
# promote-accumulators

# out[b, :] += x[b, :] in the outer loop's own callback, as one 8-lane vector, and an inner loop that
# only streams y: the one inner loop is not the one around the row's updates.
OWN_CALLBACK = """module {
  func @main(%x: memref<?x8xf32>, %y: memref<?xf32>) -> (memref<?x8xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %c8 = loop.const {value = 8} : index
    %n = loop.dim %x {axis = 0} : index
    %k = loop.dim %y {axis = 0} : index
    %half = loop.const {value = 0.5} : f32
    %all = loop.tailmask %c0, %c8 : vector<8xi1>
    %out = loop.alloc %n : memref<?x8xf32>
    loop.for %c0, %n, %c1 (%i: index) {
      %z = loop.splat %half : vector<8xf32>
      loop.vstore %z, %out, %i, %c0, %all
    }
    slc.for %c0, %n, %c1 (%b: stream<index>) {
      slc.callback {on = "ite"} () {
        %row = slc.head %b : index
        %xv = loop.vload %x, %row, %c0, %all : vector<8xf32>
        %acc = loop.vload %out, %row, %c0, %all : vector<8xf32>
        %s = loop.addf %acc, %xv : vector<8xf32>
        loop.vstore %s, %out, %row, %c0, %all
      }
      slc.for %c0, %k, %c1 (%j: stream<index>) {
        %yv = slc.mem %y, %j : stream<f32>
      }
    }
    return %out
  }
}
"""


def test_promote_declines_a_row_updated_outside_the_inner_loop() -> None:
    """Kills `_contains` true for any op (promote mutant 2), which would promote the row anyway."""
    x = np.arange(1, 33, dtype=np.float32).reshape(4, 8)
    got = on_both_engines(compile_text(OWN_CALLBACK, "promote-accumulators,to-dlc,codegen"),
                          {"x": x, "y": np.ones(3, np.float32)})
    np.testing.assert_array_equal(next(iter(got.values())), x + 0.5)
    _, remarks = passed(OWN_CALLBACK, "promote-accumulators")
    assert remarks == ["h.eir:15:5: remark: promote-accumulators: output row kept in memory: the outer loop does "
                       "not have exactly one inner loop around the lookups"]


# ---------------------------------------------------------------------------------------------------------
# lower-emb

SCATTER_ROWS = """module {{
  func @main(%data: tensor<?x8xf32>, %idx: tensor<?xi64>, %upd: tensor<?x{width}xf32>) -> (tensor<?x8xf32>) {{
    %y = emb.scatter_rows %data, %idx, %upd {{reduction = "add"}} : tensor<?x8xf32>
    return %y
  }}
}}
"""


def test_scatter_rows_reads_no_width_of_the_updates() -> None:
    """The data's type fixes the rows' width, so updates typed `?` wide compile to the same code and run in
    the same time as updates typed 8 wide.  Kills lowering that also reads the updates' width (lower-emb
    `lower_scatter_rows` mutant 68: a `dim` instruction more)."""
    from test_fast_engine import assert_same, both

    rng = np.random.default_rng(5)
    feeds = {"data": rng.standard_normal((5, 8)).astype(np.float32), "idx": np.array([4, 0, 4, 2], np.int64),
             "upd": rng.standard_normal((4, 8)).astype(np.float32)}
    want = feeds["data"].copy()
    np.add.at(want, feeds["idx"], feeds["upd"])
    runs = []
    for width in ("8", "?"):
        program = compile_text(SCATTER_ROWS.format(width=width), PRESETS["O0"])
        ref_out, ref_st, _, _ = both(program, feeds)
        np.testing.assert_array_equal(next(iter(ref_out.values())), want)
        runs.append((program.code, ref_st))
    assert [str(i) for i in runs[0][0]] == [str(i) for i in runs[1][0]]
    assert_same(runs[0][1], runs[1][1])


HALF_MEAN = """module {
  func @main(%table: tensor<50x16xf16>, %indices: tensor<12xi64>, %offsets: tensor<5xi64>) -> (tensor<4x16xf16>) {
    %output = emb.bag %table, %indices, %offsets {mode = "mean", empty = "zero"} : tensor<4x16xf16>
    return %output
  }
}
"""


def test_a_bag_of_half_rows_sums_in_an_unnamed_f32_buffer() -> None:
    """An f16 table's bags are summed in f32, in a buffer lower-emb makes without a name, and rounded once into
    'output'.  promote-accumulators keeps both in memory, and calls the buffer "the output".  Kills that
    wording mangled (promote mutant 4)."""
    pipeline = "lower-emb,decouple,vectorize,unroll,bufferize,hoist,simplify-mem,promote-accumulators"
    _, remarks = passed(HALF_MEAN, pipeline)
    kept = "h.eir:3:15: remark: promote-accumulators: output row kept in memory: "
    assert remarks == [kept + "the output is accessed outside one callback's top level",
                       kept + "'output' is not read once and then written once per lookup"]
    table = np.random.default_rng(2).standard_normal((50, 16)).astype(np.float16)
    indices = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8], np.int64)
    offsets = np.array([0, 3, 3, 8, 12], np.int64)
    got = on_both_engines(compile_text(HALF_MEAN, pipeline + ",to-dlc,codegen"),
                          {"table": table, "indices": indices, "offsets": offsets})
    want = np.zeros((4, 16), np.float32)
    for b in range(4):
        picked = indices[offsets[b]:offsets[b + 1]]
        for i in picked:
            want[b] += table[i].astype(np.float32)
        want[b] /= max(1, len(picked))
    np.testing.assert_array_equal(next(iter(got.values())), want.astype(np.float16))


# ---------------------------------------------------------------------------------------------------------
# align-queues

GATHER_2D = """module {
  func @main(%t: tensor<?x4xf32>, %i: tensor<?x?xi64>) -> (tensor<?x?x4xf32>) {
    %y = emb.gather %t, %i : tensor<?x?x4xf32>
    return %y
  }
}
"""


def test_align_queues_counts_both_loops_of_a_two_dimensional_gather() -> None:
    """The inner index loop gets a `beg` callback that starts its count, then an `ite` callback that counts;
    looking for where the `ite` one goes passes over the `beg` one.  Kills that search reading a callback's
    event under a wrong key (align-queues `insert_callback` mutants 22, 23: a KeyError, not a program)."""
    rng = np.random.default_rng(7)
    table = rng.standard_normal((10, 4)).astype(np.float32)
    idx = rng.integers(0, 10, (3, 5))
    got = on_both_engines(compile_text(GATHER_2D, "lower-emb,decouple,align-queues,to-dlc,codegen"),
                          {"t": table, "i": idx})
    np.testing.assert_array_equal(next(iter(got.values())), table[idx])


# ---------------------------------------------------------------------------------------------------------
# prefetch-indices

# out[j] = 2 x[j]: x is streamed in order and its values only reach the callback, so no lookup waits for them.
DOUBLED = """module {
  func @main(%x: memref<?xf32>) -> (memref<?xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %n = loop.dim %x {axis = 0} : index
    %two = loop.const {value = 2.0} : f32
    %out = loop.alloc %n : memref<?xf32>
    loop.for %c0, %n, %c1 (%j: index) {
      %v = loop.load %x, %j : f32
      %w = loop.mulf %v, %two : f32
      loop.store %w, %out, %j
    }
    return %out
  }
}
"""


def test_prefetch_indices_leaves_a_stream_no_lookup_waits_for() -> None:
    """Only a stream whose values address another stream is read ahead: here the pass changes nothing.  Kills
    the indirect access found where a stream's operand is not one of the loop's streams (prefetch-indices
    `match_and_rewrite` mutant 38, which reads x twice)."""
    before, _ = passed(DOUBLED, "decouple")
    after, remarks = passed(DOUBLED, "decouple,prefetch-indices")
    assert print_module(after) == print_module(before) and remarks == []
    x = np.arange(1, 8, dtype=np.float32)
    got, _ = run_loop(DOUBLED, "decouple,prefetch-indices,to-dlc,codegen", {"x": x})
    np.testing.assert_array_equal(got, 2 * x)
