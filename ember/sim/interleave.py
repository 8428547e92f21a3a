"""Interleaved multi-core runs: the yardstick for the rounds of multicore.py (rounds.py).

Definition: every core runs its program in its own thread on the reference engine, from cycle 0, with
its own private levels; the last cache level (with real ready times) and the DRAM bookings are one
object all cores use.  Every call on the memory system (`access`, `place`) waits until every live
core has a call pending, and then the pending call with the smallest (time, core) goes first.  A
core's own calls are not in time order (its access unit runs ahead of its execute unit), so this is
an order among the cores' next calls, not a global time order; it is deterministic, and as fine as an
order of the cores' calls can be.

It is slow (a thread switch a memory call) and exists to measure how far the rounds land from it
(`tools/multicore_error.py`, docs/architecture.md *Multi-core*), not for production runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..machine import Machine
from . import reference
from .cache import CacheLevel, MemorySystem
from .multicore import combine
from .stats import Stats


class Turns:
    """Grants memory calls in (time, core) order among the pending calls of every live core."""

    def __init__(self, cores: int):
        self.cv = threading.Condition()
        self.pending: dict[int, float] = {}
        self.live = set(range(cores))

    def take(self, core: int, t: float) -> None:
        with self.cv:
            self.pending[core] = t
            self.cv.notify_all()
            while not (len(self.pending) == len(self.live)
                       and min((v, c) for c, v in self.pending.items())[1] == core):
                self.cv.wait()
            del self.pending[core]

    def leave(self, core: int) -> None:
        with self.cv:
            self.live.discard(core)
            self.pending.pop(core, None)
            self.cv.notify_all()


class Shared:
    """One core's view of the shared state; `attach` is what engine.simulate calls on its memory system."""

    def __init__(self, core: int, turns: Turns, common: dict[str, Any]):
        self.core, self.turns, self.common = core, turns, common
        self.own = {"hits": 0, "misses": 0, "bytes": 0}  # this core's share of the shared level's counters

    def attach(self, mem: MemorySystem) -> None:
        c = self.common
        if "level" not in c:
            c["level"], c["dram"] = mem.levels[-1], mem.dram
        mem.levels[-1] = c["level"]
        mem.dram = c["dram"]
        mem.access = self._in_turn(mem.access, 1)  # type: ignore[method-assign]
        mem.place = self._in_turn(mem.place, 4)  # type: ignore[method-assign]

    def _in_turn(self, call: Callable[..., Any], t_arg: int) -> Callable[..., Any]:
        level: CacheLevel = self.common["level"]

        def wrapped(*args: Any) -> Any:
            self.turns.take(self.core, args[t_arg])
            before = (level.hits, level.misses, level.bytes)
            out = call(*args)
            for k, b in zip(("hits", "misses", "bytes"), before):
                self.own[k] += getattr(level, k) - b
            return out
        return wrapped


def simulate_interleaved(programs: Sequence[Any], slices: Sequence[dict[str, np.ndarray]], machine: Machine,
                         max_cycles: float | None = None) -> tuple[list[dict[str, np.ndarray]], Stats]:
    """Every core in its own thread, memory calls interleaved as the module docstring defines; the totals
    and `core<k>.*` statistics as multicore.simulate_cores gives them."""
    n = len(slices)
    turns, common = Turns(n), {}
    views = [Shared(k, turns, common) for k in range(n)]
    results: list[Any] = [None] * n

    def run(k: int) -> None:
        try:
            results[k] = reference.simulate(programs[k], slices[k], machine, max_cycles, views[k])  # type: ignore[arg-type]
        except BaseException as e:  # noqa: BLE001  (re-raised in the caller's thread)
            results[k] = e
        finally:
            turns.leave(k)

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for r in results:
        if isinstance(r, BaseException):
            raise r
    last = machine.caches[-1].name
    per_core = []
    for (_, st), view in zip(results, views):
        for k, v in view.own.items():
            st.set(f"cache.{last}.{k}", v)
        looked = view.own["hits"] + view.own["misses"]
        st.set(f"cache.{last}.hit_rate", view.own["hits"] / looked if looked else 0.0)
        per_core.append(st)
    return [out for out, _ in results], combine(per_core, machine)
