"""Level `slc` (Structured Lookup-Compute): access loops over streams, and callbacks for the core.

    slc.for %lb, %ub, %step (%i: stream<index>) { ... }    an access loop; bounds are plain integers
                                                          from the function or streams of outer loops
    %s = slc.mem %m, %i, %j : stream<f32>                  a memory stream (read-only memref)
    %s = slc.alu %a, %b {op = "add"} : stream<index>       an integer ALU stream
    slc.callback {on = "ite"} () { %v = slc.head %s : f32 ... }
        core code, fired on an event of the enclosing slc.for: `beg` before its first iteration,
        `ite` on every iteration (before any inner loop runs), `end` after its last iteration.
        `slc.head` reads the current value of a stream (what the access unit marshals).

Vector forms (made by `vectorize`, `bufferize`):
    slc.for %lb, %ub, %c1 {vl = 16} (%d: stream<vector<16xindex>>) { ... }   16 induction values a head
    %s = slc.mem %table, %r, %d : stream<vector<16xf32>>    contiguous loads along the last axis
    %m = slc.mask %d : stream<vector<16xi1>>                 lanes below the loop's upper bound
    %b = slc.buffer %s : stream<memref<?xf32>>               every head of %s over one traversal of
                                                             its loop, marshaled once at the loop's end
"""

from __future__ import annotations

from ..ir.core import Op, check, define
from ..ir.types import INDEX, ScalarType, ShapedType, StreamType, reads_as
from .loop import is_vector, memref_of

ALU = ("add", "sub", "mul", "div", "rem", "min", "max")


def int_or_int_stream(t: object) -> bool:
    if isinstance(t, StreamType):
        t = t.elem
    return isinstance(t, ScalarType) and t.is_int


def vector_iv(vl: int) -> StreamType:
    return StreamType(ShapedType("vector", (vl,), INDEX))


@define("slc.for", operands=3, regions=1)
def _for(op: Op) -> None:
    for v in op.operands:
        check(int_or_int_stream(v.type), op, f"bounds must be integers or integer streams, got {v.type}")
    args = op.body.args
    want = vector_iv(op.attrs["vl"]) if "vl" in op.attrs else StreamType(INDEX)
    check(len(args) == 1 and args[0].type == want, op, f"body takes one {want} induction variable")


@define("slc.mem", operands=(1, None), results=1)
def _mem(op: Op) -> None:
    t = memref_of(op, 0)
    check(t.rank == len(op.operands) - 1, op, f"{t} needs {t.rank} indices")
    for v in op.operands[1:-1]:
        check(int_or_int_stream(v.type), op, "indices must be integers or integer streams")
    last = op.operands[-1].type if len(op.operands) > 1 else None
    if isinstance(last, StreamType) and is_vector(last.elem, "int"):
        assert isinstance(last.elem, ShapedType)
        want = StreamType(ShapedType("vector", last.elem.shape, t.elem))
    else:
        check(last is None or int_or_int_stream(last), op, "indices must be integers or integer streams")
        got = op.result.type  # a scalar stream of a byte memref may be a typed read
        want = got if isinstance(got, StreamType) and reads_as(t.elem, got.elem) else StreamType(t.elem)
    check(op.result.type == want, op, f"result must be {want}")


@define("slc.alu", operands=2, results=1, attrs=("op",))
def _alu(op: Op) -> None:
    check(op.attrs["op"] in ALU, op, f"op must be one of {', '.join(ALU)}")
    for v in op.operands:
        check(int_or_int_stream(v.type), op, "operands must be integers or integer streams")
    check(isinstance(op.result.type, StreamType), op, "result must be a stream")


@define("slc.callback", regions=1, attrs=("on",))
def _callback(op: Op) -> None:
    check(op.attrs["on"] in ("beg", "ite", "end"), op, "on must be \"beg\", \"ite\" or \"end\"")
    parent = op.parent_op()
    check(parent is not None and parent.name == "slc.for", op, "must be inside an slc.for")


@define("slc.head", operands=1, results=1)
def _head(op: Op) -> None:
    t = op.operands[0].type
    check(isinstance(t, StreamType) and t.elem == op.result.type, op, "reads a stream's element type")
    p = op.parent_op()
    while p is not None and p.name != "slc.callback":
        p = p.parent_op()
    check(p is not None, op, "must be inside an slc.callback")


@define("slc.mask", operands=1, results=1)
def _mask(op: Op) -> None:
    t = op.operands[0].type
    ok = isinstance(t, StreamType) and is_vector(t.elem, "int") and getattr(op.operands[0].owner, "parent", None)
    check(bool(ok), op, "reads the mask of a vector loop's induction variable")
    assert isinstance(t, StreamType) and isinstance(t.elem, ShapedType)
    check(op.result.type == StreamType(ShapedType("vector", t.elem.shape, ScalarType("i1"))), op,
          "result must be a stream of vector<Nxi1>")


@define("slc.buffer", operands=1, results=1)
def _buffer(op: Op) -> None:
    t = op.operands[0].type
    check(isinstance(t, StreamType) and is_vector(t.elem), op, "buffers a vector stream")
    assert isinstance(t, StreamType) and isinstance(t.elem, ShapedType)
    check(op.result.type == StreamType(ShapedType("memref", (None,), t.elem.elem)), op,
          f"result must be stream<memref<?x{t.elem.elem}>>")
