"""Passes, one module each; `PASSES` maps a name to its class and `PRESETS` names the -O levels."""

from . import (  # noqa: F401  (registers the passes)
    align_queues,
    bufferize,
    choose_plan,
    codegen,
    decouple,
    hoist,
    init_ahead,
    lower_emb,
    prefetch_indices,
    prefetch_outputs,
    promote,
    quantize_tables,
    robe,
    simplify_mem,
    to_dlc,
    tt_decompose,
    unroll,
    vectorize,
    verify,
)
from .base import PASSES, Pass, make_pass, parse_pipeline, run_passes
from .presets import PRESETS

__all__ = ["PASSES", "PRESETS", "Pass", "make_pass", "parse_pipeline", "run_passes"]
