"""`.bin`: assemble/disassemble keep the program and its data exactly, and damaged files of every
kind (flipped bytes, truncation, wrong magic or version, bad table) are EmberErrors naming the file."""

from __future__ import annotations

import math
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ember.backend import binary
from ember.backend.binary import MAGIC, SECTIONS, assemble, disassemble
from ember.backend.dae import FORMAT_VERSION, Instr, Label, Program, Reg, Symbol, SymRef, Work
from ember.backend.dae_text import parse_dae, print_dae
from ember.ir.diagnostics import EmberError
from ember.ir.printer import DenseAttr
from ember.ir.types import ScalarType, ShapedType

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = (ROOT / "tests" / "data" / "example.dae").read_text()
BAG = Work("bag", "sum", table=0, indices=1, offsets=2, output=3, empty="identity")  # what the example computes


def example(with_data: bool = True) -> Program:
    p = parse_dae(EXAMPLE, "example.dae")
    if with_data:
        p.data = {0: np.linspace(-1, 1, 320, dtype=np.float32).reshape(40, 8)}
    return p


def with_crc(data: bytes | bytearray) -> bytes:
    """The bytes with a freshly computed checksum, to reach the decoder behind the CRC check."""
    body = bytes(data[:-4])
    return body + struct.pack("<I", zlib.crc32(body))


def error_of(data: bytes) -> str:
    with pytest.raises(EmberError) as info:
        disassemble(data, "m.bin")
    return str(info.value)


# ----------------------------------------------------------------------------- round trips


def test_example_round_trip_keeps_text_and_data() -> None:
    p = example()
    q = disassemble(assemble(p), "m.bin")
    assert print_dae(q) == EXAMPLE
    assert q.symbols == p.symbols and q.access == p.access and q.code == p.code
    assert q.data.keys() == {0}
    assert q.data[0].dtype == np.float32 and np.array_equal(q.data[0], p.data[0])


def test_layout_magic_version_table_and_checksum() -> None:
    b = assemble(example())
    magic, version, count, total = struct.unpack_from("<8sHHI", b)
    assert (magic, version, count, total) == (MAGIC, FORMAT_VERSION, len(SECTIONS), len(b))
    names = [struct.unpack_from("<8sII", b, 16 + 16 * i)[0].rstrip(b"\0").decode() for i in range(count)]
    assert names == ["syms", "work", "access", "code", "strs", "data"]
    assert struct.unpack("<I", b[-4:])[0] == zlib.crc32(b[:-4])
    assert b"pickle" not in b and b"bag.weight" in b  # strings are stored once, as UTF-8
    assert assemble(example()) == b  # deterministic


def test_data_arrays_of_every_dtype() -> None:
    p = Program(symbols=[Symbol("param", f"w{i}", "f32", ()) for i in range(7)], code=[Instr("halt")])
    p.data = {
        0: np.array([[True, False, True]]),
        1: np.arange(-4, 4, dtype=np.int8),
        2: np.array(7, dtype=np.int64),  # 0-d
        3: np.zeros((0, 5), dtype=np.float64),  # empty
        4: np.arange(6, dtype=">f4").reshape(2, 3),  # big endian in, little endian stored
        5: np.asfortranarray(np.arange(12, dtype=np.uint16).reshape(3, 4)),  # not C-contiguous
        6: np.array([np.nan, -0.0, np.inf], dtype=np.float16),
    }
    q = disassemble(assemble(p), "m.bin")
    for k, a in p.data.items():
        assert q.data[k].shape == a.shape and q.data[k].dtype == a.dtype.newbyteorder("=")
        assert np.array_equal(q.data[k], a, equal_nan=a.dtype.kind == "f"), k
    assert math.copysign(1.0, float(q.data[6][1])) == -1.0


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(st.sampled_from([np.int32, np.uint8, np.float32, np.float64, np.bool_]),
                  hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)))
def test_random_arrays_round_trip(a: np.ndarray) -> None:
    p = Program(symbols=[Symbol("param", "w", "f32", ())], code=[Instr("halt")], data={0: a})
    b = disassemble(assemble(p), "m.bin").data[0]
    assert b.dtype == a.dtype and b.shape == a.shape
    assert np.array_equal(b, a, equal_nan=a.dtype.kind == "f")


