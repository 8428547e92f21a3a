"""Read and write `.dae` assembly text, the human-readable form of a DAE `Program`.

The grammar (grammars/dae.lark) only splits lines into directives, labels and instructions with
generic operands; this module gives operands their meaning from the `OPS` signatures.  All
program rules (operand kinds, declared symbols, labels, registers, the ISA's limits) live in
`validate` (dae_check.py), which works on a `Program` from anywhere: the text parser runs it with the
source positions it recorded, the binary reader and the assembler without, so `.dae` and `.bin`
accept exactly the same programs and every mistake is reported once, where it is.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lark import Token, Tree
from lark.exceptions import UnexpectedInput, UnexpectedToken

from ..ir.diagnostics import EmberError, Loc
from ..ir.parser import check_text, grammar, syntax_error
from ..ir.printer import DenseAttr, format_attrs, format_float
from ..ir.types import SCALARS, ScalarType, ShapedType
from ..isa import OPS
from .dae import (
    FORMAT_VERSION,
    INT64_MAX,
    KIND_DESC,
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
    slots_for,
    unknown_opcode,
)
from .dae_check import SYMBOL_KINDS, Checker, Key, is_float, is_int
from .dae_check import validate as validate  # the one checker, also for binaries and built programs

DIRECTIVES = (".dae", ".weights", ".opset", ".sym", ".work", ".access", ".code", ".end")
_REG_RE = re.compile(r"([rfvpst])(\d+)")
_TYPE_RE = re.compile(r"(tensor|memref|vector)<(\*x|(?:(?:\d+|\?)x)*)([a-z0-9]+)>")



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
        Checker(self.p, self.filename, self.locs, self.lines).check()
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
            if self.p.opset > INT64_MAX:
                raise self.err("the opset is out of the 64-bit range", items[0].children[0])
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
            elif d.data == "int" and 0 <= int(d.children[0]) <= INT64_MAX:
                dims.append(int(d.children[0]))
            else:
                raise self.err("a dimension is an integer from 0 to 2^63 - 1, or '?'", _first_token(d) or toks[4])
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
        if base not in OPS or (dot and suffix not in SCALARS):
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
                return self.reg(m, tok)
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
        return self.reg(m, tok)

    def reg(self, m: re.Match[str], tok: Token) -> Reg:
        """A register; its number must fit the binary format (how many the machine has is checked when it runs)."""
        if int(m[2]) > INT64_MAX:
            raise self.err(f"register number {m[2]} is out of the 64-bit range", tok)
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
        except json.JSONDecodeError as e:  # the grammar lets a raw control character or a bad escape through
            raise self.err(f"bad string literal: {e.msg.removesuffix(' at').lower()}", tok) from None


def parse_dae(text: str, filename: str) -> Program:
    """Parse and check `.dae` text; every mistake is an EmberError at its `file:line:col`."""
    check_text(text, filename, comment=";")
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
    if is_int(v):
        return str(int(v))
    if is_float(v):
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
    kinds: list[str | None] = [s.kind for s in slots_for(base, len(ins.args))] if base in OPS else []
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

