"""quantize-tables{bits=8|4}: float tables of bags become row-wise quantized tables (emb.bag -> emb.qbag).

A lossy transform, so never part of an -O preset: the user asks for it.  Each `emb.bag` over a float32 param
table, with mode sum or mean and no padding_idx, becomes an `emb.qbag` over the param `NAME#int8` (or
`#int4`): a table of bytes in FBGEMM's layout that the linker (ember-asm, `derived.link_param`) computes
from the float param `NAME` with `prepack`, FBGEMM's own rounding (QuantUtils.cc, FloatOrHalfToFused8Bit- and
FloatOrHalfToFusedNBitRowwiseQuantizedSBHalf), so the bytes equal what torch's
`embedding_bag_byte_prepack` / `embedding_bag_4bit_prepack` make.  A remark per table gives the memory saved
and, when the module's weights file can be read, the reconstruction error against the float rows (max and
RMS of dequantized minus original).  Bags it leaves alone get a remark saying why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ..ir.core import Op
from ..ir.diagnostics import EmberError
from ..ir.rewrite import RewritePattern
from ..ir.types import ScalarType, ShapedType
from .base import Decline, PatternPass
from .derived import Figures, bag_table, derive, derived_param, float_rows, read_weights, replace_bag


def prepack(table: np.ndarray, bits: int) -> np.ndarray:
    """Float rows -> FBGEMM's fused rows: codes, then scale and bias (float32 after 8-bit codes, float16 after
    4-bit codes packed two to a byte, low nibble first), computed in float32 as FBGEMM does."""
    if table.ndim != 2 or table.shape[1] == 0 or table.dtype.kind != "f":
        raise EmberError(f"quantize-tables: a table to quantize must be 2-D floats with rows of at least one "
                         f"element, got {table.dtype}{list(table.shape)}")
    x = np.ascontiguousarray(table, dtype=np.float32)
    if not len(x):
        return np.zeros((0, x.shape[1] + 8 if bits == 8 else x.shape[1] // 2 + 4), np.uint8)
    lo, hi = x.min(axis=1, keepdims=True), x.max(axis=1, keepdims=True)
    with np.errstate(all="ignore"):
        if bits == 8:  # scale = range / 255, codes lrintf((x - min) * (255 / (range + 1e-8))), unclamped
            rng = hi - lo
            scale = rng / np.float32(255.0)
            codes = np.rint((x - lo) * (np.float32(255.0) / (rng + np.float32(1e-8)))).astype(np.uint8)
            tail = np.concatenate([scale, lo], axis=1).astype(np.float32).view(np.uint8)
            return np.concatenate([codes, tail], axis=1)
        if bits != 4:
            raise EmberError(f"quantize-tables: bits must be 8 or 4, got {bits}")
        lo = lo.astype(np.float16).astype(np.float32)  # the minimum as the row will store it
        rng = hi - lo
        scale = np.where(rng == 0, np.float32(1.0), rng / np.float32(15.0)).astype(np.float16).astype(np.float32)
        inverse = np.float32(1.0) / scale
        bad = (scale == 0) | np.isinf(inverse)
        scale, inverse = np.where(bad, np.float32(1.0), scale), np.where(bad, np.float32(1.0), inverse)
        codes = np.clip(np.rint((x - lo) * inverse), 0, 15).astype(np.uint8)
        if codes.shape[1] % 2:
            raise EmberError(f"quantize-tables: a 4-bit table needs an even row width, got {codes.shape[1]}")
        packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
        tail = np.concatenate([scale, lo], axis=1).astype(np.float16).view(np.uint8)
        return np.concatenate([packed, tail], axis=1)


def unpack(rows: np.ndarray, bits: int) -> np.ndarray:
    """Fused rows -> the float32 values they stand for: scale * q + bias computed in double and rounded once, as
    FBGEMM's Fused8BitRowwiseQuantizedSBFloatToFloat does (QuantUtils.cc)."""
    sb_type, sb_bytes = (np.float32, 8) if bits == 8 else (np.float16, 4)
    codes = rows[:, :-sb_bytes]
    if bits == 4:
        codes = np.stack([codes & 15, codes >> 4], axis=2).reshape(len(rows), -1)
    sb = rows[:, -sb_bytes:].copy().view(sb_type).astype(np.float64)
    with np.errstate(all="ignore"):
        return (codes.astype(np.float64) * sb[:, :1] + sb[:, 1:]).astype(np.float32)


@derive("int8")
def _int8(table: np.ndarray, args: str) -> np.ndarray:
    return prepack(table, 8) if not args else _no_args("int8", args)


@derive("int4")
def _int4(table: np.ndarray, args: str) -> np.ndarray:
    return prepack(table, 4) if not args else _no_args("int4", args)


def _no_args(kind: str, args: str) -> np.ndarray:
    raise EmberError(f"a #{kind} param takes nothing after its kind, got '/{args}'")


@dataclass
class QuantizeTables(PatternPass):
    name = "quantize-tables"
    summary = "emb.bag over a float32 param -> emb.qbag over its row-wise quantized bytes (lossy; bits=8|4)"
    declined: ClassVar[str] = "table kept in float"
    bits: int = 8
    weights_file: str = field(default="", repr=False)  # set by ember-opt: the module's weights, from here
    stats: list[Figures] = field(default_factory=list, repr=False)  # per table converted, for ember-opt --stats

    def __post_init__(self) -> None:
        if self.bits not in (8, 4):
            raise EmberError(f"pass 'quantize-tables': option 'bits' must be 8 or 4, got {self.bits}")

    def run(self, module: Op) -> None:
        self.weights = read_weights(self.weights_file or module.attrs.get("weights"))
        super().run(module)

    def patterns(self) -> list[RewritePattern]:
        return [Quantize(self)]


@dataclass
class Quantize(RewritePattern):
    owner: QuantizeTables

    def match_and_rewrite(self, op: Op) -> bool:
        if op.name != "emb.bag":
            return False
        src, rows, dim = bag_table(op, "quantized", "FBGEMM's bags")
        bits = self.owner.bits
        if bits == 4 and dim % 2:
            raise Decline(f"a 4-bit row packs two codes a byte, and the rows have {dim} elements")
        width = dim + 8 if bits == 8 else dim // 2 + 4
        name = f"{src.attrs['name']}#int{bits}"
        qtype = ShapedType("tensor", (rows, width), ScalarType("u8"))
        table = derived_param(op, src, name, qtype, name.replace("#", "_"))
        replace_bag(op, src, "emb.qbag", [table, *op.operands[1:]], {"bits": bits, "mode": op.attrs["mode"]})
        figures = next((f for f in self.owner.stats if f.table == src.attrs["name"]), None)
        if figures is None:  # measured once per table
            figures = Figures(src.attrs["name"], f"int{bits}", (rows, dim), rows * dim * 4, rows * width)
            figures.measure(float_rows(self.owner.weights, src), lambda x, _: unpack(prepack(x, bits), bits))
            self.owner.stats.append(figures)
        self.owner.remarks.append(f"{op.loc}: remark: quantize-tables: {src.attrs['name']} ({rows} x {dim} f32) "
                                  f"-> int{bits}: {figures.summary()}")
        return True
