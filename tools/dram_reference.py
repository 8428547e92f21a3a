"""Ramulator 2's results for the DRAM check's traces: writes ember/bench/dram/reference.json.

Ramulator is not a dependency of Ember and nothing here builds it: build it from its public source
(github.com/CMU-SAFARI/ramulator2, with its Python bindings) and put its `python/` folder on PYTHONPATH:

    PYTHONPATH=/path/to/ramulator2/python .venv/bin/python tools/dram_reference.py

Each memory of ember/bench/dram/check.py is configured in Ramulator as the device file says (the same presets),
with one controller, FR-FCFS scheduling, open rows, all-bank refresh and the RoBaRaCoCh address mapper.  Every
line of a trace is written at the address RoBaRaCoCh decodes into the channel, rank, bank group, bank, row and
column Ember's address map gives that line (an HBM3 line as two 32-byte requests to adjacent columns), so both
simulators place every request alike.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from ember.bench.dram.check import MEMORIES
from ember.bench.dram.traces import TRACES, trace

OUT = Path(__file__).resolve().parent.parent / "ember" / "bench" / "dram" / "reference.json"

# Ramulator's side of each memory: its presets and controller, the bytes a request moves, its tick in ps
# (HBM3 ticks at half a clock), its columns a row, and how many requests carry one 64-byte line
RAMULATOR = {
    "ddr5-4800": dict(standard="DDR5", org="DDR5_16Gb_x8", timing="DDR5_4800AN", controller="GenericDDR",
                      tx=64, tick_ps=416, columns=64, per_line=1, extra={"rank": 1}),
    "hbm3": dict(standard="HBM3", org="HBM3_16Gb_8hi", timing="HBM3_6400Mbps", controller="HBM34",
                 tx=32, tick_ps=312, columns=32, per_line=2, extra={}),
    "ddr4-3200": dict(standard="DDR4", org="DDR4_8Gb_x8", timing="DDR4_3200AA", controller="GenericDDR",
                      tx=64, tick_ps=625, columns=128, per_line=1, extra={"rank": 1}),
    "hbm2": dict(standard="HBM2", org="HBM2_8Gb", timing="HBM2_1600Mbps", controller="HBM12",
                 tx=32, tick_ps=1250, columns=32, per_line=2, extra={}),
}


def addresses(memory: str, name: str) -> list[tuple[str, int]]:
    """(LD or ST, byte address) of every Ramulator request for trace `name` on `memory`."""
    mem = MEMORIES[memory]
    r = RAMULATOR[mem.device]
    model = mem.model()
    d = model.dev
    lines, writes = trace(name)
    out = []
    for line, write in zip(lines.tolist(), writes.tolist()):
        ch, rank, group, bank, row, col = model.place(line)
        for half in range(r["per_line"]):
            # RoBaRaCoCh, from the low bits: column, (pseudo) channel, rank, bank group, bank, row
            a = ((row * d.banks + bank) * d.bankgroups + group) * d.ranks + rank
            a = (a * mem.channels + ch) * r["columns"] + col * r["per_line"] + half
            out.append(("ST" if write else "LD", a * r["tx"]))
    return out


def run(memory: str, name: str, folder: Path) -> dict[str, float]:
    import ramulator  # noqa: PLC0415  (the one outside tool this script needs, from PYTHONPATH)

    mem = MEMORIES[memory]
    r = RAMULATOR[mem.device]
    path = folder / "trace.txt"
    path.write_text("".join(f"{op} {hex(a)}\n" for op, a in addresses(memory, name)))
    dram = getattr(ramulator.dram, r["standard"])(org_preset=r["org"], timing_preset=r["timing"], **r["extra"])
    ctrl = getattr(ramulator.controller, r["controller"])(
        dram=dram, scheduler=ramulator.scheduler.FRFCFS(), refresh_manager=ramulator.refresh_manager.AllBank(),
        row_policy=ramulator.row_policy.Open(), addr_mapper=ramulator.addr_mapper.RoBaRaCoCh())
    system = ramulator.memory_system.GenericDRAM(clock_ratio=1, controllers=[ctrl],
                                                 channel_mapper=ramulator.channel_mapper.CacheLineInterleave())
    frontend = ramulator.frontend.LoadStoreTrace(clock_ratio=1, path=str(path))
    sim = ramulator.Simulation(frontend, system)
    sim.run()
    sim.finalize()
    c = sim.stats["memory_system"]["controller"]
    lines, _ = trace(name)
    return {"ns": c["cycles"] * r["tick_ps"] / 1000.0, "read_latency_ns": c["avg_read_latency"] * r["tick_ps"] / 1000.0,
            "bytes": 64 * len(lines), "requests": c["num_read_reqs"] + c["num_write_reqs"],
            "row_hits": c["row_hits"], "row_misses": c["row_misses"], "row_conflicts": c["row_conflicts"]}


def main() -> None:
    results: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for memory in MEMORIES:
            for name in TRACES:
                results.setdefault(memory, {})[name] = run(memory, name, Path(tmp))
                print(memory, name, results[memory][name], file=sys.stderr, flush=True)
    about = ("Ramulator 2.1 (github.com/CMU-SAFARI/ramulator2) on each trace of ember/bench/dram/traces.py, "
             "configured by tools/dram_reference.py; ns and read_latency_ns are its controller's cycles and "
             "average read latency times its tick")
    OUT.write_text(json.dumps({"about": about, "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
