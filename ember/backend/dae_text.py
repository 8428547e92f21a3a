"""Read and write `.dae` assembly text, the human-readable form of a DAE `Program`.

The grammar (grammars/dae.lark) only splits lines into directives, labels and instructions with
generic operands; this module gives operands their meaning from the `OPCODES` signatures.  All
program rules (operand kinds, declared symbols, labels, registers per unit, streams defined before
use) live in `validate`, which works on a `Program` from anywhere: the text parser runs it with the
source positions it recorded, the binary reader and the assembler without, so `.dae` and `.bin`
accept exactly the same programs and every mistake is reported once, where it is.
"""

from __future__ import annotations

import json
import numbers
import re
from collections.abc import Iterator
from typing import Any, NoReturn

from lark import Token, Tree
from lark.exceptions import UnexpectedInput, UnexpectedToken

from ..ir.diagnostics import EmberError, Loc
from ..ir.parser import grammar, syntax_error
from ..ir.printer import DenseAttr, format_attrs, format_float
from ..ir.types import SCALARS, ScalarType, ShapedType
from .dae import (
    ALU_OPS,
    EVENTS,
    FORMAT_VERSION,
    KIND_DESC,
    OPCODES,
    WORK_FIELDS,
    WORK_KINDS,
    Access,
    Instr,
    Label,
    Mem,
    Program,
    Reg,
    Slot,
    Symbol,
    SymRef,
    Work,
    arity,
    arity_message,
    one_of,
    slot_desc,
    slots_for,
    unknown_opcode,
)

SYMBOL_KINDS = ("param", "input", "output", "temp")
ACCESS_OPS = frozenset({"tu", "vtu", "mem", "alu", "mask", "buf", "on"})  # the only opcodes allowed inside .access
DIRECTIVES = (".dae", ".weights", ".opset", ".sym", ".work", ".access", ".code", ".end")
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")  # labels, access programs, attribute keys
RESERVED_NAMES = frozenset({"inf", "nan"})  # would read back as floats where an operand may be a number
_REG_RE = re.compile(r"([rfvpst])(\d+)")
_TYPE_RE = re.compile(r"(tensor|memref|vector)<(\*x|(?:(?:\d+|\?)x)*)([a-z0-9]+)>")

Key = tuple[Any, ...]  # where: ("sym", i[, field]), ("work", i[, field]), ("access", a[, i[, j]]), ("code", i[, j])


# ----------------------------------------------------------------------------- checking


