"""The rules every DAE `Program` obeys, whether it came from `.dae` text, a `.bin` or the compiler.

`validate` checks operand kinds, declared symbols, labels, registers per unit, streams defined before
use, and the ISA's limits (docs/isa.md): integer immediates within int64, lane counts from 1 to
MAX_LANES, traversal units that cannot overflow, and registers read only where written (regflow.py).
The text parser runs the same checker with the source positions it recorded, so a mistake is reported
at its `file:line:col`; a binary or a built program is reported by the item it is in.
"""

from __future__ import annotations

import json
import numbers
import re
from collections.abc import Iterator
from typing import Any, NoReturn

from lark import Token

from ..ir.diagnostics import EmberError, Loc
from ..ir.printer import DenseAttr, format_float
from ..ir.types import SCALARS, TYPED_READS, ShapedType
from ..isa import ALU_OPS, EVENTS, LANES_OPERAND, OPS
from .dae import (
    INT64_MAX,
    INT64_MIN,
    MAX_LANES,
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
from .regflow import unwritten_read

SYMBOL_KINDS = ("param", "input", "output", "temp")
# opcodes a type suffix means something to: the rounding of float arithmetic, a conversion's or a splat's type,
# a typed read; any other opcode written with a suffix is an error (it would be ignored)
TYPED_OPS = frozenset({"fadd", "fsub", "fmul", "fdiv", "fmax", "fmin", "ffma", "fcvt", "vfadd", "vfsub", "vfmul",
                       "vfdiv", "vfmax", "vfmin", "vfma", "vcvt", "vsplat", "ld", "mem"})
ACCESS_OPS = frozenset({"tu", "vtu", "mem", "alu", "mask", "buf", "on"})  # the only opcodes allowed inside .access
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")  # labels, access programs, attribute keys
RESERVED_NAMES = frozenset({"inf", "nan"})  # would read back as floats where an operand may be a number

Key = tuple[Any, ...]  # where: ("sym", i[, field]), ("work", i[, field]), ("access", a[, i[, j]]), ("code", i[, j])


def is_int(v: Any) -> bool:
    """An integer operand (numpy integers included, bools excluded: they print as true/false)."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def is_float(v: Any) -> bool:
    """A float operand (numpy floats included), printed with format_float."""
    return isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral)


def _show(v: Any) -> str:
    """An operand as the message should quote it."""
    if isinstance(v, Reg | SymRef | Mem | Label):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if is_int(v):
        return str(int(v))
    if is_float(v):
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
        return reg == "r" or is_int(v)
    if kind == "V":
        return reg is not None or is_int(v) or is_float(v)
    if kind == "P":
        return (reg is not None and reg in "pst") or is_int(v)
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


def _ints_in(v: Any) -> Iterator[Any]:
    """Every integer immediate of an operand, also inside lists and memory references."""
    if is_int(v):
        yield v
    elif isinstance(v, Mem):
        for i in v.index:
            yield from _ints_in(i)
    elif isinstance(v, list | tuple):
        for x in v:
            yield from _ints_in(x)


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
    if is_int(v) and not isinstance(v, bool) and not INT64_MIN <= v <= INT64_MAX:
        return f"holds {v}, outside the 64-bit integers an ONNX attribute (and the binary) can hold"
    if isinstance(v, bool | str) or is_int(v) or is_float(v):
        return None
    if isinstance(v, list | tuple):
        return next((p for x in v if (p := _attr_problem(x, depth + 1))), None)
    if isinstance(v, DenseAttr):
        if not isinstance(v.type, ShapedType) or not isinstance(v.values, list):
            return "is a malformed dense attribute"
        return next((p for x in v.values if (p := _attr_problem(x, depth + 1))), None)
    return f"has a value of type {type(v).__name__}"


COUNTED = ("indices", "offsets")  # the record fields whose values work.py counts from (of the others, only shapes)


class Checker:
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
            if len(key) > 2 and is_int(key[2]):
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
        if not is_int(p.opset) or not 0 <= p.opset <= INT64_MAX:
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
            if not is_int(acc.params) or not 0 <= acc.params <= INT64_MAX:
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
            if not is_int(k) or not 0 <= k < len(p.symbols):
                self.fail("data for a symbol that is not declared", ("data", k))
        self.registers()
        self.writes()

    def registers(self) -> None:
        """Registers are read only where written before (regflow): r and f on some path, v on every path."""
        bad = unwritten_read(self.p)
        if bad is not None:
            i, j, r, some_paths = bad
            if some_paths:
                self.fail(f"{r} is read here but not written on every path to it (a vector's lanes must be "
                          "known)", ("code", i, j))
            self.fail(f"{r} is read here but no path from the start of the program writes it", ("code", i, j))

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
        if not isinstance(s.shape, tuple) or not all(d is None or (is_int(d) and 0 <= d <= INT64_MAX) for d in s.shape):
            self.fail("a shape is a list of extents from 0 to 2^63 - 1, or '?'", ("sym", i, 4))

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
        if base not in OPS or (dot and suffix not in SCALARS):
            self.fail(unknown_opcode(ins.op), key)
        if acc is None and base in ACCESS_OPS:
            self.fail(f"'{base}' is an access-unit instruction: it belongs inside .access", key)
        if acc is not None and base not in ACCESS_OPS:
            self.fail(f"'{base}' is an execute-unit instruction: it belongs inside .code", key)
        if dot and base not in TYPED_OPS:
            self.fail(f"'{base}' takes no type suffix", key)
        if base in ("ffma", "vfma") and suffix != "f32":
            self.fail(f"'{base}' is defined for float32: write '{base}.f32'", key)
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
            if r.cls not in "rfvpst" or not is_int(r.n) or r.n < 0:
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
            if not is_int(n) or not 0 <= n < len(self.p.symbols):
                self.fail(f"symbol @{n} is not declared", key)
        if slot.kind != "X":
            for x in _ints_in(v):
                if not INT64_MIN <= x <= INT64_MAX:
                    self.fail(f"integer {int(x)} is out of the 64-bit range (-2^63 to 2^63 - 1)", key)
        if LANES_OPERAND.get(base) == j and not (is_int(v) and 1 <= v <= MAX_LANES):
            self.fail(f"'{base}' needs a lane count that is an integer from 1 to {MAX_LANES} (MAX_LANES), "
                      f"got {_show(v)}", key)
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
            if not (is_int(i) or (isinstance(i, Reg) and (acc is not None or i.cls in "rv"))):
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
        if base in ("li", "mov", "sel"):
            sources = a[1:] if base != "sel" else a[2:]
            for j, v in enumerate(sources, len(a) - len(sources)):
                if a[0].cls == "r" and not (is_int(v) or (isinstance(v, Reg) and v.cls == "r")):
                    self.fail(f"'{base}' into an r register needs an integer or an r register, got {_show(v)}",
                              key + (j,))
                if base == "sel" and v.cls != a[0].cls:
                    self.fail(f"'sel' needs its destination and both values in registers of one kind, got "
                              f"{a[0]} and {v}", key + (j,))
        if base == "ld" and "." in ins.op:
            self.typed_read(ins, key)
            floats = ins.op.split(".")[1][0] in "fb"
            if (a[0].cls == "f") != floats:
                self.fail(f"'{ins.op}' reads {'a float' if floats else 'an integer'}, so it needs "
                          f"{'an f' if floats else 'an r'} register, got {a[0]}", key + (0,))
        elif base in ("ld", "st"):  # a float (inf, NaN, 1.5) has no integer value: it never reaches an integer
            floats = self.p.symbols[a[1].sym].dtype[0] in "fb"
            if (base, a[0].cls, floats) in (("ld", "r", True), ("st", "f", False)):
                self.fail(f"'{base}' of {a[0]} needs a symbol of {'integers' if floats else 'floats'}, "
                          f"@{a[1].sym} is {self.p.symbols[a[1].sym].dtype}", key + (1,))
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
            if not is_int(a[2]):  # which extent is read is part of the instruction, as a lane count is
                self.fail(f"'dim' needs a dimension number that is an integer constant, got {_show(a[2])}",
                          key + (2,))
            if not 0 <= a[2] < rank:
                self.fail(f"{a[1]} has rank {rank}: no dimension {a[2]}", key + (2,))

    def writes(self) -> None:
        """What the execute unit writes: never a param (the model's weights: a run must leave them as it found
        them), and never the indices or offsets a work record counts from (an input included), nor another
        record's output (the speed of light is counted from them after the run, so a
        program must not be able to change them; ember/sim/work.py).  A record's table may be written: an earlier
        record's output feeds the next (message passing); of it, and of weights and targets, only shapes count."""
        written: dict[int, Key] = {}
        for i, item in enumerate(self.p.code):
            if not isinstance(item, Instr):
                continue
            kind = OPS[item.base].kind
            a = item.args
            if kind in ("store", "vstore", "scatter"):
                targets = [(a[1].sym, (1,))]
            elif kind in ("popb", "alloc"):
                targets = [(a[0].n, (0,))]
            elif kind == "host":
                targets = [(s.n, (2,)) for s in a[2]]
            else:
                continue
            for n, at in targets:
                sym = self.p.symbols[n]
                if sym.kind == "param":
                    self.fail(f"'{item.base}' writes @{n}, param '{sym.name}': params are read-only",
                              ("code", i, *at))
                if kind != "host":
                    written.setdefault(n, ("code", i, *at))
        outputs: dict[int, int] = {}
        for k, w in enumerate(self.p.work):
            for name, n in w.symbols().items():
                if name == "output":
                    if n in outputs:
                        self.fail(f"work records {outputs[n]} and {k} have the same output @{n}", ("work", k))
                    outputs[n] = k
                elif n in written and name in COUNTED:
                    self.fail(f"work record {k} reads @{n} ({name}), which the code writes: what a record counts "
                              "from must be an input, a param or a host result", written[n])

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
        if ins.base in ("tu", "vtu"):
            self.traversal(ins, key)
        vector = {i.args[0] for i in acc.body if i.base == "vtu"}
        if ins.base == "mem" and "." in ins.op:
            self.typed_read(ins, key)
            last = ins.args[1].index[-1] if ins.args[1].index else None
            if last in vector:
                self.fail(f"'{ins.op}' reads one value: its last index cannot be the vector TU {last}", key + (1,))
        if ins.base == "mask" and len(ins.args) > 1 and ins.args[1] not in vector:
            self.fail(f"'mask' streams the lane mask of a vector TU (vtu); {_show(ins.args[1])} is not one",
                      key + (1,))
        if defines:
            r = ins.args[0]
            if r in defined:
                self.fail(f"{r} is defined twice", key + (0,))
            defined.add(r)


    def typed_read(self, ins: Instr, key: Key) -> None:
        """`ld.T` / `mem.T` read the bytes of one T value from a byte tensor (u8) along its last axis."""
        suffix, sym = ins.op.split(".")[1], ins.args[1].sym
        if suffix not in TYPED_READS:
            self.fail(f"'{ins.op}': a typed read gives one of {', '.join(TYPED_READS)}, not {suffix}", key)
        s = self.p.symbols[sym]
        if s.dtype != "u8":
            self.fail(f"'{ins.op}' is a typed read, which needs a byte tensor (u8); @{sym} holds {s.dtype}", key + (1,))
        if not s.shape:
            self.fail(f"'{ins.op}' reads along the last axis, and @{sym} has rank 0", key + (1,))

    def traversal(self, ins: Instr, key: Key) -> None:
        """A TU counts lb, lb + step, ... while below ub: a constant step is at least 1, and with ub and the
        step constant its counter cannot pass INT64_MAX (the run-time check of both engines, made early)."""
        ub, step = ins.args[2], ins.args[3]  # a vtu's step is its lane count
        if is_int(step) and step < 1:
            self.fail(f"a traversal unit's step must be at least 1, got {int(step)}", key + (3,))
        if is_int(ub) and is_int(step) and ub - 1 + step > INT64_MAX:
            what = "lane count" if ins.base == "vtu" else "step"
            self.fail(f"{ins.args[0]} can overflow its counter: ub - 1 + {what} = {ub - 1 + step} is past "
                      f"2^63 - 1", key + (2,))


def validate(p: Program, filename: str = "") -> None:
    """Check every rule of a Program; errors name `filename` (if any) and the offending item."""
    Checker(p, filename, None, None).check()
