"""Derived params: params whose data the linker computes from float params of the weights file.

The lossy table transforms (quantize-tables, tt-decompose, robe) replace a float table `NAME` by params named
`NAME#KIND` or `NAME#KIND/ARGS` (`bag.weight#int8`, `bag.weight#tt/100x100x100/4x4x4/16x16/0`,
`bag.weight#robe/64000/32/0`).  The weights file keeps only `NAME`; whoever links a program (ember-asm, the
benchmark, the fuzzer) calls `link_param`, which finds the function registered for KIND and computes the data
from `NAME` (a ROBE array that several tables share is `NAME1|NAME2|...#robe/ARGS`, from all of them).  A pass
registers its kinds with `derive` (or `derive_many`) when its module is imported, and importing any module of
`ember.passes` imports every pass.

Also here, what the transforms share: which bags they can take (`bag_table`), how they put the new op and its
params in place of the bag (`derived_param`, `replace_bag`), and what they report per table: `Figures`, the
bytes before and after and the reconstruction error, given as a remark and, through `ember-opt --stats`, as
JSON.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..frontends import load_weights_any
from ..ir.core import Op, Value, new_op
from ..ir.diagnostics import EmberError
from ..ir.rewrite import insert_before, replace_uses, users
from ..ir.types import ShapedType
from .base import Decline

Derive = Callable[[np.ndarray, str], np.ndarray]  # (the float array NAME, the name's ARGS) -> the param's data
DeriveMany = Callable[[list[np.ndarray], str], np.ndarray]  # the same from several tables, NAME1|NAME2|...
DERIVED: dict[str, Derive] = {}
DERIVED_MANY: dict[str, DeriveMany] = {}


def derive(kind: str) -> Callable[[Derive], Derive]:
    """Register a function computing the params `NAME#<kind>[/ARGS]`."""
    def register(fn: Derive) -> Derive:
        DERIVED[kind] = fn
        return fn
    return register


def derive_many(kind: str) -> Callable[[DeriveMany], DeriveMany]:
    """Register a function computing the params `NAME1|NAME2|...#<kind>[/ARGS]` from the arrays it names, in order
    (a single NAME is a list of one): a param that several tables share."""
    def register(fn: DeriveMany) -> DeriveMany:
        DERIVED_MANY[kind] = fn
        return fn
    return register


def link_param(weights: dict[str, np.ndarray], name: str) -> np.ndarray | None:
    """A param's data from a weights file: the array of that name, or for a derived name `NAME#KIND[/ARGS]` the
    data computed from the array NAME; None when neither exists."""
    if name in weights:
        return weights[name]
    base, _, tail = name.rpartition("#")
    kind, _, args = tail.partition("/")
    many = kind in DERIVED_MANY
    names = base.split("|") if many and base not in weights else [base]  # a table may have | in its name
    if not (many or kind in DERIVED) or not all(n in weights for n in names):
        return None
    arrays = [np.asarray(weights[n]) for n in names]
    try:
        return DERIVED_MANY[kind](arrays, args) if many else DERIVED[kind](arrays[0], args)
    except EmberError as e:
        raise EmberError(f"param '{name}' is computed from '{base}': {e.message}") from None


def read_weights(path: object) -> dict[str, np.ndarray] | None:
    """The arrays of a module's weights file, or None when there is none or it cannot be read."""
    if not isinstance(path, str) or not path:
        return None
    try:
        return load_weights_any(path)
    except (EmberError, OSError):
        return None


def float_rows(weights: dict[str, np.ndarray] | None, table: Op) -> np.ndarray | str:
    """The float32 data of the param op `table` from the weights, or why the error cannot be measured."""
    name = table.attrs["name"]
    if weights is None:
        return "the module's weights file could not be read"
    x = np.asarray(weights.get(name, np.zeros(0)))
    t = table.result.type
    assert isinstance(t, ShapedType) and t.shape is not None
    if x.shape != tuple(t.shape) or x.dtype.kind != "f":
        return f"the weights file has no {name} of the table's shape"
    return x.astype(np.float32, copy=False)


