"""What ember-plan prints, writes as JSON, and plots: each table's candidates, the chosen plan, the Pareto front."""

from __future__ import annotations

import io
import json
import math
import textwrap
from dataclasses import dataclass

from ..bench.plot import require_matplotlib
from .candidates import NOT_DERIVABLE, Candidate, Measured
from .choose import Plan

FRONT_SHOWN = 24  # front plans printed; --json holds every one


@dataclass
class Outcome:
    label: str
    machine: str
    objective: str  # "cycles" or "energy"
    budget: int
    tables: list[Measured]
    plan: Plan
    front: list[Plan]
    errors_known: bool  # every candidate's error was measured: the front has its error axis
    seconds: float = 0.0
    simulations: int = 0
    note: str = ""

    def picked(self, plan: Plan) -> list[Candidate]:
        return [m.candidates[i] for m, i in zip(self.tables, plan.picks)]

    def float_plan(self) -> Plan:
        return next((p for p in self.front if not any(p.picks)), _float(self))

    def elements(self) -> int:
        return sum(m.table.rows * m.table.dim for m in self.tables)

    def rms(self, plan: Plan) -> float | None:
        return math.sqrt(plan.sse / self.elements()) if self.errors_known else None

    def error_max(self, plan: Plan) -> float | None:
        maxes = [c.error_max for c in self.picked(plan)]
        return None if any(e is None for e in maxes) else max(maxes)  # type: ignore[type-var]

    def energy(self, plan: Plan) -> float:
        return sum(c.energy_j for c in self.picked(plan))

    def cycles(self, plan: Plan) -> float:
        return sum(c.cycles for c in self.picked(plan))


def _float(o: Outcome) -> Plan:
    cands = [m.candidates[0] for m in o.tables]
    return Plan(tuple(0 for _ in cands), sum(c.bytes for c in cands), 0.0, 0.0)


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


COLUMNS = 100  # what the report fits in: longer lines wrap, their continuations indented
REP = 34  # the representation column; a longer representation takes a line of its own


def text(o: Outcome) -> str:
    out = io.StringIO()

    def put(line: str = "", indent: int = 4) -> None:
        lead = len(line) - len(line.lstrip(" "))
        out.write(textwrap.fill(line, COLUMNS, subsequent_indent=" " * (lead + indent), break_long_words=False,
                                break_on_hyphens=False) + "\n" if line else "\n")

    def row(rep: str, numbers: str) -> None:
        if len(rep) > REP:
            put(f"  {rep}")
            rep = ""
        out.write(f"  {rep:{REP}s}{numbers}\n")

    floats = sum(m.table.bytes for m in o.tables)
    put(f"ember-plan: {o.label} on machine '{o.machine}': -O3, each table's bags simulated timing-only; "
        f"objective: least {o.objective}")
    if o.note:
        put(f"note: {o.note}")
    put(f"budget: {o.budget:,} bytes ({floats / o.budget:.2f}x smaller than the float32 tables' {floats:,})")
    for m in o.tables:
        t = m.table
        put()
        put(f"table {t.name} ({t.rows:,} x {t.dim} f32, {t.bags} bag{'s' if t.bags > 1 else ''})")
        row("representation", f"{'bytes':>13s} {'ratio':>7s} {'cycles':>11s} {'energy uJ':>9s} {'error max':>9s} "
            f"{'error RMS':>9s}")
        for c in m.candidates:
            row(c.representation, f"{c.bytes:>13,} {t.bytes / c.bytes:>7.2f} {c.cycles:>11,.0f} "
                f"{c.energy_j * 1e6:>9.4g} {_num(c.error_max):>9s} {_num(c.error_rms):>9s}")
        for spec, why in m.declined:
            put(f"  not a candidate: {spec}: {why}")
        unmeasured = next((c.unmeasured for c in m.candidates if c.unmeasured), "")
        if unmeasured:
            put(f"  error not measured: {unmeasured}")
    put(NOT_DERIVABLE)
    put()
    p, base = o.plan, o.float_plan()
    put(f"plan (least {o.objective} within the budget):")
    for m, c in zip(o.tables, o.picked(p)):
        put(f"  {m.table.name}: {c.representation}")
        put(f"      {c.bytes:,} bytes, {c.cycles:,.0f} cycles, error RMS {_num(c.error_rms)}")
    cyc, fcyc = o.cycles(p), o.cycles(base)
    put(f"  total: {p.bytes:,} bytes ({floats / p.bytes:.2f}x smaller; budget {o.budget:,}), {cyc:,.0f} cycles "
        f"({cyc / fcyc:.2f}x the float32 tables' {fcyc:,.0f}), energy {o.energy(p) * 1e6:.4g} uJ, "
        f"error RMS {_num(o.rms(p))}, max {_num(o.error_max(p))}")
    put()
    axes = "bytes, " + o.objective + (", error RMS over all the tables' elements" if o.errors_known else
                                      " (errors not measured)")
    shown = _spread(o.front, p)
    put(f"Pareto front ({axes}): {len(o.front)} plans" + (f", {len(shown)} shown" if len(shown) < len(o.front)
                                                            else ""))
    for q in shown:
        mark = "*" if q == p else " "
        reps = ", ".join(c.representation.split(" ")[0] + _rank(c) for c in o.picked(q))
        put(f" {mark}{q.bytes:>13,} bytes {o.cycles(q):>11,.0f} cycles {o.energy(q) * 1e6:>9.4g} uJ  "
            f"RMS {_num(o.rms(q)):>8s}  {reps}", indent=6)
    put(f"planned in {o.seconds:.1f} s ({o.simulations} programs simulated)")
    return out.getvalue()


