"""Level `emb`: embedding operations on tensors, as raised from the model by a frontend.

    %y = emb.gather %table, %idx : tensor<4x3x8xf32>
        y[i..., :] = table[idx[i...], :]                      (nn.Embedding)
        With `negative = "wrap"`, an index k in [-rows, 0) names row rows + k, as ONNX Gather and
        PyTorch's x[idx] count from the end; without it (nn.Embedding, index_select) an index is a
        row number, and anything outside [0, rows) is out of range either way.
    %y = emb.bag %table, %indices, %offsets [, %weights] {mode = "sum", empty = "zero"} : tensor<?x8xf32>
        bag b covers indices[offsets[b] : offsets[b+1]], so `offsets` has one more entry than there
        are bags (PyTorch's include_last_offset form; frontends build it); rows are scaled by
        `weights` when given, then reduced by `mode` (sum, mean, max).  An empty bag gives 0 when
        `empty = "zero"`, or the reduction's identity when `empty = "identity"` (0 for sum and mean,
        -inf for max) — the two exporters disagree, and each model keeps its own meaning.
        An optional `padding_idx = k` leaves out every lookup of row k, from the reduction and from
        the count a mean divides by (a bag of padding only is empty), as PyTorch does.
    %y = emb.qbag %table, %indices, %offsets [, %weights] {bits = 8, mode = "sum"} : tensor<?x64xf32>
        a bag over a row-wise quantized table in FBGEMM's layout, tensor<NxWxu8>: row r holds its D codes,
        one byte each (bits = 8) or two to a byte with the first in the low nibble (bits = 4), then its
        scale and bias, float32 for 8 bits (W = D + 8) or float16 for 4 bits (W = D/2 + 4).  Element d of
        row r is scale_r * q_rd + bias_r; a bag accumulates in float32 as FBGEMM does, lookup by lookup:
        acc = fma(scale * w, q, acc + bias * w) (w = 1 without weights), and a mean multiplies by
        1 / length (rounded to float32); an empty bag gives 0.  Modes sum and mean, as FBGEMM has.
    %y = emb.ttbag %g0, %g1, %g2, %indices, %offsets [, %weights] {cores = 3, mode = "sum", rows = N} : tensor<?xDxf32>
        a bag over a table stored as a tensor train (TT-Rec; FBTT-Embedding's layout): `cores` = n (2 to 4)
        float32 cores, core k a tensor<p_k x R_k x q_k x R_k+1> with R_0 = R_n = 1 (the memory of FBTT's
        tt_cores[k], [p_k, R_k q_k R_k+1]), standing for a table of N <= p_0 ... p_n-1 rows of
        D = q_0 ... q_n-1 elements.  Row i has digits i_k, the first the most significant
        (i = sum_k i_k p_k+1 ... p_n-1), element d has digits j_k the same way over q, and
        row[i][d] = G_0[i_0, 0, j_0, :] . G_1[i_1, :, j_1, :] . ... . G_n-1[i_n-1, :, j_n-1, 0];
        the bag sums its rows, each times its weight (weights need mode sum) or, for a mean, times 1 / length
        rounded to float32 as FBGEMM's means do; an empty bag gives 0.  An index in [N, p_0 ... p_n-1) reads
        the row the train holds there, as FBTT's kernels do (they check no index); a negative index, or one
        from the product up, is out of range, and the error names the core whose digit is.
    %y = emb.robe %array, %indices, %offsets [, %weights] {block = Z, mode = "sum", prime = P, hash = [B, C, D],
                  sign = [B', C', D']} : tensor<?xDxf32>
        a bag over ROBE's random offset block embedding (Desai et al., MLSys 2022) as Hetu's robe kernels compute
        it: every row is read from one shared float32 array M, tensor<Sxf32>, in D / Z blocks of Z elements.
        Element e = c Z + o of row x is s * M[(B x + C c + D + o) mod P mod S] with the sign
        s = 2 ((B' x + C' e + D') mod P mod 2) - 1: block c starts at a universal hash of (x, c), its
        elements follow one another and wrap around the array.  Integers are 64-bit, the modulo is floor's.
        The bag sums its rows (times the weights, which need mode sum) or averages them; an empty bag gives 0.
    %y = emb.dhe %slope, %bias, %prime, %w1, %b1 [, %w2, %b2 ...], %indices, %offsets [, %weights]
                 {buckets = m, layers = L, mode = "sum"} : tensor<?xDxf32>
        a bag over Deep Hash Embeddings (Kang et al., KDD 2021) as Hetu's learn_hash kernel encodes them: no table;
        row x is an MLP applied to k hashes of x.  Hash i is h_i = (slope_i x + bias_i) mod prime_i mod m (64-bit
        integers, floor modulo; slope, bias, prime: tensor<kxi64>), made uniform in [-1, 1] in float32 as
        2 (h_i / (m - 1)) - 1; then L linear layers, w_l: tensor<out x in x f32> and b_l: tensor<out x f32> as
        torch's nn.Linear holds them (in_1 = k, out_L = D), each but the last followed by ReLU.  The bag sums its
        rows (times the weights, which need mode sum) or, for a mean, times 1 / length in float32; an empty bag
        gives 0.
    %y = emb.scatter_rows %data, %index, %updates {reduction = "add"} : tensor<12x8xf32>
        y = data, then y[index[e], :] = reduction(y[index[e], :], updates[e, :]) for every e in order
        (message passing: scatter_add / index_add; reduction add, mul, max or min).
"""

