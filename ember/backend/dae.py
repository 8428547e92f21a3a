"""The DAE program model: what `.dae` text, the `.bin` binary and the simulator all share.

A program is a symbol table (tensors: params, inputs, outputs, temporaries), zero or more access
programs (traversal units, streams, marshaling rules for the access unit) and one execute-unit
program (scalar instructions with labels; `run` starts an access program and dispatches its
tokens until the access unit is done: token k of access program `A0` runs the code at label
`A0.k` up to its `ret`).  Every instruction is an `Instr`
(opcode and arguments), so the text parser, printer, assembler and simulator work from one
opcode table, `OPCODES`, below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FORMAT_VERSION = 1


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


@dataclass
class Program:
    symbols: list[Symbol] = field(default_factory=list)
    access: list[Access] = field(default_factory=list)
    code: list[Instr | Label] = field(default_factory=list)  # labels are positions in the code
    weights: str = ""  # file the param data came from (kept for the record; .bin embeds the data)
    opset: int = 0  # ONNX opset of host operations
    data: dict[int, Any] = field(default_factory=dict, compare=False)  # symbol -> numpy array (params; .bin only)


# Argument kinds used in OPCODES signatures:
#   R int register, F float register, D r or f register, W vector register (v), G r, f or v register,
#   Y r or v register, V value (register or number),
#   I integer or register, P access value (stream s, TU t, parameter p, or integer),
#   S symbol, M memory reference, L label, A access-program name, T TU, N stream, E event,
#   U alu opcode, Q string, X attribute dict, *K a list of kind K (printed [a, b]), K... trailing variadic.
OPCODES: dict[str, tuple[str, str]] = {
    # --- execute unit ---
    "li": ("D V", "load an immediate"),
    "mov": ("D D", "copy a register"),
    "add": ("R I I", "integer add"), "sub": ("R I I", "integer subtract"), "mul": ("R I I", "integer multiply"),
    "div": ("R I I", "integer divide (floor)"), "rem": ("R I I", "integer remainder"),
    "min": ("R I I", "integer minimum"), "max": ("R I I", "integer maximum"),
    "slt": ("R I I", "set if less"), "sle": ("R I I", "set if less or equal"),
    "seq": ("R I I", "set if equal"), "sne": ("R I I", "set if not equal"),
    "sel": ("D R D D", "select: d = c ? a : b"),
    "fadd": ("F F F", "float add"), "fsub": ("F F F", "float subtract"), "fmul": ("F F F", "float multiply"),
    "fdiv": ("F F F", "float divide"), "fmax": ("F F F", "float maximum (NaN-propagating)"),
    "fmin": ("F F F", "float minimum"),
    "fcvt": ("F D", "integer or float to the float type of the suffix"),
    "ld": ("D M", "load an element"), "st": ("D M", "store an element"),
    "dim": ("R S I", "extent of a symbol's dimension"),
    "alloc": ("S *I", "give a temporary or output symbol its runtime shape"),
    "blt": ("I I L", "branch if less"), "bge": ("I I L", "branch if greater or equal"),
    "beq": ("I I L", "branch if equal"), "jmp": ("L", "jump"),
    "run": ("A I...", "start an access program and dispatch its tokens until it is done"),
    "pop": ("G", "pop the next operand (scalar or vector) from the queue"),
    "popb": ("S", "pop a buffer operand into a scratch symbol (reused, so it stays in the caches)"),
    "ret": ("", "end of a callback: back to the dispatcher"),
    "halt": ("", "end of the program"),
    "host": ("Q *S *S X", "run an ONNX operator on whole tensors (roofline cost)"),
    # --- execute unit, vectors (v registers; masks are v registers of booleans) ---
    "vld": ("W M W", "masked load of consecutive elements from [..., start] along the last axis"),
    "vst": ("W M W", "masked store of consecutive elements to [..., start]"),
    "vgather": ("W M W", "masked gather: the last index is a vector of indices"),
    "vscatter": ("W M W", "masked scatter: the last index is a vector of indices"),
    "vsplat": ("W D I", "a vector of `lanes` copies of a scalar"),
    "viota": ("W I I", "the vector start, start+1, ... of `lanes` lanes"),
    "vmask": ("W I I I", "the mask of `lanes` lanes where start + k < bound"),
    "vfadd": ("W W W", "vector float add"), "vfsub": ("W W W", "vector float subtract"),
    "vfmul": ("W W W", "vector float multiply"), "vfdiv": ("W W W", "vector float divide"),
    "vfmax": ("W W W", "vector float maximum"), "vfmin": ("W W W", "vector float minimum"),
    "vsel": ("W Y W W", "select whole vectors (r condition) or lanes (mask)"),
    "vcvt": ("W W", "convert every lane to the element type of the suffix"),
    # --- access unit (inside .access) ---
    "tu": ("T P P P T?", "traversal unit over [lb, ub) by step, nested in an optional parent TU"),
    "mem": ("N M", "memory stream: one load per iteration of its TU"),
    "alu": ("N U P P", "integer ALU stream"),
    "vtu": ("T P P I T?", "vector traversal unit: heads of `lanes` consecutive values in [lb, ub)"),
    "mask": ("N T", "stream of a vector TU's lane mask"),
    "buf": ("N N", "every head of a vector stream over one traversal of its TU, as one buffer"),
    "on": ("T E *P I?", "on a TU event (beg/ite/end) push operands, then an optional control token"),
}

ALU_OPS = ("add", "sub", "mul", "div", "min", "max")
EVENTS = ("beg", "ite", "end")
