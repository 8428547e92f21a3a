"""The fast engine's Python–C boundary: every structure that engine.py and the generated C share, by name.

The generated program exports `int64_t simulate(Args *x)` and `void release(Args *x)`; everything else crosses
inside `Args`: the symbols (`Symbol`), the cache and DRAM state (`Mem`, its `Level`s, `Channel`s and `Banks`), the
output queue (`Queue`), the timeline (`Trace`), the machine's numbers (`Numbers`), the host op's cost (`HostCost`)
and what the run counts (`Counts`, `Totals`).  Why named structures: a positional pointer list, or a flat array read
as `k * N + i`, goes wrong silently when one side changes and the other does not; a named field cannot be read at
another's position.

Each structure is one ctypes class here.  The C declarations of Symbol, HostCost, Numbers, Totals, Counts and Args
are generated from those classes' `_fields_` (`c_declarations`), so the two sides cannot drift.  Level, Channel,
Banks, Trace, Mem and Queue are declared by hand in runtime.h (its functions use them, and tests compile it alone),
so their classes mirror them; for every structure the compiled program also exports the layout the C compiler gave it
(`ember_layout`, see `c_layout_table`), and `check` compares it with ctypes' before the first call: a field that
differs in offset, size or kind (floating, integer, other) is an EmberError naming the structure and the field.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ...ir.diagnostics import EmberError
from ...machine import ExecuteUnit
from ..pipeline import CATEGORIES  # runtime.h's CAT_* are in this order
from .cdefs import OP_NAMES

_D, _I, _P = ctypes.c_double, ctypes.c_int64, ctypes.c_void_p
HOST_FN = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_int64)  # C `HostFn`: a host op by its code index, < 0 on error
SYNC_FN = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_int64, ctypes.c_double)  # C `SyncFn`: rounds.Rounds.sync

# Numbers: the machine's numbers the generated code reads (the source holds none but the vector width, so one build
# serves every machine of that width); all doubles, copied into `xp_<name>` locals at the function's entry
NUMBERS = ("issue_slot", "rob_entries", "store_buffer", "miss_slots", "prefetch_lines", "queue_latency",
           "l1_latency", "access_slot", "max_cycles", "outstanding", *ExecuteUnit.LATENCIES,
           *(f"per_cycle_{g}" for g in ExecuteUnit.GROUPS), *(f"hold_{g}" for g in ExecuteUnit.GROUPS))
FLOAT_TOTALS = ("cycles", "host_cycles", "host_flops", "host_bytes", "access_busy",
                *(f"stall_{c}" for c in CATEGORIES))
INT_TOTALS = ("elements", "requests", "tokens", "operands", "operand_bytes", "callbacks", "lookups", "instructions",
              "prefetches", *(f"pipe_{g}" for g in ExecuteUnit.GROUPS))


class Struct(ctypes.Structure):
    """A boundary structure: `__slots__` empty, so a misspelt field name (in the constructor or an assignment) is an
    AttributeError, where a plain ctypes Structure would keep it as a Python attribute and leave the field 0."""

    __slots__ = ()


def count_field(op: str) -> str:
    """Counts' field of an instruction counter (prefixed, so that no opcode can be a C keyword)."""
    return f"op_{op}"


# --- declared by hand in runtime.h (mirrored here; `check` compares) -------------------------------------------
class Level(Struct):
    """One cache level (runtime.h Level): geometry, latency, its sets' state, and its counters."""

    __slots__ = ()
    _fields_ = [("sets", _I), ("ways", _I), ("line_bytes", _I), ("latency", _D), ("tags", _P), ("rdy", _P),
                ("hits", _I), ("misses", _I), ("bytes", _I)]


class Channel(Struct):
    """One DRAM resource's calendar (runtime.h Channel); `grown`: the arrays are C's, the engine frees them."""

    __slots__ = ()
    _fields_ = [("start", _P), ("end", _P), ("n", _I), ("cap", _I), ("grown", _I)]


BANK_TIMINGS = ("cl", "cwl", "rcd", "rp", "ras", "rc", "wr", "rtp", "ccd_l", "rrd_l", "act_width", "refi", "rfc",
                "write_burst")
BANK_COUNTERS = ("activates", "hits", "misses", "conflicts")


