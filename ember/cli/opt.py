"""ember-opt: run passes over `.eir`; a pipeline ending in `codegen` writes `.dae` assembly, any other writes the
level it reaches as `.eir` or, with --emit=mlir, as MLIR generic syntax."""

from __future__ import annotations

import dataclasses
import sys
import textwrap
from typing import TYPE_CHECKING

import click

from ..files import base_dir, display_name, read_text, rebase
from ..ir.diagnostics import EmberError
from .common import command, guarded, write_outputs

if TYPE_CHECKING:
    from ..passes.base import Pass


COLUMNS = 100  # what --list-passes fits in


def _list_passes(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from ..passes import PASSES, PRESETS

    width = max(map(len, PASSES)) + 2
    for name in sorted(PASSES):
        cls = PASSES[name]
        opts = ", ".join(f.name for f in dataclasses.fields(cls) if f.repr)
        text = cls.summary + (f" [options: {opts}]" if opts else "")
        click.echo(textwrap.fill(text, COLUMNS, initial_indent=f"{name:{width}s}", subsequent_indent=" " * width))
    click.echo("\nPresets: the option to type (or, in parentheses, a name), then the same pipeline as --pass:")
    for label, pipeline in presets(PRESETS):
        click.echo(f"  {label}")
        # break only after a comma, so each line is whole pass names
        click.echo(textwrap.fill(f"--pass={pipeline}".replace(",", ", "), COLUMNS, initial_indent="      ",
                                 subsequent_indent="        ", break_on_hyphens=False).replace(", ", ","))
    ctx.exit()


def presets(named: dict[str, str]) -> list[tuple[str, str]]:
    """What --list-passes prints: each preset under the option that selects it, and -O3 without choose-plan, the
    way to opt out of its estimate."""
    out = []
    for name, pipeline in named.items():
        label = "--target=core" if name == "core" else OPTION_OF.get(name, f"({name})")
        out.append((label, pipeline))
        if name == "O3":
            out.append(("(-O3 without choose-plan)", pipeline.replace("choose-plan,", "")))
    return out


LEVELS = {
    "0": "lower-emb, decouple, to-dlc, codegen",
    "1": "-O0 plus vectorize",
    "2": "-O1 plus bufferize",
    "3": "-O2 plus every other optimization (--list-passes names them), except on embedding ops that a static "
         "estimate says are cheaper on the core or as -O0 leaves them (choose-plan). That estimate uses the numbers "
         "of the machine --machine and --set describe (give the ones ember-sim will run), and is a model: to "
         "optimize every op, give the '(-O3 without choose-plan)' --pass that --list-passes prints",
}
PAPER_LEVELS = ("paper-O1", "paper-O2", "paper-O3")  # the published study's ladder, typed -Opaper-O3
TYPED_LEVELS = {**{k: "O" + k for k in LEVELS}, **{k: k for k in PAPER_LEVELS}}  # what -O takes -> its preset
OPTION_OF = {preset: "-O" + typed for typed, preset in TYPED_LEVELS.items()}  # a preset -> the option that runs it


@click.command(**command("ember-opt"),
               epilog="Levels: " + "; ".join(f"-O{k}: {v}" for k, v in LEVELS.items()) + ".")
@click.argument("input", default="-")
@click.option("-o", "--output", default="-", show_default=True, help="output file ('-' for stdout)")
@click.option("-p", "--pass", "pipeline", help="passes to run, e.g. 'lower-emb,decouple,to-dlc,codegen'")
@click.option("-O", "level", metavar="LEVEL",
              help="optimization level, written -O0 .. -O3, or -Opaper-O1 .. -Opaper-O3 for the published "
                   "study's ladder (each writes .dae; see below)")
@click.option("--target", type=click.Choice(["dae", "core"]), default="dae", show_default=True,
              help="dae: access unit + execute unit; core: execute-unit code only (the non-decoupled baseline), one "
                   "fixed pipeline that takes no -O level or --pass")
@click.option("--machine", default="default", show_default=True, metavar="NAME|FILE.toml",
              help="the machine the program will run on (a preset name or .toml file, as ember-sim takes): -O3's "
                   "choose-plan estimates each plan's cycles on it")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="override a parameter of that machine, as ember-sim --set does")
@click.option("--emit", type=click.Choice(["eir", "mlir"]), default="eir", show_default=True,
              help="how to write the level the passes reach: eir, Ember's own text, or mlir, MLIR's generic "
                   "operation syntax with Ember's dialects as unregistered dialects, which ember-import reads back "
                   "(docs/mlir.md); not for a pipeline ending in codegen, which writes .dae")
