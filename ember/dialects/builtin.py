"""Ops every level shares: module, func, return, param (a weight tensor), host.onnx (a host op)."""

from __future__ import annotations

from ..ir.core import Op, check, define
from ..ir.types import ShapedType


@define("module", regions=1)
def _module(op: Op) -> None:
    for f in op.body.ops:
        check(f.name == "func", f, "may only appear inside a module's body as 'func'")


@define("func", regions=1, attrs=("sym_name", "results"))
def _func(op: Op) -> None:
    check(bool(op.body.ops) and op.body.ops[-1].name == "return", op, "must end with 'return'")


@define("return", operands=(0, None))
def _return(op: Op) -> None:
    f = op.parent_op()
    check(f is not None and f.name == "func", op, "must be directly inside a func")
    assert f is not None
    want = [str(t) for t in f.attrs["results"]]
    got = [str(v.type) for v in op.operands]
    check(want == got, op, f"returns ({', '.join(got)}) but the function declares ({', '.join(want)})")


@define("param", results=1, attrs=("name",))
def _param(op: Op) -> None:
    """A weight tensor, read from the module's `weights` file by name."""
    check(isinstance(op.attrs["name"], str), op, "needs a string 'name'")
    check(isinstance(op.result.type, ShapedType) and op.result.type.shape is not None
          and None not in op.result.type.shape, op, "must have a static shape")


@define("host.onnx", operands=(0, None), results=(1, None), attrs=("op",))
def _host(op: Op) -> None:
    """An ONNX operator the simulator runs on whole tensors (reference implementation, roofline cost)."""
    check(isinstance(op.attrs["op"], str), op, "needs a string 'op' naming the ONNX operator")
    for v in [*op.operands, *op.results]:
        check(isinstance(v.type, ShapedType) and v.type.kind in ("tensor", "memref"), op,
              f"operands and results must be tensors or memrefs, got {v.type}")
