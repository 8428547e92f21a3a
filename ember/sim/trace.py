"""Timelines of a run: the events both engines record, and the Chrome Trace Event JSON made of them.

Each engine records at the same points of the timing model (the reference through `Events.add`, the fast
engine through runtime.h's tr_add into the same arrays, boundary.Trace), so two runs of one program write
identical files.  What is recorded (docs/trace.md):

- the access unit: each `run` of an access program, and each wait of a push on a full output queue;
- the output queue's bytes held, at each push where they changed (a counter);
- the core: each callback, from its dispatch to its last instruction's dispatch, and each host op;
- the front end: every span it waits, named by the cause the statistics charge it to;
- each mispredicted branch and dispatch jump, at the cycle it resolves;
- each DRAM channel's data bus, busy with a read or a write burst.

Bounded: events wholly outside the window are not kept, and once `limit` events are kept the rest are counted
(`dropped`), not kept.  Back-to-back waits and bursts of one kind merge into one span.  Events are kept in the
order the run produces them, which follows simulated time loosely (the access unit runs ahead of the core).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..backend.dae import Program
from ..ir.diagnostics import EmberError
from ..machine import Machine
from .pipeline import CATEGORIES

DEFAULT_LIMIT = 200_000
MAX_LIMIT = 50_000_000


@dataclass(frozen=True)
class Kind:
    """One kind of event: `shape` span, instant or counter; `label` what the timeline calls it."""

    name: str
    shape: str
    label: str


WAIT_LABELS = {"compute": "wait: compute (latency, busy pipes)", "load": "wait: load", "pop": "wait: operand pop",
               "token": "wait: starved (token)", "store": "wait: store buffer",
               "mispredict": "wait: mispredict recovery"}
# runtime.h's TK_* are in this order, the waits in CATEGORIES' order (pipe_wait adds the category to TK_WAIT)
KINDS = (Kind("run", "span", "run"), Kind("queue_full", "span", "stalled: output queue full"),
         Kind("queue_bytes", "counter", "output queue bytes"), Kind("callback", "span", "callback"),
         Kind("host", "span", "host"), Kind("branch_miss", "instant", "branch mispredicted"),
         Kind("dispatch_miss", "instant", "dispatch jump mispredicted"),
         *(Kind(f"wait_{c}", "span", WAIT_LABELS[c]) for c in CATEGORIES),
         Kind("dram_read", "span", "read"), Kind("dram_write", "span", "write"))
K = {k.name: n for n, k in enumerate(KINDS)}
WAIT_OF = {c: K[f"wait_{c}"] for c in CATEGORIES}
# tracks of one core, then one per DRAM channel (runtime.h's TRACK_*)
ACCESS, QUEUE, CORE, WAITS, DRAM = range(5)
THREADS = {ACCESS: "access unit", CORE: "execute: callbacks, host ops, mispredictions",
           WAITS: "execute: front-end waits"}


def parse_window(text: str | None) -> tuple[float, float]:
    """`START:END` in cycles (either side may be empty) as (lo, hi)."""
    if text is None:
        return 0.0, math.inf
    lo, sep, hi = text.partition(":")
    try:
        window = (float(lo) if lo.strip() else 0.0, float(hi) if hi.strip() else math.inf)
    except ValueError:
        window = (math.nan, math.nan)
    if not sep or math.isnan(window[0]) or math.isnan(window[1]) or window[0] < 0 or window[1] <= window[0]:
        raise EmberError(f"--trace-window '{text}': give START:END in cycles with 0 <= START < END "
                         "(either may be left out: '100000:' or ':5e6')")
    return window


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise EmberError(f"--trace-limit {limit}: give a number of events from 1 to {MAX_LIMIT:,}")
    return limit


class Events:
    """What one core records: parallel arrays of kind, track, start, end (= start for instants and counters)
    and value (a counter's value, or which program, callback or host op), with the window and the limit."""

    def __init__(self, channels: int, limit: int = DEFAULT_LIMIT, window: tuple[float, float] = (0.0, math.inf)):
        self.lo, self.hi = window
        self.cap = check_limit(limit)
        self.n = 0
        self.dropped = 0
        self.kind = np.zeros(self.cap, dtype=np.int64)
        self.track = np.zeros(self.cap, dtype=np.int64)
        self.t0 = np.zeros(self.cap)
        self.t1 = np.zeros(self.cap)
        self.val = np.zeros(self.cap)
        self.last = np.full(DRAM + channels, -1, dtype=np.int64)  # per track: its latest event kept
        self.lastv = np.full(DRAM + channels, math.nan)  # per track: its counter's last value kept

    @property
    def channels(self) -> int:
        """DRAM channels: the tracks after the core's."""
        return len(self.last) - DRAM

    def kept(self) -> Iterator[tuple[Kind, int, float, float, float]]:
        """Each event kept that overlaps the window, as (kind, track, start, end, value).  A run is kept when it
        starts, before its end is known, so one may end before the window."""
        for j in range(self.n):
            a, b = float(self.t0[j]), float(self.t1[j])
            if b >= self.lo and a <= self.hi:
                yield KINDS[int(self.kind[j])], int(self.track[j]), a, b, float(self.val[j])

    def add(self, kind: int, track: int, a: float, b: float, v: float = 0.0, merge: bool = False) -> int:
        """Keep an event (runtime.h tr_add); returns its index, -1 if not kept.  `merge`: a span of the same
        kind that starts where the track's latest one ends extends it."""
        if b < self.lo or a > self.hi:
            return -1
        j = int(self.last[track])
        if merge and j >= 0 and self.kind[j] == kind and self.t1[j] == a:
            self.t1[j] = b
            return j
        if self.n == self.cap:
            self.dropped += 1
            return -1
        j = self.n
        self.n += 1
        self.kind[j], self.track[j], self.t0[j], self.t1[j], self.val[j] = kind, track, a, b, v
        self.last[track] = j
        return j

    def count(self, kind: int, track: int, t: float, v: float) -> None:
        """A counter's value at t, kept only when it changed (runtime.h tr_count)."""
        if self.lastv[track] != v and self.add(kind, track, t, t, v) >= 0:
            self.lastv[track] = v

    def wait(self, category: str, a: float, b: float) -> None:
        """The front end waited from a to b, charged to `category` (runtime.h pipe_wait)."""
        self.add(WAIT_OF[category], WAITS, a, b, merge=True)

    def push(self, asked: float, pushed: float, held: int) -> None:
        """A queue push asked at `asked` went in at `pushed`, leaving `held` bytes (runtime.h q_push)."""
        if pushed > asked:
            self.add(K["queue_full"], ACCESS, asked, pushed, merge=True)
        self.count(K["queue_bytes"], QUEUE, pushed, held)

    def burst(self, channel: int, write: bool, start: float, width: float) -> None:
        """A channel's data bus busy from `start` for `width` cycles (runtime.h transfer)."""
        self.add(K["dram_write" if write else "dram_read"], DRAM + channel, start, start + width, merge=True)


@dataclass(frozen=True)
class TraceOptions:
    """What a user asked to record: at most `limit` events a core, those overlapping `window` (cycles)."""

    limit: int = DEFAULT_LIMIT
    window: tuple[float, float] = (0.0, math.inf)

    def events(self, machine: Machine) -> Events:
        """A new record for one core's run on `machine`."""
        return Events(machine.dram.channels, self.limit, self.window)


def callback_ids(program: Program) -> dict[tuple[str, int], int]:
    """A number for each (access program, token) pair: what a callback event's value names."""
    pairs = {(a.name, int(token)) for a in program.access for token in a.tokens()}
    return {pair: n for n, pair in enumerate(sorted(pairs))}


def _names(program: Program) -> dict[str, dict[int, str]]:
    ids = callback_ids(program)
    return {"run": {n: f"run {a.name}" for n, a in enumerate(program.access)},
            "callback": {n: f"callback {name}.{token}" for (name, token), n in ids.items()},
            "host": {n: f"host {ins.args[0]}" for n, ins in enumerate(program.code)
                     if getattr(ins, "base", None) == "host"}}


def chrome(runs: Sequence[tuple[Events, Program]], machine: Machine) -> dict[str, object]:
    """The Trace Event JSON of one run per core: a process per core with its access unit, queue counter, core
    and front-end threads, and a process for the DRAM channels the cores share.  Times are microseconds of
    simulated time at the machine's clock, to the picosecond; runs, callbacks and host ops give their cycles."""
    us = 1e-3 / machine.clock_ghz  # microseconds a cycle
    ev: list[dict[str, object]] = []
    cores = len(runs)
    if not cores:
        raise EmberError("a trace needs at least one core's run")

    def meta(pid: int, tid: int | None, what: str, name: str, order: int) -> None:
        base: dict[str, object] = {"ph": "M", "pid": pid}
        if tid is not None:
            base["tid"] = tid
        ev.append({**base, "name": f"{what}_name", "args": {"name": name}})
        ev.append({**base, "name": f"{what}_sort_index", "args": {"sort_index": order}})

    meta(cores, None, "process", "DRAM (shared)" if cores > 1 else "DRAM", cores)
    for c in range(runs[0][0].channels):
        meta(cores, c, "thread", f"channel {c}", c)
    dropped = 0
    for pid, (e, program) in enumerate(runs):
        meta(pid, None, "process", f"core {pid}", pid)
        for tid, name in THREADS.items():
            meta(pid, tid, "thread", name, tid)
        names = _names(program)
        dropped += e.dropped
        for kind, track, a, b, v in e.kept():
            p, t = (cores, track - DRAM) if track >= DRAM else (pid, track)
            ts = round(a * us, 6)  # to the picosecond; runs, callbacks and host ops keep their exact cycles
            if kind.shape == "counter":
                ev.append({"name": kind.label, "ph": "C", "pid": p, "ts": ts, "args": {"bytes": v}})
            elif kind.shape == "instant":
                ev.append({"name": kind.label, "ph": "i", "s": "t", "pid": p, "tid": t, "ts": ts})
            elif kind.name in names:  # runs, callbacks and host ops name what ran, and give its cycles
                ev.append({"name": names[kind.name].get(int(v), kind.label), "ph": "X", "pid": p, "tid": t,
                           "ts": ts, "dur": round((b - a) * us, 6), "args": {"cycles": [a, b]}})
            else:
                ev.append({"name": kind.label, "ph": "X", "pid": p, "tid": t, "ts": ts,
                           "dur": round((b - a) * us, 6)})
    first = runs[0][0]
    return {"traceEvents": ev, "displayTimeUnit": "ns",
            "otherData": {"clock_ghz": machine.clock_ghz, "cores": cores,
                          "window_cycles": [first.lo, first.hi if math.isfinite(first.hi) else None],
                          "limit_per_core": first.cap, "dropped": dropped}}


def trace_json(runs: Sequence[tuple[Events, Program]], machine: Machine) -> bytes:
    return json.dumps(chrome(runs, machine), separators=(",", ":")).encode() + b"\n"


def dropped_note(runs: Sequence[tuple[Events, Program]]) -> str | None:
    """What a user is told when the limit cut the trace short."""
    dropped = sum(e.dropped for e, _ in runs)
    if not dropped:
        return None
    kept = sum(e.n for e, _ in runs)
    return (f"the trace keeps the first {kept:,} events; {dropped:,} more were not kept (--trace-limit; "
            "--trace-window START:END shows a later part)")
