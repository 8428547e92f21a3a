"""The fast engine: compile the program to C (codegen.py), run it, report exactly as the reference does.

The C compiler is the system's (`$CC`, else cc, gcc or clang), called with the flags that keep
Python's rounding (no fast-math, no FP contraction).  Why C and not numba: numba needed 10-20 s
to compile one generated program, the C compiler about 0.3 s, and a program runs once per
workload and variant.  Compiled programs are cached on disk by the hash of their source
($EMBER_CACHE_DIR, default ~/.cache/ember/fast); the source holds no shapes and no machine
numbers but the vector width, so one compilation serves every scale and every point of a sweep.  A program the
generator does not handle, a machine without a C compiler, or a run that stops on an error is run
by the reference engine instead: the reference words every error, and its results are the definition.
"""

from __future__ import annotations

import ctypes
import time
from types import SimpleNamespace

import numpy as np

from ...backend.dae import Program
from ...ir.diagnostics import EmberError
from ...machine import Machine
from .. import engine as reference
from ..access import check_resources
from ..cache import CacheLevel, MemorySystem
from ..execute import queue_latency
from ..host import HostRunner, host_cost
from ..limits import check, cycle_limit, exceeded
from ..queue import OutputQueue
from ..stats import Stats
from ..tensors import Tensors, dtype_of, span
from ..work import vector_lanes, work_counts
from .build import HOST_FN, load, notes
from .cdefs import MAX_CYCLES, OK, OP_NAMES, Unsupported
from .codegen import CATEGORIES, FS_NAMES, IS_NAMES, XP_NAMES, generate

DRAM_ROOM = 1 << 16  # booked DRAM intervals the C side makes room for at first, over all channels; every one is
# kept (as the reference keeps them), and the room doubles when a channel fills (runtime.h, dram_grow)
DRAM_ROOM_MIN = 1024  # a channel's room to start with, however many channels share DRAM_ROOM
_P = ctypes.c_void_p


class _Mem(ctypes.Structure):
    _fields_ = [("nlev", ctypes.c_int64), ("lv", _P), ("lat", _P), ("tags", _P), ("rdy", _P),
                ("cst", _P), ("ds", _P), ("de", _P), ("dn", _P), ("dcap", ctypes.c_int64),
                ("nch", ctypes.c_int64), ("grown", ctypes.c_int64), ("dst", _P), ("dpar", _P)]


def _free(pointers: list[int]) -> None:
    """Give memory the C side allocated back to the C library."""
    if pointers:
        free = ctypes.CDLL(None).free
        free.argtypes = [_P]
        for p in pointers:
            free(p)


class SharedArrays:
    """The last cache level's state and the DRAM bookings, carried from one core's run to the next."""

    def __init__(self) -> None:
        self.level: tuple[np.ndarray, np.ndarray] | None = None  # tags (with counts), ready times
        self.dram: tuple[list[np.ndarray], list[np.ndarray], np.ndarray] | None = None  # per channel: starts, ends, n


class _Queue(ctypes.Structure):
    _fields_ = [("head", ctypes.c_int64), ("tail", ctypes.c_int64), ("held", ctypes.c_int64),
                ("max_bytes", ctypes.c_int64), ("max_entries", ctypes.c_int64), ("cap", ctypes.c_int64),
                ("mask", ctypes.c_int64), ("bytes", _P), ("hist", _P), ("pop", _P), ("stall", ctypes.c_double),
                ("oph", ctypes.c_int64), ("opt", ctypes.c_int64), ("ops", _P), ("opk", _P), ("opi", _P), ("opf", _P),
                ("opr", _P)]


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
             timing_only: bool, shared: SharedArrays | None = None) -> tuple[dict[str, np.ndarray], Stats]:
    """Run `program`; the same results and statistics as ember.sim.engine.simulate.  `host_seconds`
    leaves out the one-off compilation of a program not yet in the cache."""
    notes.clear()
    limit = cycle_limit(max_cycles)
    check_resources(program, machine)
    virtual = virtual_symbols(program) if timing_only else frozenset()
    lib = compiled_or_none(program, timing_only, machine.execute.simd_bits)
    if lib is None:
        assert shared is None, "multicore.simulate_cores picks the engine for all cores before the first runs"
        return reference.simulate(program, inputs, machine, max_cycles)
    t0 = time.perf_counter()
    state = _State(program, inputs, machine, limit, virtual, shared)
    try:
        status = state.run(lib)
        if status == OK:
            outputs = state.outputs()
            if shared is not None:
                state.share(shared)
    finally:
        lib.release(state.ptrs.ctypes.data, state.own.ctypes.data, len(program.symbols))
        state.release_bookings()
    if status == MAX_CYCLES:
        raise exceeded(limit, float(state.fs[0]))
    if status != OK:
        if state.error is not None:
            raise state.error
        if timing_only:
            raise EmberError("--timing-only: the simulation stopped on an error; run it with data (without "
                             "--timing-only) to see which")
        reference.simulate(program, inputs, machine, max_cycles)  # raises the error, worded
        raise EmberError("internal error: the fast engine stopped where the reference engine did not "
                         "(please report it; --engine reference runs this program)")
    check(limit, float(state.fs[0]))
    return outputs, state.statistics(time.perf_counter() - t0)


