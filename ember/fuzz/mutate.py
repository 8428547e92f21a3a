"""Mutations of the sample files: what a careless edit, a bad disk or an attacker would hand the tools.

A mutation is a small record (operation and two numbers) drawn by hypothesis, so a failure shrinks to
the fewest, simplest mutations.  Text files (`.eir`, `.dae`) get byte flips, token swaps, numbers
replaced by edge values (0, -1, 2**63 - 1, -2**63, 2**64, 1e308, nan, inf, lane counts past the
machine's), and lines dropped, duplicated or swapped.  Binaries (`.bin`) get byte flips, 64-bit edge
values written over their bytes, truncation and insertion; most are then resealed (length field and
CRC recomputed), so the decoder's own checks are reached, not only the checksum.
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

EDGE_NUMBERS = ("0", "-1", "1", "2", "9223372036854775807", "-9223372036854775808", "18446744073709551616",
                "1e308", "-1e308", "nan", "inf", "-inf", "0.5", "4096", "4097", "100000000000", "3000000", "-3",
                "65536", "1e-320")
EDGE_INT64 = (0, -1, 1, 2**63 - 1, -2**63, 2**32, 2**31 - 1, 4097, 10**11, 255)
TEXT_OPS = ("flip", "swap_tokens", "number", "number", "number", "drop", "dup", "swap_lines")
BIN_OPS = ("flip", "flip", "int64", "int64", "truncate", "insert")
_NUMBER = re.compile(rb"-?\d+(\.\d+)?([eE][-+]?\d+)?|\bnan\b|\binf\b")
_TOKEN = re.compile(rb"[^\s,\[\]{}()<>:=]+")


@dataclass(frozen=True)
class Mutation:
    op: str
    a: int
    b: int

    def __str__(self) -> str:
        return f"{self.op}({self.a}, {self.b})"


@dataclass
class Mutated:
    """A sample file and the mutations to apply to it; `reseal` recomputes a binary's length and CRC."""

    kind: str  # "eir", "dae" or "bin"
    base: str  # the sample's name (a key of samples())
    mutations: tuple[Mutation, ...]
    reseal: bool
    option: str  # the tool option (an ember-opt pipeline, an ember-sim engine), "" for none
    input_seed: int

    def describe(self) -> str:
        seal = ", resealed" if self.kind == "bin" and self.reseal else ""
        return f"{self.base} mutated by {', '.join(map(str, self.mutations))}{seal}"


def mutated(kind: str, bases: list[str], options: tuple[str, ...]) -> st.SearchStrategy[Mutated]:
    """Mutations of one of `bases` (sample names of this kind), with one of the tool `options`."""
    ops = BIN_OPS if kind == "bin" else TEXT_OPS
    one = st.builds(Mutation, st.sampled_from(ops), st.integers(0, 2**20), st.integers(0, 2**20))
    return st.builds(Mutated, st.just(kind), st.sampled_from(bases), st.lists(one, min_size=1, max_size=4).map(tuple),
                     st.booleans() | st.just(True), st.sampled_from(options), st.integers(0, 2**32 - 1))


def apply(data: bytes, case: Mutated) -> bytes:
    """The mutated bytes."""
    if case.kind == "bin":
        body = data[:-4]
        for m in case.mutations:
            body = _mutate_bin(body, m)
        if case.reseal:
            if len(body) >= 16:
                body = body[:12] + struct.pack("<I", len(body) + 4) + body[16:]
            return body + struct.pack("<I", zlib.crc32(body))
        return body + data[-4:]
    for m in case.mutations:
        data = _mutate_text(data, m)
    return data


def _mutate_bin(body: bytes, m: Mutation) -> bytes:
    if not body:
        return body
    at = m.a % len(body)
    if m.op == "flip":
        return body[:at] + bytes([m.b % 256]) + body[at + 1:]
    if m.op == "int64":
        return body[:at] + struct.pack("<q", EDGE_INT64[m.b % len(EDGE_INT64)]) + body[at + 8:]
    if m.op == "truncate":
        return body[:at]
    return body[:at] + bytes([m.b % 256]) * (1 + m.b % 7) + body[at:]


def _mutate_text(data: bytes, m: Mutation) -> bytes:
    lines = data.split(b"\n")
    if m.op == "flip" and data:
        at = m.a % len(data)
        return data[:at] + bytes([m.b % 256]) + data[at + 1:]
    if m.op in ("swap_tokens", "number"):
        spans = [x.span() for x in (_TOKEN if m.op == "swap_tokens" else _NUMBER).finditer(data)]
        if not spans:
            return data
        i = spans[m.a % len(spans)]
        if m.op == "number":
            return data[:i[0]] + EDGE_NUMBERS[m.b % len(EDGE_NUMBERS)].encode() + data[i[1]:]
        j = spans[m.b % len(spans)]
        (i, j) = sorted((i, j))
        if i == j:
            return data
        return data[:i[0]] + data[j[0]:j[1]] + data[i[1]:j[0]] + data[i[0]:i[1]] + data[j[1]:]
    at, to = m.a % len(lines), m.b % len(lines)
    if m.op == "drop":
        del lines[at]
    elif m.op == "dup":
        lines.insert(to, lines[at])
    elif m.op == "swap_lines":
        lines[at], lines[to] = lines[to], lines[at]
    return b"\n".join(lines)


def samples_dir() -> Path | None:
    """The repository's samples/ directory, when Ember runs from a checkout (an installed Ember has none)."""
    d = Path(__file__).resolve().parents[2] / "samples"
    return d if (d / "levels").is_dir() else None


def samples() -> dict[str, Path]:
    """Every sample file the mutator starts from, by a short name: the levels' `.eir` and `.dae` files and
    the hand-written `.dae` kernels (the latter ship with Ember, so an installed Ember has those)."""
    out: dict[str, Path] = {}
    here = Path(__file__).resolve().parents[1] / "bench" / "handwritten"
    for p in sorted(here.glob("*.dae")):
        out[f"handwritten/{p.name}"] = p
    d = samples_dir()
    if d is not None:
        for p in sorted((d / "levels").glob("*")):
            if p.suffix in (".eir", ".dae"):
                out[f"levels/{p.name}"] = p
    return out


def model_inputs(dae: Path) -> Path | None:
    """The `.in.npz` of the sample model a levels file came from (bag_sum.ts.O1.dae -> bag_sum.in.npz)."""
    d = samples_dir()
    if d is None or dae.parent.name != "levels":
        return None
    p = d / "models" / f"{dae.name.split('.')[0]}.in.npz"
    return p if p.exists() else None
