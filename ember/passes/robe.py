"""robe{size=..,block=..,seed=..}: float tables of bags become ROBE arrays (emb.bag -> emb.robe), by least squares.

A lossy transform, so never part of an -O preset: the user asks for it.  Each `emb.bag` over a float32 param
table N x D, with mode sum or mean and no padding_idx, becomes an `emb.robe` over one float32 array M of S
elements (ROBE, Desai et al., MLSys 2022, as Hetu's kernels read it; see emb.robe): element e = c Z + o of row x
is s(x, e) M[a(x, e)], a(x, e) = (B x + C c + D + o) mod P mod S, s(x, e) = 2 ((B' x + C' e + D') mod P mod 2) - 1.
The prime P is Hetu's 2038074743; the six coefficients come from `seed` (`coefficients`).

The array is the param `NAME#robe/<S>/<Z>/<seed>`, e.g. `bag.weight#robe/64000/32/0`, whose data the linker
computes from the float param NAME by `Layout.fit`.  Every element of the table reads exactly one slot, so the
least-squares M is, slot by slot, the mean of s T[x, e] over the elements that read it (0 for a slot none reads).
ROBE itself puts all of a model's tables in one array, each table's blocks at offsets hashed with its slot
number t as well: Hetu's kernel adds A t to the hash (A x + B t + ...).  `shared=true` does that: one array
`T0|T1|...#robe/<S>/<Z>/<seed>` for every table the pass converts, of S elements (or the tables' elements / ratio),
table t reading it with D + A t and D' + A' t in place of D and D' (A, A' the seed's 7th and 8th coefficients,
so table 0 reads it as an array of its own would be read), fitted by least squares to all of them at once.
Without it (the default) each table gets its own array, so that each table's size and error are its own to
choose and report, as `ember-plan` needs.  With it, each table's `--stats` entry counts a share of the array's
bytes in proportion to the table's elements, so that the entries add up to the array.

A remark per table gives the layout, the memory saved and, when the module's weights file can be read, the
reconstruction error (max and RMS over the N rows); the figures also go to `ember-opt --stats`.  Bags it leaves
alone get a remark saying why, among them tables an array of S elements would not make smaller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import ClassVar

import numpy as np

from ..ir.core import Op
from ..ir.diagnostics import EmberError
from ..ir.rewrite import RewritePattern
from ..ir.types import ScalarType, ShapedType
from .base import Decline, PatternPass, kept
from .derived import Figures, bag_table, derive_many, derived_param, float_rows, read_weights, replace_bag

PRIME = 2038074743  # the prime of Hetu's robe_hash_kernel and robe_sign_kernel
DEFAULT_SIZE = "1000x"  # ROBE's headline compression
MAX_BLOCK = 32  # the default block: the largest divisor of D up to this
_MASK = (1 << 64) - 1


def coefficients(seed: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """The hash [B, C, D] and sign [B', C', D'] coefficients of a seed: the first six outputs of SplitMix64 seeded
    with `seed`, each taken as 1 + (output mod (P - 1)), so in [1, P).  SplitMix64 rather than numpy's generators,
    whose streams numpy does not promise to keep: a param's name must give the same array on every machine."""
    out = _splitmix(seed, 6)
    return (out[0], out[1], out[2]), (out[3], out[4], out[5])


def slot_coefficients(seed: int) -> tuple[int, int]:
    """A and A': what a shared array's table t adds, times t, to D and D' (the seed's 7th and 8th outputs)."""
    out = _splitmix(seed, 8)
    return out[6], out[7]


def _splitmix(seed: int, n: int) -> list[int]:
    out = []
    state = seed & _MASK
    for _ in range(n):
        state = (state + 0x9E3779B97F4A7C15) & _MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        out.append(1 + (z ^ (z >> 31)) % (PRIME - 1))
    return out


def default_block(dim: int) -> int:
    return max(z for z in range(1, min(dim, MAX_BLOCK) + 1) if dim % z == 0)


@dataclass(frozen=True)
class Layout:
    """One ROBE array as table number `table` reads it (0 for an array of its own): its size S, block Z and seed;
    where the elements of the table's rows read it, the array that fits tables best, and the rows it stands for."""

    size: int
    block: int
    seed: int
    table: int = 0

    @cached_property
    def hashes(self) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        (hx, hc, hd), (sx, se, sd) = coefficients(self.seed)
        a, a2 = slot_coefficients(self.seed)
        return (hx, hc, (hd + a * self.table) % PRIME), (sx, se, (sd + a2 * self.table) % PRIME)

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

    def fit(self, tables: list[np.ndarray]) -> np.ndarray:
        """The float32 array whose rows are nearest the tables' in least squares, table t read as table number t:
        slot by slot, the mean of s T[x, e] over the elements that read it, accumulated in float64 a chunk of rows
        at a time."""
        total = np.zeros(self.size)
        count = np.zeros(self.size)
        for t, table in enumerate(tables):
            layout = replace(self, table=self.table + t)
            rows, dim = table.shape
            step = self.step(dim)
            for start in range(0, rows, step):
                chunk = table[start:start + step]
                where, plus = layout.slots(np.arange(start, start + len(chunk), dtype=np.int64), dim)
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


def parse_name(args: str, dim: int, elements: int | None = None) -> Layout:
    """`64000/32/0` (a derived param's name after `#robe/`) for a table of rows of `dim` elements -> its Layout.

    The size may also be an integer ratio, `1000x/32/0`: the array of ceil(elements / 1000) elements, as the pass's
    `size` option computes it, given the `elements` of the tables it stands for.  A hand-written program names its
    array this way, so that one program serves every table size."""
    parts = args.split("/")
    ratio = parts[0][:-1] if len(parts) == 3 and parts[0].endswith("x") else None
    if len(parts) != 3 or not all(p.isdigit() for p in [ratio if ratio is not None else parts[0], *parts[1:]]):
        raise EmberError(f"a #robe param is named NAME#robe/<size>/<block>/<seed> (or <ratio>x for the size), got "
                         f"'#robe/{args}'")
    block, seed = int(parts[1]), int(parts[2])
    if ratio is None:
        size = int(parts[0])
    elif elements is None:
        raise EmberError(f"'#robe/{args}' gives a ratio, and the table it is computed from is not known here")
    else:
        size = -(-elements // int(ratio)) if int(ratio) > 1 else 0
    if not size or not block or dim % block:
        raise EmberError(f"'#robe/{args}' needs a size > 0 (a ratio > 1) and a block that divides the rows' {dim} "
                         "elements")
    return Layout(size, block, seed)


@derive_many("robe")
def _robe_array(tables: list[np.ndarray], args: str) -> np.ndarray:
    for table in tables:
        if table.ndim != 2 or table.dtype.kind != "f" or not table.size:
            raise EmberError(f"robe: a table to fit must be 2-D floats, not empty, got "
                             f"{table.dtype}{list(table.shape)}")
    elements = sum(table.size for table in tables)  # what a ratio divides, as the pass's size option
    layouts = [parse_name(args, table.shape[1], elements) for table in tables]  # the block must divide every row
    return layouts[0].fit(tables)


@dataclass
class RobeTables(PatternPass):
    name = "robe"
    summary = ("emb.bag over a float32 param -> emb.robe over a hashed array fitted to it (lossy; size=S or "
               "size=1000x, block=Z, seed=K, shared=true: one array for all tables)")
    declined: ClassVar[str] = "table kept in float"
    size: str = DEFAULT_SIZE  # elements of each table's array (or of the shared one), or `<ratio>x`: elements / ratio
    block: int = 0  # 0: the largest divisor of D up to 32 (of every table's D when shared)
    seed: int = 0
    shared: bool = False  # one array for every table converted, as ROBE has it
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
        self.together: dict[str, tuple[Op, int, int]] = {}  # shared: the tables the array holds, in slot order
        self.arrays: dict[str, np.ndarray | str] = {}  # a fitted array by param name, or why it could not be

    def run(self, module: Op) -> None:
        self.weights = read_weights(self.weights_file or module.attrs.get("weights"))
        self.together, self.arrays = {}, {}  # this module's tables and fits, not an earlier module's
        if self.shared:
            for op in module.walk():
                if op.name == "emb.bag" and not kept(op):
                    try:
                        src, rows, dim = bag_table(op, "ROBE", "ROBE bags")
                    except Decline:
                        continue
                    self.together.setdefault(src.attrs["name"], (src, rows, dim))
        super().run(module)

    def patterns(self) -> list[RewritePattern]:
        return [Hash(self)]

    def layout(self, name: str, rows: int, dim: int) -> tuple[Layout, str]:
        """Table `name`'s array as it reads it and the array's param name, or Decline when the block does not fit
        the rows or the array saves nothing."""
        tables = self.together if self.shared else {name: (None, rows, dim)}
        dims = [d for _, _, d in tables.values()]
        block = self.block or default_block(math.gcd(*dims))
        if dim % block:
            raise Decline(f"block={block} does not divide the rows' {dim} elements")
        elements = sum(r * d for _, r, d in tables.values())
        size = self.elements or math.ceil(elements / self.ratio)  # type: ignore[operator]
        if size >= elements:
            whose = "the tables" if self.shared else "the table"
            raise Decline(f"no saving: an array of {size:,} elements, {whose} {elements:,}")
        if self.shared and any(d % block for d in dims):
            raise Decline(f"block={block} does not divide the rows of every table the array would hold")
        slot = list(tables).index(name)
        return Layout(size, block, self.seed, slot), f"{'|'.join(tables)}#robe/{size}/{block}/{self.seed}"

    def fitted(self, array: str, layout: Layout, srcs: list[Op]) -> np.ndarray | str:
        """The array's data, fitted once to the float rows of the tables `srcs` it holds, or why it cannot be."""
        if array not in self.arrays:
            rows = [float_rows(self.weights, src) for src in srcs]
            bad = next((r for r in rows if isinstance(r, str)), None)
            self.arrays[array] = bad if bad is not None else replace(layout, table=0).fit(rows)  # type: ignore[arg-type]
        return self.arrays[array]


@dataclass
class Hash(RewritePattern):
    owner: RobeTables

    def match_and_rewrite(self, op: Op) -> bool:
        if op.name != "emb.bag":
            return False
        src, rows, dim = bag_table(op, "ROBE", "ROBE bags")
        base = src.attrs["name"]
        layout, name = self.owner.layout(base, rows, dim)
        value = f"{base}_robe" if not self.owner.shared else "robe"
        array = derived_param(op, src, name, ShapedType("tensor", (layout.size,), ScalarType("f32")), value)
        hash_, sign = layout.hashes
        replace_bag(op, src, "emb.robe", [array, *op.operands[1:]],
                    {"block": layout.block, "mode": op.attrs["mode"], "prime": PRIME, "hash": list(hash_),
                     "sign": list(sign)})
        form = f"ROBE size={layout.size} block={layout.block} seed={layout.seed}"
        share = layout.size * 4
        if self.owner.shared:
            form = f"ROBE shared size={layout.size} block={layout.block} seed={layout.seed} slot={layout.table}"
            share = round(share * rows * dim / sum(r * d for _, r, d in self.owner.together.values()))
        figures = next((f for f in self.owner.stats if f.table == base and f.representation == form), None)
        if figures is None:  # measured once per table
            figures = Figures(base, form, (rows, dim), rows * dim * 4, share)
            srcs = [t[0] for t in self.owner.together.values()] if self.owner.shared else [src]
            table = float_rows(self.owner.weights, src)
            fitted = self.owner.fitted(name, layout, srcs) if not isinstance(table, str) else table
            if isinstance(fitted, str):
                figures.measure(fitted, lambda x, start: x)
            else:
                figures.measure(table, lambda x, start: layout.rows(fitted, np.arange(start, start + len(x)), dim))
            self.owner.stats.append(figures)
        self.owner.remarks.append(f"{op.loc}: remark: robe: {base} ({rows:,} x {dim} f32) -> {form}: "
                                  f"{figures.summary()}")
        return True
