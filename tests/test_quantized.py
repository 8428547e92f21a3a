"""Row-wise quantized bags (emb.qbag): FBGEMM's layout and rounding, at every level, on both engines.

Two independent references: PyTorch's quantized embedding-bag operators (FBGEMM underneath, when torch is
installed), bit for bit; and FBGEMM's reference formula written out here in numpy, with the fused multiply-add
computed exactly in rational arithmetic.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, run_here, torch_unless_mutating
from test_fast_engine import assert_same, both
from test_isa_identity import exact_fma32

import ember.dialects  # noqa: F401
from ember.backend.binary import assemble, disassemble
from ember.backend.dae import Program
from ember.backend.dae_text import parse_dae
from ember.frontends import load_weights_any
from ember.ir.diagnostics import EmberError
from ember.ir.parser import parse_module
from ember.ir.printer import print_module
from ember.passes import PRESETS, parse_pipeline, run_passes
from ember.passes.derived import link_param
from ember.passes.quantize_tables import prepack, unpack

ROWS, DIM = 30, 40
LEVELS = ["O0", "O1", "O2", "O3", "core", "full"]  # full: -O3's passes on every op (no choose-plan)
FULL = PRESETS["O3"].replace("choose-plan,", "")

TEXT = """module {{
  func @main(%indices: tensor<?xi64>, %offsets: tensor<?xi64>{wdecl}) -> (tensor<?x{d}xf32>) {{
    %table = param {{name = "table"}} : tensor<{r}x{w}xu8>
    %out = emb.qbag %table, %indices, %offsets{warg} {{bits = {bits}, mode = "{mode}"}} : tensor<?x{d}xf32>
    return %out
  }}
}}
"""


def fbgemm_bag(q: np.ndarray, idx: np.ndarray, off: np.ndarray, bits: int, mode: str,
               w: np.ndarray | None) -> np.ndarray:
    """FBGEMM's EmbeddingSpMDM reference (RefImplementations.cc) for scale-and-bias-last rows: scale and bias
    (float32 for 8 bits, float16 for 4) times the weight, then acc = fma(scale, q, acc + bias) per element; a mean
    multiplies by 1 / length in float32; low nibble first for 4 bits."""
    f32 = np.float32
    sb_type, sb_bytes = (np.float32, 8) if bits == 8 else (np.float16, 4)
    codes = q.shape[1] - sb_bytes
    dim = codes * (8 // bits)
    out = np.zeros((len(off) - 1, dim), np.float32)
    for b in range(len(off) - 1):
        acc = np.zeros(dim, np.float32)
        for j in range(off[b], off[b + 1]):
            row = q[idx[j]]
            scale, bias = (f32(v) for v in row[codes:].copy().view(sb_type))
            if w is not None:
                scale, bias = f32(w[j] * scale), f32(w[j] * bias)
            for d in range(dim):
                code = int(row[d]) if bits == 8 else (int(row[d // 2]) >> (4 * (d % 2))) & 15
                acc[d] = exact_fma32(float(scale), float(code), float(f32(acc[d] + bias)))
        n = off[b + 1] - off[b]
        if mode == "mean" and n > 0:
            acc = acc * f32(f32(1) / f32(n))
        out[b] = acc
    return out


def compile_qbag(q: np.ndarray, bits: int, mode: str, weighted: bool, level: str) -> Program:
    text = TEXT.format(r=q.shape[0], w=q.shape[1], d=(q.shape[1] - (8 if bits == 8 else 4)) * (8 // bits),
                       bits=bits, mode=mode, wdecl=", %w: tensor<?xf32>" if weighted else "",
                       warg=", %w" if weighted else "")
    module = parse_module(text, "qbag.eir")
    passes = parse_pipeline(FULL if level == "full" else PRESETS[level])
    run_passes(module, passes)
    program = passes[-1].program  # type: ignore[attr-defined]
    program.data[next(n for n, s in enumerate(program.symbols) if s.kind == "param")] = q
    return disassemble(assemble(program), "qbag.bin")


def run_both(program: Program, feeds: dict[str, np.ndarray]) -> np.ndarray:
    ref_out, ref_st, out, st = both(program, feeds)
    (name,) = ref_out
    np.testing.assert_array_equal(out[name].view(np.uint32), ref_out[name].view(np.uint32))
    assert_same(ref_st, st)
    assert 0 < ref_st["sol_fraction"] <= 1
    return ref_out[name]


def data(bits: int, weighted: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(bits)
    q = prepack(rng.standard_normal((ROWS, DIM)).astype(np.float32), bits)
    feeds = {"indices": rng.integers(0, ROWS, size=23).astype(np.int64), "offsets": np.array([0, 5, 5, 12, 23])}
    if weighted:
        feeds["w"] = rng.standard_normal(23).astype(np.float32)
    return q, feeds


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("mode", ["sum", "mean", "weighted"])
@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_bag_matches_fbgemm_formula_bit_for_bit(bits: int, mode: str, level: str) -> None:
    weighted = mode == "weighted"
    q, feeds = data(bits, weighted)
    got = run_both(compile_qbag(q, bits, "sum" if weighted else mode, weighted, level), feeds)
    want = fbgemm_bag(q, feeds["indices"], feeds["offsets"], bits, "sum" if weighted else mode, feeds.get("w"))
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("level", ["O0", "O3", "core", "full"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_bag_equals_pytorch_bit_for_bit(bits: int, weighted: bool, level: str) -> None:
    """torch's prepack makes the rows and its quantized operator (FBGEMM) the answer."""
    torch = torch_unless_mutating()
    rng = np.random.default_rng(7)
    table = torch.from_numpy(rng.standard_normal((ROWS, DIM)).astype(np.float32))
    ops = torch.ops.quantized
    pack, bag = ((ops.embedding_bag_byte_prepack, ops.embedding_bag_byte_rowwise_offsets) if bits == 8 else
                 (ops.embedding_bag_4bit_prepack, ops.embedding_bag_4bit_rowwise_offsets))
    q = pack(table)
    idx = torch.from_numpy(rng.integers(0, ROWS, size=23))
    off = torch.tensor([0, 5, 5, 12, 23])
    w = torch.from_numpy(rng.standard_normal(23).astype(np.float32)) if weighted else None
    want = bag(q, idx, off, per_sample_weights=w, include_last_offset=True).numpy()
    feeds = {"indices": idx.numpy(), "offsets": off.numpy()} | ({"w": w.numpy()} if w is not None else {})
    got = run_both(compile_qbag(q.numpy(), bits, "sum", weighted, level), feeds)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize(("table", "attrs", "result", "message"), [
    ("30x48xu8", 'bits = 5, mode = "sum"', "?x40xf32", "bits must be 8 or 4"),
    ("30x48xu8", 'bits = 8, mode = "max"', "?x40xf32", "mode must be one of sum, mean"),
    ("30x48xu8", 'bits = 8, mode = "sum"', "?x41xf32", "result must be tensor<?x40xf32>"),
    ("30x25xu8", 'bits = 4, mode = "sum"', "?x40xf32", "result must be tensor<?x42xf32>"),
    ("30x8xu8", 'bits = 8, mode = "sum"', "?x0xf32", "needs more than the 8 bytes of its scale and bias"),
    ("30x48xi8", 'bits = 8, mode = "sum"', "?x40xf32", "must be a rank-2 tensor of bytes (u8)")])
