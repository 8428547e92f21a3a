"""codegen: the last pass of a pipeline; turns the module into a DAE program (`.dae` text)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..backend.codegen import codegen
from ..backend.dae import Program
from ..backend.regalloc import fit_registers
from ..ir.core import Op
from .base import Pass
from .cost import Target, default_target


@dataclass
class Codegen(Pass):
    name = "codegen"
    summary = "emit the DAE program (.dae): access programs and execute-unit code"
    program: Program | None = field(default=None, repr=False)
    target: Target = field(default_factory=default_target, repr=False)  # whose register files the code fits

    def run(self, module: Op) -> None:
        self.program = fit_registers(codegen(module), self.target)
