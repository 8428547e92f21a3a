"""A static estimate of the cycles one embedding operation's loop nests take, for `choose-plan`.

The compiler may not run the simulator (data flows one way), so it estimates from what it knows
statically: the IR of a plan (loop nests on the core, or access loops and callbacks), the shapes of
the memrefs (so the trip counts: a loop bounded by offsets runs, over all its entries, as many times
as the index array it walks is long; extents the IR leaves to run time can be assumed, `sizes`) and the
machine's numbers (`Target`).  A nest costs

    latency + the largest of its resource bounds

- latency: the first lookup's chain of dependent loads (offsets -> indices -> row; a cold line
  costs a full miss, a line an earlier nest brought in a hit) and the queue hop of a decoupled nest;
  for the operation's last nest also the last stores' write-allocates of lines never touched before
  (a run ends when its stores are in L1), less the core's work that overlaps them;
- resource bounds, each a sustained rate: the access unit's issue (`lanes` stream elements a
  cycle), its request window (`outstanding` misses in flight), DRAM bandwidth, the core's load,
  store and vector-FP ports, its fill buffers (`miss_slots` misses in flight; a load miss holds the
  reorder buffer, so each `rob_entries` uops with a miss in them wait a miss latency), recurrences
  (an accumulator read, updated and written back by every lookup: the latency of that cycle over
  the accumulators in flight), and dispatch: `issue_width` uops a cycle plus, for a decoupled nest,
  the mispredicted jumps to callbacks.  That jump is predicted from the token before it (one-token
  history); the token sequence is generated from the nest's structure with the average trip counts,
  and each miss costs the token's queue read and the pipeline restart.  Each entry of a core loop
  also mispredicts its exit (the branch's latency and the restart), unless its trip count is fixed
  and no longer than the branch predictor's history.

An operation's nests run one after another and their costs add.  The estimate is a model, not the
simulator: choose-plan only acts on differences larger than its error (docs/architecture.md).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..dialects.loop import LOADS, STORES
from ..ir.core import Op, Value
from ..ir.types import ScalarType, ShapedType, StreamType, Type
from ..machine import Machine, load_machine
from ..predictor import DispatchPredictor


@dataclass(frozen=True)
class Target:
    """The machine numbers the estimate uses, read from a machine description (`of`): `ember-opt --machine`
    and `--set` choose it, the default machine otherwise.  The key each comes from is in brackets."""

    lanes: int                    # [access.lanes] stream elements issued a cycle
    outstanding: int              # [access.outstanding] access-unit requests in flight
    issue_width: int              # [execute.issue_width] uops dispatched a cycle
    miss_slots: int               # [execute.miss_slots] core misses in flight
    rob_entries: int              # [execute.rob_entries] uops the core runs ahead of a waiting load
    simd_bits: int                # [execute.simd_bits] one machine vector
    general_registers: int        # [execute.general_registers] the register files codegen fits into
    vector_registers: int         # [execute.vector_registers]
    mask_registers: int           # [execute.mask_registers]
    mispredict_penalty: float     # [execute.mispredict_penalty]
    branch_history: int           # [execute.branch_history] outcomes the conditional branches' predictor hashes in
    prefetch_lines: int           # [execute.prefetch_lines] lines the core's prefetcher fetches after a miss
    int_alu_latency: float        # [execute.int_alu_latency]
    fp_alu_latency: float         # [execute.fp_alu_latency]
    fp_mul_latency: float         # [execute.fp_mul_latency]
    branch_latency: float         # [execute.branch_latency]
    gather_latency: float         # [execute.gather_latency]
    load_throughput: float        # [execute.load_throughput] cycles a load (or pop, or gather lane) takes a port
    store_throughput: float       # [execute.store_throughput] cycles a store (or scatter lane) takes the port
    fp_throughput: float          # [execute.fp_throughput]
    line_bytes: int               # [caches.*.line_bytes]
    latencies: tuple[float, ...]  # [caches.*.latency] added by each level, from the core outward
    dram_latency: float           # [dram.latency], and a DRAM device's tRCD + tCL (Dram.idle_cycles)
    dram_bytes_per_cycle: float   # [dram.bytes_per_cycle]
    access_level: int             # [access.cache_level]: levels up to and including the access unit's

    @classmethod
    def of(cls, m: Machine) -> Target:
        """The estimate's numbers of machine `m`."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: getattr(section, k) for section in (m.access, m.execute) for k in names
                  if hasattr(section, k)}
        return cls(**values, line_bytes=m.line_bytes, latencies=tuple(c.latency for c in m.caches),
                   dram_latency=m.dram.idle_cycles(m.clock_ghz), dram_bytes_per_cycle=m.dram_bytes_per_cycle,
                   access_level=m.cache_names.index(m.access.cache_level) + 1)

    @property
    def hit(self) -> float:
        """Load-to-use latency of a line in the access unit's level (the queue lives there too)."""
        return sum(self.latencies[:self.access_level])

    @property
    def miss(self) -> float:
        """A full miss: every cache level, DRAM, and the line's transfer."""
        return sum(self.latencies) + self.dram_latency + self.line_bytes / self.dram_bytes_per_cycle

    @property
    def mispredict(self) -> float:
        """A mispredicted dispatch: the token's read from the queue, test and jump, then the restart."""
        return self.hit + self.int_alu_latency + self.branch_latency + self.mispredict_penalty