def test_qbag_verifier_names_what_is_wrong(table: str, attrs: str, result: str, message: str) -> None:
    text = f"""module {{
  func @main(%indices: tensor<?xi64>, %offsets: tensor<?xi64>) -> (tensor<{result}>) {{
    %table = param {{name = "table"}} : tensor<{table}>
    %out = emb.qbag %table, %indices, %offsets {{{attrs}}} : tensor<{result}>
    return %out
  }}
}}
"""
    with pytest.raises(EmberError, match="qbag.eir:4:") as e:
        run_passes(parse_module(text, "qbag.eir"), parse_pipeline("lower-emb"))
    assert message in str(e.value)


def test_weights_need_a_sum() -> None:
    text = TEXT.format(r=ROWS, w=48, d=40, bits=8, mode="mean", wdecl=", %w: tensor<?xf32>", warg=", %w")
    with pytest.raises(EmberError, match='per-sample weights need mode "sum"'):
        run_passes(parse_module(text, "qbag.eir"), parse_pipeline("lower-emb"))


SAMPLES = ROOT / "samples"


# --- quantize-tables: a float table becomes its quantized rows (a lossy transform the user asks for) -----------

def test_prepack_bounds_every_element_by_half_a_step() -> None:
    """8 bits: |x - dequantized| <= scale / 2 (plus float rounding) on every element, constant rows exact."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((40, 24)) * rng.choice([1e-3, 1.0, 300.0], size=(40, 1))).astype(np.float32)
    x[3] = -2.5
    rows = prepack(x, 8)
    scale = rows[:, -8:-4].copy().view(np.float32)
    assert np.all(np.abs(unpack(rows, 8) - x) <= scale / 2 * (1 + 1e-5) + 1e-6)
    np.testing.assert_array_equal(unpack(rows, 8)[3], x[3])


@pytest.mark.parametrize("bits", [8, 4])
def test_prepack_equals_torch_bit_for_bit(bits: int) -> None:
    torch = torch_unless_mutating()
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((50, 40)) * rng.choice([1e-3, 1.0, 100.0], size=(50, 1))).astype(np.float32)
    x[0] = 3.0  # a row of one value: range 0
    ops = torch.ops.quantized
    pack = ops.embedding_bag_byte_prepack if bits == 8 else ops.embedding_bag_4bit_prepack
    np.testing.assert_array_equal(prepack(x, bits), pack(torch.from_numpy(x)).numpy())


def test_quantize_tables_runs_from_a_model_file_through_every_tool(tmp_path: Path) -> None:
    """ember-opt rewrites the bag and reports the saving and the error, ember-asm computes the quantized rows
    from the float weights, and ember-sim's output is FBGEMM's formula on those rows."""
    eir = (SAMPLES / "levels" / "bag_sum.ts.emb.eir").read_text()
    (tmp_path / "m.eir").write_text(eir.replace('"../models/', f'"{SAMPLES / "models"}/'))
    r = run_here("opt", "--remarks", "-p", "quantize-tables{bits=8}," + PRESETS["O3"], "m.eir", "-o", "q.dae",
                 cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    float_table = load_weights_any(str(SAMPLES / "models" / "bag_sum.ts.onnx"))["bag.weight"]
    diff = (unpack(prepack(float_table, 8), 8) - float_table).astype(np.float64)
    assert (f"remark: quantize-tables: bag.weight (40 x 8 f32) -> int8: 1,280 -> 640 bytes (2.00x smaller); "
            f"reconstruction error max {np.abs(diff).max():.3g}, RMS {np.sqrt(np.mean(diff ** 2)):.3g}"
            in r.stderr.decode())
    assert '.sym @8 param "bag.weight#int8" u8 [40, 16]' in (tmp_path / "q.dae").read_text()
    assert run_here("asm", "q.dae", "-o", "q.bin", cwd=tmp_path).returncode == 0
    feeds = dict(np.load(SAMPLES / "models" / "bag_sum.in.npz"))
    r = run_here("sim", "q.bin", "--inputs", str(SAMPLES / "models" / "bag_sum.in.npz"), "--outputs", "out.npz",
                 cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    offsets = np.concatenate([feeds["offsets"], [len(feeds["indices"])]])
    want = fbgemm_bag(prepack(float_table, 8), feeds["indices"], offsets, 8, "sum", None)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["output"], want)
    # timing only: the derived rows are left out like the float table they come from, and cost the same cycles
    assert run_here("asm", "--no-tables", "q.dae", "-o", "t.bin", cwd=tmp_path).returncode == 0
    assert (tmp_path / "t.bin").stat().st_size < (tmp_path / "q.bin").stat().st_size - 500
    for name, extra in (("q", []), ("t", ["--timing-only"])):
        r = run_here("sim", f"{name}.bin", "--inputs", str(SAMPLES / "models" / "bag_sum.in.npz"), "--stats",
                     f"{name}.json", *extra, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    data, timing = (json.loads((tmp_path / f"{n}.json").read_text()) for n in "qt")
    assert timing["cycles"] == data["cycles"]


@pytest.mark.parametrize(("attrs", "remark"), [
    ('mode = "max", empty = "zero"', "table kept in float: mode max has no quantized form"),
    ('mode = "sum", empty = "zero", padding_idx = 2', "table kept in float: it has a padding_idx"),
    ('mode = "sum", empty = "zero"} : tensor<?x7xf32>', "a 4-bit row packs two codes a byte, and the rows have 7")])
def test_quantize_tables_leaves_what_it_cannot_quantize_with_a_remark(attrs: str, remark: str) -> None:
    dim = 7 if "x7x" in attrs else 8
    attrs = attrs.split("}")[0]
    text = f"""module {{
  func @main(%indices: tensor<?xi64>, %offsets: tensor<?xi64>) -> (tensor<?x{dim}xf32>) {{
    %table = param {{name = "table"}} : tensor<30x{dim}xf32>
    %out = emb.bag %table, %indices, %offsets {{{attrs}}} : tensor<?x{dim}xf32>
    return %out
  }}
}}
"""
    module = parse_module(text, "f.eir")
    passes = parse_pipeline("quantize-tables{bits=4}")
    run_passes(module, passes)
    assert any(remark in r for r in passes[0].remarks), passes[0].remarks  # type: ignore[attr-defined]
    assert "emb.bag" in print_module(module) and "emb.qbag" not in print_module(module)


def test_quantize_tables_takes_8_or_4_bits() -> None:
    with pytest.raises(EmberError, match="option 'bits' must be 8 or 4, got 5"):
        parse_pipeline("quantize-tables{bits=5}")


def test_a_table_two_bags_share_is_quantized_once_and_the_float_table_leaves_the_program() -> None:
    text = """module {
  func @main(%i: tensor<?xi64>, %o: tensor<?xi64>, %j: tensor<?xi64>, %p: tensor<?xi64>) -> (OUT, OUT) {
    %table = param {name = "table"} : tensor<30x8xf32>
    %a = emb.bag %table, %i, %o {mode = "sum", empty = "zero"} : tensor<?x8xf32>
    %b = emb.bag %table, %j, %p {mode = "mean", empty = "zero"} : tensor<?x8xf32>
    return %a, %b
  }
}"""
    passes = parse_pipeline("quantize-tables{bits=8}," + PRESETS["O0"])
    run_passes(parse_module(text.replace("OUT", "tensor<?x8xf32>"), "two.eir"), passes)
    params = [s for s in passes[-1].program.symbols if s.kind == "param"]  # type: ignore[attr-defined]
    assert [(s.name, s.dtype, s.shape) for s in params] == [("table#int8", "u8", (30, 16))]
    assert [w.kind for w in passes[-1].program.work] == ["qbag", "qbag"]  # type: ignore[attr-defined]


PACKED = """.dae 2
.sym @0 input "i" i64 [5]
.sym @1 input "o" i64 [3]
.sym @2 input "t" u8 [10, 24]
.sym @3 output "y" f32 [?, 16]
.work qbag sum table=@2 indices=@0 offsets=@1 output=@3 bits=8
.access A0 1
  tu t0, 0, p0, 1
  mem s0, @1[t0]
  alu s1, add, t0, 1
  mem s2, @1[s1]
  tu t1, s0, s2, 1, t0
  mem s3, @0[t1]
  mem.f32 s4, @2[s3, 16]
  mem.f32 s5, @2[s3, 20]
  tu t2, 0, 16, 8, t1
  mem.i64 s6, @2[s3, t2]
  on t2, ite, [t0, t2, s5, s6, s4], 1
