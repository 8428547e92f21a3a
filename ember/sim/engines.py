"""Engine selection: every caller simulates through `simulate`, naming the engine it wants.

`reference` transcribes the timing model of docs/architecture.md event by event and is the oracle;
`fast` computes the same definition with compiled kernels (ember.sim.fast) and must agree with it on
every statistic but the host-time ones.
"""

from __future__ import annotations

import numpy as np

from ..backend.dae import Program
from ..backend.registers import check_registers
from ..ir.diagnostics import EmberError
from ..machine import Machine
from .fast.engine import simulate as fast
from .reference import simulate as reference
from .stats import Stats
from .trace import Events

ENGINES = ("fast", "reference")
DEFAULT_ENGINE = "fast"


def check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise EmberError(f"unknown engine '{engine}' (valid: {', '.join(ENGINES)})")


def needs_fast(engine: str, timing_only: bool) -> None:
    """Timing-only runs exist only in the fast engine: the reference engine always moves data."""
    if timing_only and engine != "fast":
        raise EmberError("--timing-only needs the fast engine (the reference engine always moves data)")


def simulate(program: Program, inputs: dict[str, np.ndarray], machine: Machine, max_cycles: float | None = None,
             engine: str = DEFAULT_ENGINE, timing_only: bool = False, trace: Events | None = None
             ) -> tuple[dict[str, np.ndarray], Stats]:
    """Run `program` on `inputs` with the named engine; returns (outputs by name, statistics).  A run past
    `max_cycles` simulated cycles (None: cycle_limit.DEFAULT_MAX_CYCLES; inf: no limit) stops with an EmberError.
    `trace` records the run's timeline (trace.py), the same with either engine."""
    check_engine(engine)
    if machine.cores > 1:
        raise EmberError(f"the machine has {machine.cores} cores: a multi-core run splits a batch across them, which "
                         "ember-bench does for its workloads (--set cores=N); one program run uses one core")
    needs_fast(engine, timing_only)
    check_registers(program, machine.execute)
    if engine == "reference":
        return reference(program, inputs, machine, max_cycles, trace=trace)
    return fast(program, inputs, machine, max_cycles, timing_only, trace=trace)
