"""decouple: each top-level loop nest that reads read-only memory becomes access loops + callbacks.

What goes to the access unit: the loops, loads from memrefs the nest never writes, and integer
arithmetic on values the access unit already has.  Everything else (stores, float math, loads
of memory the nest writes) runs on the core in callbacks: ops before a loop's first inner loop
fire on each iteration of that loop (`on = "ite"`); ops after an inner loop fire at that inner
loop's end (a callback `on = "end"` placed at the end of the inner loop's body).  A nest it
cannot split this way (a loop bound computed by the core, a core value used by two different
callbacks, more loops than the machine has traversal units: `tus`, each loop takes one) stays on the
core whole, with a remark saying why.  So does a nest choose-plan keeps on the core
(`plan = "core"`); its `plan = "decoupled"` mark moves to the access nest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..dialects.loop import INT_BINARY, STORES
from ..ir.core import Block, Op, Value, new_op
from ..ir.diagnostics import EmberError
from ..ir.rewrite import clone, defined_in, replace_op
from ..ir.types import INDEX, StreamType
from .base import Decline, Pass


@dataclass
class Decouple(Pass):
    name = "decouple"
    summary = "split loop nests into access loops (streams) and core callbacks (loop -> slc)"
    tus: int = 8  # traversal units of the machine tuned for (access.traversal_units of the default machine)
    remarks: list[str] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if self.tus < 1:
            raise EmberError(f"pass 'decouple': tus={self.tus} must be a positive number of traversal units")

    def run(self, module: Op) -> None:
        for f in module.body.ops:
            for op in list(f.body.ops):
                if op.name != "loop.for" or op.attrs.get("plan") == "core":
                    continue
                written = {o.operands[1] for o in op.walk() if o.name in STORES}
                if not any(o.name == "loop.load" and o.operands[0] not in written for o in op.walk()):
                    continue
                try:
                    loops = sum(1 for o in op.walk() if o.name == "loop.for")
                    if loops > self.tus:
                        raise Decline(f"it has {loops} loops, more than the {self.tus} traversal units it is tuned "
                                      f"for (tus=N)")
                    new = _Nest(op, written).convert(op, {})
                except Decline as e:
                    self.remarks.append(f"{op.loc}: remark: decouple: nest kept on the core: {e}")
                    continue
                if "plan" in op.attrs:
                    new.attrs["plan"] = op.attrs["plan"]
                replace_op(op, new)


class _Nest:
    def __init__(self, root: Op, written: set[Value]):
        self.inner = defined_in(root)
        self.written = written

    def access_side(self, v: Value, acc: dict[Value, Value]) -> Value | None:
        if v in acc:
            return acc[v]
        return v if v not in self.inner else None

    def convert(self, loop: Op, acc: dict[Value, Value]) -> Op:
        bounds = [self.access_side(v, acc) for v in loop.operands]
        if any(b is None for b in bounds):
            raise Decline("a loop bound is computed on the core")
        iv = Value(StreamType(INDEX), loop.body.args[0].name)
        body = Block([iv])
        iv.owner = body
        acc = dict(acc)
        acc[loop.body.args[0]] = iv
        streams: list[Op] = []
        rest: list[Op] = []
        group: Op | None = None
        group_map: dict[Value, Value] = {}
        last_inner: Op | None = None
        for op in loop.body.ops:
            if op.name == "loop.for":
                last_inner = self.convert(op, acc)
                rest.append(last_inner)
                group = None
                continue
            s = self.offload(op, acc)
            if s is not None:
                streams.append(s)
                continue
            if group is None:  # core ops after an inner loop fire at that loop's end
                group = new_op("slc.callback", attrs={"on": "end" if last_inner else "ite"}, regions=[Block()],
                               loc=op.loc)  # where its first op is: for remarks on what passes build in it
                group_map = {}
                if last_inner is None:
                    rest.append(group)
                else:
                    last_inner.body.add(group)
            self.to_callback(op, group, group_map, acc)
        for o in streams + rest:
            body.add(o)
        return new_op("slc.for", bounds, [], {}, [body], loop.loc)  # type: ignore[arg-type]

    def offload(self, op: Op, acc: dict[Value, Value]) -> Op | None:
        if op.name == "loop.load" and op.operands[0] not in self.written:
            args = [self.access_side(v, acc) for v in op.operands[1:]]
            name, attrs = "slc.mem", {}
            args = [op.operands[0], *args]
        elif op.name in (f"loop.{n}" for n in INT_BINARY):
            args = [self.access_side(v, acc) for v in op.operands]
            name, attrs = "slc.alu", {"op": op.name[5:-1]}
        else:
            return None
        if any(a is None for a in args):
            return None
        s = new_op(name, args, [StreamType(op.result.type)], attrs, loc=op.loc)  # type: ignore[arg-type]
        s.results[0].name = op.result.name
        acc[op.result] = s.result
        return s

    def to_callback(self, op: Op, cb: Op, vmap: dict[Value, Value], acc: dict[Value, Value]) -> None:
        for v in op.operands:
            if v in vmap or v not in self.inner:
                continue
            if v in acc:  # a stream: read its head at the top of the callback
                t = acc[v].type
                assert isinstance(t, StreamType)
                head = new_op("slc.head", [acc[v]], [t.elem], loc=op.loc)
                head.results[0].name = v.name
                heads = [o for o in cb.body.ops if o.name == "slc.head"]
                cb.body.ops.insert(len(heads), head)
                head.parent = cb.body
                vmap[v] = head.result
            else:
                raise Decline(f"value %{v.name} is computed in one callback and used in another")
        cb.body.add(clone(op, vmap))
