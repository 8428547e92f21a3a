"""The execute unit: DAE instructions interpreted for their values, timed by the out-of-order pipeline.

Each instruction is dispatched, issued, completed and retired as pipeline.py defines; this module
knows what each instruction reads and writes, which pipe group and latency it has, and how loads,
stores, pops and gathers reach the memory system.  Floats are computed in Python doubles and rounded
to the instruction's type (`fadd.f32` rounds to float32), so results match float32 hardware.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import isa
from ..backend.dae import Instr, Label, Mem, Program, Reg, SymRef
from ..ir.diagnostics import EmberError
from ..isa import integers
from ..machine import Machine
from ..predictor import BranchPredictor, DispatchPredictor
from . import cycle_limit
from .cache import MemorySystem
from .host import HostRunner, host_cost
from .pipeline import Pipeline
from .queue import Entry
from .tensors import Tensors, dtype_of
from .trace import CORE, Events, K


def round_to(ty: str) -> Callable[[float], float]:
    if ty == "f32":
        return lambda x: float(np.float32(x))
    if ty in ("f16", "bf16"):
        dt = dtype_of(ty)
        return lambda x: float(np.array(x, dtype=np.float64).astype(dt))
    return float


def is_float_array(v: np.ndarray) -> bool:
    return v.dtype.kind == "f" or v.dtype == dtype_of("bf16")


def dtype_name(dt: np.dtype) -> str:
    """The ISA's name of a numpy element type (u8, i64, bool, ...)."""
    return {"b": "bool", "u": "u", "i": "i"}.get(dt.kind, "") + ("" if dt.kind == "b" else str(dt.itemsize * 8))


def operands(ins: Instr) -> tuple[Reg | None, tuple[Reg, ...]]:
    """(the register an instruction writes, the registers it reads), from its opcode's operand roles."""
    regs: list[Reg] = []
    for a in ins.args:
        if isinstance(a, Reg) and a.cls in "rfv":
            regs.append(a)
        elif isinstance(a, Mem):
            regs.extend(i for i in a.index if isinstance(i, Reg) and i.cls in "rfv")
        elif isinstance(a, list):
            regs.extend(i for i in a if isinstance(i, Reg) and i.cls in "rfv")
    if ins.base in isa.WRITES_FIRST and ins.args and isinstance(ins.args[0], Reg):
        return ins.args[0], tuple(regs[1:])
    return None, tuple(regs)


def queue_latency(machine: Machine) -> float:
    """Load-to-use latency of the output queue, memory-mapped in `access.cache_level` (the TMU's L2)."""
    total = 0.0
    for c in machine.caches:
        total += c.latency
        if c.name == machine.access.cache_level:
            break
    return total


def _popped(dst: Reg, v: Any) -> Any:
    """The value `pop dst` leaves: the register class must fit what the rule pushed (the assembler cannot
    pair pops with pushes, so a mismatch is a run-time error, the same on both engines)."""
    vector = isinstance(v, np.ndarray)
    if dst.cls == "v" and not vector:
        raise EmberError(f"'pop {dst}' found a scalar operand: a pop into a v register takes a vector")
    if dst.cls == "r" and (vector or not isinstance(v, int | np.integer)):
        raise EmberError(f"'pop {dst}' found a {'vector' if vector else 'float'} operand: a pop into an r "
                         "register takes an integer")
    if dst.cls == "f" and vector:
        raise EmberError(f"'pop {dst}' found a vector operand: a pop into an f register takes a scalar")
    return float(v) if dst.cls == "f" else v


class Registers(dict):
    """Register values: r and f registers start at 0 (docs/isa.md); a vector has no value until written."""

    def __missing__(self, r: Reg) -> Any:
        if r.cls == "r":
            return 0
        if r.cls == "f":
            return 0.0
        raise EmberError(f"{r} is read before it is written")


