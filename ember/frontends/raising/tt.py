"""Tensor-train embedding bags written as plain PyTorch, raised to `emb.ttbag`.

A TT-Rec lookup (Yin et al., MLSys 2021) in FBTT-Embedding's layout, written with tensor ops:

    d_k  = x // (p_k+1 ... p_n-1) % p_k                   # the index's digits, the first the most significant
    g_k  = cores[k][d_k]                                  # core k: a [p_k, R_k q_k R_k+1] float32 parameter
    rows = g_0 . g_1 . ... . g_n-1                        # viewed as R_k x q_k x R_k+1 and contracted (bmm, matmul)
    out  = rows.view(bags, length, D).sum(dim=1)          # or .mean(dim=1); x: 2-D indices, one bag per row

imports op by op as one `emb.gather` per core and host MatMuls and Reshapes.  This module finds that shape
after the lowering and replaces it with one `emb.ttbag`, so that the digits become access-unit work and the
contraction core code.

It matches by meaning.  The digits: each gather's index is evaluated in numpy at every index in [-N, N)
(N = p_0 ... p_n-1), or at 2^22 of them for larger N, and must be the digit that gather's core stands for,
counted from the end of the core for a negative index as PyTorch's indexing does.  The contraction: the ops
from the gathers to the pooled rows may only reshape, transpose and matrix-multiply (so each row is
multilinear in its slices by its form); they are evaluated on random integer slices, exactly in float64, and
must give the TT chain's product for ranks and q that factor the cores' widths.  Two multilinear polynomials
that agree at random points from a set of 513 values differ with probability at most n / 513 per trial
(Schwartz-Zippel), and three trials are made.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ...ir.core import Block, Op, Value
from .matching import (
    MAX_ELEMENTS,
    Const,
    Consts,
    Eval,
    Host,
    index_input,
    is_pooling,
    need,
    param_of,
    pooled_rows,
    raise_each,
    replace_with_bags,
    static_shape,
    upstream,
)

_CORES = (2, 3, 4)  # emb.ttbag takes 2 to 4
_EVERY = 1 << 22  # every index in [-N, N) is tried when 2N is at most this; this many of them otherwise
_EVALUATIONS = 4096  # but no more than this many evaluations of the model's shapes (a small example batch)
_SHAPING = ("Reshape", "Transpose", "Unsqueeze", "Squeeze", "Flatten")  # move elements, compute nothing
_TRIALS = 3
_SPREAD = 256  # random slices are integers in [-256, 256]: every product and sum is exact in float64


def raise_tt(block: Block, results: list[Value], consts: Consts, const: Const, host: Host) -> list[Value]:
    """Replace each tensor-train lookup in `block` by an `emb.ttbag`; returns `results` with the replaced values
    mapped."""
    return raise_each(block, is_pooling, _raise_one, results, consts, const, host)


def _raise_one(block: Block, reduce: Op, results: list[Value], consts: Consts, const: Const,
               host: Host) -> list[Value]:
    rows, mode = pooled_rows(block, reduce, results, consts)
    gathers = [op for op in upstream(rows) if op.name == "emb.gather"]
    need(len(gathers) in _CORES)
    tables = [param_of(g.operands[0]).result for g in gathers]
    for t in tables:
        need(t.type.elem.name == "f32" and len(static_shape(t)) == 2)  # type: ignore[union-attr]
    sizes = [static_shape(t) for t in tables]  # core k: (p_k, R_k q_k R_k+1)
    x = index_input(block, gathers[0].operands[1])
    need(all(index_input(block, g.operands[1]) is x for g in gathers))
    bags, length = static_shape(x)
    need(len(static_shape(rows)) == 3 and static_shape(rows)[:2] == (bags, length))
    dim = static_shape(rows)[2]
    need(bags * length * max(dim, *(w for _, w in sizes)) <= MAX_ELEMENTS)
    order = _digit_order(gathers, [pk for pk, _ in sizes], x, consts)
    gathers, sizes = [gathers[k] for k in order], [sizes[k] for k in order]
    p, widths = [pk for pk, _ in sizes], [w for _, w in sizes]
    shapes = next((s for s in _factorings(widths, dim) if _contracts(rows, gathers, s, bags * length)), None)
    need(shapes is not None)
    assert shapes is not None
    total = math.prod(p)
    need(total < 1 << 62)
    start = len(block.ops)
    cores = [host("Reshape", [g.operands[0], const(np.array([pk, *s], np.int64))], (pk, *s), "f32", hint="tt_core")
             for g, pk, s in zip(gathers, p, shapes)]
    # PyTorch reads a negative index's digits from the end of each core, which is row x + N: say so in the index
    zero = const(np.zeros((), np.int64))
    below = host("Less", [x, zero], (bags, length), "i1", hint="tt_indices")
    wrapped = host("Add", [x, const(np.array(total, np.int64))], (bags, length), "i64", hint="tt_indices")
    index = host("Where", [below, wrapped, x], (bags, length), "i64", hint="tt_indices")
    return replace_with_bags(block, start, reduce, index, results, "emb.ttbag", cores,
                             {"cores": len(cores), "mode": mode, "rows": total}, const, host)


def _digit_order(gathers: list[Op], p: list[int], x: Value, consts: Consts) -> list[int]:
    """The gathers (of cores of p[k] rows) from the most significant digit to the least: each must read, at every
    index in [-N, N) (or a sample of them), digit k of x (of x + N for a negative x), as `emb.ttbag` reads row x's
    slice of core k."""
    ev = Eval(x, consts)
    total = math.prod(p)
    positions = math.prod(static_shape(x))
    tried = min(_EVERY, positions * _EVALUATIONS)
    if 2 * total <= tried:
        values = np.arange(-total, total, dtype=np.int64)
    else:
        values = np.random.default_rng(0).integers(-total, total, size=tried, dtype=np.int64)
        values[:6] = [-total, -1, 0, 1, total - 2, total - 1]
    candidates = [list(perm) for perm in itertools.permutations(range(len(gathers)))]
    for start in range(0, len(values), positions):
        chunk = values[start:start + positions]
        probe = np.resize(chunk, positions)  # the last chunk repeats values to fill every position
        got = [_wrapped(ev.on(g.operands[1], probe.reshape(static_shape(x))), pk)
               for g, pk in zip(gathers, p)]
        row = np.where(probe < 0, probe + total, probe)
        candidates = [c for c in candidates if _digits_are(got, c, p, row)]
        need(candidates)
    return candidates[0]


def _wrapped(index: np.ndarray, rows: int) -> np.ndarray:
    """The row PyTorch reads for each index of a gather from `rows` rows; NoMatch when one is out of range."""
    need(index.dtype == np.int64 and ((index >= -rows) & (index < rows)).all())
    return np.where(index < 0, index + rows, index).ravel()


def _digits_are(got: list[np.ndarray], order: list[int], p: list[int], row: np.ndarray) -> bool:
    stride = 1
    for k in reversed(order):
        if got[k].shape != row.shape or not (got[k] == row // stride % p[k]).all():
            return False
        stride *= p[k]
    return True


def _factorings(widths: list[int], dim: int) -> list[list[tuple[int, int, int]]]:
    """Every way to read core k's width as R_k x q_k x R_k+1, with R_0 = R_n = 1 and q_0 ... q_n-1 = dim."""
    out: list[list[tuple[int, int, int]]] = []

    def extend(k: int, left: int, shapes: list[tuple[int, int, int]]) -> None:
        w = widths[k]
        if w % left:
            return
        if k == len(widths) - 1:
            shapes = [*shapes, (left, w // left, 1)]
            if math.prod(s[1] for s in shapes) == dim:
                out.append(shapes)
            return
        for right in range(1, w // left + 1):
            if (w // left) % right == 0:
                extend(k + 1, right, [*shapes, (left, w // left // right, right)])

    extend(0, 1, [])
    return out


def _contracts(rows: Value, gathers: list[Op], shapes: list[tuple[int, int, int]], positions: int) -> bool:
    """Whether the ops from the gathered slices to `rows` compute the TT chain of cores of these shapes, at
    every position: checked on random integer slices, exactly."""
    rng = np.random.default_rng(0)
    for _ in range(_TRIALS):
        slices = {g.result: rng.integers(-_SPREAD, _SPREAD + 1, size=static_shape(g.result)).astype(np.float64)
                  for g in gathers}
        got = _evaluate(rows, slices, {})
        chain = np.ones((positions, 1, 1))
        for g, (r, q, r2) in zip(gathers, shapes):
            core = slices[g.result].reshape(positions, r, q, r2)
            chain = np.einsum("nar,nrqs->naqs", chain, core).reshape(positions, -1, r2)
        if got.shape != static_shape(rows) or not (got.reshape(positions, -1) == chain.reshape(positions, -1)).all():
            return False
    return True


def _evaluate(v: Value, slices: dict[Value, np.ndarray], memo: dict[Value, np.ndarray]) -> np.ndarray:
    """`v` from the gathered slices through the shaping ops and MatMuls only (NoMatch on anything else)."""
    if v in slices:
        return slices[v]
    if v in memo:
        return memo[v]
    op = v.owner
    need(isinstance(op, Op) and op.name == "host.onnx")
    assert isinstance(op, Op)
    kind = op.attrs["op"]
    need(kind in (*_SHAPING, "MatMul"))
    a = _evaluate(op.operands[0], slices, memo)
    if kind == "MatMul":
        out = np.matmul(a, _evaluate(op.operands[1], slices, memo))
    elif kind == "Transpose":
        out = np.transpose(a, op.attrs.get("perm"))
    else:  # Reshape, Unsqueeze, Squeeze, Flatten keep the order of the elements: the static shape says the rest
        out = a.reshape(static_shape(v))
    need(out.shape == static_shape(v))
    memo[v] = out
    return out

