"""Frontends: turn a saved model into an `emb`-level module, chosen by the file's suffix.

    .onnx   ember.frontends.onnx         (either PyTorch ONNX exporter)
    .pt     ember.frontends.torchscript  (torch.jit.trace + torch.jit.save)
    .pt2    ember.frontends.pt2          (torch.export.save)

None of them needs torch.  A scripted `.pt` (torch.jit.script) raises `NeedsTorch`: ember-import then
converts it with torch (ember.frontends.scripted, the optional `ember[torch]` extra) to a `.pt2`.
The readers are imported lazily so that, say, reading a `.pt2` does not pay for loading `onnx`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from ..ir.diagnostics import EmberError
from .needs_torch import NeedsTorch

if TYPE_CHECKING:
    import numpy as np

    from ..ir.core import Op

__all__ = ["SUFFIXES", "NeedsTorch", "import_model", "load_weights_any"]

SUFFIXES = (".onnx", ".pt", ".pt2")




KINDS_OF_FILE = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                 (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind(path: str) -> str:
    """The model's format, for a model that is a regular file: the .eir names the model file for its weights,
    and every tool that needs them reads it again, which a pipe, a FIFO or a device cannot give."""
    why = "Ember's levels name the model file for its weights, and each tool that needs them reads it again: save " \
          "the model to a file"
    if path == "-":
        raise EmberError(f"a model is read from a file, not from standard input ({why})")
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise EmberError(f"cannot read the file: {e.strerror}", path) from None
    if not stat.S_ISREG(mode):
        what = next((name for test, name in KINDS_OF_FILE if test(mode)), "not a regular file")
        raise EmberError(f"is {what}, not a model file ({why})", path)
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        shown = f"'{suffix}'" if suffix else "no suffix"
        raise EmberError(f"cannot tell the model format from {shown}: expected .onnx (torch.onnx.export), "
                         ".pt (torch.jit.trace + torch.jit.save) or .pt2 (torch.export.save)", path)
    return suffix


def import_model(path: str, weights_ref: str) -> Op:
    """Import any supported model file; `weights_ref` is what the module's `weights` attribute names."""
    kind = _kind(path)
    if kind == ".onnx":
        from .onnx import import_onnx

        return import_onnx(path, weights_ref)
    if kind == ".pt":
        from .torchscript import import_torchscript

        return import_torchscript(path, weights_ref)
    from .pt2 import import_pt2

    return import_pt2(path, weights_ref)


def load_weights_any(path: str) -> dict[str, np.ndarray]:
    """The tensors an imported module's `param` ops name, read from the model file it was imported from."""
    kind = _kind(path)
    if kind == ".onnx":
        from .onnx import load_weights

        return load_weights(path)
    if kind == ".pt":
        from .torchscript import load_weights_torchscript

        return load_weights_torchscript(path)
    from .pt2 import load_weights_pt2

    return load_weights_pt2(path)
