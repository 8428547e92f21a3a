"""Edges of the backend that the round-trip tests do not reach: the `.bin` decoder's limits and messages
(files built here byte by byte from the layout binary.py documents), the `.dae` parser's and checker's
messages, the opcode signatures' wording, work records, and the code generator's rarer paths (checked
by running what it emits)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

import ember.dialects  # noqa: F401  (registers the IR's operations)
from ember.backend import binary
from ember.backend.binary import assemble, disassemble
from ember.backend.codegen import codegen
from ember.backend.dae import (
    FORMAT_VERSION,
    Access,
    Instr,
    Label,
    Mem,
    Program,
    Reg,
    Symbol,
    SymRef,
    Work,
    arity,
    arity_message,
)
from ember.backend.dae_text import parse_dae, print_dae, validate
from ember.ir.diagnostics import EmberError
from ember.ir.parser import parse_module
from ember.ir.printer import DenseAttr
from ember.ir.types import ScalarType, ShapedType
from ember.machine import load_machine
from ember.sim.reference import simulate

EXAMPLE_TEXT = (Path(__file__).resolve().parent / "data" / "example.dae").read_text()

# ----------------------------------------------------------------------------- .bin, built by hand

SECTION_ORDER = ("syms", "work", "access", "code", "strs", "data")  # the table's order (binary.py docstring)
T_REG, T_SYM, T_MEM, T_INT, T_FLOAT, T_STR, T_LIST, T_DICT, T_TRUE = 0, 1, 2, 4, 5, 6, 7, 8, 9  # value tags


def leb(v: int) -> bytes:
    """Unsigned LEB128, written independently of the encoder under test."""
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def zigzag(v: int) -> bytes:
    return leb(2 * v if v >= 0 else -2 * v - 1)


def strs(*texts: str, dicts: bytes = b"", ndicts: int = 0) -> bytes:
    """A `strs` section: the string table, then `ndicts` attribute dicts already encoded in `dicts`."""
    body = leb(len(texts)) + b"".join(leb(len(t.encode())) + t.encode() for t in texts)
    return body + leb(ndicts) + dicts


def file_of(total: int | None = None, **sections: bytes) -> bytes:
    """A whole `.bin`: header, section table, sections, CRC; sections not given are empty programs' parts."""
    empty = {"syms": leb(0) + leb(0) + leb(0), "work": leb(0), "access": leb(0), "code": leb(0),
             "strs": strs(""), "data": leb(0)}  # weights = string 0 (""), opset 0, no symbols
    body = empty | sections
    offset = 16 + 16 * len(SECTION_ORDER)
    table = b""
    for name in SECTION_ORDER:
        table += struct.pack("<8sII", name.encode(), offset, len(body[name]))
        offset += len(body[name])
    size = offset + 4 if total is None else total
    data = struct.pack("<8sHHI", b"EMBERBIN", FORMAT_VERSION, len(SECTION_ORDER), size) + table
    data += b"".join(body[n] for n in SECTION_ORDER)
    return data + struct.pack("<I", zlib.crc32(data))


def bin_error(data: bytes) -> str:
    with pytest.raises(EmberError) as info:
        disassemble(data, "m.bin")
    return str(info.value)


def test_hand_built_empty_program_decodes() -> None:
    """The helpers above agree with the format: an empty program, then one halt instruction."""
    assert print_dae(disassemble(file_of(), "m.bin")) == ".dae 2\n.code\n.end\n"
    halt = file_of(strs=strs("", "halt"), code=leb(1) + b"\x01" + leb(1) + leb(0))
    assert disassemble(halt, "m.bin").code == [Instr("halt")]


@pytest.mark.parametrize("total", [0, 11, 12, 16, 19])
def test_a_header_too_small_for_any_program_is_refused(total: int) -> None:
    """The smallest file is the 16-byte header and the 4-byte CRC: a header claiming fewer than 20 bytes is
    corrupt, whatever bytes follow it."""
    data = struct.pack("<8sHHI", b"EMBERBIN", FORMAT_VERSION, 0, total) + b"\0" * (total - 16 if total > 16 else 0)
    assert bin_error(data) == f"m.bin: error: bad header: a file of {total} bytes cannot hold a program " \
                              "(file is corrupted)"


def test_a_twenty_byte_header_reaches_the_checks_after_it() -> None:
    head = struct.pack("<8sHHI", b"EMBERBIN", FORMAT_VERSION, 0, 20)
    assert bin_error(head + b"\0\0\0\0") == "m.bin: error: bad checksum (file is corrupted)"
    sealed = head + struct.pack("<I", zlib.crc32(head))
    assert bin_error(sealed) == "m.bin: error: bad section table (missing section 'syms')"


def test_bfloat16_data_comes_back_as_bfloat16() -> None:
    import ml_dtypes

    values = np.array([[1.5, -2.0, 0.0078125], [3e38, -0.0, 65280.0]], dtype=ml_dtypes.bfloat16)
    p = Program(symbols=[Symbol("param", "w", "bf16", (2, 3))], code=[Instr("halt")], data={0: values})
    got = disassemble(assemble(p), "m.bin").data[0]
    assert got.dtype == np.dtype(ml_dtypes.bfloat16) and got.shape == (2, 3)
    assert np.array_equal(got.view(np.uint16), values.view(np.uint16))  # bit for bit, -0.0 included


def attr_dict(*pairs: tuple[int, bytes]) -> bytes:
    """One encoded attribute dict: (key string index, tagged value bytes) pairs."""
    return leb(len(pairs)) + b"".join(leb(k) + v for k, v in pairs)


@pytest.mark.parametrize("section, message", [
    (strs("a", "a", dicts=attr_dict((1, bytes([T_INT]) + zigzag(1)), (1, bytes([T_INT]) + zigzag(2))), ndicts=1),
     "attribute 'a' given twice"),
    (strs("", dicts=attr_dict((3, bytes([T_TRUE]))), ndicts=1), "string index 3 out of range"),
    (leb(2) + leb(0) + leb(2) + b"\xff\xfe" + leb(0), "a string is not valid UTF-8"),
    (leb(1) + leb(9) + b"abc" + leb(0), "unexpected end of section"),
    (strs("") + b"\0", "1 unexpected bytes at its end"),
    (strs("", dicts=attr_dict((0, bytes([T_DICT]) + leb(0))), ndicts=1), "bad value tag 8"),
])
def test_string_table_damage_is_named(section: bytes, message: str) -> None:
    assert bin_error(file_of(strs=section)) == f"m.bin: error: malformed 'strs' section: {message}"


def test_attribute_dicts_decode_in_order() -> None:
    section = strs("", "host", "Op", "k", "j", dicts=attr_dict((3, bytes([T_INT]) + zigzag(-5)),
                                                                (4, bytes([T_STR]) + leb(2))), ndicts=1)
    code = leb(1) + b"\x01" + leb(1) + leb(4) + bytes([T_STR]) + leb(2) + bytes([T_LIST]) + leb(0) + \
        bytes([T_LIST]) + leb(0) + bytes([T_DICT]) + leb(0)
    ins = disassemble(file_of(strs=section, code=code), "m.bin").code[0]
    assert ins == Instr("host", ["Op", [], [], {"k": -5, "j": "Op"}])