def _is_int(v: Any) -> bool:
    """An integer operand (numpy integers included, bools excluded: they print as true/false)."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_float(v: Any) -> bool:
    """A float operand (numpy floats included), printed with format_float."""
    return isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral)


def _show(v: Any) -> str:
    """An operand as the message should quote it."""
    if isinstance(v, Reg | SymRef | Mem | Label):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if _is_int(v):
        return str(int(v))
    if _is_float(v):
        return format_float(float(v))
    if isinstance(v, list | tuple):
        return "a list"
    if isinstance(v, dict):
        return "an attribute dict"
    return type(v).__name__


def _fits(kind: str, v: Any) -> bool:
    """Whether a (non-list) value has the shape kind `kind` asks for."""
    reg = v.cls if isinstance(v, Reg) else None
    if kind in "RFDWGYTN":
        regs = {"R": "r", "F": "f", "D": "rf", "W": "v", "G": "rfv", "Y": "rv", "T": "t", "N": "s"}[kind]
        return reg is not None and reg in regs
    if kind == "I":
        return reg == "r" or _is_int(v)
    if kind == "V":
        return reg is not None or _is_int(v) or _is_float(v)
    if kind == "P":
        return (reg is not None and reg in "pst") or _is_int(v)
    if kind == "E":
        return isinstance(v, str) and v in EVENTS
    if kind == "U":
        return isinstance(v, str) and v in ALU_OPS
    wanted = {"S": SymRef, "M": Mem, "L": Label, "A": str, "Q": str, "X": dict}[kind]
    return isinstance(v, wanted)


def _regs_in(v: Any) -> Iterator[Reg]:
    """Every register mentioned by an operand, also inside lists and memory references."""
    if isinstance(v, Reg):
        yield v
    elif isinstance(v, Mem):
        for i in v.index:
            yield from _regs_in(i)
    elif isinstance(v, list | tuple):
        for x in v:
            yield from _regs_in(x)


def _syms_in(v: Any) -> Iterator[int]:
    """Every symbol number an operand refers to, so each can be checked against the table."""
    if isinstance(v, SymRef):
        yield v.n
    elif isinstance(v, Mem):
        yield v.sym
    elif isinstance(v, list | tuple):
        for x in v:
            yield from _syms_in(x)


def _attr_problem(v: Any, depth: int = 0) -> str | None:
    """Why an attribute value could not be written as `.dae` text (None if it can)."""
    if depth > 32:
        return "is nested too deeply"
    if isinstance(v, bool | str) or _is_int(v) or _is_float(v):
        return None
    if isinstance(v, list | tuple):
        return next((p for x in v if (p := _attr_problem(x, depth + 1))), None)
    if isinstance(v, DenseAttr):
        if not isinstance(v.type, ShapedType) or not isinstance(v.values, list):
            return "is a malformed dense attribute"
        return next((p for x in v.values if (p := _attr_problem(x, depth + 1))), None)
    return f"has a value of type {type(v).__name__}"


class _Checker:
    """Checks a whole Program; `locs` (from the text parser) turns keys into source positions."""

    def __init__(self, p: Program, filename: str, locs: dict[Key, Token] | None, lines: list[str] | None):
        self.p = p
        self.filename = filename
        self.locs = locs
        self.lines = lines or []
        self.labels: dict[str, int] = {}
        self.access: dict[str, Access] = {}

    # --- reporting

    def token(self, key: Key) -> Token | None:
        """The recorded position of `key`, or of the nearest enclosing item that has one."""
        while key and self.locs is not None:
            if key in self.locs:
                return self.locs[key]
            key = key[:-1]
        return None

    def fail(self, msg: str, key: Key) -> NoReturn:
        """Raise at the source position if there is one, else name the item in words."""
        tok = self.token(key)
        if tok is not None:
            line = tok.line or 1
            src = self.lines[line - 1] if line <= len(self.lines) else None
            raise EmberError(msg, Loc(self.filename, line, tok.column or 1), src)
        raise EmberError(f"{self.context(key)}: {msg}", self.filename or None)

    def context(self, key: Key) -> str:
        """Where `key` is, in words, for programs that have no source text."""
        p = self.p
        if key[0] == "sym":
            return f"symbol @{key[1]}"
        if key[0] == "data":
            return f"data of symbol {key[1]!r}"
        if key[0] == "work":
            return f"work record {key[1]}"
        if key[0] == "access" and len(key) > 1:
            name = getattr(p.access[key[1]], "name", "?")
            if len(key) > 2 and _is_int(key[2]):
                op = getattr(p.access[key[1]].body[key[2]], "op", "?")
                return f"access program {name}, instruction {key[2]} ('{op}')"
            return f"access program {name}"
        if key[0] == "code" and len(key) > 1:
            item = p.code[key[1]]
            what = f"label '{item.name}'" if isinstance(item, Label) else f"'{getattr(item, 'op', '?')}'"
            return f"code item {key[1]} ({what})"
        return "program"

    def first_line(self, key: Key) -> str:
        """' (first at line N)' for duplicate definitions, when the source is known."""
        tok = self.token(key)
        return f" (first at line {tok.line})" if tok is not None else ""

    # --- program

    def check(self) -> None:
        """Header, symbols and names first, so instructions can refer to labels defined later."""
        p = self.p
        if not isinstance(p.weights, str):
            self.fail("the weights file name must be a string", ("program",))
        if not _is_int(p.opset) or p.opset < 0:
            self.fail(f"bad opset {p.opset!r}", ("program",))
        for i, s in enumerate(p.symbols):
            self.symbol(i, s)
        for i, w in enumerate(p.work):
            self.work(i, w)
        for a, acc in enumerate(p.access):
            if not isinstance(acc, Access):
                self.fail(f"not an access program: {type(acc).__name__}", ("access", a))
            self.name(acc.name, "access program", ("access", a, "name"))
            if acc.name in self.access:
                self.fail(f"access program '{acc.name}' is defined twice", ("access", a, "name"))
            if not _is_int(acc.params) or acc.params < 0:
                self.fail(f"bad parameter count {acc.params!r}", ("access", a, "params"))
            self.access[acc.name] = acc
        for i, item in enumerate(p.code):
            if isinstance(item, Label):
                self.name(item.name, "label", ("code", i))
                if item.name in self.labels:
                    where = self.first_line(("code", self.labels[item.name]))
                    self.fail(f"label '{item.name}' is defined twice{where}", ("code", i))
                self.labels[item.name] = i
            elif not isinstance(item, Instr):
                self.fail(f"not an instruction or label: {type(item).__name__}", ("code", i))
        for a, acc in enumerate(p.access):
            defined: set[Reg] = set()
            for i, ins in enumerate(acc.body):
                self.instr(ins, ("access", a, i), acc, defined)
        for i, item in enumerate(p.code):
            if isinstance(item, Instr):
                self.instr(item, ("code", i), None, set())
        for k in p.data:
            if not _is_int(k) or not 0 <= k < len(p.symbols):
                self.fail("data for a symbol that is not declared", ("data", k))

    def name(self, name: Any, what: str, key: Key) -> None:
        """Labels and access names must read back as names, not as numbers or keywords."""
        if not isinstance(name, str) or not NAME_RE.fullmatch(name) or name in RESERVED_NAMES:
            self.fail(f"bad {what} name {_show(name)}", key)

    def symbol(self, i: int, s: Any) -> None:
        """A symbol table entry (text checks these while parsing; binaries need it here)."""
        if not isinstance(s, Symbol):
            self.fail(f"not a symbol: {type(s).__name__}", ("sym", i))
        if s.kind not in SYMBOL_KINDS:
            self.fail(f"unknown symbol kind {_show(s.kind)} (expected {one_of(SYMBOL_KINDS)})",
                      ("sym", i, 1))
        if not isinstance(s.name, str):
            self.fail("symbol name must be a string", ("sym", i, 2))
        if s.dtype not in SCALARS:
            self.fail(f"unknown element type {_show(s.dtype)} (expected one of {', '.join(SCALARS)})",
                      ("sym", i, 3))
        if not isinstance(s.shape, tuple) or not all(d is None or (_is_int(d) and d >= 0) for d in s.shape):
            self.fail("a shape is a list of non-negative integers or '?'", ("sym", i, 4))

    def work(self, i: int, w: Any) -> None:
        """A work record must fit its kind (`Work.problem`); errors point at the field at fault."""
        if not isinstance(w, Work):
            self.fail(f"not a work record: {type(w).__name__}", ("work", i))
        problem = w.problem(self.p.symbols)
        if problem is not None:
            self.fail(problem[0], ("work", i, *problem[1:]))

    # --- instructions

    def instr(self, ins: Any, key: Key, acc: Access | None, defined: set[Reg]) -> None:
        """Opcode, unit, arity, then each operand, then the rules that relate operands."""
        if not isinstance(ins, Instr) or not isinstance(ins.op, str) or not isinstance(ins.args, list):
            self.fail("not an instruction", key)
        base, dot, suffix = ins.op.partition(".")
        if base not in OPCODES or (dot and suffix not in SCALARS):
            self.fail(unknown_opcode(ins.op), key)
        if acc is None and base in ACCESS_OPS:
            self.fail(f"'{base}' is an access-unit instruction: it belongs inside .access", key)
        if acc is not None and base not in ACCESS_OPS:
            self.fail(f"'{base}' is an execute-unit instruction: it belongs inside .code", key)
        lo, hi = arity(base)
        if len(ins.args) < lo or (hi is not None and len(ins.args) > hi):
            self.fail(arity_message(base, len(ins.args)), key)
        for j, (slot, v) in enumerate(zip(slots_for(base, len(ins.args)), ins.args, strict=True)):
            self.operand(base, j, slot, v, key + (j,), acc)
        if acc is not None:
            self.streams(ins, key, acc, defined)
        else:
            self.execute(ins, base, key)

    def operand(self, base: str, j: int, slot: Slot, v: Any, key: Key, acc: Access | None) -> None:
        """Registers allowed in this unit, the slot's kind, and that everything named exists."""
        for r in _regs_in(v):
            if r.cls not in "rfvpst" or not _is_int(r.n) or r.n < 0:
                self.fail(f"bad register {r!r}", key)
            if acc is None and r.cls in "pst":
                self.fail(f"register {r} can only be used inside .access", key)
            if acc is not None and r.cls in "rfv":
                self.fail(f"register {r} cannot be used inside .access (only p, s and t registers)", key)
        items = v if slot.many and isinstance(v, list) else [v]
        if (slot.many and not isinstance(v, list)) or not all(_fits(slot.kind, x) for x in items):
            bad = next((x for x in items if not _fits(slot.kind, x)), v) if isinstance(v, list) else v
            self.fail(f"'{base}' operand {j + 1} must be {slot_desc(slot)}, got {_show(bad)}", key)
        for n in _syms_in(v):
            if not _is_int(n) or not 0 <= n < len(self.p.symbols):
                self.fail(f"symbol @{n} is not declared", key)
        for x in items:
            if isinstance(x, Mem):
                self.mem(x, key, acc)
            elif isinstance(x, Label) and x.name not in self.labels:
                self.fail(f"label '{x.name}' is not defined", key)
            elif slot.kind == "A" and x not in self.access:
                self.fail(f"access program '{x}' is not defined", key)
            elif slot.kind == "X":
                self.attrs(x, key)

    def mem(self, m: Mem, key: Key, acc: Access | None) -> None:
        """One index per dimension; in .code indices are r registers (f would make no address)."""
        if not isinstance(m.index, tuple):
            self.fail("a memory index is a tuple", key)
        for i in m.index:
            if not (_is_int(i) or (isinstance(i, Reg) and (acc is not None or i.cls in "rv"))):
                self.fail(f"memory index must be an r or v register or an integer, got {_show(i)}", key)
        rank = len(self.p.symbols[m.sym].shape)
        if len(m.index) != rank:
            self.fail(f"@{m.sym} has rank {rank} but is indexed with {len(m.index)} "
                      f"{'index' if len(m.index) == 1 else 'indices'}", key)

    def attrs(self, d: dict[Any, Any], key: Key) -> None:
        """Host attributes must be printable by format_attrs and readable back by the grammar."""
        for k, v in d.items():
            if not isinstance(k, str) or not NAME_RE.fullmatch(k):
                self.fail(f"bad attribute name {_show(k)}", key)
            problem = _attr_problem(v)
            if problem:
                self.fail(f"attribute '{k}' {problem}", key)

    def execute(self, ins: Instr, base: str, key: Key) -> None:
        """Rules that relate the operands of one execute-unit instruction."""
        a = ins.args
        if base == "run":
            params = self.access[a[0]].params
            if len(a) - 1 != params:
                self.fail(f"'run {a[0]}' passes {len(a) - 1} value{'s' * (len(a) != 2)} but {a[0]} takes "
                          f"{params} parameter{'s' * (params != 1)}", key)
        elif base == "alloc":
            sym = self.p.symbols[a[0].n]
            if sym.kind not in ("temp", "output"):
                self.fail(f"'alloc' needs a temp or output symbol, {a[0]} is {sym.kind}", key + (0,))
            if len(a[1]) != len(sym.shape):
                self.fail(f"{a[0]} has rank {len(sym.shape)} but 'alloc' gives {len(a[1])} extents",
                          key + (1,))
        elif base == "dim":
            rank = len(self.p.symbols[a[1].n].shape)
            if _is_int(a[2]) and not 0 <= a[2] < rank:
                self.fail(f"{a[1]} has rank {rank}: no dimension {a[2]}", key + (2,))

    def streams(self, ins: Instr, key: Key, acc: Access, defined: set[Reg]) -> None:
        """Access-unit rules: p within the parameters, s/t defined once and before they are used."""
        defines = ins.base in ("tu", "vtu", "mem", "alu", "mask", "buf")
        for j, v in enumerate(ins.args):
            if defines and j == 0:
                continue
            for r in _regs_in(v):
                if r.cls == "p" and r.n >= acc.params:
                    self.fail(f"{r} is out of range: {acc.name} has {acc.params} "
                              f"parameter{'s' * (acc.params != 1)}", key + (j,))
                if r.cls in "st" and r not in defined:
                    self.fail(f"{r} is used before it is defined", key + (j,))
        if ins.base == "on" and len(ins.args) > 3 and f"{acc.name}.{ins.args[3]}" not in self.labels:
            self.fail(f"token {ins.args[3]} has no case: the code defines no label '{acc.name}.{ins.args[3]}'",
                      key + (3,))
        if defines:
            r = ins.args[0]
            if r in defined:
                self.fail(f"{r} is defined twice", key + (0,))
            defined.add(r)