@functools.cache
def default_target() -> Target:
    """The default machine's numbers: what every estimate uses unless given a machine."""
    return Target.of(load_machine("default"))


@dataclass
class Estimate:
    """Cycles of a plan and what they are made of (for remarks and tests)."""

    cycles: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)
    known: bool = True  # every trip count was known statically (else the estimate guessed one per entry)

    def add(self, name: str, value: float) -> None:
        self.parts[name] = self.parts.get(name, 0.0) + value

    @property
    def bound(self) -> str:
        """The largest resource bound (not the latency): what limits the plan at scale."""
        rates = {k: v for k, v in self.parts.items() if k != "latency"}
        return max(rates, key=lambda k: rates[k]) if rates else "latency"


Sizes = Mapping[tuple[Value, int], int]  # (memref, axis) -> an extent the IR leaves to run time, assumed
NONE: Sizes = {}


def static(v: Value, sizes: Sizes = NONE) -> int | None:
    """The value of an index known at compile time (or assumed in `sizes`): a constant, an extent, or
    arithmetic on them."""
    o = v.owner
    if not isinstance(o, Op):
        return None
    if o.name == "loop.const":
        return o.attrs["value"] if isinstance(o.attrs["value"], int) else None
    if o.name == "loop.dim":
        dims = extents(o.operands[0], sizes)
        return dims[o.attrs["axis"]] if o.attrs["axis"] < len(dims) else None
    fold = {"loop.addi": lambda a, b: a + b, "loop.subi": lambda a, b: a - b, "loop.muli": lambda a, b: a * b,
            "loop.mini": min, "loop.maxi": max}.get(o.name)
    if fold is None:
        return None
    a, b = (static(x, sizes) for x in o.operands)
    return fold(a, b) if a is not None and b is not None else None


def _lanes(t: Type) -> int:
    if isinstance(t, StreamType):
        t = t.elem
    return t.shape[0] if isinstance(t, ShapedType) and t.kind == "vector" and t.shape else 1


def _bits(t: Type) -> int:
    if isinstance(t, StreamType):
        t = t.elem
    if isinstance(t, ShapedType):
        return _lanes(t) * t.elem.bytes * 8
    return t.bytes * 8 if isinstance(t, ScalarType) else 64


FLOAT_OPS = ("loop.addf", "loop.subf", "loop.mulf", "loop.divf", "loop.maxf", "loop.minf", "loop.fmaf", "loop.cast",
             "loop.select")
FREE = ("loop.const", "loop.getvar", "loop.setvar", "loop.dim", "loop.alloc",  # registers, or set up once
        "work")  # a record of what an operation computes: no code


class _Memory:
    """What the nests of one operation have touched so far: memref -> (the level its lines are in, how many)."""

    def __init__(self) -> None:
        self.seen: dict[Value, tuple[int, float]] = {}  # level 1: the core's L1; 2: the access unit's level

    def latency(self, m: Value, target: Target) -> float:
        """Load-to-use latency of `m`'s first line: a hit where an earlier nest left it, else a full miss."""
        lvl = self.seen.get(m, (0, 0.0))[0]
        return sum(target.latencies[:lvl]) if lvl else target.miss

    def record(self, m: Value, level: int, lines: float) -> None:
        old_level, old_lines = self.seen.get(m, (level, 0.0))
        self.seen[m] = (min(old_level, level), max(old_lines, lines))


