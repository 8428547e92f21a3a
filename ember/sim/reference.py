"""The reference engine: runs a DAE program on inputs, event by event, and gathers statistics.

The main program runs on the execute unit; `run` starts an access program (when the `run` instruction
dispatches and its operands are ready) and, for every message the access unit marshals, dispatches
the case its token names (execute.Core.dispatch), whose instructions then flow through the pipeline
(pipeline.py).  The instructions after a `run` dispatch once its access unit is done.  Cycles =
when every instruction has retired, every store is written and every DRAM transfer is over.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from ..backend.dae import Instr, Program
from ..ir.diagnostics import EmberError
from ..machine import Machine
from . import cycle_limit
from .access import AccessUnit, check_resources
from .bounds import report_roofline, report_sol, sol_cycles
from .cache import MemorySystem, SharedMemory
from .energy import report_energy
from .execute import Core
from .queue import OutputQueue
from .rounds import Turn
from .stats import Stats
from .tensors import Tensors
from .trace import ACCESS, CORE, Events, K, callback_ids
from .work import WorkCounts, tensor_values, vector_lanes, work_counts


class _Run:
    def __init__(self, program: Program, machine: Machine, max_cycles: float, shared: SharedMemory | None,
                 turn: Turn | None = None, trace: Events | None = None):
        self.p = program
        self.m = machine
        self.max_cycles = max_cycles
        self.t = Tensors(program)
        self.mem = MemorySystem.from_machine(machine)
        if shared is not None:
            shared.attach(self.mem)
        if turn is not None:
            take_turns(self.mem, turn)
        self.core = Core(program, self.t, self.mem, machine)
        self.core.run_hook = self.run_access
        self.core.max_cycles = max_cycles
        self.unit: AccessUnit | None = None
        if turn is not None:
            turn.rounds.on_stop(self.stop)
        self.queue = OutputQueue(machine.access.queue_total_bytes)
        self.access_totals = {"elements": 0, "requests": 0, "tokens": 0, "operands": 0, "operand_bytes": 0,
                              "lookups": 0}
        self.cycles = 0.0
        self.counts = WorkCounts()
        self.access_busy = 0.0
        self.callbacks = 0
        self.trace = trace
        if trace is not None:
            self.mem.trace = self.queue.trace = self.core.trace = self.core.pipe.trace = trace
            self.callback_ids = callback_ids(program)

    def stop(self) -> None:
        """Stop at the next cycle-limit check, however far the clocks are (a multi-core run interrupted)."""
        self.max_cycles = self.core.max_cycles = -math.inf
        if self.unit is not None:
            self.unit.max_cycles = -math.inf

    def run_access(self, ins: Instr, start: float) -> None:
        name = ins.args[0]
        acc = next((a for a in self.p.access if a.name == name), None)
        if acc is None:
            raise EmberError(f"'run' names an unknown access program '{name}'")
        params = [int(self.core.val(a)) for a in ins.args[1:]]
        if len(params) != acc.params:
            raise EmberError(f"access program {name} takes {acc.params} parameters, 'run' passes {len(params)}")
        core = self.core
        traced = -1 if self.trace is None else self.trace.add(K["run"], ACCESS, start, math.inf,
                                                               self.p.access.index(acc))
        unit = self.unit = AccessUnit(acc, params, self.t, self.mem, self.m, self.queue, start, self.max_cycles)
        stall0 = self.queue.stall
        for msg in unit.run():
            core.pops.extend(msg.operands[:-1] if msg.token is not None else msg.operands)
            if msg.token is None:
                continue
            label = f"{name}.{msg.token}"
            if label not in core.labels:
                raise EmberError(f"token {msg.token} of {name} has no case label '{label}'")
            core.dispatch(name, msg.token, msg.operands[-1])
            core.run_from(core.labels[label], "ret")
            if self.trace is not None:
                self.trace.add(K["callback"], CORE, core.callback_start, core.pipe.fe,
                               self.callback_ids[(name, msg.token)])
            self.callbacks += 1
            cycle_limit.check(self.max_cycles, core.clock)
        if core.pops:
            raise EmberError(f"{len(core.pops)} operands pushed by {name} were never popped")
        core.pipe.wait(unit.clock, "token")
        if traced >= 0:
            self.trace.t1[traced] = unit.clock
        self.access_busy += unit.clock - start - (self.queue.stall - stall0)
        for k in self.access_totals:
            self.access_totals[k] += getattr(unit, k)


def take_turns(mem: MemorySystem, turn: Turn) -> None:
    """Every call of `mem` on what the cores share waits for the core's turn when its time is past its round
    (rounds.py; runtime.h's mem_turn at the same calls)."""
    for name, t_arg in (("access", 1), ("place", 4), ("write_around", 1)):
        call = getattr(mem, name)

        def in_turn(*args: Any, call: Any = call, t_arg: int = t_arg) -> Any:
            turn.at(args[t_arg])
            return call(*args)
        setattr(mem, name, in_turn)


def simulate(program: Program, inputs: dict[str, np.ndarray], machine: Machine,
             max_cycles: float | None = None, shared: SharedMemory | None = None, turn: Turn | None = None,
             trace: Events | None = None) -> tuple[dict[str, np.ndarray], Stats]:
    """Run `program`; inputs and outputs are keyed by their names in the model.  A core of a multi-core run
    shares the last cache level and DRAM (`shared`) with the others and takes its turns by `turn` (rounds.py).
    `trace` records the run's timeline (trace.py)."""
    t0 = time.perf_counter()
    limit = cycle_limit.cycle_limit(max_cycles)
    check_resources(program, machine)
    r = _Run(program, machine, limit, shared, turn, trace)
    set_symbols(r.t, program, inputs)
    r.core.run_from(0, "halt")
    r.cycles = r.core.finish(r.mem.busy_until)
    cycle_limit.check(limit, r.cycles)
    r.counts = work_counts(program, tensor_values(r.t), vector_lanes(machine.execute.simd_bits))
    outputs = {s.name: r.t.get(n) for n, s in enumerate(program.symbols) if s.kind == "output"}
    return outputs, statistics(r, time.perf_counter() - t0)


def set_symbols(t: Tensors, program: Program, inputs: dict[str, np.ndarray],
                virtual: frozenset[int] = frozenset()) -> None:
    """Give inputs and params their data in symbol order, which fixes their base addresses; `virtual` params
    (timing-only tables) get an address range of their declared shape and no data."""
    for n, s in enumerate(program.symbols):
        if s.kind == "input":
            if s.name not in inputs:
                have = ", ".join(sorted(inputs)) or "nothing"
                raise EmberError(f"input '{s.name}' is missing (the inputs hold: {have})")
            t.set(n, np.asarray(inputs[s.name]), f"input '{s.name}'")
        elif s.kind == "param" and n in virtual:
            t.reserve(n, int(np.prod(s.shape, dtype=np.int64)) * t.get_dtype(n).itemsize)
        elif s.kind == "param":
            if n not in program.data:
                raise EmberError(f"param '{s.name}' has no data in the program")
            t.set(n, program.data[n], f"param '{s.name}'")


def statistics(r: _Run, host_seconds: float) -> Stats:
    """Every statistic of a run, from the reference engine's objects or the fast engine's arrays in their shape."""
    m, core, acc, q = r.m, r.core, r.access_totals, r.queue
    cycles = r.cycles
    st = Stats()
    st.set("cycles", cycles, "simulated cycles until every instruction has retired and every store is written",
           "Cycle")
    st.set("sim_seconds", m.seconds(cycles), "simulated time at the machine's clock", "Second")
    st.set("host_seconds", host_seconds, "wall-clock time the simulation took", "Second")
    st.set("sim_cycles_per_host_second", cycles / host_seconds if host_seconds else 0.0,
           "simulation speed", "Cycle/Second")
    lookups = acc["lookups"] + core.lookups
    st.set("lookups", lookups, "table rows read: loads of column 0 of a rank>=2 input or param", "Count")
    st.set("lookups_per_host_second", lookups / host_seconds if host_seconds else 0.0, "simulation speed",
           "Count/Second")
    st.set("tokens", acc["tokens"], "control tokens pushed by the access unit", "Count")
    st.set("operands", acc["operands"], "operands pushed by the access unit", "Count")
    st.set("operand_bytes", acc["operand_bytes"], "bytes of operands pushed", "Byte")
    st.set("callbacks", r.callbacks, "callbacks the execute unit ran", "Count")
    st.set("access.elements", acc["elements"], "stream elements issued", "Count")
    st.set("access.requests", acc["requests"], "memory requests issued by the access unit", "Count")
    st.set("access.busy_cycles", r.access_busy, "access-unit cycles not stalled on a full queue", "Cycle")
    st.set("access.stall_cycles", q.stall, "access-unit cycles stalled on a full queue", "Cycle")
    pipe = core.pipe
    width = m.execute.issue_width
    instructions = pipe.instructions
    st.set("execute.busy_cycles", instructions / width, "dispatch slots used: uops / issue width", "Cycle")
    stalls = pipe.stalls
    for key, name, doc in (("token", "starved", "a token (the reorder buffer full behind a token read, a "
                                                "dispatch jump waiting for it, the access unit's end)"),
                           ("pop", "pop_stall", "an operand pop"), ("load", "load_stall", "the core's loads"),
                           ("store", "store_stall", "the store buffer, or stores and write-backs draining"),
                           ("compute", "compute_stall", "arithmetic latency and busy pipes"),
                           ("mispredict", "mispredict", "the front end after a mispredicted branch or dispatch "
                                                        "jump")):
        st.set(f"execute.{name}_cycles", stalls[key], f"cycles the front end waited for {doc}", "Cycle")
    st.set("execute.instructions", sum(core.counts.values()), "instructions executed (a callback dispatch is one)",
           "Count")
    st.set("execute.uops", instructions, "uops dispatched (a callback dispatch is three, a vmask four, a viota two)",
           "Count")
    for op in sorted(core.counts):
        st.set(f"execute.op.{op}", core.counts[op], f"'{op}' instructions executed", "Count")
    for g in m.execute.GROUPS:
        st.set(f"execute.pipe.{g}", pipe.ports[g].count, f"uses of the {g} pipe group (a vector wider than the "
               "machine's, one a piece; a gather or scatter, one a lane)", "Count")
    st.set("execute.prefetches", core.prefetches, "lines fetched by the next-line prefetcher", "Count")
    st.set("execute.branch_mispredicts", core.branch_misses, "conditional branches the gshare predictor got wrong",
           "Count")
    st.set("host.cycles", core.host_cycles, "cycles of host (ONNX) operations, roofline model", "Cycle")
    st.set("host.flops", core.host_flops, "float operations of host operations", "Count")
    st.set("queue_max_occupancy", q.max_bytes, "largest output-queue occupancy at a push", "Byte")
    st.set("queue_max_entries", q.max_entries, "largest number of queue entries held at a push", "Count")
    st.set("queue_capacity", q.capacity, "output-queue capacity", "Byte")
    q.hist.report(st, "queue_occupancy", "output-queue bytes held at each push", "Count", "Byte")
    r.mem.report(st)
    dram_bytes = r.mem.dram_bytes
    peak = m.dram_bytes_per_cycle
    st.set("dram_bytes", dram_bytes, "bytes moved to and from DRAM (reads and write-backs)", "Byte")
    st.set("dram_bandwidth_fraction", dram_bytes / (cycles * peak) if cycles else 0.0,
           "achieved DRAM bandwidth / peak", "Ratio")
    ex = m.execute
    # the busiest group's last instruction issues no earlier than (count - 1) holds after its first
    pipes = max([instructions / width] + [max(pipe.ports[g].count - 1, 0) * ex.throughput(g) for g in ex.GROUPS])
    report_sol(st, cycles, sol_cycles(r.counts, m))
    report_roofline(st, cycles, {
        "access": (acc["elements"] / m.access.lanes, "stream elements / elements issued per cycle (lanes)"),
        "dram": (dram_bytes / peak, "DRAM bytes / DRAM bytes per cycle"),
        "execute": (pipes + core.host_cycles, "this program's dispatch slots or its busiest pipe group, "
                    "plus host ops: its own time without stalls")})
    report_energy(st, m)
    return st
