"""Each optimization changes the statistics by the factor its design predicts, and says why it declines."""

from __future__ import annotations

import pytest

import ember.dialects  # noqa: F401
from ember.bench.run import compile_variant, run
from ember.bench.workloads import Workload
from ember.ir.parser import parse_module
from ember.passes import parse_pipeline, run_passes
from ember.sim.machine import load_machine

BAGS, POOL, DIM, VL = 4, 6, 64, 16
W = Workload("T", "bag_sum", 1, 500, DIM, POOL, BAGS, 0.8)
LOOKUPS = BAGS * POOL


@pytest.fixture(scope="module")
def stats() -> dict[str, dict[str, float]]:
    m = load_machine("default")
    return {v: run(W, v, m).stats for v in ("O0", "O1", "O2", "O3", "hand", "core")}


def test_o0_marshals_every_element(stats: dict[str, dict[str, float]]) -> None:
    assert stats["O0"]["tokens"] == LOOKUPS * DIM
    assert stats["O0"]["operands"] == 3 * LOOKUPS * DIM  # bag index, column, value


def test_vectorize_divides_tokens_by_the_vector_length(stats: dict[str, dict[str, float]]) -> None:
    assert stats["O0"]["tokens"] / stats["O1"]["tokens"] == VL
    assert stats["O1"]["cycles"] < stats["O0"]["cycles"] / 4


def test_vectorize_width_is_an_option() -> None:
    module = W.module()
    passes = parse_pipeline("lower-emb,decouple,vectorize{vl=8},to-dlc,codegen")
    run_passes(module, passes)
    vtus = [i for a in passes[-1].program.access for i in a.body if i.op == "vtu"]  # type: ignore[attr-defined]
    assert vtus and all(i.args[3] == 8 for i in vtus)


def test_bufferize_leaves_one_token_per_row(stats: dict[str, dict[str, float]]) -> None:
    assert stats["O2"]["tokens"] == LOOKUPS
    assert stats["O2"]["operands"] == 2 * LOOKUPS  # the bag index and the row buffer
    assert stats["O2"]["callbacks"] == LOOKUPS


def test_align_queues_stops_marshaling_the_bag_index(stats: dict[str, dict[str, float]]) -> None:
    assert stats["O3"]["operands"] == LOOKUPS  # only the row buffers
    assert stats["O3"]["tokens"] == LOOKUPS + BAGS  # plus one counting token per bag


def test_simplify_mem_replaces_gathers_with_contiguous_accesses() -> None:
    o2 = [i.op for i in compile_variant(W, "O2").code if hasattr(i, "op")]
    o3 = [i.op for i in compile_variant(W, "O3").code if hasattr(i, "op")]
    assert "vgather" in o2 and "vscatter" in o2
    assert "vgather" not in o3 and "vscatter" not in o3 and "vld" in o3 and "vst" in o3


def test_each_level_is_faster_and_o3_matches_hand_written(stats: dict[str, dict[str, float]]) -> None:
    c = {k: v["cycles"] for k, v in stats.items()}
    assert c["O0"] > c["O1"] and c["O0"] > c["O2"] > c["O3"]
    assert c["hand"] / c["O3"] >= 0.98
    assert c["core"] > c["O3"] and stats["core"]["tokens"] == 0


LOOP_LEVEL = """module {
  func @main(%idx: memref<?xi64>, %off: memref<?xi64>, %out: memref<?xi64>) -> () {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %n = loop.dim %off {axis = 0} : index
    %nb = loop.subi %n, %c1 : index
    loop.for %c0, %nb, %c1 (%b: index) {
      %s = loop.load %off, %b : i64
      %b1 = loop.addi %b, %c1 : index
      %e = loop.load %off, %b1 : i64
      loop.for %s, %e, %c1 (%j: index) {
        %r = loop.load %idx, %j : i64
        %k = loop.addi %j, %r : index
        loop.store %r, %out, %j
      }
    }
    return
  }
}
"""


def test_passes_decline_with_remarks() -> None:
    module = parse_module(LOOP_LEVEL, "t.eir")
    passes = parse_pipeline("decouple,vectorize,bufferize,align-queues,to-dlc")
    run_passes(module, passes)
    remarks = [r for p in passes for r in getattr(p, "remarks", [])]
    assert any("vectorize: loop not vectorized: 'slc.alu' uses the induction variable" in r for r in remarks)
    assert any("align-queues: index still marshaled" in r for r in remarks)
    assert all(r.startswith("t.eir:") for r in remarks)


def test_outputs_agree_with_numpy_on_another_machine() -> None:
    m = load_machine("small")  # run() raises when a simulated output differs from numpy's
    cycles = {v: run(W, v, m).stats["cycles"] for v in ("O0", "O1", "O2", "O3", "hand", "core")}
    assert cycles["O3"] < cycles["O0"]
