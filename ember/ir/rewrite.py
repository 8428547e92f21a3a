"""Small IR utilities shared by passes: cloning with a value map, use replacement, definition sets,
constant values."""

from __future__ import annotations

from collections.abc import Callable

from ..ir.core import Block, Op, Value, new_op
from ..ir.diagnostics import Loc
from ..ir.types import INDEX, StreamType
from .builder import Builder


def clone(op: Op, vmap: dict[Value, Value]) -> Op:
    """Deep-copy `op`, mapping operands through `vmap` (and recording the new results in it)."""
    regions = []
    for b in op.regions:
        nb = Block([Value(a.type, a.name) for a in b.args])
        for old, new in zip(b.args, nb.args):
            vmap[old] = new
            new.owner = nb
        for inner in b.ops:
            nb.add(clone(inner, vmap))
        regions.append(nb)
    new = Op(op.name, [vmap.get(v, v) for v in op.operands], [Value(r.type, r.name) for r in op.results],
             dict(op.attrs), regions, op.loc)
    for old, res in zip(op.results, new.results):
        vmap[old] = res
    return new


def const_value(v: Value) -> int | float | None:
    """The value of a `loop.const`, or None for anything else."""
    o = v.owner
    return o.attrs["value"] if isinstance(o, Op) and o.name == "loop.const" else None


def defined_in(op: Op) -> set[Value]:
    """Every value defined inside `op`'s regions (block arguments and results)."""
    out: set[Value] = set()
    for inner in op.walk():
        for b in inner.regions:
            out.update(b.args)
        if inner is not op:
            out.update(inner.results)
    return out


def replace_uses(root: Op, old: Value, new: Value) -> None:
    """Make every op under `root` that reads `old` read `new` instead."""
    for op in root.walk():
        if old in op.operands:
            op.operands = [new if v is old else v for v in op.operands]


def replace_op(old: Op, new: Op) -> None:
    block = old.parent
    assert block is not None
    block.ops[block.ops.index(old)] = new
    new.parent = block


def attached(op: Op) -> bool:
    """Whether `op` is still in its block (an earlier rewrite may have removed it)."""
    return op.parent is not None and any(o is op for o in op.parent.ops)


def insert_before(anchor: Op, op: Op) -> Op:
    """Put `op` just before `anchor` in its block."""
    block = anchor.parent
    assert block is not None
    block.ops.insert(block.ops.index(anchor), op)
    op.parent = block
    return op


class RewritePattern:
    """One rewrite, as in xDSL: `match_and_rewrite(op)` changes the IR at `op` and returns True, or returns
    False when `op` is not what it rewrites.  A pattern that finds its kind of op but cannot rewrite it
    raises the pass's own exception (passes.base.Decline), which `apply_patterns` reports."""

    def match_and_rewrite(self, op: Op) -> bool:
        raise NotImplementedError


def apply_patterns(root: Op, patterns: list[RewritePattern], declined: type[Exception],
                   remark: Callable[[Op, Exception], None]) -> int:
    """Give every op under `root` (outer before inner, as they were when the walk began, skipping those an
    earlier rewrite removed) to each pattern in turn until one rewrites it; a `declined` exception becomes
    `remark(op, e)`.  Returns the number of rewrites."""
    n = 0
    for op in list(root.walk()):
        if op is not root and not attached(op):
            continue
        for p in patterns:
            try:
                if p.match_and_rewrite(op):
                    n += 1
                    break
            except declined as e:
                remark(op, e)
                break
    return n


def users(root: Op, v: Value) -> list[Op]:
    """Every op under `root` that reads `v`."""
    return [o for o in root.walk() if v in o.operands]


def top_level(op: Op) -> Op:
    """The op directly in the function's body that holds `op` (the op itself if it is one): an access
    nest's root, where passes put what runs once before the nest."""
    while (p := op.parent_op()) is not None and p.name != "func":
        op = p
    return op


def free_var(root: Op) -> int:
    """A core-variable number (loop.getvar/setvar `var`) nothing under `root` uses yet."""
    return max((o.attrs["var"] for o in root.walk() if o.name in ("loop.getvar", "loop.setvar")), default=-1) + 1


def lookahead(pre: Builder, iv: Value, ahead: Value, data: Value, one: Value, loc: Loc | None) -> list[Op]:
    """The streams `min(iv + ahead, dim(data, 0) - 1)`: the row a prefetch reads `ahead` iterations on,
    never past `data`'s last.  `pre` builds the bound before the nest; the two stream ops are returned
    for the caller to place in its loop, the last one giving the row."""
    last = pre.val("loop.subi", [pre.val("loop.dim", [data], INDEX, axis=0), one], INDEX)
    at = new_op("slc.alu", [iv, ahead], [StreamType(INDEX)], {"op": "add"}, loc=loc)
    return [at, new_op("slc.alu", [at.result, last], [StreamType(INDEX)], {"op": "min"}, loc=loc)]
