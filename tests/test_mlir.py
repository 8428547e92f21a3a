"""`ember-opt --emit=mlir` and `ember-import FILE.mlir`: every level of the demo model, and every sample level,
written as MLIR generic syntax reads back to the same module; a real MLIR parser (xdsl, the `mlir` extra) reads the
same text with Ember's dialects unregistered and finds the same ops, nesting and types."""

from __future__ import annotations

import functools
import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from test_ir_roundtrip import modules

import ember.dialects  # noqa: F401
from ember.frontends import import_model
from ember.frontends.mlir import import_mlir
from ember.ir.core import Op
from ember.ir.diagnostics import EmberError
from ember.ir.mlir_parse import parse_mlir
from ember.ir.mlir_print import mlir_type, print_mlir
from ember.ir.mlir_syntax import MODULE, op_name
from ember.ir.parser import parse_module
from ember.ir.printer import print_module
from ember.passes import PRESETS, parse_pipeline, run_passes

ROOT = Path(__file__).resolve().parent.parent
LEVELS = ROOT / "samples" / "levels"
DEMO = ROOT / "samples" / "models" / "dlrm.dynamo.onnx"
PIPELINES = {**{k: PRESETS[k] for k in ("O0", "O1", "O2", "O3", "core")},
             "full": PRESETS["O3"].replace("choose-plan,", "")}  # -O3's passes on every op


@functools.cache
def demo_levels() -> dict[str, str]:
    """Every level the demo model passes through inside each pipeline, after each pass up to codegen, by
    'pipeline:pass' (the import itself is 'emb')."""
    emb = print_module(import_model(str(DEMO), "dlrm.dynamo.onnx"))
    out = {"emb": emb}
    for name, pipeline in PIPELINES.items():
        passes = [p for p in parse_pipeline(pipeline) if p.name != "codegen"]
        printed: list[str] = []
        run_passes(parse_module(emb, "demo.eir"), passes, print_after_all=True, out=printed.append)
        for p, text in zip(passes, printed):
            out[f"{name}:{p.name}"] = text.split("\n", 1)[1]  # after the '// -----// IR after' line
    return out


def distinct_levels() -> dict[str, str]:
    """demo_levels without repeats (a pass that changed nothing), first name kept."""
    seen: dict[str, str] = {}
    for stage, text in demo_levels().items():
        seen.setdefault(text, stage)
    return {stage: text for text, stage in seen.items()}


def round_trip(text: str, name: str) -> None:
    module = parse_module(text, name)
    back = parse_mlir(print_mlir(module), name + ".mlir")
    assert print_module(back) == text


@pytest.mark.parametrize("pipeline", ["emb", *PIPELINES])
def test_every_level_of_the_demo_round_trips(pipeline: str) -> None:
    levels = {k: v for k, v in demo_levels().items() if k.split(":")[0] == pipeline}
    assert levels
    for stage, text in levels.items():
        round_trip(text, stage)


@pytest.mark.parametrize("path", sorted(LEVELS.glob("*.eir")), ids=lambda p: p.name)
def test_every_sample_level_round_trips(path: Path) -> None:
    round_trip(path.read_text(), str(path))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_random_ir_round_trips(m: Op) -> None:
    text = print_module(m)
    assert print_module(parse_mlir(print_mlir(m), "random.mlir")) == text


