"""Embedding lookups and row scatters: the operators that become `emb` ops.

`embedding` and row gathers (`index_select`, `x[idx]`, `take`, a 1-D `gather`) become emb.gather,
`embedding_bag` emb.bag with PyTorch's semantics (an empty bag gives 0 in every mode), PyTorch's
row-wise quantized bags (`quantized::embedding_bag_{byte,4bit}_rowwise_offsets`) emb.qbag, and row
scatters (`scatter_add`, `scatter_reduce`, `index_add`, also in place) emb.scatter_rows.
`embedding_renorm_` (nn.Embedding / EmbeddingBag with `max_norm`) rescales, in the table, the rows
the lookup will read, as PyTorch does before the lookup; the lookup then reads the updated table.
Lookups that are not of rows (other axes, several index tensors) stay host Gather / GatherND.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...dialects.emb import QBAG_BITS, qbag_dim
from ...ir.core import Value
from .base import Args, aten
from .dense import DenseOps
from .values import FLOATS, ONNX_TYPE, Shape, Unusable, Weight, broadcast, dim, need, numpy_of

_BAG = ("weight", "indices", "offsets", ("scale_grad_by_freq", False), ("mode", 0), ("sparse", False),
        ("per_sample_weights", None), ("include_last_offset", False), ("padding_idx", None))
_BAG_BECOMES = "`emb.bag` (1-D indices with offsets; 2-D indices as bags of one length, with constant offsets)"
_QBAG = ("weight", "indices", ("offsets", None), ("scale_grad_by_freq", False), ("mode", 0), ("pruned_weights", False),
         ("per_sample_weights", None), ("compressed_indices_mapping", None), ("include_last_offset", False))
_QBAG_BECOMES = ("`emb.qbag` with bits = {bits}, always a sum (optionally weighted), as the operator computes "
                 "(1-D indices with offsets; 2-D indices as bags of one length); pruned tables are refused")
_SCATTER_REDUCE = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}
_RENORM_EPS = 1e-7  # PyTorch's embedding_renorm_: scale = max_norm / (norm + 1e-7)


class EmbeddingOps(DenseOps):
    """Embeddings, bags, row gathers and row scatters."""

    # -- lookups --------------------------------------------------------------------------------

    @aten("embedding", "weight", "indices", ("padding_idx", -1), ("scale_grad_by_freq", False), ("sparse", False),
          becomes="`emb.gather`")
    def _embedding(self, a: Args) -> Value:
        idx = self.tensor_arg(a["indices"], "the indices", "int")
        w = self.tensor_arg(a["weight"], "the embedding table", "float")
        need(len(self.shape(w)) >= 1, "the embedding table must have rank >= 1")
        return self.gather_rows(a["weight"], idx, "embedding")

    def gather_rows(self, table: Any, idx: Value, hint: str, wrap: bool = False) -> Value:
        """table[idx] along dimension 0: `emb.gather` for rows of floats, as the ONNX frontend raises
        Gather, so message passing and block gathers stream; a host Gather for anything else.

        `wrap`: negative indices count from the end (x[idx]); embedding and index_select refuse them."""
        x = self.value(table, "the indexed tensor")
        s = self.shape(x)
        need(len(s) >= 1, "cannot index a 0-d tensor")
        shape = self.shape(idx) + s[1:]
        rows = isinstance(table, Weight) or (len(s) >= 2 and None not in s[1:]) or x in self.renormed.values()
        if self.elem(x) not in FLOATS or not rows:
            return self.host("Gather", [x, idx], shape, self.elem(x), {"axis": 0}, hint=hint)
        return self.emb("emb.gather", [x, idx], shape, self.elem(x), {"negative": "wrap"} if wrap else {}, hint)

    @aten("take", "self", "index", becomes="`emb.gather` of the flattened tensor (negative indices wrap)")
    def _take(self, a: Args) -> Value:
        idx = self.tensor_arg(a["index"], "the index", "int")
        x = self.value(a["self"], "the tensor")
        flat = self.reshape(x, [-1]) if len(self.shape(x)) != 1 else x
        need(self.shape(flat)[0] is not None, "take from a tensor of unknown size")
        if self.elem(x) not in FLOATS:
            return self.host("Gather", [flat, idx], self.shape(idx), self.elem(x), {"axis": 0}, hint="take")
        return self.emb("emb.gather", [flat, idx], self.shape(idx), self.elem(x), {"negative": "wrap"}, "take")

    @aten("embedding_renorm_", "self", "indices", "max_norm", "norm_type",
          becomes="host `Gather` of the rows looked up, their norms, `Where` above max_norm, `Mul`, `ScatterND` "
                  "into the table, which later lookups read")
    def _embedding_renorm_(self, a: Args) -> Value:
        """Rows of `self` that `indices` names and whose p-norm exceeds max_norm are scaled by
        max_norm / (norm + 1e-7), in the table: every later use of the weight reads the new table."""
        table = self.tensor_arg(a["self"], "the embedding table", "float", 2)
        need(any(table is p for p in self.params.values()) or table in self.renormed.values(),
             "embedding_renorm_ of a tensor that is not a weight")
        old = next((p for p in self.params.values() if self.renormed.get(p, p) is table), table)
        idx = self.tensor_arg(a["indices"], "the indices", "int")
        max_norm, p = float(self.number(a["max_norm"], "max_norm")), float(self.number(a["norm_type"], "norm_type"))
        need(p > 0, f"norm_type must be positive, got {p}")
        elem, (_, width) = self.elem(table), self.shape(table)
        flat = self.reshape(idx, [-1]) if len(self.shape(idx)) != 1 else idx
        n = self.shape(flat)[0]
        rows = self.host("Gather", [table, flat], (n, width), elem, {"axis": 0}, hint="renorm_rows")
        keep = {"axes": [1], "keepdims": 1}
        if p == 2:
            norm = self.host("ReduceL2", [rows], (n, 1), elem, keep, hint="renorm_norm")
        elif p == 1:
            norm = self.host("ReduceL1", [rows], (n, 1), elem, keep, hint="renorm_norm")
        elif p == float("inf"):
            norm = self.host("ReduceMax", [self.unary("Abs", rows, "renorm")], (n, 1), elem, keep, hint="renorm_norm")
        else:
            powered = self.elementwise("Pow", [self.unary("Abs", rows, "renorm"), p], elem, hint="renorm")
            total = self.host("ReduceSum", [powered, self.const([1])], (n, 1), elem, {"keepdims": 1}, hint="renorm")
            norm = self.elementwise("Pow", [total, 1 / p], elem, hint="renorm_norm")
        scale = self.elementwise("Div", [max_norm, self.elementwise("Add", [norm, _RENORM_EPS], elem)], elem,
                                 hint="renorm_scale")
        over = self.elementwise("Greater", [norm, max_norm], elem, "i1", hint="renorm_over")
        factor = self.host("Where", [over, scale, self.cast(1.0, elem)], (n, 1), elem, hint="renorm_factor")
        scaled = self.elementwise("Mul", [rows, factor], elem, hint="renorm_rows")
        column = self.host("Unsqueeze", [self.cast(flat, "i64"), self.const([1])], (n, 1), "i64", hint="renorm_index")
        # repeated indices write the same row twice: ScatterND's order does not matter
        new = self.host("ScatterND", [table, column, scaled], self.shape(table), elem, hint="renormed")
        self.renormed[old] = new
        return new

    @aten("index_select", "self", "dim", "index", becomes="`emb.gather` (dim 0, rows of floats) or host `Gather`")
    def _index_select(self, a: Args) -> Value:
        x = self.value(a["self"], "the operand")
        idx = self.tensor_arg(a["index"], "the index", "int")
        need(len(self.shape(idx)) <= 1, "index_select needs a 1-D index")
        if not self.shape(idx):  # PyTorch keeps the dimension for a 0-d index
            idx = self.reshape(idx, [1])
        s = self.shape(x)
        d = dim(a["dim"], len(s))
        if d == 0:
            return self.gather_rows(a["self"], idx, "index_select")
        shape = s[:d] + self.shape(idx) + s[d + 1:]
        return self.host("Gather", [x, idx], shape, self.elem(x), {"axis": d}, hint="index_select")

    @aten("gather", "self", "dim", "index", ("sparse_grad", False),
          becomes="`emb.gather` (1-D, dim 0) or host `GatherElements`")
    def _gather(self, a: Args) -> Value:
        x = self.value(a["self"], "the operand")
        idx = self.tensor_arg(a["index"], "the index", "int")
        s, i = self.shape(x), self.shape(idx)
        need(len(s) == len(i) or (not s and len(i) <= 1), f"gather of {x.type} with an index of {idx.type}")
        d = dim(a["dim"], max(1, len(s)))
        need(all(n is None or m is None or n <= m for k, (n, m) in enumerate(zip(i, s)) if k != d),
             f"gather index {idx.type} is larger than {x.type} outside dimension {d}")
        if len(s) == 1:  # per-row values looked up by row number (DLRM's weighted pooling)
            return self.gather_rows(a["self"], idx, "gather")
        return self.host("GatherElements", [x, idx], i, self.elem(x), {"axis": d}, hint="gather")

    @aten("index", "self", "indices",
          becomes="`emb.gather` (one index, first dimension) or host `Gather` / `GatherND` (index tensors broadcast)")
    def _index(self, a: Args) -> Value:
        """x[..., i, j, ...] with integer index tensors: Gather for one, GatherND for several."""
        x = self.value(a["self"], "the indexed tensor")
        s = self.shape(x)
        idx = a["indices"]
        need(isinstance(idx, list | tuple) and len(idx) <= len(s), "index needs a list of at most rank indices")
        ks = [k for k, v in enumerate(idx) if v is not None]
        if not ks:
            return x
        need(all(self.type_of(idx[k])[0] != "i1" for k in ks),
             "indexing with a boolean mask (its result has a size that depends on the data)")
        if all(isinstance(idx[k], Weight) for k in ks) and len(ks) > 1:  # constant tables: stack them here
            arrays = [idx[k].array for k in ks]
            need(all(a.dtype.kind in "iu" for a in arrays), "index tensors must hold integers")
            try:
                arrays = np.broadcast_arrays(*arrays)
            except ValueError:
                need(False, f"index tensors of shapes {[list(a.shape) for a in arrays]} do not broadcast")
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
        vals = [self.cast(v, "i64") for v in vals]
        bshape = self.shape(vals[0])
        for v in vals[1:]:
            bshape = broadcast(bshape, self.shape(v))
        if None not in bshape:
            cols = [self.expand(v, [int(d or 0) for d in bshape]) for v in vals]
        else:  # extents known at run time: ONNX Expand to Shape(y) broadcasts both ways
            joint = vals[0]
            for v in vals[1:]:
                joint = self.expanded(joint, self.host("Shape", [v], (len(self.shape(v)),), "i64"),
                                      broadcast(self.shape(joint), self.shape(v)))
            dims = self.host("Shape", [joint], (len(bshape),), "i64", hint="shape")
            cols = [self.expanded(v, dims, bshape) for v in vals]
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

    # -- bags -----------------------------------------------------------------------------------

    @staticmethod
    def _padding_row(pad: Any, rows: int | None, private: bool) -> int | None:
        """The table row a bag leaves out, or None, as PyTorch reads `padding_idx`.

        `embedding_bag` takes an optional int in [-rows, rows) and wraps a negative one; the private
        `_embedding_bag` ops take an int where anything outside [0, rows) means no padding."""
        if pad is None:
            return None
        need(isinstance(pad, int) and not isinstance(pad, bool), f"padding_idx must be an integer, got {pad!r}")
        if private:
            return None if pad < 0 or (rows is not None and pad >= rows) else pad
        if rows is None:
            need(pad >= 0, "a negative padding_idx needs a table with a static number of rows")
            return pad
        need(-rows <= pad < rows, f"padding_idx must be within the number of embeddings, {-rows} through "
             f"{rows - 1}, but got {pad}")
        return pad + rows if pad < 0 else pad

    @aten("embedding_bag", *_BAG, becomes=_BAG_BECOMES)
    @aten("_embedding_bag", *_BAG, becomes=_BAG_BECOMES)
    @aten("_embedding_bag_forward_only", *_BAG, becomes=_BAG_BECOMES)
    def _embedding_bag(self, a: Args) -> tuple[Any, ...]:
        private = a.op != "embedding_bag"  # padding_idx: an int, negative for none
        table = self.tensor_arg(a["weight"], "the embedding table", "float", 2)
        mode = a["mode"]
        need(mode in (0, 1, 2) and not isinstance(mode, bool), f"unknown embedding_bag mode {mode!r}")
        pad = self._padding_row(a["padding_idx"], self.shape(table)[0], private)
        idx = self.tensor_arg(a["indices"], "the indices", "int")
        ishape = self.shape(idx)
        w = a["per_sample_weights"]
        weights = None if w is None else self.tensor_arg(w, "the per-sample weights", "float")
        need(weights is None or mode == 0, "per-sample weights need mode sum")
        bags: int | None
        if len(ishape) == 2:  # fixed-length bags, whichever include_last_offset says
            idx, weights, offsets, bags = self.fixed_length_bags(idx, weights, a["offsets"], False)
        else:
            need(len(ishape) == 1, f"the indices must be 1-D or 2-D, got {idx.type}")
            offsets, bags = self.bag_offsets(a["offsets"], idx, bool(a["include_last_offset"]))
        if weights is not None:
            need(self.elem(weights) == self.elem(table), "the per-sample weights must have the table's type")
        operands = [table, idx, offsets] + ([weights] if weights is not None else [])
        attrs: dict[str, Any] = {"mode": ("sum", "mean", "max")[mode], "empty": "zero"}
        if pad is not None:
            attrs["padding_idx"] = pad
        out = self.emb("emb.bag", operands, (bags, self.shape(table)[1]), self.elem(table), attrs, "embedding_bag")
        return (out, Unusable("offset2bag"), Unusable("bag_size"), Unusable("max_indices"))

    @aten("quantized.embedding_bag_byte_rowwise_offsets", *_QBAG, becomes=_QBAG_BECOMES.format(bits=8))
    @aten("quantized.embedding_bag_4bit_rowwise_offsets", *_QBAG, becomes=_QBAG_BECOMES.format(bits=4))
    def _quantized_bag(self, a: Args) -> Value:
        """PyTorch's bags over a table prepacked row-wise (FBGEMM's layout, which emb.qbag reads as it is).

        The operator always sums (its `mode` is ignored) and scale_grad_by_freq only matters for gradients."""
        bits = 8 if "_byte_" in a.op else 4
        table = self.tensor_arg(a["weight"], "the quantized table", rank=2)
        prepack = a.op.replace("quantized.", "quantized::").replace("_rowwise_offsets", "_prepack")
        need(self.elem(table) == "u8", f"the quantized table must hold bytes (uint8, as {prepack} makes them), "
             f"got {table.type}")
        width, extra = self.shape(table)[1], QBAG_BITS[bits][1]
        need(width is not None and width > extra, f"a {bits}-bit quantized row needs more than the {extra} bytes of "
             f"its scale and bias, got {table.type}")
        assert width is not None
        need(not a["pruned_weights"], "pruned tables (pruned_weights=True, with compressed_indices_mapping) are not "
             "supported")
        idx = self.tensor_arg(a["indices"], "the indices", "int")
        w = a["per_sample_weights"]
        weights = None if w is None else self.tensor_arg(w, "the per-sample weights")
        if weights is not None:
            need(self.elem(weights) == "f32", f"the per-sample weights must hold float32, got {weights.type}")
        last = bool(a["include_last_offset"])
        bags: int | None
        if len(self.shape(idx)) == 2:
            idx, weights, offsets, bags = self.fixed_length_bags(idx, weights, a["offsets"], last)
        else:
            need(len(self.shape(idx)) == 1, f"the indices must be 1-D or 2-D, got {idx.type}")
            need(a["offsets"] is not None, "1-D indices need offsets")
            offsets, bags = self.bag_offsets(a["offsets"], idx, last)
        operands = [table, idx, offsets] + ([weights] if weights is not None else [])
        return self.emb("emb.qbag", operands, (bags, qbag_dim(bits, width)), "f32", {"bits": bits, "mode": "sum"},
                        "quantized_bag")

    def fixed_length_bags(self, idx: Value, weights: Value | None, given: Any,
                          last: bool) -> tuple[Value, Value | None, Value, int]:
        """2-D indices as one bag per row: the flattened indices and weights, and constant offsets (one more than
        the bags) from the static shape.  With `last` (the quantized bags), the row starts are taken as offsets
        that include the last one, as PyTorch's quantized operators do: the final row is left out."""
        need(given is None, "2-D indices take no offsets")
        n, length = self.shape(idx)
        need(n is not None and length is not None, "2-D indices need a static shape")
        assert n is not None and length is not None
        flat = self.reshape(idx, [-1])
        if weights is not None:
            weights = self.reshape(weights, [-1])
        bags = max(n - 1, 0) if last else n
        offsets = self.const((np.arange(bags + 1) * length).astype(numpy_of(self.elem(idx))))
        return flat, weights, offsets, bags

    def bag_offsets(self, given: Any, idx: Value, last: bool) -> tuple[Value, int | None]:
        """emb.bag's offsets (one more than there are bags) and the number of bags, from PyTorch's."""
        known = self.known(given)
        n_idx = self.shape(idx)[0]
        if known is not None and not last and n_idx is not None and known.ndim == 1:
            # offsets computed from sizes (2-D indices flattened by the model): append len(indices) here
            return self.const(np.append(known, n_idx).astype(known.dtype)), known.shape[0]
        off = self.tensor_arg(given, "the offsets", "int", 1)
        olen = self.shape(off)[0]
        if last:
            return off, None if olen is None else olen - 1
        # PyTorch's bags end at len(indices): append it, as emb.bag wants
        count = self.host("Shape", [idx], (1,), "i64", hint="num_indices")
        if self.elem(off) != "i64":
            count = self.host("Cast", [count], (1,), self.elem(off), {"to": ONNX_TYPE[self.elem(off)]},
                              hint="num_indices")
        offsets = self.host("Concat", [off, count], (None if olen is None else olen + 1,), self.elem(off),
                            {"axis": 0}, hint="offsets")
        return offsets, olen

    # -- scatters -------------------------------------------------------------------------------

    def scatter_rows(self, data: Value, rows: Value, updates: Value, reduction: str) -> Value:
        return self.emb("emb.scatter_rows", [data, rows, updates], self.shape(data), self.elem(data),
                        {"reduction": reduction}, "scatter")

    def scatter(self, a: Args, reduction: str) -> Value:
        """scatter_add / scatter_reduce: out[index[i][j]][j] = reduce(out[...], src[i][j]) (dim 0, 2-D).

        When the index is a 1-D index expanded over the columns, every update is a whole row and the
        scatter is `emb.scatter_rows`; otherwise a host ScatterElements over the index's extent."""
        data = self.value(a["self"], "the tensor scattered into")
        idx = self.tensor_arg(a["index"], "the index", "int")
        src = self.value(a["src"], "the source")
        ds, is_, ss = self.shape(data), self.shape(idx), self.shape(src)
        need(len(ds) == len(is_) == len(ss) >= 1, "self, index and src must have the same number of dimensions")
        need(self.elem(src) == self.elem(data), f"scatter of {src.type} into {data.type}")
        d = dim(a["dim"], len(ds))
        rows = self.rows_of.get(idx)
        if (rows is not None and d == 0 and len(ds) == 2 and self.elem(data) in FLOATS and is_ == ss
                and None not in is_ and is_[1] == ds[1]):
            return self.scatter_rows(data, rows, src, reduction)
        need(reduction in ("add", "mul"), f"a scatter with reduction {reduction} of anything but whole rows "
             "needs ONNX opset 18 (Ember's host ops are opset 17)")
        need(None not in is_ and None not in ss, "scatter with indices of unknown extent")
        if is_ != ss:  # only the index's extent of src takes part
            need(all(i is not None and s is not None and i <= s for i, s in zip(is_, ss)),
                 f"index {idx.type} is larger than src {src.type}")
            r = len(is_)
            src = self.host("Slice", [src, self.const([0] * r), self.const([int(i or 0) for i in is_]),
                                      self.const(list(range(r)))], is_, self.elem(src), hint="src")
        return self.host("ScatterElements", [data, idx, src], ds, self.elem(data),
                         {"axis": d, "reduction": reduction}, hint="scatter")

    @aten("scatter_add", "self", "dim", "index", "src",
          becomes="`emb.scatter_rows` (whole rows) or host `ScatterElements`")
    def _scatter_add(self, a: Args) -> Value:
        return self.scatter(a, "add")

    @aten("scatter_reduce", "self", "dim", "index", "src", "reduce", ("include_self", True),
          becomes="`emb.scatter_rows` (whole rows; sum, prod, amax, amin) or host `ScatterElements` (sum, prod)")
    def _scatter_reduce(self, a: Args) -> Value:
        reduce = a["reduce"]
        need(reduce in _SCATTER_REDUCE, f"scatter_reduce with reduce={reduce!r} is not supported "
             f"(Ember translates {', '.join(_SCATTER_REDUCE)})")
        need(a["include_self"] is True, "scatter_reduce with include_self=False is not supported")
        return self.scatter(a, _SCATTER_REDUCE[reduce])

    @aten("index_add", "self", "dim", "index", "source", ("alpha", 1),
          becomes="`emb.scatter_rows` (dim 0 of 2-D floats) or host `ScatterND`")
    def _index_add(self, a: Args) -> Value:
        """out[index[i]] += alpha * source[i] along `dim`: emb.scatter_rows for rows, else a host ScatterND."""
        data = self.value(a["self"], "the tensor added into")
        idx = self.tensor_arg(a["index"], "the index", "int")
        src = self.value(a["source"], "the source")
        ds, ss = self.shape(data), self.shape(src)
        need(len(self.shape(idx)) <= 1, "index_add needs a 1-D index")
        if not self.shape(idx):
            idx = self.reshape(idx, [1])
        need(len(ds) >= 1 and len(ss) == len(ds), f"index_add of {src.type} into {data.type}")
        need(self.elem(src) == self.elem(data), f"index_add of {src.type} into {data.type}")
        d = dim(a["dim"], len(ds))
        need(all(x is None or y is None or x == y for k, (x, y) in enumerate(zip(ds, ss)) if k != d),
             f"index_add of {src.type} into {data.type} along dimension {d}")
        src = self.scaled(src, a["alpha"], self.elem(src))
        if d == 0 and len(ds) == 2 and self.elem(data) in FLOATS and ds[1] is not None:
            return self.scatter_rows(data, idx, src, "add")
        perm = [d, *(k for k in range(len(ds)) if k != d)]
        inv = [perm.index(k) for k in range(len(ds))]
        front = self.transpose(data, perm)
        col = self.unsqueeze(idx, 1)
        got = self.host("ScatterND", [front, col, self.transpose(src, perm)], self.shape(front), self.elem(data),
                        {"reduction": "add"}, hint="index_add")
        return self.transpose(got, inv)
