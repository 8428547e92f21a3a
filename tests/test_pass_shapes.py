"""Passes on valid programs whose outputs or tables are not the 2-D rows most of them are tuned for (issue 35,
point 5): 1-D and 3-D outputs, written by lowering or by hand with vector ops, tables of rank 1 to 4, empty
tables and tables whose width is known only at run time.  A pass handles such a program or declines with a
remark; none may throw.  Every level compiles each program, and the simulated output is checked against numpy.
"""

from __future__ import annotations

import numpy as np
from conftest import run_tool

from ember.backend.binary import assemble, disassemble
from ember.ir.parser import parse_module
from ember.machine import load_machine
from ember.passes import PRESETS, parse_pipeline, run_passes
from ember.sim import reference

LEVELS = ("O0", "O1", "O2", "O3", "core", "paper-O3")  # paper-O3: bufferize and init-ahead, which -O3 has not
MACHINE = load_machine("default")
RNG = np.random.default_rng(35)
IDX = np.array([3, 1, 4, 1, 5, 9, 2], dtype=np.int64)
OFF = np.array([0, 2, 2, 7], dtype=np.int64)  # three bags, the second empty


def simulate(text: str, level: str, feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, list[str]]:
    """`text` compiled at `level` and run on the reference engine: its one output and the passes' remarks
    (choose-plan's verdicts left out)."""
    passes = parse_pipeline(PRESETS[level])
    run_passes(parse_module(text, "s.eir"), passes)
    program = disassemble(assemble(passes[-1].program), "s.bin")  # type: ignore[attr-defined]
    out, _ = reference.simulate(program, feeds, MACHINE)
    remarks = [r for p in passes for r in getattr(p, "remarks", []) if "choose-plan" not in r]
    return next(iter(out.values())), remarks


def bags(rows: np.ndarray) -> np.ndarray:
    """The sum of each bag of OFF over `rows` (one per index of IDX); an empty bag is 0."""
    return np.stack([rows[OFF[b]:OFF[b + 1]].sum(0) for b in range(len(OFF) - 1)])


def at_every_level(text: str, feeds: dict[str, np.ndarray], want: np.ndarray) -> dict[str, list[str]]:
    """Compile and run `text` at every level, checking its output against `want`; the remarks of each level."""
    remarks = {}
    for level in LEVELS:
        got, remarks[level] = simulate(text, level, feeds)
        assert got.shape == want.shape, level
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=level)
    return remarks


# ---------------------------------------------------------------------------------------------------------
# promote-accumulators and prefetch-outputs read an output's accesses as [row, column]: a 1-D output made
# promote read a mask operand that is not there (IndexError), a 3-D one made both decline for a wrong reason.

# out[d] = sum_j t[idx[j], d]: one 1-D row, accumulated over every lookup (vectorize makes the row's accesses
# vload and vstore of three operands)
SUM_1D = """module {
  func @main(%t: memref<10x16xf32>, %idx: memref<?xi64>) -> (memref<16xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %c16 = loop.const {value = 16} : index
    %n = loop.dim %idx {axis = 0} : index
    %zero = loop.const {value = 0.0} : f32
    %out = loop.alloc : memref<16xf32>
    loop.for %c0, %c16, %c1 (%i: index) {
      loop.store %zero, %out, %i
    }
    loop.for %c0, %n, %c1 (%j: index) {
      %r = loop.load %idx, %j : i64
      loop.for %c0, %c16, %c1 (%d: index) {
        %v = loop.load %t, %r, %d : f32
        %a = loop.load %out, %d : f32
        %w = loop.addf %a, %v : f32
        loop.store %w, %out, %d
      }
    }
    return %out
  }
}
"""

