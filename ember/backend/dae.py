"""The DAE program model: what `.dae` text, the `.bin` binary and the simulator all share.

A program is a symbol table (tensors: params, inputs, outputs, temporaries), zero or more access
programs (traversal units, streams, marshaling rules for the access unit) and one execute-unit
program (scalar instructions with labels; `run` starts an access program and dispatches its
tokens until the access unit is done: token k of access program `A0` runs the code at label
`A0.k` up to its `ret`).  Every instruction is an `Instr`
(opcode and arguments), so the text parser, printer, assembler and simulator work from one
opcode table, `ember.isa.OPS`.

A program also carries *work records* (`Work`, `.work` in the text): what embedding operation it
computes, on which of its symbols.  The compiler copies them from the `emb` ops it lowered, and a
hand-written program declares them, so the simulator can bound a run by the operation and its data
alone (`ember/sim/work.py`), whatever code computes it.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from ..dialects.emb import tt_shapes
from ..ir.types import SCALARS
from ..isa import ALU_OPS, EVENTS, OPS

FORMAT_VERSION = 2  # 2: work records (`.work`, the binary's `work` section)


@dataclass(frozen=True)
class Reg:
    """A register-like name: r (integer), f (float), v (vector or mask), p (access parameter),
    s (stream), t (traversal unit)."""

    cls: str
    n: int

    def __str__(self) -> str:
        return f"{self.cls}{self.n}"


@dataclass(frozen=True)
class SymRef:
    n: int

    def __str__(self) -> str:
        return f"@{self.n}"


@dataclass(frozen=True)
class Mem:
    """A memory reference `@sym[i, j]`: indices are registers (or streams / TUs) or integers."""

    sym: int
    index: tuple[Reg | int, ...]

    def __str__(self) -> str:
        return f"@{self.sym}[" + ", ".join(str(i) for i in self.index) + "]"


@dataclass(frozen=True)
class Label:
    name: str

    def __str__(self) -> str:
        return self.name


Arg = Any  # Reg | SymRef | Mem | Label | int | float | str | list[Arg] | dict[str, Any]


@dataclass
class Instr:
    op: str  # opcode, with a type suffix where it has one ("fadd.f32")
    args: list[Arg] = field(default_factory=list)

    @property
    def base(self) -> str:
        return self.op.split(".", 1)[0]


@dataclass
class Symbol:
    kind: str  # "param" | "input" | "output" | "temp"
    name: str
    dtype: str  # scalar type name (f32, i64, ...)
    shape: tuple[int | None, ...]  # None entries are dynamic ('?')


@dataclass
class Access:
    """One access-unit program: `params` values are passed by the `run` instruction."""

    name: str
    params: int
    body: list[Instr] = field(default_factory=list)

    def tokens(self) -> list[int]:
        """The tokens its `on` rules push, in rule order (a rule may push none)."""
        return [i.args[3] for i in self.body if i.base == "on" and len(i.args) > 3]


WORK_SYMBOLS = ("table", "part1", "part2", "part3", "indices", "offsets", "weights", "targets", "data",
                "output")  # Work's symbol fields
# Every field of `.work KIND [MODE] key=value ...`, in printing order, and the form of its value.
WORK_FIELDS = {**{f: "sym" for f in WORK_SYMBOLS}, "padding_idx": "int", "empty": "name", "negative": "name",
               "bits": "int", "rows": "int", "block": "int"}
WORK_EMPTY = ("zero", "identity")  # emb.bag {empty}
WORK_NEGATIVE = ("wrap",)  # emb.gather {negative}


@dataclass(frozen=True)
class WorkKind:
    """What a record of one kind holds: its modes, each symbol field it needs or may have with the element
    class ("int" or "float") and rank (None: any) of that symbol, and the other fields it may set."""

    modes: tuple[str, ...]
    required: dict[str, tuple[str, int | None]]
    optional: dict[str, tuple[str, int | None]]
    options: tuple[str, ...]


WORK_KINDS: dict[str, WorkKind] = {
    "gather": WorkKind(("",), {"table": ("float", None), "indices": ("int", None), "output": ("float", None)},
                       {}, ("negative",)),
    "bag": WorkKind(("sum", "mean", "max"),
                    {"table": ("float", 2), "indices": ("int", 1), "offsets": ("int", 1), "output": ("float", 2)},
                    {"weights": ("float", 1)}, ("padding_idx", "empty")),
    "qbag": WorkKind(("sum", "mean"),
                     {"table": ("int", 2), "indices": ("int", 1), "offsets": ("int", 1), "output": ("float", 2)},
                     {"weights": ("float", 1)}, ("bits",)),
    "ttbag": WorkKind(("sum", "mean"),
                      {"table": ("float", 4), "part1": ("float", 4), "indices": ("int", 1), "offsets": ("int", 1),
                       "output": ("float", 2)},
                      {"part2": ("float", 4), "part3": ("float", 4), "weights": ("float", 1)}, ("rows",)),
    "robe": WorkKind(("sum", "mean"),
                     {"table": ("float", 1), "indices": ("int", 1), "offsets": ("int", 1), "output": ("float", 2)},
                     {"weights": ("float", 1)}, ("block",)),
    "dhe": WorkKind(("sum", "mean"),
                    {"table": ("float", 2), "indices": ("int", 1), "offsets": ("int", 1), "output": ("float", 2)},
                    {"part1": ("float", 2), "part2": ("float", 2), "weights": ("float", 1)}, ()),
    "scatter_rows": WorkKind(("add", "mul", "max", "min"),
                             {"table": ("float", 2), "targets": ("int", 1), "data": ("float", 2),
                              "output": ("float", 2)}, {}, ()),
}


@dataclass(frozen=True)
class Work:
    """One embedding operation the program computes, on its symbols (numbers into `Program.symbols`).

    gather:       output[i..., :] = table[indices[i...], :]; with `negative = "wrap"` an index in
                  [-rows, 0) counts from the end.
    bag:          output[b] = mode over table[indices[j], :] (times weights[j]) for j in
                  [offsets[b], offsets[b+1]), the include-last offsets the program holds; lookups of row
                  `padding_idx` are left out; an empty bag gives 0 (`empty = "zero"`) or the reduction's
                  identity (`"identity"`), as emb.bag says.
    qbag:         a bag over a row-wise quantized table of bytes in FBGEMM's layout, with `bits` 8 or 4 (emb.qbag
                  in ember/dialects/emb.py); modes sum and mean.
    ttbag:        a bag over a table of `rows` rows stored as a tensor train: `table` is core 0, then `part1`,
                  and `part2`, `part3` when there are that many (emb.ttbag); modes sum and mean.  A core's p may
                  be `?` (a hand-written program for any table size), and then `rows` may be left out.
    robe:         a bag over ROBE's shared array `table`, read in blocks of `block` elements (emb.robe); modes sum
                  and mean.
    dhe:          a bag over deep hash embeddings (emb.dhe): `table` is the first layer's weight (out x k hashes),
                  `part1` and `part2` the next layers' when there are that many; modes sum and mean.
    scatter_rows: output = data, then output[targets[e], :] = mode(output[targets[e], :], table[e, :])
                  for every e in order.  `table` is the update rows, each read once, in order: the op
                  has no source indices (a gather of x[src] before it is a record of its own).
    """

    kind: str
    mode: str = ""  # bag: sum | mean | max; scatter_rows: add | mul | max | min; gather: ""
    table: int | None = None
    indices: int | None = None
    offsets: int | None = None
    weights: int | None = None
    targets: int | None = None  # scatter_rows: the output row of each update
    data: int | None = None  # scatter_rows: the rows the output starts from
    output: int | None = None
    padding_idx: int | None = None
    empty: str = ""
    negative: str = ""
    bits: int | None = None
    rows: int | None = None  # ttbag: the rows the train stands for
    block: int | None = None  # robe: the elements of a block
    part1: int | None = None  # the further tensors of a ttbag (its cores after core 0) or a dhe (its layers' weights)
    part2: int | None = None
    part3: int | None = None

    def __str__(self) -> str:
        """The record as its `.work` line: kind, mode, then the fields that are set, in WORK_FIELDS order."""
        words = [".work", self.kind] + ([self.mode] if self.mode else [])
        for f, form in WORK_FIELDS.items():
            v = getattr(self, f)
            if v is not None and v != "":
                words.append(f"{f}=@{v}" if form == "sym" else f"{f}={v}")
        return " ".join(words)

    def problem(self, symbols: list[Symbol]) -> tuple[str, ...] | None:
        """Why the record does not fit `WORK_KINDS` and the program's symbols: (message, field at fault),
        the field left out when the record as a whole is wrong; None when it fits."""
        spec = WORK_KINDS.get(self.kind) if isinstance(self.kind, str) else None
        if spec is None:
            return f"unknown work kind {self.kind!r} (expected {one_of(tuple(WORK_KINDS))})", "kind"
        if self.mode not in spec.modes:
            return (f"a {self.kind} record takes no mode, got {self.mode!r}" if spec.modes == ("",) else
                    f"a {self.kind} record needs a mode ({one_of(spec.modes)})" if self.mode == "" else
                    f"unknown {self.kind} mode {self.mode!r} (expected {one_of(spec.modes)})"), "mode"
        fields = {**spec.required, **spec.optional}
        for f in WORK_SYMBOLS:
            n = getattr(self, f)
            if n is None:
                if f in spec.required:
                    return (f"a {self.kind} record needs {f}=@n",)
                continue
            if f not in fields:
                return f"a {self.kind} record has no field '{f}'", f
            if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n < len(symbols):
                return f"symbol @{n} is not declared", f
            s, (cls, rank) = symbols[n], fields[f]
            if (s.dtype[0] in "fb") != (cls == "float"):
                return f"{f}=@{n} must hold {'floats' if cls == 'float' else 'integers'}, @{n} is {s.dtype}", f
            if (rank is not None and len(s.shape) != rank) or (f == "table" and not s.shape):
                return f"{f}=@{n} must have rank {'1 or more' if rank is None else rank}, @{n} has rank " \
                       f"{len(s.shape)}", f
        for f in ("padding_idx", "empty", "negative", "bits", "rows", "block"):
            v = getattr(self, f)
            if v is not None and v != "" and f not in spec.options:
                return f"a {self.kind} record has no field '{f}'", f
        pad = self.padding_idx
        if pad is not None and (not isinstance(pad, int) or isinstance(pad, bool)):
            return f"padding_idx must be an integer, got {self.padding_idx!r}", "padding_idx"
        for f, allowed in (("empty", WORK_EMPTY), ("negative", WORK_NEGATIVE)):
            if getattr(self, f) not in ("", *allowed):
                return f"{f} must be {one_of(allowed)}, got {getattr(self, f)!r}", f
        if self.kind == "qbag" and (self.bits not in (4, 8) or isinstance(self.bits, bool)):
            return f"a qbag record needs bits=8 or bits=4, got {self.bits!r}", "bits"
        if self.kind == "qbag":
            table, out = symbols[self.table], symbols[self.output]  # type: ignore[index]
            if table.dtype != "u8":
                return f"table=@{self.table} of a qbag record must hold bytes (u8)", "table"
            tail = 8 if self.bits == 8 else 4  # the scale's and bias's bytes after the codes
            width = table.shape[1]
            if width is not None and width <= tail:
                return (f"table=@{self.table} has rows of {width} bytes, but a {self.bits}-bit row needs more than "
                        f"the {tail} of its scale and bias"), "table"
            dim = None if width is None else (width - tail) * (8 // self.bits)
            if dim is not None and out.shape[1] not in (None, dim):
                return (f"output=@{self.output} has rows of {out.shape[1]}, but {self.bits}-bit rows of {width} "
                        f"bytes hold {dim} elements"), "output"
        if self.kind == "ttbag":
            why = self._train(symbols)
            if why is not None:
                return why
        if self.kind == "dhe":
            why = self._layers(symbols)
            if why is not None:
                return why
        if self.kind == "robe":
            width = symbols[self.output].shape[1]  # type: ignore[index]
            if not isinstance(self.block, int) or isinstance(self.block, bool) or self.block < 1 or (
                    width is not None and width % self.block):
                return f"a robe record needs block=Z, a positive divisor of the output's width {width}, got " \
                       f"{self.block!r}", "block"
        if self.kind == "bag" and self.empty == "":
            return (f"a bag record needs empty={one_of(WORK_EMPTY)}",)
        if self.weights is not None and self.mode != "sum":
            return "per-lookup weights need mode sum", "weights"
        return None

    def cores(self) -> list[int]:
        """A ttbag's cores or a dhe's layer weights, in order (the first is `table`)."""
        return [c for c in (self.table, self.part1, self.part2, self.part3) if c is not None]

    def _train(self, symbols: list[Symbol]) -> tuple[str, ...] | None:
        """Why a ttbag record's cores, rows and output do not fit together, or None."""
        if self.part3 is not None and self.part2 is None:
            return "a ttbag record with part3 needs part2", "part3"
        cores = self.cores()
        for c in cores:
            if symbols[c].dtype != "f32":
                return f"the cores of a ttbag record must hold f32, @{c} is {symbols[c].dtype}", "table"
        shapes = [symbols[c].shape for c in cores]
        known = all(s[:1] != (None,) for s in shapes)  # a hand-written program may leave each core's p as ?
        for k, s in enumerate(shapes):
            if len(s) != 4 or None in s[1:]:
                return (f"the cores of a ttbag record do not chain: core {k} must be a p x R x q x R' shape with "
                        f"static R, q and R' (p may be ?), got [{', '.join('?' if d is None else str(d) for d in s)}]",
                        "table")
        why = tt_shapes([s if s[:1] != (None,) else (1, *s[1:]) for s in shapes])
        if why is not None:
            return f"the cores of a ttbag record do not chain: {why}", "table"
        total = math.prod(s[0] for s in shapes) if known else None
        rows = self.rows
        if (rows is not None or known) and (not isinstance(rows, int) or isinstance(rows, bool) or rows < 1
                                            or (total is not None and rows > total)):
            bound = f"0 < N <= {total} (the product of the cores' p)" if known else "N > 0"
            return f"a ttbag record needs rows=N with {bound}, got {rows!r}", "rows"
        dim, width = math.prod(s[2] for s in shapes), symbols[self.output].shape[1]  # type: ignore[index]
        if width not in (None, dim):
            return f"output=@{self.output} has rows of {width}, but the cores make rows of {dim}", "output"
        return None

    def _layers(self, symbols: list[Symbol]) -> tuple[str, ...] | None:
        """Why a dhe record's layer weights do not chain into its output, or None."""
        if self.part2 is not None and self.part1 is None:
            return "a dhe record with part2 needs part1", "part2"
        layers = self.cores()
        for f, c in zip(("table", "part1", "part2"), layers):
            if symbols[c].dtype != "f32" or None in symbols[c].shape:
                shape = ", ".join("?" if d is None else str(d) for d in symbols[c].shape)
                return f"the layer weights of a dhe record must be f32 with static shapes, @{c} is " \
                       f"{symbols[c].dtype} [{shape}]", f
        for a, b in zip(layers, layers[1:]):
            if symbols[b].shape[1] != symbols[a].shape[0]:
                return (f"the layers of a dhe record do not chain: @{b} takes {symbols[b].shape[1]} inputs, @{a} "
                        f"makes {symbols[a].shape[0]}"), "table"
        width = symbols[self.output].shape[1]  # type: ignore[index]
        if width not in (None, symbols[layers[-1]].shape[0]):
            return (f"output=@{self.output} has rows of {width}, but the last layer makes "
                    f"{symbols[layers[-1]].shape[0]}"), "output"
        return None

    def symbols(self) -> dict[str, int]:
        """The symbol fields that are set, in WORK_SYMBOLS order."""
        return {f: v for f in WORK_SYMBOLS if (v := getattr(self, f)) is not None}