def _rank(c: Candidate) -> str:
    """The short form's detail: TT's ranks, ROBE's size."""
    for key in ("ranks=", "size="):
        if key in c.representation:
            return "/" + c.representation.split(key, 1)[1].split(" ")[0]
    return ""


def _spread(front: list[Plan], chosen: Plan) -> list[Plan]:
    """At most FRONT_SHOWN plans of the front, evenly spread over it, the chosen one always among them."""
    if len(front) <= FRONT_SHOWN:
        return front
    step = len(front) / FRONT_SHOWN
    picked = {front[int(i * step)] for i in range(FRONT_SHOWN)} | {chosen, front[-1]}
    return [p for p in front if p in picked]


def as_json(o: Outcome) -> str:
    def plan(p: Plan) -> dict[str, object]:
        return {"bytes": p.bytes, "cycles": o.cycles(p), "energy_j": o.energy(p), "error_rms": o.rms(p),
                "error_max": o.error_max(p),
                "tables": {m.table.name: c.representation for m, c in zip(o.tables, o.picked(p))}}

    tables = [{"table": m.table.name, "rows": m.table.rows, "dim": m.table.dim, "bags": m.table.bags,
               "candidates": [vars(c) for c in m.candidates],
               "declined": [{"spec": s, "why": w} for s, w in m.declined]} for m in o.tables]
    return json.dumps({"model": o.label, "machine": o.machine, "objective": o.objective, "budget": o.budget,
                       "tables": tables, "not_derivable": {"dhe": NOT_DERIVABLE.split(": ", 1)[1]},
                       "plan": plan(o.plan), "float": plan(o.float_plan()), "front": [plan(p) for p in o.front],
                       "seconds": o.seconds}, indent=1) + "\n"


def plot(o: Outcome, fmt: str) -> bytes:
    """The front as memory against cycles (or energy), coloured by error RMS; the chosen plan, the float tables
    and the budget marked."""
    figure, canvas = require_matplotlib()
    fig = figure(figsize=(7.0, 4.5))
    ax = fig.add_subplot()
    scale = 1e6 if o.objective == "energy" else 1.0
    ys = [(o.energy(p) if o.objective == "energy" else o.cycles(p)) * scale for p in o.front]
    xs = [p.bytes for p in o.front]
    colours = [o.rms(p) or 0.0 for p in o.front]
    dots = ax.scatter(xs, ys, c=colours, cmap="viridis", s=12, zorder=3)
    steps: list[tuple[int, float]] = []  # the plans no plan beats in bytes and cost alone: what a budget picks from
    for x, y in sorted(zip(xs, ys)):
        if not steps or y < steps[-1][1]:
            steps.append((x, y))
    ax.step(*zip(*steps), where="post", color="#c44e52", linewidth=1, zorder=2,
            label=f"least {o.objective} within a budget")
    if o.errors_known:
        fig.colorbar(dots, ax=ax, label="error RMS")
    for p, label, marker in ((o.plan, "chosen plan", "*"), (o.float_plan(), "float32 tables", "s")):
        y = (o.energy(p) if o.objective == "energy" else o.cycles(p)) * scale
        ax.scatter([p.bytes], [y], marker=marker, s=160 if marker == "*" else 60, facecolors="none",
                   edgecolors="#c44e52", linewidths=1.5, zorder=4, label=label)
    ax.axvline(o.budget, color="#888888", linestyle="--", label="budget")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("bytes of the tables")
    ax.set_ylabel("energy (uJ)" if o.objective == "energy" else "simulated cycles")
    ax.set_title(f"ember-plan: {o.label}, machine '{o.machine}': Pareto front of {len(o.front)} plans", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    canvas(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=120, bbox_inches="tight")
    return buf.getvalue()