def code_with(operand: bytes) -> bytes:
    """A file whose code is `li r0, 0` then `ld r0, <operand>`, with one symbol @0: temp "x" i64 [4]."""
    syms = leb(0) + leb(0) + leb(1) + b"\x03" + leb(2) + leb(3) + leb(1) + leb(5)  # extents are stored + 1
    li = b"\x01" + leb(4) + leb(2) + bytes([T_REG, 0]) + leb(0) + bytes([T_INT]) + zigzag(0)
    code = leb(2) + li + b"\x01" + leb(1) + leb(2) + bytes([T_REG, 0]) + leb(0) + operand
    return file_of(strs=strs("", "ld", "x", "i64", "li"), syms=syms, code=code)


def mem(*index: bytes) -> bytes:
    return bytes([T_MEM]) + leb(0) + leb(len(index)) + b"".join(index)


def nest(value: bytes, lists: int) -> bytes:
    """`value` inside `lists` one-item lists."""
    return (bytes([T_LIST]) + leb(1)) * lists + value


def test_a_memory_operand_decodes() -> None:
    assert disassemble(code_with(mem(bytes([T_INT]) + zigzag(3))), "m.bin").code == [
        Instr("li", [Reg("r", 0), 0]), Instr("ld", [Reg("r", 0), Mem(0, (3,))])]
    assert disassemble(code_with(mem(bytes([T_REG, 0]) + leb(0))), "m.bin").code[1].args[1] == Mem(0, (Reg("r", 0),))


@pytest.mark.parametrize("operand, message", [
    (mem(bytes([T_FLOAT]) + struct.pack("<d", 1.0)), "bad memory index"),
    (mem(bytes([T_TRUE])), "bad memory index"),
    (mem(bytes([T_STR]) + leb(2)), "bad memory index"),
    (mem(nest(bytes([T_INT]) + zigzag(1), 1)), "bad memory index"),
    (mem(bytes([T_DICT]) + leb(0)), "bad value tag 8"),  # a dict is an operand of its own, never an index
    (bytes([T_REG, 6]) + leb(0), "bad register class 6"),
    (bytes([12]), "bad value tag 12"),
    (nest(bytes([T_DICT]) + leb(0), 1), "bad value tag 8"),
    (nest(mem(bytes([T_INT]) + zigzag(0)), 64), "values nested too deeply"),  # the index is at depth 65
    (nest(bytes([T_INT]) + zigzag(0), 65), "values nested too deeply"),
])
def test_bad_operands_are_named(operand: bytes, message: str) -> None:
    assert bin_error(code_with(operand)) == f"m.bin: error: malformed 'code' section: {message}"


def test_operands_nested_up_to_the_limit_decode() -> None:
    """64 levels of lists decode (and are then held to the opcode's signature by validate)."""
    err = bin_error(code_with(nest(mem(bytes([T_INT]) + zigzag(0)), 63)))
    assert err == "m.bin: error: code item 1 ('ld'): 'ld' operand 2 must be a memory reference (@n[...]), got a list"


def count_error(number: bytes) -> str:
    """The error for a `strs` section whose string count is the LEB128 bytes `number` (and nothing else)."""
    return bin_error(file_of(strs=number))


def test_varints_are_limited_to_64_bits() -> None:
    assert count_error(b"\xff" * 9 + b"\x01") == (  # 2^64 - 1, the largest number: read, then too big a count
        f"m.bin: error: malformed 'strs' section: count {2**64 - 1} exceeds the section")
    assert count_error(b"\x80" * 9 + b"\x02") == "m.bin: error: malformed 'strs' section: number out of range"
    assert count_error(b"\xff" * 9 + b"\x7f") == "m.bin: error: malformed 'strs' section: number out of range"
    assert count_error(b"\x80" * 10 + b"\x01") == "m.bin: error: malformed 'strs' section: number too long"
    assert count_error(b"\x80\x80") == "m.bin: error: malformed 'strs' section: unexpected end of section"
    assert count_error(leb(300)) == "m.bin: error: malformed 'strs' section: count 300 exceeds the section"


@pytest.mark.parametrize("value", [-(2**63), 2**63 - 1, -1, 0, 63, -64, 64])
def test_signed_immediates_round_trip(value: int) -> None:
    p = Program(code=[Instr("li", [Reg("r", 0), value]), Instr("halt")])
    assert disassemble(assemble(p), "m.bin").code[0].args[1] == value


@pytest.mark.parametrize("value", [-(2**63) - 1, -(2**64), 2**63])
def test_immediates_outside_int64_cannot_be_encoded(value: int) -> None:
    p = Program(code=[Instr("host", ["Op", [], [], {"k": value}]), Instr("halt")])
    with pytest.raises(EmberError) as info:
        assemble(p)
    assert str(info.value) == (f"error: code item 0 ('host'): attribute 'k' holds {value}, outside the 64-bit "
                               "integers an ONNX attribute (and the binary) can hold")
    with pytest.raises(EmberError) as info:  # the writer's own guard, behind validation
        binary._Writer().sint(value)
    assert str(info.value) == f"error: cannot encode {value}: outside the 64-bit range of the binary format"


# ----------------------------------------------------------------------------- .dae text and its checker


def text_error(text: str) -> str:
    """The one-line message (without the caret lines) of parsing `text` as x.dae."""
    with pytest.raises(EmberError) as info:
        parse_dae(text, "x.dae")
    return str(info.value).splitlines()[0]


HEAD = '.dae 2\n.sym @0 temp "x" i64 [4]\n'
ACCESS = ".access A0 1\n  tu t0, 0, p0, 1\n  on t0, end, [], 1\n.end\n"
TAIL = ".code\n  halt\nA0.1:\n  ret\n.end\n"


@pytest.mark.parametrize("text, message", [
    (".dae 2\n.dae 2\n.code\n.end\n", "x.dae:2:1: error: '.dae' is given twice"),
    ('.dae 2\n.weights "a"\n.weights "a"\n.code\n.end\n', "x.dae:3:1: error: '.weights' is given twice"),
    (".dae 2\n.opset 1\n.opset 1\n.code\n.end\n", "x.dae:3:1: error: '.opset' is given twice"),
    (".dae\n.code\n.end\n", "x.dae:1:1: error: '.dae' expects a format version"),
    (".dae x\n.code\n.end\n", "x.dae:1:6: error: '.dae' expects a format version"),
    (".dae 2 2\n.code\n.end\n", "x.dae:1:8: error: '.dae' expects a format version"),
    (".dae 3\n.code\n.end\n", "x.dae:1:6: error: unsupported .dae version 3 (this ember reads version 2)"),
    (".code\n.end\n", "x.dae:1:1: error: a .dae file starts with '.dae 2'"),
    (".dae 2\n.end\n.code\n.end\n", "x.dae:2:1: error: '.end' without an open .access or .code"),
    (".dae 2\n.code\n.end\n.end\n", "x.dae:4:1: error: nothing may follow the .end of .code"),
    (".dae 2\n.code\n.sym @0 temp \"x\" i64 []\n.end\n",
     "x.dae:3:1: error: '.sym' is not allowed inside .code (missing '.end'?)"),
    (".dae 2\n.code\n.code\n.end\n", "x.dae:3:1: error: '.code' is not allowed inside .code (missing '.end'?)"),
    (".dae 2\n.foo\n.code\n.end\n", "x.dae:2:1: error: unknown directive '.foo' (expected one of .dae, .weights, "
     ".opset, .sym, .work, .access, .code, .end)"),
    (".dae 2\n.weights 5\n.code\n.end\n", "x.dae:2:10: error: '.weights' expects the weights file name as a string"),
    (".dae 2\n.opset -1\n.code\n.end\n", "x.dae:2:8: error: the opset cannot be negative"),
    (".dae 2\n.opset 9223372036854775808\n.code\n.end\n", "x.dae:2:8: error: the opset is out of the 64-bit range"),
    (".dae 2\n.access A0 -1\n.end\n.code\n.end\n", "x.dae:2:12: error: bad parameter count -1"),
    (".dae 2\n.access A0 9223372036854775808\n.end\n.code\n.end\n",
     "x.dae:2:12: error: bad parameter count 9223372036854775808"),
    (".dae 2\n.access A0\n.end\n.code\n.end\n", "x.dae:2:1: error: '.access' expects a name and a parameter count"),
    (".dae 2\n.access A0 0\n.code\n.end\n",
     "x.dae:3:1: error: '.code' is not allowed inside .access (missing '.end'?)"),
    (".dae 2\n.access A0 0\n", "x.dae:2:1: error: '.access' has no matching '.end'"),
    (".dae 2\n.code 1\n.end\n", "x.dae:2:7: error: '.code' expects nothing"),
    (".dae 2\n.code\n.end 1\n", "x.dae:3:6: error: '.end' expects nothing"),
    (".dae 2\n", "x.dae:1:1: error: missing .code section"),
])
def test_directive_messages(text: str, message: str) -> None:
    assert text_error(text) == message


