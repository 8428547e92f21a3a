"""The core model against LLVM's machine-code analyzer: simulated cycles per iteration of each kernel
in ember/bench/kernels/ beside llvm-mca's for its x86 translation (`<name>.s`, run by samples/gen_mca.py
with -mcpu=icelake-server; the numbers are stored in kernels/mca.json, so no llvm-mca is needed here).

Both sides are measured the way llvm-mca measures: in the steady state, with every load hitting L1
and every branch predicted.  So the simulated machine is the default one with the access unit's
cache level (where its loads enter and its queue lives) set to L1, an access unit fast enough never
to hold the core back, and no misprediction penalty; the cycles of one iteration are the difference
between runs of 2N and N iterations, divided by N, which leaves out warm-up and drain.  llvm-mca
does not see memory dependences between iterations either, so each kernel's iterations update
different output rows where the DAE code would otherwise carry a dependence through memory.

Two kinds of kernel:
- *loops* (`LOOPS`): a DAE loop written to match the x86 loop instruction for instruction where both
  ISAs have the instruction (address arithmetic that DAE's 2-D references do in one instruction is
  the exception, and the point of comparing);
- *callbacks* (`CALLBACKS`): the real callbacks that codegen emits at -O0..-O3, or the hand-written
  baselines, run through the access unit and the dispatcher on a small L1-resident table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np

from ..backend.dae import Program
from ..backend.dae_text import parse_dae
from ..machine import Machine, load_machine
from ..passes import PRESETS, parse_pipeline, run_passes
from ..sim.engines import simulate
from .run import handwritten
from .workloads import Workload

TOLERANCE = 0.25  # the simulator must land within +-25% of llvm-mca on every kernel
SETTINGS = ("access.cache_level=l1", "access.lanes=64", "access.outstanding=1024", "access.queue_bytes=16384",
            "execute.mispredict_penalty=0",  # llvm-mca predicts every branch
            # every access costs an L1 hit, as llvm-mca assumes: nothing beyond L1 adds latency or waits for DRAM
            "caches.l2.latency=0", "caches.llc.latency=0", "dram.latency=0", "dram.device=ideal",
            "dram.bytes_per_cycle=1000000")
ROWS = 16  # table rows: 16 x 128 floats = 8 KiB, in L1 after the first pass


def machine() -> Machine:
    """The default machine, set up for the comparison (module docstring)."""
    return load_machine("default").with_overrides(SETTINGS)


# --- loops -------------------------------------------------------------------------------------------
_LOOP = """.dae 2
.sym @0 input "n" i64 [1]
.sym @1 input "x" f32 [4096]
.sym @2 input "out" f32 [4096, 128]
.sym @3 input "ptr" i64 [64]
.sym @4 input "idx" i64 [4096]
.code
  li r0, 0
  li r2, 128
  li r5, 16
  li r22, 16
  ld r13, @0[0]
  li f0, 1.0
  vsplat.f32 v0, f0, 16
  vsplat.f32 v1, f0, 16
  vmask v9, r0, r2, 16
{init}  li r12, 0
  li r11, 0
  li r20, 0
  li r21, 7
L0:
{body}  add r12, r12, 1
  blt r12, r13, L0
  halt
