"""The core model against LLVM's machine-code analyzer: every kernel within 25% of llvm-mca's cycles per
iteration (stored in ember/bench/kernels/mca.json, so no llvm-mca is needed), and the stored table in
docs/core-model.md is the one this comparison prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.bench import mca

ROWS = mca.comparison()


@pytest.mark.parametrize(("name", "simulated", "reference"), ROWS, ids=[r[0] for r in ROWS])
def test_kernel_within_tolerance_of_llvm_mca(name: str, simulated: float, reference: float) -> None:
    assert abs(simulated / reference - 1) <= mca.TOLERANCE, f"{name}: {simulated:.2f} against {reference:.2f}"


def test_every_kernel_is_compared_and_the_set_is_broad() -> None:
    """At least 12 kernels, and every stored x86 kernel has its DAE side (a loop or a compiled callback)."""
    assert len(ROWS) >= 12
    assert {name for name, _, _ in ROWS} == set(mca.LOOPS) | set(mca.CALLBACKS)
    kinds = {name.split("_")[0] for name, _, _ in ROWS}
    assert {"o0", "o1", "o2", "o3", "core", "hand", "sol"} <= kinds


def test_docs_table_is_current() -> None:
    doc = (Path(__file__).parent.parent / "docs" / "core-model.md").read_text()
    assert mca.markdown(ROWS) in doc, "docs/core-model.md: run `python -m ember.bench.mca` and paste its table"