.end
.code
  li r0, 0
  li r1, 1
  li r2, 16
  li f0, 0.0
  li r13, 8
  dim r3, @1, 0
  sub r4, r3, r1
  alloc @3, [r4, 16]
  mov r7, r0
L0:
  bge r7, r4, L1
  mov r8, r0
L2:
  bge r8, r2, L3
  st f0, @3[r7, r8]
  add r8, r8, r1
  jmp L2
L3:
  add r7, r7, r1
  jmp L0
L1:
  run A0, r4
  halt
A0.1:
  pop r9
  pop r10
  pop f2
  pop r11
  pop f3
  li r12, 0
L4:
  bge r12, r13, L5
  rem r15, r11, 256
  div r11, r11, 256
  add r16, r10, r12
  ld f4, @3[r9, r16]
  fadd.f32 f5, f4, f2
  fcvt.f32 f6, r15
  ffma.f32 f7, f3, f6, f5
  st f7, @3[r9, r16]
  add r12, r12, r1
  jmp L4
L5:
  ret
.end
"""


def test_the_speed_of_light_holds_against_a_program_that_reads_eight_codes_an_element() -> None:
    """An expert can stream a row's codes eight bytes at a time (mem.i64) and take them apart on the core: no
    program beats the speed of light this way (an access bound once counted one element per code byte)."""
    q = prepack(np.random.default_rng(3).standard_normal((10, 16)).astype(np.float32), 8)
    feeds = {"i": np.array([3, 1, 4, 1, 5]), "o": np.array([0, 2, 5]), "t": q}
    got, st, fast_got, fast_st = both(parse_dae(PACKED, "packed.dae"), feeds)
    np.testing.assert_array_equal(got["y"], fast_got["y"])
    assert_same(st, fast_st)
    np.testing.assert_array_equal(got["y"], fbgemm_bag(q, feeds["i"], feeds["o"], 8, "sum", None))
    assert st["access.elements"] < 5 * (16 + 2)  # fewer than one element per code byte
    assert st["sol_fraction"] <= 1


@pytest.mark.parametrize(("old", "new", "message"), [
    ('.sym @2 input "t" u8 [10, 24]', '.sym @2 input "t" u8 [10, 8]',
     "has rows of 8 bytes, but a 8-bit row needs more"),
    ('.sym @3 output "y" f32 [?, 16]', '.sym @3 output "y" f32 [?, 12]',
     "output=@3 has rows of 12, but 8-bit rows of 24 bytes hold 16 elements"),
    ("bits=8", "bits=4", "output=@3 has rows of 16, but 4-bit rows of 24 bytes hold 40 elements")])
def test_a_qbag_record_must_fit_its_table_and_output(old: str, new: str, message: str) -> None:
    with pytest.raises(EmberError, match="packed.dae:") as e:
        parse_dae(PACKED.replace(old, new), "packed.dae")
    assert message in str(e.value)


def test_ember_opt_keeps_the_weights_path_relative(tmp_path: Path) -> None:
    """quantize-tables reads the weights from where ember-opt runs; the .dae still names them relative to itself."""
    (tmp_path / "m.eir").write_text((SAMPLES / "levels" / "bag_sum.ts.emb.eir").read_text())
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "bag_sum.ts.onnx").write_bytes((SAMPLES / "models" / "bag_sum.ts.onnx").read_bytes())
    sub = tmp_path / "levels"
    sub.mkdir()
    (sub / "m.eir").write_text((tmp_path / "m.eir").read_text())
    r = run_here("opt", "--remarks", "-p", "quantize-tables{bits=4}," + PRESETS["O0"], "levels/m.eir", "-o", "q.dae",
                 cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "reconstruction error max" in r.stderr.decode()
    assert '.weights "models/bag_sum.ts.onnx"' in (tmp_path / "q.dae").read_text()


@pytest.mark.parametrize(("data", "message"), [
    (np.zeros(5, np.float32), "param 'w#int8' is computed from 'w': quantize-tables: a table to quantize must be 2-D"),
    (np.zeros((4, 0), np.float32), "rows of at least one element, got float32[4, 0]")])
def test_a_derived_param_whose_base_is_no_table_is_one_line(data: np.ndarray, message: str) -> None:
    with pytest.raises(EmberError) as e:
        link_param({"w": data}, "w#int8")
    assert message in str(e.value) and "\n" not in str(e.value)