def validate(p: Program, filename: str = "") -> None:
    """Check every rule of a Program; errors name `filename` (if any) and the offending item."""
    _Checker(p, filename, None, None).check()


# ----------------------------------------------------------------------------- parsing


def _first_token(t: Any) -> Token | None:
    """The position of a subtree (the grammar keeps positions on tokens only)."""
    if isinstance(t, Token):
        return t
    if isinstance(t, Tree):
        for c in t.children:
            tok = _first_token(c)
            if tok is not None:
                return tok
    return None


def _describe(t: Tree) -> str:
    """A parsed operand as an error message should name it."""
    if t.data in ("list", "vlist"):
        return "a list"
    if t.data == "mem":
        return "a memory reference"
    if t.data == "dict":
        return "an attribute dict"
    if t.data == "dynamic":
        return "'?'"
    if t.data == "keyval":
        return f"'{t.children[0]}=...'"
    return f"'{t.children[0]}'"


def _shaped_type(text: str) -> ShapedType | None:
    """`tensor<2x?xf32>` and friends, the way ShapedType prints itself (None if malformed)."""
    m = _TYPE_RE.fullmatch(text)
    if m is None or m[3] not in SCALARS:
        return None
    dims = None if m[2] == "*x" else tuple(None if d == "?" else int(d) for d in m[2].split("x")[:-1])
    return ShapedType(m[1], dims, ScalarType(m[3]))


