"""Golden files: each sample level is exactly what its pass makes of the level before it."""

from __future__ import annotations

from pathlib import Path

import pytest

import ember.dialects  # noqa: F401
from ember.backend.dae_text import parse_dae, print_dae
from ember.ir.parser import parse_module
from ember.ir.printer import print_module
from ember.passes import PRESETS, parse_pipeline, run_passes

LEVELS = Path(__file__).resolve().parent.parent / "samples" / "levels"
STEPS = [("emb", "lower-emb", "loop"), ("loop", "decouple", "slc"), ("slc", "to-dlc", "dlc")]
MODELS = sorted({p.name.split(".")[0] + "." + p.name.split(".")[1] for p in LEVELS.glob("*.emb.eir")})


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("step", STEPS, ids=lambda s: s[1])
def test_pass_output_matches_golden(model: str, step: tuple[str, str, str]) -> None:
    src, pipeline, dst = step
    module = parse_module((LEVELS / f"{model}.{src}.eir").read_text(), f"{model}.{src}.eir")
    run_passes(module, parse_pipeline(pipeline))
    assert print_module(module) == (LEVELS / f"{model}.{dst}.eir").read_text(), "run `make levels` to refresh"


@pytest.mark.parametrize("model", MODELS)
def test_codegen_matches_golden_and_round_trips(model: str) -> None:
    module = parse_module((LEVELS / f"{model}.dlc.eir").read_text(), "x.dlc.eir")
    passes = parse_pipeline("codegen")
    run_passes(module, passes)
    text = print_dae(passes[0].program)  # type: ignore[attr-defined]
    assert text == (LEVELS / f"{model}.dae").read_text()
    assert print_dae(parse_dae(text, "x.dae")) == text


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("level", ["O1", "O2", "O3"])
def test_optimized_dae_matches_golden(model: str, level: str) -> None:
    module = parse_module((LEVELS / f"{model}.emb.eir").read_text(), "x.emb.eir")
    passes = parse_pipeline(PRESETS[level])
    run_passes(module, passes)
    assert print_dae(passes[-1].program) == (LEVELS / f"{model}.{level}.dae").read_text()  # type: ignore[attr-defined]