# Every type and attribute form, with the names and values MLIR has no plain spelling for.
ZOO = """\
module attributes {weights = "m.onnx", opset = 18, note = "q\\"uote\\\\ \\u00e9\\n\\u2603"} {
  func @main(%1a: tensor<4xu8>, %$x: stream<vector<8xf32>>, %v: vector<?x4xf32>) -> (tensor<*xf32>) {
    %0 = t.op %1a, %$x {big = 123456789012345678901234567890, low = -9223372036854775808, small = 1e-05, \
inf = inf, ninf = -inf, nan = nan, z = -0.0, b = true, l = [[1, 2], []], s = ""} : tensor<*xf32>
    %1 = t.op {d32 = dense<[1.5, nan, inf, -inf]> : tensor<2x2xf32>, d16 = dense<[0.5, inf]> : tensor<2xf16>, \
dbf = dense<[nan]> : tensor<3xbf16>, splat = dense<[7]> : tensor<2x3xi64>, d0 = dense<[3]> : tensor<i32>, \
dbool = dense<[true, false]> : vector<2xi1>, du8 = dense<[0, 255]> : tensor<2xu8>, dmem = dense<[1, 2]> : \
memref<2xi64>, dint = dense<[1, 2.5]> : tensor<2xf32>, dempty = dense<[]> : tensor<0xf32>, ddyn = dense<[1]> : \
tensor<?xi64>, d64 = dense<[-inf, 0.1]> : tensor<2xf64>, dbig = dense<[1e+300]> : tensor<1xf32>} : vector<i1>
    t.two_regions () {
    } (%i: index) {
      %2, %3 = t.op %i : index, memref<*xi8>
    }
    return %0
  }
}
"""


def test_types_attributes_and_names_map_to_mlir_and_back() -> None:
    text = print_mlir(parse_module(ZOO, "zoo.eir"))
    for want in ('"ember.func"()', '"ember.return"(%0)', "%$1a: tensor<4xui8>", "%$$x: !slc.stream<vector<8xf32>>",
                 "!ember.vector<?x4xf32>", "-> tensor<*xf32>", "-> vector<i1>",
                 "big = 123456789012345678901234567890 : i98",
                 "low = -9223372036854775808 : i64", "small = 1.0e-05 : f64", "inf = 0x7FF0000000000000 : f64",
                 "ninf = 0xFFF0000000000000 : f64", "nan = 0x7FF8000000000000 : f64", "z = -0.0 : f64", "b = true",
                 "{sym_name = \"main\", results = [tensor<*xf32>]}", "l = [[1 : i64, 2 : i64], []]",
                 'ember.note = "q\\"uote\\\\ \\C3\\A9\\0A\\E2\\98\\83"', "ember.opset = 18 : i64",
                 "dense<[[1.5, 0x7FC00000], [0x7F800000, 0xFF800000]]> : tensor<2x2xf32>",
                 "dense<[0.5, 0x7C00]> : tensor<2xf16>", "dense<0x7FC0> : tensor<3xbf16>",
                 "dense<7> : tensor<2x3xi64>", "dense<3> : tensor<i32>", "dense<[true, false]> : vector<2xi1>",
                 "dense<[0, 255]> : tensor<2xui8>", "#ember.dense<[1, 2] : memref<2xi64>>",
                 "#ember.dense<[1, 2.5] : tensor<2xf32>>", "dense<[]> : tensor<0xf32>",
                 "#ember.dense<[1] : tensor<?xi64>>", "#ember.dense<[1e+300] : tensor<1xf32>>",
                 "dense<[0xFFF0000000000000, 0.1]> : tensor<2xf64>",
                 '"t.two_regions"() ({\n    ^bb0:\n    }, {\n    ^bb0(%i: index):',
                 ": (index) -> (index, memref<*xi8>)"):
        assert want in text, want
    assert print_module(parse_mlir(text, "zoo.mlir")) == print_module(parse_module(ZOO, "zoo.eir"))


def test_an_empty_region_keeps_its_block() -> None:
    """MLIR's builtin.module needs its one block even when empty, and `({ })` would be a region of none."""
    text = print_mlir(parse_module("module {\n}\n", "empty.eir"))
    assert text == '"builtin.module"() ({\n^bb0:\n}) : () -> ()\n'
    assert print_module(parse_mlir(text, "empty.mlir")) == "module {\n}\n"


