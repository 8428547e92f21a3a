"""The IR's contracts at their edges: every parser and verifier message with its position, op definitions
made at run time, value naming, dense attributes, the rewrite walker.  Found missing by mutation testing
(docs/testing.md): each test here failed on at least one mutant of ember/ir that the other tests let pass."""

from __future__ import annotations

import numpy as np
import pytest

import ember.dialects  # noqa: F401
from ember.backend.codegen import codegen
from ember.ir.core import REGISTRY, Block, Op, Value, define, new_op, unique_name, verify
from ember.ir.diagnostics import EmberError
from ember.ir.parser import parse_module
from ember.ir.printer import DenseAttr, print_module
from ember.ir.rewrite import RewritePattern, apply_patterns, free_var
from ember.ir.types import F32, INDEX, ScalarType, memref, tensor


def error_of(text: str) -> str:
    with pytest.raises(EmberError) as e:
        verify(parse_module(text, "s.eir"))
    return str(e.value)


def func(body: str, results: str = "") -> str:
    return f"module {{\n  func @main() -> ({results}) {{\n{body}  }}\n}}\n"


@pytest.mark.parametrize(("text", "want"), [
    ("", "s.eir:1:1: error: unexpected end of input (expected MODULE)"),
    ("module {\n}\n}", "s.eir:3:1: error: unexpected '}' (expected end of input)\n}\n^"),
    ("module {\n}\n$", "s.eir:3:1: error: unexpected character '$'\n$\n^"),
    (func("    return %x\n"), "s.eir:3:12: error: use of undefined value %x\n    return %x\n           ^"),
    (func("    %a, %b = loop.const {value = 1} : index\n    return\n"),
     "s.eir:3:14: error: 'loop.const' names 2 results but gives 1 types\n    %a, %b = loop.const {value = 1} : index"
     "\n             ^"),
    (func("", "f32").replace("{\n  }", "{\n    return\n  }"),
     "s.eir:3:5: error: 'return' returns () but the function declares (f32)"),
    ("module {\n  func @main() -> () {\n  }\n}\n", "s.eir:2:8: error: 'func' must end with 'return'"),
    # found by ember-fuzz: a byte flipped inside a string ended in "internal error: JSONDecodeError"
    ('module attributes {w = "a\tb"} {\n}\n',
     's.eir:1:24: error: bad string literal: invalid control character\nmodule attributes {w = "a\tb"} {\n'
     + " " * 23 + "^"),
    ('module attributes {w = "a\\qb"} {\n}\n',
     's.eir:1:24: error: bad string literal: invalid \\escape\nmodule attributes {w = "a\\qb"} {\n' + " " * 23 + "^"),
    ("module attributes {opset = dense<[1]> : tensor<1xi64>} {\n}\n",
     "s.eir:1:35: error: module attribute 'opset' must be an ONNX opset version (an integer from 0 to 2^63 - 1), "
     "got a dense attribute\nmodule attributes {opset = dense<[1]> : tensor<1xi64>} {\n" + " " * 34 + "^"),
    (func("    %a = loop.addi : index\n    return\n"), "s.eir:3:10: error: 'loop.addi' expects 2 operands, got 0"),
])
def test_parse_and_verify_errors_are_positioned_and_exact(text: str, want: str) -> None:
    got = error_of(text)
    assert got == want


def test_verify_error_says_which_value_is_used_before_its_definition() -> None:
    """Passes move ops; the verifier catches a use placed above its definition and names the value."""
    m = parse_module(func("    %c = loop.const {value = 1} : index\n    %d = loop.addi %c, %c : index\n    return\n"),
                     "s.eir")
    body = m.body.ops[0].body.ops
    body[0], body[1] = body[1], body[0]
    with pytest.raises(EmberError, match=r"^s.eir:4:10: error: 'loop.addi' uses value %c before it is defined$"):
        verify(m)
    body[1].results[0].name = None
    with pytest.raises(EmberError, match=r"uses value %\? before it is defined$"):
        verify(m)


