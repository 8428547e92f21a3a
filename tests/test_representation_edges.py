"""Edges of emb.ttbag, emb.robe and emb.dhe found in review: malformed attributes and records are one-line errors,
and the speed-of-light counts stay lower bounds (sol_fraction <= 1) for programs the counts did not foresee: no
lookups at all, and a program that keeps a row it computed for a repeated index."""

from __future__ import annotations

import re

import numpy as np
import pytest
import test_dhe as dhe
import test_robe as robe
import test_ttbag as tt
from conftest import run_tool

import ember.dialects  # noqa: F401
from ember.backend.dae_text import parse_dae, print_dae
from ember.ir.diagnostics import EmberError
from ember.ir.parser import parse_module
from ember.ir.printer import print_module
from ember.machine import load_machine
from ember.passes import PRESETS, parse_pipeline, run_passes
from ember.sim.fast import engine as fast
from ember.sim.work import chain_macs, shared_chain_macs, vector_lanes, work_counts

MACHINE = load_machine("default")


def opt_error(tmp_path, source: str) -> str:
    """ember-opt -O0 on `source`: it must fail with one located line and write nothing; the line."""
    src = tmp_path / "bad.eir"
    src.write_text(source)
    r = run_tool("opt", str(src), "-O0", "-o", str(tmp_path / "out.dae"))
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err and "internal error" not in err, err
    assert re.match(rf"ember-opt: {re.escape(str(src))}:\d+:\d+: error: ", err) and err.count("\n") == 1, err
    assert not (tmp_path / "out.dae").exists()
    return err


def test_tt_cores_as_a_float_is_refused_with_its_position(tmp_path) -> None:
    err = opt_error(tmp_path, tt.text(*tt.TRAINS[2], rows=39).replace("cores = 2", "cores = 2.0"))
    assert "cores must be 2, 3 or 4, got 2.0" in err


def test_a_dhe_layer_of_dynamic_shape_is_named(tmp_path) -> None:
    source = dhe.text([16, 8, 4]).replace('    %w0 = param {name = "w0"} : tensor<8x16xf32>\n', "").replace(
        "%offsets: tensor<?xi64>)", "%offsets: tensor<?xi64>, %w0: tensor<?x16xf32>)")
    assert "layer 1's weight and bias must have static shapes, got tensor<?x16xf32>" in opt_error(tmp_path, source)


def lowered(source: str) -> str:
    module = parse_module(source, "x.eir")
    run_passes(module, parse_pipeline("lower-emb"))
    return print_module(module)


@pytest.mark.parametrize(("which", "change", "message"), [
    ("robe", lambda s: s.replace('op = "emb.robe", block = 4,', 'op = "emb.robe",'),
     "block must be a positive integer"),
    ("robe", lambda s: s.replace('op = "emb.robe", block = 4,', 'op = "emb.robe", block = 3,'),
     "block must divide the row width 16, got 3"),
    ("robe", lambda s: s.replace('op = "emb.robe", block = 4,', 'op = "emb.robe", block = 4.0,'),
     "block must be a positive integer"),
    ("tt", lambda s: s.replace("cores = 3,", "cores = 3.0,"), "cores must be 2 or 3 or 4"),
    ("tt", lambda s: s.replace("cores = 3,", "cores = 2,"), "do not chain"),
    ("tt", lambda s: s.replace("rows = 50", "rows = 61"), "rows must be at most 60"),
    ("dhe", lambda s: s.replace("layers = 2,", "layers = 2.0,"), "layers must be 1 or 2 or 3"),
])
def test_malformed_work_ops_are_refused_where_they_are_written(which: str, change, message: str) -> None:
    """`work` ops as a user may write them at the loop level: codegen copies them into the program's records, so a
    bad one must be refused at its line, not crash codegen or make a .dae that ember-asm then refuses."""
    source = {"robe": lambda: robe.text(97, 16, 4), "tt": lambda: tt.text(*tt.TRAINS[3], rows=50),
              "dhe": lambda: dhe.text([16, 8, 4])}[which]()
    text = lowered(source)
    bad = change(text)
    assert bad != text
    with pytest.raises(EmberError, match=message) as e:
        run_passes(parse_module(bad, "x.eir"), parse_pipeline(PRESETS["O0"].replace("lower-emb,", "")))
    assert re.match(r"x\.eir:\d+:\d+: error: 'work' ", e.value.render())


