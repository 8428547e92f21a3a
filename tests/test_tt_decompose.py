"""tt-decompose: TT-SVD of float tables into emb.ttbag cores, the derived params the linker computes, the remarks
and `ember-opt --stats`.

The reference for what cores stand for is `dense`, written here from the definition of emb.ttbag (FBTT-Embedding's
tt_matrix_to_full with tt_permute [1, 0, 2, 3]) as one numpy einsum over the cores, independent of the pass's own
`tt_rows`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import pytest
from conftest import run_here

import ember.dialects  # noqa: F401
from ember.frontends import load_weights_any
from ember.ir.diagnostics import EmberError
from ember.ir.parser import parse_module
from ember.ir.printer import print_module
from ember.passes import PRESETS, parse_pipeline, run_passes
from ember.passes.derived import link_param
from ember.passes.quantize_tables import prepack, unpack
from ember.passes.tt_decompose import capped_ranks, core_shapes, tt_cores, tt_rows

EINSUM = {2: "aXbr,crdY->acbd", 3: "aXbr,crds,esfY->acebdf", 4: "aXbr,crds,esft,gthY->acegbdfh"}


def dense(cores: list[np.ndarray]) -> np.ndarray:
    """The full table of cores G_k[p_k, R_k, q_k, R_k+1]: W[i, d] = G_0[i_0, 0, j_0, :] ... G_n-1[.., j_n-1, 0],
    i's digits i_k over p and d's digits j_k over q, the most significant first."""
    n = len(cores)
    full = np.einsum(EINSUM[n], *(c.astype(np.float64) for c in cores))
    return full.reshape(math.prod(c.shape[0] for c in cores), math.prod(c.shape[2] for c in cores))


def random_cores(rng: np.random.Generator, p: tuple, q: tuple, ranks: tuple) -> list[np.ndarray]:
    return [rng.standard_normal(s).astype(np.float32) for s in core_shapes(p, q, ranks)]


def relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize(("p", "q", "ranks"), [((6, 5), (4, 2), (3,)), ((5, 4, 3), (4, 2, 3), (3, 5)),
                                               ((3, 4, 2, 3), (2, 3, 2, 2), (2, 4, 3))])
def test_a_table_of_low_tt_rank_is_recovered(p: tuple, q: tuple, ranks: tuple) -> None:
    table = dense(random_cores(np.random.default_rng(1), p, q, ranks)).astype(np.float32)
    cores = tt_cores(table, p, q, ranks)
    assert [c.shape for c in cores] == core_shapes(p, q, ranks) and all(c.dtype == np.float32 for c in cores)
    assert relative(dense(cores), table) < 1e-5


def test_full_ranks_reproduce_any_table_and_the_rows_past_it_are_zero() -> None:
    rng = np.random.default_rng(2)
    table = rng.standard_normal((45, 12)).astype(np.float32)  # 45 rows of p = 4 x 3 x 4 = 48: three padded
    p, q = (4, 3, 4), (2, 3, 2)
    ranks = capped_ranks(p, q, (1000, 1000))
    assert ranks == (8, 8)  # the unfoldings are 8 x 72 and 72 x 8
    cores = tt_cores(table, p, q, ranks)
    full = dense(cores)
    assert relative(full[:45], table) < 1e-5
    assert np.abs(full[45:]).max() < 1e-5 * np.abs(table).max()


@pytest.mark.parametrize(("start", "stop"), [(0, 20), (0, 24), (5, 6), (7, 19)])
def test_tt_rows_is_the_definition(start: int, stop: int) -> None:
    cores = random_cores(np.random.default_rng(3), (3, 2, 4), (2, 3, 2), (4, 3))
    np.testing.assert_allclose(tt_rows(cores, start, stop), dense(cores)[start:stop], rtol=1e-12, atol=1e-12)


def test_truncation_keeps_the_best_ranks_worth() -> None:
    """A 2-core train is one SVD: its error is exactly the singular values dropped (Eckart-Young)."""
    rng = np.random.default_rng(4)
    table = rng.standard_normal((36, 16)).astype(np.float32)
    p, q = (6, 6), (4, 4)
    cores = tt_cores(table, p, q, (5,))
    unfolding = table.astype(np.float64).reshape(6, 6, 4, 4).transpose(0, 2, 1, 3).reshape(24, 24)
    s = np.linalg.svd(unfolding, compute_uv=False)
    assert np.linalg.norm(dense(cores) - table) == pytest.approx(np.sqrt(np.sum(s[5:] ** 2)), rel=1e-5)


def test_the_linker_computes_each_core_from_one_decomposition(monkeypatch: pytest.MonkeyPatch) -> None:
    table = np.random.default_rng(5).standard_normal((90, 8)).astype(np.float32)
    calls = []
    eigh = np.linalg.eigh

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return eigh(*args, **kwargs)

    monkeypatch.setattr(np.linalg, "eigh", counted)
    weights = {"t": table}
    cores = [link_param(weights, f"t#tt/5x5x4/2x2x2/3x4/{k}") for k in range(3)]
    assert len(calls) == 2  # one decomposition of a 3-core train: one truncation per cut, two, not six
    assert [c.shape for c in cores] == [(5, 1, 2, 3), (5, 3, 2, 4), (4, 4, 2, 1)]  # type: ignore[union-attr]
    for got, want in zip(cores, tt_cores(table.copy(), (5, 5, 4), (2, 2, 2), (3, 4))):  # a copy: decomposed anew
        np.testing.assert_array_equal(got, want)  # type: ignore[arg-type]
    assert len(calls) == 4
    assert link_param(weights, "u#tt/5x5x4/2x2x2/3x4/0") is None  # no float table to compute it from


@pytest.mark.parametrize(("name", "message"), [
    ("t#tt/5x5x4/2x2x2/3x4", "a #tt param is named NAME#tt/<p>/<q>/<ranks>/<core>"),
    ("t#tt/5x5x4/2x2x2/3x4/3", "does not name a core of a train"),
    ("t#tt/5x5x4/2x2/3/0", "does not name a core of a train"),
    ("t#tt/5x5/2x0/3/0", "q must be positive integers joined by 'x'"),
    ("t#tt/3x3x3/2x2x2/3x4/0", "p=3x3x3 and q=2x2x2 do not cover a table of 90 x 8"),
    ("t#int8/3", "a #int8 param takes nothing after its kind")])
def test_a_derived_name_that_names_no_train_is_one_line(name: str, message: str) -> None:
    with pytest.raises(EmberError) as e:
        link_param({"t": np.zeros((90, 8), np.float32)}, name)
    assert f"param '{name}' is computed from 't': " in str(e.value) and message in str(e.value)
    assert "\n" not in str(e.value)


def weights_file(path: Path, **arrays: np.ndarray) -> None:
    """An ONNX file holding `arrays` as initializers: what a module's `weights` names."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["x"], ["y"])], "w", [x],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
                                   [onnx.numpy_helper.from_array(a, k) for k, a in arrays.items()])
    onnx.save(onnx.helper.make_model(graph), str(path))


