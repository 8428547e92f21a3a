"""Level `dlc` (Decoupled Lookup-Compute): one access program and the execute unit's cases.

    dlc.offload () {                                   region 0: the access unit's configuration
      %t0 = dlc.tu %lb, %ub, %step : stream<index>      a traversal unit; its value is its induction
      %t1 = dlc.tu %s, %e, %c1, %t0 : stream<index>     stream; an optional 4th operand names the parent
      %s = dlc.mem %m, %t0 : stream<i64>                memory and ALU streams (as in slc)
      %a = dlc.alu %t0, %c1 {op = "add"} : stream<index>
      dlc.on %t1, %t0, %s {event = "ite", token = 1}    on an event of TU %t1 push operands, then a token
    } () {                                             region 1: the execute unit
      dlc.case {id = 1} () { %b = dlc.pop : index ... }  popped in the order they were pushed
    }
Function-level values may be used in both regions (the core computed them before the offload).
"""

from __future__ import annotations

from ..ir.core import Op, check, define
from ..ir.types import ScalarType, StreamType
from .loop import is_vector
from .slc import ALU, int_or_int_stream, vector_iv

EVENTS = ("beg", "ite", "end")
IV = StreamType(ScalarType("index"))
ACCESS_OPS = ("dlc.tu", "dlc.mem", "dlc.alu", "dlc.mask", "dlc.buffer", "dlc.on")


@define("dlc.offload", regions=2)
def _offload(op: Op) -> None:
    for inner in op.regions[0].ops:
        check(inner.name in ACCESS_OPS, inner, "is not an access-unit op")
    for inner in op.regions[1].ops:
        check(inner.name == "dlc.case", inner, "only dlc.case may appear in the execute region")
    ids = [c.attrs["id"] for c in op.regions[1].ops]
    check(len(ids) == len(set(ids)), op, "case ids must be unique")
    tokens = {o.attrs["token"] for o in op.regions[0].ops if o.name == "dlc.on" and "token" in o.attrs}
    check(tokens <= set(ids), op, f"tokens {sorted(tokens - set(ids))} have no case")


def _in_access(op: Op) -> None:
    p = op.parent_op()
    check(p is not None and p.name == "dlc.offload" and op.parent is p.regions[0], op,
          "must be in the access region of a dlc.offload")


@define("dlc.tu", operands=(3, 4), results=1)
def _tu(op: Op) -> None:
    _in_access(op)
    for v in op.operands[:3]:
        check(int_or_int_stream(v.type), op, "bounds must be integers or integer streams")
    if len(op.operands) == 4:
        check(op.operands[3].owner is not None and getattr(op.operands[3].owner, "name", "") == "dlc.tu", op,
              "the parent must be a dlc.tu")
    want = vector_iv(op.attrs["vl"]) if "vl" in op.attrs else IV
    check(op.result.type == want, op, f"result must be {want}")


@define("dlc.mem", operands=(1, None), results=1)
def _mem(op: Op) -> None:
    _in_access(op)
    for v in op.operands[1:-1]:
        check(int_or_int_stream(v.type), op, "indices must be integers or integer streams")
    last = op.operands[-1].type
    check(len(op.operands) == 1 or int_or_int_stream(last) or (
        isinstance(last, StreamType) and is_vector(last.elem, "int")), op, "the last index must be an integer, "
          "an integer stream or a vector induction stream")


@define("dlc.mask", operands=1, results=1)
def _mask(op: Op) -> None:
    _in_access(op)


@define("dlc.buffer", operands=1, results=1)
def _buffer(op: Op) -> None:
    _in_access(op)


@define("dlc.alu", operands=2, results=1, attrs=("op",))
def _alu(op: Op) -> None:
    _in_access(op)
    check(op.attrs["op"] in ALU, op, f"op must be one of {', '.join(ALU)}")


@define("dlc.on", operands=(1, None), attrs=("event",))
def _on(op: Op) -> None:
    _in_access(op)
    check(op.attrs["event"] in EVENTS, op, f"event must be one of {', '.join(EVENTS)}")
    tu = op.operands[0].owner
    check(getattr(tu, "name", "") == "dlc.tu", op, "first operand must be a dlc.tu")
    for v in op.operands[1:]:
        check(isinstance(v.type, StreamType), op, "pushes streams only")


@define("dlc.case", regions=1, attrs=("id",))
def _case(op: Op) -> None:
    check(isinstance(op.attrs["id"], int) and op.attrs["id"] > 0, op, "id must be a positive integer")


@define("dlc.pop", results=1)
def _pop(op: Op) -> None:
    p = op.parent_op()
    check(p is not None and p.name == "dlc.case", op, "must be directly inside a dlc.case")