def test_header_directives_once_each_parse() -> None:
    p = parse_dae('.dae 2\n.weights "w.npz"\n.opset 17\n.access A0 2\n.end\n.code\n.end\n', "x.dae")
    assert (p.weights, p.opset, p.access) == ("w.npz", 17, [Access("A0", 2)])


@pytest.mark.parametrize("text, message", [
    (".dae 2\nL0:\n.code\n.end\n", "x.dae:2:1: error: labels are only allowed in .code"),
    (".dae 2\n.access A0 0\nL0:\n.end\n.code\n.end\n", "x.dae:3:1: error: labels are only allowed in .code"),
    (".dae 2\n.code\n.end\nL0:\n", "x.dae:4:1: error: nothing may follow the .end of .code"),
    (".dae 2\n  halt\n.code\n.end\n", "x.dae:2:3: error: instructions belong inside .access or .code"),
])
def test_labels_and_instructions_outside_their_sections(text: str, message: str) -> None:
    assert text_error(text) == message


def where(text: str, needle: str) -> str:
    """`x.dae:line:col` of the one occurrence of `needle` in `text`."""
    assert text.count(needle) == 1, needle
    before = text[:text.index(needle)]
    return f"x.dae:{before.count(chr(10)) + 1}:{len(before) - before.rfind(chr(10))}"


@pytest.mark.parametrize("index, at, message", [
    ("1.5", "1.5", "a memory index is a register or an integer, got '1.5'"),
    ("r0, x", "x]", "a memory index is a register or an integer, got 'x'"),
    ('"a"', '"a"', "a memory index is a register or an integer, got '\"a\"'"),
    ("[2]", "2]", "a memory index is a register or an integer, got a list"),
    ("f0", "@0[f0]", "memory index must be an r or v register or an integer, got f0"),
])
def test_memory_index_messages(index: str, at: str, message: str) -> None:
    text = f"{HEAD}.sym @1 temp \"y\" i64 [4, 4]\n.code\n  li r0, 0\n  ld r0, @{1 if ',' in index else 0}[{index}]\n" \
        "  halt\n.end\n"
    assert text_error(text) == f"{where(text, at)}: error: {message}"


def test_memory_indices_that_parse() -> None:
    p = parse_dae(f"{HEAD}.code\n  li r0, 1\n  ld r1, @0[r0]\n  st r1, @0[3]\n  halt\n.end\n", "x.dae")
    assert p.code[1:3] == [Instr("ld", [Reg("r", 1), Mem(0, (Reg("r", 0),))]), Instr("st", [Reg("r", 1), Mem(0, (3,))])]


@pytest.mark.parametrize("line, at, message", [
    ('run "A0"', '"A0"', "'run' operand 1 must be an access program name, got '\"A0\"'"),
    ('jmp "A0.1"', '"A0.1"', "'jmp' operand 1 must be a label, got '\"A0.1\"'"),
    ("li r0, [1]", "1]", "'li' operand 2 must be a register or a number, got a list"),
    ("pop @0", "@0\n", "'pop' operand 1 must be an r, f or v register, got @0"),
    ('host "Op", @0, [], {}', "@0, [", "'host' operand 2 must be a list [...], each item a symbol (@n), got @0"),
    ('host "Op", [@0, 1], [], {}', "@0, 1", "'host' operand 2 must be a list [...], each item a symbol (@n), got 1"),
    ('host "Op", [[@0]], [], {}', "@0]]", "'host' operand 2 must be a list [...], each item a symbol (@n), got "
     "a list"),
    ('host "Op", [@0], [@5], {}', "@5", "symbol @5 is not declared"),
    ("ld r0, @7[0]", "@7", "symbol @7 is not declared"),
    ("dim r0, @9, 0", "@9", "symbol @9 is not declared"),
])
def test_execute_operand_messages(line: str, at: str, message: str) -> None:
    text = f"{HEAD}{ACCESS}.code\n  {line}\n  halt\nA0.1:\n  ret\n.end\n"
    assert text_error(text) == f"{where(text, at)}: error: {message}"


@pytest.mark.parametrize("line, at, message", [
    ('on t0, "end", [], 1', '"end"', "'on' operand 2 must be an event (beg, ite or end), got '\"end\"'"),
    ('alu s0, "add", 0, 1', '"add"', "'alu' operand 2 must be an ALU operation (add, sub, mul, div, rem, min or max), "
     "got '\"add\"'"),
])
def test_access_words_are_bare_names_not_strings(line: str, at: str, message: str) -> None:
    text = f"{HEAD}.access A0 1\n  tu t0, 0, p0, 1\n  {line}\n.end\n{TAIL}"
    assert text_error(text) == f"{where(text, at)}: error: {message}"


def test_operands_of_every_form_parse() -> None:
    text = (f"{HEAD}{ACCESS}.code\n  run A0, 3\n  alloc @0, [4]\n  host \"Op\", [@0, @0], [@0], "
            "{k = [1, 2.5]}\n  jmp L\nL:\n  halt\nA0.1:\n  ret\n.end\n")
    p = parse_dae(text, "x.dae")
    assert p.code[:4] == [Instr("run", ["A0", 3]), Instr("alloc", [SymRef(0), [4]]),
                          Instr("host", ["Op", [SymRef(0), SymRef(0)], [SymRef(0)], {"k": [1, 2.5]}]),
                          Instr("jmp", [Label("L")])]
    assert p.access[0].body[1] == Instr("on", [Reg("t", 0), "end", [], 1])
    assert print_dae(p) == text


@pytest.mark.parametrize("params, reg, message", [
    (0, "p0", "p0 is out of range: A0 has 0 parameters"),
    (1, "p1", "p1 is out of range: A0 has 1 parameter"),
    (2, "p2", "p2 is out of range: A0 has 2 parameters"),
    (1, "s0", "s0 is used before it is defined"),
    (1, "t1", "t1 is used before it is defined"),
])
def test_access_register_messages(params: int, reg: str, message: str) -> None:
    run = "run A0" + ", 0" * params
    text = f"{HEAD}.access A0 {params}\n  tu t0, 0, {reg}, 1\n.end\n.code\n  {run}\n  halt\n.end\n"
    assert text_error(text) == f"x.dae:4:13: error: {message}"


