"""Passes, one module each; `PASSES` maps a name to its class and `PRESETS` names the -O levels."""

from . import codegen, decouple, lower_emb, to_dlc, verify  # noqa: F401  (registers the passes)
from .base import PASSES, Pass, make_pass, parse_pipeline, run_passes

PRESETS: dict[str, str] = {
    "O0": "lower-emb,decouple,to-dlc,codegen",
}

__all__ = ["PASSES", "PRESETS", "Pass", "make_pass", "parse_pipeline", "run_passes"]