class Banks(Struct):
    """Banked DRAM (runtime.h Banks): organization, timings in core cycles, each bank's state, counters."""

    __slots__ = ()
    _fields_ = [("ranks", _I), ("groups", _I), ("banks", _I), ("lines_per_row", _I), ("mop", _I),
                *((name, _D) for name in BANK_TIMINGS),
                ("row", _P), ("act", _P), ("pre_ok", _P), ("act_ok", _P),
                *((name, _D) for name in BANK_COUNTERS)]


class Branches(Struct):
    """The conditional branches' gshare predictor (runtime.h Branches): its masks, history, misses, counters."""

    __slots__ = ()
    _fields_ = [("mask", _I), ("hmask", _I), ("history", _I), ("misses", _I), ("counters", _P)]


class Trace(Struct):
    """The timeline's arrays (runtime.h Trace, trace.Events): counts, window, the events, each track's latest."""

    __slots__ = ()
    _fields_ = [("n", _I), ("cap", _I), ("dropped", _I), ("lo", _D), ("hi", _D), ("kind", _P), ("track", _P),
                ("t0", _P), ("t1", _P), ("val", _P), ("last", _P), ("lastv", _P)]


class Mem(Struct):
    """The memory system (runtime.h Mem): the levels, the DRAM calendars, DRAM's numbers and its counters, the
    banks (NULL for ideal DRAM), and the core's turns on what the cores share (rounds.py)."""

    __slots__ = ()
    _fields_ = [("nlev", _I), ("lv", _P), ("nch", _I), ("ch", _P),
                ("dram_latency", _D), ("line_time", _D), ("line_share", _D),
                ("dram_requests", _D), ("dram_bytes", _D), ("dram_busy", _D), ("dram_write_bytes", _D),
                ("dram_end", _D), ("bk", _P), ("q_end", _D), ("core", _I), ("sync", SYNC_FN), ("tr", _P)]


class Queue(Struct):
    """The output queue (runtime.h Queue): rings of entries, the byte histogram, and the FIFO-mode operands."""

    __slots__ = ()
    _fields_ = [("head", _I), ("tail", _I), ("held", _I), ("max_bytes", _I), ("max_entries", _I), ("cap", _I),
                ("mask", _I), ("bytes", _P), ("hist", _P), ("pop", _P), ("stall", _D),
                ("oph", _I), ("opt", _I), ("ops", _P), ("opk", _P), ("opi", _P), ("opf", _P), ("opr", _P),
                ("tr", _P)]


# --- declared from these classes (c_declarations) -------------------------------------------------------------
class Symbol(Struct):
    """A symbol's value: its elements, shape (`dims`, its rank of them), simulated base address, whether it has a
    value (`known`) and whether the C side allocated the elements (`owned`: release frees them)."""

    __slots__ = ()
    _fields_ = [("data", _P), ("dims", ctypes.POINTER(_I)), ("base", _I), ("known", _I), ("owned", _I)]


class HostCost(Struct):
    """What the host op just run costs (host.host_cost), set by the engine's callback before it returns."""

    __slots__ = ()
    _fields_ = [("cycles", _D), ("flops", _D), ("bytes", _D)]


class Numbers(Struct):
    """The machine's numbers (NUMBERS)."""

    __slots__ = ()
    _fields_ = [(name, _D) for name in NUMBERS]


class Totals(Struct):
    """What the run reports besides the counters: the FLOAT_TOTALS as doubles, the INT_TOTALS as integers."""

    __slots__ = ()
    _fields_ = [(name, _D) for name in FLOAT_TOTALS] + [(name, _I) for name in INT_TOTALS]


class Counts(Struct):
    """How many instructions of each opcode ran (cdefs.OP_NAMES), by count_field."""

    __slots__ = ()
    _fields_ = [(count_field(op), _I) for op in OP_NAMES]


class Args(Struct):
    """The one argument of simulate and release: everything the generated function reads and writes."""

    __slots__ = ()
    _fields_ = [("sym", ctypes.POINTER(Symbol)), ("nsym", _I), ("next_addr", _I), ("mem", ctypes.POINTER(Mem)),
                ("q", ctypes.POINTER(Queue)), ("access_level", _I), ("host", HOST_FN), ("cost", HostCost),
                ("xp", Numbers), ("counts", Counts), ("totals", Totals), ("br", ctypes.POINTER(Branches)),
                ("tr", ctypes.POINTER(Trace)), ("stop", _I)]


