"""ember-bench --suite representations: every form of the RM tables at every level, their footprints, errors and
the published ratios beside ours (at the tiny size; the suite's other sizes build the same workloads)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import run_tool

from ember.bench.forms import FORMS, FormWorkload, dhe_rows, dhe_weights, hand_rows, suite
from ember.bench.run import compile_variant, handwritten, run
from ember.machine import load_machine
from ember.passes.quantize_tables import prepack

LEVELS = ("O0", "O1", "O2", "O3", "core")


@pytest.fixture(scope="module")
def tiny_rm1(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[bytes], list[dict]]:
    """RM1 in every form at every level and the experts, with data: each output checked against numpy."""
    out = tmp_path_factory.mktemp("forms") / "rows.json"
    res = run_tool("bench", "--suite", "representations-tiny", "--only", "RM1", "--json", str(out))
    assert res.returncode == 0, res.stderr.decode()
    return res, json.loads(out.read_text())["rows"]


def test_every_form_has_a_row_at_every_level_and_experts_where_they_exist(tiny_rm1) -> None:
    _, rows = tiny_rm1
    got = {(r["workload"], r["variant"]) for r in rows}
    names = [f"RM1_{form}" for form, _ in FORMS.values()]
    assert got == {(n, v) for n in names for v in (*LEVELS, "hand")}  # every form has an expert's kernel
    for r in rows:
        assert r["cycles"] > 0 and 0 < r["sol_fraction"] <= 1, (r["workload"], r["variant"])


def test_footprints_ratios_and_errors(tiny_rm1) -> None:
    _, rows = tiny_rm1
    by_form = {r["form"]: r for r in rows if r["variant"] == "O3"}
    table = 2_000 * 32 * 4
    assert by_form["float32"]["param_bytes"] == table and by_form["float32"]["ratio"] == 1
    assert by_form["int8"]["param_bytes"] == 2_000 * (32 + 8)  # FBGEMM: codes, float32 scale and bias
    assert by_form["int4"]["param_bytes"] == 2_000 * (16 + 4)  # two codes a byte, float16 scale and bias
    assert by_form["ROBE"]["ratio"] == pytest.approx(1000, rel=0.01)
    for form in ("int8", "int4", "TT", "ROBE"):
        r = by_form[form]
        assert r["ratio"] == pytest.approx(table / r["param_bytes"])
        assert r["error_max"] >= r["error_rms"] > 0
    assert by_form["int8"]["error_max"] < by_form["int4"]["error_max"]
    for form in ("float32", "DHE"):
        assert by_form[form]["error_max"] is None
    assert by_form["TT"]["published_ratio"] == "Criteo_Terabyte=112 Criteo_Kaggle=117"
    assert by_form["ROBE"]["published_ratio"] == "Criteo_Terabyte=1000"


def test_the_published_ratios_are_printed_with_their_source(tiny_rm1) -> None:
    res, _ = tiny_rm1
    text = " ".join(res.stdout.decode().split())
    assert "(112× / 117×)" in text and "(1000×)" in text
    assert "TT-Rec: Yin et al., MLSys 2021" in text and "arXiv 2101.11714" in text
    assert "ROBE: Desai et al., MLSys 2022" in text and "arXiv 2108.02191" in text


@pytest.mark.parametrize("kind", list(FORMS))
def test_the_footprint_is_the_bytes_of_the_linked_params(kind: str) -> None:
    w = next(x for x in suite("representations-tiny") if x.kind == kind and x.name.startswith("RM2"))
    program = compile_variant(w, "O3")
    w.bind(program, 0, w.table(0))
    linked = [program.data[n] for n, s in enumerate(program.symbols) if s.kind == "param"]
    assert linked and w.param_bytes == sum(a.nbytes for a in linked)
    # what one lookup reads: a row of the table or array, a slice of each core, nothing of DHE's shared MLP
    want = {"bag_sum": 64 * 4, "qbag8": 64 + 8, "qbag4": 32 + 4, "robe": 64 * 4, "dhe": 0,
            "ttbag": sum(a[0].nbytes for a in linked)}[kind]
    assert w.lookup_bytes == want


def test_stored_rows_are_the_forms_definitions() -> None:
    """numpy's side of the check, against each form's definition written out here: int8 rows dequantized from
    FBGEMM's fused rows, DHE's hash encoding and MLP (its ReLU included)."""
    w = FormWorkload("x", "qbag8", 1, 50, 8, 2, 3, 0.0)
    q = prepack(w.table(0), 8)
    scale, bias = q[:, 8:12].copy().view(np.float32), q[:, 12:16].copy().view(np.float32)
    np.testing.assert_allclose(w.stored_rows(0, w.table(0)), q[:, :8] * scale + bias, rtol=1e-6, atol=1e-6)
    p = dhe_weights(8, 0, 0)
    x = np.arange(50)
    enc = ((x[:, None] * p["slope"] + p["bias"]) % p["prime"] % 1_000_000) / 999_999 * 2 - 1
    want = np.maximum(enc @ p["w0"].T + p["b0"], 0) @ p["w1"].T + p["b1"]
    np.testing.assert_allclose(dhe_rows(p, 50), want, rtol=1e-5, atol=1e-5)


def test_paper_size_runs_timing_only_with_no_table_data(tmp_path: Path) -> None:
    w = next(x for x in suite("representations-paper") if x.name == "RM1_int8")
    assert w.virtual and w.figures is not None and w.figures.error_max is None  # no data: no error
    m = load_machine("default")
    small = FormWorkload("RM1_int8", "qbag8", 1, w.rows, w.dim, w.pooling, 4, 0.0, virtual=True)
    o3, hand = run(small, "O3", m, timing_only=True), run(small, "hand", m, timing_only=True)
    assert o3.stats["cycles"] > 0 and hand.stats["cycles"] > 0
    dhe = FormWorkload("RM1_DHE", "dhe", 1, w.rows, w.dim, w.pooling, 2, 0.0, virtual=True)  # hashes, no table
    assert run(dhe, "O3", m, timing_only=True).stats["cycles"] > 0
    # the ROBE expert names its array by ratio: the workload's 1,000,000 x 32 table gives it 32,000 elements
    robe = FormWorkload("RM1_ROBE", "robe", 1, w.rows, w.dim, w.pooling, 2, 0.0, virtual=True)
    hand = run(robe, "hand", m, timing_only=True)
    assert hand.stats["cycles"] > 0 and not hand.notes  # the fast engine ran it (timing-only needs it)
    program = handwritten("robe", 32).program
    robe.bind(program, 0, None)
    assert [s.shape for s in program.symbols if s.kind == "param"] == [(32_000,)]
    # and the TT expert's cores, named `auto`: tt-decompose's p for 1,000,000 rows
    tt = FormWorkload("RM1_TT", "ttbag", 1, w.rows, w.dim, w.pooling, 2, 0.0, virtual=True)
    hand = run(tt, "hand", m, timing_only=True)
    assert hand.stats["cycles"] > 0 and not hand.notes
    program = handwritten("ttbag", 32).program
    tt.bind(program, 0, None)
    assert [s.shape[0] for s in program.symbols if s.kind == "param"] == [100, 100, 100]
    res = run_tool("bench", "--suite", "representations-paper", "--only", "RM1_int8")
    assert res.returncode == 1 and "--timing-only" in res.stderr.decode()


@pytest.mark.parametrize(("bits", "dim"), [(8, 32), (4, 32), (4, 64), (4, 128)])
def test_the_quantized_experts_equal_fbgemm_bit_for_bit_on_both_engines(bits: int, dim: int) -> None:
    """The expert kernels keep FBGEMM's rounding, acc = fma(scale, q, acc + bias), as the compiled qbag does; the
    int4 ones split each byte into its nibbles with float arithmetic, checked here on every byte value 0..255."""
    from test_fast_engine import both
    from test_quantized import fbgemm_bag

    rng = np.random.default_rng(5)
    rows = 40
    q = prepack(rng.standard_normal((rows, dim)).astype(np.float32), bits)
    codes = q[:, :dim * bits // 8].reshape(-1)
    codes[:256] = np.arange(256, dtype=np.uint8)  # every byte, in the first rows
    q[:, :dim * bits // 8] = codes.reshape(rows, -1)
    first = -(-256 // (dim * bits // 8))  # the rows that hold them
    idx = np.concatenate([np.arange(first), rng.integers(0, rows, 23)])
    off = np.array([0, first, first + 5, first + 5, first + 12, len(idx)])  # an empty bag among them
    program = handwritten(f"qbag{bits}", dim).program
    program.data[next(n for n, s in enumerate(program.symbols) if s.kind == "param")] = q
    got, _, fast_got, _ = both(program, {"indices": idx, "offsets": off})
    want = fbgemm_bag(q, idx, off, bits, "sum", None)
    np.testing.assert_array_equal(got["output"], want)
    np.testing.assert_array_equal(fast_got["output"], want)


@pytest.mark.parametrize("name", ["RM1_DHE", *(pytest.param(n, marks=pytest.mark.slow) for n in ("RM2_DHE", "RM3_DHE"))
                                  ])
def test_the_dhe_expert_equals_the_compiled_mlp_bit_for_bit_on_both_engines(name: str) -> None:
    """The expert DHE kernel keeps the compiled program's order of float operations (each hidden unit's fused
    multiply-adds over the hashes in order, the ReLU, each output's over the hidden units), with vectors where the
    compiled code is scalar, so its outputs are the same bits, not only close to numpy's.  Two bags of two
    lookups: the reference engine takes 18,000-53,000 cycles a lookup of the compiled program."""
    from test_fast_engine import both

    tiny = next(x for x in suite("representations-tiny") if x.name == name)
    w = FormWorkload(name, "dhe", 1, tiny.rows, tiny.dim, 2, 2, 0.0)
    inputs = w.inputs(0)
    table = w.table(0, inputs["indices"])
    outs = []
    for program in (compile_variant(w, "O3"), handwritten("dhe", w.dim).program):
        w.bind(program, 0, table)
        got, _, fast_got, _ = both(program, inputs)
        np.testing.assert_array_equal(fast_got["output"], got["output"])
        outs.append(got["output"])
    np.testing.assert_array_equal(outs[1], outs[0])
    assert outs[0].shape == (2, w.dim) and np.abs(outs[0]).min() > 0


@pytest.mark.parametrize(("dim", "size"), [(32, 7), (64, 1_000), (128, 2_560)])
def test_the_robe_expert_reads_the_array_as_robe_defines_it_on_both_engines(dim: int, size: int) -> None:
    """Against the layout's own definition (Layout.rows: Hetu's hash and sign), on lookups chosen to take every
    path: a part of 16 elements whose hash passes P (so the slots restart at 0 mid-part), blocks that wrap around
    an array smaller than a block, a negative index, an empty bag.  Both engines, the same bits and statistics."""
    from test_fast_engine import assert_same, both

    from ember.passes.robe import PRIME, Layout

    layout = Layout(size, 32, 0)
    (hx, hc, hd), _ = layout.hashes
    # the index whose first part starts 8 before P, and one whose last part does (solved mod P, rare by chance)
    last = hc * ((dim - 16) // 32) + (dim - 16) % 32 + hd
    passing = [(PRIME - 8 - base) * pow(hx, -1, PRIME) % PRIME for base in (hd, last)]
    assert all((hx * x + base) % PRIME == PRIME - 8 for x, base in zip(passing, (hd, last)))
    rng = np.random.default_rng(dim)
    idx = np.concatenate([passing, [-5], rng.integers(0, 10**6, 9)]).astype(np.int64)
    off = np.array([0, 3, 3, 8, len(idx)], dtype=np.int64)
    array = rng.standard_normal(size).astype(np.float32)
    program = handwritten("robe", dim).program
    program.data[next(n for n, s in enumerate(program.symbols) if s.kind == "param")] = array
    ref_out, ref_st, out, st = both(program, {"indices": idx, "offsets": off})
    np.testing.assert_array_equal(out["output"], ref_out["output"])
    assert_same(ref_st, st)
    rows = layout.rows(array, idx, dim).astype(np.float64)
    want = np.stack([rows[a:b].sum(axis=0) for a, b in zip(off[:-1], off[1:])])
    np.testing.assert_allclose(out["output"], want, rtol=1e-5, atol=1e-5)
    assert not out["output"][1].any()


@pytest.mark.parametrize("dim", [32, 64, pytest.param(128, marks=pytest.mark.slow)])
def test_the_tt_expert_computes_the_train_on_both_engines(dim: int) -> None:
    """Against tt_rows, the train's definition in float64, on random cores of p = (3, 5, 4) (the kernel reads p
    from the cores): every row from the last one back, an empty bag, and repeated rows.  Both engines, the same
    bits and statistics."""
    from test_fast_engine import assert_same, both

    from ember.passes.tt_decompose import tt_rows

    program = handwritten("ttbag", dim).program
    params = [n for n, s in enumerate(program.symbols) if s.kind == "param"]
    rng = np.random.default_rng(dim)
    cores = [rng.standard_normal((p, *program.symbols[n].shape[1:])).astype(np.float32)
             for p, n in zip((3, 5, 4), params)]
    for n, core in zip(params, cores):
        program.data[n] = core
    idx = np.concatenate([np.arange(59, -1, -1), [7, 7, 59]]).astype(np.int64)
    off = np.array([0, 20, 20, 45, len(idx)], dtype=np.int64)
    ref_out, ref_st, out, st = both(program, {"indices": idx, "offsets": off})
    np.testing.assert_array_equal(out["output"], ref_out["output"])
    assert_same(ref_st, st)
    rows = tt_rows(cores, 0, 60)[idx]
    want = np.stack([rows[a:b].sum(axis=0) for a, b in zip(off[:-1], off[1:])])
    np.testing.assert_allclose(out["output"], want, rtol=1e-5, atol=1e-4)
    assert not out["output"][1].any()


def test_a_hand_kernels_param_extent_comes_from_its_name() -> None:
    """What timing-only runs give a hand-written kernel's `?` extents: a ROBE array's elements by ratio, a TT core's
    p (`auto`: tt-decompose's factoring, or as written), else the table's rows; a malformed name is one line."""
    from ember.ir.diagnostics import EmberError

    assert hand_rows("t#robe/1000x/32/0", 1_000_000, 32) == 32_000
    assert [hand_rows(f"t#tt/auto/4x4x2/16x16/{k}", 1_000_000, 32) for k in range(3)] == [100, 100, 100]
    assert hand_rows("t#tt/10x20x30/4x4x2/16x16/1", 6_000, 32) == 20
    assert hand_rows("t", 77, 32) == 77
    with pytest.raises(EmberError, match="does not name a core"):
        hand_rows("t#tt/auto/4x4x2/16x16/3", 1_000, 32)
