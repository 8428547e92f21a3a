"""The two kinds of bound a run is judged against (docs/architecture.md, docs/benchmark.md: Two bounds), kept apart.

- **Speed of light** (`sol.*`) comes from the embedding operations the program computes (its `.work`
  records, counted from the tensors by work.py), never from its code, so it judges code quality.
  It covers those operations only: a model's host ops (MLPs) are reported as `host.cycles`, and a
  bound that counted them could be raised by adding host work.  It has no access-unit part: the core
  can read any row itself, and every row chunk reaches a register through a core load either way (a
  pop of what the access unit pushed is one too), so no stream element is one every program must issue
  (a program that read half its rows on the core beat such a bound by 1.5x):
  - `sol.dram_cycles`: the compulsory bytes (each distinct row read, every index, offset and weight,
    the output, once) over the DRAM's peak bytes per cycle;
  - `sol.execute_cycles`: the fewest vector FP operations, row-chunk reads and output-chunk stores
    the core must do, each over its pipe group's throughput (the largest of the three);
  - `sol.bound_cycles`, their maximum, and `sol_fraction` = bound / cycles, at most 1.
- **Roofline** (`roofline.*`) comes from this program's own work: its stream elements, DRAM bytes and
  instructions.  `roofline_fraction` says how much of the program's time is not stalls, not how good
  the program is: a program that does twice the work it needs can still reach 1.
"""

from __future__ import annotations

from ..machine import Machine
from .stats import Stats
from .work import WorkCounts


def report_roofline(st: Stats, cycles: float, bounds: dict[str, tuple[float, str]]) -> None:
    """The access, DRAM and execute bounds of this program (value, what it is), the largest, and the share of
    the run it covers."""
    for name, (value, doc) in bounds.items():
        st.set(f"roofline.{name}_cycles", value, f"bound: {doc}", "Cycle")
    limit = max(bounds, key=lambda k: bounds[k][0])
    st.set("roofline.bound_cycles", bounds[limit][0], f"largest bound ({limit})", "Cycle")
    st.set("roofline_fraction", bounds[limit][0] / cycles if cycles else 0.0,
           "bound / cycles: the share of this program's time that is not stalls", "Ratio")


def sol_cycles(counts: WorkCounts, machine: Machine) -> dict[str, float]:
    """The speed-of-light bounds of `counts` on `machine` (one core)."""
    ex = machine.execute
    execute = max(_issue(counts.vector_fp_ops, ex.throughput("fp")), _issue(counts.row_chunks, ex.throughput("load")),
                  _issue(counts.output_chunks, ex.throughput("store")))
    return {"dram": counts.compulsory_bytes / machine.dram_bytes_per_cycle, "execute": execute}


def _issue(n: float, t: float) -> float:
    """The fewest cycles `n` operations need on pipes that take one every `t` cycles: the last starts (n - 1) * t
    after the first and holds its pipe a cycle, or t when that is less.  (n * t, which this is when t <= 1, is no
    bound for a slower pipe: a run can end while the pipe is still busy with its last operation.)"""
    return (n - 1) * t + min(t, 1.0) if n > 0 else 0.0


def report_sol(st: Stats, cycles: float, sol: dict[str, float]) -> None:
    """`sol.*` and `sol_fraction` (module docstring) from `sol_cycles`' bounds."""
    docs = {"dram": "compulsory bytes / DRAM peak bytes per cycle",
            "execute": "fewest vector FP ops, row reads or output stores over their pipes' rates"}
    for name, value in sol.items():
        st.set(f"sol.{name}_cycles", value, f"speed of light: {docs[name]}", "Cycle")
    limit = max(sol, key=lambda k: sol[k])
    st.set("sol.bound_cycles", sol[limit], f"largest speed-of-light bound ({limit})", "Cycle")
    st.set("sol_fraction", sol[limit] / cycles if cycles else 0.0,
           "speed-of-light bound / cycles: how close the code is to what the machine allows", "Ratio")