def _items(t: Tree) -> list[Any]:
    """Children without the None placeholders that empty `[...]` groups leave."""
    return [c for c in t.children if c is not None]


class _Builder:
    """Turns the parse tree into a Program, line by line, recording where each item came from."""

    def __init__(self, text: str, filename: str):
        self.filename = filename
        self.lines = text.splitlines()
        self.p = Program()
        self.locs: dict[Key, Token] = {}
        self.section: str | None = None  # None: header; "access", "code"; "done" after .code's .end
        self.opened: Token | None = None  # the directive that opened the current section
        self.started = False
        self.header: set[str] = set()

    def err(self, msg: str, tok: Token) -> EmberError:
        """An error at `tok`, with its source line for the caret."""
        line = tok.line or 1
        src = self.lines[line - 1] if line <= len(self.lines) else None
        return EmberError(msg, Loc(self.filename, line, tok.column or 1), src)

    def build(self, tree: Tree) -> Program:
        """Walk the lines in order (sections are a small state machine), then run the checker."""
        for line in tree.children:
            if not isinstance(line, Tree):
                continue
            head: Token = line.children[0]
            if not self.started and not (line.data == "directive" and head == ".dae"):
                raise self.err(f"a .dae file starts with '.dae {FORMAT_VERSION}'", head)
            if self.section == "done":
                raise self.err("nothing may follow the .end of .code", head)
            getattr(self, line.data)(head, _items(line)[1:])
        end = Loc(self.filename, max(len(self.lines), 1), 1)
        last = self.lines[-1] if self.lines else None
        if not self.started:
            raise EmberError(f"empty file: expected '.dae {FORMAT_VERSION}'", end, last)
        if self.opened is not None:
            raise self.err(f"'{self.opened}' has no matching '.end'", self.opened)
        if self.section != "done":
            raise EmberError("missing .code section", end, last)
        _Checker(self.p, self.filename, self.locs, self.lines).check()
        return self.p

    # --- directives

    def directive(self, tok: Token, items: list[Tree]) -> None:
        """Header directives, and the .access/.code/.end lines that open and close sections."""
        name = str(tok)
        if name not in DIRECTIVES:
            raise self.err(f"unknown directive '{name}' (expected one of {', '.join(DIRECTIVES)})", tok)
        if self.section in ("access", "code") and name != ".end":
            raise self.err(f"'{name}' is not allowed inside .{self.section} (missing '.end'?)", tok)
        if name in (".dae", ".weights", ".opset", ".code"):
            if name in self.header:
                raise self.err(f"'{name}' is given twice", tok)
            self.header.add(name)
        if name == ".dae":
            self.started = True
            self.shape(tok, items, ["int"], "a format version")
            if int(items[0].children[0]) != FORMAT_VERSION:
                raise self.err(f"unsupported .dae version {items[0].children[0]} "
                               f"(this ember reads version {FORMAT_VERSION})", items[0].children[0])
        elif name == ".weights":
            self.shape(tok, items, ["string"], "the weights file name as a string")
            self.p.weights = self.string(items[0].children[0])
        elif name == ".opset":
            self.shape(tok, items, ["int"], "an ONNX opset number")
            self.p.opset = int(items[0].children[0])
            if self.p.opset < 0:
                raise self.err("the opset cannot be negative", items[0].children[0])
        elif name == ".sym":
            self.sym(tok, items)
        elif name == ".work":
            self.work(tok, items)
        elif name == ".access":
            self.shape(tok, items, ["name", "int"], "a name and a parameter count")
            a = len(self.p.access)
            self.locs[("access", a)] = tok
            self.locs[("access", a, "name")] = items[0].children[0]
            self.locs[("access", a, "params")] = items[1].children[0]
            self.p.access.append(Access(str(items[0].children[0]), int(items[1].children[0])))
            self.section, self.opened = "access", tok
        elif name == ".code":
            self.shape(tok, items, [], "nothing")
            self.section, self.opened = "code", tok
        else:
            self.shape(tok, items, [], "nothing")
            if self.section not in ("access", "code"):
                raise self.err("'.end' without an open .access or .code", tok)
            self.section = "done" if self.section == "code" else None
            self.opened = None

    def shape(self, tok: Token, items: list[Tree], want: list[str], what: str) -> None:
        """Check a directive's argument forms: one error at the first argument that is off."""
        for i, t in enumerate(items):
            if i >= len(want) or t.data != want[i]:
                raise self.err(f"'{tok}' expects {what}", _first_token(t) or tok)
        if len(items) < len(want):
            raise self.err(f"'{tok}' expects {what}", tok)

    def sym(self, tok: Token, items: list[Tree]) -> None:
        """`.sym @n kind "name" dtype [dims]`, numbered in order so @n is the table index."""
        self.shape(tok, items, ["sym", "name", "string", "name", "list"],
                   "@n, a kind, a name, an element type and a shape: .sym @0 param \"w\" f32 [4, ?]")
        n = len(self.p.symbols)
        toks = [_first_token(t) or tok for t in items]
        if int(str(toks[0])[1:]) != n:
            raise self.err(f"symbol {toks[0]} is declared out of order (expected @{n})", toks[0])
        kind, dtype = str(toks[1]), str(toks[3])
        if kind not in SYMBOL_KINDS:
            raise self.err(f"unknown symbol kind '{kind}' (expected {one_of(SYMBOL_KINDS)})", toks[1])
        if dtype not in SCALARS:
            raise self.err(f"unknown element type '{dtype}' (expected one of {', '.join(SCALARS)})", toks[3])
        dims: list[int | None] = []
        for d in _items(items[4]):
            if d.data == "dynamic":
                dims.append(None)
            elif d.data == "int" and int(d.children[0]) >= 0:
                dims.append(int(d.children[0]))
            else:
                raise self.err("a dimension is a non-negative integer or '?'", _first_token(d) or toks[4])
        self.locs[("sym", n)] = tok
        for f, t in enumerate(toks):
            self.locs[("sym", n, f)] = t
        self.p.symbols.append(Symbol(kind, self.string(toks[2]), dtype, tuple(dims)))

    def work(self, tok: Token, items: list[Tree]) -> None:
        """`.work KIND [MODE] key=value ...`: one embedding operation the program computes (a `Work`).
        Here only the forms are checked; the checker holds the record to its kind and the symbol table."""
        n = len(self.p.work)
        words: list[Token] = []
        for t in items:
            if t.data != "name":
                break
            words.append(_first_token(t))
        if not words:
            raise self.err(f"'.work' expects a kind ({one_of(tuple(WORK_KINDS))}), then key=value fields",
                           (_first_token(items[0]) if items else None) or tok)
        if len(words) > 2:
            raise self.err(f"'.work' expects a kind and a mode, then key=value fields: unexpected '{words[2]}'",
                           words[2])
        self.locs[("work", n)] = tok
        self.locs[("work", n, "kind")] = words[0]
        self.locs[("work", n, "mode")] = words[-1]
        fields: dict[str, Any] = {}
        for t in items[len(words):]:
            if t.data != "keyval":
                raise self.err(f"'.work' expects key=value fields after its kind and mode, got {_describe(t)}",
                               _first_token(t) or tok)
            key_tok, val = t.children
            key, vtok = str(key_tok), _first_token(val) or key_tok
            form = WORK_FIELDS.get(key)
            if form is None:
                raise self.err(f"unknown .work field '{key}' (expected one of {', '.join(WORK_FIELDS)})", key_tok)
            if key in fields:
                raise self.err(f"field '{key}' is given twice", key_tok)
            if val.data != form:
                want = {"sym": "a symbol (@n)", "int": "an integer", "name": "a name"}[form]
                raise self.err(f"field '{key}' must be {want}, got {_describe(val)}", vtok)
            fields[key] = int(str(vtok)[1:]) if form == "sym" else int(vtok) if form == "int" else str(vtok)
            self.locs[("work", n, key)] = vtok
        self.p.work.append(Work(str(words[0]), str(words[1]) if len(words) > 1 else "", **fields))

    # --- code

    def label(self, tok: Token, items: list[Tree]) -> None:
        """A label marks a position in .code (access programs have no jumps)."""
        if self.section != "code":
            raise self.err("labels are only allowed in .code", tok)
        self.locs[("code", len(self.p.code))] = tok
        self.p.code.append(Label(str(tok)))

    def instr(self, tok: Token, items: list[Tree]) -> None:
        """Opcode and arity first: the signature decides what each operand's names mean."""
        if self.section == "access":
            a = len(self.p.access) - 1
            key: Key = ("access", a, len(self.p.access[a].body))
        elif self.section == "code":
            key = ("code", len(self.p.code))
        else:
            raise self.err("instructions belong inside .access or .code", tok)
        op = str(tok)
        base, dot, suffix = op.partition(".")
        if base not in OPCODES or (dot and suffix not in SCALARS):
            raise self.err(unknown_opcode(op), tok)
        lo, hi = arity(base)
        if len(items) < lo or (hi is not None and len(items) > hi):
            raise self.err(arity_message(base, len(items)), tok)
        slots: list[Slot | None] = list(slots_for(base, len(items)))
        slots += [None] * (len(items) - len(slots))
        self.locs[key] = tok
        args = []
        for j, (t, slot) in enumerate(zip(items, slots, strict=True)):
            self.locs[key + (j,)] = _first_token(t) or tok
            args.append(self.operand(t, slot, base, j, tok))
        ins = Instr(op, args)
        if key[0] == "code":
            self.p.code.append(ins)
        else:
            self.p.access[-1].body.append(ins)

    def operand(self, t: Tree, slot: Slot | None, base: str, j: int, op_tok: Token) -> Any:
        """An operand for `slot`; lists are only unpacked element-wise where the slot is a list."""
        kind = slot.kind if slot is not None else None
        if slot is not None and slot.many and t.data == "list":
            return [self.scalar(c, kind, base, j, op_tok) for c in _items(t)]
        return self.scalar(t, kind, base, j, op_tok)

    def scalar(self, t: Tree, kind: str | None, base: str, j: int, op_tok: Token) -> Any:
        """One operand; `kind` decides what a bare name means (label, access name, keyword, register)."""
        tok = _first_token(t) or op_tok
        d = t.data
        if d == "name" and kind is not None and kind in "AEU":
            return str(tok)
        if d == "name" and kind in ("L", None):
            return Label(str(tok))
        if d == "name":
            m = _REG_RE.fullmatch(str(tok))
            if m:
                return Reg(m[1], int(m[2]))
        elif d == "string" and kind not in ("A", "E", "U", "L"):
            return self.string(tok)
        elif d == "int":
            return int(tok)
        elif d == "float":
            return float(tok)
        elif d == "sym":
            return SymRef(int(tok[1:]))
        elif d == "mem":
            return Mem(int(tok[1:]), tuple(self.index(c, tok) for c in _items(t)[1:]))
        elif d == "list":
            return [self.scalar(c, kind, base, j, op_tok) for c in _items(t)]
        elif d == "dict":
            return self.attrs(t)
        desc = KIND_DESC[kind] if kind is not None else "an operand"
        raise self.err(f"'{base}' operand {j + 1} must be {desc}, got {_describe(t)}", tok)

    def index(self, t: Tree, mem_tok: Token) -> Reg | int:
        """One memory index: a register or an integer, nothing else has an address meaning."""
        tok = _first_token(t) or mem_tok
        if t.data == "int":
            return int(tok)
        m = _REG_RE.fullmatch(str(tok)) if t.data == "name" else None
        if m is None:
            raise self.err(f"a memory index is a register or an integer, got {_describe(t)}", tok)
        return Reg(m[1], int(m[2]))

    def attrs(self, t: Tree) -> dict[str, Any]:
        """An attribute dict, in source order (printing keeps it)."""
        out: dict[str, Any] = {}
        for a in _items(t):
            key_tok, val = a.children
            if str(key_tok) in out:
                raise self.err(f"attribute '{key_tok}' is given twice", key_tok)
            out[str(key_tok)] = self.value(val)
        return out

    def value(self, t: Tree) -> Any:
        """An attribute value: ints stay ints and floats floats, so ONNX attribute types survive."""
        tok = _first_token(t)
        d = t.data
        if d == "int":
            return int(tok)
        if d == "float":
            return float(tok)
        if d == "string":
            return self.string(tok)
        if d == "vlist":
            return [self.value(c) for c in _items(t)]
        if d == "dense":
            vals = self.value(t.children[1])
            type_tok = t.children[2]
            ty = _shaped_type(str(type_tok))
            if ty is None:
                raise self.err(f"bad type '{type_tok}' (expected e.g. tensor<2x3xf32>)", type_tok)
            return DenseAttr(vals if isinstance(vals, list) else [vals], ty)
        if str(tok) in ("true", "false"):
            return str(tok) == "true"
        raise self.err(f"unknown attribute value '{tok}' (expected a number, string, true, false, "
                       "list or dense<...>)", tok)

    def string(self, tok: Token) -> str:
        """A JSON string literal (the printer writes json.dumps, so escapes agree)."""
        try:
            return json.loads(str(tok))
        except ValueError:
            raise self.err(f"bad string literal {tok}", tok) from None