class Core:
    """Registers, the program counter, the pipeline and the instruction counters."""

    def __init__(self, program: Program, tensors: Tensors, mem: MemorySystem, machine: Machine):
        self.p = program
        self.t = tensors
        self.mem = mem
        self.m = machine
        ex = machine.execute
        self.pipe = Pipeline(machine)
        self.lat = {k: float(getattr(ex, k)) for k in ex.LATENCIES}
        self.qlat = queue_latency(machine)
        self.l1 = mem.levels[0]
        self.queue_level = machine.access.cache_level
        self.prefetch = ex.prefetch_lines
        self.regs: dict[Reg, Any] = Registers()
        self.ready: dict[Reg, float] = {}  # when each register's value is ready
        self.roles: dict[int, tuple[Reg | None, tuple[Reg, ...]]] = {}
        self.counts: dict[str, int] = {}
        self.lookups = 0  # row lookups (see tensors.is_table) by the core's own loads
        self.prefetches = 0
        self.last_pop = 0.0  # pops read the queue in order
        self.predictors: dict[str, DispatchPredictor] = {}  # the dispatch jump's, one per access program
        self.branches = BranchPredictor(ex.branch_entries, ex.branch_history)  # the conditional branches'
        self.branch_misses = 0
        self.host_cycles = 0.0
        self.host_flops = 0.0
        self.host_bytes = 0.0
        self.labels: dict[str, int] = {}
        self.host_index: dict[int, int] = {}  # id of a host instruction -> its index in the code
        self.branch_pc: dict[int, int] = {}  # id of a conditional branch -> its index in the code (its address)
        for i, ins in enumerate(program.code):
            if isinstance(ins, Label):
                self.labels[ins.name] = i
            elif ins.op == "host":
                self.host_index[id(ins)] = i
            elif isinstance(ins, Instr) and ins.base in isa.of_kind("branch"):
                self.branch_pc[id(ins)] = i
        self.hosts = HostRunner(program, tensors.get)
        self.pops: list[Entry] = []
        self.max_cycles = cycle_limit.DEFAULT_MAX_CYCLES  # checked after every taken backward branch
        self.run_hook: Callable[[Instr, float], None] | None = None
        self.trace: Events | None = None
        self.callback_start = 0.0  # the dispatch of the callback running now

    @property
    def clock(self) -> float:
        """The front end's clock: no later instruction dispatches before it."""
        return self.pipe.fe

    def val(self, a: Any) -> Any:
        return self.regs[a] if isinstance(a, Reg) else a

    def begin(self, ins: Instr, stores: int = 0) -> float:
        """Count and dispatch `ins`; returns when its operands are ready (>= its dispatch)."""
        self.counts[ins.base] = self.counts.get(ins.base, 0) + 1
        roles = self.roles.get(id(ins))
        if roles is None:
            roles = self.roles[id(ins)] = operands(ins)
        t = self.pipe.dispatch(stores)
        for r in roles[1]:
            t = max(t, self.ready.get(r, 0.0))
        return t

    def done(self, ins: Instr, c: float, category: str) -> None:
        """`ins` completes at `c`: its destination is ready then, and it retires in order."""
        dst = self.roles[id(ins)][0]
        if dst is not None:
            self.ready[dst] = c
        self.pipe.retire(c, category)

    def run_from(self, pc: int, until: str) -> None:
        """Execute from `pc` until the instruction `until` (`halt` for the main program, `ret` for a case)."""
        code = self.p.code
        while True:
            if pc >= len(code):
                raise EmberError("execution ran past the end of the code (missing 'halt' or 'ret')")
            ins = code[pc]
            pc += 1
            if isinstance(ins, Label):
                continue
            op = ins.base
            if op in ("halt", "ret"):
                if op != until:
                    raise EmberError(f"'{op}' reached where '{until}' was expected")
                return
            target = self.step(ins, op)
            if target is not None:
                if self.labels[target] < pc:
                    cycle_limit.check(self.max_cycles, self.pipe.fe)
                pc = self.labels[target]

    def step(self, ins: Instr, op: str) -> str | None:
        """Carry out one instruction by its row of the instruction table; returns the label a taken branch goes to."""
        a = ins.args
        regs = self.regs
        row = isa.OPS.get(op)
        if row is None or row.unit != "execute" or row.kind == "end":
            raise EmberError(f"the simulator does not implement '{ins.op}'")
        if not row.uops:
            return self.special(ins, row.kind)
        t0 = self.begin(ins)
        t = done = t0
        uops = isa.uops_of(row, a)
        for p in range(self.pieces(self.vector_bits(ins, row))):
            for k, uop in enumerate(uops):
                if p or k:  # the next uop: its piece's first starts from the operands, the others from the uop before
                    t = self.pipe.next_uop(t, "compute", t if k else t0)
                t = self.pipe.issue(uop.pipe, t) + self.lat[uop.latency]
            done = max(done, t)
        self.done(ins, done, "compute")
        kind = row.kind
        if kind == "int":
            regs[a[0]] = row.value(self.val(a[1]), self.val(a[2]), where=f"'{ins.op}'")
        elif kind == "float":
            regs[a[0]] = round_to(ins.op.split(".")[1])(row.py(regs[a[1]], regs[a[2]]))
        elif kind == "move":
            regs[a[0]] = float(self.val(a[1])) if a[0].cls == "f" else self.val(a[1])
        elif kind == "select":
            regs[a[0]] = regs[a[2]] if regs[a[1]] else regs[a[3]]
        elif kind == "convert":
            regs[a[0]] = round_to(ins.op.split(".")[1])(float(regs[a[1]]))
        elif kind == "branch":  # predicted by gshare; a miss restarts the front end after the branch resolves
            taken = bool(row.py(self.val(a[0]), self.val(a[1])))
            if self.branches.miss(self.branch_pc[id(ins)], taken):
                self.branch_misses += 1
                if self.trace is not None:
                    self.trace.add(K["branch_miss"], CORE, done, done)
                self.pipe.wait(done + self.lat["mispredict_penalty"], "mispredict")
            if taken:
                return a[2].name
        elif kind == "jump":
            return a[0].name
        elif kind == "dim":
            regs[a[0]] = int(self.t.get(a[1].n).shape[a[2]])
        elif kind == "alloc":
            self.alloc(a[0].n, tuple(int(self.val(d)) for d in a[1]))
        elif kind == "vfloat":
            self.lanes_agree(ins, a[1:3])
            self.floats_only(ins, a[1:3])
            with np.errstate(all="ignore"):
                ty = dtype_of(ins.op.split(".")[1]) if "." in ins.op else regs[a[1]].dtype
                regs[a[0]] = row.py(regs[a[1]], regs[a[2]]).astype(ty, copy=False)
        elif kind == "vconvert":
            ty, src = dtype_of(ins.op.split(".")[1]), regs[a[1]]
            floats = is_float_array(src)
            regs[a[0]] = integers.to_integer(src, ty) if floats and ty.kind in "iu" else src.astype(ty)
        elif kind == "splat":
            ty = dtype_of(ins.op.split(".")[1]) if "." in ins.op else np.dtype(np.float32)
            v = self.val(a[1])  # an integer converts as C converts an int64_t (see `st`), a float as vcvt does
            if isinstance(v, float) and ty.kind in "iu":
                v = integers.to_integer(np.array([v]), ty)[0]
            regs[a[0]] = np.full(a[2], np.int64(v).astype(ty) if isinstance(v, int) else v, dtype=ty)
        elif kind == "iota":  # lane l holds start + l, wrapped like add
            regs[a[0]] = row.py(self.val(a[1]), a[2])
        elif kind == "mask":  # lane l is on when start + l (wrapped) < bound
            regs[a[0]] = row.py(self.val(a[1]), self.val(a[2]), a[3])
        elif kind == "vfma":  # one rounding per lane (floats.py); the suffix is .f32 (dae_check)
            self.lanes_agree(ins, a[1:4])
            self.floats_only(ins, a[1:4])
            regs[a[0]] = row.py(*(regs[r].astype(np.float32, copy=False) for r in a[1:4]))
        elif kind == "fma":
            regs[a[0]] = row.py(regs[a[1]], regs[a[2]], regs[a[3]])
        elif kind == "vselect":
            c = regs[a[1]]
            if isinstance(c, np.ndarray):
                self.lanes_agree(ins, a[1:4])
            regs[a[0]] = np.where(c, regs[a[2]], regs[a[3]]) if isinstance(c, np.ndarray) else (
                regs[a[2]] if c else regs[a[3]])
        else:
            raise EmberError(f"the simulator does not implement '{ins.op}'")
        return None

    def alloc(self, n: int, shape: tuple[int, ...]) -> None:
        """Give symbol n an array of `shape` whose contents are undefined (isa.undefined)."""
        if any(x < 0 for x in shape):
            raise EmberError(f"{self.t.describe(n)} would get a negative extent {list(shape)}")
        dt = self.t.get_dtype(n)
        try:
            value = isa.undefined(shape, dt)
        except (ValueError, MemoryError):
            nbytes = int(np.prod(shape, dtype=object)) * dt.itemsize
            raise EmberError(f"{self.t.describe(n)} of shape {list(shape)} ({nbytes:,} bytes) cannot be "
                             "allocated") from None
        self.t.set(n, value, self.t.describe(n))

    def lanes_agree(self, ins: Instr, regs: list[Reg]) -> None:
        """The vectors an instruction combines lane by lane have one lane count (a vector's count comes from
        the instruction that made it, so only a run can see two that differ)."""
        sizes = {r: len(v) for r in regs if isinstance(v := self.regs.get(r), np.ndarray)}
        if len(set(sizes.values())) > 1:
            raise EmberError(f"'{ins.op}' combines vectors of different lane counts: "
                             + ", ".join(f"{r} has {n}" for r, n in sizes.items()))

    def floats_only(self, ins: Instr, regs: list[Reg]) -> None:
        """Vector arithmetic reads float vectors: the ISA has no vector integer arithmetic, and a conversion
        (vcvt) is an instruction a program pays for, not something an add does on the way."""
        for r in regs:
            v = self.regs.get(r)
            if isinstance(v, np.ndarray) and not is_float_array(v):
                raise EmberError(f"'{ins.op}' reads {r}, a vector of {dtype_name(v.dtype)}: vector arithmetic "
                                 "takes float vectors (convert it with vcvt first)")

    def pieces(self, bits: int) -> int:
        """Machine vectors an instruction's `bits` of vector span: a wider DAE vector is several x86 ones."""
        return max(1, -(-bits // self.m.execute.simd_bits))

    def vector_bits(self, ins: Instr, row: isa.Opcode) -> int:
        """Lanes x lane bits of the widest vector a fixed-latency instruction reads or writes (0: scalar)."""
        a = ins.args
        suffix = dtype_of(ins.op.split(".", 1)[1]).itemsize if "." in ins.op else 0
        if row.span == "a":
            return self.regs[a[1]].size * 8 * max(self.regs[a[1]].itemsize, suffix)
        if row.span == "b":
            return self.regs[a[2]].size * 8 * self.regs[a[2]].itemsize if isinstance(self.regs[a[2]], np.ndarray) else 0
        # a splat is one broadcast however wide: its machine vectors are copies of one register
        return {"splat": lambda: min(a[2] * 8 * (suffix or 4), self.m.execute.simd_bits), "iota": lambda: a[2] * 64,
                "mask": lambda: a[3] * 8}.get(row.kind, lambda: 0)()

    def special(self, ins: Instr, kind: str) -> None:
        """Instructions that reach memory, the queue, the host or the access unit."""
        a = ins.args
        if kind == "load":
            m: Mem = a[1]
            idx = tuple(self.val(i) for i in m.index)
            typed = dtype_of(ins.op.split(".")[1]) if "." in ins.op else None  # a typed read of a byte tensor
            flat = self.t.typed_index(m.sym, idx, typed.itemsize) if typed else self.t.flat_index(m.sym, idx)
            arr = self.t.get(m.sym)
            e = self.pipe.issue("load", self.begin(ins))
            addr = self.t.addr(m.sym, flat)
            self.done(ins, self.load(addr, typed.itemsize if typed else arr.itemsize, e), "load")
            if idx and self.t.is_lookup(m.sym, idx[-1]):
                self.lookups += 1
            v = self.t.typed_value(m.sym, flat, typed) if typed else arr.flat[flat]
            self.regs[a[0]] = float(v) if a[0].cls == "f" else int(v)
        elif kind == "store":
            m = a[1]
            idx = tuple(self.val(i) for i in m.index)
            flat = self.t.flat_index(m.sym, idx)
            arr = self.t.get(m.sym)
            v = self.regs[a[0]]
            # an integer converts as C converts an int64_t: modulo the element's width, or rounded once to a float
            arr.flat[flat] = np.int64(v).astype(arr.dtype) if isinstance(v, int) else v
            e = self.pipe.issue("store", self.begin(ins, 1))
            self.store(ins, [(self.t.addr(m.sym, flat), arr.itemsize, e)], e)
        elif kind in ("vload", "vstore"):
            self.vector_contiguous(ins, kind == "vstore")
        elif kind in ("gather", "scatter"):
            self.vector_indexed(ins, kind == "scatter")
        elif kind == "pop":
            v = self.pop_entry(ins).value
            self.regs[a[0]] = _popped(a[0], v)
        elif kind == "popb":
            entry = self.pop_entry(ins)
            t = self.last_pop
            value = entry.value
            if not isinstance(value, np.ndarray):
                raise EmberError("'popb' found a scalar operand where a buffer was pushed")
            self.t.set_scratch(a[0].n, value)
            if value.nbytes:  # the buffer is in the queue, in the access unit's cache level, not in L1
                self.mem.place(self.t.addr(a[0].n, 0), value.nbytes, self.queue_level, entry.ready, t)
        elif kind == "host":
            self.host(ins)
        elif kind == "run":
            t = self.begin(ins)
            self.done(ins, t, "compute")
            assert self.run_hook is not None
            self.run_hook(ins, t)

    def load(self, addr: int, nbytes: int, e: float) -> float:
        """Completion of a core load of [addr, addr + nbytes) issued at `e`: its lines, then forwarding."""
        done = self.lines(addr, nbytes, e, False)
        data = self.pipe.forwarded(addr, addr + nbytes)
        if data is not None:
            done = max(done, data + self.l1.latency)
        return done

    def lines(self, addr: int, nbytes: int, e: float, write: bool) -> float:
        """Access every line of [addr, addr + nbytes) at `e`; a line not in L1 waits for a fill buffer,
        holds it until the line arrives and has the next `prefetch_lines` lines fetched if a buffer is free."""
        lb = self.mem.line_bytes
        done = e
        for line in range(addr // lb, (addr + max(nbytes, 1) - 1) // lb + 1):
            if self.l1.contains(line):
                d = self.mem.access(line * lb, e, write, "l1")
            else:
                k, start = self.pipe.miss_slot(e)
                d = self.mem.access(line * lb, start, write, "l1")
                self.pipe.miss_free[k] = d
                for nxt in range(line + 1, line + 1 + self.prefetch):
                    if not self.l1.contains(nxt):
                        k, when = self.pipe.miss_slot(start)
                        if when == start:
                            self.pipe.miss_free[k] = self.mem.access(nxt * lb, start, False, "l1")
                            self.prefetches += 1
            done = max(done, d)
        return done

    def store(self, ins: Instr, parts: list[tuple[int, int, float]], t: float) -> None:
        """Retire a store (or a scatter) whose parts (address, bytes, issue time) fetch their lines now and
        are committed in order once retired."""
        ready = [self.lines(addr, n, e, True) for addr, n, e in parts]
        r = self.pipe.retire(max([t] + [e for _, _, e in parts]), "store")
        for (addr, n, e), line in zip(parts, ready):
            self.pipe.commit(addr, addr + n, e, r, line)

    def stream_lines(self, addr: int, nbytes: int, e: float) -> None:
        """A non-temporal store issued at `e`: it retires, and then each line it covers takes a write-combining
        buffer (one of the fill buffers, free earliest), from which the line is written to DRAM without being read
        or cached (cache.MemorySystem.write_around); the buffer is busy until the write's transfer ends.  The
        store's entry is committed once every line has its buffer."""
        r = self.pipe.retire(e, "store")
        lb = self.mem.line_bytes
        handed = r
        for line in range(addr // lb, (addr + max(nbytes, 1) - 1) // lb + 1):
            k, start = self.pipe.miss_slot(r)
            self.pipe.miss_free[k] = self.mem.write_around(line * lb, start)
            handed = max(handed, start)
        self.pipe.commit(addr, addr + nbytes, e, r, handed)

    def vector_load_uop(self, t: float) -> float:
        """The first of a 512-bit load's two uops (LLVM's model puts one on an ALU port, 0, 1 or 5, beside the
        load itself); returns when the second, dispatched now, may issue."""
        self.pipe.issue("int_alu", t)
        return self.pipe.next_uop(t, "compute", t)

    def pop_entry(self, ins: Instr) -> Entry:
        """The next operand of the data queue: read in order once it is there, ready a queue latency later."""
        if not self.pops:
            raise EmberError("a callback pops more operands than were pushed")
        e = self.pops.pop(0)
        t0 = t = self.begin(ins)
        vector = ins.base == "pop" and ins.args[0].cls == "v"
        n = self.pieces(e.value.size * 8 * e.value.itemsize) if vector and isinstance(e.value, np.ndarray) else 1
        for p in range(n):  # a vector wider than the machine's is read a machine vector at a time
            if p:
                t = self.pipe.next_uop(t, "pop", t0)
            if vector:
                t = self.vector_load_uop(t)
            t = self.pipe.issue("load", max(t, self.last_pop, e.ready))
            self.last_pop = t
        e.pop = t
        self.done(ins, t + self.qlat, "pop")
        return e

    def dispatch(self, program: str, token: int, tok: Entry) -> None:
        """The compute loop's turn for one token: read it from the control queue, test for the end, jump
        to its case (three instructions).  The jump is predicted by the machine's DispatchPredictor
        (ember/predictor.py: from the token before it); a miss restarts the front end `mispredict_penalty`
        cycles after the jump resolves."""
        pipe = self.pipe
        self.counts["dispatch"] = self.counts.get("dispatch", 0) + 1
        t = pipe.issue("load", max(pipe.dispatch(), self.last_pop, tok.ready))
        self.callback_start = pipe.d
        self.last_pop = tok.pop = t
        c = t + self.qlat
        c = pipe.issue("int_alu", pipe.next_uop(c, "token", c)) + self.lat["int_alu_latency"]
        c = pipe.issue("branch", pipe.next_uop(c, "token", c)) + self.lat["branch_latency"]
        pipe.retire(c, "token")
        predictor = self.predictors.setdefault(program, DispatchPredictor())
        if predictor.miss(token):  # the front end waits for the token, then for the jump to resolve
            if self.trace is not None:
                self.trace.add(K["dispatch_miss"], CORE, c, c)
            pipe.wait(tok.ready, "token")
            pipe.wait(c + self.lat["mispredict_penalty"], "mispredict")

    def vector_contiguous(self, ins: Instr, store: bool) -> None:
        """vld/vst: the lanes on of [..., start + k]; one access per line they cover."""
        a = ins.args
        m: Mem = a[1]
        mask = self.regs[a[2]]
        self.lanes_agree(ins, [a[0], a[2]] if store else [a[2]])
        on = np.flatnonzero(mask)
        arr = self.t.get(m.sym)
        idx = tuple(self.val(i) for i in m.index)
        t0 = self.begin(ins, 1 if store and len(on) else 0)
        e = t0
        for p in range(self.pieces(len(mask) * 8 * arr.itemsize)):  # a piece per machine vector spanned
            t = self.pipe.next_uop(e, "store" if store else "load", t0) if p else t0
            if not store:
                t = self.vector_load_uop(t)
            e = self.pipe.issue("store" if store else "load", t)
        if len(on) == 0:
            if store:
                self.pipe.retire(e, "store")
            else:
                self.regs[a[0]] = np.zeros(len(mask), dtype=arr.dtype)
                self.done(ins, e, "load")
            return
        lo = self.t.flat_index(m.sym, idx[:-1] + (idx[-1] + int(on[0]),))
        hi = self.t.flat_index(m.sym, idx[:-1] + (idx[-1] + int(on[-1]),))
        flat = arr.reshape(-1)
        base = lo - int(on[0])
        addr = self.t.addr(m.sym, lo)
        nbytes = self.t.addr(m.sym, hi) - addr + arr.itemsize
        if store:
            flat[base + on] = self.regs[a[0]][on]
            if isa.OPS[ins.base].nontemporal:
                self.stream_lines(addr, nbytes, e)
            else:
                self.store(ins, [(addr, nbytes, e)], e)
        else:
            out = np.zeros(len(mask), dtype=arr.dtype)
            out[on] = flat[base + on]
            self.regs[a[0]] = out
            if self.t.is_lookup(m.sym, idx[-1] + int(on[0])):
                self.lookups += 1
            self.done(ins, self.load(addr, nbytes, e), "load")

    def vector_indexed(self, ins: Instr, store: bool) -> None:
        """vgather/vscatter: each lane takes a load (store) pipe slot; each lane on is its own access."""
        a = ins.args
        m: Mem = a[1]
        mask = self.regs[a[2]]
        arr = self.t.get(m.sym)
        flat = arr.reshape(-1)
        prefix = tuple(self.val(i) for i in m.index[:-1])
        lanes = self.regs[m.index[-1]]
        if lanes.dtype.kind not in "iu":
            raise EmberError(f"'{ins.op}' indexes with {m.index[-1]}, a vector of {lanes.dtype}: indices are integers")
        self.lanes_agree(ins, [a[0], m.index[-1], a[2]] if store else [m.index[-1], a[2]])
        on = np.flatnonzero(mask)
        t = self.begin(ins, len(on) if store else 0)
        out = np.zeros(len(mask), dtype=arr.dtype)
        parts = []
        done = t
        for k in range(len(mask)):  # a lane off takes its pipe slot too: x86 gathers and scatters cost the same
            e = self.pipe.issue("store" if store else "load", t)
            if not mask[k]:
                continue
            f = self.t.flat_index(m.sym, prefix + (int(lanes[k]),))
            addr = self.t.addr(m.sym, f)
            if store:
                flat[f] = self.regs[a[0]][k]
                parts.append((addr, arr.itemsize, e))
            else:
                out[k] = flat[f]
                done = max(done, self.load(addr, arr.itemsize, e))
        if store:
            self.store(ins, parts, t)
        else:
            self.regs[a[0]] = out
            self.done(ins, done + self.lat["gather_latency"], "load")

    def host(self, ins: Instr) -> None:
        """A host op waits for everything before it (it reads memory), then takes its roofline time."""
        op_type, ins_syms, out_syms, attrs = ins.args
        self.begin(ins)
        inputs, outs = self.hosts.step(self.host_index[id(ins)])
        for s, o in zip(out_syms, outs):
            assert isinstance(s, SymRef)
            want = self.t.get_dtype(s.n)
            self.t.set(s.n, o.astype(want, copy=False) if o.dtype != want else o,
                       f"result of host {op_type} ({self.t.describe(s.n)})")
            self.t.note_origin(s.n, op_type, [i.n for i in ins_syms])
        ex = self.m.execute
        cycles, flops, moved = host_cost(op_type, inputs, outs, ex.host_flops_per_cycle, self.m.dram_bytes_per_cycle,
                                         ex.matrix_flops_per_cycle, attrs)
        pipe = self.pipe
        pipe.drain()
        if self.trace is not None:
            self.trace.add(K["host"], CORE, pipe.fe, pipe.fe + cycles, self.host_index[id(ins)])
        pipe.fe += cycles
        pipe.retire(pipe.fe, "compute")
        self.host_cycles += cycles
        self.host_flops += flops
        self.host_bytes += moved

    def finish(self, memory_end: float) -> float:
        """Cycles of the whole run: every instruction retired, every store in L1, every DRAM transfer over."""
        self.pipe.drain()
        self.pipe.wait(memory_end, "store")
        return self.pipe.fe
