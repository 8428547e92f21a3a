"""robe{size=..,block=..,seed=..}: float tables of bags become ROBE arrays (emb.bag -> emb.robe), by least squares.

A lossy transform, so never part of an -O preset: the user asks for it.  Each `emb.bag` over a float32 param
table N x D, with mode sum or mean and no padding_idx, becomes an `emb.robe` over one float32 array M of S
elements (ROBE, Desai et al., MLSys 2022, as Hetu's kernels read it; see emb.robe): element e = c Z + o of row x
is s(x, e) M[a(x, e)], a(x, e) = (B x + C c + D + o) mod P mod S, s(x, e) = 2 ((B' x + C' e + D') mod P mod 2) - 1.
The prime P is Hetu's 2038074743; the six coefficients come from `seed` (`coefficients`).

The array is the param `NAME#robe/<S>/<Z>/<seed>`, e.g. `bag.weight#robe/64000/32/0`, whose data the linker
computes from the float param NAME by `Layout.fit`.  Every element of the table reads exactly one slot, so the
least-squares M is, slot by slot, the mean of s T[x, e] over the elements that read it (0 for a slot none reads).
ROBE shares one array among all of a model's tables; here each table gets its own, so that each table's size
and error are its own to choose and report.

A remark per table gives the layout, the memory saved and, when the module's weights file can be read, the
reconstruction error (max and RMS over the N rows); the figures also go to `ember-opt --stats`.  Bags it leaves
alone get a remark saying why, among them tables an array of S elements would not make smaller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

import numpy as np

from ..ir.core import Op
from ..ir.diagnostics import EmberError
from ..ir.rewrite import RewritePattern
from ..ir.types import ScalarType, ShapedType
from .base import Decline, PatternPass
from .derived import Figures, bag_table, derive, derived_param, float_rows, read_weights, replace_bag

PRIME = 2038074743  # the prime of Hetu's robe_hash_kernel and robe_sign_kernel
DEFAULT_SIZE = "1000x"  # ROBE's headline compression
MAX_BLOCK = 32  # the default block: the largest divisor of D up to this
_MASK = (1 << 64) - 1


def coefficients(seed: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """The hash [B, C, D] and sign [B', C', D'] coefficients of a seed: the first six outputs of SplitMix64 seeded
    with `seed`, each taken as 1 + (output mod (P - 1)), so in [1, P).  SplitMix64 rather than numpy's generators,
    whose streams numpy does not promise to keep: a param's name must give the same array on every machine."""
    out = []
    state = seed & _MASK
    for _ in range(6):
        state = (state + 0x9E3779B97F4A7C15) & _MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        out.append(1 + (z ^ (z >> 31)) % (PRIME - 1))
    return (out[0], out[1], out[2]), (out[3], out[4], out[5])


def default_block(dim: int) -> int:
    return max(z for z in range(1, min(dim, MAX_BLOCK) + 1) if dim % z == 0)


@dataclass(frozen=True)
class Layout:
    """One ROBE array: its size S, block Z and seed; where the elements of a table's rows read it, the array that
    fits a table best, and the rows an array stands for."""

    size: int
    block: int
    seed: int

    @cached_property
    def hashes(self) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        return coefficients(self.seed)

    def slots(self, x: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """For rows `x` (int64), the slot a(x, e) of each element (int64, len(x) x dim) and whether its sign is +1."""
        (hx, hc, hd), (sx, se, sd) = self.hashes
        e = np.arange(dim, dtype=np.int64)
        where = (hx * x + hd)[:, None] + (hc * (e // self.block) + e % self.block)[None, :]
        np.remainder(where, PRIME, out=where)
        np.remainder(where, self.size, out=where)
        odd = (sx * x + sd)[:, None] + (se * e)[None, :]
        np.remainder(odd, PRIME, out=odd)
        return where, (odd & 1).astype(bool)

    def step(self, dim: int) -> int:
        """Rows per chunk: about 2 to 4 M elements, more for a larger array (each chunk adds up all of it)."""
        return max(1, max(1 << 21, min(self.size, 1 << 22)) // dim)

    def fit(self, table: np.ndarray) -> np.ndarray:
        """The float32 array whose rows are nearest the table's in least squares: slot by slot, the mean of
        s T[x, e] over the elements that read it, accumulated in float64 a chunk of rows at a time."""
        rows, dim = table.shape
        total = np.zeros(self.size)
        count = np.zeros(self.size)
        step = self.step(dim)
        for start in range(0, rows, step):
            chunk = table[start:start + step]
            where, plus = self.slots(np.arange(start, start + len(chunk), dtype=np.int64), dim)
            where = where.ravel()
            total += np.bincount(where, np.where(plus, chunk, -chunk).ravel(), minlength=self.size)
            count += np.bincount(where, minlength=self.size)
        with np.errstate(all="ignore"):
            return (total / np.maximum(count, 1)).astype(np.float32)

    def rows(self, array: np.ndarray, x: np.ndarray, dim: int) -> np.ndarray:
        """Rows `x` as emb.robe reads them from `array`: s M[a], in float32."""
        where, plus = self.slots(x.astype(np.int64), dim)
        got = array[where]
        return np.where(plus, got, -got)


def parse_name(args: str, dim: int) -> Layout:
    """`64000/32/0` (a derived param's name after `#robe/`) for a table of rows of `dim` elements -> its Layout."""
    parts = args.split("/")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise EmberError(f"a #robe param is named NAME#robe/<size>/<block>/<seed>, got '#robe/{args}'")
    size, block, seed = map(int, parts)
    if not size or not block or dim % block:
        raise EmberError(f"'#robe/{args}' needs a size > 0 and a block that divides the rows' {dim} elements")
    return Layout(size, block, seed)


@derive("robe")
def _robe_array(table: np.ndarray, args: str) -> np.ndarray:
    if table.ndim != 2 or table.dtype.kind != "f" or not table.size:
        raise EmberError(f"robe: a table to fit must be 2-D floats, not empty, got {table.dtype}{list(table.shape)}")
    return parse_name(args, table.shape[1]).fit(table)


@dataclass
class RobeTables(PatternPass):
    name = "robe"
    summary = ("emb.bag over a float32 param -> emb.robe over a hashed array fitted to it (lossy; size=S or "
               "size=1000x, block=Z, seed=K)")
    declined: ClassVar[str] = "table kept in float"
    size: str = DEFAULT_SIZE  # elements of each table's array, or `<ratio>x`: the table's elements / ratio, rounded up
    block: int = 0  # 0: the largest divisor of D up to 32
    seed: int = 0
    weights_file: str = field(default="", repr=False)  # set by ember-opt: the module's weights, from here
    stats: list[Figures] = field(default_factory=list, repr=False)  # per table converted, for ember-opt --stats

    def __post_init__(self) -> None:
        text = str(self.size).strip()
        self.ratio: float | None = None
        try:
            if text.endswith("x"):
                self.ratio = float(text[:-1])
                ok = math.isfinite(self.ratio) and self.ratio > 1
            else:
                ok = text.isdigit() and int(text) > 0
        except ValueError:
            ok = False
        if not ok:
            raise EmberError(f"pass 'robe': option 'size' must be the array's elements (a positive integer) or a "
                             f"compression ratio greater than 1 written with an 'x' (e.g. 64000 or 1000x), got "
                             f"'{self.size}'")
        self.elements = None if self.ratio else int(text)
        if self.block < 0:
            raise EmberError(f"pass 'robe': option 'block' must be positive (or 0: chosen), got {self.block}")
        if not 0 <= self.seed < 1 << 64:
            raise EmberError(f"pass 'robe': option 'seed' must be in [0, 2**64), got {self.seed}")

    def run(self, module: Op) -> None:
        self.weights = read_weights(self.weights_file or module.attrs.get("weights"))
        super().run(module)

    def patterns(self) -> list[RewritePattern]:
        return [Hash(self)]

    def layout(self, rows: int, dim: int) -> Layout:
        """The array for a table, or Decline when its block does not fit the rows or it saves nothing."""
        block = self.block or default_block(dim)
        if dim % block:
            raise Decline(f"block={block} does not divide the rows' {dim} elements")
        size = self.elements or math.ceil(rows * dim / self.ratio)  # type: ignore[operator]
        if size >= rows * dim:
            raise Decline(f"no saving: an array of {size:,} elements, the table {rows * dim:,}")
        return Layout(size, block, self.seed)


@dataclass
class Hash(RewritePattern):
    owner: RobeTables

    def match_and_rewrite(self, op: Op) -> bool:
        if op.name != "emb.bag":
            return False
        src, rows, dim = bag_table(op, "ROBE", "ROBE bags")
        layout = self.owner.layout(rows, dim)
        base = src.attrs["name"]
        name = f"{base}#robe/{layout.size}/{layout.block}/{layout.seed}"
        array = derived_param(op, src, name, ShapedType("tensor", (layout.size,), ScalarType("f32")), f"{base}_robe")
        hash_, sign = layout.hashes
        replace_bag(op, src, "emb.robe", [array, *op.operands[1:]],
                    {"block": layout.block, "mode": op.attrs["mode"], "prime": PRIME, "hash": list(hash_),
                     "sign": list(sign)})
        form = f"ROBE size={layout.size} block={layout.block} seed={layout.seed}"
        figures = next((f for f in self.owner.stats if f.table == base and f.representation == form), None)
        if figures is None:  # measured once per table
            figures = Figures(base, form, (rows, dim), rows * dim * 4, layout.size * 4)
            table = float_rows(self.owner.weights, src)
            fitted = layout.fit(table) if not isinstance(table, str) else np.zeros(0, np.float32)
            figures.measure(table, lambda x, start: layout.rows(fitted, np.arange(start, start + len(x)), dim))
            self.owner.stats.append(figures)
        self.owner.remarks.append(f"{op.loc}: remark: robe: {base} ({rows:,} x {dim} f32) -> {form}: "
                                  f"{figures.summary()}")
        return True