def test_access_definitions_and_tokens() -> None:
    twice = f"{HEAD}.access A0 0\n  tu t0, 0, 4, 1\n  tu t0, 0, 4, 1\n.end\n.code\n  run A0\n  halt\n.end\n"
    assert text_error(twice) == "x.dae:5:6: error: t0 is defined twice"
    no_case = f"{HEAD}.access A0 0\n  tu t0, 0, 4, 1\n  on t0, end, [], 3\n.end\n.code\n  run A0\n  halt\n.end\n"
    assert text_error(no_case) == "x.dae:5:19: error: token 3 has no case: the code defines no label 'A0.3'"
    pushes = f"{HEAD}.access A0 1\n  tu t0, 0, p0, 1\n  mem s0, @0[t0]\n  on t0, ite, [s0, t0]\n.end\n"
    assert parse_dae(pushes + ".code\n  run A0, 4\n  halt\n.end\n", "x.dae").access[0].params == 1


@pytest.mark.parametrize("symbol, message", [
    ("w", "not a symbol: str"),
    (Symbol("param", 5, "f32", ()), "symbol name must be a string"),  # type: ignore[arg-type]
    (Symbol("weight", "w", "f32", ()), 'unknown symbol kind "weight" (expected param, input, output or temp)'),
    (Symbol("param", "w", "f99", ()), 'unknown element type "f99" (expected one of '),
    (Symbol("param", "w", "f32", [2]), "a shape is a list of extents from 0 to 2^63 - 1, or '?'"),  # type: ignore[arg-type]
    (Symbol("param", "w", "f32", (-1,)), "a shape is a list of extents from 0 to 2^63 - 1, or '?'"),
    (Symbol("param", "w", "f32", (2**63,)), "a shape is a list of extents from 0 to 2^63 - 1, or '?'"),
])
def test_built_symbols_are_checked_and_named(symbol: object, message: str) -> None:
    p = Program(symbols=[Symbol("temp", "ok", "f32", (2**63 - 1, None)), symbol], code=[Instr("halt")])  # type: ignore[list-item]
    with pytest.raises(EmberError) as info:
        validate(p, "b.bin")
    assert str(info.value).startswith(f"b.bin: error: symbol @1: {message}")


def host_with(value: object) -> Program:
    return Program(code=[Instr("host", ["Op", [], [], {"k": value}]), Instr("halt")])


def nested(value: object, lists: int) -> object:
    for _ in range(lists):
        value = [value]
    return value


def dense(values: list[object]) -> DenseAttr:
    return DenseAttr(values, ShapedType("tensor", (1,), ScalarType("f32")))


@pytest.mark.parametrize("value, problem", [
    (nested(1, 32), None),  # the innermost value at depth 32 is the deepest allowed
    (nested(1, 33), "is nested too deeply"),
    (dense([nested(1.0, 31)]), None),  # a dense attribute's values count one level below it
    (dense([nested(1.0, 32)]), "is nested too deeply"),
    ([dense([nested(1.0, 30)])], None),
    ([dense([nested(1.0, 31)])], "is nested too deeply"),
    (dense([object()]), "has a value of type object"),
    (DenseAttr((1.0,), ShapedType("tensor", (1,), ScalarType("f32"))), "is a malformed dense attribute"),  # type: ignore[arg-type]
    (DenseAttr([1.0], "f32"), "is a malformed dense attribute"),  # type: ignore[arg-type]
    ([1, None], "has a value of type NoneType"),
    ({"a": 1}, "has a value of type dict"),
])
def test_attribute_values_must_print(value: object, problem: str | None) -> None:
    if problem is None:
        validate(host_with(value))
    else:
        with pytest.raises(EmberError) as info:
            validate(host_with(value))
        assert str(info.value) == f"error: code item 0 ('host'): attribute 'k' {problem}"


# ----------------------------------------------------------------------------- opcode signatures


@pytest.mark.parametrize("base, bounds, got, message", [
    # From the instruction table's signatures (docs/isa.md): halt "", pop "G", li "D V", tu "T P P P T?" (one optional
    # parent), on "T E *P I?" (one optional token), run "A I..." (any number of parameters).
    ("halt", (0, 0), 1, "'halt' expects no operands, got 1"),
    ("pop", (1, 1), 0, "'pop' expects 1 operand, got 0"),
    ("li", (2, 2), 3, "'li' expects 2 operands, got 3"),
    ("tu", (4, 5), 6, "'tu' expects 4 or 5 operands, got 6"),
    ("vtu", (4, 5), 3, "'vtu' expects 4 or 5 operands, got 3"),
    ("on", (3, 4), 2, "'on' expects 3 or 4 operands, got 2"),
    ("run", (1, None), 0, "'run' expects at least 1 operand, got 0"),
    ("alloc", (2, 2), 1, "'alloc' expects 2 operands, got 1"),
])
def test_arity_and_its_message(base: str, bounds: tuple[int, int | None], got: int, message: str) -> None:
    assert arity(base) == bounds
    assert arity_message(base, got) == message


def test_operand_counts_in_text() -> None:
    assert text_error(f"{HEAD}.access A0 0\n  tu t0, 0, 4, 1, t0, t0\n.end\n.code\n.end\n") == (
        "x.dae:4:3: error: 'tu' expects 4 or 5 operands, got 6")
    nested_tu = f"{HEAD}.access A0 0\n  tu t0, 0, 4, 1\n  tu t1, 0, 4, 1, t0\n.end\n.code\n  run A0\n  halt\n.end\n"
    assert parse_dae(nested_tu, "x.dae").access[0].body[1].args[4] == Reg("t", 0)
    assert text_error(f"{HEAD}.code\n  halt 1\n.end\n") == "x.dae:4:3: error: 'halt' expects no operands, got 1"


# ----------------------------------------------------------------------------- work records

SYMS = [Symbol("param", "t", "f32", (5, 4)), Symbol("input", "i", "i64", (3,)), Symbol("input", "o", "i64", (2,)),
        Symbol("output", "out", "f32", (2, 4)), Symbol("input", "w", "f32", (3,)), Symbol("temp", "s", "f32", ()),
        Symbol("param", "h", "bf16", (5, 4)), Symbol("input", "g", "i32", (2, 3))]
BAG = {"table": 0, "indices": 1, "offsets": 2, "output": 3, "empty": "zero"}
GATHER = {"table": 0, "indices": 1, "output": 3}


