"""Compile a workload at one variant (an -O level, core-only, or hand-written), simulate, check, measure."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from importlib import resources

import numpy as np

from ..backend.dae import Program
from ..backend.dae_text import parse_dae
from ..frontends import import_model, load_weights_any
from ..ir.diagnostics import EmberError
from ..machine import Machine
from ..passes import PRESETS, parse_pipeline, run_passes
from ..passes.derived import link_param
from ..sim.engines import DEFAULT_ENGINE, simulate
from ..sim.fast.engine import notes
from ..sim.multicore import simulate_cores, split_bags, split_rows
from ..sim.stats import Stats
from ..sim.trace import Events, TraceOptions
from .workloads import Workload

VARIANTS = ("O0", "O1", "O2", "O3", "paper-O3", "hand", "core")
SUMMED = ("cycles", "tokens", "operands", "callbacks", "access.elements", "execute.busy_cycles",
          "execute.starved_cycles", "execute.load_stall_cycles", "execute.pop_stall_cycles",
          "execute.store_stall_cycles", "execute.compute_stall_cycles", "execute.mispredict_cycles",
          "access.stall_cycles",
          "dram_bytes", "roofline.access_cycles", "roofline.dram_cycles", "roofline.execute_cycles",
          "sol.dram_cycles", "sol.execute_cycles", "execute.instructions", "host_seconds",
          "energy_j")
DERIVED = ("roofline.bound_cycles", "roofline_fraction", "sol.bound_cycles", "sol_fraction", "dram_bandwidth_fraction",
           "useful_bandwidth_fraction", "lookups_per_kcycle", "lookups_per_host_second", "sim_cycles_per_host_second",
           "power_w")
CORES = ("cores.min_cycles", "cores.max_cycles")  # when the first and the last core halt (a one-core run's: cycles)
# every statistic `run` reports but the energy leaves (is_stat), so a sweep can check a plotted metric before it runs
STATS = SUMMED + CORES + DERIVED
HOST_TIME = ("host_seconds", "lookups_per_host_second", "sim_cycles_per_host_second")  # vary run to run


def is_stat(name: str) -> bool:
    """Whether `run` reports `name`: one of STATS, or an energy leaf (energy.<block>_j; the blocks include
    the machine's cache levels, so they are not a fixed list)."""
    return name in STATS or (name.startswith("energy.") and name.endswith("_j"))


@dataclass
class Result:
    workload: str
    variant: str
    stats: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # e.g. the fast engine handing a program to the reference
    trace: list[tuple[Events, Program]] | None = field(default=None, compare=False, repr=False)  # table 0's, a core


@dataclass(frozen=True)
class Baseline:
    """A hand-written program that computes every workload of one kind: built in, or given with --hand."""

    name: str  # its file, as messages and notes name it
    program: Program


Hands = dict[str, list[Baseline]]  # workload kind -> the baselines given for it (--hand KIND=FILE)


def handwritten(kind: str, dim: int) -> Baseline:
    """The built-in expert baseline for workloads of `kind` with rows of `dim` elements."""
    name = f"{kind}.d{dim}.dae"
    try:
        text = resources.files("ember.bench").joinpath("handwritten", name).read_text()
    except FileNotFoundError:
        raise EmberError(f"no hand-written baseline for {kind} with D={dim} (expected samples/handwritten/{name}; "
                         f"give one with --hand {kind}=FILE.dae)") from None
    return Baseline(name, parse_dae(text, f"samples/handwritten/{name}"))


def baselines(w: Workload, hands: Hands | None = None) -> list[Baseline]:
    """What `w` is compared with: the kernels given for its kind, else the built-in one for its row width."""
    if hands and w.kind in hands:
        return list(hands[w.kind])
    return [handwritten(w.kind, w.dim)]


def compile_variant(w: Workload, variant: str) -> Program:
    """`w`'s program at a preset, or for `hand` its built-in expert kernel."""
    if variant == "hand":
        return handwritten(w.kind, w.dim).program
    passes = parse_pipeline(PRESETS[variant])
    module = w.module()
    run_passes(module, passes)
    program = passes[-1].program  # type: ignore[attr-defined]
    assert program is not None
    return program


def compile_file(file: str, variant: str) -> Program:
    """A model file (anything ember-import reads) compiled at a preset, its weights attached: what ember-import,
    ember-opt and ember-asm make of it, in one process."""
    passes = parse_pipeline(PRESETS[variant])
    run_passes(import_model(file, file), passes)
    program = passes[-1].program  # type: ignore[attr-defined]
    weights = load_weights_any(file)
    for n, s in enumerate(program.symbols):
        if s.kind == "param":
            data = link_param(weights, s.name)
            if data is None:
                raise EmberError(f"param '{s.name}' is not in the weights of {file}")
            program.data[n] = data
    return program


def run(w: Workload, variant: str, machine: Machine, engine: str = DEFAULT_ENGINE,
        timing_only: bool = False, hands: Hands | None = None, trace: TraceOptions | None = None) -> Result:
    """Simulate every table of `w` with `engine` and sum the statistics.  With data, every output is checked
    against numpy.  `timing_only` gives the tables no data (the fast engine treats them as address ranges):
    the statistics are the same, the outputs are zeros and go unchecked, and no table is generated.

    Variant `hand` runs each baseline of `baselines(w, hands)` and keeps the fastest (a note names it when
    there was a choice or it was given).  `host_seconds` is the simulations' own time, so the speeds derived
    from it measure the simulator, not the benchmark's set-up around it (generating data, compiling the
    workload, checking outputs).  `trace` records the timeline of the first table's run (each table is a run
    of its own from cycle 0) into the result's `trace`."""
    if not timing_only:
        w.require_data()
    if variant != "hand":
        program = compile_variant(w, variant) if machine.cores == 1 else None
        return _run(w, variant, program, f"{w.name} {variant}", machine, engine, timing_only, trace)
    given = baselines(w, hands)
    if not given:
        raise EmberError(f"{w.name}: no expert kernel computes a {w.kind} workload (leave out variant hand)")
    for b in given:
        same_work(w, b)
    runs = [(_run(w, variant, b.program, f"{w.name} hand ({b.name})", machine, engine, timing_only, trace), b)
            for b in given]
    best, b = min(runs, key=lambda rb: rb[0].stats["cycles"])
    if hands and w.kind in hands:
        best.notes.append(f"{w.name} hand: {b.name}" + (f" (the fastest of {len(given)})" if len(given) > 1 else ""))
    return best


def same_work(w: Workload, b: Baseline) -> None:
    """A kernel's `.work` records set the bound it is judged by (sim/work.py), so they must say what the compiled
    workload's say: the same records, each field naming a symbol of the same kind and, for an input, the same
    name (a record over a param of made-up indices, or a second record, would raise the kernel's bar)."""
    want = compile_variant(w, "O0")

    def roles(p: Program) -> list[tuple[object, ...]]:
        return [(r.kind, r.mode, r.padding_idx, r.negative, r.bits, r.block,
                 tuple((f, p.symbols[n].kind, p.symbols[n].name if p.symbols[n].kind == "input" else "")
                       for f, n in r.symbols().items())) for r in p.work]

    if roles(b.program) != roles(want):
        raise EmberError(f"{w.name}: the kernel {b.name} declares work {roles(b.program)}, but the workload computes "
                         f"{roles(want)}: its .work records must say what it computes, as the compiler's do")


def _run(w: Workload, variant: str, program: Program | None, where: str, machine: Machine, engine: str,
         timing_only: bool, trace: TraceOptions | None = None) -> Result:
    """One program (None: each core's own, compiled for its slice) on every table of `w`; `where` names the
    run in errors.  `trace`: the first table's timeline goes into the result."""
    per_core: dict[int, Program] = {}  # multi-core: each slice size's program, compiled once for every table
    res = Result(w.name, variant)
    for t in range(w.tables):
        inputs = w.inputs(t)
        table = None if timing_only else w.table(t, inputs["indices"])
        given = {k: v.copy() for k, v in inputs.items()}  # a program may write its inputs: numpy gets them as made
        record = trace if t == 0 else None
        try:
            if machine.cores > 1:
                out, st, runs = _on_cores(w, variant, program, per_core, t, given, table, machine, engine,
                                          timing_only, record)
            else:
                assert program is not None
                w.bind(program, t, table)
                events = record.events(machine) if record else None
                out, st = simulate(program, given, machine, engine=engine, timing_only=timing_only, trace=events)
                runs = [(events, program)] if events is not None else []
            if runs:
                res.trace = runs
        except EmberError as e:  # name the point: the message alone does not say which of hundreds failed
            at = where + (f", table {t}" if w.tables > 1 else "")
            raise EmberError(f"{at}: {e.message}", e.where) from None
        if engine == "fast":
            for text in (f"{where}: {note}" for note in notes):
                if text not in res.notes:
                    res.notes.append(text)
        if table is not None:
            got = next(iter(out.values()))
            if not np.allclose(got, w.reference(t, table, inputs), rtol=1e-4, atol=1e-4):
                raise EmberError(f"{where}: simulated output differs from numpy's")
        for k in [*SUMMED, *(n for n, _ in st.items() if n.startswith("energy."))]:  # and energy's leaves
            res.stats[k] = res.stats.get(k, 0.0) + float(st[k])
        for k in CORES:  # tables run one after another: each adds its first and its last core's finish
            res.stats[k] = res.stats.get(k, 0.0) + float(st[k] if k in st else st["cycles"])
    s = res.stats
    bound = max(s["roofline.access_cycles"], s["roofline.dram_cycles"], s["roofline.execute_cycles"])
    s["roofline.bound_cycles"] = bound
    s["roofline_fraction"] = bound / s["cycles"] if s["cycles"] else 0.0
    s["sol.bound_cycles"] = max(s["sol.dram_cycles"], s["sol.execute_cycles"])
    s["sol_fraction"] = s["sol.bound_cycles"] / s["cycles"] if s["cycles"] else 0.0
    s["dram_bandwidth_fraction"] = s["dram_bytes"] / (s["cycles"] * machine.dram_bytes_per_cycle)
    s["useful_bandwidth_fraction"] = w.useful_bytes() / (s["cycles"] * machine.dram_bytes_per_cycle)
    s["lookups_per_kcycle"] = 1000.0 * w.lookups / s["cycles"]
    s["power_w"] = s["energy_j"] / machine.seconds(s["cycles"]) if s["cycles"] else 0.0
    host = s["host_seconds"]
    s["lookups_per_host_second"] = w.lookups / host if host > 0 else 0.0
    s["sim_cycles_per_host_second"] = s["cycles"] / host if host > 0 else 0.0
    return res


def _on_cores(w: Workload, variant: str, program: Program | None, per_core: dict[int, Program], t: int,
              inputs: dict[str, np.ndarray], table: np.ndarray | None, machine: Machine, engine: str,
              timing_only: bool, trace: TraceOptions | None
              ) -> tuple[dict[str, np.ndarray], Stats, list[tuple[Events, Program]]]:
    """The batch split across the machine's cores (bags, or lookups of a gather), each core's program
    compiled for its slice's size (or `program`, hand-written code, which takes any size); outputs are
    stitched back together in batch order.  With `trace`, each core's recorded timeline comes back too."""
    gather = w.kind == "gather"
    slices = split_rows(inputs, machine.cores) if gather else split_bags(inputs, machine.cores)
    programs = []
    for part in slices:
        size = len(part["indices"]) if gather else len(part["offsets"]) - 1
        p = program or per_core.get(size)
        if p is None:
            sub = dataclasses.replace(w, bags=size, pooling=1) if gather else dataclasses.replace(w, bags=size)
            p = per_core[size] = compile_variant(sub, variant)
        w.bind(p, t, table)
        programs.append(p)
    traces = [trace.events(machine) for _ in programs] if trace else None
    outs, st = simulate_cores(programs, slices, machine, engine=engine, timing_only=timing_only, traces=traces)
    runs = list(zip(traces, programs)) if traces else []
    return {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}, st, runs


def first_difference(reference: dict[str, float], fast: dict[str, float]) -> str | None:
    """The first statistic (in `STATS` order) on which two runs of one point disagree, host-time figures aside,
    worded for an error; None when they agree on all of them."""
    for key in STATS:
        if key in HOST_TIME:
            continue
        a, b = reference.get(key), fast.get(key)
        if a != b:
            return f"{key} (reference {a!r}, fast {b!r})"
    return None
