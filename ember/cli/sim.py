"""ember-sim: run a `.bin` on inputs; write outputs and statistics, print a summary table."""

from __future__ import annotations

import io
import zipfile

import click
import numpy as np

from ..bounded_zip import check_declared
from ..files import display_name, read_bytes
from ..ir.diagnostics import EmberError
from ..sim.cycle_limit import DEFAULT_MAX_CYCLES
from .common import (
    command,
    guarded,
    host_runtime_option,
    report_console,
    trace_files,
    trace_options,
    trace_request,
    write_outputs,
)

# What docs/demo.md explains, in its order: the dispatch slots used and each cause the front end waited for add up
# to the cycles (with host.cycles), so all of them are here.
SUMMARY = ("cycles", "sim_seconds", "tokens", "operands", "callbacks", "access.elements", "execute.instructions",
           "execute.uops", "execute.busy_cycles", "execute.starved_cycles", "execute.load_stall_cycles",
           "execute.pop_stall_cycles", "execute.compute_stall_cycles", "execute.store_stall_cycles",
           "execute.mispredict_cycles", "execute.branch_mispredicts",
           "access.stall_cycles", "queue_max_occupancy", "dram_bytes", "dram_bandwidth_fraction", "sol.bound_cycles",
           "sol_fraction", "roofline.bound_cycles", "roofline_fraction", "host.cycles", "energy_j", "power_w")


def load_inputs(path: str) -> dict[str, np.ndarray]:
    data = read_bytes(path)
    if data[:4] not in (b"PK\x03\x04", b"PK\x05\x06"):  # np.load would take a .npy or a pickle instead
        raise EmberError("not an .npz file (not a zip archive)", display_name(path))
    check_declared(display_name(path), io.BytesIO(data))  # numpy allocates and inflates what members declare
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
        raise EmberError(f"not a readable .npz file ({e})", display_name(path)) from None


def npz_bytes(outputs: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **outputs)
    return buf.getvalue()


def _fmt(v: float) -> str:
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:,.1f}" if abs(v) >= 1000 else f"{v:.4g}"


def check_outputs(got: dict[str, np.ndarray], want: dict[str, np.ndarray], path: str) -> None:
    for name, ref in want.items():
        if name not in got:
            raise EmberError(f"output '{name}' is in {path} but the program has no such output")
        a = got[name]
        if a.shape != ref.shape or not np.allclose(a, ref, rtol=1e-5, atol=1e-6, equal_nan=True):
            err = np.nanmax(np.abs(a - ref)) if a.shape == ref.shape else f"shape {a.shape} vs {ref.shape}"
            raise EmberError(f"output '{name}' differs from {path} (max abs difference {err})")
    click.echo(f"outputs match {path} ({', '.join(want)}; rtol 1e-5, atol 1e-6)", err=True)


@click.command(**command("ember-sim"))
@click.argument("program")
@click.option("--inputs", "inputs_path", required=True, help=".npz with one array per model input, by name")
@click.option("--outputs", "outputs_path", help="write the model outputs here (.npz, by output name)")
@click.option("--stats", "stats_path", help="write all statistics here: gem5-style text, or JSON for .json")
@click.option("--machine", default="default", show_default=True, help="machine preset name or .toml file")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="override a machine parameter")
@click.option("--max-cycles", type=float, metavar="N",
              help=f"stop with an error once the run passes N simulated cycles (default {DEFAULT_MAX_CYCLES:g}, "
                   "over 100 times the longest benchmark run; 'inf' for no limit). Both engines check it at every "
                   "backward branch, callback and traversal-unit iteration, and stop at the same cycle")
@click.option("--engine", default=None, metavar="fast|reference",
              help="fast: the program compiled to C (needs a C compiler; the default); reference: the "
                   "event-by-event definition, about 100x slower. Both give the same statistics.")
@click.option("--timing-only", is_flag=True, help="tables are address ranges with no data (fast engine): "
              "statistics only, no outputs; the program's param data may be absent")
@click.option("--check", "check_path", help="compare the outputs with this .npz (rtol 1e-5, atol 1e-6)")
@click.option("-q", "--quiet", is_flag=True, help="do not print the summary table")
@trace_options
@host_runtime_option
@guarded("ember-sim")
def main(program: str, inputs_path: str, outputs_path: str | None, stats_path: str | None, machine: str,
         overrides: tuple[str, ...], max_cycles: float | None, engine: str | None, timing_only: bool,
         check_path: str | None, quiet: bool, host_runtime: str | None, trace_path: str | None,
         trace_window: str | None, trace_limit: int, timeline_path: str | None) -> None:
    """Simulate PROGRAM (.bin, '-' for stdin) on a DAE machine.

    Inputs and outputs are named after the model's inputs and outputs.  The fast engine (default)
    compiles the program to C once (cached in ~/.cache/ember/fast) and gives the same statistics as
    the reference engine; --timing-only simulates tables of any size without their data.
    Statistics (docs/architecture.md): cycles, tokens and operands marshaled, queue occupancy, cache
    and DRAM traffic, the fraction of DRAM bandwidth used, the speed-of-light bound of the program's
    operations (sol.*, which does not depend on its code) with the fraction of it reached, this
    program's own roofline, and its energy: energy.<block>_j for each block and static power, their
    sum energy_j, and power_w (the machine's [energy] numbers; docs/architecture.md, Energy).

    Host ops (the operators kept as ONNX) run as ONNX models, one per run of consecutive host ops,
    with onnxruntime when installed and onnx.reference otherwise (--host-runtime); their time is
    the host-op roofline whichever runs them.
    """
    from ..backend.binary import disassemble
    from ..host import set_runtime
    from ..machine import load_machine
    from ..sim.engines import DEFAULT_ENGINE, check_engine, simulate
    from ..sim.stats import stats_text

    set_runtime(host_runtime)
    engine = engine or DEFAULT_ENGINE
    check_engine(engine)
    if timing_only and (outputs_path or check_path):
        raise EmberError("--timing-only computes no outputs: leave out --outputs and --check")
    prog = disassemble(read_bytes(program), display_name(program))
    m = load_machine(machine).with_overrides(overrides)
    request = trace_request(trace_path, timeline_path, trace_window, trace_limit)
    events = request.events(m) if request else None
    outputs, stats = simulate(prog, load_inputs(inputs_path), m, max_cycles, engine=engine, timing_only=timing_only,
                              trace=events)
    if engine == "fast":
        from ..sim.fast.engine import notes

        for note in notes:
            click.echo(f"ember-sim: note: {note}", err=True)
    if check_path:  # before writing: a failed check leaves no outputs
        check_outputs(outputs, load_inputs(check_path), check_path)
    files: list[tuple[str, str | bytes]] = []
    if outputs_path:
        files.append((outputs_path, npz_bytes(outputs)))
    if stats_path:
        files.append((stats_path, stats_text(stats, stats_path)))
    if events is not None:
        files += trace_files([(events, prog)], m, trace_path, timeline_path, display_name(program), "ember-sim")
    write_outputs(files)  # all or none: a --stats that cannot be written leaves no --outputs behind
    if not quiet:
        from rich.table import Table

        table = Table(title=f"ember-sim: {display_name(program)} on machine '{m.name}'")
        table.add_column("statistic")
        table.add_column("value", justify="right")
        table.add_column("unit")
        table.add_column("meaning")
        for name in SUMMARY:
            s = stats.get(name)
            if s is not None:
                table.add_row(name, _fmt(s.value), s.unit, s.description)
        report_console(outputs_path, trace_path, timeline_path).print(table)
