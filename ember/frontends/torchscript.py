"""TorchScript frontend: import a traced `.pt` archive (torch.jit.trace + torch.jit.save) without torch.

A TorchScript archive is a zip holding the module tree as a pickle (`data.pkl`), the raw tensor
storages (`data/<key>`) and the module's code as Python-syntax source (`code/__torch__/...`); see
notes/ecosystem.md §2.  Unpickling a user's file with `pickle.load` would run whatever callables it
names, so `_RestrictedUnpickler` accepts only the handful of globals such an archive uses and refuses
everything else by name.  The code is never executed either: it is parsed with `ast` and the traced
`forward` is walked symbolically, inlining submodule calls, and each `torch.<op>(...)` call goes to
`AtenLowering`.  That class is shared with the `.pt2` frontend (which sees the same aten operators
with named arguments): `embedding` becomes emb.gather, `embedding_bag` becomes emb.bag with PyTorch's
semantics, and the dense operators become `host.onnx` ops at opset 17.

Weights stay in the archive: a module tensor becomes a `param` named by its attribute path (as in
`state_dict`), and the few constants the translation needs (ONNX axes inputs, stacked index tables)
are params named `/constant_<n>`; `load_weights_torchscript` returns both.
"""

from __future__ import annotations

import ast
import collections
import io
import pickle
import string
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dialects import builtin, emb  # noqa: F401  (registers the ops this frontend produces)
from ..ir.core import Block, Op, Value, new_op, verify
from ..ir.diagnostics import EmberError
from ..ir.types import ShapedType, tensor

__all__ = ["AtenLowering", "Unsupported", "Weight", "build_module", "import_torchscript", "load_weights_torchscript"]

OPSET = 17
"""The ONNX operator set of the host ops these frontends emit (axes of Unsqueeze/ReduceSum are inputs)."""

_ELEM = {"float32": "f32", "float64": "f64", "float16": "f16", "int64": "i64", "int32": "i32",
         "int16": "i16", "int8": "i8", "bool": "i1"}
_ONNX_TYPE = {"f32": 1, "i8": 3, "i16": 5, "i32": 6, "i64": 7, "i1": 9, "f16": 10, "f64": 11}
_BIG = 2**62  # a slice end at least this large means "to the end" (TorchScript writes INT64_MAX)
_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "_.$-")  # what the .eir grammar allows
_MAX_DEPTH = 64  # nested module calls; deeper means a self-calling (malformed or malicious) archive


class Unsupported(Exception):
    """A construct the lowering cannot translate; the frontend adds where it was and what to do instead."""


def _need(cond: bool, why: str) -> None:
    if not cond:
        raise Unsupported(why)


# ---------------------------------------------------------------------------------------------
# Values shared by both torch frontends


@dataclass(eq=False)
class Weight:
    """A stored tensor (parameter, buffer or constant); it becomes a `param` op when first used."""

    name: str
    array: np.ndarray


@dataclass(frozen=True)
class _Unusable:
    """An operator result Ember does not compute (embedding_bag's bookkeeping outputs)."""

    what: str


def strided_tensor(storage: np.ndarray, offset: int, size: list[int], stride: list[int], what: str,
                   path: str) -> np.ndarray:
    """Copy a tensor out of its flat storage, checking every element lies inside it.

    The sizes come from the file, so a crafted archive could otherwise make `as_strided` read past
    the buffer.
    """
    ints = [offset, *size, *stride]
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in ints):
        raise EmberError(f"{what}: tensor sizes, strides and offset must be integers", path)
    if len(size) != len(stride) or min(ints) < 0:
        raise EmberError(f"{what}: invalid tensor geometry (size {size}, stride {stride}, offset {offset})", path)
    last = offset + sum((d - 1) * s for d, s in zip(size, stride))
    if 0 not in size and last >= storage.size:
        raise EmberError(f"{what}: tensor of size {size} at offset {offset} runs past its storage "
                         f"of {storage.size} elements", path)
    try:
        if 0 in size:
            return np.zeros(size, dtype=storage.dtype)
        item = storage.dtype.itemsize
        view = np.lib.stride_tricks.as_strided(storage[offset:], shape=tuple(size),
                                               strides=tuple(s * item for s in stride))
        return np.array(view)
    except (ValueError, OverflowError, MemoryError) as e:  # e.g. a huge broadcast (stride 0) tensor
        raise EmberError(f"{what}: cannot materialize a tensor of size {size} ({type(e).__name__})", path) from None


def elem_of(dtype: np.dtype, what: str) -> str:
    """The IR element type of a numpy dtype, or an error naming the tensor."""
    name = _ELEM.get(np.dtype(dtype).name)
    if name is None:
        raise Unsupported(f"{what} has element type {np.dtype(dtype).name}, which Ember does not support")
    return name


# ---------------------------------------------------------------------------------------------
# aten operators -> IR

Schema = tuple[str | tuple[str, Any], ...]
"""aten's argument names in order; `(name, default)` for the optional ones."""

_BAG: Schema = ("weight", "indices", "offsets", ("scale_grad_by_freq", False), ("mode", 0), ("sparse", False),
                ("per_sample_weights", None), ("include_last_offset", False), ("padding_idx", None))
_SCHEMAS: dict[str, Schema] = {
    "embedding": ("weight", "indices", ("padding_idx", -1), ("scale_grad_by_freq", False), ("sparse", False)),
    "embedding_bag": _BAG,
    "_embedding_bag": _BAG,
    "_embedding_bag_forward_only": _BAG,
    "linear": ("input", "weight", ("bias", None)),
    "addmm": ("self", "mat1", "mat2", ("beta", 1), ("alpha", 1)),
    "mm": ("self", "mat2"),
    "bmm": ("self", "mat2"),
    "matmul": ("self", "other"),
    "stack": ("tensors", ("dim", 0)),
    "cat": ("tensors", ("dim", 0)),
    "concat": ("tensors", ("dim", 0)),
    "transpose": ("self", "dim0", "dim1"),
    "t": ("self",),
    "permute": ("self", "dims"),
    "slice": ("self", ("dim", 0), ("start", None), ("end", None), ("step", 1)),
    "index": ("self", "indices"),
    "index_select": ("self", "dim", "index"),
    "add": ("self", "other", ("alpha", 1)),
    "sub": ("self", "other", ("alpha", 1)),
    "mul": ("self", "other"),
    "div": ("self", "other", ("rounding_mode", None)),
    "flatten": ("self", ("start_dim", 0), ("end_dim", -1)),
    "reshape": ("self", "shape"),
    "view": ("self", "size"),
    "unsqueeze": ("self", "dim"),
    "squeeze": ("self", ("dim", None)),
    "sum": ("self", ("dim", None), ("keepdim", False), ("dtype", None)),
    "mean": ("self", ("dim", None), ("keepdim", False), ("dtype", None)),
    "softmax": ("self", "dim", ("dtype", None)),
    "_softmax": ("self", "dim", ("half_to_float", False)),
    "contiguous": ("self", ("memory_format", None)),
    "clone": ("self", ("memory_format", None)),
    "detach": ("self",),
    "alias": ("self",),
    "dropout": ("input", "p", "train"),
}
_UNARY = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log", "neg": "Neg",
          "abs": "Abs", "sqrt": "Sqrt"}
