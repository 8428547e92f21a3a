"""robe: float tables fitted to ROBE arrays (emb.bag -> emb.robe), the derived param the linker computes, the remarks
and `ember-opt --stats`.

The reference for what an array stands for is `element`, written here in plain Python integers from the definition
of emb.robe (Hetu's robe_hash_kernel and robe_sign_kernel): element e = c Z + o of row x is
s M[(B x + C c + D + o) mod P mod S], s = 2 ((B' x + C' e + D') mod P mod 2) - 1.  The fit is checked against
numpy's lstsq on the explicit matrix of those 0/+-1 entries.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import run_here
from test_tt_decompose import P as TABLE
from test_tt_decompose import bag, weights_file

import ember.dialects  # noqa: F401
from ember.ir.diagnostics import EmberError
from ember.ir.parser import parse_module
from ember.ir.printer import print_module
from ember.passes import PRESETS, parse_pipeline, run_passes
from ember.passes.derived import link_param
from ember.passes.robe import PRIME, coefficients, slot_coefficients


def element(array: np.ndarray, x: int, e: int, block: int, seed: int, table: int = 0) -> tuple[int, int]:
    """The slot and sign of element e of row x of table number `table` (Hetu's A e with e the table: A t + D)."""
    (b, c, d), (b2, c2, d2) = coefficients(seed)
    a, a2 = slot_coefficients(seed)
    slot = (b * x + c * (e // block) + a * table + d + e % block) % PRIME % len(array)
    return slot, 2 * ((b2 * x + c2 * e + a2 * table + d2) % PRIME % 2) - 1


def row_of(array: np.ndarray, x: int, dim: int, block: int, seed: int, table: int = 0) -> np.ndarray:
    """Row x as the array stands for it, element by element, in float64."""
    out = np.zeros(dim)
    for e in range(dim):
        slot, sign = element(array, x, e, block, seed, table)
        out[e] = sign * float(array[slot])
    return out


def table_of(array: np.ndarray, rows: int, dim: int, block: int, seed: int) -> np.ndarray:
    return np.array([row_of(array, x, dim, block, seed) for x in range(rows)])


def test_the_coefficients_are_splitmix64s_outputs() -> None:
    """SplitMix64 from state 0 starts 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f (Vigna's
    reference implementation); each coefficient is 1 + output mod (P - 1)."""
    first = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    assert list(coefficients(0)[0]) == [1 + v % (PRIME - 1) for v in first]
    for seed in (0, 1, 2**40):
        assert all(1 <= v < PRIME for part in coefficients(seed) for v in part)
    assert coefficients(1) != coefficients(0)


@pytest.mark.parametrize(("size", "block", "seed"), [(50, 4, 5), (200, 8, 1), (7, 2, 3)])
def test_the_array_is_the_least_squares_fit(size: int, block: int, seed: int) -> None:
    """lstsq's minimum-norm solution of A M = T, A the elements' 0/+-1 rows: where no element reads a slot, 0."""
    rows, dim = 30, 8
    table = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    a = np.zeros((rows * dim, size))
    for x in range(rows):
        for e in range(dim):
            slot, sign = element(np.zeros(size), x, e, block, seed)
            a[x * dim + e, slot] = sign
    want = np.linalg.lstsq(a, table.astype(np.float64).ravel(), rcond=None)[0]
    got = link_param({"t": table}, f"t#robe/{size}/{block}/{seed}")
    assert got is not None and got.dtype == np.float32 and got.shape == (size,)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    if size == 200:
        assert (~a.any(axis=0)).any() and not got[~a.any(axis=0)].any()


def test_a_ratio_names_the_array_the_pass_would_make() -> None:
    """`t#robe/7x/4/3` is the array of ceil(elements / 7) elements, the one `robe{size=7x}` fits (the name a
    hand-written program uses, since the elements depend on the table)."""
    table = np.random.default_rng(2).standard_normal((30, 8)).astype(np.float32)
    got = link_param({"t": table}, "t#robe/7x/4/3")
    assert got is not None and got.shape == (-(-240 // 7),)
    np.testing.assert_array_equal(got, link_param({"t": table}, f"t#robe/{-(-240 // 7)}/4/3"))


def test_a_table_made_from_an_array_is_recovered_exactly() -> None:
    rng = np.random.default_rng(8)
    array = rng.standard_normal(64).astype(np.float32)
    table = table_of(array, 100, 16, 4, 9).astype(np.float32)
    got = link_param({"t": table}, "t#robe/64/4/9")
    assert got is not None
    np.testing.assert_array_equal(table_of(got, 100, 16, 4, 9), table)
    read = np.zeros(64, bool)
    read[[element(array, x, e, 4, 9)[0] for x in range(100) for e in range(16)]] = True
    np.testing.assert_array_equal(got[read], array[read])


MODULE = """module attributes {{weights = "w.onnx"}} {{
  func @main(%i: tensor<?xi64>, %o: tensor<?xi64>, %j: tensor<?xi64>, %k: tensor<?xi64>) -> (OUT16, OUT8) {{
    %a = param {{name = "made"}} : tensor<200x16xf32>
    %b = param {{name = "noise"}} : tensor<30x8xf32>
    %x = emb.bag %a, %i, %o {{mode = "sum", empty = "zero"}} : OUT16
    %y = emb.bag %b, %j, %k {{mode = "mean", empty = "zero"}} : OUT8
    return %x, %y
  }}
}}
""".replace("OUT16", "tensor<?x16xf32>").replace("OUT8", "tensor<?x8xf32>")


def test_remarks_and_stats_give_each_tables_bytes_and_error(tmp_path: Path) -> None:
    """size=100x: 200 x 16 -> 32 elements, 30 x 8 -> 3.  The table made from a 32-element array comes back with
    no error; the random one's error is measured against the rows of the array the linker computes."""
    rng = np.random.default_rng(10)
    made = table_of(rng.standard_normal(32).astype(np.float32), 200, 16, 4, 7).astype(np.float32)
    noise = rng.standard_normal((30, 8)).astype(np.float32)
    weights_file(tmp_path / "w.onnx", made=made, noise=noise)
    (tmp_path / "m.eir").write_text(MODULE.format())
    r = run_here("opt", "--remarks", "--stats", "s.json", "-p", "robe{size=100x,block=4,seed=7}", "m.eir", "-o",
                 "t.eir", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = (tmp_path / "t.eir").read_text()
    (b, c, d), (b2, c2, d2) = coefficients(7)
    assert 'param {name = "made#robe/32/4/7"} : tensor<32xf32>' in out and '"made"' not in out
    assert (f"emb.robe %made_robe, %i, %o {{block = 4, mode = \"sum\", prime = {PRIME}, hash = [{b}, {c}, {d}], "
            f"sign = [{b2}, {c2}, {d2}]}}") in out
    array = link_param({"noise": noise}, "noise#robe/3/4/7")
    diff = table_of(array, 30, 8, 4, 7) - noise  # type: ignore[arg-type]
    emax, rms = float(np.abs(diff).max()), float(np.sqrt(np.mean(diff ** 2)))
    err = r.stderr.decode()
    assert ("m.eir:5:10: remark: robe: made (200 x 16 f32) -> ROBE size=32 block=4 seed=7: 12,800 -> 128 bytes "
            "(100.00x smaller); reconstruction error max 0, RMS 0") in err
    assert (f"m.eir:6:10: remark: robe: noise (30 x 8 f32) -> ROBE size=3 block=4 seed=7: 960 -> 12 bytes "
            f"(80.00x smaller); reconstruction error max {emax:.3g}, RMS {rms:.3g}") in err
    [stats] = json.loads((tmp_path / "s.json").read_text())["passes"]
    assert stats["pass"] == "robe"
    first, second = stats["tables"]
    assert (first["table"], first["representation"], first["bytes_before"], first["bytes_after"], first["ratio"],
            first["error_max"], first["error_rms"]) == ("made", "ROBE size=32 block=4 seed=7", 12800, 128, 100.0, 0, 0)
    assert (second["table"], second["rows"], second["dim"], second["bytes_after"]) == ("noise", 30, 8, 12)
    assert second["error_max"] == pytest.approx(emax, rel=1e-6) and second["error_rms"] == pytest.approx(rms, rel=1e-6)


def test_without_weights_the_error_is_unmeasured(tmp_path: Path) -> None:
    (tmp_path / "m.eir").write_text(MODULE.format())
    r = run_here("opt", "--stats", "s.json", "-p", "robe", "m.eir", "-o", "t.eir", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    made, noise = json.loads((tmp_path / "s.json").read_text())["passes"][0]["tables"]
    assert made["representation"] == "ROBE size=4 block=16 seed=0"  # 3,200 / 1000 rounded up; D = 16 <= 32
    assert noise["representation"] == "ROBE size=1 block=8 seed=0"
    assert made["error_max"] is None and made["error_unmeasured"] == "the module's weights file could not be read"


def weighted(elem: str) -> str:
    return f"""module {{
  func @main(%i: tensor<?xi64>, %o: tensor<?xi64>, %w: tensor<?x{elem}>) -> (tensor<?x8xf32>) {{
    %t = param {{name = "t"}} : tensor<30x8xf32>
    %y = emb.bag %t, %i, %o, %w {{mode = "sum", empty = "zero"}} : tensor<?x8xf32>
    return %y
  }}
}}
"""


@pytest.mark.parametrize(("text", "options", "why"), [
    (bag("", arg=", %t: tensor<30x8xf32>"), "", "its table is not a param"),
    (bag('%t = param {name = "t"} : tensor<30x8xf64>', elem="f64"), "", "its table holds f64, not f32"),
    (bag(TABLE, 'mode = "max", empty = "zero"'), "", "mode max has no ROBE form (ROBE bags sum, or average)"),
    (bag(TABLE, 'mode = "sum", empty = "zero", padding_idx = 2'), "",
     "it has a padding_idx, which ROBE bags do not take"),
    (weighted("f64"), "", "its per-sample weights are not f32"),
    (bag(TABLE.replace("ROWS", "0")), "", "the table is empty (0 x 8)"),
    (bag(TABLE), "{block=3}", "block=3 does not divide the rows' 8 elements"),
    (bag(TABLE), "{size=240}", "no saving: an array of 240 elements, the table 240"),
    (bag(TABLE), "{size=1.5x,block=16}", "block=16 does not divide the rows' 8 elements")])
def test_what_it_cannot_fit_keeps_its_table_with_a_remark(text: str, options: str, why: str) -> None:
    module = parse_module(text.replace("ROWS", "30").replace("DIM", "8"), "f.eir")
    passes = parse_pipeline("robe" + options)
    run_passes(module, passes)
    remarks = passes[0].remarks  # type: ignore[attr-defined]
    assert remarks == [f"f.eir:4:10: remark: robe: table kept in float: {why}"], remarks
    assert "emb.robe" not in print_module(module) and passes[0].stats == []  # type: ignore[attr-defined]


def test_a_table_two_bags_share_is_fitted_once() -> None:
    text = """module {
  func @main(%i: tensor<?xi64>, %o: tensor<?xi64>, %j: tensor<?xi64>, %p: tensor<?xi64>) -> (OUT, OUT) {
    %t = param {name = "t"} : tensor<400x16xf32>
    %a = emb.bag %t, %i, %o {mode = "sum", empty = "zero"} : OUT
    %b = emb.bag %t, %j, %p {mode = "mean", empty = "identity"} : OUT
    return %a, %b
  }
}""".replace("OUT", "tensor<?x16xf32>")
    module = parse_module(text, "two.eir")
    passes = parse_pipeline("robe{size=64,block=8}")
    run_passes(module, passes)
    out = print_module(module)
    assert out.count(" = param ") == 1 and 'param {name = "t#robe/64/8/0"} : tensor<64xf32>' in out
    assert out.count("emb.robe %t_robe, ") == 2 and len(passes[0].stats) == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(("options", "message"), [
    ("size=0", "option 'size' must be the array's elements (a positive integer) or a compression ratio greater "
               "than 1 written with an 'x' (e.g. 64000 or 1000x), got '0'"),
    ("size=1x", "got '1x'"),
    ("size=tenx", "got 'tenx'"),
    ("size=-5", "got '-5'"),
    ("block=-4", "option 'block' must be positive (or 0: chosen), got -4"),
    ("seed=-1", "option 'seed' must be in [0, 2**64), got -1"),
    (f"seed={2**64}", f"option 'seed' must be in [0, 2**64), got {2**64}"),
    ("seed=x", "option 'seed' needs an integer, got 'x'"),
    ("prime=7", "pass 'robe' has no option 'prime'")])
def test_bad_options_are_one_line_errors(tmp_path: Path, options: str, message: str) -> None:
    (tmp_path / "m.eir").write_text(MODULE.format())
    r = run_here("opt", "-p", f"robe{{{options}}}", "m.eir", cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 1 and message in err and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize(("name", "message"), [
    ("t#robe/64/4", "a #robe param is named NAME#robe/<size>/<block>/<seed>"),
    ("t#robe/64/4/x", "a #robe param is named NAME#robe/<size>/<block>/<seed>"),
    ("t#robe/0/4/0", "needs a size > 0 (a ratio > 1) and a block that divides the rows' 8 elements"),
    ("t#robe/64/3/0", "needs a size > 0 (a ratio > 1) and a block that divides the rows' 8 elements"),
    ("t#robe/1x/4/0", "needs a size > 0 (a ratio > 1)"),
    ("t#robe/0x/4/0", "needs a size > 0 (a ratio > 1)"),
    ("t#robe/x/4/0", "a #robe param is named NAME#robe/<size>/<block>/<seed> (or <ratio>x for the size)"),
    ("t#robe/2.5x/4/0", "a #robe param is named NAME#robe/<size>/<block>/<seed> (or <ratio>x for the size)")])
def test_a_derived_name_that_names_no_array_is_one_line(name: str, message: str) -> None:
    with pytest.raises(EmberError) as e:
        link_param({"t": np.zeros((30, 8), np.float32)}, name)
    assert f"param '{name}' is computed from 't': " in str(e.value) and message in str(e.value)
    assert "\n" not in str(e.value)


E2E = """module attributes {{weights = "w.onnx"}} {{
  func @main(%indices: tensor<?xi64>, %offsets: tensor<?xi64>{wdecl}) -> (tensor<?x16xf32>) {{
    %table = param {{name = "table"}} : tensor<1000x16xf32>
    %out = emb.bag %table, %indices, %offsets{warg} {{mode = "{mode}", empty = "zero"}} : tensor<?x16xf32>
    return %out
  }}
}}
"""


@pytest.mark.parametrize(("mode", "weighted", "level"), [("sum", True, "O0"),
                                                       pytest.param("mean", False, "O3", marks=pytest.mark.slow)])
def test_a_fitted_table_runs_through_every_tool_on_both_engines(tmp_path: Path, mode: str, weighted: bool,
                                                                level: str) -> None:
    """ember-opt fits the table (then -O0, or -O3), ember-asm computes the array from the float weights, and both
    engines' bags equal numpy's over the rows the array stands for (`table_of`)."""
    rng = np.random.default_rng(11)
    table = rng.standard_normal((1000, 16)).astype(np.float32)
    weights_file(tmp_path / "w.onnx", table=table)
    (tmp_path / "m.eir").write_text(E2E.format(mode=mode, wdecl=", %w: tensor<?xf32>" if weighted else "",
                                               warg=", %w" if weighted else ""))
    indices, offsets = rng.integers(0, 1000, 40), np.array([0, 5, 5, 17, 40])  # bag 1 is empty
    feeds = {"indices": indices, "offsets": offsets} | ({"w": rng.standard_normal(40).astype(np.float32)}
                                                        if weighted else {})
    np.savez(tmp_path / "in.npz", **feeds)
    r = run_here("opt", "-p", "robe{size=1600,block=4,seed=3}," + PRESETS[level], "m.eir", "-o", "t.dae",
                 cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert '"table#robe/1600/4/3" f32 [1600]' in (tmp_path / "t.dae").read_text()
    assert run_here("asm", "t.dae", "-o", "t.bin", cwd=tmp_path).returncode == 0
    array = link_param({"table": table}, "table#robe/1600/4/3")
    used = sorted(set(indices.tolist()))
    rows = np.zeros((1000, 16))
    rows[used] = [row_of(array, x, 16, 4, 3) for x in used]  # type: ignore[arg-type]
    want = np.zeros((4, 16))
    for b in range(4):
        picked = rows[indices[offsets[b]:offsets[b + 1]]]
        if weighted:
            picked = picked * feeds["w"][offsets[b]:offsets[b + 1], None]
        want[b] = picked.sum(0) / (max(len(picked), 1) if mode == "mean" else 1)
    assert math.sqrt(np.mean((rows[used] - table[used]) ** 2)) > 0.1  # 10x smaller: the rows did change
    for engine in ("fast", "reference"):
        r = run_here("sim", "t.bin", "--inputs", "in.npz", "--outputs", f"{engine}.npz", "--engine", engine,
                     cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        [got] = np.load(tmp_path / f"{engine}.npz").values()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_a_shared_array_is_the_least_squares_fit_of_all_its_tables() -> None:
    """`a|b#robe/...`: one array for two tables of different widths, table 1 read with its slot's coefficients;
    lstsq on the stacked 0/+-1 rows of both tables gives the same array."""
    size, block, seed = 60, 4, 2
    rng = np.random.default_rng(12)
    tables = [rng.standard_normal((30, 8)).astype(np.float32), rng.standard_normal((20, 4)).astype(np.float32)]
    a = np.zeros((30 * 8 + 20 * 4, size))
    r = 0
    for t, table in enumerate(tables):
        for x in range(table.shape[0]):
            for e in range(table.shape[1]):
                slot, sign = element(np.zeros(size), x, e, block, seed, t)
                a[r, slot] = sign
                r += 1
    want = np.linalg.lstsq(a, np.concatenate([t.astype(np.float64).ravel() for t in tables]), rcond=None)[0]
    got = link_param({"a": tables[0], "b": tables[1]}, f"a|b#robe/{size}/{block}/{seed}")
    assert got is not None and got.shape == (size,)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    alone = link_param({"a": tables[0]}, f"a#robe/{size}/{block}/{seed}")  # slot 0 alone: the unshared array
    assert alone is not None and not np.allclose(alone, got)
    assert link_param({"a": tables[0]}, f"a|b#robe/{size}/{block}/{seed}") is None  # b is not in the weights


SHARED = """module attributes {{weights = "w.onnx"}} {{
  func @main(%i: tensor<?xi64>, %o: tensor<?xi64>, %j: tensor<?xi64>, %k: tensor<?xi64>) -> (OUT16, OUT8, OUT16) {{
    %a = param {{name = "big"}} : tensor<300x16xf32>
    %b = param {{name = "small"}} : tensor<100x8xf32>
    %x = emb.bag %a, %i, %o {{mode = "sum", empty = "zero"}} : OUT16
    %y = emb.bag %b, %j, %k {{mode = "mean", empty = "zero"}} : OUT8
    %z = emb.bag %a, %j, %k {{mode = "mean", empty = "zero"}} : OUT16
    return %x, %y, %z
  }}
}}
""".replace("OUT16", "tensor<?x16xf32>").replace("OUT8", "tensor<?x8xf32>")


def test_shared_puts_every_table_in_one_array_that_runs_on_both_engines(tmp_path: Path) -> None:
    """robe{shared=true}: both tables read one array of (300 x 16 + 100 x 8) / 10 elements, `small` as slot 1;
    the block is the largest divisor of both widths up to 32; each table's stats count its share of the array
    and its error against the rows the shared array stands for; -O0 on both engines equals numpy on those rows."""
    rng = np.random.default_rng(13)
    big, small = rng.standard_normal((300, 16)).astype(np.float32), rng.standard_normal((100, 8)).astype(np.float32)
    weights_file(tmp_path / "w.onnx", big=big, small=small)
    (tmp_path / "m.eir").write_text(SHARED.format())
    r = run_here("opt", "--remarks", "--stats", "s.json", "-p", "robe{shared=true,size=10x,seed=5}", "m.eir", "-o",
                 "t.eir", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = (tmp_path / "t.eir").read_text()
    assert out.count(" = param ") == 1 and 'param {name = "big|small#robe/560/8/5"} : tensor<560xf32>' in out
    (hx, hc, hd), (sx, se, sd) = coefficients(5)
    a, a2 = slot_coefficients(5)
    assert f"hash = [{hx}, {hc}, {hd}], sign = [{sx}, {se}, {sd}]" in out
    assert f"hash = [{hx}, {hc}, {(hd + a) % PRIME}], sign = [{sx}, {se}, {(sd + a2) % PRIME}]" in out
    array = link_param({"big": big, "small": small}, "big|small#robe/560/8/5")
    assert array is not None
    rows = [table_of(array, 300, 16, 8, 5), np.array([row_of(array, x, 8, 8, 5, 1) for x in range(100)])]
    [stats] = json.loads((tmp_path / "s.json").read_text())["passes"]
    for t, (name, table) in enumerate([("big", big), ("small", small)]):
        entry = stats["tables"][t]
        diff = rows[t] - table
        assert entry["table"] == name and entry["representation"] == f"ROBE shared size=560 block=8 seed=5 slot={t}"
        assert entry["error_rms"] == pytest.approx(math.sqrt(np.mean(diff ** 2)), rel=1e-6)
    assert [e["bytes_after"] for e in stats["tables"]] == [1920, 320]  # 560 x 4 bytes in 4,800 : 800
    r = run_here("opt", "-O0", "t.eir", "-o", "t.dae", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert run_here("asm", "t.dae", "-o", "t.bin", cwd=tmp_path).returncode == 0
    i, j = rng.integers(0, 300, 30), rng.integers(0, 100, 25)
    o, k = np.array([0, 10, 10, 30]), np.array([0, 7, 25])
    np.savez(tmp_path / "in.npz", i=i, o=o, j=j, k=k)

    def pooled(r: np.ndarray, idx: np.ndarray, off: np.ndarray, mean: bool) -> np.ndarray:
        return np.array([r[idx[s:e]].sum(0) / (max(e - s, 1) if mean else 1) for s, e in zip(off, off[1:])])

    wants = [pooled(rows[0], i, o, False), pooled(rows[1], j, k, True), pooled(rows[0], j, k, True)]
    for engine in ("fast", "reference"):
        r = run_here("sim", "t.bin", "--inputs", "in.npz", "--outputs", f"{engine}.npz", "--engine", engine,
                     cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        for got, want in zip(np.load(tmp_path / f"{engine}.npz").values(), wants):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_shared_with_a_block_one_table_cannot_take_keeps_every_table() -> None:
    module = parse_module(SHARED.format(), "s.eir")
    passes = parse_pipeline("robe{shared=true,block=16}")
    run_passes(module, passes)
    remarks = passes[0].remarks  # type: ignore[attr-defined]
    assert "emb.robe" not in print_module(module) and len(remarks) == 3
    assert "s.eir:5:10: remark: robe: table kept in float: block=16 does not divide the rows of every table the " \
           "array would hold" in remarks
    assert "s.eir:6:10: remark: robe: table kept in float: block=16 does not divide the rows' 8 elements" in remarks