@click.option("--print-ir-after-all", is_flag=True, help="print the IR to stderr after every pass")
@click.option("--time-passes", is_flag=True, help="print the time each pass took to stderr")
@click.option("--remarks", is_flag=True, help="print why passes declined to transform something")
@click.option("--stats", "stats_path", metavar="FILE",
              help="write what the lossy table transforms (quantize-tables, tt-decompose, robe) did to each table as "
                   "JSON: representation, bytes before and after, reconstruction error max and RMS")
@click.option("--list-passes", is_flag=True, expose_value=False, is_eager=True, callback=_list_passes,
              help="list the passes and presets, then exit")
@guarded("ember-opt")
def main(input: str, output: str, pipeline: str | None, level: str | None, target: str, machine: str,
         overrides: tuple[str, ...], emit: str, print_ir_after_all: bool, time_passes: bool, remarks: bool,
         stats_path: str | None) -> None:
    """Run passes over INPUT (.eir, '-' for stdin) and write .eir (or MLIR with --emit=mlir), or .dae when the last
    pass is codegen."""
    import ember.dialects  # noqa: F401

    from ..backend.dae_text import print_dae
    from ..ir.mlir_print import print_mlir
    from ..ir.parser import parse_module
    from ..ir.printer import print_module
    from ..machine import load_machine
    from ..passes import PRESETS, parse_pipeline, run_passes
    from ..passes.codegen import Codegen

    if level is not None:  # -O takes its level attached (-O3): name the valid ones, not click's 'No such option'
        if level not in TYPED_LEVELS:
            if not level[:1].isdigit() and not level.startswith("paper-"):  # `-O x.eir`: click took the next arg
                raise EmberError(f"-O needs a level attached, -O0 .. -O3 (it got '{level}')")
            raise EmberError(f"-O{level} is not an optimization level; the levels are "
                             f"{', '.join('-O' + k for k in TYPED_LEVELS)} (--list-passes shows their passes)")
        level = TYPED_LEVELS[level]
    if pipeline and level:
        raise EmberError("give either --pass or an -O level, not both")
    if target == "core":
        if pipeline or level:
            raise EmberError(f"--target=core runs one fixed pipeline ({PRESETS['core']}): give it no "
                             f"{'--pass' if pipeline else '-' + str(level)}")
        level = "core"
    if stats_path is not None and stats_path in ("-", "", output):
        raise EmberError(f"--stats needs a file of its own, not '{stats_path}'"
                         + (" (the output)" if stats_path == output else ""))
    m = load_machine(machine).with_overrides(overrides)
    passes = parse_pipeline(pipeline or PRESETS[level or "O0"], m) if (pipeline or level) else []
    if any(isinstance(p, Codegen) for p in passes[:-1]):
        raise EmberError("codegen must be the last pass of a pipeline")
    if emit == "mlir" and passes and isinstance(passes[-1], Codegen):
        raise EmberError("--emit=mlir writes an Ember level, but this pipeline ends in codegen, which writes .dae: "
                         "give a --pass pipeline without codegen (--list-passes shows each -O level's)")
    module = parse_module(read_text(input), display_name(input))
    weights = module.attrs.get("weights")
    for p in passes:  # passes that read the data (quantize-tables) get the weights file as seen from here
        if isinstance(weights, str) and weights and hasattr(p, "weights_file"):
            p.weights_file = str(base_dir(input) / weights)
    if isinstance(weights, str):
        module.attrs["weights"] = rebase(weights, input, output)
    timings: dict[str, float] = {}
    run_passes(module, passes, print_after_all=print_ir_after_all, timings=timings)
    if remarks:
        for p in passes:
            for r in getattr(p, "remarks", []):
                click.echo(r, err=True)
    if time_passes:
        total = sum(timings.values()) or 1e-12
        click.echo("===- pass execution timing -===", err=True)
        for name, t in timings.items():
            click.echo(f"  {t * 1000:9.3f} ms  {100 * t / total:5.1f}%  {name}", err=True)
        click.echo(f"  {total * 1000:9.3f} ms  100.0%  total", err=True)
    last = passes[-1] if passes else None
    if isinstance(last, Codegen):
        assert last.program is not None
        files = [(output, print_dae(last.program))]
    else:
        files = [(output, print_mlir(module) if emit == "mlir" else print_module(module))]
    if stats_path:  # all or none, with the output
        files.append((stats_path, table_stats(passes)))
    write_outputs(files)
    sys.stdout.flush()


def table_stats(passes: list[Pass]) -> str:
    """The JSON of --stats: per pass that transforms tables, its figures per table, in pipeline order."""
    import json

    out = [{"pass": p.name, "tables": [f.as_json() for f in p.stats]} for p in passes if hasattr(p, "stats")]
    return json.dumps({"passes": out}, indent=2) + "\n"