# the same, written with vector ops: a whole-row vload and vstore of the 1-D output in one callback
SUM_1D_VECTOR = """module {
  func @main(%t: memref<10x16xf32>, %idx: memref<?xi64>) -> (memref<16xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %c16 = loop.const {value = 16} : index
    %n = loop.dim %idx {axis = 0} : index
    %zero = loop.const {value = 0.0} : f32
    %z = loop.splat %zero : vector<16xf32>
    %m = loop.tailmask %c0, %c16 : vector<16xi1>
    %out = loop.alloc : memref<16xf32>
    loop.vstore %z, %out, %c0, %m
    loop.for %c0, %n, %c1 (%j: index) {
      %r = loop.load %idx, %j : i64
      %v = loop.vload %t, %r, %c0, %m : vector<16xf32>
      %a = loop.vload %out, %c0, %m : vector<16xf32>
      %w = loop.addf %a, %v : vector<16xf32>
      loop.vstore %w, %out, %c0, %m
    }
    return %out
  }
}
"""


def test_a_1d_output_is_kept_in_memory_with_a_remark() -> None:
    """Was an IndexError in promote-accumulators at -O3 (it read the vload's 4th operand first)."""
    t = RNG.standard_normal((10, 16)).astype(np.float32)
    for text in (SUM_1D, SUM_1D_VECTOR):
        remarks = at_every_level(text, {"t": t, "idx": IDX}, t[IDX].sum(0))
        assert any("promote-accumulators: output row kept in memory: 'out' is a memref<16xf32>, not a 2-D memref "
                   "of rows" in r for r in remarks["O3"]), remarks["O3"]


def test_ember_opt_remarks_on_a_1d_output() -> None:
    """The user's symptom: `ember-opt -O3` printed 'internal error: IndexError' instead of compiling."""
    r = run_tool("opt", "-O3", "--remarks", "-o", "-", "-", stdin=SUM_1D.encode())
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert "internal error" not in err
    assert "<stdin>:12:5: remark: promote-accumulators: output row kept in memory: 'out' is a memref<16xf32>" in err


# out[b, k, d] = sum over bag b of t[idx[j], k, d]: 3-D rows, as lowering writes a bag over a 3-D table
BAG_3D = """module {
  func @main(%t: memref<10x2x16xf32>, %idx: memref<?xi64>, %off: memref<?xi64>) -> (memref<?x2x16xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %c2 = loop.const {value = 2} : index
    %c16 = loop.const {value = 16} : index
    %no = loop.dim %off {axis = 0} : index
    %nb = loop.subi %no, %c1 : index
    %zero = loop.const {value = 0.0} : f32
    %out = loop.alloc %nb : memref<?x2x16xf32>
    loop.for %c0, %nb, %c1 (%i: index) {
      loop.for %c0, %c2, %c1 (%k: index) {
        loop.for %c0, %c16, %c1 (%d: index) {
          loop.store %zero, %out, %i, %k, %d
        }
      }
    }
    loop.for %c0, %nb, %c1 (%b: index) {
      %s = loop.load %off, %b : i64
      %b1 = loop.addi %b, %c1 : index
      %e = loop.load %off, %b1 : i64
      loop.for %s, %e, %c1 (%j: index) {
        %r = loop.load %idx, %j : i64
        loop.for %c0, %c2, %c1 (%k2: index) {
          loop.for %c0, %c16, %c1 (%d2: index) {
            %v = loop.load %t, %r, %k2, %d2 : f32
            %a = loop.load %out, %b, %k2, %d2 : f32
            %w = loop.addf %a, %v : f32
            loop.store %w, %out, %b, %k2, %d2
          }
        }
      }
    }
    return %out
  }
}
"""