RUNTIME = (Level, Channel, Banks, Trace, Mem, Queue, Branches)  # declared in runtime.h
GENERATED = (Symbol, HostCost, Numbers, Totals, Counts, Args)  # declared by c_declarations, in this order
STRUCTS: tuple[type[Struct], ...] = RUNTIME + GENERATED  # what ember_layout reports, in this order


def _c_type(t: Any) -> str:
    """The C spelling of a ctypes field type."""
    if t is _D:
        return "double"
    if t is _I:
        return "int64_t"
    if t is _P:
        return "void *"
    if t is HOST_FN:
        return "HostFn"
    if t is SYNC_FN:
        return "SyncFn"
    if isinstance(t, type) and issubclass(t, ctypes._Pointer):
        return _c_type(t._type_) + " *"
    if isinstance(t, type) and issubclass(t, ctypes.Structure):
        return t.__name__
    raise TypeError(f"no C spelling for the ctypes type {t!r}")


def c_declarations() -> str:
    """C typedefs of the GENERATED structures, field for field as their classes' `_fields_`."""
    out = ["typedef double (*HostFn)(int64_t);"]
    for s in GENERATED:
        fields = " ".join(f"{_c_type(t)}{'' if _c_type(t).endswith('*') else ' '}{name};" for name, t in s._fields_)
        out.append(f"typedef struct {{ {fields} }} {s.__name__};")
    return "\n".join(out) + "\n"


def _kind(t: Any) -> int:
    """A field's kind as ember_layout reports it: 1 double, 2 int64_t, 3 anything else (pointers, structures)."""
    return 1 if t is _D else 2 if t is _I else 3


def c_layout_table() -> str:
    """C of `const int64_t *ember_layout(void)`: the entry count, then for each of STRUCTS its size and, for each
    field the Python class names, the field's offset, size and kind as the C compiler laid it out."""
    rows = []
    for s in STRUCTS:
        name = s.__name__
        rows.append(f"sizeof({name})")
        for field, _ in s._fields_:
            member = f"((({name} *)0)->{field})"
            rows.append(f"offsetof({name}, {field}), sizeof{member}, EMBER_KIND{member}")
    return ("#define EMBER_KIND(e) _Generic((e), double: 1, int64_t: 2, default: 3)\n"
            f"static const int64_t EMBER_LAYOUT[] = {{{len(_python_layout())},\n    " + ",\n    ".join(rows) +
            "};\nconst int64_t *ember_layout(void) { return EMBER_LAYOUT; }\n")


def _python_layout() -> list[tuple[str, str, int, int, int]]:
    """(structure, field, offset, size, kind) in ember_layout's order; a structure's own size has field ''."""
    out = []
    for s in STRUCTS:
        out.append((s.__name__, "", 0, ctypes.sizeof(s), 0))
        for field, t in s._fields_:
            d = getattr(s, field)
            out.append((s.__name__, field, d.offset, d.size, _kind(t)))
    return out


def check(lib: ctypes.CDLL) -> None:
    """Refuse a compiled program whose structures are laid out otherwise than the ctypes classes say."""
    try:
        fn = lib.ember_layout
    except AttributeError:
        raise EmberError("internal error: the fast engine's compiled program exports no ember_layout, so its "
                         "structures cannot be checked") from None
    fn.restype, fn.argtypes = ctypes.POINTER(_I), []
    table = fn()
    want = _python_layout()
    if table[0] != len(want):
        raise EmberError(f"internal error: the fast engine's compiled program reports {table[0]} layout entries "
                         f"where the engine has {len(want)}")
    at = 1
    for struct, field, offset, size, kind in want:
        if not field:
            c_size = table[at]
            at += 1
            if c_size != size:
                raise EmberError(f"internal error: the fast engine's structure {struct} is {c_size} bytes in C and "
                                 f"{size} in Python (ember/sim/fast/boundary.py against runtime.h or the generated "
                                 f"code)")
            continue
        c_offset, c_size, c_kind = table[at], table[at + 1], table[at + 2]
        at += 3
        if (c_offset, c_size, c_kind) != (offset, size, kind):
            names = {1: "double", 2: "int64_t", 3: "other"}
            raise EmberError(f"internal error: the fast engine's structure {struct} differs between C and Python at "
                             f"field '{field}': offset {c_offset}, {c_size} bytes, {names.get(c_kind, c_kind)} in C; "
                             f"offset {offset}, {size} bytes, {names[kind]} in Python (ember/sim/fast/boundary.py "
                             f"against runtime.h or the generated code)")