def bag_table(op: Op, form: str, bags: str) -> tuple[Op, int, int]:
    """The param op, rows and width of the float32 table of the `emb.bag` `op`, which a transform to `form` (whose
    bags, `bags`, sum or average) can replace; Decline saying why not otherwise."""
    table = op.operands[0]
    t, src = table.type, table.owner
    if not (isinstance(src, Op) and src.name == "param"):
        raise Decline("its table is not a param")
    assert isinstance(t, ShapedType) and t.shape is not None
    if t.elem.name != "f32":
        raise Decline(f"its table holds {t.elem}, not f32")
    if op.attrs["mode"] not in ("sum", "mean"):
        raise Decline(f"mode {op.attrs['mode']} has no {form} form ({bags} sum, or average)")
    if "padding_idx" in op.attrs:
        raise Decline(f"it has a padding_idx, which {form} bags do not take")
    if len(op.operands) == 4 and op.operands[3].type.elem.name != "f32":  # type: ignore[union-attr]
        raise Decline("its per-sample weights are not f32")
    rows, dim = t.shape
    if not rows or not dim:
        raise Decline(f"the table is empty ({rows} x {dim})")
    return src, rows, dim


def derived_param(bag: Op, src: Op, name: str, type: ShapedType, value: str) -> Value:
    """The param `name` (of `type`, its value called `value`) placed before `bag`, or the one already there: a table
    two bags share is converted once."""
    block = bag.parent
    assert block is not None
    param = next((o for o in block.ops if o.name == "param" and o.attrs["name"] == name), None)
    if param is None:
        param = insert_before(bag, new_op("param", [], [type], {"name": name}, loc=src.loc))
        param.result.name = value
    return param.result


def replace_bag(bag: Op, src: Op, name: str, operands: list[Value], attrs: dict[str, object]) -> None:
    """The op `name` over `operands` in place of `bag`; the float table `src` leaves the program (and its .bin) when
    no other op reads it."""
    block = bag.parent
    assert block is not None and block.parent is not None
    new = insert_before(bag, new_op(name, operands, [bag.result.type], attrs, loc=bag.loc))
    new.result.name = bag.result.name
    replace_uses(block.parent, bag.result, new.result)
    block.ops.remove(bag)
    if not users(block.parent, src.result):
        block.ops.remove(src)


@dataclass
class Figures:
    """What a lossy transform did to one table: its size before and after, and the reconstruction error (max and
    RMS of the rows the new form stands for minus the float rows), or why the error was not measured."""

    table: str
    representation: str
    shape: tuple[int, int]
    bytes_before: int
    bytes_after: int
    error_max: float | None = None
    error_rms: float | None = None
    unmeasured: str = ""

    def measure(self, rows: np.ndarray | str, approx: Callable[[np.ndarray, int], np.ndarray]) -> None:
        """Set the error from `approx(block, start)`, the new form's rows start .. start + len(block) given the
        float rows `block`, over blocks of about a million elements (a large table's difference is never held
        whole); or record why it is unknown (`rows` a str)."""
        if isinstance(rows, str):
            self.unmeasured = rows
            return
        step = max(1, (1 << 20) // max(1, rows.shape[1]))
        worst, squares = 0.0, 0.0
        with np.errstate(all="ignore"):
            for start in range(0, len(rows), step):
                block = rows[start:start + step]
                diff = approx(block, start).astype(np.float64) - block
                worst = float(np.max([worst, np.abs(diff).max()]))  # NaN propagates
                squares += float(np.sum(diff ** 2))
        self.error_max, self.error_rms = worst, math.sqrt(squares / rows.size)

    def summary(self) -> str:
        """`1,280 -> 640 bytes (2.00x smaller); reconstruction error max 0.00926, RMS 0.00305`."""
        head = (f"{self.bytes_before:,} -> {self.bytes_after:,} bytes "
                f"({self.bytes_before / self.bytes_after:.2f}x smaller)")
        if self.error_max is None:
            return f"{head}; reconstruction error not measured ({self.unmeasured})"
        return f"{head}; reconstruction error max {self.error_max:.3g}, RMS {self.error_rms:.3g}"

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "table": self.table, "representation": self.representation, "rows": self.shape[0],
            "dim": self.shape[1], "bytes_before": self.bytes_before, "bytes_after": self.bytes_after,
            "ratio": self.bytes_before / self.bytes_after, "error_max": _number(self.error_max),
            "error_rms": _number(self.error_rms)}
        if self.unmeasured:
            out["error_unmeasured"] = self.unmeasured
        return out


def _number(x: float | None) -> float | str | None:
    """A figure as JSON has it: an infinite or NaN error (a table holding inf) as the string 'inf' or 'nan'."""
    return x if x is None or math.isfinite(x) else str(x)