def test_operand_and_attribute_values_come_back_exactly() -> None:
    attrs = {"i": 1, "f": 1.0, "t": True, "b": False, "s": "é\n\"", "neg": -0.0, "big": -(2**63),
             "l": [1, [2.5, "x"], [], True],
             "d": DenseAttr([1.0, 2.0], ShapedType("tensor", (2,), ScalarType("f32"))),
             "u": DenseAttr([], ShapedType("vector", None, ScalarType("i1"))),
             "n": math.nan, "inf": -math.inf}
    p = Program(symbols=[Symbol("temp", "t", "f32", ())],
                code=[Instr("li", [Reg("f", 0), 5e-324]), Instr("li", [Reg("r", 1), 2**63 - 1]),
                      Instr("host", ["Op", [SymRef(0)], [], attrs]), Label("end"), Instr("halt")])
    q = disassemble(assemble(p), "m.bin")
    assert print_dae(q) == print_dae(p)
    got = q.code[2].args[3]
    assert list(got) == list(attrs)
    for k in ("i", "f", "t", "b", "big", "l", "d", "u", "s"):
        assert got[k] == attrs[k] and type(got[k]) is type(attrs[k]), k
    assert math.isnan(got["n"]) and math.copysign(1.0, got["neg"]) == -1.0
    assert q.code[0].args[1] == 5e-324 and q.code[1].args[1] == 2**63 - 1


def test_empty_program() -> None:
    p = Program()
    assert print_dae(disassemble(assemble(p), "m.bin")) == ".dae 2\n.code\n.end\n"


def test_assemble_checks_the_program_first() -> None:
    p = example()
    p.code.append(Instr("jmp", [Label("nowhere")]))
    with pytest.raises(EmberError, match="label 'nowhere' is not defined"):
        assemble(p)
    p = example()
    p.data[1] = np.array(["a"], dtype=object)
    with pytest.raises(EmberError, match="unsupported dtype"):
        assemble(p)
    p = example(with_data=False)
    p.code.insert(0, Instr("li", [Reg("r", 0), 2**64]))
    with pytest.raises(EmberError, match="64-bit"):
        assemble(p)


# ----------------------------------------------------------------------------- damaged files


@pytest.fixture(scope="module")
def small() -> bytes:
    p = example()
    p.symbols.append(Symbol("output", "maxes", "f32", (None, 8)))  # one output a record
    p.work = [BAG, Work("bag", "max", table=0, indices=1, offsets=2, output=len(p.symbols) - 1, padding_idx=-3,
                        empty="zero")]
    p.data = {0: np.arange(6, dtype=np.float32).reshape(2, 3)}
    p.symbols[0].shape = (2, 3)
    return assemble(p)


def test_messages_for_each_kind_of_damage(small: bytes) -> None:
    assert error_of(small[:-1] + bytes([small[-1] ^ 1])) == "m.bin: error: bad checksum (file is corrupted)"
    assert error_of(b"\x7fELF" + small[4:]) == "m.bin: error: not an ember binary (bad magic number)"
    assert error_of(b"") == "m.bin: error: file is empty"
    assert error_of(small[:12]).startswith("m.bin: error: file is truncated")
    n = len(small)
    assert error_of(small[:-10]) == f"m.bin: error: file is truncated ({n - 10} of {n} bytes)"
    assert error_of(small + b"\0").startswith("m.bin: error: file is")
    bumped = small[:8] + struct.pack("<H", FORMAT_VERSION + 1) + small[10:]
    assert error_of(bumped) == (f"m.bin: error: unsupported format version {FORMAT_VERSION + 1} "
                                f"(this ember reads version {FORMAT_VERSION})")


def entry(b: bytes, i: int, name: bytes | None = None, off: int | None = None,
          length: int | None = None) -> bytes:
    """`b` with section-table entry `i` changed (and a valid checksum)."""
    at = 16 + 16 * i
    n, o, ln = struct.unpack_from("<8sII", b, at)
    new = struct.pack("<8sII", name or n, o if off is None else off, ln if length is None else length)
    return with_crc(b[:at] + new + b[at + 16:])


def test_bad_section_tables(small: bytes) -> None:
    _, o, _ = struct.unpack_from("<8sII", small, 16)
    cases = [entry(small, 0, name=b"bogus"), entry(small, 1, name=b"syms"), entry(small, 0, off=len(small)),
             entry(small, 4, length=len(small)), entry(small, 0, off=3), entry(small, 1, off=o)]
    for data in cases:
        assert error_of(data).startswith("m.bin: error: bad section table")
    many = bytearray(small)
    many[10:12] = struct.pack("<H", 0x7FFF)
    assert error_of(with_crc(many)) == "m.bin: error: bad section table (it runs past the end of the file)"


def test_every_byte_flip_is_caught(small: bytes) -> None:
    for i in range(len(small)):
        for x in (0x01, 0x80, 0xFF):
            damaged = bytearray(small)
            damaged[i] ^= x
            assert error_of(bytes(damaged)).startswith("m.bin: error: ")


def test_every_truncation_is_caught(small: bytes) -> None:
    for n in range(len(small)):
        assert error_of(small[:n]).startswith("m.bin: error: ")