class _State:
    """The memory the generated function reads and writes, laid out as the reference lays out its objects."""

    def __init__(self, program: Program, inputs: dict[str, np.ndarray], machine: Machine,
                 max_cycles: float, virtual: frozenset[int], shared: SharedArrays | None):
        self.p, self.m, self.virtual = program, machine, virtual
        syms = program.symbols
        t = Tensors(program)
        n_syms = len(syms)
        self.shapes = np.zeros((n_syms, max([len(s.shape) for s in syms] + [1])), dtype=np.int64)
        self.ok = np.zeros(n_syms, dtype=np.int64)
        self.own = np.zeros(n_syms, dtype=np.int64)
        self.ptrs = np.zeros(n_syms, dtype=np.uint64)
        self.keep: list[np.ndarray] = []  # arrays the C code points into
        self.orphans: list[int] = []  # C allocations a host op replaced, freed after the run
        reference.set_symbols(t, program, inputs, virtual)  # the reference's order, so base addresses agree
        for n in virtual:
            self.shapes[n, :len(syms[n].shape)] = syms[n].shape
            self.ok[n] = 1
        for n, a in enumerate(t.arrays):
            if a is not None:
                self.point(n, a)
        self.bases = np.array(t.base, dtype=np.int64)
        self.next_addr = np.array([t.next_addr], dtype=np.int64)

        levels = machine.caches
        names = [c.name for c in levels]
        self.lv = np.zeros((len(levels), 5), dtype=np.int64)  # see Mem in runtime.h
        tag_slot = slot = 0
        for k, c in enumerate(levels):
            self.lv[k] = (c.sets, c.ways, tag_slot, c.line_bytes, slot)
            tag_slot += c.sets * (c.ways + 1)
            slot += c.sets * c.ways
        self.lat = np.array([float(c.latency) for c in levels])
        self.tags = np.zeros(tag_slot, dtype=np.int64)
        self.rdy = np.zeros(slot)
        self.cst = np.zeros((len(levels), 3), dtype=np.int64)
        nch = machine.dram.channels
        before = shared.dram if shared is not None else None  # an earlier core's bookings, each channel's
        slots = max(DRAM_ROOM_MIN, DRAM_ROOM // nch, 2 * int(before[2].max()) if before is not None else 0)
        self.ds, self.de = np.zeros((nch, slots)), np.zeros((nch, slots))
        self.dn = np.zeros(nch, dtype=np.int64)
        k = len(levels) - 1
        self.llc = (slice(int(self.lv[k, 2]), int(self.lv[k, 2] + self.lv[k, 0] * (self.lv[k, 1] + 1))),
                    slice(int(self.lv[k, 4]), int(self.lv[k, 4] + self.lv[k, 0] * self.lv[k, 1])))
        if shared is not None and shared.level is not None and shared.dram is not None:
            self.tags[self.llc[0]] = shared.level[0]
            self.rdy[self.llc[1]] = 0.0  # present from cycle 0 (cache.SharedMemory)
            self.dn[:] = shared.dram[2]
            for ch, count in enumerate(self.dn):
                self.ds[ch, :count], self.de[ch, :count] = shared.dram[0][ch], shared.dram[1][ch]
        self.dst = np.zeros(5)  # DRAM requests, bytes, busy cycles, write-back bytes, end of the last transfer
        line, bw = levels[0].line_bytes, machine.dram.bytes_per_cycle
        self.dpar = np.array([float(machine.dram.latency), line * nch / bw, line / bw])  # as cache.MemorySystem rounds
        self.mem = _Mem(len(levels), *(a.ctypes.data for a in (self.lv, self.lat, self.tags, self.rdy, self.cst,
                                                               self.ds, self.de, self.dn)),
                        slots, nch, 0, self.dst.ctypes.data, self.dpar.ctypes.data)
        for name in (machine.access.cache_level, "l1"):
            if name not in names:
                raise EmberError(f"unknown cache level '{name}' (levels: {', '.join(names)})")
        self.levels = np.array([names.index(machine.access.cache_level), names.index("l1")], dtype=np.int64)

        cap = machine.access.queue_total_bytes
        ring = 1 << max(10, (cap + 2).bit_length())
        self.qb, self.qp = np.zeros(ring, dtype=np.int64), np.zeros(ring)
        self.qh = np.zeros(cap + 1, dtype=np.int64)
        self.fifo = [np.zeros(ring, dtype=np.int64) for _ in range(3)] + [np.zeros(ring) for _ in range(2)]
        self.queue = _Queue(0, 0, 0, 0, 0, cap, ring - 1, self.qb.ctypes.data, self.qh.ctypes.data,
                            self.qp.ctypes.data, 0.0, 0, 0, *(a.ctypes.data for a in self.fifo))

        ex = machine.execute
        xp = {"issue_slot": 1.0 / ex.issue_width, "rob_entries": ex.rob_entries, "store_buffer": ex.store_buffer,
              "miss_slots": ex.miss_slots, "prefetch_lines": ex.prefetch_lines,
              "queue_latency": queue_latency(machine), "l1_latency": levels[0].latency,
              "access_slot": 1.0 / machine.access.lanes, "max_cycles": max_cycles,
              "outstanding": machine.access.outstanding, **{k: getattr(ex, k) for k in ex.LATENCIES}}
        for g in ex.GROUPS:
            xp[f"per_cycle_{g}"], xp[f"hold_{g}"] = ex.pipes(g)
        self.xp = np.array([float(xp[name]) for name in XP_NAMES])
        self.cnt = np.zeros(len(OP_NAMES), dtype=np.int64)
        self.fs = np.zeros(len(FS_NAMES))
        self.is_ = np.zeros(len(IS_NAMES), dtype=np.int64)
        self.hc = np.zeros(3)
        self.hosts = HostRunner(program, self.known)
        self.error: EmberError | None = None  # a host op's error, raised when the C side has returned

    def share(self, shared: SharedArrays) -> None:
        """Hand the last level and the DRAM bookings on to the next core."""
        shared.level = (self.tags[self.llc[0]].copy(), self.rdy[self.llc[1]].copy())
        ds, de = self.bookings()
        shared.dram = ([ds[ch, :n].copy() for ch, n in enumerate(self.dn)],
                       [de[ch, :n].copy() for ch, n in enumerate(self.dn)], self.dn.copy())

    def bookings(self) -> tuple[np.ndarray, np.ndarray]:
        """Each channel's booked intervals (starts, ends), wherever the run left them (grown rooms are C's)."""
        if not self.mem.grown:
            return self.ds, self.de
        shape = (self.m.dram.channels, int(self.mem.dcap))
        size = shape[0] * shape[1]
        return tuple(np.ctypeslib.as_array((ctypes.c_double * size).from_address(p)).reshape(shape)
                     for p in (self.mem.ds, self.mem.de))  # type: ignore[return-value]

    def release_bookings(self) -> None:
        """Free the rooms the C side grew (once)."""
        if self.mem.grown:
            _free([self.mem.ds, self.mem.de])
            self.mem.grown = 0

    def point(self, n: int, a: np.ndarray) -> None:
        """Let symbol n's C pointer see array `a` (kept alive until the run ends)."""
        a = np.ascontiguousarray(a)
        self.keep.append(a)
        if self.own[n]:
            self.orphans.append(int(self.ptrs[n]))
            self.own[n] = 0
        self.ptrs[n] = a.ctypes.data
        self.shapes[n, :a.ndim] = a.shape
        self.ok[n] = 1

    def array(self, n: int) -> np.ndarray:
        """A copy of symbol n's current value, shaped."""
        s = self.p.symbols[n]
        shape = tuple(int(d) for d in self.shapes[n, :len(s.shape)])
        dt = dtype_of(s.dtype)
        count = int(np.prod(shape, dtype=np.int64))
        if count == 0 or not self.ptrs[n]:
            return np.zeros(shape, dtype=dt)
        buf = (ctypes.c_char * (count * dt.itemsize)).from_address(int(self.ptrs[n]))
        return np.frombuffer(buf, dtype=dt, count=count).reshape(shape).copy()

    def known(self, n: int) -> np.ndarray:
        """Symbol n's value for a host op; a symbol without one is an error the reference engine words."""
        if not self.ok[n]:
            raise LookupError(f"symbol {n} has no value")
        return self.array(n)

    def host(self, index: int) -> float:
        """A host op, called from C: run it (its whole run of host ops at the first), give its outputs
        addresses, charge its cost."""
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
                self.bases[s.n] = self.next_addr[0]
                self.next_addr[0] += span(o.nbytes)
            ex = self.m.execute
            self.hc[:] = host_cost(op_type, arrays, outs, ex.host_flops_per_cycle, self.m.dram.bytes_per_cycle,
                                   ex.matrix_flops_per_cycle)
            return 0.0
        except EmberError as e:  # the host runtime's own error, worded already: raised once C returns
            self.error = e
            return -1.0
        except Exception:  # the reference engine reruns the program and words the error
            return -1.0

    def run(self, lib: ctypes.CDLL) -> int:
        callback = HOST_FN(self.host)
        d = [a.ctypes.data for a in (self.ptrs, self.shapes, self.bases, self.ok, self.own, self.next_addr)]
        status = lib.simulate(d[0], d[1], self.shapes.shape[1], d[2], d[3], d[4], d[5],
                              ctypes.addressof(self.mem), ctypes.addressof(self.queue),
                              *(a.ctypes.data for a in (self.xp, self.cnt, self.fs, self.is_, self.levels)),
                              callback, self.hc.ctypes.data)
        _free(self.orphans)
        return int(status)

    def outputs(self) -> dict[str, np.ndarray]:
        out = {}
        for n, s in enumerate(self.p.symbols):
            if s.kind == "output":
                if not self.ok[n]:
                    raise EmberError(f"output '{s.name}' is read before it has been given a value")
                out[s.name] = self.array(n)
        return out

    def statistics(self, host_seconds: float) -> Stats:
        """The reference's statistics function, fed from the arrays (so names and order cannot drift)."""
        m = self.m
        fs = dict(zip(FS_NAMES, self.fs.tolist()))
        is_ = dict(zip(IS_NAMES, self.is_.tolist()))
        counts = {op: int(c) for op, c in zip(OP_NAMES, self.cnt) if c}
        ports = {g: SimpleNamespace(count=is_[f"pipe_{g}"]) for g in m.execute.GROUPS}
        pipe = SimpleNamespace(instructions=is_["instructions"], ports=ports,
                               stalls={c: fs[f"stall_{c}"] for c in CATEGORIES})
        core = SimpleNamespace(pipe=pipe, counts=counts, lookups=0, prefetches=is_["prefetches"],
                               host_cycles=fs["host_cycles"], host_flops=fs["host_flops"])
        q = OutputQueue(m.access.queue_total_bytes)
        q.stall = float(self.queue.stall)
        q.max_bytes = int(self.queue.max_bytes)
        q.max_entries = int(self.queue.max_entries)
        for value in np.flatnonzero(self.qh):
            q.hist.add(int(value), int(self.qh[value]))
        levels = [CacheLevel(c.name, c.ways * c.line_bytes, c.ways, c.line_bytes, c.latency) for c in m.caches]
        for lv, (hits, misses, nbytes) in zip(levels, self.cst.tolist()):  # counters only: one set each
            lv.hits, lv.misses, lv.bytes = hits, misses, nbytes
        mem = SimpleNamespace(levels=levels, dram_requests=int(self.dst[0]), dram_bytes=int(self.dst[1]),
                              dram_busy=float(self.dst[2]), dram_write_bytes=int(self.dst[3]))
        mem.report = lambda st, prefix="": MemorySystem.report(mem, st, prefix)  # type: ignore[arg-type]
        totals = {k: is_[k] for k in ("elements", "requests", "tokens", "operands", "operand_bytes", "lookups")}
        def value(n: int) -> np.ndarray | None:
            return None if n in self.virtual or not self.ok[n] else self.array(n)

        counts = work_counts(self.p, value, vector_lanes(m.execute.simd_bits))
        run = SimpleNamespace(m=m, p=self.p, counts=counts, core=core, access_totals=totals, queue=q,
                              cycles=fs["cycles"], access_busy=fs["access_busy"], callbacks=is_["callbacks"], mem=mem)
        return reference.statistics(run, host_seconds)  # type: ignore[arg-type]
