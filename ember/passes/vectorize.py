"""vectorize{vl=N}: innermost access loops deliver N induction values a head; callbacks use vectors.

Applies to an innermost `slc.for` with step 1 whose induction variable is used only as the last
index of memory accesses: on the access side by `slc.mem` (which becomes a contiguous vector
stream), in its callback by loads and stores (which become masked gathers and scatters over the
marshaled index vector).  Float arithmetic on vectors becomes vector arithmetic, scalars are
splat.  A tail mask stream (`slc.mask`) switches off the lanes past the loop's end.  The loop is
declined, with a remark, when anything else uses the induction variable or when lanes could
touch the same memory.  Innermost loops of nests that stay on the core (such as the output
initialisation) are vectorized the same way, their index becoming `loop.iota` of a vl-wide step.
`vl = 0` picks the widest vector of a 512-bit unit for the element type, or, for a loop of a constant
trip count below that (a row narrower than a vector: D = 8 floats), the fewest lanes that cover it in
a power of two, as an expert uses a 256-bit vector for such a row: the loop is then one head, which
unroll, hoist and simplify-mem turn into whole-row loads and stores.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..backend.dae import MAX_LANES
from ..dialects.loop import FLOAT_BINARY
from ..dialects.slc import vector_iv
from ..ir.core import Block, Op, Value, new_op
from ..ir.diagnostics import EmberError
from ..ir.rewrite import const_value, defined_in
from ..ir.types import I1, ScalarType, ShapedType, StreamType, Type
from .base import Decline, Pass, kept

SIMD_BITS = 512


def vec(t: Type, vl: int) -> ShapedType:
    assert isinstance(t, ScalarType)
    return ShapedType("vector", (vl,), t)


def is_const(v: Value, value: int) -> bool:
    return const_value(v) == value


@dataclass
class Vectorize(Pass):
    name = "vectorize"
    summary = "innermost access loops deliver vl elements a head; callback code becomes vector code"
    vl: int = 0
    remarks: list[str] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not 0 <= self.vl <= MAX_LANES:
            raise EmberError(f"pass 'vectorize': option 'vl' must be a lane count from 1 to {MAX_LANES} "
                             f"(MAX_LANES), or 0 for the machine's vector width; got {self.vl}")

    def run(self, module: Op) -> None:
        for f in module.body.ops:
            for op in list(f.walk()):
                if kept(op):
                    continue
                try:
                    if op.name == "slc.for" and "vl" not in op.attrs and not any(
                            o.name == "slc.for" for o in op.body.ops):
                        _vectorize(op, self.vl)
                    elif op.name == "loop.for" and _in_core_nest(op) and not any(o.regions for o in op.body.ops):
                        _vectorize_core(op, self.vl)
                except Decline as e:
                    self.remarks.append(f"{op.loc}: remark: vectorize: loop not vectorized: {e}")


def _in_core_nest(op: Op) -> bool:
    """A loop of a nest that stays on the core (not inside access loops or callbacks)."""
    p = op.parent_op()
    while p is not None and p.name == "loop.for":
        p = p.parent_op()
    return p is not None and p.name == "func"


def _width(loop: Op, vl: int) -> int:
    if vl:
        return vl
    elems = [o.result.type.elem for o in loop.body.ops if o.name == "slc.mem"  # type: ignore[union-attr]
             if isinstance(o.result.type, StreamType)]
    bits = max([ScalarType(str(e)).bytes * 8 for e in elems if isinstance(e, ScalarType)] or [32])
    return _covering(loop, max(1, SIMD_BITS // bits))


def _covering(loop: Op, widest: int) -> int:
    """`widest` lanes, or fewer when the loop's trip count is a constant below that: the smallest power of two
    that covers it (no lane of a narrow row is wasted)."""
    lb, ub = const_value(loop.operands[0]), const_value(loop.operands[1])
    if not isinstance(lb, int) or not isinstance(ub, int) or ub - lb >= widest:
        return widest
    return max(1, 1 << max(0, ub - lb - 1).bit_length())


def _vectorize(loop: Op, vl: int) -> None:
    if not is_const(loop.operands[2], 1):
        raise Decline("its step is not the constant 1")
    iv = loop.body.args[0]
    n = _width(loop, vl)
    callbacks = [o for o in loop.body.ops if o.name == "slc.callback"]
    if len(callbacks) > 1 or any(c.attrs["on"] != "ite" for c in callbacks):
        raise Decline("it has callbacks other than one per iteration")
    mems: list[Op] = []
    for o in loop.body.ops:
        if iv in o.operands:
            if o.name != "slc.mem" or o.operands[-1] is not iv or o.operands.count(iv) != 1:
                raise Decline(f"'{o.name}' uses the induction variable other than as the last index")
            mems.append(o)
    vector_streams = {iv, *(m.result for m in mems)}
    for o in loop.body.ops:
        if o not in mems and o.name != "slc.callback" and any(v in vector_streams for v in o.operands):
            raise Decline(f"'{o.name}' uses a stream loaded with the induction variable (a gather on the access unit)")
    cb = callbacks[0] if callbacks else None
    plan = _plan_callback(cb, vector_streams, n) if cb else None
    # Commit: retype the loop, its vector streams, and rebuild the callback.
    loop.attrs["vl"] = n
    iv.type = vector_iv(n)
    for m in mems:
        t = m.result.type
        assert isinstance(t, StreamType)
        m.result.type = StreamType(vec(t.elem, n))
    if cb is not None and plan is not None:
        mask = new_op("slc.mask", [iv], [StreamType(vec(I1, n))], loc=loop.loc)
        mask.results[0].name = f"{iv.name}_mask" if iv.name else None
        loop.body.ops.insert(loop.body.ops.index(cb), mask)
        mask.parent = loop.body
        _rebuild(cb, plan, mask.result, n)


def _plan_callback(cb: Op, vector_streams: set[Value], n: int) -> set[Value]:
    return _plan(cb.body.ops, vector_streams, set())


def _plan(ops: list[Op], vector_streams: set[Value], vector: set[Value]) -> set[Value]:
    """Values that become vectors (from heads of vector streams or the given ones); declines on
    anything it cannot vectorize."""
    written = {o.operands[1] for o in ops if o.name == "loop.store"}
    for o in ops:
        ins = [v in vector for v in o.operands]
        if o.name == "slc.head":
            if o.operands[0] in vector_streams:
                vector.add(o.result)
        elif o.name in ("loop.load", "loop.store"):
            idx = o.operands[1:] if o.name == "loop.load" else o.operands[2:]
            if any(v in vector for v in idx[:-1]):
                raise Decline("an index other than the last depends on the induction variable")
            if idx and idx[-1] in vector:
                if o.name == "loop.load":
                    vector.add(o.result)
            elif (o.operands[0] if o.name == "loop.load" else o.operands[1]) in written:
                raise Decline("lanes would read or write the same element of a memref the callback writes")
            elif o.name == "loop.store" and ins[0]:
                raise Decline("a vector would be stored to one element")
        elif any(ins):
            if o.name[5:] in FLOAT_BINARY or o.name in ("loop.select", "loop.fmaf") or (
                    o.name == "loop.cast" and isinstance(o.result.type, ScalarType) and o.result.type.is_float):
                vector.add(o.result)
            else:
                raise Decline(f"'{o.name}' on vector values is not supported")
    return vector


def _rebuild(cb: Op, vector: set[Value], mask_stream: Value, n: int) -> None:
    body = Block()
    mask = body.add(new_op("slc.head", [mask_stream], [vec(I1, n)], loc=cb.loc)).result
    mask.name = mask_stream.name
    _emit(cb.body.ops, vector, mask, n, body, {})
    heads = [o for o in body.ops if o.name == "slc.head"]
    body.ops = heads + [o for o in body.ops if o.name != "slc.head"]
    cb.regions[0] = body
    body.parent = cb


def _emit(ops: list[Op], vector: set[Value], mask: Value, n: int, body: Block, vmap: dict[Value, Value]) -> None:
    """Append `ops` to `body` in vector form: loads/stores indexed by vectors become masked
    gathers/scatters, float ops on vectors become vector ops, scalars used with vectors are splat."""

    def get(v: Value, want_vector: bool) -> Value:
        nv = vmap.get(v, v)
        if want_vector and v not in vector:
            splat = body.add(new_op("loop.splat", [nv], [vec(nv.type, n)], loc=nv.owner.loc
                                    if isinstance(nv.owner, Op) else None))
            return splat.result
        return nv

    for o in ops:
        if o.name == "slc.head" and o.result in vector:
            t = o.operands[0].type
            assert isinstance(t, StreamType)
            new = new_op("slc.head", [o.operands[0]], [t.elem], loc=o.loc)
        elif o.name == "loop.load" and o.result in vector:
            new = new_op("loop.gather", [get(v, False) for v in o.operands] + [mask], [vec(o.result.type, n)],
                         loc=o.loc)
        elif o.name == "loop.store" and o.operands[-1] in vector:
            args = [get(o.operands[0], True)] + [get(v, False) for v in o.operands[1:]] + [mask]
            new = new_op("loop.scatter", args, [], loc=o.loc)
        elif o.results and o.result in vector:
            cond = o.operands[0] if o.name == "loop.select" else None
            args = [get(v, v is not cond) for v in o.operands]
            new = new_op(o.name, args, [vec(o.result.type, n)], dict(o.attrs), loc=o.loc)
        else:
            new = new_op(o.name, [get(v, False) for v in o.operands], [r.type for r in o.results], dict(o.attrs),
                         loc=o.loc)
        for old, r in zip(o.results, new.results):
            r.name = old.name
            vmap[old] = r
        body.add(new)


def _vectorize_core(loop: Op, vl: int) -> None:
    """An innermost core loop (not decoupled) whose index is only a last index: vl elements a trip."""
    if not is_const(loop.operands[2], 1):
        raise Decline("its step is not the constant 1")
    if any(o.regions for o in loop.body.ops):
        raise Decline("it is not an innermost loop")
    iv = loop.body.args[0]
    for o in loop.body.ops:
        idx = o.operands[1:] if o.name == "loop.load" else o.operands[2:] if o.name == "loop.store" else []
        if iv in o.operands and not (idx and idx[-1] is iv and o.operands.count(iv) == 1):
            raise Decline(f"'{o.name}' uses the loop index other than as the last index of a load or store")
    vector = _plan(loop.body.ops, set(), {iv})
    elems = [v.type.elem for o in loop.body.ops if o.name in ("loop.load", "loop.store")  # type: ignore[union-attr]
             for v in o.operands[:2] if isinstance(v.type, ShapedType)]
    n = vl or _covering(loop, max(1, SIMD_BITS // max([e.bytes * 8 for e in elems] or [32])))
    block = loop.parent
    assert block is not None
    step = new_op("loop.const", [], [iv.type], {"value": n}, loc=loop.loc)
    block.ops.insert(block.ops.index(loop), step)
    step.parent = block
    c = Value(iv.type, iv.name)
    body = Block([c])
    c.owner = body
    lanes = body.add(new_op("loop.iota", [c], [vec(ScalarType("index"), n)], loc=loop.loc)).result
    mask = body.add(new_op("loop.tailmask", [c, loop.operands[1]], [vec(I1, n)], loc=loop.loc)).result
    _emit(loop.body.ops, vector, mask, n, body, {iv: lanes})
    inside = {c, *(r for o in body.ops for r in o.results)}
    for o in [o for o in body.ops if o.name == "loop.splat" and o.operands[0] not in inside]:
        body.ops.remove(o)  # splat of a value from outside the loop: once, before the outermost loop
        at = loop
        while (outer := at.parent_op()) is not None and outer.name == "loop.for" and (
                o.operands[0] not in defined_in(outer)):
            at = outer
        target = at.parent
        assert target is not None
        target.ops.insert(target.ops.index(at), o)
        o.parent = target
    loop.operands[2] = step.result
    loop.regions[0] = body
    body.parent = loop
