"""The expert baselines and the passes that let -O3 match them: each pass's effect, the cases it must
decline (with the remark checked), and `ember-bench --hand`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember.dialects  # noqa: F401
from ember.backend.dae import Instr, Program
from ember.bench.run import baselines, compile_variant, run
from ember.bench.workloads import Workload
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.passes import PRESETS, parse_pipeline, run_passes
from ember.sim.engines import simulate

ROOT = Path(__file__).resolve().parent.parent
M = load_machine("default")
BAG = Workload("B", "bag_sum", 1, 400, 64, 5, 6, 0.8)
RM = Workload("R", "bag_sum", 1, 4000, 128, 20, 32, 0.0)
WEIGHTED = Workload("W", "bag_weighted", 1, 2000, 128, 8, 16, 0.9, graph="arxiv", weighted=True)
GATHER = Workload("G", "gather", 1, 2000, 128, 1, 96, 0.0)


def program_of(w: Workload, pipeline: str) -> tuple[Program, list[str]]:
    """`w` compiled by `pipeline` (ending in codegen), and every pass's remarks."""
    passes = parse_pipeline(pipeline)
    run_passes(w.module(), passes)
    return passes[-1].program, [r for p in passes for r in getattr(p, "remarks", [])]  # type: ignore[attr-defined]


def compiled(w: Workload, pipeline: str) -> tuple[list[Instr], list[str]]:
    program, remarks = program_of(w, pipeline)
    return [i for i in program.code if isinstance(i, Instr)], remarks


def with_and_without(w: Workload, name: str) -> dict[str, tuple[dict, dict, dict]]:
    """`w` simulated at -O3 ("on") and at -O3 without pass `name` ("off"): inputs, outputs, statistics."""
    out = {}
    for key, pipe in (("off", PRESETS["O3"].replace(f"{name},", "")), ("on", PRESETS["O3"])):
        program, _ = program_of(w, pipe)
        inputs = w.inputs(0)
        w.bind(program, 0, w.table(0, inputs["indices"]))
        out[key] = (inputs, *simulate(program, inputs, M))
    return out


def ops(code: list[Instr]) -> list[str]:
    return [i.op for i in code]


def test_unroll_makes_one_callback_per_row() -> None:
    before = run(BAG, "O1", M).stats
    program, _ = program_of(BAG, "lower-emb,decouple,vectorize,unroll,to-dlc,codegen")
    vtus = [i for a in program.access for i in a.body if i.op == "vtu"]
    assert [i.args[3] for i in vtus] == [BAG.dim]  # one head of D lanes, not D/16 of 16
    assert before["tokens"] == BAG.bags * BAG.pooling * BAG.dim // 16  # -O1: a token per chunk


def test_unroll_declines_a_row_wider_than_its_budget() -> None:
    code, remarks = compiled(BAG, "lower-emb,decouple,vectorize,unroll{max_bits=1024},bufferize,to-dlc,codegen")
    assert any("unroll: loop not unrolled: a row of 64 lanes (2048 bits) is wider than max_bits=1024" in r
               for r in remarks)
    assert "popb" in ops(code)  # left to bufferize, as at -O2


def test_hoist_builds_the_mask_once_and_stops_marshaling_it() -> None:
    pipe = "lower-emb,decouple,vectorize,unroll,{}simplify-mem,to-dlc,codegen"
    without, _ = compiled(BAG, pipe.format(""))
    with_, _ = compiled(BAG, pipe.format("hoist,"))
    assert ops(without).count("pop") == 4 and ops(with_).count("pop") == 2  # mask, bag, index vector, row -> bag, row
    assert "vgather" in ops(without) and "vgather" not in ops(with_)  # simplify-mem sees the iota


def test_promote_keeps_the_row_in_a_register_and_stores_it_once_per_bag() -> None:
    code, remarks = compiled(BAG, PRESETS["O3"])
    assert not [r for r in remarks if "promote" in r]
    assert "vld" not in ops(code) and ops(code).count("vst") == 1  # the bag's end stores; nothing is zeroed
    s, paper = run(RM, "O3", M).stats, run(RM, "paper-O3", M).stats  # run() checks outputs against numpy
    assert s["execute.instructions"] < paper["execute.instructions"] / 10
    assert s["cycles"] < 0.8 * paper["cycles"]


