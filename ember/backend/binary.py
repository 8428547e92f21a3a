"""The `.bin` form of a DAE `Program`: compact, versioned, checksummed, and self-contained.

Layout (all integers little endian):

    magic    8 bytes  b"EMBERBIN"
    version  u16      FORMAT_VERSION
    count    u16      number of sections
    length   u32      total file length, checksum included (so truncation is named as such)
    table    count x (name 8 bytes NUL-padded, offset u32, length u32)
    sections syms, work, access, code, strs, data (each fully consumed by its decoder)
    crc      u32      zlib.crc32 of everything before it

Inside sections numbers are LEB128 varints (signed ones zigzag-encoded), floats are f64, and every
string (names, opcodes, labels) is an index into the `strs` string table, which also holds the
host attribute dicts.  Operands are tagged values, so the decoder needs no opcode table and an
opcode added later cannot shift the meaning of old files.  For the same reason a work record is
its kind and mode, then the fields it sets as (name, tagged value) pairs.  The decoder trusts
nothing: each read is bounds-checked and the decoded program goes through the same `validate` as
`.dae` text, so whatever `disassemble` accepts prints as valid text.
"""

from __future__ import annotations

import copy
import math
import numbers
import struct
import zlib
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import numpy as np

from ..ir.diagnostics import EmberError
from ..ir.printer import DenseAttr
from ..ir.types import ScalarType, ShapedType
from .dae import FORMAT_VERSION, WORK_FIELDS, Access, Instr, Label, Mem, Program, Reg, Symbol, SymRef, Work
from .dae_check import SYMBOL_KINDS, validate

MAGIC = b"EMBERBIN"
SECTIONS = ("syms", "work", "access", "code", "strs", "data")
_HEAD = struct.Struct("<8sHHI")
_ENTRY = struct.Struct("<8sII")
_U32 = struct.Struct("<I")
_F64 = struct.Struct("<d")

_REG_CLASSES = "rfpstv"  # append only: the index is stored
_SHAPED_KINDS = ("tensor", "memref", "vector")
(T_REG, T_SYM, T_MEM, T_LABEL, T_INT, T_FLOAT, T_STR, T_LIST, T_DICT, T_TRUE, T_FALSE, T_DENSE) = range(12)
# Array element types a file may hold: little-endian numbers only (never object dtypes).
_DTYPES = frozenset({"|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8",
                     "<c8", "<c16"})
_BF16 = "bf16"  # numpy spells bfloat16 as opaque void ("<V2"), so the file names it itself
_DTYPES = _DTYPES | {_BF16}
_MAX_DEPTH = 64  # nesting of lists in operands and attributes
_MAX_FILE = 0xFFFFFFFF  # the header's 32-bit size field


def _bf16() -> np.dtype:
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


class _Corrupt(Exception):
    """A decoding failure inside a section; turned into an EmberError naming file and section."""


# ----------------------------------------------------------------------------- writing


