"""The core of the aten lowering: the operator table, argument binding, and the IR it emits.

Each operator is registered with `@aten(name, *schema, becomes=...)` on the method that lowers it:
the schema (aten's argument names and defaults) binds positional TorchScript calls and named `.pt2`
arguments the same way, and `becomes` says what the operator turns into, for docs/operators.md,
which is generated from this table (tests/gen_operators_doc.py).  `Lowering` holds the block being
built and the helpers every operator uses: tensor values, constants, host and emb ops, PyTorch's
type promotion and the in-place forms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...dialects import builtin, emb  # noqa: F401  (registers the ops this frontend produces)
from ...ir.core import Block, Op, Value, new_op, unique_name, verify
from ...ir.diagnostics import EmberError
from ...ir.types import ShapedType, tensor
from ..raising import raise_all
from ..raising.matching import prune
from .values import (
    C10_DTYPES,
    ELEM,
    ONNX_TYPE,
    OPSET,
    Schema,
    Shape,
    SymInt,
    TorchDType,
    Unsupported,
    Unusable,
    Weight,
    elem_of,
    is_number,
    need,
    numpy_of,
)

__all__ = ["OPERATORS", "Args", "Lowering", "Operator", "aten", "build_module"]

DOC = "docs/operators.md"
"""Where a refusal sends the user: the generated list of every operator Ember translates."""


@dataclass(frozen=True)
class Operator:
    """One aten operator the lowering translates."""

    name: str
    schema: Schema | None  # None: the method binds its arguments itself (overloads that differ in kind)
    method: str
    becomes: str  # what it is translated to, as docs/operators.md says


OPERATORS: dict[str, Operator] = {}


def aten(name: str, *schema: str | tuple[str, Any], becomes: str, raw: bool = False) -> Callable[[Callable], Callable]:
    """Register the decorated method as the lowering of aten::`name` (any overload)."""

    def register(fn: Callable) -> Callable:
        assert name not in OPERATORS, name
        OPERATORS[name] = Operator(name, None if raw else tuple(schema), fn.__name__, becomes)
        return fn

    return register


class Args(dict[str, Any]):
    """An operator's arguments by aten name, and which operator it is (one method serves several)."""

    def __init__(self, op: str, values: dict[str, Any]):
        super().__init__(values)
        self.op = op


_CATEGORY = {"i1": 0, "u8": 1, "i8": 1, "i16": 1, "i32": 1, "i64": 1, "f16": 2, "f32": 2, "f64": 2}
_WIDTH = {"i1": 0, "u8": 1, "i8": 1, "i16": 2, "i32": 3, "i64": 4, "f16": 1, "f32": 2, "f64": 3}
_FOLD_LIMIT = 1 << 16
"""Stored tensors up to this many elements are converted to another type at import time."""
_ORDINAL = ("first", "second", "third", "fourth")
_VIEWS = ("Reshape", "Transpose", "Unsqueeze", "Squeeze", "Expand", "Slice")
"""Host ops the lowering emits for PyTorch operators that return views of their input."""