def test_promote_declines_over_budget_and_without_a_whole_row() -> None:
    _, remarks = compiled(BAG, PRESETS["O3"].replace("promote-accumulators", "promote-accumulators{registers=2}"))
    assert any("promote-accumulators: output row kept in memory: a row of 'output' takes 4 vector registers, "
               "more than registers=2" in r for r in remarks)
    _, remarks = compiled(BAG, PRESETS["O3"].replace("hoist,", ""))
    assert any("output row kept in memory: 'output' is accessed by 'loop.gather'" in r for r in remarks)
    with pytest.raises(EmberError, match="registers=40 is not between 1 and the 32 vector registers"):
        parse_pipeline("promote-accumulators{registers=40}")


def test_prefetch_reads_index_and_weight_lines_ahead() -> None:
    program, _ = program_of(WEIGHTED, PRESETS["O3"])
    mins = [i for i in program.access[0].body if i.op == "alu" and i.args[1] == "min"]
    assert len(mins) == 3  # the index and the weight streams, and the output row (prefetch-outputs)
    assert len([i for i in mins if i.args[3].n >= 2]) == 2  # clamped to len(indices)-1, len(weights)-1
    w = Workload("R", "bag_sum", 1, 4000, 32, 20, 32, 0.0)
    runs = with_and_without(w, "prefetch-indices")
    assert runs["on"][2]["cycles"] < 0.95 * runs["off"][2]["cycles"]


def test_prefetch_leaves_a_loop_without_an_indirect_access_alone() -> None:
    from ember.ir.parser import parse_module

    text = """module attributes {inputs = ["x"], outputs = []} {
  func @main(%x: memref<?xi64>) -> () {
    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %n = loop.dim %x {axis = 0} : index
    slc.for %c0, %n, %c1 (%i: stream<index>) {
      %v = slc.mem %x, %i : stream<i64>
    }
    return
  }
}
"""
    module = parse_module(text, "p.eir")
    passes = parse_pipeline("prefetch-indices")
    run_passes(module, passes)
    assert sum(1 for o in module.walk() if o.name == "slc.mem") == 1


def test_prefetch_outputs_touches_each_line_of_the_row_stored_ahead() -> None:
    """A gather writes a fresh row a lookup: without the pass each store's write-allocate read misses to
    DRAM; with it the access unit has read one element of each of the row's lines 64 lookups before."""
    program, remarks = program_of(GATHER, PRESETS["O3"])
    assert not [r for r in remarks if "prefetch-outputs" in r]
    body = program.access[0].body
    touch = [i for i in body if i.op == "mem" and i.args[1].sym == 2]  # @2 is the output
    assert len(touch) == 1
    tu = next(i for i in body if i.op == "tu" and i.args[0] == touch[0].args[1].index[1])
    assert tu.args[1:4] == [0, GATHER.dim, 16]  # one element per 64-byte line of the row
    w = Workload("G", "gather", 1, 20000, 128, 1, 2000, 0.0)
    runs = with_and_without(w, "prefetch-outputs")
    for inputs, outputs, _ in runs.values():
        np.testing.assert_array_equal(outputs["output"], w.table(0, inputs["indices"])[inputs["indices"]])
    assert runs["on"][2]["cycles"] < 0.5 * runs["off"][2]["cycles"]


def test_prefetch_outputs_declines_a_counted_row_and_a_chunked_one() -> None:
    late = PRESETS["O3"].replace("prefetch-outputs,", "").replace("align-queues,", "align-queues,prefetch-outputs,")
    program, remarks = program_of(GATHER, late)
    assert any("prefetch-outputs: output rows not prefetched: the row of 'output' this store writes is not an "
               "access loop's induction variable" in r for r in remarks)
    assert not [i for i in program.access[0].body if i.op == "mem" and i.args[1].sym == 2]
    _, remarks = program_of(GATHER, "lower-emb,decouple,vectorize,prefetch-outputs,to-dlc,codegen")
    assert any("'output' is written lane by lane ('loop.scatter'), not as one row" in r for r in remarks)
    _, remarks = program_of(GATHER, "lower-emb,decouple,vectorize,bufferize,prefetch-outputs,to-dlc,codegen")
    assert any("'output' is written by 'loop.scatter' inside a loop of its callback" in r for r in remarks)
    with pytest.raises(EmberError, match="line=0 must be a positive number of bytes"):
        parse_pipeline("prefetch-outputs{line=0}")


