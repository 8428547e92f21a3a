"""Textual form of the IR: one op per line, MLIR-like generic syntax, exact round trip.

    %r = dialect.op %a, %b {key = value} : type (%arg: type) {
      ...
    }

Values keep the names they were parsed with; unnamed values get the next free number.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from .core import Block, Op, Value
from .types import ShapedType


def format_float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))  # a finite float's repr always has a '.' or an exponent: it reads back as a float


def format_attr(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | np.integer):
        return str(int(v))
    if isinstance(v, float | np.floating):
        return format_float(float(v))
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(format_attr(x) for x in v) + "]"
    if isinstance(v, DenseAttr):
        return f"dense<{format_attr(v.values)}> : {v.type}"
    raise TypeError(f"cannot print attribute {v!r}")


class DenseAttr:
    """A constant tensor carried as an attribute (ONNX tensor-valued attributes)."""

    def __init__(self, values: list[Any], type: ShapedType):
        self.values = values
        self.type = type

    def array(self) -> np.ndarray:
        assert self.type.shape is not None
        return np.array(self.values, dtype=self.type.elem.numpy()).reshape(
            tuple(d or 0 for d in self.type.shape))

    @staticmethod
    def from_array(a: np.ndarray, type: ShapedType) -> DenseAttr:
        flat = a.reshape(-1).tolist()
        return DenseAttr(flat, type)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DenseAttr) and other.type == self.type and str(other.values) == str(self.values)


def format_attrs(attrs: dict[str, Any]) -> str:
    if not attrs:
        return ""
    return "{" + ", ".join(f"{k} = {format_attr(v)}" for k, v in attrs.items()) + "}"


class Printer:
    def __init__(self) -> None:
        self.used: set[str] = set()
        self.counter = 0
        self.lines: list[str] = []

    def name(self, v: Value) -> str:
        return "%" + (v.name or "?")

    def bind(self, v: Value) -> None:
        if v.name is None or v.name in self.used:
            while str(self.counter) in self.used:
                self.counter += 1
            v.name = str(self.counter)
        self.used.add(v.name)

    def bind_all(self, op: Op) -> None:
        for block in op.regions:
            for a in block.args:
                self.bind(a)
            for inner in block.ops:
                for r in inner.results:
                    self.bind(r)
                self.bind_all(inner)

    def module(self, m: Op) -> str:
        head = "module"
        if m.attrs:
            head += " attributes " + format_attrs(m.attrs)
        self.lines.append(head + " {")
        for f in m.body.ops:
            self.func(f, "  ")
        self.lines.append("}")
        return "\n".join(self.lines) + "\n"

    def func(self, f: Op, ind: str) -> None:
        self.used, self.counter = set(), 0
        self.bind_all(f)
        args = ", ".join(f"{self.name(a)}: {a.type}" for a in f.body.args)
        res = ", ".join(str(t) for t in f.attrs["results"])
        self.lines.append(f"{ind}func @{f.attrs['sym_name']}({args}) -> ({res}) {{")
        self.block_ops(f.body, ind + "  ")
        self.lines.append(ind + "}")

    def block_ops(self, b: Block, ind: str) -> None:
        for op in b.ops:
            self.op(op, ind)

    def op(self, op: Op, ind: str) -> None:
        s = ind
        if op.results:
            s += ", ".join(self.name(r) for r in op.results) + " = "
        s += op.name
        if op.operands:
            s += " " + ", ".join(self.name(v) for v in op.operands)
        if op.attrs:
            s += " " + format_attrs(op.attrs)
        if op.results:
            s += " : " + ", ".join(str(r.type) for r in op.results)
        if not op.regions:
            self.lines.append(s)
            return
        for i, block in enumerate(op.regions):
            args = ", ".join(f"{self.name(a)}: {a.type}" for a in block.args)
            s += f" ({args}) {{"
            self.lines.append(s)
            self.block_ops(block, ind + "  ")
            s = ind + "}"
            if i == len(op.regions) - 1:
                self.lines.append(s)


def print_module(m: Op) -> str:
    return Printer().module(m)
