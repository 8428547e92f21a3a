"""The IR core: values, operations with regions, blocks, and the op-definition registry.

Every level (emb, loop, slc, dlc) uses these same structures; a level is just the set of op
definitions its dialect module registers.  Ops are generic (name, operands, results, attributes,
regions) like MLIR's generic form, which keeps the printer, parser and passes small.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .diagnostics import EmberError, Loc
from .types import Type


class Value:
    """An SSA value: an op result or a block argument."""

    __slots__ = ("type", "name", "owner")

    def __init__(self, type: Type, name: str | None = None, owner: Op | Block | None = None):
        self.type = type
        self.name = name  # the textual name without '%', kept so printing reproduces parsed text
        self.owner = owner

    def __repr__(self) -> str:
        return f"%{self.name or '?'}: {self.type}"


@dataclass(eq=False)
class Block:
    """A single-block region: arguments and a list of ops."""

    args: list[Value] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    parent: Op | None = None

    def __post_init__(self) -> None:
        for a in self.args:  # as an op owns its results: what passes follow from a loop's index to its loop
            a.owner = self

    def add(self, op: Op) -> Op:
        op.parent = self
        self.ops.append(op)
        return op


@dataclass(eq=False)
class Op:
    name: str
    operands: list[Value] = field(default_factory=list)
    results: list[Value] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    regions: list[Block] = field(default_factory=list)
    loc: Loc | None = None
    parent: Block | None = None

    def __post_init__(self) -> None:
        for r in self.results:
            r.owner = self
        for b in self.regions:
            b.parent = self

    @property
    def result(self) -> Value:
        if len(self.results) != 1:
            raise ValueError(f"{self.name} has {len(self.results)} results")
        return self.results[0]

    @property
    def body(self) -> Block:
        return self.regions[0]

    @property
    def dialect(self) -> str:
        return self.name.split(".", 1)[0] if "." in self.name else "builtin"

    def walk(self) -> Iterator[Op]:
        """This op and every op nested in its regions, in program order (pre-order)."""
        yield self
        for block in self.regions:
            for op in block.ops:
                yield from op.walk()

    def parent_op(self) -> Op | None:
        return self.parent.parent if self.parent else None

    def error(self, message: str) -> EmberError:
        return EmberError(f"'{self.name}' {message}", self.loc)


_NOT_NAME = re.compile(r"[^A-Za-z0-9_.$-]")  # what the .eir grammar allows in a value name


def unique_name(hint: str, used: set[str]) -> str:
    """A value name from `hint` (a model's tensor name) that the grammar accepts and `used` lacks."""
    base = _NOT_NAME.sub("_", hint) or "v"
    name, n = base, 0
    while name in used:
        n += 1
        name = f"{base}_{n}"
    used.add(name)
    return name


def new_op(name: str, operands: list[Value] | None = None, result_types: list[Type] | None = None,
           attrs: dict[str, Any] | None = None, regions: list[Block] | None = None,
           loc: Loc | None = None) -> Op:
    return Op(name, list(operands or []), [Value(t) for t in (result_types or [])], dict(attrs or {}),
              list(regions or []), loc)


# ---------------------------------------------------------------------------------------------
# Op definitions: each dialect registers the ops it owns with a verifier.

Verifier = Callable[[Op], None]


@dataclass(frozen=True)
class OpDef:
    name: str
    operands: tuple[int, int | None]  # (min, max) operand count; max None = variadic
    results: tuple[int, int | None]
    regions: int = 0
    attrs: tuple[str, ...] = ()  # required attributes
    verify: Verifier | None = None
    doc: str = ""


REGISTRY: dict[str, OpDef] = {}


def define(name: str, operands: int | tuple[int, int | None] = 0, results: int | tuple[int, int | None] = 0,
           regions: int = 0, attrs: tuple[str, ...] = (), doc: str = "") -> Callable[[Verifier], Verifier]:
    """Register an op; used as a decorator on its extra verifier (which may be a no-op)."""

    def norm(n: int | tuple[int, int | None]) -> tuple[int, int | None]:
        return (n, n) if isinstance(n, int) else n

    def deco(fn: Verifier) -> Verifier:
        REGISTRY[name] = OpDef(name, norm(operands), norm(results), regions, attrs, fn, doc or (fn.__doc__ or ""))
        return fn

    return deco


def check(cond: bool, op: Op, message: str) -> None:
    if not cond:
        raise op.error(message)


def verify_op(op: Op) -> None:
    """Check one op against its definition (counts, attributes) and its own verifier."""
    d = REGISTRY.get(op.name)
    if d is None:
        raise op.error("is not a known operation")
    for what, n, (lo, hi) in (("operands", len(op.operands), d.operands), ("results", len(op.results), d.results)):
        if n < lo or (hi is not None and n > hi):
            want = str(lo) if lo == hi else f"{lo}..{'' if hi is None else hi}"
            raise op.error(f"expects {want} {what}, got {n}")
    check(len(op.regions) == d.regions, op, f"expects {d.regions} regions, got {len(op.regions)}")
    for a in d.attrs:
        check(a in op.attrs, op, f"requires attribute '{a}'")
    if d.verify:
        d.verify(op)


def verify(root: Op) -> None:
    """Verify every op and SSA dominance (each operand defined earlier in an enclosing scope)."""
    _verify_block_scope(root, set())


def _verify_block_scope(op: Op, visible: set[int]) -> None:
    verify_op(op)
    for v in op.operands:
        if id(v) not in visible:
            raise op.error(f"uses value %{v.name or '?'} before it is defined")
    for block in op.regions:
        scope = set(visible) | {id(a) for a in block.args}
        for inner in block.ops:
            _verify_block_scope(inner, scope)
            scope.update(id(r) for r in inner.results)
