"""Cores that run at the same time: the order in which the cores of a multi-core run take turns (multicore.py).

Definition (both engines): every core runs in its own thread, one at a time, in rounds of QUANTUM simulated
cycles.  A core holds the turn until it calls on the shared memory (an access, a placement, a write around the
caches) at a time at or past the end of its round; then it waits, wanting the round that time falls in, and the
turn goes to the waiting core that wants the earliest round, in that round's order: round r starts with core
r mod n and goes round the cores, so no core is always first at the DRAM.  A core that halts leaves the rotation.

So the shared last level and the DRAM see the cores' requests a round at a time, every core's round r before
any core's round r + 1: a core cannot book DRAM far ahead of the others, as it could when the cores ran one
after another.  Inside a round a core's calls go first-come in its turn; a core's own calls are not in time
order (its access unit runs ahead of its execute unit), so this is an order among rounds, not a global time
order.  It is deterministic: the turns depend only on simulated times.  `interleave.py`, which orders every
call among the cores, is its yardstick (tools/multicore_error.py, docs/architecture.md *Multi-core*).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

QUANTUM = 128.0  # cycles a round lasts: about a DRAM access's latency (its error and its cost: docs/architecture.md)


class Rounds:
    """The turns of `cores` cores in rounds of `quantum` cycles (module docstring)."""

    def __init__(self, cores: int, quantum: float = QUANTUM):
        self.n, self.quantum = cores, quantum
        self.wants = [0] * cores  # the round each core waits for (the running core's: its current one)
        self.live = set(range(cores))
        self.turn = [threading.Event() for _ in range(cores)]
        self.stopping = False  # Ctrl-C: every core stops at its next cycle-limit check, in its turn
        self._stoppers: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def on_stop(self, stop: Callable[[], None]) -> None:
        """Call `stop` (which makes one core's engine stop at its next cycle-limit check) when the run is stopped,
        or now if it already is."""
        with self._lock:
            self._stoppers.append(stop)
            if not self.stopping:
                return
        stop()

    def stop(self) -> None:
        """Stop every core (Ctrl-C in multicore.simulate_cores).  The turns go on as before, so no two cores touch
        the shared memory at once while they wind down: each stops soon after its turn comes."""
        with self._lock:
            self.stopping = True
            stoppers = list(self._stoppers)
        for stop in stoppers:
            stop()

    def _next(self) -> int:
        return min(self.live, key=lambda k: (self.wants[k], (k - self.wants[k]) % self.n))

    def begin(self) -> None:
        """Give the first turn (round 0 starts with core 0)."""
        self.turn[self._next()].set()

    def wait(self, core: int) -> float:
        """Block until it is `core`'s turn; the end of the round it runs in."""
        self.turn[core].wait()
        self.turn[core].clear()
        return (self.wants[core] + 1) * self.quantum

    def sync(self, core: int, t: float) -> float:
        """`core` called at time t, at or past the end of its round: let the cores whose turn comes first run;
        the end of the round `core` runs in next."""
        self.wants[core] = int(t // self.quantum) if math.isfinite(t) else self.wants[core] + 1
        nxt = self._next()
        if nxt == core:
            return (self.wants[core] + 1) * self.quantum
        self.turn[nxt].set()
        return self.wait(core)

    def leave(self, core: int) -> None:
        """`core` halted, or stopped on an error (the others still take their turns, one at a time: they share
        state that only one may touch at once)."""
        self.live.discard(core)
        if self.live:
            self.turn[self._next()].set()


class Turn:
    """One core's place in the rounds: the end of the round it runs in, and the check before each call on the
    shared memory (the fast engine keeps the end in C, boundary.Mem.q_end, and calls `rounds.sync` itself)."""

    def __init__(self, rounds: Rounds, core: int, end: float):
        self.rounds, self.core, self.end = rounds, core, end

    def at(self, t: float) -> None:
        if t >= self.end:
            self.end = self.rounds.sync(self.core, t)