def test_an_op_defined_at_run_time_is_verified_by_its_definition() -> None:
    """`define` is how a dialect registers an op (at import for Ember's own; a user's experiment may add
    one later): its counts, attributes, verifier and doc all take effect."""
    seen: list[str] = []

    @define("test.pair", operands=(1, 2), results=1, attrs=("k",))
    def _pair(op: Op) -> None:
        """Adds its operands."""
        seen.append(op.name)

    try:
        d = REGISTRY["test.pair"]
        assert (d.name, d.operands, d.results, d.attrs, d.doc) == ("test.pair", (1, 2), (1, 1), ("k",),
                                                                  "Adds its operands.")
        x = Value(INDEX)
        root = Op("func", attrs={"sym_name": "f", "results": []}, regions=[Block([x])])
        op = root.body.add(new_op("test.pair", [x], [INDEX], {"k": 1}))
        root.body.add(new_op("return"))
        verify(root)
        assert seen == ["test.pair"]
        op.operands = [x, x, x]
        with pytest.raises(EmberError, match=r"'test\.pair' expects 1\.\.2 operands, got 3"):
            verify(root)
        op.operands, op.results = [x], []
        with pytest.raises(EmberError, match=r"'test\.pair' expects 1 results, got 0"):
            verify(root)
        op.results = [Value(INDEX)]
        del op.attrs["k"]
        with pytest.raises(EmberError, match=r"'test\.pair' requires attribute 'k'$"):
            verify(root)
        op.attrs["k"], op.regions = 1, [Block([])]
        with pytest.raises(EmberError, match=r"'test\.pair' expects 0 regions, got 1$"):
            verify(root)
        op.regions = []
        define("test.pair", operands=(1, None), results=1, attrs=("k",))(_pair)
        op.operands = []
        with pytest.raises(EmberError, match=r"'test\.pair' expects 1\.\. operands, got 0$"):
            verify(root)
        op.operands = [x] * 5
        verify(root)
        define("test.pair", doc="Explicit.")(_pair)
        assert REGISTRY["test.pair"].doc == "Explicit." and REGISTRY["test.pair"].operands == (0, 0)
    finally:
        REGISTRY.pop("test.pair", None)


def test_unique_names_follow_the_grammar() -> None:
    used: set[str] = set()
    assert [unique_name(h, used) for h in ("", "a b", "a_b", "/x:0", "")] == ["v", "a_b", "a_b_1", "_x_0", "v_1"]


def test_block_arguments_are_owned_by_their_block() -> None:
    """Passes go from a loop's index to its loop through the argument's owner (prefetch-outputs, cost)."""
    a = Value(INDEX)
    b = Block([a])
    assert a.owner is b
    assert repr(a) == "%?: index" and repr(Value(F32, "x")) == "%x: f32"


def test_printer_numbers_unnamed_values_from_zero_and_marks_values_it_never_bound() -> None:
    root = Op("module", regions=[Block()])
    f = root.body.add(new_op("func", attrs={"sym_name": "main", "results": []}, regions=[Block()]))
    c = f.body.add(new_op("loop.const", [], [INDEX], {"value": 1}))
    d = f.body.add(new_op("loop.addi", [c.result, c.result], [INDEX]))
    f.body.add(new_op("return", [Value(INDEX)]))  # dangling: what a broken pass leaves behind
    text = print_module(root)
    assert "%0 = loop.const {value = 1} : index" in text
    assert "%1 = loop.addi %0, %0 : index" in text and d.result.name == "1"
    assert "return %?" in text


def test_dense_attributes_keep_values_shape_and_type() -> None:
    a = np.arange(6, dtype=np.int64).reshape(2, 3) - 2
    d = DenseAttr.from_array(a, tensor((2, 3), "i64"))
    assert d.values == [-2, -1, 0, 1, 2, 3] and d.type == tensor((2, 3), "i64")
    back = d.array()
    assert back.dtype == np.int64 and back.shape == (2, 3) and (back == a).all()
    f = DenseAttr.from_array(np.array([0.5, 1.5], np.float32), tensor((2,), "f32")).array()
    assert f.dtype == np.float32 and f.tolist() == [0.5, 1.5]


