"""The tables a plan covers, and one table's bags as a program of their own, with inputs to simulate it on.

A table is a float32 `param` that `emb.bag` ops read.  Its bags are measured apart from the rest of the model:
the planner compares forms of one table, and the rest of the model (host ops, other tables) is the same
whichever form it takes.  The inputs of those bags are the model's own when they are model inputs given with
--inputs; otherwise (no --inputs, or indices that host ops compute) they are drawn from their static shapes:
uniform rows, bags of equal size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.core import Block, Op, Value, new_op, verify
from ..ir.diagnostics import EmberError
from ..ir.types import ShapedType
from ..passes.table_transform import table_of

ROLES = ("indices", "offsets", "weights")  # emb.bag's operands after the table


@dataclass(frozen=True)
class Table:
    name: str  # the param's name, as the weights file has it
    rows: int
    dim: int
    bags: int  # emb.bag ops reading it

    @property
    def bytes(self) -> int:
        return self.rows * self.dim * 4


def func_of(module: Op) -> Op:
    return next(op for op in module.body.ops if op.name == "func")


def find_tables(module: Op) -> list[Table]:
    """Every table of the module, in the order their first bags appear."""
    found: dict[str, list[Op]] = {}
    for op in func_of(module).body.ops:
        name = table_of(op)
        if name is not None:
            found.setdefault(name, []).append(op)
    out = []
    for name, bags in found.items():
        t = bags[0].operands[0].type
        assert isinstance(t, ShapedType) and t.shape is not None
        rows, dim = t.shape
        assert rows is not None and dim is not None
        out.append(Table(name, rows, dim, len(bags)))
    return out


def isolate(module: Op, table: str) -> Op:
    """A new module whose function holds the param `table` and every `emb.bag` reading it, and returns their
    results; each operand that is not the table (a model input, or a value host ops compute) becomes an input
    of the same name and type.  The ops are copies: transforming the result leaves `module` alone."""
    bags = [op for op in func_of(module).body.ops if table_of(op) == table]
    if not bags:
        raise EmberError(f"no emb.bag reads a float32 param '{table}'")
    src = bags[0].operands[0].owner
    assert isinstance(src, Op)
    args: dict[int, Value] = {}
    for bag in bags:
        for v in bag.operands[1:]:
            if id(v) not in args:
                args[id(v)] = Value(v.type, v.name)
    body = Block(list(args.values()))
    param = body.add(new_op("param", [], [src.result.type], dict(src.attrs), loc=src.loc))
    param.result.name = src.result.name
    results = []
    for bag in bags:
        new = body.add(new_op("emb.bag", [param.result, *(args[id(v)] for v in bag.operands[1:])],
                              [bag.result.type], dict(bag.attrs), loc=bag.loc))
        new.result.name = bag.result.name
        results.append(new.result)
    body.add(new_op("return", results))
    func = new_op("func", attrs={"sym_name": "main", "results": [r.type for r in results]}, regions=[body])
    mod = new_op("module", attrs={"inputs": [a.name or "" for a in body.args],
                                  "outputs": [r.name or "" for r in results]}, regions=[Block([], [func])])
    func.parent = mod.body
    verify(mod)
    return mod


def feeds(one: Op, given: dict[str, np.ndarray], seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs for the module `isolate` made: the arrays `given` by name, the others drawn from their static shapes
    (indices uniform over the table's rows, offsets of bags of equal size, weights standard normal)."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    bags = [op for op in func_of(one).body.ops if op.name == "emb.bag"]
    for bag in bags:
        rows = bag.operands[0].type.shape[0]  # type: ignore[union-attr]
        for role, v in zip(ROLES, bag.operands[1:]):
            name = v.name or ""
            if name in out:
                continue
            t = v.type
            assert isinstance(t, ShapedType)
            if name in given:
                out[name] = np.asarray(given[name])
                continue
            n = t.shape[0] if t.shape else None
            if n is None:
                raise EmberError(f"the {role} of this bag (%{name}) have no static length: give --inputs IN.npz "
                                 f"with an array '{name}'", bag.loc)
            dtype = t.elem.numpy()
            if role == "indices":
                out[name] = rng.integers(0, rows, size=n).astype(dtype)
            elif role == "offsets":
                lookups = len(out[bag.operands[1].name or ""])
                out[name] = np.linspace(0, lookups, max(n, 1)).round().astype(dtype)
            else:
                out[name] = rng.standard_normal(n).astype(dtype)
    return out
