"""The fuzzing campaign: hypothesis draws cases, a worker runs them, failures are shrunk, counted and saved.

Hypothesis drives generation (with a fixed seed, so a run is repeatable) and, when a case fails in a
way not seen before, shrinks it: the failure must keep its signature (status and message, numbers
aside) while hypothesis looks for a smaller case, within a time budget.  Then generation resumes with
the next seed for the cases left, so one campaign reports every distinct failure it meets, each
minimized once and counted every time.  `jobs` lanes run side by side in forked processes, each with
its own seed and worker.

Repeatable means the seed alone picks the cases.  Hypothesis (6.170, which the `test` extra pins) also
draws, now and then, a literal it found in the source of the project modules imported so far, so the
same seed gave other programs in a process that had imported more of Ember (a test run, against
`ember-fuzz`).  The campaign turns that pool off while it draws (`_code_constants_off`); the edge values
the generator needs are its own (programs.py).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis import strategies as st

from .cases import BIN_OPTIONS, EIR_OPTIONS, case_files
from .draws import evenly
from .hostile import FAMILIES, Hostile, hostile, hostile_files
from .mutate import Mutated, mutated, samples
from .oracle import FAILURES, Verdict
from .programs import Generated, programs
from .worker import Worker

# of every 20 cases: 11 generated programs, 3 mutated .dae, 2 mutated .eir, 2 mutated .bin, 2 hostile uses
# (hostile.py; interrupts and pipes start real processes, an interpreter each).  Hypothesis keeps these shares only
# roughly: in 1,000 draws, 65-70% were generated programs and about 8% hostile use.
MIX = ("gen",) * 11 + ("dae",) * 3 + ("eir",) * 2 + ("bin",) * 2 + ("hostile",) * 2
Log = Callable[[str], None]


@dataclass
class Failure:
    """One distinct failure: the smallest case found for it and how often it came up."""

    verdict: Verdict
    description: str
    count: int = 1
    minimized: bool = False


@dataclass
class Summary:
    runs: int = 0  # cases run
    both: int = 0  # programs run on both engines
    compiled: int = 0  # of those, run compiled by the fast engine (not handed to the reference engine)
    refused: int = 0  # cases a tool or the assembler refused cleanly
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FAILURES, 0))
    hostile: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FAMILIES, 0))  # hostile cases by family
    failures: dict[str, Failure] = field(default_factory=dict)  # by signature
    seconds: float = 0.0

    @property
    def failed(self) -> int:
        return sum(self.counts.values())

    def merge(self, other: Summary) -> None:
        self.runs += other.runs
        self.both += other.both
        self.compiled += other.compiled
        self.refused += other.refused
        for k, v in other.counts.items():
            self.counts[k] = self.counts.get(k, 0) + v
        for k, v in other.hostile.items():
            self.hostile[k] = self.hostile.get(k, 0) + v
        for sig, f in other.failures.items():
            mine = self.failures.get(sig)
            if mine is None:
                self.failures[sig] = f
            else:
                mine.count += f.count

    def line(self) -> str:
        c = self.counts
        extra = f", {c['fuzzer-error']} fuzzer errors" if c.get("fuzzer-error") else ""
        h = sum(self.hostile.values())
        hostile = f"; {h} hostile uses: " + ", ".join(f"{n} {k}" for k, n in self.hostile.items()) if h else ""
        return (f"{self.runs} programs run ({self.both} on both engines, {self.compiled} of them compiled by the "
                f"fast engine; {self.refused} refused cleanly{hostile}) in {self.seconds:.0f} s: {c['crash']} crashes, "
                f"{c['hang']} hangs, {c['disagreement']} disagreements, {c['internal']} internal errors, "
                f"{c['bound']} runs past a bound{extra}")


def cases(names: list[str]) -> st.SearchStrategy[Generated | Mutated | Hostile]:
    """Every kind of case in the proportions of MIX (a kind with no sample file falls back to a program)."""
    eir = [n for n in names if n.endswith(".eir")]
    dae = [n for n in names if n.endswith(".dae")]
    kinds: dict[str, st.SearchStrategy[Any]] = {"gen": programs()}
    if eir:
        kinds["eir"] = mutated("eir", eir, EIR_OPTIONS)
    if dae:
        kinds["dae"] = mutated("dae", dae, ("",))
        kinds["bin"] = mutated("bin", dae, BIN_OPTIONS)
        kinds["hostile"] = hostile(names)
    pick = evenly(len(MIX)).map(lambda i: MIX[i])  # sampled_from, or i % len(MIX), would favour some kinds
    return pick.flatmap(lambda k: kinds.get(k, kinds["gen"]))


@contextlib.contextmanager
def _code_constants_off() -> Iterator[None]:
    """Hypothesis without the literals of the modules imported so far (see the module's docstring).  The hooks
    are internal to hypothesis, which the `test` extra pins; were they gone, the draws would still be valid."""
    from hypothesis.internal.conjecture import providers

    saved = getattr(providers, "_get_local_constants", None)
    cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
    if saved is None or not isinstance(cache, dict):
        yield
        return
    providers._get_local_constants = providers.Constants  # an empty pool: integers, floats, bytes, strings
    cache.clear()  # the permitted constants of each kind of draw, worked out from the pool
    try:
        yield
    finally:
        providers._get_local_constants = saved
        cache.clear()


class _Found(Exception):
    """Raised in the hypothesis test to make it shrink the case at hand."""


class Lane:
    """One sequence of cases on one worker, from one seed."""

    def __init__(self, runs: int, seed: int, max_cycles: float, timeout: float, shrink_seconds: float, log: Log):
        self.runs, self.seed = runs, seed
        self.worker = Worker(max_cycles, timeout)
        self.shrink_seconds = shrink_seconds
        self.log = log
        self.summary = Summary()
        self.target: str | None = None  # the signature being shrunk
        self.best: tuple[Any, Verdict] | None = None
        self.deadline = 0.0

    def run(self) -> Summary:
        t0 = time.monotonic()
        strategy = cases(list(samples()))
        round_ = 0
        try:
            with _code_constants_off():
                while self.summary.runs < self.runs:
                    self.target = None
                    test = self.hypothesis_test(strategy, self.runs - self.summary.runs, self.seed * 100_003 + round_)
                    try:
                        test()
                    except Exception:  # _Found, or hypothesis giving up on a failure that did not replay (a hang)
                        pass
                    if self.target is None:
                        break  # every case was drawn
                    self.finish_shrinking()
                    round_ += 1
        finally:
            self.worker.stop()
        self.summary.seconds = time.monotonic() - t0
        return self.summary

    def hypothesis_test(self, strategy: st.SearchStrategy[Any], n: int, s: int) -> Callable[[], None]:
        @settings(database=None, max_examples=n, deadline=None, suppress_health_check=list(HealthCheck),
                  phases=(Phase.generate, Phase.shrink), report_multiple_bugs=False, verbosity=Verbosity.quiet,
                  print_blob=False)
        @seed(s)
        @given(strategy)
        def test(case: Any) -> None:
            if self.target is not None:
                self.shrink_step(case)
            else:
                self.step(case)

        return test

    def verdict(self, case: Any) -> Verdict:
        v = self.worker.run(case)
        if v.failed and not v.files:  # the worker hung or died: the files come from the case itself
            if isinstance(case, Hostile):
                with tempfile.TemporaryDirectory(prefix="ember-fuzz-") as tmp:
                    v.files, v.command = hostile_files(case, self.worker.max_cycles, Path(tmp))
            else:
                v.files, v.command = case_files(case, self.worker.max_cycles)
        return v

    def step(self, case: Any) -> None:
        v = self.verdict(case)
        s = self.summary
        s.runs += 1
        if s.runs % 250 == 0:
            self.log(f"progress: lane {self.seed}: {s.runs} of {self.runs} programs, {s.failed} failures")
        s.both += v.ran
        s.compiled += v.ran and v.compiled
        s.refused += v.status == "rejected"
        if isinstance(case, Hostile):
            s.hostile[case.family] += 1
        if not v.failed:
            return
        s.counts[v.status] = s.counts.get(v.status, 0) + 1
        sig = v.signature()
        known = s.failures.get(sig)
        if known is not None:
            known.count += 1
            return
        s.failures[sig] = Failure(v, case.describe())
        shrinking = "; shrinking" if self.shrink_seconds > 0 else ""
        self.log(f"found: {v.status}: {v.detail} ({case.describe()}){shrinking}")
        if self.shrink_seconds <= 0:
            return
        self.target, self.best = sig, (case, v)
        self.deadline = time.monotonic() + self.shrink_seconds
        raise _Found

    def shrink_step(self, case: Any) -> None:
        if time.monotonic() > self.deadline:
            return
        v = self.verdict(case)
        if v.signature() == self.target:
            self.best = (case, v)
            raise _Found

    def finish_shrinking(self) -> None:
        assert self.target is not None and self.best is not None
        case, v = self.best
        f = self.summary.failures[self.target]
        f.verdict, f.description, f.minimized = v, case.describe(), True


def _lane_process(conn: Any, args: tuple) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ^C is the parent's, which ends the lanes
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _end_lane)
    summary = Lane(*args, log=lambda line: conn.send(("log", line))).run()
    conn.send(("done", summary))


def _end_lane(signum: int, frame: Any) -> None:
    raise SystemExit(1)  # through Lane.run's finally, which stops the lane's worker


def campaign(runs: int, seed: int = 0, max_cycles: float = 1e5, timeout: float = 30.0, jobs: int = 1,
             shrink_seconds: float = 60.0, log: Log | None = None) -> Summary:
    """Run `runs` cases (split over `jobs` lanes); returns the merged counts and distinct failures."""
    log = log or (lambda _line: None)
    t0 = time.monotonic()
    if jobs <= 1:
        total = Lane(runs, seed, max_cycles, timeout, shrink_seconds, log).run()
    else:
        ctx = multiprocessing.get_context("fork")
        lanes = []
        for j in range(jobs):
            share = runs // jobs + (j < runs % jobs)
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_lane_process, args=(child, (share, seed * jobs + j, max_cycles, timeout,
                                                               shrink_seconds)))
            p.start()
            child.close()
            lanes.append((p, parent))
        try:
            total = _gather(lanes, log)
        finally:  # interrupted (^C, SIGTERM): end the lanes, which stop their workers, before this process goes
            for p, _ in lanes:
                if p.is_alive():
                    p.terminate()
            for p, _ in lanes:
                p.join()
    total.seconds = time.monotonic() - t0
    return total


def _gather(lanes: list[tuple[Any, Any]], log: Log) -> Summary:
    """The lanes' log lines as they come and their summaries merged, until every lane is done."""
    total = Summary()
    open_lanes = {conn: p for p, conn in lanes}
    while open_lanes:  # every lane's log lines as they come, not one lane after the other
        for conn in wait(list(open_lanes)):
            p = open_lanes[conn]
            try:
                kind, value = conn.recv()
            except EOFError:
                p.join()
                total.counts["fuzzer-error"] += 1
                total.failures[f"fuzzer-error: lane {p.pid} died"] = Failure(
                    Verdict("fuzzer-error", f"a lane process died (exit {p.exitcode})"), "a whole lane")
                del open_lanes[conn]
                continue
            if kind == "log":
                log(value)
            else:
                total.merge(value)
                p.join()
                del open_lanes[conn]
    return total


def save(summary: Summary, out: Path) -> list[Path]:
    """Each distinct failure in its own directory under `out`: the input files, and case.txt with a
    one-line description first, then the command that reruns it and both engines' results."""
    saved = []
    for k, (sig, f) in enumerate(sorted(summary.failures.items())):
        d = out / f"{k:03d}-{f.verdict.status}"
        d.mkdir(parents=True, exist_ok=True)
        for name, data in f.verdict.files.items():
            (d / name).write_bytes(data)
        text = [f"{f.verdict.status}: {f.verdict.detail}",
                f"case: {f.description}{' (minimized by hypothesis)' if f.minimized else ''}; seen {f.count} times",
                f"signature: {sig}"]
        if f.verdict.command:
            text.append(f"command: {f.verdict.command}")
        if f.verdict.report:
            text += ["", f.verdict.report]
        (d / "case.txt").write_text("\n".join(text) + "\n")
        saved.append(d)
    return saved
