"""The access unit: walks the traversal-unit nest, issues stream elements, marshals messages.

Timing definition (the reference engine transcribes it directly):
- The access unit has a clock `t`.  Every stream element (a memory or ALU stream's value for one
  iteration of its traversal unit) takes one issue slot: it is issued at `t`, then
  `t += 1 / lanes` (each lane issues one element a cycle).  Traversal-unit counters cost nothing.
- A program with more traversal units or streams than the machine has (`access.traversal_units`,
  `access.stream_slots`) does not run (`check_resources`).
- The issue clock never waits for data: a traversal unit whose bounds come from streams starts
  at once, and its induction values are ready when both the clock and the bounds are (streams run
  ahead of each other as far as the request slots and the queue allow).
- At most `outstanding` requests are in flight (docs/architecture.md). Requests take one of `outstanding`
  slots in program order, the one free earliest, as the core's fill buffers do: a memory element's
  request leaves when its address is known and that slot is free, at max(issue time, ready time of
  the streams it indexes with, the slot's free time); it completes when the cache model says
  (entering at `access.cache_level`), and frees its slot then, so a hit does not hold a slot while
  an older miss is in flight.
- An ALU element is ready one cycle after max(issue time, its operands' ready times).
- On an event (`beg` before the first iteration, `ite` after an iteration's streams, `end` after
  the last iteration) a rule pushes its operands into the data queue and then its token into the
  control queue (see queue.py for back-pressure); the access clock waits while the queue is full.
  An entry is ready when its value is: a token when all operands of its message are.
Streams are evaluated in program order for each iteration of the traversal unit they belong to
(the innermost traversal unit among their operands).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from heapq import heappush, heapreplace
from typing import Any

import numpy as np

from ..backend.dae import Access, Instr, Mem, Program, Reg
from ..ir.diagnostics import EmberError
from ..ir.types import ScalarType
from ..isa import OPS, integers
from ..machine import Machine
from . import cycle_limit
from .cache import MemorySystem
from .queue import TOKEN_BYTES, Entry, OutputQueue
from .tensors import Tensors, dtype_of


@dataclass
class Message:
    token: int | None
    operands: list[Entry]
    ready: float


@dataclass
class _TU:
    n: int
    bounds: list[Any]
    parent: int | None
    children: list[int] = field(default_factory=list)
    streams: list[Instr] = field(default_factory=list)
    rules: dict[str, list[Instr]] = field(default_factory=dict)
    depth: int = 0
    vl: int = 0  # lanes a head for a vector TU (vtu), 0 for a scalar TU
    buffers: list[Reg] = field(default_factory=list)  # buf streams filled over this TU's traversal
    inert: bool = False  # see inert_tus


def check_resources(program: Program, machine: Machine) -> None:
    """Each access program needs a traversal unit per `tu`/`vtu` and a stream slot per mem/alu/mask/buf
    stream; one that needs more than the machine has is refused before anything runs."""
    a = machine.access
    for acc in program.access:
        tus = sum(1 for i in acc.body if i.base in ("tu", "vtu"))
        streams = sum(1 for i in acc.body if i.base in ("mem", "alu", "mask", "buf"))
        if tus > a.traversal_units:
            raise EmberError(f"access program {acc.name} uses {tus} traversal units; the machine has "
                             f"{a.traversal_units} (access.traversal_units)")
        if streams > a.stream_slots:
            raise EmberError(f"access program {acc.name} uses {streams} streams; the machine has "
                             f"{a.stream_slots} stream slots (access.stream_slots)")


class AccessUnit:
    def __init__(self, acc: Access, params: list[int], tensors: Tensors, mem: MemorySystem, machine: Machine,
                 queue: OutputQueue, start: float, max_cycles: float = cycle_limit.DEFAULT_MAX_CYCLES):
        self.t = tensors
        self.max_cycles = max_cycles
        self.mem = mem
        self.q = queue
        self.level = machine.access.cache_level
        self.slot = 1.0 / machine.access.lanes
        self.slots: list[float] = []  # a min-heap: when each busy request slot frees
        self.outstanding = machine.access.outstanding
        self.clock = start
        self.params = params
        self.vals: dict[Reg, int | float] = {}
        self.ready: dict[Reg, float] = {}
        self.src: dict[Reg, tuple[int, int]] = {}  # stream -> (symbol, element) it was loaded from
        self.tus: dict[int, _TU] = {}
        self.roots: list[int] = []
        self.top_streams: list[Instr] = []
        self.elements = 0
        self.requests = 0
        self.tokens = 0
        self.operands = 0
        self.operand_bytes = 0
        self.lookups = 0
        self.stream_of: dict[int, int | None] = {}
        self.active: dict[int, int] = {}  # vector TU -> lanes on in its current head
        self.watchers: dict[Reg, list[Reg]] = {}  # vector stream -> buffers collecting its heads
        self.parts: dict[Reg, list[np.ndarray]] = {}
        self.blank: dict[Reg, Any] = {}  # each s and t register's value before it is first given one
        self.nbytes: dict[Reg, int] = {}  # queue bytes of a scalar memory stream's operand: its element's
        for ins in acc.body:
            self.declare(ins)
        for n in inert_tus(acc):
            self.tus[n].inert = True
        self.check_integers(acc)

    def owner(self, a: Any) -> int | None:
        if isinstance(a, Reg):
            if a.cls == "t":
                return a.n
            if a.cls == "s":
                return self.stream_of[a.n]
        return None

    def deepest(self, args: list[Any]) -> int | None:
        best: int | None = None
        for a in args:
            o = self.owner(a)
            if o is not None and (best is None or self.tus[o].depth > self.tus[best].depth):
                best = o
        return best

    def declare(self, ins: Instr) -> None:
        a = ins.args
        if ins.base in ("tu", "vtu"):
            parent = a[4].n if len(a) > 4 else None
            bounds = a[1:4] if ins.base == "tu" else [a[1], a[2], a[3]]
            tu = _TU(a[0].n, bounds, parent, depth=0 if parent is None else self.tus[parent].depth + 1,
                     vl=a[3] if ins.base == "vtu" else 0)
            self.tus[tu.n] = tu
            (self.tus[parent].children if parent is not None else self.roots).append(tu.n)
            self.blank[a[0]] = 0
        elif ins.base == "mask":
            self.stream_of[a[0].n] = a[1].n
            self.tus[a[1].n].streams.append(ins)
            self.blank[a[0]] = np.zeros(self.tus[a[1].n].vl, dtype=np.bool_)
        elif ins.base == "buf":
            source = self.blank[a[1]]  # a buffer of a scalar stream never fills (issue_vector feeds buffers)
            self.blank[a[0]] = np.zeros(0, dtype=source.dtype if isinstance(source, np.ndarray) else np.float32)
            home = self.stream_of[a[1].n]
            self.stream_of[a[0].n] = self.tus[home].parent if home is not None else None
            self.watchers.setdefault(a[1], []).append(a[0])
            if home is not None:
                self.tus[home].buffers.append(a[0])
        elif ins.base in ("mem", "alu"):
            args = list(a[1].index) if ins.base == "mem" else a[2:]
            home = self.deepest(args)
            self.stream_of[a[0].n] = home
            (self.tus[home].streams if home is not None else self.top_streams).append(ins)
            self.blank[a[0]] = 0
            if ins.base == "mem":
                dt = self.t.get_dtype(a[1].sym)
                last = a[1].index[-1] if a[1].index else None
                if isinstance(last, Reg) and last.cls == "t" and self.tus[last.n].vl:
                    self.blank[a[0]] = np.zeros(self.tus[last.n].vl, dtype=dt)
                else:  # a typed read (mem.T of a byte tensor) gives a value of its suffix type
                    name = ins.op.split(".")[1] if "." in ins.op else self.t.syms[a[1].sym].dtype
                    self.blank[a[0]] = 0.0 if ScalarType(name).is_float else 0
                    self.nbytes[a[0]] = dtype_of(name).itemsize
        elif ins.base == "on":
            self.tus[a[0].n].rules.setdefault(a[1], []).append(ins)

    def check_integers(self, acc: Access) -> None:
        """Bounds, steps, indices and ALU operands are integers: a float or vector stream there is refused before
        the unit runs (the ISA converts no float to an integer; the fast engine leaves such programs to this one)."""
        for ins in acc.body:
            a = ins.args
            uses = a[1:4] if ins.base in ("tu", "vtu") else a[1].index if ins.base == "mem" else \
                a[2:4] if ins.base == "alu" else ()
            for r in uses:
                blank = self.blank.get(r) if isinstance(r, Reg) and r.cls == "s" else None
                if isinstance(blank, (float, np.ndarray)):
                    what = "a float" if isinstance(blank, float) else "a vector"
                    role = {"tu": "a bound or step", "vtu": "a bound", "mem": "an index"}.get(ins.base,
                                                                                          "an ALU operand")
                    raise EmberError(f"access program {acc.name}: {r} holds {what} but is used as {role} of "
                                     f"{ins.args[0]}, which takes an integer")

    # --- values ------------------------------------------------------------------------------
    def value(self, a: Any) -> tuple[Any, float]:
        if isinstance(a, Reg):
            if a.cls == "p":
                return self.params[a.n], self.clock
            if a not in self.vals:  # read outside the traversal that gives it values (as the fast engine reads)
                return self.blank[a], 0.0
            return self.vals[a], self.ready[a]
        return a, self.clock

    def issue(self, ins: Instr) -> None:
        dst = ins.args[0]
        if ins.base == "mask":
            t = ins.args[1]
            self.vals[dst] = np.arange(self.tus[t.n].vl) < self.active[t.n]
            self.ready[dst] = self.ready[t]
            return
        m0 = ins.args[1] if ins.base == "mem" else None
        last = m0.index[-1] if m0 is not None and m0.index else None
        if isinstance(last, Reg) and last.cls == "t" and self.tus[last.n].vl:
            self.issue_vector(ins, last)
            return
        issue_t = self.clock
        self.clock += self.slot
        self.elements += 1
        if ins.base == "alu":
            (x, tx), (y, ty) = self.value(ins.args[2]), self.value(ins.args[3])
            # the execute unit's integer op of that name
            self.vals[dst] = OPS[ins.args[1]].value(int(x), int(y), where="an access-unit ALU stream")
            self.ready[dst] = max(issue_t, tx, ty) + 1.0
            return
        m: Mem = ins.args[1]
        idx, when = [], issue_t
        for i in m.index:
            v, r = self.value(i)
            idx.append(int(v))
            when = max(when, r)
        typed = dtype_of(ins.op.split(".")[1]) if "." in ins.op else None  # a typed read of a byte tensor
        try:
            flat = self.t.typed_index(m.sym, tuple(idx), typed.itemsize) if typed else \
                self.t.flat_index(m.sym, tuple(idx))
        except EmberError as e:
            raise self.explain(m, idx, e) from None
        when = self.slot_free(when)
        addr = self.t.addr(m.sym, flat)
        done = self.mem.access(addr, when, False, self.level)
        if typed and (addr + typed.itemsize - 1) // self.mem.line_bytes != addr // self.mem.line_bytes:
            done = max(done, self.mem.access(addr + typed.itemsize - 1, when, False, self.level))  # two lines
        self.take_slot(done)
        self.requests += 1
        if idx and self.t.is_lookup(m.sym, idx[-1]):
            self.lookups += 1
        arr = self.t.get(m.sym)
        self.vals[dst] = self.t.typed_value(m.sym, flat, typed) if typed else arr.flat[flat].item()
        self.ready[dst] = done
        self.src[dst] = (m.sym, flat)

    def issue_vector(self, ins: Instr, tu: Reg) -> None:
        """A head of `vl` consecutive elements: one issue slot per lane on, one request per line."""
        dst, m = ins.args[0], ins.args[1]
        n = self.active[tu.n]
        vl = self.tus[tu.n].vl
        issue_t = self.clock
        self.clock += self.slot * n
        self.elements += n
        idx, when = [], issue_t
        for i in m.index:
            v, r = self.value(i)
            idx.append(int(v))
            when = max(when, r)
        arr = self.t.get(m.sym)
        try:
            first = self.t.flat_index(m.sym, tuple(idx))
            if n:
                self.t.flat_index(m.sym, tuple(idx[:-1]) + (idx[-1] + n - 1,))
        except EmberError as e:
            raise self.explain(m, idx, e) from None
        out = np.zeros(vl, dtype=arr.dtype)
        out[:n] = arr.reshape(-1)[first:first + n]
        done = when
        line = self.mem.line_bytes
        a0, a1 = self.t.addr(m.sym, first), self.t.addr(m.sym, first + max(n, 1) - 1)
        for ln in range(a0 // line, a1 // line + 1) if n else ():
            d = self.mem.access(ln * line, self.slot_free(when), False, self.level)
            self.take_slot(d)
            self.requests += 1
            done = max(done, d)
        if n and self.t.is_lookup(m.sym, idx[-1]):
            self.lookups += 1
        self.vals[dst] = out
        self.ready[dst] = done
        for b in self.watchers.get(dst, ()):
            self.parts[b].append(out[:n])
            self.ready[b] = max(self.ready[b], done)

    def slot_free(self, when: float) -> float:
        """When a request wanting to leave at `when` can: once the slot free earliest is, if all are busy."""
        return max(when, self.slots[0]) if len(self.slots) == self.outstanding else when

    def take_slot(self, done: float) -> None:
        """The request just sent holds the slot free earliest until `done`."""
        if len(self.slots) == self.outstanding:
            heapreplace(self.slots, done)
        else:
            heappush(self.slots, done)

    def explain(self, m: Mem, idx: list[int], e: EmberError) -> EmberError:
        """Name the input element an out-of-range index came from, as PyTorch does."""
        for i in m.index:
            if isinstance(i, Reg) and i in self.src:
                sym, flat = self.src[i]
                shape = self.t.get(m.sym).shape
                bad = int(self.vals[i])
                axis = list(m.index).index(i)
                if not 0 <= bad < shape[axis]:
                    pos = self.t.get(sym).shape
                    where = flat if len(pos) == 1 else [int(x) for x in np.unravel_index(flat, pos)]
                    return EmberError(f"{self.t.describe(sym)}[{where}] = {bad} is out of range for "
                                      f"{self.t.describe(m.sym)} with {shape[axis]} rows")
        for axis, i in enumerate(m.index):  # a loop over a range read from memory (offsets) ran off the end
            if isinstance(i, Reg) and i.cls == "t" and not 0 <= idx[axis] < self.t.get(m.sym).shape[axis]:
                size = self.t.get(m.sym).shape[axis]
                for b in self.tus[i.n].bounds[:2]:
                    if isinstance(b, Reg) and b in self.src and not 0 <= int(self.vals[b]) <= size:
                        sym, flat = self.src[b]
                        pos = self.t.get(sym).shape
                        where = flat if len(pos) == 1 else [int(x) for x in np.unravel_index(flat, pos)]
                        side = "past the end" if int(self.vals[b]) > size else "before the start"
                        return EmberError(f"{self.t.describe(sym)}[{where}] = {self.vals[b]} bounds a loop that "
                                          f"runs {side} of {self.t.describe(m.sym)} with {size} elements")
        return e

    # --- walking -----------------------------------------------------------------------------
    def run(self) -> Iterator[Message]:
        for s in self.top_streams:
            self.issue(s)
        for r in self.roots:
            yield from self.walk(self.tus[r])

    def walk(self, tu: _TU) -> Iterator[Message]:
        (lb, tl), (ub, tu_), (step, ts) = (self.value(b) for b in tu.bounds)
        lb, ub, step = int(lb), int(ub), int(step)
        if step <= 0:
            raise EmberError(f"traversal unit t{tu.n} has step {step}; steps must be positive")
        if integers.tu_overflows(ub, step):
            raise EmberError(f"traversal unit t{tu.n} has bound {ub} and step {step}: its counter would pass "
                             f"2^63-1 (bound - 1 + step must be at most {integers.INT64_MAX})")
        if tu.inert and ub > lb:  # every iteration does the same and costs nothing: the last one leaves the state
            lb = integers.tu_last(lb, ub, step)
        bounds_ready = max(tl, tu_, ts)
        iv = Reg("t", tu.n)
        for b in tu.buffers:
            self.parts[b] = []
            self.ready[b] = self.clock
        yield from self.fire(tu, "beg")
        vl = tu.vl
        for i in range(lb, ub, step):
            cycle_limit.check(self.max_cycles, self.clock)
            if vl:
                self.active[tu.n] = min(vl, ub - i)
            self.vals[iv] = i
            self.ready[iv] = max(self.clock, bounds_ready)
            for s in tu.streams:
                self.issue(s)
            yield from self.fire(tu, "ite")
            for c in tu.children:
                yield from self.walk(self.tus[c])
        for b in tu.buffers:
            parts = self.parts.pop(b)
            self.vals[b] = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
        yield from self.fire(tu, "end")

    def fire(self, tu: _TU, event: str) -> Iterator[Message]:
        for rule in tu.rules.get(event, ()):
            pushes = rule.args[2]
            token = rule.args[3] if len(rule.args) > 3 else None
            ops: list[Entry] = []
            ready = self.clock
            for a in pushes:
                v, r = self.value(a)
                if isinstance(a, Reg) and a.cls == "t" and self.tus[a.n].vl:  # a vector TU's head: its lanes' indices
                    v = np.arange(v, v + self.tus[a.n].vl, dtype=np.int64)
                e = Entry(v, r, self.width(a, v))
                self.clock = self.push(e, ops, token)
                ops.append(e)
                ready = max(ready, r)
                self.operands += 1
                self.operand_bytes += e.bytes
            msg = Message(token, ops, ready)
            if token is not None:
                tok = Entry(token, ready, TOKEN_BYTES)
                self.clock = self.push(tok, ops, None)
                tok.ready = max(ready, self.clock)
                msg.ready = tok.ready
                msg.operands.append(tok)  # last entry: the token itself
                self.tokens += 1
            yield msg

    def push(self, e: Entry, before: list[Entry], token: int | None) -> float:
        """Push one entry of a message; a message larger than the whole queue gets its own error, since the
        callback that would pop its operands waits for a token that can never follow them."""
        try:
            return self.q.push(e, self.clock)
        except EmberError:
            total = sum(x.bytes for x in before) + e.bytes + (TOKEN_BYTES if token is not None else 0)
            if total > self.q.capacity:
                raise EmberError(f"one message of {total} bytes (operands and token) does not fit in the "
                                 f"{self.q.capacity}-byte output queue: give the machine a larger queue "
                                 "(access.queue_bytes) or marshal less per message (rows split in parts)") from None
            raise

    def width(self, s: Reg | int, v: Any) -> int:
        """Queue bytes of an operand: a mask packs into one 8-byte word, vectors and buffers are whole, a
        memory stream's value takes its element's bytes, anything else (ALU values, TUs, constants) 8."""
        if isinstance(v, np.ndarray):
            return max(8, (v.size + 7) // 8) if v.dtype == np.bool_ else v.nbytes
        return self.nbytes.get(s, 8) if isinstance(s, Reg) else 8


def inert_tus(acc: Access) -> set[int]:
    """Traversal units whose whole traversal leaves nothing but their counters' last values: no streams, no
    rule that pushes or sends a token, only inert children, and no bound below them reading a counter of
    theirs (so every iteration does exactly the same).  Counters cost no time, so running only the last
    iteration of such a unit gives the same state and clocks as running them all: a unit of 10^12 empty
    iterations finishes at once, on both engines (the fast engine uses this set too)."""
    parent: dict[int, int | None] = {}
    busy: set[int] = set()  # units with streams or rules that do something
    home: dict[int, int | None] = {}  # stream -> its unit (the deepest unit among its operands)
    depth: dict[int, int] = {}
    bounds_read: dict[int, set[int]] = {}  # unit -> the counters its bounds read
    for ins in acc.body:
        a = ins.args
        if ins.base in ("tu", "vtu"):
            p = a[4].n if len(a) > 4 else None
            parent[a[0].n] = p
            depth[a[0].n] = 0 if p is None else depth[p] + 1
            bounds_read[a[0].n] = {b.n for b in a[1:4] if isinstance(b, Reg) and b.cls == "t"}
        elif ins.base == "on":
            if len(a) > 3 or a[2]:
                busy.add(a[0].n)
        elif ins.base in ("mem", "alu", "mask", "buf"):
            args = [a[1]] if ins.base in ("mask", "buf") else list(a[1].index) if ins.base == "mem" else a[2:]
            owners = [r.n if r.cls == "t" else home.get(r.n) for r in args if isinstance(r, Reg) and r.cls in "st"]
            owners = [o for o in owners if o is not None]
            h = max(owners, key=lambda o: depth[o], default=None)
            home[a[0].n] = h
            if h is not None:
                busy.add(h)

    def below(n: int) -> list[int]:
        kids = [k for k, p in parent.items() if p == n]
        return kids + [d for k in kids for d in below(k)]

    inert = set()
    for n in parent:
        sub = below(n)
        if not busy & ({n} | set(sub)) and not any(bounds_read[k] & ({n} | set(sub)) for k in sub):
            inert.add(n)
    return inert
