"""Dense operators: elementwise arithmetic and comparisons, casts, activations, normalization,
matrix products, attention and reductions.  Each becomes one or a few `host.onnx` ops at opset 17.

Operands follow PyTorch's type promotion (`Lowering.result_type`), so `mask * -1e9`, an int64
index compared with a float, or a float32 tensor times a 0-d float64 constant each get PyTorch's
result type.  Two operators have no ONNX operator at opset 17 and are written out: `gelu`
(ONNX Gelu is opset 20) as its Erf or Tanh formula, and `scaled_dot_product_attention` as the
MatMul / Softmax / MatMul its math reference computes.  Raising the opset instead would change the
form of ops the frontends already emit (ReduceMean's axes, ScatterElements' reductions), and every
runtime that runs opset 17 runs these.
"""

from __future__ import annotations

import math
from functools import reduce
from typing import Any

import numpy as np

from ...ir.core import Value
from .base import Args, aten
from .layout import LayoutOps
from .values import (
    FLOATS,
    Shape,
    TorchDType,
    Unusable,
    Weight,
    broadcast,
    dim,
    ints,
    is_number,
    matmul_shape,
    need,
    numpy_of,
)

_UNARY = {"relu": "Relu", "neg": "Neg", "abs": "Abs", "sign": "Sign", "sigmoid": "Sigmoid", "tanh": "Tanh",
          "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "erf": "Erf", "sin": "Sin", "cos": "Cos",
          "reciprocal": "Reciprocal", "floor": "Floor", "ceil": "Ceil", "round": "Round"}
_FLOAT_ONLY = ("sigmoid", "tanh", "exp", "log", "sqrt", "erf", "sin", "cos", "reciprocal")
"""PyTorch computes these in the default float type for integer operands."""
_ROUNDING = ("floor", "ceil", "round")  # identities on integers
_ARITH = {"add": "Add", "sub": "Sub", "mul": "Mul", "maximum": "Max", "minimum": "Min"}
_COMPARE = {"eq": "Equal", "ne": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater",
            "ge": "GreaterOrEqual"}
_LOGICAL = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}
_BITWISE = {"__and__": "And", "bitwise_and": "And", "__or__": "Or", "bitwise_or": "Or", "__xor__": "Xor",
            "bitwise_xor": "Xor"}