.end
"""
_NEXT_ROW = "  add r11, r11, 1\n"  # the next output row: iterations share no memory (see the module docstring)
_CHUNK = ("  vmask v3, r15, r2, 16\n  vld v4, @1[r15], v3\n  vld v5, @2[r11, r15], v3\n"
          "  vfadd.f32 v6, v5, v4\n  vst v6, @2[r11, r15], v3\n  add r15, r15, r5\n")

LOOPS: dict[str, tuple[str, str]] = {  # name -> (set-up before the loop, loop body); one iteration each
    "fp_chain": ("", "  vfadd.f32 v0, v1, v0\n" * 4),
    "fp_independent": ("", "".join(f"  vfadd.f32 v{10 + i}, v1, v0\n" for i in range(8))),
    "int_chain": ("", "  add r20, r20, 1\n" * 8),
    "load_chain": ("", "  ld r20, @3[r20]\n" * 4),
    "div_chain": ("", "  div r20, r20, r5\n" * 4),
    "sol_regacc_d128": ("".join(f"  vsplat.f32 v{10 + i}, f0, 16\n" for i in range(8)),
                        "".join(f"  vld v{20 + i}, @1[{16 * i}], v9\n  vfadd.f32 v{10 + i}, v{10 + i}, v{20 + i}\n"
                                for i in range(8))),
    "o3_chunk": ("", "  mov r15, r0\n" + _CHUNK + _NEXT_ROW),
    "init_zero": ("", "  mov r15, r0\n  vmask v3, r15, r2, 16\n  vst v0, @2[r11, r15], v3\n  add r15, r15, r5\n"
                  + _NEXT_ROW),
    "core_scalar": ("", "  mov r15, r0\n  ld f1, @1[r15]\n  ld f2, @2[r11, r15]\n  fadd.f32 f3, f2, f1\n"
                    "  st f3, @2[r11, r15]\n  add r15, r15, 1\n" + _NEXT_ROW),
    "core_vector_d128": ("", "  ld r14, @4[r12]\n  mov r15, r0\n" + _CHUNK * 8 + _NEXT_ROW),
}


def _loop_cycles(name: str, n: int) -> float:
    init, body = LOOPS[name]
    program = parse_dae(_LOOP.format(init=init, body=body), f"{name}.dae")
    inputs = {"n": np.array([n]), "x": np.ones(4096, np.float32), "out": np.zeros((4096, 128), np.float32),
              "ptr": np.zeros(64, np.int64), "idx": np.zeros(4096, np.int64)}
    return simulate(program, inputs, machine())[1]["cycles"]


# --- callbacks -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Callback:
    """A callback of a compiled (or hand-written) bag or gather, measured per call."""

    variant: str  # a preset (paper-O3: the published ladder's -O3), or "hand": the built-in expert kernel
    kind: str  # "bag_sum", "bag_weighted" or "gather"
    dim: int
    what: str = "row"  # "row": a lookup's callbacks; "bag": what a bag costs with no lookup (its counting callback)
    per: int = 1  # calls a lookup makes (D elements at -O0)
    apart: bool = False  # measure a lookup as a bag of its own: its updates would chain through memory in a bag


CALLBACKS: dict[str, Callback] = {
    "o0_element": Callback("O0", "bag_sum", 8, per=8),
    "o1_chunk": Callback("O1", "bag_sum", 16, apart=True),
    "o2_row_d128": Callback("O2", "bag_sum", 128),
    "o3_row_d128": Callback("paper-O3", "bag_sum", 128),
    "o3_row_d32": Callback("paper-O3", "bag_sum", 32),
    "o3_bag_d128": Callback("paper-O3", "bag_sum", 128, what="bag"),
    "hand_bag_sum_d128": Callback("hand", "bag_sum", 128),
    "hand_weighted_d128": Callback("hand", "bag_weighted", 128),
    "hand_gather_d128": Callback("hand", "gather", 128),
}


@cache
def _program(variant: str, kind: str, dim: int, bags: int, pooling: int) -> Program:
    if variant == "hand":
        return handwritten(kind, dim).program
    w = Workload("K", kind, 1, ROWS, dim, pooling, bags, 0.0, weighted=kind == "bag_weighted")
    passes = parse_pipeline(PRESETS[variant])
    run_passes(w.module(), passes)
    return passes[-1].program  # type: ignore[attr-defined]


def _cycles(cb: Callback, bags: int, pooling: int) -> float:
    """Cycles of `bags` bags of `pooling` lookups each (a gather: `bags` rows)."""
    rng = np.random.default_rng(0)
    lookups = bags * pooling
    program = _program(cb.variant, cb.kind, cb.dim, bags, pooling)
    inputs: dict[str, np.ndarray] = {"indices": rng.integers(0, ROWS, size=lookups).astype(np.int64)}
    if cb.kind != "gather":
        inputs["offsets"] = np.arange(0, lookups + 1, max(pooling, 1), dtype=np.int64)[:bags + 1] \
            if pooling else np.zeros(bags + 1, dtype=np.int64)
    if cb.kind == "bag_weighted":
        inputs["weights"] = rng.standard_normal(lookups).astype(np.float32)
    table = rng.standard_normal((ROWS, cb.dim)).astype(np.float32)
    for n, s in enumerate(program.symbols):
        if s.kind == "param":
            program.data[n] = table
    return simulate(program, inputs, machine())[1]["cycles"]


def _per_bag(cb: Callback, pooling: int) -> float:
    """What one more bag of `pooling` lookups costs (64 bags against 128: warm-up and drain cancel)."""
    return (_cycles(cb, 128, pooling) - _cycles(cb, 64, pooling)) / 64


def _per_call(name: str) -> float:
    """A lookup's callbacks: what 32 more lookups a bag cost, over 8 bags, so the bags' own callbacks and the
    output's initialisation cancel.  Where consecutive lookups of a bag would depend on each other through
    the output row (a gather after a scatter of the same lanes, -O1), a bag of one lookup less an empty bag
    instead, each bag writing its own row."""
    cb = CALLBACKS[name]
    if cb.kind == "gather":
        return _per_bag(cb, 1)
    if cb.what == "bag":
        return _per_bag(cb, 0)
    if cb.apart:
        return (_per_bag(cb, 1) - _per_bag(cb, 0)) / cb.per
    return (_cycles(cb, 8, 64) - _cycles(cb, 8, 32)) / (8 * 32) / cb.per


# --- the comparison ------------------------------------------------------------------------------------
def simulated(name: str) -> float:
    """Simulated cycles per iteration of kernel `name`."""
    if name in LOOPS:
        return (_loop_cycles(name, 4000) - _loop_cycles(name, 2000)) / 2000
    return _per_call(name)


def reference() -> dict[str, float]:
    """llvm-mca's cycles per iteration of every kernel (kernels/mca.json)."""
    data = json.loads(resources.files("ember.bench").joinpath("kernels", "mca.json").read_text())
    return {k: float(v["cycles_per_iteration"]) for k, v in data["kernels"].items()}


def comparison() -> list[tuple[str, float, float]]:
    """(kernel, simulated, llvm-mca) for every kernel, in the stored order."""
    ref = reference()
    return [(name, simulated(name), mca) for name, mca in ref.items()]


def markdown(rows: list[tuple[str, float, float]]) -> str:
    """The comparison as the table docs/core-model.md shows."""
    lines = ["| kernel | simulated cycles / iteration | llvm-mca cycles / iteration | simulated / llvm-mca |",
             "|---|---:|---:|---:|"]
    lines += [f"| `{name}` | {sim:.2f} | {mca:.2f} | {sim / mca:.2f} |" for name, sim, mca in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(comparison()))