@pytest.mark.parametrize("work, problem", [
    (Work("bag", "sum", **BAG), None),
    (Work("bag", "sum", **{**BAG, "table": 6}, weights=4, padding_idx=-1), None),  # bf16 holds floats
    (Work("gather", **{**GATHER, "indices": 7}, negative="wrap"), None),  # indices of any rank
    (Work("scatter_rows", "max", table=0, targets=1, data=0, output=3), None),
    (Work("nope"), ("unknown work kind 'nope' (expected gather, bag, qbag, ttbag, robe, dhe or scatter_rows)", "kind")),
    (Work(3), ("unknown work kind 3 (expected gather, bag, qbag, ttbag, robe, dhe or scatter_rows)", "kind")),  # type: ignore[arg-type]
    (Work("gather", "sum", **GATHER), ("a gather record takes no mode, got 'sum'", "mode")),
    (Work("bag", "", **BAG), ("a bag record needs a mode (sum, mean or max)", "mode")),
    (Work("bag", "avg", **BAG), ("unknown bag mode 'avg' (expected sum, mean or max)", "mode")),
    (Work("bag", "sum", **{**BAG, "table": None}), ("a bag record needs table=@n",)),
    (Work("gather", **GATHER, offsets=2), ("a gather record has no field 'offsets'", "offsets")),
    (Work("bag", "sum", **{**BAG, "output": 8}), ("symbol @8 is not declared", "output")),
    (Work("bag", "sum", **{**BAG, "output": -1}), ("symbol @-1 is not declared", "output")),
    (Work("bag", "sum", **{**BAG, "output": True}), ("symbol @True is not declared", "output")),
    (Work("bag", "sum", **{**BAG, "table": 1}), ("table=@1 must hold floats, @1 is i64", "table")),
    (Work("bag", "sum", **{**BAG, "indices": 4}), ("indices=@4 must hold integers, @4 is f32", "indices")),
    (Work("gather", **{**GATHER, "indices": 6}), ("indices=@6 must hold integers, @6 is bf16", "indices")),
    (Work("bag", "sum", **{**BAG, "offsets": 7}), ("offsets=@7 must have rank 1, @7 has rank 2", "offsets")),
    (Work("bag", "sum", **{**BAG, "table": 5}), ("table=@5 must have rank 2, @5 has rank 0", "table")),
    (Work("gather", **{**GATHER, "table": 5}), ("table=@5 must have rank 1 or more, @5 has rank 0", "table")),
    (Work("gather", **GATHER, padding_idx=1), ("a gather record has no field 'padding_idx'", "padding_idx")),
    (Work("bag", "sum", **BAG, negative="wrap"), ("a bag record has no field 'negative'", "negative")),
    (Work("bag", "sum", **BAG, padding_idx="x"), ("padding_idx must be an integer, got 'x'", "padding_idx")),  # type: ignore[arg-type]
    (Work("bag", "sum", **BAG, padding_idx=True), ("padding_idx must be an integer, got True", "padding_idx")),
    (Work("bag", "sum", **{**BAG, "empty": "none"}), ("empty must be zero or identity, got 'none'", "empty")),
    (Work("gather", **GATHER, negative="clip"), ("negative must be wrap, got 'clip'", "negative")),
    (Work("bag", "sum", **{**BAG, "empty": ""}), ("a bag record needs empty=zero or identity",)),
    (Work("bag", "mean", **BAG, weights=4), ("per-lookup weights need mode sum", "weights")),
])
def test_work_record_problems(work: Work, problem: tuple[str, ...] | None) -> None:
    assert work.problem(SYMS) == problem


def test_work_symbols_are_the_set_symbol_fields_in_order() -> None:
    assert Work("bag", "sum", output=3, offsets=2, indices=1, table=0, empty="zero").symbols() == {
        "table": 0, "indices": 1, "offsets": 2, "output": 3}
    assert list(Work("scatter_rows", "add", table=2, targets=1, data=0, output=0).symbols().items()) == [
        ("table", 2), ("targets", 1), ("data", 0), ("output", 0)]
    assert Work("gather").symbols() == {}


# ----------------------------------------------------------------------------- code generation


def compile_loop(body: str, args: str = "%x: memref<?xi64>", results: str = "memref<?xi64>",
                 ret: str = "%out") -> Program:
    """codegen of a one-function module at the loop level, checked like any other program."""
    text = f"module {{\n  func @main({args}) -> ({results}) {{\n{body}\n    return {ret}\n  }}\n}}\n"
    p = codegen(parse_module(text, "c.eir"))
    assert print_dae(parse_dae(print_dae(p), "c.dae")) == print_dae(p)  # what codegen emits is valid text
    return p


def run(p: Program, **inputs: np.ndarray) -> dict[str, np.ndarray]:
    return simulate(p, inputs, load_machine("default"))[0]


CONSTS = """    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %c2 = loop.const {value = 2} : index
    %n = loop.dim %x {axis = 0} : index
    %out = loop.alloc %n : memref<?xi64>"""


@pytest.mark.parametrize("pred, holds", [("lt", np.less), ("le", np.less_equal), ("eq", np.equal),
                                         ("ne", np.not_equal)])
def test_loop_if_on_each_predicate(pred: str, holds: np.ufunc) -> None:
    """out[i] = 10 + (x[i] pred 2): the body runs exactly when the predicate holds."""
    body = CONSTS + f"""
    %ten = loop.const {{value = 10}} : i64
    %eleven = loop.const {{value = 11}} : i64
    loop.for %c0, %n, %c1 (%i: index) {{
      loop.store %ten, %out, %i
      %v = loop.load %x, %i : i64
      loop.if %v, %c2 {{pred = "{pred}"}} () {{
        loop.store %eleven, %out, %i
      }}
    }}"""
    x = np.array([-7, 1, 2, 3, 2, 9, 0], dtype=np.int64)
    got = run(compile_loop(body), x=x)["output0"]
    np.testing.assert_array_equal(got, 10 + holds(x, 2).astype(np.int64))


def test_returned_values_that_are_not_computed_get_copied() -> None:
    """An input returned as it is, and one value returned twice: each output symbol gets its own copy."""
    body = CONSTS + """
    loop.for %c0, %n, %c1 (%i: index) {
      %v = loop.load %x, %i : i64
      %w = loop.addi %v, %c2 : i64
      loop.store %w, %out, %i
    }"""
    p = compile_loop(body, results="memref<?xi64>, memref<?xi64>, memref<?xi64>", ret="%out, %x, %out")
    assert [(s.kind, s.name) for s in p.symbols] == [("input", "x"), ("output", "output0"), ("output", "output1"),
                                                     ("output", "output2")]
    x = np.array([4, -1, 0], dtype=np.int64)
    got = run(p, x=x)
    np.testing.assert_array_equal(got["output0"], x + 2)
    np.testing.assert_array_equal(got["output1"], x)
    np.testing.assert_array_equal(got["output2"], x + 2)


def test_core_variables_keep_their_values() -> None:
    """Variable 0 is set from a constant, read into %g (which must keep 7 while the variable moves on), set
    from %s = %g + 1 in place, and from %t, computed from %s, while %s is still needed afterwards."""
    body = """    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %c3 = loop.const {value = 3} : index
    %c7 = loop.const {value = 7} : index
    %out = loop.alloc %c3, %c3 : memref<?x?xi64>
    loop.setvar %c7 {var = 0}
    %g = loop.getvar {var = 0} : index
    loop.for %c0, %c3, %c1 (%i: index) {
      %h = loop.getvar {var = 0} : index
      %s = loop.addi %h, %c1 : index
      loop.setvar %s {var = 0}
      %t = loop.addi %s, %c1 : index
      loop.setvar %t {var = 0}
      %a = loop.cast %g : i64
      loop.store %a, %out, %i, %c0
      %b = loop.cast %s : i64
      loop.store %b, %out, %i, %c1
      %e = loop.getvar {var = 0} : index
      %f = loop.cast %e : i64
      %c2 = loop.const {value = 2} : index
      loop.store %f, %out, %i, %c2
    }"""
    p = compile_loop(body, args="", results="memref<?x?xi64>")
    # Trip i (from 0): the variable enters at 7 + 2i, %s = 8 + 2i, and it leaves at 9 + 2i.
    want = np.array([[7, 8 + 2 * i, 9 + 2 * i] for i in range(3)], dtype=np.int64)
    np.testing.assert_array_equal(run(p)["output0"], want)


