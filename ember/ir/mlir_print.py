"""Any Ember module in MLIR's generic operation syntax, so MLIR tools (mlir-opt, xdsl) can read every level.

    "builtin.module"() ({
      "ember.func"() ({
      ^bb0(%t: tensor<4x8xf32>, %i: tensor<3xi64>):
        %y = "emb.gather"(%t, %i) : (tensor<4x8xf32>, tensor<3xi64>) -> tensor<3x8xf32>
        "ember.return"(%y) : (tensor<3x8xf32>) -> ()
      }) {sym_name = "main", results = [tensor<3x8xf32>]} : () -> ()
    }) {ember.opset = 18 : i64} : () -> ()

Ember's dialects are unregistered dialects there (mlir-opt needs --allow-unregistered-dialect); the names MLIR
lacks are in mlir_syntax.  Values keep the names `print_module` gives them, so the text reads back (mlir_parse)
as the same module: print_module(parse_mlir(print_mlir(m))) == print_module(m).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from .core import Block, Op, Value
from .diagnostics import EmberError
from .mlir_syntax import DENSE, DIALECT, MODULE, SCALAR_TO_MLIR, STREAM, VECTOR, op_name, value_name
from .printer import DenseAttr, Printer, format_attr
from .types import ScalarType, ShapedType, StreamType, Type

# the bits of inf, -inf and nan per float type: MLIR writes non-finite floats as hexadecimal bit patterns
NONFINITE_BITS = {
    "f16": (0x7C00, 0xFC00, 0x7E00), "bf16": (0x7F80, 0xFF80, 0x7FC0),
    "f32": (0x7F800000, 0xFF800000, 0x7FC00000), "f64": (0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000),
}
FLOAT_MAX = {"f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": 3.4028234663852886e38, "f64": math.inf}
_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")


def mlir_type(t: Type) -> str:
    if isinstance(t, ScalarType):
        return SCALAR_TO_MLIR.get(t.name, t.name)
    if isinstance(t, StreamType):
        return f"{STREAM}<{mlir_type(t.elem)}>"
    if isinstance(t, ShapedType):
        elem = mlir_type(t.elem)
        dims = "*x" if t.shape is None else "".join(("?" if d is None else str(d)) + "x" for d in t.shape)
        if t.kind == "vector" and (t.shape is None or None in t.shape):
            return f"{VECTOR}<{dims}{elem}>"
        return f"{t.kind}<{dims}{elem}>"
    raise TypeError(f"no MLIR form for type {t!r}")


def mlir_float(x: float, elem: str = "f64") -> str:
    """A float literal MLIR reads back to `x`: it needs a '.', and takes non-finite values only as bits."""
    if math.isfinite(x):
        s = repr(float(x))
        return s if "." in s else s.replace("e", ".0e")
    inf, neg_inf, nan = NONFINITE_BITS[elem]
    bits = nan if math.isnan(x) else inf if x > 0 else neg_inf
    return f"0x{bits:0{len(f'{inf:X}')}X}"


def mlir_string(s: str) -> str:
    """MLIR's string literal: printable ASCII as is, every other byte of the UTF-8 as \\XX."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.extend(f"\\{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
    return '"' + "".join(out) + '"'