@pytest.mark.parametrize(("change", "message"), [
    (lambda s: s.replace('param "w1" f32 [4, 8]', 'param "w1" f64 [4, 8]'), "@7 is f64 \\[4, 8\\]"),
    (lambda s: s.replace('param "w0" f32 [8, 16]', 'input "w0" f32 [?, 16]'), "@5 is f32 \\[\\?, 16\\]"),
])
def test_dhe_records_on_layers_their_bound_cannot_count_are_refused(change, message: str) -> None:
    """The bound counts the dhe layers' multiply-adds in float32 vectors, from their shapes."""
    source = dhe.text([16, 8, 4])
    module = parse_module(source, "x.eir")
    passes = parse_pipeline(PRESETS["O0"])
    run_passes(module, passes)
    text = print_dae(passes[-1].program)  # type: ignore[attr-defined]
    bad = change(text)
    assert bad != text
    with pytest.raises(EmberError, match=message):
        parse_dae(bad, "x.dae")


def sol(program, feeds: dict[str, np.ndarray]) -> tuple[dict, float]:
    out, st = fast.simulate(program, feeds, MACHINE, None, False)
    return out, st["sol_fraction"]


def test_no_lookups_need_no_dhe_weights_nor_robe_block() -> None:
    """A bag with no lookups reads no weight and no block: counting them made sol_fraction 768 and 21."""
    none = {"indices": np.array([], dtype=np.int64), "offsets": np.array([0])}
    params = dhe.make_params([16, 256, 128])
    _, fraction = sol(dhe.compile_dhe(dhe.text([16, 256, 128]), params, "O0"), none)
    assert 0 < fraction <= 1
    array = np.zeros(100_000, np.float32)
    _, fraction = sol(robe.compile_robe(robe.text(100_000, 1024, 1024), array, "O0"), none)
    assert 0 < fraction <= 1


K, D, BUCKETS = 64, 64, 1_000_000
KEEPING = f"""\
.dae 2
.sym @0 input "indices" i64 [?]
.sym @1 input "offsets" i64 [?]
.sym @2 param "slope" i64 [{K}]
.sym @3 param "bias" i64 [{K}]
.sym @4 param "prime" i64 [{K}]
.sym @5 param "w0" f32 [{D}, {K}]
.sym @6 param "b0" f32 [{D}]
.sym @7 temp "encoding" f32 [{K}]
.sym @8 temp "row" f32 [{D}]
.sym @9 output "out" f32 [?, {D}]
.work dhe sum table=@5 indices=@0 offsets=@1 output=@9
.code
  li r0, 0
  li r1, 1
  li r2, {K}
  li r3, {D}
  li r4, {BUCKETS}
  li f0, {float(BUCKETS - 1)}
  li f1, 2.0
  li f2, 1.0
  li f3, 0.0
  li r5, 16
  li r30, 0
  li r31, 0
  alloc @7, [{K}]
  alloc @8, [{D}]
  dim r6, @1, 0
  sub r6, r6, r1
  alloc @9, [r6, {D}]
  vsplat.f32 v0, f3, 16
  mov r7, r0
Z0:
  bge r7, r6, Z1
  mov r8, r0
Z2:
  bge r8, r3, Z3
  vmask v1, r8, r3, 16
  vst v0, @9[r7, r8], v1
  add r8, r8, r5
  jmp Z2
Z3:
  add r7, r7, r1
  jmp Z0
Z1:
  mov r7, r0
B0:
  bge r7, r6, DONE
  ld r9, @1[r7]
  add r10, r7, r1
  ld r10, @1[r10]
L0:
  bge r9, r10, B1
  ld r11, @0[r9]
  beq r31, r0, H0
  beq r11, r30, P0
H0:
  mov r12, r0
H1:
  bge r12, r2, H2
  ld r13, @2[r12]
  mul r13, r13, r11
  ld r14, @3[r12]
  add r13, r13, r14
  ld r14, @4[r12]
  rem r13, r13, r14
  rem r13, r13, r4
  fcvt.f32 f4, r13
  fdiv.f32 f4, f4, f0
  fmul.f32 f4, f4, f1
  fsub.f32 f4, f4, f2
  st f4, @7[r12]
  add r12, r12, r1
  jmp H1
H2:
  mov r12, r0
M0:
  bge r12, r3, M2
  ld f5, @6[r12]
  mov r13, r0
M1:
  bge r13, r2, M3
  ld f6, @5[r12, r13]
  ld f7, @7[r13]
  ffma.f32 f5, f6, f7, f5
  add r13, r13, r1
  jmp M1
M3:
  st f5, @8[r12]
  add r12, r12, r1
  jmp M0
M2:
  mov r30, r11
  li r31, 1
P0:
  mov r12, r0
P1:
  bge r12, r3, P2
  vmask v1, r12, r3, 16
  vld v2, @8[r12], v1
  vld v3, @9[r7, r12], v1
  vfadd.f32 v3, v3, v2
  vst v3, @9[r7, r12], v1
  add r12, r12, r5
  jmp P1
P2:
  add r9, r9, r1
  jmp L0
B1:
  add r7, r7, r1
  jmp B0
DONE:
  halt
.end
"""