from __future__ import annotations

import math

from ..ir.core import Op, check, define
from ..ir.types import ScalarType, ShapedType

MODES = ("sum", "mean", "max")
QBAG_MODES = ("sum", "mean")
QBAG_BITS = {8: ("f32", 8), 4: ("f16", 4)}  # bits -> the type of the row's scale and bias, and their bytes
TTBAG_MODES = ("sum", "mean")
TT_CORES = (2, 3, 4)
ROBE_MODES = ("sum", "mean")
DHE_MODES = ("sum", "mean")
DHE_LAYERS = (1, 2, 3)
REDUCTIONS = ("add", "mul", "max", "min")
EMPTY = ("zero", "identity")


def _shaped(op: Op, i: int, what: str, rank: int | None = None, kind: str = "int") -> ShapedType:
    t = op.operands[i].type
    check(isinstance(t, ShapedType) and t.kind == "tensor", op, f"{what} must be a tensor, got {t}")
    assert isinstance(t, ShapedType)
    if rank is not None:
        check(t.rank == rank, op, f"{what} must have rank {rank}, got {t}")
    if kind == "int":
        check(t.elem.name in ("i32", "i64"), op, f"{what} must hold i32 or i64, got {t.elem}")
    else:
        check(t.elem.is_float, op, f"{what} must hold floats, got {t.elem}")
    return t


@define("emb.gather", operands=2, results=1)
def _gather(op: Op) -> None:
    table = _shaped(op, 0, "table", kind="float")
    idx = _shaped(op, 1, "indices")
    out = op.result.type
    check(table.rank is not None and table.rank >= 1 and idx.shape is not None, op, "needs ranked operands")
    assert table.shape is not None and idx.shape is not None
    want = ShapedType("tensor", idx.shape + table.shape[1:], table.elem)
    check(isinstance(out, ShapedType) and _compatible(out, want), op, f"result must be {want}, got {out}")
    check(op.attrs.get("negative", "wrap") == "wrap", op, 'negative must be "wrap" when given')


