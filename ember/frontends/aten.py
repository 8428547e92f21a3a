"""Aten operators -> Ember IR, shared by the TorchScript (.pt) and torch.export (.pt2) frontends.

Both formats name PyTorch's aten operators (`embedding`, `embedding_bag`, `linear`, `bmm`, ...), the
first positionally in TorchScript source, the second with named arguments in JSON; `AtenLowering`
turns each call into IR: `embedding` becomes emb.gather, `embedding_bag` emb.bag with PyTorch's
semantics (an empty bag gives 0 in every mode), row gathers (`index_select`, `x[idx]`) emb.gather,
row scatters (`scatter_add`, `scatter_reduce`, `index_add`, also in place) emb.scatter_rows, and the
dense operators `host.onnx` ops at opset 17.
The zip helpers read either archive with one clear error per way a file can be damaged.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dialects import builtin, emb  # noqa: F401  (registers the ops this frontend produces)
from ..ir.core import Block, Op, Value, new_op, unique_name, verify
from ..ir.diagnostics import EmberError
from ..ir.types import ShapedType, tensor

__all__ = ["AtenLowering", "Unsupported", "Weight", "build_module", "has_member", "open_zip", "read_member",
           "strided_tensor"]

OPSET = 17
"""The ONNX operator set of the host ops these frontends emit (axes of Unsqueeze/ReduceSum are inputs)."""

_ELEM = {"float32": "f32", "float64": "f64", "float16": "f16", "int64": "i64", "int32": "i32",
         "int16": "i16", "int8": "i8", "bool": "i1"}
_ONNX_TYPE = {"f32": 1, "i8": 3, "i16": 5, "i32": 6, "i64": 7, "i1": 9, "f16": 10, "f64": 11}
_BIG = 2**62  # a slice end at least this large means "to the end" (TorchScript writes INT64_MAX)
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
class TorchDType:
    """A `dtype=` argument as the `.pt2` JSON gives it (TorchScript source writes c10's number instead)."""

    name: str  # numpy's name, or PyTorch's for the types numpy lacks (bfloat16, complex32, ...)


_C10_DTYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64",
               8: "complex32", 9: "complex64", 10: "complex128", 11: "bool", 15: "bfloat16"}
"""c10::ScalarType, the numbering of `dtype=6` in TorchScript source."""


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
_FACTORY: Schema = (("dtype", None), ("layout", None), ("device", None), ("pin_memory", None))
"""The keyword arguments of aten's tensor factories; Ember keeps the dtype and ignores the rest."""
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
    "expand": ("self", "size", ("implicit", False)),
    "expand_as": ("self", "other"),
    "clamp": ("self", ("min", None), ("max", None)),
    "clamp_min": ("self", "min"),
    "clamp_max": ("self", "max"),
    "scatter_add": ("self", "dim", "index", "src"),
    "scatter_reduce": ("self", "dim", "index", "src", "reduce", ("include_self", True)),
    "index_add": ("self", "dim", "index", "source", ("alpha", 1)),
    "zeros": ("size", *_FACTORY),
    "ones": ("size", *_FACTORY),
    "full": ("size", "fill_value", *_FACTORY),
    "zeros_like": ("self", *_FACTORY, ("memory_format", None)),
    "ones_like": ("self", *_FACTORY, ("memory_format", None)),
    "full_like": ("self", "fill_value", *_FACTORY, ("memory_format", None)),
    "new_zeros": ("self", "size", *_FACTORY),
    "new_ones": ("self", "size", *_FACTORY),
    "new_full": ("self", "size", "fill_value", *_FACTORY),
}
_UNARY = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log", "neg": "Neg",
          "abs": "Abs", "sqrt": "Sqrt"}
for _name in _UNARY:
    _SCHEMAS[_name] = ("self",)
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div"}
_FILL = {"zeros": 0, "ones": 1, "zeros_like": 0, "ones_like": 1, "new_zeros": 0, "new_ones": 1}
_FACTORIES = (*_FILL, "full", "full_like", "new_full")
_SCATTER_REDUCE = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}
_FLOATS = ("f16", "f32", "f64")
_VIEWS = ("Reshape", "Transpose", "Unsqueeze", "Squeeze", "Expand", "Slice")
"""Host ops the lowering emits for PyTorch operators that return views of their input."""

