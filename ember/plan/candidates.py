"""The candidate forms of a table, and each one measured: bytes and reconstruction error from the transform's own
figures, simulated cycles and energy of the table's bags at -O3 (timing only).

A candidate is a table transform written as a pass (`quantize-tables{bits=8}`, `tt-decompose{ranks=16}`,
`robe{size=100x}`): any pass with per-table figures (`stats`) fits, so a new transform is a new entry in
`default_specs`.  Deep hash embeddings are not a candidate: no transform derives them from a float table.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from ..ir.core import Op
from ..machine import Machine
from ..passes import PASSES, PRESETS, parse_pipeline, run_passes
from ..passes.table_transform import table_transform, transform
from ..sim.engines import simulate
from ..sim.fast.engine import virtual_symbols
from ..sim.tensors import dtype_of
from .tables import Table, feeds, func_of, isolate

SPECS = ("quantize-tables{bits=8}", "quantize-tables{bits=4}",
         "tt-decompose{ranks=8}", "tt-decompose{ranks=16}", "tt-decompose{ranks=32}")
ROBE_SPECS = ("robe{size=16x}", "robe{size=100x}", "robe{size=1000x}")
NOT_DERIVABLE = ("dhe: not derivable from a float table (deep hash embeddings replace the table by an MLP that "
                 "must be trained), so never a candidate")
LEVEL = "O3"


def default_specs() -> list[str]:
    """The transforms tried on every table: int8, int4, TT at ranks 8/16/32, and ROBE at 16x/100x/1000x."""
    return [*SPECS, *(ROBE_SPECS if "robe" in PASSES else ())]


@dataclass
class Candidate:
    spec: str  # the transform, "" for the float table
    representation: str
    bytes: int
    error_max: float | None
    error_rms: float | None
    cycles: float = 0.0
    energy_j: float = 0.0
    unmeasured: str = ""  # why the error is None


@dataclass
class Measured:
    """One table's candidates, the transforms that declined it (spec, why), and the transforms' remarks."""

    table: Table
    candidates: list[Candidate]
    declined: list[tuple[str, str]]
    remarks: list[str] = field(default_factory=list)
    rms: float | None = None  # the float table's own RMS, when its data was read

    def keep_within(self, max_error: float, relative: bool = False, said: str = "") -> None:
        """Drop the forms whose error RMS is above `max_error` (times the table's own RMS when `relative`), or
        unknown (they join `declined`, saying so); `said` is the budget as the user wrote it."""
        bar = max_error * self.rms if relative and self.rms is not None else None if relative else max_error
        said = said or f"{max_error:g}"
        kept = [self.candidates[0]]
        for c in self.candidates[1:]:
            if c.error_rms is not None and bar is not None and c.error_rms <= bar:
                kept.append(c)
                continue
            error = "not measured" if c.error_rms is None else f"{c.error_rms:.3g}"
            of = f" ({c.error_rms / self.rms:.0%} of the table's RMS)" if relative and bar is not None \
                and c.error_rms is not None and self.rms else ""
            self.declined.append((c.spec, f"{c.representation}: error RMS {error}{of}, above --max-error {said}"))
        self.candidates[:] = kept


def apply_plan(module: Op, tables: list[Measured], picks: tuple[int, ...]) -> None:
    """Transform each table of `module` into the form `picks` chose for it: one run of each transform chosen, on the
    tables that chose it.  The errors are known already, so they are not measured again."""
    chosen: dict[str, set[str]] = {}
    for m, i in zip(tables, picks):
        if m.candidates[i].spec:
            chosen.setdefault(m.candidates[i].spec, set()).add(m.table.name)
    for spec, names in chosen.items():
        transform(table_transform(spec), module, names, None)


class Measurer:
    """Measures candidates on one machine; a form of a table whose bags have the same shapes and inputs as one
    simulated already (another table of the model) is not simulated again."""

    def __init__(self, machine: Machine, errors: bool = True):
        self.machine, self.errors = machine, errors
        self.runs: dict[tuple[str, str], tuple[float, float]] = {}  # (bags and inputs, form) -> cycles, energy

    def table(self, module: Op, table: Table, specs: list[str], inputs: dict[str, np.ndarray],
              data: np.ndarray | None, why_no_data: str) -> Measured:
        """Every candidate of `table` in `module`: the float table first, then each transform of `specs` that takes
        it (a form two specs give, such as TT ranks capped alike, once)."""
        base = isolate(module, table.name)
        run_inputs = feeds(base, inputs)
        bags = [op for op in func_of(base).body.ops if op.name == "emb.bag"]
        shape = repr([(sorted(b.attrs.items()), [str(v.type) for v in b.operands]) for b in bags])
        digest = hashlib.sha256(shape.encode() + b"".join(
            np.ascontiguousarray(run_inputs[name]).tobytes() for name in base.attrs["inputs"])).hexdigest()
        cycles, energy = self.run(base, run_inputs, (digest, "float32"))
        out = Measured(table, [Candidate("", "float32", table.bytes, 0.0, 0.0, cycles, energy)], [],
                       rms=None if data is None else float(np.sqrt(np.mean(np.square(data, dtype=np.float64)))))
        weights = {table.name: data} if data is not None and self.errors else None
        why = "not asked for (--no-errors)" if not self.errors else why_no_data or "the table's data could not be read"
        for spec in specs:
            p = table_transform(spec)
            one = isolate(module, table.name)
            transform(p, one, None, weights)
            out.remarks.extend(p.remarks)
            figures = p.stats  # type: ignore[attr-defined]
            if not figures:
                reason = p.remarks[-1].split(f"remark: {p.name}: ", 1)[-1] if p.remarks else "not converted"
                out.declined.append((spec, reason.removeprefix(f"{p.declined}: ")))
                continue
            f = figures[0]
            if any(c.representation == f.representation for c in out.candidates):
                continue
            cycles, energy = self.run(one, run_inputs, (digest, f.representation))
            out.candidates.append(Candidate(spec, f.representation, f.bytes_after, f.error_max, f.error_rms, cycles,
                                            energy, f.unmeasured and why))
        return out

    def run(self, module: Op, run_inputs: dict[str, np.ndarray], key: tuple[str, str]) -> tuple[float, float]:
        """Cycles and energy of `module` at -O3, simulated timing-only: float params are address ranges and the
        other params (quantized rows) zeros, since values never decide addresses or timing.  `key` (the bags'
        shapes and inputs, and the form) says when the same program has run on the same inputs already, for
        another table of the same shape."""
        hit = self.runs.get(key)
        if hit is not None:
            return hit
        passes = parse_pipeline(PRESETS[LEVEL], self.machine)  # -O3's choices for the machine it runs on
        run_passes(module, passes)
        program = passes[-1].program  # type: ignore[attr-defined]
        virtual = virtual_symbols(program)
        for n, s in enumerate(program.symbols):
            if s.kind == "param" and n not in virtual:
                program.data[n] = np.zeros(s.shape, dtype_of(s.dtype))
        _, st = simulate(program, run_inputs, self.machine, engine="fast", timing_only=True)
        self.runs[key] = hit = (float(st["cycles"]), float(st["energy_j"]))
        return hit