for _name in _UNARY:
    _SCHEMAS[_name] = ("self",)
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div"}

SUPPORTED = tuple(sorted(_SCHEMAS))
"""The aten operator names `AtenLowering` translates (overload names are ignored)."""

Shape = tuple[int | None, ...]


def _broadcast(a: Shape, b: Shape) -> Shape:
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out: list[int | None] = []
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        elif x is None or y is None:
            out.append(x if y is None else y)
        else:
            raise Unsupported(f"shapes {list(a)} and {list(b)} do not broadcast")
    return tuple(out)


def _matmul_shape(a: Shape, b: Shape) -> Shape:
    _need(len(a) >= 1 and len(b) >= 1, "matrix products need operands of rank >= 1")
    aa = (1, *a) if len(a) == 1 else a
    bb = (*b, 1) if len(b) == 1 else b
    _need(aa[-1] is None or bb[-2] is None or aa[-1] == bb[-2],
          f"matrix product of shapes {list(a)} and {list(b)}: inner dimensions differ")
    out = [*_broadcast(aa[:-2], bb[:-2]), aa[-2], bb[-1]]
    if len(b) == 1:
        out.pop(-1)
    if len(a) == 1:
        out.pop(-2 if len(b) > 1 else -1)
    return tuple(out)


def _dim(d: Any, rank: int, what: str = "dim") -> int:
    _need(isinstance(d, int) and not isinstance(d, bool), f"{what} must be an integer, got {d!r}")
    _need(-rank <= d < rank, f"{what} {d} is out of range for rank {rank}")
    return d + rank if d < 0 else d


def _int(v: Any, what: str) -> int:
    _need(isinstance(v, int) and not isinstance(v, bool), f"{what} must be an integer, got {v!r}")
    return int(v)


def _ints(v: Any, what: str) -> list[int]:
    if isinstance(v, int) and not isinstance(v, bool):
        return [v]
    _need(isinstance(v, list | tuple) and all(isinstance(x, int) and not isinstance(x, bool) for x in v),
          f"{what} must be a list of integers, got {v!r}")
    return [int(x) for x in v]


def _prod(dims: Shape) -> int | None:
    n = 1
    for d in dims:
        if d is None:
            return None
        n *= d
    return n