def test_a_dhe_program_that_keeps_a_repeated_row_stays_under_the_bound() -> None:
    """A hand-written core program that computes the MLP once for a run of equal indices and adds the row it kept
    (the same float32 additions as recomputing it) ran at 1.89 times the bound that charged every lookup its
    multiply-adds."""
    program = parse_dae(KEEPING, "keep.dae")
    params = dhe.make_params([K, D])
    for n, s in enumerate(program.symbols):
        if s.kind == "param":
            program.data[n] = params[s.name]
    feeds = {"indices": np.array([7] * 400, dtype=np.int64), "offsets": np.array([0, 400])}
    out, fraction = sol(program, feeds)
    want = dhe.reference(params, feeds["indices"], feeds["offsets"], 1, "sum", None, BUCKETS)
    np.testing.assert_allclose(out["out"], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert 0 < fraction <= 1


def test_a_repeated_tt_row_is_counted_as_one_contraction_and_adds() -> None:
    """The same for a train: a program may contract a row once and add it again, one add per chunk."""
    p, q, ranks = tt.TRAINS[3]
    program = tt.compile_tt(tt.text(p, q, ranks, 50), tt.make_cores(p, q, ranks), "O0")

    def counts(indices: list[int]) -> tuple[int, int]:
        feeds = {"indices": np.array(indices, dtype=np.int64), "offsets": np.array([0, len(indices)])}
        values = {n: feeds[s.name] if s.kind == "input" else program.data.get(n)
                  for n, s in enumerate(program.symbols)}
        c = work_counts(program, values.get, vector_lanes(MACHINE.execute.simd_bits))
        return c.vector_fp_ops, c.row_chunks

    once = counts([17])
    many = counts([17] * 100)
    assert min(once) > 0
    assert all(m <= o + 99 for m, o in zip(many, once))  # 12 elements: one chunk to read and add per further lookup


def test_tt_rows_that_share_leading_digits_may_share_their_product() -> None:
    """100 rows with the same first two digits: a program contracts cores 0 and 1 once (1*4*16*4*16 multiply-adds)
    and joins each row's last slice to it (16*4*16*4 = D x R each), far fewer than 100 whole chains."""
    p, q, ranks = [100, 100, 100], [4, 4, 4], [1, 16, 16, 1]
    rows = np.arange(100)
    assert shared_chain_macs(rows, p, ranks, q) <= 4 * 16 * 4 * 16 + 100 * 64 * 16 < 100 * chain_macs(ranks, q)
    apart = np.array([0, 10101, 20202])  # no two rows agree on two neighbouring digits: a whole chain each
    assert shared_chain_macs(apart, p, ranks, q) == 3 * chain_macs(ranks, q)
