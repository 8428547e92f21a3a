"""tt-decompose{ranks=..}: float tables of bags become tensor trains (emb.bag -> emb.ttbag), by TT-SVD.

A lossy transform, so never part of an -O preset: the user asks for it.  Each `emb.bag` over a float32 param
table N x D, with mode sum or mean and no padding_idx, becomes an `emb.ttbag` over n cores (TT-Rec,
FBTT-Embedding's layout): core k is a p_k x R_k x q_k x R_k+1 float32 param named
`NAME#tt/<p>/<q>/<ranks>/<k>`, e.g. `bag.weight#tt/100x100x100/4x4x4/16x16/0` (p, q and the interior ranks
written with 'x'), whose data the linker computes from the float param NAME by `tt_cores`.

The shapes: q factors D exactly (each factor > 1, as balanced as D allows), p has a product >= N and is as
balanced and as small as the search finds (FBTT's `suggested_tt_shapes` balances its factors the same way;
it rounds N up to a round number first, which this does not need), both overridable with `p=`/`q=`.  An
interior rank is the one asked for, capped by the rank of the unfolding TT-SVD cuts there.

A remark per table gives the shapes, the memory saved and, when the module's weights file can be read, the
reconstruction error (max and RMS over the N rows); the figures also go to `ember-opt --stats`.  Bags it
leaves alone get a remark saying why, among them tables the cores would not make smaller.
"""

from __future__ import annotations

import math
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ..ir.core import Op
from ..ir.diagnostics import EmberError
from ..ir.rewrite import RewritePattern
from ..ir.types import ScalarType, ShapedType
from .base import Decline, PatternPass
from .derived import Figures, bag_table, derive, derived_param, float_rows, read_weights, replace_bag

CORES = (2, 3, 4)  # what emb.ttbag takes (its TT_CORES), as FBTT-Embedding does
DEFAULT_CORES = 3
Shape = tuple[int, ...]


def join(xs: Shape) -> str:
    return "x".join(map(str, xs))


def split(text: str, what: str) -> Shape:
    """`12x14` -> (12, 14); one-line errors for anything but positive integers joined by 'x'."""
    parts = text.split("x")
    if not all(s.strip().isdigit() and int(s) > 0 for s in parts):
        raise EmberError(f"{what} must be positive integers joined by 'x' (e.g. 16 or 12x14), got '{text}'")
    return tuple(int(s) for s in parts)


def capped_ranks(p: Shape, q: Shape, asked: Shape) -> Shape:
    """The interior ranks R_1 .. R_n-1 TT-SVD gives: each the one asked, at most the rank of the unfolding it
    cuts (R_k p_k q_k rows by prod_{l>k} p_l q_l columns)."""
    out: list[int] = []
    prev = 1
    for k, r in enumerate(asked):
        prev = min(r, prev * p[k] * q[k], math.prod(a * b for a, b in zip(p[k + 1:], q[k + 1:])))
        out.append(prev)
    return tuple(out)


def core_shapes(p: Shape, q: Shape, ranks: Shape) -> list[Shape]:
    r = (1, *ranks, 1)
    return [(p[k], r[k], q[k], r[k + 1]) for k in range(len(p))]