class AtenLowering:
    """Emits IR for aten operator calls into one block; used by the `.pt` and `.pt2` frontends.

    Arguments arrive already decoded: IR values, `Weight`s, Python scalars and lists, None.  Each
    operator has a small schema (aten's argument names and defaults) so positional TorchScript
    calls and named `.pt2` arguments bind the same way.
    """

    def __init__(self, block: Block):
        self.block = block
        self.params: dict[str, Value] = {}
        self.weights: dict[str, np.ndarray] = {}
        self._consts: dict[tuple[str, tuple[int, ...], bytes], str] = {}
        self.used_names: set[str] = set()

    # -- values ---------------------------------------------------------------------------------

    def fresh(self, hint: str) -> str:
        base = "".join(c if c in _NAME_CHARS else "_" for c in hint) or "v"
        name, n = base, 0
        while name in self.used_names:
            n += 1
            name = f"{base}_{n}"
        self.used_names.add(name)
        return name

    def input(self, name: str, type: ShapedType) -> Value:
        v = Value(type, self.fresh(name), self.block)
        self.block.args.append(v)
        return v

    def value(self, x: Any, what: str) -> Value:
        """The IR value of a tensor argument, emitting the `param` of a stored tensor on first use."""
        if isinstance(x, Value):
            return x
        if isinstance(x, Weight):
            if x.name not in self.params:
                arr = x.array
                op = new_op("param", [], [tensor(tuple(int(d) for d in arr.shape), elem_of(arr.dtype, x.name))],
                            {"name": x.name})
                op.result.name = self.fresh(x.name)
                self.block.add(op)
                self.params[x.name] = op.result
                self.weights[x.name] = arr
            return self.params[x.name]
        if isinstance(x, _Unusable):
            raise Unsupported(f"{what} is {x.what}, which Ember does not compute")
        raise Unsupported(f"{what} must be a tensor, got {type(x).__name__} {x!r}")

    def const(self, a: np.ndarray | list[int]) -> Value:
        """A constant the translation needs (axes, shapes, index tables), as a deduplicated param."""
        arr = np.ascontiguousarray(np.asarray(a, dtype=np.int64) if isinstance(a, list) else a)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in self._consts:
            self._consts[key] = f"/constant_{len(self._consts)}"
        return self.value(Weight(self._consts[key], arr), "a constant")

    def host(self, op_type: str, operands: list[Value], shape: Shape, elem: str, attrs: dict[str, Any] | None = None,
             hint: str | None = None) -> Value:
        op = new_op("host.onnx", operands, [tensor(shape, elem)], {"op": op_type, **(attrs or {})})
        op.result.name = self.fresh(hint or op_type.lower())
        self.block.add(op)
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
            _need(self.elem(v) in ("i32", "i64"), f"{what} must hold int32 or int64, got {v.type}")
        elif kind == "float":
            _need(self.elem(v)[0] == "f", f"{what} must hold floats, got {v.type}")
        if rank is not None:
            _need(len(self.shape(v)) == rank, f"{what} must have rank {rank}, got {v.type}")
        return v

    # -- entry point ----------------------------------------------------------------------------

    def lower(self, op: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Translate `aten::<op>(*args, **kwargs)`; raises Unsupported with the reason when it cannot."""
        if op not in _SCHEMAS:
            raise Unsupported(f"this operator is not supported (Ember translates {', '.join(SUPPORTED)})")
        a = self.bind(op, args, kwargs)
        if op in _UNARY:
            x = self.tensor_arg(a["self"], "the operand", "float")
            return self.host(_UNARY[op], [x], self.shape(x), self.elem(x), hint=op)
        if op in _BINARY:
            return self.binary(op, a)
        handler: Callable[[dict[str, Any]], Any] = getattr(self, "_" + op.lstrip("_"))
        return handler(a)

    @staticmethod
    def bind(op: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        schema = _SCHEMAS[op]
        names = [s if isinstance(s, str) else s[0] for s in schema]
        _need(len(args) <= len(names), f"{op} takes at most {len(names)} arguments, got {len(args)}")
        out = dict(zip(names, args))
        for k, v in kwargs.items():
            _need(k in names, f"{op} has no argument '{k}'")
            _need(k not in out, f"{op} got argument '{k}' twice")
            out[k] = v
        for s in schema:
            if isinstance(s, tuple):
                out.setdefault(s[0], s[1])
        missing = [n for n in names if n not in out]
        _need(not missing, f"{op} is missing argument(s) {', '.join(missing)}")
        return out

    # -- embeddings -----------------------------------------------------------------------------

    def _embedding(self, a: dict[str, Any]) -> Value:
        idx = self.tensor_arg(a["indices"], "the indices", "int")
        table = a["weight"]
        w = self.tensor_arg(table, "the embedding table", "float")
        tshape = self.shape(w)
        _need(len(tshape) >= 1, "the embedding table must have rank >= 1")
        shape = self.shape(idx) + tshape[1:]
        if not isinstance(table, Weight):  # a computed table is dense work, not an embedding lookup
            return self.host("Gather", [w, idx], shape, self.elem(w), {"axis": 0}, hint="gather")
        op = new_op("emb.gather", [w, idx], [tensor(shape, self.elem(w))])
        op.result.name = self.fresh("embedding")
        self.block.add(op)
        return op.result

    def _embedding_bag(self, a: dict[str, Any]) -> tuple[Any, ...]:
        table = self.tensor_arg(a["weight"], "the embedding table", "float", 2)
        mode = a["mode"]
        _need(mode in (0, 1, 2) and not isinstance(mode, bool), f"unknown embedding_bag mode {mode!r}")
        pad = a["padding_idx"]
        _need(pad is None or (isinstance(pad, int) and pad < 0),
              "embedding_bag with padding_idx (excluded rows) has no emb.bag equivalent")
        idx = self.tensor_arg(a["indices"], "the indices", "int")
        ishape = self.shape(idx)
        w = a["per_sample_weights"]
        weights = None if w is None else self.tensor_arg(w, "the per-sample weights", "float")
        _need(weights is None or mode == 0, "per-sample weights need mode sum")
        if len(ishape) == 2:  # fixed-length bags: flatten, and build the offsets from the static shape
            _need(a["offsets"] is None, "2-D indices take no offsets")
            n, length = ishape
            _need(n is not None and length is not None, "2-D indices need a static shape")
            assert n is not None and length is not None
            flat = self.const([-1])
            idx = self.host("Reshape", [idx, flat], (n * length,), self.elem(idx), hint="indices")
            if weights is not None:
                weights = self.host("Reshape", [weights, flat], (n * length,), self.elem(weights), hint="weights")
            offsets = self.const((np.arange(n + 1) * length).astype(_numpy(self.elem(idx))))
            bags: int | None = n
        else:
            _need(len(ishape) == 1, f"the indices must be 1-D or 2-D, got {idx.type}")
            off = self.tensor_arg(a["offsets"], "the offsets", "int", 1)
            olen = self.shape(off)[0]
            if a["include_last_offset"]:
                offsets, bags = off, None if olen is None else olen - 1
            else:  # PyTorch's bags end at len(indices): append it, as emb.bag wants
                n_idx = self.host("Shape", [idx], (1,), "i64", hint="num_indices")
                if self.elem(off) != "i64":
                    n_idx = self.host("Cast", [n_idx], (1,), self.elem(off), {"to": _ONNX_TYPE[self.elem(off)]},
                                      hint="num_indices")
                offsets = self.host("Concat", [off, n_idx], (None if olen is None else olen + 1,), self.elem(off),
                                    {"axis": 0}, hint="offsets")
                bags = olen
        if weights is not None:
            _need(self.elem(weights) == self.elem(table), "the per-sample weights must have the table's type")
        operands = [table, idx, offsets] + ([weights] if weights is not None else [])
        op = new_op("emb.bag", operands, [tensor((bags, self.shape(table)[1]), self.elem(table))],
                    {"mode": ("sum", "mean", "max")[mode], "empty": "zero"})
        op.result.name = self.fresh("embedding_bag")
        self.block.add(op)
        return (op.result, _Unusable("offset2bag"), _Unusable("bag_size"), _Unusable("max_indices"))

    # -- dense algebra --------------------------------------------------------------------------

    def _linear(self, a: dict[str, Any]) -> Value:
        x = self.tensor_arg(a["input"], "the input", "float")
        w = self.tensor_arg(a["weight"], "the weight", "float", 2)
        b = None if a["bias"] is None else self.tensor_arg(a["bias"], "the bias", "float")
        xs, (n, k) = self.shape(x), self.shape(w)
        _need(len(xs) >= 1 and (xs[-1] is None or k is None or xs[-1] == k),
              f"linear: input {x.type} does not match weight {w.type}")
        if len(xs) == 2:
            return self.host("Gemm", [x, w] + ([b] if b is not None else []), (xs[0], n), self.elem(x),
                             {"transB": 1}, hint="linear")
        wt = self.host("Transpose", [w], (k, n), self.elem(w), {"perm": [1, 0]}, hint="weight_t")
        y = self.host("MatMul", [x, wt], _matmul_shape(xs, (k, n)), self.elem(x), hint="linear")
        if b is None:
            return y
        return self.host("Add", [y, b], _broadcast(self.shape(y), self.shape(b)), self.elem(x), hint="linear")

    def _addmm(self, a: dict[str, Any]) -> Value:
        c = self.tensor_arg(a["self"], "the addend", "float")
        m1 = self.tensor_arg(a["mat1"], "mat1", "float", 2)
        m2 = self.tensor_arg(a["mat2"], "mat2", "float", 2)
        shape = _matmul_shape(self.shape(m1), self.shape(m2))
        attrs = {"alpha": float(a["alpha"]), "beta": float(a["beta"])}
        return self.host("Gemm", [m1, m2, c], shape, self.elem(m1), attrs, hint="addmm")

    def _matmul(self, a: dict[str, Any], other: str = "other") -> Value:
        x = self.tensor_arg(a["self"], "the left operand", "float")
        y = self.tensor_arg(a[other], "the right operand", "float")
        _need(self.elem(x) == self.elem(y), f"matrix product of {x.type} and {y.type}")
        return self.host("MatMul", [x, y], _matmul_shape(self.shape(x), self.shape(y)), self.elem(x), hint="matmul")

    def _mm(self, a: dict[str, Any]) -> Value:
        return self._matmul(a, "mat2")

    def _bmm(self, a: dict[str, Any]) -> Value:
        return self._matmul(a, "mat2")

    def binary(self, op: str, a: dict[str, Any]) -> Value:
        """add/sub/mul/div on tensors, or a tensor and a Python number (same element type, no promotion)."""
        x, y = a["self"], a["other"]
        if not isinstance(x, Value | Weight):
            x, y = y, x  # a number on the left: only commutative ops may swap
            _need(op in ("add", "mul") and a.get("alpha", 1) == 1,
                  f"{op} with a number as its first operand")
        xv = self.tensor_arg(x, "the first operand")
        elem = self.elem(xv)
        if isinstance(y, bool | int | float):
            _need(elem[0] == "f" or isinstance(y, int), f"{op} of an integer tensor and a float (type promotion)")
            yv = self.const(np.array(y, dtype=_numpy(elem)))
        else:
            yv = self.tensor_arg(y, "the second operand")
            _need(self.elem(yv) == elem, f"{op} of {xv.type} and {yv.type} (type promotion is not supported)")
        _need(op != "div" or (elem[0] == "f" and a["rounding_mode"] is None),
              "div must be a true division of floats")
        alpha = a.get("alpha", 1)
        if alpha != 1:
            _need(isinstance(alpha, int | float) and not isinstance(alpha, bool),
                  f"alpha must be a number, got {alpha!r}")
            yv = self.host("Mul", [yv, self.const(np.array(alpha, dtype=_numpy(elem)))], self.shape(yv), elem,
                           hint="scaled")
        return self.host(_BINARY[op], [xv, yv], _broadcast(self.shape(xv), self.shape(yv)), elem, hint=op)

    # -- shapes and layout ----------------------------------------------------------------------

    def tensors(self, v: Any, what: str) -> list[Value]:
        _need(isinstance(v, list | tuple) and len(v) > 0, f"{what} must be a non-empty list of tensors")
        vals = [self.tensor_arg(x, f"{what}[{i}]") for i, x in enumerate(v)]
        _need(len({self.elem(x) for x in vals}) == 1, f"{what} mix element types")
        _need(len({len(self.shape(x)) for x in vals}) == 1, f"{what} have different ranks")
        return vals

    def concat(self, vals: list[Value], axis: int, hint: str) -> Value:
        shapes = [self.shape(v) for v in vals]
        out: list[int | None] = []
        for d in range(len(shapes[0])):
            col = [s[d] for s in shapes]
            if d == axis:
                out.append(None if None in col else sum(c for c in col if c is not None))
            else:
                known = {c for c in col if c is not None}
                _need(len(known) <= 1, f"cannot concatenate shapes {[list(s) for s in shapes]} along {axis}")
                out.append(known.pop() if known else None)
        if len(vals) == 1:
            return vals[0]
        return self.host("Concat", vals, tuple(out), self.elem(vals[0]), {"axis": axis}, hint=hint)

    def _cat(self, a: dict[str, Any]) -> Value:
        vals = self.tensors(a["tensors"], "the tensors")
        return self.concat(vals, _dim(a["dim"], len(self.shape(vals[0]))), "cat")

    def _concat(self, a: dict[str, Any]) -> Value:
        return self._cat(a)

    def unsqueeze(self, x: Value, axis: int) -> Value:
        s = list(self.shape(x))
        s.insert(axis, 1)
        return self.host("Unsqueeze", [x, self.const([axis])], tuple(s), self.elem(x), hint="unsqueeze")

    def _stack(self, a: dict[str, Any]) -> Value:
        vals = self.tensors(a["tensors"], "the tensors")
        axis = _dim(a["dim"], len(self.shape(vals[0])) + 1)
        return self.concat([self.unsqueeze(v, axis) for v in vals], axis, "stack")

    def _unsqueeze(self, a: dict[str, Any]) -> Value:
        x = self.tensor_arg(a["self"], "the operand")
        return self.unsqueeze(x, _dim(a["dim"], len(self.shape(x)) + 1))

    def _squeeze(self, a: dict[str, Any]) -> Value:
        x = self.tensor_arg(a["self"], "the operand")
        s = self.shape(x)
        dims = range(len(s)) if a["dim"] is None else [_dim(d, len(s)) for d in _ints(a["dim"], "dim")]
        _need(all(s[d] is not None for d in dims), "squeeze of a dimension of unknown size")
        axes = sorted({d for d in dims if s[d] == 1})  # PyTorch leaves other dimensions alone
        if not axes:
            return x
        shape = tuple(d for i, d in enumerate(s) if i not in axes)
        return self.host("Squeeze", [x, self.const(axes)], shape, self.elem(x), hint="squeeze")

    def transpose(self, x: Value, perm: list[int]) -> Value:
        if perm == sorted(perm):
            return x
        s = self.shape(x)
        return self.host("Transpose", [x], tuple(s[p] for p in perm), self.elem(x), {"perm": perm}, hint="transpose")

    def _transpose(self, a: dict[str, Any]) -> Value:
        x = self.tensor_arg(a["self"], "the operand")
        r = len(self.shape(x))
        if r == 0:
            return x
        d0, d1 = _dim(a["dim0"], r, "dim0"), _dim(a["dim1"], r, "dim1")
        perm = list(range(r))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        return self.transpose(x, perm)

    def _t(self, a: dict[str, Any]) -> Value:
        x = self.tensor_arg(a["self"], "the operand")
        _need(len(self.shape(x)) <= 2, "t() needs a tensor of rank <= 2")
        return self.transpose(x, [1, 0]) if len(self.shape(x)) == 2 else x

    def _permute(self, a: dict[str, Any]) -> Value:
        x = self.tensor_arg(a["self"], "the operand")
        r = len(self.shape(x))
        perm = [_dim(d, r) for d in _ints(a["dims"], "dims")]
        _need(sorted(perm) == list(range(r)), f"{perm} is not a permutation of {r} dimensions")
        return self.transpose(x, perm)

    def reshape(self, x: Value, target: list[int]) -> Value:
        """Reshape to PyTorch sizes (at most one -1; 0 is a real zero extent, hence allowzero)."""
        _need(sum(1 for d in target if d == -1) <= 1 and all(d >= -1 for d in target), f"invalid shape {target}")
        total = _prod(self.shape(x))
        known = _prod(tuple(d for d in target if d != -1))
        out: list[int | None] = list(target)
        if -1 in target:
            i = target.index(-1)
            out[i] = None if total is None or known is None or known == 0 else total // known
            _need(total is None or known is None or (known != 0 and total % known == 0),
                  f"cannot reshape {x.type} to {target}")
        else:
            _need(total is None or known == total, f"cannot reshape {x.type} to {target}")
        if tuple(out) == self.shape(x):
            return x
        attrs = {"allowzero": 1} if 0 in target else {}
        return self.host("Reshape", [x, self.const(target)], tuple(out), self.elem(x), attrs, hint="reshape")

    def _reshape(self, a: dict[str, Any]) -> Value:
        return self.reshape(self.tensor_arg(a["self"], "the operand"), _ints(a["shape"], "the shape"))

    def _view(self, a: dict[str, Any]) -> Value:
        return self.reshape(self.tensor_arg(a["self"], "the operand"), _ints(a["size"], "the size"))

    def _flatten(self, a: dict[str, Any]) -> Value:
        x = self.tensor_arg(a["self"], "the operand")
        s = self.shape(x)
        if not s:
            return self.reshape(x, [1])
        lo, hi = _dim(a["start_dim"], len(s), "start_dim"), _dim(a["end_dim"], len(s), "end_dim")
        _need(lo <= hi, "flatten: start_dim comes after end_dim")
        merged = _prod(s[lo:hi + 1])
        target = [*s[:lo], -1 if merged is None else merged, *s[hi + 1:]]
        _need(all(d is not None for d in target), f"flatten of {x.type}: too many unknown extents")
        return self.reshape(x, [int(d) for d in target if d is not None])

    def _slice(self, a: dict[str, Any]) -> Value:
        x = self.tensor_arg(a["self"], "the operand")
        s = self.shape(x)
        d = _dim(a["dim"], len(s))
        start = 0 if a["start"] is None else _int(a["start"], "start")
        end = _BIG if a["end"] is None else _int(a["end"], "end")
        step = _int(a["step"], "step")
        _need(step >= 1, "slice steps must be positive")
        n = s[d]
        if start == 0 and step == 1 and (end >= _BIG or (n is not None and end >= n)):
            return x
        out = list(s)
        out[d] = None if n is None else len(range(*slice(start, end, step).indices(n)))
        ins = [x, self.const([start]), self.const([min(end, 2**63 - 1)]), self.const([d]), self.const([step])]
        return self.host("Slice", ins, tuple(out), self.elem(x), hint="slice")

    def _index_select(self, a: dict[str, Any]) -> Value:
        x = self.tensor_arg(a["self"], "the operand")
        idx = self.tensor_arg(a["index"], "the index", "int")
        _need(len(self.shape(idx)) <= 1, "index_select needs a 1-D index")
        s = self.shape(x)
        d = _dim(a["dim"], len(s))
        shape = s[:d] + self.shape(idx)[:1] + s[d + 1:]
        return self.host("Gather", [x, idx], shape, self.elem(x), {"axis": d}, hint="index_select")

    def _index(self, a: dict[str, Any]) -> Value:
        """x[..., i, j, ...] with integer index tensors: Gather for one, GatherND for several."""
        x = self.tensor_arg(a["self"], "the indexed tensor")
        s = self.shape(x)
        idx = a["indices"]
        _need(isinstance(idx, list | tuple) and len(idx) <= len(s), "index needs a list of at most rank indices")
        ks = [k for k, v in enumerate(idx) if v is not None]
        if not ks:
            return x
        if all(isinstance(idx[k], Weight) for k in ks) and len(ks) > 1:  # constant tables: stack them here
            arrays = [idx[k].array for k in ks]
            _need(all(a.dtype.kind in "iu" for a in arrays), "index tensors must hold integers")
            _need(all(a.shape == arrays[0].shape for a in arrays), "index tensors must share one shape")
            bshape: Shape = arrays[0].shape
            stacked = self.const(np.stack([a.astype(np.int64) for a in arrays], axis=-1))
            return self.gather_nd(x, ks, bshape, stacked)
        vals = [self.tensor_arg(idx[k], f"index {k}", "int") for k in ks]
        if len(ks) == 1:
            k = ks[0]
            return self.host("Gather", [x, vals[0]], s[:k] + self.shape(vals[0]) + s[k + 1:], self.elem(x),
                             {"axis": k}, hint="index")
        bshape = self.shape(vals[0])
        _need(all(self.shape(v) == bshape for v in vals) and None not in bshape,
              "index tensors must share one static shape (no broadcasting)")
        cols = [v if self.elem(v) == "i64" else self.host("Cast", [v], bshape, "i64", {"to": 7}) for v in vals]
        stacked = self.concat([self.unsqueeze(c, len(bshape)) for c in cols], len(bshape), "index_tuple")
        return self.gather_nd(x, ks, bshape, stacked)

    def gather_nd(self, x: Value, ks: list[int], bshape: Shape, stacked: Value) -> Value:
        """x indexed at dimensions `ks` by the index tuples in `stacked` (shape bshape + [len(ks)])."""
        s = self.shape(x)
        rest = [d for d in range(len(s)) if d not in ks]
        front = self.transpose(x, ks + rest)
        got = self.host("GatherND", [front, stacked], bshape + tuple(s[d] for d in rest), self.elem(x), hint="index")
        if ks != list(range(ks[0], ks[0] + len(ks))):
            return got  # separated index tensors: PyTorch puts the indexed dimensions first, as GatherND does
        nb, k0 = len(bshape), ks[0]
        perm = [*range(nb, nb + k0), *range(nb), *range(nb + k0, nb + len(rest))]
        return self.transpose(got, perm)

    # -- reductions and the rest ----------------------------------------------------------------

    def reduce(self, a: dict[str, Any], onnx_op: str) -> Value:
        x = self.tensor_arg(a["self"], "the operand", "float")
        _need(a["dtype"] is None, "reductions with a dtype argument are not supported")
        s = self.shape(x)
        dims = [] if a["dim"] is None else _ints(a["dim"], "dim")
        axes = sorted({_dim(d, len(s)) for d in dims}) if dims else list(range(len(s)))  # [] reduces everything
        keep = bool(a["keepdim"])
        shape = tuple(1 if i in axes else d for i, d in enumerate(s)) if keep else tuple(
            d for i, d in enumerate(s) if i not in axes)
        if onnx_op == "ReduceMean":  # an attribute until opset 18
            return self.host(onnx_op, [x], shape, self.elem(x), {"axes": axes, "keepdims": int(keep)}, hint="mean")
        return self.host(onnx_op, [x, self.const(axes)], shape, self.elem(x), {"keepdims": int(keep)}, hint="sum")

    def _sum(self, a: dict[str, Any]) -> Value:
        return self.reduce(a, "ReduceSum")

    def _mean(self, a: dict[str, Any]) -> Value:
        return self.reduce(a, "ReduceMean")

    def _softmax(self, a: dict[str, Any]) -> Value:
        x = self.tensor_arg(a["self"], "the operand", "float")
        _need(not a.get("dtype") and not a.get("half_to_float"), "softmax with a dtype change is not supported")
        axis = _dim(a["dim"], len(self.shape(x)))
        return self.host("Softmax", [x], self.shape(x), self.elem(x), {"axis": axis}, hint="softmax")

    def _same(self, a: dict[str, Any]) -> Value:
        return self.tensor_arg(a["self"], "the operand")

    _contiguous = _clone = _detach = _alias = _same
    _embedding_bag_forward_only = _embedding_bag

    def _dropout(self, a: dict[str, Any]) -> Value:
        _need(not a["train"], "dropout in training mode is random; trace or export the model in eval mode")
        return self.tensor_arg(a["input"], "the input")


def _numpy(elem: str) -> np.dtype:
    return np.dtype({v: k for k, v in _ELEM.items()}[elem])


def build_module(lowering: AtenLowering, inputs: list[str], results: list[Value], weights_ref: str,
                 path: str) -> Op:
    """Wrap the lowered block as a verified `module` carrying the attributes every frontend sets."""
    block = lowering.block
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


def open_zip(path: str) -> zipfile.ZipFile:
    """Open an archive, turning every way a file can fail to be a zip into one clear error."""
    try:
        return zipfile.ZipFile(path)
    except FileNotFoundError:
        raise EmberError("no such file", path) from None
    except OSError as e:
        raise EmberError(f"cannot read the file: {e.strerror or e}", path) from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as e:
        raise EmberError(f"not a zip archive, or a truncated one ({e})", path) from None


def read_member(zf: zipfile.ZipFile, name: str, path: str) -> bytes:
    try:
        return zf.read(name)
    except KeyError:
        raise EmberError(f"the archive has no '{name}'", path) from None
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, NotImplementedError) as e:
        raise EmberError(f"cannot read '{name}' from the archive ({e})", path) from None


# ---------------------------------------------------------------------------------------------
# The restricted unpickler


class _TorchObject:
    """Stand-in for any `__torch__.*` class: records the class name and the pickled attribute state."""

    qualname = "?"
    attrs: dict[str, Any]

    def __new__(cls, *args: Any) -> _TorchObject:  # pickle's NEWOBJ passes the pickled arguments here
        self = object.__new__(cls)
        self.attrs = {}
        return self

    def __init__(self, *args: Any) -> None:  # REDUCE on the class calls it like a constructor
        pass

    def __setstate__(self, state: Any) -> None:
        self.attrs = dict(state) if isinstance(state, dict) else {"__state__": state}


@dataclass(frozen=True)
class _StorageType:
    """What `torch.FloatStorage` and friends mean in a pickle: the element type of a storage."""

    name: str
    dtype: str | None  # None: a type Ember cannot hold (the error names it when a storage uses it)


_STORAGES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16", "LongStorage": "int64",
    "IntStorage": "int32", "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8",
    "BoolStorage": "bool", "BFloat16Storage": None, "ComplexFloatStorage": None, "ComplexDoubleStorage": None,
}


@dataclass(frozen=True)
class _TensorMeta:
    """A tensor whose data is not needed (the example inputs): only its shape and type."""

    shape: tuple[int, ...]
    dtype: str | None


def _restore_type_tag(value: Any, type_str: Any = None) -> Any:
    """TorchScript tags containers with their static type; the value is all Ember needs."""
    return value


class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickles a TorchScript `data.pkl`, resolving only the globals such an archive needs.

    Every other global (a builtin, `os.system`, a torch function) is refused with an EmberError that
    names it, before anything is called.  With `meta_only`, storages are not read (the example-input
    storages of traced archives are saved empty) and tensors come back as `_TensorMeta`.
    """

    def __init__(self, data: bytes, load_storage: Callable[[str, _StorageType, int], np.ndarray] | None,
                 path: str, member: str):
        super().__init__(io.BytesIO(data))
        self.load_storage = load_storage
        self.path = path
        self.member = member
        self.classes: dict[str, type] = {}

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return self._rebuild_tensor
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module == "torch.jit._pickle" and name == "restore_type_tag":
            return _restore_type_tag
        if module == "torch" and name in _STORAGES:
            return _StorageType(name, _STORAGES[name])
        if (module == "__torch__" or module.startswith("__torch__.")) and name.isidentifier():
            qual = f"{module}.{name}"
            if qual not in self.classes:
                self.classes[qual] = type(name, (_TorchObject,), {"qualname": qual})
            return self.classes[qual]
        raise EmberError(f"{self.member} refers to the global '{module}.{name}', which Ember refuses to load "
                         "(only TorchScript module state is allowed)", self.path)

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str) and isinstance(pid[4], int)):
            raise EmberError(f"{self.member} has an unknown persistent reference {str(pid)[:80]}", self.path)
        _, kind, key, _, numel = pid
        if self.load_storage is None:
            return _TensorMeta((numel,), kind.dtype)
        if kind.dtype is None or kind.dtype == "uint8":
            raise EmberError(f"storage '{key}' is a {kind.name}, which Ember does not support", self.path)
        return self.load_storage(key, kind, numel)

    def _rebuild_tensor(self, storage: Any, offset: Any, size: Any, stride: Any, *rest: Any) -> Any:
        if isinstance(storage, _TensorMeta):
            return _TensorMeta(tuple(size), storage.dtype)
        if not isinstance(storage, np.ndarray):
            raise EmberError(f"{self.member}: a tensor without a storage", self.path)
        return strided_tensor(storage, offset, list(size), list(stride), self.member, self.path)


