"""Every optimization level (and the core-only target) computes what onnxruntime computes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import MODELS, compile_model

import ember.dialects  # noqa: F401
from ember.machine import load_machine
from ember.sim.reference import simulate
from ember.sim.stats import Stats

LEVELS = ["O0", "O1", "O2", "O3", "core"]


def run_model(model: str, level: str) -> tuple[dict[str, np.ndarray], Stats]:
    path = MODELS / f"{model}.onnx"
    inputs = dict(np.load(MODELS / f"{model.split('.')[0]}.in.npz"))
    return simulate(compile_model(path, level), inputs, load_machine("default"))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("model", sorted(p.name[:-5] for p in MODELS.glob("*.onnx")))
def test_level_matches_onnxruntime(model: str, level: str) -> None:
    got, _ = run_model(model, level)
    want = np.load(MODELS / f"{model}.out.npz")
    for name in want.files:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_core_target_uses_no_access_unit() -> None:
    _, st = run_model("bag_sum.ts", "core")
    assert st["tokens"] == 0 and st["access.elements"] == 0 and st["callbacks"] == 0