@pytest.mark.parametrize("w", [RM, WEIGHTED, GATHER], ids=lambda w: w.kind)
def test_o3_reaches_the_expert_on_every_kind(w: Workload) -> None:
    """All checked against numpy by run(); -O3 within 5% of the expert's cycles, the published ladder's -O3
    more than 5% behind."""
    hand, o3, paper = (run(w, v, M).stats["cycles"] for v in ("hand", "O3", "paper-O3"))
    assert hand / o3 >= 0.95 and hand / paper < 0.95


def test_every_builtin_expert_opens_with_its_cost_per_lookup() -> None:
    files = sorted((ROOT / "samples" / "handwritten").glob("*.dae"))
    assert len(files) >= 8
    for f in files:
        head = f.read_text().split(".dae 2")[0]
        assert "Per lookup:" in head and "Why no fewer:" in head, f.name


def test_a_missing_builtin_names_the_file_and_the_way_out() -> None:
    with pytest.raises(EmberError, match=r"no hand-written baseline for bag_sum with D=48 "
                                         r"\(expected samples/handwritten/bag_sum.d48.dae; give one with --hand"):
        baselines(Workload("X", "bag_sum", 1, 10, 48, 1, 1, 0.0))


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from ember.cli.bench import main; main()", *args],
                          capture_output=True, text=True, cwd=ROOT)


def test_bench_hand_runs_a_users_kernel_and_refuses_a_wrong_one(tmp_path: Path) -> None:
    mine = tmp_path / "mine.dae"
    text = (ROOT / "samples" / "handwritten" / "bag_sum.d32.dae").read_text()
    mine.write_text(text)
    ok = bench("--suite", "tiny", "--only", "RM1_L0", "--variants", "O3,hand", "--hand", f"bag_sum={mine}")
    assert ok.returncode == 0, ok.stderr
    assert "RM1_L0 hand: mine.dae" in ok.stdout + ok.stderr
    mine.write_text(text.replace("vfadd.f32 v0, v0, v1", "vfsub.f32 v0, v0, v1"))
    bad = bench("--suite", "tiny", "--only", "RM1_L0", "--variants", "hand", "--hand", f"bag_sum={mine}")
    assert bad.returncode == 1 and bad.stderr.strip().splitlines() == [
        "ember-bench: error: RM1_L0 hand (mine.dae): simulated output differs from numpy's"]
    mine.write_text(text.replace("vfadd.f32 v0, v0, v1", "vfadd.f32 v0, v0"))
    broken = bench("--suite", "tiny", "--only", "RM1_L0", "--hand", f"bag_sum={mine}")
    assert broken.returncode == 1 and broken.stderr.startswith(f"ember-bench: {mine}:")
    assert "Traceback" not in broken.stderr


def test_compiled_o3_equals_the_expert_shape_on_a_gather() -> None:
    """-O3's gather is the expert's: one token a lookup, the row popped into a register and stored once."""
    program = compile_variant(GATHER, "O3")
    case = [i.op for i in program.code if isinstance(i, Instr)]
    assert case.count("pop") == 1 and case.count("vst") == 1 and "popb" not in case
    out = run(GATHER, "O3", M).stats
    assert out["tokens"] == GATHER.bags
    assert np.isfinite(out["sol_fraction"])


def test_bench_hand_takes_a_users_kernel_for_every_form_of_the_representations_suite(tmp_path: Path) -> None:
    """--hand accepts every kind a workload computes, the representation forms included (it listed only the kinds
    that had built-in experts when it was written, so --hand qbag4=... was refused once int4 had one)."""
    from ember.bench.forms import FORMS
    from ember.bench.workloads import KINDS

    assert set(FORMS) <= set(KINDS)
    mine = tmp_path / "mine.dae"
    mine.write_text((ROOT / "samples" / "handwritten" / "qbag4.d32.dae").read_text())
    ok = bench("--suite", "representations-tiny", "--only", "RM1_int4", "--variants", "hand", "--hand",
               f"qbag4={mine}")
    assert ok.returncode == 0, ok.stderr
    assert "RM1_int4 hand: mine.dae" in ok.stdout + ok.stderr