VECTOR_VAR = """    %one = loop.const {value = 1.0} : f32
    %two = loop.const {value = 2.0} : f32
    %u = loop.splat %one : vector<4xf32>
    loop.setvar %u {var = 0}
    %out = loop.alloc : memref<4xf32>
    %c0 = loop.const {value = 0} : index
    %m = loop.tailmask %c0, %c0 : vector<4xi1>
"""


@pytest.mark.parametrize("body, message", [
    (VECTOR_VAR + """    %w = loop.splat %two : vector<4xf32>
    %y = loop.addf %u, %w : vector<4xf32>
    loop.setvar %u {var = 0}""",
     "'loop.setvar' sets a vector variable from a value it cannot compute in place (no vector mov)"),
    (VECTOR_VAR + """    %g = loop.getvar {var = 0} : vector<4xf32>
    %w = loop.splat %two : vector<4xf32>
    loop.setvar %w {var = 0}
    loop.vstore %g, %out, %c0, %m""",
     "'loop.getvar' reads a vector variable that changes while the value is live (no vector mov)"),
    ("    %f = loop.const {value = 1.0} : f32\n    %s = loop.splat %f : f32", "'loop.splat' has no code generation"),
    ('    %a = loop.const {value = 1} : i64\n    %s = loop.cmpi %a, %a {pred = "lt"} : vector<4xi1>',
     "'loop.cmpi' has no vector code generation"),
    ("    %a = loop.const {value = 1.5} : f32\n    %s = loop.cast %a : i64",
     "'loop.cast' cast from f32 to i64 has no code generation yet"),
    ('    %t = param {name = "t"} : memref<5x4xf32>\n    %s = emb.gather %t, %x : memref<?x4xf32>',
     "'emb.gather' has no code generation (run the lowering passes first)"),
])
def test_what_codegen_refuses(body: str, message: str) -> None:
    text = f"module {{\n  func @main(%x: memref<?xi64>) -> (memref<?xi64>) {{\n{body}\n    return %x\n  }}\n}}\n"
    with pytest.raises(EmberError) as info:
        codegen(parse_module(text, "c.eir"))
    assert str(info.value).splitlines()[0].split(": error: ")[1] == message


def test_a_vector_variable_updated_in_place() -> None:
    """The accepted form: the value stored into a vector variable is made by the instruction just before."""
    body = """    %one = loop.const {value = 1.0} : f32
    %two = loop.const {value = 2.0} : f32
    %c0 = loop.const {value = 0} : index
    %c4 = loop.const {value = 4} : index
    %u = loop.splat %one : vector<4xf32>
    loop.setvar %u {var = 0}
    %out = loop.alloc : memref<4xf32>
    %m = loop.tailmask %c0, %c4 : vector<4xi1>
    %g = loop.getvar {var = 0} : vector<4xf32>
    %w = loop.splat %two : vector<4xf32>
    %y = loop.addf %g, %w : vector<4xf32>
    loop.setvar %y {var = 0}
    %h = loop.getvar {var = 0} : vector<4xf32>
    loop.vstore %h, %out, %c0, %m"""
    p = compile_loop(body, args="", results="memref<4xf32>")
    np.testing.assert_array_equal(run(p)["output0"], np.full(4, 3.0, np.float32))


GATHER_DLC = """module {
  func @main(%idx: memref<?xi64>) -> (memref<?x4xf32>) {
    %t = param {name = "t"} : memref<5x4xf32>
    %0 = loop.const {value = 0} : index
    %1 = loop.const {value = 1} : index
    %2 = loop.dim %idx {axis = 0} : index
    %3 = loop.const {value = 4} : index
    %out = loop.alloc %2 : memref<?x4xf32>
    dlc.offload () {
      %4 = dlc.tu %0, %2, %1 : stream<index>
      %5 = dlc.mem %idx, %4 : stream<i64>
      %6 = dlc.tu %0, %3, %1, %4 : stream<index>
      %7 = dlc.mem %t, %5, %6 : stream<f32>
      dlc.on %6, %7, %4, %6 {event = "ite", token = 1}
      dlc.on %4 {event = "end"}
    } () {
      dlc.case {id = 1} () {
        %8 = dlc.pop : f32
        %9 = dlc.pop : index
        %10 = dlc.pop : index
        loop.store %8, %out, %9, %10
      }
    }
    work %t, %idx, %out {op = "emb.gather"}
    return %out
  }
}
"""


def test_a_rule_without_a_token_pushes_and_dispatches_nothing() -> None:
    """`dlc.on` without a token becomes an `on` with none; the gather still computes table[idx]."""
    p = codegen(parse_module(GATHER_DLC, "g.eir"))
    assert p.access[0].body[-2:] == [Instr("on", [Reg("t", 1), "ite", [Reg("s", 1), Reg("t", 0), Reg("t", 1)], 1]),
                                     Instr("on", [Reg("t", 0), "end", []])]
    table = np.arange(20, dtype=np.float32).reshape(5, 4)
    p.data[[s.name for s in p.symbols].index("t")] = table
    idx = np.array([4, 0, 0, 2], dtype=np.int64)
    np.testing.assert_array_equal(run(disassemble(assemble(p), "g.bin"), idx=idx)["output0"], table[idx])


EMB = """module {{
  func @main({args}) -> (tensor<{shape}xf32>) {{
    {body}
    return %out
  }}
}}
"""


def records(args: str, body: str, shape: str = "?x4") -> tuple[list[Work], dict[str, int]]:
    """The work records of an emb-level function compiled at -O0, and its symbols' numbers by name."""
    from ember.passes import PRESETS, parse_pipeline, run_passes

    passes = parse_pipeline(PRESETS["O0"])
    run_passes(parse_module(EMB.format(args=args, body=body, shape=shape), "w.eir"), passes)
    p: Program = passes[-1].program  # type: ignore[attr-defined]
    validate(p)
    return p.work, {s.name: n for n, s in enumerate(p.symbols)}


def test_work_records_of_gathers() -> None:
    body = '%t = param {name = "t"} : tensor<5x4xf32>\n    %out = emb.gather %t, %i ATTRS: tensor<?x4xf32>'
    work, n = records("%i: tensor<?xi64>", body.replace("ATTRS", ""))
    assert work == [Work("gather", table=n["t"], indices=n["i"], output=n["output0"])]
    assert work[0].negative == ""
    work, n = records("%i: tensor<?xi64>", body.replace("ATTRS", '{negative = "wrap"} '))
    assert work == [Work("gather", table=n["t"], indices=n["i"], output=n["output0"], negative="wrap")]


def test_work_records_of_bags_and_scatters() -> None:
    body = ('%t = param {name = "t"} : tensor<5x4xf32>\n    %out = emb.bag %t, %i, %o, %w '
            '{mode = "sum", empty = "identity", padding_idx = 2} : tensor<?x4xf32>')
    work, n = records("%i: tensor<?xi64>, %o: tensor<?xi64>, %w: tensor<?xf32>", body)
    assert work == [Work("bag", "sum", table=n["t"], indices=n["i"], offsets=n["o"], weights=n["w"],
                         output=n["output0"], padding_idx=2, empty="identity")]
    body = '%out = emb.scatter_rows %d, %k, %u {reduction = "max"} : tensor<6x4xf32>'
    work, n = records("%d: tensor<6x4xf32>, %k: tensor<?xi64>, %u: tensor<?x4xf32>", body, shape="6x4")
    assert work == [Work("scatter_rows", "max", table=n["u"], targets=n["k"], data=n["d"], output=n["output0"])]


