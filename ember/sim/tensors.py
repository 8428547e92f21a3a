"""Tensor storage: one numpy array per symbol, laid out at byte addresses for the cache model."""

from __future__ import annotations

import numpy as np

from ..backend.dae import Program, Symbol
from ..ir.diagnostics import EmberError
from ..ir.types import ScalarType

ALIGN = 4096


def span(nbytes: int) -> int:
    """Address space a tensor of `nbytes` takes: whole pages plus a guard page, so tensors never share a line."""
    return (nbytes + ALIGN - 1) // ALIGN * ALIGN + ALIGN


def is_table(s: Symbol) -> bool:
    """A model input or param of rank >= 2: a load starting at its column 0 reads one table row (a lookup)."""
    return s.kind in ("param", "input") and len(s.shape) >= 2


def dtype_of(name: str) -> np.dtype:
    return ScalarType(name).numpy()


class Tensors:
    """The program's tensors; each gets a page-aligned base address when it is first given data."""

    def __init__(self, program: Program):
        self.syms: list[Symbol] = program.symbols
        self.arrays: list[np.ndarray | None] = [None] * len(self.syms)
        self.base: list[int] = [0] * len(self.syms)
        self.next_addr = ALIGN
        self.origin: dict[int, str] = {}  # temp -> the host op that computed it, e.g. "Concat of input 'x'"
        # tables only ever read by gathers that count negative indices from the end: the program added the
        # row count to a negative index, and an error shows the index as the user gave it
        uses = [(w.table, w.kind == "gather" and w.negative == "wrap") for w in program.work]
        self.wrapped = {t for t, _ in uses} - {t for t, wraps in uses if not wraps}

    def describe(self, n: int) -> str:
        s = self.syms[n]
        return f"{s.kind} '{s.name}'" + (f" ({self.origin[n]})" if n in self.origin else "")

    def note_origin(self, n: int, op_type: str, sources: list[int]) -> None:
        """Remember which host op computed temp `n`, so errors about it can name the model's inputs."""
        if self.syms[n].kind == "temp":
            names = ", ".join(f"{self.syms[k].kind} '{self.syms[k].name}'" for k in sources)
            self.origin[n] = f"{op_type} of {names}" if names else op_type

    def set(self, n: int, a: np.ndarray, what: str) -> None:
        s = self.syms[n]
        want = dtype_of(s.dtype)
        if a.dtype != want:
            raise EmberError(f"{what} has dtype {a.dtype}, expected {want}")
        if a.ndim != len(s.shape) or any(d is not None and d != x for d, x in zip(s.shape, a.shape)):
            shape = "[" + ", ".join("?" if d is None else str(d) for d in s.shape) + "]"
            raise EmberError(f"{what} has shape {list(a.shape)}, expected {shape}")
        self.arrays[n] = a if a.flags.c_contiguous else a.copy(order="C")
        self.reserve(n, a.nbytes)

    def reserve(self, n: int, nbytes: int) -> None:
        """The next page-aligned base address for symbol n (what `set` gives data, timing-only gives none)."""
        self.base[n] = self.next_addr
        self.next_addr += span(nbytes)

    def set_scratch(self, n: int, a: np.ndarray) -> None:
        """A popped buffer: kept at one base address while it fits, as a core's scratch area would be."""
        want = self.get_dtype(n)
        old = self.arrays[n]
        if old is not None and old.nbytes >= a.nbytes:
            self.arrays[n] = a.astype(want, copy=False)
            return
        self.set(n, a.astype(want, copy=False), self.describe(n))

    def get_dtype(self, n: int) -> np.dtype:
        return dtype_of(self.syms[n].dtype)

    def get(self, n: int) -> np.ndarray:
        a = self.arrays[n]
        if a is None:
            raise EmberError(f"{self.describe(n)} is read before it has been given a value")
        return a

    def flat_index(self, n: int, idx: tuple[int, ...]) -> int:
        """Row-major element number of `idx`, with a bounds check naming the tensor."""
        a = self.get(n)
        flat = 0
        for axis, (i, d) in enumerate(zip(idx, a.shape)):
            if not 0 <= i < d:
                given = list(idx)
                if axis == 0 and i < 0 and n in self.wrapped:
                    given[0] = i - d
                raise EmberError(f"index {given[axis]} is out of range for dimension {axis} of {self.describe(n)} "
                                 f"(size {d}) at [{', '.join(map(str, given))}]")
            flat = flat * d + i
        return flat

    def typed_index(self, n: int, idx: tuple[int, ...], nbytes: int) -> int:
        """Flat number of the first byte of a typed read (`ld.T`, `mem.T`) of `nbytes` bytes of byte tensor n at
        `idx`: every byte must lie in the last axis."""
        flat = self.flat_index(n, idx)
        extent = self.get(n).shape[-1]
        if idx[-1] + nbytes > extent:
            raise EmberError(f"a read of {nbytes} bytes at index {idx[-1]} runs past the end of dimension "
                             f"{len(idx) - 1} of {self.describe(n)} (size {extent}) at [{', '.join(map(str, idx))}]")
        return flat

    def typed_value(self, n: int, flat: int, dtype: np.dtype) -> int | float:
        """The value of `dtype` whose bytes start at byte `flat` of byte tensor n (little-endian, as the host
        and every machine modelled are)."""
        v = self.get(n).reshape(-1)[flat:flat + dtype.itemsize].view(dtype)[0]
        return float(v) if dtype.kind in "fV" else int(v)

    def is_lookup(self, n: int, column: int) -> bool:
        """Whether a load of symbol n starting at `column` reads one table row (see `is_table`)."""
        return column == 0 and is_table(self.syms[n])

    def addr(self, n: int, flat: int) -> int:
        return self.base[n] + flat * self.get(n).itemsize