def _unpickle(data: bytes, load_storage: Callable[[str, _StorageType, int], np.ndarray] | None, path: str,
              member: str) -> Any:
    try:
        return _RestrictedUnpickler(data, load_storage, path, member).load()
    except EmberError:
        raise
    except RecursionError:
        raise EmberError(f"{member} is nested too deeply", path) from None
    except Exception as e:  # a damaged pickle fails in many ways; none of them is the user's bug to debug
        raise EmberError(f"{member} is not a valid TorchScript pickle ({type(e).__name__}: {e})", path) from None


# ---------------------------------------------------------------------------------------------
# The archive and its code

_HINT = ("Ember reads traced TorchScript modules; save the model with torch.export.save (.pt2) "
         "or torch.onnx.export (.onnx) instead")


class _Archive:
    """A TorchScript zip: the module tree with named weights, and the parsed `code/` sources."""

    def __init__(self, path: str):
        self.path = path
        self.zf = open_zip(path)
        pkls = [n for n in self.zf.namelist() if n == "data.pkl" or n.endswith("/data.pkl")]
        if not pkls:
            raise EmberError("not a TorchScript archive (no data.pkl)", path)
        self.prefix = min(pkls, key=lambda n: n.count("/"))[: -len("data.pkl")]
        order = self.member("byteorder").decode("ascii", "replace").strip() if self.has("byteorder") else "little"
        if order not in ("little", "big"):
            raise EmberError(f"unknown byte order '{order}'", path)
        self.order = "<" if order == "little" else ">"
        self.storages: dict[str, np.ndarray] = {}
        self.sources: dict[str, ast.Module] = {}
        self.root = _unpickle(self.member("data.pkl"), self.storage, path, "data.pkl")
        if not isinstance(self.root, _TorchObject):
            raise EmberError("data.pkl does not hold a TorchScript module (saved with torch.save? use "
                             "torch.jit.trace and torch.jit.save)", path)
        self.constants: tuple[Any, ...] = ()
        if self.has("constants.pkl"):
            c = _unpickle(self.member("constants.pkl"), self.storage, path, "constants.pkl")
            self.constants = tuple(c) if isinstance(c, tuple | list) else ()
        self.tensors: dict[str, np.ndarray] = {}
        self.name_tensors()

    def has(self, name: str) -> bool:
        try:
            self.zf.getinfo(self.prefix + name)
        except KeyError:
            return False
        return True

    def member(self, name: str) -> bytes:
        return read_member(self.zf, self.prefix + name, self.path)

    def storage(self, key: str, kind: _StorageType, numel: int) -> np.ndarray:
        if key not in self.storages:
            assert kind.dtype is not None
            raw = self.member(f"data/{key}")
            dt = np.dtype(kind.dtype).newbyteorder(self.order)
            if len(raw) < numel * dt.itemsize or numel < 0:
                raise EmberError(f"storage data/{key} holds {len(raw)} bytes, fewer than {numel} "
                                 f"{kind.dtype} elements", self.path)
            self.storages[key] = np.frombuffer(raw, dtype=dt, count=numel).astype(dt.newbyteorder("="))
        return self.storages[key]

    def name_tensors(self) -> None:
        """Replace module tensors by `Weight`s named by attribute path (tied tensors keep the first name)."""
        seen: dict[int, Weight] = {}
        done: set[int] = set()

        def walk(obj: Any, path: str) -> Any:
            if isinstance(obj, np.ndarray):
                if id(obj) not in seen:
                    seen[id(obj)] = Weight(path, obj)
                    self.tensors[path] = obj
                return seen[id(obj)]
            if isinstance(obj, _TorchObject):
                if id(obj) not in done:
                    done.add(id(obj))
                    for k, v in list(obj.attrs.items()):
                        obj.attrs[k] = walk(v, f"{path}.{k}" if path else str(k))
                return obj
            if isinstance(obj, list | tuple):
                items = [walk(v, f"{path}.{i}") for i, v in enumerate(obj)]
                return items if isinstance(obj, list) else tuple(items)
            return obj

        walk(self.root, "")
        self.constants = tuple(Weight(f"CONSTANTS.c{i}", c) if isinstance(c, np.ndarray) else c
                               for i, c in enumerate(self.constants))
        for c in self.constants:
            if isinstance(c, Weight):
                self.tensors[c.name] = c.array

    def method(self, qualname: str, name: str) -> tuple[ast.FunctionDef, str]:
        """The `ast` of `<class>.<name>` and the archive-relative file it is in."""
        module, _, cls = qualname.rpartition(".")
        rel = "code/" + module.replace(".", "/") + ".py"
        if rel not in self.sources:
            text = self.member(rel).decode("utf-8", "replace")
            try:
                self.sources[rel] = ast.parse(text, filename=rel)
            except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
                raise EmberError(f"{rel} is not valid TorchScript source ({type(e).__name__})", self.path) from None
        for node in self.sources[rel].body:
            if isinstance(node, ast.ClassDef) and node.name == cls:
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == name:
                        return item, rel
        raise EmberError(f"{rel} has no method {cls}.{name}", self.path)

    def example_inputs(self) -> list[_TensorMeta]:
        """Shapes and types of the inputs the module was traced with (traced_inputs.pkl)."""
        if not self.has("traced_inputs.pkl"):
            raise EmberError("the archive does not record the inputs it was traced with (traced_inputs.pkl); "
                             "save it from torch.jit.trace with torch >= 2.0, or use torch.export (.pt2)", self.path)
        got = _unpickle(self.member("traced_inputs.pkl"), None, self.path, "traced_inputs.pkl")
        forward = got.get("forward") if isinstance(got, dict) else None
        if not isinstance(forward, list | tuple) or not all(isinstance(t, _TensorMeta) for t in forward):
            raise EmberError("traced_inputs.pkl does not list the tensors forward was traced with", self.path)
        return list(forward)