def test_a_work_op_must_name_stored_values() -> None:
    text = GATHER_DLC.replace("work %t, %idx, %out", "work %t, %2, %out")
    with pytest.raises(EmberError) as info:
        codegen(parse_module(text, "g.eir"))
    assert str(info.value).splitlines()[0].endswith("error: 'work' names %2, which has no symbol")


def test_a_counter_is_bumped_in_its_own_register() -> None:
    """`%s = %g + 1; setvar %s` with %s read again afterwards (and the variable not set again first): the add
    writes the variable's register itself, no copy; the values stored are still 1, 2, 3."""
    body = """    %c0 = loop.const {value = 0} : index
    %c1 = loop.const {value = 1} : index
    %c3 = loop.const {value = 3} : index
    loop.setvar %c0 {var = 0}
    %out = loop.alloc %c3 : memref<?xi64>
    loop.for %c0, %c3, %c1 (%i: index) {
      %g = loop.getvar {var = 0} : index
      %s = loop.addi %g, %c1 : index
      loop.setvar %s {var = 0}
      %w = loop.cast %s : i64
      loop.store %w, %out, %i
    }"""
    p = compile_loop(body, args="", results="memref<?xi64>")
    one = next(i.args[0] for i in p.code if isinstance(i, Instr) and i.op == "li" and i.args[1] == 1)
    var = next(i.args[0] for i in p.code if isinstance(i, Instr) and i.op == "mov")  # setvar %c0
    assert Instr("add", [var, var, one]) in p.code
    assert sum(1 for i in p.code if isinstance(i, Instr) and i.op == "add") == 2  # the counter and the loop's own
    np.testing.assert_array_equal(run(p)["output0"], [1, 2, 3])


def data_file(*entries: tuple[int, int, tuple[int, ...], bytes]) -> bytes:
    """A file with one symbol @0: param "w" f32 [2] and `data` entries (symbol, dtype string, shape, bytes); the
    strings are 1 "w", 2 "f32", 3 "<f4", 4 "<U4", 5 "<i4"."""
    syms = leb(0) + leb(0) + leb(1) + b"\x00" + leb(1) + leb(2) + leb(1) + leb(3)
    data = leb(len(entries)) + b"".join(leb(k) + leb(dt) + leb(len(shape)) + b"".join(leb(d) for d in shape) +
                                        leb(len(raw)) + raw for k, dt, shape, raw in entries)
    return file_of(strs=strs("", "w", "f32", "<f4", "<U4", "<i4"), syms=syms, data=data)


def test_data_entries_decode_little_endian() -> None:
    p = disassemble(data_file((0, 5, (2,), struct.pack("<ii", -3, 70000))), "m.bin")
    assert p.data[0].dtype == np.int32 and p.data[0].tolist() == [-3, 70000]
    empty = disassemble(data_file((0, 3, (0, 2), b"")), "m.bin").data[0]
    assert empty.shape == (0, 2) and empty.dtype == np.float32


@pytest.mark.parametrize("entries, message", [
    ([(0, 3, (2,), bytes(8)), (0, 3, (2,), bytes(8))], "malformed 'data' section: data for @0 given twice"),
    ([(0, 4, (2,), bytes(32))], "malformed 'data' section: unsupported dtype '<U4'"),
    ([(0, 3, (2,), bytes(4))], "malformed 'data' section: data of @0 has 4 bytes, its shape (2,) needs 8"),
    ([(0, 3, (3, 2), bytes(28))], "malformed 'data' section: data of @0 has 28 bytes, its shape (3, 2) needs 24"),
    ([(0, 9, (2,), bytes(8))], "malformed 'data' section: string index 9 out of range"),
    ([(5, 3, (2,), bytes(8))], "data of symbol 5: data for a symbol that is not declared"),
])
def test_data_damage_is_named(entries: list[tuple[int, int, tuple[int, ...], bytes]], message: str) -> None:
    assert bin_error(data_file(*entries)) == f"m.bin: error: {message}"


@pytest.mark.parametrize("value", ["18446744073709551616", "-9223372036854775809", "[1, 18446744073709551616]"])
def test_a_host_attribute_outside_int64_is_refused_where_it_is_written(value: str) -> None:
    """Found by the fuzzer's long run: such a program assembled from text but could not be written as a .bin."""
    text = f""".dae 2
.sym @0 input "x" f32 [2, 2]
.sym @1 output "y" f32 [2, 2]
.code
  host "Transpose", [@0], [@1], {{perm = {value}}}
  halt
.end
"""
    with pytest.raises(EmberError, match="h.dae:5:") as e:
        parse_dae(text, "h.dae")
    assert "outside the 64-bit integers an ONNX attribute (and the binary) can hold" in str(e.value)


