"""Each timing block both engines implement, the reference's Python against the fast engine's C (runtime.h),
call by call on random call traces: the pipeline's ports, reorder buffer and store buffer (sim/pipeline.py),
the fill buffers and the next-line prefetcher (execute.Core.lines), the caches (cache.MemorySystem), the DRAM
bookings (MemorySystem.book), the output queue (queue.OutputQueue) and the dispatch predictor
(ember/predictor.py).  A disagreement is found here at its block, at the call that shows it, rather than as a
different cycle count after a whole program.

Each trace is legal for the block (times that a caller could pass), drawn from a seed, on the default machine
and on one whose caches, store buffer, fill buffers, queue and DRAM are small, so that evictions, a full store
buffer, fill-buffer waits, queue back-pressure and several channels happen often.
"""

from __future__ import annotations

import ctypes
import subprocess
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ember.ir.diagnostics import EmberError
from ember.machine import ExecuteUnit, Machine, load_machine
from ember.predictor import BranchPredictor, DispatchPredictor
from ember.sim.cache import MemorySystem
from ember.sim.dram import BankedDram
from ember.sim.execute import Core
from ember.sim.fast.boundary import Branches, Mem
from ember.sim.fast.build import CFLAGS, compiler
from ember.sim.fast.engine import MemoryState, QueueState
from ember.sim.pipeline import CATEGORIES, Pipeline
from ember.sim.queue import Entry, OutputQueue

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")

MACHINES = {
    "default": (),
    "small": ("caches.l1.ways=2", "caches.l1.size_bytes=1024", "caches.l2.ways=4", "caches.l2.size_bytes=4096",
              "caches.llc.ways=4", "caches.llc.size_bytes=16384", "dram.channels=3", "execute.store_buffer=3",
              "execute.miss_slots=2", "execute.rob_entries=16", "execute.prefetch_lines=2", "access.queue_bytes=16"),
    "ddr5": ("dram.device=ddr5-4800",),
    "hbm3": ("dram.device=hbm3", "dram.channels=2", "clock_ghz=0.3"),  # two ranks; a refresh every 1,170 cycles
    "ddr5-small": ("caches.l1.ways=2", "caches.l1.size_bytes=1024", "caches.l2.ways=4", "caches.l2.size_bytes=4096",
                   "caches.llc.ways=4", "caches.llc.size_bytes=16384", "dram.device=ddr5-4800", "dram.channels=3",
                   "dram.address_map=row-bank-rank-column",
                   "clock_ghz=0.1"),  # a slow core: a refresh window every 390 cycles
}
SEEDS = range(3)
GROUPS = ExecuteUnit.GROUPS
_D, _I, _P = ctypes.c_double, ctypes.c_int64, ctypes.c_void_p

