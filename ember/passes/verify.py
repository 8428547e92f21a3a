"""verify: check every op (the pass manager also verifies after each pass)."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import Op, verify
from .base import Pass


@dataclass
class Verify(Pass):
    name = "verify"
    summary = "check every op against its definition and SSA dominance"

    def run(self, module: Op) -> None:
        verify(module)
