"""ember-plan: a representation per embedding table (float, int8, int4, TT, ROBE) under a memory budget."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import click

from ..files import display_name
from ..ir.diagnostics import EmberError
from .common import command, guarded, write_outputs

UNITS = {"": 1, "k": 10 ** 3, "kb": 10 ** 3, "m": 10 ** 6, "mb": 10 ** 6, "g": 10 ** 9, "gb": 10 ** 9,
         "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30}


def parse_budget(text: str, float_bytes: int) -> int:
    """`--budget`: bytes (`4000000`, `400MB`, `1.5GiB`), or a compression factor of the float tables (`10x`)."""
    s = text.strip().lower()
    m = re.fullmatch(r"(\d+(?:\.\d*)?)\s*(x|[kmg]i?b?|)", s)
    if not m or (m.group(2) == "x" and float(m.group(1)) <= 0):
        raise EmberError(f"--budget must be bytes (e.g. 4000000, 400MB, 1.5GiB) or a compression factor of the "
                         f"float tables greater than 0 (e.g. 10x), got '{text}'")
    number, unit = float(m.group(1)), m.group(2)
    if unit == "x":
        return int(float_bytes / number)
    if unit not in UNITS:
        raise EmberError(f"--budget: unknown unit '{unit}' in '{text}' (KB, MB, GB, KiB, MiB, GiB or x)")
    return int(number * UNITS[unit])


DEFAULT_MAX_ERROR = "10%"  # of the table's own RMS: a form that loses more than that keeps little of the table


def parse_max_error(text: str, explicit: bool) -> tuple[float, bool] | None:
    """`--max-error`: (bar, relative) for an RMS (`0.05`) or a share of the table's RMS (`10%`); None for `none`,
    and for the default when no error is measured (--no-errors: the budget could judge nothing)."""
    s = text.strip().lower()
    if s == "none" or not explicit:
        return None
    m = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)\s*(%?)", s)
    if not m:
        raise EmberError(f"--max-error must be an RMS (e.g. 0.05), a share of the table's RMS (e.g. 10%) or none, "
                         f"got '{text}'")
    return (float(m.group(1)) / 100, True) if m.group(2) else (float(m.group(1)), False)


@click.command(**command("ember-plan"))
@click.argument("model")
@click.option("--budget", required=True, metavar="BYTES|FACTORx",
              help="memory for the embedding tables: bytes (4000000, 400MB, 1.5GiB) or a compression factor of the "
                   "float32 tables (10x)")
@click.option("--machine", default="default", show_default=True, metavar="NAME|FILE.toml",
              help="machine preset name or .toml file, as ember-sim takes")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="override a machine parameter")
@click.option("--objective", type=click.Choice(["cycles", "energy"]), default="cycles", show_default=True,
              help="what the plan minimises: simulated cycles, or simulated energy")
@click.option("-o", "--output", metavar="OUT.eir", help="write the model with the chosen transforms applied")
@click.option("--inputs", "inputs_path", metavar="IN.npz",
              help="the model's inputs, by name, for bags whose indices are model inputs (others are drawn from "
                   "their static shapes)")
@click.option("--candidate", "specs", multiple=True, metavar="PASS{..}",
              help="a transform to try on every table instead of the default ones (repeatable), e.g. "
                   "'tt-decompose{ranks=4}'")
@click.option("--suite", default="paper", show_default=True, metavar="tiny|quick|paper|huge",
              help="for a bench workload (RM3, RM1_L2, MP_wiki-Talk, ...): the scale of its tables")
@click.option("--max-error", default=DEFAULT_MAX_ERROR, show_default=True, metavar="RMS|N%|none",
              help="leave out every candidate whose reconstruction error RMS is above this (or not measured): an "
                   "RMS, or N% of the table's own RMS, or none; the default applies only when errors are measured")
@click.option("--no-errors", is_flag=True, help="do not measure reconstruction errors (faster on large tables)")
@click.option("--plot", "plot_path", metavar="FILE.png|FILE.svg", help="draw the Pareto front (needs matplotlib)")
@click.option("--json", "json_path", metavar="FILE", help="write the candidates, the plan and the front as JSON")
@click.option("--remarks", is_flag=True, help="print the transforms' remarks: what each did to each table, or why not")
@guarded("ember-plan")
def main(model: str, budget: str, machine: str, overrides: tuple[str, ...], objective: str, output: str | None,
         inputs_path: str | None, specs: tuple[str, ...], suite: str, max_error: str, no_errors: bool,
         plot_path: str | None, json_path: str | None, remarks: bool) -> None:
    """Choose a representation for each embedding table of MODEL (.eir, .onnx, .pt, .pt2, or a bench workload
    such as RM3) that minimises the simulated cycles (or energy) of its bags within a memory budget.

    Each table's candidates (float32, int8, int4, TT at ranks 8/16/32, ROBE at 16x/100x/1000x) are made by the
    table transforms, compiled at -O3 and simulated timing-only; their bytes and reconstruction errors are the
    transforms' own figures.  Deep hash embeddings need a trained MLP and are never a candidate.  The plan is
    exact (a dynamic program over the tables); the report gives each table's candidates, the plan, and the
    Pareto front of memory, cycles and error over whole plans.

    \b
      ember-plan model.eir --budget 10x -o planned.eir --plot front.png
      ember-plan RM3 --budget 10x --suite paper
    """
    from .. import dialects  # noqa: F401
    from ..ir.printer import print_module
    from ..machine import load_machine
    from ..plan.candidates import Measurer, apply_plan, default_specs, table_transform
    from ..plan.choose import Option, front, optimal
    from ..plan.report import Outcome, as_json, plot, text
    from ..plan.source import read_source
    from ..plan.tables import find_tables
    from .sim import load_inputs

    start = time.perf_counter()
    outputs = [p for p in (output, plot_path, json_path) if p and p != "-"]
    if len(set(outputs)) < len(outputs):
        raise EmberError("-o, --plot and --json need a file each")
    if output == "-" and json_path == "-":
        raise EmberError("-o and --json cannot both write to stdout")
    fmt = ""
    if plot_path:
        fmt = Path(plot_path).suffix.lower().lstrip(".")
        if fmt not in ("png", "svg"):
            raise EmberError(f"--plot writes .png or .svg, got '{plot_path}'")
        from ..bench.plot import require_matplotlib

        require_matplotlib()
    budget_error = parse_max_error(max_error, explicit=max_error != DEFAULT_MAX_ERROR or not no_errors)
    m = load_machine(machine).with_overrides(overrides)
    candidates = list(specs) or default_specs()
    for spec in candidates:
        table_transform(spec)  # a bad spec stops here, before any work
    given = load_inputs(inputs_path) if inputs_path else {}
    source = read_source(model, output, suite)
    tables = find_tables(source.module)
    if not tables:
        raise EmberError("no emb.bag over a float32 param: nothing to plan", display_name(model))
    float_bytes = sum(t.bytes for t in tables)
    limit = parse_budget(budget, float_bytes)
    measurer = Measurer(m, errors=not no_errors)
    measured = []
    for t in tables:
        data = None if no_errors else source.table_data(t.name)
        try:
            measured.append(measurer.table(source.module, t, candidates, source.inputs | given, data,
                                           source.why_no_data))
        except EmberError as e:
            raise EmberError(f"table '{t.name}': {e.message}", e.where) from None
        del data
    if budget_error is not None:
        for x in measured:
            x.keep_within(*budget_error, said=max_error)
    errors_known = all(c.error_rms is not None for x in measured for c in x.candidates)
    options = [[Option(c.bytes, c.energy_j if objective == "energy" else c.cycles,
                       (c.error_rms or 0.0) ** 2 * x.table.rows * x.table.dim) for c in x.candidates]
               for x in measured]
    chosen = optimal(options, limit)
    if chosen is None:
        smallest = sum(min(o.bytes for o in opts) for opts in options)
        within = "" if budget_error is None else (f" within --max-error {max_error} (the forms above it are listed "
                                                  "as declined; give a looser one, or none)")
        raise EmberError(f"no plan fits a budget of {limit:,} bytes: the smallest plan{within} takes {smallest:,} "
                         f"bytes ({float_bytes / smallest:.2f}x smaller than the float32 tables' {float_bytes:,})")
    outcome = Outcome(source.label, m.name, objective, limit, measured, chosen, front(options), errors_known,
                      simulations=len(measurer.runs), note=source.note)
    files: list[tuple[str, str | bytes]] = []
    if output:
        apply_plan(source.module, measured, chosen.picks)
        files.append((output, print_module(source.module)))
    outcome.seconds = time.perf_counter() - start
    if plot_path:
        files.append((plot_path, plot(outcome, fmt)))
    if json_path:
        files.append((json_path, as_json(outcome)))
    if remarks:
        for x in measured:
            for r in x.remarks:
                click.echo(r, err=True)
    report = text(outcome)
    write_outputs(files)
    click.echo(report, nl=False, err=output == "-" or json_path == "-")
    sys.stdout.flush()