# What MLIR's own printer makes of an emitted module (mlir-opt --allow-unregistered-dialect
# --mlir-print-op-generic): values renumbered, attributes sorted, long dense values in hexadecimal, packed results,
# locations; Ember reads it as the same module up to those names.
REPRINTED = """\
#loc = loc(unknown)
"builtin.module"() ({
  "ember.func"() ({
  ^bb0(%arg0: tensor<2xf32> loc("m.mlir":3:3)):
    %0:2 = "t.pair"(%arg0) {a = 1.000000e+00 : f64, d = dense<"0x0000803F00000040"> : tensor<2xf32>, \
e = dense<"0x07000000"> : tensor<4xi32>, k = 5 : i64, t = true} : (tensor<2xf32>) -> (f32, f32) loc(#loc)
    "ember.return"(%0#1) : (f32) -> () loc("m.mlir":5:5)
  }) {results = [f32], sym_name = "main"} : () -> ()
}) {ember.opset = 18 : i64} : () -> ()
"""


def test_what_mlirs_printer_writes_reads_back() -> None:
    module = parse_mlir(REPRINTED, "re.mlir")
    assert print_module(module) == (
        "module attributes {opset = 18} {\n  func @main(%arg0: tensor<2xf32>) -> (f32) {\n"
        "    %0, %1 = t.pair %arg0 {a = 1.0, d = dense<[1.0, 2.0]> : tensor<2xf32>, e = dense<[7]> : tensor<4xi32>, "
        "k = 5, t = true} : f32, f32\n    return %1\n  }\n}\n")


def test_the_real_parsers_names_and_order_read_back_as_the_same_module(xdsl: Any) -> None:
    """xdsl (like mlir-opt) renames values: what it re-prints reads back equal but for names.  The last level of
    each pipeline."""
    last = {stage.split(":")[0]: stage for stage in demo_levels()}
    for stage in last.values():
        text = demo_levels()[stage]
        module = xdsl.parse(print_mlir(parse_module(text, stage)))
        out = io.StringIO()
        xdsl.Printer(stream=out, print_generic_format=True).print_op(module)
        assert renumbered(parse_mlir(out.getvalue(), stage)) == renumbered(parse_module(text, stage)), stage


def renumbered(m: Op) -> str:
    """The module's text with every value renamed in order, so that two modules that differ only in names agree."""
    for op in m.walk():
        for v in [*op.results, *(a for b in op.regions for a in b.args)]:
            v.name = None
    return print_module(m)


# ---- the real MLIR parser: xdsl, with Ember's dialects unregistered

class Xdsl:
    """xdsl's parser and printer, set up for unregistered dialects."""

    def __init__(self) -> None:
        from xdsl.context import Context
        from xdsl.dialects.builtin import Builtin
        from xdsl.parser import Parser
        from xdsl.printer import Printer

        self.ctx = Context(allow_unregistered=True)
        self.ctx.load_dialect(Builtin)
        self.Parser, self.Printer = Parser, Printer

    def parse(self, text: str) -> Any:
        module = self.Parser(self.ctx, text, "emitted.mlir").parse_module()
        module.verify()
        return module

    def type(self, t: Any) -> str:
        out = io.StringIO()
        self.Printer(stream=out).print_attribute(t)
        return out.getvalue()


@pytest.fixture(scope="module")
def xdsl() -> Xdsl:
    pytest.importorskip("xdsl")
    return Xdsl()


def ember_tree(op: Op) -> tuple[Any, ...]:
    """An op as MLIR names it, its operand count, result types, and per region its block's argument types and
    ops, recursively: what must agree with the real parser's view."""
    name = MODULE if op.name == "module" else op_name(op.name)
    regions = tuple(((tuple(mlir_type(a.type) for a in b.args), tuple(ember_tree(o) for o in b.ops))
                     if b.args or b.ops else None) for b in op.regions)
    return name, len(op.operands), tuple(mlir_type(r.type) for r in op.results), regions


def xdsl_tree(x: Xdsl, op: Any) -> tuple[Any, ...]:
    name = op.attributes["op_name__"].data if "op_name__" in op.attributes else op.name
    regions = []
    for r in op.regions:
        blocks = list(r.blocks)
        assert len(blocks) <= 1
        regions.append((tuple(x.type(a.type) for a in blocks[0].args), tuple(xdsl_tree(x, o) for o in blocks[0].ops))
                       if blocks and (blocks[0].args or blocks[0].ops) else None)
    return name, len(op.operands), tuple(x.type(r.type) for r in op.results), tuple(regions)


