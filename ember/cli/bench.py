"""ember-bench: run the benchmark suite at each variant, print the comparison tables, write rows and plots."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..files import read_text
from ..ir.diagnostics import EmberError
from ..sim.engines import DEFAULT_ENGINE, ENGINES, check_engine
from .common import (
    command,
    guarded,
    report_console,
    trace_files,
    trace_options,
    trace_request,
    write_outputs,
)

if TYPE_CHECKING:  # imported lazily at run time so `--help` stays fast
    from rich.console import Console
    from rich.progress import Progress

    from ..bench.run import Hands, Result
    from ..bench.workloads import Workload
    from ..machine import Machine
    from ..sim.trace import TraceOptions


FORM_VARIANTS = "O0,O1,O2,O3,hand,core"  # the representations suites' default --variants


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


@click.command(**command("ember-bench"))
@click.option("--suite", "scale", default="quick", show_default=True,
              metavar="tiny|quick|paper|huge|representations[-tiny|-paper]",
              help="workload sizes: tiny (seconds), quick (make bench), paper (the published sizes; graphs as one "
                   "mini-batch: 4,096 destination nodes for MP, about 65,536 edges for GNN), huge (one table of "
                   "100M rows x D=128, 51 GB if it held data: --timing-only only); representations: the RM1-RM3 "
                   "tables at quick size as float32, int8, int4, TT, ROBE and DHE, with bytes and reconstruction "
                   "error (representations-tiny: at tiny size; representations-paper: at paper size, --timing-only "
                   "only)")
@click.option("--only", metavar="PREFIX,...", help="run only workloads whose name starts with one of these, "
                                                   "e.g. RM1,RM3_L2")
@click.option("--variants", default="O0,O1,O2,paper-O3,O3,hand,core", show_default=True, metavar="V,...",
              help="what to run per workload: O0..O3 compiled at that level, paper-O3 = the published study's -O3 "
                   "(O1 and O2 are its other rungs), hand = the expert's hand-written DAE program (or --hand), "
                   "core = compiled for the core alone (no access unit)")
@click.option("--hand", "hands", multiple=True, metavar="KIND=FILE.dae",
              help="your own DAE kernel as the hand-written baseline of every workload of KIND (bag_sum, "
                   "bag_weighted, gather, or a form of --suite representations: qbag8, qbag4, ttbag, robe, dhe), "
                   "checked against numpy like the built-in ones, its .work records against the compiled "
                   "workload's (they set its speed of light); repeatable, and with several for one KIND the "
                   "fastest is the baseline")
@click.option("--machine", default="default", show_default=True, metavar="NAME|FILE.toml",
              help="machine preset name or .toml file")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="override a machine parameter (repeatable), e.g. dram.channels=2")
@click.option("--json", "json_path", metavar="FILE", help="write the machine and one row per workload x variant "
                                                          "with every statistic as JSON ('-' for stdout)")
@click.option("--csv", "csv_path", metavar="FILE", help="write the same rows as CSV ('-' for stdout)")
@click.option("--plot", "plot_dir", metavar="DIR",
              help="write speedup.png and vs_handwritten.png here, or with --sweep the --plot-sweep figures "
                   "(needs matplotlib: pip install 'ember[plot]')")
@click.option("--engine", default=DEFAULT_ENGINE, show_default=True, metavar="|".join(ENGINES),
              help="simulator engine: fast (compiled kernels) or reference (the event-by-event oracle); both give "
                   "the same statistics")
@click.option("--timing-only", is_flag=True,
              help="simulate timing only: the tables get no data (the fast engine sees address ranges), so none "
                   "is generated and no output is checked; every statistic is the same as with data. Needs the "
                   "fast engine")
@click.option("--compare-engines", is_flag=True,
              help="run every workload x variant on the reference engine, then on the fast one; stop at the first "
                   "statistic they disagree on, else print each one's host time and speed (and write those rows "
                   "with --json/--csv)")
@click.option("--speed", is_flag=True,
              help="also print the simulation speed: host seconds, lookups and simulated cycles per host second "
                   "per workload x variant, and the process's peak resident memory")
@click.option("--sweep", "sweeps", multiple=True, metavar="KEY=V1,V2,...",
              help="sweep mode: run every point of the cartesian product of these values (repeatable). KEY is any "
                   "--set key, 'variant' (replaces --variants) or 'engine', e.g. --sweep dram.channels=1,2,4,8")
@click.option("--sweep-out", "sweep_out", metavar="FILE.jsonl",
              help="with --sweep: append one JSON row per point as it finishes; rerunning the same command skips "
                   "the points already in FILE, so a killed sweep resumes")
@click.option("--jobs", "-j", type=int, metavar="N",
              help="with --sweep: points run in N local processes at once (default: one per CPU; 1 runs inline)")
@click.option("--scheduler", metavar="tcp://HOST:PORT",
              help="with --sweep: run the points on this Dask distributed scheduler instead of local processes "
                   "(pip install 'ember[dask]'; its workers need ember installed)")
@click.option("--plot-sweep", "plot_sweeps", multiple=True, metavar="METRIC:PARAM",
              help="with --sweep and --plot DIR: draw statistic METRIC against swept PARAM, one line per workload "
                   "x variant x other swept values (repeatable; default cycles against each swept key)")
@click.option("--vs-gpu", is_flag=True,
              help="compare the DAE servers (dae-server-iso-bw, dae-server-iso-power) with the measured GPU on the "
                   "GPU's own shapes: time, energy and perf/W of each workload that has a GPU row (needs "
                   "--timing-only; docs/workloads.md, DAE vs GPU)")
@click.option("--gpu-data", metavar="FILE.json",
              help="with --vs-gpu: GPU measurements written by ember-gpu-bench instead of the shipped H100 file")
@click.option("--model", "models", multiple=True, metavar="FILE[:INPUTS.npz]",
              help="with --vs-gpu: also an end-to-end model (any file ember-import reads; inputs default to "
                   "NAME.in.npz beside it), one inference at O3 on one core of each server, against the GPU's "
                   "forward pass of a model of the same name where --gpu-data has one (repeatable)")
@click.option("-q", "--quiet", is_flag=True, help="no progress bar and no tables (errors are still printed)")
@trace_options
@click.pass_context
@guarded("ember-bench")
def main(ctx: click.Context, scale: str, only: str | None, variants: str, hands: tuple[str, ...], machine: str,
         overrides: tuple[str, ...],
         json_path: str | None, csv_path: str | None, plot_dir: str | None, engine: str, timing_only: bool,
         compare_engines: bool, speed: bool, sweeps: tuple[str, ...], sweep_out: str | None, jobs: int | None,
         scheduler: str | None, plot_sweeps: tuple[str, ...], vs_gpu: bool, gpu_data: str | None,
         models: tuple[str, ...], quiet: bool, trace_path: str | None, trace_window: str | None, trace_limit: int,
         timeline_path: str | None) -> None:
    """Run the benchmark suite (docs/workloads.md) on the simulated DAE machine and compare with published figures.

    Every workload is compiled at each variant, simulated, checked against numpy (unless
    --timing-only), and measured.
    The tables show, where the variants needed were run: the speedup of O1-O3 over O0 (published
    Fig. 13 in parentheses); O3 as a share of hand-written performance (Fig. 16) with each one's
    roofline fraction; the DAE machine at O3 against the core alone; useful bandwidth as a
    share of DRAM peak next to a measured H100 GPU's share of its copy bandwidth for the same
    embedding shape; and each point's energy per lookup and average power.  --plot adds
    energy_breakdown.png; --vs-gpu compares time and energy with the GPU on its own shapes.
    Published figures are gem5 runs at paper scale, ours are at the chosen scale and machine, so
    compare trends, not digits.

    The paper suite has 8 tables x 1M rows and 512 bags per RM workload; the graph workloads keep
    the whole graph as the table and aggregate one mini-batch of destination nodes (4,096 for MP,
    about 65,536 edges' worth for GNN).  It takes minutes with the fast engine (the default) and
    hours with the reference one.  The huge suite is one RM3-like table of 100 million rows
    (D=128, pooling 80, uniform, 4,096 bags): it runs only with --timing-only.

    \b
      ember-bench --suite quick                           # the quick suite: every level, its tables
      ember-bench --suite paper --timing-only             # the published sizes, timing only (minutes)
      ember-bench --suite huge --timing-only --speed      # speed and peak memory, 51 GB table
      ember-bench --suite quick --only RM3 --compare-engines --variants O0,O3
      ember-bench --suite representations --only RM3     # RM3's table as float, int8, int4, TT, ROBE, DHE

    The hand-written baselines are experts' kernels (samples/handwritten/); challenge the compiler
    with your own, e.g. ember-bench --hand bag_sum=my.dae --only RM3.  Any error (a kernel that
    does not assemble, at its file:line:col; a wrong result, naming the workload) is one line on
    stderr with exit status 1.

    Sweeps (--sweep) run every workload x variant at every combination of the swept values, in
    parallel, for example:

    \b
      ember-bench --suite tiny --only RM1_L0 --sweep variant=O0,O3 \\
          --sweep dram.channels=1,2,4,8 --sweep-out sweep.jsonl \\
          --csv sweep.csv --plot figs --plot-sweep cycles:dram.channels

    Each row holds the workload, the variant, every swept value and every statistic.  Rerun
    the same command after an interruption and only the points missing from --sweep-out run.
    """
    from ..bench.run import VARIANTS
    from ..bench.suites import SUITES, suite
    from ..machine import load_machine

    if scale not in SUITES:
        raise EmberError(f"unknown suite '{scale}' (valid: {', '.join(SUITES)})")
    if scale.startswith("representations") and ctx.get_parameter_source("variants") is \
            click.core.ParameterSource.DEFAULT:
        variants = FORM_VARIANTS
    chosen = parse_list(variants, VARIANTS, "variant")
    hand_kernels = _read_hands(hands, chosen)
    prefixes = [p.strip() for p in only.split(",") if p.strip()] if only else None
    workloads = suite(scale, prefixes)
    if not workloads:
        names = ", ".join(w.name for w in suite(scale))
        raise EmberError(f"no workload matches --only {only} (workloads: {names})")
    if json_path == "-" and csv_path == "-":
        raise EmberError("--json and --csv cannot both write to stdout")
    check_engine(engine)
    _check_modes(ctx, workloads, engine, timing_only, compare_engines, speed, sweeps, plot_dir)
    m = load_machine(machine).with_overrides(overrides)
    if not sweeps:
        for name, given in (("--sweep-out", sweep_out), ("--jobs", jobs), ("--scheduler", scheduler),
                            ("--plot-sweep", plot_sweeps)):
            if given:
                raise EmberError(f"{name} applies to sweeps only (add --sweep KEY=V1,V2,...)")
    request = trace_request(trace_path, timeline_path, trace_window, trace_limit)
    if request:
        other = "--vs-gpu" if vs_gpu else "--sweep" if sweeps else "--compare-engines" if compare_engines else None
        if other:
            raise EmberError(f"--trace and --timeline record one plain run, not {other}")
        if len(workloads) * len(chosen) != 1:
            raise EmberError(f"--trace and --timeline record one run: choose one workload with --only (this selects "
                             f"{len(workloads)}) and one variant with --variants (this selects {len(chosen)})")
    if plot_dir:  # a missing extra or an unusable directory should stop the run before the simulations
        from ..bench.plot import require_matplotlib

        require_matplotlib()
    if vs_gpu:
        _vs_gpu(ctx, scale, workloads, overrides, timing_only, json_path, csv_path, plot_dir, quiet,
                bool(sweeps or compare_engines or hand_kernels or speed), gpu_data, models)
        return
    if gpu_data or models:
        raise EmberError(f"{'--gpu-data' if gpu_data else '--model'} applies to --vs-gpu runs only")
    if sweeps:
        swept = {item.partition("=")[0].strip() for item in sweeps}
        for param, key in (("variants", "variant"), ("engine", "engine")):
            if key in swept and ctx.get_parameter_source(param) is not click.core.ParameterSource.DEFAULT:
                raise EmberError(f"--{param} and --sweep {key}=... both given (keep one)")
        if hand_kernels:
            raise EmberError("--hand applies to plain runs and --compare-engines, not to sweeps")
        _sweep(scale, workloads, chosen, m, overrides, engine, timing_only, sweeps, sweep_out, jobs, scheduler,
               plot_sweeps, plot_dir, json_path, csv_path, quiet)
        return
    if compare_engines:
        _compare(scale, workloads, chosen, m, overrides, json_path, csv_path, quiet, hand_kernels)
        return
    if plot_dir:
        _make_dir(plot_dir)
    results = _run_all(workloads, chosen, m, quiet, [engine], timing_only, hand_kernels, request)
    _print_notes(results)
    files: list[tuple[str, str | bytes]] = []  # every output, written all or none
    if request:
        runs = results[0].trace or []
        title = f"{workloads[0].name} {chosen[0]}, table 0, on machine '{m.name}'"
        files += trace_files(runs, m, trace_path, timeline_path, title, "ember-bench")

    from ..bench import report

    if json_path or csv_path:
        table = report.rows(results, workloads, m, overrides)
        files += _rows_files(json_path, lambda: _json_doc(scale, chosen, m, overrides, table, engine=engine,
                                                          timing_only=timing_only), csv_path, table)
    if plot_dir:
        files += _plot(results, f"{report.caption(m, overrides, scale)} {report.published_note('Markers')}",
                       plot_dir)
    write_outputs(files)
    if not quiet:
        console = _console(json_path, csv_path, trace_path, timeline_path)
        forms = scale.startswith("representations")
        tables = report.representations_tables(results, workloads) if forms else report.tables(results, workloads)
        if speed:
            tables.append(report.speed_table(results, engine, timing_only))
        for t in tables:
            console.print(t)
            console.print()
        mode = " Timing only: the tables held no data and no output was checked." if timing_only else ""
        note = "" if forms else f" {report.published_note()}"  # the representations' published ratios: a caption
        console.print(f"{report.caption(m, overrides, scale)}{mode}{note}", highlight=False)


def _check_modes(ctx: click.Context, workloads: list[Workload], engine: str, timing_only: bool,
                 compare_engines: bool, speed: bool, sweeps: tuple[str, ...], plot_dir: str | None) -> None:
    """Refuse combinations of --timing-only, --compare-engines, --speed and the rest before anything runs."""
    given = ctx.get_parameter_source("engine") is not click.core.ParameterSource.DEFAULT
    if speed and (sweeps or compare_engines):
        other = "--sweep rows hold" if sweeps else "--compare-engines shows"
        raise EmberError(f"--speed prints the speed of a plain run ({other} the host-time figures already)")
    if timing_only and engine == "reference":
        raise EmberError("--timing-only needs the fast engine (the reference engine always moves data); "
                         "leave out --engine reference")
    if not timing_only and not compare_engines:
        for w in workloads:
            w.require_data()
    if not compare_engines:
        return
    if timing_only or any(w.virtual for w in workloads):
        raise EmberError("--compare-engines runs the reference engine, which has no timing-only mode "
                         "(leave out --timing-only, and use another suite than huge)")
    for name, bad in (("--engine", given), ("--sweep", sweeps), ("--plot", plot_dir)):
        if bad:
            raise EmberError(f"--compare-engines and {name} both given (--compare-engines runs both engines, "
                             "and writes rows with --json/--csv)")


def _json_doc(scale: str, variants: list[str], m: Machine, overrides: tuple[str, ...], table: list[dict[str, Any]],
              **run: Any) -> str:
    """The --json document: what ran, on which machine, the rows, and the process's peak memory."""
    from ..bench.report import peak_rss_bytes

    doc = {"suite": scale, "variants": variants, **run, "machine": _machine_doc(m, overrides),
           "peak_rss_bytes": peak_rss_bytes(), "rows": table}
    return json.dumps(doc, indent=1) + "\n"


def _machine_doc(m: Machine, overrides: tuple[str, ...]) -> dict[str, Any]:
    return {"name": m.name, "overrides": list(overrides), "parameters": {k: v for k, v, _ in m.describe()}}


def _rows_files(json_path: str | None, json_text: Callable[[], str], csv_path: str | None,
                rows: list[dict[str, Any]]) -> list[tuple[str, str | bytes]]:
    """The --json and --csv outputs (written with the others, all or none)."""
    files: list[tuple[str, str | bytes]] = []
    if json_path:
        files.append((json_path, json_text()))
    if csv_path:
        files.append((csv_path, to_csv(rows)))
    return files


def _console(*paths: str | None) -> Console:
    """Tables go to stdout, or to stderr when stdout carries one of these outputs (--json -, --csv -, ...)."""
    console = report_console(*paths)
    if not console.is_terminal:
        console.width = 100  # piped or captured: the width the tables are laid out for
    return console


def _print_notes(results: list[Result]) -> None:
    """What the engine said about a run (e.g. the fast engine handing a program to the reference), once each."""
    for note in dict.fromkeys(n for r in results for n in r.notes):
        click.echo(f"ember-bench: note: {note}", err=True)


def _compare(scale: str, workloads: list[Workload], variants: list[str], m: Machine, overrides: tuple[str, ...],
             json_path: str | None, csv_path: str | None, quiet: bool, hands: Hands) -> None:
    """--compare-engines: each point on the reference engine, then the fast one; statistics must agree."""
    from ..bench import report
    from ..bench.run import first_difference

    results = _run_all(workloads, variants, m, quiet, ["reference", "fast"], False, hands)
    _print_notes(results)
    pairs = list(zip(results[0::2], results[1::2]))
    for ref, fast in pairs:
        diff = first_difference(ref.stats, fast.stats)
        if diff is not None:
            raise EmberError(f"{ref.workload} {ref.variant}: the engines disagree on {diff}")
    table = report.compare_rows(pairs, m, overrides)
    write_outputs(_rows_files(json_path, lambda: _json_doc(scale, variants, m, overrides, table,
                                                           engine="reference,fast", timing_only=False),
                              csv_path, table))
    if not quiet:
        console = _console(json_path, csv_path)
        console.print(report.compare_table(pairs))
        console.print()
        console.print(report.caption(m, overrides, scale), highlight=False)


def _vs_gpu(ctx: click.Context, scale: str, workloads: list[Workload], overrides: tuple[str, ...], timing_only: bool,
            json_path: str | None, csv_path: str | None, plot_dir: str | None, quiet: bool, other_mode: bool,
            gpu_data: str | None, models: tuple[str, ...]) -> None:
    """--vs-gpu: every workload's GPU twin on both server presets, against the measured GPU rows; then each
    --model file on one core of each."""
    from ..bench import vs_gpu
    from ..bench.gpu import ModelCase, model_case
    from ..bench.published import load_gpu_baseline
    from ..bench.run import compile_file, run
    from ..sim.engines import simulate as simulate_program
    from .sim import load_inputs

    if not timing_only:
        raise EmberError("--vs-gpu simulates the GPU's table sizes (up to 4 GB), so it needs --timing-only")
    for param in ("machine", "variants"):
        if ctx.get_parameter_source(param) is not click.core.ParameterSource.DEFAULT:
            raise EmberError(f"--vs-gpu runs O3 on its own server presets; leave out --{param}")
    if other_mode:
        raise EmberError("--vs-gpu is a run of its own (leave out --sweep, --compare-engines, --hand and --speed)")
    gpu = load_gpu_baseline(gpu_data)
    cases = [model_case(m, load_inputs) for m in models]
    programs = {c.file: compile_file(c.file, "O3") for c in cases}  # a model that fails stops the run before it starts
    with _progress(quiet) as progress:
        task = progress.add_task("", total=2 * (sum(gpu.match_time(w) is not None for w in workloads) + len(cases)))

        def simulate(w: Workload, m: Machine) -> dict[str, float]:
            progress.update(task, description=f"{w.name} on {m.name}")
            res = run(w, "O3", m, timing_only=True)
            progress.advance(task)
            return res.stats

        def simulate_model(case: ModelCase, m: Machine) -> dict[str, float]:
            progress.update(task, description=f"{case.name} on {m.name}")
            stats = simulate_program(programs[case.file], case.feeds, m)[1]
            progress.advance(task)
            return stats

        points = vs_gpu.compare(workloads, gpu, overrides, simulate)
        points += vs_gpu.compare_models(cases, gpu, overrides, simulate_model)
    table = [p.row() for p in points]
    doc = {"suite": scale, "vs_gpu": True, "gpu": {"device": gpu.device, "torch": gpu.torch},
           "machines": {basis: _machine_doc(m, overrides) for basis, m in vs_gpu.machines(overrides)}, "rows": table}
    files = _rows_files(json_path, lambda: json.dumps(doc, indent=1) + "\n", csv_path, table)
    if plot_dir:
        from ..bench.plot import render_vs_gpu

        _make_dir(plot_dir)
        files.append((str(Path(plot_dir) / "vs_gpu.png"), render_vs_gpu(points)))
    write_outputs(files)
    if not quiet:
        console = _console(json_path, csv_path)
        for t in vs_gpu.tables(points, gpu):
            console.print(t)
            console.print()


def _progress(quiet: bool) -> Progress:
    """The progress bar on stderr (stdout may carry --csv -), gone once the run ends, off under -q or when stderr
    is not a terminal."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    columns = (TextColumn("{task.description:<16}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    # off where stderr is no terminal: there it would draw nothing but leave a stray blank line before errors
    return Progress(*columns, console=console, transient=True, disable=quiet or not console.is_terminal)


def _read_hands(items: tuple[str, ...], variants: list[str]) -> Hands:
    """--hand KIND=FILE.dae, each file assembled now, so a bad one stops the run before any simulation."""
    from ..backend.dae_text import parse_dae
    from ..bench.run import Baseline
    from ..bench.workloads import KINDS

    out: Hands = {}
    for item in items:
        kind, eq, path = (x.strip() for x in item.partition("="))
        if not eq or not path:
            raise EmberError(f"--hand {item}: expected KIND=FILE.dae")
        if kind not in KINDS:
            raise EmberError(f"--hand {item}: unknown workload kind '{kind}' (valid: {', '.join(KINDS)})")
        out.setdefault(kind, []).append(Baseline(Path(path).name, parse_dae(read_text(path), path)))
    if out and "hand" not in variants:
        raise EmberError("--hand gives a baseline, but 'hand' is not among --variants")
    return out


def _check_handwritten(workloads: list[Workload], variants: list[str], hands: Hands | None = None) -> None:
    """Fail before hours of simulation, not after, when a hand-written baseline is missing."""
    from ..bench.run import baselines

    if "hand" in variants:
        for w in workloads:
            baselines(w, hands)


def _run_all(workloads: list[Workload], variants: list[str], m: Machine, quiet: bool, engines: list[str],
             timing_only: bool, hands: Hands | None = None, trace: TraceOptions | None = None) -> list[Result]:
    """Every workload x variant x engine in that order (but `hand` where no expert kernel computes the workload), with
    a progress bar on stderr naming what is simulated."""
    from ..bench.run import baselines, run

    _check_handwritten(workloads, variants, hands)
    points = [(w, v) for w in workloads for v in variants if v != "hand" or baselines(w, hands)]  # no expert: no hand
    results: list[Result] = []
    with _progress(quiet) as progress:
        task = progress.add_task("", total=len(points) * len(engines))
        for w, v in points:
            for engine in engines:
                label = f"{w.name} {v}" + (f" {engine}" if len(engines) > 1 else "")
                progress.update(task, description=label)
                results.append(run(w, v, m, engine=engine, timing_only=timing_only, hands=hands, trace=trace))
                progress.advance(task)
    return results


def _sweep(scale: str, workloads: list[Workload], variants: list[str], m: Machine, overrides: tuple[str, ...],
           engine: str, timing_only: bool, sweeps: tuple[str, ...], sweep_out: str | None, jobs: int | None,
           scheduler: str | None, plot_sweeps: tuple[str, ...], plot_dir: str | None, json_path: str | None,
           csv_path: str | None, quiet: bool) -> None:
    """--sweep: check everything, skip the points --sweep-out already holds, run the rest, write rows and plots."""
    from ..bench import sweep as sw

    if jobs is not None and jobs < 1:
        raise EmberError(f"--jobs must be at least 1, got {jobs}")
    if jobs is not None and scheduler:
        raise EmberError("--jobs and --scheduler both given (the Dask cluster decides how many points run at once)")
    if sweep_out == "-":
        raise EmberError("--sweep-out needs a file (it is read back to resume a sweep)")
    fixed = [item.partition("=")[0].strip() for item in overrides]
    plan = sw.Sweep(scale, workloads, variants, sw.parse_axes(sweeps, m, fixed), m, overrides, engine, timing_only)
    if timing_only and any(plan.engine_of(p) == "reference" for p in plan.points):
        raise EmberError("--timing-only needs the fast engine (the reference engine always moves data); "
                         "leave reference out of --sweep engine=...")
    plots = sw.parse_plots(plot_sweeps, plan) if plot_sweeps else sw.default_plots(plan) if plot_dir else []
    if plot_sweeps and not plot_dir:
        raise EmberError("--plot-sweep needs --plot DIR (the directory the figures go to)")
    _check_handwritten(workloads, plan.variants)
    if plot_dir:
        _make_dir(plot_dir)

    done = sw.load_finished(sweep_out, plan) if sweep_out else {}
    pending = [p for p in plan.points if p.key() not in done]
    if done and not quiet:
        skipped = len(plan.points) - len(pending)
        click.echo(f"ember-bench: {skipped} of {len(plan.points)} points already in {sweep_out}, skipped", err=True)
    client = sw.connect(scheduler) if scheduler and pending else None
    out = sw.Appender(sweep_out)
    try:
        with _progress(quiet) as progress:
            bar = progress.add_task(pending[0].label() if pending else "", total=len(pending))

            def started(p: sw.Point) -> None:
                progress.update(bar, description=p.label())

            def finished(p: sw.Point) -> None:
                progress.update(bar, advance=1, description=p.label())

            done.update(sw.run_sweep(plan, pending, out, jobs or sw.cpu_count(), client, started, finished))
    finally:
        out.close()
        if client is not None:
            client.close()

    rows = [done[p.key()] for p in plan.points]
    doc = {"suite": scale, "machine": _machine_doc(m, overrides),
           "sweep": {"variant": plan.variants, **{a.key: a.values for a in plan.axes}}, "rows": rows}
    files = _rows_files(json_path, lambda: json.dumps(doc, indent=1) + "\n", csv_path, rows)
    if plot_dir:
        from ..bench.plot import render_sweep, sweep_file_name

        for metric, param in plots:
            image = render_sweep(rows, metric, param, plan.keys, sw.caption(plan))
            files.append((str(Path(plot_dir) / sweep_file_name(metric, param)), image))
    write_outputs(files)
    if not quiet:
        console = _console(json_path, csv_path)
        console.print(sw.table(rows, plan))
        console.print(sw.caption(plan), highlight=False)


def _make_dir(directory: str) -> None:
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EmberError(f"cannot create the plot directory: {e.strerror or e}", directory) from None


def _plot(results: list[Result], caption: str, directory: str) -> list[tuple[str, str | bytes]]:
    """The figures of a plain run, as outputs to write with the others."""
    from ..bench.plot import NAMES, needs, render

    images = render(results, caption)
    folder = Path(directory)
    files: list[tuple[str, str | bytes]] = []
    for name in NAMES:
        if name in images:
            files.append((str(folder / name), images[name]))
        else:
            click.echo(f"ember-bench: note: {name} not written (needs variants {needs(name)})", err=True)
    return files