MODULE = """module attributes {{weights = "w.onnx"}} {{
  func @main(%i: tensor<?xi64>, %o: tensor<?xi64>, %j: tensor<?xi64>, %k: tensor<?xi64>) -> (OUT64, OUT8) {{
    %a = param {{name = "wide"}} : tensor<{rows}x64xf32>
    %b = param {{name = "narrow"}} : tensor<30x8xf32>
    %x = emb.bag %a, %i, %o {{mode = "sum", empty = "zero"}} : OUT64
    %y = emb.bag %b, %j, %k {{mode = "mean", empty = "zero"}} : OUT8
    return %x, %y
  }}
}}
""".replace("OUT64", "tensor<?x64xf32>").replace("OUT8", "tensor<?x8xf32>")


def test_remarks_and_stats_give_each_tables_bytes_and_error(tmp_path: Path) -> None:
    """tt-decompose takes the wide table (q=4x4x4 does not fit the narrow one) and quantize-tables the narrow
    one; both report bytes and the error against the float rows, as remarks and in --stats."""
    rng = np.random.default_rng(6)
    wide, narrow = rng.standard_normal((1000, 64)).astype(np.float32), rng.standard_normal((30, 8)).astype(np.float32)
    weights_file(tmp_path / "w.onnx", wide=wide, narrow=narrow)
    (tmp_path / "m.eir").write_text(MODULE.format(rows=1000))
    r = run_here("opt", "--remarks", "--stats", "s.json", "-p", "tt-decompose{ranks=8,q=4x4x4},quantize-tables",
                 "m.eir", "-o", "t.eir", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = (tmp_path / "t.eir").read_text()
    assert 'param {name = "wide#tt/10x10x10/4x4x4/8x8/1"} : tensor<10x8x4x8xf32>' in out
    assert "emb.ttbag" in out and "emb.qbag" in out and '"wide"' not in out
    cores = [link_param({"wide": wide}, f"wide#tt/10x10x10/4x4x4/8x8/{k}") for k in range(3)]
    diff = dense(cores) - wide  # type: ignore[arg-type]
    emax, rms = float(np.abs(diff).max()), float(np.sqrt(np.mean(diff ** 2)))
    after = (10 * 4 * 8 + 10 * 8 * 4 * 8 + 10 * 8 * 4) * 4
    assert (f"m.eir:5:10: remark: tt-decompose: wide (1,000 x 64 f32) -> TT p=10x10x10 q=4x4x4 ranks=8x8: "
            f"256,000 -> {after:,} bytes ({256000 / after:.2f}x smaller); reconstruction error max {emax:.3g}, "
            f"RMS {rms:.3g}") in r.stderr.decode()
    assert "tt-decompose: table kept in float: q=4x4x4 makes rows of 64 elements, and the table's have 8" in (
        r.stderr.decode())
    stats = json.loads((tmp_path / "s.json").read_text())["passes"]
    assert [s["pass"] for s in stats] == ["tt-decompose", "quantize-tables"]
    [tt], [q8] = stats[0]["tables"], stats[1]["tables"]
    assert tt["table"] == "wide" and tt["representation"] == "TT p=10x10x10 q=4x4x4 ranks=8x8"
    assert (tt["rows"], tt["dim"], tt["bytes_before"], tt["bytes_after"]) == (1000, 64, 256000, after)
    assert tt["error_max"] == pytest.approx(emax, rel=1e-6) and tt["error_rms"] == pytest.approx(rms, rel=1e-6)
    qdiff = unpack(prepack(narrow, 8), 8).astype(np.float64) - narrow
    assert (q8["table"], q8["representation"], q8["bytes_before"], q8["bytes_after"]) == ("narrow", "int8", 960, 480)
    assert q8["error_max"] == pytest.approx(np.abs(qdiff).max(), rel=1e-6)


def test_without_weights_the_error_is_unmeasured_and_stats_say_why(tmp_path: Path) -> None:
    (tmp_path / "m.eir").write_text(MODULE.format(rows=1000))
    r = run_here("opt", "--remarks", "--stats", "s.json", "-p", "tt-decompose{cores=2}", "m.eir", "-o", "t.eir",
                 cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "reconstruction error not measured (the module's weights file could not be read)" in r.stderr.decode()
    [tt] = json.loads((tmp_path / "s.json").read_text())["passes"][0]["tables"]
    assert tt["table"] == "wide" and tt["representation"] == "TT p=40x25 q=8x8 ranks=16"
    assert tt["error_max"] is None and tt["error_unmeasured"] == "the module's weights file could not be read"


def bag(table: str, attrs: str = 'mode = "sum", empty = "zero"', dim: int = 8, arg: str = "",
        elem: str = "f32") -> str:
    return f"""module {{
  func @main(%i: tensor<?xi64>, %o: tensor<?xi64>{arg}) -> (tensor<?x{dim}x{elem}>) {{
    {table}
    %y = emb.bag %t, %i, %o {{{attrs}}} : tensor<?x{dim}x{elem}>
    return %y
  }}
}}
"""


P = '%t = param {name = "t"} : tensor<ROWSxDIMxf32>'


@pytest.mark.parametrize(("text", "options", "why"), [
    (bag("", arg=", %t: tensor<30x8xf32>"), "", "its table is not a param"),
    (bag('%t = param {name = "t"} : tensor<30x8xf64>', elem="f64"), "", "its table holds f64, not f32"),
    (bag(P, 'mode = "max", empty = "zero"'), "", "mode max has no TT form (TT bags sum, or average)"),
    (bag(P, 'mode = "sum", empty = "zero", padding_idx = 2'), "", "it has a padding_idx, which TT bags do not take"),
    (bag(P.replace("ROWS", "0")), "", "the table is empty (0 x 8)"),
    (bag(P.replace("DIM", "14"), dim=14), "",
     "its rows of 14 elements cannot be factored into 3 factors greater than 1 (give q=, or fewer cores)"),
    (bag(P), "{q=4x4}", "q=4x4 makes rows of 16 elements, and the table's have 8"),
    (bag(P.replace("ROWS", "1000")), "{p=9x10x10}", "p=9x10x10 covers 900 rows, and the table has 1000"),
    (bag(P), "{ranks=8}", "no saving: cores of p=5x3x2 q=2x2x2 ranks=8x4 hold 1,152 bytes, the table 960")])
def test_what_it_cannot_decompose_keeps_its_table_with_a_remark(text: str, options: str, why: str) -> None:
    text = text.replace("ROWS", "30").replace("DIM", "8")
    module = parse_module(text, "f.eir")
    passes = parse_pipeline("tt-decompose" + options)
    run_passes(module, passes)
    remarks = passes[0].remarks  # type: ignore[attr-defined]
    assert remarks == [f"f.eir:4:10: remark: tt-decompose: table kept in float: {why}"], remarks
    assert "emb.ttbag" not in print_module(module) and passes[0].stats == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(("options", "message"), [
    ("ranks=0", "option 'ranks' must be positive integers joined by 'x' (e.g. 16 or 12x14), got '0'"),
    ("ranks=8x", "option 'ranks' must be positive integers joined by 'x'"),
    ("p=10x-3", "option 'p' must be positive integers joined by 'x'"),
    ("cores=5", "a train has 2, 3 or 4 cores, got 5"),
    ("q=64", "a train has 2, 3 or 4 cores, got 1"),
    ("cores=x", "option 'cores' needs an integer, got 'x'"),
    ("p=10x10x10,q=8x8", "the options disagree on the number of cores (p says 3, q says 2)"),
    ("cores=2,ranks=4x4", "the options disagree on the number of cores (cores says 2, ranks says 3)"),
    ("rank=4", "pass 'tt-decompose' has no option 'rank'")])
def test_bad_options_are_one_line_errors(tmp_path: Path, options: str, message: str) -> None:
    (tmp_path / "m.eir").write_text(MODULE.format(rows=1000))
    r = run_here("opt", "-p", f"tt-decompose{{{options}}}", "m.eir", cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 1 and message in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_a_table_two_bags_share_is_decomposed_once() -> None:
    text = """module {
  func @main(%i: tensor<?xi64>, %o: tensor<?xi64>, %j: tensor<?xi64>, %p: tensor<?xi64>, %w: W) -> (OUT, OUT) {
    %t = param {name = "t"} : tensor<400x16xf32>
    %a = emb.bag %t, %i, %o, %w {mode = "sum", empty = "zero"} : tensor<?x16xf32>
    %b = emb.bag %t, %j, %p {mode = "mean", empty = "identity"} : tensor<?x16xf32>
    return %a, %b
  }
}"""
    module = parse_module(text.replace("OUT", "tensor<?x16xf32>").replace("W)", "tensor<?xf32>)"), "two.eir")
    passes = parse_pipeline("tt-decompose{cores=2,ranks=6}")
    run_passes(module, passes)
    out = print_module(module)
    assert out.count(" = param ") == 2 and '"t"' not in out
    assert 'param {name = "t#tt/20x20/4x4/6/0"} : tensor<20x1x4x6xf32>' in out
    assert out.count("emb.ttbag %t_tt0, %t_tt1, ") == 2 and 'mode = "mean"' in out
    assert len(passes[0].stats) == 1  # type: ignore[attr-defined]


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
def test_a_decomposed_table_runs_through_every_tool_on_both_engines(tmp_path: Path, mode: str, weighted: bool,
                                                                    level: str) -> None:
    """ember-opt decomposes the table (then -O0, or -O3), ember-asm computes the cores from the float weights, and
    both engines' bags equal numpy's over the table the cores stand for (`dense`)."""
    rng = np.random.default_rng(7)
    weights_file(tmp_path / "w.onnx", table=rng.standard_normal((1000, 16)).astype(np.float32))
    (tmp_path / "m.eir").write_text(E2E.format(mode=mode, wdecl=", %w: tensor<?xf32>" if weighted else "",
                                               warg=", %w" if weighted else ""))
    indices, offsets = rng.integers(0, 1000, 40), np.array([0, 5, 5, 17, 40])  # bag 1 is empty
    feeds = {"indices": indices, "offsets": offsets} | ({"w": rng.standard_normal(40).astype(np.float32)}
                                                        if weighted else {})
    np.savez(tmp_path / "in.npz", **feeds)
    r = run_here("opt", "-p", "tt-decompose{ranks=4}," + PRESETS[level], "m.eir", "-o", "t.dae", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert '"table#tt/10x10x10/4x2x2/4x4/2" f32 [10, 4, 2, 1]' in (tmp_path / "t.dae").read_text()
    assert run_here("asm", "t.dae", "-o", "t.bin", cwd=tmp_path).returncode == 0
    cores = [link_param({"table": np.asarray(load_weights_any(str(tmp_path / "w.onnx"))["table"])},
                        f"table#tt/10x10x10/4x2x2/4x4/{k}") for k in range(3)]
    rows = dense(cores)[:1000]  # type: ignore[arg-type]
    want = np.zeros((4, 16))
    for b in range(4):
        picked = rows[indices[offsets[b]:offsets[b + 1]]]
        if weighted:
            picked = picked * feeds["w"][offsets[b]:offsets[b + 1], None]
        want[b] = picked.sum(0) / (max(len(picked), 1) if mode == "mean" else 1)
    for engine in ("fast", "reference"):
        r = run_here("sim", "t.bin", "--inputs", "in.npz", "--outputs", f"{engine}.npz", "--engine", engine,
                     cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        [got] = np.load(tmp_path / f"{engine}.npz").values()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize(("stats", "message"), [("-", "--stats needs a file of its own, not '-'"),
                                                ("t.eir", "--stats needs a file of its own, not 't.eir' (the output)"),
                                                ("no/such/dir/s.json", "cannot write")])
def test_stats_that_cannot_be_written_leave_no_output(tmp_path: Path, stats: str, message: str) -> None:
    (tmp_path / "m.eir").write_text(MODULE.format(rows=1000))
    r = run_here("opt", "--stats", stats, "-p", "tt-decompose", "m.eir", "-o", "t.eir", cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 1 and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "t.eir").exists()


def test_auto_names_the_cores_of_the_factoring_the_pass_picks() -> None:
    """`t#tt/auto/<q>/<ranks>/k`: core k of the train whose p tt-decompose picks for the table when given none (the
    name a hand-written kernel uses to serve every table size)."""
    from ember.passes.tt_decompose import factor_at_least

    table = np.random.default_rng(4).standard_normal((1_000, 8)).astype(np.float32)
    p = "x".join(map(str, factor_at_least(1_000, 3)))
    for k in range(3):
        got = link_param({"t": table}, f"t#tt/auto/2x2x2/4x4/{k}")
        assert got is not None
        np.testing.assert_array_equal(got, link_param({"t": table}, f"t#tt/{p}/2x2x2/4x4/{k}"))