def test_a_power_of_two_multiplier_or_divisor_is_an_immediate() -> None:
    """The core times a multiply, divide or remainder by a power of two as the shift or mask a compiler emits
    (isa.uops_of), so codegen passes such a constant as an immediate; any other constant stays a register."""
    body = CONSTS + """
    %c8 = loop.const {value = 8} : i64
    %c6 = loop.const {value = 6} : i64
    loop.for %c0, %n, %c1 (%i: index) {
      %v = loop.load %x, %i : i64
      %a = loop.muli %c8, %v : i64
      %b = loop.muli %a, %c6 : i64
      %d = loop.divi %b, %c8 : i64
      %r = loop.remi %v, %c6 : i64
      %s = loop.addi %d, %r : i64
      loop.store %s, %out, %i
    }"""
    p = compile_loop(body)
    ops = {i.op: i.args for i in p.code if isinstance(i, Instr) and i.op in ("div", "rem")}
    muls = [i.args for i in p.code if isinstance(i, Instr) and i.op == "mul"]
    assert [type(a[1]).__name__ for a in muls] == ["int", "Reg"] and muls[0][1] == 8
    assert [type(a[2]).__name__ for a in muls] == ["Reg", "Reg"]
    assert ops["div"][2] == 8 and isinstance(ops["rem"][2], Reg)
    x = np.array([5, -3, 0, 7], dtype=np.int64)
    np.testing.assert_array_equal(run(p, x=x)["output0"], x * 8 * 6 // 8 + x % 6)


def test_a_vector_select_picks_lanes_by_its_mask() -> None:
    body = """    %one = loop.const {value = 1.0} : f32
    %two = loop.const {value = 2.0} : f32
    %c0 = loop.const {value = 0} : index
    %c3 = loop.const {value = 3} : index
    %c4 = loop.const {value = 4} : index
    %out = loop.alloc : memref<4xf32>
    %m = loop.tailmask %c0, %c3 : vector<4xi1>
    %all = loop.tailmask %c0, %c4 : vector<4xi1>
    %a = loop.splat %one : vector<4xf32>
    %b = loop.splat %two : vector<4xf32>
    %y = loop.select %m, %a, %b : vector<4xf32>
    loop.vstore %y, %out, %c0, %all"""
    p = compile_loop(body, args="", results="memref<4xf32>")
    assert any(isinstance(i, Instr) and i.op == "vsel" for i in p.code)
    np.testing.assert_array_equal(run(p)["output0"], np.array([1, 1, 1, 2], np.float32))


def test_work_records_of_robe_bags() -> None:
    body = ('%a = param {name = "a"} : tensor<64xf32>\n    %out = emb.robe %a, %i, %o {block = 2, mode = "MODE", '
            'prime = 2038074743, hash = [3, 5, 7], sign = [0, 0, 1]} : tensor<?x4xf32>')
    for mode in ("sum", "mean"):
        work, n = records("%i: tensor<?xi64>, %o: tensor<?xi64>", body.replace("MODE", mode))
        assert work == [Work("robe", mode, table=n["a"], indices=n["i"], offsets=n["o"], output=n["output0"],
                             block=2)]


def test_the_binary_format_refuses_a_program_past_its_size_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """The header holds the file's size in 32 bits: a larger program is one error, not a wrapped size."""
    p = parse_dae(EXAMPLE_TEXT, "x.dae")
    assert disassemble(assemble(p), "m.bin") == p
    monkeypatch.setattr(binary, "_MAX_FILE", len(assemble(p)) - 1)
    with pytest.raises(EmberError, match=r"^error: program too large for the binary format \(over 4 GiB\)$"):
        assemble(p)


def test_attributes_as_deep_as_validate_allows_round_trip() -> None:
    """validate bounds an attribute's nesting (32 lists) well below what the decoder takes (64), so every valid
    program encodes and decodes."""
    deep = "[" * 32 + "1" + "]" * 32
    p = parse_dae(EXAMPLE_TEXT.replace("transB = 1", f"t = {deep}"), "x.dae")
    assert disassemble(assemble(p), "m.bin") == p
    with pytest.raises(EmberError, match="attribute 't' is nested too deeply"):
        parse_dae(EXAMPLE_TEXT.replace("transB = 1", f"t = [{deep}]"), "x.dae")


def test_each_decoded_instruction_owns_its_attributes() -> None:
    """Two instructions may name the same attribute dict of the table; decoding gives each its own copy, lists
    inside included, so a tool that edits one instruction's attributes changes no other."""
    section = strs("", "host", "Op", "k", dicts=attr_dict((3, bytes([T_LIST]) + leb(1) + bytes([T_INT]) + zigzag(1))),
                   ndicts=1)
    one = b"\x01" + leb(1) + leb(4) + bytes([T_STR]) + leb(2) + bytes([T_LIST]) + leb(0) + bytes([T_LIST]) + \
        leb(0) + bytes([T_DICT]) + leb(0)
    first, second = disassemble(file_of(strs=section, code=leb(2) + one + one), "m.bin").code
    assert first == second == Instr("host", ["Op", [], [], {"k": [1]}])
    first.args[3]["k"].append(9)
    assert second.args[3] == {"k": [1]}


def test_a_typed_read_needs_an_axis_to_read_along() -> None:
    text = '.dae 2\n.sym @0 param "b" u8 []\n.code\n  ld.f32 f0, @0[]\n  halt\n.end\n'
    with pytest.raises(EmberError) as info:
        parse_dae(text, "x.dae")
    assert str(info.value) == ("x.dae:4:14: error: 'ld.f32' reads along the last axis, and @0 has rank 0\n"
                               "  ld.f32 f0, @0[]\n             ^")


def test_built_programs_name_what_is_wrong_without_source() -> None:
    p = parse_dae(EXAMPLE_TEXT, "x.dae")
    host = next(i for i in p.code if isinstance(i, Instr) and i.op == "host")
    n = p.code.index(host)
    host.args[3] = {"bad key": 1}
    with pytest.raises(EmberError, match=rf"^m.bin: error: code item {n} \('host'\): bad attribute name \"bad key\"$"):
        validate(p, "m.bin")
    p = parse_dae(EXAMPLE_TEXT, "x.dae")
    p.access.append("junk")  # type: ignore[arg-type]
    with pytest.raises(EmberError, match=r"^m.bin: error: access program \?: not an access program: str$"):
        validate(p, "m.bin")


def test_a_section_may_not_reach_into_the_checksum() -> None:
    data = bytearray(file_of())
    entry = 16 + 16 * SECTION_ORDER.index("data")  # after the 16-byte header; name, offset, length
    struct.pack_into("<I", data, entry + 12, struct.unpack_from("<I", data, entry + 12)[0] + 4)
    struct.pack_into("<I", data, len(data) - 4, zlib.crc32(bytes(data[:-4])))
    assert bin_error(bytes(data)) == "m.bin: error: bad section table (section 'data' lies outside the file)"


@pytest.mark.parametrize(("edit", "message"), [
    (("alloc @3, [r1, 8]", "alloc @3, [r1]"), "x.dae:24:14: error: @3 has rank 2 but 'alloc' gives 1 extents"),
])
def test_example_edits_are_named(edit: tuple[str, str], message: str) -> None:
    with pytest.raises(EmberError) as info:
        parse_dae(EXAMPLE_TEXT.replace(*edit), "x.dae")
    assert str(info.value).splitlines()[0] == message


@pytest.mark.parametrize(("line", "message"), [
    ("ld.f32 r0, @0[0]", "'ld.f32' reads a float, so it needs an f register, got r0"),
    ("ld.i32 f0, @0[0]", "'ld.i32' reads an integer, so it needs an r register, got f0"),
])
def test_a_typed_read_goes_to_a_register_of_its_kind(line: str, message: str) -> None:
    with pytest.raises(EmberError) as info:
        parse_dae(f'.dae 2\n.sym @0 param "b" u8 [8]\n.code\n  {line}\n  halt\n.end\n', "x.dae")
    assert str(info.value).splitlines()[0] == f"x.dae:4:10: error: {message}"


def test_built_access_programs_and_instructions_are_checked() -> None:
    p = parse_dae(EXAMPLE_TEXT, "x.dae")
    p.access[0] = Access("9a", p.access[0].params, p.access[0].body)
    with pytest.raises(EmberError, match=r'^m.bin: error: access program 9a: bad access program name "9a"$'):
        validate(p, "m.bin")
    p = parse_dae(EXAMPLE_TEXT, "x.dae")
    n = next(k for k, item in enumerate(p.code) if isinstance(item, Instr) and item.op == "halt")
    p.code[n] = Instr("halt", ("x",))  # type: ignore[arg-type]  (operands must be a list)
    with pytest.raises(EmberError, match=rf"^m.bin: error: code item {n} \('halt'\): not an instruction$"):
        validate(p, "m.bin")


@pytest.mark.parametrize(("first", "last"), [("A1", "A0"), ("A0", "A1")])
def test_a_register_only_a_later_programs_callback_writes_is_unwritten(first: str, last: str) -> None:
    """r5 is written only by the callback of the program that runs second; the read between the two runs has no
    path from the start that writes it, whichever program's callback comes last in the code (the flow graph's
    nodes for returning from each program's dispatcher must not be taken for code items)."""
    text = f""".dae 2
.sym @0 input "x" i64 [4]
.access A0 0
  tu t0, 0, 2, 1
  on t0, ite, [], 1
.end
.access A1 0
  tu t0, 0, 2, 1
  on t0, ite, [], 1
.end
.code
  run {first}
  add r6, r5, 1
  run {last}
  halt
{first}.1:
  ret
{last}.1:
  li r5, 7
  ret
.end
"""
    with pytest.raises(EmberError) as info:
        parse_dae(text, "x.dae")
    assert str(info.value).splitlines()[0] == (
        "x.dae:13:11: error: r5 is read here but no path from the start of the program writes it")
