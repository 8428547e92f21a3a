"""The cycle limit both engines enforce, so that no program can run forever.

Both engines compare a clock with the limit at the same points: the execute unit's front-end clock
after every taken backward branch and after every callback, the access unit's clock at the start of
every traversal-unit iteration, and the run's final cycle count.  A run stops at the first point
whose clock is past the limit, with `exceeded`'s message; since both engines keep the same clocks
and check them at the same points, they stop at the same cycle with the same words.
"""

from __future__ import annotations

import math

from ..ir.diagnostics import EmberError

# The limit when none is given (ember-sim, ember-bench and the Python API alike). The longest benchmark run
# (RM3 at -O0, paper and huge suites) takes 1.07e8 cycles; this is about 9 times that, and a runaway loop
# reaches it in minutes on the fast engine (docs/isa.md).
DEFAULT_MAX_CYCLES = 1e9


def cycle_limit(max_cycles: float | None) -> float:
    """The limit a run uses: the one given, else the default; it must be a positive number (inf: none)."""
    if max_cycles is None:
        return DEFAULT_MAX_CYCLES
    if math.isnan(max_cycles) or max_cycles <= 0:
        raise EmberError(f"--max-cycles must be a positive number of cycles, got {max_cycles:g}")
    return float(max_cycles)


def exceeded(limit: float, clock: float) -> EmberError:
    """The error of a run stopped at `clock` because it is past `limit`."""
    return EmberError(f"simulation exceeded --max-cycles={limit:g}: stopped at cycle {clock:.12g}")


def check(limit: float, clock: float) -> None:
    if clock > limit:
        raise exceeded(limit, clock)
