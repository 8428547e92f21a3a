"""codegen: the last pass of a pipeline; turns the module into a DAE program (`.dae` text)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..backend.codegen import codegen
from ..backend.dae import Program
from ..ir.core import Op
from .base import Pass


@dataclass
class Codegen(Pass):
    name = "codegen"
    summary = "emit the DAE program (.dae): access programs and execute-unit code"
    program: Program | None = field(default=None, repr=False)

    def run(self, module: Op) -> None:
        self.program = codegen(module)