SUPPORTED = tuple(sorted(_SCHEMAS))
"""The aten operator names `AtenLowering` translates (overload names are ignored; `<name>_`, the in-place
form, is accepted on a tensor no other value can see, see `in_place`)."""

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
        # Row scatters are recognised by where their index came from: `rows_of[v] = idx` when v is
        # Unsqueeze(idx, 1) of a 1-D index, or that expanded along dimension 1 (index_select + scatter_add).
        self.rows_of: dict[Value, Value] = {}
        # In-place updates are translated as new values; that is exact only for a tensor nothing else
        # can see: one the model computed into its own storage (not an input, a weight or a view of
        # another tensor) and has not read yet.
        self.owned: set[Value] = set()
        self.stale: set[Value] = set()

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
            _need(x not in self.stale, f"{what} is a tensor an earlier in-place operator updated; Ember follows "
                  "such an update only through the operator's result")
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
            _need(self.elem(v) in ("i32", "i64"), f"{what} must hold int32 or int64, got {v.type}")
        elif kind == "float":
            _need(self.elem(v)[0] == "f", f"{what} must hold floats, got {v.type}")
        if rank is not None:
            _need(len(self.shape(v)) == rank, f"{what} must have rank {rank}, got {v.type}")
        return v

    # -- entry point ----------------------------------------------------------------------------

    def lower(self, op: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Translate `aten::<op>(*args, **kwargs)`; raises Unsupported with the reason when it cannot."""
        if op.endswith("_") and not op.startswith("_") and op[:-1] in _SCHEMAS:
            return self.in_place(op[:-1], args, kwargs)
        if op not in _SCHEMAS:
            raise Unsupported(f"this operator is not supported (Ember translates {', '.join(SUPPORTED)})")
        a = self.bind(op, args, kwargs)
        if op in _UNARY:
            x = self.tensor_arg(a["self"], "the operand", "float")
            return self.host(_UNARY[op], [x], self.shape(x), self.elem(x), hint=op)
        if op in _BINARY:
            return self.binary(op, a)
        if op in _FACTORIES:
            return self.factory(op, a)
        if op in ("_embedding_bag", "_embedding_bag_forward_only"):  # padding_idx: an int, negative for none
            return self._embedding_bag(a, private=True)
        handler: Callable[[dict[str, Any]], Any] = getattr(self, "_" + op.lstrip("_"))
        return handler(a)

    def in_place(self, op: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """`op_(self, ...)` as `op(self, ...)`, when no other value can observe the update.

        Both traced archives pass the updated tensor on as the operator's result, so the new value
        replaces the old one exactly when nothing read or aliased the old one before; any later use
        of the old value is refused (`value`)."""
        first = _SCHEMAS[op][0]
        target = args[0] if args else kwargs.get(first if isinstance(first, str) else first[0])
        _need(isinstance(target, Value) and target in self.owned and not self.readers(target),
              "in-place operators are supported only on a tensor the model computed itself (not an input, a "
              "weight or a view of another tensor) and did not read before the update")
        assert isinstance(target, Value)
        result = self.lower(op, args, kwargs)
        _need(isinstance(result, Value) and self.shape(result) == self.shape(target)
              and self.elem(result) == self.elem(target),
              f"the in-place {op}_ would change the type of {target.type}")
        self.stale.add(target)
        self.owned.discard(target)
        self.owned.add(result)
        return result

    def readers(self, v: Value) -> bool:
        return any(v in op.operands for op in self.block.ops)

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
        w = self.tensor_arg(a["weight"], "the embedding table", "float")
        _need(len(self.shape(w)) >= 1, "the embedding table must have rank >= 1")
        return self.gather_rows(a["weight"], idx, "embedding")

    def gather_rows(self, table: Any, idx: Value, hint: str, wrap: bool = False) -> Value:
        """table[idx] along dimension 0: `emb.gather` for rows of floats, as the ONNX frontend raises
        Gather, so message passing and block gathers stream; a host Gather for anything else.

        `wrap`: negative indices count from the end (x[idx]); embedding and index_select refuse them."""
        x = self.tensor_arg(table, "the indexed tensor")
        s = self.shape(x)
        _need(len(s) >= 1, "cannot index a 0-d tensor")
        shape = self.shape(idx) + s[1:]
        rows = isinstance(table, Weight) or (len(s) >= 2 and None not in s[1:])
        if self.elem(x) not in _FLOATS or not rows:
            return self.host("Gather", [x, idx], shape, self.elem(x), {"axis": 0}, hint=hint)
        return self.emb("emb.gather", [x, idx], shape, self.elem(x), {"negative": "wrap"} if wrap else {}, hint)

    @staticmethod
    def _padding_row(pad: Any, rows: int | None, private: bool) -> int | None:
        """The table row a bag leaves out, or None, as PyTorch reads `padding_idx`.

        `embedding_bag` takes an optional int in [-rows, rows) and wraps a negative one; the private
        `_embedding_bag` ops take an int where anything outside [0, rows) means no padding."""
        if pad is None:
            return None
        _need(isinstance(pad, int) and not isinstance(pad, bool), f"padding_idx must be an integer, got {pad!r}")
        if private:
            return None if pad < 0 or (rows is not None and pad >= rows) else pad
        if rows is None:
            _need(pad >= 0, "a negative padding_idx needs a table with a static number of rows")
            return pad
        _need(-rows <= pad < rows, f"padding_idx must be within the number of embeddings, {-rows} through "
              f"{rows - 1}, but got {pad}")
        return pad + rows if pad < 0 else pad

    def _embedding_bag(self, a: dict[str, Any], private: bool = False) -> tuple[Any, ...]:
        table = self.tensor_arg(a["weight"], "the embedding table", "float", 2)
        mode = a["mode"]
        _need(mode in (0, 1, 2) and not isinstance(mode, bool), f"unknown embedding_bag mode {mode!r}")
        pad = self._padding_row(a["padding_idx"], self.shape(table)[0], private)
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
        attrs: dict[str, Any] = {"mode": ("sum", "mean", "max")[mode], "empty": "zero"}
        if pad is not None:
            attrs["padding_idx"] = pad
        out = self.emb("emb.bag", operands, (bags, self.shape(table)[1]), self.elem(table), attrs, "embedding_bag")
        return (out, _Unusable("offset2bag"), _Unusable("bag_size"), _Unusable("max_indices"))

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
        yv = self.operand(y, elem, op)
        _need(op != "div" or (elem[0] == "f" and a["rounding_mode"] is None),
              "div must be a true division of floats")
        alpha = a.get("alpha", 1)
        if alpha != 1:
            _need(isinstance(alpha, int | float) and not isinstance(alpha, bool),
                  f"alpha must be a number, got {alpha!r}")
            yv = self.host("Mul", [yv, self.const(np.array(alpha, dtype=_numpy(elem)))], self.shape(yv), elem,
                           hint="scaled")
        return self.host(_BINARY[op], [xv, yv], _broadcast(self.shape(xv), self.shape(yv)), elem, hint=op)

    def operand(self, y: Any, elem: str, op: str) -> Value:
        """The second operand of an elementwise op on a tensor of `elem`: a number becomes a constant of
        that type, a tensor must already have it (PyTorch's type promotion is not modelled)."""
        if isinstance(y, bool | int | float):
            _need(elem[0] == "f" or isinstance(y, int), f"{op} of an integer tensor and a float (type promotion)")
            return self.const(np.array(y, dtype=_numpy(elem)))
        yv = self.tensor_arg(y, "the second operand")
        _need(self.elem(yv) == elem, f"{op} of a tensor of {elem} and {yv.type} (type promotion is not supported)")
        return yv

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
        out = self.host("Unsqueeze", [x, self.const([axis])], tuple(s), self.elem(x), hint="unsqueeze")
        self.note_rows(x, out)
        return out

    def note_rows(self, idx: Value, column: Value) -> None:
        """Remember that `column` is the 1-D integer index `idx` as an [n, 1] column."""
        if len(self.shape(idx)) == 1 and self.elem(idx) in ("i32", "i64") and len(self.shape(column)) == 2 \
                and self.shape(column)[1] == 1:
            self.rows_of[column] = idx

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
        r = self.host("Reshape", [x, self.const(target)], tuple(out), self.elem(x), attrs, hint="reshape")
        self.note_rows(x, r)  # idx.view(-1, 1)
        return r

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
        if not self.shape(idx):  # PyTorch keeps the dimension for a 0-d index
            idx = self.reshape(idx, [1])
        s = self.shape(x)
        d = _dim(a["dim"], len(s))
        if d == 0:
            return self.gather_rows(a["self"], idx, "index_select")
        shape = s[:d] + self.shape(idx) + s[d + 1:]
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
        if ks == [0]:
            return self.gather_rows(a["self"], vals[0], "index", wrap=True)
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

    def expand(self, x: Value, size: list[int]) -> Value:
        """PyTorch's expand: -1 keeps a dimension, new dimensions go in front, only 1s stretch."""
        s = self.shape(x)
        lead = len(size) - len(s)
        _need(lead >= 0, f"cannot expand {x.type} to fewer dimensions {size}")
        out: list[int | None] = []
        for i, t in enumerate(size):
            d = s[i - lead] if i >= lead else None
            if t == -1:
                _need(i >= lead, f"expand to {size}: -1 is not allowed for a new dimension")
                out.append(d)
            else:
                _need(t >= 0 and (i < lead or d is None or d in (1, t)), f"cannot expand {x.type} to {size}")
                out.append(t)
        if tuple(out) == s:
            return x
        onnx_shape = [1 if t == -1 else t for t in size]  # ONNX broadcasting keeps a dimension against 1
        return self.expanded(x, self.const(onnx_shape), tuple(out))

    def expanded(self, x: Value, dims: Value, shape: tuple[int | None, ...]) -> Value:
        """ONNX Expand of x to `dims`; with no new dimensions the result keeps x's rows."""
        r = self.host("Expand", [x, dims], shape, self.elem(x), hint="expand")
        if x in self.rows_of and len(shape) == len(self.shape(x)):
            self.rows_of[r] = self.rows_of[x]
        return r

    def _expand(self, a: dict[str, Any]) -> Value:
        return self.expand(self.tensor_arg(a["self"], "the operand"), _ints(a["size"], "the size"))

    def _expand_as(self, a: dict[str, Any]) -> Value:
        x = self.tensor_arg(a["self"], "the operand")
        like = self.tensor_arg(a["other"], "the tensor to expand as")
        target = self.shape(like)
        if None not in target:
            return self.expand(x, [int(d) for d in target if d is not None])
        _need(len(target) >= len(self.shape(x)), f"cannot expand {x.type} as {like.type}")
        return self.expanded(x, self.host("Shape", [like], (len(target),), "i64", hint="shape"), target)

    # -- tensor factories -----------------------------------------------------------------------

    @staticmethod
    def dtype(v: Any, default: str) -> str:
        """The IR element type of a `dtype=` argument: c10's number (TorchScript) or a TorchDType (.pt2)."""
        if v is None:
            return default
        if isinstance(v, TorchDType):
            name = v.name
        elif isinstance(v, int) and not isinstance(v, bool):
            name = _C10_DTYPES.get(v, f"number {v}")
        else:
            raise Unsupported(f"dtype must be a type, got {v!r}")
        elem = _ELEM.get(name)
        _need(elem is not None, f"element type {name} is not supported")
        assert elem is not None
        return elem

    def filled(self, shape: Shape, value: Any, elem: str, like: Value | None, hint: str) -> Value:
        """A new tensor of `shape` holding `value`: Expand of a scalar, with Shape(like) for unknown extents."""
        _need(isinstance(value, bool | int | float), f"the fill value must be a number, got {value!r}")
        _need(elem[0] == "f" or not isinstance(value, float) or float(value).is_integer(),
              f"cannot fill a tensor of {elem} with {value!r}")
        scalar = self.const(np.array(value, dtype=_numpy(elem)))
        if None in shape:
            assert like is not None
            dims = self.host("Shape", [like], (len(shape),), "i64", hint="shape")
        else:
            dims = self.const([int(d) for d in shape if d is not None])
        # `const` stores a number as a 1-element vector; Reshape makes a 0-d tensor 0-d again
        out = self.host("Reshape" if shape == () else "Expand", [scalar, dims], shape, elem, hint=hint)
        self.owned.add(out)  # a new tensor, though Expand and Reshape are views elsewhere
        return out

    @staticmethod
    def size_arg(v: Any) -> Shape:
        dims = _ints(v, "the size")
        _need(all(d >= 0 for d in dims), f"invalid size {dims}")
        return tuple(dims)

    @staticmethod
    def fill_elem(value: Any) -> str:
        """What `torch.full` infers from its fill value when no dtype is given."""
        return "i1" if isinstance(value, bool) else "i64" if isinstance(value, int) else "f32"

    def factory(self, op: str, a: dict[str, Any]) -> Value:
        """zeros, ones and full; their `_like` forms (the shape and default type of `self`) and `new_` forms
        (a size, and the default type of `self`)."""
        src = self.tensor_arg(a["self"], "the model tensor") if "self" in a else None
        if "size" in a:
            shape = self.size_arg(a["size"])
        else:
            assert src is not None
            shape = self.shape(src)
        v = a["fill_value"] if "fill_value" in a else _FILL[op]
        default = self.elem(src) if src is not None else self.fill_elem(v) if op == "full" else "f32"
        return self.filled(shape, v, self.dtype(a["dtype"], default), src if op.endswith("_like") else None, op)

    # -- scatters -------------------------------------------------------------------------------

    def scatter_rows(self, data: Value, rows: Value, updates: Value, reduction: str) -> Value:
        return self.emb("emb.scatter_rows", [data, rows, updates], self.shape(data), self.elem(data),
                        {"reduction": reduction}, "scatter")

    def scatter(self, a: dict[str, Any], reduction: str) -> Value:
        """scatter_add / scatter_reduce: out[index[i][j]][j] = reduce(out[...], src[i][j]) (dim 0, 2-D).

        When the index is a 1-D index expanded over the columns, every update is a whole row and the
        scatter is `emb.scatter_rows`; otherwise a host ScatterElements over the index's extent."""
        data = self.tensor_arg(a["self"], "the tensor scattered into")
        idx = self.tensor_arg(a["index"], "the index", "int")
        src = self.tensor_arg(a["src"], "the source")
        ds, is_, ss = self.shape(data), self.shape(idx), self.shape(src)
        _need(len(ds) == len(is_) == len(ss) >= 1, "self, index and src must have the same number of dimensions")
        _need(self.elem(src) == self.elem(data), f"scatter of {src.type} into {data.type}")
        d = _dim(a["dim"], len(ds))
        rows = self.rows_of.get(idx)
        if (rows is not None and d == 0 and len(ds) == 2 and self.elem(data) in _FLOATS and is_ == ss
                and None not in is_ and is_[1] == ds[1]):
            return self.scatter_rows(data, rows, src, reduction)
        _need(reduction in ("add", "mul"), f"a scatter with reduction {reduction} of anything but whole rows "
              "needs ONNX opset 18 (Ember's host ops are opset 17)")
        _need(None not in is_ and None not in ss, "scatter with indices of unknown extent")
        if is_ != ss:  # only the index's extent of src takes part
            _need(all(i is not None and s is not None and i <= s for i, s in zip(is_, ss)),
                  f"index {idx.type} is larger than src {src.type}")
            r = len(is_)
            src = self.host("Slice", [src, self.const([0] * r), self.const([int(i or 0) for i in is_]),
                                      self.const(list(range(r)))], is_, self.elem(src), hint="src")
        return self.host("ScatterElements", [data, idx, src], ds, self.elem(data),
                         {"axis": d, "reduction": reduction}, hint="scatter")

    def _scatter_add(self, a: dict[str, Any]) -> Value:
        return self.scatter(a, "add")

    def _scatter_reduce(self, a: dict[str, Any]) -> Value:
        reduce = a["reduce"]
        _need(reduce in _SCATTER_REDUCE, f"scatter_reduce with reduce={reduce!r} is not supported "
              f"(Ember translates {', '.join(_SCATTER_REDUCE)})")
        _need(a["include_self"] is True, "scatter_reduce with include_self=False is not supported")
        return self.scatter(a, _SCATTER_REDUCE[reduce])

    def _index_add(self, a: dict[str, Any]) -> Value:
        """out[index[i]] += alpha * source[i] along `dim`: emb.scatter_rows for rows, else a host ScatterND."""
        data = self.tensor_arg(a["self"], "the tensor added into")
        idx = self.tensor_arg(a["index"], "the index", "int")
        src = self.tensor_arg(a["source"], "the source")
        ds, ss = self.shape(data), self.shape(src)
        _need(len(self.shape(idx)) <= 1, "index_add needs a 1-D index")
        if not self.shape(idx):
            idx = self.reshape(idx, [1])
        _need(len(ds) >= 1 and len(ss) == len(ds), f"index_add of {src.type} into {data.type}")
        _need(self.elem(src) == self.elem(data), f"index_add of {src.type} into {data.type}")
        d = _dim(a["dim"], len(ds))
        _need(all(x is None or y is None or x == y for k, (x, y) in enumerate(zip(ds, ss)) if k != d),
              f"index_add of {src.type} into {data.type} along dimension {d}")
        alpha = a["alpha"]
        if alpha != 1:
            _need(isinstance(alpha, int | float) and not isinstance(alpha, bool), f"alpha must be a number, got "
                  f"{alpha!r}")
            src = self.host("Mul", [src, self.operand(alpha, self.elem(src), "index_add")], ss, self.elem(src),
                            hint="scaled")
        if d == 0 and len(ds) == 2 and self.elem(data) in _FLOATS and ds[1] is not None:
            return self.scatter_rows(data, idx, src, "add")
        perm = [d, *(k for k in range(len(ds)) if k != d)]
        inv = [perm.index(k) for k in range(len(ds))]
        front = self.transpose(data, perm)
        col = self.unsqueeze(idx, 1)
        got = self.host("ScatterND", [front, col, self.transpose(src, perm)], self.shape(front), self.elem(data),
                        {"reduction": "add"}, hint="index_add")
        return self.transpose(got, inv)

    # -- reductions and the rest ----------------------------------------------------------------

    def _clamp(self, a: dict[str, Any]) -> Value:
        x = self.tensor_arg(a["self"], "the operand")
        lo, hi = a.get("min"), a.get("max")
        _need(lo is not None or hi is not None, "clamp needs a min or a max")
        y = x
        for bound, onnx_op in ((lo, "Max"), (hi, "Min")):
            if bound is not None:
                b = self.operand(bound, self.elem(x), "clamp")
                y = self.host(onnx_op, [y, b], _broadcast(self.shape(y), self.shape(b)), self.elem(x), hint="clamp")
        return y

    _clamp_min = _clamp_max = _clamp

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


def _prune(block: Block, results: list[Value]) -> None:
    """Drop ops whose results nothing uses (e.g. the Unsqueeze/Expand of an index a row scatter
    replaced): every op the lowering emits is pure, and a dead host op would still be charged."""
    live = set(results)
    kept: list[Op] = []
    for op in reversed(block.ops):
        if any(r in live for r in op.results):
            kept.append(op)
            live.update(op.operands)
    block.ops = kept[::-1]


def build_module(lowering: AtenLowering, inputs: list[str], results: list[Value], weights_ref: str,
                 path: str) -> Op:
    """Wrap the lowered block as a verified `module` carrying the attributes every frontend sets."""
    block = lowering.block
    _prune(block, results)
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


def has_member(zf: zipfile.ZipFile, name: str) -> bool:
    try:
        zf.getinfo(name)
    except KeyError:
        return False
    return True


def read_member(zf: zipfile.ZipFile, name: str, path: str) -> bytes:
    try:
        return zf.read(name)
    except KeyError:
        raise EmberError(f"the archive has no '{name}'", path) from None
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, NotImplementedError) as e:
        raise EmberError(f"cannot read '{name}' from the archive ({e})", path) from None
