"""The execute unit: an in-order core interpreting DAE instructions, one cost per instruction.

Each instruction advances the core clock by its class's cost (machine.execute); a load then waits
for the cache model (`ld` completes when its line arrives); a store is issued and not waited for;
a `pop` waits until its operand is ready.  Floats are computed in Python doubles and rounded to the
instruction's type (`fadd.f32` rounds to float32), so results match float32 hardware.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..backend.dae import Instr, Label, Mem, Program, Reg, SymRef
from ..ir.diagnostics import EmberError
from .cache import MemorySystem
from .host import host_cost, run_host
from .machine import Machine
from .queue import Entry
from .tensors import Tensors, dtype_of

COST_CLASS = {
    "li": "int_alu", "mov": "int_alu", "add": "int_alu", "sub": "int_alu", "min": "int_alu", "max": "int_alu",
    "slt": "int_alu", "sle": "int_alu", "seq": "int_alu", "sne": "int_alu", "sel": "int_alu",
    "dim": "int_alu", "alloc": "int_alu", "mul": "int_mul", "div": "int_div", "rem": "int_div",
    "fadd": "fp_alu", "fsub": "fp_alu", "fmax": "fp_alu", "fmin": "fp_alu", "fcvt": "fp_alu",
    "fmul": "fp_mul", "fdiv": "fp_div", "ld": "load_issue", "st": "store", "blt": "branch", "bge": "branch",
    "beq": "branch", "jmp": "branch", "pop": "pop", "popb": "pop", "run": "dispatch",
    "vld": "load_issue", "vgather": "load_issue", "vst": "store", "vscatter": "store",
    "vsplat": "int_alu", "viota": "int_alu", "vmask": "int_alu", "vsel": "int_alu",
    "vfadd": "fp_alu", "vfsub": "fp_alu", "vfmax": "fp_alu", "vfmin": "fp_alu", "vfmul": "fp_mul",
    "vfdiv": "fp_div", "vcvt": "fp_alu",
}
VFLOAT = {"vfadd": np.add, "vfsub": np.subtract, "vfmul": np.multiply, "vfdiv": np.divide,
          "vfmax": np.maximum, "vfmin": np.minimum}  # maximum/minimum propagate NaN, like fmax/fmin


def _fmax(a: float, b: float) -> float:
    return a if a != a else b if b != b else max(a, b)


def _fmin(a: float, b: float) -> float:
    return a if a != a else b if b != b else min(a, b)


def _fdiv(a: float, b: float) -> float:
    if b == 0.0:
        return float("nan") if a == 0.0 or a != a else float("inf") * (1 if (a > 0) == (np.copysign(1, b) > 0) else -1)
    return a / b


FLOAT = {"fadd": lambda a, b: a + b, "fsub": lambda a, b: a - b, "fmul": lambda a, b: a * b,
         "fdiv": _fdiv, "fmax": _fmax, "fmin": _fmin}
INT = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
       "min": min, "max": max, "slt": lambda a, b: int(a < b), "sle": lambda a, b: int(a <= b),
       "seq": lambda a, b: int(a == b), "sne": lambda a, b: int(a != b)}


def round_to(ty: str) -> Callable[[float], float]:
    if ty == "f32":
        return lambda x: float(np.float32(x))
    if ty in ("f16", "bf16"):
        dt = dtype_of(ty)
        return lambda x: float(np.array(x, dtype=np.float64).astype(dt))
    return float


class Core:
    """Registers, the program counter, the core clock and the instruction counters."""

    def __init__(self, program: Program, tensors: Tensors, mem: MemorySystem, machine: Machine):
        self.p = program
        self.t = tensors
        self.mem = mem
        self.m = machine
        self.cost = {k: machine.execute.cost(v) for k, v in COST_CLASS.items()}
        self.cost["gather_lane"] = machine.execute.cost("gather_lane")
        self.hidden = machine.execute.hidden_load_latency
        self.regs: dict[Reg, Any] = {}
        self.clock = 0.0
        self.busy = 0.0
        self.counts: dict[str, int] = {}
        self.load_stall = 0.0  # cycles loads waited for the caches beyond their issue cost
        self.pop_stall = 0.0  # cycles pops waited for an operand that had not arrived
        self.lookups = 0  # row lookups (see tensors.is_table) by the core's own loads
        self.host_cycles = 0.0
        self.host_flops = 0.0
        self.host_bytes = 0.0
        self.labels: dict[str, int] = {}
        for i, ins in enumerate(program.code):
            if isinstance(ins, Label):
                self.labels[ins.name] = i
        self.pops: list[Entry] = []
        self.run_hook: Callable[[Instr], None] | None = None

    def val(self, a: Any) -> Any:
        return self.regs[a] if isinstance(a, Reg) else a

    def charge(self, op: str, cycles: float) -> None:
        self.clock += cycles
        self.busy += cycles
        self.counts[op] = self.counts.get(op, 0) + 1

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
                pc = self.labels[target]

    def step(self, ins: Instr, op: str) -> str | None:
        a = ins.args
        self.charge(op, self.cost.get(op, 0.0))
        regs = self.regs
        if op in INT:
            regs[a[0]] = INT[op](self.val(a[1]), self.val(a[2]))
        elif op in FLOAT:
            regs[a[0]] = round_to(ins.op.split(".")[1])(FLOAT[op](regs[a[1]], regs[a[2]]))
        elif op == "ld":
            m: Mem = a[1]
            idx = tuple(self.val(i) for i in m.index)
            flat = self.t.flat_index(m.sym, idx)
            arr = self.t.get(m.sym)
            done = self.mem.access(self.t.addr(m.sym, flat), self.clock, False, "l1")
            self.wait_for_load(done)
            if idx and self.t.is_lookup(m.sym, idx[-1]):
                self.lookups += 1
            v = arr.flat[flat]
            regs[a[0]] = float(v) if a[0].cls == "f" else int(v)
        elif op == "st":
            m = a[1]
            idx = tuple(self.val(i) for i in m.index)
            flat = self.t.flat_index(m.sym, idx)
            self.t.get(m.sym).flat[flat] = regs[a[0]]
            self.mem.access(self.t.addr(m.sym, flat), self.clock, True, "l1")
        elif op == "li" or op == "mov":
            regs[a[0]] = self.val(a[1])
        elif op == "sel":
            regs[a[0]] = regs[a[2]] if regs[a[1]] else regs[a[3]]
        elif op == "div" or op == "rem":
            x, y = self.val(a[1]), self.val(a[2])
            if y == 0:
                raise EmberError(f"integer division by zero in '{ins.op}'")
            regs[a[0]] = x // y if op == "div" else x % y
        elif op == "fcvt":
            regs[a[0]] = round_to(ins.op.split(".")[1])(float(regs[a[1]]))
        elif op == "blt" or op == "bge" or op == "beq":
            x, y = self.val(a[0]), self.val(a[1])
            if (x < y) if op == "blt" else (x >= y) if op == "bge" else (x == y):
                return a[2].name
        elif op == "jmp":
            return a[0].name
        elif op == "dim":
            regs[a[0]] = int(self.t.get(a[1].n).shape[a[2]])
        elif op == "alloc":
            shape = tuple(int(self.val(d)) for d in a[1])
            if any(x < 0 for x in shape):
                raise EmberError(f"{self.t.describe(a[0].n)} would get a negative extent {list(shape)}")
            self.t.set(a[0].n, np.zeros(shape, dtype=self.t.get_dtype(a[0].n)), self.t.describe(a[0].n))
        elif op == "pop":
            regs[a[0]] = self.pop_entry()
        elif op in VFLOAT:
            with np.errstate(all="ignore"):
                ty = dtype_of(ins.op.split(".")[1]) if "." in ins.op else regs[a[1]].dtype
                regs[a[0]] = VFLOAT[op](regs[a[1]], regs[a[2]]).astype(ty, copy=False)
        elif op in ("vld", "vst"):
            self.vector_contiguous(a, op == "vst")
        elif op in ("vgather", "vscatter"):
            self.vector_indexed(a, op == "vscatter")
        elif op == "vcvt":
            regs[a[0]] = regs[a[1]].astype(dtype_of(ins.op.split(".")[1]))
        elif op == "vsplat":
            ty = dtype_of(ins.op.split(".")[1]) if "." in ins.op else np.dtype(np.float32)
            regs[a[0]] = np.full(a[2], self.val(a[1]), dtype=ty)
        elif op == "viota":
            start = self.val(a[1])
            regs[a[0]] = np.arange(start, start + a[2], dtype=np.int64)
        elif op == "vmask":
            regs[a[0]] = np.arange(a[3]) + self.val(a[1]) < self.val(a[2])
        elif op == "vsel":
            c = regs[a[1]]
            regs[a[0]] = np.where(c, regs[a[2]], regs[a[3]]) if isinstance(c, np.ndarray) else (
                regs[a[2]] if c else regs[a[3]])
        elif op == "popb":
            value = self.pop_entry()
            if not isinstance(value, np.ndarray):
                raise EmberError("'popb' found a scalar operand where a buffer was pushed")
            self.t.set_scratch(a[0].n, value)
        elif op == "host":
            self.host(ins)
        elif op == "run":
            assert self.run_hook is not None
            self.run_hook(ins)
        else:
            raise EmberError(f"the simulator does not implement '{ins.op}'")
        return None

    def pop_entry(self) -> Any:
        """The next operand of the data queue; the pop (already charged) ends no earlier than it is ready."""
        if not self.pops:
            raise EmberError("a callback pops more operands than were pushed")
        e = self.pops.pop(0)
        if e.ready > self.clock - self.cost["pop"]:
            self.pop_stall += e.ready + self.cost["pop"] - self.clock
            self.clock = e.ready + self.cost["pop"]
        e.pop = self.clock
        return e.value

    def wait_for_load(self, done: float) -> None:
        """The core waits for a load's data, less the latency it hides (`execute.hidden_load_latency`)."""
        ready = done - self.hidden
        if ready > self.clock:
            self.load_stall += ready - self.clock
            self.clock = ready

    def vector_contiguous(self, a: list[Any], store: bool) -> None:
        """vld/vst: the lanes on of [..., start + k]; one cache access per line they cover."""
        m: Mem = a[1]
        mask = self.regs[a[2]]
        on = np.flatnonzero(mask)
        arr = self.t.get(m.sym)
        idx = tuple(self.val(i) for i in m.index)
        if len(on) == 0:
            if not store:
                self.regs[a[0]] = np.zeros(len(mask), dtype=arr.dtype)
            return
        lo = self.t.flat_index(m.sym, idx[:-1] + (idx[-1] + int(on[0]),))
        hi = self.t.flat_index(m.sym, idx[:-1] + (idx[-1] + int(on[-1]),))
        flat = arr.reshape(-1)
        done = self.mem.access_range(self.t.addr(m.sym, lo), self.t.addr(m.sym, hi) - self.t.addr(m.sym, lo)
                                     + arr.itemsize, self.clock, store, "l1")
        base = lo - int(on[0])
        if store:
            flat[base + on] = self.regs[a[0]][on]
        else:
            out = np.zeros(len(mask), dtype=arr.dtype)
            out[on] = flat[base + on]
            self.regs[a[0]] = out
            if self.t.is_lookup(m.sym, idx[-1] + int(on[0])):
                self.lookups += 1
            self.wait_for_load(done)

    def vector_indexed(self, a: list[Any], store: bool) -> None:
        """vgather/vscatter: each lane on is its own access, costing `gather_lane` cycles."""
        m: Mem = a[1]
        mask = self.regs[a[2]]
        arr = self.t.get(m.sym)
        flat = arr.reshape(-1)
        prefix = tuple(self.val(i) for i in m.index[:-1])
        lanes = self.regs[m.index[-1]]
        out = np.zeros(len(mask), dtype=arr.dtype)
        done = self.clock
        for k in np.flatnonzero(mask):
            f = self.t.flat_index(m.sym, prefix + (int(lanes[k]),))
            self.clock += self.cost["gather_lane"]
            self.busy += self.cost["gather_lane"]
            done = max(done, self.mem.access(self.t.addr(m.sym, f), self.clock, store, "l1"))
            if store:
                flat[f] = self.regs[a[0]][k]
            else:
                out[k] = flat[f]
        if not store:
            self.regs[a[0]] = out
            self.wait_for_load(done)

    def host(self, ins: Instr) -> None:
        op_type, ins_syms, out_syms, attrs = ins.args
        inputs = [self.t.get(s.n) for s in ins_syms]
        outs = run_host(op_type, inputs, len(out_syms), attrs, self.p.opset)
        for s, o in zip(out_syms, outs):
            assert isinstance(s, SymRef)
            want = self.t.get_dtype(s.n)
            self.t.set(s.n, o.astype(want, copy=False) if o.dtype != want else o,
                       f"result of host {op_type} ({self.t.describe(s.n)})")
            self.t.note_origin(s.n, op_type, [i.n for i in ins_syms])
        cycles, flops, moved = host_cost(op_type, inputs, outs, self.m.execute.host_flops_per_cycle,
                                         self.m.dram.bytes_per_cycle)
        self.clock += cycles
        self.busy += cycles
        self.host_cycles += cycles
        self.host_flops += flops
        self.host_bytes += moved
