"""Hostile use, closed or short pipes: a command that prints to stdout (ember-disasm, ember-asm -o -, ember-opt,
ember-sim --outputs - / --stats - / its table, ember-bench --json - / --csv - / its tables), run as a process
of its own with stdout closed, a pipe whose reader is gone, or a pipe (shrunk to a page) whose reader takes a
drawn number of bytes and closes it.

The command first runs in this process, its stdout captured, to learn what it prints (T bytes).  Then it may
exit 0 only when its output could all be delivered: to a reader that took it all, or into the reader's share
plus what the pipe holds; otherwise it must exit 1 with a one-line error.  Never a traceback.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import select
import time
from dataclasses import dataclass

from hypothesis import strategies as st

from . import scripts
from .cases import NEXT_PASS, installed_tool
from .material import Material
from .oracle import Stage, Verdict, judge_tool, run_tool, same_output

COMMANDS = ("disasm", "asm", "opt", "sim-outputs", "sim-stats", "sim-table", "bench-json", "bench-csv",
            "bench-table")
LOOSE = frozenset({"sim-stats", "bench-json", "bench-csv", "bench-table"})  # host times: lengths vary a little
SLACK = 512  # bytes a loose command's output may vary by between runs
MODES = ("closed", "gone", "short")
READS = ("none", "byte", "page", "half", "all-but-one", "all", "more")
PAGE = 4096
F_SETPIPE_SZ, F_GETPIPE_SZ = 1031, 1032  # Linux's fcntl numbers (fcntl names them from Python 3.10 on Linux)
TIMEOUT = 120.0  # seconds a command may take; the slowest (ember-bench) takes a few
BENCH = ["--suite", "tiny", "--only", "RM1_L0", "--variants", "O0"]


@dataclass(frozen=True)
class Pipe:
    command: str
    mode: str
    read: str  # how much a short reader takes
    unbuffered: bool  # PYTHONUNBUFFERED=1, as many containers set: stdout's binary layer is then unbuffered

    def describe(self) -> str:
        how = {"closed": "stdout closed", "gone": "a pipe whose reader is gone"}.get(
            self.mode, f"a pipe whose reader takes {self.read} and closes it")
        return f"{self.command} with {how}{', PYTHONUNBUFFERED=1' if self.unbuffered else ''}"


plans = st.builds(Pipe, st.sampled_from(COMMANDS), st.sampled_from(MODES), st.sampled_from(READS), st.booleans())


def bases(plan: Pipe, dae: list[str], eir: list[str]) -> list[str]:
    return eir if plan.command == "opt" else dae


def argv(plan: Pipe, mat: Material) -> tuple[str, list[str]]:
    """The program and its arguments."""
    c = plan.command
    if c == "disasm":
        return "ember-disasm", [mat.rel(mat.binary)]
    if c == "asm":
        return "ember-asm", [mat.rel(mat.source), "-o", "-"]
    if c == "opt":
        return "ember-opt", [f"--pass={NEXT_PASS.get(mat.source.name.split('.')[-2], 'codegen')}", mat.rel(mat.source)]
    if c.startswith("sim"):
        extra = {"sim-outputs": ["--outputs", "-", "-q"], "sim-stats": ["--stats", "-", "-q"], "sim-table": []}[c]
        return "ember-sim", [mat.rel(mat.binary), "--inputs", mat.rel(mat.inputs), "--max-cycles", "1e6", *extra]
    extra = {"bench-json": ["--json", "-", "-q"], "bench-csv": ["--csv", "-", "-q"], "bench-table": []}[c]
    return "ember-bench", [*BENCH, *extra]


def command(plan: Pipe, mat: Material, max_cycles: float) -> str:
    prog, args = argv(plan, mat)
    line = f"{'PYTHONUNBUFFERED=1 ' if plan.unbuffered else 'env -u PYTHONUNBUFFERED '}{prog} {' '.join(args)}"
    if plan.mode == "closed":
        return f"{line} >&-   (levels/ holds the files)"
    if plan.mode == "gone":
        return f"{line} | true   (the reader gone first; levels/ holds the files)"
    return f"{line} | head -c N   (N: {plan.read} of its output; a pipe of {PAGE} bytes; levels/ holds the files)"


def capture(prog: str, args: list[str], cwd: str) -> tuple[int, bytes, str]:
    """Run a command in this process, as its console script would, with its stdout's bytes kept."""
    out = io.BytesIO()
    text = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    with contextlib.chdir(cwd), scripts.environ(scripts.TERMINAL):
        status, err, _ = run_tool(installed_tool(prog), prog, args, text)  # an escape (-1): no reference here
    text.flush()
    return status, out.getvalue(), err


