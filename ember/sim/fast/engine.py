"""The fast engine: compile the program to C (c_source.py), run it, report exactly as the reference does.

The C compiler is the system's (`$CC`, else cc, gcc or clang), called with the flags that keep
Python's rounding (no fast-math, no FP contraction).  Why C and not numba: numba needed 10-20 s
to compile one generated program, the C compiler about 0.3 s, and a program runs once per
workload and variant.  Compiled programs are cached on disk by the hash of their source
($EMBER_CACHE_DIR, default ~/.cache/ember/fast); the source holds no shapes and no machine
numbers but the vector width, so one compilation serves every scale and every point of a sweep.  A program the
generator does not handle, a machine without a C compiler, or a run that stops on an error is run
by the reference engine instead: the reference words every error, and its results are the definition.

The generated function takes one argument, an `Args` structure (boundary.py) holding everything it reads and writes
by name: the symbols, the memory system, the queue, the machine's numbers, the counters and totals.  `_State` lays
those out as the reference lays out its objects; build.load has checked the compiled layout against the classes.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import threading
import time
from types import SimpleNamespace

import numpy as np

from ...backend.dae import Program
from ...ir.diagnostics import EmberError
from ...machine import Machine
from .. import reference
from ..access import check_resources
from ..cache import CacheLevel, MemorySystem
from ..cycle_limit import check, cycle_limit, exceeded
from ..dram import BankedDram, dram_of, report_banks
from ..execute import queue_latency
from ..host import HostRunner, host_cost
from ..queue import OutputQueue
from ..rounds import Turn
from ..stats import Stats
from ..tensors import Tensors, dtype_of, span
from ..trace import Events
from ..work import vector_lanes, work_counts
from .boundary import (
    BANK_COUNTERS,
    BANK_TIMINGS,
    CATEGORIES,
    FLOAT_TOTALS,
    HOST_FN,
    INT_TOTALS,
    NUMBERS,
    SYNC_FN,
    Args,
    Banks,
    Branches,
    Channel,
    Level,
    Mem,
    Numbers,
    Queue,
    Symbol,
    Trace,
    count_field,
)
from .build import load, notes
from .c_source import generate
from .cdefs import ERROR, INTERRUPTED, MAX_CYCLES, OK, OP_NAMES, Unsupported

DRAM_ROOM = 1 << 16  # booked DRAM intervals the C side makes room for at first, over all calendars; every one is
# kept (as the reference keeps them), and a calendar's room doubles when it fills (runtime.h, channel_grow)
DRAM_ROOM_MIN = 64  # a calendar's room to start with, however many calendars share DRAM_ROOM


def _free(pointers: list[int]) -> None:
    """Give memory the C side allocated back to the C library."""
    if pointers:
        free = ctypes.CDLL(None).free
        free.argtypes = [ctypes.c_void_p]
        for p in pointers:
            free(p)


class SharedArrays:
    """What the cores of a multi-core run share on the C side (cache.SharedMemory's counterpart): the first core's
    memory state holds the last level's lines, the DRAM calendars and the banks' state, which every later core's
    points at; each core keeps its own counters.  `release` frees the calendars' grown rooms once all are done."""

    def __init__(self) -> None:
        self.owner: MemoryState | None = None

    def release(self) -> None:
        if self.owner is not None:
            self.owner.release_bookings()


def virtual_symbols(program: Program) -> frozenset[int]:
    """Timing-only mode: float params (the tables), and params a transform derives from them (`NAME#int8`,
    `#tt/...`, `#robe/...`: quantized rows, cores, arrays), become address ranges with no data."""
    return frozenset(n for n, s in enumerate(program.symbols)
                     if s.kind == "param" and (s.dtype.startswith(("f", "bf")) or "#" in s.name)
                     and None not in s.shape)


def prepare(program: Program, timing_only: bool, simd_bits: int) -> ctypes.CDLL:
    """The compiled program; raises Unsupported (with the reason) when the reference engine must run it.

    Remembered on the program object (keyed by its code's identity and length), so a benchmark that
    reruns one program on many tables generates its source once.  The machine's vector width is the
    one machine number the source holds (a wider DAE vector is issued as several machine vectors).
    """
    key = (timing_only, simd_bits, id(program.code), len(program.code), len(program.symbols))
    memo = program.__dict__.setdefault("_fast_libs", {})
    if key not in memo:
        memo[key] = load(generate(program, virtual_symbols(program) if timing_only else frozenset(), simd_bits))
    return memo[key]


def compiled_or_none(program: Program, timing_only: bool, simd_bits: int) -> ctypes.CDLL | None:
    """The compiled program, or None (the reason in `notes`) when the reference engine must run it."""
    try:
        return prepare(program, timing_only, simd_bits)
    except Unsupported as e:
        if timing_only:
            raise EmberError(f"--timing-only: the fast engine cannot run this program ({e})") from None
        notes.append(f"the fast engine does not handle {e}; the reference engine ran it")
        return None


def simulate(program: Program, inputs: dict[str, np.ndarray], machine: Machine, max_cycles: float | None,
             timing_only: bool, shared: SharedArrays | None = None, turn: Turn | None = None,
             trace: Events | None = None) -> tuple[dict[str, np.ndarray], Stats]:
    """Run `program`; the same results and statistics as ember.sim.reference.simulate.  `host_seconds`
    leaves out the one-off compilation of a program not yet in the cache.  A core of a multi-core run shares
    `shared` with the others and takes its turns by `turn` (rounds.py).  `trace` records the run's timeline in
    the reference's order (trace.py)."""
    notes.clear()
    limit = cycle_limit(max_cycles)
    check_resources(program, machine)
    virtual = virtual_symbols(program) if timing_only else frozenset()
    lib = compiled_or_none(program, timing_only, machine.execute.simd_bits)
    if lib is None:
        assert shared is None, "multicore.simulate_cores picks the engine for all cores before the first runs"
        return reference.simulate(program, inputs, machine, max_cycles, trace=trace)
    t0 = time.perf_counter()
    state = _State(program, inputs, machine, limit, virtual, shared, turn)
    if turn is not None:
        turn.rounds.on_stop(state.stop)
    if trace is not None:
        state.record(trace)
    try:
        status = state.run(lib)
        if status == OK:
            outputs = state.outputs()
    finally:
        lib.release(ctypes.byref(state.args))
        if shared is None:
            state.memory.release_bookings()
    if status == MAX_CYCLES:
        raise exceeded(limit, float(state.args.totals.cycles))
    if status == INTERRUPTED:  # a multi-core run stopped by Ctrl-C (rounds.Rounds.stop)
        raise KeyboardInterrupt
    if status != OK:
        if state.error is not None:
            raise state.error
        if timing_only:
            raise EmberError("--timing-only: the simulation stopped on an error; run it with data (without "
                             "--timing-only) to see which")
        reference.simulate(program, inputs, machine, max_cycles)  # raises the error, worded
        raise EmberError("internal error: the fast engine stopped where the reference engine did not "
                         "(please report it; --engine reference runs this program)")
    check(limit, float(state.args.totals.cycles))
    return outputs, state.statistics(time.perf_counter() - t0)


class MemoryState:
    """The caches' and DRAM's state on the C side for `machine` (boundary.Mem, its Levels and Channels, and the
    arrays they point into), laid out as cache.MemorySystem keeps it; an earlier core's last level and bookings
    when `shared` holds them.  The arrays live as long as this object."""

    def __init__(self, machine: Machine, shared: SharedArrays | None = None, turn: Turn | None = None):
        caches = machine.caches
        owner = shared.owner if shared is not None else None
        self.owns = owner is None  # this state's calendars are its own (the first core's, or a lone core's)
        self.tags = [np.zeros(c.sets * (c.ways + 1), dtype=np.int64) for c in caches]  # see Level in runtime.h
        self.rdy = [np.zeros(c.sets * c.ways) for c in caches]
        if owner is not None:
            self.tags[-1], self.rdy[-1] = owner.tags[-1], owner.rdy[-1]
        self.levels = (Level * len(caches))(*(
            Level(sets=c.sets, ways=c.ways, line_bytes=c.line_bytes, latency=float(c.latency), tags=tags.ctypes.data,
                  rdy=rdy.ctypes.data) for c, tags, rdy in zip(caches, self.tags, self.rdy)))
        model = dram_of(machine.dram, machine.clock_ghz, caches[0].line_bytes)  # its numbers, as the reference's
        nch = machine.dram.channels
        if owner is not None:
            self.bookings_of, self.channels = owner.bookings_of, owner.channels
        else:
            ncal = nch
            if isinstance(model, BankedDram):  # calendars in runtime.h Mem's order
                ncal += len(model.rank_acts) + len(model.group_acts) + len(model.group_cols) + len(model.sessions)
            slots = max(DRAM_ROOM_MIN, DRAM_ROOM // ncal)
            self.bookings_of = [(np.zeros(slots), np.zeros(slots)) for _ in range(ncal)]  # each calendar's bookings
            self.channels = (Channel * ncal)(*(Channel(start=start.ctypes.data, end=end.ctypes.data, n=0, cap=slots)
                                               for start, end in self.bookings_of))
        self.mem = Mem(nlev=len(caches), lv=ctypes.addressof(self.levels), nch=nch,
                       ch=ctypes.addressof(self.channels), dram_latency=float(machine.dram.latency),
                       line_time=model.burst, line_share=caches[0].line_bytes / machine.dram_bytes_per_cycle,
                       q_end=math.inf)
        if turn is not None:  # kept alive as long as the C side may call it
            self.sync = SYNC_FN(turn.rounds.sync)
            self.mem.q_end, self.mem.core, self.mem.sync = turn.end, turn.core, self.sync
        self.bank_state: tuple[np.ndarray, ...] = ()
        self.banks: Banks | None = None
        if isinstance(model, BankedDram):
            nbanks = model.banks
            self.bank_state = owner.bank_state if owner is not None else (
                np.full(nbanks, -1, dtype=np.int64), *(np.zeros(nbanks) for _ in range(3)))
            row, act, pre_ok, act_ok = (a.ctypes.data for a in self.bank_state)
            d, tm = model.dev, model.t
            self.banks = Banks(ranks=d.ranks, groups=d.bankgroups, banks=d.banks,
                               lines_per_row=model.lines_per_row, mop=int(model.mop),
                               act_width=model.act_width, write_burst=model.write_burst, row=row, act=act,
                               pre_ok=pre_ok, act_ok=act_ok,
                               **{name: getattr(tm, name) for name in BANK_TIMINGS
                                  if name not in ("act_width", "write_burst")})
            self.mem.bk = ctypes.addressof(self.banks)
        if shared is not None and owner is None:
            shared.owner = self

    def release_bookings(self) -> None:
        """Free the rooms the C side grew for the calendars (once; a later core's are the first core's)."""
        if not self.owns:
            return
        for c in self.channels:
            if c.grown:
                _free([c.start, c.end])
                c.grown = 0

    def bank_counts(self) -> tuple[int, ...] | None:
        """Banked DRAM's counters (activates, hits, misses, conflicts), None for ideal DRAM."""
        return None if self.banks is None else tuple(int(getattr(self.banks, k)) for k in BANK_COUNTERS)


class QueueState:
    """The output queue on the C side for `machine` (boundary.Queue and its rings): the bytes and pop time of each
    entry in flight, the histogram of bytes held, and the FIFO of operands pushed without a token."""

    def __init__(self, machine: Machine):
        cap = machine.access.queue_total_bytes
        ring = 1 << max(10, (cap + 2).bit_length())
        self.bytes, self.pops = np.zeros(ring, dtype=np.int64), np.zeros(ring)
        self.hist = np.zeros(cap + 1, dtype=np.int64)
        self.fifo = {name: np.zeros(ring, dtype=np.int64) for name in ("ops", "opk", "opi")}
        self.fifo.update({name: np.zeros(ring) for name in ("opf", "opr")})
        self.queue = Queue(cap=cap, mask=ring - 1, bytes=self.bytes.ctypes.data, hist=self.hist.ctypes.data,
                           pop=self.pops.ctypes.data, **{name: a.ctypes.data for name, a in self.fifo.items()})


class _State:
    """The memory the generated function reads and writes, laid out as the reference lays out its objects, and the
    `Args` (boundary.py) that hands it over by name."""

    def __init__(self, program: Program, inputs: dict[str, np.ndarray], machine: Machine,
                 max_cycles: float, virtual: frozenset[int], shared: SharedArrays | None, turn: Turn | None):
        self.p, self.m, self.virtual = program, machine, virtual
        syms = program.symbols
        t = Tensors(program)
        self.args = Args()
        self.syms = (Symbol * max(len(syms), 1))()
        self.dims = [np.zeros(max(len(s.shape), 1), dtype=np.int64) for s in syms]  # each symbol's shape
        for sym, dims in zip(self.syms, self.dims):
            sym.dims = dims.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))
        self.keep: list[np.ndarray] = []  # arrays the C code points into
        self.orphans: list[int] = []  # C allocations a host op replaced, freed after the run
        reference.set_symbols(t, program, inputs, virtual)  # the reference's order, so base addresses agree
        for n in virtual:
            self.dims[n][:len(syms[n].shape)] = syms[n].shape
            self.syms[n].known = 1
        for n, a in enumerate(t.arrays):
            if a is not None:
                self.point(n, a)
        for n, base in enumerate(t.base):
            self.syms[n].base = int(base)
        self.args.sym = ctypes.cast(self.syms, ctypes.POINTER(Symbol))
        self.args.nsym = len(syms)
        self.args.next_addr = int(t.next_addr)

        caches = machine.caches
        names = [c.name for c in caches]
        self.memory = MemoryState(machine, shared, turn)
        self.args.mem = ctypes.pointer(self.memory.mem)
        for name in (machine.access.cache_level, "l1"):
            if name not in names:
                raise EmberError(f"unknown cache level '{name}' (levels: {', '.join(names)})")
        self.args.access_level = names.index(machine.access.cache_level)

        self.queue_state = QueueState(machine)  # owns the queue and the arrays it points into
        self.args.q = ctypes.pointer(self.queue_state.queue)
        ex = machine.execute  # the conditional branches' predictor (predictor.BranchPredictor), counters at 1
        self.branch_counters = np.ones(ex.branch_entries, dtype=np.uint8)
        self.branches = Branches(mask=ex.branch_entries - 1, hmask=(1 << ex.branch_history) - 1,
                                 counters=self.branch_counters.ctypes.data)
        self.args.br = ctypes.pointer(self.branches)

        ex = machine.execute
        xp = {"issue_slot": 1.0 / ex.issue_width, "rob_entries": ex.rob_entries, "store_buffer": ex.store_buffer,
              "miss_slots": ex.miss_slots, "prefetch_lines": ex.prefetch_lines,
              "queue_latency": queue_latency(machine), "l1_latency": caches[0].latency,
              "access_slot": 1.0 / machine.access.lanes, "max_cycles": max_cycles,
              "outstanding": machine.access.outstanding, **{k: getattr(ex, k) for k in ex.LATENCIES}}
        for g in ex.GROUPS:
            xp[f"per_cycle_{g}"], xp[f"hold_{g}"] = ex.pipes(g)
        self.args.xp = Numbers(**{name: float(xp[name]) for name in NUMBERS})
        self.callback = HOST_FN(self.host)  # kept alive as long as the C side may call it
        self.args.host = self.callback
        self.hosts = HostRunner(program, self.known)
        self.error: EmberError | None = None  # a host op's error, raised when the C side has returned
        self.events: Events | None = None  # the timeline recorded, if any (`record`)

    def record(self, e: Events) -> None:
        """Let the run record its timeline into `e`'s arrays (read back by `recorded`)."""
        self.events = e
        self.trace = Trace(n=e.n, cap=e.cap, dropped=e.dropped, lo=e.lo, hi=e.hi,
                           **{name: getattr(e, name).ctypes.data for name in ("kind", "track", "t0", "t1", "val",
                                                                             "last", "lastv")})
        self.args.tr = ctypes.pointer(self.trace)
        self.memory.mem.tr = self.queue_state.queue.tr = ctypes.addressof(self.trace)

    def recorded(self) -> None:
        if self.events is not None:
            self.events.n, self.events.dropped = int(self.trace.n), int(self.trace.dropped)

    def point(self, n: int, a: np.ndarray) -> None:
        """Let symbol n's C pointer see array `a` (kept alive until the run ends)."""
        a = np.ascontiguousarray(a)
        self.keep.append(a)
        sym = self.syms[n]
        if sym.owned:
            self.orphans.append(int(sym.data))
            sym.owned = 0
        sym.data = a.ctypes.data
        self.dims[n][:a.ndim] = a.shape
        sym.known = 1

    def array(self, n: int) -> np.ndarray:
        """A copy of symbol n's current value, shaped."""
        s = self.p.symbols[n]
        shape = tuple(int(d) for d in self.dims[n][:len(s.shape)])
        dt = dtype_of(s.dtype)
        count = int(np.prod(shape, dtype=np.int64))
        data = self.syms[n].data
        if count == 0 or not data:
            return np.zeros(shape, dtype=dt)
        buf = (ctypes.c_char * (count * dt.itemsize)).from_address(data)
        return np.frombuffer(buf, dtype=dt, count=count).reshape(shape).copy()

    def known(self, n: int) -> np.ndarray:
        """Symbol n's value for a host op; a symbol without one is an error the reference engine words."""
        if not self.syms[n].known:
            raise LookupError(f"symbol {n} has no value")
        return self.array(n)

    def host(self, index: int) -> float:
        """A host op, called from C: run it (its whole run of host ops at the first), give its outputs
        addresses, charge its cost (into args.cost)."""
        try:
            op_type, in_syms, out_syms, attrs = self.p.code[index].args
            arrays, outs = self.hosts.step(index)
            for s, o in zip(out_syms, outs):
                sym = self.p.symbols[s.n]
                want = dtype_of(sym.dtype)
                o = o.astype(want, copy=False) if o.dtype != want else o
                if o.ndim != len(sym.shape) or any(d is not None and d != x for d, x in zip(sym.shape, o.shape)):
                    return -1.0
                self.point(s.n, o)
                self.syms[s.n].base = self.args.next_addr
                self.args.next_addr += span(o.nbytes)
            ex = self.m.execute
            cost = self.args.cost
            cycles, flops, moved = host_cost(op_type, arrays, outs, ex.host_flops_per_cycle,
                                             self.m.dram_bytes_per_cycle, ex.matrix_flops_per_cycle, attrs)
            cost.cycles, cost.flops, cost.bytes = float(cycles), float(flops), float(moved)
            return 0.0
        except EmberError as e:  # the host runtime's own error, worded already: raised once C returns
            self.error = e
            return -1.0
        except Exception:  # the reference engine reruns the program and words the error
            return -1.0

    def stop(self) -> None:
        """Stop at the next cycle-limit check (the generated code reads `stop` there)."""
        self.args.stop = 1

    def run(self, lib: ctypes.CDLL) -> int:
        """Call the compiled program.  In the main thread it runs in a thread of its own (ctypes lets go of the GIL
        while C runs), so that Ctrl-C, which Python delivers to the main thread only, reaches the wait here: it
        sets `stop`, which the program checks where it checks the cycle limit, and is raised again once C has
        returned."""
        call = functools.partial(lib.simulate, ctypes.byref(self.args))
        try:
            if threading.current_thread() is not threading.main_thread():
                return int(call())
            done: list[int] = []
            worker = threading.Thread(target=lambda: done.append(call()), name="fast-engine", daemon=True)
            try:
                worker.start()  # (a Ctrl-C can come while start waits for the thread to run)
                worker.join()
            except KeyboardInterrupt:
                self.args.stop = 1
                while worker.is_alive():  # C must be done with the memory before it is released
                    with contextlib.suppress(KeyboardInterrupt):
                        worker.join()
                raise
            return int(done[0]) if done else ERROR
        finally:
            self.recorded()
            _free(self.orphans)

    def outputs(self) -> dict[str, np.ndarray]:
        out = {}
        for n, s in enumerate(self.p.symbols):
            if s.kind == "output":
                if not self.syms[n].known:
                    raise EmberError(f"output '{s.name}' is read before it has been given a value")
                out[s.name] = self.array(n)
        return out

    def statistics(self, host_seconds: float) -> Stats:
        """The reference's statistics function, fed from the totals and counters by name."""
        m = self.m
        t = self.args.totals
        fs = {name: float(getattr(t, name)) for name in FLOAT_TOTALS}
        is_ = {name: int(getattr(t, name)) for name in INT_TOTALS}
        counts = {op: c for op in OP_NAMES if (c := int(getattr(self.args.counts, count_field(op))))}
        ports = {g: SimpleNamespace(count=is_[f"pipe_{g}"]) for g in m.execute.GROUPS}
        pipe = SimpleNamespace(instructions=is_["instructions"], ports=ports,
                               stalls={c: fs[f"stall_{c}"] for c in CATEGORIES})
        core = SimpleNamespace(pipe=pipe, counts=counts, lookups=0, prefetches=is_["prefetches"],
                               branch_misses=int(self.branches.misses),
                               host_cycles=fs["host_cycles"], host_flops=fs["host_flops"])
        q = OutputQueue(m.access.queue_total_bytes)
        q.stall = float(self.queue_state.queue.stall)
        q.max_bytes = int(self.queue_state.queue.max_bytes)
        q.max_entries = int(self.queue_state.queue.max_entries)
        for value in np.flatnonzero(self.queue_state.hist):
            q.hist.add(int(value), int(self.queue_state.hist[value]))
        levels = [CacheLevel(c.name, c.ways * c.line_bytes, c.ways, c.line_bytes, c.latency) for c in m.caches]
        for lv, counted in zip(levels, self.memory.levels):  # counters only: one set each
            lv.hits, lv.misses, lv.bytes = int(counted.hits), int(counted.misses), int(counted.bytes)
        d = self.memory.mem
        mem = SimpleNamespace(levels=levels, dram_requests=int(d.dram_requests), dram_bytes=int(d.dram_bytes),
                              dram_busy=float(d.dram_busy), dram_write_bytes=int(d.dram_write_bytes))
        banks = self.memory.bank_counts()
        mem.dram = SimpleNamespace(report=lambda st, prefix: banks is not None and report_banks(st, prefix, *banks))
        mem.report = lambda st, prefix="": MemorySystem.report(mem, st, prefix)  # type: ignore[arg-type]
        totals = {k: is_[k] for k in ("elements", "requests", "tokens", "operands", "operand_bytes", "lookups")}
        def value(n: int) -> np.ndarray | None:
            return None if n in self.virtual or not self.syms[n].known else self.array(n)

        counts = work_counts(self.p, value, vector_lanes(m.execute.simd_bits))
        run = SimpleNamespace(m=m, p=self.p, counts=counts, core=core, access_totals=totals, queue=q,
                              cycles=fs["cycles"], access_busy=fs["access_busy"], callbacks=is_["callbacks"], mem=mem)
        return reference.statistics(run, host_seconds)  # type: ignore[arg-type]
