"""Ember's console scripts run as a user's shell runs them: a process of their own, found by name, with a private
TMPDIR and compile cache, for the hostile cases that need a real process (a signal, a closed stdout, a pipe).

The fuzzer sits below the command layer (tests/test_layering.py), so it starts the installed scripts, never
imports them.  Tests replace `argv` to plant a misbehaving tool.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..ir.diagnostics import EmberError

# What a clean run leaves in TMPDIR too: onnxruntime writes its session id there whenever it is loaded.
TMP_NOISE = frozenset({".ses"})
TERMINAL = {"COLUMNS": "80", "LINES": "25"}  # rich sizes its tables by the terminal, which a worker may have
CACHE_ENTRY = re.compile(r"ember_[0-9a-f]{32}\.(so|sha256)")  # a compile cache entry (ember/sim/fast/build.py)


@contextlib.contextmanager
def environ(values: dict[str, str]) -> Iterator[None]:
    """This process's environment with `values` set, for a tool run in it."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def argv(prog: str) -> list[str]:
    """The command that starts the console script `prog`: the one beside this Python (a virtual environment's
    bin/), else the one on PATH."""
    here = Path(sys.executable).parent / prog
    found = str(here) if here.exists() else shutil.which(prog)
    if found is None:
        raise EmberError(f"'{prog}' is not installed: install Ember (pip install -e .) to fuzz its tools")
    return [found]


class Private:
    """A private TMPDIR and EMBER_CACHE_DIR for one process, and what it left in them."""

    def __init__(self, root: Path, cache: Path | None = None):
        self.tmp = root / "tmp"
        self.cache = cache or root / "cache"
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.cache.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.before = set(os.listdir(self.cache))  # a shared cache may hold entries (and older finds) already

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "EMBER_DEBUG"}  # errors worded, not re-raised
        env.update(TMPDIR=str(self.tmp), EMBER_CACHE_DIR=str(self.cache), **TERMINAL)
        return env

    def leftovers(self) -> list[str]:
        """Files a run left behind: anything in TMPDIR, anything in the cache but complete entries."""
        tmp = [f"$TMPDIR/{n}" for n in sorted(os.listdir(self.tmp)) if n not in TMP_NOISE]
        new = set(os.listdir(self.cache)) - self.before
        return tmp + [f"$EMBER_CACHE_DIR/{n}" for n in sorted(new) if not CACHE_ENTRY.fullmatch(n)]


def spawn(cmd: list[str], cwd: Path, env: dict[str, str], stderr: Path, stdout: int | None = subprocess.DEVNULL,
          close_stdout: bool = False) -> subprocess.Popen[bytes]:
    """Start `cmd` in a session of its own (so it can be signalled and killed with its compiler), with ^C
    handled as a shell's child handles it (the worker ignores ^C, and a child would inherit that)."""

    def child() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if close_stdout:
            os.close(1)

    with open(stderr, "wb") as err:
        return subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=err,
                                start_new_session=True, preexec_fn=child)


def finish(proc: subprocess.Popen[bytes], seconds: float) -> bool:
    """Wait for `proc`; past `seconds` kill its whole session and say it had to be killed."""
    try:
        proc.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        return False


def catches(pid: int, sig: int) -> bool | None:
    """Whether process `pid` has a handler for `sig` now (Linux /proc), None where unknown."""
    try:
        with open(f"/proc/{pid}/status") as f:
            mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    return bool(mask >> (sig - 1) & 1)


def new_files(directory: Path, before: Iterable[str]) -> list[str]:
    """Names in `directory` that were not there before."""
    return sorted(set(os.listdir(directory)) - set(before))


def shell(cmd: list[str]) -> str:
    """A command line for a saved case, with the script by its name."""
    return " ".join(shlex.quote(Path(a).name if i == 0 else a) for i, a in enumerate(cmd))