# ---------------------------------------------------------------------------------------------
# Symbolic execution of the traced forward


def _dotted(node: ast.expr) -> str | None:
    """`torch.embedding` -> "torch.embedding"; None for anything but a chain of names."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Interpreter:
    """Walks TorchScript source with symbolic values; no part of the archive is executed."""

    def __init__(self, archive: _Archive, lowering: AtenLowering):
        self.ar = archive
        self.low = lowering

    def fail(self, why: str, file: str, node: ast.AST, call: str | None = None) -> EmberError:
        at = f"{file}:{getattr(node, 'lineno', 0)}"
        what = f"'{call}' at {at}" if call else at
        return EmberError(f"{what}: {why}; {_HINT}", self.ar.path)

    def call_method(self, obj: _TorchObject, name: str, args: list[Any], kwargs: dict[str, Any], depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise EmberError(f"module calls nest more than {_MAX_DEPTH} deep", self.ar.path)
        fn, file = self.ar.method(obj.qualname, name)
        env = self.bind(fn, file, [obj, *args], kwargs)
        for stmt in fn.body:
            if isinstance(stmt, ast.Return):
                return None if stmt.value is None else self.eval(stmt.value, env, file, depth)
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                self.assign(stmt.targets[0], self.eval(stmt.value, env, file, depth), env, file)
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                self.assign(stmt.target, self.eval(stmt.value, env, file, depth), env, file)
            elif isinstance(stmt, ast.Expr):
                if not isinstance(stmt.value, ast.Constant):  # docstrings are harmless, calls are not
                    self.eval(stmt.value, env, file, depth)
            elif not isinstance(stmt, ast.Pass):
                kind = type(stmt).__name__.lower()
                raise self.fail(f"'{kind}' statements (control flow of a scripted module) are not supported",
                                file, stmt)
        return None

    def bind(self, fn: ast.FunctionDef, file: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        spec = fn.args
        if spec.vararg or spec.kwarg or spec.kwonlyargs:
            raise self.fail("methods with *args, **kwargs or keyword-only parameters are not supported", file, fn)
        names = [a.arg for a in [*spec.posonlyargs, *spec.args]]
        if len(args) > len(names):
            raise self.fail(f"{fn.name} takes {len(names)} arguments, got {len(args)}", file, fn)
        env = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in env:
                raise self.fail(f"{fn.name} got an unexpected argument '{k}'", file, fn)
            env[k] = v
        defaults = dict(zip(names[len(names) - len(spec.defaults):], spec.defaults))
        for n in names:
            if n not in env:
                if n not in defaults or not isinstance(defaults[n], ast.Constant):
                    raise self.fail(f"{fn.name} is missing argument '{n}'", file, fn)
                env[n] = defaults[n].value  # type: ignore[attr-defined]
        return env

    def assign(self, target: ast.expr, value: Any, env: dict[str, Any], file: str) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
            return
        if isinstance(target, ast.Tuple | ast.List):
            if not isinstance(value, tuple | list) or len(value) != len(target.elts):
                raise self.fail(f"cannot unpack {type(value).__name__} into {len(target.elts)} names", file, target)
            for t, v in zip(target.elts, value):
                self.assign(t, v, env, file)
            return
        raise self.fail("only assignments to names are supported", file, target)

    def eval(self, node: ast.expr, env: dict[str, Any], file: str, depth: int) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise self.fail(f"'{node.id}' is not defined", file, node)
            return env[node.id]
        if isinstance(node, ast.Tuple):
            return tuple(self.eval(e, env, file, depth) for e in node.elts)
        if isinstance(node, ast.List):
            return [self.eval(e, env, file, depth) for e in node.elts]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self.eval(node.operand, env, file, depth)
            if isinstance(v, int | float) and not isinstance(v, bool):
                return -v
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "CONSTANTS" and "CONSTANTS" not in env:
                k = node.attr[1:] if node.attr.startswith("c") else ""
                if k.isdigit() and int(k) < len(self.ar.constants):
                    return self.ar.constants[int(k)]
                raise self.fail(f"unknown constant CONSTANTS.{node.attr}", file, node)
            base = self.eval(node.value, env, file, depth)
            return self.attribute(base, node.attr, file, node)
        if isinstance(node, ast.Subscript):
            base = self.eval(node.value, env, file, depth)
            key = self.eval(node.slice, env, file, depth)
            if isinstance(base, list | tuple) and isinstance(key, int) and -len(base) <= key < len(base):
                return base[key]
            raise self.fail("only constant indexing of lists and tuples is supported", file, node)
        if isinstance(node, ast.Call):
            return self.call(node, env, file, depth)
        raise self.fail(f"'{ast.unparse(node)[:60]}' is not supported", file, node)

    def attribute(self, base: Any, name: str, file: str, node: ast.AST) -> Any:
        if isinstance(base, _TorchObject):
            if name not in base.attrs:
                raise self.fail(f"{base.qualname} has no attribute '{name}'", file, node)
            return base.attrs[name]
        raise self.fail(f"attribute '{name}' of a {type(base).__name__} is not supported", file, node)

    def call(self, node: ast.Call, env: dict[str, Any], file: str, depth: int) -> Any:
        name = _dotted(node.func)
        text = ast.unparse(node.func)[:80]
        if name == "annotate" and len(node.args) == 2:  # annotate(<type>, value): the type is not evaluated
            return self.eval(node.args[1], env, file, depth)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise self.fail("calls with * or ** arguments are not supported", file, node, text)
        args = [self.eval(a, env, file, depth) for a in node.args]
        kwargs = {str(k.arg): self.eval(k.value, env, file, depth) for k in node.keywords}
        if name == "getattr" and len(args) == 2 and isinstance(args[1], str) and not kwargs:
            return self.attribute(args[0], args[1], file, node)
        if name in ("int", "float", "bool") and len(args) == 1 and isinstance(args[0], int | float | bool):
            return {"int": int, "float": float, "bool": bool}[name](args[0])
        if name == "ops.prim.NumToTensor" and len(args) == 1 and isinstance(args[0], int | float):
            return args[0]  # a traced size; it only feeds int() or other size arithmetic
        if name == "torch.size" and len(args) == 2 and isinstance(args[1], int):
            return self.size(args[0], args[1], file, node)
        if name is not None and name.startswith("torch.") and name.count(".") == 1:
            op = name[len("torch."):]
            if op.endswith("_") and not op.startswith("_"):
                raise self.fail("in-place operators are not supported", file, node, f"{text}(...)")
            try:
                return self.low.lower(op, args, kwargs)
            except Unsupported as e:
                raise self.fail(str(e), file, node, f"{text}(...)") from None
            except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:  # arguments of odd types
                raise self.fail(f"invalid arguments ({type(e).__name__}: {e})", file, node, f"{text}(...)") from None
        if isinstance(node.func, ast.Attribute):
            obj = self.eval(node.func.value, env, file, depth)
            if isinstance(obj, _TorchObject):
                return self.call_method(obj, node.func.attr, args, kwargs, depth + 1)
        raise self.fail("this call is not supported", file, node, f"{text}(...)")

    def size(self, x: Any, d: int, file: str, node: ast.AST) -> int:
        try:
            v = self.low.value(x, "the operand of size()")
            s = self.low.shape(v)
            n = s[_dim(d, len(s))]
        except Unsupported as e:
            raise self.fail(str(e), file, node, "torch.size(...)") from None
        if n is None:
            raise self.fail("a size that is not known statically", file, node, "torch.size(...)")
        return n


def _translate(path: str, weights_ref: str) -> tuple[Op, dict[str, np.ndarray]]:
    archive = _Archive(path)
    fn, file = archive.method(archive.root.qualname, "forward")
    params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]][1:]
    examples = archive.example_inputs()
    if len(examples) != len(params):
        raise EmberError(f"forward takes {len(params)} inputs but the archive records {len(examples)} traced "
                         "inputs", path)
    lowering = AtenLowering(Block())
    args: list[Any] = []
    for name, meta in zip(params, examples):
        elem = _ELEM.get(meta.dtype or "")
        if elem is None:
            raise EmberError(f"input '{name}' has element type {meta.dtype}, which Ember does not support", path)
        args.append(lowering.input(name, tensor(tuple(meta.shape), elem)))
    try:
        result = _Interpreter(archive, lowering).call_method(archive.root, "forward", args, {}, 0)
    except RecursionError:
        raise EmberError(f"{file}: expressions nest too deeply", path) from None
    values = list(result) if isinstance(result, tuple | list) else [result]
    try:
        outs = [lowering.value(v, f"output {i}") for i, v in enumerate(values)]
    except Unsupported as e:
        raise EmberError(f"{file}: forward returns something Ember cannot represent: {e}", path) from None
    module = build_module(lowering, params, outs, weights_ref, path)
    weights = dict(archive.tensors)
    weights.update(lowering.weights)
    return module, weights


def import_torchscript(path: str, weights_ref: str) -> Op:
    """Import a traced TorchScript archive as a verified `module` whose weights are read back from `weights_ref`."""
    return _translate(path, weights_ref)[0]


def load_weights_torchscript(path: str) -> dict[str, np.ndarray]:
    """Every module tensor by attribute path, plus the constants an import names: what its params refer to."""
    return _translate(path, path)[1]
