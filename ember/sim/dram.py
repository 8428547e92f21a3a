"""DRAM behind the last cache level: a calendar of transfers, either ideal or with banks and rows.

Both engines must agree on every cycle, so each model is defined exactly here and the code below (and
runtime.h's `dram_*` functions) is a direct transcription.  Times are float core cycles.  Requests come
in the engines' call order, which is not time order (an access unit runs ahead of its core), so every
shared resource is a *calendar*: sorted, disjoint, merged intervals [start, end) of booked use, where a
request takes the earliest free interval of the resource's width at or after the time it may start.  A
request later in call order may therefore take a slot earlier in time than one already booked, as a
memory controller's scheduler would let it.

`IdealDram` (`dram.device = "ideal"`): `channels` channels share `bytes_per_cycle` equally; line n is
channel `n % channels`'s, whose bus moves one line at a time for `burst = line_bytes * channels /
bytes_per_cycle` cycles.  A request at `now` takes its channel's earliest free burst at or after
`now`; random and sequential lines are served alike, at full peak.

`BankedDram` (any other `dram.device`, a file in ember/machines/dram/): JEDEC-style devices.

1. Address map.  Line n is channel `n % channels`'s (lines interleave over channels); what is left,
   `m = n // channels`, picks the rank, bank group, bank and row by `address_map`, dividing each field
   off the low end of m in turn (`lines_per_row` lines make a row):
   - `row-bank-rank-column` (Ramulator's RoBaRaCoCh): the column, the rank, the bank group, the bank,
     and the row is what is left.  A sequential stream reads a whole row of one bank.
   - `mop4-xor` (Ramulator's MOP4CLXOR, "minimalist open page"): two bits of column (four lines), the
     rank, the bank group, the bank, the rest of the column, and the row is what is left; then the
     rank, bank group, bank and row, in that order, are each XORed with the next bits of the column
     (lowest first; ranks of one take none).  The XOR takes the column's low bits too, so even
     neighbouring lines land in different bank groups (on DDR5, lines 0, 5, 10 and 15 share a row).
2. Resources, each a calendar of the given width: a channel's data bus (`burst`, no narrower than
   tCCD_S); a rank's activates (`max(tRRD_S, tFAW / 4)`: at most four activates in any tFAW window
   when they come steadily, a little stricter than JEDEC for a burst of four); a bank group's
   activates (tRRD_L) and its column commands (tCCD_L); and a bank's sessions, each from the
   precharge before a row's activate (tRP earlier) to the later of its earliest precharge and tRC
   after the activate less tRP, so sessions are tRC apart.
3. Refresh: every rank of a channel refreshes all its banks together in the windows
   [k tREFI, k tREFI + tRFC), k >= 1.  No command starts inside a window, and a window closes every
   open row (a row opened before a window's start cannot be read after it).
4. Each bank keeps its latest row (open-page policy: a row stays open until a request to another row
   of the bank, or a refresh, closes it), the time of the activate that opened it, and the earliest
   times it may be precharged and activated again.  Only a request that comes earlier in time than
   the latest row's session may be served before it (5, the earlier path); every other request is
   served after what the bank has already been given.
5. A request for `line` at `now`, reading or writing (a write's data follows tCWL after its command,
   a read's tCL):
   - The earlier path, when the bank has a row open and `now` is before its session starts: the first
     gap of the bank's sessions at or after `now` at least tRP + tRAS wide gets a session of its own
     (precharge at the gap's start, moved out of refresh, activate tRP later where the rank's and bank
     group's calendars allow, the column command from tRCD after it), if that session ends (its
     earliest precharge, and tRC after its activate less tRP) before the latest session starts and
     its column command comes before the next refresh window.  It counts as an activate and a
     conflict, and leaves the bank's latest row as it was.  Otherwise the request goes on below.
   - Row hit (its row is open and was opened in the current refresh interval): the column command
     goes at the earliest `c >= max(now, act + tRCD)` where the bank group's column calendar is free
     at `c` and the channel's bus at `c + tCL` (or tCWL), outside refresh windows.  If that `c` falls
     in a later refresh interval than the activate, the row is closed (a miss).
   - Otherwise the bank is activated: at the earliest `a` no earlier than `now`, than tRC after the
     bank's last activate, than the end of a refresh that closed its row, and, if another row is
     open (a conflict), than tRP after a precharge at `p = max(now, earliest precharge)` (moved out
     of refresh windows); where the rank's and bank group's activate calendars are free; and then
     its column command as for a hit from `a + tRCD`.  A column command that would fall past the
     next refresh window moves the activate past that window.
   The bank's earliest precharge becomes the latest of `a + tRAS`, a read's `c + tRTP` and a write's
   `c + tCWL + burst + tWR`.  The request is booked on every calendar, and the model returns the
   data's start on the bus: the free start the bus calendar gave for `c + tCL` (or tCWL), which is
   what the bus is booked from (`(c + tCL) - tCL + tCL` can round an ulp below it).
   Refresh only keeps commands out of its windows: a row's tRAS, tWR or tRTP may run into one.
   Read/write turnaround: a controller drains writes in batches of `write_batch` lines (Ramulator's
   does, between its write buffer's watermarks), and each batch costs the bus two turnarounds, read to
   write (tRTW + tCWL - tCL - tBL) and write to read (tWTR_S + tCL).  A write therefore holds the bus
   for its burst plus its share of those, `(tRTW + tCWL - tBL + tWTR_S) / write_batch`.

Counters: activates, row hits, misses (bank closed) and conflicts (another row open).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from ..machine import Dram, DramDevice
from .stats import Stats


class Calendar:
    """Booked intervals of one resource, sorted, disjoint and merged; every booking is kept (a later call
    may come earlier in time, so none can be known never to matter again)."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []

    def first_free(self, now: float, width: float) -> float:
        """The earliest start >= now of an interval of `width` that overlaps no booking."""
        starts, ends = self.starts, self.ends
        i = bisect.bisect_right(ends, now)  # first interval that ends after `now`
        t = now
        while i < len(starts) and starts[i] < t + width:
            t = max(t, ends[i])
            i += 1
        return t

    def take(self, t: float, width: float) -> None:
        """Book [t, t + width), which `first_free` found free; merged with the intervals it touches."""
        starts, ends = self.starts, self.ends
        i = bisect.bisect_right(ends, t)
        if i > 0 and ends[i - 1] == t:
            ends[i - 1] = t + width
            if i < len(starts) and starts[i] == t + width:
                ends[i - 1] = ends[i]
                del starts[i], ends[i]
        elif i < len(starts) and starts[i] == t + width:
            starts[i] = t
        else:
            starts.insert(i, t)
            ends.insert(i, t + width)

    def book(self, now: float, width: float) -> float:
        """Take the earliest free interval at or after `now`; returns its start."""
        t = self.first_free(now, width)
        self.take(t, width)
        return t


