"""The fast engine's Python–C boundary (ember/sim/fast/boundary.py): everything crosses in named structures, and a
structure laid out differently on the two sides is refused when the compiled program is loaded, naming the
structure and the field, before the first call could read a field at another's place."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from test_fast_engine import MACHINE, assert_same, both

from ember.backend.dae import Program
from ember.backend.dae_text import parse_dae
from ember.ir.diagnostics import EmberError
from ember.sim.fast import boundary, build
from ember.sim.fast.c_source import generate

pytestmark = pytest.mark.skipif(build.compiler() is None, reason="no C compiler")

# alloc (a symbol's shape, base address and owner cross back), a run with pushes and pops (the queue), loads and
# stores (the cache levels, DRAM) and every counter and total
PROGRAM = """.dae 2
.sym @0 input "x" f32 [?]
.sym @1 output "y" f32 [?]
.access A0 1
  tu t0, 0, p0, 1
  mem s0, @0[t0]
  on t0, ite, [s0, t0], 1
.end
.code
  dim r1, @0, 0
  alloc @1, [r1]
  run A0, r1
  halt
A0.1:
  pop f1
  pop r2
  fmul.f32 f2, f1, f1
  st f2, @1[r2]
  ret
.end
"""


@pytest.fixture(scope="module")
def program() -> Program:
    return parse_dae(PROGRAM, "boundary.dae")


def source(program: Program) -> str:
    return generate(program, frozenset(), MACHINE.execute.simd_bits)


def test_a_run_through_the_named_structures_is_the_reference_run(program: Program) -> None:
    x = np.arange(3000, dtype=np.float32) / 7
    ref_out, ref_st, out, st = both(program, {"x": x})
    assert_same(ref_st, st)
    np.testing.assert_array_equal(ref_out["y"], out["y"])
    assert st["cycles"] > 0 and st["dram.requests"] > 0 and st["cache.l1.hits"] > 0 and st["execute.op.pop"] == 6000


def test_the_generated_declarations_are_the_classes_fields_in_order() -> None:
    text = boundary.c_declarations()
    for s in boundary.GENERATED:
        body = re.search(r"typedef struct \{ (.*?) \} " + s.__name__ + ";", text)
        assert body is not None, s.__name__
        assert re.findall(r"(\w+);", body.group(1)) == [name for name, _ in s._fields_]
    assert [name for name, _ in boundary.Numbers._fields_] == list(boundary.NUMBERS)


def test_the_compiled_layout_is_every_field_of_every_structure(program: Program) -> None:
    lib = build.load(source(program))  # checked on loading
    table = lib.ember_layout()
    assert table[0] == len(boundary.STRUCTS) + sum(len(s._fields_) for s in boundary.STRUCTS)
    assert table[1] == ctypes.sizeof(boundary.Level) and table[2:5] == [0, 8, 2]  # Level.sets: offset, size, int64


def test_a_reordered_ctypes_structure_is_refused_at_load(program: Program, monkeypatch: pytest.MonkeyPatch) -> None:
    fields = list(boundary.Level._fields_)
    fields[0], fields[1] = fields[1], fields[0]  # ways before sets

    class Level(boundary.Struct):
        __slots__ = ()
        _fields_ = fields

    monkeypatch.setattr(boundary, "STRUCTS", tuple(Level if s is boundary.Level else s for s in boundary.STRUCTS))
    with pytest.raises(EmberError, match=r"structure Level differs between C and Python at field 'ways': offset 8"):
        build.load(source(program))


@pytest.mark.parametrize("old, new, message", [
    ("int64_t sets, ways, line_bytes;", "int64_t ways, sets, line_bytes;", "Level .* field 'sets'"),
    ("    double latency;  ", "    int64_t latency;  ", r"Level .* field 'latency': offset 24, 8 bytes, int64_t in C"),
    ("    int64_t n, cap, grown;", "    int64_t n, cap, grown, spare;", "structure Channel is 48 bytes in C and 40"),
])
def test_a_c_structure_changed_behind_the_classes_is_refused_at_load(program: Program, old: str, new: str,
                                                                     message: str) -> None:
    text = source(program)
    assert text.count(old) == 1
    with pytest.raises(EmberError, match=message):
        build.load(text.replace(old, new))


def test_a_field_c_does_not_have_fails_the_build_naming_it(program: Program, monkeypatch: pytest.MonkeyPatch) -> None:
    class Channel(boundary.Struct):
        __slots__ = ()
        _fields_ = [*boundary.Channel._fields_, ("spare", ctypes.c_int64)]

    monkeypatch.setattr(boundary, "STRUCTS", tuple(Channel if s is boundary.Channel else s for s in boundary.STRUCTS))
    with pytest.raises(EmberError, match="Channel. has no member named .spare."):
        build.load(source(program))


def test_a_misspelt_field_name_is_an_error() -> None:
    with pytest.raises(AttributeError):
        boundary.Queue(cap=8, maks=7)
    args = boundary.Args()
    with pytest.raises(AttributeError):
        args.acces_level = 1  # type: ignore[attr-defined]
