"""Operators that move, view or create tensors without arithmetic: reshapes and transposes, slicing,
splitting and joining, broadcasting, tensor factories and index tables, and size queries.

Views (`view`, `transpose`, `expand`, ...) become the matching ONNX host op.  Index tables computed
from sizes alone (`arange`, `tril_indices`, `triu_indices`, and slices, selects and reshapes of them)
are computed here and stored as constants: a traced model has static sizes, and so does an export
unless it was made with dynamic shapes.  Then its symbolic sizes (`SymInt`) are computed at run time
and passed to Reshape, Expand, Slice and Range as tensors.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ...ir.core import Value
from .base import Args, Lowering, aten
from .values import (
    BIG,
    Shape,
    SymBool,
    SymInt,
    Weight,
    dim,
    integer,
    ints,
    is_number,
    need,
    numpy_of,
    prod,
    sizes,
    static,
)

_FACTORY = (("dtype", None), ("layout", None), ("device", None), ("pin_memory", None))
"""The keyword arguments of aten's tensor factories; Ember keeps the dtype and ignores the rest."""
_FILL = {"empty": 0, "zeros": 0, "ones": 1, "zeros_like": 0, "ones_like": 1, "new_zeros": 0, "new_ones": 1}
_SIZE_FOLD = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "floordiv": operator.floordiv,
              "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
              "ge": operator.ge}
_SIZE_ONNX = {"add": "Add", "sub": "Sub", "mul": "Mul", "floordiv": "Div", "eq": "Equal", "lt": "Less",
              "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual"}
"""Python's arithmetic and comparisons on sizes (torch.export's `_operator.<name>` nodes) -> ONNX."""
_BECOMES_FILL = "host `Expand` of a scalar (`Shape` of the model tensor for unknown extents)"