class IdealDram:
    """Channels of a bus each and nothing else (module docstring)."""

    def __init__(self, channels: int, burst: float):
        self.channels = channels
        self.burst = burst
        self.buses = [Calendar() for _ in range(channels)]

    def transfer(self, now: float, line: int, write: bool) -> float:
        """The start on the bus of `line`'s transfer, requested at `now`."""
        return self.buses[line % self.channels].book(now, self.burst)

    def reset_counters(self) -> None:
        """Nothing is counted here."""

    def report(self, stats: Stats, prefix: str) -> None:
        """Nothing beyond what MemorySystem counts."""


@dataclass(frozen=True)
class Timing:
    """A device's timings in core cycles (the device file gives them in its own clock, tCK)."""

    burst: float
    cl: float
    cwl: float
    rcd: float
    rp: float
    ras: float
    rc: float
    wr: float
    rtp: float
    ccd_s: float
    ccd_l: float
    rrd_s: float
    rrd_l: float
    faw: float
    refi: float
    rfc: float
    bl: float
    rtw: float
    wtr_s: float

    @classmethod
    def of(cls, device: DramDevice, clock_ghz: float) -> Timing:
        """Device clocks to core cycles: n tCK is n * tck_ps / 1000 ns, times clock_ghz."""
        scale = device.tck_ps / 1000.0 * clock_ghz
        return cls(**{f: getattr(device, f"n{f}") * scale for f in cls.__dataclass_fields__})


