"""One candidate per table: the plan of least cost within a byte budget, and the Pareto front of whole plans.

Both are exact dynamic programs over the tables.  A partial plan (a choice for the first k tables) that another
partial plan matches or beats on every summed measure can be dropped: whatever the remaining tables take, the
other does at least as well.  So after each table only the non-dominated partial plans are kept: in (bytes, cost)
for the optimum, in (bytes, cost, squared error) for the front.  The squared error of a table is its RMS error
squared times its elements, so that a plan's sum over tables, divided by all its elements, is the plan's RMS.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Option:
    bytes: int
    cost: float
    sse: float  # squared error summed over the table's elements (0 for the float table)


@dataclass(frozen=True)
class Plan:
    picks: tuple[int, ...]  # the option taken for each table
    bytes: int
    cost: float
    sse: float


def _extend(plans: list[Plan], options: list[Option]) -> list[Plan]:
    return [Plan((*p.picks, i), p.bytes + o.bytes, p.cost + o.cost, p.sse + o.sse)
            for p in plans for i, o in enumerate(options)]


def optimal(tables: list[list[Option]], budget: int) -> Plan | None:
    """The plan of least cost whose bytes are within `budget` (of two equally cheap, the smaller, then the more
    exact), or None when even the smallest plan is over it."""
    plans = [Plan((), 0, 0.0, 0.0)]
    for options in tables:
        kept: list[Plan] = []
        for p in sorted(_extend(plans, options), key=lambda p: (p.bytes, p.cost, p.sse)):
            if p.bytes <= budget and (not kept or p.cost < kept[-1].cost):
                kept.append(p)  # sorted by bytes: a plan is kept only if cheaper than every smaller one
        if not kept:
            return None
        plans = kept
    return min(plans, key=lambda p: (p.cost, p.bytes, p.sse))


def front(tables: list[list[Option]]) -> list[Plan]:
    """Every plan no other plan matches or beats in bytes, cost and squared error together, by bytes."""
    plans = [Plan((), 0, 0.0, 0.0)]
    for options in tables:
        plans = _non_dominated(_extend(plans, options))
    return plans


def _non_dominated(plans: list[Plan]) -> list[Plan]:
    """The plans that no other plan matches or beats on all three measures (one of each tie kept)."""
    plans = sorted(plans, key=lambda p: (p.bytes, p.cost, p.sse))
    cost = np.empty(len(plans))
    sse = np.empty(len(plans))
    kept: list[Plan] = []
    for p in plans:  # every plan kept so far has at most p's bytes
        n = len(kept)
        if n and np.any((cost[:n] <= p.cost) & (sse[:n] <= p.sse)):
            continue
        cost[n], sse[n] = p.cost, p.sse
        kept.append(p)
    return kept