class DenseOps(LayoutOps):
    """Arithmetic, activations, normalization, products, attention, reductions."""

    def elementwise(self, onnx_op: str, xs: list[Any], elem: str, out: str | None = None,
                    attrs: dict[str, Any] | None = None, hint: str | None = None) -> Value:
        """One host op on operands cast to `elem`, broadcast as PyTorch does; `out` is the result type."""
        vals = [self.cast(x, elem) for x in xs]
        shape: Shape = reduce(broadcast, (self.shape(v) for v in vals))
        return self.host(onnx_op, vals, shape, out or elem, attrs, hint=hint or onnx_op.lower())

    # -- unary ----------------------------------------------------------------------------------

    def unary(self, onnx_op: str, x: Value, hint: str) -> Value:
        return self.host(onnx_op, [x], self.shape(x), self.elem(x), hint=hint)

    def _unary(self, a: Args) -> Value:
        x = self.value(a["self"], "the operand")
        elem = self.elem(x)
        if a.op in _ROUNDING and elem[0] != "f":
            return x
        if a.op in _FLOAT_ONLY and elem[0] != "f":
            x = self.cast(x, "f32")
        need(elem != "i1" or a.op in _FLOAT_ONLY, f"{a.op} of a boolean tensor")
        if a.op == "round":
            need(a.get("decimals", 0) == 0, "round with decimals is not supported")
        return self.unary(_UNARY[a.op], x, a.op)

    @aten("rsqrt", "self", becomes="host `Sqrt`, `Reciprocal`")
    def _rsqrt(self, a: Args) -> Value:
        x = self.cast(a["self"], self.result_type([a["self"], 1.0]))
        return self.unary("Reciprocal", self.unary("Sqrt", x, "sqrt"), "rsqrt")

    @aten("silu", "self", becomes="host `Sigmoid`, `Mul`")
    def _silu(self, a: Args) -> Value:
        x = self.value(a["self"], "the operand")
        need(self.elem(x) in FLOATS, f"silu of {x.type}")
        return self.elementwise("Mul", [x, self.unary("Sigmoid", x, "sigmoid")], self.elem(x), hint="silu")

    @aten("gelu", "self", ("approximate", "none"),
          becomes="host `Erf` formula (`approximate='tanh'`: `Tanh` formula); ONNX Gelu is opset 20")
    def _gelu(self, a: Args) -> Value:
        x = self.value(a["self"], "the operand")
        elem = self.elem(x)
        need(elem in FLOATS, f"gelu of {x.type}")
        mode = a["approximate"]
        need(mode in ("none", "tanh"), f"gelu with approximate={mode!r}")

        def mul(*xs: Any) -> Value:
            return reduce(lambda p, q: self.elementwise("Mul", [p, q], elem, hint="gelu"), xs)

        if mode == "none":  # x/2 * (1 + erf(x / sqrt 2))
            inner = self.unary("Erf", mul(x, 1 / math.sqrt(2)), "gelu")
        else:  # x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
            cube = mul(x, x, x, 0.044715)
            inner = self.unary("Tanh", mul(self.elementwise("Add", [x, cube], elem, hint="gelu"),
                                           math.sqrt(2 / math.pi)), "gelu")
        return mul(mul(x, 0.5), self.elementwise("Add", [inner, 1.0], elem, hint="gelu"))

    # -- binary ---------------------------------------------------------------------------------

    def scaled(self, y: Any, alpha: Any, elem: str) -> Any:
        if alpha == 1:
            return y
        need(is_number(alpha), f"alpha must be a number, got {alpha!r}")
        return self.elementwise("Mul", [y, alpha], elem, hint="scaled")

    @aten("add", "self", "other", ("alpha", 1), becomes="host `Add`")
    @aten("sub", "self", "other", ("alpha", 1), becomes="host `Sub`")
    @aten("mul", "self", "other", becomes="host `Mul`")
    @aten("maximum", "self", "other", becomes="host `Max`")
    @aten("minimum", "self", "other", becomes="host `Min`")
    def _arith(self, a: Args) -> Value:
        x, y = a["self"], a["other"]
        need(isinstance(x, Value | Weight) or isinstance(y, Value | Weight), f"{a.op} of two numbers")
        elem = self.result_type([x, y])
        need(elem != "i1" or a.op in ("maximum", "minimum"), f"{a.op} of boolean tensors")
        return self.elementwise(_ARITH[a.op], [x, self.scaled(y, a.get("alpha", 1), elem)], elem, hint=a.op)

    @aten("rsub", "self", "other", ("alpha", 1), becomes="host `Sub` (other - alpha * self)")
    def _rsub(self, a: Args) -> Value:
        elem = self.result_type([a["self"], a["other"]])
        need(elem != "i1", "rsub of boolean tensors")
        return self.elementwise("Sub", [a["other"], self.scaled(a["self"], a["alpha"], elem)], elem, hint="rsub")

    @aten("div", "self", "other", ("rounding_mode", None),
          becomes="host `Div` (`floor`: then `Floor`; `trunc`: sign times the floor of the magnitude; for "
                  "integers (x - r) / y, exact, with r = `Mod` of fmod 0 (floor) or 1 (trunc))")
    def _div(self, a: Args) -> Value:
        elem = self.result_type([a["self"], a["other"]])
        mode = a["rounding_mode"]
        need(mode in (None, "floor", "trunc"), f"div with rounding_mode={mode!r}")
        if elem not in FLOATS and mode is not None:
            return self.integer_div(a["self"], a["other"], elem, mode == "trunc")
        if elem not in FLOATS:
            elem = "f32"  # true division of integers
        q = self.elementwise("Div", [a["self"], a["other"]], elem, hint="div")
        if mode == "floor":
            return self.unary("Floor", q, "div")
        if mode == "trunc":
            return self.elementwise("Mul", [self.unary("Sign", q, "div"),
                                            self.unary("Floor", self.unary("Abs", q, "div"), "div")], elem, hint="div")
        return q

    @aten("floor_divide", "self", "other", becomes="as `div` with rounding_mode='floor'")
    def _floor_divide(self, a: Args) -> Value:
        return self._div(Args("div", {"self": a["self"], "other": a["other"], "rounding_mode": "floor"}))

    def integer_div(self, x: Any, y: Any, elem: str, trunc: bool) -> Value:
        """Integer division rounded down (or toward zero): x less its remainder divides exactly, so ONNX's
        integer Div (which truncates) only ever divides exactly and the result holds whatever the rounding."""
        need(elem != "i1", "division of boolean tensors")
        rem = self.elementwise("Mod", [x, y], elem, attrs={"fmod": int(trunc)}, hint="div")
        return self.elementwise("Div", [self.elementwise("Sub", [x, rem], elem, hint="div"), y], elem, hint="div")

    @aten("remainder", "self", "other",
          becomes="host `Mod` for integers (Python's modulo: the sign of the divisor); for floats "
                  "x - floor(x / y) y (`Div`, `Floor`, `Mul`, `Sub`)")
    def _remainder(self, a: Args) -> Value:
        x, y = a["self"], a["other"]
        need(isinstance(x, Value | Weight) or isinstance(y, Value | Weight), "remainder of two numbers")
        elem = self.result_type([x, y])
        need(elem != "i1", "remainder of boolean tensors")
        if elem not in FLOATS:
            return self.elementwise("Mod", [x, y], elem, attrs={"fmod": 0}, hint="remainder")
        whole = self.unary("Floor", self.elementwise("Div", [x, y], elem, hint="remainder"), "remainder")
        return self.elementwise("Sub", [x, self.elementwise("Mul", [whole, y], elem, hint="remainder")], elem,
                                hint="remainder")

    @aten("pow", "self", "exponent", becomes="host `Pow`")
    def _pow(self, a: Args) -> Value:
        elem = self.result_type([a["self"], a["exponent"]])
        need(elem != "i1", "pow of boolean tensors")
        return self.elementwise("Pow", [a["self"], a["exponent"]], elem, hint="pow")

    def _compare(self, a: Args) -> Value:
        elem = self.result_type([a["self"], a["other"]])
        got = self.elementwise(_COMPARE[a.op], [a["self"], a["other"]], elem, "i1", hint=a.op)
        return self.unary("Not", got, "ne") if a.op == "ne" else got

    def _logical(self, a: Args) -> Value:
        if a.op in _BITWISE:
            need(self.result_type([a["self"], a["other"]]) == "i1",
                 f"{a.op} of integers (ONNX's bitwise operators are opset 18; Ember's host ops are opset 17)")
        return self.elementwise((_LOGICAL | _BITWISE)[a.op], [a["self"], a["other"]], "i1", hint=a.op.strip("_"))

    @aten("logical_not", "self", becomes="host `Not` (operand cast to bool)")
    @aten("bitwise_not", "self", becomes="host `Not` (booleans only)")
    def _not(self, a: Args) -> Value:
        if a.op == "bitwise_not":
            need(self.type_of(a["self"])[0] == "i1", "bitwise_not of integers")
        return self.unary("Not", self.cast(a["self"], "i1"), "not")

    @aten("where", "condition", "self", "other", becomes="host `Where`")
    def _where(self, a: Args) -> Value:
        elem = self.result_type([a["self"], a["other"]])
        cond = self.cast(a["condition"], "i1", "the condition")
        vals = [cond, self.cast(a["self"], elem), self.cast(a["other"], elem)]
        shape: Shape = reduce(broadcast, (self.shape(v) for v in vals))
        return self.host("Where", vals, shape, elem, hint="where")

    @aten("masked_fill", "self", "mask", "value", becomes="host `Where`")
    def _masked_fill(self, a: Args) -> Value:
        x = self.value(a["self"], "the operand")
        need(not isinstance(a["value"], Value | Weight) or self.type_of(a["value"])[1] <= 1,
             "masked_fill needs a number or a 0-d tensor")
        vals = [self.cast(a["mask"], "i1", "the mask"), self.cast(a["value"], self.elem(x)), x]
        shape = broadcast(self.shape(vals[0]), self.shape(x))
        need(shape == self.shape(x), f"masked_fill of {x.type} with a mask of {vals[0].type}")
        return self.host("Where", vals, shape, self.elem(x), hint="masked_fill")

    @aten("clamp", "self", ("min", None), ("max", None), becomes="host `Max` and/or `Min`")
    @aten("clamp_min", "self", "min", becomes="host `Max`")
    @aten("clamp_max", "self", "max", becomes="host `Min`")
    def _clamp(self, a: Args) -> Value:
        lo, hi = a.get("min"), a.get("max")
        need(lo is not None or hi is not None, "clamp needs a min or a max")
        elem = self.result_type([a["self"], lo, hi])
        y = self.cast(a["self"], elem)
        for bound, onnx_op in ((lo, "Max"), (hi, "Min")):
            if bound is not None:
                y = self.elementwise(onnx_op, [y, bound], elem, hint="clamp")
        return y

    # -- casts ----------------------------------------------------------------------------------

    @aten("to", becomes="host `Cast` (nothing when the type stays; devices and layouts are ignored)", raw=True)
    def _to(self, a: Args) -> Any:
        """to(dtype), to(device, dtype), to(other) and the keyword forms: only the type matters."""
        args, kw = a["args"], a["kwargs"]
        need(bool(args) or "self" in kw, "to() needs a tensor")
        x = args[0] if args else kw["self"]
        dtype, other = kw.get("dtype"), kw.get("other")
        for v in args[1:]:  # the first number or dtype is the type (memory_format, if a number, comes later)
            if isinstance(v, Value | Weight):
                other = v
            elif dtype is None and (isinstance(v, TorchDType) or (isinstance(v, int) and not isinstance(v, bool))):
                dtype = v
        if dtype is None and other is None:
            return x if isinstance(x, Weight) else self.value(x, "the operand")
        return self.retyped(x, self.dtype(dtype, "") if dtype is not None else self.type_of(other)[0])

    @aten("type_as", "self", "other", becomes="host `Cast` (nothing when the type stays)")
    def _type_as(self, a: Args) -> Any:
        return self.retyped(a["self"], self.type_of(a["other"])[0])

    @aten("_to_copy", "self", ("dtype", None), ("layout", None), ("device", None), ("pin_memory", None),
          ("non_blocking", False), ("memory_format", None), becomes="host `Cast` (nothing when the type stays)")
    def _to_copy(self, a: Args) -> Any:
        return self.retyped(a["self"], self.dtype(a["dtype"], self.type_of(a["self"])[0]))

    # -- softmax and normalization --------------------------------------------------------------

    def softmax(self, a: Args, onnx_op: str) -> Value:
        x = self.value(a["self"], "the operand")
        if a.get("dtype") is not None:
            x = self.cast(x, self.dtype(a["dtype"], self.elem(x)))
        need(not a.get("half_to_float") or self.elem(x) == "f16", "half_to_float of a tensor that is not f16")
        if a.get("half_to_float"):
            x = self.cast(x, "f32")
        need(self.elem(x) in FLOATS, f"softmax of {x.type}")
        axis = dim(a["dim"], max(1, len(self.shape(x))))
        return self.host(onnx_op, [x], self.shape(x), self.elem(x), {"axis": axis}, hint=onnx_op.lower())

    @aten("softmax", "self", "dim", ("dtype", None), becomes="host `Softmax` (a `Cast` first for a dtype)")
    @aten("_softmax", "self", "dim", ("half_to_float", False), becomes="host `Softmax`")
    def _softmax(self, a: Args) -> Value:
        return self.softmax(a, "Softmax")

    @aten("log_softmax", "self", "dim", ("dtype", None), becomes="host `LogSoftmax` (a `Cast` first for a dtype)")
    @aten("_log_softmax", "self", "dim", ("half_to_float", False), becomes="host `LogSoftmax`")
    def _log_softmax(self, a: Args) -> Value:
        return self.softmax(a, "LogSoftmax")

    def layer_norm(self, a: Args) -> Value:
        x = self.value(a["input"], "the input")
        elem = self.elem(x)
        need(elem in FLOATS, f"layer_norm of {x.type}")
        norm = ints(a["normalized_shape"], "normalized_shape")
        s = self.shape(x)
        need(0 < len(norm) <= len(s) and list(s[len(s) - len(norm):]) == norm,
             f"layer_norm over {norm} of {x.type}")
        scale = (self.value(a["weight"], "the weight") if a["weight"] is not None
                 else self.const(np.ones(norm, dtype=numpy_of(elem))))
        ops = [scale] + ([self.value(a["bias"], "the bias")] if a["bias"] is not None else [])
        need(all(self.elem(v) == elem and list(self.shape(v)) == norm for v in ops),
             f"layer_norm weight and bias must be {elem} of shape {norm}")
        return self.host("LayerNormalization", [x, *ops], s, elem,
                         {"axis": -len(norm), "epsilon": float(self.number(a["eps"], "eps"))}, hint="layer_norm")

    @aten("layer_norm", "input", "normalized_shape", ("weight", None), ("bias", None), ("eps", 1e-5),
          ("cudnn_enable", True), becomes="host `LayerNormalization`")
    def _layer_norm(self, a: Args) -> Value:
        return self.layer_norm(a)

    @aten("native_layer_norm", "input", "normalized_shape", "weight", "bias", "eps",
          becomes="host `LayerNormalization` (the mean and rstd results are not computed)")
    def _native_layer_norm(self, a: Args) -> tuple[Any, ...]:
        return (self.layer_norm(a), Unusable("layer_norm's mean"), Unusable("layer_norm's rstd"))

    # -- matrix products ------------------------------------------------------------------------

    def matmul(self, x: Any, y: Any, hint: str = "matmul") -> Value:
        elem = self.result_type([x, y])
        need(elem in FLOATS, "matrix products of integer tensors are not supported")
        xv, yv = self.cast(x, elem), self.cast(y, elem)
        return self.host("MatMul", [xv, yv], matmul_shape(self.shape(xv), self.shape(yv)), elem, hint=hint)

    @aten("linear", "input", "weight", ("bias", None), becomes="host `Gemm` (2-D input) or `MatMul` + `Add`")
    def _linear(self, a: Args) -> Value:
        x = self.value(a["input"], "the input")
        w = self.value(a["weight"], "the weight")
        b = None if a["bias"] is None else self.value(a["bias"], "the bias")
        need(self.elem(x) in FLOATS and self.elem(w) == self.elem(x), f"linear of {x.type} and {w.type}")
        need(len(self.shape(w)) == 2, f"the weight must have rank 2, got {w.type}")
        xs, (n, k) = self.shape(x), self.shape(w)
        need(len(xs) >= 1 and (xs[-1] is None or k is None or xs[-1] == k),
             f"linear: input {x.type} does not match weight {w.type}")
        if len(xs) == 2:
            return self.host("Gemm", [x, w] + ([b] if b is not None else []), (xs[0], n), self.elem(x),
                             {"transB": 1}, hint="linear")
        wt = self.host("Transpose", [w], (k, n), self.elem(w), {"perm": [1, 0]}, hint="weight_t")
        y = self.host("MatMul", [x, wt], matmul_shape(xs, (k, n)), self.elem(x), hint="linear")
        if b is None:
            return y
        return self.host("Add", [y, b], broadcast(self.shape(y), self.shape(b)), self.elem(x), hint="linear")

    @aten("addmm", "self", "mat1", "mat2", ("beta", 1), ("alpha", 1), becomes="host `Gemm`")
    def _addmm(self, a: Args) -> Value:
        elem = self.result_type([a["self"], a["mat1"], a["mat2"]])
        need(elem in FLOATS, "addmm of integer tensors is not supported")
        c, m1, m2 = (self.cast(a[k], elem) for k in ("self", "mat1", "mat2"))
        need(len(self.shape(m1)) == 2 and len(self.shape(m2)) == 2, "addmm needs 2-D matrices")
        shape = matmul_shape(self.shape(m1), self.shape(m2))
        attrs = {"alpha": float(a["alpha"]), "beta": float(a["beta"])}
        return self.host("Gemm", [m1, m2, c], shape, elem, attrs, hint="addmm")

    @aten("matmul", "self", "other", becomes="host `MatMul`")
    def _matmul(self, a: Args) -> Value:
        return self.matmul(a["self"], a["other"])

    @aten("mm", "self", "mat2", becomes="host `MatMul`")
    @aten("bmm", "self", "mat2", becomes="host `MatMul`")
    def _mm(self, a: Args) -> Value:
        need(self.rank_of(a["self"]) == self.rank_of(a["mat2"]) == (2 if a.op == "mm" else 3),
             f"{a.op} needs {'2' if a.op == 'mm' else '3'}-D operands")
        return self.matmul(a["self"], a["mat2"], a.op)

    @aten("baddbmm", "self", "batch1", "batch2", ("beta", 1), ("alpha", 1),
          becomes="host `MatMul`, `Mul` by alpha and beta, `Add`")
    def _baddbmm(self, a: Args) -> Value:
        prod = self.matmul(a["batch1"], a["batch2"], "baddbmm")
        elem = self.elem(prod)
        prod = self.scaled(prod, a["alpha"], elem)
        if a["beta"] == 0:  # PyTorch ignores self then, NaNs included
            return prod
        return self.elementwise("Add", [self.scaled(self.cast(a["self"], elem), a["beta"], elem), prod], elem,
                                hint="baddbmm")

    # -- attention ------------------------------------------------------------------------------

    @aten("scaled_dot_product_attention", "query", "key", "value", ("attn_mask", None), ("dropout_p", 0.0),
          ("is_causal", False), ("scale", None), ("enable_gqa", False),
          becomes="host `MatMul`, `Mul` by the scale, `Add` of the mask, `Softmax`, `MatMul`")
    def _scaled_dot_product_attention(self, a: Args) -> Value:
        q, k, v = (self.value(a[n], n) for n in ("query", "key", "value"))
        elem = self.elem(q)
        need(elem in FLOATS and self.elem(k) == self.elem(v) == elem, "attention of mixed or integer types")
        need(a["dropout_p"] == 0, "attention dropout is random; trace or export the model in eval mode")
        need(not a["enable_gqa"], "grouped-query attention (enable_gqa) is not supported")
        qs, ks = self.shape(q), self.shape(k)
        need(len(qs) >= 2 and len(ks) == len(qs), f"attention of {q.type} and {k.type}")
        r = len(ks)
        scale = a["scale"]
        if scale is None:
            need(qs[-1] is not None, "attention over an embedding of unknown size")
            scale = 1 / math.sqrt(qs[-1] or 1)
        kt = self.transpose(k, [*range(r - 2), r - 1, r - 2])
        scores = self.elementwise("Mul", [self.matmul(q, kt, "attention"), float(scale)], elem, hint="attention")
        mask = a["attn_mask"]
        if a["is_causal"]:
            need(mask is None, "attention with both a mask and is_causal")
            rows, cols = qs[-2], ks[-2]
            need(rows is not None and cols is not None, "causal attention of unknown length")
            mask = self.constant(np.tril(np.ones((rows or 0, cols or 0), dtype=bool)))
        if mask is not None:
            if self.type_of(mask)[0] == "i1":  # True means "may attend": -inf elsewhere
                cond = self.value(mask, "the mask")
                mask = self.host("Where", [cond, self.cast(0.0, elem), self.cast(-math.inf, elem)], self.shape(cond),
                                 elem, hint="attention_bias")
            scores = self.elementwise("Add", [scores, mask], elem, hint="attention")
        probs = self.host("Softmax", [scores], self.shape(scores), elem, {"axis": -1}, hint="attention")
        return self.matmul(probs, v, "attention")

    # -- reductions -----------------------------------------------------------------------------

    def reduce(self, a: Args, onnx_op: str) -> Value:
        x = self.value(a["self"], "the operand")
        if a.get("dtype") is not None:
            x = self.cast(x, self.dtype(a["dtype"], self.elem(x)))
        elif onnx_op == "ReduceSum" and self.elem(x) not in FLOATS:
            x = self.cast(x, "i64")  # PyTorch sums integers and booleans as int64
        need(onnx_op in ("ReduceSum", "ReduceMax", "ReduceMin") or self.elem(x) in FLOATS,
             f"mean of {x.type} (PyTorch refuses it too)")
        s = self.shape(x)
        dims = [] if a.get("dim") is None else ints(a["dim"], "dim")
        axes = sorted({dim(d, len(s)) for d in dims}) if dims else list(range(len(s)))  # [] reduces everything
        keep = bool(a.get("keepdim", False))
        shape = tuple(1 if i in axes else d for i, d in enumerate(s)) if keep else tuple(
            d for i, d in enumerate(s) if i not in axes)
        if onnx_op != "ReduceSum":  # an attribute until opset 18
            return self.host(onnx_op, [x], shape, self.elem(x), {"axes": axes, "keepdims": int(keep)},
                             hint=a.op)
        return self.host(onnx_op, [x, self.const(axes)], shape, self.elem(x), {"keepdims": int(keep)}, hint="sum")

    @aten("sum", "self", ("dim", None), ("keepdim", False), ("dtype", None), becomes="host `ReduceSum`")
    def _sum(self, a: Args) -> Value:
        return self.reduce(a, "ReduceSum")

    @aten("mean", "self", ("dim", None), ("keepdim", False), ("dtype", None), becomes="host `ReduceMean`")
    def _mean(self, a: Args) -> Value:
        return self.reduce(a, "ReduceMean")

    @aten("amax", "self", ("dim", []), ("keepdim", False), becomes="host `ReduceMax`")
    def _amax(self, a: Args) -> Value:
        return self.reduce(a, "ReduceMax")

    @aten("amin", "self", ("dim", []), ("keepdim", False), becomes="host `ReduceMin`")
    def _amin(self, a: Args) -> Value:
        return self.reduce(a, "ReduceMin")

    @aten("cumsum", "self", "dim", ("dtype", None), becomes="host `CumSum`")
    def _cumsum(self, a: Args) -> Value:
        x = self.value(a["self"], "the operand")
        x = self.cast(x, self.dtype(a["dtype"], self.elem(x) if self.elem(x) in FLOATS else "i64"))
        axis = dim(a["dim"], max(1, len(self.shape(x))))
        return self.host("CumSum", [x, self.const(np.array(axis, dtype=np.int64))], self.shape(x), self.elem(x),
                         hint="cumsum")

    @aten("fbgemm.asynchronous_complete_cumsum", "t_in",
          becomes="host `CumSum` after a 0 (`Concat`): a KeyedJaggedTensor's offsets from its lengths")
    def _complete_cumsum(self, a: Args) -> Value:
        """FBGEMM's offsets of 1-D lengths: 0, then each running total, so one entry longer."""
        x = self.tensor_arg(a["t_in"], "the lengths", kind="int", rank=1)
        n = self.shape(x)[0]
        total = self.host("CumSum", [x, self.const(np.array(0, dtype=np.int64))], (n,), self.elem(x), hint="cumsum")
        zero = self.const(np.zeros(1, dtype=numpy_of(self.elem(x))))
        return self.host("Concat", [zero, total], (None if n is None else n + 1,), self.elem(x), {"axis": 0},
                         hint="offsets")

    @aten("tril", "self", ("diagonal", 0), becomes="host `Trilu`")
    @aten("triu", "self", ("diagonal", 0), becomes="host `Trilu` (upper)")
    def _trilu(self, a: Args) -> Value:
        x = self.value(a["self"], "the operand")
        need(len(self.shape(x)) >= 2, f"{a.op} needs a tensor of rank >= 2")
        k = self.const(np.array(self.number(a["diagonal"], "diagonal"), dtype=np.int64))
        return self.host("Trilu", [x, k], self.shape(x), self.elem(x), {"upper": int(a.op == "triu")}, hint=a.op)



for _name, _op in _UNARY.items():
    aten(_name, "self", *((("decimals", 0),) if _name == "round" else ()),
         becomes=f"host `{_op}`" + (" (a `Cast` to f32 first for integers)" if _name in _FLOAT_ONLY else ""))(
        DenseOps._unary)
for _name, _op in _COMPARE.items():
    aten(_name, "self", "other", becomes="host `Not` of `Equal`" if _name == "ne" else f"host `{_op}`")(
        DenseOps._compare)
for _name, _op in (_LOGICAL | _BITWISE).items():
    _what = "booleans only" if _name in _BITWISE else "operands cast to bool"
    aten(_name, "self", "other", becomes=f"host `{_op}` ({_what})")(DenseOps._logical)
