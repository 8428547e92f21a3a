"""ember-import: a model (ONNX) -> `.eir` at level `emb`."""

from __future__ import annotations

import os

import click

from ..ir.printer import print_module
from .common import base_dir, guarded, write_output


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("-o", "--output", default="-", show_default=True, help="output .eir file ('-' for stdout)")
@guarded("ember-import")
def main(model: str, output: str) -> None:
    """Import MODEL as Ember IR at level `emb`: an .onnx file from either PyTorch exporter, a traced
    TorchScript archive (.pt, from torch.jit.trace + torch.jit.save) or a torch.export archive (.pt2).
    Neither PyTorch format needs torch installed.

    Embedding lookups become emb.gather, EmbeddingBags emb.bag, message-passing scatters
    emb.scatter_rows; every other operator becomes a host.onnx op.  Weights stay in the model: the
    .eir names the model file (relative to the .eir) and the tools that need the data read it there.
    """
    from ..frontends import import_model

    ref = os.path.relpath(os.path.abspath(model), base_dir(output))
    module = import_model(model, ref)
    for w in getattr(module, "warnings", []):
        click.echo(f"ember-import: {w}", err=True)
    write_output(output, print_module(module))