DRIVER = """
Pipe *t_pipe(double slot, int64_t rob, int64_t sb, int64_t nmiss, int64_t ng, const int64_t *pc, const int64_t *hd) {
    Pipe *p = (Pipe *)calloc(1, sizeof(Pipe));
    if (p && pipe_init(p, slot, rob, sb, nmiss, ng, pc, hd)) { pipe_free(p); free(p); return NULL; }
    return p;
}
void t_pipe_free(Pipe *p) { pipe_free(p); free(p); }
double t_dispatch(Pipe *p, int64_t stores) { return pipe_dispatch(p, stores); }
double t_issue(Pipe *p, int64_t g, double t) { return pipe_issue(p, g, t); }
double t_retire(Pipe *p, double c, int64_t cat) { return pipe_retire(p, c, cat); }
double t_next(Pipe *p, double prev, int64_t cat, double ready) { return pipe_next(p, prev, cat, ready); }
void t_wait(Pipe *p, double t, int64_t cat) { pipe_wait(p, t, cat); }
void t_drain(Pipe *p) { pipe_drain(p); }
void t_commit(Pipe *p, int64_t lo, int64_t hi, double data, double r, double line) {
    pipe_commit(p, lo, hi, data, r, line);
}
double t_forwarded(Pipe *p, int64_t lo, int64_t hi) { return forwarded(p, lo, hi); }
int64_t t_miss_slot(Pipe *p) { return miss_slot(p); }
void t_set_miss(Pipe *p, int64_t k, double t) { p->miss_free[k] = t; }
double t_miss_free(Pipe *p, int64_t k) { return p->miss_free[k]; }
double t_fe(Pipe *p) { return p->fe; }
double t_stall(Pipe *p, int64_t c) { return p->stalls[c]; }
int64_t t_count(Pipe *p, int64_t g) { return p->ports[g].count; }
double t_lines(Pipe *p, Mem *m, int64_t addr, int64_t n, double e, int64_t write, int64_t pf, int64_t *pre) {
    return core_lines(p, m, addr, n, e, (int)write, pf, pre);
}
double t_access(Mem *m, int64_t addr, double t, int64_t first, int64_t write) {
    return mem_access(m, addr, t, first, (int)write);
}
int64_t t_contains(Mem *m, int64_t k, int64_t line) { return mem_contains(m, k, line); }
int64_t t_place(Mem *m, int64_t addr, int64_t n, int64_t k, double ready, double t) {
    return mem_place(m, addr, n, k, ready, t);
}
double t_transfer(Mem *m, double now, int64_t line, int64_t write) { return transfer(m, now, line, (int)write); }
double t_write_around(Mem *m, int64_t addr, double t) { return mem_write_around(m, addr, t); }
double t_stream(Pipe *p, Mem *m, int64_t addr, int64_t n, double r) { return core_stream(p, m, addr, n, r); }
double t_push(Queue *q, int64_t nbytes, double t) { return q_push(q, nbytes, t); }
void t_set_pop(Queue *q, int64_t seq, double t) { q->pop[seq & q->mask] = t; }
int64_t t_predict(int64_t *follows, int64_t *last, int64_t j) { return dispatch_miss(follows, last, j); }
int64_t t_branch(Branches *b, int64_t pc, int64_t taken) { return branch_miss(b, pc, (int)taken); }
"""
SIGNATURES = {  # the driver's functions: (return type, argument types)
    "t_pipe": (_P, [_D, _I, _I, _I, _I, _P, _P]), "t_pipe_free": (None, [_P]), "t_dispatch": (_D, [_P, _I]),
    "t_issue": (_D, [_P, _I, _D]), "t_retire": (_D, [_P, _D, _I]), "t_next": (_D, [_P, _D, _I, _D]),
    "t_wait": (None, [_P, _D, _I]), "t_drain": (None, [_P]), "t_commit": (None, [_P, _I, _I, _D, _D, _D]),
    "t_forwarded": (_D, [_P, _I, _I]), "t_miss_slot": (_I, [_P]), "t_set_miss": (None, [_P, _I, _D]),
    "t_miss_free": (_D, [_P, _I]), "t_fe": (_D, [_P]), "t_stall": (_D, [_P, _I]), "t_count": (_I, [_P, _I]),
    "t_lines": (_D, [_P, _P, _I, _I, _D, _I, _I, _P]), "t_access": (_D, [_P, _I, _D, _I, _I]),
    "t_write_around": (_D, [_P, _I, _D]), "t_stream": (_D, [_P, _P, _I, _I, _D]),
    "t_contains": (_I, [_P, _I, _I]), "t_place": (_I, [_P, _I, _I, _I, _D, _D]), "t_transfer": (_D, [_P, _D, _I, _I]),
    "t_push": (_D, [_P, _I, _D]), "t_set_pop": (None, [_P, _I, _D]), "t_predict": (_I, [_P, _P, _I]),
    "t_branch": (_I, [_P, _I, _I]),
}


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    """runtime.h with the driver above, built as the fast engine builds a program."""
    d: Path = tmp_path_factory.mktemp("blocks")
    runtime = resources.files("ember.sim.fast").joinpath("runtime.h").read_text()
    (d / "blocks.c").write_text(runtime + DRIVER)
    cc = compiler()
    assert cc is not None
    subprocess.run([cc, *CFLAGS, str(d / "blocks.c"), "-o", str(d / "blocks.so"), "-lm"], check=True)
    so = ctypes.CDLL(str(d / "blocks.so"))
    for name, (res, args) in SIGNATURES.items():
        fn = getattr(so, name)
        fn.restype, fn.argtypes = res, args
    return so


def machine(name: str) -> Machine:
    return load_machine("default").with_overrides(MACHINES[name])


class CPipe:
    """runtime.h's Pipe for a machine, freed with this object."""

    def __init__(self, lib: ctypes.CDLL, m: Machine):
        ex = m.execute
        self.per_cycle = np.array([ex.pipes(g)[0] for g in GROUPS], np.int64)
        self.hold = np.array([ex.pipes(g)[1] for g in GROUPS], np.int64)
        self.lib = lib
        self.p = lib.t_pipe(1.0 / ex.issue_width, ex.rob_entries, ex.store_buffer, ex.miss_slots, len(GROUPS),
                            self.per_cycle.ctypes.data, self.hold.ctypes.data)
        assert self.p

    def __del__(self) -> None:
        self.lib.t_pipe_free(self.p)