def test_the_real_parser_reads_every_level_of_the_demo(xdsl: Xdsl) -> None:
    for stage, text in distinct_levels().items():
        module = parse_module(text, stage)
        parsed = xdsl.parse(print_mlir(module))
        assert sum(1 for _ in parsed.walk()) == sum(1 for _ in module.walk()), stage
        assert xdsl_tree(xdsl, parsed) == ember_tree(module), stage
        assert sorted(parsed.attributes) == sorted(f"ember.{k}" for k in module.attrs), stage


def test_the_real_parser_reads_every_type_and_attribute_form(xdsl: Xdsl) -> None:
    module = parse_module(ZOO, "zoo.eir")
    parsed = xdsl.parse(print_mlir(module))
    assert xdsl_tree(xdsl, parsed) == ember_tree(module)
    first, second = (o for o in parsed.walk() if "big" in o.attributes or "d64" in o.attributes)
    assert first.attributes["big"].value.data == 123456789012345678901234567890
    op = second
    assert op.attributes["d64"].get_values()[1] == 0.1
    # xdsl 0.75 reads a float's hexadecimal bits in a dense<...> as an integer (MLIR's own parser reads -inf here)
    assert op.attributes["d64"].get_values()[0] == float(0xFFF0000000000000)


# ---- the commands