def parse_dae(text: str, filename: str) -> Program:
    """Parse and check `.dae` text; every mistake is an EmberError at its `file:line:col`."""
    try:
        tree = grammar("dae.lark").parse(text)
    except UnexpectedInput as e:
        err = syntax_error(e, text, filename)
        if isinstance(e, UnexpectedToken) and e.token.type == "_NL":  # not "unexpected '\n  '"
            rest = err.message.removeprefix(f"unexpected {str(e.token)!r}")
            err = EmberError(f"unexpected end of line{rest}", err.where, err.source_line)
        raise err from None
    return _Builder(text, filename).build(tree)


# ----------------------------------------------------------------------------- printing


def _fmt(v: Any, kind: str | None) -> str:
    """One operand in canonical form; `kind` decides whether a string is quoted."""
    if isinstance(v, Reg | SymRef | Mem | Label):
        return str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if _is_int(v):
        return str(int(v))
    if _is_float(v):
        return format_float(float(v))
    if isinstance(v, str):
        return v if kind is not None and kind in "AEU" else json.dumps(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_fmt(x, kind) for x in v) + "]"
    if isinstance(v, dict):
        return format_attrs(v) or "{}"
    raise TypeError(f"cannot print operand {v!r}")


def format_instr(ins: Instr) -> str:
    """An instruction as one line without indentation, e.g. `fadd.f32 f3, f2, f1`."""
    base = ins.base
    kinds: list[str | None] = [s.kind for s in slots_for(base, len(ins.args))] if base in OPCODES else []
    kinds += [None] * (len(ins.args) - len(kinds))
    if not ins.args:
        return ins.op
    return ins.op + " " + ", ".join(_fmt(v, k) for v, k in zip(ins.args, kinds, strict=True))


def _dim(d: int | None) -> str:
    """A shape extent as `.sym` writes it ('?' for dynamic)."""
    return "?" if d is None else str(d)


def print_dae(p: Program) -> str:
    """Canonical `.dae` text: parse_dae(print_dae(p)) == p, and printing parsed canonical text is exact."""
    out = [f".dae {FORMAT_VERSION}"]
    if p.weights:
        out.append(f".weights {json.dumps(p.weights)}")
    if p.opset:
        out.append(f".opset {p.opset}")
    for i, s in enumerate(p.symbols):
        shape = ", ".join(_dim(d) for d in s.shape)
        out.append(f".sym @{i} {s.kind} {json.dumps(s.name)} {s.dtype} [{shape}]")
    out.extend(str(w) for w in p.work)
    for a in p.access:
        out.append(f".access {a.name} {a.params}")
        out.extend("  " + format_instr(ins) for ins in a.body)
        out.append(".end")
    out.append(".code")
    for item in p.code:
        out.append(f"{item.name}:" if isinstance(item, Label) else "  " + format_instr(item))
    out.append(".end")
    return "\n".join(out) + "\n"

