"""A forked worker process that runs cases, so that a hang or a crash of the code under test is a finding.

The parent sends one case at a time and waits for its verdict.  A case hangs when its worker has spent
`timeout` seconds of CPU time on it (its own, and that of the compilers it waited for), or ten times
`timeout` of wall-clock time whatever it spent: a wall-clock limit alone reported busy machines' slow
cases as hangs.  The worker reports each stage before it starts it (the assembler, the reference engine,
the fast engine, a tool), so a hang is reported as a hang of that stage, and the worker is killed and
replaced.  A worker that dies (a segfault in compiled code, the memory cap) is a crash.  Forking keeps
whatever the parent set up, so a test can plant a bug in an engine before the campaign starts.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import resource
import signal
import tempfile
import time
import warnings
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from .cases import run_case
from .hostile import Hostile, run_hostile
from .oracle import Verdict

MEMORY_CAP = 8 << 30  # address space of a worker: a runaway allocation fails instead of exhausting the machine
WALL_FACTOR = 10  # a case that spends little CPU time (blocked, or starved) hangs after this many timeouts


def cpu_seconds(pid: int) -> float | None:
    """CPU time of a process and of its children it has waited for (Linux /proc), or None where unknown:
    then the timeout is wall-clock time, as it was."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime, stime, cutime, cstime
    except (OSError, ValueError, IndexError):
        return None


def _serve(conn: Connection, max_cycles: float) -> None:
    faulthandler.disable()  # a crash is reported by the parent, in one line
    warnings.simplefilter("ignore")  # numpy's overflow warnings are expected: edge values are the point
    os.environ.pop("EMBER_DEBUG", None)  # the tools must word their errors, not re-raise them
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles ^C
    try:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    except (ValueError, OSError):
        pass
    with tempfile.TemporaryDirectory(prefix="ember-fuzz-") as tmp:
        while True:
            try:
                case = conn.recv()
            except EOFError:
                return
            if case is None:
                return
            try:
                run = run_hostile if isinstance(case, Hostile) else run_case
                verdict = run(case, max_cycles, lambda what: conn.send(("stage", what)), Path(tmp))
            except MemoryError:
                verdict = Verdict("crash", "MemoryError escaped (the worker's memory cap)")
            except Exception as e:  # a bug in the fuzzer itself must not look like a finding in Ember
                verdict = Verdict("fuzzer-error", f"{type(e).__name__}: {e}"[:300])
            conn.send(("done", verdict))


class Worker:
    """One worker process and the pipe to it; restarted after a hang or a crash."""

    def __init__(self, max_cycles: float, timeout: float):
        self.max_cycles = max_cycles
        self.timeout = timeout
        self.proc: Any = None
        self.conn: Connection | None = None

    def start(self) -> None:
        ctx = multiprocessing.get_context("fork")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, self.max_cycles), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.is_alive():
            try:
                assert self.conn is not None
                self.conn.send(None)
            except OSError:
                pass
            self.proc.join(2)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join()
        self.proc = None
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def run(self, case: object) -> Verdict:
        if self.proc is None or not self.proc.is_alive():
            self.start()
        assert self.conn is not None
        self.conn.send(case)
        stage = "the case"
        start, cpu0 = time.monotonic(), cpu_seconds(self.proc.pid)
        deadline = start + self.timeout
        while True:
            left = deadline - time.monotonic()
            try:
                ready = left > 0 and self.conn.poll(left)
            except OSError:
                ready = True
            if not ready:
                now_cpu = cpu_seconds(self.proc.pid)
                used = self.timeout if now_cpu is None or cpu0 is None else now_cpu - cpu0
                if used < self.timeout and time.monotonic() < start + WALL_FACTOR * self.timeout:
                    deadline = time.monotonic() + self.timeout - used  # starved by other processes: wait on
                    continue
                self.proc.kill()
                self.proc.join()
                self.stop()
                return Verdict("hang", f"{stage} ran past the {self.timeout:g} s timeout")
            try:
                kind, value = self.conn.recv()
            except (EOFError, OSError):
                self.proc.join()
                code = self.proc.exitcode
                self.stop()
                how = f"signal {-code} ({signal.Signals(-code).name})" if code and code < 0 else f"status {code}"
                return Verdict("crash", f"the worker died in {stage} with {how}")
            if kind == "stage":
                stage = value
            else:
                return value
