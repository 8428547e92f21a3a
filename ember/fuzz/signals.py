"""Hostile use, interrupts at random times: `ember-sim` started as a process of its own (either engine; a
sample run, or a program that never ends under `--max-cycles inf`), sent SIGINT or SIGTERM after a drawn delay.

It must finish normally (status 0, every output complete), or stop within PROMPT seconds of the signal: on
SIGINT with status 1 and the one line `ember-sim: interrupted` (or another one-line error); on SIGTERM, which
Ember leaves to its default action, by the signal (status -15) or with status 1 and one line.  A process the
signal reached before Python had set its handler may end by the signal too: no Ember code ran yet.  Either
way no traceback, no partial outputs (all or none), nothing beside them, nothing left in its private TMPDIR,
and nothing but complete entries in its compile cache (a fresh one, or the worker's, already warm).
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

from . import scripts
from .draws import evenly
from .material import SPIN, Material
from .oracle import ENGINES, Stage, Verdict, judge_tool

PROMPT = 10.0  # seconds from the signal to the end of the process (a busy 2-core machine slows a prompt stop)
SIGNALS = ("SIGINT", "SIGINT", "SIGINT", "SIGTERM")  # ^C is what users do; SIGTERM is what a scheduler does
OUTPUTS = ((), ("--outputs",), ("--stats",), ("--outputs", "--stats"))
FILES = {"--outputs": "out.npz", "--stats": "stats.txt"}


@dataclass(frozen=True)
class Interrupt:
    engine: str
    signal: str
    delay_ms: int  # from the start of the process
    endless: bool  # the never-ending program with --max-cycles inf (else the sample, under the fuzz limit)
    fresh_cache: bool  # a new, empty compile cache (the fast engine compiles, and may be interrupted at it)
    outputs: int  # which outputs it writes: an index of OUTPUTS
    quiet: bool

    def describe(self) -> str:
        what = "a never-ending run" if self.endless else "a run"
        cache = ", fresh cache" if self.fresh_cache else ""
        return f"{self.signal} after {self.delay_ms} ms to {what} on the {self.engine} engine{cache}"


plans = st.builds(Interrupt, st.sampled_from(ENGINES), st.sampled_from(SIGNALS), evenly(2001), st.booleans(),
                  st.booleans(), st.integers(0, len(OUTPUTS) - 1), st.booleans())


def bases(plan: Interrupt, dae: list[str], eir: list[str]) -> list[str]:
    return [SPIN] if plan.endless else dae


def _args(plan: Interrupt, mat: Material, max_cycles: float) -> list[str]:
    limit = "inf" if plan.endless else f"{max_cycles:g}"
    args = [mat.rel(mat.binary), "--inputs", mat.rel(mat.inputs), "--engine", plan.engine, "--max-cycles", limit]
    for option in OUTPUTS[plan.outputs]:
        args += [option, FILES[option]]
    return args + (["-q"] if plan.quiet else [])


def command(plan: Interrupt, mat: Material, max_cycles: float) -> str:
    args = " ".join(_args(plan, mat, max_cycles))
    return (f"mkdir tmp cache; TMPDIR=tmp EMBER_CACHE_DIR=cache ember-sim {args} & sleep {plan.delay_ms / 1000:g}; "
            f"kill -{plan.signal[3:]} $!; wait $!   (levels/ holds the files)")


def run(plan: Interrupt, mat: Material, max_cycles: float, stage: Stage, cache: Path | None = None) -> Verdict:
    stage(f"ember-sim, then {plan.signal}")
    private = scripts.Private(mat.dir / "private", None if plan.fresh_cache else cache)
    before = set(p.name for p in mat.dir.iterdir())
    err_path = mat.dir / "private" / "stderr"
    proc = scripts.spawn(scripts.argv("ember-sim") + _args(plan, mat, max_cycles), mat.dir, private.env(), err_path)
    start = time.monotonic()
    try:
        proc.wait(timeout=plan.delay_ms / 1000)
    except subprocess.TimeoutExpired:  # still running: the signal goes
        pass
    sig = signal.Signals[plan.signal]
    sent = proc.poll() is None
    handled = scripts.catches(proc.pid, sig) if sent else None
    if sent:
        proc.send_signal(sig)
    stopped = scripts.finish(proc, PROMPT if sent else 600.0)
    took = time.monotonic() - start
    err = err_path.read_text(errors="replace")
    if not stopped:
        return Verdict("hang", f"ember-sim did not stop within {PROMPT:g} s of {plan.signal} "
                               f"({plan.engine} engine, sent after {plan.delay_ms} ms)", report=err)
    verdict = _judge(plan, proc.returncode, err, sent, handled)
    if verdict is None:
        verdict = _files(plan, mat, proc.returncode, before, private)
    if verdict is not None:
        verdict.report = err
        return verdict
    how = "finished" if proc.returncode == 0 else f"stopped with status {proc.returncode}"
    return Verdict("ok", f"ember-sim {how} in {took:.1f} s")


def _judge(plan: Interrupt, status: int, err: str, sent: bool, handled: bool | None) -> Verdict | None:
    """The status and the message: None when they are what the signal allows."""
    sig = signal.Signals[plan.signal]
    lines = err.splitlines()
    if status == -sig and "Traceback" not in err and (sig == signal.SIGTERM or handled is False):
        return None  # the signal's default action: SIGTERM's, or SIGINT's before Python had set its handler
    if status == 1 and sent and sig == signal.SIGINT and lines == ["ember-sim: interrupted"]:
        return None
    if sig == signal.SIGINT and _before_the_tool(err):
        return None
    problem = judge_tool("ember-sim", status, err, None)
    if problem is None:
        return None
    when = plan.signal + (" (before Python set its handler)" if handled is False else "")  # the case names the engine
    if "Traceback" in err:
        last = lines[-1] if lines else ""
        return Verdict("crash", f"ember-sim printed a traceback ({last[:80]}), status {status}, on {when}")
    return Verdict(problem[0], f"{problem[1]} on {when}")


def _before_the_tool(err: str) -> bool:
    """A KeyboardInterrupt raised before the tool's first statement, which defers Ctrl-C (ember/cli/__init__.py):
    in Python's own start-up (its site module), or while Python imports the package that statement is in."""
    if "Fatal Python error: init_import_site" in err:
        return True
    ember = [f for f in re.findall(r'File "([^"]+)"', err) if "/ember/" in f]
    return err.rstrip().endswith("KeyboardInterrupt") and all(
        f.endswith(("/ember/__init__.py", "/ember/cli/__init__.py")) for f in ember)


