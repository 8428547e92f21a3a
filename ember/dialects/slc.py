"""Level `slc` (Structured Lookup-Compute): access loops over streams, and callbacks for the core.

    slc.for %lb, %ub, %step (%i: stream<index>) { ... }    an access loop; bounds are plain integers
                                                          from the function or streams of outer loops
    %s = slc.mem %m, %i, %j : stream<f32>                  a memory stream (read-only memref)
    %s = slc.alu %a, %b {op = "add"} : stream<index>       an integer ALU stream
    slc.callback {on = "ite"} () { %v = slc.head %s : f32 ... }
        core code.  `on = "ite"` fires once per iteration of the enclosing slc.for and sits before
        any inner loop; `on = "end"` fires when the inner slc.for just before it finishes.
        `slc.head` reads the current value of a stream (what the access unit marshals).
"""

from __future__ import annotations

from ..ir.core import Op, check, define
from ..ir.types import ScalarType, ShapedType, StreamType
from .loop import memref_of

ALU = ("add", "sub", "mul", "div", "min", "max")


def int_or_int_stream(t: object) -> bool:
    if isinstance(t, StreamType):
        t = t.elem
    return isinstance(t, ScalarType) and t.is_int


@define("slc.for", operands=3, regions=1)
def _for(op: Op) -> None:
    for v in op.operands:
        check(int_or_int_stream(v.type), op, f"bounds must be integers or integer streams, got {v.type}")
    args = op.body.args
    check(len(args) == 1 and args[0].type == StreamType(ScalarType("index")), op,
          "body takes one stream<index> induction variable")


@define("slc.mem", operands=(1, None), results=1)
def _mem(op: Op) -> None:
    t = memref_of(op, 0)
    check(t.rank == len(op.operands) - 1, op, f"{t} needs {t.rank} indices")
    for v in op.operands[1:]:
        check(int_or_int_stream(v.type), op, "indices must be integers or integer streams")
    check(op.result.type == StreamType(t.elem), op, f"result must be stream<{t.elem}>")


@define("slc.alu", operands=2, results=1, attrs=("op",))
def _alu(op: Op) -> None:
    check(op.attrs["op"] in ALU, op, f"op must be one of {', '.join(ALU)}")
    for v in op.operands:
        check(int_or_int_stream(v.type), op, "operands must be integers or integer streams")
    check(isinstance(op.result.type, StreamType), op, "result must be a stream")


@define("slc.callback", regions=1, attrs=("on",))
def _callback(op: Op) -> None:
    check(op.attrs["on"] in ("ite", "end"), op, "on must be \"ite\" or \"end\"")
    parent = op.parent_op()
    check(parent is not None and parent.name == "slc.for", op, "must be inside an slc.for")
    assert op.parent is not None
    i = op.parent.ops.index(op)
    after_loop = i > 0 and op.parent.ops[i - 1].name == "slc.for"
    check(after_loop == (op.attrs["on"] == "end"), op,
          "on = \"end\" callbacks follow an inner slc.for; on = \"ite\" ones do not")


@define("slc.head", operands=1, results=1)
def _head(op: Op) -> None:
    t = op.operands[0].type
    check(isinstance(t, StreamType) and t.elem == op.result.type, op, "reads a stream's element type")
    p = op.parent_op()
    while p is not None and p.name != "slc.callback":
        p = p.parent_op()
    check(p is not None, op, "must be inside an slc.callback")


_ = ShapedType