def extents(m: Value, sizes: Sizes = NONE) -> list[int | None]:
    """A memref's extents, the dynamic ones taken from its `loop.alloc` where they are static, else from
    `sizes`."""
    t = m.type
    if not isinstance(t, ShapedType) or t.shape is None:
        return []
    dims: list[int | None] = [d if isinstance(d, int) else sizes.get((m, k)) for k, d in enumerate(t.shape)]
    o = m.owner
    if isinstance(o, Op) and o.name == "loop.alloc":
        given = iter(static(v, sizes) for v in o.operands)
        dims = [d if isinstance(t.shape[k], int) else next(given, None) for k, d in enumerate(dims)]
    return dims


def unknown(v: Value) -> list[tuple[Value, int]]:
    """The extents left to run time that the indices and sizes of `v` (a memref, or an index computed outside
    the nests) depend on: dynamic extents of memrefs that are not allocated from other extents."""
    out: list[tuple[Value, int]] = []
    t, o = v.type, v.owner
    if isinstance(t, ShapedType) and t.shape and not (isinstance(o, Op) and o.name == "loop.alloc"):
        out += [(v, k) for k, d in enumerate(t.shape) if not isinstance(d, int)]
    if isinstance(o, Op) and o.name.startswith("loop."):
        for x in o.operands:
            out += [u for u in unknown(x) if u not in out]
    return out


def _footprint(m: Value, count: float, lanes: int, indirect: bool, target: Target, sizes: Sizes) -> float:
    """Distinct lines of memref `m` that `count` accesses of `lanes` elements each touch: a 1-D array is read
    in order; a row-wise array's rows are consecutive, or picked at random (indirect: the expected number of
    distinct lines among that many uniform picks), and never more than the array has."""
    t = m.type
    dims = extents(m, sizes)
    if not isinstance(t, ShapedType) or not dims:
        return 1.0
    eb = t.elem.bytes
    total = math.prod(d for d in dims if d is not None) if None not in dims else None
    cap = math.ceil(total * eb / target.line_bytes) if total is not None else math.inf
    if cap == 0:  # an empty array (an extent of 0): no line to touch
        return 0.0
    if len(dims) == 1:
        return min(cap, math.ceil(count * lanes * eb / target.line_bytes))
    row = dims[-1] or lanes
    rows = count * min(lanes, row) / row
    per_row = row * eb / target.line_bytes
    if not indirect:
        return min(cap, math.ceil(rows * per_row))
    if total is None:
        return rows * max(1.0, math.ceil(per_row))
    units, size = (total / row, math.ceil(per_row)) if per_row >= 1 else (cap, 1)  # rows, or lines of rows
    return units * (1.0 - (1.0 - 1.0 / units) ** rows) * size