class LayoutOps(Lowering):
    """Shapes, views, joins, splits and factories."""

    # -- joining --------------------------------------------------------------------------------

    def tensors(self, v: Any, what: str) -> list[Value]:
        need(isinstance(v, list | tuple) and len(v) > 0, f"{what} must be a non-empty list of tensors")
        vals = [self.value(x, f"{what}[{i}]") for i, x in enumerate(v)]
        elem = self.result_type(vals)
        vals = [self.cast(x, elem) for x in vals]
        need(len({len(self.shape(x)) for x in vals}) == 1, f"{what} have different ranks")
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
                need(len(known) <= 1, f"cannot concatenate shapes {[list(s) for s in shapes]} along {axis}")
                out.append(known.pop() if known else None)
        if len(vals) == 1:
            return vals[0]
        return self.host("Concat", vals, tuple(out), self.elem(vals[0]), {"axis": axis}, hint=hint)

    @aten("cat", "tensors", ("dim", 0), becomes="host `Concat` (operands promoted to one type)")
    @aten("concat", "tensors", ("dim", 0), becomes="host `Concat`")
    @aten("concatenate", "tensors", ("dim", 0), becomes="host `Concat`")
    def _cat(self, a: Args) -> Value:
        given = a["tensors"]
        if isinstance(given, list | tuple):  # PyTorch skips 1-D empty tensors (an empty cache) in a cat
            kept = [x for x in given if self.tensor_shape(x) != (0,)]
            given = kept if kept else given[:1]
        vals = self.tensors(given, "the tensors")
        return self.concat(vals, dim(a["dim"], len(self.shape(vals[0]))), "cat")

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

    @aten("stack", "tensors", ("dim", 0), becomes="host `Unsqueeze` of each, then `Concat`")
    def _stack(self, a: Args) -> Value:
        vals = self.tensors(a["tensors"], "the tensors")
        axis = dim(a["dim"], len(self.shape(vals[0])) + 1)
        return self.concat([self.unsqueeze(v, axis) for v in vals], axis, "stack")

    # -- reshaping ------------------------------------------------------------------------------

    @aten("unsqueeze", "self", "dim", becomes="host `Unsqueeze` (a constant for an index table)")
    def _unsqueeze(self, a: Args) -> Any:
        known = self.known(a["self"])
        if known is not None:
            return self.constant(np.expand_dims(known, dim(a["dim"], known.ndim + 1)))
        x = self.value(a["self"], "the operand")
        return self.unsqueeze(x, dim(a["dim"], len(self.shape(x)) + 1))

    @aten("squeeze", "self", ("dim", None), becomes="host `Squeeze` (only of dimensions of size 1, as PyTorch)")
    def _squeeze(self, a: Args) -> Value:
        x = self.value(a["self"], "the operand")
        s = self.shape(x)
        dims = range(len(s)) if a["dim"] is None else [dim(d, len(s)) for d in ints(a["dim"], "dim")]
        need(all(s[d] is not None for d in dims), "squeeze of a dimension of unknown size")
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

    @aten("transpose", "self", "dim0", "dim1", becomes="host `Transpose`")
    def _transpose(self, a: Args) -> Value:
        x = self.value(a["self"], "the operand")
        r = len(self.shape(x))
        if r == 0:
            return x
        d0, d1 = dim(a["dim0"], r, "dim0"), dim(a["dim1"], r, "dim1")
        perm = list(range(r))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        return self.transpose(x, perm)

    @aten("t", "self", becomes="host `Transpose`")
    def _t(self, a: Args) -> Value:
        x = self.value(a["self"], "the operand")
        need(len(self.shape(x)) <= 2, "t() needs a tensor of rank <= 2")
        return self.transpose(x, [1, 0]) if len(self.shape(x)) == 2 else x

    @aten("permute", "self", "dims", becomes="host `Transpose`")
    def _permute(self, a: Args) -> Value:
        x = self.value(a["self"], "the operand")
        r = len(self.shape(x))
        perm = [dim(d, r) for d in ints(a["dims"], "dims")]
        need(sorted(perm) == list(range(r)), f"{perm} is not a permutation of {r} dimensions")
        return self.transpose(x, perm)

    @staticmethod
    def target_shape(shape: Shape, target: list[int | SymInt], what: str) -> tuple[int | None, ...]:
        """The shape PyTorch sizes (at most one -1, symbolic entries allowed) give a tensor of `shape`.

        A symbolic size is taken to stand for one unknown extent of the input, so -1 is still inferred
        when the known extents divide: view([s, 8, 16], [s, 8, -1, 8]) is [?, 8, 2, 8]."""
        ints_ = [d for d in target if not isinstance(d, SymInt)]
        need(sum(1 for d in ints_ if d == -1) <= 1 and all(d >= -1 for d in ints_), f"invalid shape {target}")
        syms = len(target) - len(ints_)
        total = prod(shape) if syms == 0 else (
            prod(tuple(d for d in shape if d is not None)) if sum(d is None for d in shape) == syms else None)
        known = prod(tuple(d for d in ints_ if d != -1))
        out: list[int | None] = list(static(target))
        if -1 in ints_:
            i = out.index(-1)
            out[i] = None if total is None or known is None or known == 0 else total // known
            need(total is None or known is None or (known != 0 and total % known == 0),
                 f"cannot reshape {what} to {target}")
        else:
            need(total is None or known == total or syms, f"cannot reshape {what} to {target}")
        return tuple(out)

    def reshape(self, x: Value, target: list[int | SymInt]) -> Value:
        """Reshape to PyTorch sizes (at most one -1; 0 is a real zero extent, hence allowzero)."""
        out = self.target_shape(self.shape(x), target, str(x.type))
        if out == self.shape(x) and not any(isinstance(d, SymInt) for d in target):
            return x
        attrs = {"allowzero": 1} if 0 in target else {}
        r = self.host("Reshape", [x, self.size_vector(target)], out, self.elem(x), attrs, hint="reshape")
        self.note_rows(x, r)  # idx.view(-1, 1)
        return r

    def reshape_arg(self, x: Any, target: list[int | SymInt]) -> Any:
        known = self.known(x)
        if known is not None and not any(isinstance(d, SymInt) for d in target):
            out = self.target_shape(known.shape, target, f"a tensor of shape {list(known.shape)}")
            return self.constant(known.reshape([d if d is not None else -1 for d in out]))
        return self.reshape(self.value(x, "the operand"), target)

    @aten("reshape", "self", "shape", becomes="host `Reshape`")
    def _reshape(self, a: Args) -> Any:
        return self.reshape_arg(a["self"], sizes(a["shape"], "the shape"))

    @aten("view", "self", "size", becomes="host `Reshape`")
    def _view(self, a: Args) -> Any:
        return self.reshape_arg(a["self"], sizes(a["size"], "the size"))

    @aten("flatten", "self", ("start_dim", 0), ("end_dim", -1), becomes="host `Reshape`")
    def _flatten(self, a: Args) -> Value:
        x = self.value(a["self"], "the operand")
        s = self.shape(x)
        if not s:
            return self.reshape(x, [1])
        lo, hi = dim(a["start_dim"], len(s), "start_dim"), dim(a["end_dim"], len(s), "end_dim")
        need(lo <= hi, "flatten: start_dim comes after end_dim")
        merged = prod(s[lo:hi + 1])
        target = [*s[:lo], -1 if merged is None else merged, *s[hi + 1:]]
        need(all(d is not None for d in target), f"flatten of {x.type}: too many unknown extents")
        return self.reshape(x, [int(d) for d in target if d is not None])

    # -- slicing and splitting ------------------------------------------------------------------

    def slice(self, x: Value, d: int, start: int | SymInt, end: int | SymInt, step: int = 1) -> Value:
        """x[start:end:step] along d, PyTorch's clamping of start and end."""
        s = self.shape(x)
        n = s[d]
        if start == 0 and step == 1 and isinstance(end, int) and (end >= BIG or (n is not None and end >= n)):
            return x
        out = list(s)
        bounds = isinstance(start, int) and isinstance(end, int)
        out[d] = None if n is None or not bounds else len(range(*slice(start, end, step).indices(n)))
        ends = min(end, 2**63 - 1) if isinstance(end, int) else end
        ins = [x, self.size_vector([start]), self.size_vector([ends]), self.const([d]), self.const([step])]
        return self.host("Slice", ins, tuple(out), self.elem(x), hint="slice")

    @aten("slice", "self", ("dim", 0), ("start", None), ("end", None), ("step", 1),
          becomes="host `Slice` (a constant for an index table)")
    def _slice(self, a: Args) -> Any:
        start = 0 if a["start"] is None else a["start"] if isinstance(a["start"], SymInt) else integer(a["start"],
                                                                                                     "start")
        end = BIG if a["end"] is None else a["end"] if isinstance(a["end"], SymInt) else integer(a["end"], "end")
        step = integer(a["step"], "step")
        need(step >= 1, "slice steps must be positive")
        known = self.known(a["self"])
        if known is not None and isinstance(start, int) and isinstance(end, int):
            d = dim(a["dim"], known.ndim)
            index = [slice(None)] * known.ndim
            index[d] = slice(start, min(end, 2**63 - 1), step)
            return self.constant(known[tuple(index)])
        x = self.value(a["self"], "the operand")
        return self.slice(x, dim(a["dim"], len(self.shape(x))), start, end, step)

    @aten("narrow", "self", "dim", "start", "length", becomes="host `Slice`")
    def _narrow(self, a: Args) -> Value:
        x = self.value(a["self"], "the operand")
        s = self.shape(x)
        d = dim(a["dim"], len(s))
        start, length = integer(a["start"], "start"), integer(a["length"], "length")
        if start < 0:
            need(s[d] is not None, "narrow from the end of a dimension of unknown size")
            start += s[d] or 0
        need(start >= 0 and length >= 0 and (s[d] is None or start + length <= (s[d] or 0)),
             f"narrow({start}, {length}) is outside a dimension of size {s[d]}")
        return self.slice(x, d, start, start + length)

    def select(self, x: Any, d: int, k: int) -> Any:
        """x[..., k, ...] along d (the dimension goes): a host `Gather` with a 0-d index."""
        known = self.known(x)
        if known is not None:
            need(-known.shape[d] <= k < known.shape[d], f"index {k} is out of range for size {known.shape[d]}")
            return self.constant(np.take(known, k, axis=d))
        v = self.value(x, "the operand")
        s = self.shape(v)
        need(s[d] is None or -(s[d] or 0) <= k < (s[d] or 0), f"index {k} is out of range for size {s[d]}")
        if k < 0:
            need(s[d] is not None, "a negative index into a dimension of unknown size")
        shape = s[:d] + s[d + 1:]
        return self.host("Gather", [v, self.const(np.array(k, dtype=np.int64))], shape, self.elem(v), {"axis": d},
                         hint="select")

    def rank_of(self, x: Any) -> int:
        known = self.known(x)
        return known.ndim if known is not None else len(self.shape(self.value(x, "the operand")))

    @aten("select", "self", "dim", "index", becomes="host `Gather` with a 0-d index (a constant for an index table)")
    def _select(self, a: Args) -> Any:
        return self.select(a["self"], dim(a["dim"], self.rank_of(a["self"])), integer(a["index"], "index"))

    @aten("unbind", "self", ("dim", 0), becomes="one `select` per entry")
    def _unbind(self, a: Args) -> list[Any]:
        x = a["self"]
        d = dim(a["dim"], self.rank_of(x))
        known = self.known(x)
        n = known.shape[d] if known is not None else self.shape(self.value(x, "the operand"))[d]
        need(n is not None, "unbind of a dimension of unknown size")
        return [self.select(x, d, k) for k in range(n or 0)]

    def split_sizes(self, x: Value, sizes: list[int | SymInt], d: int) -> list[Value]:
        """Consecutive slices of the given lengths; a symbolic length gives run-time bounds."""
        pos: int | SymInt = 0
        out = []
        for n in sizes:
            end = self.size_arith("add", pos, n)
            out.append(self.slice(x, d, pos, end))
            pos = end
        return out

    @aten("split", "self", "split_size", ("dim", 0), becomes="one host `Slice` per piece")
    def _split(self, a: Args) -> list[Value]:
        x = self.value(a["self"], "the operand")
        s = self.shape(x)
        d = dim(a["dim"], len(s))
        n = s[d]
        need(n is not None, "split of a dimension of unknown size")
        assert n is not None
        if isinstance(a["split_size"], list | tuple):
            sizes = ints(a["split_size"], "the split sizes")
            need(sum(sizes) == n and min(sizes, default=0) >= 0, f"split sizes {sizes} do not add up to {n}")
        else:
            step = integer(a["split_size"], "the split size")
            need(step > 0 or n == 0, "split size must be positive")
            sizes = [min(step, n - i) for i in range(0, n, step)] if n else [0]
        return self.split_sizes(x, sizes, d)

    @aten("split_with_sizes", "self", "split_sizes", ("dim", 0),
          becomes="one host `Slice` per piece (run-time bounds for sizes known only at run time)")
    def _split_with_sizes(self, a: Args) -> list[Value]:
        given = sizes(a["split_sizes"], "the split sizes")
        if not any(isinstance(n, SymInt) for n in given):
            return self._split(Args("split", {"self": a["self"], "split_size": given, "dim": a["dim"]}))
        # Data-dependent sizes (a KeyedJaggedTensor's lengths, read with item()): torch.export has
        # already asserted that they add up to the extent, so the slices only need their bounds.
        x = self.value(a["self"], "the operand")
        d = dim(a["dim"], len(self.shape(x)))
        need(all(isinstance(n, SymInt) or n >= 0 for n in given), f"invalid split sizes {given}")
        return self.split_sizes(x, given, d)

    @aten("chunk", "self", "chunks", ("dim", 0), becomes="one host `Slice` per piece")
    def _chunk(self, a: Args) -> list[Value]:
        x = self.value(a["self"], "the operand")
        d = dim(a["dim"], len(self.shape(x)))
        n, chunks = self.shape(x)[d], integer(a["chunks"], "chunks")
        need(n is not None and chunks > 0, "chunk needs a positive count and a dimension of known size")
        assert n is not None
        step = -(-n // chunks) if n else 1
        return self._split(Args("split", {"self": x, "split_size": step, "dim": d}))

    # -- broadcasting ---------------------------------------------------------------------------

    def expand(self, x: Value, size: list[int | SymInt]) -> Value:
        """PyTorch's expand: -1 keeps a dimension, new dimensions go in front, only 1s stretch."""
        s = self.shape(x)
        lead = len(size) - len(s)
        need(lead >= 0, f"cannot expand {x.type} to fewer dimensions {size}")
        out: list[int | None] = []
        for i, t in enumerate(size):
            d = s[i - lead] if i >= lead else None
            if isinstance(t, SymInt):
                out.append(d if d is not None and d != 1 else None)
            elif t == -1:
                need(i >= lead, f"expand to {size}: -1 is not allowed for a new dimension")
                out.append(d)
            else:
                need(t >= 0 and (i < lead or d is None or d in (1, t)), f"cannot expand {x.type} to {size}")
                out.append(t)
        if tuple(out) == s and None not in s:
            return x
        onnx_shape = [1 if t == -1 else t for t in size]  # ONNX broadcasting keeps a dimension against 1
        return self.expanded(x, self.size_vector(onnx_shape), tuple(out))

    def expanded(self, x: Value, dims: Value, shape: tuple[int | None, ...]) -> Value:
        """ONNX Expand of x to `dims`; with no new dimensions the result keeps x's rows."""
        r = self.host("Expand", [x, dims], shape, self.elem(x), hint="expand")
        if x in self.rows_of and len(shape) == len(self.shape(x)):
            self.rows_of[r] = self.rows_of[x]
        return r

    @aten("expand", "self", "size", ("implicit", False), becomes="host `Expand`")
    def _expand(self, a: Args) -> Value:
        return self.expand(self.value(a["self"], "the operand"), sizes(a["size"], "the size"))

    @aten("expand_as", "self", "other", becomes="host `Expand`")
    def _expand_as(self, a: Args) -> Value:
        x = self.value(a["self"], "the operand")
        like = self.value(a["other"], "the tensor to expand as")
        target = self.shape(like)
        if None not in target:
            return self.expand(x, [int(d) for d in target if d is not None])
        need(len(target) >= len(self.shape(x)), f"cannot expand {x.type} as {like.type}")
        return self.expanded(x, self.host("Shape", [like], (len(target),), "i64", hint="shape"), target)

    @aten("repeat", "self", "repeats", becomes="host `Tile`")
    def _repeat(self, a: Args) -> Value:
        x = self.value(a["self"], "the operand")
        reps = ints(a["repeats"], "repeats")
        s = self.shape(x)
        need(len(reps) >= len(s) and min(reps, default=1) >= 0, f"cannot repeat {x.type} {reps} times")
        if len(reps) > len(s):
            x = self.reshape(x, [1] * (len(reps) - len(s)) + [d if d is not None else -1 for d in s])
            s = self.shape(x)
        shape = tuple(None if d is None else d * r for d, r in zip(s, reps))
        return self.host("Tile", [x, self.const(reps)], shape, self.elem(x), hint="repeat")

    # -- factories and index tables -------------------------------------------------------------

    def filled(self, size: list[Any], value: Any, elem: str, like: Value | None, hint: str) -> Value:
        """A new tensor of `size` holding `value`: Expand of a scalar, with Shape(like) for unknown extents."""
        need(isinstance(value, bool | int | float), f"the fill value must be a number, got {value!r}")
        need(elem[0] == "f" or not isinstance(value, float) or float(value).is_integer(),
             f"cannot fill a tensor of {elem} with {value!r}")
        scalar = self.const(np.array(value, dtype=numpy_of(elem)))
        shape = static(size)
        if None in size:  # a `_like` factory of a tensor with unknown extents
            assert like is not None
            dims = self.host("Shape", [like], (len(shape),), "i64", hint="shape")
        else:
            dims = self.size_vector(size)
        out = self.host("Reshape" if shape == () else "Expand", [scalar, dims], shape, elem, hint=hint)
        self.owned.add(out)  # a new tensor, though Expand and Reshape are views elsewhere
        return out

    @staticmethod
    def size_arg(v: Any) -> list[int | SymInt]:
        dims = sizes(v, "the size")
        need(all(isinstance(d, SymInt) or d >= 0 for d in dims), f"invalid size {dims}")
        return dims

    @staticmethod
    def fill_elem(value: Any) -> str:
        """What `torch.full` infers from its fill value when no dtype is given."""
        return "i1" if isinstance(value, bool) else "i64" if isinstance(value, int) else "f32"

    @aten("empty", "size", *_FACTORY, ("memory_format", None),
          becomes=_BECOMES_FILL + "; zeros stand for its undefined contents")
    @aten("zeros", "size", *_FACTORY, becomes=_BECOMES_FILL)
    @aten("ones", "size", *_FACTORY, becomes=_BECOMES_FILL)
    @aten("full", "size", "fill_value", *_FACTORY, becomes=_BECOMES_FILL)
    @aten("zeros_like", "self", *_FACTORY, ("memory_format", None), becomes=_BECOMES_FILL)
    @aten("ones_like", "self", *_FACTORY, ("memory_format", None), becomes=_BECOMES_FILL)
    @aten("full_like", "self", "fill_value", *_FACTORY, ("memory_format", None), becomes=_BECOMES_FILL)
    @aten("new_zeros", "self", "size", *_FACTORY, becomes=_BECOMES_FILL)
    @aten("new_ones", "self", "size", *_FACTORY, becomes=_BECOMES_FILL)
    @aten("new_full", "self", "size", "fill_value", *_FACTORY, becomes=_BECOMES_FILL)
    def _factory(self, a: Args) -> Value:
        """zeros, ones and full; their `_like` forms (the shape and default type of `self`) and `new_` forms
        (a size, and the default type of `self`)."""
        op = a.op
        src = self.value(a["self"], "the model tensor") if "self" in a else None
        if "size" in a:
            shape = self.size_arg(a["size"])
        else:
            assert src is not None
            shape = list(self.shape(src))  # unknown extents: Shape(src) at run time
        v = a["fill_value"] if "fill_value" in a else _FILL[op]
        default = self.elem(src) if src is not None else self.fill_elem(v) if op == "full" else "f32"
        return self.filled(shape, v, self.dtype(a["dtype"], default), src if op.endswith("_like") else None, op)

    @aten("arange", becomes="a constant (host `Range` for a length known only at run time)", raw=True)
    def _arange(self, a: Args) -> Weight | Value:
        """arange(end), arange(start, end) or arange(start, end, step), with factory keywords."""
        args, kw = a["args"], dict(a["kwargs"])
        spec = list(args) + [kw.pop(k) for k in ("start", "end", "step") if k in kw]
        need(not any(isinstance(x, Value | Weight) for x in spec), "arange of a tensor is not supported")
        need(1 <= len(spec) <= 3 and all(is_number(x) or isinstance(x, SymInt) for x in spec),
             f"arange needs 1 to 3 numbers, got {spec!r}")
        start, end, step = (0, spec[0], 1) if len(spec) == 1 else (*spec, 1)[:3]
        need(step != 0, "arange step must be nonzero")
        floats = any(isinstance(x, float) for x in (start, end, step))
        elem = self.dtype(kw.get("dtype"), "f32" if floats else "i64")
        if any(isinstance(x, SymInt) for x in (start, end, step)):  # a length known at run time: ONNX Range
            bounds = [self.cast(x.value if isinstance(x, SymInt) else x, elem) for x in (start, end, step)]
            return self.host("Range", bounds, (None,), elem, hint="arange")
        values = np.arange(start, end, step, dtype=np.float64 if floats else np.int64)
        return self.constant(values.astype(numpy_of(elem)))

    def index_table(self, a: Args, pick: Any) -> Weight:
        row, col, offset = integer(a["row"], "row"), integer(a["col"], "col"), integer(a["offset"], "offset")
        need(row >= 0 and col >= 0, f"invalid size {row} x {col}")
        elem = self.dtype(a["dtype"], "i64")
        need(elem in ("i32", "i64"), "index tables must be int32 or int64")
        return self.constant(np.stack(pick(row, offset, col)).astype(numpy_of(elem)).reshape(2, -1))

    @aten("tril_indices", "row", "col", ("offset", 0), *_FACTORY, becomes="a constant")
    def _tril_indices(self, a: Args) -> Weight:
        return self.index_table(a, np.tril_indices)

    @aten("triu_indices", "row", "col", ("offset", 0), *_FACTORY, becomes="a constant")
    def _triu_indices(self, a: Args) -> Weight:
        return self.index_table(a, np.triu_indices)

    # -- sizes ----------------------------------------------------------------------------------

    def tensor_shape(self, x: Any) -> Shape | None:
        """The shape of a tensor argument, None for anything else."""
        if isinstance(x, Weight):
            return tuple(x.array.shape)
        return self.shape(x) if isinstance(x, Value) else None

    @aten("size", "self", ("dim", None), becomes="a number (a list without `dim`); computed at run time if dynamic")
    @aten("sym_size", "self", "dim", becomes="a number; computed at run time (`Shape`, `Gather`) if dynamic")
    def _size(self, a: Args) -> int | SymInt | list[int | SymInt]:
        x = self.known(a["self"])
        if x is not None:
            return list(x.shape) if a["dim"] is None else int(x.shape[dim(a["dim"], x.ndim)])
        v = self.value(a["self"], "the operand of size()")
        if a["dim"] is None:
            return [self.sym_dim(v, d) for d in range(len(self.shape(v)))]
        return self.sym_dim(v, dim(a["dim"], len(self.shape(v))))

    @aten("numel", "self", becomes="a number; computed at run time (`Shape`, `ReduceProd`) if dynamic")
    @aten("sym_numel", "self", becomes="a number; computed at run time (`Shape`, `ReduceProd`) if dynamic")
    def _numel(self, a: Args) -> int | SymInt:
        x = self.known(a["self"])
        if x is not None:
            return int(x.size)
        v = self.value(a["self"], "the operand of numel()")
        n = prod(self.shape(v))
        if n is not None:
            return n
        shape = self.host("Shape", [v], (len(self.shape(v)),), "i64", hint="shape")
        return SymInt(self.host("ReduceProd", [shape], (), "i64", {"keepdims": 0}, hint="numel"))

    @aten("item", "self", becomes="a number (a constant's); a size computed at run time (host `Reshape` to 0-d) "
          "for an integer tensor")
    def _item(self, a: Args) -> int | float | bool | SymInt:
        """The value of a one-element tensor.  torch.export turns it into an unbacked symbolic size
        (KeyedJaggedTensor reads its lengths this way), so an integer one becomes a run-time size."""
        known = self.known(a["self"])
        if known is not None:
            need(known.size == 1, f"item() of a tensor of {known.size} elements")
            return known.reshape(()).item()
        x = self.value(a["self"], "the operand of item()")
        need(prod(self.shape(x)) == 1, f"item() needs a tensor of one element, got {x.type}")
        need(self.elem(x) in ("i8", "i16", "i32", "i64"),
             f"item() of a tensor of {self.elem(x)} is supported only for integers (a size)")
        scalar = self.host("Reshape", [self.cast(x, "i64"), self.const([])], (), "i64", hint="item")
        return SymInt(scalar)

    @aten("scalar_tensor", "s", *_FACTORY, becomes="a constant, or host `Cast` of a size computed at run time")
    def _scalar_tensor(self, a: Args) -> Value:
        s = a["s"]
        if isinstance(s, SymInt):
            return self.cast(s.value, self.dtype(a["dtype"], "f32"))
        need(isinstance(s, bool | int | float), f"scalar_tensor needs a number, got {s!r}")
        return self.cast(s, self.dtype(a["dtype"], "f32"))

    def size_arith(self, op: str, x: Any, y: Any) -> int | SymInt:
        """x `op` y on sizes: a number when both are known, else a 0-d int64 host op."""
        for v in (x, y):
            need(isinstance(v, SymInt) or (isinstance(v, int) and not isinstance(v, bool)),
                 f"size arithmetic needs integers or sizes, got {v!r}")
        if not isinstance(x, SymInt) and not isinstance(y, SymInt):
            if op == "floordiv":
                need(y != 0, "integer division by zero")
            return int(_SIZE_FOLD[op](x, y))
        if op == "add" and x == 0:
            return y
        if op in ("add", "sub") and y == 0 or op in ("mul", "floordiv") and y == 1:
            return x
        xs = [v.value if isinstance(v, SymInt) else self.const(np.array(v, dtype=np.int64)) for v in (x, y)]
        # ONNX Div truncates, which is floor division for the non-negative values sizes are.
        return SymInt(self.host(_SIZE_ONNX[op], xs, (), "i64", hint=op))

    @aten("_operator.add", "a", "b", becomes="a number, or a size computed at run time (host `Add`)")
    @aten("_operator.sub", "a", "b", becomes="a number, or a size computed at run time (host `Sub`)")
    @aten("_operator.mul", "a", "b", becomes="a number, or a size computed at run time (host `Mul`)")
    @aten("_operator.floordiv", "a", "b",
          becomes="a number, or a size computed at run time (host `Div`; sizes are non-negative)")
    def _size_op(self, a: Args) -> int | SymInt:
        return self.size_arith(a.op.rsplit(".", 1)[1], a["a"], a["b"])

    @aten("_operator.eq", "a", "b", becomes="a bool, or host `Equal` of sizes (only `_assert_scalar` reads it)")
    @aten("_operator.ne", "a", "b", becomes="a bool, or host `Not` of `Equal` of sizes")
    @aten("_operator.lt", "a", "b", becomes="a bool, or host `Less` of sizes")
    @aten("_operator.le", "a", "b", becomes="a bool, or host `LessOrEqual` of sizes")
    @aten("_operator.gt", "a", "b", becomes="a bool, or host `Greater` of sizes")
    @aten("_operator.ge", "a", "b", becomes="a bool, or host `GreaterOrEqual` of sizes")
    def _size_compare(self, a: Args) -> bool | SymBool:
        op = a.op.rsplit(".", 1)[1]
        x, y = a["a"], a["b"]
        for v in (x, y):
            need(isinstance(v, SymInt) or (isinstance(v, int) and not isinstance(v, bool)),
                 f"size comparisons need integers or sizes, got {v!r}")
        if not isinstance(x, SymInt) and not isinstance(y, SymInt):
            return bool(_SIZE_FOLD[op](x, y))
        xs = [v.value if isinstance(v, SymInt) else self.const(np.array(v, dtype=np.int64)) for v in (x, y)]
        out = self.host(_SIZE_ONNX["eq" if op == "ne" else op], xs, (), "i1", hint=op)
        return SymBool(self.host("Not", [out], (), "i1", hint="ne") if op == "ne" else out)

    @aten("_assert_scalar", "self", "assert_msg",
          becomes="nothing for a run-time condition (a guard torch.export adds; not checked); "
          "an error when it is known to fail")
    def _assert_scalar(self, a: Args) -> None:
        """torch.export guards the sizes it reads with item() (`u0 >= 0`, `u0 + u1 == s0`); Ember does
        not check a guard at run time (its comparison is pruned unused), as the model it came from
        holds for inputs torch accepts.  A guard on known sizes is checked here."""
        cond = a["self"]
        need(isinstance(cond, SymBool | bool | int), f"_assert_scalar needs a condition, got {cond!r}")
        need(isinstance(cond, SymBool) or bool(cond), f"the model's assertion fails: {a['assert_msg']}")
        return None

    @aten("dim", "self", becomes="a number")
    def _dim(self, a: Args) -> int:
        return self.rank_of(a["self"])

    # -- identities -----------------------------------------------------------------------------

    @aten("contiguous", "self", ("memory_format", None), becomes="nothing (the operand)")
    @aten("clone", "self", ("memory_format", None), becomes="nothing (the operand)")
    @aten("detach", "self", becomes="nothing (the operand)")
    @aten("detach_", "self", becomes="nothing (the operand)")
    @aten("alias", "self", becomes="nothing (the operand)")
    @aten("lift_fresh_copy", "self", becomes="nothing (the operand)")
    def _same(self, a: Args) -> Any:
        x = a["self"]
        return x if isinstance(x, Weight) else self.value(x, "the operand")

    @aten("dropout", "input", "p", "train", becomes="nothing in eval mode; refused in training mode")
    @aten("feature_dropout", "input", "p", "train", becomes="nothing in eval mode; refused in training mode")
    def _dropout(self, a: Args) -> Value:
        need(not a["train"], "dropout in training mode is random; trace or export the model in eval mode")
        return self.value(a["input"], "the input")

    @aten("_assert_tensor_metadata", becomes="nothing (a check torch.export leaves in the graph)", raw=True)
    def _assert_tensor_metadata(self, a: Args) -> None:
        return None
