"""The cache model against its written definition: hand-derived counts and times, an independent model."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.ir.diagnostics import EmberError
from ember.machine import CacheConfig, Dram, load_machine
from ember.sim.access import AccessUnit
from ember.sim.cache import CacheLevel, MemorySystem
from ember.sim.stats import Stats

# The `small` preset: l1 = 1 KiB, 2-way, 8 sets, latency 2; l2 = 4 KiB, 4-way, 16 sets, latency 6;
# DRAM latency 40, 8 bytes/cycle, so one 64-byte line occupies the bucket for 8 cycles.
SMALL = load_machine("small")
LINE = 64


def small() -> MemorySystem:
    """A fresh memory system of the small preset."""
    return MemorySystem.from_machine(SMALL)


class RefMemory:
    """An independent transcription of the definition: lists with the most recent line last."""

    def __init__(self, caches: list[CacheConfig], dram: Dram):
        self.cfg = caches
        self.sets: list[list[list[tuple[int, float]]]] = [
            [[] for _ in range(c.size_bytes // (c.ways * c.line_bytes))] for c in caches
        ]
        self.dram = dram
        self.booked: list[list[float]] = [[] for _ in range(dram.channels)]  # starts, per channel
        self.hits = [0] * len(caches)
        self.misses = [0] * len(caches)

    def access(self, addr: int, t: float, entry: str) -> float:
        line = addr // self.cfg[0].line_bytes
        k0 = [c.name for c in self.cfg].index(entry)
        now = t
        filled: list[int] = []
        done = None
        for k in range(k0, len(self.cfg)):
            now += self.cfg[k].latency
            s = self.sets[k][line % len(self.sets[k])]
            found = [e for e in s if e[0] == line]
            if found:
                s.remove(found[0])
                s.append(found[0])
                self.hits[k] += 1
                done = max(now, found[0][1])
                break
            self.misses[k] += 1
            filled.append(k)
        if done is None:  # earliest free slot of the line's channel at or after `now`, by brute force
            xfer = self.cfg[0].line_bytes * self.dram.channels / self.dram.bytes_per_cycle
            booked = self.booked[line % self.dram.channels]
            start = now
            while any(b < start + xfer and start < b + xfer for b in booked):
                start = min(b + xfer for b in booked if b < start + xfer and start < b + xfer)
            booked.append(start)
            done = start + self.dram.latency + xfer
        for k in filled:
            s = self.sets[k][line % len(self.sets[k])]
            if len(s) == self.cfg[k].ways:
                s.pop(0)
            s.append((line, done))
        return done


def test_lru_eviction_order_in_a_two_way_set() -> None:
    lv = CacheLevel("x", 2 * LINE * 4, 2, LINE, 1.0)  # 4 sets of 2 ways
    a, b, c = 0, 4, 8  # all in set 0
    assert lv.fill(a, 0.0) is None
    assert lv.fill(b, 0.0) is None
    assert lv.lookup(a) == 0.0  # a becomes most recent: b is now LRU
    assert lv.set_lines(0) == [b, a]
    assert lv.fill(c, 1.0) == b
    assert lv.set_lines(0) == [a, c]
    assert lv.lookup(b) is None
    assert lv.fill(b, 2.0) == a
    assert lv.set_lines(0) == [c, b]
    assert lv.ready_time(b) == 2.0 and not lv.contains(a)


def test_lru_matches_independent_model_on_random_trace() -> None:
    cfg = [CacheConfig("l1", 2 * LINE * 2, 2, LINE, 1.0)]  # 2 sets of 2 ways: lots of evictions
    dram = Dram(10.0, 64.0)
    mem, ref = MemorySystem(cfg, dram), RefMemory(cfg, dram)
    rng = random.Random(7)
    for i in range(500):
        addr = rng.randrange(8) * LINE + rng.randrange(LINE)
        assert mem.access(addr, float(i), False, "l1") == ref.access(addr, float(i), "l1")
        for s in range(2):
            assert mem.levels[0].set_lines(s) == [ln for ln, _ in ref.sets[0][s]]
    assert (mem.levels[0].hits, mem.levels[0].misses) == (ref.hits[0], ref.misses[0])


def test_strided_sequential_pass_fits_l1() -> None:
    # 16 consecutive lines = exactly L1's 16 lines (2 per set): pass 1 misses all (and L2 too),
    # pass 2 hits all in L1.
    mem = small()
    for _ in range(2):
        for i in range(16):
            mem.access(i * LINE + 4, 0.0, False, "l1")
    l1, l2 = mem.levels
    assert (l1.hits, l1.misses, l2.hits, l2.misses) == (16, 16, 0, 16)
    assert mem.dram_requests == 16 and mem.dram_bytes == 16 * LINE
    assert l1.bytes == 16 * LINE and l2.bytes == 16 * LINE


def test_strided_pattern_thrashes_l1_but_fits_l2() -> None:
    # Stride 128 bytes over 2 KiB: lines 0, 2, ..., 30. L1 set = line % 8 -> sets 0, 2, 4, 6 each get 4
    # lines cycling through 2 ways, so LRU misses every time, both passes: 32 misses, 0 hits.
    # L2 set = line % 16 -> sets 0, 2, ..., 14 each get 2 lines in 4 ways: pass 1 misses 16, pass 2 hits 16.
    mem = small()
    for _ in range(2):
        for i in range(16):
            mem.access(i * 128, 0.0, False, "l1")
    l1, l2 = mem.levels
    assert (l1.hits, l1.misses) == (0, 32)
    assert (l2.hits, l2.misses) == (16, 16)
    assert mem.dram_requests == 16


def test_three_lines_in_one_set_thrash_two_ways() -> None:
    # Stride 512 bytes = 8 lines: lines 0, 8, 16 all map to L1 set 0 (2 ways): A B C A B C misses 6 times.
    # In L2 they map to sets 0, 8, 0 (4 ways): 3 misses, then 3 hits.
    mem = small()
    for _ in range(2):
        for a in (0, 512, 1024):
            mem.access(a, 0.0, True, "l1")
    l1, l2 = mem.levels
    assert (l1.hits, l1.misses, l2.hits, l2.misses) == (0, 6, 3, 3)


def test_dram_token_bucket_back_to_back() -> None:
    # From l1: now = 0 + 2 + 6 = 8 at DRAM; xfer = 64 / 8 = 8.  Miss i starts at max(8, 8 + 8i) and
    # completes at start + 40 + 8 = 56 + 8i.
    mem = small()
    n = 6
    done = [mem.access(i * LINE, 0.0, False, "l1") for i in range(n)]
    assert done == [56.0 + 8.0 * i for i in range(n)]
    assert mem.dram_free == 8.0 + 8.0 * n
    assert mem.dram_busy == 8.0 * n and mem.dram_bytes == n * LINE


def test_dram_channels_serve_their_own_lines() -> None:
    # Two channels of 4 B a cycle each: a line takes 64 / 4 = 16 cycles on its channel (line n on channel
    # n % 2).  From l1 each miss reaches DRAM at 8 and completes at start + 40 + 16.  Lines 0, 1, 2, 3:
    # channels 0, 1, 0, 1, so 0 and 1 start at 8 together, 2 and 3 at 24.  Lines 0, 2, 4 share channel 0
    # and queue behind each other.  Busy cycles count the whole DRAM's: 64 / 8 = 8 a line.
    machine = SMALL.with_overrides(["dram.channels=2"])
    mem = MemorySystem.from_machine(machine)
    assert [mem.access(n * LINE, 0.0, False, "l1") for n in range(4)] == [64.0, 64.0, 80.0, 80.0]
    assert mem.dram_free == 40.0 and mem.dram_busy == 4 * 8.0
    mem = MemorySystem.from_machine(machine)
    assert [mem.access(n * LINE, 0.0, False, "l1") for n in (0, 2, 4)] == [64.0, 80.0, 96.0]


def test_dram_channels_match_independent_model_on_random_trace() -> None:
    """Three channels, requests out of time order (as the access unit runs ahead of the core)."""
    cfg = [CacheConfig("l1", 2 * LINE * 2, 2, LINE, 1.0)]
    dram = Dram(10.0, 48.0, 3)
    mem, ref = MemorySystem(cfg, dram), RefMemory(cfg, dram)
    rng = random.Random(11)
    for _ in range(400):
        addr, t = rng.randrange(40) * LINE, float(rng.randrange(300))
        assert mem.access(addr, t, False, "l1") == ref.access(addr, t, "l1")


def test_dram_token_bucket_idle_gaps_and_entry_level() -> None:
    # Entering at l2: now = t + 6.  Requests 20 cycles apart never queue: done = t + 6 + 40 + 8.
    mem = small()
    done = [mem.access(i * LINE, 20.0 * i, False, "l2") for i in range(4)]
    assert done == [54.0 + 20.0 * i for i in range(4)]
    assert mem.level("l1").hits + mem.level("l1").misses == 0
    # A request made later but reaching DRAM earlier in time takes the first gap before the others:
    # bookings are [6, 14), [26, 34), [46, 54), [66, 74); at now = 6 the first gap is [14, 22).
    assert mem.access(100 * LINE, 0.0, False, "l2") == 14.0 + 40.0 + 8.0
    # A request that overlaps a booking waits for its end: now = 20 + 6 = 26 is taken -> [34, 42).
    assert mem.access(101 * LINE, 20.0, False, "l2") == 34.0 + 40.0 + 8.0


def test_hit_on_line_in_flight_waits_for_ready() -> None:
    mem = small()
    assert mem.access(0, 0.0, False, "l2") == 54.0  # l2 filled with ready = 54
    # From l1 at t=1: l1 miss (now 3), l2 hit (now 9) on a line arriving at 54.
    assert mem.access(0, 1.0, False, "l1") == 54.0
    assert mem.level("l2").hits == 1 and mem.level("l1").misses == 1
    assert mem.access(8, 10.0, False, "l1") == 54.0  # l1 hit (now 12), same line, still in flight
    assert mem.access(0, 100.0, False, "l1") == 102.0  # arrived: plain l1 hit latency
    assert mem.dram_requests == 1


def test_unknown_entry_level_is_an_error() -> None:
    with pytest.raises(EmberError, match="unknown cache level 'l3'.*l1, l2"):
        small().access(0, 0.0, False, "l3")


def test_access_range_touches_every_line() -> None:
    mem = small()
    # 64 bytes starting mid-line touch 2 lines: completes when the later DRAM transfer does.
    assert mem.access_range(32, 64, 0.0, False, "l1") == 64.0
    assert mem.level("l1").misses == 2


def test_report_names_and_values() -> None:
    mem = small()
    mem.access(0, 0.0, False, "l1")
    mem.access(0, 0.0, False, "l1")
    s = Stats()
    mem.report(s, "core0.")
    assert s["core0.cache.l1.hits"] == 1 and s["core0.cache.l1.misses"] == 1
    assert s["core0.cache.l1.hit_rate"] == 0.5 and s["core0.cache.l2.bytes"] == LINE
    assert s["core0.dram.bytes"] == LINE and s["core0.dram.busy_cycles"] == 8.0


@pytest.mark.parametrize(("size", "ways", "line"), [(1000, 2, 64), (4096, 0, 64), (4096, -1, 64), (4096, 4, 0),
                                                    (4096, -4, -16), (0, 4, 64)])
def test_bad_geometry_is_an_error(size: int, ways: int, line: int) -> None:
    """Built directly (the library's API, past the machine file's checks), a level with no ways, no line or
    no size is refused by name, each on its own: not a division by zero, nor a level of -64 sets."""
    with pytest.raises(EmberError, match="cache level 'x'.*multiple of ways"):
        CacheLevel("x", size, ways, line, 1.0)


_ops = st.lists(
    st.tuples(st.integers(0, 63), st.integers(0, 30), st.booleans(), st.sampled_from(["l1", "l2"])),
    min_size=1, max_size=120,
)


@settings(max_examples=60, deadline=None)
@given(_ops, st.sampled_from([1, 2, 4, 16]))
def test_property_capacity_latency_and_agreement(ops: list[tuple[int, int, bool, str]], l1_ways: int) -> None:
    machine = SMALL.set("caches.l1.ways", str(l1_ways))
    mem = MemorySystem.from_machine(machine)
    ref = RefMemory(list(machine.caches), machine.dram)
    lat = {c.name: c.latency for c in machine.caches}
    t = 0.0
    for line, dt, write, entry in ops:
        t += dt
        addr = line * 96  # lines spread over sets, some addresses mid-line
        before = [lv.hits for lv in mem.levels]
        done = mem.access(addr, t, write, entry)
        assert done == ref.access(addr, t, entry)
        hit = [i for i, lv in enumerate(mem.levels) if lv.hits != before[i]]
        first = 0 if entry == "l1" else 1
        path = sum(c.latency for c in machine.caches[first:(hit[0] + 1 if hit else None)])
        assert done >= t + path
        if hit:
            assert done >= t + lat[entry]
        else:
            assert done >= t + path + SMALL.dram.latency + LINE / SMALL.dram.bytes_per_cycle
        for lv in mem.levels:
            assert all(len(s) <= lv.ways for s in lv.sets)


def test_dirty_lines_are_written_back_through_every_level() -> None:
    """A line written at L1 and evicted goes to L2 (dirty there); evicted from the last level it goes to DRAM,
    counted in DRAM bytes. Clean lines leave without a write."""
    mem = small()
    mem.access(0, 0.0, True, "l1")  # line 0: L1 set 0, L2 set 0, dirty in L1
    reads = mem.dram_requests
    for line in (8, 16):  # two more lines of L1 set 0 evict line 0 into L2 (which holds it): no DRAM write
        mem.access(line * LINE, 10.0, False, "l1")
    assert not mem.level("l1").contains(0) and 0 in mem.level("l2").dirty
    assert mem.dram_write_bytes == 0
    for line in (32, 48, 64, 80):  # four more lines of L2 set 0 evict it from the last level
        mem.access(line * LINE, 20.0, False, "l1")
    assert not mem.level("l2").contains(0)
    assert mem.dram_write_bytes == LINE
    assert mem.dram_requests == reads + 6 + 1 and mem.dram_bytes == (reads + 7) * LINE
    assert mem.busy_until >= 20.0 + 8.0


def test_placed_lines_live_in_the_queue_level_not_in_l1() -> None:
    """The access unit's output queue is in its cache level: placing a buffer drops the lines from L1 and
    makes them arrive in L2 at the buffer's ready time, so the core's next load misses L1 and waits for it."""
    mem = small()
    mem.access(0, 0.0, False, "l1")
    assert mem.level("l1").contains(0)
    mem.place(0, 2 * LINE, "l2", 500.0, 100.0)
    assert not mem.level("l1").contains(0) and not mem.level("l1").contains(1)
    assert mem.level("l2").ready_time(0) == 500.0 and mem.level("l2").ready_time(1) == 500.0
    misses = mem.level("l1").misses
    assert mem.access(0, 200.0, False, "l1") == 500.0
    assert mem.level("l1").misses == misses + 1


def test_a_request_slot_frees_when_its_request_completes_not_in_order() -> None:
    """At most `access.outstanding` requests are in flight (docs/architecture.md, the access unit): a
    request waits for the slot that frees first, so an L2 hit sent after a DRAM miss lets the next
    request go when the hit is back, not when the miss is."""
    unit = AccessUnit.__new__(AccessUnit)
    unit.slots, unit.outstanding = [], 2
    assert unit.slot_free(0.0) == 0.0  # a slot is free
    unit.take_slot(222.0)  # a DRAM miss
    unit.take_slot(16.0)  # then a hit
    assert unit.slot_free(5.0) == 16.0  # the hit's slot, though the miss was sent first
    unit.take_slot(40.0)
    assert unit.slot_free(5.0) == 40.0 and unit.slot_free(300.0) == 300.0