def test_shaped_types_print_their_kind_and_accept_scalar_names() -> None:
    assert str(memref((4, None), "f32")) == "memref<4x?xf32>" and memref((4,), "f32") == memref((4,), F32)
    assert memref((4,), "f32").elem == ScalarType("f32")
    with pytest.raises(ValueError, match=r"^unknown scalar type 'f31'$"):
        ScalarType("f31")


def test_free_var_is_one_past_the_highest_core_variable() -> None:
    m = parse_module(func("    return\n"), "s.eir")
    assert free_var(m) == 0
    f = m.body.ops[0]
    f.body.ops.insert(0, new_op("loop.getvar", [], [INDEX], {"var": 4}))
    assert free_var(m) == 5


def test_apply_patterns_visits_the_root_and_skips_what_an_earlier_rewrite_removed() -> None:
    m = parse_module(func("    %a = loop.const {value = 1} : index\n    %b = loop.const {value = 2} : index\n"
                          "    return\n"), "s.eir")
    seen: list[str] = []

    class DropNext(RewritePattern):
        def match_and_rewrite(self, op: Op) -> bool:
            seen.append(op.name if op.name != "loop.const" else f"const {op.attrs['value']}")
            if op.name == "loop.const" and op.attrs["value"] == 1:
                block = op.parent
                assert block is not None
                block.ops.remove(block.ops[block.ops.index(op) + 1])  # %b, not yet visited
                return True
            return False

    assert apply_patterns(m, [DropNext()], ValueError, lambda op, e: None) == 1
    assert seen == ["module", "func", "const 1", "return"]


def test_codegen_of_an_empty_module_points_at_the_module() -> None:
    with pytest.raises(EmberError, match=r"^s.eir:1:1: error: codegen: the module has no function$"):
        codegen(parse_module("module {\n}\n", "s.eir"))


def test_new_ops_and_their_clones_keep_their_source_position() -> None:
    """Remarks and errors point at the op's line: new_op must store `loc`, and clone (unroll, hoist) copy it into
    every op it copies, nested ones included."""
    from ember.ir.diagnostics import Loc
    from ember.ir.rewrite import clone

    inner = new_op("loop.const", [], [INDEX], {"value": 1}, loc=Loc("m.eir", 3, 5))
    outer = new_op("loop.for", [], [], {}, [Block([], [inner])], loc=Loc("m.eir", 2, 1))
    assert inner.loc == Loc("m.eir", 3, 5)
    copy = clone(outer, {})
    assert copy.loc == Loc("m.eir", 2, 1) and copy.regions[0].ops[0].loc == Loc("m.eir", 3, 5)


def test_apply_patterns_counts_every_rewrite() -> None:
    class Rename(RewritePattern):
        def match_and_rewrite(self, op: Op) -> bool:
            if op.name != "loop.const" or op.attrs.get("done"):
                return False
            op.attrs["done"] = True
            return True

    body = Block([])
    for k in range(3):
        body.add(new_op("loop.const", [], [INDEX], {"value": k}))
    root = new_op("module", regions=[body])
    assert apply_patterns(root, [Rename()], ValueError, lambda op, e: None) == 3
    assert apply_patterns(root, [Rename()], ValueError, lambda op, e: None) == 0


def test_a_module_parsed_without_a_file_name_is_called_input() -> None:
    with pytest.raises(EmberError, match=r"^<input>:1:1: error: "):
        parse_module("}")


def test_a_builder_places_ops_at_its_position_unless_they_carry_their_own() -> None:
    """Passes build ops with a Builder placed at the op they replace: remarks on a new op point there, but an
    op moved or cloned with its own position keeps it."""
    from ember.ir.builder import Builder
    from ember.ir.diagnostics import Loc

    body = Block([])
    b = Builder(body, loc=Loc("m.eir", 7, 3))
    fresh = b.insert(new_op("loop.const", [], [INDEX], {"value": 1}))
    moved = b.insert(new_op("loop.const", [], [INDEX], {"value": 2}, loc=Loc("m.eir", 2, 9)))
    assert fresh.loc == Loc("m.eir", 7, 3) and moved.loc == Loc("m.eir", 2, 9)
    assert body.ops == [fresh, moved] and fresh.parent is body