def test_damage_behind_a_valid_checksum_never_escapes_as_another_exception(small: bytes) -> None:
    """Flip every byte and re-seal the file: the decoder must reject it or return a valid program."""
    accepted = 0
    for i in range(len(small) - 4):
        for x in (0x01, 0xFF):
            damaged = bytearray(small)
            damaged[i] ^= x
            try:
                q = disassemble(with_crc(damaged), "m.bin")
            except EmberError as e:
                assert str(e).startswith("m.bin: error: ")
                continue
            accepted += 1
            text = print_dae(q)
            if accepted % 10 == 0:  # what decodes must also be valid text (sampled: parsing is slower)
                assert print_dae(parse_dae(text, "r.dae")) == text
    assert accepted > 0


EXAMPLE_BIN = assemble(Program(**{**vars(example()), "work": [BAG]}))


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=64), st.integers(0, len(SECTIONS) - 1))
def test_random_section_contents_are_rejected_cleanly(junk: bytes, which: int) -> None:
    """Replace one section with random bytes (valid table and checksum): only EmberErrors come out."""
    b = EXAMPLE_BIN
    _, off, length = struct.unpack_from("<8sII", b, 16 + 16 * which)
    body = bytearray(b[:off] + junk + b[off + length:])
    body[12:16] = struct.pack("<I", len(body))
    for i in range(len(SECTIONS)):
        n, o, ln = struct.unpack_from("<8sII", body, 16 + 16 * i)
        if i == which:
            ln = len(junk)
        elif o > off:
            o += len(junk) - length
        body[16 + 16 * i: 32 + 16 * i] = struct.pack("<8sII", n, o, ln)
    try:
        disassemble(with_crc(body), "m.bin")
    except EmberError as e:
        assert str(e).startswith("m.bin: error: ")


# ----------------------------------------------------------------------------- work records


@pytest.mark.parametrize("name", ["bag_sum.d16", "bag_sum.d128", "bag_weighted.d128", "gather.d1024"])
def test_handwritten_work_records_round_trip(name: str) -> None:
    text = (ROOT / "samples" / "handwritten" / f"{name}.dae").read_text()
    p = parse_dae(text, f"{name}.dae")
    assert len(p.work) == 1
    q = disassemble(assemble(p), "m.bin")
    assert q.work == p.work and print_dae(q) == print_dae(p)


def test_old_files_without_work_are_refused_by_version() -> None:
    """A version-1 file has no work section: the version says so before the section table would."""
    b = bytearray(EXAMPLE_BIN)
    b[8:10] = struct.pack("<H", 1)
    assert error_of(with_crc(b)) == f"m.bin: error: unsupported format version 1 (this ember reads version " \
                                    f"{FORMAT_VERSION})"


def work_section(fields: list[tuple[str, object]], kind: str = "bag", mode: str = "sum") -> bytes:
    """The example as a binary whose one work record has exactly `fields`, encoded as the format does."""
    def encode(enc: binary._Encoder, p: Program) -> bytes:
        w = binary._Writer()
        w.uint(1)
        w.uint(enc.s(kind))
        w.uint(enc.s(mode))
        w.uint(len(fields))
        for name, v in fields:
            w.uint(enc.s(name))
            enc.value(w, v, 1)
        return bytes(w.buf)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(binary._Encoder, "work", encode)
        return assemble(example())


GOOD_FIELDS = [("table", SymRef(0)), ("indices", SymRef(1)), ("offsets", SymRef(2)), ("output", SymRef(3)),
               ("empty", "zero")]


def test_a_hand_encoded_record_decodes() -> None:
    assert disassemble(work_section(GOOD_FIELDS), "m.bin").work == [
        Work("bag", "sum", table=0, indices=1, offsets=2, output=3, empty="zero")]


@pytest.mark.parametrize("fields, kind, message", [
    ([*GOOD_FIELDS, ("lanes", SymRef(0))], "bag", "malformed 'work' section: unknown work field 'lanes'"),
    ([*GOOD_FIELDS, ("table", SymRef(0))], "bag", "malformed 'work' section: work field 'table' given twice"),
    ([("table", 0), *GOOD_FIELDS[1:]], "bag", "malformed 'work' section: bad value for work field 'table'"),
    ([*GOOD_FIELDS, ("padding_idx", True)], "bag", "malformed 'work' section: bad value for work field "
     "'padding_idx'"),
    ([*GOOD_FIELDS, ("negative", [1])], "bag", "malformed 'work' section: bad value for work field 'negative'"),
    ([("table", SymRef(40)), *GOOD_FIELDS[1:]], "bag", "work record 0: symbol @40 is not declared"),
    (GOOD_FIELDS[1:], "bag", "work record 0: a bag record needs table=@n"),
    (GOOD_FIELDS, "bagz", "work record 0: unknown work kind 'bagz'"),
])
def test_bad_work_records_are_one_line_errors(fields: list[tuple[str, object]], kind: str, message: str) -> None:
    err = error_of(work_section(fields, kind))
    assert err == f"m.bin: error: {message}" or err.startswith(f"m.bin: error: {message} (")
