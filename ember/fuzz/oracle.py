"""Running one fuzz case and judging it: what counts as a clean refusal, and when two engines agree.

A tool's run is clean when it exits 0, or exits 1 with an error on its first line (`tool: ... error:
...`, at most followed by the source line and a caret) that is not an "internal error".  Anything else
(another status, an exception escaping the command, a traceback) is a crash.  A valid program runs on
both engines; they agree when both stop with the same error text, or both finish with bitwise-equal
outputs (any NaN equals any NaN, -0.0 differs from 0.0), equal dtypes and shapes, and the same
statistics in the same order, host-time ones aside.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO

import numpy as np

from ..backend.dae import Program
from ..ir.diagnostics import EmberError
from ..machine import load_machine
from ..sim import engines
from ..sim.fast import engine as fast
from ..sim.stats import Stats

HOST_TIME = frozenset({"host_seconds", "sim_cycles_per_host_second", "lookups_per_host_second"})
ENGINES = ("reference", "fast")
FAILURES = ("crash", "hang", "disagreement", "internal", "bound",  # bound: a run faster than its speed of light
            "fuzzer-error")  # fuzzer-error: a bug in ember.fuzz itself


@dataclass
class Verdict:
    """What one case came to.  `detail` is one line; `report` holds both engines' results for a saved case."""

    status: str
    detail: str = ""
    compiled: bool = False  # the fast engine ran compiled code (it did not hand the program to the reference)
    ran: bool = False  # a program ran on both engines
    files: dict[str, bytes] = field(default_factory=dict)  # file name -> contents, to save when the case fails
    command: str = ""
    report: str = ""

    @property
    def failed(self) -> bool:
        return self.status in FAILURES

    def signature(self) -> str:
        """The kind of failure, numbers left out: failures with the same signature are one bug."""
        return self.status + ": " + re.sub(r"-?\d[\d.e+-]*", "#", self.detail)[:120]


Stage = Callable[[str], None]  # told what is about to run, so a hang can be attributed


def run_tool(main: object, prog: str, args: Sequence[str], stdout: IO[str] | None = None
             ) -> tuple[int, str, str | None]:
    """Run a command in this process as its console script would: (exit status, stderr, escaped exception).  What
    it prints goes to `stdout`, or nowhere."""
    err = io.StringIO()
    status = 0
    escaped = None
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(stdout or io.StringIO()):
        try:
            main.main(args=list(args), prog_name=prog, standalone_mode=True)  # type: ignore[attr-defined]
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else 1
        except BaseException as e:  # an exception the command did not catch: a user would see a traceback
            escaped = "".join(traceback.format_exception_only(type(e), e)).strip()
            status = -1
    return status, err.getvalue(), escaped


def judge_tool(prog: str, status: int, stderr: str, escaped: str | None) -> tuple[str, str] | None:
    """None when the run was clean, else (status, one-line detail)."""
    if escaped is not None:
        return "crash", f"{prog} raised {escaped.splitlines()[-1]}"
    if status not in (0, 1):
        return "crash", f"{prog} exited with status {status}"
    if "Traceback (most recent call last)" in stderr:
        return "crash", f"{prog} printed a traceback"
    if status == 1:
        lines = [ln for ln in stderr.splitlines() if not ln.startswith(f"{prog}: note:")]
        first = lines[0] if lines else ""
        if "internal error" in stderr:
            return "internal", first[:300]
        if not first.startswith(f"{prog}: ") or "error" not in first:
            return "crash", f"{prog} failed without an error line: {first[:200]!r}"
        if len(lines) > 3 or (len(lines) == 3 and lines[2].strip() != "^"):
            return "crash", f"{prog}'s error is not one line (plus source and caret): {len(lines)} lines"
    return None


def error_problem(message: str) -> tuple[str, str] | None:
    """An engine's or the assembler's error message judged: internal errors and multi-line ones are failures."""
    if "internal error" in message:
        return "internal", message.splitlines()[0][:300]
    lines = message.splitlines()
    if len(lines) > 3 or (len(lines) == 3 and lines[2].strip() != "^"):
        return "crash", f"an error of {len(lines)} lines: {lines[0][:200]}"
    return None


def simulate_both(program: Program, inputs: dict[str, np.ndarray], overrides: tuple[str, ...],
                  max_cycles: float, stage: Stage) -> tuple[Verdict, dict[str, str]]:
    """Run `program` on both engines and compare; also returns each engine's result as text, for reports."""
    results, compiled = run_engines(program, inputs, overrides, max_cycles, stage)
    texts = {e: describe(r) for e, r in results.items()}
    verdict = compare(results["reference"], results["fast"])
    verdict.compiled = compiled
    verdict.ran = True
    return verdict, texts


def run_engines(program: Program, inputs: dict[str, np.ndarray], overrides: tuple[str, ...], max_cycles: float,
                stage: Stage) -> tuple[dict[str, tuple], bool]:
    """Each engine's result, ("ok", outputs, stats), ("error", message) or ("exception", text), and whether the
    fast engine ran compiled code."""
    machine = load_machine("default").with_overrides(overrides)
    results: dict[str, tuple] = {}
    compiled = False
    for engine in ENGINES:
        stage(f"the {engine} engine")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # numpy's overflow warnings: edge values are the point
                copies = {k: v.copy() for k, v in inputs.items()}  # engines.simulate: tests plant a hang there
                out, st = engines.simulate(program, copies, machine, max_cycles, engine=engine)
            results[engine] = ("ok", out, st)
        except EmberError as e:
            results[engine] = ("error", str(e))
        except Exception as e:  # an escaped exception: the command-line tools would call it an internal error
            results[engine] = ("exception", f"{type(e).__name__}: {e}".splitlines()[0][:300])
        if engine == "fast":
            compiled = not fast.notes
    return results, compiled