def test_apply_patterns_hands_each_decline_to_the_remark() -> None:
    class Decline(RewritePattern):
        def match_and_rewrite(self, op: Op) -> bool:
            if op.name == "loop.const":
                raise ValueError(f"const {op.attrs['value']} declined")
            return False

    body = Block([])
    for k in range(2):
        body.add(new_op("loop.const", [], [INDEX], {"value": k}))
    root = new_op("module", regions=[body])
    said: list[tuple[Op, str]] = []
    assert apply_patterns(root, [Decline()], ValueError, lambda op, e: said.append((op, str(e)))) == 0
    assert said == [(body.ops[0], "const 0 declined"), (body.ops[1], "const 1 declined")]


def test_a_syntax_error_lists_up_to_six_expected_tokens() -> None:
    """Six alternatives still help the reader; past that the list is noise and is left out."""
    six = error_of("module {\n  func @main(%x: memref<4xi64>:")
    assert six.splitlines()[0] == ("s.eir:2:31: error: unexpected ':' (expected COMMA, LPAR, MORETHAN, RBRACE, "
                                   "RPAR, RSQB)")
    many = error_of(func("    %a = loop.const {value = }"))
    assert many.splitlines()[0] == "s.eir:3:30: error: unexpected '}'"


def test_a_dense_attribute_of_one_value_holds_a_list() -> None:
    m = parse_module(func("    %a = loop.const {value = dense<5> : tensor<1xi64>} : index\n    return\n"), "s.eir")
    d = m.body.ops[0].body.ops[0].attrs["value"]
    assert d.values == [5] and d.array().tolist() == [5]


@pytest.mark.parametrize("depth", [5_000, 200_000])
def test_text_nested_too_deep_is_refused_at_its_bracket(depth: int) -> None:
    """An attribute (or a loop nest) nested thousands deep once ran the parser out of Python's recursion limit, an
    internal error; it is refused where it passes MAX_NESTING, with its position (issue 35).  Up to it, it parses."""
    from ember.ir.parser import MAX_NESTING

    def module(n: int) -> str:
        return ("module attributes {deep = " + "[" * n + "1" + "]" * n + "} {\n"
                "  func @main() -> () {\n    return\n  }\n}\n")

    with pytest.raises(EmberError) as e:
        parse_module(module(depth), "deep.eir")
    assert e.value.message == f"nested more than {MAX_NESTING} deep"
    assert str(e.value.where) == f"deep.eir:1:{len('module attributes {deep = ') + MAX_NESTING}"
    parse_module(module(MAX_NESTING - 1), "ok.eir")
    parse_module('module attributes {s = "' + "[" * 500 + '"} {\n  func @main() -> () {\n    return\n  }\n}\n', "s.eir")


def _module_with(attr: str) -> str:
    return "module attributes {a = " + attr + "} {\n  func @main() -> () {\n    return\n  }\n}\n"