def _files(plan: Interrupt, mat: Material, status: int, before: set[str], private: scripts.Private) -> Verdict | None:
    """All outputs or none, each complete; nothing else left anywhere."""
    wanted = [FILES[o] for o in OUTPUTS[plan.outputs]]
    present = [n for n in wanted if (mat.dir / n).exists()]
    if status == 0 and len(present) != len(wanted):
        return Verdict("crash", f"ember-sim finished but wrote only {present} of {wanted}")
    if present and len(present) != len(wanted):
        return Verdict("crash", f"ember-sim, stopped by {plan.signal}, left partial outputs: {present} of {wanted}")
    for name in present:
        if not _complete(mat.dir / name, mat):
            return Verdict("crash", f"ember-sim left an incomplete {name} (status {status}, {plan.signal})")
    extra = sorted(set(p.name for p in mat.dir.iterdir()) - before - set(present) - {"private"})
    left = extra + private.leftovers()
    if left:
        return Verdict("crash", f"ember-sim left {left} (status {status}, {plan.signal}, {plan.engine} engine)")
    return None


def _complete(path: Path, mat: Material) -> bool:
    """An output file that is whole: the .npz loads with every output, the statistics end with their last line."""
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                return sorted(z.files) == sorted(mat.outputs) and all(z[k] is not None for k in z.files)
        text = path.read_text()
        return text.endswith("\n") and "cycles" in text
    except Exception:  # a truncated zip, say
        return False