def compare(ref: tuple, fast: tuple) -> Verdict:
    for name, r in (("reference", ref), ("fast", fast)):
        if r[0] == "exception":
            return Verdict("crash", f"the {name} engine raised {r[1]}")
    if ref[0] != fast[0]:
        return Verdict("disagreement", f"reference {_short(ref)}, fast {_short(fast)}")
    if ref[0] == "error":
        if ref[1] != fast[1]:
            return Verdict("disagreement", f"different errors: reference {_short(ref)}, fast {_short(fast)}")
        problem = error_problem(ref[1])
        return Verdict(*problem) if problem else Verdict("ok", "both engines: " + ref[1].splitlines()[0][:200])
    diff = outputs_differ(ref[1], fast[1]) or stats_differ(ref[2], fast[2])
    if diff:
        return Verdict("disagreement", diff)
    if ref[2]["sol_fraction"] > 1.0 + 1e-9:  # sol.* bound every correct program (sim/bounds.py)
        return Verdict("bound", f"a run beat its speed of light: sol_fraction {ref[2]['sol_fraction']:.6g}")
    return Verdict("ok", "both engines agree")


def _short(r: tuple) -> str:
    return "finished" if r[0] == "ok" else f"{r[0]} '{r[1].splitlines()[0][:150]}'"


def same_array(a: np.ndarray, b: np.ndarray) -> bool:
    """Bitwise equal, except that any NaN equals any NaN."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.size == 0:
        return True
    if a.dtype.kind in "fc" or a.dtype.name == "bfloat16":
        wide = a.astype(np.float64) if a.dtype.name == "bfloat16" else a
        other = b.astype(np.float64) if b.dtype.name == "bfloat16" else b
        nan = np.isnan(wide) & np.isnan(other)
        bits = a.reshape(-1).view(np.uint8).reshape(a.size, -1) == b.reshape(-1).view(np.uint8).reshape(b.size, -1)
        return bool(np.all(bits.all(axis=-1) | nan.reshape(-1)))
    return a.tobytes() == b.tobytes()


def _normal(data: bytes) -> object:
    """An output as compared: an .npz by its arrays (its zip headers hold the time); statistics without their host
    times, spaces collapsed (they align their columns to the widest value, host times included); else its bytes."""
    if data.startswith(b"PK"):
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    if not any(k.encode() in data for k in HOST_TIME):
        return data
    return [b" ".join(ln.split()) for ln in data.split(b"\n") if not any(k.encode() in ln for k in HOST_TIME)]


def same_output(a: bytes, b: bytes) -> bool:
    """Two written outputs alike (a file a tool wrote twice, through different kinds of path)."""
    try:
        x, y = _normal(a), _normal(b)
    except Exception:  # a truncated .npz: not alike
        return False
    if isinstance(x, dict) and isinstance(y, dict):
        return sorted(x) == sorted(y) and all(same_array(x[k], y[k]) for k in x)
    return x == y


def outputs_differ(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> str | None:
    if sorted(a) != sorted(b):
        return f"output names differ: reference {sorted(a)}, fast {sorted(b)}"
    for name in a:
        x, y = a[name], b[name]
        if not same_array(x, y):
            if x.dtype != y.dtype or x.shape != y.shape:
                return f"output '{name}' is {x.dtype}{list(x.shape)} on reference, {y.dtype}{list(y.shape)} on fast"
            xs, ys = x.reshape(-1), y.reshape(-1)
            k = next(i for i in range(xs.size) if not same_array(xs[i:i + 1], ys[i:i + 1]))
            return f"output '{name}' differs at flat index {k}: reference {xs[k]!r}, fast {ys[k]!r}"
    return None


def _same_number(x: float, y: float) -> bool:
    return x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))


def stats_differ(a: Stats, b: Stats) -> str | None:
    keys_a = [k for k in a if k not in HOST_TIME]
    keys_b = [k for k in b if k not in HOST_TIME]
    if keys_a != keys_b:
        extra = sorted(set(keys_a) ^ set(keys_b))
        return f"statistics differ in their names: {', '.join(extra[:3]) or 'order'}"
    for k in keys_a:
        if not _same_number(a[k], b[k]):
            return f"statistic {k}: reference {a[k]!r}, fast {b[k]!r}"
    return None


def describe(r: tuple) -> str:
    """An engine's result as report text."""
    if r[0] != "ok":
        return r[1] if r[0] == "error" else f"{r[0]}: {r[1]}"
    lines = ["finished"]
    for name, a in r[1].items():
        with np.printoptions(threshold=64, precision=9):
            lines.append(f"  output {name} {a.dtype}{list(a.shape)}: {np.array2string(a.reshape(-1))}")
    lines += [f"  {k} = {r[2][k]!r}" for k in r[2] if k not in HOST_TIME]
    return "\n".join(lines)
