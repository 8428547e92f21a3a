"""Hostile use: the tools used the way issue 35 found them used, on the sample programs.  Four families, each a
module: special files (special.py), settings at their limits (ranges.py), interrupts at random times
(signals.py) and closed or short pipes (pipes.py).  Hypothesis draws a family, its plan and a sample, so a seed
repeats a case and a failure shrinks; each family judges its case in the fuzzer's words (crash, hang,
internal, disagreement, bound).  Special files and settings run the tools in this process; interrupts and
pipes start the installed console scripts, which costs an interpreter each.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from hypothesis import strategies as st

from . import pipes, ranges, signals, special
from .draws import evenly
from .material import Material, bases, prepare
from .oracle import Stage, Verdict

FAMILIES: dict[str, ModuleType] = {"special files": special, "settings": ranges, "interrupts": signals,
                                   "pipes": pipes}


@dataclass(frozen=True)
class Hostile:
    family: str  # a key of FAMILIES
    base: str  # the sample (a key of mutate.samples()), or material.SPIN
    plan: Any  # the family's own record of what to do
    input_seed: int

    def describe(self) -> str:
        return f"hostile use, {self.family}: {self.plan.describe()} ({self.base})"


def hostile(names: list[str]) -> st.SearchStrategy[Hostile]:
    """Cases of every family, equally often, on the small samples among `names`."""
    dae, eir = bases(names, ".dae"), bases(names, ".eir")

    def family(name: str) -> st.SearchStrategy[Hostile]:
        module = FAMILIES[name]
        return module.plans.flatmap(lambda plan: st.builds(
            Hostile, st.just(name), st.sampled_from(module.bases(plan, dae, eir) or dae), st.just(plan),
            st.integers(0, 2**32 - 1)))

    names_ = sorted(FAMILIES)
    return evenly(len(names_)).map(lambda i: names_[i]).flatmap(family)


def _material(case: Hostile, workdir: Path) -> Material:
    return prepare(case.base, case.input_seed, workdir / "hostile")


def run_hostile(case: Hostile, max_cycles: float, stage: Stage, workdir: Path) -> Verdict:
    stage(f"hostile use ({case.family}): preparing {case.base}")
    mat = _material(case, workdir)
    module = FAMILIES[case.family]
    if module is signals:
        verdict = signals.run(case.plan, mat, max_cycles, stage, workdir / "hostile-cache")
    else:
        verdict = module.run(case.plan, mat, max_cycles, stage)
    if verdict.failed:
        verdict.files, verdict.command = mat.files(), module.command(case.plan, mat, max_cycles)
    return verdict


def hostile_files(case: Hostile, max_cycles: float, workdir: Path) -> tuple[dict[str, bytes], str]:
    """The files and command of a case whose worker hung or died (made afresh in `workdir`)."""
    mat = _material(case, workdir)
    return mat.files(), FAMILIES[case.family].command(case.plan, mat, max_cycles)
