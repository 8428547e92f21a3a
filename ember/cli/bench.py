"""ember-bench: run the benchmark suite at each variant, print the comparison tables, write rows and plots."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..ir.diagnostics import EmberError
from .common import guarded, write_output

if TYPE_CHECKING:  # imported lazily at run time so `--help` stays fast
    from ..bench.run import Result
    from ..bench.workloads import Workload
    from ..sim.machine import Machine

SUITES = ("tiny", "quick", "paper")


def parse_list(text: str, valid: tuple[str, ...], what: str) -> list[str]:
    """Comma-separated names, checked against `valid`, duplicates dropped, order kept."""
    items = list(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    if not items:
        raise EmberError(f"no {what} given (valid: {', '.join(valid)})")
    for item in items:
        if item not in valid:
            raise EmberError(f"unknown {what} '{item}' (valid: {', '.join(valid)})")
    return items


def to_csv(table: list[dict[str, Any]]) -> str:
    from ..bench.report import csv_fields

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=csv_fields(table), lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    return buf.getvalue()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--suite", "scale", default="quick", show_default=True, metavar="tiny|quick|paper",
              help="workload sizes: tiny (about half a minute for the nine workloads), quick (a few minutes; "
                   "make bench), paper (the published sizes: hours with the reference engine)")
@click.option("--only", metavar="PREFIX,...", help="run only workloads whose name starts with one of these, "
                                                   "e.g. RM1,RM3_L2")
@click.option("--variants", default="O0,O1,O2,O3,hand,core", show_default=True, metavar="V,...",
              help="what to run per workload: O0..O3 compiled at that level, hand = the hand-written DAE "
                   "program, core = compiled for the core alone (no access unit)")
@click.option("--machine", default="default", show_default=True, metavar="NAME|FILE.toml",
              help="machine preset name or .toml file")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="override a machine parameter (repeatable), e.g. dram.bytes_per_cycle=16")
@click.option("--json", "json_path", metavar="FILE", help="write the machine and one row per workload x variant "
                                                          "with every statistic as JSON ('-' for stdout)")
@click.option("--csv", "csv_path", metavar="FILE", help="write the same rows as CSV ('-' for stdout)")
@click.option("--plot", "plot_dir", metavar="DIR", help="write speedup.png and vs_handwritten.png here "
                                                        "(needs matplotlib: pip install 'ember[plot]')")
@click.option("-q", "--quiet", is_flag=True, help="no progress bar and no tables (errors are still printed)")
@guarded("ember-bench")
def main(scale: str, only: str | None, variants: str, machine: str, overrides: tuple[str, ...],
         json_path: str | None, csv_path: str | None, plot_dir: str | None, quiet: bool) -> None:
    """Run the benchmark suite (WORKLOADS.md) on the simulated DAE machine and compare with published figures.

    Every workload is compiled at each variant, simulated, checked against numpy, and measured.
    The tables show, where the variants needed were run: the speedup of O1-O3 over O0 (published
    Fig. 13 in parentheses); O3 as a share of hand-written performance (Fig. 16) with each one's
    roofline fraction; the DAE machine at O3 against the core alone; and useful bandwidth as a
    share of DRAM peak next to a measured H100 GPU's share of its copy bandwidth for the same
    embedding shape.  Published figures are gem5 runs at paper scale, ours are at the chosen
    scale and machine, so compare trends, not digits.

    The paper suite (8 tables x 1M rows, 512 bags) needs hours with the reference engine; use
    tiny or quick for a first look.  Any error (e.g. a missing hand-written baseline: leave out
    'hand' from --variants) is one line on stderr with exit status 1.
    """
    from ..bench.run import VARIANTS
    from ..bench.workloads import suite
    from ..sim.machine import load_machine

    if scale not in SUITES:
        raise EmberError(f"unknown suite '{scale}' (valid: {', '.join(SUITES)})")
    chosen = parse_list(variants, VARIANTS, "variant")
    prefixes = [p.strip() for p in only.split(",") if p.strip()] if only else None
    workloads = suite(scale, prefixes)
    if not workloads:
        names = ", ".join(w.name for w in suite(scale))
        raise EmberError(f"no workload matches --only {only} (workloads: {names})")
    if json_path == "-" and csv_path == "-":
        raise EmberError("--json and --csv cannot both write to stdout")
    m = load_machine(machine).with_overrides(overrides)
    if plot_dir:  # a missing extra or an unusable directory should stop the run before the simulations
        from ..bench.plot import require_matplotlib

        require_matplotlib()
        _make_dir(plot_dir)
    results = _run_all(workloads, chosen, m, quiet)

    from ..bench import report

    if json_path or csv_path:
        table = report.rows(results, workloads, m, overrides)
        if json_path:
            doc = {"suite": scale, "variants": chosen,
                   "machine": {"name": m.name, "overrides": list(overrides),
                               "parameters": {k: v for k, v, _ in m.describe()}},
                   "rows": table}
            write_output(json_path, json.dumps(doc, indent=1) + "\n")
        if csv_path:
            write_output(csv_path, to_csv(table))
    if plot_dir:
        _plot(results, f"{report.caption(m, overrides, scale)} {report.published_note('Markers')}", plot_dir)
    if not quiet:
        from rich.console import Console

        console = Console(stderr="-" in (json_path, csv_path))
        if not console.is_terminal:
            console.width = 120  # piped or captured: wide enough that the tables do not wrap
        for t in report.tables(results, workloads):
            console.print(t)
            console.print()
        console.print(f"{report.caption(m, overrides, scale)} {report.published_note()}", highlight=False)


def _run_all(workloads: list[Workload], variants: list[str], m: Machine, quiet: bool) -> list[Result]:
    """Every workload x variant, with a progress bar on stderr naming the item being simulated."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..bench.run import handwritten, run

    if "hand" in variants:  # fail before hours of simulation, not after
        for kind in dict.fromkeys(w.kind for w in workloads):
            handwritten(kind)
    results: list[Result] = []
    columns = (TextColumn("{task.description:<16}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True, disable=quiet) as progress:
        task = progress.add_task("", total=len(workloads) * len(variants))
        for w in workloads:
            for v in variants:
                progress.update(task, description=f"{w.name} {v}")
                results.append(run(w, v, m))
                progress.advance(task)
    return results


def _make_dir(directory: str) -> None:
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EmberError(f"cannot create the plot directory: {e.strerror or e}", directory) from None


def _plot(results: list[Result], caption: str, directory: str) -> None:
    from ..bench.plot import NAMES, needs, render

    images = render(results, caption)
    folder = Path(directory)
    for name in NAMES:
        if name in images:
            write_output(str(folder / name), images[name])
        else:
            click.echo(f"ember-bench: note: {name} not written (needs variants {needs(name)})", err=True)