@dataclass
class Program:
    symbols: list[Symbol] = field(default_factory=list)
    access: list[Access] = field(default_factory=list)
    code: list[Instr | Label] = field(default_factory=list)  # labels are positions in the code
    weights: str = ""  # file the param data came from (kept for the record; .bin embeds the data)
    opset: int = 0  # ONNX opset of host operations
    data: dict[int, Any] = field(default_factory=dict, compare=False)  # symbol -> numpy array (params; .bin only)
    work: list[Work] = field(default_factory=list)  # the embedding operations it computes


# ISA constants (docs/isa.md): integers are 64-bit two's complement, so every integer immediate must
# fit in one; a vector has 1..MAX_LANES lanes, a constant of the instruction that makes it.
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
MAX_LANES = 4096

# ----------------------------------------------------------------------------- signatures
# OPS parsed, and the words messages use for them: the text parser, checker and printer all read
# operands through these.


@dataclass(frozen=True)
class Slot:
    """One operand position of an opcode signature: its kind letter, list-ness and repetition."""

    kind: str
    many: bool  # `*K`: a bracketed list of K
    mode: str  # "" (required), "?" (optional trailing) or "..." (zero or more trailing)


@cache
def signature(base: str) -> tuple[Slot, ...]:
    """The parsed OPS signature of an opcode without type suffix."""
    out = []
    for word in OPS[base].operands.split():
        mode = "..." if word.endswith("...") else "?" if word.endswith("?") else ""
        word = word.removesuffix("...").removesuffix("?")
        out.append(Slot(word.lstrip("*"), word.startswith("*"), mode))
    return tuple(out)