class _Writer:
    """An append-only byte buffer with the few encodings the format uses."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def u8(self, v: int) -> None:
        self.buf.append(v)

    def uint(self, v: int) -> None:
        """LEB128: small numbers (indices, counts, registers) take one byte."""
        if not 0 <= v < 1 << 64:
            raise EmberError(f"cannot encode {v}: outside the 64-bit range of the binary format")
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def sint(self, v: int) -> None:
        """Zigzag, so small negative immediates stay short too."""
        if not -(1 << 63) <= v < 1 << 63:
            raise EmberError(f"cannot encode {v}: outside the 64-bit range of the binary format")
        self.uint((v << 1) ^ (v >> 63))

    def f64(self, v: float) -> None:
        self.buf += _F64.pack(v)

    def raw(self, b: bytes) -> None:
        self.buf += b


class _Encoder:
    """Encodes the sections of one program, collecting strings and attribute dicts as it goes."""

    def __init__(self) -> None:
        self.strings: dict[str, int] = {}
        self.attrs = _Writer()
        self.nattrs = 0

    def s(self, text: str) -> int:
        """The string-table index of `text`: each distinct string is stored once."""
        if text not in self.strings:
            self.strings[text] = len(self.strings)
        return self.strings[text]

    def value(self, w: _Writer, v: Any, depth: int = 0) -> None:
        """One tagged operand or attribute value (validate has bounded the nesting well below _MAX_DEPTH)."""
        if isinstance(v, Reg):
            w.u8(T_REG)
            w.u8(_REG_CLASSES.index(v.cls))
            w.uint(v.n)
        elif isinstance(v, SymRef):
            w.u8(T_SYM)
            w.uint(v.n)
        elif isinstance(v, Mem):
            w.u8(T_MEM)
            w.uint(v.sym)
            w.uint(len(v.index))
            for i in v.index:
                self.value(w, i, depth + 1)
        elif isinstance(v, Label):
            w.u8(T_LABEL)
            w.uint(self.s(v.name))
        elif isinstance(v, bool):
            w.u8(T_TRUE if v else T_FALSE)
        elif isinstance(v, numbers.Integral):
            w.u8(T_INT)
            w.sint(int(v))
        elif isinstance(v, numbers.Real):
            w.u8(T_FLOAT)
            w.f64(float(v))
        elif isinstance(v, str):
            w.u8(T_STR)
            w.uint(self.s(v))
        elif isinstance(v, list | tuple):
            w.u8(T_LIST)
            w.uint(len(v))
            for x in v:
                self.value(w, x, depth + 1)
        elif isinstance(v, dict) and depth == 0:
            w.u8(T_DICT)
            w.uint(self.attr_dict(v))
        elif isinstance(v, DenseAttr):
            w.u8(T_DENSE)
            w.uint(self.s(v.type.kind))
            w.uint(0 if v.type.shape is None else 1)
            w.uint(len(v.type.shape or ()))
            for d in v.type.shape or ():
                w.uint(0 if d is None else d + 1)
            w.uint(self.s(v.type.elem.name))
            self.value(w, v.values, depth + 1)
        else:
            raise EmberError(f"cannot encode operand {v!r}")

    def attr_dict(self, d: dict[str, Any]) -> int:
        """Append a host attribute dict to the table in `strs`; returns its index."""
        self.attrs.uint(len(d))
        for k, v in d.items():
            self.attrs.uint(self.s(k))
            self.value(self.attrs, v, 1)
        self.nattrs += 1
        return self.nattrs - 1

    def instr(self, w: _Writer, ins: Instr) -> None:
        """Opcode (as a string index, suffix included), operand count, tagged operands."""
        w.uint(self.s(ins.op))
        w.uint(len(ins.args))
        for a in ins.args:
            self.value(w, a)

    def syms(self, p: Program) -> bytes:
        """Weights name, opset, then the symbol table (extents stored +1, 0 meaning '?')."""
        w = _Writer()
        w.uint(self.s(p.weights))
        w.uint(p.opset)
        w.uint(len(p.symbols))
        for s in p.symbols:
            w.u8(SYMBOL_KINDS.index(s.kind))
            w.uint(self.s(s.name))
            w.uint(self.s(s.dtype))
            w.uint(len(s.shape))
            for d in s.shape:
                w.uint(0 if d is None else d + 1)
        return bytes(w.buf)

    def work(self, p: Program) -> bytes:
        """Each work record: kind, mode, then its set fields as (name, tagged value): symbols as SymRef."""
        w = _Writer()
        w.uint(len(p.work))
        for rec in p.work:
            w.uint(self.s(rec.kind))
            w.uint(self.s(rec.mode))
            fields = {f: getattr(rec, f) for f in WORK_FIELDS if getattr(rec, f) not in (None, "")}
            w.uint(len(fields))
            for f, v in fields.items():
                w.uint(self.s(f))
                self.value(w, SymRef(v) if WORK_FIELDS[f] == "sym" else v, 1)
        return bytes(w.buf)

    def access(self, p: Program) -> bytes:
        """Each access program: name, parameter count, instructions."""
        w = _Writer()
        w.uint(len(p.access))
        for a in p.access:
            w.uint(self.s(a.name))
            w.uint(a.params)
            w.uint(len(a.body))
            for ins in a.body:
                self.instr(w, ins)
        return bytes(w.buf)

    def code(self, p: Program) -> bytes:
        """The execute-unit program; labels stay items in place, as in the text."""
        w = _Writer()
        w.uint(len(p.code))
        for item in p.code:
            if isinstance(item, Label):
                w.u8(0)
                w.uint(self.s(item.name))
            else:
                w.u8(1)
                self.instr(w, item)
        return bytes(w.buf)

    def data(self, p: Program) -> bytes:
        """Param arrays as dtype, shape and raw little-endian bytes, in symbol order."""
        w = _Writer()
        w.uint(len(p.data))
        for k in sorted(p.data):
            a = np.asarray(p.data[k])
            dt = a.dtype.newbyteorder("<")
            code = _BF16 if a.dtype == _bf16() else dt.str
            if code not in _DTYPES:
                raise EmberError(f"cannot store the data of @{k}: unsupported dtype {a.dtype}")
            w.uint(k)
            w.uint(self.s(code))
            w.uint(a.ndim)
            for d in a.shape:
                w.uint(d)
            raw = np.ascontiguousarray(a, dtype=dt).tobytes()
            w.uint(len(raw))
            w.raw(raw)
        return bytes(w.buf)

    def strs(self) -> bytes:
        """The string table, then the attribute dicts (which refer to it)."""
        w = _Writer()
        w.uint(len(self.strings))
        for text in self.strings:  # dicts keep insertion order, which is the index order
            b = text.encode("utf-8", "surrogatepass")
            w.uint(len(b))
            w.raw(b)
        w.uint(self.nattrs)
        w.raw(bytes(self.attrs.buf))
        return bytes(w.buf)


def assemble(p: Program) -> bytes:
    """Encode a valid Program (checked first, like parsed text) as `.bin` bytes."""
    validate(p)
    enc = _Encoder()
    body = {"syms": enc.syms(p), "work": enc.work(p), "access": enc.access(p), "code": enc.code(p),
            "data": enc.data(p)}
    body["strs"] = enc.strs()  # last: the other sections add strings and attribute dicts
    offset = _HEAD.size + _ENTRY.size * len(SECTIONS)
    total = offset + sum(len(b) for b in body.values()) + _U32.size
    if total > _MAX_FILE:
        raise EmberError("program too large for the binary format (over 4 GiB)")
    out = bytearray(_HEAD.pack(MAGIC, FORMAT_VERSION, len(SECTIONS), total))
    for name in SECTIONS:
        out += _ENTRY.pack(name.encode(), offset, len(body[name]))
        offset += len(body[name])
    for name in SECTIONS:
        out += body[name]
    out += _U32.pack(zlib.crc32(out))
    return bytes(out)


# ----------------------------------------------------------------------------- reading


class _Reader:
    """Bounds-checked reads from one section."""

    def __init__(self, buf: bytes):
        self.buf = buf
        self.pos = 0

    def left(self) -> int:
        """Bytes not yet read."""
        return len(self.buf) - self.pos

    def raw(self, n: int) -> bytes:
        """`n` bytes, or _Corrupt if the section ends first."""
        if n > self.left():
            raise _Corrupt("unexpected end of section")
        self.pos += n
        return self.buf[self.pos - n:self.pos]

    def u8(self) -> int:
        """One byte (tags, kinds, register classes)."""
        if self.pos >= len(self.buf):
            raise _Corrupt("unexpected end of section")
        self.pos += 1
        return self.buf[self.pos - 1]

    def uint(self) -> int:
        """A LEB128 number, at most 64 bits, so a corrupt run of 0x80s cannot grow without end."""
        buf, pos = self.buf, self.pos
        v = shift = 0
        while True:
            if pos >= len(buf):
                raise _Corrupt("unexpected end of section")
            b = buf[pos]
            pos += 1
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift >= 64:
                raise _Corrupt("number too long")
        if v >= 1 << 64:
            raise _Corrupt("number out of range")
        self.pos = pos
        return v

    def sint(self) -> int:
        """A zigzag-encoded signed number."""
        v = self.uint()
        return (v >> 1) ^ -(v & 1)

    def count(self) -> int:
        """A number of items to follow; each takes at least one byte, which bounds it."""
        n = self.uint()
        if n > self.left():
            raise _Corrupt(f"count {n} exceeds the section")
        return n

    def f64(self) -> float:
        """An IEEE double, bit for bit (-0.0, inf and NaN included)."""
        return float(_F64.unpack(self.raw(_F64.size))[0])


class _Decoder:
    """Rebuilds the Program; every index and tag it reads is checked before use."""

    def __init__(self) -> None:
        self.strings: list[str] = []
        self.attrs: list[dict[str, Any]] = []

    def s(self, r: _Reader) -> str:
        """A string by its table index."""
        i = r.uint()
        if i >= len(self.strings):
            raise _Corrupt(f"string index {i} out of range")
        return self.strings[i]

    def dims(self, r: _Reader) -> tuple[int | None, ...]:
        """A shape, extents stored +1 so that 0 can mean '?'."""
        return tuple(None if d == 0 else d - 1 for d in (r.uint() for _ in range(r.count())))

    def value(self, r: _Reader, depth: int = 0) -> Any:
        """One tagged value; dicts only at the top of an operand, as in the text format."""
        if depth > _MAX_DEPTH:
            raise _Corrupt("values nested too deeply")
        tag = r.u8()
        if tag == T_REG:
            cls = r.u8()
            if cls >= len(_REG_CLASSES):
                raise _Corrupt(f"bad register class {cls}")
            return Reg(_REG_CLASSES[cls], r.uint())
        if tag == T_SYM:
            return SymRef(r.uint())
        if tag == T_MEM:
            sym = r.uint()
            index = tuple(self.value(r, depth + 1) for _ in range(r.count()))
            if not all(isinstance(i, Reg) or (isinstance(i, int) and not isinstance(i, bool)) for i in index):
                raise _Corrupt("bad memory index")
            return Mem(sym, index)
        if tag == T_LABEL:
            return Label(self.s(r))
        if tag == T_INT:
            return r.sint()
        if tag == T_FLOAT:
            return r.f64()
        if tag == T_STR:
            return self.s(r)
        if tag == T_LIST:
            return [self.value(r, depth + 1) for _ in range(r.count())]
        if tag == T_DICT and depth == 0:
            i = r.uint()
            if i >= len(self.attrs):
                raise _Corrupt(f"attribute dict index {i} out of range")
            return copy.deepcopy(self.attrs[i])
        if tag in (T_TRUE, T_FALSE):
            return tag == T_TRUE
        if tag == T_DENSE:
            return self.dense(r, depth)
        raise _Corrupt(f"bad value tag {tag}")

    def dense(self, r: _Reader, depth: int) -> DenseAttr:
        """A dense attribute: its shaped type piece by piece, then its values."""
        kind = self.s(r)
        ranked = r.uint()
        shape = self.dims(r)
        elem = self.s(r)
        if kind not in _SHAPED_KINDS or ranked > 1 or (not ranked and shape):
            raise _Corrupt("bad dense attribute type")
        try:
            ty = ShapedType(kind, shape if ranked else None, ScalarType(elem))
        except ValueError:
            raise _Corrupt(f"bad element type {elem!r}") from None
        values = self.value(r, depth + 1)
        if not isinstance(values, list):
            raise _Corrupt("bad dense attribute values")
        return DenseAttr(values, ty)

    def instr(self, r: _Reader) -> Instr:
        """An instruction; validate() later checks the opcode and operands against the instruction table."""
        op = self.s(r)
        return Instr(op, [self.value(r) for _ in range(r.count())])

    def strs(self, r: _Reader) -> None:
        """Read first: every other section refers to strings and attribute dicts."""
        for _ in range(r.count()):
            try:
                self.strings.append(r.raw(r.uint()).decode("utf-8", "surrogatepass"))
            except UnicodeDecodeError:
                raise _Corrupt("a string is not valid UTF-8") from None
        for _ in range(r.count()):
            d: dict[str, Any] = {}
            for _ in range(r.count()):
                key = self.s(r)
                if key in d:
                    raise _Corrupt(f"attribute {key!r} given twice")
                d[key] = self.value(r, 1)
            self.attrs.append(d)

    def syms(self, r: _Reader, p: Program) -> None:
        """Weights name, opset and the symbol table."""
        p.weights = self.s(r)
        p.opset = r.uint()
        for _ in range(r.count()):
            kind = r.u8()
            if kind >= len(SYMBOL_KINDS):
                raise _Corrupt(f"bad symbol kind {kind}")
            name, dtype = self.s(r), self.s(r)
            p.symbols.append(Symbol(SYMBOL_KINDS[kind], name, dtype, self.dims(r)))

    def work(self, r: _Reader, p: Program) -> None:
        """The work records: each field a known name, given once, with a value of its form (validate then
        holds the record to its kind and the symbol table)."""
        forms = {"sym": SymRef, "int": int, "name": str}
        for _ in range(r.count()):
            kind, mode = self.s(r), self.s(r)
            fields: dict[str, Any] = {}
            for _ in range(r.count()):
                name = self.s(r)
                if name not in WORK_FIELDS:
                    raise _Corrupt(f"unknown work field {name!r}")
                if name in fields:
                    raise _Corrupt(f"work field {name!r} given twice")
                v = self.value(r, 1)
                if not isinstance(v, forms[WORK_FIELDS[name]]) or isinstance(v, bool):
                    raise _Corrupt(f"bad value for work field {name!r}")
                fields[name] = v.n if isinstance(v, SymRef) else v
            p.work.append(Work(kind, mode, **fields))

    def access(self, r: _Reader, p: Program) -> None:
        """The access programs."""
        for _ in range(r.count()):
            a = Access(self.s(r), r.uint())
            a.body = [self.instr(r) for _ in range(r.count())]
            p.access.append(a)

    def code(self, r: _Reader, p: Program) -> None:
        """The execute-unit items: 0 = label, 1 = instruction."""
        for _ in range(r.count()):
            kind = r.u8()
            if kind == 0:
                p.code.append(Label(self.s(r)))
            elif kind == 1:
                p.code.append(self.instr(r))
            else:
                raise _Corrupt(f"bad code item kind {kind}")

    def data(self, r: _Reader, p: Program) -> None:
        """Param arrays; the byte count must match dtype and shape exactly before numpy sees it."""
        for _ in range(r.count()):
            k = r.uint()
            if k in p.data:
                raise _Corrupt(f"data for @{k} given twice")
            dt = self.s(r)
            if dt not in _DTYPES:
                raise _Corrupt(f"unsupported dtype {dt!r}")
            shape = tuple(r.uint() for _ in range(r.count()))
            dtype = _bf16() if dt == _BF16 else np.dtype(dt)
            raw = r.raw(r.uint())
            if len(raw) != math.prod(shape) * dtype.itemsize:
                raise _Corrupt(f"data of @{k} has {len(raw)} bytes, its shape {shape} needs "
                               f"{math.prod(shape) * dtype.itemsize}")
            p.data[k] = np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("=")).reshape(shape)


def _table(data: bytes, count: int, bad: Callable[[str], EmberError]) -> dict[str, bytes]:
    """The sections named by the table, each checked to lie inside the file and not overlap."""
    start = _HEAD.size + count * _ENTRY.size
    end = len(data) - _U32.size
    if start > end:
        raise bad("bad section table (it runs past the end of the file)")
    spans: dict[str, tuple[int, int]] = {}
    for i in range(count):
        raw, off, length = _ENTRY.unpack_from(data, _HEAD.size + i * _ENTRY.size)
        name = raw.rstrip(b"\0").decode("ascii", "replace")
        if name not in SECTIONS:
            raise bad(f"bad section table (unknown section {name!r})")
        if name in spans:
            raise bad(f"bad section table (section '{name}' given twice)")
        if off < start or off + length > end:
            raise bad(f"bad section table (section '{name}' lies outside the file)")
        spans[name] = (off, off + length)
    missing = [n for n in SECTIONS if n not in spans]
    if missing:
        raise bad(f"bad section table (missing section '{missing[0]}')")
    ordered = sorted(spans.values())
    if any(a[1] > b[0] for a, b in pairwise(ordered)):
        raise bad("bad section table (sections overlap)")
    return {name: data[a:b] for name, (a, b) in spans.items()}


def disassemble(data: bytes, filename: str) -> Program:
    """Decode `.bin` bytes; anything wrong with them is an EmberError naming `filename`."""

    def bad(msg: str) -> EmberError:
        return EmberError(msg, filename)

    data = bytes(data)
    if not data:
        raise bad("file is empty")
    if len(data) < _HEAD.size and MAGIC.startswith(data[: len(MAGIC)]):
        raise bad(f"file is truncated ({len(data)} bytes, shorter than the header)")
    if data[: len(MAGIC)] != MAGIC:
        raise bad("not an ember binary (bad magic number)")
    _, version, count, total = _HEAD.unpack_from(data)
    if version != FORMAT_VERSION:
        raise bad(f"unsupported format version {version} (this ember reads version {FORMAT_VERSION})")
    if len(data) < total:
        raise bad(f"file is truncated ({len(data)} of {total} bytes)")
    if total < _HEAD.size + _U32.size:
        raise bad(f"bad header: a file of {total} bytes cannot hold a program (file is corrupted)")
    if len(data) != total:
        raise bad(f"file is {len(data)} bytes but its header says {total} (file is corrupted)")
    if zlib.crc32(data[:-_U32.size]) != _U32.unpack_from(data, len(data) - _U32.size)[0]:
        raise bad("bad checksum (file is corrupted)")
    sections = _table(data, count, bad)
    p, dec = Program(), _Decoder()
    steps = [("strs", dec.strs), ("syms", lambda r: dec.syms(r, p)), ("work", lambda r: dec.work(r, p)),
             ("access", lambda r: dec.access(r, p)),
             ("code", lambda r: dec.code(r, p)), ("data", lambda r: dec.data(r, p))]
    for name, step in steps:
        r = _Reader(sections[name])
        try:
            step(r)
            if r.left():
                raise _Corrupt(f"{r.left()} unexpected bytes at its end")
        except _Corrupt as e:
            raise bad(f"malformed '{name}' section: {e}") from None
        except (ValueError, TypeError, OverflowError) as e:  # a safety net: no other exception may escape
            raise bad(f"malformed '{name}' section: {e}") from None
    validate(p, filename)
    return p
