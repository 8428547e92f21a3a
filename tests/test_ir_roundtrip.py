"""Print -> parse -> print is the identity, for random IR objects and for every level's samples."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember.dialects  # noqa: F401
from ember.ir.core import Block, Op, Value, verify
from ember.ir.diagnostics import EmberError
from ember.ir.parser import parse_module
from ember.ir.printer import DenseAttr, print_module
from ember.ir.types import SCALARS, ScalarType, ShapedType, StreamType, Type

LEVELS = Path(__file__).resolve().parent.parent / "samples" / "levels"

scalars = st.sampled_from(SCALARS).map(ScalarType)
dims = st.one_of(st.none(), st.integers(0, 4096))
shaped = st.builds(ShapedType, st.sampled_from(["tensor", "memref", "vector"]),
                   st.one_of(st.none(), st.lists(dims, max_size=4).map(tuple)), scalars)
types: st.SearchStrategy[Type] = st.one_of(scalars, shaped, st.builds(StreamType, st.one_of(scalars, shaped)))
names = st.builds(lambda a, b: a + b, st.sampled_from("abcxyz_"), st.text("abcdefxyz019_", max_size=5))
op_names = st.builds(lambda a, b: f"{a}.{b}", names, names)
finite = st.floats(allow_nan=False, width=64)
leaf_attr = st.one_of(st.integers(-(2**63), 2**63 - 1), st.floats(width=64), st.text(max_size=12), st.booleans())
attr_values = st.recursive(leaf_attr, lambda inner: st.lists(inner, max_size=4), max_leaves=8)
dense = st.lists(finite, min_size=1, max_size=4).map(
    lambda xs: DenseAttr(xs, ShapedType("tensor", (len(xs),), ScalarType("f64"))))
attrs = st.dictionaries(names, st.one_of(attr_values, dense), max_size=4)


@st.composite
def blocks(draw: st.DrawFn, visible: list[Value], depth: int) -> Block:
    args = [Value(draw(types)) for _ in range(draw(st.integers(0, 2)))]
    b = Block(args)
    scope = visible + args
    for _ in range(draw(st.integers(0, 3))):
        operands = draw(st.lists(st.sampled_from(scope), max_size=3)) if scope else []
        regions = [draw(blocks(scope, depth - 1)) for _ in range(draw(st.integers(0, 2 if depth > 0 else 0)))]
        op = Op(draw(op_names), operands, [Value(draw(types)) for _ in range(draw(st.integers(0, 2)))],
                draw(attrs), regions)
        b.add(op)
        scope = scope + op.results
    return b


@st.composite
def modules(draw: st.DrawFn) -> Op:
    funcs = []
    for _ in range(draw(st.integers(1, 2))):
        body = draw(blocks([], 1))
        ret = [draw(types) for _ in range(draw(st.integers(0, 2)))]
        f = Op("func", attrs={"sym_name": draw(names), "results": ret}, regions=[body])
        funcs.append(f)
    return Op("module", attrs=draw(attrs), regions=[Block(ops=funcs)])


def same_attr(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_attr(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def same(a: Op, b: Op) -> bool:
    """Structural equality: names, types, attributes, regions and which value each operand is."""
    ids_a: dict[int, int] = {}
    ids_b: dict[int, int] = {}

    def number(v: Value, ids: dict[int, int]) -> int:
        return ids.setdefault(id(v), len(ids))

    def walk(x: Op, y: Op) -> bool:
        if x.name != y.name or len(x.attrs) != len(y.attrs) or len(x.regions) != len(y.regions):
            return False
        if any(k not in y.attrs or not same_attr(v, y.attrs[k]) for k, v in x.attrs.items()):
            return False
        if [number(v, ids_a) for v in x.operands] != [number(v, ids_b) for v in y.operands]:
            return False
        if [str(r.type) for r in x.results] != [str(r.type) for r in y.results]:
            return False
        for r, s in zip(x.results, y.results):
            number(r, ids_a), number(s, ids_b)
        for bx, by in zip(x.regions, y.regions):
            if [str(v.type) for v in bx.args] != [str(v.type) for v in by.args] or len(bx.ops) != len(by.ops):
                return False
            for v, w in zip(bx.args, by.args):
                number(v, ids_a), number(w, ids_b)
            if not all(walk(p, q) for p, q in zip(bx.ops, by.ops)):
                return False
        return True

    return walk(a, b)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_random_ir_round_trips(m: Op) -> None:
    text = print_module(m)
    parsed = parse_module(text, "random.eir")
    assert same(m, parsed)
    assert print_module(parsed) == text


@pytest.mark.parametrize("path", sorted(LEVELS.glob("*.eir")), ids=lambda p: p.name)
def test_level_samples_print_back_identically(path: Path) -> None:
    text = path.read_text()
    m = parse_module(text, str(path))
    verify(m)
    assert print_module(m) == text


def test_level_samples_cover_every_level() -> None:
    text = "".join(p.read_text() for p in LEVELS.glob("*.eir"))
    for marker in ("emb.bag", "emb.gather", "loop.for", "slc.for", "slc.callback", "dlc.offload", "dlc.case"):
        assert marker in text, marker


def test_verifier_names_the_op_and_position() -> None:
    text = ("module {\n  func @main(%t: tensor<4x8xf32>, %i: tensor<3xf32>) -> (tensor<3x8xf32>) {\n"
            "    %y = emb.gather %t, %i : tensor<3x8xf32>\n    return %y\n  }\n}\n")
    with pytest.raises(EmberError) as e:
        verify(parse_module(text, "bad.eir"))
    assert e.value.render().startswith("bad.eir:3:10: error: 'emb.gather' indices must hold i32 or i64")