def same(a: float, b: float, what: str, step: int) -> None:
    assert a == b, f"{what} at call {step}: Python {a!r}, C {b!r}"


def pipeline_agrees(lib: ctypes.CDLL, py: Pipeline, c: CPipe, step: int) -> None:
    same(py.fe, lib.t_fe(c.p), "fe", step)
    for k, cat in enumerate(CATEGORIES):
        same(py.stalls[cat], lib.t_stall(c.p, k), f"stall {cat}", step)
    for g, group in enumerate(GROUPS):
        same(py.ports[group].count, lib.t_count(c.p, g), f"uses of {group}", step)
    for k, t in enumerate(py.miss_free):
        same(t, lib.t_miss_free(c.p, k), f"fill buffer {k}", step)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", MACHINES)
def test_pipeline_ports_rob_and_store_buffer(lib: ctypes.CDLL, name: str, seed: int) -> None:
    """Instructions dispatched, issued to random pipe groups (some as several uops), completed and retired; stores
    committed and forwarded to later loads; the front end made to wait and drained."""
    m, rng = machine(name), np.random.default_rng(seed)
    py, c = Pipeline(m), CPipe(lib, m)
    for step in range(3000):
        kind = rng.choice(["compute", "load", "store", "pop", "token"])
        cat = CATEGORIES.index(kind)
        stores = int(rng.integers(1, 5)) if kind == "store" and rng.random() < 0.1 else int(kind == "store")
        d = py.dispatch(stores)
        same(d, lib.t_dispatch(c.p, stores), "dispatch", step)
        ready = d + float(rng.choice([0.0, 0.25, 1.0, 4.0, 37.5, 400.0]))
        for uop in range(int(rng.integers(1, 4))):
            g = int(rng.integers(len(GROUPS)))
            e = py.issue(GROUPS[g], ready)
            same(e, lib.t_issue(c.p, g, ready), f"issue to {GROUPS[g]}", step)
            done = e + float(rng.choice([1.0, 4.0, 5.0, 13.0, 200.0]))
            if uop < 2 and rng.random() < 0.4:  # the instruction's next uop
                nxt = py.next_uop(done, kind, e)
                same(nxt, lib.t_next(c.p, done, cat, e), "next uop", step)
                ready = nxt
        lo = int(rng.integers(0, 512)) * 8
        hi = lo + int(rng.choice([4, 8, 64]))
        if kind == "load":
            got = lib.t_forwarded(c.p, lo, hi)
            want = py.forwarded(lo, hi)
            same(-1.0 if want is None else want, got, "forwarded", step)
        r = py.retire(done, kind)
        same(r, lib.t_retire(c.p, done, cat), "retire", step)
        if kind == "store":
            line = e + float(rng.choice([0.0, 5.0, 160.0]))
            py.commit(lo, hi, e, r, line)
            lib.t_commit(c.p, lo, hi, e, r, line)
        if rng.random() < 0.05:
            k, start = py.miss_slot(e)
            same(k, lib.t_miss_slot(c.p), "miss slot", step)
            py.miss_free[k] = start + 200.0
            lib.t_set_miss(c.p, k, start + 200.0)
        if rng.random() < 0.03:
            until = py.fe + float(rng.choice([1.0, 30.0]))
            wcat = int(rng.integers(len(CATEGORIES)))
            py.wait(until, CATEGORIES[wcat])
            lib.t_wait(c.p, until, wcat)
        if rng.random() < 0.005:
            py.drain()
            lib.t_drain(c.p)
        pipeline_agrees(lib, py, c, step)


def memory_agrees(py: MemorySystem, c: MemoryState, step: int) -> None:
    for k, level in enumerate(py.levels):
        counted = c.levels[k]
        same((level.hits, level.misses, level.bytes), (counted.hits, counted.misses, counted.bytes),
             f"{level.name}'s hits, misses and bytes", step)
    mem: Mem = c.mem
    same((py.dram_requests, py.dram_bytes, py.dram_write_bytes, py.dram_busy),
         (mem.dram_requests, mem.dram_bytes, mem.dram_write_bytes, mem.dram_busy), "DRAM counters", step)
    if isinstance(py.dram, BankedDram):
        d = py.dram
        same((d.activates, d.hits, d.misses, d.conflicts), c.bank_counts(), "activates, hits, misses, conflicts",
             step)
        for mine, theirs in zip((d.row, d.act, d.pre_ok, d.act_ok), c.bank_state):
            same(mine, theirs.tolist(), "bank state", step)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", MACHINES)
