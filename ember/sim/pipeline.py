"""The execute unit's pipeline: when each instruction dispatches, issues, completes and retires.

The core is out of order, of the Ice Lake-SP class (machines/default.toml gives each number's
source).  Both engines transcribe this definition; times are float cycles.

- **Dispatch** is in program order, at most `issue_width` instructions a cycle: instruction i
  dispatches at d_i = max(fe, the retirement of instruction i - rob_entries, and for a store the
  commit of the store `store_buffer` stores earlier); then fe = d_i + 1 / issue_width.  `fe` is
  the front end's clock.
- **Issue**: e_i is the first time >= max(d_i, its sources' ready times) at which its pipe group
  has room.  A group of reciprocal throughput rt takes 1/rt instructions in each whole cycle
  [k, k + 1) when rt < 1, or one instruction every rt cycles, each holding the pipe for rt whole
  cycles, when rt >= 1.  If cycle floor(t) has no room, the instruction issues at the start of the
  first later cycle that has.  (Ports are booked by time, so an instruction waiting for a slow load
  does not hold back younger independent ones.)
- **Complete**: c_i = e_i + the class's latency; loads complete when the cache model says, pops a
  queue latency after they issue.  Its destination register is ready at c_i.
- **Retire** is in order: r_i = max(r_{i-1}, c_i).
- **Memory**: a load or store line that is not in L1 needs one of `miss_slots` fill buffers: it
  takes the one free earliest and leaves at max(issue, that time); the slot is busy until the line
  arrives.  A load overlapping a store still in the store buffer completes no earlier than an L1
  hit after that store's data (store-to-load forwarding).  A store issues when its address and
  data are ready, fetches its line then (write-allocate), and is committed to L1 in order at
  max(its retirement, the previous commit, its line's arrival), which frees its entry.
- **Stalls**: every cycle the front end waits is charged to why: the reorder buffer is full behind
  an instruction of some category (`load`, `pop`, `token`, `compute`, `store`), the store buffer
  is full (`store`), a mispredicted dispatch (`mispredict`), or the access unit (`token`).  So
  instructions / issue_width + stalls + host-op cycles = cycles.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from ..machine import Machine

CATEGORIES = ("compute", "load", "pop", "token", "store", "mispredict")


class Ports:
    """One pipe group's bookings: whole cycle -> instructions issued in it.

    A cycle that is full stays full, so `skip` remembers, for full cycles met in a search, a later cycle
    that every cycle before it is full up to: a throughput-bound loop whose bookings run far ahead of
    the front end finds its cycle without walking every full one again (same answer, less time)."""

    def __init__(self, per_cycle: int, hold: int):
        self.per_cycle = per_cycle
        self.hold = hold
        self.used: dict[int, int] = {}
        self.skip: dict[int, int] = {}  # full cycle -> a later cycle; all cycles in between are full
        self.count = 0
        self.prune_at = 8192  # pruning scans every booking: done when the dict has doubled since the last time

    def free_from(self, k: int) -> int:
        """The first cycle >= k that has room."""
        used, skip, full = self.used, self.skip, self.per_cycle
        passed = []
        while used.get(k, 0) >= full:
            passed.append(k)
            k = skip.get(k, k + 1)
        for c in passed:
            skip[c] = k
        return k

    def book(self, t: float, floor: int) -> float:
        """The issue time of an instruction ready at `t` (see the module docstring); `floor` is a cycle no
        later booking can precede (the front end's), so bookings before it are dropped now and then."""
        used = self.used
        k = self.free_from(math.floor(t))
        while (busy := next((k + j for j in range(1, self.hold) if used.get(k + j, 0) >= self.per_cycle),
                            None)) is not None:
            k = self.free_from(busy + 1)
        for j in range(self.hold):
            used[k + j] = used.get(k + j, 0) + 1
        self.count += 1
        if len(used) > self.prune_at:
            for old in [c for c in used if c < floor]:
                del used[old]
            for old in [c for c in self.skip if c < floor]:
                del self.skip[old]
            self.prune_at = max(8192, 2 * len(used))
        return t if k == math.floor(t) else float(k)


class Pipeline:
    """Front end, reorder buffer, pipe groups, fill buffers and store buffer of one core."""

    def __init__(self, machine: Machine):
        ex = machine.execute
        self.slot = 1.0 / ex.issue_width
        self.rob = ex.rob_entries
        self.sb_size = ex.store_buffer
        self.ports = {g: Ports(*ex.pipes(g)) for g in ex.GROUPS}
        self.fe = 0.0
        self.d = 0.0  # the last dispatch time: no instruction can issue before it
        self.retired: deque[tuple[float, str]] = deque()  # (retire time, category) of the last rob_entries
        self.last_retire = 0.0
        self.last_category = "compute"
        self.miss_free = [0.0] * ex.miss_slots
        self.sb: deque[tuple[int, int, float, float]] = deque()  # (lo, hi, data ready, commit) per store
        self.last_commit = 0.0
        self.instructions = 0
        self.stalls = dict.fromkeys(CATEGORIES, 0.0)
        self.trace: Any = None  # trace.Events when the run is traced

    def wait(self, t: float, category: str) -> None:
        """The front end cannot go on before `t`; the wait is charged to `category`."""
        if t > self.fe:
            if self.trace is not None:
                self.trace.wait(category, self.fe, t)
            self.stalls[category] += t - self.fe
            self.fe = t

    def dispatch(self, stores: int = 0) -> float:
        """Dispatch the next instruction (taking `stores` store-buffer entries); returns d_i."""
        if len(self.retired) == self.rob:
            t, category = self.retired.popleft()
            self.wait(t, category)
        need = min(len(self.sb), len(self.sb) + stores - self.sb_size)  # a scatter may want more than it has
        if need > 0:
            self.wait(self.sb[need - 1][3], "store")
            for _ in range(need):
                self.sb.popleft()
        d = self.d = self.fe
        self.fe = d + self.slot
        self.instructions += 1
        return d

    def issue(self, group: str, t: float) -> float:
        """e_i of an instruction of `group` whose operands are ready at `t` (>= its dispatch)."""
        return self.ports[group].book(t, math.floor(self.d))

    def retire(self, c: float, category: str) -> float:
        """Retire the instruction completing at `c`; returns r_i."""
        if c > self.last_retire:
            self.last_retire = c
            self.last_category = category
        self.retired.append((self.last_retire, self.last_category))
        return self.last_retire

    def miss_slot(self, t: float) -> tuple[int, float]:
        """The fill buffer free earliest (lowest index on a tie) and when a request at `t` can leave with it."""
        k = min(range(len(self.miss_free)), key=self.miss_free.__getitem__)
        return k, max(t, self.miss_free[k])

    def forwarded(self, lo: int, hi: int) -> float | None:
        """Data time of the youngest store in the store buffer overlapping [lo, hi), if any."""
        for s_lo, s_hi, data, _ in reversed(self.sb):
            if s_lo < hi and lo < s_hi:
                return data
        return None

    def commit(self, lo: int, hi: int, data: float, retire: float, line_ready: float) -> None:
        """A store's entry: committed in order once retired and its line has arrived."""
        self.last_commit = max(retire, self.last_commit, line_ready)
        if len(self.sb) == self.sb_size:  # only a scatter wider than the whole buffer gets here
            self.sb.popleft()
        self.sb.append((lo, hi, data, self.last_commit))

    def next_uop(self, prev: float, category: str, ready: float) -> float:
        """The uop before, done at `prev`, retires; the next uop of the same instruction dispatches now and
        may issue once `ready`: returns that time."""
        self.retire(prev, category)
        return max(self.dispatch(), ready)

    def drain(self) -> None:
        """The front end waits until every dispatched instruction has retired and every store is in L1."""
        self.wait(self.last_retire, self.last_category)
        self.wait(self.last_commit, "store")