def factor_exactly(d: int, n: int) -> Shape | None:
    """`d` as a product of `n` factors > 1, the most balanced (least spread of their logarithms), largest first;
    None when d has fewer than n prime factors."""
    best: tuple[float, Shape] | None = None

    def walk(rest: int, parts: int, low: int, acc: tuple[int, ...]) -> None:
        nonlocal best
        if parts == 1:
            if rest >= low:
                cand = (*acc, rest)
                spread = float(np.std(np.log(cand)))
                if best is None or spread < best[0]:
                    best = (spread, cand)
            return
        f = low
        while f ** parts <= rest:
            if rest % f == 0:
                walk(rest // f, parts - 1, f, (*acc, f))
            f += 1

    walk(d, n, 2, ())
    return tuple(sorted(best[1], reverse=True)) if best else None


def factor_at_least(rows: int, n: int) -> Shape:
    """`n` factors whose product is >= rows: rows itself when it factors evenly enough, else the smallest product
    a search near the n-th root finds, then the most balanced; largest first."""
    best: tuple[int, float, Shape] | None = None

    def walk(need: int, parts: int, acc: tuple[int, ...]) -> None:
        nonlocal best
        if parts == 1:
            cand = (*acc, max(need, 1))
            key = (math.prod(cand), float(np.std(np.log(cand))), cand)
            if best is None or key[:2] < best[:2]:
                best = key
            return
        root = max(1, math.ceil(need ** (1 / parts) - 1e-9))
        for f in range(max(1, root - 2), root + 3):
            walk(-(-need // f), parts - 1, (*acc, f))

    walk(rows, n, ())
    assert best is not None
    exact = factor_exactly(rows, n)  # no padding at all, unless that makes a core much longer than the root
    if exact and best[0] > rows and exact[0] <= 2 * math.ceil(rows ** (1 / n)):
        return exact
    return tuple(sorted(best[2], reverse=True))


_SVD_CACHE: OrderedDict[tuple, tuple[weakref.ref, list[np.ndarray]]] = OrderedDict()


def tt_cores(table: np.ndarray, p: Shape, q: Shape, ranks: Shape) -> list[np.ndarray]:
    """TT-SVD (Oseledets 2011) of an N x D table into float32 cores p_k x R_k x q_k x R_k+1.

    The table, padded with zero rows to prod p, is viewed as a tensor over the digits (i_0, j_0, i_1, j_1, ..)
    of its row i (over p, most significant first) and element d (over q), so that core k carries (p_k, q_k);
    then one truncated SVD per cut, left to right (`_truncate`).  A rank larger than the unfolding's is padded
    with zeros.
    The result is cached per (table, shapes): the n params of one table cost one decomposition."""
    key = (id(table), p, q, ranks)
    hit = _SVD_CACHE.get(key)
    if hit is not None and hit[0]() is table:
        _SVD_CACHE.move_to_end(key)
        return hit[1]
    n = len(p)
    if table.ndim != 2 or table.dtype.kind != "f" or len(q) != n or len(ranks) != n - 1:
        raise EmberError(f"tt-decompose: a table to decompose must be 2-D floats, and p, q and the ranks must "
                         f"describe one train, got {table.dtype}{list(table.shape)}, p={join(p)}, q={join(q)}, "
                         f"ranks={join(ranks)}")
    rows, dim = table.shape
    if math.prod(q) != dim or math.prod(p) < rows or not rows:
        raise EmberError(f"tt-decompose: p={join(p)} and q={join(q)} do not cover a table of {rows} x {dim}")
    order = [a for k in range(n) for a in (k, n + k)]  # (p0, .., p_n-1, q0, .., q_n-1) -> (p0, q0, p1, q1, ..)
    rest = np.zeros([(p, q)[a >= n][a % n] for a in order], np.result_type(table.dtype, np.float32))
    view = rest.transpose(np.argsort(order))  # the same memory indexed (i_0, .., i_n-1, j_0, .., j_n-1)
    lead = math.prod(p[1:])  # the rows of one digit i_0
    for i0 in range(-(-rows // lead)):  # written digit by digit: no padded copy of the table
        block = table[i0 * lead:(i0 + 1) * lead]
        if len(block) < lead:
            block = np.concatenate([block, np.zeros((lead - len(block), dim), block.dtype)])
        view[i0] = block.reshape(*p[1:], *q)
    cores: list[np.ndarray] = []
    prev = 1
    for k in range(n - 1):
        left, rest = _truncate(rest.reshape(prev * p[k] * q[k], -1), ranks[k])  # rest: float64 from here
        cores.append(left.reshape(prev, p[k], q[k], ranks[k]))
        prev = ranks[k]
    cores.append(rest.reshape(prev, p[-1], q[-1], 1))
    out = [np.ascontiguousarray(c.transpose(1, 0, 2, 3), dtype=np.float32) for c in cores]  # R p q R' -> p R q R'
    try:
        _SVD_CACHE[key] = (weakref.ref(table), out)
    except TypeError:  # an array that takes no weak reference is not cached
        return out
    while len(_SVD_CACHE) > 4:
        _SVD_CACHE.popitem(last=False)
    return out


def tt_rows(cores: list[np.ndarray], start: int, stop: int) -> np.ndarray:
    """Rows start .. stop of the table the cores stand for, in float64: row i, element d is the chain
    G_0[i_0, 0, j_0, :] . G_1[i_1, :, j_1, :] ... G_n-1[i_n-1, :, j_n-1, 0] over their digits.  Only the
    digits i_0 that the rows have are contracted."""
    lead = math.prod(g.shape[0] for g in cores[1:])  # the rows of one digit i_0
    first = start // lead
    acc = cores[0][first:-(-stop // lead), 0].astype(np.float64)  # (rows so far, elements so far, R)
    for g in cores[1:]:
        pk, rk, qk, rn = g.shape
        a, b, _ = acc.shape
        nxt = acc.reshape(a * b, rk) @ g.transpose(1, 0, 2, 3).reshape(rk, pk * qk * rn).astype(np.float64)
        acc = nxt.reshape(a, b, pk, qk, rn).transpose(0, 2, 1, 3, 4).reshape(a * pk, b * qk, rn)
    return acc[start - first * lead:stop - first * lead, :, 0]


def parse_name(args: str) -> tuple[Shape, Shape, Shape, int]:
    """`100x100x100/4x4x4/16x16/0` (a derived param's name after `#tt/`) -> p, q, interior ranks, core number."""
    parts = args.split("/")
    if len(parts) != 4 or not parts[3].isdigit():
        raise EmberError(f"a #tt param is named NAME#tt/<p>/<q>/<ranks>/<core>, got '#tt/{args}'")
    p, q = split(parts[0], "p"), split(parts[1], "q")
    ranks = split(parts[2], "ranks") if parts[2] else ()
    k = int(parts[3])
    if len(q) != len(p) or len(ranks) != len(p) - 1 or len(p) not in CORES or k >= len(p):
        raise EmberError(f"'#tt/{args}' does not name a core of a train of 2 to 4 cores (p, q, and one rank fewer)")
    return p, q, ranks, k


def _truncate(c: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    """`c` ~ left @ rest with `left`'s r columns c's leading left singular vectors (zeros past c's m rows), so
    that left @ rest = left left^T c is c's best rank-r approximation, in float64.  The vectors come from the
    eigenvectors of the small Gram matrix c c^T, after a QR when c is tall: for the wide unfoldings of a table
    this is tens of times faster than a full SVD, and its precision (about 1e-8 of the largest singular value)
    is below what the float32 cores keep.  A float32 `c` is widened a block of columns at a time."""
    m, n = c.shape
    if m > n:
        q, tri = np.linalg.qr(c.astype(np.float64, copy=False))
        left, rest = _truncate(tri, r)
        return q @ left, rest
    step = max(1, (1 << 22) // m)
    gram = np.zeros((m, m))
    for j in range(0, n, step):
        block = c[:, j:j + step].astype(np.float64)
        gram += block @ block.T
    _, vectors = np.linalg.eigh(gram)
    left = np.zeros((m, r))
    got = min(r, m)
    left[:, :got] = vectors[:, ::-1][:, :got]
    rest = np.empty((r, n))
    for j in range(0, n, step):
        rest[:, j:j + step] = left.T @ c[:, j:j + step].astype(np.float64, copy=False)
    return left, rest


def parse_name_for(args: str, rows: int) -> tuple[Shape, Shape, Shape, int]:
    """`parse_name` for a table of `rows` rows, where p may be `auto` (`auto/4x4x4/16x16/0`): the factoring the pass
    picks when it is given none, which a hand-written program names so that it serves every table size."""
    head, _, rest = args.partition("/")
    if head == "auto":
        q = split(rest.partition("/")[0], "q")
        head = "x".join(map(str, factor_at_least(rows, len(q))))
    return parse_name(f"{head}/{rest}")


@derive("tt")
def _tt_core(table: np.ndarray, args: str) -> np.ndarray:
    p, q, ranks, k = parse_name_for(args, table.shape[0])
    return tt_cores(table, p, q, ranks)[k]


@dataclass
class TTDecompose(PatternPass):
    name = "tt-decompose"
    summary = ("emb.bag over a float32 param -> emb.ttbag over its TT-SVD cores (lossy; ranks=16 or 12x14, "
               "cores=2..4, p=AxBxC, q=AxBxC)")
    declined: ClassVar[str] = "table kept in float"
    ranks: str = "16"
    cores: int = 0  # 0: as many as p, q or ranks list, else 3
    p: str = ""
    q: str = ""
    weights_file: str = field(default="", repr=False)  # set by ember-opt: the module's weights, from here
    stats: list[Figures] = field(default_factory=list, repr=False)  # per table converted, for ember-opt --stats

    def __post_init__(self) -> None:
        def bad(what: str) -> EmberError:
            return EmberError(f"pass 'tt-decompose': {what}")

        try:
            asked = split(str(self.ranks), "option 'ranks'")
            self.p_shape = split(self.p, "option 'p'") if self.p else None
            self.q_shape = split(self.q, "option 'q'") if self.q else None
        except EmberError as e:
            raise bad(e.message) from None
        counts = {"cores": self.cores} if self.cores else {}
        counts |= {k: len(v) for k, v in (("p", self.p_shape), ("q", self.q_shape)) if v is not None}
        if len(asked) > 1:
            counts["ranks"] = len(asked) + 1
        if len(set(counts.values())) > 1:
            raise bad("the options disagree on the number of cores (" + ", ".join(
                f"{k} says {v}" for k, v in counts.items()) + ")")
        self.n = next(iter(counts.values()), DEFAULT_CORES)
        if self.n not in CORES:
            raise bad(f"a train has 2, 3 or 4 cores, got {self.n}")
        self.asked = asked * (self.n - 1) if len(asked) == 1 else asked

    def run(self, module: Op) -> None:
        self.weights = read_weights(self.weights_file or module.attrs.get("weights"))
        super().run(module)

    def patterns(self) -> list[RewritePattern]:
        return [Decompose(self)]

    def shapes(self, rows: int, dim: int) -> tuple[Shape, Shape]:
        """p and q for a table, given or chosen; Decline when they cannot describe it."""
        n = self.n
        q = self.q_shape or factor_exactly(dim, n)
        if q is None:
            raise Decline(f"its rows of {dim} elements cannot be factored into {n} factors greater than 1 "
                          f"(give q=, or fewer cores)")
        if math.prod(q) != dim:
            raise Decline(f"q={join(q)} makes rows of {math.prod(q)} elements, and the table's have {dim}")
        p = self.p_shape or factor_at_least(rows, n)
        if math.prod(p) < rows:
            raise Decline(f"p={join(p)} covers {math.prod(p)} rows, and the table has {rows}")
        return p, q


@dataclass
class Decompose(RewritePattern):
    owner: TTDecompose

    def match_and_rewrite(self, op: Op) -> bool:
        if op.name != "emb.bag":
            return False
        src, rows, dim = bag_table(op, "TT", "TT bags")
        p, q = self.owner.shapes(rows, dim)
        ranks = capped_ranks(p, q, self.owner.asked)
        shapes = core_shapes(p, q, ranks)
        before, after = rows * dim * 4, sum(math.prod(s) for s in shapes) * 4
        if after >= before:
            raise Decline(f"no saving: cores of p={join(p)} q={join(q)} ranks={join(ranks)} hold {after:,} bytes, "
                          f"the table {before:,}")
        base = src.attrs["name"]
        params = [derived_param(op, src, f"{base}#tt/{join(p)}/{join(q)}/{join(ranks)}/{k}",
                                ShapedType("tensor", shape, ScalarType("f32")), f"{base}_tt{k}")
                  for k, shape in enumerate(shapes)]
        replace_bag(op, src, "emb.ttbag", [*params, *op.operands[1:]],
                    {"cores": len(p), "mode": op.attrs["mode"], "rows": rows})
        form = f"TT p={join(p)} q={join(q)} ranks={join(ranks)}"
        figures = next((f for f in self.owner.stats if f.table == base and f.representation == form), None)
        if figures is None:  # measured once per table
            figures = Figures(base, form, (rows, dim), before, after)
            table_rows = float_rows(self.owner.weights, src)
            cores = tt_cores(table_rows, p, q, ranks) if not isinstance(table_rows, str) else []
            figures.measure(table_rows, lambda x, start: tt_rows(cores, start, start + len(x)))
            self.owner.stats.append(figures)
        capped = f" (asked {join(self.owner.asked)}, capped by TT-SVD)" if ranks != self.owner.asked else ""
        self.owner.remarks.append(f"{op.loc}: remark: tt-decompose: {base} ({rows:,} x {dim} f32) -> {form}"
                                  f"{capped}: {figures.summary()}")
        return True
