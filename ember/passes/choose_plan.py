"""choose-plan: keep each embedding operation on the plan a static estimate says is cheapest.

An operation (what lower-emb made of one emb op: the nests that store its output) can run three ways:
- `core`: its nests stay on the execute unit (decouple leaves them; vectorize and simplify-mem still
  apply), as `--target=core` compiles everything;
- `decoupled`: the access unit does the lookups and the core the callbacks, exactly as -O0 leaves
  them (every later pass leaves the nests alone);
- `optimized`: decoupled, then transformed by the passes after this one in the pipeline.

The pass compiles a copy of the module each way (running the passes after it up to `to-dlc`), estimates
each operation's cycles from that IR with `cost.estimate` (static shapes, the numbers of `target`: the machine
ember-opt --machine names, the default one otherwise),
and marks the operation's nests with the plan it keeps (`plan = "core"` or `plan = "decoupled"`; no
mark for `optimized`).  The estimate is a model, so a plan replaces the one kept so far (decoupled first,
then optimized, then core) only when its estimate is at least `margin` percent lower, and the core plan
also by more than one memory miss: how the core's misses queue for its fill buffers decides whole miss
latencies there, which the estimate cannot place.  So a tiny gather, three dependent misses on every
plan, stays as -O0 leaves it.  When trip counts are known only at run time (indices of a dynamic
length), each plan is estimated over a range of sizes, and one other than -O0's is kept only if it is no
slower than -O0 at every one: -O3 must never be slower than -O0, and nothing picks a plan per run
(`decide_dynamic`).  Run without decouple after it (one ember-opt per pass), choose-plan plans for the
passes -O3 runs after it; the marks are IR, which later runs honour.  Run on a module decouple has already
transformed, it refuses: its marks would go on nests that no longer exist.  Every decision is a remark naming
the three estimates and the bound of each (or, for sizes known only at run time, the sizes tried).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field

from ..dialects.loop import STORES
from ..ir.core import Op, Value
from ..ir.diagnostics import EmberError
from ..ir.rewrite import clone
from .base import Pass, parse_pipeline
from .cost import Estimate, Target, default_target, estimate, unknown
from .presets import PRESETS

PLANS = ("decoupled", "optimized", "core")  # in the order a plan must beat the one kept before it
LEVEL_CHANGE = ("to-dlc", "codegen")  # passes past the level the estimate reads
LARGEST = 20  # sizes left to run time are tried as powers of two up to 2**20 (paper-scale index arrays)
POINTS = 200  # at most this many combinations of them per operation


@dataclass
class ChoosePlan(Pass):
    name = "choose-plan"
    summary = "keep each embedding op on the plan estimated cheapest: on the core, as -O0 leaves it, or optimized"
    margin: int = 10
    target: Target = field(default_factory=default_target, repr=False)  # the machine compiled for (ember-opt --machine)
    remarks: list[str] = field(default_factory=list, repr=False)
    later: list[Pass] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not 0 <= self.margin < 100:
            raise EmberError(f"pass 'choose-plan': margin={self.margin} is not a percentage from 0 to 99")

    def sees(self, later: list[Pass]) -> None:
        self.later = later

    def run(self, module: Op) -> None:
        works = operations(module)
        if not works:
            return
        if any(o.name.startswith(("slc.", "dlc.")) for o in module.walk()):
            # its marks go on the loop nests decouple replaces: marking what is left would plan nothing it says
            raise EmberError("pass 'choose-plan' must run before 'decouple' (right after lower-emb, as in -O3): "
                             "this module is already decoupled, so there are no loop nests left to plan",
                             works[0].loc)
        later, note = self.later, ""
        if not any(p.name == "decouple" for p in later):  # run alone: plan for what -O3 runs next
            later, note = o3_after(), " (for -O3's passes: none decouples after choose-plan in this pipeline)"
        trials = {plan: self.trial(module, plan, later) for plan in PLANS}
        for k, w in enumerate(works):
            est = {plan: estimate(trials[plan][0][k], self.target) for plan in PLANS}
            if all(e.known for e in est.values()):
                plan = self.decide(est)
                why = self.why(est) + self.why_not(est, plan)
            else:
                plan, why = self.decide_dynamic(w, k, trials)
            if plan != "optimized":
                for nest in nests_of(w):
                    if nest.name == "loop.for":
                        nest.attrs["plan"] = plan
            self.remark(w, f"{VERDICT[plan]}: {why}{note}")

    def remark(self, work: Op, text: str) -> None:
        where = f"{work.loc}: " if work.loc else ""
        self.remarks.append(f"{where}remark: choose-plan: {work.attrs['op']} {text}")

    def decide(self, est: dict[str, Estimate]) -> str:
        kept = PLANS[0]
        for plan in PLANS[1:]:
            if self.beats(est, plan, kept):
                kept = plan
        return kept

    def beats(self, est: dict[str, Estimate], plan: str, kept: str) -> bool:
        """Whether `plan` is estimated at least `margin` percent cheaper than `kept`: on the core, how the misses
        queue for the fill buffers decides whole miss latencies, which the estimate cannot place, so the core
        must also win by more than one."""
        return est[plan].cycles <= est[kept].cycles * (1 - self.margin / 100) - self.slack(plan)

    def decide_dynamic(self, work: Op, k: int, trials: dict[str, Trial]) -> tuple[str, str]:
        """Sizes left to run time: estimate every plan with each such extent a power of two from 1 to 2**20
        (the others as they are).  -O3 must never be slower than -O0, and nothing here picks a plan per run,
        so a plan replaces the one kept so far (in the static order) only if it is estimated no slower at
        every size tried (the core by one miss less) and beats it by the static rule at one at least."""
        extents = list(dict.fromkeys(u for n in nests_of(work) for o in n.walk() for x in o.operands
                                     for u in unknown(x)))
        per = min(LARGEST + 1, max(2, math.floor(POINTS ** (1 / max(1, len(extents))))))
        powers = sorted({2 ** round(LARGEST * i / (per - 1)) for i in range(per)})
        grid = list(itertools.product(powers, repeat=len(extents)))
        ests = []
        for point in grid:
            est = {}
            for plan, (nests, vmap) in trials.items():
                sizes = {(vmap.get(m, m), axis): size for (m, axis), size in zip(extents, point)}
                est[plan] = estimate(nests[k], self.target, sizes=sizes)
            if not all(e.known for e in est.values()):
                return "decoupled", ("its trip counts are known only at run time and the estimate cannot follow "
                                     "them, so -O3 keeps -O0's code")
            ests.append(est)
        kept = PLANS[0]
        for plan in PLANS[1:]:
            if (all(e[plan].cycles <= e[kept].cycles - self.slack(plan) for e in ests)
                    and any(self.beats(e, plan, kept) for e in ests)):
                kept = plan
        names = ", ".join(f"{m.name or '?'}[{axis}]" for m, axis in extents)
        tried = f"{len(grid)} sizes of {names} from 1 to 2**{LARGEST}"
        if kept != "decoupled":
            return kept, (f"sizes known only at run time ({names}); estimated no slower than -O0 at every one of "
                          f"{tried}")
        winners = [p for p in PLANS[1:] if any(self.beats(e, p, kept) for e in ests)]
        wins = [point for point, e in zip(grid, ests) if any(self.beats(e, p, kept) for p in winners)]
        if not wins:
            return kept, f"sizes known only at run time; -O0's plan is estimated cheapest at all {tried}"
        smallest = min(wins, key=math.prod)
        at = ", ".join(f"{m.name or '?'}[{axis}] = {size:,}" for (m, axis), size in zip(extents, smallest))
        return kept, (f"{' or '.join(WINNERS[p] for p in winners)} is estimated to win at {len(wins)} of {tried} "
                      f"(the smallest: {at}) and to lose at others; with sizes known only at run time -O3 keeps "
                      f"-O0's code (run-time versioning is not built)")

    def slack(self, plan: str) -> float:
        """Cycles the core plan must win by beyond the margin: one full miss."""
        return self.target.miss if plan == "core" else 0.0

    @staticmethod
    def why(est: dict[str, Estimate]) -> str:
        return ", ".join(f"{NAMES[p]} {est[p].cycles:,.0f} ({est[p].bound})" for p in PLANS) + " estimated cycles"

    def why_not(self, est: dict[str, Estimate], kept: str) -> str:
        """Why a plan estimated cheaper than the one kept did not replace it: the margin, and for the core one
        memory miss beyond it."""
        out = ""
        for p in PLANS:
            if p != kept and est[p].cycles < est[kept].cycles:
                rule = f"{self.margin:g}%" + (f" and one memory miss ({self.slack(p):,.0f} cycles)" if self.slack(p)
                                              else "")
                bar = est[kept].cycles * (1 - self.margin / 100) - self.slack(p)
                out += (f"; {CHEAPER[p]} is cheaper, but a plan must be estimated {rule} below the one kept "
                        f"(at most {bar:,.0f} here)")
        return out

    def trial(self, module: Op, plan: str, later: list[Pass]) -> Trial:
        """Each operation's nests when every operation takes `plan`: a copy of the module marked so, run
        through the `later` passes (fresh instances with the same options) up to to-dlc; and the map from
        the module's values to the copy's."""
        vmap: dict[Value, Value] = {}
        copy = clone(module, vmap)
        works = operations(copy)
        if plan != "optimized":
            for w in works:
                for nest in nests_of(w):
                    nest.attrs["plan"] = plan
        for p in later:
            if p.name in LEVEL_CHANGE:
                break
            options = {f.name: getattr(p, f.name) for f in dataclasses.fields(p) if f.repr}
            type(p)(**options).run(copy)
        return [nests_of(w) for w in works], vmap


Trial = tuple[list[list[Op]], dict[Value, Value]]


VERDICT = {"core": "kept on the core", "decoupled": "kept decoupled as at -O0, not optimized",
           "optimized": "decoupled and optimized"}
NAMES = {"core": "on the core", "decoupled": "decoupled", "optimized": "optimized"}
WINNERS = {"core": "the core", "optimized": "optimizing"}
CHEAPER = {"core": "the core plan", "optimized": "the optimized plan", "decoupled": "-O0's plan"}


def o3_after() -> list[Pass]:
    """The passes -O3 runs after choose-plan."""
    return parse_pipeline(PRESETS["O3"].split("choose-plan,", 1)[1])


def operations(module: Op) -> list[Op]:
    """The `work` records lower-emb leaves, one per embedding operation, in program order."""
    return [o for f in module.body.ops for o in f.body.ops if o.name == "work"]


def nests_of(work: Op) -> list[Op]:
    """The top-level nests (core `loop.for`, access `slc.for`) that store the operation's output."""
    out: Value = work.operands[-1]
    func = work.parent_op()
    assert func is not None
    return [n for n in func.body.ops if n.name in ("loop.for", "slc.for")
            and any(o.name in STORES and o.operands[1] is out for o in n.walk())]
