"""The cache model: set-associative LRU levels over a bandwidth-limited DRAM.

Both simulator engines must agree on every cycle, so the model is defined exactly here and the
code below is a direct transcription.  Times are float cycles; nothing is random.

Definition of `MemorySystem.access(addr, t, write, entry)`:

1. `line = addr // line_bytes` (every level has the same line size).  Level k keeps `sets_k` sets
   of `ways_k` lines; the line maps to set `line % sets_k`.  Each cached line records `ready`, the
   time its data arrives at that level.
2. Levels are looked up from `entry` outward.  `now` starts at `t`; visiting level k first does
   `now = now + latency_k` (additions in visiting order), then looks the line up.
   - Hit at level k: the access completes at `done = max(now, ready)` (a line still in flight
     makes the hit wait for its data); the line becomes most recently used at level k.
   - Miss at level k: counted, and the lookup goes on to the next level.
3. A miss at every level from `entry` outward goes to DRAM at time `now` (all visited latencies
   added): the DRAM model (dram.py) books the line's transfer and gives the start of its data on
   the bus, and the access completes at `done = start + dram_latency + xfer`, `xfer` being a line's
   time on the bus and `dram_latency` the time outside the devices.
4. Every visited level that missed is then filled with the line, `ready = done`, as its most
   recently used line; a full set first evicts its least recently used line.  Writes allocate
   exactly like reads (write-allocate) and complete at the same time; a write marks the line
   dirty at `entry`.  Levels are neither inclusive nor exclusive: an eviction touches only its own
   level, except that a dirty victim is written back to the next level out (marked dirty there,
   or filled there as a dirty most recently used line with ready time `t`, which may evict in
   turn), and a dirty victim of the last level goes to DRAM: it books a write at `t` and counts in
   DRAM requests, bytes and busy cycles.
5. Cache state is updated in call order (LRU order follows the calls, not `t`).
6. `place(addr, nbytes, level, ready)` puts lines written by the access unit (its output queue is
   memory-mapped in its cache level): every line of the range leaves the levels inside `level`
   (the data there is stale; nothing is written back), and in `level` becomes the most recently
   used line, clean, with ready time `ready` (filled if absent, which may evict as above, at `t`).
7. `write_around(addr, t)` is a non-temporal store's line, leaving a write-combining buffer at `t`:
   no level is looked up or filled (no write-allocate read), the line leaves every level that holds
   it (a dirty copy is not written back: the line written carries it, an assumption for partial
   lines, whose bytes outside the store hardware would merge), and it is written to DRAM, booked at
   `t` like a write-back and counted in `write_bytes`.  Intel's SDM (vol. 1, 10.4.6.2; vol. 3,
   11.3) defines these stores as write-combining and non-allocating; its optimization manual
   says the fill buffers serve as the write-combining buffers (`execute.Core.stream_lines`).

Statistics: per level `hits`, `misses` and `bytes` (bytes filled into the level from below =
misses * line_bytes); DRAM `requests`, `bytes` and `busy_cycles` (`line_bytes / bytes_per_cycle` a
transfer: cycles of the whole DRAM's bandwidth, whatever the channel count), reads and write-backs
together, and `write_bytes` for the write-backs alone.  `busy_until` is the end of the last transfer
this memory system booked: a run is not over before it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from ember.ir.diagnostics import EmberError

from ..machine import CacheConfig, Dram, Machine
from .dram import BankedDram, IdealDram, dram_of
from .stats import Stats


class CacheLevel:
    """One set-associative LRU level; each set is a dict line -> ready, oldest first (insertion order)."""

    def __init__(self, name: str, size_bytes: int, ways: int, line_bytes: int, latency: float):
        if ways <= 0 or line_bytes <= 0 or size_bytes <= 0 or size_bytes % (ways * line_bytes):
            raise EmberError(f"cache level '{name}': size_bytes ({size_bytes}) must be a positive multiple "
                             f"of ways * line_bytes ({ways} * {line_bytes})")
        self.name = name
        self.size_bytes = size_bytes
        self.ways = ways
        self.line_bytes = line_bytes
        self.latency = float(latency)
        self.nsets = size_bytes // (ways * line_bytes)
        self.sets: list[dict[int, float]] = [{} for _ in range(self.nsets)]
        self.dirty: set[int] = set()  # lines written since they were filled
        self.hits = 0
        self.misses = 0
        self.bytes = 0

    @classmethod
    def from_config(cls, c: CacheConfig) -> CacheLevel:
        """Build from a machine description level."""
        return cls(c.name, c.size_bytes, c.ways, c.line_bytes, c.latency)

    def lookup(self, line: int) -> float | None:
        """The line's ready time on a hit (making it most recently used), None on a miss; not counted."""
        s = self.sets[line % self.nsets]
        ready = s.pop(line, None)
        if ready is not None:
            s[line] = ready
        return ready

    def fill(self, line: int, ready: float) -> int | None:
        """Insert a line that missed here as most recently used; returns the evicted line, if any."""
        s = self.sets[line % self.nsets]
        victim = None
        if len(s) >= self.ways:
            victim = next(iter(s))
            del s[victim]
        s[line] = ready
        return victim

    def drop(self, line: int) -> None:
        """Forget a line (no write-back)."""
        self.sets[line % self.nsets].pop(line, None)
        self.dirty.discard(line)

    def contains(self, line: int) -> bool:
        """Whether the line is cached (no LRU update)."""
        return line in self.sets[line % self.nsets]

    def set_lines(self, index: int) -> list[int]:
        """Lines held by set `index`, least recently used first."""
        return list(self.sets[index])

    def ready_time(self, line: int) -> float | None:
        """The recorded arrival time of a cached line (no LRU update)."""
        return self.sets[line % self.nsets].get(line)

    @property
    def hit_rate(self) -> float:
        """hits / lookups, 0 when the level was never looked up."""
        n = self.hits + self.misses
        return self.hits / n if n else 0.0


