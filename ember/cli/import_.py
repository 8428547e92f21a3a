"""ember-import: a model (ONNX, TorchScript, torch.export) -> `.eir` at level `emb`; an Ember level written as MLIR
(`ember-opt --emit=mlir`) -> the same level as `.eir`."""

from __future__ import annotations

import os
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..files import base_dir
from ..ir.core import Op
from ..ir.diagnostics import EmberError
from ..ir.printer import print_module
from .common import command, guarded, host_runtime_option, write_output

if TYPE_CHECKING:
    from ..frontends import NeedsTorch


@click.command(**command("ember-import"))
@click.argument("model")
@click.option("-o", "--output", default="-", show_default=True, help="output .eir file ('-' for stdout)")
@click.option("--example-inputs", "example_inputs", metavar="IN.npz",
              help="for a scripted .pt (torch.jit.script): one array per parameter of forward, by name; only "
                   "their shapes and dtypes are used")
@click.option("--export-to", "export_to", metavar="FILE.pt2",
              help="for a scripted .pt: where to write the torch.export archive the .eir takes its weights "
                   "from [default: OUTPUT with the suffix .scripted.pt2, or MODEL's name in the current "
                   "directory for stdout]")
@click.option("--no-raise", "no_raise", is_flag=True,
              help="keep ROBE, DHE and tensor-train lookups written with tensor ops as the ops they are written "
                   "with, instead of raising them to emb.robe, emb.dhe and emb.ttbag")
@host_runtime_option
@guarded("ember-import")
def main(model: str, output: str, example_inputs: str | None, export_to: str | None, no_raise: bool,
         host_runtime: str | None) -> None:
    """Import MODEL as Ember IR at level `emb`: an .onnx file from either PyTorch exporter, a traced
    TorchScript archive (.pt, from torch.jit.trace + torch.jit.save) or a torch.export archive (.pt2).
    None of these needs torch installed.

    A scripted TorchScript archive (torch.jit.script), whose code has control flow, needs torch
    (pip install 'ember[torch]'): torch loads it, torch.export traces it into a .pt2 file written
    beside the output (--export-to), and that file is imported.  Give its input shapes with
    --example-inputs unless the archive records them.

    Embedding lookups become emb.gather, EmbeddingBags emb.bag, PyTorch's row-wise quantized bags
    (quantized::embedding_bag_byte/4bit_rowwise_offsets) emb.qbag, message-passing scatters
    emb.scatter_rows; every other operator becomes a host.onnx op.  Then ROBE, DHE and tensor-train
    lookups written with tensor ops become emb.robe, emb.dhe and emb.ttbag (docs/representations.md),
    unless --no-raise.  Weights stay in the model: the
    .eir names the model file (relative to the .eir) and the tools that need the data read it there.

    A .mlir file is an Ember module at any level in MLIR's generic operation syntax, as ember-opt
    --emit=mlir writes it (docs/mlir.md): it is read back as that same level.

    Every host op is checked against the host runtime (--host-runtime): a model with an operator
    that no executor can run is refused here, naming the node, and nothing is written.
    """
    from ..frontends import NeedsTorch, import_model
    from ..frontends.raising import kept_as_written
    from ..host import set_runtime
    from ..host.check import check_module

    set_runtime(host_runtime)

    ref = os.path.relpath(os.path.abspath(model), base_dir(output))
    if Path(model).suffix.lower() == ".mlir":
        from ..frontends.mlir import import_mlir

        module = import_mlir(model, output)
    else:
        with kept_as_written() if no_raise else nullcontext():
            try:
                module = import_model(model, ref)
            except NeedsTorch as need:
                module = _import_scripted(model, output, need, example_inputs, export_to)
    check_module(module, model)
    for w in getattr(module, "warnings", []):
        click.echo(f"ember-import: {w}", err=True)
    write_output(output, print_module(module))


def _import_scripted(model: str, output: str, need: NeedsTorch, example_inputs: str | None,
                     export_to: str | None) -> Op:
    """Convert with torch to a .pt2 (moved into place only once it imports), then import that."""
    from ..frontends.pt2 import import_pt2
    from ..frontends.scripted import export_scripted
    from .sim import load_inputs

    feeds = load_inputs(example_inputs) if example_inputs is not None else None
    if export_to is None:
        stem = Path(model).name.removesuffix(".pt") if output == "-" else Path(output).stem
        export_to = str(base_dir(output) / f"{stem}.scripted.pt2")
    target = Path(export_to)
    if target.suffix.lower() != ".pt2":
        raise EmberError("--export-to must name a .pt2 file (the .eir's weights are read from it by suffix)",
                         export_to)
    tmp = target.with_name(f".{target.stem}.tmp.pt2")
    try:
        export_scripted(model, need, feeds, str(tmp))
        module = import_pt2(str(tmp), os.path.relpath(target.resolve(), base_dir(output)))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return module
