"""Simulation statistics: an ordered table printed gem5-style (`stats.txt`) or as flat JSON.

Both engines fill a `Stats` in the same order with the same names, so their outputs can be compared
byte for byte.  Text output is for people (`name  value  # description (Unit)`, aligned, floats with
six decimals as gem5 prints them); JSON output is for programs (a flat object name -> exact value).
Files are written atomically: a run that fails while serialising leaves no partial file behind.
"""

from __future__ import annotations

import json
import math
import numbers
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ember.ir.diagnostics import EmberError

BEGIN = "---------- Begin Simulation Statistics ----------"
END = "---------- End Simulation Statistics   ----------"

Number = int | float


@dataclass
class Stat:
    """One statistic: its value and what it means."""

    value: Number
    description: str = ""
    unit: str = ""


def _number(name: str, value: object) -> Number:
    """Plain int/float (numpy scalars included); bools and non-numbers are programming errors."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"stat '{name}' must be a number, got {value!r}")
    if isinstance(value, numbers.Integral):
        return int(value)
    return float(value)


class Stats:
    """Ordered name -> Stat; insertion order is output order."""

    def __init__(self) -> None:
        self._stats: dict[str, Stat] = {}

    @staticmethod
    def _check_name(name: str) -> None:
        if not name or any(c.isspace() for c in name) or name == "#":
            raise ValueError(f"bad stat name {name!r}: names are non-empty and contain no whitespace")

    def set(self, name: str, value: Number, description: str = "", unit: str = "") -> None:
        """Create or overwrite a statistic (keeping its place and, if not given, its description)."""
        self._check_name(name)
        v = _number(name, value)
        old = self._stats.get(name)
        if old is None:
            self._stats[name] = Stat(v, description, unit)
        else:
            old.value = v
            old.description = description or old.description
            old.unit = unit or old.unit

    def add(self, name: str, value: Number, description: str = "", unit: str = "") -> None:
        """Accumulate into a statistic, creating it (from 0) the first time."""
        self._check_name(name)
        v = _number(name, value)
        old = self._stats.get(name)
        if old is None:
            self._stats[name] = Stat(v, description, unit)
        else:
            old.value = old.value + v
            old.description = old.description or description
            old.unit = old.unit or unit

    def update(self, other: Stats, prefix: str = "") -> None:
        """Copy every statistic of `other` (overwriting), with names prefixed by `prefix`."""
        for name, s in other.items():
            self.set(prefix + name, s.value, s.description, s.unit)

    def __getitem__(self, name: str) -> Number:
        return self._stats[name].value

    def __contains__(self, name: object) -> bool:
        return name in self._stats

    def __iter__(self) -> Iterator[str]:
        return iter(self._stats)

    def __len__(self) -> int:
        return len(self._stats)

    def get(self, name: str) -> Stat | None:
        """The full record (value, description, unit), or None."""
        return self._stats.get(name)

    def items(self) -> Iterator[tuple[str, Stat]]:
        """(name, Stat) in output order."""
        return iter(self._stats.items())

    def to_dict(self) -> dict[str, Number]:
        """Flat name -> value."""
        return {n: s.value for n, s in self._stats.items()}

    def to_json(self) -> str:
        """Flat JSON object name -> value (exact floats); non-finite values are an error, not bad JSON."""
        for name, s in self._stats.items():
            if isinstance(s.value, float) and not math.isfinite(s.value):
                raise EmberError(f"statistic '{name}' is {s.value}, which JSON cannot represent")
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def to_text(self) -> str:
        """gem5-style text: begin line, `name  value  # description (Unit)` aligned, end line."""
        rows = [(n, _fmt_value(s.value), _comment(s)) for n, s in self._stats.items()]
        wn = max((len(r[0]) for r in rows), default=0)
        wv = max((len(r[1]) for r in rows), default=0)
        lines = [BEGIN]
        lines += [f"{n:<{wn}}  {v:>{wv}}  # {c}".rstrip() for n, v, c in rows]
        lines.append(END)
        return "\n".join(lines) + "\n"


def _fmt_value(v: Number) -> str:
    if isinstance(v, float):
        if v != 0 and abs(v) < 1e-3:  # joules of a short run: six decimals would print 0.000000
            return f"{v:.6e}"
        return f"{v:.6f}" if math.isfinite(v) else str(v)
    return str(v)


def _comment(s: Stat) -> str:
    if s.unit:
        return f"{s.description} ({s.unit})".lstrip()
    return s.description


def stats_text(stats: Stats, path: str | os.PathLike[str]) -> str:
    """The statistics as a file at `path` holds them: JSON for a `.json` path, gem5 text otherwise."""
    return stats.to_json() if Path(path).suffix.lower() == ".json" else stats.to_text()


class Histogram:
    """Weighted histogram over fixed bucket edges: bucket i is [edges[i], edges[i+1]).

    Values below edges[0] count as underflows and values >= edges[-1] as overflows.  Weights let a
    queue-occupancy histogram count cycles spent at each occupancy rather than samples.  Nothing
    depends on the data seen, so two runs with the same inputs print the same buckets.
    """

    def __init__(self, edges: Sequence[Number]):
        if len(edges) < 2 or any(not b > a for a, b in zip(edges, edges[1:], strict=False)):
            raise ValueError("histogram edges must be at least two strictly increasing numbers")
        self.edges = [_number("edge", e) for e in edges]
        self.counts: list[Number] = [0] * (len(self.edges) - 1)
        self.underflows: Number = 0
        self.overflows: Number = 0
        self.total: Number = 0
        self.weighted_sum: float = 0.0
        self.max: Number | None = None
        self.min: Number | None = None

    @classmethod
    def linear(cls, lo: Number, hi: Number, buckets: int) -> Histogram:
        """`buckets` equal-width buckets over [lo, hi); integer edges stay integers if they divide evenly."""
        if buckets <= 0:
            raise ValueError("a histogram needs at least one bucket")
        if isinstance(lo, int) and isinstance(hi, int) and (hi - lo) % buckets == 0:
            w = (hi - lo) // buckets
            return cls([lo + i * w for i in range(buckets + 1)])
        return cls([lo + (hi - lo) * i / buckets for i in range(buckets + 1)])

    def add(self, value: Number, weight: Number = 1) -> None:
        """Count `value` with `weight` (e.g. the cycles a queue held `value` entries); weight 0 is a no-op."""
        if weight < 0:
            raise ValueError("histogram weights are non-negative")
        if weight == 0:
            return
        if value < self.edges[0]:
            self.underflows += weight
        elif value >= self.edges[-1]:
            self.overflows += weight
        else:
            lo, hi = 0, len(self.edges) - 1
            while hi - lo > 1:  # edges[lo] <= value < edges[hi]
                mid = (lo + hi) // 2
                if value < self.edges[mid]:
                    hi = mid
                else:
                    lo = mid
            self.counts[lo] += weight
        self.total += weight
        self.weighted_sum += value * weight
        self.max = value if self.max is None or value > self.max else self.max
        self.min = value if self.min is None or value < self.min else self.min

    @property
    def mean(self) -> float:
        """Weighted mean of the values added (0 when empty)."""
        return self.weighted_sum / self.total if self.total else 0.0

    def buckets(self) -> list[tuple[Number, Number, Number]]:
        """(lo, hi, weight) per bucket, in order."""
        return [(self.edges[i], self.edges[i + 1], c) for i, c in enumerate(self.counts)]

    def report(self, stats: Stats, name: str, description: str, unit: str = "Count", value_unit: str = "") -> None:
        """Add gem5-style distribution lines: samples, mean, min, max, underflows, buckets, overflows.  The
        counts are in `unit`; the mean, min and max are values sampled, in `value_unit`."""
        stats.set(f"{name}::samples", self.total, f"{description}: total weight", unit)
        stats.set(f"{name}::mean", self.mean, f"{description}: weighted mean", value_unit)
        stats.set(f"{name}::min", self.min if self.min is not None else 0, f"{description}: smallest value",
                  value_unit)
        stats.set(f"{name}::max", self.max if self.max is not None else 0, f"{description}: largest value",
                  value_unit)
        stats.set(f"{name}::underflows", self.underflows, f"{description}: below {self.edges[0]}", unit)
        for lo, hi, c in self.buckets():
            stats.set(f"{name}::{lo}-{hi}", c, f"{description}: in [{lo}, {hi})", unit)
        stats.set(f"{name}::overflows", self.overflows, f"{description}: at least {self.edges[-1]}", unit)