class SharedMemory:
    """The last cache level and the DRAM that the cores of a multi-core run share (multicore.py, rounds.py).

    The first core's become the shared ones; `attach` gives every core a view of them that holds the same lines,
    bookings and banks (a shallow copy) and its own counters, so every core's statistics count its own hits,
    misses, activates and row hits.
    """

    def __init__(self) -> None:
        self.level: CacheLevel | None = None
        self.dram: IdealDram | BankedDram | None = None

    def attach(self, mem: MemorySystem) -> None:
        if self.level is None:
            self.level, self.dram = mem.levels[-1], mem.dram
        level, dram = copy.copy(self.level), copy.copy(self.dram)
        assert dram is not None
        level.hits = level.misses = level.bytes = 0
        dram.reset_counters()
        mem.levels[-1], mem.dram = level, dram


class MemorySystem:
    """Cache levels (core outward) plus DRAM; `access` is the whole model (see module docstring)."""

    def __init__(self, caches: Sequence[CacheConfig], dram: Dram, clock_ghz: float = 2.0):
        if not caches:
            raise EmberError("a memory system needs at least one cache level")
        self.levels = [CacheLevel.from_config(c) for c in caches]
        self.line_bytes = self.levels[0].line_bytes
        if any(lv.line_bytes != self.line_bytes for lv in self.levels):
            raise EmberError("every cache level must have the same line size")
        self._entry = {lv.name: i for i, lv in enumerate(self.levels)}
        self.dram_latency = float(dram.latency)
        self.dram = dram_of(dram, clock_ghz, self.line_bytes)
        self.xfer = self.dram.burst  # a line's time on its channel's bus
        self.line_busy = self.line_bytes / dram.peak_bytes_per_cycle(clock_ghz)  # its share of the whole DRAM's cycles
        self.dram_requests = 0
        self.dram_bytes = 0
        self.dram_write_bytes = 0
        self.dram_busy = 0.0
        self.busy_until = 0.0
        self.trace: Any = None  # trace.Events when the run is traced

    @classmethod
    def from_machine(cls, machine: Machine) -> MemorySystem:
        """The memory system a machine description asks for."""
        return cls(machine.caches, machine.dram, machine.clock_ghz)

    def level(self, name: str) -> CacheLevel:
        """The level called `name`."""
        return self.levels[self._entry_index(name)]

    def _entry_index(self, name: str) -> int:
        try:
            return self._entry[name]
        except KeyError:
            raise EmberError(f"unknown cache level '{name}' (levels: {', '.join(self._entry)})") from None

    def access(self, addr: int, t: float, write: bool, entry: str) -> float:
        """Completion time of a one-line access issued at `t` entering at level `entry`."""
        line = addr // self.line_bytes
        first = self._entry.get(entry)
        if first is None:
            first = self._entry_index(entry)
        now = t
        missed: list[int] = []
        for k in range(first, len(self.levels)):
            lv = self.levels[k]
            now = now + lv.latency
            s = lv.sets[line % lv.nsets]
            ready = s.pop(line, None)
            if ready is not None:
                s[line] = ready
                lv.hits += 1
                done = ready if ready > now else now
                break
            lv.misses += 1
            missed.append(k)
        else:
            done = self.transfer(now, line, False) + self.dram_latency + self.xfer
        for k in missed:
            lv = self.levels[k]
            lv.bytes += lv.line_bytes
            self.fill(k, line, done, t)
        if write:
            self.levels[first].dirty.add(line)
        return done

    def fill(self, k: int, line: int, ready: float, t: float) -> None:
        """Put `line` in level k as most recently used; a dirty victim is written back at `t` (module docstring)."""
        lv = self.levels[k]
        victim = lv.fill(line, ready)
        if victim is None or victim not in lv.dirty:
            return
        lv.dirty.discard(victim)
        if k + 1 == len(self.levels):
            self.transfer(t, victim, True)
            self.dram_write_bytes += self.line_bytes
            return
        outer = self.levels[k + 1]
        if not outer.contains(victim):
            self.fill(k + 1, victim, t, t)
        outer.dirty.add(victim)

    def transfer(self, now: float, line: int, write: bool) -> float:
        """`line` moved to or from DRAM, requested at `now`; returns the start of its data on the bus."""
        start = self.dram.transfer(now, line, write)
        if self.trace is not None:  # a banked write holds the bus for its burst and its share of turnarounds
            width = self.dram.write_burst if write and isinstance(self.dram, BankedDram) else self.xfer
            self.trace.burst(line % self.dram.channels, write, start, width)
        self.dram_requests += 1
        self.dram_bytes += self.line_bytes
        self.dram_busy += self.line_busy
        self.busy_until = max(self.busy_until, start + self.xfer)
        return start

    def write_around(self, addr: int, t: float) -> float:
        """A non-temporal store's line written to DRAM from `t` (module docstring, 7); returns when its transfer
        ends, which frees its write-combining buffer."""
        line = addr // self.line_bytes
        for lv in self.levels:
            lv.drop(line)
        start = self.transfer(t, line, True)
        self.dram_write_bytes += self.line_bytes
        return start + self.xfer

    def place(self, addr: int, nbytes: int, level: str, ready: float, t: float) -> None:
        """Lines the access unit wrote into `level`, ready at `ready`; their victims leave at `t` (module
        docstring, 6)."""
        k = self._entry_index(level)
        for line in range(addr // self.line_bytes, (addr + max(nbytes, 1) - 1) // self.line_bytes + 1):
            for inner in self.levels[:k]:
                inner.drop(line)
            lv = self.levels[k]
            lv.dirty.discard(line)
            if lv.contains(line):
                lv.sets[line % lv.nsets].pop(line)
                lv.sets[line % lv.nsets][line] = ready
            else:
                self.fill(k, line, ready, t)

    @property
    def dram_free(self) -> float:
        """End of the last booked transfer, over every channel."""
        return max((bus.ends[-1] for bus in self.dram.buses if bus.ends), default=0.0)

    def access_range(self, addr: int, nbytes: int, t: float, write: bool, entry: str) -> float:
        """Completion of an access to [addr, addr + nbytes): every line touched, in address order, at `t`."""
        first = addr // self.line_bytes
        last = (addr + max(nbytes, 1) - 1) // self.line_bytes
        done = t
        for line in range(first, last + 1):
            d = self.access(line * self.line_bytes, t, write, entry)
            if d > done:
                done = d
        return done

    def report(self, stats: Stats, prefix: str = "") -> None:
        """Add per-level and DRAM counters to `stats` under `prefix` (e.g. "core0.")."""
        for lv in self.levels:
            p = f"{prefix}cache.{lv.name}."
            stats.set(p + "hits", lv.hits, f"{lv.name} lookups that hit", "Count")
            stats.set(p + "misses", lv.misses, f"{lv.name} lookups that missed", "Count")
            stats.set(p + "hit_rate", lv.hit_rate, f"{lv.name} hits / lookups", "Ratio")
            stats.set(p + "bytes", lv.bytes, f"bytes filled into {lv.name} from below", "Byte")
        stats.set(prefix + "dram.requests", self.dram_requests, "line transfers to and from DRAM", "Count")
        stats.set(prefix + "dram.bytes", self.dram_bytes, "bytes moved to and from DRAM", "Byte")
        stats.set(prefix + "dram.write_bytes", self.dram_write_bytes, "bytes written back to DRAM", "Byte")
        stats.set(prefix + "dram.busy_cycles", self.dram_busy, "cycles the DRAM bandwidth was in use",
                  "Cycle")
        self.dram.report(stats, prefix)
