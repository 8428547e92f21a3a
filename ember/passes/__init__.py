"""Passes, one module each; `PASSES` maps a name to its class and `PRESETS` names the -O levels."""

from . import (  # noqa: F401  (registers the passes)
    align_queues,
    bufferize,
    codegen,
    decouple,
    init_ahead,
    lower_emb,
    simplify_mem,
    to_dlc,
    vectorize,
    verify,
)
from .base import PASSES, Pass, make_pass, parse_pipeline, run_passes

PRESETS: dict[str, str] = {
    "O0": "lower-emb,decouple,to-dlc,codegen",
    "O1": "lower-emb,decouple,vectorize,to-dlc,codegen",
    "O2": "lower-emb,decouple,vectorize,bufferize,to-dlc,codegen",
    "O3": "lower-emb,decouple,vectorize,bufferize,align-queues,simplify-mem,init-ahead,to-dlc,codegen",
    "core": "lower-emb,vectorize,simplify-mem,codegen",  # --target=core: every loop nest on the execute unit
}

__all__ = ["PASSES", "PRESETS", "Pass", "make_pass", "parse_pipeline", "run_passes"]