class _Nest:
    """One top-level nest: walks it once, with how often each op runs, and fills an Estimate."""

    def __init__(self, root: Op, memory: _Memory, target: Target, sizes: Sizes):
        self.t = target
        self.sizes = sizes
        self.memory = memory
        self.decoupled = root.name == "slc.for"
        self.count: dict[int, float] = {}      # id(op) -> executions over the whole nest
        self.trip: dict[int, float] = {}       # id(loop) -> average iterations per entry
        self.loaded: set[Value] = set()        # values read from memory (a row index that is one is indirect)
        self.uops = self.loads = self.stores = self.fp = 0.0
        self.elements = 0.0
        self.lines: dict[tuple[Value, str], float] = {}  # (memref, 'access' | 'load' | 'store') -> lines touched
        self.indirect: set[Value] = set()      # memrefs whose rows an index read from memory picks
        self.lead: dict[Value, tuple[float, float]] = {}  # memref -> (rows ahead, touches): an access-unit prefetch
        self.recurrence = 0.0
        self.exits = 0.0                       # mispredicted exits of core loops (see walk)
        self.callbacks: list[Op] = []
        self.known = True
        self.walk(root, 1.0)

    # -- trip counts --------------------------------------------------------------------------------
    def iterations(self, loop: Op, entries: float) -> float:
        """Total iterations of `loop` (heads, for a vector access loop) when it is entered `entries` times."""
        lb, ub, step = (static(v, self.sizes) for v in loop.operands)
        vl = loop.attrs.get("vl", 1)
        if lb is not None and ub is not None and step:
            return entries * max(0, -(-(ub - lb) // step) if vl == 1 else -(-(ub - lb) // vl))
        iv = loop.body.args[0]  # bounds from offsets: as many iterations in all as the array it walks is long
        walked = [extents(o.operands[0], self.sizes) for o in loop.walk() if o.name in ("slc.mem", *LOADS)
                  and len(o.operands) == 2 and o.operands[1] is iv]
        known = [d[0] for d in walked if len(d) == 1 and d[0] is not None]
        if not known:
            self.known = False
        return float(min(known)) if known else entries

    # -- walking ------------------------------------------------------------------------------------
    def walk(self, op: Op, n: float) -> None:
        self.count[id(op)] = n
        if op.name in ("slc.for", "loop.for"):
            inner = self.iterations(op, n)
            self.trip[id(op)] = inner / n if n else 0.0
            if op.name == "loop.for":
                self.uops += 3 * inner  # compare-and-branch, increment, jump back
                # its exit test mispredicts once an entry, unless its trip count is fixed and short enough for the
                # predictor's history to learn it (as gshare does: tests/test_branch_predictor.py)
                fixed = all(static(v, self.sizes) is not None for v in op.operands)
                if not (fixed and self.trip[id(op)] <= self.t.branch_history):
                    self.exits += n
            for o in op.body.ops:
                self.walk(o, inner)
            self.recurrences(op.body.ops, inner)
            return
        if op.name == "slc.callback":
            fires = n if op.attrs["on"] == "ite" else self.entries(op)
            self.count[id(op)] = fires
            self.callbacks.append(op)
            self.uops += 4 * fires  # read the token, test it, jump to the case; return
            self.loads += fires
            for o in op.body.ops:
                self.walk(o, fires)
            self.recurrences(op.body.ops, fires)
            return
        if op.name == "loop.if":
            for o in op.body.ops:
                self.walk(o, n)
            return
        self.cost(op, n)

    def entries(self, cb: Op) -> float:
        """How often a beg/end callback fires: once per entry of its loop."""
        loop = cb.parent_op()
        assert loop is not None
        return self.count[id(loop)]

    def cost(self, op: Op, n: float) -> None:
        name = op.name
        if name in ("slc.mem", "slc.alu", "slc.mask", "slc.buffer"):
            self.elements += n
            if name == "slc.mem":
                self.touch(op.operands[0], n, _lanes(op.result.type), op.operands[1:-1], "access")
                self.loaded.add(op.result)
            elif any(v in self.loaded for v in op.operands):
                self.loaded.add(op.result)
            return
        if name == "slc.head":
            pieces = self.pieces(op.result.type)
            vector = isinstance(op.result.type, ShapedType)
            self.uops += n * pieces * (2 if vector else 1)
            self.loads += n * pieces
            if op.operands[0] in self.loaded:
                self.loaded.add(op.result)
            return
        if name in FREE:
            return
        if name in LOADS or name in STORES:
            store = name in STORES
            m = op.operands[1] if store else op.operands[0]
            value = op.operands[0] if store else op.result
            lanes = _lanes(value.type)
            pieces = self.pieces(value.type)
            slots = lanes if name in ("loop.gather", "loop.scatter") else pieces
            self.uops += n * (slots if name in ("loop.gather", "loop.scatter") else pieces * (1 if store else 2))
            if store:
                self.stores += n * slots
            else:
                self.loads += n * slots
                self.loaded.add(op.result)
            first = 2 if store else 1
            self.touch(m, n, lanes, op.operands[first:first + max(0, _rank(m) - 1)], "store" if store else "load")
            return
        pieces = self.pieces(op.results[0].type) if op.results else 1
        uops = {"loop.tailmask": 4, "loop.iota": 2}.get(name, 1)
        self.uops += n * pieces * uops
        if name in FLOAT_OPS:
            self.fp += n * pieces
        if any(v in self.loaded for v in op.operands) and op.results:
            self.loaded.add(op.result)

    def pieces(self, t: Type) -> int:
        return max(1, -(-_bits(t) // self.t.simd_bits)) if isinstance(t, ShapedType) or (
            isinstance(t, StreamType) and isinstance(t.elem, ShapedType)) else 1

    def touch(self, m: Value, n: float, lanes: int, rows: list[Value], side: str) -> None:
        indirect = any(v in self.loaded for v in rows)
        if indirect:
            self.indirect.add(m)
        lines = _footprint(m, n, lanes, indirect, self.t, self.sizes)
        key = (m, side)
        self.lines[key] = max(self.lines.get(key, 0.0), lines)
        for v in rows:
            k = _lookahead(v)
            if side == "access" and k is not None:  # rows ahead, and how many rows the prefetch runs over
                self.lead[m] = (k, self.count.get(id(v.owner.operands[0].owner), n))  # type: ignore[union-attr]

    def covered(self, m: Value) -> float:
        """The share of the core's lines of `m` the access unit touched first in this nest: all of them for a
        plain stream over `m`; for a prefetch `k` rows ahead of n, all but the first min(n, k) - 1 (the last
        row, `min(i + k, last)`, is touched from the start)."""
        if (m, "access") not in self.lines:
            return 0.0
        ahead, rows = self.lead.get(m, (0.0, 0.0))
        if not ahead or not rows:
            return 1.0
        dims = extents(m, self.sizes)
        row_bytes = (dims[-1] or 1) * m.type.elem.bytes if dims and isinstance(m.type, ShapedType) else 1
        per_line = max(1.0, self.t.line_bytes / row_bytes)  # rows that share the last row's line
        return max(0.0, 1.0 - max(0.0, min(rows, ahead) - per_line) / rows)

    # -- recurrences --------------------------------------------------------------------------------
    def recurrences(self, ops: list[Op], fires: float) -> None:
        """An accumulator each firing reads and writes back (a memory element, or a core variable) chains
        the firings: the cycle's latency, over the accumulators that interleave."""
        for st in ops:
            if st.name in STORES:
                m, idx = st.operands[1], st.operands[2:]
                src = next((o for o in ops if o.name in LOADS and o.operands[0] is m and o.operands[1:] == idx), None)
                if src is None:
                    continue
                lat = self.path(src, st.operands[0]) + (self.t.gather_latency if src.name == "loop.gather" else 0)
                lat += self.t.latencies[0]
                if any(v in self.loaded for v in idx):  # rows picked by data: chains only through repeated rows
                    apart = float(max(1, (extents(m, self.sizes) or [1])[0] or 1))
                else:
                    apart = self.interleaved(st, idx)
                self.recurrence = max(self.recurrence, fires * lat / apart)
            elif st.name == "loop.setvar":
                get = next((o for o in ops if o.name == "loop.getvar" and o.attrs["var"] == st.attrs["var"]), None)
                if get is not None:
                    lat = self.path(get, st.operands[0])
                    if lat > 0:
                        self.recurrence = max(self.recurrence, fires * lat)

    def path(self, src: Op, v: Value) -> float:
        """Latency from `src`'s result to `v` through the arithmetic between them (0 if unrelated)."""
        if v.owner is src:
            return 0.0
        o = v.owner
        if not isinstance(o, Op) or not o.operands:
            return -math.inf
        best = max(self.path(src, x) for x in o.operands)
        if best == -math.inf:
            return best
        lat = self.t.fp_mul_latency if o.name in ("loop.mulf", "loop.fmaf") else (
            self.t.fp_alu_latency if o.name in FLOAT_OPS else self.t.int_alu_latency)
        return best + lat

    def interleaved(self, st: Op, idx: list[Value]) -> float:
        """Firings between two updates of one element: the iterations, per entry, of the loops inside the
        innermost enclosing loop whose index does not address the element."""
        inner = 1.0
        p = st.parent_op()
        while p is not None and p.name in ("slc.for", "loop.for", "slc.callback", "loop.if"):
            if p.name in ("slc.for", "loop.for"):
                iv = p.body.args[0]
                if not any(_depends(x, iv) for x in idx):
                    break
                inner *= max(1.0, self.trip.get(id(p), 1.0))
            p = p.parent_op()
        return inner


def _rank(m: Value) -> int:
    return (m.type.rank or 0) if isinstance(m.type, ShapedType) else 0


def _depends(v: Value, on: Value, depth: int = 0) -> bool:
    """Whether `v` is computed from `on` (through the heads and arithmetic of one nest)."""
    if v is on:
        return True
    o = v.owner
    if depth > 16 or not isinstance(o, Op) or o.name in ("loop.getvar",):
        return False
    return any(_depends(x, on, depth + 1) for x in o.operands)


def estimate(nests: Iterable[Op], target: Target | None = None, sizes: Sizes = NONE) -> Estimate:
    """Cycles of one operation's top-level nests (core `loop.for` and access `slc.for`), in program order,
    with the extents left to run time that `sizes` gives assumed, on `target` (the default machine's if None)."""
    target = target or default_target()
    memory = _Memory()
    est = Estimate()
    roots = list(nests)
    for k, root in enumerate(roots):
        _charge(_Nest(root, memory, target, sizes), root, memory, est, target, k == len(roots) - 1)
    return est


def _charge(n: _Nest, root: Op, memory: _Memory, est: Estimate, t: Target, last: bool) -> None:
    """Add one nest's cycles to `est`, then record what it touched."""
    access_cold = dram = waits = fills = stores = 0.0
    for (m, side), lines in n.lines.items():
        if not lines:  # nothing touched (an empty array, or accesses that never run): nothing to charge
            continue
        level, before = memory.seen.get(m, (0, 0.0))
        new = max(0.0, lines - before) if level else lines
        if side == "access":
            access_cold += new
            dram += new
            continue
        if side == "store":  # lines the core's loads of the same memref bring in are not missed twice
            new = max(0.0, new - n.lines.get((m, "load"), 0.0))
        covered = n.covered(m)
        hits = new * covered + (min(lines, before) if level > 1 else 0.0)  # in the access unit's level
        cold = new * (1.0 - covered)
        dram += cold
        if side == "store":
            stores += cold * t.miss + hits * t.hit
        elif m in n.indirect:  # a random row: each miss also has the line after the row fetched, for nothing
            per_row = _row_lines(m, t, n.sizes)  # unless the rows cover most of the array
            wasted = t.prefetch_lines * max(0.0, 1.0 - lines / _lines_of(m, t, n.sizes))
            waits += cold + hits
            fills += (cold * t.miss + hits * t.hit) * (per_row + wasted) / per_row
        else:  # read in order: the prefetcher brings every other line
            waits += (cold + hits) / (1 + t.prefetch_lines)
            fills += (cold * t.miss + hits * t.hit) / (1 + t.prefetch_lines)
    # The core's loads: it runs ahead `rob_entries` uops past a missing load, so each window of that many uops
    # that holds a miss costs a miss latency, or more when its misses need more than `miss_slots` fill buffers.
    # Stores do not hold the reorder buffer: their lines fill in the background, `miss_slots` at a time.
    # Misses in flight together take one latency, which the chain already counts: the bounds count the rest.
    windows = max(1.0, n.uops / t.rob_entries)
    loads = windows * max(min(1.0, waits / windows) * t.miss, fills / windows / t.miss_slots) if waits else 0.0
    misses = max(loads, stores / t.miss_slots)
    misses = max(0.0, misses - (t.miss if dram > access_cold else t.hit))
    bounds = {
        "access.issue": n.elements / t.lanes,
        "access.requests": max(0.0, access_cold * t.miss / t.outstanding - t.miss),
        "dram": dram * t.line_bytes / t.dram_bytes_per_cycle,
        "execute.loads": n.loads * t.load_throughput,
        "execute.stores": n.stores * t.store_throughput,
        "execute.fp": n.fp * t.fp_throughput,
        "execute.misses": misses,
        "execute.recurrence": n.recurrence,
    }
    mispredicts = _mispredicts(n, root) * t.mispredict if n.decoupled else 0.0
    mispredicts += n.exits * (t.branch_latency + t.mispredict_penalty)
    bounds["execute.issue"] = n.uops / t.issue_width + mispredicts  # the front end restarts after each miss
    latency = _chain(n, root, memory, t) + (_tail(n, root, memory, t, bounds["execute.issue"]) if last else 0.0)
    worst = max(bounds, key=lambda k: bounds[k])
    est.cycles += latency + bounds[worst]
    est.known = est.known and n.known
    est.add("latency", latency)
    est.add(worst, bounds[worst])
    for (m, side), lines in n.lines.items():
        memory.record(m, 2 if side == "access" else 1, lines)


def _lines_of(m: Value, t: Target, sizes: Sizes) -> float:
    """Lines the whole of `m` spans (infinite if an extent is not known)."""
    dims = extents(m, sizes)
    if not dims or None in dims or not isinstance(m.type, ShapedType):
        return math.inf
    return math.ceil(math.prod(d for d in dims if d is not None) * m.type.elem.bytes / t.line_bytes)


def _row_lines(m: Value, t: Target, sizes: Sizes) -> float:
    """Lines one row of `m` spans (at least one)."""
    dims = extents(m, sizes)
    eb = m.type.elem.bytes if isinstance(m.type, ShapedType) else 8
    return max(1.0, math.ceil((dims[-1] or 1) * eb / t.line_bytes)) if dims else 1.0


def _lookahead(v: Value) -> int | None:
    """k for an index `min(i + k, bound)` (a prefetch `k` iterations ahead), else None."""
    o = v.owner
    if not (isinstance(o, Op) and o.name == "slc.alu" and o.attrs.get("op") == "min"):
        return None
    add = o.operands[0].owner
    if not (isinstance(add, Op) and add.name == "slc.alu" and add.attrs.get("op") == "add"):
        return None
    return static(add.operands[1])


def _chain(n: _Nest, root: Op, memory: _Memory, t: Target) -> float:
    """The first lookup's latency: dependent loads from the nest's start to its first callback (or, on the
    core, to its last dependent load) and the queue hop."""
    ready: dict[Value, float] = {}

    def at(v: Value) -> float:
        if v in ready:
            return ready[v]
        o = v.owner
        r = 0.0
        if isinstance(o, Op):
            deps = max((at(x) for x in o.operands if x.owner is not None), default=0.0)
            if o.name in ("slc.mem", *LOADS):
                r = deps + memory.latency(o.operands[0], t)
            elif o.name in ("slc.alu", "loop.addi", "loop.subi", "loop.muli", "loop.mini", "loop.maxi"):
                r = deps + (t.int_alu_latency if o.name != "slc.alu" or deps else 0.0)
            elif o.name == "slc.head":
                r = deps + t.hit
            elif o.name not in ("loop.const", "loop.dim", "loop.getvar", "loop.alloc", "param"):
                r = deps
        elif o is not None:  # a loop's induction variable: ready with its bounds
            loop = o.parent
            if isinstance(loop, Op) and loop.name in ("slc.for", "loop.for"):
                r = max((at(x) for x in loop.operands), default=0.0)
        ready[v] = r
        return r

    latency = 0.0
    for op in root.walk():
        if op.name in STORES:
            latency = max(latency, max(at(x) for x in op.operands))
        elif op.name in LOADS or op.name == "slc.head":
            latency = max(latency, at(op.results[0]))
    return latency


def _tail(n: _Nest, root: Op, memory: _Memory, t: Target, work: float) -> float:
    """The operation's last stores drain before the run ends.  A write-allocate of a line no nest touched
    before is a miss, which starts with the first store to that line: the core's `work` after it hides part
    of it.  Stored in order, the last line's first store comes 1/lines of the work before the end; with a
    prefetch some rows ahead, the lines it misses are the first ones, and the prefetched rest of the work
    follows them.  A line the access unit prefetched is a hit."""
    tail = 0.0
    for m in {op.operands[1] for op in root.walk() if op.name in STORES}:
        if m in memory.seen:
            continue
        covered = n.covered(m)
        if covered >= 1.0:
            tail = max(tail, t.hit)
            continue
        after = covered if covered else 1.0 / max(1.0, n.lines.get((m, "store"), 1.0))
        tail = max(tail, t.hit, t.miss - work * after)
    return tail


def _mispredicts(n: _Nest, root: Op, sample: int = 32) -> float:
    """Mispredicted dispatches over the tokens the nest fires, generated from its structure with the average
    trip counts (run-length encoded) for the first `sample` iterations of the outer loop and scaled."""
    ids = {id(cb): k for k, cb in enumerate(n.callbacks)}
    outer = n.count.get(id(root), 1.0) * n.trip.get(id(root), 0.0)
    runs: list[list[int]] = []
    k = int(min(outer, sample))
    memo: dict[tuple[int, int], list[list[int]]] = {}
    for i in range(k):
        _iteration(n, root, ids, runs, i, memo)
        if len(runs) > RUNS_BUDGET:  # a deep nest (a tensor train's) makes many runs an iteration: sample fewer
            k = i + 1
            break
    predictor = DispatchPredictor()  # the simulator's rule
    misses = 0
    for tok, cnt, times in runs:  # a run that stands for `times` repeated iterations misses that many times
        misses += times * predictor.miss(tok)
        if cnt > 1:  # the rest of a run of one token: the second learns the repeat, and the others hit
            misses += times * predictor.miss(tok)
    return misses * (outer / k) if k else 0.0


def _emit(runs: list[list[int]], tok: int, cnt: int = 1) -> None:
    if cnt <= 0:
        return
    if runs and runs[-1][0] == tok and runs[-1][2] == 1:
        runs[-1][1] += cnt
    else:
        runs.append([tok, cnt, 1])


def _iteration(n: _Nest, loop: Op, ids: dict[int, int], runs: list[list[int]], i: int,
               memo: dict[tuple[int, int], list[list[int]]]) -> None:
    """The tokens of iteration `i` of `loop`: its ite callbacks, then each inner loop's whole traversal."""
    for o in loop.body.ops:
        if o.name == "slc.callback" and o.attrs["on"] == "ite":
            _emit(runs, ids[id(o)])
        elif o.name == "slc.for":
            _traversal(n, o, ids, runs, i, memo)


RUNS_BUDGET = 20_000  # runs one estimate generates, past which it samples no further outer iteration
REPEAT = 128  # iterations of a loop generated token by token (more than any paper workload's bag has)


def _traversal(n: _Nest, loop: Op, ids: dict[int, int], runs: list[list[int]], entry: int,
               memo: dict[tuple[int, int], list[list[int]]]) -> None:
    """One traversal of `loop` (entry number `entry`): beg callbacks, its iterations, end callbacks.  Entries
    of a loop whose trip count varies get the average, spread evenly (some one more than others).  The tokens
    depend on the loop and its trip count alone, so each such traversal is generated once (`memo`) and copied
    after that: a deep nest (a tensor train's) repeats the same inner traversals thousands of times."""
    avg = n.trip.get(id(loop), 0.0)
    trips = int((entry + 1) * avg) - int(entry * avg)
    made = memo.get((id(loop), trips))
    if made is None:
        made = memo[id(loop), trips] = []
        _generate(n, loop, ids, made, trips, memo)
    for k, (tok, cnt, times) in enumerate(made):
        if k == 0 and times == 1:
            _emit(runs, tok, cnt)  # joins the caller's last run when it is of the same token
        else:
            runs.append([tok, cnt, times])


def _generate(n: _Nest, loop: Op, ids: dict[int, int], runs: list[list[int]], trips: int,
              memo: dict[tuple[int, int], list[list[int]]]) -> None:
    cbs = [o for o in loop.body.ops if o.name == "slc.callback"]
    for cb in cbs:
        if cb.attrs["on"] == "beg":
            _emit(runs, ids[id(cb)])
    only_ite = all(o.name != "slc.for" for o in loop.body.ops) and [c.attrs["on"] for c in cbs].count("ite") == 1
    if only_ite:  # an innermost loop with one per-iteration callback: a run of its token
        cb = next(c for c in cbs if c.attrs["on"] == "ite")
        _emit(runs, ids[id(cb)], trips)
    else:
        for i in range(min(trips, REPEAT)):
            _iteration(n, loop, ids, runs, i, memo)
        if trips > REPEAT:  # the rest repeat the last one's tokens: generated once, counted for all of them
            last: list[list[int]] = []
            _iteration(n, loop, ids, last, REPEAT, memo)
            runs += [[tok, cnt, trips - REPEAT] for tok, cnt, _ in last]
    for cb in cbs:
        if cb.attrs["on"] == "end":
            _emit(runs, ids[id(cb)])