class BankedDram:
    """Channels of ranks, bank groups and banks, with rows, refresh and JEDEC timings (module docstring)."""

    def __init__(self, device: DramDevice, channels: int, clock_ghz: float, address_map: str,
                 write_batch: float):
        self.dev = device
        self.t = Timing.of(device, clock_ghz)
        self.channels = channels
        self.mop = address_map == "mop4-xor"
        self.burst = max(self.t.burst, self.t.ccd_s)
        turnaround = self.t.rtw + self.t.cwl - self.t.bl + self.t.wtr_s  # bus time a read-write-read switch loses
        self.write_burst = self.burst + max(turnaround, 0.0) / write_batch
        self.act_width = max(self.t.rrd_s, self.t.faw / 4.0)
        d = device
        self.lines_per_row = d.row_bytes // d.burst_bytes  # validation makes a burst one line
        self.banks = channels * d.ranks * d.bankgroups * d.banks
        self.buses = [Calendar() for _ in range(channels)]
        self.rank_acts = [Calendar() for _ in range(channels * d.ranks)]
        self.group_acts = [Calendar() for _ in range(channels * d.ranks * d.bankgroups)]
        self.group_cols = [Calendar() for _ in range(channels * d.ranks * d.bankgroups)]
        self.sessions = [Calendar() for _ in range(self.banks)]  # each bank's rows, precharge to last use
        self.row = [-1] * self.banks       # open row, -1: closed
        self.act = [0.0] * self.banks      # when the open (or last) row was activated
        self.pre_ok = [0.0] * self.banks   # earliest precharge of the open row
        self.act_ok = [0.0] * self.banks   # earliest next activate (tRC, a refresh that closed the row)
        self.activates = self.hits = self.misses = self.conflicts = 0

    def place(self, line: int) -> tuple[int, int, int, int, int, int]:
        """(channel, rank, bank group, bank, row, column) of a line, each within its parent (module docstring, 1)."""
        d = self.dev
        ch = line % self.channels
        n = line // self.channels
        if self.mop:
            col = n % 4
            n //= 4
        else:
            col = n % self.lines_per_row
            n //= self.lines_per_row
        rank = n % d.ranks
        n //= d.ranks
        group = n % d.bankgroups
        n //= d.bankgroups
        bank = n % d.banks
        n //= d.banks
        if self.mop:
            rest = self.lines_per_row // 4
            col += n % rest * 4
            n //= rest
            x = col
            if d.ranks > 1:
                rank ^= x % d.ranks
                x //= d.ranks
            group ^= x % d.bankgroups
            x //= d.bankgroups
            bank ^= x % d.banks
            x //= d.banks
            n ^= x
        return ch, rank, group, bank, n, col

    def decode(self, line: int) -> tuple[int, int, int, int, int]:
        """(channel, rank, bank group, bank, row) of a line, ranks, groups and banks numbered over the whole
        memory (the calendars' and bank state's indices)."""
        ch, rank, group, bank, row, _ = self.place(line)
        rk = ch * self.dev.ranks + rank
        rg = rk * self.dev.bankgroups + group
        return ch, rk, rg, rg * self.dev.banks + bank, row

    def outside_refresh(self, t: float) -> float:
        """`t`, or the end of the refresh window it falls in."""
        k = math.floor(t / self.t.refi)
        if k >= 1 and t < k * self.t.refi + self.t.rfc:
            return k * self.t.refi + self.t.rfc
        return t

    def refresh_after(self, t: float) -> float:
        """Start of the first refresh window after `t`."""
        return (math.floor(t / self.t.refi) + 1) * self.t.refi

    def precharge_after(self, c: float, write: bool) -> float:
        """The earliest precharge after a column command at `c`: a read's tRTP, a write's data, burst and tWR."""
        tm = self.t
        return c + tm.cwl + self.burst + tm.wr if write else c + tm.rtp

    def close_for_refresh(self, b: int) -> None:
        """A refresh window closed bank `b`'s row: no activate before the window ends."""
        self.row[b] = -1
        self.act_ok[b] = max(self.act_ok[b], self.outside_refresh(self.refresh_after(self.act[b])))

    def column(self, t: float, bus: Calendar, cols: Calendar, delay: float,
               width: float) -> tuple[float, float]:
        """The earliest column command at or after `t` whose bank group and data burst are free, and its data's
        start on the bus (the free start the bus gave: `c + delay` can round an ulp below it)."""
        while True:
            c = self.outside_refresh(t)
            c = cols.first_free(c, self.t.ccd_l)
            d = bus.first_free(c + delay, width)
            if d != c + delay:  # (c + delay) - delay need not be c again
                c = d - delay
            if c == t:
                return c, d
            t = c

    def activate(self, t: float, ranks: Calendar, groups: Calendar) -> float:
        """The earliest activate at or after `t` that its rank's and bank group's calendars allow."""
        while True:
            a = self.outside_refresh(t)
            a = ranks.first_free(a, self.act_width)
            a = groups.first_free(a, self.t.rrd_l)
            if a == t:
                return a
            t = a

    def earlier(self, now: float, b: int, ranks: Calendar, groups: Calendar, bus: Calendar, cols: Calendar,
                delay: float, width: float, write: bool) -> tuple[float, float]:
        """A row opened for this request alone before the bank's latest one (module docstring, 5): its column
        command and its data's start, or (-1, -1) when no gap of the bank's fits it."""
        tm = self.t
        sessions, limit = self.sessions[b], self.act[b] - tm.rp
        g = sessions.first_free(now, tm.rp + tm.ras)
        if g + tm.rp + tm.ras > limit:
            return -1.0, -1.0
        a = self.activate(self.outside_refresh(g) + tm.rp, ranks, groups)
        c, data = self.column(a + tm.rcd, bus, cols, delay, width)
        end = max(a + tm.ras, a + tm.rc - tm.rp, self.precharge_after(c, write))
        if end > limit or c >= self.refresh_after(a) or sessions.first_free(a - tm.rp, end - a + tm.rp) != a - tm.rp:
            return -1.0, -1.0
        ranks.take(a, self.act_width)
        groups.take(a, tm.rrd_l)
        sessions.take(a - tm.rp, end - a + tm.rp)
        self.activates += 1
        self.conflicts += 1
        return c, data

    def transfer(self, now: float, line: int, write: bool) -> float:
        """The start on the bus of `line`'s data, requested at `now` (module docstring, 5)."""
        tm = self.t
        ch, rank, rg, b, row = self.decode(line)
        bus, cols = self.buses[ch], self.group_cols[rg]
        delay, width = (tm.cwl, self.write_burst) if write else (tm.cl, self.burst)
        c = data = -1.0
        if self.row[b] >= 0 and now < self.act[b] - tm.rp:
            c, data = self.earlier(now, b, self.rank_acts[rank], self.group_acts[rg], bus, cols, delay, width, write)
            if c >= 0.0:
                cols.take(c, tm.ccd_l)
                bus.take(data, width)
                return data
        if self.row[b] == row:
            c, data = self.column(max(now, self.act[b] + tm.rcd), bus, cols, delay, width)
            if c >= self.refresh_after(self.act[b]):
                self.close_for_refresh(b)
                c = -1.0
        if c < 0.0:
            if self.row[b] >= 0 and self.refresh_after(self.act[b]) <= max(now, self.act_ok[b]):
                self.close_for_refresh(b)
            start = max(now, self.act_ok[b])
            if self.row[b] >= 0:
                self.conflicts += 1
                p = self.outside_refresh(max(now, self.pre_ok[b]))
                start = max(start, p + tm.rp)
            else:
                self.misses += 1
            while True:
                a = self.activate(start, self.rank_acts[rank], self.group_acts[rg])
                c, data = self.column(a + tm.rcd, bus, cols, delay, width)
                if c < self.refresh_after(a):
                    break
                start = self.outside_refresh(self.refresh_after(a))
            self.rank_acts[rank].take(a, self.act_width)
            self.group_acts[rg].take(a, tm.rrd_l)
            self.activates += 1
            self.row[b], self.act[b], self.pre_ok[b] = row, a, a + tm.ras
            self.act_ok[b] = a + tm.rc
        else:
            self.hits += 1
        cols.take(c, tm.ccd_l)
        bus.take(data, width)
        done = self.precharge_after(c, write)
        if done > self.pre_ok[b]:
            self.pre_ok[b] = done
        sessions, start = self.sessions[b], self.act[b] - tm.rp  # the latest session, from its precharge
        end = max(self.pre_ok[b], self.act[b] + tm.rc - tm.rp)  # at least tRC from its activate to the next one
        if sessions.ends and sessions.ends[-1] > start:
            sessions.ends[-1] = max(sessions.ends[-1], end)
        else:
            sessions.take(start, end - start)
        return data

    def reset_counters(self) -> None:
        """Count from zero (the next core of a multi-core run, which shares this DRAM, counts its own)."""
        self.activates = self.hits = self.misses = self.conflicts = 0

    def report(self, stats: Stats, prefix: str) -> None:
        """Row-buffer counters."""
        report_banks(stats, prefix, self.activates, self.hits, self.misses, self.conflicts)


def report_banks(stats: Stats, prefix: str, activates: int, hits: int, misses: int, conflicts: int) -> None:
    """The banked DRAM's counters as statistics (both engines report through this)."""
    p = prefix + "dram."
    stats.set(p + "activates", activates, "row activations (each followed by a precharge)", "Count")
    stats.set(p + "row_hits", hits, "requests whose row was open", "Count")
    stats.set(p + "row_misses", misses, "requests to a bank with no row open", "Count")
    stats.set(p + "row_conflicts", conflicts, "requests that closed another row of their bank", "Count")


def dram_of(d: Dram, clock_ghz: float, line_bytes: int) -> IdealDram | BankedDram:
    """The DRAM model a machine's `dram` section asks for."""
    device = d.device_spec
    if device is None:
        return IdealDram(d.channels, line_bytes * d.channels / d.bytes_per_cycle)
    return BankedDram(device, d.channels, clock_ghz, d.address_map, d.write_batch)
