"""The onnx package's own node test cases for the gather, scatter and reduce operators, through Ember.

The suite (cases, variants, levels and the table of declined runs) is defined in
`gen_conformance_doc.py`, which also writes docs/conformance.md from it.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import compile_model
from gen_conformance_doc import (
    DECLINES,
    DOC,
    LEVELS,
    VARIANTS,
    Case,
    backend_cases,
    check_table,
    decline_for,
    render,
    variant_model,
)

import ember.dialects  # noqa: F401
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.sim.reference import simulate

MACHINE = load_machine("default")


def run_case(case: Case, variant: str, level: str, tmp_path: Path) -> None:
    """Every data set of `case`: Ember's outputs equal the expected ones in shape, dtype and value."""
    for k, (inputs, expected) in enumerate(case.data_sets):
        model, feeds = variant_model(case, variant, inputs)
        path = tmp_path / f"{case.name}.{k}.onnx"
        onnx.save(model, str(path))
        got, _ = simulate(compile_model(path, level), feeds, MACHINE)
        for out, want in zip(model.graph.output, expected, strict=True):
            have = got[out.name]
            assert have.shape == want.shape and have.dtype == want.dtype, (
                f"{out.name}: got {have.dtype}{list(have.shape)}, want {want.dtype}{list(want.shape)}")
            if want.dtype.kind in "fc":
                np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-6, err_msg=out.name)
            else:
                np.testing.assert_array_equal(have, want, err_msg=out.name)


def _params() -> list[object]:
    params = []
    for case in backend_cases():
        for variant in VARIANTS:
            for level in LEVELS:
                d = decline_for(case.name, variant, level)
                marks = [pytest.mark.xfail(strict=True, raises=EmberError, reason=d.reason)] if d else []
                ident = f"{case.op}-{case.name}-{variant}-{level}"
                params.append(pytest.param(case, variant, level, marks=marks, id=ident))
    return params


@pytest.mark.parametrize(("case", "variant", "level"), _params())
def test_backend_case(case: Case, variant: str, level: str, tmp_path: Path) -> None:
    d = decline_for(case.name, variant, level)
    try:
        run_case(case, variant, level, tmp_path)
    except EmberError as e:
        if d is not None and not re.search(d.error, str(e)):  # declined, but not for the recorded reason
            raise AssertionError(f"expected an error matching {d.error!r}, got: {e}") from e
        raise


def test_decline_table_names_real_runs() -> None:
    check_table()
    assert len({(d.case, d.variant, lv) for d in DECLINES for lv in d.levels}) == sum(len(d.levels) for d in DECLINES)


def test_doc_is_current() -> None:
    assert DOC.read_text() == render(), "docs/conformance.md is stale: run python tests/gen_conformance_doc.py"