def test_emit_mlir_then_import_gives_the_same_level(run: Any, tmp_path: Path) -> None:
    eir, mlir = tmp_path / "d.eir", tmp_path / "d.mlir"
    src = str(LEVELS / "dlrm.dynamo.emb.eir")
    pipeline = "--pass=lower-emb,decouple,vectorize,bufferize,to-dlc"
    assert run("opt", pipeline, src, "-o", str(eir)).returncode == 0
    r = run("opt", pipeline, "--emit=mlir", src, "-o", str(mlir))
    assert r.returncode == 0, r.stderr
    assert mlir.read_text().startswith('"builtin.module"() ({\n')
    r = run("import", str(mlir), "-o", str(tmp_path / "back.eir"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "back.eir").read_text() == eir.read_text()


def test_emit_mlir_is_refused_for_a_pipeline_ending_in_codegen(run: Any, tmp_path: Path) -> None:
    r = run("opt", "-O0", "--emit=mlir", str(LEVELS / "dlrm.dynamo.emb.eir"), "-o", str(tmp_path / "x.mlir"))
    assert r.returncode == 1 and not (tmp_path / "x.mlir").exists()
    assert r.stderr.decode().splitlines() == [
        "ember-opt: error: --emit=mlir writes an Ember level, but this pipeline ends in codegen, which writes .dae: "
        "give a --pass pipeline without codegen (--list-passes shows each -O level's)"]


def test_help_documents_emit(run: Any) -> None:
    out = run("opt", "--help").stdout.decode()
    assert "--emit [eir|mlir]" in out and "MLIR's generic" in out


BAD = [
    ("module {\n}\n", "bad.mlir:1:1: error: 'module' is MLIR's custom syntax: Ember reads MLIR's generic operation "
                      'syntax ("dialect.op"(%a) {k = v} : (T) -> T), as ember-opt --emit=mlir and mlir-opt '
                      "--mlir-print-op-generic write it"),
    ('"builtin.module"() ({\n  %0 = arith.constant 0 : index\n}) : () -> ()\n',
     "bad.mlir:2:8: error: 'arith.constant' is MLIR's custom syntax"),
    ('"builtin.module"() ({\n  "func.func"() ({\n  }) {sym_name = "f"} : () -> ()\n}) : () -> ()\n',
     "bad.mlir:2:3: error: 'func.func' is not an Ember op"),
    ('"builtin.module"() ({\n  %0 = "x.y"() : () -> i7\n}) : () -> ()\n',
     "bad.mlir:2:24: error: type 'i7' has no Ember equivalent"),
    ('"builtin.module"() ({\n  %0 = "x.y"() {a} : () -> i64\n}) : () -> ()\n',
     "bad.mlir:2:17: error: attribute 'a' has no value (a unit attribute)"),
    ('"builtin.module"() ({\n  "x.y"() ({\n  ^bb0:\n  ^bb1:\n  }) : () -> ()\n}) : () -> ()\n',
     "bad.mlir:4:3: error: 'x.y' has a region of more than one block"),
    ('"builtin.module"() ({\n  "x.y"()[^bb1] : () -> ()\n}) : () -> ()\n',
     "bad.mlir:2:3: error: 'x.y' has successors"),
    ('"builtin.module"() ({\n}) {opset = 3 : i64} : () -> ()\n',
     "bad.mlir:2:5: error: 'builtin.module' has attribute 'opset': Ember's module attributes are named ember.NAME"),
    ('"builtin.module"() ({\n  "x.y"() {llvm.c = 1 : i64} : () -> ()\n}) : () -> ()\n',
     "bad.mlir:2:12: error: 'x.y' has attribute 'llvm.c': Ember's attributes are named NAME"),
    ('"builtin.module"() ({\n  "x.y"() {t = [f32]} : () -> ()\n}) : () -> ()\n',
     "bad.mlir:2:12: error: attribute 't' holds a type (f32), which of Ember's attributes only a func's results do"),
    ('"builtin.module"() ({\n  "x.y"() {d = {a = 1 : i64}} : () -> ()\n}) : () -> ()\n',
     "bad.mlir:2:12: error: attribute 'd' holds a dictionary"),
    ('"builtin.module"() ({\n  "ember.func"() ({\n  ^bb0:\n  }) {sym_name = "no good", results = []} : () -> ()\n'
     '}) : () -> ()\n', "bad.mlir:2:3: error: 'func' sym_name must be a name"),
    ('"builtin.module"() ({\n  "x.y"() {s = dense<[1, 2]> : tensor<3xi64>} : () -> ()\n}) : () -> ()\n',
     "bad.mlir:2:32: error: dense<...> has 2 values for tensor<3xi64> (3 elements)"),
    ('"builtin.module"() ({\n  "ember.return"(%x) : (i64) -> ()\n}) : () -> ()\n',
     "bad.mlir:2:18: error: use of undefined value %x"),
    ('"builtin.module"() ({\n  %a = "ember.param"() {name = "w"} : () -> tensor<2xf32>\n'
     '  "ember.return"(%a) : (tensor<3xf32>) -> ()\n}) : () -> ()\n',
     "bad.mlir:3:18: error: %a is tensor<2xf32>, but 'ember.return' takes it as tensor<3xf32>"),
    ('"builtin.module"() ({\n  "x.y"() {s = "\\q"} : () -> ()\n}) : () -> ()\n',
     "bad.mlir:2:16: error: bad escape '\\q' in a string literal"),
    ('"builtin.module"(', "bad.mlir:1:17: error: unexpected end of input"),
]


@pytest.mark.parametrize("text, error", BAD, ids=[e.split("error: ")[1][:40] for _, e in BAD])
def test_bad_mlir_is_refused_in_one_line_at_its_position(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "bad.mlir"
    path.write_text(text)
    with pytest.raises(EmberError) as e:
        import_mlir(str(path), str(tmp_path / "out.eir"))
    message = e.value.render().replace(str(tmp_path) + "/", "")
    assert message.splitlines()[0].startswith(error), message


def test_import_of_bad_mlir_exits_1_without_a_traceback(run: Any, tmp_path: Path) -> None:
    path = tmp_path / "bad.mlir"
    path.write_text('"builtin.module"() ({\n  "scf.for"() : () -> ()\n}) : () -> ()\n')
    r = run("import", str(path), "-o", str(tmp_path / "out.eir"))
    assert r.returncode == 1 and b"Traceback" not in r.stderr and not (tmp_path / "out.eir").exists()
    assert r.stderr.decode().startswith(f"ember-import: {path}:2:3: error: 'scf.for' is not an Ember op")
