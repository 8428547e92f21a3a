"""The output queue between the access unit and the execute unit, with back-pressure.

Tokens (8 bytes) and operands (their element size) share `capacity` bytes.  Definition: an entry
is pushed at the first time >= the access unit's clock at which it fits; to make room the oldest
entries still held are released in push order, each no earlier than the time the execute unit
popped it (an entry not yet popped cannot be released: the program would deadlock).  Occupancy at
a push is the bytes still held after releasing every entry popped by then, in push order.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ..ir.diagnostics import EmberError
from .stats import Histogram

TOKEN_BYTES = 8


class Entry:
    __slots__ = ("value", "ready", "bytes", "pop")

    def __init__(self, value: object, ready: float, nbytes: int):
        self.value = value
        self.ready = ready
        self.bytes = nbytes
        self.pop: float | None = None


class OutputQueue:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.held: deque[Entry] = deque()
        self.held_bytes = 0
        self.max_bytes = 0
        self.max_entries = 0
        self.samples = 0
        self.sum_bytes = 0
        self.hist = Histogram.linear(0, capacity + 1, 8) if capacity >= 8 else Histogram([0, capacity + 1])
        self.stall = 0.0
        self.trace: Any = None  # trace.Events when the run is traced

    def push(self, entry: Entry, t: float) -> float:
        """Push `entry` at or after `t`; returns the push time (the access unit waits until then)."""
        if entry.bytes > self.capacity:
            raise EmberError(f"a queue entry of {entry.bytes} bytes exceeds the queue capacity "
                             f"of {self.capacity} bytes")
        start = t
        held = self.held
        while held and held[0].pop is not None and held[0].pop <= t:
            self.held_bytes -= held.popleft().bytes
        while self.held_bytes + entry.bytes > self.capacity:
            head = held.popleft()
            if head.pop is None:
                raise EmberError("deadlock: the output queue is full of operands no callback has popped "
                                 "(a marshaling rule pushes data without a token that consumes it)")
            t = max(t, head.pop)
            self.held_bytes -= head.bytes
        held.append(entry)
        self.held_bytes += entry.bytes
        self.stall += t - start
        if self.trace is not None:
            self.trace.push(start, t, self.held_bytes)
        self.max_bytes = max(self.max_bytes, self.held_bytes)
        self.max_entries = max(self.max_entries, len(held))
        self.samples += 1
        self.sum_bytes += self.held_bytes
        self.hist.add(self.held_bytes)
        return t
