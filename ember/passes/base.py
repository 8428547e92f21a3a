"""Pass base class, the name -> pass registry, pipeline parsing and the pass manager.

A pass is a dataclass whose fields are its options (`vectorize{vl=16}` sets field `vl`); it
rewrites a module in place.  Passes self-register by name when their module is imported.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from ..ir.core import Op, verify
from ..ir.diagnostics import EmberError
from ..ir.printer import print_module
from ..ir.rewrite import RewritePattern, apply_patterns, top_level
from ..machine import Machine
from .cost import Target

PASSES: dict[str, type[Pass]] = {}


class Decline(Exception):
    """A pass's preconditions do not hold for one loop: it leaves the loop alone with a remark."""


@dataclass
class Pass:
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        if cls.name:
            PASSES[cls.name] = cls

    def run(self, module: Op) -> None:
        raise NotImplementedError

    def sees(self, later: list[Pass]) -> None:
        """Told by run_passes which passes run after this one (choose-plan compiles trial copies with them)."""


def kept(op: Op) -> bool:
    """Whether `op` belongs to a nest choose-plan keeps as -O0 leaves it: optimizations leave it alone."""
    return top_level(op).attrs.get("plan") == "decoupled"


@dataclass
class PatternPass(Pass):
    """A pass made of rewrite patterns (ir/rewrite.py) applied over the module; each `Decline` becomes a
    positioned remark `loc: remark: <pass>: <what> <why>`, where `declined` says what was left alone."""

    declined: ClassVar[str] = "not transformed"
    remarks: list[str] = field(default_factory=list, repr=False)

    def patterns(self) -> list[RewritePattern]:
        raise NotImplementedError

    def run(self, module: Op) -> None:
        apply_patterns(module, [Unless(kept, p) for p in self.patterns()], Decline,
                       lambda op, e: self.remarks.append(f"{op.loc}: remark: {self.name}: {self.declined}: {e}"))


@dataclass
class Unless(RewritePattern):
    """`pattern`, except on ops `skip` says to leave alone."""

    skip: Callable[[Op], bool]
    pattern: RewritePattern

    def match_and_rewrite(self, op: Op) -> bool:
        return not self.skip(op) and self.pattern.match_and_rewrite(op)


def parse_pipeline(text: str, machine: Machine | None = None) -> list[Pass]:
    """`a,b{k=v,k2=v2},c` -> pass instances; unknown names and options are errors.  A pass that estimates cost
    (a `target` field) estimates for `machine`, the machine the program will run on (the default one if None)."""
    out: list[Pass] = []
    i, n = 0, len(text)
    while i < n:
        j = i
        while j < n and text[j] not in ",{":
            j += 1
        name = text[i:j].strip()
        opts: dict[str, str] = {}
        if j < n and text[j] == "{":
            k = text.find("}", j)
            if k < 0:
                raise EmberError(f"pass pipeline: missing '}}' after '{name}{{'")
            for item in filter(None, (s.strip() for s in text[j + 1:k].split(","))):
                key, eq, val = item.partition("=")
                if not eq:
                    raise EmberError(f"pass pipeline: option '{item}' of '{name}' needs a value (key=value)")
                opts[key.strip()] = val.strip()
            j = k + 1
        if name:
            out.append(make_pass(name, opts))
        while j < n and text[j] in ", ":
            j += 1
        i = j
    if machine is not None:
        target = Target.of(machine)
        for p in out:
            if any(f.name == "target" for f in dataclasses.fields(p)):
                p.target = target  # type: ignore[attr-defined]
    return out


def make_pass(name: str, opts: dict[str, str]) -> Pass:
    cls = PASSES.get(name)
    if cls is None:
        raise EmberError(f"unknown pass '{name}' (known: {', '.join(sorted(PASSES))})")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.repr}  # repr=False fields are internal
    kwargs: dict[str, object] = {}
    for k, v in opts.items():
        if k not in fields:
            raise EmberError(f"pass '{name}' has no option '{k}' (options: {', '.join(fields) or 'none'})")
        typ = fields[k].type
        try:
            kwargs[k] = int(v) if typ in (int, "int") else (v.lower() in ("1", "true") if typ in (bool, "bool") else v)
        except ValueError:
            raise EmberError(f"pass '{name}': option '{k}' needs an integer, got '{v}'") from None
    return cls(**kwargs)


def run_passes(module: Op, passes: list[Pass], print_after_all: bool = False, timings: dict[str, float] | None = None,
               out: Callable[[str], None] = lambda s: print(s, file=sys.stderr, end="")) -> None:
    verify(module)
    for i, p in enumerate(passes):
        p.sees(passes[i + 1:])
        t0 = time.perf_counter()
        p.run(module)
        verify(module)
        if timings is not None:
            timings[p.name] = timings.get(p.name, 0.0) + time.perf_counter() - t0
        if print_after_all:
            out(f"// -----// IR after {p.name} //----- //\n{print_module(module)}")
