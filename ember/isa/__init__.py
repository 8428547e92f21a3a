"""The DAE instruction set: the instruction table (table.py) and the arithmetic its rows define (integers.py,
floats.py).  It sits below the backend and the simulator, which both read it, and imports only `ember.ir`'s
diagnostics."""

from .table import (
           ALU_OPS,
           EVENTS,
           LANES_OPERAND,
           OPS,
           ROWS,
           TIMED,
           UNDEFINED_BYTE,
           WRITES_FIRST,
           Fault,
           Opcode,
           Uop,
           of_kind,
           power_of_two,
           undefined,
           uops_of,
)

__all__ = ["ALU_OPS", "EVENTS", "LANES_OPERAND", "OPS", "ROWS", "TIMED", "UNDEFINED_BYTE", "WRITES_FIRST", "Fault",
           "Opcode", "Uop", "of_kind", "power_of_two", "undefined", "uops_of"]
