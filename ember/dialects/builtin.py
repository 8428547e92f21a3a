"""Ops every level shares: module, func, return, param (a weight tensor), host.onnx (a host op), and
work (the record of an embedding op that lower-emb replaced by loops)."""

from __future__ import annotations

import json
import math
import re

from ..ir.core import Op, check, define
from ..ir.types import ShapedType, Type
from .emb import (
    DHE_LAYERS,
    DHE_MODES,
    EMPTY,
    MODES,
    QBAG_BITS,
    QBAG_MODES,
    REDUCTIONS,
    ROBE_MODES,
    TT_CORES,
    TTBAG_MODES,
    tt_shapes,
)


@define("module", regions=1)
def _module(op: Op) -> None:
    for f in op.body.ops:
        check(f.name == "func", f, "may only appear inside a module's body as 'func'")


SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_.$]*")  # what follows '@' in .eir (grammars/eir.lark)


@define("func", regions=1, attrs=("sym_name", "results"))
def _func(op: Op) -> None:
    name, results = op.attrs["sym_name"], op.attrs["results"]
    check(isinstance(name, str) and bool(SYMBOL.fullmatch(name)), op,
          "sym_name must be a name: a letter or _, then letters, digits, _, . or $")
    check(isinstance(results, list) and all(isinstance(t, Type) for t in results), op,
          "results must be a list of types")
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


WORK_OPERANDS = {"emb.gather": (3, 3), "emb.bag": (4, 5), "emb.qbag": (4, 5), "emb.ttbag": (5, 8),
                 "emb.robe": (4, 5), "emb.dhe": (8, 13),
                 "emb.scatter_rows": (4, 4)}  # the op's operands + result
WORK_ATTRS: dict[str, dict[str, tuple[str | None, ...]]] = {  # None: the attribute may be absent
    "emb.gather": {"negative": ("wrap", None)},
    "emb.bag": {"mode": MODES, "empty": EMPTY},
    "emb.qbag": {"mode": QBAG_MODES, "bits": tuple(QBAG_BITS)},
    "emb.ttbag": {"mode": TTBAG_MODES, "cores": TT_CORES},
    "emb.robe": {"mode": ROBE_MODES},
    "emb.dhe": {"mode": DHE_MODES, "layers": DHE_LAYERS},
    "emb.scatter_rows": {"reduction": REDUCTIONS},
}


@define("work", operands=(3, 13), attrs=("op",))
def _work(op: Op) -> None:
    """What an emb op computed, kept after lower-emb replaced it by loop nests: its operands, then the tensor
    that holds its result, and its attributes with `op` naming it.  Its uses keep it pointing at the tensors
    later passes rewrite (replace_uses updates it like any op); codegen turns it into the program's `.work`
    record and no code, so a program can be judged by the operation it computes, whatever code computes it."""
    kind = op.attrs["op"]
    check(isinstance(kind, str) and kind in WORK_OPERANDS, op,
          f"'op' must name an emb op ({', '.join(WORK_OPERANDS)}), got {kind!r}")
    lo, hi = WORK_OPERANDS[kind]
    count = str(lo) if lo == hi else f"{lo} or {hi}" if hi == lo + 1 else f"{lo} to {hi}"
    check(lo <= len(op.operands) <= hi, op, f"a record of {kind} has {count} "
          f"operands (the op's operands, then its result), got {len(op.operands)}")
    for v in op.operands:
        check(isinstance(v.type, ShapedType) and v.type.kind in ("tensor", "memref"), op,
              f"operands must be tensors or memrefs, got {v.type}")
    for key, allowed in WORK_ATTRS[kind].items():  # what codegen copies into the record
        value = op.attrs.get(key)
        check(not isinstance(value, (bool, float)) and value in allowed, op,
              f"{key} must be {' or '.join(json.dumps(a) for a in allowed if a)}"
              + (" when given" if None in allowed else "") + f" (a record of {kind})")
    pad = op.attrs.get("padding_idx")
    check(pad is None or (kind == "emb.bag" and isinstance(pad, int) and not isinstance(pad, bool)), op,
          "padding_idx must be an integer, on a record of emb.bag")
    rows = op.attrs.get("rows")
    check((rows is None) == (kind != "emb.ttbag") and (rows is None or isinstance(rows, int)
                                                       and not isinstance(rows, bool) and rows > 0), op,
          "rows must be a positive integer, on a record of emb.ttbag (and only there)")
    block = op.attrs.get("block")
    check((block is None) == (kind != "emb.robe") and (block is None or isinstance(block, int)
                                                        and not isinstance(block, bool) and block > 0), op,
          "block must be a positive integer, on a record of emb.robe (and only there)")
    if kind == "emb.dhe":
        n = 3 + 2 * op.attrs["layers"]
        check(len(op.operands) in (n + 3, n + 4), op, f"a record of emb.dhe with {op.attrs['layers']} layers has "
              f"{n + 3} or {n + 4} operands, got {len(op.operands)}")
    if kind == "emb.ttbag":
        n = op.attrs["cores"]
        check(len(op.operands) in (n + 3, n + 4), op, f"a record of emb.ttbag with {n} cores has {n + 3} or {n + 4} "
              f"operands, got {len(op.operands)}")
        shapes = [v.type.shape or () for v in op.operands[:n]]
        why = tt_shapes(shapes)  # type: ignore[arg-type]
        check(why is None, op, f"the cores of a record of emb.ttbag do not chain: {why}")
        total = math.prod(s[0] for s in shapes)
        check(rows <= total, op, f"rows must be at most {total} (the product of the cores' p), got {rows}")
    if kind in ("emb.ttbag", "emb.dhe"):  # the indices and offsets follow the cores or the layers
        n = op.attrs["cores"] if kind == "emb.ttbag" else 3 + 2 * op.attrs["layers"]
        for v, what in zip(op.operands[n:n + 2], ("indices", "offsets")):
            check(v.type.elem.is_int, op, f"{what} (operand {n if what == 'indices' else n + 1}) must hold integers, "
                  f"got {v.type}")
    if kind == "emb.robe":
        width = (op.operands[-1].type.shape or (None, None))[-1]
        check(width is None or width % block == 0, op, f"block must divide the row width {width}, got {block}")
