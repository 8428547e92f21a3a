"""Insert ops at a point in a block: what passes use to build IR."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .core import Block, Op, Value, new_op
from .diagnostics import Loc
from .types import INDEX, Type


class Builder:
    def __init__(self, block: Block, index: int | None = None, loc: Loc | None = None):
        self.block = block
        self.index = len(block.ops) if index is None else index
        self.loc = loc

    def insert(self, op: Op) -> Op:
        op.parent = self.block
        if op.loc is None:
            op.loc = self.loc
        self.block.ops.insert(self.index, op)
        self.index += 1
        return op

    def op(self, name: str, operands: list[Value] | None = None, types: list[Type] | None = None,
           attrs: dict[str, Any] | None = None, regions: list[Block] | None = None) -> Op:
        return self.insert(new_op(name, operands, types, attrs, regions))

    def val(self, name: str, operands: list[Value], type: Type, **attrs: Any) -> Value:
        return self.op(name, operands, [type], attrs).result

    def const(self, value: int | float, type: Type = INDEX) -> Value:
        return self.val("loop.const", [], type, value=value)

    @contextmanager
    def loop(self, name: str, lb: Value, ub: Value, step: Value,
             iv_type: Type = INDEX) -> Iterator[tuple[Value, Builder]]:
        """Build `name lb, ub, step (%iv) { ... }` and yield the induction variable and a body builder."""
        iv = Value(iv_type)
        body = Block([iv])
        iv.owner = body
        self.op(name, [lb, ub, step], [], {}, [body])
        yield iv, Builder(body, loc=self.loc)
