"""Hostile use, settings at their limits: `--set` of a machine key at, just inside and just outside the range its
validation states, odd values (NaN, inf, -1, 0, 2**31, 2**63, 1e308, 1e-300, words), and malformed settings.

The ranges are read from the validator, not copied: each numeric key is set to -1 (and to a huge value) and
the refusal's own words ("must be from 1 to 1,048,576", "must be positive", "must be a finite number >= 0")
give its range.  A value outside it must be refused in one line naming the key.  A value inside may be refused
by another rule of the machine (a power of two, a multiple of the line size) in one line naming a key, or run:
then both engines must agree, and a run that finishes must do so within its small --max-cycles.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
import shlex
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from hypothesis import strategies as st

from ..backend.binary import disassemble
from ..ir.diagnostics import EmberError
from ..machine import load_machine
from .cases import installed_tool
from .material import SPIN, Material
from .oracle import Stage, Verdict, compare, judge_tool, run_engines, run_tool

ODD = ("nan", "inf", "-inf", "-1", "0", "2147483648", "9223372036854775808", "1e308", "1e-300", "abc", "", " 7 ",
       "0x10", "1_000", "1e3", "true", "\u0663")
MALFORMED = ("noequals", "=5", "unknown.key=1", "caches.l9.ways=2", "access=1", "execute.simd_bits.x=8")
CYCLES = (20000.0, 1.0, 50.0, 1000.0)  # the first, which hypothesis favours, lets the samples finish


@dataclass(frozen=True)
class Range:
    lo: float
    hi: float | None  # None: no top
    open_lo: bool  # "must be positive": lo itself is outside
    integer: bool

    def holds(self, v: float) -> bool:
        above = v > self.lo if self.open_lo else v >= self.lo
        return not math.isnan(v) and above and (self.hi is None or v <= self.hi)


def _number(text: str) -> float:
    return float(Fraction(text.replace(",", ""))) if "/" in text else float(text.replace(",", ""))


def _probe(key: str, integer: bool) -> Range | None:
    """The range the validator states for `key`, from its refusals of -1 and of a huge value."""
    m = load_machine("default")
    for value in ("-1", str(2**62) if integer else "1e308"):
        try:
            m.set(key, value)
        except EmberError as e:
            text = str(e)
            found = re.search(r"from (\S+) to ([\d.,e+-]+\d)", text)
            if found:
                return Range(_number(found[1]), _number(found[2]), False, integer)
            if "must be positive" in text or ">= 0" in text:
                return Range(0.0, None, "positive" in text, integer)
    return None


@functools.lru_cache(maxsize=1)
def ranges() -> dict[str, Range | None]:
    """Every numeric key of the default machine and its stated range (None: it states none)."""
    out = {}
    for key, value, _ in load_machine("default").describe():
        if re.fullmatch(r"-?\d+", value):
            out[key] = _probe(key, True)
        elif re.fullmatch(r"-?(\d[\d.e+-]*|inf|nan)", value):
            out[key] = _probe(key, False)
    return out


def _text(v: float, integer: bool) -> str:
    return str(int(v)) if integer else repr(float(v))


def edges(key: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The key's range ends and a step inside each; a step outside each (none for a key without a range)."""
    r = ranges()[key]
    if r is None:
        return (), ()
    step = (lambda v, d: v + d) if r.integer else (lambda v, d: math.nextafter(v, d * math.inf))
    inside, outside = [step(r.lo, 1)] + ([] if r.open_lo else [r.lo]), [step(r.lo, -1)] + ([r.lo] if r.open_lo else [])
    if r.hi is not None:
        inside += [r.hi, step(r.hi, -1)]
        outside.append(step(r.hi, 1))
    return tuple(_text(v, r.integer) for v in inside), tuple(_text(v, r.integer) for v in outside)


def must_refuse(setting: str) -> bool:
    """Whether the machine must refuse `setting` by its key's stated range (or its form)."""
    key, eq, text = setting.partition("=")
    key, text = key.strip(), text.strip()
    if not eq or key not in ranges():
        return True
    r = ranges()[key]
    if r is None:
        return False
    try:
        v = float(_parse_int(text)) if r.integer else float(text)
    except (ValueError, OverflowError):
        return True
    return not r.holds(v)


def _parse_int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        return int(text)


