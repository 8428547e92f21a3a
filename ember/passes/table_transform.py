"""One table transform run by hand, on chosen tables: what the planner (ember-plan) and the bench's
representation suites do with the lossy transforms (quantize-tables, tt-decompose, robe), which as passes
would read every table from the module's weights file."""

from __future__ import annotations

import numpy as np

from ..ir.core import Op, verify
from ..ir.diagnostics import EmberError
from ..ir.types import ShapedType
from .base import PatternPass, Unless, parse_pipeline


def table_of(op: Op) -> str | None:
    """The name of the float32 param an `emb.bag` reads, or None for any other op."""
    if op.name != "emb.bag":
        return None
    src = op.operands[0].owner
    t = op.operands[0].type
    if isinstance(src, Op) and src.name == "param" and isinstance(t, ShapedType) and t.elem.name == "f32":
        return str(src.attrs["name"])
    return None


def table_transform(spec: str) -> PatternPass:
    """The one table transform `spec` names; a one-line error for anything else."""
    passes = parse_pipeline(spec)
    if len(passes) != 1 or not isinstance(passes[0], PatternPass) or not hasattr(passes[0], "stats"):
        raise EmberError(f"candidate '{spec}' is not one table transform (a pass that reports per-table figures, "
                         f"e.g. quantize-tables{{bits=8}} or tt-decompose{{ranks=16}})")
    return passes[0]


def transform(p: PatternPass, module: Op, tables: set[str] | None, data: dict[str, np.ndarray] | None) -> None:
    """Run the table transform `p` over `module`, on the bags of `tables` only (all when None), measuring its error
    against `data` (None: not measured).  A table transform's own `run` only loads `weights` from the module's
    weights file and applies its patterns; the planner has the arrays, so it sets `weights` and applies them."""
    if tables is not None:
        own = p.patterns
        p.patterns = lambda: [Unless(lambda op: table_of(op) not in tables, pat)  # type: ignore[method-assign]
                              for pat in own()]
    p.weights = data  # type: ignore[attr-defined]
    PatternPass.run(p, module)
    verify(module)