class Lowering:
    """Emits IR for aten operator calls into one block; used by the `.pt` and `.pt2` frontends.

    Arguments arrive already decoded: IR values, `Weight`s, Python scalars and lists, None.
    """

    def __init__(self, block: Block):
        self.block = block
        self.params: dict[str, Value] = {}
        self.weights: dict[str, np.ndarray] = {}
        self._consts: dict[tuple[str, tuple[int, ...], bytes], Weight] = {}
        self.used_names: set[str] = set()
        # Row scatters are recognised by where their index came from: `rows_of[v] = idx` when v is
        # Unsqueeze(idx, 1) of a 1-D index, or that expanded along dimension 1 (index_select + scatter_add).
        self.rows_of: dict[Value, Value] = {}
        # In-place updates are translated as new values; that is exact only for a tensor nothing else
        # can see: one the model computed into its own storage (not an input, a weight or a view of
        # another tensor) and has not read yet.
        self.owned: set[Value] = set()
        self.stale: set[Value] = set()
        # Weights updated in place by embedding_renorm_: every later use of the table reads the update.
        self.renormed: dict[Value, Value] = {}

    # -- values ---------------------------------------------------------------------------------

    def fresh(self, hint: str) -> str:
        return unique_name(hint, self.used_names)

    def input(self, name: str, type: ShapedType) -> Value:
        v = Value(type, self.fresh(name), self.block)
        self.block.args.append(v)
        return v

    def value(self, x: Any, what: str) -> Value:
        """The IR value of a tensor argument, emitting the `param` of a stored tensor on first use."""
        if isinstance(x, Value):
            need(x not in self.stale, f"{what} is a tensor an earlier in-place operator updated; Ember follows "
                 "such an update only through the operator's result")
            return self.renormed.get(x, x)
        if isinstance(x, Weight):
            if x.name not in self.params:
                arr = x.array
                op = new_op("param", [], [tensor(tuple(int(d) for d in arr.shape), elem_of(arr.dtype, x.name))],
                            {"name": x.name})
                op.result.name = self.fresh(x.name)
                self.block.add(op)
                self.params[x.name] = op.result
                self.weights[x.name] = arr
            return self.renormed.get(self.params[x.name], self.params[x.name])
        if isinstance(x, Unusable):
            raise Unsupported(f"{what} is {x.what}, which Ember does not compute")
        raise Unsupported(f"{what} must be a tensor, got {type(x).__name__} {x!r}")

    def constant(self, a: np.ndarray | list[int]) -> Weight:
        """A tensor the translation knows (axes, shapes, index tables) as a deduplicated `/constant_<n>`."""
        arr = np.array(np.asarray(a, dtype=np.int64) if isinstance(a, list) else a, order="C")  # 0-d stays 0-d
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in self._consts:
            self._consts[key] = Weight(f"/constant_{len(self._consts)}", arr)
        return self._consts[key]

    def const(self, a: np.ndarray | list[int]) -> Value:
        return self.value(self.constant(a), "a constant")

    @staticmethod
    def known(x: Any) -> np.ndarray | None:
        """The data of a constant the lowering made, which it may compute on at import time (model
        weights are left to the program, so their names keep meaning what the state_dict says)."""
        return x.array if isinstance(x, Weight) and x.name.startswith("/constant_") else None

    def host(self, op_type: str, operands: list[Value], shape: Shape, elem: str, attrs: dict[str, Any] | None = None,
             hint: str | None = None) -> Value:
        op = new_op("host.onnx", operands, [tensor(shape, elem)], {"op": op_type, **(attrs or {})})
        op.result.name = self.fresh(hint or op_type.lower())
        self.block.add(op)
        if op_type not in _VIEWS:
            self.owned.add(op.result)
        return op.result

    def emb(self, name: str, operands: list[Value], shape: Shape, elem: str, attrs: dict[str, Any],
            hint: str) -> Value:
        """An `emb` op's result: a new tensor the model owns (as `host` makes for host ops)."""
        op = new_op(name, operands, [tensor(shape, elem)], attrs)
        op.result.name = self.fresh(hint)
        self.block.add(op)
        self.owned.add(op.result)
        return op.result

    @staticmethod
    def shape(v: Value) -> Shape:
        t = v.type
        assert isinstance(t, ShapedType) and t.shape is not None
        return t.shape

    @staticmethod
    def elem(v: Value) -> str:
        t = v.type
        assert isinstance(t, ShapedType)
        return t.elem.name

    def tensor_arg(self, x: Any, what: str, kind: str | None = None, rank: int | None = None) -> Value:
        v = self.value(x, what)
        if kind == "int":
            need(self.elem(v) in ("i32", "i64"), f"{what} must hold int32 or int64, got {v.type}")
        elif kind == "float":
            need(self.elem(v)[0] == "f", f"{what} must hold floats, got {v.type}")
        if rank is not None:
            need(len(self.shape(v)) == rank, f"{what} must have rank {rank}, got {v.type}")
        return v

    def size_vector(self, dims: list[int | SymInt]) -> Value:
        """A 1-D int64 tensor of sizes: a constant, or a Concat with the symbolic entries."""
        if not any(isinstance(d, SymInt) for d in dims):
            return self.const([int(d) for d in dims if not isinstance(d, SymInt)])
        pieces: list[Value] = []
        run: list[int] = []
        for d in dims:
            if isinstance(d, SymInt):
                if run:
                    pieces.append(self.const(run))
                    run = []
                pieces.append(self.host("Unsqueeze", [d.value, self.const([0])], (1,), "i64", hint="size"))
            else:
                run.append(d)
        if run:
            pieces.append(self.const(run))
        return self.host("Concat", pieces, (len(dims),), "i64", {"axis": 0}, hint="sizes")

    def sym_dim(self, x: Value, d: int) -> int | SymInt:
        """Extent `d` of x: a number when static, else computed at run time."""
        n = self.shape(x)[d]
        if n is not None:
            return n
        shape = self.host("Shape", [x], (len(self.shape(x)),), "i64", hint="shape")
        return SymInt(self.host("Gather", [shape, self.const(np.array(d, dtype=np.int64))], (), "i64",
                                {"axis": 0}, hint="size"))

    # -- types ----------------------------------------------------------------------------------

    @staticmethod
    def dtype(v: Any, default: str) -> str:
        """The IR element type of a `dtype=` argument: c10's number (TorchScript) or a TorchDType (.pt2)."""
        if v is None:
            return default
        if isinstance(v, TorchDType):
            name = v.name
        elif isinstance(v, int) and not isinstance(v, bool):
            name = C10_DTYPES.get(v, f"number {v}")
        else:
            raise Unsupported(f"dtype must be a type, got {v!r}")
        elem = ELEM.get(name)
        need(elem is not None, f"element type {name} is not supported")
        assert elem is not None
        return elem

    def type_of(self, x: Any, what: str = "the operand") -> tuple[str, int]:
        """(element type, rank class) of an operand: 2 for a tensor with dimensions, 1 for a 0-d tensor,
        0 for a Python number (which has PyTorch's default type for its kind)."""
        if isinstance(x, bool):
            return "i1", 0
        if isinstance(x, int):
            return "i64", 0
        if isinstance(x, float):
            return "f32", 0
        if isinstance(x, Weight):
            return elem_of(x.array.dtype, x.name), 2 if x.array.ndim else 1
        v = self.value(x, what)
        return self.elem(v), 2 if self.shape(v) else 1

    def result_type(self, xs: list[Any]) -> str:
        """PyTorch's type promotion: the highest kind (bool < integer < float) wins; among the operands
        of that kind, tensors with dimensions decide over 0-d tensors, which decide over numbers."""
        typed = [self.type_of(x, f"the {_ORDINAL[i]} operand" if i < len(_ORDINAL) else f"operand {i + 1}")
                 for i, x in enumerate(xs) if x is not None]
        need(bool(typed), "an operation without tensor operands")
        top = max(_CATEGORY[e] for e, _ in typed)
        rank = max(r for e, r in typed if _CATEGORY[e] == top)
        chosen = {e for e, r in typed if _CATEGORY[e] == top and r == rank}
        if chosen >= {"u8", "i8"} and max(_WIDTH[e] for e in chosen) == 1:
            return "i16"  # neither byte type holds the other's range
        return max(chosen, key=lambda e: _WIDTH[e])

    def retyped(self, x: Any, elem: str) -> Any:
        """x as `elem`, keeping a stored tensor a `Weight` (so that it stays known) when it already has the
        type or is small enough to convert here; `cast` otherwise."""
        if isinstance(x, Weight) and (x.array.dtype == numpy_of(elem) or x.array.size <= _FOLD_LIMIT):
            return x if x.array.dtype == numpy_of(elem) else self.constant(x.array.astype(numpy_of(elem)))
        return self.cast(x, elem)

    def cast(self, x: Any, elem: str, what: str = "the operand") -> Value:
        """x as a tensor of `elem`: a number or a constant becomes a constant of that type, a tensor a Cast."""
        if isinstance(x, bool | int | float):
            need(elem[0] == "f" or not isinstance(x, float) or float(x).is_integer(),
                 f"cannot hold {x!r} in {elem}")
            return self.const(np.array(x, dtype=numpy_of(elem)))
        if isinstance(x, Weight):
            x = self.retyped(x, elem)
        v = self.value(x, what)
        if self.elem(v) == elem:
            return v
        return self.host("Cast", [v], self.shape(v), elem, {"to": ONNX_TYPE[elem]}, hint="cast")

    # -- entry point ----------------------------------------------------------------------------

    def lower(self, op: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Translate `aten::<op>(*args, **kwargs)`; raises Unsupported with the reason when it cannot."""
        entry = OPERATORS.get(op)
        if entry is None and op.endswith("_") and not op.startswith("_") and op[:-1] in OPERATORS:
            return self.in_place(op[:-1], args, kwargs)
        if entry is None:
            name = op.replace(".", "::", 1) if "." in op else f"aten::{op}"  # fbgemm.x: torch.ops.fbgemm.x
            raise Unsupported(f"{name} is not one of the operators Ember translates ({DOC} lists them)")
        if entry.schema is None:
            a = Args(op, {"args": list(args), "kwargs": dict(kwargs)})
        else:
            a = self.bind(entry, args, kwargs)
        return getattr(self, entry.method)(a)

    def in_place(self, op: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """`op_(self, ...)` as `op(self, ...)`, when no other value can observe the update.

        Both traced archives pass the updated tensor on as the operator's result, so the new value
        replaces the old one exactly when nothing read or aliased the old one before; any later use
        of the old value is refused (`value`)."""
        schema = OPERATORS[op].schema or ("self",)
        first = schema[0]
        target = args[0] if args else kwargs.get(first if isinstance(first, str) else first[0])
        need(isinstance(target, Value) and target in self.owned and not self.readers(target),
             "in-place operators are supported only on a tensor the model computed itself (not an input, a "
             "weight or a view of another tensor) and did not read before the update")
        assert isinstance(target, Value)
        result = self.lower(op, args, kwargs)
        need(isinstance(result, Value) and self.shape(result) == self.shape(target)
             and self.elem(result) == self.elem(target),
             f"the in-place {op}_ would change the type of {target.type}")
        self.stale.add(target)
        self.owned.discard(target)
        self.owned.add(result)
        return result

    def readers(self, v: Value) -> bool:
        return any(v in op.operands for op in self.block.ops)

    @staticmethod
    def bind(entry: Operator, args: list[Any], kwargs: dict[str, Any]) -> Args:
        op, schema = entry.name, entry.schema
        assert schema is not None
        names = [s if isinstance(s, str) else s[0] for s in schema]
        need(len(args) <= len(names), f"{op} takes at most {len(names)} arguments, got {len(args)}")
        out = dict(zip(names, args))
        for k, v in kwargs.items():
            need(k in names, f"{op} has no argument '{k}'")
            need(k not in out, f"{op} got argument '{k}' twice")
            out[k] = v
        for s in schema:
            if isinstance(s, tuple):
                out.setdefault(s[0], s[1])
        missing = [n for n in names if n not in out]
        need(not missing, f"{op} is missing argument(s) {', '.join(missing)}")
        return Args(op, out)

    @staticmethod
    def number(v: Any, what: str) -> int | float:
        need(is_number(v), f"{what} must be a number, got {v!r}")
        return v


def build_module(lowering: Lowering, inputs: list[str], results: list[Value], weights_ref: str,
                 path: str) -> Op:
    """Wrap the lowered block as a verified `module` carrying the attributes every frontend sets."""
    block = lowering.block
    results = raise_all(block, results, lowering.weights.get, lowering.const, lowering.host)  # ROBE, DHE, TT
    prune(block, results)
    block.add(new_op("return", results))
    func = Op("func", attrs={"sym_name": "main", "results": [r.type for r in results]}, regions=[block])
    outputs = ["output"] if len(results) == 1 else [f"output{i}" for i in range(len(results))]
    module = Op("module", attrs={"weights": weights_ref, "opset": OPSET, "inputs": inputs, "outputs": outputs},
                regions=[Block()])
    module.body.add(func)
    try:
        verify(module)
    except EmberError as e:
        raise EmberError(f"imported IR does not verify: {e.message}", path) from None
    return module
