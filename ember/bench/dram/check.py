"""Ember's DRAM model on the check's traces, beside Ramulator 2's results for the same requests.

The closed loop (what Ramulator's LoadStoreTrace front end does): requests enter in trace order, at most one a
cycle, into a read buffer or a write buffer of 32 entries each (Ramulator's GenericDDR and HBM34 controllers'
defaults); a request leaves its buffer when its column command issues, which makes room for the next.  A read's
latency runs from its entry to the end of its data burst.  Times are nanoseconds: the model runs at a 1 GHz
"core" clock, and Ramulator's cycles are converted with its clock period.

Both sides place every line the same way: Ember's address map gives the channel, rank, bank group, bank, row
and column, and tools/dram_reference.py writes each request for Ramulator at the address its RoBaRaCoCh mapper
decodes into exactly those, so the comparison is of the timing models alone.

`python -m ember.bench.dram.check` prints the tables docs/dram.md shows: the comparison, and each device's
energy.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources

import numpy as np

from ...machine import load_dram_device
from ...sim import dram_energy
from ...sim.dram import BankedDram
from .traces import trace

BUFFER = 32  # Ramulator's read and write buffers hold 32 requests each
WATERMARKS = (0.2, 0.8)  # its write buffer drains from the high watermark to the low one
TOLERANCE = 0.15  # issue 33's bound on the difference, for bandwidth and mean read latency alike


@dataclass(frozen=True)
class Memory:
    """A memory both simulators model: Ember's device, channels and address map (Ramulator's organization is
    in tools/dram_reference.py)."""

    device: str
    channels: int
    address_map: str
    requests_per_line: int = 1  # Ramulator's requests a 64-byte line (HBM3's are 32 bytes)

    @property
    def buffer(self) -> int:
        """Lines the closed loop lets wait: Ramulator's buffer holds requests, a line may be two of them."""
        return BUFFER // self.requests_per_line

    def model(self) -> BankedDram:
        """A fresh model, its cycles nanoseconds."""
        batch = (WATERMARKS[1] - WATERMARKS[0]) * BUFFER / self.requests_per_line
        return BankedDram(load_dram_device(self.device), self.channels, 1.0, self.address_map, batch)


MEMORIES = {
    "DDR5-4800": Memory("ddr5-4800", 1, "mop4-xor"),
    "HBM3": Memory("hbm3", 2, "mop4-xor", 2),
    "DDR5-4800, row-bank-rank-column": Memory("ddr5-4800", 1, "row-bank-rank-column"),
    "DDR4-3200": Memory("ddr4-3200", 1, "mop4-xor"),
    "HBM2": Memory("hbm2", 2, "mop4-xor", 2),
}


@dataclass(frozen=True)
class Measured:
    """One trace on one memory: what the check compares, and the row-buffer counts beside it."""

    ns: float
    read_latency_ns: float
    bytes: int
    row_hits: int
    row_misses: int
    row_conflicts: int
    activates: int
    write_bytes: int

    @property
    def gbps(self) -> float:
        return self.bytes / self.ns if self.ns else 0.0


def drive(model: BankedDram, lines: np.ndarray, writes: np.ndarray, buffer: int = BUFFER) -> Measured:
    """The trace through the closed loop of the module docstring."""
    held: dict[bool, list[float]] = {False: [], True: []}  # column times of the requests each buffer holds
    t, end, latency, reads = -1.0, 0.0, 0.0, 0
    tm = model.t
    for line, write in zip(lines.tolist(), writes.tolist()):
        t += 1.0
        queue = held[write]
        if len(queue) >= buffer:
            t = max(t, heapq.heappop(queue))
        start = model.transfer(t, line, write)
        heapq.heappush(queue, start - (tm.cwl if write else tm.cl))
        done = start + model.burst
        end = max(end, done)
        if not write:
            latency += done - t
            reads += 1
    return Measured(end, latency / max(reads, 1), 64 * len(lines), model.hits, model.misses, model.conflicts,
                    model.activates, 64 * int(np.count_nonzero(writes)))


def reference() -> dict[str, dict[str, dict[str, float]]]:
    """Ramulator's results: memory -> trace -> figures (reference.json)."""
    with resources.files(__package__).joinpath("reference.json").open() as f:
        return json.load(f)["results"]


