"""to-dlc: each top-level slc.for nest becomes one dlc.offload (access program + execute cases).

Loops become traversal units, streams move into the access region unchanged, and each callback
becomes a case: its `slc.head` reads turn into operands pushed on the callback's event and
popped in the same order, followed by a control token carrying the case id.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import Block, Op, Value, new_op
from ..ir.rewrite import clone, replace_op
from .base import Pass


@dataclass
class ToDlc(Pass):
    name = "to-dlc"
    summary = "turn slc nests into dlc.offload: traversal units, marshaling rules, execute cases"

    def run(self, module: Op) -> None:
        for f in module.body.ops:
            for op in list(f.body.ops):
                if op.name == "slc.for":
                    replace_op(op, _Lower().offload(op))


class _Lower:
    def __init__(self) -> None:
        self.access = Block()
        self.execute = Block()
        self.vmap: dict[Value, Value] = {}

    def offload(self, root: Op) -> Op:
        self.loop(root, None)
        return new_op("dlc.offload", regions=[self.access, self.execute], loc=root.loc)

    def loop(self, loop: Op, parent: Value | None) -> Value:
        operands = [self.vmap.get(v, v) for v in loop.operands] + ([parent] if parent is not None else [])
        attrs = {"vl": loop.attrs["vl"]} if "vl" in loop.attrs else {}
        tu = self.access.add(new_op("dlc.tu", operands, [loop.body.args[0].type], attrs, loc=loop.loc)).result
        tu.name = loop.body.args[0].name
        self.vmap[loop.body.args[0]] = tu
        for op in loop.body.ops:
            if op.name in ("slc.mem", "slc.alu", "slc.mask", "slc.buffer"):
                new = clone(op, self.vmap)
                new.name = "dlc." + op.name[4:]
                self.access.add(new)
            elif op.name == "slc.for":
                self.loop(op, tu)
            elif op.name == "slc.callback":
                self.callback(op, tu)
            else:
                raise op.error("cannot be lowered to dlc")
        return tu

    def callback(self, cb: Op, tu: Value) -> None:
        case_id = len(self.execute.ops) + 1
        pushes = [self.vmap[h.operands[0]] for h in cb.body.ops if h.name == "slc.head"]
        self.access.add(new_op("dlc.on", [tu, *pushes], attrs={"event": cb.attrs["on"], "token": case_id},
                               loc=cb.loc))
        body = Block()
        local: dict[Value, Value] = dict(self.vmap)
        for op in cb.body.ops:
            if op.name == "slc.head":
                pop = body.add(new_op("dlc.pop", [], [op.result.type], loc=op.loc))
                pop.results[0].name = op.result.name
                local[op.result] = pop.result
            else:
                body.add(clone(op, local))
        self.execute.add(new_op("dlc.case", attrs={"id": case_id}, regions=[body], loc=cb.loc))
