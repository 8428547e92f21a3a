"""Every suite ember-bench runs, by name: the embedding workloads at each scale (workloads.py) and the
representation suites (forms.py), which are built from those workloads."""

from __future__ import annotations

from .forms import suite as forms
from .workloads import SCALES, Workload, matching
from .workloads import suite as workloads

SUITES = (*SCALES, "huge", "representations-tiny", "representations", "representations-paper")


def suite(scale: str, only: list[str] | None = None) -> list[Workload]:
    """The workloads of suite `scale`, those whose name starts with one of `only` if given."""
    if scale.startswith("representations"):
        return matching(list(forms(scale)), only)
    return workloads(scale, only)
