"""ember-asm: `.dae` assembly -> `.bin` (with the weights it names embedded)."""

from __future__ import annotations

from pathlib import Path

import click

from ..files import base_dir, display_name, read_text
from ..ir.diagnostics import EmberError
from .common import command, guarded, write_output


@click.command(**command("ember-asm"))
@click.argument("input", default="-")
@click.option("-o", "--output", default="-", show_default=True, help="output .bin file ('-' for stdout)")
@click.option("--no-tables", is_flag=True,
              help="leave out the data of float params (the embedding tables) and of the params a transform "
              "derives from them (NAME#int8, #int4, #tt/..., #robe/...): a small .bin for "
              "`ember-sim --timing-only`, which needs only their shapes")
@click.option("--weights", "weights_path", metavar="FILE",
              help="read the params from this model or weights file instead of the one the program's .weights "
                   "line names (that one is relative to the .dae, so a copied .dae can point back with this)")
@guarded("ember-asm")
def main(input: str, output: str, no_tables: bool, weights_path: str | None) -> None:
    """Assemble INPUT (.dae, '-' for stdin) into a versioned, checksummed binary.

    Param tensors are read by name from the file named by `.weights` (relative to the .dae), or
    from --weights, and embedded, so the .bin runs on its own.
    """
    from ..backend.binary import assemble
    from ..backend.dae_text import parse_dae
    from ..frontends import load_weights_any as load_weights
    from ..passes.derived import link_param

    program = parse_dae(read_text(input), display_name(input))
    params = [(n, s) for n, s in enumerate(program.symbols) if s.kind == "param"]
    if no_tables:
        from ..sim.fast.engine import virtual_symbols

        virtual = virtual_symbols(program)
        params = [(n, s) for n, s in params if n not in virtual]
    if params:
        if weights_path is None and not program.weights:
            raise EmberError("the program has params but no .weights file (give one with --weights FILE)",
                             display_name(input))
        path = Path(weights_path) if weights_path is not None else base_dir(input) / program.weights
        if not path.exists():  # the error is at the missing file, as a missing input's is
            how = "" if weights_path is not None else (f" (the .weights of {display_name(input)} names it, relative "
                                                       "to the .dae; give another with --weights FILE)")
            raise EmberError(f"no such file{how}", str(path))
        weights = load_weights(str(path))
        for n, s in params:
            a = link_param(weights, s.name)  # a derived param (NAME#int8) is computed from NAME
            if a is None:
                raise EmberError(f"param '{s.name}' is not in the weights file {program.weights}", display_name(input))
            if list(a.shape) != list(s.shape) or a.dtype.name != _np_name(s.dtype):
                raise EmberError(f"param '{s.name}' is {a.dtype}{list(a.shape)} in {program.weights}, "
                                 f"but the program declares {s.dtype}{list(s.shape)}", display_name(input))
            program.data[n] = a
    write_output(output, assemble(program))


def _np_name(dtype: str) -> str:
    from ..sim.tensors import dtype_of

    return dtype_of(dtype).name