def arity(base: str) -> tuple[int, int | None]:
    """Smallest and largest operand count (None: unbounded)."""
    sig = signature(base)
    lo = sum(1 for s in sig if not s.mode)
    if any(s.mode == "..." for s in sig):
        return lo, None
    return lo, lo + sum(1 for s in sig if s.mode == "?")


def slots_for(base: str, n: int) -> list[Slot]:
    """The slot of each of `n` operands (optional and variadic slots follow the required ones)."""
    sig = signature(base)
    out = [s for s in sig if not s.mode]
    for s in sig:
        if s.mode == "?" and len(out) < n:
            out.append(s)
        elif s.mode == "...":
            out.extend([s] * max(0, n - len(out)))
    return out[:n]


def _operands(n: int) -> str:
    """'no operands', '1 operand', '3 operands': messages read as English."""
    return "no operands" if n == 0 else "1 operand" if n == 1 else f"{n} operands"


def arity_message(base: str, got: int) -> str:
    """The operand-count error, worded from the signature so it never disagrees with OPS."""
    lo, hi = arity(base)
    if hi is None:
        want = f"at least {_operands(lo)}"
    elif hi == lo:
        want = _operands(lo)
    elif hi == lo + 1:
        want = f"{lo} or {_operands(hi)}"
    else:
        want = f"{lo} to {_operands(hi)}"
    return f"'{base}' expects {want}, got {got}"