def _share(read: str, total: int) -> int:
    return {"none": 0, "byte": 1, "page": PAGE, "half": total // 2, "all-but-one": max(total - 1, 0),
            "all": total, "more": total + 1}[read]


def run(plan: Pipe, mat: Material, max_cycles: float, stage: Stage) -> Verdict:
    prog, args = argv(plan, mat)
    stage(f"{prog}, its stdout captured")
    status, expected, _ = capture(prog, args, str(mat.dir))
    if status != 0:
        return Verdict("ok", f"{prog} does not print this (status {status}): the other kinds' business")
    stage(f"{prog} with {plan.describe().split(' with ', 1)[1]}")
    private = scripts.Private(mat.dir / "private")
    env = private.env()
    env.pop("PYTHONUNBUFFERED", None)
    if plan.unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    err_path = mat.dir / "private" / "stderr"
    cmd = scripts.argv(prog) + args
    share, got, capacity = _share(plan.read, len(expected)), b"", 0
    if plan.mode == "closed":
        proc = scripts.spawn(cmd, mat.dir, env, err_path, stdout=None, close_stdout=True)
    else:
        r, w = os.pipe()
        with contextlib.suppress(OSError):
            fcntl.fcntl(w, F_SETPIPE_SZ, PAGE)
        capacity = fcntl.fcntl(w, F_GETPIPE_SZ)
        if plan.mode == "gone":
            os.close(r)
        try:
            proc = scripts.spawn(cmd, mat.dir, env, err_path, stdout=w)
        finally:
            os.close(w)
        if plan.mode == "short":
            got = _take(r, share, time.monotonic() + TIMEOUT)
            os.close(r)
    if not scripts.finish(proc, TIMEOUT):
        return Verdict("hang", f"{prog} with {plan.describe().split(' with ', 1)[1]} ran past {TIMEOUT:g} s")
    err = err_path.read_text(errors="replace")
    found = _judge(plan, prog, proc.returncode, err, expected, got, share, capacity)
    if found is not None:
        found.report = err
        return found
    return Verdict("rejected" if proc.returncode else "ok", err.splitlines()[0][:200] if err else "delivered")


def _take(fd: int, n: int, deadline: float) -> bytes:
    """Up to `n` bytes from the pipe, or fewer at its end or the deadline."""
    got = bytearray()
    while len(got) < n and time.monotonic() < deadline:
        if not select.select([fd], [], [], 0.5)[0]:
            continue
        chunk = os.read(fd, min(1 << 16, n - len(got)))
        if not chunk:
            break
        got += chunk
    return bytes(got)


def _judge(plan: Pipe, prog: str, status: int, err: str, expected: bytes, got: bytes, share: int, capacity: int
           ) -> Verdict | None:
    problem = judge_tool(prog, status, err, None)
    if problem is not None:
        return Verdict(*problem)
    total = len(expected)
    slack = SLACK if plan.command in LOOSE else 0
    if plan.mode != "short":
        if status == 0 and total > 0:
            where = "stdout closed" if plan.mode == "closed" else "its reader gone"
            return Verdict("crash", f"{prog} exited 0 with {where}: its {total} bytes were lost")
        return None
    if share >= total + slack:  # the reader took all there was
        whole = len(got) == total if not slack else abs(len(got) - total) <= slack
        if status != 0 or not whole or (not slack and not same_output(got, expected)):
            return Verdict("crash", f"{prog} delivered {len(got)} of {total} bytes to a reader that took all, "
                                    f"with status {status}")
        return None
    if status == 0 and total > share + capacity + slack:
        return Verdict("crash", f"{prog} exited 0 although its reader took {share} of {total} bytes and the pipe "
                                f"holds {capacity}: the rest was lost")
    return None
