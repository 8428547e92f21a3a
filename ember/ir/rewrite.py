"""Small IR utilities shared by passes: cloning with a value map, use replacement, definition sets,
constant values."""

from __future__ import annotations

from ..ir.core import Block, Op, Value


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