def test_caches_and_dram(lib: ctypes.CDLL, name: str, seed: int) -> None:
    """Reads and writes entering at any level, out of time order as the access unit issues them, over a few hot
    lines and a wide range; buffers placed in a level; the DRAM booked directly on every channel."""
    m, rng = machine(name), np.random.default_rng(seed)
    py, c = MemorySystem.from_machine(m), MemoryState(m)
    mem = ctypes.byref(c.mem)
    lb, names, t = m.line_bytes, m.cache_names, 0.0
    hot = rng.integers(0, 1 << 20, 16) * lb
    for step in range(4000):
        t += float(rng.choice([0.0, 0.5, 3.0, 50.0]))
        when = max(0.0, t - float(rng.choice([0.0, 0.0, 20.0, 300.0])))  # an earlier request, issued later
        addr = int(rng.choice(hot)) if rng.random() < 0.5 else int(rng.integers(0, 1 << 26)) * 4
        action = rng.random()
        if action < 0.8:
            k = int(rng.integers(len(names)))
            write = bool(rng.random() < 0.3)
            same(py.access(addr, when, write, names[k]), lib.t_access(mem, addr, when, k, int(write)), "access",
                 step)
        elif action < 0.9:
            k, nbytes = int(rng.integers(len(names))), int(rng.choice([4, 64, 200, 1000]))
            ready = when + 40.0
            py.place(addr, nbytes, names[k], ready, when)
            assert lib.t_place(mem, addr, nbytes, k, ready, when) == 0
        elif action < 0.93:  # a non-temporal store's line, around the caches
            same(py.write_around(addr, when), lib.t_write_around(mem, addr, when), "write around", step)
        elif action < 0.96:
            write = bool(rng.random() < 0.5)
            same(py.transfer(when, addr // lb, write), lib.t_transfer(mem, when, addr // lb, int(write)),
                 "DRAM transfer", step)
        else:
            k, line = int(rng.integers(len(names))), addr // lb
            same(py.levels[k].contains(line), bool(lib.t_contains(mem, k, line)), "contains", step)
        memory_agrees(py, c, step)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", MACHINES)
def test_fill_buffers_and_prefetch(lib: ctypes.CDLL, name: str, seed: int) -> None:
    """Core loads and stores of one to several lines (execute.Core.lines): a line not in L1 waits for a fill
    buffer, holds it until it arrives, and has the next lines prefetched when a buffer is free."""
    m, rng = machine(name), np.random.default_rng(seed)
    mem_py, mem_c = MemorySystem.from_machine(m), MemoryState(m)
    pipe_py, pipe_c = Pipeline(m), CPipe(lib, m)
    core = SimpleNamespace(mem=mem_py, l1=mem_py.levels[0], pipe=pipe_py, prefetch=m.execute.prefetch_lines,
                           prefetches=0)
    prefetches = np.zeros(1, np.int64)
    t = 0.0
    for step in range(3000):
        t += float(rng.choice([0.0, 0.5, 2.0, 30.0]))
        addr = int(rng.integers(0, 1 << 14)) * 4 if rng.random() < 0.7 else int(rng.integers(0, 1 << 24)) * 4
        nbytes, write = int(rng.choice([4, 8, 64, 130])), bool(rng.random() < 0.3)
        if rng.random() < 0.15:  # a non-temporal store: dispatched, retired, then its lines through write-combining
            # buffers (every retirement has its dispatch: the reorder buffer holds rob_entries of them)
            same(pipe_py.dispatch(1), lib.t_dispatch(pipe_c.p, 1), "dispatch", step)
            Core.stream_lines(core, addr, nbytes, t)  # type: ignore[arg-type]
            r = lib.t_retire(pipe_c.p, t, CATEGORIES.index("store"))
            handed = lib.t_stream(pipe_c.p, ctypes.byref(mem_c.mem), addr, nbytes, r)
            lib.t_commit(pipe_c.p, addr, addr + nbytes, t, r, handed)
            same(pipe_py.last_commit, max(r, handed), "commit of a non-temporal store", step)
            pipeline_agrees(lib, pipe_py, pipe_c, step)
            memory_agrees(mem_py, mem_c, step)
            continue
        want = Core.lines(core, addr, nbytes, t, write)  # type: ignore[arg-type]
        got = lib.t_lines(pipe_c.p, ctypes.byref(mem_c.mem), addr, nbytes, t, int(write), m.execute.prefetch_lines,
                          prefetches.ctypes.data)
        same(want, got, "lines", step)
        same(core.prefetches, int(prefetches[0]), "prefetches", step)
        pipeline_agrees(lib, pipe_py, pipe_c, step)
        memory_agrees(mem_py, mem_c, step)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", MACHINES)
def test_output_queue(lib: ctypes.CDLL, name: str, seed: int) -> None:
    """Operands and tokens pushed as the access unit pushes them, popped in order by the core some time later;
    back-pressure when the queue is full, and a deadlock (nothing popped) reported by both."""
    m, rng = machine(name), np.random.default_rng(seed)
    cap = m.access.queue_total_bytes
    py, state = OutputQueue(cap), QueueState(m)
    q = ctypes.byref(state.queue)
    pushed: list[Entry] = []
    popped, t, held = 0, 0.0, []
    for step in range(3000):
        t += float(rng.choice([0.0, 0.125, 1.0, 9.0]))
        while popped < len(pushed) and rng.random() < 0.5:  # the core pops the oldest, after it was pushed
            at = max(t, float(pushed[popped].ready)) + float(rng.choice([0.0, 2.0, 40.0]))
            pushed[popped].pop = at
            lib.t_set_pop(q, popped, at)
            popped += 1
        nbytes = int(rng.choice([8, 8, 16, 64, 8 * m.access.lanes]))
        nbytes = min(nbytes, cap)
        entry = Entry(None, t, nbytes)
        got = lib.t_push(q, nbytes, t)
        try:
            want = py.push(entry, t)
        except EmberError:  # full of operands nobody pops: the C side stops with its error value
            assert got == -1.0, f"push {step}: Python finds a deadlock, C pushed at {got}"
            return
        same(want, got, "push", step)
        entry.ready = want
        pushed.append(entry)
        held.append(py.held_bytes)
        same((py.stall, py.max_bytes, py.max_entries), (state.queue.stall, state.queue.max_bytes,
                                                         state.queue.max_entries), "queue counters", step)
    assert (np.bincount(held, minlength=cap + 1) == state.hist).all(), "the histograms of bytes held differ"


@pytest.mark.parametrize("seed", SEEDS)
def test_dispatch_predictor(lib: ctypes.CDLL, seed: int) -> None:
    """Token sequences with the structure callbacks give them (runs of one token, bags of varying length between
    begin and end tokens) and random ones: the same mispredictions, jump by jump."""
    rng = np.random.default_rng(seed)
    tokens = int(rng.integers(2, 7))
    follows = np.full(tokens + 1, -1, np.int64)
    last = np.full(1, -1, np.int64)
    py = DispatchPredictor()
    sequence: list[int] = []
    while len(sequence) < 5000:
        if rng.random() < 0.7:
            sequence += [0] + [1] * int(rng.integers(0, 9)) + [2 % tokens]  # a bag: begin, rows, end
        else:
            sequence += list(rng.integers(0, tokens, int(rng.integers(1, 20))))
    misses = 0
    for step, j in enumerate(sequence):
        want = py.miss(int(j))
        same(want, bool(lib.t_predict(follows.ctypes.data, last.ctypes.data, int(j))), "misprediction", step)
        misses += want
    assert 0 < misses < len(sequence)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("entries, history", [(4096, 12), (16, 6), (1, 0)])
def test_branch_predictor(lib: ctypes.CDLL, seed: int, entries: int, history: int) -> None:
    """Branches at a few addresses, as loops and data give them (loop tests taken once in a while, periodic ones,
    random ones): the same mispredictions, branch by branch, and the same counters and history."""
    rng = np.random.default_rng(seed)
    py = BranchPredictor(entries, history)
    counters = np.ones(entries, dtype=np.uint8)
    c = Branches(mask=entries - 1, hmask=(1 << history) - 1, counters=counters.ctypes.data)
    misses = 0
    for step in range(5000):
        pc = int(rng.choice([3, 17, 40, 41, 1000 + entries]))
        kind = pc % 3
        taken = bool(rng.random() < 0.05 if kind == 0 else step % 3 == 0 if kind == 1 else rng.random() < 0.5)
        want = py.miss(pc, taken)
        same(want, bool(lib.t_branch(ctypes.byref(c), pc, int(taken))), "misprediction", step)
        same(py.history, c.history, "history", step)
        misses += want
    assert list(py.counters) == counters.tolist() and c.misses == misses
    assert 0 < misses < 5000


def test_a_block_that_differs_is_found(lib: ctypes.CDLL) -> None:
    """The comparison can fail: a Python pipeline one issue slot wider than the C one disagrees at once."""
    m = machine("default")
    wider = load_machine("default").with_overrides(["execute.issue_width=6"])
    py, c = Pipeline(wider), CPipe(lib, m)
    py.dispatch()
    lib.t_dispatch(c.p, 0)
    with pytest.raises(AssertionError, match="dispatch"):
        same(py.dispatch(), lib.t_dispatch(c.p, 0), "dispatch", 1)
