"""ember-disasm: `.bin` -> canonical `.dae` text."""

from __future__ import annotations

import click

from ..files import display_name, read_bytes
from .common import command, guarded, write_output


@click.command(**command("ember-disasm"))
@click.argument("input", default="-")
@click.option("-o", "--output", default="-", show_default=True, help="output .dae file ('-' for stdout)")
@guarded("ember-disasm")
def main(input: str, output: str) -> None:
    """Print the program in INPUT (.bin, '-' for stdin) as .dae assembly."""
    from ..backend.binary import disassemble
    from ..backend.dae_text import print_dae

    write_output(output, print_dae(disassemble(read_bytes(input), display_name(input))))
