"""Compile a workload at one variant (an -O level, core-only, or hand-written), simulate, check, measure."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from importlib import resources

import numpy as np

from ..backend.dae import Program
from ..backend.dae_text import parse_dae
from ..ir.diagnostics import EmberError
from ..passes import PRESETS, parse_pipeline, run_passes
from ..sim.engines import DEFAULT_ENGINE, simulate
from ..sim.machine import Machine
from .workloads import Workload

VARIANTS = ("O0", "O1", "O2", "O3", "hand", "core")
SUMMED = ("cycles", "tokens", "operands", "callbacks", "access.elements", "execute.busy_cycles",
          "execute.starved_cycles", "execute.load_stall_cycles", "execute.pop_stall_cycles", "access.stall_cycles",
          "dram_bytes", "roofline.access_cycles", "roofline.dram_cycles", "roofline.execute_cycles",
          "execute.instructions", "host_seconds")
DERIVED = ("roofline.bound_cycles", "roofline_fraction", "dram_bandwidth_fraction", "useful_bandwidth_fraction",
           "lookups_per_kcycle")
STATS = SUMMED + DERIVED  # every statistic `run` reports, so a sweep can check a plotted metric before it runs


@dataclass
class Result:
    workload: str
    variant: str
    stats: dict[str, float] = field(default_factory=dict)


def handwritten(kind: str) -> Program:
    path = resources.files("ember.bench").joinpath("handwritten", f"{kind}.dae")
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise EmberError(f"no hand-written baseline for '{kind}' (expected samples/handwritten/{kind}.dae)") from None
    return parse_dae(text, f"samples/handwritten/{kind}.dae")


def compile_variant(w: Workload, variant: str) -> Program:
    if variant == "hand":
        return handwritten(w.kind)
    passes = parse_pipeline(PRESETS[variant])
    module = w.module()
    run_passes(module, passes)
    program = passes[-1].program  # type: ignore[attr-defined]
    assert program is not None
    return program


def run(w: Workload, variant: str, machine: Machine, engine: str = DEFAULT_ENGINE) -> Result:
    """Simulate every table of `w` with `engine`; outputs are checked against numpy, statistics summed."""
    program = compile_variant(w, variant)
    res = Result(w.name, variant)
    t0 = time.perf_counter()
    for t in range(w.tables):
        for n, s in enumerate(program.symbols):
            if s.kind == "param":
                program.data[n] = w.table(t)
        out, st = simulate(program, w.inputs(t), machine, engine=engine)
        got = next(iter(out.values()))
        if not np.allclose(got, w.reference(t), rtol=1e-4, atol=1e-4):
            raise EmberError(f"{w.name} {variant}: simulated output differs from numpy's")
        for k in SUMMED:
            res.stats[k] = res.stats.get(k, 0.0) + float(st[k])
    s = res.stats
    s["host_seconds"] = time.perf_counter() - t0
    bound = max(s["roofline.access_cycles"], s["roofline.dram_cycles"], s["roofline.execute_cycles"])
    s["roofline.bound_cycles"] = bound
    s["roofline_fraction"] = bound / s["cycles"] if s["cycles"] else 0.0
    s["dram_bandwidth_fraction"] = s["dram_bytes"] / (s["cycles"] * machine.dram.bytes_per_cycle)
    s["useful_bandwidth_fraction"] = w.useful_bytes() / (s["cycles"] * machine.dram.bytes_per_cycle)
    s["lookups_per_kcycle"] = 1000.0 * w.lookups / s["cycles"]
    return res