def one_of(names: tuple[str, ...]) -> str:
    """'a, b or c', for listing the few allowed words in a message."""
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " or " + names[-1]


KIND_DESC = {
    "R": "an r register", "F": "an f register", "D": "an r or f register", "W": "a v register",
    "G": "an r, f or v register", "Y": "an r or v register",
    "I": "an r register or an integer", "V": "a register or a number",
    "P": "a p, s or t register or an integer", "T": "a TU register (t)", "N": "a stream register (s)",
    "S": "a symbol (@n)", "M": "a memory reference (@n[...])", "L": "a label",
    "A": "an access program name", "E": f"an event ({one_of(EVENTS)})",
    "U": f"an ALU operation ({one_of(ALU_OPS)})", "Q": "a string", "X": "an attribute dict {...}",
}


def slot_desc(slot: Slot) -> str:
    """What an operand slot accepts, in words, for 'must be ...' messages."""
    return f"a list [...], each item {KIND_DESC[slot.kind]}" if slot.many else KIND_DESC[slot.kind]


def unknown_opcode(op: str) -> str:
    """Why `op` is not an opcode, with a close match rather than the whole table."""
    base, dot, suffix = op.partition(".")
    if base in OPS:
        return f"unknown type suffix '.{suffix}' on '{base}' (expected one of {', '.join(SCALARS)})"
    close = difflib.get_close_matches(base, list(OPS), n=1)
    return f"unknown opcode '{base}'" + (f" (did you mean '{close[0]}'?)" if close else "")