def test_a_list_past_the_item_limit_is_refused_at_its_item(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 20-million-item list took the parser 114 s and 4.3 GB before an empty error (issue 35); a list past
    EMBER_TEXT_LIST_ITEMS is refused at the first item too many, on whatever lines its items are."""
    monkeypatch.setenv("EMBER_TEXT_LIST_ITEMS", "50")
    parse_module(_module_with("[" + ", ".join(["7"] * 50) + "]"), "ok.eir")
    with pytest.raises(EmberError) as e:
        parse_module(_module_with("[" + ",\n ".join(["7"] * 51) + "]"), "long.eir")
    assert e.value.message == "a list of more than 50 items (EMBER_TEXT_LIST_ITEMS raises the limit)"
    assert str(e.value.where) == "long.eir:50:3"  # the comma after the 50th item, which would begin the 51st
    parse_module(_module_with('"' + ", " * 100 + '"'), "string.eir")  # commas in a string are not items


def test_a_line_past_the_limit_is_refused_with_a_short_snippet(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 200 MB string attribute took 3.7 GB (issue 35); a line past EMBER_TEXT_LINE_CHARS, which bounds a string,
    is refused where it passes the limit, and the caret snippet shows a window of the line, not all of it."""
    from ember.ir.diagnostics import SNIPPET

    monkeypatch.setenv("EMBER_TEXT_LINE_CHARS", "5000")
    prefix = "module attributes {a = "
    parse_module(_module_with('"' + "x" * (5000 - len(prefix + '""} {')) + '"'), "ok.eir")  # 5,000 exactly
    with pytest.raises(EmberError) as e:
        parse_module(_module_with('"' + "x" * 6000 + '"'), "long.eir")
    assert e.value.message == "line longer than 5,000 characters (EMBER_TEXT_LINE_CHARS raises the limit)"
    assert str(e.value.where) == "long.eir:1:5001"
    head, line, caret = e.value.render().splitlines()
    assert len(line) <= SNIPPET + 6 and line.startswith("...x") and line.endswith("x...")
    assert line[len(caret) - 1] == "x" and caret.strip() == "^"


def test_dae_text_has_the_same_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The .dae parser scans its text the same way (';' comments skipped): deep nesting and long lists."""
    from ember.backend.dae_text import parse_dae

    def program(operand: str) -> str:
        return f".dae 2\n.code\n  halt {operand} ; [ not a bracket\n.end\n"

    with pytest.raises(EmberError, match="nested more than 100 deep") as e:
        parse_dae(program("{a = " + "[" * 5000 + "]" * 5000 + "}"), "deep.dae")
    assert str(e.value.where) == "deep.dae:3:112"  # the 101st bracket, counting the brace
    monkeypatch.setenv("EMBER_TEXT_LIST_ITEMS", "3")
    with pytest.raises(EmberError, match="a list of more than 3 items"):
        parse_dae(program("{a = [1, 2, 3, 4]}"), "long.dae")
    with pytest.raises(EmberError, match="'halt' expects no operands"):  # within the limits: the usual check
        parse_dae(program("{a = [1, 2, 3]}"), "ok.dae")


@pytest.mark.parametrize("opener", ["dense<", "stream<"])
def test_nesting_through_angle_brackets_is_refused_too(opener: str) -> None:
    """`dense<dense<...>>` and `stream<stream<...>>` recurse in the parser as brackets do: a RecursionError, an
    internal error, until they were counted (a review of issue 35)."""
    inner = "dense<" * 5000 + "1" + ">" * 5000 + " : tensor<1xi64>" if opener == "dense<" else "1"
    text = _module_with(inner) if opener == "dense<" else (
        "module {\n  func @main(%a: " + "stream<" * 5000 + "i64" + ">" * 5000 + ") -> () {\n    return\n  }\n}\n")
    with pytest.raises(EmberError, match="nested more than 100 deep"):
        parse_module(text, "deep.eir")


def test_an_unclosed_string_ends_at_its_line() -> None:
    """A line of unclosed strings made the scan retry at every quote to the end of the line: quadratic, an hour
    for a 1 MiB line.  Now the scan is linear and the parser reports the string."""
    with pytest.raises(EmberError):
        parse_module("module attributes {s = " + '"\\' * 400_000 + "} {\n}\n", "q.eir")


def test_a_region_counts_its_items_a_line_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ops of a region are one a line, so their operands' commas are not one long list; all the items of a text
    together are capped by EMBER_TEXT_ITEMS."""
    ops = "".join(f"    %q{i} = loop.addi %a, %a : index\n" for i in range(60))
    text = "module {\n  func @main(%a: index) -> () {\n" + ops + "    return\n  }\n}\n"
    monkeypatch.setenv("EMBER_TEXT_LIST_ITEMS", "10")
    parse_module(text, "many.eir")
    monkeypatch.setenv("EMBER_TEXT_ITEMS", "50")
    with pytest.raises(EmberError) as e:
        parse_module(text, "many.eir")
    assert e.value.message == "more than 50 list items in all (EMBER_TEXT_ITEMS raises the limit)"