# a bag's rows stored as out[b, 0, 0:16] with vector ops written by hand: one vload and vstore per lookup,
# at the row the outer loop counts, as promote-accumulators wants them, but of a 3-D output
BAG_3D_VECTOR = """module {
  func @main(%t: memref<10x16xf32>, %idx: memref<?xi64>, %off: memref<?xi64>) -> (memref<?x1x16xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %c16 = loop.const {value = 16} : index
    %no = loop.dim %off {axis = 0} : index
    %nb = loop.subi %no, %c1 : index
    %zero = loop.const {value = 0.0} : f32
    %z = loop.splat %zero : vector<16xf32>
    %m = loop.tailmask %c0, %c16 : vector<16xi1>
    %out = loop.alloc %nb : memref<?x1x16xf32>
    loop.for %c0, %nb, %c1 (%i: index) {
      loop.vstore %z, %out, %i, %c0, %c0, %m
    }
    loop.for %c0, %nb, %c1 (%b: index) {
      %s = loop.load %off, %b : i64
      %b1 = loop.addi %b, %c1 : index
      %e = loop.load %off, %b1 : i64
      loop.for %s, %e, %c1 (%j: index) {
        %r = loop.load %idx, %j : i64
        %v = loop.vload %t, %r, %c0, %m : vector<16xf32>
        %a = loop.vload %out, %b, %c0, %c0, %m : vector<16xf32>
        %w = loop.addf %a, %v : vector<16xf32>
        loop.vstore %w, %out, %b, %c0, %c0, %m
      }
    }
    return %out
  }
}
"""


def test_a_3d_output_is_declined_for_its_rank() -> None:
    """promote-accumulators took the third index for the mask and prefetch-outputs the second for the columns, so
    they declined with a wrong reason ('read and written at different places', 'run unroll first')."""
    t3 = RNG.standard_normal((10, 2, 16)).astype(np.float32)
    t2 = RNG.standard_normal((10, 16)).astype(np.float32)
    for text, t, want, out in ((BAG_3D, t3, bags(t3[IDX]), "memref<?x2x16xf32>"),
                               (BAG_3D_VECTOR, t2, bags(t2[IDX])[:, None, :], "memref<?x1x16xf32>")):
        remarks = at_every_level(text, {"t": t, "idx": IDX, "off": OFF}, want)
        for what in ("promote-accumulators: output row kept in memory", "prefetch-outputs: output rows not prefetched"):
            assert any(f"{what}: 'out' is a {out}, not a 2-D memref of rows" in r for r in remarks["O3"]), (
                what, remarks["O3"])


# ---------------------------------------------------------------------------------------------------------
# Embedding ops over tables of other shapes, through lower-emb and choose-plan's cost estimate.

def gather(table: str, result: str) -> str:
    return f"""module {{
  func @main(%t: tensor<{table}xf32>, %i: tensor<?xi64>) -> (tensor<{result}xf32>) {{
    %y = emb.gather %t, %i : tensor<{result}xf32>
    return %y
  }}
}}
"""


def bag(table: str, result: str, mode: str = "sum", elem: str = "f32") -> str:
    return f"""module {{
  func @main(%t: tensor<{table}x{elem}>, %i: tensor<?xi64>, %o: tensor<?xi64>) -> (tensor<{result}x{elem}>) {{
    %y = emb.bag %t, %i, %o {{mode = "{mode}", empty = "zero"}} : tensor<{result}x{elem}>
    return %y
  }}
}}
"""


def test_gathers_from_tables_of_any_rank_including_empty_ones() -> None:
    """An empty table (an extent of 0) divided by zero in choose-plan's cost estimate at -O3 (ZeroDivisionError);
    tables of rank 1, 3 and 4 are checked with them."""
    for shape in ((10,), (10, 2, 3), (10, 1, 1, 16), (10, 0), (10, 0, 4)):
        rest = "".join(f"x{d}" for d in shape[1:])
        t = RNG.standard_normal(shape).astype(np.float32)
        at_every_level(gather("x".join(map(str, shape)), "?" + rest), {"t": t, "i": IDX}, t[IDX])


def test_bags_over_empty_tables() -> None:
    """Rows of no elements, and a table of no rows (which no index may name): the same ZeroDivisionError."""
    t = np.zeros((10, 0), np.float32)
    at_every_level(bag("10x0", "?x0"), {"t": t, "i": IDX, "o": OFF}, np.zeros((3, 0), np.float32))
    none = np.zeros(0, np.int64)
    at_every_level(bag("0x4", "?x4", "max"), {"t": np.zeros((0, 4), np.float32), "i": none, "o": np.zeros(3, np.int64)},
                   np.zeros((2, 4), np.float32))