@dataclass(frozen=True)
class Settings:
    sets: tuple[str, ...]  # KEY=VALUE, as given to --set, in order
    max_cycles: float

    def describe(self) -> str:
        return f"--set {' --set '.join(map(repr, self.sets))} --max-cycles {self.max_cycles:g}"


def _value(key: str) -> st.SearchStrategy[str]:
    """Inside its range half the time (those run), else outside or odd."""
    inside, outside = edges(key)
    return st.one_of(*[st.sampled_from(v) for v in (inside, inside, outside, ODD) if v])


def _one() -> st.SearchStrategy[str]:
    good = st.sampled_from(sorted(ranges())).flatmap(lambda k: _value(k).map(lambda v: f"{k}={v}"))
    return st.one_of(good, good, good, st.sampled_from(MALFORMED))


plans = st.deferred(lambda: st.builds(Settings, st.lists(_one(), min_size=1, max_size=3).map(tuple),
                                      st.sampled_from(CYCLES)))


def bases(plan: Settings, dae: list[str], eir: list[str]) -> list[str]:
    return [*dae, SPIN]


def command(plan: Settings, mat: Material, max_cycles: float) -> str:
    sets = "".join(f" --set {shlex.quote(s)}" for s in plan.sets)
    sim = (f"ember-sim {mat.binary.name} --inputs {mat.inputs.name} --max-cycles {plan.max_cycles:g}{sets} -q "  # type: ignore[union-attr]
           "--stats /dev/stdout")
    return f"{sim} --engine reference; {sim} --engine fast"


def _refused_at(sets: tuple[str, ...]) -> int | None:
    """The setting the machine refuses (applied in order, as --set is), or None."""
    m = load_machine("default")
    for k, s in enumerate(sets):
        try:
            m = m.with_overrides([s])
        except EmberError:
            return k
    return None


def run(plan: Settings, mat: Material, max_cycles: float, stage: Stage) -> Verdict:
    at = _refused_at(plan.sets)
    wrong = [s for s in plan.sets if must_refuse(s)]
    if at is None:
        if wrong:
            return Verdict("crash", f"--set {wrong[0]!r} was accepted, outside the range its key's own error states")
        return _both(plan, mat, stage)
    stage("ember-sim --set")
    args = [mat.rel(mat.binary), "--inputs", mat.rel(mat.inputs), "-q", "--max-cycles", f"{plan.max_cycles:g}"]
    for s in plan.sets:
        args += ["--set", s]
    with contextlib.chdir(mat.dir):
        status, err, escaped = run_tool(installed_tool("ember-sim"), "ember-sim", args)
    problem = judge_tool("ember-sim", status, err, escaped)
    if problem is not None:
        return Verdict(*problem, report=err)
    first = err.splitlines()[0] if err else ""
    if status != 1 or len(err.splitlines()) != 1:
        return Verdict("crash", f"refusing --set {plan.sets[at]!r}, ember-sim gave status {status} and "
                                f"{len(err.splitlines())} lines", report=err)
    key = plan.sets[at].partition("=")[0].strip()
    if key in ranges() and must_refuse(plan.sets[at]):
        named = f"'{key}'" in first  # outside its range: the key set, by name
    else:
        named = "key '" in first or "keys '" in first or "--set" in first  # another rule: the key it concerns
    if not named:
        return Verdict("crash", f"the refusal of --set {plan.sets[at]!r} does not name its key: {first[:150]!r}")
    return Verdict("rejected", first[:200])


def _both(plan: Settings, mat: Material, stage: Stage) -> Verdict:
    """Accepted settings: both engines, which must agree and stop within the cycle limit."""
    program = disassemble(mat.binary.read_bytes(), mat.binary.name)  # type: ignore[union-attr]
    with np.load(mat.inputs) as z:
        inputs = {k: z[k] for k in z.files}
    results, compiled = run_engines(program, inputs, plan.sets, plan.max_cycles, stage)
    for engine, r in results.items():
        if r[0] == "ok" and r[2]["cycles"] > plan.max_cycles:
            return Verdict("bound", f"the {engine} engine finished at cycle {r[2]['cycles']:g}, past --max-cycles "
                                    f"{plan.max_cycles:g}")
    verdict = compare(results["reference"], results["fast"])
    verdict.ran, verdict.compiled = True, compiled
    return verdict