@define("emb.bag", operands=(3, 4), results=1, attrs=("mode", "empty"))
def _bag(op: Op) -> None:
    table = _shaped(op, 0, "table", 2, kind="float")
    idx = _shaped(op, 1, "indices", 1)
    _shaped(op, 2, "offsets", 1)
    check(op.attrs["mode"] in MODES, op, f"mode must be one of {', '.join(MODES)}")
    check(op.attrs["empty"] in EMPTY, op, f"empty must be one of {', '.join(EMPTY)}")
    if "padding_idx" in op.attrs:
        check(isinstance(op.attrs["padding_idx"], int) and not isinstance(op.attrs["padding_idx"], bool), op,
              "padding_idx must be an integer")
    if len(op.operands) == 4:
        w = _shaped(op, 3, "weights", 1, kind="float")
        check(op.attrs["mode"] == "sum", op, "per-sample weights need mode \"sum\"")
        check(_dims_agree(w.shape, idx.shape), op, "weights and indices must have the same length")
    assert table.shape is not None
    want = ShapedType("tensor", (None, table.shape[1]), table.elem)
    check(isinstance(op.result.type, ShapedType) and _compatible(op.result.type, want), op,
          f"result must be {want}, got {op.result.type}")


def qbag_dim(bits: int, row_bytes: int) -> int:
    """The embedding width D of a quantized row of `row_bytes` bytes (codes, then scale and bias)."""
    codes = row_bytes - QBAG_BITS[bits][1]
    return codes * (8 // bits)


@define("emb.qbag", operands=(3, 4), results=1, attrs=("bits", "mode"))
def _qbag(op: Op) -> None:
    table = op.operands[0].type
    check(isinstance(table, ShapedType) and table.kind == "tensor" and table.rank == 2 and table.elem.name == "u8",
          op, f"a quantized table must be a rank-2 tensor of bytes (u8), got {table}")
    _shaped(op, 1, "indices", 1)
    _shaped(op, 2, "offsets", 1)
    bits, mode = op.attrs["bits"], op.attrs["mode"]
    check(isinstance(bits, int) and not isinstance(bits, bool) and bits in QBAG_BITS, op, "bits must be 8 or 4")
    check(mode in QBAG_MODES, op, f"mode must be one of {', '.join(QBAG_MODES)}")
    if len(op.operands) == 4:
        w = _shaped(op, 3, "weights", 1, kind="float")
        check(mode == "sum", op, "per-sample weights need mode \"sum\"")
        check(w.elem.name == "f32", op, "weights must be f32, as FBGEMM's are")
    assert isinstance(table, ShapedType) and table.shape is not None
    width = table.shape[1]
    check(width is not None and width > QBAG_BITS[bits][1], op,
          f"a {bits}-bit row needs more than the {QBAG_BITS[bits][1]} bytes of its scale and bias, got {width}")
    assert width is not None
    want = ShapedType("tensor", (None, qbag_dim(bits, width)), ScalarType("f32"))
    check(isinstance(op.result.type, ShapedType) and _compatible(op.result.type, want), op,
          f"result must be {want}, got {op.result.type}")


def tt_shapes(cores: list[tuple[int | None, ...]]) -> str | None:
    """Why shapes of TT cores do not chain (each rank-4, R_0 = R_n = 1, the ranks of neighbours equal), or None."""
    for k, shape in enumerate(cores):
        if len(shape) != 4 or any(not isinstance(d, int) or d < 1 for d in shape):
            return f"core {k} must be a static p x R x q x R' shape of positive sizes, got {list(shape)}"
        if k == 0 and shape[1] != 1:
            return f"core 0 must have rank R_0 = 1, got {shape[1]}"
        if k > 0 and shape[1] != cores[k - 1][3]:
            return f"core {k}'s rank R_{k} = {shape[1]} differs from core {k - 1}'s R_{k} = {cores[k - 1][3]}"
    if cores and cores[-1][3] != 1:
        return f"core {len(cores) - 1} must end with rank 1, got {cores[-1][3]}"
    return None


@define("emb.ttbag", operands=(4, 7), results=1, attrs=("cores", "mode", "rows"))
def _ttbag(op: Op) -> None:
    n, mode, rows = op.attrs["cores"], op.attrs["mode"], op.attrs["rows"]
    check(_int(n) and n in TT_CORES, op, f"cores must be 2, 3 or 4, got {n!r}")
    check(len(op.operands) in (n + 2, n + 3), op, f"takes {n} cores, indices, offsets and optional weights, got "
          f"{len(op.operands)} operands")
    cores = [_shaped(op, k, f"core {k}", 4, kind="float") for k in range(n)]
    for k, t in enumerate(cores):
        check(t.elem.name == "f32", op, f"core {k} must hold f32, got {t.elem}")
    shapes = [t.shape for t in cores]
    why = tt_shapes(shapes)  # type: ignore[arg-type]
    check(why is None, op, str(why))
    idx = _shaped(op, n, "indices", 1)
    _shaped(op, n + 1, "offsets", 1)
    check(mode in TTBAG_MODES, op, f"mode must be one of {', '.join(TTBAG_MODES)}")
    total = math.prod(s[0] for s in shapes)  # type: ignore[index]
    check(isinstance(rows, int) and not isinstance(rows, bool) and 0 < rows <= total, op,
          f"rows must be an integer in [1, {total}] (the product of the cores' p), got {rows!r}")
    if len(op.operands) == n + 3:
        w = _shaped(op, n + 2, "weights", 1, kind="float")
        check(mode == "sum", op, "per-sample weights need mode \"sum\"")
        check(w.elem.name == "f32", op, "weights must be f32")
        check(_dims_agree(w.shape, idx.shape), op, "weights and indices must have the same length")
    want = ShapedType("tensor", (None, math.prod(s[2] for s in shapes)), ScalarType("f32"))  # type: ignore[index]
    check(isinstance(op.result.type, ShapedType) and _compatible(op.result.type, want), op,
          f"result must be {want}, got {op.result.type}")


@define("emb.robe", operands=(3, 4), results=1, attrs=("block", "mode", "prime", "hash", "sign"))
def _robe(op: Op) -> None:
    array = _shaped(op, 0, "the shared array", 1, kind="float")
    check(array.elem.name == "f32" and array.shape is not None and isinstance(array.shape[0], int)
          and array.shape[0] > 0, op, f"the shared array must be a non-empty tensor<Sxf32>, got {array}")
    idx = _shaped(op, 1, "indices", 1)
    _shaped(op, 2, "offsets", 1)
    block, mode, prime = op.attrs["block"], op.attrs["mode"], op.attrs["prime"]
    check(mode in ROBE_MODES, op, f"mode must be one of {', '.join(ROBE_MODES)}")
    check(_int(prime) and 2 <= prime < 2 ** 31, op, f"prime must be an integer in [2, 2**31), got {prime!r}")
    for key in ("hash", "sign"):
        v = op.attrs[key]
        check(isinstance(v, list) and len(v) == 3 and all(_int(x) and 0 <= x < 2 ** 31 for x in v), op,
              f"{key} must be three integers in [0, 2**31) (the coefficients of x, of the block or element, and "
              f"the constant), got {v!r}")
    out = op.result.type
    check(isinstance(out, ShapedType) and out.kind == "tensor" and out.rank == 2
          and isinstance(out.shape[1], int) and out.elem.name == "f32", op,  # type: ignore[index]
          f"result must be tensor<?xDxf32> with a static D, got {out}")
    assert isinstance(out, ShapedType) and out.shape is not None
    dim = out.shape[1]
    check(_int(block) and block > 0 and dim % block == 0, op,
          f"block must be a positive integer that divides the row width {dim}, got {block!r}")
    if len(op.operands) == 4:
        w = _shaped(op, 3, "weights", 1, kind="float")
        check(mode == "sum", op, "per-sample weights need mode \"sum\"")
        check(w.elem.name == "f32", op, "weights must be f32")
        check(_dims_agree(w.shape, idx.shape), op, "weights and indices must have the same length")


@define("emb.dhe", operands=(7, 12), results=1, attrs=("buckets", "layers", "mode"))
def _dhe(op: Op) -> None:
    layers, buckets, mode = op.attrs["layers"], op.attrs["buckets"], op.attrs["mode"]
    check(layers in DHE_LAYERS and _int(layers), op, f"layers must be 1, 2 or 3, got {layers!r}")
    n = 3 + 2 * layers
    check(len(op.operands) in (n + 2, n + 3), op, f"takes the hashes' slope, bias and prime, {layers} weight and "
          f"bias pairs, indices, offsets and optional weights, got {len(op.operands)} operands")
    check(_int(buckets) and 2 <= buckets < 2 ** 31, op, f"buckets must be an integer in [2, 2**31), got {buckets!r}")
    check(mode in DHE_MODES, op, f"mode must be one of {', '.join(DHE_MODES)}")
    hashes = [_shaped(op, i, what, 1) for i, what in enumerate(("slope", "bias", "prime"))]
    k = hashes[0].shape[0]  # type: ignore[index]
    for t, what in zip(hashes, ("slope", "bias", "prime")):
        check(t.elem.name == "i64" and isinstance(t.shape[0], int) and t.shape[0] == k and k > 0, op,  # type: ignore[index]
              f"{what} must be a tensor<kxi64> with the same k > 0 as slope, got {t}")
    width = k
    for layer in range(layers):
        w = _shaped(op, 3 + 2 * layer, f"layer {layer + 1}'s weight", 2, kind="float")
        b = _shaped(op, 4 + 2 * layer, f"layer {layer + 1}'s bias", 1, kind="float")
        assert w.shape is not None and b.shape is not None
        check(w.elem.name == "f32" and b.elem.name == "f32", op, f"layer {layer + 1} must hold f32")
        check(None not in w.shape and None not in b.shape, op, f"layer {layer + 1}'s weight and bias must have static "
              f"shapes, got {w} and {b}")
        check(w.shape[1] == width, op, f"layer {layer + 1}'s weight must take {width} inputs (out x in), got {w}")
        check(isinstance(w.shape[0], int) and b.shape == (w.shape[0],), op,
              f"layer {layer + 1}'s bias must have one entry per output ({w.shape[0]}), got {b}")
        width = w.shape[0]
    idx = _shaped(op, n, "indices", 1)
    _shaped(op, n + 1, "offsets", 1)
    if len(op.operands) == n + 3:
        wt = _shaped(op, n + 2, "weights", 1, kind="float")
        check(mode == "sum", op, "per-sample weights need mode \"sum\"")
        check(wt.elem.name == "f32", op, "weights must be f32")
        check(_dims_agree(wt.shape, idx.shape), op, "weights and indices must have the same length")
    want = ShapedType("tensor", (None, width), ScalarType("f32"))
    check(isinstance(op.result.type, ShapedType) and _compatible(op.result.type, want), op,
          f"result must be {want}, got {op.result.type}")


def _int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@define("emb.scatter_rows", operands=3, results=1, attrs=("reduction",))
def _scatter_rows(op: Op) -> None:
    data = _shaped(op, 0, "data", 2, kind="float")
    idx = _shaped(op, 1, "index", 1)
    upd = _shaped(op, 2, "updates", 2, kind="float")
    check(op.attrs["reduction"] in REDUCTIONS, op, f"reduction must be one of {', '.join(REDUCTIONS)}")
    assert data.shape is not None and upd.shape is not None
    check(upd.elem == data.elem and _dims_agree(upd.shape[1:], data.shape[1:]), op,
          "updates must be rows of the data's width and element type")
    check(_dims_agree(idx.shape, upd.shape[:1]), op, "index and updates must have one entry per row")
    check(isinstance(op.result.type, ShapedType) and _compatible(op.result.type, data), op,
          f"result must be {data}")


def _dims_agree(a: tuple | None, b: tuple | None) -> bool:
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def _compatible(t: ShapedType, want: ShapedType) -> bool:
    """Same kind, element type and rank, and equal wherever both extents are known."""
    return t.kind == want.kind and t.elem == want.elem and _dims_agree(t.shape, want.shape) and (
        t.rank == want.rank)