def test_tables_whose_width_is_known_only_at_run_time() -> None:
    """lower-emb made `loop.const` of the width of a table given as an argument, tensor<?x?xf32>, and failed with
    "'loop.const' value None does not fit index"; it reads the width with `loop.dim` now."""
    t = RNG.standard_normal((10, 5)).astype(np.float32)
    at_every_level(gather("?x?", "?x?"), {"t": t, "i": IDX}, t[IDX])
    at_every_level(bag("?x?", "?x?"), {"t": t, "i": IDX, "o": OFF}, bags(t[IDX]))
    at_every_level(bag("?x?", "?x5", "max"), {"t": t, "i": IDX, "o": OFF},
                   np.stack([t[IDX[OFF[b]:OFF[b + 1]]].max(0) if OFF[b + 1] > OFF[b] else np.zeros(5, np.float32)
                             for b in range(3)]))
    h = t.astype(np.float16)  # a narrow table accumulates in f32 over the same width, then rounds
    at_every_level(bag("?x?", "?x?", elem="f16"), {"t": h, "i": IDX, "o": OFF},
                   bags(h[IDX].astype(np.float32)).astype(np.float16))


# ---------------------------------------------------------------------------------------------------------
# decouple moves a nest's loads of memrefs the nest does not write to the access unit.  It counted only
# scalar stores as writes, so a load of a row the nest writes with a vector store was streamed ahead of that
# store and read stale values: 9 instead of 37 below.

# out[0] = 1 + sum_j x[j], with out written whole by a hand-written vector store at each step
VSTORE_THEN_LOAD = """module {
  func @main(%x: memref<8xf32>) -> (memref<8xf32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %c8 = loop.const {value = 8} : index
    %one = loop.const {value = 1.0} : f32
    %ones = loop.splat %one : vector<8xf32>
    %m = loop.tailmask %c0, %c8 : vector<8xi1>
    %out = loop.alloc : memref<8xf32>
    loop.vstore %ones, %out, %c0, %m
    loop.for %c0, %c8, %c1 (%j: index) {
      %v = loop.load %x, %j : f32
      %p = loop.load %out, %c0 : f32
      %s = loop.addf %v, %p : f32
      %w = loop.splat %s : vector<8xf32>
      loop.vstore %w, %out, %c0, %m
    }
    return %out
  }
}
"""


def test_a_load_of_what_a_vector_store_writes_stays_behind_it() -> None:
    x = np.arange(1, 9, dtype=np.float32)
    at_every_level(VSTORE_THEN_LOAD, {"x": x}, np.full(8, 1 + x.sum(), dtype=np.float32))


# A rank-0 output compiled at every level, and then the simulator could not give it its undefined contents
# (numpy cannot view a 0-d float array as bytes): "output0 of shape [] (4 bytes) cannot be allocated".
SUM_0D = """module {
  func @main(%t: memref<10xf32>, %idx: memref<?xi64>) -> (memref<f32>) {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %n = loop.dim %idx {axis = 0} : index
    %zero = loop.const {value = 0.0} : f32
    %out = loop.alloc : memref<f32>
    loop.store %zero, %out
    loop.for %c0, %n, %c1 (%j: index) {
      %r = loop.load %idx, %j : i64
      %v = loop.load %t, %r : f32
      %a = loop.load %out : f32
      %w = loop.addf %a, %v : f32
      loop.store %w, %out
    }
    return %out
  }
}
"""


def test_a_rank_0_output() -> None:
    t = RNG.standard_normal(10).astype(np.float32)
    at_every_level(SUM_0D, {"t": t, "idx": IDX}, np.array(t[IDX].sum(dtype=np.float32)))