def rows(memories: Iterable[str] | None = None) -> list[tuple[str, str, Measured, dict[str, float]]]:
    """(memory, trace, Ember's figures, Ramulator's) for every pair reference.json holds (of `memories` only,
    if given)."""
    ref = reference()
    out = []
    for mem, per_trace in ref.items():
        if memories is not None and mem not in memories:
            continue
        for name, theirs in per_trace.items():
            lines, writes = trace(name)
            memory = MEMORIES[mem]
            out.append((mem, name, drive(memory.model(), lines, writes, memory.buffer), theirs))
    return out


def line_hits(theirs: dict[str, float]) -> int:
    """Ramulator's row hits counted a line at a time: a line of two requests (HBM's 32-byte bursts) has its second
    one hit the row the first opened, so the hits beyond one a line's second request are the lines' own."""
    lines = int(theirs["bytes"]) // 64
    return max(0, int(theirs["row_hits"]) - (int(theirs["requests"]) - lines))


def table(compared: list[tuple[str, str, Measured, dict[str, float]]] | None = None) -> str:
    """The comparison (`rows()` unless given) as a Markdown table."""
    head = ("| memory | trace | Ember GB/s | Ramulator GB/s | ratio | Ember read ns | Ramulator read ns | ratio "
            "| Ember row hits | Ramulator row hits |\n|---|---|---|---|---|---|---|---|---|---|")
    body = []
    for mem, name, ours, theirs in compared if compared is not None else rows():
        gbps = theirs["bytes"] / theirs["ns"]
        body.append(f"| {mem} | {name} | {ours.gbps:.2f} | {gbps:.2f} | {ours.gbps / gbps:.3f} | "
                    f"{ours.read_latency_ns:.1f} | {theirs['read_latency_ns']:.1f} | "
                    f"{ours.read_latency_ns / theirs['read_latency_ns']:.3f} | {ours.row_hits} | "
                    f"{line_hits(theirs)} |")
    return "\n".join([head, *body])


ENERGY_TRACES = ("random reads", "sequential reads")
PUBLISHED_HBM2_PJ_BIT = 3.97  # O'Connor et al., "Fine-Grained DRAM", MICRO 2017: HBM2's energy a bit


def energy_pj_bit(memory: Memory, name: str) -> float:
    """Picojoules a bit moved of the trace `name` on `memory`: its commands, interface, and every channel's
    standby and refresh over the time it takes (ember/sim/dram_energy.py)."""
    lines, writes = trace(name)
    got = drive(memory.model(), lines, writes, memory.buffer)
    device = load_dram_device(memory.device)
    counts = {"dram_bytes": got.bytes, "dram.write_bytes": got.write_bytes, "dram.activates": got.activates}
    joules = (sum(dram_energy.dynamic_parts(counts, device).values())
              + sum(dram_energy.static_parts(device, memory.channels).values()) * got.ns * 1e-9)
    return joules / (8 * got.bytes) * 1e12


def energy_table() -> str:
    """Each device's energy a command, and a bit moved on random and on sequential reads, as Markdown."""
    head = ("| memory | activate + precharge, nJ | read, pJ/bit | write, pJ/bit | interface, pJ/bit | standby + "
            "refresh, mW a channel | random reads, pJ/bit | sequential reads, pJ/bit |\n"
            "|---|---|---|---|---|---|---|---|")
    body = []
    for mem in ("DDR5-4800", "HBM3", "DDR4-3200", "HBM2"):
        memory = MEMORIES[mem]
        device = load_dram_device(memory.device)
        e, bits = dram_energy.command_energy(device), 8 * device.burst_bytes
        per_trace = " | ".join(f"{energy_pj_bit(memory, name):.2f}" for name in ENERGY_TRACES)
        body.append(f"| {mem} | {e.activate_j * 1e9:.3f} | {e.read_j / bits * 1e12:.2f} | "
                    f"{e.write_j / bits * 1e12:.2f} | {e.io_j / bits * 1e12:.2f} | "
                    f"{(e.background_w + e.refresh_w) * 1e3:.1f} | {per_trace} |")
    return "\n".join([head, *body])


def main() -> None:
    print(table())
    print()
    print(energy_table())


if __name__ == "__main__":
    main()
