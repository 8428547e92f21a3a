"""Multi-core runs: the batch split across cores, each with its own access unit, queue and private caches.

Definition (both engines): every core runs the whole program on its own slice of the batch, from cycle 0, at
the same time as the others (rounds.py: each core in its own thread, taking turns a round of simulated time at a
time).  Private levels (all but the last) are each core's own; the last cache level and the DRAM (its channels'
calendars, banks and refresh) are shared, so one core's lines serve and evict another's and the cores contend
for DRAM as they run.  Cycles are those of the slowest core; `cores.min_cycles` and `cores.max_cycles` say how
far apart they finish.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..backend.dae import Program
from ..backend.registers import check_registers
from ..ir.diagnostics import EmberError
from ..machine import Machine
from . import reference
from .bounds import report_roofline, report_sol
from .cache import SharedMemory
from .energy import report_energy
from .engines import needs_fast
from .fast import engine as fast
from .rounds import QUANTUM, Rounds, Turn
from .stats import Stats
from .trace import Events

SUMMED = ("lookups", "tokens", "operands", "operand_bytes", "callbacks", "access.elements", "access.requests",
          "access.stall_cycles", "execute.instructions", "execute.busy_cycles", "execute.starved_cycles",
          "execute.load_stall_cycles", "execute.pop_stall_cycles", "execute.store_stall_cycles",
          "execute.compute_stall_cycles", "execute.mispredict_cycles", "execute.uops", "host.cycles", "host.flops",
          "dram.requests", "dram.busy_cycles", "dram.write_bytes", "dram_bytes", "dram.activates", "dram.row_hits",
          "dram.row_misses", "dram.row_conflicts", "execute.branch_mispredicts")
SUMMED_PREFIXES = ("execute.op.", "execute.pipe.")  # counters a core may or may not have: summed by prefix


def simulate_cores(programs: Sequence[Program], slices: Sequence[dict[str, np.ndarray]], machine: Machine,
                   max_cycles: float | None = None, engine: str = "fast", timing_only: bool = False,
                   quantum: float = QUANTUM, traces: Sequence[Events] | None = None
                   ) -> tuple[list[dict[str, np.ndarray]], Stats]:
    """One run per core of its program (the same operation, compiled for its slice's shapes) on its slice, all at
    once in rounds of `quantum` cycles; returns each core's outputs and the totals followed by every core's
    statistics as `core<k>.<name>`.  `traces`, one a core, record each core's timeline (trace.py)."""
    if len(slices) != len(programs) or not 1 <= len(slices) <= machine.cores:
        raise EmberError(f"the machine has {machine.cores} cores but the batch was split into {len(slices)} slices "
                         f"for {len(programs)} programs (one slice and one program a core, at least one)")
    for program in programs:
        check_registers(program, machine.execute)
    fast.notes.clear()  # this run's notes only, as fast.simulate keeps them
    bits = machine.execute.simd_bits
    if engine == "fast" and any(fast.compiled_or_none(p, timing_only, bits) is None for p in programs):
        engine = "reference"  # one engine for every core: their shared state has one form per engine
    needs_fast(engine, timing_only)
    n = len(programs)
    rounds = Rounds(n, quantum)
    shared_ref, shared_fast = SharedMemory(), fast.SharedArrays()
    results: list[Any] = [None] * n
    if traces is not None and len(traces) != n:
        raise EmberError(f"{len(traces)} traces for {n} cores")

    def core(k: int) -> None:
        trace = None if traces is None else traces[k]
        try:
            turn = Turn(rounds, k, rounds.wait(k))
            if engine == "fast":
                results[k] = fast.simulate(programs[k], slices[k], machine, max_cycles, timing_only, shared_fast,
                                           turn, trace)
            else:
                results[k] = reference.simulate(programs[k], slices[k], machine, max_cycles, shared_ref, turn, trace)
        except BaseException as e:  # noqa: BLE001  (raised again in the caller's thread)
            results[k] = e
        finally:
            rounds.leave(k)

    threads = [threading.Thread(target=core, args=(k,), daemon=True, name=f"core{k}") for k in range(n)]
    begun = False
    try:
        try:
            for th in threads:  # inside: a Ctrl-C while the threads start stops those that have
                th.start()
            rounds.begin()
            begun = True
            for th in threads:
                th.join()
        except KeyboardInterrupt:  # Python gives Ctrl-C to this thread: stop the cores before their memory goes
            rounds.stop()
            for k, th in enumerate(threads):
                if th.ident is None:  # never started: out of the rotation, so the turns reach the others
                    rounds.leave(k)
            if not begun and rounds.live:
                rounds.begin()
            for th in threads:
                while th.is_alive():
                    with contextlib.suppress(KeyboardInterrupt):
                        th.join()
            raise
    finally:
        shared_fast.release()
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return [out for out, _ in results], combine([st for _, st in results], machine)


def combine(per_core: list[Stats], machine: Machine) -> Stats:
    """Totals over the cores (cycles: the slowest core), then every core's own statistics."""
    st = Stats()
    cycles = max(s["cycles"] for s in per_core)
    host = sum(s["host_seconds"] for s in per_core)
    st.set("cores", len(per_core), "cores given a slice of the batch (any others stay idle)", "Count")
    st.set("cycles", cycles, "simulated cycles until the slowest core halts", "Cycle")
    st.set("cores.min_cycles", min(s["cycles"] for s in per_core), "the cycle the first core to finish halts",
           "Cycle")
    st.set("cores.max_cycles", cycles, "the cycle the last core to finish halts", "Cycle")
    st.set("sim_seconds", machine.seconds(cycles), "simulated time at the machine's clock", "Second")
    st.set("host_seconds", host, "wall-clock time the simulations took", "Second")
    st.set("sim_cycles_per_host_second", cycles / host if host else 0.0, "simulation speed", "Cycle/Second")
    lookups = sum(s["lookups"] for s in per_core)
    st.set("lookups_per_host_second", lookups / host if host else 0.0, "simulation speed", "Count/Second")
    counters = [n for n in per_core[0] if n.startswith("cache.") and n.endswith((".hits", ".misses", ".bytes"))]
    for name in [n for n in SUMMED if n in per_core[0]] + counters:
        first = per_core[0].get(name)
        assert first is not None
        st.set(name, sum(s[name] for s in per_core), f"{first.description} (all cores)", first.unit)
    for s in per_core:
        for name, stat in s.items():
            if name.startswith(SUMMED_PREFIXES):
                st.add(name, stat.value, f"{stat.description} (all cores)", stat.unit)
    peak = machine.dram_bytes_per_cycle
    st.set("dram_bandwidth_fraction", st["dram_bytes"] / (cycles * peak) if cycles else 0.0,
           "achieved DRAM bandwidth / peak, all cores", "Ratio")
    report_roofline(st, cycles, {  # units per core, DRAM shared
        "access": (max(s["roofline.access_cycles"] for s in per_core), "the busiest core's access issue"),
        "dram": (st["dram_bytes"] / peak, "all cores' DRAM bytes / DRAM bytes per cycle"),
        "execute": (max(s["roofline.execute_cycles"] for s in per_core), "the busiest core's execute work")})
    # each core's speed of light bounds its own time; DRAM's too, since the rows one core must read come from
    # DRAM at least once whichever core fetches them (adding the cores' bytes would count shared rows twice)
    report_sol(st, cycles, {name: max(s[f"sol.{name}_cycles"] for s in per_core)
                            for name in ("dram", "execute")})
    # energy of the summed counters, and static power of every core of the machine, idle ones included
    report_energy(st, machine, machine.cores)
    for k, s in enumerate(per_core):  # a core's own sol.* would count rows another core fetched into the LLC,
        for name, stat in s.items():  # its own energy the static power of blocks it shares
            if not name.startswith(("sol", "energy", "power_w")):
                st.set(f"core{k}.{name}", stat.value, stat.description, stat.unit)
    return st


def split_bags(inputs: dict[str, np.ndarray], cores: int, per_lookup: Sequence[str] = ("indices", "weights")
               ) -> list[dict[str, np.ndarray]]:
    """Split a bag batch (include-last `offsets`, lookups in `indices`, optional per-lookup `weights`)
    into contiguous slices of bags, each with rebased offsets: one a core, or one a bag when there are
    fewer bags than cores (the other cores stay idle)."""
    offsets = inputs["offsets"]
    bags = len(offsets) - 1
    parts = min(cores, max(bags, 1))
    cuts = [bags * k // parts for k in range(parts + 1)]
    out = []
    for a, b in zip(cuts, cuts[1:]):
        lo, hi = int(offsets[a]), int(offsets[b])
        part = dict(inputs)
        part["offsets"] = offsets[a:b + 1] - offsets[a]
        for name in per_lookup:
            if name in inputs:
                part[name] = inputs[name][lo:hi]
        out.append(part)
    return out


def split_rows(inputs: dict[str, np.ndarray], cores: int, name: str = "indices") -> list[dict[str, np.ndarray]]:
    """Split a gather batch (one output row per entry of `name`) into contiguous slices: one a core, or one
    a lookup when there are fewer lookups than cores (the other cores stay idle)."""
    n = len(inputs[name])
    parts = min(cores, max(n, 1))
    cuts = [n * k // parts for k in range(parts + 1)]
    return [{**inputs, name: inputs[name][a:b]} for a, b in zip(cuts, cuts[1:])]
