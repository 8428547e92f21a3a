"""Input tensors for a program the fuzzer runs: one array per input (and per param without data), from a seed.

Shapes come from the symbol table (a `?` extent gets a small size); values are what a program's work
records need when it has some (bag offsets in include-last form, indices within the table's rows), else
small integers for index-like integer inputs and floats with edge values mixed in (nan, inf, -0.0, the
largest float of the type).  The same seed gives the same arrays, so a saved failure can be rerun.
"""

from __future__ import annotations

import math

import numpy as np

from ..backend.dae import Program, Symbol
from ..sim.tensors import dtype_of

FLOAT_SPECIALS = (np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 1e-40, 3.0e38, 1e308)
MAX_BYTES = 256 << 20  # the arrays made for one program; both engines copy them, within a worker's 8 GiB


class TooLarge(Exception):
    """The program declares inputs (or params without data) larger than MAX_BYTES: a mutated extent such as
    [100000000000].  Such a program is valid, and Ember's own limits are checked on the data a user gives it;
    the fuzzer cannot make that data, so it does not run the program."""


def _float_values(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    a = rng.standard_normal(shape) * rng.choice((1.0, 10.0, 1000.0))
    special = rng.random(shape) < 0.05
    a[special] = rng.choice(FLOAT_SPECIALS, size=int(special.sum()))
    with np.errstate(over="ignore"):
        return a.astype(dtype)


def _extent(rng: np.random.Generator, d: int | None) -> int:
    return int(rng.integers(1, 9)) if d is None else d


def synthesize(program: Program, seed: int, given: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Arrays for the program's inputs by name; params without data are filled in `program.data` too.
    `given` arrays (a sample model's own inputs) are used where name, element type and rank fit."""
    rng = np.random.default_rng(seed)
    given = given or {}
    shapes: dict[int, tuple[int, ...]] = {}
    size = 0  # bytes of the arrays to make
    for n, s in enumerate(program.symbols):
        if s.kind == "input" and s.name in given and _fits(given[s.name], s):
            shapes[n] = given[s.name].shape
        elif s.kind == "param" and n in program.data:
            shapes[n] = tuple(program.data[n].shape)
        elif s.kind in ("input", "param"):
            shapes[n] = tuple(_extent(rng, d) for d in s.shape)
            size += math.prod(shapes[n]) * dtype_of(s.dtype).itemsize
    if size > MAX_BYTES:
        raise TooLarge(f"its inputs would take {size:,} bytes, more than the fuzzer makes ({MAX_BYTES:,})")
    values: dict[int, np.ndarray] = {}
    for w in program.work:  # index-like inputs of an embedding record get values that fit its table
        rows = shapes.get(w.table, (0,))[0] if w.table is not None and shapes.get(w.table) else 0
        for field in ("indices", "targets"):
            n = getattr(w, field)
            if n in shapes and n not in values and rows:
                values[n] = rng.integers(0, rows, size=shapes[n]).astype(dtype_of(program.symbols[n].dtype))
        n = w.offsets
        if n is not None and n in shapes and n not in values and len(shapes[n]) == 1 and w.indices in shapes:
            total = int(np.prod(shapes[w.indices], dtype=np.int64))
            cuts = np.sort(rng.integers(0, total + 1, size=max(shapes[n][0] - 2, 0)))
            values[n] = np.concatenate([[0], cuts, [total]])[:shapes[n][0]].astype(dtype_of(program.symbols[n].dtype))
    out: dict[str, np.ndarray] = {}
    for n, s in enumerate(program.symbols):
        if n not in shapes or (s.kind == "param" and n in program.data):
            continue
        if s.kind == "input" and s.name in given and _fits(given[s.name], s):
            a = given[s.name]
        elif n in values:
            a = values[n]
        else:
            a = _values(rng, s, shapes[n])
        if s.kind == "input":
            out[s.name] = a
        else:
            program.data[n] = a
    return out


def _fits(a: np.ndarray, s: Symbol) -> bool:
    return a.dtype == dtype_of(s.dtype) and a.ndim == len(s.shape) and \
        all(d is None or d == x for d, x in zip(s.shape, a.shape))


def _values(rng: np.random.Generator, s: Symbol, shape: tuple[int, ...]) -> np.ndarray:
    dt = dtype_of(s.dtype)
    if dt.kind == "f" or s.dtype == "bf16":
        return _float_values(rng, shape, dt)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if s.dtype == "u8":  # a byte tensor, read as every type: any byte
        return rng.integers(0, 256, size=shape).astype(dt)
    a = rng.integers(0, max(2, min(shape, default=2)), size=shape)
    odd = rng.random(shape) < 0.02  # an out-of-range value now and then: the engines must trap alike
    a[odd] = rng.choice((-1, 2**31, -2**63, 2**63 - 1), size=int(odd.sum()))
    return a.astype(dt)