def mlir_attr(v: Any) -> str:
    if isinstance(v, bool | np.bool_):
        return "true" if v else "false"
    if isinstance(v, int | np.integer):
        v = int(v)
        width = 64 if -(1 << 63) <= v < 1 << 63 else v.bit_length() + 1
        return f"{v} : i{width}"
    if isinstance(v, float | np.floating):
        return f"{mlir_float(float(v))} : f64"
    if isinstance(v, str):
        return mlir_string(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(mlir_attr(x) for x in v) + "]"
    if isinstance(v, DenseAttr):
        return dense(v)
    if isinstance(v, Type):
        return mlir_type(v)
    raise TypeError(f"no MLIR form for attribute {v!r}")


def mlir_attr_dict(attrs: dict[str, Any], prefix: str = "") -> str:
    items = []
    for k, v in attrs.items():
        key = prefix + k
        items.append(f"{key if _BARE_KEY.fullmatch(key) else mlir_string(key)} = {mlir_attr(v)}")
    return "{" + ", ".join(items) + "}"


def _fits(x: object, elem: ScalarType) -> bool:
    """Whether `x` is a literal MLIR takes as an element of `elem`, and reads back as `x`."""
    if elem.is_float:  # finite values past the type's largest are an error to MLIR
        return isinstance(x, float) and not (math.isfinite(x) and abs(x) > FLOAT_MAX[elem.name])
    if elem.name == "i1":
        return isinstance(x, bool)
    if not isinstance(x, int) or isinstance(x, bool):
        return False
    if elem.name == "u8":
        return 0 <= x < 256
    bits = 64 if elem.name == "index" else int(elem.name[1:])
    return -(1 << (bits - 1)) <= x < 1 << (bits - 1)


def dense(v: DenseAttr) -> str:
    """`dense<...>` nested by the shape (or a splat of one value) where MLIR can hold it; otherwise (a memref or a
    dynamic shape, a count that is neither the shape's nor one, an integer in a float tensor) `#ember.dense<VALUES :
    TYPE>` with the values as Ember writes them, which MLIR keeps as an opaque attribute."""
    t = v.type
    values = list(v.values)
    count = math.prod(t.shape) if t.shape is not None and None not in t.shape else -1
    if (t.kind in ("tensor", "vector") and count >= 0 and len(values) in (count, 1)
            and all(_fits(x, t.elem) for x in values)):
        def lit(x: object) -> str:
            if isinstance(x, float):
                return mlir_float(x, t.elem.name)
            return ("true" if x else "false") if isinstance(x, bool) else str(x)

        def nest(flat: list[Any], shape: tuple[int, ...]) -> str:
            if not shape:
                return lit(flat[0])
            step = math.prod(shape[1:])
            return "[" + ", ".join(nest(flat[k * step:(k + 1) * step], shape[1:]) for k in range(shape[0])) + "]"

        body = lit(values[0]) if len(values) == 1 and count != 1 else nest(values, t.shape)  # type: ignore[arg-type]
        return f"dense<{body}> : {mlir_type(t)}"
    return f"{DENSE}<{format_attr(values)} : {mlir_type(t)}>"


class MlirPrinter:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def module(self, m: Op) -> str:
        names = Printer()
        for f in m.body.ops:  # the names print_module gives, per function as it gives them
            names.used, names.counter = set(), 0
            names.bind_all(f)
        self.lines.append(f'"{MODULE}"() ({{')
        self.block(m.body, "")
        tail = "})"
        if m.attrs:
            tail += " " + mlir_attr_dict(m.attrs, prefix=DIALECT + ".")
        self.lines.append(tail + " : () -> ()")
        return "\n".join(self.lines) + "\n"

    def op(self, op: Op, ind: str) -> None:
        if op.dialect == DIALECT:
            raise op.error(f"cannot be written as MLIR: the '{DIALECT}' dialect there holds Ember's dialect-less ops")
        head = ind
        if op.results:
            head += ", ".join(_use(r) for r in op.results) + " = "
        head += f'"{op_name(op.name)}"(' + ", ".join(_use(v) for v in op.operands) + ")"
        tail = ""
        if op.attrs:
            tail += " " + mlir_attr_dict(op.attrs)
        results = [mlir_type(r.type) for r in op.results]
        tail += " : (" + ", ".join(mlir_type(v.type) for v in op.operands) + ") -> "
        tail += results[0] if len(results) == 1 else "(" + ", ".join(results) + ")"
        if not op.regions:
            self.lines.append(head + tail)
            return
        self.lines.append(head + " ({")
        for i, block in enumerate(op.regions):
            self.block(block, ind)
            self.lines.append(ind + ("}, {" if i < len(op.regions) - 1 else "})" + tail))

    def block(self, b: Block, ind: str) -> None:
        if b.args:
            self.lines.append(ind + "^bb0(" + ", ".join(f"{_use(a)}: {mlir_type(a.type)}" for a in b.args) + "):")
        elif not b.ops:  # an empty region would have no block, and builtin.module needs its one
            self.lines.append(ind + "^bb0:")
        for op in b.ops:
            self.op(op, ind + "  ")


def _use(v: Value) -> str:
    return "%" + value_name(v.name or "?")  # unnamed: used outside the scope that defines it, as print_module shows


def print_mlir(m: Op) -> str:
    """`m` (an Ember module at any level) as MLIR generic syntax."""
    try:
        return MlirPrinter().module(m)
    except TypeError as e:  # an attribute or type built in memory that no text form has
        raise EmberError(str(e)) from None
