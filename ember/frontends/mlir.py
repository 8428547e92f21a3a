"""MLIR frontend: an Ember module written in MLIR's generic syntax (`ember-opt --emit=mlir`, or an MLIR tool's
generic re-print of it) read back at whatever level it holds.

The text is read by Ember's own parser (ember/ir/mlir_parse.py), which needs no MLIR package.  An op of another
dialect (`"scf.for"`, `"func.func"`) is refused in one line naming it and its position.
"""

from __future__ import annotations

from .. import dialects  # noqa: F401  (registers the ops verify checks)
from ..files import display_name, read_text, rebase
from ..ir.core import REGISTRY, Op, verify
from ..ir.diagnostics import EmberError
from ..ir.mlir_parse import parse_mlir
from ..ir.mlir_syntax import op_name


def import_mlir(path: str, output: str) -> Op:
    """The module in `path`, verified, with its `weights` (written relative to `path`) as seen from `output`."""
    text = read_text(path)
    module = parse_mlir(text, display_name(path))
    for op in module.walk():
        if op is not module and op.name not in REGISTRY:
            line = text.splitlines()[op.loc.line - 1] if op.loc else None
            raise EmberError(f"'{op_name(op.name)}' is not an Ember op (Ember's dialects: emb, loop, slc, dlc, "
                             "host, and ember for func, return, param and work)", op.loc, line)
    verify(module)
    weights = module.attrs.get("weights")
    if isinstance(weights, str):
        module.attrs["weights"] = rebase(weights, path, output)
    return module
